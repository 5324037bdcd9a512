//! SGLang 0.5.23's budget for a hybrid model's state cache
//! (`mem_cache/kv_cache_configurator.py`): `_handle_max_mamba_cache`, which
//! takes the state slots out of the profiled budget before the KV pool is
//! sized, `_calculate_mamba_ratio`, and `resolve_max_num_reqs`, which caps the
//! running requests by the state slots. Floats in SGLang's order: the budget
//! is GiB as doubles, as SGLang carries it.

use crate::arith::{floor_div, py_float_floordiv, py_int};
use crate::error::{PlanError, Result};
use crate::serving::{DisaggregationMode, ServingConfig};
use crate::spec::SpeculativeConfig;
use crate::state::{MambaRadixStrategy, StateConfig, StateMixer};

const GIB: f64 = (1u64 << 30) as f64;
/// `MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`: state slots per running request.
const BASE_RATIO: u64 = 3;

/// What `_handle_max_mamba_cache` decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateBudget {
    /// `max_mamba_cache_size` per attention-DP rank after the call, slots (> 0).
    pub max_mamba_cache_size: u64,
    /// The budget left for the KV pool, GiB (SGLang's return value).
    pub rest_gib: f64,
    /// State slots per running request (`_calculate_mamba_ratio`); `None` where
    /// SGLang's ratio asserts (the lazy buffer without overlap), which the budget
    /// itself reads only with speculation.
    pub mamba_ratio: Option<u64>,
    /// SGLang's `stage_per_req`: one slot's state on the largest stage, bytes.
    pub per_req_bytes: u64,
    /// Bytes each slot carries beside the state (KDA replay rings, the caller's extra), bytes.
    pub extra_per_slot: u64,
    /// Fixed bytes (GDN replay rings, one per request slot), bytes.
    pub fixed_bytes: u64,
    /// Speculative intermediate state reserved (per draft token per slot), bytes.
    pub intermediate_bytes: u64,
    /// The state pool: `(max_mamba_cache_size + 1) * (per_req + extra) + fixed`, bytes.
    pub state_bytes: u64,
}

fn invalid(msg: String) -> PlanError {
    PlanError::invalid(msg)
}

/// An integer as SGLang's int-to-float conversion gives it; above 2^53 (far
/// beyond any byte count) an overflow error rather than a rounded value.
fn exact(v: u64, what: &str) -> Result<f64> {
    if v > 1 << 53 {
        return Err(PlanError::overflow(what));
    }
    Ok(v as f64)
}

fn checked(a: u64, b: u64, what: &str) -> Result<u64> {
    a.checked_mul(b).ok_or_else(|| PlanError::overflow(what))
}

/// The largest stage's share of the caller's extra bytes per slot (`extra_bytes_per_req`
/// scaled by its state layers, as SGLang's float `int(extra * stage / layers)`), bytes.
pub(crate) fn stage_extra_bytes(state: &StateConfig) -> Result<u64> {
    let layers = state.num_state_layers;
    let stage = state.stage_state_layers.unwrap_or(layers);
    let scale = exact(stage, "state layers")? / exact(layers.max(1), "state layers")?;
    Ok(py_int::<PlanError>(
        exact(state.extra_bytes_per_req, "extra state bytes")? * scale,
        "extra",
    )? as u64)
}

/// `_calculate_mamba_ratio`: state slots per running request (1 without the
/// radix cache; 3, minus 1 under the decode-lock skip, plus the extra buffer's
/// tracking slots).
pub fn mamba_ratio(state: &StateConfig, serving: &ServingConfig) -> Result<u64> {
    if serving.disable_radix_cache {
        return Ok(1);
    }
    let skip = state.mamba_skip_decode_lock;
    let base = BASE_RATIO - u64::from(skip);
    let lazy = state.mamba_radix_cache_strategy == MambaRadixStrategy::ExtraBufferLazy;
    let additional = if state.mamba_radix_cache_strategy == MambaRadixStrategy::NoBuffer {
        u64::from(skip)
    } else {
        if serving.disable_overlap_schedule && lazy {
            return Err(invalid(
                "Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)".into(),
            ));
        }
        // get_mamba_tracking_slots(extra_buffer=True, overlap, lazy)
        if lazy || serving.disable_overlap_schedule {
            1
        } else {
            2
        }
    };
    Ok(base + additional)
}

