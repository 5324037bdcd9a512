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
///
/// Two words (the code and a boxed message), so that `Result<u64, PlanError>`
/// travels in registers through the planner's hot paths; the constructors are
/// `#[cold]`, so the success path never pays for formatting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// What kind of error this is.
    pub code: ErrorCode,
    // A thin box (one word), unlike `Box<str>` or `String`: see the type's doc.
    #[allow(clippy::box_collection)]
    message: Box<String>,
}

impl PlanError {
    /// An error of `code` with this message.
    #[cold]
    #[inline(never)]
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: Box::new(message.into()),
        }
    }

    /// Human-readable message naming the offending field and value.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An [`ErrorCode::InvalidConfig`] error.
    #[cold]
    #[inline(never)]
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidConfig, message)
    }

    /// An [`ErrorCode::Overflow`] error for the named quantity.
    #[cold]
    #[inline(never)]
    pub fn overflow(what: &str) -> Self {
        Self::new(ErrorCode::Overflow, overflow_message(what))
    }

    /// A [`ErrorCode::NotEnoughMemory`] error.
    #[cold]
    #[inline(never)]
    pub fn not_enough_memory(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotEnoughMemory, message)
    }

    /// A [`ErrorCode::SwaPoolTooSmall`] error.
    #[cold]
    #[inline(never)]
    pub fn swa_too_small(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::SwaPoolTooSmall, message)
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PlanError {}

/// What a failing planning step returns: a [`PlanError`] with its message
/// (the scalar API), or only its [`ErrorCode`] (the batch kernel, which keeps
/// a status per row and no message). The planning arithmetic is written once,
/// generic over `E: Fail`; messages are built lazily, so the `ErrorCode`
/// instantiation never formats one and its results stay in registers.
pub trait Fail: Sized {
    /// An error of `code`; `message` is called only where messages are kept.
    fn fail(code: ErrorCode, message: impl FnOnce() -> String) -> Self;
    /// The error's code.
    fn code(&self) -> ErrorCode;

    /// An [`ErrorCode::InvalidConfig`] error.
    #[inline]
    fn invalid_with(message: impl FnOnce() -> String) -> Self {
        Self::fail(ErrorCode::InvalidConfig, message)
    }
    /// An [`ErrorCode::Overflow`] error for the named quantity.
    #[inline]
    fn overflow_of(what: &str) -> Self {
        Self::fail(ErrorCode::Overflow, || overflow_message(what))
    }
    /// An [`ErrorCode::NotEnoughMemory`] error.
    #[inline]
    fn not_enough_memory_with(message: impl FnOnce() -> String) -> Self {
        Self::fail(ErrorCode::NotEnoughMemory, message)
    }
    /// An [`ErrorCode::SwaPoolTooSmall`] error.
    #[inline]
    fn swa_too_small_with(message: impl FnOnce() -> String) -> Self {
        Self::fail(ErrorCode::SwaPoolTooSmall, message)
    }
}

fn overflow_message(what: &str) -> String {
    format!("arithmetic overflow computing {what} (the inputs are too large for 64-bit integers)")
}

impl Fail for PlanError {
    #[cold]
    #[inline(never)]
    fn fail(code: ErrorCode, message: impl FnOnce() -> String) -> Self {
        Self::new(code, message())
    }
    #[inline]
    fn code(&self) -> ErrorCode {
        self.code
    }
}

impl Fail for ErrorCode {
    #[inline(always)]
    fn fail(code: ErrorCode, _: impl FnOnce() -> String) -> Self {
        code
    }
    #[inline(always)]
    fn code(&self) -> ErrorCode {
        *self
    }
}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, PlanError>;
