//! kvbudget's exact plan of a hybrid model: the state pool SGLang 0.5.23 sizes
//! first (`_handle_max_mamba_cache`), laid out as its `MambaPool` allocates it
//! on CUDA (`mem_cache/memory_pool.py`), and the KV pools fitted exactly on the
//! bytes the state pool leaves.
//!
//! The state pool is one [`PoolSpec`] named [`PoolName::State`], listed after
//! the KV pools with one record (layer id 0) whose tensors stack the largest
//! pipeline stage's `L` state layers; `tokens` are the state slots
//! (`max_mamba_cache_size`) and `rows` one more (SGLang's padding slot):
//!
//! * `conv_state` `[L, rows, conv_dim, conv_kernel - 1]` (conv dtype; flat `[L, rows,
//!   conv_elems]` for KDA's three conv shapes or an unknown kernel; `[L, rows, 0, 0]` for a
//!   one-tap conv, which holds no element: a lightning-attention state) and `temporal_state`
//!   `[L, rows, heads, head_dim, state_dim]` (SSM dtype);
//! * with speculation (`D` = the larger of `num_draft_tokens` and
//!   `max_num_draft_tokens`; none on a PD prefill server without role switch
//!   or unified memory), for `R + 1` rows, `R` the running requests the state
//!   serves (`min(max_running_requests / attn_dp, slots / mamba_ratio)`, at
//!   least SGLang's `max_num_reqs`): `intermediate_ssm` `[L, R + 1, D, heads,
//!   head_dim, state_dim]` (not under ReplaySSM) and `intermediate_conv_window`,
//!   deduplicated as SGLang does on CUDA for a linear draft chain (`eagle_topk`
//!   at most 1) of a non-KDA mixer, `[L, R + 1, conv_dim, D + conv_kernel - 2]`,
//!   else dense `[L, R + 1, D, conv_dim, conv_kernel - 1]` (flat as the conv state);
//! * with ReplaySSM spec-verify (GDN and KDA): the rings `replay_d` / `replay_k`
//!   / `replay_g` (and `replay_raw_v` / `replay_raw_k` for KDA, or for GDN when the
//!   conv dtype is not float32; `replay_beta` for KDA) over `R + 1` ring slots
//!   (GDN) or `rows` (KDA), and GDN's int32 / int8 cursors `[R + 1]`;
//! * `state_extra` `[rows, bytes]` (uint8) for the caller's extra bytes per slot.
//!
//! A fused draft's state entry (`fused_state_entry_bytes`) is not planned.

use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec, TENSOR_ALIGNMENT};
use crate::arith::{add, mul, py_int};
use crate::configurator::PoolConfigurator;
use crate::dtype::StorageDtype;
use crate::error::{PlanError, Result};
use crate::serving::ServingConfig;
use crate::sizing::state::{
    mamba_ratio, pd_prefill_skips_spec_state, running_per_rank, stage_extra_bytes, state_budget,
    StateBudget,
};
use crate::spec::SpeculativeConfig;
use crate::state::{StateConfig, StateDtype, StateMixer};

const GIB: f64 = (1u64 << 30) as f64;

pub(super) fn storage(d: StateDtype) -> StorageDtype {
    match d {
        StateDtype::F32 => StorageDtype::Float32,
        StateDtype::Bf16 => StorageDtype::Bfloat16,
        StateDtype::F16 => StorageDtype::Float16,
    }
}

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::invalid(msg)
}

/// Whether `conv_elems` is one conv shape `(conv_dim, window)`: a multiple of a nonzero
/// window, or no element of a one-tap conv (no window).
fn one_conv_shape(state: &StateConfig, window: u64) -> bool {
    match window {
        0 => state.conv_elems == 0,
        w => state.conv_elems.is_multiple_of(w),
    }
}

/// The conv dim of [`one_conv_shape`]'s shape (0 for a one-tap conv).
fn conv_dim(state: &StateConfig, window: u64) -> u64 {
    state.conv_elems.checked_div(window).unwrap_or(0)
}

/// One conv state's dims after its layer and row axes: SGLang's one conv shape `(conv_dim,
/// conv_kernel - 1)`; KDA's three shapes (q, k, v) and an unknown kernel stay flat (the same
/// bytes). A one-tap conv keeps no window and no element; its conv dim is taken as 0, as a
/// lightning-attention state has it.
pub(super) fn conv_inner(state: &StateConfig) -> Vec<u64> {
    let window = state
        .conv_kernel
        .map(|kernel| kernel.saturating_sub(1))
        .filter(|w| one_conv_shape(state, *w) && state.mixer != StateMixer::Kda);
    match window {
        Some(w) => vec![conv_dim(state, w), w],
        None => vec![state.conv_elems],
    }
}

