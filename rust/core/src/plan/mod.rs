//! kvbudget's exact plan (REFERENCE section 3): every pool and tensor with
//! its shape, dtype and bytes, and the largest page-aligned token count whose
//! total bytes fit the budget.
//!
//! Layout, as SGLang allocates it: per layer, K `[rows, heads, dk]` and V
//! `[rows, heads, dv]` with `rows = tokens + page_size` (slot 0 is the dummy
//! page); MLA keeps one latent tensor `[rows, 1, kv_lora_rank + qk_rope_head_dim]`.
//! fp8 is stored as uint8; mxfp8 adds a uint8 scale tensor per K and V with
//! `ceil(dim / 32)` scales per head. The FP4 recipes store K and V at the K
//! head dim, packed (`dk // 2` bytes per head), with the scale layouts the
//! attention backends read (`dk // 16` per head each; block-16 FP4 flattens
//! them to `heads * dk // 16`) and, for NVFP4 with FlashInfer prefill, one FP8
//! dequant workspace per pool ([`crate::fp4`]); FP4 MLA packs the latent with
//! `ceil(dim / 16)` scales. A fused draft entry replaces a pool's tensors by
//! one `[rows, entry_bytes]` buffer; unified memory replaces the target pools
//! by one byte buffer of `full * U + swa * S * n_s` bytes (no padding page),
//! and sizes the draft over its virtual ids.

mod check;
pub mod fused_draft;
mod fused_entry;
mod kinds;
mod layout;
mod state;
mod state_only;
mod state_unified;
mod state_unified_draft;
mod state_unified_swa;
mod tensors;
mod unified_launch;

pub use kinds::TensorKind;

pub use layout::{PlanLayout, MAX_PLAN_LAYERS};
pub use state::state_pool;
pub use state_only::plan_state_only;

use crate::arith::{align_up, to_i64};
use crate::configurator::PoolConfigurator;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::fields::MemoryPoolConfig;
use crate::sizing::ConfiguratorKind;
use serde::{Deserialize, Serialize};

/// How the token counts of a plan are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// The largest page-aligned count whose exact bytes fit the budget.
    Exact,
    /// SGLang's token counts (which may over-commit the budget).
    Sglang,
    /// Token counts given by the caller (`plan_for_config`, e.g. agreed across ranks).
    Given,
}

impl std::str::FromStr for Fit {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "exact" => Ok(Self::Exact),
            "sglang" => Ok(Self::Sglang),
            _ => Err(PlanError::invalid(format!(
                "fit: expected \"exact\" or \"sglang\", got {s:?}"
            ))),
        }
    }
}

/// The pools of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolName {
    /// The target's full-attention pool (every layer, for Default).
    Full,
    /// The target's sliding-window pool.
    Swa,
    /// The draft model's pool (at the full capacity, or an all-SWA target's SWA
    /// capacity; under unified memory, over the unified pool's virtual ids).
    Draft,
    /// The draft layers at SWA geometry and SWA capacity (`d_s`).
    DraftSwa,
    /// Unified memory: one byte buffer the full and SWA layers share.
    Unified,
    /// A hybrid model's recurrent state (SGLang's `MambaPool`): slots, not tokens.
    State,
}

impl PoolName {
    /// Every pool name, in plan order.
    pub const ALL: &'static [Self] = &[
        Self::Full,
        Self::Swa,
        Self::Unified,
        Self::Draft,
        Self::DraftSwa,
        Self::State,
    ];

    /// `"full"`, `"swa"`, `"unified"`, `"draft"`, `"draft_swa"` or `"state"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Swa => "swa",
            Self::Draft => "draft",
            Self::DraftSwa => "draft_swa",
            Self::Unified => "unified",
            Self::State => "state",
        }
    }

    /// The pool called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.as_str() == name)
    }

    /// A draft pool (`"draft"` or `"draft_swa"`): its layer ids are draft-local.
    pub const fn is_draft(self) -> bool {
        matches!(self, Self::Draft | Self::DraftSwa)
    }
}

/// Byte alignment of every tensor's offset inside its pool's slab (256, as
/// CUDA's allocator aligns blocks), so that slab views keep the alignment
/// vectorized loads and TMA need. The gaps count in `nbytes` and `total_bytes`.
pub const TENSOR_ALIGNMENT: u64 = 256;

/// One planned tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSpec {
    /// The pool it belongs to.
    pub pool: PoolName,
    /// Global target layer id, or the draft-local layer index for the draft pool.
    pub layer_id: u64,
    /// What it holds.
    pub kind: TensorKind,
    /// Shape in elements; the first dimension is rows (`tokens + page_size`).
    pub shape: Vec<u64>,
    /// Storage dtype.
    pub dtype: StorageDtype,
    /// Size, bytes.
    pub nbytes: u64,
    /// Byte offset inside the pool's single allocation (the slab).
    pub offset: u64,
}

