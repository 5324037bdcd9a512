//! vLLM 0.33.0's KV-cache planner for attention models, restated in plain
//! integers (VLLM.md sections 1-7; vLLM's released `kv_cache_planning.py`,
//! `kv_cache_interface.py` and `kv_cache_utils.py` are the contract).
//!
//! [`plan`] takes per-layer specs in registration order, each worker's KV
//! budget `A` (bytes) and the engine settings, and returns what vLLM's engine
//! core decides: the groups, `num_blocks`, bytes per block, per-request bytes,
//! the per-worker tensors, the capacity log numbers, and vLLM's warning and
//! error texts.
//!
//! Scope: full, sliding-window, chunked-local and MLA attention (compressed caches of
//! several tokens per state among them), circular buffers, and state
//! (`MambaSpec`) layers with vLLM's hybrid block-size alignment ([`mamba`]); grouping
//! cases 0 to 4 (with the MLA + sliding fallback; case 3, block-outer packing, under
//! a block-outer [`KvCacheLayout`]); the FLASH_ATTN backend defaults (no packing
//! hooks, the primary block size for window layers, stride alignment 1); every
//! resolved layout's placement and strides. Not modelled: hidden-state, HiSparse, backend packing such as
//! Triton's per-token-head scales or FlashInfer's NVFP4 slots (under
//! FLASH_ATTN those modes store one byte per element, as vLLM's specs do).
//!
//! Units: bytes for memory, tokens for lengths and blocks' capacity, elements
//! for head dims.

pub mod batch;
mod capacity;
mod group;
pub mod json;
pub mod mamba;
mod merge;
mod packed;
mod place;
mod plan;
pub mod record;
mod scheduler;
pub mod settings;
pub mod spec;
pub mod state_shape;
pub mod storage;

pub use group::{Group, GroupSpec};
pub use mamba::{align_hybrid_block_size, HybridAlignment};
pub use plan::plan;
pub use record::{Record, Setting, SettingKind, VllmEngine, VllmLayer};
pub use spec::{Spec, SpecClass};
pub use storage::{KvQuantMode, KvStorage, TorchDtype};

use serde::{Deserialize, Serialize};
use std::fmt;

/// The vLLM release this planner restates.
pub const VLLM_VERSION: &str = "0.33.0";

/// Defines a named choice: the enum (serde by name), [`Choice`]'s table, and `name`.
macro_rules! vllm_choice {
    ($(#[doc = $doc:literal])* $T:ident { $( $(#[$vattr:meta])* $V:ident = $name:literal, )* }) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $T {
            $( $(#[$vattr])* #[serde(rename = $name)] $V, )*
        }
        impl Choice for $T {
            const ALL: &'static [Self] = &[$(Self::$V),*];
            const NAMES: &'static [&'static str] = &[$($name),*];
            const EXPECTED: &'static str = concat!("one of" $(, " \"", $name, "\"")*);
        }
        impl $T {
            /// Every value, in the order of [`Self::NAMES`].
            pub const ALL: &'static [Self] = <Self as Choice>::ALL;
            /// The names (the JSON and Python form), in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = <Self as Choice>::NAMES;
            /// The value's name.
            pub fn name(self) -> &'static str {
                match self { $( Self::$V => $name, )* }
            }
        }
    };
}

/// A closed set of named values (a `choice` in the declaration): its values and names, in order.
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value.
    const ALL: &'static [Self];
    /// Their names, in the same order.
    const NAMES: &'static [&'static str];
    /// What a JSON value must be, for the error message.
    const EXPECTED: &'static str;
}

