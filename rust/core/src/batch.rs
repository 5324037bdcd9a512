//! Batch planning for autoscalers: one row per scenario, every input a column
//! (an array, or a scalar broadcast to every row), a status per row instead
//! of an error. Row for row the result equals the scalar API (INV-7).

use crate::configurator::{ConfiguratorKind, MemoryPoolConfig, PoolConfigurator};
use crate::dtype::KvDtype;
use crate::error::{PlanError, Result};
use crate::geometry::AttentionShape;
use crate::serving::{DisaggregationMode, ServingConfig};
use crate::spec::{SpecAlgorithm, SpeculativeConfig};

/// Status of a successful row; failed rows carry [`crate::ErrorCode::status`].
pub const STATUS_OK: u8 = 0;

/// Speculative algorithms by batch code (the index in this array).
pub const ALGORITHMS: [SpecAlgorithm; 7] = SpecAlgorithm::ALL;

/// Disaggregation modes by batch code.
pub const DISAGGREGATION_MODES: [DisaggregationMode; 3] = [
    DisaggregationMode::Null,
    DisaggregationMode::Prefill,
    DisaggregationMode::Decode,
];

/// A column: one value for every row, or one value per row.
#[derive(Debug, Clone, Copy)]
pub enum Column<'a, T: Copy> {
    /// Broadcast to every row.
    Scalar(T),
    /// One value per row.
    Array(&'a [T]),
}

impl<T: Copy> Column<'_, T> {
    /// The value of row `i`.
    #[inline]
    pub fn get(&self, i: usize) -> T {
        match self {
            Self::Scalar(v) => *v,
            Self::Array(a) => a[i],
        }
    }

    fn len(&self) -> Option<usize> {
        match self {
            Self::Scalar(_) => None,
            Self::Array(a) => Some(a.len()),
        }
    }
}

/// Every input of the scalar API as a column. Integers are i64: a negative
/// value where the scalar API takes `None` means `None` (`sliding_window_size`,
/// `v_head_dim`, ..., `max_running_requests`, `num_steps`, ...); elsewhere a
/// negative value is invalid, as in the scalar API. Layer counts replace layer
/// id lists (sizing needs only counts).
#[derive(Debug, Clone, Copy)]
pub struct BatchInputs<'a> {
    /// Available bytes on this rank.
    pub available_bytes: Column<'a, i64>,
    /// `n_f`.
    pub num_full_layers: Column<'a, i64>,
    /// `n_s`.
    pub num_swa_layers: Column<'a, i64>,
    /// Total KV heads of a full layer.
    pub num_kv_heads: Column<'a, i64>,
    /// K head dim, elements.
    pub head_dim: Column<'a, i64>,
    /// V head dim, elements (negative: `None`).
    pub v_head_dim: Column<'a, i64>,
    /// SWA KV heads (negative: `None`).
    pub swa_num_kv_heads: Column<'a, i64>,
    /// SWA K head dim (negative: `None`).
    pub swa_head_dim: Column<'a, i64>,
    /// SWA V head dim (negative: `None`).
    pub swa_v_head_dim: Column<'a, i64>,
    /// Sliding window, tokens (negative: `None`).
    pub sliding_window_size: Column<'a, i64>,
    /// MLA latent rank (negative: not MLA).
    pub kv_lora_rank: Column<'a, i64>,
    /// MLA rope dim (negative: `None`).
    pub qk_rope_head_dim: Column<'a, i64>,
    /// KV dtype, an index into [`KvDtype::ALL`].
    pub kv_cache_dtype: Column<'a, u8>,
    /// Page size, tokens.
    pub page_size: Column<'a, i64>,
    /// Attention TP size.
    pub tp_size: Column<'a, i64>,
    /// DCP size.
    pub dcp_size: Column<'a, i64>,
    /// Attention DP size.
    pub attn_dp_size: Column<'a, i64>,
    /// SWA tokens per full token.
    pub swa_full_tokens_ratio: Column<'a, f64>,
    /// Negative: `None`.
    pub max_running_requests: Column<'a, i64>,
    /// Negative: `None`.
    pub chunked_prefill_size: Column<'a, i64>,
    /// Radix cache disabled.
    pub disable_radix_cache: Column<'a, bool>,
    /// Overlap scheduler disabled.
    pub disable_overlap_schedule: Column<'a, bool>,
    /// An index into [`DISAGGREGATION_MODES`].
    pub disaggregation_mode: Column<'a, u8>,
    /// Extra PD-decode slots.
    pub disaggregation_decode_extra_slots: Column<'a, i64>,
    /// `E`, tokens.
    pub swa_eviction_interval: Column<'a, i64>,
    /// Price SWA layers as full layers.
    pub disable_hybrid_swa_memory: Column<'a, bool>,
    /// Draft worker.
    pub is_draft_worker: Column<'a, bool>,
    /// An index into [`ALGORITHMS`].
    pub algorithm: Column<'a, u8>,
    /// `d`.
    pub draft_num_layers: Column<'a, i64>,
    /// Negative: `None`.
    pub num_steps: Column<'a, i64>,
    /// Negative: `None`.
    pub eagle_topk: Column<'a, i64>,
    /// Negative: `None`.
    pub num_draft_tokens: Column<'a, i64>,
    /// `d_sf`.
    pub banded_draft_layers: Column<'a, i64>,
    /// DFLASH bytes per token (negative: `None`).
    pub dflash_draft_cell_size_per_token: Column<'a, i64>,
}

