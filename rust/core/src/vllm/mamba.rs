//! vLLM 0.33.0's configuration of a model with state (`mamba`) layers, before
//! any spec is built: `MambaModelConfig.verify_and_update_config`
//! (`model_executor/models/config.py`: the Mamba cache mode against prefix
//! caching, the Mamba block size) and `Platform._align_hybrid_block_size`
//! (`platforms/interface.py`: the attention block size raised until an
//! attention page holds a state page, and the state page padded to it), and
//! the spec fields state layers take from them (`MambaBase.get_kv_cache_spec`
//! and the `MambaMixer2` / `QwenGatedDeltaNetAttention` overrides).
//!
//! The attention side is the FLASH_ATTN backend's (no `customize_spec`
//! packing; its kernel block sizes are one `MultipleOf`, whose base is the
//! engine's `attention_kernel_block_size`). The model's attention page per
//! token is read from its first target attention layer, as vLLM reads it from
//! the model config (one head count and head size for the model, `V = K`).
//!
//! Units: tokens for block sizes, bytes for pages.

use super::place::py_repr;
use super::plan::{gcd, MAX_LAYER_SIZE, MAX_PAGE_BYTES};
use super::spec::{MambaState, Spec, SpecClass};
use super::storage::{resolve_storage, KvQuantMode, KvStorage, TorchDtype};
use super::{
    ErrorKind, LayerKind, LogLine, MambaCacheMode, PrefillCheckpoint, VllmEngine, VllmError,
    VllmLayer,
};

/// FlashInfer's gated-delta-net prefill checkpoint alignment, tokens
/// (`FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`, `v1/attention/backends/gdn_attn.py`).
pub const FLASHINFER_GDN_CHECKPOINT_ALIGNMENT: u64 = 64;

/// FlashKDA's prefill checkpoint alignment, tokens (`kda_prefill_checkpoint_alignment("flashkda")`,
/// `model_executor/layers/mamba/kda_checkpoint.py`).
pub const FLASHKDA_CHECKPOINT_ALIGNMENT: u64 = 16;

/// What vLLM's configuration decides for a model with state layers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HybridAlignment {
    /// The Mamba cache mode after prefix caching resolved it.
    pub mamba_cache_mode: MambaCacheMode,
    /// The attention block size (`cache_config.block_size`), tokens.
    pub block_size: u64,
    /// `cache_config.mamba_block_size`, tokens: the attention block size in align
    /// mode, `max_model_len` otherwise.
    pub mamba_block_size: u64,
    /// `cache_config.mamba_page_size_padded`, bytes (none when the pages already match).
    pub mamba_page_size_padded: Option<u64>,
    /// `get_mamba_prefill_checkpoint_alignment`: the LCM of the state layers'
    /// declared alignments, none unless every one declares one, tokens.
    pub checkpoint_alignment: Option<u64>,
}

fn lcm(a: u64, b: u64) -> Result<u64, VllmError> {
    (a / gcd(a, b))
        .checked_mul(b)
        .ok_or_else(|| VllmError::overflow("block alignment"))
}

/// A state layer's storage dtypes (torch's names), or vLLM's `KeyError` as an input error.
pub(crate) fn state_dtypes(l: &VllmLayer) -> Result<Vec<TorchDtype>, VllmError> {
    l.state_dtypes
        .iter()
        .map(|d| {
            TorchDtype::from_vllm_name(d)
                .filter(|t| {
                    matches!(
                        t,
                        TorchDtype::Float32 | TorchDtype::Float16 | TorchDtype::BFloat16
                    )
                })
                .ok_or_else(|| {
                    VllmError::new(
                        ErrorKind::Input,
                        format!(
                            "layer {:?}: state dtype {d:?} is not float32, bfloat16 or float16",
                            l.name
                        ),
                    )
                })
        })
        .collect()
}