vllm_choice! {
    /// A layer's KV-cache kind.
    LayerKind {
        /// Full attention (`FullAttentionSpec`).
        #[default]
        Full = "full",
        /// Sliding-window attention (`SlidingWindowSpec`).
        Sliding = "sliding",
        /// Chunked local attention (`ChunkedLocalAttentionSpec`).
        Chunked = "chunked",
        /// Multi-head latent attention (`MLAAttentionSpec`: one latent head, no V).
        Mla = "mla",
        /// Recurrent state (`MambaSpec`: Mamba, gated delta net, linear attention, short conv).
        Mamba = "mamba",
        /// A DeepSeek sparse-attention (DSA) indexer's key cache (`DeepseekV32IndexerCache`:
        /// an `MLAAttentionSpec` with `cache_role=INDEXER` and `max_tp_shards=1`, one head of
        /// `head_size` elements of `indexer_dtype`, whatever `kv_cache_dtype` says).
        MlaIndexer = "mla_indexer",
        /// A sparse-attention indexer's key cache without a TP-shard cap (MiniMax-M3's
        /// `MiniMaxM3IndexerCache`: an `MLAAttentionSpec` with `cache_role=INDEXER`, one head of
        /// `head_size` elements of `indexer_dtype`, whatever `kv_cache_dtype` says).
        KeyIndexer = "key_indexer",
        /// An encoder-decoder model's cross-attention (`CrossAttentionSpec`: it caches the
        /// encoder's keys and values, `max_num_encoder_input_tokens` of them per request).
        Cross = "cross",
        /// A ring of recent rows (`CircularBufferSpec`): `block_size` is its capacity, tokens,
        /// and a request holds one block of it for its whole life, never prefix-cached
        /// (Qwen4-Exp's QSA raw keys, GLM-5-Next's indexer tail, DeepSeek-V4.1's compressor state).
        CircularBuffer = "circular_buffer",
    }
}

vllm_choice! {
    /// A state layer's backend (`MambaAttentionBackendEnum`; part of `MambaSpec` equality).
    MambaType {
        /// `MAMBA1` (Mamba-1 selective scan: Jamba, Falcon-Mamba).
        Mamba1 = "mamba1",
        /// `MAMBA2` (Nemotron-H, Falcon-H1, Granite-4.0-H, Bamba).
        #[default]
        Mamba2 = "mamba2",
        /// `SHORT_CONV` (LFM2).
        ShortConv = "short_conv",
        /// `LINEAR` (MiniMax linear attention).
        Linear = "linear",
        /// `GDN_ATTN` (gated delta net: Qwen3-Next, Qwen3.5, Kimi-Linear's KDA, Olmo-Hybrid).
        GdnAttn = "gdn_attn",
    }
}

vllm_choice! {
    /// vLLM's `--mamba-backend` (`MambaConfig.backend`): the selective-state-update kernels.
    MambaBackend {
        /// `TRITON` (vLLM's default).
        #[default]
        Triton = "triton",
        /// `FLASHINFER`.
        Flashinfer = "flashinfer",
    }
}

vllm_choice! {
    /// Which prefill-checkpoint export a state layer's class adds to its `MambaSpec`.
    PrefillCheckpoint {
        /// None (`MambaBase.get_kv_cache_spec`: Mamba-1, short conv, linear, Kimi and
        /// Olmo gated delta nets, a Qwen gated delta net without FlashInfer's prefill).
        #[default]
        None = "none",
        /// `MambaMixer2`'s: one checkpoint block at alignment 1 (it declares no alignment).
        Mamba2 = "mamba2",
        /// `QwenGatedDeltaNetAttention` with FlashInfer's prefill: in align mode it
        /// declares an alignment of 64 tokens and, when every state layer declares
        /// one, keeps one checkpoint block on the prefix-cache grid (the Mamba block).
        FlashinferGdn = "flashinfer_gdn",
        /// Qwen4-Exp's `Qwen4ExpPLELayer` (a short-convolution state): in align mode it declares
        /// an alignment of 1 and, when every state layer declares one, keeps one checkpoint
        /// block on the prefix-cache grid (the Mamba block).
        PleShortConv = "ple_short_conv",
        /// GLM-5-Next's `Glm5NextLinearAttention` (KDA) on FlashKDA's prefill (Hopper, head dim 128,
        /// bf16, a bounded gate): one checkpoint block at an alignment of 16 tokens in any mode; it
        /// declares no alignment to the platform.
        Flashkda = "flashkda",
    }
}

