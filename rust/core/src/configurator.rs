//! SGLang-compatible pool configurators (REFERENCE 2.2 to 2.5): the cell
//! size, the factory, and both solve paths (from bytes, from max tokens).

use crate::arith::{add, align_down, align_up, mul, narrow, py_float_floordiv, py_int, to_i64};
use crate::cell::{default_cell_size, layer_bytes_per_token, swa_kv_heads_per_rank};
use crate::chunk_cap::{chunk_cap_inapplicable_reason, swa_chunk_cap};
use crate::dtype::KvDtype;
use crate::error::{PlanError, Result};
use crate::geometry::{AttentionShape, ModelGeometry};
use crate::serving::ServingConfig;
use crate::spec::SpeculativeConfig;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Which SGLang configurator applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfiguratorKind {
    /// `DefaultPoolConfigurator`: one pool, every layer at full geometry.
    Default,
    /// `HybridSWAPoolConfigurator`: full and SWA pools split by the ratio.
    HybridSwa,
    /// `SWAChunkCapPoolConfigurator`: SWA pool sized from a per-request cap.
    ChunkCap,
}

impl ConfiguratorKind {
    /// The snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::HybridSwa => "hybrid_swa",
            Self::ChunkCap => "chunk_cap",
        }
    }

    /// SGLang's class name.
    pub const fn class_name(self) -> &'static str {
        match self {
            Self::Default => "DefaultPoolConfigurator",
            Self::HybridSwa => "HybridSWAPoolConfigurator",
            Self::ChunkCap => "SWAChunkCapPoolConfigurator",
        }
    }
}

impl std::str::FromStr for ConfiguratorKind {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "default" => Ok(Self::Default),
            "hybrid_swa" => Ok(Self::HybridSwa),
            "chunk_cap" => Ok(Self::ChunkCap),
            _ => Err(PlanError::invalid(format!(
                "configurator kind: expected default, hybrid_swa or chunk_cap, got {s:?}"
            ))),
        }
    }
}

/// SGLang's coefficient: bytes per token of `max_total_num_tokens`; a double
/// where the SWA ratio enters (hybrid with full layers), else an integer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CellSize {
    /// Integer bytes per token.
    Int(u64),
    /// Bytes per token as SGLang's double.
    Float(f64),
}

/// The pool sizes SGLang resolves, in tokens (`None` where SGLang leaves them unset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MemoryPoolConfig {
    /// Tokens of `max_total_num_tokens` (full pool, or SWA pool for an all-SWA model).
    pub max_total_num_tokens: i64,
    /// Full-pool tokens (SWA configurators only).
    pub full_max_total_num_tokens: Option<i64>,
    /// SWA-pool tokens (SWA configurators only).
    pub swa_max_total_num_tokens: Option<i64>,
}

/// A configured planner: SGLang's configurator for one model, serving setup
/// and speculative config.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfigurator {
    kind: ConfiguratorKind,
    /// Counts and dims: all the arithmetic needs.
    shape: AttentionShape,
    /// The layer ids, for the exact plan; `None` when built from a shape alone
    /// (ids are then `0..n_f` for full layers and `n_f..n_f+n_s` for SWA layers).
    layer_ids: Option<Arc<(Vec<u64>, Vec<u64>)>>,
    serving: ServingConfig,
    spec: SpeculativeConfig,
    cell_size: CellSize,
    /// `F`, bytes per token of one full layer (SWA kinds), bytes.
    full_per_token: u64,
    /// `S`, bytes per token of one SWA layer (SWA kinds), bytes.
    swa_per_token: u64,
    /// `d_f`.
    draft_full_layers: u64,
    /// `d_sf`.
    draft_swa_layers: u64,
    /// `d_c`, bytes per token.
    draft_cell: u64,
    /// ChunkCap's SWA cap before alignment, tokens.
    swa_cap: Option<u64>,
}

