//! vLLM 0.33.0 per-layer KV-cache specs: page sizes (bytes per block per layer),
//! spec equality and merging, and the pages one request needs at a given
//! `max_model_len` (VLLM.md sections 2, 5); the storage they hold is [`super::storage`]'s.
//!
//! The FLASH_ATTN defaults apply: no backend packing hook (no head slots, no
//! content override except DeepSeek MLA's opaque rows), the window layers use
//! the primary block size, and the block-stride alignment is 1.

use super::storage::{KvStorage, TorchDtype};
use super::{ErrorKind, VllmError};
use serde::{Deserialize, Serialize};

/// The vLLM spec class of a layer spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpecClass {
    /// `FullAttentionSpec`.
    Full,
    /// `MLAAttentionSpec` (a `FullAttentionSpec` subclass).
    Mla,
    /// `SlidingWindowSpec`.
    Sliding,
    /// `ChunkedLocalAttentionSpec`.
    Chunked,
    /// `MambaSpec` (recurrent state: a page per state, whatever the block size).
    Mamba,
    /// `CrossAttentionSpec` (an encoder-decoder model's cross-attention).
    Cross,
    /// `CircularBufferSpec` (a ring of `block_size` tokens: one block per request for its
    /// whole life, never prefix-cached).
    CircularBuffer,
}

impl SpecClass {
    /// vLLM's class name.
    pub fn class_name(self) -> &'static str {
        match self {
            Self::Full => "FullAttentionSpec",
            Self::Mla => "MLAAttentionSpec",
            Self::Sliding => "SlidingWindowSpec",
            Self::Chunked => "ChunkedLocalAttentionSpec",
            Self::Mamba => "MambaSpec",
            Self::Cross => "CrossAttentionSpec",
            Self::CircularBuffer => "CircularBufferSpec",
        }
    }

    /// `isinstance(spec, FullAttentionSpec)`.
    pub fn is_full_family(self) -> bool {
        matches!(self, Self::Full | Self::Mla)
    }

    /// `spec.prefix_cacheable`: whether the group takes part in prefix caching (all but a ring).
    pub fn prefix_cacheable(self) -> bool {
        self != Self::CircularBuffer
    }

    /// `spec.dcp_sharded`: DCP shards the cache's tokens (`AttentionSpec`'s default; a
    /// `MambaSpec` is replicated).
    pub fn dcp_sharded(self) -> bool {
        self != Self::Mamba
    }
}

/// One layer's KV-cache spec: the fields vLLM compares (the draft flag is not
/// one of them, so it is kept on the layer). Sizes in tokens, heads, elements, bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The spec class.
    pub class: SpecClass,
    /// Tokens per block.
    pub block_size: u64,
    /// KV heads per rank (1 for MLA).
    pub num_kv_heads: u64,
    /// K head dim, elements (MLA: the latent dim).
    pub head_size: u64,
    /// V head dim, elements (MLA: 0).
    pub head_size_v: u64,
    /// Storage dtype and quant mode.
    pub storage: KvStorage,
    /// Tokens one stored state covers (`tokens_per_state`): 1 for attention, more for a
    /// compressed cache, -1 for a state spec (one state per block, as in vLLM's `MambaSpec`).
    pub tokens_per_state: i64,
    /// Padded page, bytes (set by page unification).
    pub page_size_padded: Option<u64>,
    /// Bytes per (head slot, state) cell when packed (DeepSeek MLA rows).
    pub state_content_bytes: Option<u64>,
    /// `max_tp_shards` (MLA: 1; otherwise unknown).
    pub max_tp_shards: Option<u64>,
    /// Sliding window, tokens (sliding specs; full specs promoted from sliding keep it).
    pub sliding_window: Option<u64>,
    /// Chunk, tokens (chunked specs; full specs promoted from chunked keep it).
    pub attention_chunk_size: Option<u64>,
    /// Extra trailing tokens a sliding spec retains (multi-module MTP).
    pub extra_retained_tokens: u64,
    /// MLA's `cache_dtype_str`.
    pub cache_dtype_str: Option<String>,
    /// MLA's `cache_role`: a sparse-attention indexer's key cache, not the latent cache.
    pub indexer: bool,
    /// A `MambaSpec`'s own fields (state specs only).
    pub mamba: Option<Box<MambaState>>,
}