vllm_choice! {
    /// The physical KV-cache layout vLLM resolved for the model (`KVCacheLayout`, RFC
    /// vllm-project/vllm#42082): the order of the logical axes `[L, B, H, N, C]` (layers,
    /// blocks, head slots, states, content) in memory, outermost first. The engine core picks
    /// it from every backend's `supported_kv_cache_layouts` (`resolve_kv_cache_layout`);
    /// `VLLM_KV_CACHE_LAYOUT` names one. FLASH_ATTN declares no set, so it is `LBNHC`.
    KvCacheLayout {
        /// `[L, B, H, N, C]`.
        Lbhnc = "LBHNC",
        /// `[L, B, N, H, C]` (the default preference: FLASH_ATTN's `NHD`).
        #[default]
        Lbnhc = "LBNHC",
        /// `[L, H, B, N, C]`.
        Lhbnc = "LHBNC",
        /// `[B, L, H, N, C]` (block-outer).
        Blhnc = "BLHNC",
        /// `[B, L, N, H, C]` (block-outer).
        Blnhc = "BLNHC",
        /// `[B, H, L, N, C]` (block-outer).
        Bhlnc = "BHLNC",
    }
}

/// A logical axis of a KV-cache tensor (`[L, B, H, N, C]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Layers.
    L,
    /// Blocks.
    B,
    /// Head slots.
    H,
    /// States (tokens) per block.
    N,
    /// Content, bytes.
    C,
}

impl KvCacheLayout {
    /// The logical axes in memory order, outermost first.
    pub fn order(self) -> [Axis; 5] {
        use Axis::{B, C, H, L, N};
        match self {
            Self::Lbhnc => [L, B, H, N, C],
            Self::Lbnhc => [L, B, N, H, C],
            Self::Lhbnc => [L, H, B, N, C],
            Self::Blhnc => [B, L, H, N, C],
            Self::Blnhc => [B, L, N, H, C],
            Self::Bhlnc => [B, H, L, N, C],
        }
    }

    /// The layer axis is outermost (`is_layer_compact`).
    pub fn is_layer_compact(self) -> bool {
        self.order()[0] == Axis::L
    }

    /// The block axis is outermost (`is_block_outermost`): each block is one packed
    /// record of its layers' pages.
    pub fn is_block_outermost(self) -> bool {
        self.order()[0] == Axis::B
    }

    /// `L` and `B` are the two outermost axes (`is_block_compact`): each page is one
    /// contiguous run of bytes.
    pub fn is_block_compact(self) -> bool {
        matches!(self.order()[..2], [Axis::L, Axis::B] | [Axis::B, Axis::L])
    }
}

vllm_choice! {
    /// vLLM's `--mamba-cache-mode` (resolved against prefix caching by `MambaModelConfig`).
    MambaCacheMode {
        /// One state per request (prefix caching off).
        #[default]
        None = "none",
        /// States kept at block boundaries for prefix caching.
        Align = "align",
    }
}

impl VllmLayer {
    /// A full-attention bf16 layer with `heads` KV heads per rank and head dim `head_size`.
    pub fn full(name: impl Into<String>, heads: u64, head_size: u64) -> Self {
        Self {
            name: name.into(),
            kind: LayerKind::Full,
            num_kv_heads: heads,
            head_size,
            ..Self::default()
        }
    }

    /// A sliding-window bf16 layer with a window of `window` tokens.
    pub fn sliding(name: impl Into<String>, heads: u64, head_size: u64, window: u64) -> Self {
        Self {
            kind: LayerKind::Sliding,
            sliding_window: Some(window),
            ..Self::full(name, heads, head_size)
        }
    }
}

/// `--max-model-len`: a number of tokens, or `auto` (start from the model's
/// derived limit, [`VllmEngine::derived_max_model_len`], and shrink it to what fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MaxModelLen {
    /// A fixed maximum length, tokens.
    Tokens(u64),
    /// `--max-model-len auto`.
    Auto,
}