/// `_pd_prefill_skips_mamba_spec_state`: a PD prefill server without role
/// switching or unified memory allocates no verify snapshots.
pub(crate) fn pd_prefill_skips_spec_state(state: &StateConfig, serving: &ServingConfig) -> bool {
    serving.disaggregation_mode == DisaggregationMode::Prefill
        && !state.enable_pd_role_switch
        && !serving.enable_unified_memory
}

/// `max(1, max_running_requests // attn_dp_size)`; SGLang fails on a `None` here.
pub(crate) fn running_per_rank(serving: &ServingConfig, why: &str) -> Result<u64> {
    let Some(mrr) = serving.max_running_requests else {
        return Err(invalid(format!(
            "{why} needs max_running_requests (SGLang reads it unset)"
        )));
    };
    Ok((mrr / serving.attn_dp_size).max(1))
}

/// `KVCacheConfigurator._handle_max_mamba_cache(rest_gib)`: the state slots and
/// the budget left for the KV pool, GiB.
///
/// Errors: [`crate::ErrorCode::NotEnoughMemory`] with SGLang's message when no
/// state slot fits; [`crate::ErrorCode::InvalidConfig`] where SGLang asserts
/// (speculation without `max_running_requests` or `num_draft_tokens`, an
/// empty state, the lazy buffer without overlap).
pub fn state_budget(
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    rest_gib: f64,
) -> Result<StateBudget> {
    let dp = serving.attn_dp_size;
    let layers = state.num_state_layers;
    let stage = state.stage_state_layers.unwrap_or(layers);
    let scale = exact(stage, "state layers")? / exact(layers.max(1), "state layers")?;
    let per_req = match state.fused_state_entry_bytes {
        Some(b) => b,
        None => state.cache_per_req::<PlanError>()?,
    };
    let stage_per_req = py_int::<PlanError>(
        exact(per_req, "mamba_cache_per_req")? * scale,
        "stage_per_req",
    )? as u64;
    let replay = state.enable_linear_replayssm_spec && state.mixer != StateMixer::Mamba2;
    let ring = if replay {
        state.replay_ring_per_req::<PlanError>(state.linear_replayssm_cache_len)?
    } else {
        0
    };
    let ring =
        py_int::<PlanError>(exact(ring, "ReplaySSM ring")? * scale, "ReplaySSM ring")? as u64;
    let (fixed, ring_per_slot) = if replay && state.mixer == StateMixer::Gdn {
        let slots = running_per_rank(serving, "the GDN ReplaySSM ring")? + 1;
        (checked(ring, slots, "ReplaySSM fixed bytes")?, 0)
    } else {
        (0, ring)
    };
    let extra = stage_extra_bytes(state)?;
    let extra_per_slot = ring_per_slot
        .checked_add(extra)
        .ok_or_else(|| PlanError::overflow("extra_per_slot"))?;
    let has_spec = spec.algorithm.is_speculative();
    let reserves = has_spec && !replay && !pd_prefill_skips_spec_state(state, serving);
    let draft_tokens = if has_spec {
        let Some(d) = spec.num_draft_tokens else {
            return Err(invalid(
                "the state budget of a speculative model needs num_draft_tokens".into(),
            ));
        };
        running_per_rank(serving, "the state budget of a speculative model")?;
        d
    } else {
        0
    };
    let mut rest = rest_gib;
    let mut intermediate = 0u64;
    let mut ratio = None;
    // The speculative intermediate state of `slots` slots (the padding slot included), taken
    // out of `rest`: `stage_per_req * slots * num_draft_tokens` bytes.
    let reserve = |slots: u64, rest: &mut f64| -> Result<u64> {
        let what = "intermediate state";
        let bytes = checked(checked(stage_per_req, slots, what)?, draft_tokens, what)?;
        *rest -= exact(bytes, what)? / GIB;
        Ok(bytes)
    };
    let mmcs: i64 = if let Some(given) = state.max_mamba_cache_size {
        let mmcs = given / dp;
        if reserves {
            let r = mamba_ratio(state, serving)?;
            ratio = Some(r);
            let capped = running_per_rank(serving, "")?.min(mmcs / r);
            intermediate = reserve(capped + 1, &mut rest)?;
        }
        mmcs as i64
    } else if serving.disable_radix_cache && serving.max_running_requests.is_some() {
        let mmcs = running_per_rank(serving, "")?;
        if reserves {
            intermediate = reserve(mmcs + 1, &mut rest)?;
        }
        mmcs as i64
    } else {
        if stage_per_req == 0 {
            return Err(invalid(
                "the auto-sized state cache needs a positive state per request".into(),
            ));
        }
        let ratio_f = state.mamba_full_memory_ratio;
        let budget_bytes = rest * ratio_f / (1.0 + ratio_f) * GIB;
        let per = exact(stage_per_req, "stage_per_req")?;
        let extra_f = exact(extra_per_slot, "extra_per_slot")?;
        if reserves {
            let r = mamba_ratio(state, serving)?;
            ratio = Some(r);
            let d = draft_tokens;
            let first = exact(checked(stage_per_req, 1 + d, "state")?, "state")?;
            let num = budget_bytes - first - extra_f;
            let den = per * (1.0 + d as f64 / r as f64) + extra_f;
            let mmcs = py_int::<PlanError>(py_float_floordiv(num, den), "max_mamba_cache_size")?;
            let capped = (running_per_rank(serving, "")? as i64).min(floor_div(mmcs, r as i64));
            // SGLang multiplies by (capped + 1), which a non-positive size can make 0 or negative.
            let slots = capped + 1;
            let signed = i128::from(stage_per_req) * i128::from(slots) * i128::from(d);
            rest -= signed as f64 / GIB;
            intermediate = u64::try_from(signed).unwrap_or(0);
            mmcs
        } else {
            let per_slot = stage_per_req
                .checked_add(extra_per_slot)
                .ok_or_else(|| PlanError::overflow("per_slot"))?;
            let per_slot_f = exact(per_slot, "per_slot")?;
            let num = budget_bytes - exact(fixed, "fixed")? - per_slot_f;
            py_int::<PlanError>(py_float_floordiv(num, per_slot_f), "max_mamba_cache_size")?
        }
    };
    if mmcs <= 0 {
        return Err(PlanError::not_enough_memory(format!(
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed \
             max_mamba_cache_size={mmcs} (total_rest_memory={rest:.2} GB, mamba_cache_per_req={:.2} MB). \
             Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, (3) reduce \
             --speculative-num-draft-tokens, or (4) use GPUs with more memory.",
            stage_per_req as f64 / (1u64 << 20) as f64
        )));
    }
    let mmcs = mmcs as u64;
    let slot = stage_per_req
        .checked_add(extra_per_slot)
        .ok_or_else(|| PlanError::overflow("state slot"))?;
    let state_bytes = checked(mmcs + 1, slot, "state pool")?
        .checked_add(fixed)
        .ok_or_else(|| PlanError::overflow("state pool"))?;
    rest -= exact(state_bytes, "state pool")? / GIB;
    let mamba_ratio = ratio.or_else(|| mamba_ratio(state, serving).ok());
    Ok(StateBudget {
        max_mamba_cache_size: mmcs,
        rest_gib: rest,
        mamba_ratio,
        per_req_bytes: stage_per_req,
        extra_per_slot,
        fixed_bytes: fixed,
        intermediate_bytes: intermediate,
        state_bytes,
    })
}