/// The fields a `MambaSpec` adds (all take part in its equality).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MambaState {
    /// The state tensors' shapes on one rank, elements per dim.
    pub shapes: Vec<Vec<u64>>,
    /// Their storage dtypes, one per shape.
    pub dtypes: Vec<TorchDtype>,
    /// The backend (`mamba_type`).
    pub mamba_type: super::MambaType,
    /// `mamba_cache_mode == "align"`.
    pub align: bool,
    /// State blocks kept per draft token (`num_speculative_tokens`; 0 with ReplaySSM).
    pub num_speculative_blocks: u64,
    /// Checkpoint blocks a prefill exports (0 or 1).
    pub num_prefill_checkpoint_blocks: u64,
    /// The checkpoint offsets' alignment, tokens.
    pub prefill_checkpoint_alignment: Option<u64>,
    /// Every TP rank holds the state whole.
    pub tp_replicated: bool,
}

impl MambaState {
    /// The state one request keeps in one block, bytes (`state_content_size_bytes`:
    /// Σ over the tensors of elements × dtype bytes); `None` on overflow.
    pub fn checked_content_bytes(&self) -> Option<u64> {
        self.shapes
            .iter()
            .zip(&self.dtypes)
            .try_fold(0u64, |acc, (shape, d)| {
                let elems = shape.iter().try_fold(1u64, |p, &x| p.checked_mul(x))?;
                acc.checked_add(elems.checked_mul(d.size_bytes())?)
            })
    }

    /// Pages one request holds (`max_memory_usage_bytes / page`): `2 + spec + checkpoint`
    /// in align mode, `1 + spec` otherwise.
    pub fn pages_per_request(&self) -> u64 {
        if self.align {
            2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks
        } else {
            1 + self.num_speculative_blocks
        }
    }
}

impl Spec {
    /// A spec of `class` with `block_size` tokens per block and `storage`, every other
    /// field empty (no heads, no padding, no window, no state) or its default (one token
    /// per state for attention).
    pub fn new(class: SpecClass, block_size: u64, storage: KvStorage) -> Self {
        Self {
            class,
            block_size,
            num_kv_heads: 0,
            head_size: 0,
            head_size_v: 0,
            storage,
            tokens_per_state: if class == SpecClass::Mamba { -1 } else { 1 },
            page_size_padded: None,
            state_content_bytes: None,
            max_tp_shards: None,
            sliding_window: None,
            attention_chunk_size: None,
            extra_retained_tokens: 0,
            cache_dtype_str: None,
            indexer: false,
            mamba: None,
        }
    }
}

/// Python's `cdiv(a, b)` (`-(a // -b)`) for `b > 0`.
pub(crate) fn cdiv(a: i128, b: i128) -> i128 {
    -((-a).div_euclid(b))
}

impl Spec {
    /// The page without padding, bytes: `heads × states × content` ([`Self::num_states`]
    /// states per block), where a (head, state) cell holds `state_content_bytes` or
    /// `(Dk + Dv) × dtype bytes`; `None` on overflow.
    pub fn checked_unpadded_page_size_bytes(&self) -> Option<u64> {
        if let Some(m) = &self.mamba {
            return m.checked_content_bytes();
        }
        self.checked_state_content_bytes()?
            .checked_mul(self.num_kv_heads)?
            .checked_mul(self.num_states())
    }

    /// Bytes of one (head slot, state) cell (`state_content_size_bytes`):
    /// `state_content_bytes` when packed, else `(Dk + Dv) × dtype bytes`; `None` on overflow.
    pub fn checked_state_content_bytes(&self) -> Option<u64> {
        if let Some(m) = &self.mamba {
            return m.checked_content_bytes();
        }
        match self.state_content_bytes {
            Some(c) => Some(c),
            None => self
                .head_size
                .checked_add(self.head_size_v)?
                .checked_mul(self.storage.dtype.size_bytes()),
        }
    }

    /// The page without padding, bytes (inside the planner's domain, which
    /// bounds every page when the spec is built, so it cannot overflow).
    pub fn unpadded_page_size_bytes(&self) -> u64 {
        self.checked_unpadded_page_size_bytes().unwrap_or(u64::MAX)
    }

