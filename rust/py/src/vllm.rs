//! vLLM mode: the core's planner over its JSON forms (`kvbudget_core::vllm::json`).
//! JSON in, JSON out; the arithmetic is the core's, the typed API is `kvbudget.vllm`.

use crate::errors::{invalid, Result};
use pyo3::prelude::*;

/// Plans one request `{"layers", "available", "engine"}` (JSON text); returns the
/// plan or the failure as JSON text. Runs without the GIL (the input is a copied string).
#[pyfunction]
pub fn _vllm_plan(py: Python<'_>, request: &str) -> Result<String> {
    let value: serde_json::Value =
        serde_json::from_str(request).map_err(|e| invalid(format!("vLLM plan request: {e}")))?;
    Ok(py.detach(|| kvbudget_core::vllm::json::plan_json(&value).to_string()))
}

/// The vLLM declaration (`kvbudget_core::vllm::settings`): the release, and every
/// layer field and engine setting with its type, default, unit, flag and doc, as JSON text.
#[pyfunction]
pub fn _vllm_settings() -> String {
    kvbudget_core::vllm::settings::settings_json().to_string()
}

/// A state layer's tensor shapes on one rank as vLLM 0.33.0's `MambaStateShapeCalculator`
/// builds them (`kvbudget_core::vllm::state_shape`): `family` is `"gated_delta_net"` (`dims`:
/// tp, num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel, num_spec) or `"mamba2"`
/// (tp, intermediate_size, n_groups, num_heads, head_dim, state_size, conv_kernel, num_spec) or
/// `"short_conv"` (tp, intermediate_size, conv_kernel, num_spec) or `"mamba1"` (tp,
/// intermediate_size, state_size, conv_kernel) or `"kda"` (tp, num_heads, head_dim, conv_kernel,
/// num_spec).
#[pyfunction]
pub fn _vllm_state_shapes(family: &str, dims: Vec<u64>) -> Result<Vec<Vec<u64>>> {
    use kvbudget_core::vllm::state_shape;
    let shapes = match (family, dims.as_slice()) {
        ("gated_delta_net", &[tp, nk, nv, dk, dv, k, s]) => {
            state_shape::gated_delta_net(tp, nk, nv, dk, dv, k, s)
        }
        ("mamba2", &[tp, i, g, h, hd, ds, k, s]) => state_shape::mamba2(tp, i, g, h, hd, ds, k, s),
        ("mamba2_replayssm", &[tp, i, g, h, hd, ds, k, s, window, flashinfer]) => {
            state_shape::mamba2(tp, i, g, h, hd, ds, k, s).and_then(|base| {
                state_shape::replayssm_ring(base, g, tp, window, flashinfer != 0, s)
            })
        }
        ("short_conv", &[tp, i, k, s]) => state_shape::short_conv(tp, i, k, s),
        ("mamba1", &[tp, i, ds, k]) => state_shape::mamba1(tp, i, ds, k),
        ("kda", &[tp, h, d, k, s]) => state_shape::kda(tp, h, d, k, s),
        _ => {
            return Err(invalid(format!(
                "state family {family:?} with {} dims",
                dims.len()
            )))
        }
    };
    shapes.map_err(|e| invalid(format!("vLLM state shape: {}", e.message)))
}