/// One planned pool.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Which pool.
    pub name: PoolName,
    /// Usable token slots.
    pub tokens: u64,
    /// Allocated rows per layer: `tokens + page_size`.
    pub rows: u64,
    /// Layer ids in allocation order (global target ids; draft-local for the draft).
    pub layer_ids: Vec<u64>,
    /// The pool's KV dtype.
    pub kv_cache_dtype: KvDtype,
    /// Bytes of the pool's slab: its tensors plus the alignment gaps between them.
    pub nbytes: u64,
    /// Bytes spent on the `page_size` padding rows.
    pub padding_bytes: u64,
    /// The tensors, layer by layer.
    pub tensors: Vec<TensorSpec>,
}

/// The exact plan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolPlan {
    /// How the token counts were chosen.
    pub fit: Fit,
    /// The configurator that produced it.
    pub configurator: ConfiguratorKind,
    /// The budget, bytes.
    pub available_bytes: i64,
    /// Page size, tokens.
    pub page_size: u64,
    /// The token counts in SGLang's form.
    pub config: MemoryPoolConfig,
    /// The pools (a pool without layers is omitted).
    pub pools: Vec<PoolSpec>,
    /// Sum of the pools' slab bytes: what allocating this plan takes (strategy
    /// "slab"); at most `available_bytes` for `Fit::Exact`.
    pub total_bytes: u64,
}

impl PoolPlan {
    /// `available_bytes - total_bytes` (negative when the plan over-commits), bytes.
    pub fn leftover_bytes(&self) -> i128 {
        i128::from(self.available_bytes) - i128::from(self.total_bytes)
    }
    /// `max(0, total_bytes - available_bytes)`, bytes.
    pub fn over_budget_bytes(&self) -> u64 {
        u64::try_from((-self.leftover_bytes()).max(0)).unwrap_or(u64::MAX)
    }
    /// Sum of every tensor's bytes (SGLang's per-layer allocation); `total_bytes`
    /// minus the alignment gaps.
    ///
    /// The getters saturate rather than overflow, so they are safe on any plan;
    /// on a checked plan ([`Self::check`]) every sum is at most `total_bytes`.
    pub fn tensor_bytes(&self) -> u64 {
        self.pools
            .iter()
            .flat_map(|p| &p.tensors)
            .fold(0u64, |acc, t| acc.saturating_add(t.nbytes))
    }
    /// Bytes of alignment gaps between tensors in the slabs.
    pub fn alignment_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.tensor_bytes())
    }
    /// Bytes spent on padding rows across pools.
    pub fn padding_bytes(&self) -> u64 {
        self.pools
            .iter()
            .fold(0u64, |acc, p| acc.saturating_add(p.padding_bytes))
    }
    /// The pool with this name, if planned.
    pub fn pool(&self, name: PoolName) -> Option<&PoolSpec> {
        self.pools.iter().find(|p| p.name == name)
    }
}

impl PoolConfigurator {
    /// The plan for `available_bytes` on this rank. `Fit::Exact` takes the
    /// largest page-aligned token count whose tensors fit (total_bytes <=
    /// available_bytes); `Fit::Sglang` takes SGLang's counts and reports the
    /// over-commit in `over_budget_bytes`.
    pub fn plan(&self, available_bytes: i64, fit: Fit) -> Result<PoolPlan> {
        let layout = PlanLayout::new(self)?;
        let p = self.resolve_page_size(None)?;
        match fit {
            Fit::Given => Err(PlanError::invalid(
                "fit \"given\" is plan_for_config's; plan takes \"exact\" or \"sglang\"",
            )),
            Fit::Sglang => {
                let c = self.calculate_pool_sizes(available_bytes, None)?;
                let full = c
                    .full_max_total_num_tokens
                    .unwrap_or(c.max_total_num_tokens);
                let swa = c.swa_max_total_num_tokens.unwrap_or(0);
                layout.build(c, full, swa, p, fit, available_bytes)
            }
            Fit::Exact => {
                let x = layout.max_fitting_tokens(available_bytes, p);
                if x <= 0 {
                    let need = layout
                        .total_bytes_at(p, p)
                        .map_or_else(|| "more than 2^64".to_string(), |b| b.to_string());
                    return Err(PlanError::not_enough_memory(format!(
                        "Not enough memory: one page ({p} tokens) of every pool, padding included, needs {need} bytes; \
                         available {available_bytes} bytes"
                    )));
                }
                let plan = layout.plan_at(x, p, fit, available_bytes)?;
                if self.kind() != ConfiguratorKind::Default
                    && !self.is_all_swa()
                    && !self.sizing().unified
                {
                    let swa = plan.config.swa_max_total_num_tokens.unwrap_or(0);
                    self.check_admission_floor(swa)?;
                }
                Ok(plan)
            }
        }
    }