    /// States per block (`num_states`): `block_size / tokens_per_state` (floored; a block's
    /// tokens for plain attention), or one when `tokens_per_state` is not positive (a state layer).
    pub fn num_states(&self) -> u64 {
        match u64::try_from(self.tokens_per_state) {
            Ok(t) if t > 0 => self.block_size / t,
            _ => 1,
        }
    }

    /// The torch dtype a layer's view holds (`spec.dtype`; a state layer's view stays `int8`).
    pub fn view_dtype(&self) -> &'static str {
        if self.class == SpecClass::Mamba {
            "int8"
        } else {
            self.storage.dtype.torch_name()
        }
    }

    /// A state page padded below its state (a drafter's larger state): vLLM's
    /// `MambaSpec.page_size_bytes` asserts against it when it first reads the page.
    pub fn padding_too_small(&self) -> bool {
        self.mamba.is_some()
            && self
                .page_size_padded
                .is_some_and(|p| p < self.unpadded_page_size_bytes())
    }

    /// The page, bytes (the padded page when set).
    pub fn page_size_bytes(&self) -> u64 {
        self.page_size_padded
            .unwrap_or_else(|| self.unpadded_page_size_bytes())
    }

    /// `merge_window_sizes`: at most one distinct value.
    fn merge_window(values: &[Option<u64>]) -> Result<Option<u64>, VllmError> {
        let mut out: Option<u64> = None;
        for v in values.iter().flatten() {
            match out {
                Some(o) if o != *v => {
                    return Err(VllmError::new(
                        ErrorKind::ValueError,
                        "All attention layers in the same KV cache group must have the same window size.",
                    ))
                }
                _ => out = Some(*v),
            }
        }
        Ok(out)
    }

    /// The `AttentionSpec` fields vLLM's full/MLA merges require to agree.
    fn same_attention_fields(&self, o: &Self) -> bool {
        self.block_size == o.block_size
            && self.num_kv_heads == o.num_kv_heads
            && self.head_size == o.head_size
            && self.head_size_v == o.head_size_v
            && self.storage == o.storage
            && self.tokens_per_state == o.tokens_per_state
            && self.page_size_padded == o.page_size_padded
            && self.state_content_bytes == o.state_content_bytes
            && self.max_tp_shards == o.max_tp_shards
    }

    /// `type(specs[0]).merge(specs)`: the merged spec, or vLLM's exception
    /// (`AssertionError` for incompatible specs, `ValueError` for differing windows).
    pub fn merge(specs: &[&Spec]) -> Result<Spec, VllmError> {
        let first = specs[0];
        let assertion = |m: &str| Err(VllmError::new(ErrorKind::AssertionError, m));
        match first.class {
            SpecClass::Full => {
                if !specs.iter().all(|s| s.class.is_full_family()) {
                    return assertion("All attention layers in the same KV cache group must be FullAttentionSpec.");
                }
                if specs.iter().any(|s| s.class == SpecClass::Mla) {
                    return assertion(
                        "MLAAttentionSpec should be merged in MLAAttentionSpec.merge",
                    );
                }
                let sw = Self::merge_window(
                    &specs.iter().map(|s| s.sliding_window).collect::<Vec<_>>(),
                )?;
                let ch = Self::merge_window(
                    &specs
                        .iter()
                        .map(|s| s.attention_chunk_size)
                        .collect::<Vec<_>>(),
                )?;
                let merged = Spec {
                    sliding_window: sw,
                    attention_chunk_size: ch,
                    ..first.clone()
                };
                if !specs.iter().all(|s| s.same_attention_fields(&merged)) {
                    return assertion("All attention layers in the same KV cache group must have the same attention spec.");
                }
                if sw.is_some() && ch.is_some() {
                    return assertion("Model with both sliding window layers and chunked local attention layers is not supported.");
                }
                Ok(merged)
            }
            SpecClass::Mla => {
                if !specs.iter().all(|s| s.class == SpecClass::Mla) {
                    return assertion(
                        "All attention layers in the same KV cache group must be MLAAttentionSpec.",
                    );
                }
                if !specs.iter().all(|s| {
                    s.cache_dtype_str == first.cache_dtype_str
                        && s.tokens_per_state == first.tokens_per_state
                        && s.indexer == first.indexer
                }) {
                    return assertion("All attention layers in the same KV cache group must use the same quantization method, top-k buffer width, tokens per state, model version, cache role, index-sharing role, and block stride alignment.");
                }
                let merged = Spec {
                    sliding_window: None,
                    attention_chunk_size: None,
                    ..first.clone()
                };
                if !specs.iter().all(|s| s.same_attention_fields(&merged)) {
                    return assertion("All attention layers in the same KV cache group must have the same attention spec.");
                }
                Ok(merged)
            }
            SpecClass::Sliding
            | SpecClass::Chunked
            | SpecClass::Mamba
            | SpecClass::Cross
            | SpecClass::CircularBuffer => {
                if specs.iter().all(|s| *s == first) {
                    Ok(first.clone())
                } else {
                    assertion("All layers in the same KV cache group must be the same.")
                }
            }
        }
    }

    /// `is_uniform_with_collection`: the registry's uniform-type rule (full and
    /// MLA share the full-attention base; sliding needs equal windows; chunked
    /// equal chunks; a ring is uniform with rings).
    pub fn is_uniform_with(&self, all: &[&Spec]) -> bool {
        match self.class {
            SpecClass::Full | SpecClass::Mla => all.iter().all(|s| s.class.is_full_family()),
            SpecClass::Sliding => all
                .iter()
                .all(|s| s.class == SpecClass::Sliding && s.sliding_window == self.sliding_window),
            SpecClass::Chunked => all.iter().all(|s| {
                s.class == SpecClass::Chunked && s.attention_chunk_size == self.attention_chunk_size
            }),
            SpecClass::Cross | SpecClass::CircularBuffer => {
                all.iter().all(|s| s.class == self.class)
            }
            SpecClass::Mamba => {
                let (Some(m), page) = (&self.mamba, self.page_size_bytes()) else {
                    return false;
                };
                all.iter().all(|s| {
                    s.mamba.as_ref().is_some_and(|o| {
                        o.num_speculative_blocks == m.num_speculative_blocks
                            && o.num_prefill_checkpoint_blocks == m.num_prefill_checkpoint_blocks
                            && o.prefill_checkpoint_alignment == m.prefill_checkpoint_alignment
                            && o.tp_replicated == m.tp_replicated
                    }) && s.page_size_bytes() == page
                })
            }
        }
    }

    /// Blocks one request needs at `max_model_len` tokens (`cdiv(max_memory_usage_bytes, page)`),
    /// with `in_flight` = F tokens, `dcp` the decode-context-parallel size and `encoder_tokens`
    /// the scheduler's `max_num_encoder_input_tokens` (a cross-attention layer's charge).
    pub fn pages_per_request(
        &self,
        max_model_len: u64,
        in_flight: u64,
        dcp: u64,
        encoder_tokens: u64,
    ) -> Result<u64, VllmError> {
        let m = i128::from(max_model_len);
        let b = i128::from(self.block_size);
        let f = i128::from(in_flight);
        let pages = match self.class {
            SpecClass::Full | SpecClass::Mla => {
                let m = if dcp > 1 { cdiv(m, i128::from(dcp)) } else { m };
                cdiv(m, b)
            }
            SpecClass::Sliding => {
                if dcp != 1 {
                    return Err(VllmError::new(
                        ErrorKind::AssertionError,
                        "DCP not support sliding window.",
                    ));
                }
                let w = i128::from(self.sliding_window.unwrap_or(0));
                let tokens = (w - 1 + i128::from(self.extra_retained_tokens) + f).min(m);
                cdiv(tokens, b) + 1
            }
            SpecClass::Chunked => {
                let c = i128::from(self.attention_chunk_size.unwrap_or(0));
                cdiv((c + f).min(m), b)
            }
            SpecClass::Cross => cdiv(i128::from(encoder_tokens), b),
            // The ring holds one block for the request's whole life (its page, in pages).
            SpecClass::CircularBuffer => 1,
            // Mamba state is replicated across DCP ranks, never sharded.
            SpecClass::Mamba => {
                i128::from(self.mamba.as_ref().map_or(1, |s| s.pages_per_request()))
            }
        };
        u64::try_from(pages)
            .map_err(|_| VllmError::new(ErrorKind::Input, "negative pages per request"))
    }
}
