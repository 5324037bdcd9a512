//! `kvbudget._core`: the thin PyO3 bridge over `kvbudget-core`.
//! It converts values and errors and dispatches; no arithmetic lives here.

// PyO3 extracts arguments by value.
#![allow(clippy::needless_pass_by_value)]

mod batch;
mod convert;
mod errors;
mod fused;
mod plan;
mod state;
mod values;
mod vllm;
mod workload;

#[pyo3::pymodule(gil_used = false)]
mod _core {
    use crate::errors;
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::values::{
        DraftGeometry, MemoryPoolConfig, ModelGeometry, ServingConfig, SpeculativeConfig,
        StateConfig,
    };

    #[pymodule_export]
    use crate::plan::{PoolConfigurator, PoolPlan, PoolSpec, TensorSpec};

    #[pymodule_export]
    use crate::batch::{_canonical_name, _choice_codes, _plan_many, _plan_many_state, simd_level};

    #[pymodule_export]
    use crate::fused::_place_fused_draft;

    #[pymodule_export]
    use crate::state::{
        _full_rank_dims, _kda_dims, _mamba2_dims, _mamba_ratio, _max_num_reqs, _plan_state_only,
        _state_budget, _state_pool,
    };

    #[pymodule_export]
    use crate::vllm::{
        _vllm_plan, _vllm_plan_many, _vllm_plan_typed, _vllm_settings, _vllm_state_shapes,
        VllmLayers, VllmResult,
    };

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("SGLANG_VERSION", kvbudget_core::SGLANG_VERSION)?;
        m.add("TENSOR_ALIGNMENT", kvbudget_core::plan::TENSOR_ALIGNMENT)?;
        m.add("MAX_PLAN_LAYERS", kvbudget_core::plan::MAX_PLAN_LAYERS)?;
        let kinds: Vec<&str> = kvbudget_core::TensorKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect();
        m.add("TENSOR_KINDS", pyo3::types::PyTuple::new(m.py(), kinds)?)?;
        let docs = pyo3::types::PyDict::new(m.py());
        for k in kvbudget_core::TensorKind::ALL {
            docs.set_item(k.as_str(), kvbudget_core::fields::doc_text(k.doc()))?;
        }
        m.add("TENSOR_KIND_DOCS", docs)?;
        m.add("DETACH_ROWS", crate::batch::DETACH_ROWS)?;
        let codes = pyo3::types::PyDict::new(m.py());
        {
            use kvbudget_core::vllm::batch as b;
            for (name, code) in [
                ("ok", b::STATUS_OK),
                ("startup", b::STATUS_STARTUP),
                ("refused", b::STATUS_REFUSED),
                ("input", b::STATUS_INPUT),
            ] {
                codes.set_item(name, code)?;
            }
        }
        m.add("VLLM_STATUS_CODES", codes)?;
        m.add("FIELDS", crate::convert::fields_table(m.py())?)?;
        errors::register(m)
    }
}
