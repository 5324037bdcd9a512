//! The hybrid-state functions (see `kvbudget.sglang.state`): SGLang's state
//! shapes, its state budget and its running-request cap, converted.

use crate::errors::{nonneg, Result};
use crate::plan::{PoolPlan, PoolSpec};
use crate::values::{ServingConfig, SpeculativeConfig, StateConfig};
use kvbudget_core::sizing::state;
use kvbudget_core::state::shape::{self, StateDims};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

fn dims_dict(py: Python<'_>, d: StateDims) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("conv_elems", d.conv_elems)?;
    out.set_item("ssm_heads", d.ssm_heads)?;
    out.set_item("ssm_head_dim", d.ssm_head_dim)?;
    out.set_item("ssm_state_dim", d.ssm_state_dim)?;
    out.set_item("k_heads_per_tp", d.k_heads_per_tp)?;
    out.set_item("conv_kernel", d.conv_kernel)?;
    Ok(out)
}

/// `Mamba2StateShape.create` on one rank, as a dict of `StateConfig`'s dims.
#[pyfunction]
pub fn _mamba2_dims(
    py: Python<'_>,
    tp_size: i64,
    intermediate_size: i64,
    n_groups: i64,
    num_heads: i64,
    head_dim: i64,
    state_size: i64,
    conv_kernel: i64,
) -> Result<Bound<'_, PyDict>> {
    let d = shape::mamba2(
        nonneg("tp_size", tp_size)?,
        nonneg("intermediate_size", intermediate_size)?,
        nonneg("n_groups", n_groups)?,
        nonneg("num_heads", num_heads)?,
        nonneg("head_dim", head_dim)?,
        nonneg("state_size", state_size)?,
        nonneg("conv_kernel", conv_kernel)?,
    )?;
    Ok(dims_dict(py, d)?)
}

/// `Mamba2StateShape.create_full_rank` on one rank.
#[pyfunction]
pub fn _full_rank_dims(
    py: Python<'_>,
    tp_size: i64,
    intermediate_size: i64,
    state_size: i64,
    conv_kernel: i64,
) -> Result<Bound<'_, PyDict>> {
    let d = shape::full_rank(
        nonneg("tp_size", tp_size)?,
        nonneg("intermediate_size", intermediate_size)?,
        nonneg("state_size", state_size)?,
        nonneg("conv_kernel", conv_kernel)?,
    )?;
    Ok(dims_dict(py, d)?)
}

/// `KimiLinearStateShape.create` on one rank.
#[pyfunction]
#[pyo3(signature = (tp_size, num_heads, head_dim, num_k_heads=None, head_k_dim=None, conv_kernel=4))]
pub fn _kda_dims(
    py: Python<'_>,
    tp_size: i64,
    num_heads: i64,
    head_dim: i64,
    num_k_heads: Option<i64>,
    head_k_dim: Option<i64>,
    conv_kernel: i64,
) -> Result<Bound<'_, PyDict>> {
    let d = shape::kda(
        nonneg("tp_size", tp_size)?,
        nonneg("num_heads", num_heads)?,
        nonneg("head_dim", head_dim)?,
        num_k_heads.map(|v| nonneg("num_k_heads", v)).transpose()?,
        head_k_dim.map(|v| nonneg("head_k_dim", v)).transpose()?,
        nonneg("conv_kernel", conv_kernel)?,
    )?;
    Ok(dims_dict(py, d)?)
}

/// SGLang's `_handle_max_mamba_cache(rest_gib)`, as a dict.
#[pyfunction]
pub fn _state_budget<'py>(
    py: Python<'py>,
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    rest_gib: f64,
) -> Result<Bound<'py, PyDict>> {
    budget_dict(
        py,
        state::state_budget(&state.0, &serving.0, &spec.0, rest_gib)?,
    )
}

/// A state budget as `StateBudget`'s keywords.
pub fn budget_dict(py: Python<'_>, b: state::StateBudget) -> Result<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("max_mamba_cache_size", b.max_mamba_cache_size)?;
    d.set_item("rest_gib", b.rest_gib)?;
    d.set_item("mamba_ratio", b.mamba_ratio)?;
    d.set_item("per_req_bytes", b.per_req_bytes)?;
    d.set_item("extra_per_slot", b.extra_per_slot)?;
    d.set_item("fixed_bytes", b.fixed_bytes)?;
    d.set_item("intermediate_bytes", b.intermediate_bytes)?;
    d.set_item("state_bytes", b.state_bytes)?;
    Ok(d)
}

/// The exact plan's state pool of `slots` slots, laid out as SGLang's `MambaPool` allocates it.
#[pyfunction]
pub fn _state_pool(
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    slots: i64,
) -> Result<PoolSpec> {
    let slots = nonneg("slots", slots)?;
    Ok(PoolSpec(kvbudget_core::plan::state_pool(
        &state.0, &serving.0, &spec.0, slots,
    )?))
}

/// The plan of a stage without attention layers (a pure state model): the state pool and
/// SGLang's zero-KV token label, with SGLang's state budget (as a dict).
#[pyfunction]
#[pyo3(signature = (state, serving, spec, available_bytes, zero_kv_tokens, fit="exact"))]
pub fn _plan_state_only<'py>(
    py: Python<'py>,
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    available_bytes: i64,
    zero_kv_tokens: i64,
    fit: &str,
) -> Result<(PoolPlan, Bound<'py, PyDict>)> {
    let fit = fit.parse::<kvbudget_core::Fit>()?;
    let (plan, budget) = kvbudget_core::plan::plan_state_only(
        &serving.0,
        &spec.0,
        &state.0,
        available_bytes,
        fit,
        nonneg("zero_kv_tokens", zero_kv_tokens)?,
    )?;
    Ok((PoolPlan(Arc::new(plan)), budget_dict(py, budget)?))
}

/// SGLang's `_calculate_mamba_ratio`.
#[pyfunction]
pub fn _mamba_ratio(state: &StateConfig, serving: &ServingConfig) -> Result<u64> {
    Ok(state::mamba_ratio(&state.0, &serving.0)?)
}

/// SGLang's `resolve_max_num_reqs(token_capacity)`.
#[pyfunction]
#[pyo3(signature = (token_capacity, context_len, serving, state=None, max_mamba_cache_size=None))]
pub fn _max_num_reqs(
    token_capacity: i64,
    context_len: i64,
    serving: &ServingConfig,
    state: Option<&StateConfig>,
    max_mamba_cache_size: Option<i64>,
) -> Result<i64> {
    let with = match (state, max_mamba_cache_size) {
        (Some(s), Some(m)) => Some((&s.0, nonneg("max_mamba_cache_size", m)?)),
        (None, None) => None,
        _ => {
            return Err(crate::errors::invalid(
                "state and max_mamba_cache_size go together",
            ))
        }
    };
    Ok(state::max_num_reqs(
        token_capacity,
        nonneg("context_len", context_len)?,
        &serving.0,
        with,
    )?)
}