/// The configurator SGLang's factory picks (REFERENCE 2.5).
pub fn select_kind(model: &AttentionShape, serving: &ServingConfig) -> ConfiguratorKind {
    if model.num_swa_layers() > 0 && !serving.disable_hybrid_swa_memory {
        if chunk_cap_inapplicable_reason(
            serving,
            model.sliding_window_size,
            model.num_full_layers(),
        )
        .is_none()
        {
            ConfiguratorKind::ChunkCap
        } else {
            ConfiguratorKind::HybridSwa
        }
    } else {
        ConfiguratorKind::Default
    }
}

impl PoolConfigurator {
    /// SGLang's `create_pool_configurator`: picks the kind, then builds it.
    pub fn create(
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        let kind = select_kind(&model.shape(), &serving);
        Self::new(kind, model, serving, spec)
    }

    /// Builds from counts and dims alone (no layer ids): the batch API's path.
    /// `kind: None` picks SGLang's factory choice.
    pub fn from_shape(
        kind: Option<ConfiguratorKind>,
        shape: AttentionShape,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        let kind = kind.unwrap_or_else(|| select_kind(&shape, &serving));
        Self::build(kind, shape, None, serving, spec)
    }

    /// Builds a configurator of the given kind, validating that it applies.
    pub fn new(
        kind: ConfiguratorKind,
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        model.validate()?; // layer ids; build checks counts, dims, serving and spec
        let shape = model.shape();
        let ids = Arc::new((
            model.full_attention_layer_ids,
            model.swa_attention_layer_ids,
        ));
        Self::build(kind, shape, Some(ids), serving, spec)
    }

    fn build(
        kind: ConfiguratorKind,
        shape: AttentionShape,
        layer_ids: Option<Arc<(Vec<u64>, Vec<u64>)>>,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        // Inputs may have been built field by field (pub fields, serde): check them all here.
        shape.validate()?;
        serving.validate()?;
        spec.validate()?;
        let worker_is_draft = serving.is_draft_worker;
        let draft_cell = spec.dflash_cell(worker_is_draft, serving.dcp_size)?;
        let (d_f, d_sf) = spec.counted_draft_layers(worker_is_draft);
        let mut this = Self {
            kind,
            shape,
            layer_ids,
            serving,
            spec,
            cell_size: CellSize::Int(0),
            full_per_token: 0,
            swa_per_token: 0,
            draft_full_layers: d_f,
            draft_swa_layers: d_sf,
            draft_cell,
            swa_cap: None,
        };
        match kind {
            ConfiguratorKind::Default => {
                this.cell_size =
                    CellSize::Int(default_cell_size(&this.shape, &this.serving, &this.spec)?);
            }
            ConfiguratorKind::HybridSwa | ConfiguratorKind::ChunkCap => this.init_swa()?,
        }
        Ok(this)
    }

