//! `kvbudget._core`: the thin PyO3 bridge over `kvbudget-core`.
//! It converts values and errors and dispatches; no arithmetic lives here.

mod batch;
mod errors;
mod plan;
mod values;

use pyo3::prelude::*;

#[pymodule]
mod _core {
    use super::*;

    #[pymodule_export]
    use crate::values::{DraftGeometry, ModelGeometry, ServingConfig, SpeculativeConfig};

    #[pymodule_export]
    use crate::plan::{MemoryPoolConfig, PoolConfigurator, PoolPlan, PoolSpec, TensorSpec};

    #[pymodule_export]
    use crate::batch::_plan_many;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        m.add("TENSOR_ALIGNMENT", kvbudget_core::plan::TENSOR_ALIGNMENT)?;
        errors::register(m)
    }
}
