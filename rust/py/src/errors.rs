//! The Python exception hierarchy, and [`Error`]: the bridge's error type.
//!
//! Bridge functions return [`Result<T>`]; `?` converts a core [`PlanError`]
//! (into the matching `kvbudget` exception) and a [`PyErr`] alike, and PyO3
//! turns the `Error` into its Python exception on the way out.

use kvbudget_core::{ErrorCode, PlanError};
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
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

/// A core error or a Python exception.
pub enum Error {
    /// A planning error, raised as its `kvbudget` exception.
    Plan(PlanError),
    /// Any other Python exception (a conversion's `TypeError`, `OverflowError`, ...).
    Py(PyErr),
}

/// The bridge's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Self {
        Self::Plan(e)
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Self::Py(e)
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> Self {
        match e {
            Error::Py(e) => e,
            Error::Plan(e) => match e.code {
                ErrorCode::InvalidConfig => InvalidConfigError::new_err(e.message().to_string()),
                ErrorCode::Overflow => PlanOverflowError::new_err(e.message().to_string()),
                ErrorCode::NotEnoughMemory => {
                    NotEnoughMemoryError::new_err(e.message().to_string())
                }
                ErrorCode::SwaPoolTooSmall => {
                    SWAPoolTooSmallError::new_err(e.message().to_string())
                }
            },
        }
    }
}

/// An `InvalidConfigError` with this message.
pub fn invalid(msg: impl Into<String>) -> Error {
    Error::Plan(PlanError::invalid(msg))
}

/// A `TypeError` with this message.
pub fn type_error(msg: impl Into<String>) -> Error {
    Error::Py(PyTypeError::new_err(msg.into()))
}

/// A non-negative count from a Python int; negative values are an `InvalidConfigError`.
pub fn nonneg(name: &str, v: i64) -> Result<u64> {
    u64::try_from(v).map_err(|_| invalid(format!("{name} must be >= 0, got {v}")))
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
