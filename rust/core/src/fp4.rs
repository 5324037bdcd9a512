//! The FP4 KV recipes (`nvfp4`, `fp4_mx_block16`) in the Default configurator:
//! which buffers a recipe allocates for the chosen attention backends, and
//! the cell size SGLang 0.5.23's quant methods price (`compute_cell_size`).
//!
//! Per layer and token, with `n` heads per rank and K head dim `h` (both
//! recipes price V at `h`, whatever `v_head_dim` is):
//! - data: `n * (h // 2) * 2` bytes (K and V, two FP4 values per byte);
//! - `fp4_mx_block16`: one scale layout `(n * h // 16) * 2` bytes;
//! - `nvfp4`: `n * (h // 16) * 2` bytes per scale layout, times the layouts
//!   the backends read (a linear layout for FlashInfer's dequantizing prefill
//!   or for native FP4 on SM120; a native HND layout for TRT-LLM on SM100);
//!   plus, with FlashInfer prefill, one FP8 dequant workspace of
//!   `n * h * 2` bytes per token shared by every layer.

use crate::arith::{add, mul};
use crate::dtype::KvDtype;
use crate::error::{Fail, PlanError, Result};
use crate::fields::Named;
use crate::serving::ServingConfig;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// Elements per FP4 scale (both recipes).
pub const FP4_SCALE_BLOCK: u64 = 16;

/// An attention backend, as SGLang names it (`--prefill-attention-backend`,
/// `--decode-attention-backend`); kvbudget reads it only to price the FP4 recipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionBackend {
    /// FlashInfer.
    #[default]
    Flashinfer,
    /// TensorRT-LLM MHA (reads native packed FP4).
    TrtllmMha,
    /// Triton.
    Triton,
    /// PyTorch native.
    TorchNative,
    /// FlexAttention.
    FlexAttention,
    /// FlashAttention 3.
    Fa3,
    /// FlashAttention 4.
    Fa4,
    /// Intel AMX (CPU).
    IntelAmx,
    /// AMD aiter.
    Aiter,
}

impl Named for AttentionBackend {
    const ALL: &'static [Self] = &[
        Self::Flashinfer,
        Self::TrtllmMha,
        Self::Triton,
        Self::TorchNative,
        Self::FlexAttention,
        Self::Fa3,
        Self::Fa4,
        Self::IntelAmx,
        Self::Aiter,
    ];
    const NAMES: &'static [&'static str] = &[
        "flashinfer",
        "trtllm_mha",
        "triton",
        "torch_native",
        "flex_attention",
        "fa3",
        "fa4",
        "intel_amx",
        "aiter",
    ];
    fn name(self) -> &'static str {
        let i = Self::ALL.iter().position(|b| *b == self).unwrap_or(0);
        Self::NAMES[i]
    }
}

impl FromStr for AttentionBackend {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        Self::NAMES
            .iter()
            .position(|n| *n == lower)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| {
                PlanError::invalid(format!(
                    "attention backend: unknown backend {s:?}; expected one of {}",
                    Self::NAMES.join(", ")
                ))
            })
    }
}

/// The buffers an FP4 recipe allocates besides the packed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fp4Buffers {
    /// A token-linear scale layout `[rows, heads, h // 16]` per K and V.
    pub linear_scales: bool,
    /// A native HND scale layout (same bytes) per K and V (TRT-LLM on SM100).
    pub native_scales: bool,
    /// One FP8 dequant workspace `[rows, heads, h]` per K and V, shared by every layer.
    pub dequant_workspace: bool,
    /// Block-16 FP4's flattened scales `[rows, heads * h // 16]` per K and V.
    pub flat_scales: bool,
}

/// The buffers `dtype` allocates with the serving's attention backends and GPU
/// (SGLang's access registry: NVFP4 prefill on FlashInfer dequantizes into a
/// workspace; prefill or decode on TRT-LLM MHA reads native FP4). `None` for
/// a dtype that is not an FP4 recipe; an error for `nvfp4` without both backends.
pub fn fp4_buffers<E: Fail>(
    dtype: KvDtype,
    serving: &ServingConfig,
) -> std::result::Result<Option<Fp4Buffers>, E> {
    match dtype {
        KvDtype::Fp4MxBlock16 => Ok(Some(Fp4Buffers {
            linear_scales: false,
            native_scales: false,
            dequant_workspace: false,
            flat_scales: true,
        })),
        KvDtype::Nvfp4 => {
            let (Some(prefill), Some(decode)) = (
                serving.prefill_attention_backend,
                serving.decode_attention_backend,
            ) else {
                return Err(E::invalid_with(|| {
                    "kv_cache_dtype nvfp4 is priced by the attention backends that read it: give \
                     prefill_attention_backend and decode_attention_backend"
                        .into()
                }));
            };
            let workspace = prefill == AttentionBackend::Flashinfer;
            let native =
                prefill == AttentionBackend::TrtllmMha || decode == AttentionBackend::TrtllmMha;
            Ok(Some(Fp4Buffers {
                linear_scales: workspace || (native && !serving.is_sm100),
                native_scales: native && serving.is_sm100,
                dequant_workspace: workspace,
                flat_scales: false,
            }))
        }
        _ => Ok(None),
    }
}