impl VllmEngine {
    /// The length planning starts from, tokens, and whether it is `auto` (then
    /// it is `derived_max_model_len`, which `auto` needs).
    pub fn start_max_model_len(&self) -> Result<(u64, bool), VllmError> {
        match self.max_model_len {
            MaxModelLen::Tokens(n) => Ok((n, false)),
            MaxModelLen::Auto => self.derived_max_model_len.map(|n| (n, true)).ok_or_else(|| {
                VllmError::new(
                    ErrorKind::Input,
                    "max_model_len='auto' needs derived_max_model_len (the model's own limit, tokens)",
                )
            }),
        }
    }

    /// `max_concurrent_batches` (VLLM.md section 5).
    pub fn max_concurrent_batches(&self) -> u64 {
        if self.async_scheduling {
            if self.use_v2_model_runner {
                return self.pp + 1;
            }
            if self.pp <= 1 {
                return 2;
            }
        }
        self.pp
    }

    /// `F`, the in-flight tokens: `max_concurrent_batches × T`.
    pub fn max_in_flight_tokens(&self) -> Option<u64> {
        self.max_concurrent_batches()
            .checked_mul(self.max_num_batched_tokens)
    }

    /// `num_prefill_lookahead_tokens`: `k` for multi-module MTP, 1 for other
    /// EAGLE-family methods, 0 otherwise.
    pub fn num_prefill_lookahead_tokens(&self) -> u64 {
        let Some(m) = self.speculative_method.as_deref() else {
            return 0;
        };
        if !matches!(m, "eagle" | "eagle3" | "mtp" | "dflash" | "dspark") {
            return 0;
        }
        let k = self.num_speculative_tokens.unwrap_or(0);
        if m == "mtp" && self.num_nextn_predict_layers.unwrap_or(1).min(k) > 1 {
            return k;
        }
        1
    }

    /// Whether groups holding drafter layers are EAGLE groups (block drop: EAGLE, EAGLE3, MTP).
    pub fn use_eagle_block_drop(&self) -> bool {
        matches!(
            self.speculative_method.as_deref(),
            Some("eagle" | "eagle3" | "mtp")
        )
    }
}

/// A log record vLLM emits while planning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// "info" or "warning".
    pub level: String,
    /// vLLM's formatted message.
    pub message: String,
}

impl LogLine {
    pub(crate) fn warning(m: impl Into<String>) -> Self {
        Self {
            level: "warning".to_owned(),
            message: m.into(),
        }
    }
    pub(crate) fn info(m: impl Into<String>) -> Self {
        Self {
            level: "info".to_owned(),
            message: m.into(),
        }
    }
}

/// The kind of a planning failure: vLLM's exception type, or an input the
/// restatement does not accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// vLLM raises `ValueError`.
    ValueError,
    /// vLLM raises `NotImplementedError`.
    NotImplementedError,
    /// vLLM raises `AssertionError`.
    AssertionError,
    /// An input outside this planner's scope (or one vLLM fails on with an
    /// unrelated exception, such as a worker without layers) or an overflow.
    Input,
}

/// A planning failure with vLLM's message text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VllmError {
    /// The exception type.
    pub kind: ErrorKind,
    /// vLLM's message, exactly.
    pub message: String,
    /// For "To serve at least one request ...": vLLM's binary-search estimate
    /// of the longest `max_model_len` that fits, tokens (when it is above 0).
    pub estimated_max_model_len: Option<u64>,
    /// What vLLM logged before failing.
    pub log: Vec<LogLine>,
}

impl VllmError {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            estimated_max_model_len: None,
            log: Vec::new(),
        }
    }
    pub(crate) fn overflow(what: &str) -> Self {
        Self::new(ErrorKind::Input, format!("{what} overflows"))
    }

    /// vLLM's startup failure on the budget (`kvbudget.vllm.VllmStartupError`): no block,
    /// not one request of `max_model_len`, or `--max-model-len auto` fitting not one token.
    pub fn is_startup(&self) -> bool {
        const STARTS: [&str; 3] = [
            "To serve at least one request",
            "No available memory for the cache blocks",
            "Cannot auto-fit max_model_len: not enough GPU memory",
        ];
        self.kind == ErrorKind::ValueError && STARTS.iter().any(|p| self.message.starts_with(p))
    }
}