/// The state tensors' shapes, in SGLang's allocation order.
fn state_tensors(
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    slots: u64,
) -> Result<Vec<(TensorKind, Vec<u64>, StorageDtype)>> {
    if state.fused_state_entry_bytes.is_some() {
        return Err(invalid(
            "the exact plan does not lay out a fused draft's state entry (fused_state_entry_bytes)",
        ));
    }
    let layers = state.stage_state_layers.unwrap_or(state.num_state_layers);
    let rows = add(slots, 1, "state slots")?;
    let (conv, ssm) = (storage(state.conv_dtype), storage(state.ssm_dtype));
    let (heads, v, k) = (state.ssm_heads, state.ssm_head_dim, state.ssm_state_dim);
    let ratio = mamba_ratio(state, serving)?;
    if slots / ratio == 0 {
        return Err(PlanError::not_enough_memory(format!(
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. \
             max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs=0."
        )));
    }
    let draft_tokens =
        if spec.algorithm.is_speculative() && !pd_prefill_skips_spec_state(state, serving) {
            Some(spec.max_draft_tokens().ok_or_else(|| {
                invalid("the state pool of a speculative model needs num_draft_tokens")
            })?)
        } else {
            None
        };
    let replay = state.enable_linear_replayssm_spec && state.mixer != StateMixer::Mamba2;
    let kda = state.mixer == StateMixer::Kda;
    // The running requests the per-request buffers serve (SGLang: max_num_reqs, at most this).
    let requests = if draft_tokens.is_some() || (replay && !kda) {
        let running = running_per_rank(serving, "the state pool's per-request buffers")?;
        Some(add(running.min(slots / ratio), 1, "state requests")?)
    } else {
        None
    };
    let conv_inner = conv_inner(state);
    let mut out = vec![
        (
            TensorKind::ConvState,
            [vec![layers, rows], conv_inner.clone()].concat(),
            conv,
        ),
        (
            TensorKind::TemporalState,
            vec![layers, rows, heads, v, k],
            ssm,
        ),
    ];
    if replay {
        let len = state.linear_replayssm_cache_len;
        if kda && !len.is_power_of_two() {
            return Err(invalid(format!(
                "spec-verify ring length must be a power of two, got {len}"
            )));
        }
        if let Some(d) = draft_tokens.filter(|d| kda && len < d.saturating_mul(2)) {
            return Err(invalid(format!(
                "spec-verify ring too small: {len} < 2 * {d} (early-flush margin)"
            )));
        }
        let ring = if kda { rows } else { requests.unwrap_or(rows) };
        let hk = state.k_heads_per_tp;
        out.push((TensorKind::ReplayD, vec![layers, ring, heads, len, v], conv));
        out.push((TensorKind::ReplayK, vec![layers, ring, hk, len, k], conv));
        let g = if kda {
            vec![layers, ring, heads, len, k]
        } else {
            vec![layers, ring, heads, len]
        };
        out.push((TensorKind::ReplayG, g, StorageDtype::Float32));
        if kda || conv != StorageDtype::Float32 {
            out.push((
                TensorKind::ReplayRawV,
                vec![layers, ring, heads, len, v],
                conv,
            ));
            out.push((TensorKind::ReplayRawK, vec![layers, ring, hk, len, k], conv));
        }
        if kda {
            out.push((
                TensorKind::ReplayBeta,
                vec![layers, ring, heads, len],
                StorageDtype::Float32,
            ));
        }
    }
    if let (Some(d), Some(r)) = (draft_tokens, requests) {
        if !replay {
            out.push((
                TensorKind::IntermediateSsm,
                vec![layers, r, d, heads, v, k],
                ssm,
            ));
        }
        let dedup = !kda && spec.eagle_topk.is_none_or(|t| t <= 1);
        let window = if dedup {
            let kernel = state.conv_kernel.ok_or_else(|| {
                invalid(
                    "the exact plan lays a speculative model's conv windows out as SGLang does on CUDA, \
                     which needs StateConfig.conv_kernel, the one conv kernel of every conv state (state_from_hf_config \
                     sets it; ZAYA1's two conv shapes leave it unset)",
                )
            })?;
            let win = kernel.saturating_sub(1);
            if !one_conv_shape(state, win) {
                return Err(invalid(format!(
                    "conv_elems {} is not a conv dim times conv_kernel - 1 ({win})",
                    state.conv_elems
                )));
            }
            // D + conv_kernel - 2 steps (D >= 1)
            let steps = add(d, win, "conv window")?.checked_sub(1).ok_or_else(|| {
                invalid("a speculative state pool needs at least one draft token")
            })?;
            vec![layers, r, conv_dim(state, win), steps]
        } else {
            [vec![layers, r, d], conv_inner].concat()
        };
        out.push((TensorKind::IntermediateConv, window, conv));
    }
    if let (true, false, Some(r)) = (replay, kda, requests) {
        out.push((TensorKind::ReplayWritePos, vec![r], StorageDtype::Int32));
        out.push((TensorKind::ReplayCacheBase, vec![r], StorageDtype::Int32));
        out.push((TensorKind::ReplayIsFlush, vec![r], StorageDtype::Int8));
    }
    let extra = stage_extra_bytes(state)?;
    if extra > 0 {
        out.push((
            TensorKind::StateExtra,
            vec![rows, extra],
            StorageDtype::Uint8,
        ));
    }
    Ok(out)
}