    fn init_swa(&mut self) -> Result<()> {
        let name = self.kind.class_name();
        let m = &self.shape;
        let s = &self.serving;
        if m.num_swa_layers() == 0 {
            return Err(PlanError::invalid(format!(
                "{name} needs at least one SWA layer; swa_attention_layer_ids is empty"
            )));
        }
        if m.mla.is_some() {
            return Err(PlanError::invalid(format!(
                "{name} does not support MLA models"
            )));
        }
        if s.kv_cache_dtype == KvDtype::Fp4E2m1 {
            return Err(PlanError::invalid(format!(
                "kv_cache_dtype fp4_e2m1 is supported by DefaultPoolConfigurator only, not {name}"
            )));
        }
        self.full_per_token = layer_bytes_per_token(
            swa_kv_heads_per_rank(m.num_kv_heads, s.tp_size),
            m.head_dim,
            m.v_head_dim,
            s.kv_cache_dtype,
        )?;
        self.swa_per_token = layer_bytes_per_token(
            swa_kv_heads_per_rank(m.swa_num_kv_heads, s.tp_size),
            m.swa_head_dim,
            m.swa_v_head_dim,
            s.kv_cache_dtype,
        )?;
        let (f, sw) = (self.full_per_token, self.swa_per_token);
        let (n_f, n_s) = (m.num_full_layers(), m.num_swa_layers());
        let (d_f, d_sf, d_c) = (
            self.draft_full_layers,
            self.draft_swa_layers,
            self.draft_cell,
        );
        let what = "SWA cell size";
        let draft_swa = mul(sw, d_sf, what)?;
        self.cell_size = if n_f == 0 {
            let c = add(
                add(
                    add(mul(sw, n_s, what)?, mul(f, d_f, what)?, what)?,
                    draft_swa,
                    what,
                )?,
                d_c,
                what,
            )?;
            CellSize::Int(c)
        } else {
            let ints = add(mul(f, add(n_f, d_f, what)?, what)?, draft_swa, what)?;
            let r = s.swa_full_tokens_ratio;
            CellSize::Float((ints as f64 + r * (sw as f64) * (n_s as f64)) + d_c as f64)
        };
        if self.kind == ConfiguratorKind::ChunkCap {
            if let Some(reason) = chunk_cap_inapplicable_reason(s, m.sliding_window_size, n_f) {
                return Err(PlanError::invalid(format!(
                    "SWAChunkCapPoolConfigurator does not apply: {reason}"
                )));
            }
            let window = m.sliding_window_size.unwrap_or_default();
            self.swa_cap = Some(swa_chunk_cap(s, &self.spec, window)?);
        }
        Ok(())
    }

    /// The same configurator kind, layer ids and spec with another serving config.
    pub fn with_serving(&self, serving: ServingConfig) -> Result<Self> {
        Self::build(
            self.kind,
            self.shape,
            self.layer_ids.clone(),
            serving,
            self.spec,
        )
    }

    /// The configurator kind.
    pub fn kind(&self) -> ConfiguratorKind {
        self.kind
    }
    /// The target's counts and dims.
    pub fn shape(&self) -> &AttentionShape {
        &self.shape
    }
    /// The target geometry (layer ids synthesized as `0..n_f`, `n_f..n_f+n_s`
    /// when built from a shape alone).
    pub fn model(&self) -> ModelGeometry {
        let (full, swa) = self.layer_ids();
        let m = &self.shape;
        ModelGeometry {
            full_attention_layer_ids: full,
            swa_attention_layer_ids: swa,
            num_kv_heads: m.num_kv_heads,
            head_dim: m.head_dim,
            v_head_dim: m.v_head_dim,
            swa_num_kv_heads: m.swa_num_kv_heads,
            swa_head_dim: m.swa_head_dim,
            swa_v_head_dim: m.swa_v_head_dim,
            sliding_window_size: m.sliding_window_size,
            mla: m.mla,
        }
    }
    /// `(full_ids, swa_ids)`.
    pub fn layer_ids(&self) -> (Vec<u64>, Vec<u64>) {
        if let Some(ids) = &self.layer_ids {
            (ids.0.clone(), ids.1.clone())
        } else {
            let n_f = self.shape.n_full;
            ((0..n_f).collect(), (n_f..n_f + self.shape.n_swa).collect())
        }
    }
    /// The serving config.
    pub fn serving(&self) -> &ServingConfig {
        &self.serving
    }
    /// The speculative config.
    pub fn spec(&self) -> &SpeculativeConfig {
        &self.spec
    }
    /// SGLang's coefficient `C`, bytes per token of `max_total_num_tokens`.
    pub fn cell_size(&self) -> CellSize {
        self.cell_size
    }
    /// `F`, bytes per token of one full layer on this rank (SWA kinds; 0 for Default).
    pub fn full_per_token(&self) -> u64 {
        self.full_per_token
    }
    /// `S`, bytes per token of one SWA layer on this rank (SWA kinds; 0 for Default).
    pub fn swa_per_token(&self) -> u64 {
        self.swa_per_token
    }
    /// `(d_f, d_sf, d_c)`: counted draft layers at full and SWA geometry, DFLASH bytes per token.
    pub fn draft_terms(&self) -> (u64, u64, u64) {
        (
            self.draft_full_layers,
            self.draft_swa_layers,
            self.draft_cell,
        )
    }
    /// ChunkCap's SWA token cap before page alignment, tokens.
    pub fn swa_cap(&self) -> Option<u64> {
        self.swa_cap
    }
    /// True for an SWA kind whose model has no full-attention layer.
    pub fn is_all_swa(&self) -> bool {
        self.kind != ConfiguratorKind::Default && self.shape.num_full_layers() == 0
    }