/// The layer's declared prefill-checkpoint alignment (`get_prefill_checkpoint_alignment`).
fn declared_alignment(l: &VllmLayer, mode: MambaCacheMode) -> Option<u64> {
    match (l.prefill_checkpoint, mode) {
        (PrefillCheckpoint::FlashinferGdn, MambaCacheMode::Align) => {
            Some(FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
        }
        (PrefillCheckpoint::PleShortConv, MambaCacheMode::Align) => Some(1),
        _ => None,
    }
}

/// The model's attention page for one token, bytes: a `FullAttentionSpec` (MLA:
/// `MLAAttentionSpec`, one head, no V, no DeepSeek row size) of one token with the
/// reference layer's heads, head size and dtype, and whether it is MLA (`use_mla`).
fn attention_page_per_token(l: &VllmLayer) -> Result<(u64, bool), VllmError> {
    let dtype = l.kv_cache_dtype.as_str();
    if dtype.starts_with("turboquant_") || dtype == "ultraquant_4bit" {
        return Err(VllmError::new(
            ErrorKind::Input,
            format!(
                "kv_cache_dtype {dtype:?} beside state layers: its packed page is not modelled"
            ),
        ));
    }
    let storage = resolve_storage(dtype, &l.model_dtype)?;
    let ov = || VllmError::overflow("attention page");
    if l.kind == LayerKind::Mla {
        // One latent head, no V; the spec built here carries no DeepSeek row size.
        let row = l
            .head_size
            .checked_mul(storage.dtype.size_bytes())
            .ok_or_else(ov)?;
        return Ok((row, true));
    }
    let page = l
        .num_kv_heads
        .checked_mul(l.head_size.checked_mul(2).ok_or_else(ov)?)
        .and_then(|x| x.checked_mul(storage.dtype.size_bytes()))
        .ok_or_else(ov)?;
    Ok((page, false))
}

/// vLLM's configuration of the state layers of `layers` (none without one):
/// the mode, the Mamba block size and, for a hybrid model, the block-size
/// alignment and the padded state page. `max_model_len` is the configured
/// length (before any auto-fit), tokens; what vLLM logs is appended to `log`.
pub fn align_hybrid_block_size(
    layers: &[VllmLayer],
    e: &VllmEngine,
    max_model_len: u64,
    log: &mut Vec<LogLine>,
) -> Result<Option<HybridAlignment>, VllmError> {
    let states: Vec<&VllmLayer> = layers
        .iter()
        .filter(|l| l.kind == LayerKind::Mamba)
        .collect();
    if states.is_empty() {
        return Ok(None);
    }
    if layers
        .iter()
        .any(|l| matches!(l.kind, LayerKind::MlaIndexer | LayerKind::KeyIndexer))
    {
        return Err(VllmError::new(
            ErrorKind::Input,
            "sparse-attention indexer layers beside state layers are not modelled",
        ));
    }
    // MambaModelConfig: prefix caching decides the mode (its log names the
    // architecture, which is not an input here, so it is not repeated).
    let (mode, mut mamba_block_size) = if e.enable_prefix_caching {
        (MambaCacheMode::Align, e.block_size)
    } else {
        (MambaCacheMode::None, max_model_len)
    };
    let mut checkpoint_alignment = Some(1u64);
    for l in &states {
        checkpoint_alignment = match (checkpoint_alignment, declared_alignment(l, mode)) {
            (Some(acc), Some(a)) => Some(lcm(acc, a)?),
            _ => None,
        };
    }
    let mut out = HybridAlignment {
        mamba_cache_mode: mode,
        block_size: e.block_size,
        mamba_block_size,
        mamba_page_size_padded: None,
        checkpoint_alignment,
    };
    // The model's attention geometry (`model_config`'s heads, head size and `use_mla`): its
    // first target attention layer that is neither a ring nor a compressed cache (QSA's and
    // GLM-5-Next's side caches register before their layer's own), else its first non-state one.
    let main = |l: &&VllmLayer| {
        !matches!(l.kind, LayerKind::Mamba | LayerKind::CircularBuffer) && l.tokens_per_state == 1
    };
    let attention = layers
        .iter()
        .find(|l| main(l) && !l.is_draft)
        .or_else(|| {
            layers
                .iter()
                .find(|l| l.kind != LayerKind::Mamba && !l.is_draft)
        })
        .or_else(|| layers.iter().find(|l| l.kind != LayerKind::Mamba));
    let Some(reference) = attention else {
        return Ok(Some(out)); // no attention backend: nothing to align
    };
    let (page1, use_mla) = attention_page_per_token(reference)?;
    let mut mamba_page = 0u64;
    for l in states.iter().filter(|l| !l.is_draft) {
        let shapes = sizing_shapes(l)?;
        let m = MambaState {
            shapes: shapes.clone(),
            dtypes: state_dtypes(l)?,
            mamba_type: l.mamba_type,
            align: false,
            num_speculative_blocks: 0,
            num_prefill_checkpoint_blocks: 0,
            prefill_checkpoint_alignment: None,
            tp_replicated: false,
        };
        let page = m
            .checked_content_bytes()
            .ok_or_else(|| VllmError::overflow("state page"))?;
        mamba_page = mamba_page.max(page);
    }
    if mamba_page == 0 || page1 == 0 {
        return Ok(Some(out));
    }
    let kernel = e.attention_kernel_block_size;
    if kernel == 0 {
        return Err(VllmError::new(
            ErrorKind::Input,
            "attention_kernel_block_size must be positive",
        ));
    }
    let mut kba = kernel.max(e.block_size);
    if use_mla {
        kba = kba.max(128);
    }
    if mode == MambaCacheMode::Align {
        kba = lcm(kba, checkpoint_alignment.unwrap_or(1))?;
    }
    let ov = || VllmError::overflow("attention block size");
    let per_block = kba.checked_mul(page1).ok_or_else(ov)?;
    let attn_block = kba
        .checked_mul(mamba_page.div_ceil(per_block))
        .ok_or_else(ov)?;
    let attn_block = kernel
        .checked_mul(attn_block.div_ceil(kernel))
        .ok_or_else(ov)?;
    let mut block_size = e.block_size;
    if block_size < attn_block {
        block_size = attn_block;
        log.push(LogLine::info(format!(
            "Setting attention block size to {attn_block} tokens to ensure that attention page size is >= mamba page size."
        )));
    }
    if mode == MambaCacheMode::Align {
        mamba_block_size = block_size;
    }
    let attn_page = block_size.checked_mul(page1).ok_or_else(ov)?;
    out.block_size = block_size;
    out.mamba_block_size = mamba_block_size;
    if attn_page != mamba_page {
        out.mamba_page_size_padded = Some(attn_page);
        let pct = 100.0 * (attn_page - mamba_page) as f64 / mamba_page as f64;
        log.push(LogLine::info(format!(
            "Padding mamba page size by {pct:.2}% to ensure that mamba page size and attention page size are exactly equal."
        )));
    }
    Ok(Some(out))
}

/// The shapes `HybridAttentionMambaModelConfig` sizes the attention block from: the model
/// class's (`config_state_shapes`) where given, else the layer's.
fn sizing_shapes(l: &VllmLayer) -> Result<&Vec<Vec<u64>>, VllmError> {
    if l.config_state_shapes.is_empty() {
        return Ok(&l.state_shapes);
    }
    if l.config_state_shapes.len() != l.state_dtypes.len() {
        return Err(VllmError::new(
            ErrorKind::Input,
            format!(
                "layer {}: config_state_shapes needs one shape per state dtype (got {}, {} dtypes)",
                py_repr(&l.name),
                l.config_state_shapes.len(),
                l.state_dtypes.len()
            ),
        ));
    }
    Ok(&l.config_state_shapes)
}

/// A state layer's `MambaSpec` fields under `a` (`MambaBase.get_kv_cache_spec`
/// and its class's checkpoint override).
fn mamba_state(
    l: &VllmLayer,
    e: &VllmEngine,
    a: &HybridAlignment,
) -> Result<MambaState, VllmError> {
    let spec_tokens = if e.speculative_method.is_some() {
        e.num_speculative_tokens.unwrap_or(0)
    } else {
        0
    };
    let (blocks, alignment) = match l.prefill_checkpoint {
        PrefillCheckpoint::None => (0, None),
        PrefillCheckpoint::Mamba2 => (1, Some(1)),
        PrefillCheckpoint::Flashkda => (1, Some(FLASHKDA_CHECKPOINT_ALIGNMENT)),
        PrefillCheckpoint::FlashinferGdn | PrefillCheckpoint::PleShortConv => {
            if declared_alignment(l, a.mamba_cache_mode).is_some()
                && a.checkpoint_alignment.is_some()
            {
                (1, Some(a.mamba_block_size))
            } else {
                (0, None)
            }
        }
    };
    // `Qwen4ExpPLELayer`: checkpoint offsets on the grid hold only inputs (its conv rows,
    // the speculative ones aside, fit in one grid step).
    if l.prefill_checkpoint == PrefillCheckpoint::PleShortConv && blocks == 1 {
        let rows = l
            .state_shapes
            .first()
            .and_then(|s| s.first())
            .copied()
            .unwrap_or(0);
        if a.mamba_block_size < rows.saturating_sub(spec_tokens) {
            return Err(VllmError::new(ErrorKind::AssertionError, String::new()));
        }
    }
    Ok(MambaState {
        shapes: l.state_shapes.clone(),
        dtypes: state_dtypes(l)?,
        mamba_type: l.mamba_type,
        align: a.mamba_cache_mode == MambaCacheMode::Align,
        num_speculative_blocks: if e.use_replayssm { 0 } else { spec_tokens },
        num_prefill_checkpoint_blocks: blocks,
        prefill_checkpoint_alignment: alignment,
        tp_replicated: l.tp_replicated,
    })
}

/// A state layer's `MambaSpec` (its block size and padded page from vLLM's configuration).
pub(crate) fn state_spec(
    l: &VllmLayer,
    e: &VllmEngine,
    hybrid: Option<&HybridAlignment>,
) -> Result<Spec, VllmError> {
    let bad =
        |m: String| VllmError::new(ErrorKind::Input, format!("layer {}: {m}", py_repr(&l.name)));
    let a = hybrid.ok_or_else(|| bad("a state layer needs the hybrid configuration".into()))?;
    if l.state_shapes.is_empty() || l.state_shapes.len() != l.state_dtypes.len() {
        return Err(bad(format!(
            "a state layer needs one dtype per state shape (got {} shapes, {} dtypes)",
            l.state_shapes.len(),
            l.state_dtypes.len()
        )));
    }
    sizing_shapes(l)?;
    if [&l.state_shapes, &l.config_state_shapes]
        .iter()
        .any(|shapes| {
            shapes.len() > MAX_STATE_TENSORS
                || shapes
                    .iter()
                    .any(|s| s.len() > MAX_STATE_TENSORS || s.iter().any(|&d| d > MAX_LAYER_SIZE))
        })
    {
        return Err(bad(format!(
            "at most {MAX_STATE_TENSORS} state tensors of at most {MAX_STATE_TENSORS} dims, each at most {MAX_LAYER_SIZE}"
        )));
    }
    let state = mamba_state(l, e, a)?;
    let int8 = KvStorage {
        dtype: TorchDtype::Int8,
        quant: KvQuantMode::NONE,
    };
    let spec = Spec {
        num_kv_heads: 1,
        page_size_padded: a.mamba_page_size_padded,
        mamba: Some(Box::new(state)),
        ..Spec::new(SpecClass::Mamba, a.mamba_block_size, int8)
    };
    let content = spec.checked_unpadded_page_size_bytes();
    if content.is_none_or(|p| p == 0 || p > MAX_PAGE_BYTES) {
        return Err(bad(format!(
            "its state must be 1 to {MAX_PAGE_BYTES} bytes per request"
        )));
    }
    Ok(spec)
}

/// The most state tensors of one layer, and the most dims of one.
pub const MAX_STATE_TENSORS: usize = 8;