/// The axis of a state tensor that counts slots or requests.
pub(super) fn row_axis(kind: TensorKind) -> usize {
    match kind {
        TensorKind::StateExtra
        | TensorKind::ReplayWritePos
        | TensorKind::ReplayCacheBase
        | TensorKind::ReplayIsFlush => 0,
        _ => 1,
    }
}

/// The state pool of `slots` slots (see the module doc), its tensors at 256-byte
/// aligned offsets in one slab.
pub fn state_pool(
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    slots: u64,
) -> Result<PoolSpec> {
    let state = state.resolved()?;
    slab_pool(state_tensors(&state, serving, spec, slots)?, slots, serving)
}

/// A [`PoolName::State`] pool of `tokens` slots (or requests) and one more row: `tensors`
/// at 256-byte aligned offsets in one slab, one row of each as the padding bytes.
pub(super) fn slab_pool(
    tensors: Vec<(TensorKind, Vec<u64>, StorageDtype)>,
    tokens: u64,
    serving: &ServingConfig,
) -> Result<PoolSpec> {
    let mut out = Vec::new();
    let (mut end, mut padding) = (0u64, 0u64);
    for (kind, shape, dtype) in tensors {
        let nbytes = shape
            .iter()
            .try_fold(dtype.bytes(), |acc, &d| mul(acc, d, "state tensor bytes"))?;
        let offset = end
            .checked_next_multiple_of(TENSOR_ALIGNMENT)
            .ok_or_else(|| PlanError::overflow("state pool offset"))?;
        end = add(offset, nbytes, "state pool bytes")?;
        padding = add(
            padding,
            nbytes / shape[row_axis(kind)].max(1),
            "state padding",
        )?;
        out.push(TensorSpec {
            pool: PoolName::State,
            layer_id: 0,
            kind,
            shape,
            dtype,
            nbytes,
            offset,
        });
    }
    Ok(PoolSpec {
        name: PoolName::State,
        tokens,
        rows: add(tokens, 1, "state slots")?,
        layer_ids: vec![0],
        kv_cache_dtype: serving.kv_cache_dtype,
        nbytes: end,
        padding_bytes: padding,
        tensors: out,
    })
}

impl StateBudget {
    /// The KV pool's budget SGLang gives after the state pool: `int(rest_gib * 2**30)`
    /// (zero or negative where SGLang raises "Loaded weights leave no GPU memory"), bytes.
    pub fn kv_budget_bytes(&self) -> Result<i64> {
        py_int::<PlanError>(self.rest_gib * GIB, "the KV budget")
    }
}

impl PoolConfigurator {
    /// The plan of a hybrid model (see the module doc): SGLang's state budget on
    /// `available_bytes` (as GiB) gives the state slots; the state pool is laid out
    /// as SGLang allocates it and listed after the KV pools. `Fit::Exact` fits the KV
    /// pools on `available_bytes` minus the state pool (total_bytes <= available_bytes);
    /// `Fit::Sglang` takes SGLang's KV counts on its own rest (which may over-commit).
    ///
    /// Errors: the state budget's ([`crate::sizing::state::state_budget`]), a state
    /// cache too small to serve a request, a state pool leaving no KV bytes, and the
    /// KV plan's own.
    pub fn plan_with_state(
        &self,
        available_bytes: i64,
        fit: Fit,
        state: &StateConfig,
    ) -> Result<(PoolPlan, StateBudget)> {
        let state = state.resolved()?;
        if available_bytes.unsigned_abs() > 1 << 53 {
            return Err(PlanError::overflow("available_bytes"));
        }
        let (serving, spec) = (self.serving(), self.spec());
        self.check_unified_hooks(true)?;
        let unified = serving.enable_unified_memory && !serving.is_draft_worker;
        let budget = state_budget(&state, serving, spec, available_bytes as f64 / GIB)?;
        if unified {
            let plan = self.plan_unified_state(available_bytes, fit, &state, &budget)?;
            return Ok((plan, budget));
        }
        let pool = state_pool(&state, serving, spec, budget.max_mamba_cache_size)?;
        let kv_bytes = match fit {
            Fit::Exact => i128::from(available_bytes) - i128::from(pool.nbytes),
            Fit::Sglang => i128::from(budget.kv_budget_bytes()?),
            Fit::Given => return Err(invalid("plan_with_state takes fit \"exact\" or \"sglang\"")),
        };
        if kv_bytes <= 0 {
            return Err(PlanError::not_enough_memory(format!(
                "Not enough memory: the state pool ({} slots) takes {} of the {available_bytes} bytes, leaving none \
                 for the KV pools",
                budget.max_mamba_cache_size, pool.nbytes
            )));
        }
        let mut plan = self.plan(kv_bytes as i64, fit)?;
        plan.total_bytes = add(plan.total_bytes, pool.nbytes, "plan bytes")?;
        plan.available_bytes = available_bytes;
        plan.pools.push(pool);
        Ok((plan, budget))
    }
}