    /// The page size to solve with: the argument, or the serving page size.
    pub fn resolve_page_size(&self, page_size: Option<u64>) -> Result<i64> {
        let p = page_size.unwrap_or(self.serving.page_size);
        if p == 0 {
            return Err(PlanError::invalid("page_size must be >= 1, got 0"));
        }
        to_i64(p, "page_size")
    }

    /// ChunkCap's SWA pool: the cap rounded up to a page of `p` tokens, tokens.
    pub fn chunk_cap_swa_tokens(&self, p: i64) -> Result<i64> {
        let swa = align_up(
            self.swa_cap.unwrap_or_default(),
            p as u64,
            "ChunkCap SWA tokens",
        )?;
        to_i64(swa, "ChunkCap SWA tokens")
    }

    /// ChunkCap's full-pool bytes per token `F*(n_f+d_f) + S*d_sf + d_c`.
    fn chunk_cap_full_cell(&self) -> Result<u64> {
        let what = "ChunkCap full cell size";
        let ints = add(
            mul(
                self.full_per_token,
                add(self.shape.num_full_layers(), self.draft_full_layers, what)?,
                what,
            )?,
            mul(self.swa_per_token, self.draft_swa_layers, what)?,
            what,
        )?;
        add(ints, self.draft_cell, what)
    }

    /// HybridSWA's split of a token count into pools (SGLang's `_solve_pool_sizes`).
    fn solve_hybrid(&self, max_total: i64, p: i64) -> Result<MemoryPoolConfig> {
        if self.shape.num_full_layers() == 0 {
            let swa = align_down(max_total, p)?;
            if swa <= 0 {
                return Err(not_enough(swa));
            }
            return Ok(MemoryPoolConfig {
                max_total_num_tokens: swa,
                full_max_total_num_tokens: Some(0),
                swa_max_total_num_tokens: Some(swa),
            });
        }
        let full = align_down(max_total, p)?;
        let swa = align_down(self.ratio_tokens(full)?, p)?;
        self.check_admission_floor(swa)?;
        if full <= 0 {
            return Err(not_enough(full));
        }
        Ok(MemoryPoolConfig {
            max_total_num_tokens: full,
            full_max_total_num_tokens: Some(full),
            swa_max_total_num_tokens: Some(swa),
        })
    }

    /// `int(full * r)`, truncated toward zero as CPython does.
    pub(crate) fn ratio_tokens(&self, full: i64) -> Result<i64> {
        py_int(
            full as f64 * self.serving.swa_full_tokens_ratio,
            "SWA tokens (full * ratio)",
        )
    }

    /// The admission floor: with a window W, the SWA pool must exceed `W + page_size` tokens.
    /// `Err(SwaPoolTooSmall)` when `swa` tokens do not.
    pub fn check_admission_floor(&self, swa: i64) -> Result<()> {
        if let Some(w) = self.shape.sliding_window_size {
            let floor = i128::from(w) + i128::from(self.serving.page_size);
            if floor >= i128::from(swa) {
                return Err(PlanError::swa_too_small(format!(
                    "SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is \
                     sliding_window_size ({w}) + page_size ({}). Increase swa_full_tokens_ratio \
                     (now {}) or the total KV budget.",
                    self.serving.page_size, self.serving.swa_full_tokens_ratio
                )));
            }
        }
        Ok(())
    }