/// Output arrays, one entry per row. `-1` stands for `None` in the full and
/// SWA columns of a successful row; failed rows hold 0 and a nonzero status.
#[derive(Debug)]
pub struct BatchOutputs<'a> {
    /// `max_total_num_tokens`, tokens.
    pub max_total_num_tokens: &'a mut [i64],
    /// `full_max_total_num_tokens`, tokens (-1: None).
    pub full_max_total_num_tokens: &'a mut [i64],
    /// `swa_max_total_num_tokens`, tokens (-1: None).
    pub swa_max_total_num_tokens: &'a mut [i64],
    /// 0 for success, else the [`crate::ErrorCode`] status.
    pub status: &'a mut [u8],
}

impl BatchOutputs<'_> {
    /// Every output array must have `n` rows.
    fn check_rows(&self, n: usize) -> Result<()> {
        let lens = [
            self.max_total_num_tokens.len(),
            self.full_max_total_num_tokens.len(),
            self.swa_max_total_num_tokens.len(),
            self.status.len(),
        ];
        if lens.iter().any(|l| *l != n) {
            return Err(PlanError::invalid(format!(
                "batch outputs must have {n} rows, got {lens:?}"
            )));
        }
        Ok(())
    }
}

fn count(name: &str, v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| PlanError::invalid(format!("{name} must be >= 0, got {v}")))
}

fn opt(name: &str, v: i64, none_if_negative: bool) -> Result<Option<u64>> {
    if v < 0 && none_if_negative {
        Ok(None)
    } else {
        count(name, v).map(Some)
    }
}

fn code<T: Copy>(name: &str, table: &[T], c: u8) -> Result<T> {
    table
        .get(usize::from(c))
        .copied()
        .ok_or_else(|| PlanError::invalid(format!("{name}: unknown code {c}")))
}

