//! The Python exception hierarchy and the PlanError -> PyErr conversion.

use kvbudget_core::{ErrorCode, PlanError};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    kvbudget,
    KVBudgetError,
    PyValueError,
    "Base of every kvbudget error (a ValueError). `.code` names the kind."
);
create_exception!(
    kvbudget,
    InvalidConfigError,
    KVBudgetError,
    "An input is invalid, inconsistent, or missing for the configurator asked for."
);
create_exception!(
    kvbudget,
    PlanOverflowError,
    InvalidConfigError,
    "An intermediate or result does not fit in 64-bit integers."
);
create_exception!(
    kvbudget,
    NotEnoughMemoryError,
    KVBudgetError,
    "The budget gives no tokens, or the SWA cap leaves no room for the full pool."
);
create_exception!(
    kvbudget,
    SWAPoolTooSmallError,
    KVBudgetError,
    "The SWA pool cannot admit one request (window + page_size >= SWA tokens)."
);

/// Converts a core error into the matching Python exception.
pub fn to_py(e: PlanError) -> PyErr {
    match e.code {
        ErrorCode::InvalidConfig => InvalidConfigError::new_err(e.message),
        ErrorCode::Overflow => PlanOverflowError::new_err(e.message),
        ErrorCode::NotEnoughMemory => NotEnoughMemoryError::new_err(e.message),
        ErrorCode::SwaPoolTooSmall => SWAPoolTooSmallError::new_err(e.message),
    }
}

/// Extension: `result.py()?` converts a core error.
pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, PlanError> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// An `InvalidConfigError` with this message.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidConfigError::new_err(msg.into())
}

/// A non-negative count from a Python int; negative values are an `InvalidConfigError`.
pub fn nonneg(name: &str, v: i64) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| invalid(format!("{name} must be >= 0, got {v}")))
}

/// Optional [`nonneg`].
pub fn opt_nonneg(name: &str, v: Option<i64>) -> PyResult<Option<u64>> {
    v.map(|x| nonneg(name, x)).transpose()
}

/// Registers the exceptions and their `code` class attributes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (name, ty, code) in [
        ("KVBudgetError", py.get_type::<KVBudgetError>(), "error"),
        (
            "InvalidConfigError",
            py.get_type::<InvalidConfigError>(),
            ErrorCode::InvalidConfig.as_str(),
        ),
        (
            "PlanOverflowError",
            py.get_type::<PlanOverflowError>(),
            ErrorCode::Overflow.as_str(),
        ),
        (
            "NotEnoughMemoryError",
            py.get_type::<NotEnoughMemoryError>(),
            ErrorCode::NotEnoughMemory.as_str(),
        ),
        (
            "SWAPoolTooSmallError",
            py.get_type::<SWAPoolTooSmallError>(),
            ErrorCode::SwaPoolTooSmall.as_str(),
        ),
    ] {
        ty.setattr("code", code)?;
        m.add(name, ty)?;
    }
    Ok(())
}