    /// The profiling path: pool sizes from available bytes on this rank.
    pub fn calculate_pool_sizes(
        &self,
        available_bytes: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        let p = self.resolve_page_size(page_size)?;
        match self.kind {
            ConfiguratorKind::Default => {
                let CellSize::Int(c) = self.cell_size else {
                    unreachable!("Default has an integer cell")
                };
                let t = available_bytes.div_euclid(to_i64(c, "cell size")?);
                self.calculate_pool_sizes_from_max_tokens(t, Some(p as u64))
            }
            ConfiguratorKind::HybridSwa => {
                let t = match self.cell_size {
                    CellSize::Int(c) => available_bytes.div_euclid(to_i64(c, "cell size")?),
                    CellSize::Float(c) => {
                        py_int(py_float_floordiv(available_bytes as f64, c), "max tokens")?
                    }
                };
                self.solve_hybrid(t, p)
            }
            ConfiguratorKind::ChunkCap => {
                let what = "ChunkCap pool sizes";
                let swa = self.chunk_cap_swa_tokens(p)?;
                let fixed = mul(
                    mul(swa as u64, self.swa_per_token, what)?,
                    self.shape.num_swa_layers(),
                    what,
                )?;
                let full_cell = self.chunk_cap_full_cell()?;
                let rest = i128::from(available_bytes) - i128::from(fixed);
                let full = narrow(rest.div_euclid(i128::from(full_cell)), what)?;
                let full = align_down(full, p)?;
                if full <= 0 {
                    return Err(PlanError::not_enough_memory(format!(
                        "SWA cap leaves no room for the full pool: the SWA pool cap ({swa} tokens, {fixed} bytes) \
                         leaves no room for the full KV pool within the available {available_bytes} bytes. \
                         Reduce max_running_requests, lower swa_eviction_interval, or raise the budget."
                    )));
                }
                Ok(MemoryPoolConfig {
                    max_total_num_tokens: full,
                    full_max_total_num_tokens: Some(full),
                    swa_max_total_num_tokens: Some(swa),
                })
            }
        }
    }

    /// The constraint path: pool sizes from a token count (a user cap, or the MIN across ranks).
    pub fn calculate_pool_sizes_from_max_tokens(
        &self,
        max_total_num_tokens: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        let p = self.resolve_page_size(page_size)?;
        match self.kind {
            ConfiguratorKind::Default => {
                let t = align_down(max_total_num_tokens, p)?;
                if t <= 0 {
                    return Err(not_enough(t));
                }
                Ok(MemoryPoolConfig {
                    max_total_num_tokens: t,
                    full_max_total_num_tokens: None,
                    swa_max_total_num_tokens: None,
                })
            }
            ConfiguratorKind::HybridSwa => self.solve_hybrid(max_total_num_tokens, p),
            ConfiguratorKind::ChunkCap => {
                let swa = self.chunk_cap_swa_tokens(p)?;
                let full = align_down(max_total_num_tokens, p)?;
                let swa = i128::from(swa).min(i128::from(max_total_num_tokens)) as i64;
                if full <= 0 {
                    return Err(not_enough(full));
                }
                Ok(MemoryPoolConfig {
                    max_total_num_tokens: full,
                    full_max_total_num_tokens: Some(full),
                    swa_max_total_num_tokens: Some(swa),
                })
            }
        }
    }
}

fn not_enough(tokens: i64) -> PlanError {
    PlanError::not_enough_memory(format!(
        "Not enough memory: max_total_num_tokens would be {tokens}. Increase the KV budget \
         (mem_fraction_static) or lower the draft or pool requirements."
    ))
}
