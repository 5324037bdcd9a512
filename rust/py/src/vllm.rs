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
