//! The tensor kinds, declared once: each kind's variant, name and doc (what a
//! layer record's attribute of that kind holds, shape and units included).
//! [`TensorKind`], [`TensorKind::ALL`], [`TensorKind::as_str`] and
//! [`TensorKind::doc`] derive from the declaration below; the bridge exports
//! the names as `kvbudget._core.TENSOR_KINDS` and the docs as
//! `TENSOR_KIND_DOCS`, which `kvbudget.alloc.LayerKV` is built from.

use serde::{Deserialize, Serialize};

macro_rules! tensor_kinds {
    ($( $(#[doc = $doc:literal])* $v:ident = $name:literal, )*) => {
        /// What a tensor holds. Declared in `plan/kinds.rs` (name and doc once).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum TensorKind {
            $( $(#[doc = $doc])* #[serde(rename = $name)] $v, )*
        }

        impl TensorKind {
            /// Every kind, in the order a layer lists its tensors.
            pub const ALL: &'static [Self] = &[ $( Self::$v, )* ];

            /// The snake_case name (the JSON form, `TensorSpec.kind` in Python).
            pub const fn as_str(self) -> &'static str {
                match self { $( Self::$v => $name, )* }
            }

            /// What a tensor of this kind holds: its doc, shape and units included.
            pub const fn doc(self) -> &'static str {
                match self { $( Self::$v => concat!($($doc, "\n"),*), )* }
            }
        }
    };
}

tensor_kinds! {
    /// Keys `[rows, heads, dk]` (MHA/GQA), elements of the storage dtype.
    K = "k",
    /// Values `[rows, heads, dv]` (MHA/GQA), elements of the storage dtype.
    V = "v",
    /// Key block scales (mxfp8 and the FP4 recipes), uint8.
    KScale = "k_scale",
    /// Value block scales (mxfp8 and the FP4 recipes), uint8.
    VScale = "v_scale",
    /// The MLA latent `[rows, 1, kv_lora_rank + qk_rope_head_dim]` (keys and values together).
    Kv = "kv",
    /// The MLA latent's block scales (mxfp8, FP4), uint8.
    KvScale = "kv_scale",
    /// An opaque per-token cache `[rows, bytes]`: a DFLASH draft layer given only its bytes per token, uint8.
    Cache = "cache",
    /// NVFP4 key scales in the native HND layout TRT-LLM reads on SM100 (SGLang
    /// views them as `[rows / page, heads, page, dim / 16]`; the same bytes), uint8.
    NativeKScale = "native_k_scale",
    /// NVFP4 value scales in the native HND layout, uint8.
    NativeVScale = "native_v_scale",
    /// NVFP4's FP8 key dequant workspace (once per pool, on its first layer).
    DqK = "dq_k",
    /// NVFP4's FP8 value dequant workspace (once per pool, on its first layer).
    DqV = "dq_v",
    /// A fused draft pool's one entry tensor `[rows, entry bytes]`: the target's
    /// layers, the draft's and padding (once per pool, on its first layer), uint8.
    Entry = "entry",
    /// The unified pool's one-dimensional byte buffer (on its first layer), uint8.
    Bytes = "bytes",
    /// A DSA layer's index keys and their scales `[rows, bytes per token]`, uint8.
    IndexK = "index_k",
    /// The state pool's conv states `[state layers, slots + 1, conv dim, conv_kernel - 1]`, the
    /// conv dtype (flat `[state layers, slots + 1, conv elements]` for KDA, whose q, k and v
    /// conv states SGLang keeps apart, or an unknown kernel: the same bytes).
    ConvState = "conv_state",
    /// The state pool's temporal (SSM / recurrent) states `[state layers, slots + 1, heads,
    /// head dim, state dim]`, the SSM dtype.
    TemporalState = "temporal_state",
    /// Speculative verify snapshots of the temporal state `[state layers, requests + 1, draft
    /// tokens, heads, head dim, state dim]`, the SSM dtype.
    IntermediateSsm = "intermediate_ssm",
    /// Speculative conv windows: SGLang's deduplicated CUDA layout `[state layers, requests + 1,
    /// conv dim, draft tokens + conv_kernel - 2]`, or dense `[state layers, requests + 1, draft
    /// tokens, ...]` with the conv state's inner dims (tree drafts, KDA), the conv dtype.
    IntermediateConv = "intermediate_conv_window",
    /// ReplaySSM ring of compact `d` records `[state layers, ring slots, heads, ring length,
    /// head dim]`, the conv dtype.
    ReplayD = "replay_d",
    /// ReplaySSM ring of normalised keys `[state layers, ring slots, key heads, ring length, state
    /// dim]`, the conv dtype.
    ReplayK = "replay_k",
    /// ReplaySSM ring of log-decay gates `[state layers, ring slots, heads, ring length]` (KDA: a
    /// last dim of the state dim), float32.
    ReplayG = "replay_g",
    /// ReplaySSM ring of raw values (KDA) or `d`'s low parts (GDN), the shape of `replay_d`, the conv dtype.
    ReplayRawV = "replay_raw_v",
    /// ReplaySSM ring of raw keys (KDA) or the keys' low parts (GDN), the shape of `replay_k`, the conv dtype.
    ReplayRawK = "replay_raw_k",
    /// ReplaySSM ring of KDA's betas `[state layers, slots + 1, heads, ring length]`, float32.
    ReplayBeta = "replay_beta",
    /// ReplaySSM spec-verify write cursors `[requests + 1]`, int32.
    ReplayWritePos = "replay_write_pos",
    /// ReplaySSM spec-verify ring bases `[requests + 1]`, int32.
    ReplayCacheBase = "replay_cache_base",
    /// ReplaySSM spec-verify flush flags `[requests + 1]`, int8.
    ReplayIsFlush = "replay_is_flush",
    /// The bytes each state slot carries for its caller (`extra_bytes_per_req`'s stage share)
    /// `[slots + 1, bytes]`, uint8.
    StateExtra = "state_extra",
}

#[cfg(test)]
mod tests {
    use super::TensorKind;

    #[test]
    fn serde_names_are_the_declared_names() {
        for &k in TensorKind::ALL {
            let json = serde_json::to_value(k).expect("a kind serializes");
            assert_eq!(json, serde_json::Value::from(k.as_str()));
            assert!(!k.doc().trim().is_empty());
        }
    }
}