impl fmt::Display for VllmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for VllmError {}

/// One tensor view over a worker's single KV buffer (vLLM's `KVCacheTensor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VllmTensor {
    /// The backing buffer's size, bytes (`num_blocks × bytes_per_block`).
    pub size: u64,
    /// The layers viewing it, in order.
    pub layers: Vec<String>,
    /// Bytes between consecutive layers.
    pub layer_stride: u64,
    /// Bytes between consecutive blocks of one layer (its page).
    pub block_stride: u64,
    /// The first layer's offset in the buffer, bytes.
    pub offset: u64,
    /// Each layer's view `[B, H, N, C]` (`compute_layer_kv_cache_shape_bytes`):
    /// blocks, head slots, states per block (tokens), and `C` in bytes.
    pub shape: [u64; 4],
    /// The view's strides for `[B, H, N, C]`, bytes (`LBNHC`: `B` is the block
    /// stride, then `N`, `H`, `C` innermost).
    pub strides: [u64; 4],
    /// The torch dtype the bytes are viewed as (`spec.dtype`, e.g. `"bfloat16"`, `"uint8"`).
    pub dtype: String,
}

/// A KV-cache group as the oracle reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VllmGroup {
    /// Layer names, in vLLM's order.
    pub layers: Vec<String>,
    /// vLLM's spec class name ("FullAttentionSpec", "SlidingWindowSpec",
    /// "UniformTypeKVCacheSpecs", ...).
    pub spec: String,
    /// Tokens per block.
    pub block_size: u64,
    /// The group spec's page, bytes (a uniform-type group: the sum of its layers' pages).
    pub page_size_bytes: u64,
    /// The sum of the group's layers' pages, bytes.
    pub layer_pages_bytes: u64,
    /// Whether the group holds drafter layers under EAGLE block drop.
    pub is_eagle_group: bool,
    /// Per worker: bytes of every block this group leaves unused.
    pub unused_bytes_per_block: Option<u64>,
    /// Per worker: the unused bytes in whole pages (padding layers), when whole.
    pub padding_layers: Option<u64>,
}

/// One worker's part of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VllmWorker {
    /// Bytes one block costs on this worker (max over groups of their layers' pages).
    pub bytes_per_block: u64,
    /// Bytes one request of `max_model_len` needs on this worker.
    pub per_request_bytes: u64,
    /// The one buffer this worker allocates, bytes.
    pub allocated_bytes: u64,
    /// The tensor views over it.
    pub tensors: Vec<VllmTensor>,
    /// The global groups projected onto this worker's layers.
    pub groups: Vec<VllmGroup>,
}

/// vLLM's KV-cache plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VllmPlan {
    /// Blocks every worker allocates (the minimum over workers; includes the null block).
    pub num_blocks: u64,
    /// `max_model_len` after auto-fit, tokens.
    pub max_model_len: u64,
    /// Per worker (stage-major, `pp × tp`).
    pub workers: Vec<VllmWorker>,
    /// The global groups, in vLLM's order.
    pub groups: Vec<VllmGroup>,
    /// Blocks one request of `max_model_len` takes from each scheduler group.
    pub blocks_per_request: Vec<u64>,
    /// `num_blocks / Σ blocks_per_request`.
    pub max_concurrency: f64,
    /// The log's "GPU KV cache size: N tokens": `trunc(max_concurrency × max_model_len)`.
    pub kv_cache_size_tokens: u64,
    /// Consecutive TP ranks holding identical KV.
    pub kv_tp_replicas: u64,
    /// The scheduler's `cache_config.block_size` (smallest group block size), tokens.
    pub cache_block_size: u64,
    /// vLLM's configuration of the state layers (none without one): the Mamba cache
    /// mode, the aligned attention block size, the Mamba block size and padded page.
    pub mamba: Option<HybridAlignment>,
    /// vLLM's warnings, in order.
    pub warnings: Vec<String>,
    /// Everything vLLM logged (info and warning), in order.
    pub log: Vec<LogLine>,
}
