//! KV-cache element types: element size in bytes and the storage dtype a pool uses.

use crate::error::{PlanError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The KV-cache dtype, as SGLang's `--kv-cache-dtype` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvDtype {
    /// bfloat16, 2 bytes per element.
    #[default]
    Bf16,
    /// float16, 2 bytes per element.
    Fp16,
    /// float32, 4 bytes per element.
    Fp32,
    /// float8 e4m3, 1 byte per element (stored as uint8).
    Fp8E4m3,
    /// float8 e5m2, 1 byte per element (stored as uint8).
    Fp8E5m2,
    /// MX float8 with one E8M0 scale byte per 32 elements.
    Mxfp8,
    /// float4 e2m1, packed two per byte (Default configurator only); 1 byte per packed pair.
    Fp4E2m1,
}

impl KvDtype {
    /// Element size `b` in bytes as SGLang's `torch._utils._element_size` gives it
    /// (fp4: one byte per packed pair).
    pub const fn element_bytes(self) -> u64 {
        match self {
            Self::Bf16 | Self::Fp16 => 2,
            Self::Fp32 => 4,
            Self::Fp8E4m3 | Self::Fp8E5m2 | Self::Mxfp8 | Self::Fp4E2m1 => 1,
        }
    }

    /// The canonical name (`"bf16"`, `"fp8_e4m3"`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Bf16 => "bf16",
            Self::Fp16 => "fp16",
            Self::Fp32 => "fp32",
            Self::Fp8E4m3 => "fp8_e4m3",
            Self::Fp8E5m2 => "fp8_e5m2",
            Self::Mxfp8 => "mxfp8",
            Self::Fp4E2m1 => "fp4_e2m1",
        }
    }

    /// The storage dtype of the pool's K/V buffers (fp8, mxfp8 and fp4 are stored as uint8).
    pub const fn storage(self) -> StorageDtype {
        match self {
            Self::Bf16 => StorageDtype::Bfloat16,
            Self::Fp16 => StorageDtype::Float16,
            Self::Fp32 => StorageDtype::Float32,
            Self::Fp8E4m3 | Self::Fp8E5m2 | Self::Mxfp8 | Self::Fp4E2m1 => StorageDtype::Uint8,
        }
    }
}

impl crate::fields::Named for KvDtype {
    const ALL: &'static [Self] = &[
        Self::Bf16,
        Self::Fp16,
        Self::Fp32,
        Self::Fp8E4m3,
        Self::Fp8E5m2,
        Self::Mxfp8,
        Self::Fp4E2m1,
    ];
    const NAMES: &'static [&'static str] = &[
        "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "fp4_e2m1",
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl fmt::Display for KvDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KvDtype {
    type Err = PlanError;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "bf16" | "bfloat16" => Self::Bf16,
            "fp16" | "float16" | "half" => Self::Fp16,
            "fp32" | "float32" | "float" => Self::Fp32,
            "fp8_e4m3" | "fp8" | "float8_e4m3fn" => Self::Fp8E4m3,
            "fp8_e5m2" | "float8_e5m2" => Self::Fp8E5m2,
            "mxfp8" => Self::Mxfp8,
            "fp4_e2m1" | "fp4" => Self::Fp4E2m1,
            _ => {
                return Err(PlanError::invalid(format!(
                    "kv_cache_dtype: unknown dtype {s:?}; expected one of bf16, fp16, fp32, fp8_e4m3, fp8_e5m2, mxfp8, fp4_e2m1"
                )))
            }
        })
    }
}

/// The torch dtype a planned tensor is allocated with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StorageDtype {
    /// `torch.bfloat16`, 2 bytes.
    Bfloat16,
    /// `torch.float16`, 2 bytes.
    Float16,
    /// `torch.float32`, 4 bytes.
    Float32,
    /// `torch.uint8`, 1 byte.
    Uint8,
}

impl StorageDtype {
    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        match self {
            Self::Bfloat16 | Self::Float16 => 2,
            Self::Float32 => 4,
            Self::Uint8 => 1,
        }
    }

    /// The torch attribute name (`"bfloat16"` for `torch.bfloat16`).
    pub const fn torch_name(self) -> &'static str {
        match self {
            Self::Bfloat16 => "bfloat16",
            Self::Float16 => "float16",
            Self::Float32 => "float32",
            Self::Uint8 => "uint8",
        }
    }
}