/// The Default configurator's MHA cell size under an FP4 recipe, bytes per
/// token: `n` heads per rank, K head dim `h`, `layers` layers.
pub fn fp4_cell_size<E: Fail>(
    buffers: Fp4Buffers,
    n: u64,
    h: u64,
    layers: u64,
) -> std::result::Result<u64, E> {
    let what = "FP4 cell size";
    let per_layer_kv = |elems: u64| mul(mul(elems, layers, what)?, 2, what);
    let data = per_layer_kv(mul(n, h / 2, what)?)?;
    let layout = per_layer_kv(mul(n, h / FP4_SCALE_BLOCK, what)?)?;
    let scales = if buffers.flat_scales {
        per_layer_kv(mul(n, h, what)? / FP4_SCALE_BLOCK)?
    } else {
        let count = u64::from(buffers.linear_scales) + u64::from(buffers.native_scales);
        mul(layout, count, what)?
    };
    let workspace = if buffers.dequant_workspace {
        mul(mul(n, h, what)?, 2, what)?
    } else {
        0
    };
    add(add(data, scales, what)?, workspace, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    fn serving(prefill: AttentionBackend, decode: AttentionBackend, sm100: bool) -> ServingConfig {
        ServingConfig {
            kv_cache_dtype: KvDtype::Nvfp4,
            prefill_attention_backend: Some(prefill),
            decode_attention_backend: Some(decode),
            is_sm100: sm100,
            ..ServingConfig::default()
        }
    }

    fn cell(dtype: KvDtype, s: &ServingConfig) -> u64 {
        let b = fp4_buffers::<ErrorCode>(dtype, s).unwrap().unwrap();
        // 8 heads of 128, 32 layers: data 8 * 64 * 32 * 2 = 32768 bytes per token.
        fp4_cell_size::<ErrorCode>(b, 8, 128, 32).unwrap()
    }

    #[test]
    fn nvfp4_prices_the_layouts_its_backends_read() {
        use AttentionBackend::{Flashinfer, Triton, TrtllmMha};
        // TRT-LLM on SM100: one native layout (8 * 8 * 32 * 2 = 4096).
        assert_eq!(
            cell(KvDtype::Nvfp4, &serving(TrtllmMha, TrtllmMha, true)),
            32768 + 4096
        );
        // On SM120 the same access reads the linear layout instead: same bytes.
        assert_eq!(
            cell(KvDtype::Nvfp4, &serving(TrtllmMha, TrtllmMha, false)),
            32768 + 4096
        );
        // FlashInfer prefill dequantizes: a linear layout and the 8 * 128 * 2 workspace;
        // TRT-LLM decode on SM100 adds the native layout.
        assert_eq!(
            cell(KvDtype::Nvfp4, &serving(Flashinfer, TrtllmMha, true)),
            32768 + 2 * 4096 + 2048
        );
        // No backend reads FP4 natively or dequantizes: data only.
        assert_eq!(cell(KvDtype::Nvfp4, &serving(Triton, Triton, true)), 32768);
    }

    #[test]
    fn block16_flattens_its_scales_and_needs_no_backends() {
        let s = ServingConfig::default();
        // (8 * 128 // 16) * 32 * 2 = 4096 scale bytes.
        assert_eq!(cell(KvDtype::Fp4MxBlock16, &s), 32768 + 4096);
        assert!(fp4_buffers::<ErrorCode>(KvDtype::Bf16, &s)
            .unwrap()
            .is_none());
        let err = fp4_buffers::<PlanError>(KvDtype::Nvfp4, &s).unwrap_err();
        assert!(
            err.message().contains("prefill_attention_backend"),
            "{err:?}"
        );
    }
}
