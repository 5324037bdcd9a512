//! KV-cache element types: element size in bytes and the storage dtype a pool uses.

use crate::error::{PlanError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The KV-cache dtype, as SGLang's `--kv-cache-dtype` names it (SGLang 0.5.23:
/// `auto`, `bf16`, `fp8_e4m3`, `fp8_e5m2`, `mxfp8`, `nvfp4`, `fp4_mx_block16`),
/// plus `fp16` and `fp32`, which SGLang reaches through `auto` on a model of
/// that dtype.
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
    /// The model's dtype ([`crate::ServingConfig::model_dtype`]); resolved by
    /// [`crate::ServingConfig::kv_dtype`] before any pricing.
    Auto,
    /// NVFP4: float4 e2m1 packed two per byte, FP8 scales per 16 elements in the
    /// layouts the attention backends read (SGLang's `NVFP4KVCacheMethod`).
    Nvfp4,
    /// Block-16 FP4: float4 e2m1 packed two per byte, one scale byte per 16
    /// elements (SGLang's `FP4MXBlock16KVCacheMethod`).
    #[serde(rename = "fp4_mx_block16")]
    Fp4MxBlock16,
}

impl KvDtype {
    /// Element size `b` in bytes as SGLang's `torch._utils._element_size` gives it
    /// (FP4 recipes: one byte per packed pair). `Auto` is 0: resolve it first
    /// ([`crate::ServingConfig::kv_dtype`]).
    pub const fn element_bytes(self) -> u64 {
        match self {
            Self::Bf16 | Self::Fp16 => 2,
            Self::Fp32 => 4,
            Self::Fp8E4m3 | Self::Fp8E5m2 | Self::Mxfp8 | Self::Nvfp4 | Self::Fp4MxBlock16 => 1,
            Self::Auto => 0,
        }
    }

    /// An FP4 recipe (`nvfp4`, `fp4_mx_block16`).
    pub const fn is_fp4(self) -> bool {
        matches!(self, Self::Nvfp4 | Self::Fp4MxBlock16)
    }

    /// `Auto` as the model's dtype; every other dtype as itself.
    #[must_use]
    pub const fn or_model(self, model: ModelDtype) -> Self {
        match self {
            Self::Auto => model.kv_dtype(),
            other => other,
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
            Self::Auto => "auto",
            Self::Nvfp4 => "nvfp4",
            Self::Fp4MxBlock16 => "fp4_mx_block16",
        }
    }

    /// The storage dtype of the pool's K/V buffers (fp8, mxfp8 and the FP4
    /// recipes are stored as uint8). `Auto` must be resolved first.
    pub const fn storage(self) -> StorageDtype {
        match self {
            Self::Bf16 => StorageDtype::Bfloat16,
            Self::Fp16 => StorageDtype::Float16,
            Self::Fp32 => StorageDtype::Float32,
            Self::Fp8E4m3
            | Self::Fp8E5m2
            | Self::Mxfp8
            | Self::Nvfp4
            | Self::Fp4MxBlock16
            | Self::Auto => StorageDtype::Uint8,
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
        Self::Auto,
        Self::Nvfp4,
        Self::Fp4MxBlock16,
    ];
    const NAMES: &'static [&'static str] = &[
        "bf16",
        "fp16",
        "fp32",
        "fp8_e4m3",
        "fp8_e5m2",
        "mxfp8",
        "auto",
        "nvfp4",
        "fp4_mx_block16",
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
            "auto" => Self::Auto,
            "bf16" | "bfloat16" => Self::Bf16,
            "fp16" | "float16" | "half" => Self::Fp16,
            "fp32" | "float32" | "float" => Self::Fp32,
            "fp8_e4m3" | "fp8" | "float8_e4m3fn" => Self::Fp8E4m3,
            "fp8_e5m2" | "float8_e5m2" => Self::Fp8E5m2,
            "mxfp8" => Self::Mxfp8,
            "nvfp4" => Self::Nvfp4,
            "fp4_mx_block16" => Self::Fp4MxBlock16,
            "fp4_e2m1" | "fp4" | "float4_e2m1fn_x2" => {
                return Err(PlanError::invalid(format!(
                "kv_cache_dtype: {s:?} is FP4's storage dtype, not a recipe; SGLang 0.5.23 takes \
                     \"nvfp4\" or \"fp4_mx_block16\""
            )))
            }
            "mxfp4" => {
                return Err(PlanError::invalid(
                    "kv_cache_dtype: \"mxfp4\" is reserved by SGLang for block-size-32 MXFP4; \
                     the block-16 FP4 recipe is \"fp4_mx_block16\"",
                ))
            }
            _ => {
                return Err(PlanError::invalid(format!(
                    "kv_cache_dtype: unknown dtype {s:?}; expected one of auto, bf16, fp16, fp32, \
                     fp8_e4m3, fp8_e5m2, mxfp8, nvfp4, fp4_mx_block16"
                )))
            }
        })
    }
}

/// The model's compute dtype: what `kv_cache_dtype="auto"` stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelDtype {
    /// bfloat16.
    #[default]
    Bf16,
    /// float16.
    Fp16,
    /// float32.
    Fp32,
}

impl ModelDtype {
    /// The KV dtype `auto` resolves to.
    pub const fn kv_dtype(self) -> KvDtype {
        match self {
            Self::Bf16 => KvDtype::Bf16,
            Self::Fp16 => KvDtype::Fp16,
            Self::Fp32 => KvDtype::Fp32,
        }
    }
}

impl crate::fields::Named for ModelDtype {
    const ALL: &'static [Self] = &[Self::Bf16, Self::Fp16, Self::Fp32];
    const NAMES: &'static [&'static str] = &["bf16", "fp16", "fp32"];
    fn name(self) -> &'static str {
        self.kv_dtype().as_str()
    }
}

impl FromStr for ModelDtype {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s.parse::<KvDtype>() {
            Ok(KvDtype::Bf16) => Ok(Self::Bf16),
            Ok(KvDtype::Fp16) => Ok(Self::Fp16),
            Ok(KvDtype::Fp32) => Ok(Self::Fp32),
            _ => Err(PlanError::invalid(format!(
                "model_dtype: expected bf16, fp16 or fp32, got {s:?}"
            ))),
        }
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
    /// `torch.int32`, 4 bytes (a state pool's ReplaySSM cursors).
    Int32,
    /// `torch.int8`, 1 byte (a state pool's ReplaySSM flush flags).
    Int8,
}

impl StorageDtype {
    /// Bytes per element.
    pub const fn bytes(self) -> u64 {
        match self {
            Self::Bfloat16 | Self::Float16 => 2,
            Self::Float32 | Self::Int32 => 4,
            Self::Uint8 | Self::Int8 => 1,
        }
    }

    /// The torch attribute name (`"bfloat16"` for `torch.bfloat16`).
    pub const fn torch_name(self) -> &'static str {
        match self {
            Self::Bfloat16 => "bfloat16",
            Self::Float16 => "float16",
            Self::Float32 => "float32",
            Self::Uint8 => "uint8",
            Self::Int32 => "int32",
            Self::Int8 => "int8",
        }
    }
}