/// `KVCacheConfigurator.resolve_max_num_reqs(token_capacity)`: the running
/// requests per attention-DP rank, from the finished token capacity; with a
/// state cache (`state` and its `max_mamba_cache_size` per rank) capped at its
/// slots over [`mamba_ratio`].
///
/// Errors: [`crate::ErrorCode::NotEnoughMemory`] with SGLang's message when the
/// state cache serves no request.
pub fn max_num_reqs(
    token_capacity: i64,
    context_len: u64,
    serving: &ServingConfig,
    state: Option<(&StateConfig, u64)>,
) -> Result<i64> {
    if context_len == 0 {
        return Err(invalid("context_len must be positive".into()));
    }
    let capacity = token_capacity as f64;
    if token_capacity.unsigned_abs() > 1 << 53 {
        return Err(PlanError::overflow("token capacity"));
    }
    let estimated = py_int::<PlanError>(
        capacity / exact(context_len, "context_len")? * 512.0,
        "estimate",
    )?;
    let estimated = estimated.clamp(2048, 4096);
    let half = floor_div(token_capacity, 2);
    let mut n = match serving.max_running_requests {
        Some(mrr) => ((mrr / serving.attn_dp_size).max(1) as i64).min(half),
        None => estimated.min(half),
    };
    if let Some((state, mmcs)) = state {
        let ratio = mamba_ratio(state, serving)?;
        let cap = (mmcs / ratio) as i64;
        n = n.min(cap);
        if n <= 0 {
            return Err(PlanError::not_enough_memory(format!(
                "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. \
                 max_mamba_cache_size={mmcs}, mamba_ratio={ratio}, resulting max_num_reqs={n}. Try: \
                 (1) reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use \
                 GPUs with more memory."
            )));
        }
    }
    Ok(n)
}
