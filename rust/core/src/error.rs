//! The one error type of the core, with a stable machine-readable code.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Stable error codes. The numeric value is the per-row status used by the
/// batch API (0 means success and is never an error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// An input is out of range, inconsistent, or missing for the requested configurator.
    InvalidConfig = 1,
    /// An intermediate or result does not fit in 64-bit integers.
    Overflow = 2,
    /// The budget gives no tokens (`max_total_num_tokens <= 0`), or the SWA cap leaves no room.
    NotEnoughMemory = 3,
    /// The SWA pool cannot hold one request: `window + page_size >= swa tokens`.
    SwaPoolTooSmall = 4,
}

impl ErrorCode {
    /// The code as a snake_case string (`"invalid_config"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidConfig => "invalid_config",
            Self::Overflow => "overflow",
            Self::NotEnoughMemory => "not_enough_memory",
            Self::SwaPoolTooSmall => "swa_pool_too_small",
        }
    }

    /// The numeric status used by the batch API.
    pub const fn status(self) -> u8 {
        self as u8
    }
}

/// A planning error: a code and a message that names the field and the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// What kind of error this is.
    pub code: ErrorCode,
    /// Human-readable message naming the offending field and value.
    pub message: String,
}

impl PlanError {
    /// An [`ErrorCode::InvalidConfig`] error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::InvalidConfig,
            message: message.into(),
        }
    }

    /// An [`ErrorCode::Overflow`] error for the named quantity.
    pub fn overflow(what: &str) -> Self {
        Self {
            code: ErrorCode::Overflow,
            message: format!("arithmetic overflow computing {what} (the inputs are too large for 64-bit integers)"),
        }
    }

    /// A [`ErrorCode::NotEnoughMemory`] error.
    pub fn not_enough_memory(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::NotEnoughMemory,
            message: message.into(),
        }
    }

    /// A [`ErrorCode::SwaPoolTooSmall`] error.
    pub fn swa_too_small(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::SwaPoolTooSmall,
            message: message.into(),
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlanError {}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, PlanError>;
