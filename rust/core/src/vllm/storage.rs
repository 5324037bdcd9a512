//! vLLM 0.33.0's KV storage: the torch dtypes a cache is held in, `KVQuantMode`, the
//! resolution of `--kv-cache-dtype` against the model dtype (`get_kv_cache_torch_dtype`,
//! `get_kv_quant_mode`), and DeepSeek MLA's opaque row sizes (bytes per token).

use super::{ErrorKind, VllmError};
use serde::{Deserialize, Serialize};

/// A torch storage dtype a KV cache can be held in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TorchDtype {
    /// `torch.float32`, 4 bytes.
    Float32,
    /// `torch.float16`, 2 bytes.
    Float16,
    /// `torch.bfloat16`, 2 bytes.
    BFloat16,
    /// `torch.uint8`, 1 byte (vLLM's storage for fp8 / packed caches).
    UInt8,
    /// `torch.int8`, 1 byte.
    Int8,
    /// `torch.float8_e4m3fn`, 1 byte (`fp8_inc`).
    Float8E4M3,
}

impl TorchDtype {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            Self::Float32 => 4,
            Self::Float16 | Self::BFloat16 => 2,
            Self::UInt8 | Self::Int8 | Self::Float8E4M3 => 1,
        }
    }

    /// torch's name without the `torch.` prefix (`str(dtype)`).
    pub fn torch_name(self) -> &'static str {
        match self {
            Self::Float32 => "float32",
            Self::Float16 => "float16",
            Self::BFloat16 => "bfloat16",
            Self::UInt8 => "uint8",
            Self::Int8 => "int8",
            Self::Float8E4M3 => "float8_e4m3fn",
        }
    }

    /// The dtype of torch's name (`str(dtype)` without `torch.`), or `None` for one not listed.
    pub fn from_torch_name(name: &str) -> Option<Self> {
        [
            Self::Float32,
            Self::Float16,
            Self::BFloat16,
            Self::UInt8,
            Self::Int8,
            Self::Float8E4M3,
        ]
        .into_iter()
        .find(|d| d.torch_name() == name)
    }

    /// vLLM's string-to-dtype table (`STR_DTYPE_TO_TORCH_DTYPE`).
    pub fn from_vllm_name(name: &str) -> Option<Self> {
        Some(match name {
            "float32" | "float" => Self::Float32,
            "half" | "float16" => Self::Float16,
            "bfloat16" => Self::BFloat16,
            "int8" | "int8_per_token_head" => Self::Int8,
            "fp8_inc" => Self::Float8E4M3,
            "fp8"
            | "fp8_e4m3"
            | "fp8_e5m2"
            | "int4_per_token_head"
            | "fp8_per_token_head"
            | "fp8_ds_mla"
            | "nvfp4_ds_mla"
            | "turboquant_k8v4"
            | "turboquant_4bit_nc"
            | "turboquant_k3v4_nc"
            | "turboquant_3bit_nc"
            | "octave_k3v4"
            | "octave_k3v3"
            | "octave_k3v3_compact"
            | "ultraquant_4bit"
            | "nvfp4"
            | "nvfp4_4over6" => Self::UInt8,
            _ => return None,
        })
    }
}

/// vLLM's `KVQuantMode` (the value is vLLM's enum value; it is part of spec equality).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvQuantMode(pub u8);

impl KvQuantMode {
    /// `KVQuantMode.NONE`.
    pub const NONE: Self = Self(0);

    /// `get_kv_quant_mode(kv_cache_dtype)` with vLLM's (empty) handler table.
    pub fn from_kv_cache_dtype(s: &str) -> Self {
        Self(match s {
            "int4_per_token_head" => 4,
            "int8_per_token_head" => 2,
            "fp8_per_token_head" => 3,
            "nvfp4_ds_mla" => 10,
            _ if s.starts_with("nvfp4") => 5,
            "turboquant_k8v4" => 6,
            "turboquant_4bit_nc" => 7,
            "turboquant_k3v4_nc" => 8,
            "turboquant_3bit_nc" => 9,
            "ultraquant_4bit" => 11,
            "octave_k3v4" => 12,
            "octave_k3v3" => 13,
            "octave_k3v3_compact" => 14,
            _ if s.starts_with("fp8") => 1,
            _ => 0,
        })
    }
}

/// The resolved KV storage of a layer: `get_kv_cache_torch_dtype` and the quant mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvStorage {
    /// The storage dtype.
    pub dtype: TorchDtype,
    /// The quant mode.
    pub quant: KvQuantMode,
}

/// Resolves `kv_cache_dtype` against the model dtype as vLLM does ("auto" takes
/// the model dtype); vLLM's `ValueError` texts for unknown names.
pub fn resolve_storage(kv_cache_dtype: &str, model_dtype: &str) -> Result<KvStorage, VllmError> {
    let dtype = if kv_cache_dtype == "auto" {
        TorchDtype::from_vllm_name(model_dtype).ok_or_else(|| {
            VllmError::new(
                ErrorKind::ValueError,
                format!("Invalid model dtype: {model_dtype}"),
            )
        })?
    } else {
        TorchDtype::from_vllm_name(kv_cache_dtype).ok_or_else(|| {
            VllmError::new(
                ErrorKind::ValueError,
                format!("Invalid kv cache dtype: {kv_cache_dtype}"),
            )
        })?
    };
    Ok(KvStorage {
        dtype,
        quant: KvQuantMode::from_kv_cache_dtype(kv_cache_dtype),
    })
}

/// Bytes per token of DeepSeek's opaque MLA rows (`fp8_ds_mla`, `nvfp4_ds_mla`).
pub fn ds_mla_row_bytes(kv_cache_dtype: &str) -> Option<u64> {
    match kv_cache_dtype {
        "fp8_ds_mla" => Some(656),
        "nvfp4_ds_mla" => Some(352),
        _ => None,
    }
}