impl BatchInputs<'_> {
    /// The number of rows: the common length of the array columns (1 if all are scalars).
    pub fn rows(&self) -> Result<usize> {
        let mut n: Option<usize> = None;
        let lens = [
            self.available_bytes.len(),
            self.num_full_layers.len(),
            self.num_swa_layers.len(),
            self.num_kv_heads.len(),
            self.head_dim.len(),
            self.v_head_dim.len(),
            self.swa_num_kv_heads.len(),
            self.swa_head_dim.len(),
            self.swa_v_head_dim.len(),
            self.sliding_window_size.len(),
            self.kv_lora_rank.len(),
            self.qk_rope_head_dim.len(),
            self.kv_cache_dtype.len(),
            self.page_size.len(),
            self.tp_size.len(),
            self.dcp_size.len(),
            self.attn_dp_size.len(),
            self.swa_full_tokens_ratio.len(),
            self.max_running_requests.len(),
            self.chunked_prefill_size.len(),
            self.disable_radix_cache.len(),
            self.disable_overlap_schedule.len(),
            self.disaggregation_mode.len(),
            self.disaggregation_decode_extra_slots.len(),
            self.swa_eviction_interval.len(),
            self.disable_hybrid_swa_memory.len(),
            self.is_draft_worker.len(),
            self.algorithm.len(),
            self.draft_num_layers.len(),
            self.num_steps.len(),
            self.eagle_topk.len(),
            self.num_draft_tokens.len(),
            self.banded_draft_layers.len(),
            self.dflash_draft_cell_size_per_token.len(),
        ];
        for l in lens.into_iter().flatten() {
            match n {
                None => n = Some(l),
                Some(m) if m != l => {
                    return Err(PlanError::invalid(format!(
                        "batch columns have different lengths ({m} and {l})"
                    )))
                }
                _ => {}
            }
        }
        Ok(n.unwrap_or(1))
    }

    /// True when only `available_bytes` may vary: one configurator serves every row.
    fn config_is_scalar(&self) -> bool {
        let mut probe = *self;
        probe.available_bytes = Column::Scalar(0);
        // 1 both when every other column is a scalar and when they are length-1 arrays.
        probe.rows().is_ok_and(|n| n == 1)
    }

    /// The configurator of row `i`, exactly as the scalar API would build it.
    pub fn configurator(&self, i: usize) -> Result<PoolConfigurator> {
        // Checked once, with the rest, when the configurator is built.
        let shape = AttentionShape::with_defaults(
            count("num_full_layers", self.num_full_layers.get(i))?,
            count("num_swa_layers", self.num_swa_layers.get(i))?,
            count("num_kv_heads", self.num_kv_heads.get(i))?,
            count("head_dim", self.head_dim.get(i))?,
            opt("v_head_dim", self.v_head_dim.get(i), true)?,
            opt("swa_num_kv_heads", self.swa_num_kv_heads.get(i), true)?,
            opt("swa_head_dim", self.swa_head_dim.get(i), true)?,
            opt("swa_v_head_dim", self.swa_v_head_dim.get(i), true)?,
            opt("sliding_window_size", self.sliding_window_size.get(i), true)?,
            opt("kv_lora_rank", self.kv_lora_rank.get(i), true)?,
            opt("qk_rope_head_dim", self.qk_rope_head_dim.get(i), true)?,
        )?;
        let serving = ServingConfig {
            kv_cache_dtype: code("kv_cache_dtype", &KvDtype::ALL, self.kv_cache_dtype.get(i))?,
            page_size: count("page_size", self.page_size.get(i))?,
            tp_size: count("tp_size", self.tp_size.get(i))?,
            dcp_size: count("dcp_size", self.dcp_size.get(i))?,
            attn_dp_size: count("attn_dp_size", self.attn_dp_size.get(i))?,
            swa_full_tokens_ratio: self.swa_full_tokens_ratio.get(i),
            max_running_requests: opt(
                "max_running_requests",
                self.max_running_requests.get(i),
                true,
            )?,
            chunked_prefill_size: opt(
                "chunked_prefill_size",
                self.chunked_prefill_size.get(i),
                true,
            )?,
            disable_radix_cache: self.disable_radix_cache.get(i),
            disable_overlap_schedule: self.disable_overlap_schedule.get(i),
            disaggregation_mode: code(
                "disaggregation_mode",
                &DISAGGREGATION_MODES,
                self.disaggregation_mode.get(i),
            )?,
            disaggregation_decode_extra_slots: count(
                "disaggregation_decode_extra_slots",
                self.disaggregation_decode_extra_slots.get(i),
            )?,
            swa_eviction_interval: self.swa_eviction_interval.get(i),
            disable_hybrid_swa_memory: self.disable_hybrid_swa_memory.get(i),
            is_draft_worker: self.is_draft_worker.get(i),
        };
        // Checked once, with the shape and serving config, when the configurator is built.
        let spec = SpeculativeConfig {
            algorithm: code("algorithm", &ALGORITHMS, self.algorithm.get(i))?,
            draft_num_layers: count("draft_num_layers", self.draft_num_layers.get(i))?,
            num_steps: opt("num_steps", self.num_steps.get(i), true)?,
            eagle_topk: opt("eagle_topk", self.eagle_topk.get(i), true)?,
            num_draft_tokens: opt("num_draft_tokens", self.num_draft_tokens.get(i), true)?,
            banded_draft_layers: count("banded_draft_layers", self.banded_draft_layers.get(i))?,
            dflash_draft_cell_size_per_token: opt(
                "dflash_draft_cell_size_per_token",
                self.dflash_draft_cell_size_per_token.get(i),
                true,
            )?,
            draft: None,
        };
        PoolConfigurator::from_shape(None::<ConfiguratorKind>, shape, serving, spec)
    }
}

#[inline]
fn write(out: &mut BatchOutputs<'_>, i: usize, r: Result<MemoryPoolConfig>) {
    match r {
        Ok(c) => {
            out.max_total_num_tokens[i] = c.max_total_num_tokens;
            out.full_max_total_num_tokens[i] = c.full_max_total_num_tokens.unwrap_or(-1);
            out.swa_max_total_num_tokens[i] = c.swa_max_total_num_tokens.unwrap_or(-1);
            out.status[i] = STATUS_OK;
        }
        Err(e) => {
            out.max_total_num_tokens[i] = 0;
            out.full_max_total_num_tokens[i] = 0;
            out.swa_max_total_num_tokens[i] = 0;
            out.status[i] = e.code.status();
        }
    }
}

/// Plans every row from bytes (`calculate_pool_sizes` with the serving page
/// size). Fails only when column and output lengths disagree; row errors go
/// to `out.status`.
pub fn plan_many(inputs: &BatchInputs<'_>, out: &mut BatchOutputs<'_>) -> Result<()> {
    let n = inputs.rows()?;
    out.check_rows(n)?;
    if inputs.config_is_scalar() {
        let cfg = inputs.configurator(0);
        for i in 0..n {
            let r = cfg
                .as_ref()
                .map_err(Clone::clone)
                .and_then(|c| c.calculate_pool_sizes(inputs.available_bytes.get(i), None));
            write(out, i, r);
        }
    } else {
        for i in 0..n {
            let r = inputs
                .configurator(i)
                .and_then(|c| c.calculate_pool_sizes(inputs.available_bytes.get(i), None));
            write(out, i, r);
        }
    }
    Ok(())
}

impl PoolConfigurator {
    /// `calculate_pool_sizes` for many budgets at once (one setup), into `out`.
    pub fn calculate_pool_sizes_many(
        &self,
        available_bytes: &[i64],
        out: &mut BatchOutputs<'_>,
    ) -> Result<()> {
        let n = available_bytes.len();
        out.check_rows(n)?;
        for (i, a) in available_bytes.iter().enumerate() {
            write(out, i, self.calculate_pool_sizes(*a, None));
        }
        Ok(())
    }
}