    /// The plan of given pool sizes (SGLang's `MemoryPoolConfig`, e.g. the
    /// sizes agreed across ranks through the constraint path), page size from
    /// `serving`. `available_bytes` `None` means exactly the bytes it takes.
    pub fn plan_for_config(
        &self,
        config: &MemoryPoolConfig,
        available_bytes: Option<i64>,
    ) -> Result<PoolPlan> {
        let layout = PlanLayout::new(self)?;
        let p = self.resolve_page_size(None)?;
        self.check_given_config(config, p)?;
        let full = config
            .full_max_total_num_tokens
            .unwrap_or(config.max_total_num_tokens);
        let swa = config.swa_max_total_num_tokens.unwrap_or(0);
        let mut config = *config;
        if self.sizing().unified {
            let bytes = self.sizing().unified_pool_bytes(full, swa);
            config.unified_memory_pool_bytes =
                Some(crate::arith::narrow(bytes, "unified pool bytes")?);
        }
        let mut plan = layout.build(
            config,
            full,
            swa,
            p,
            Fit::Given,
            available_bytes.unwrap_or(0),
        )?;
        if available_bytes.is_none() {
            plan.available_bytes = to_i64(plan.total_bytes, "plan bytes")?;
        }
        Ok(plan)
    }

    /// Given pool sizes must have this configurator's shape and be page-aligned
    /// (INV-4 for "given" plans): Default names one pool; an SWA kind names the
    /// full pool (0 for an all-SWA target, else `max_total_num_tokens` > 0) and
    /// the SWA pool (an all-SWA target's `max_total_num_tokens`); unified
    /// memory's pool bytes are the configurator's for those sizes. One
    /// exception, SGLang's own: sizes this configurator's constraint path
    /// returns for a token count are its output even when not page-aligned
    /// (RequestCap clamps its SWA pool to the count asked for,
    /// `min(cap, max_total_num_tokens)`), so an unaligned SWA count is accepted
    /// exactly when `calculate_pool_sizes_from_max_tokens(swa)` gives these sizes.
    fn check_given_config(&self, c: &MemoryPoolConfig, p: i64) -> Result<()> {
        let bad = |what: String| Err(PlanError::invalid(format!("plan_for_config: {what}")));
        let sizes = |m: &MemoryPoolConfig| {
            (
                m.max_total_num_tokens,
                m.full_max_total_num_tokens,
                m.swa_max_total_num_tokens,
            )
        };
        let clamped_swa = c.swa_max_total_num_tokens.is_some_and(|swa| {
            swa % p != 0
                && self
                    .calculate_pool_sizes_from_max_tokens(swa, Some(p.unsigned_abs()))
                    .is_ok_and(|own| sizes(&own) == sizes(c))
        });
        let counts = [
            ("max_total_num_tokens", Some(c.max_total_num_tokens)),
            ("full_max_total_num_tokens", c.full_max_total_num_tokens),
            (
                "swa_max_total_num_tokens",
                c.swa_max_total_num_tokens.filter(|_| !clamped_swa),
            ),
        ];
        for (name, v) in counts {
            if let Some(v) = v.filter(|v| *v < 0 || v % p != 0) {
                return bad(format!(
                    "{name}={v} is not a non-negative multiple of page_size {p}"
                ));
            }
        }
        let (t, full, swa) = (
            c.max_total_num_tokens,
            c.full_max_total_num_tokens,
            c.swa_max_total_num_tokens,
        );
        let shaped = match self.kind() {
            ConfiguratorKind::Default => full.is_none() && swa.is_none() && t > 0,
            _ if self.is_all_swa() => full.is_none_or(|f| f == 0) && swa == Some(t) && t > 0,
            _ => full == Some(t) && t > 0 && swa.is_some(),
        };
        if !shaped {
            return bad(format!(
                "{c:?} is not the shape of a {} plan{}",
                self.kind().class_name(),
                if self.is_all_swa() {
                    " of an all-SWA model"
                } else {
                    ""
                }
            ));
        }
        let unified = self.sizing().unified.then(|| {
            self.sizing()
                .unified_pool_bytes(full.unwrap_or(t), swa.unwrap_or(0))
        });
        match (c.unified_memory_pool_bytes, unified) {
            (None, _) => Ok(()),
            (Some(b), Some(want)) if i128::from(b) == want => Ok(()),
            (Some(b), _) => bad(format!(
                "unified_memory_pool_bytes={b} is not this configurator's unified pool for these sizes"
            )),
        }
    }

    /// Exact bytes of the plan whose primary pool (full, or SWA for an all-SWA
    /// target) holds at least `tokens` tokens: `tokens` is rounded up to a page;
    /// padding rows, alignment gaps and the draft pool are included.
    pub fn bytes_for_tokens(&self, tokens: i64) -> Result<u64> {
        let layout = PlanLayout::new(self)?;
        let p = self.resolve_page_size(None)?;
        let x = align_up(
            u64::try_from(tokens.max(0)).unwrap_or(0),
            p as u64,
            "tokens",
        )?;
        let x = to_i64(x, "tokens")?;
        layout
            .total_bytes_at(x, p)
            .ok_or_else(|| PlanError::overflow("plan bytes"))
    }
}
