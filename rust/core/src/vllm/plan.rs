//! vLLM 0.33.0's `get_global_kv_cache_groups` -> `get_kv_cache_configs` ->
//! scheduler config -> capacity log, over plain inputs (VLLM.md sections 1, 3.5, 5-7):
//! the engine's checks, the budgets, and the layout every budget is priced against
//! ([`Layout`]; its capacity step and the plan are in `capacity.rs`).

use super::group::{kv_cache_groups, GroupSpec, IdGroup};
use super::mamba::{align_hybrid_block_size, state_spec, HybridAlignment};
use super::merge::{merge_stages, Merged};
use super::place::py_repr;
use super::spec::{Spec, SpecClass};
use super::storage::{ds_mla_row_bytes, resolve_storage, KvQuantMode, KvStorage, TorchDtype};
use super::{ErrorKind, LayerKind, LogLine, VllmEngine, VllmError, VllmGroup, VllmLayer, VllmPlan};
use std::borrow::Cow;

/// The layer's spec on its worker, as vLLM's attention layers build it (a
/// drafter layer with the engine's `draft_kv_cache_dtype` when set).
fn layer_spec(
    l: &VllmLayer,
    e: &VllmEngine,
    hybrid: Option<&HybridAlignment>,
) -> Result<Spec, VllmError> {
    let engine_block = hybrid.map_or(e.block_size, |a| a.block_size);
    if l.kind == LayerKind::Mamba {
        if l.tokens_per_state != 1 {
            return Err(VllmError::new(
                ErrorKind::Input,
                format!(
                    "layer {}: tokens_per_state is an attention layer's (a state layer keeps one \
                     state per block)",
                    py_repr(&l.name)
                ),
            ));
        }
        return state_spec(l, e, hybrid);
    }
    if l.tokens_per_state == 0 || l.tokens_per_state > MAX_LAYER_SIZE {
        // vLLM's Whisper pooling (a `Fraction` below 1) is not an input here.
        return Err(VllmError::new(
            ErrorKind::Input,
            format!(
                "layer {}: tokens_per_state={} must be 1 to {MAX_LAYER_SIZE}",
                py_repr(&l.name),
                l.tokens_per_state
            ),
        ));
    }
    let dtype = match (&e.draft_kv_cache_dtype, l.is_draft) {
        (Some(d), true) => d.as_str(),
        _ => l.kv_cache_dtype.as_str(),
    };
    let storage = resolve_storage(dtype, &l.model_dtype)?;
    let missing = |what: &str| {
        VllmError::new(
            ErrorKind::Input,
            format!("layer {}: {what} is required", py_repr(&l.name)),
        )
    };
    let mut s = Spec {
        num_kv_heads: l.num_kv_heads,
        head_size: l.head_size,
        head_size_v: l.head_size_v.unwrap_or(l.head_size),
        // At most MAX_LAYER_SIZE (checked above).
        tokens_per_state: l.tokens_per_state as i64,
        ..Spec::new(
            SpecClass::Full,
            l.block_size.unwrap_or(engine_block),
            storage,
        )
    };
    match l.kind {
        LayerKind::Full | LayerKind::Mamba => {}
        LayerKind::Sliding => {
            s.class = SpecClass::Sliding;
            s.sliding_window = Some(l.sliding_window.ok_or_else(|| missing("sliding_window"))?);
        }
        LayerKind::Chunked => {
            s.class = SpecClass::Chunked;
            s.head_size_v = l.head_size;
            s.attention_chunk_size = Some(
                l.attention_chunk_size
                    .ok_or_else(|| missing("attention_chunk_size"))?,
            );
        }
        LayerKind::Mla => {
            if l.sliding_window.is_some() {
                // MLAAttention.get_kv_cache_spec: a window makes it a SlidingWindowMLASpec.
                return Err(VllmError::new(
                    ErrorKind::Input,
                    format!(
                        "layer {}: an MLA layer with a sliding_window is vLLM's SlidingWindowMLASpec, \
                         which kvbudget does not model",
                        py_repr(&l.name)
                    ),
                ));
            }
            s.class = SpecClass::Mla;
            s.num_kv_heads = 1;
            s.head_size_v = 0;
            s.max_tp_shards = Some(1);
            s.cache_dtype_str = Some(dtype.to_owned());
            s.state_content_bytes = ds_mla_row_bytes(dtype);
        }
        LayerKind::Cross => s.class = SpecClass::Cross,
        LayerKind::CircularBuffer => s.class = SpecClass::CircularBuffer,
        LayerKind::MlaIndexer | LayerKind::KeyIndexer => {
            s.class = SpecClass::Mla;
            s.num_kv_heads = 1;
            s.head_size_v = 0;
            s.max_tp_shards = (l.kind == LayerKind::MlaIndexer).then_some(1);
            let dtype = TorchDtype::from_torch_name(&l.indexer_dtype).ok_or_else(|| {
                VllmError::new(
                    ErrorKind::Input,
                    format!(
                        "layer {}: indexer_dtype={} is not a torch dtype kvbudget knows (uint8, int8, \
                         float8_e4m3fn, bfloat16, float16, float32)",
                        py_repr(&l.name),
                        py_repr(&l.indexer_dtype)
                    ),
                )
            })?;
            s.storage = KvStorage {
                dtype,
                quant: KvQuantMode::NONE,
            };
            s.indexer = true;
        }
    }
    if s.block_size == 0 {
        return Err(VllmError::new(
            ErrorKind::Input,
            "block_size must be positive",
        ));
    }
    check_domain(l, &s)?;
    Ok(s)
}

/// The largest value of a layer's sizes (heads, head dims, block size, window,
/// chunk) and of its page, bytes: far above any model, low enough that no sum
/// or product the planner forms (pages over at most [`MAX_LAYERS`] layers,
/// pages per request, blocks) can overflow.
pub const MAX_LAYER_SIZE: u64 = 1 << 24;
/// The largest page of one layer, bytes (1 TiB).
pub const MAX_PAGE_BYTES: u64 = 1 << 40;
/// The most layers a plan holds.
pub const MAX_LAYERS: usize = 1 << 16;
/// The largest engine length (`max_model_len`, `max_num_batched_tokens`, the
/// block override), tokens or blocks.
pub const MAX_ENGINE_LENGTH: u64 = 1 << 40;

fn check_domain(l: &VllmLayer, s: &Spec) -> Result<(), VllmError> {
    let sizes = [
        ("num_kv_heads", Some(l.num_kv_heads)),
        ("head_size", Some(l.head_size)),
        ("head_size_v", l.head_size_v),
        ("block_size", Some(s.block_size)),
        ("sliding_window", s.sliding_window),
        ("attention_chunk_size", s.attention_chunk_size),
    ];
    for (name, v) in sizes {
        if let Some(v) = v.filter(|v| *v > MAX_LAYER_SIZE) {
            return Err(VllmError::new(
                ErrorKind::Input,
                format!(
                    "layer {}: {name}={v} is above {MAX_LAYER_SIZE}",
                    py_repr(&l.name)
                ),
            ));
        }
    }
    if s.checked_unpadded_page_size_bytes()
        .is_none_or(|p| p == 0 || p > MAX_PAGE_BYTES)
    {
        return Err(VllmError::new(
            ErrorKind::Input,
            format!(
                "layer {}: its page must be 1 to {MAX_PAGE_BYTES} bytes (heads, head dims and block size \
                 of at least 1)",
                py_repr(&l.name)
            ),
        ));
    }
    Ok(())
}

/// One stage's projection of the global groups (every TP rank of the stage holds it).
pub(super) struct Worker<'g> {
    pub(super) groups: Cow<'g, [IdGroup]>,
    pub(super) bytes_per_block: u64,
}

/// The sum of the group's layers' pages on its worker, bytes.
fn layer_pages(g: &IdGroup) -> u64 {
    match &*g.spec {
        GroupSpec::Single(s) => s.page_size_bytes() * g.layers.len() as u64,
        // The layers are the specs' layers or a part of them, in the same order.
        GroupSpec::Uniform { specs, .. } => {
            let mut rest = specs.iter();
            g.layers
                .iter()
                .filter_map(|m| rest.by_ref().find(|(k, _)| k == m))
                .map(|(_, s)| s.page_size_bytes())
                .sum()
        }
    }
}

/// Blocks one request takes from a group (a uniform group: the most over its layers).
fn group_pages(g: &GroupSpec<usize>, m: u64, c: &Ctx<'_, '_>) -> Result<u64, VllmError> {
    let mut most = 0;
    for s in g.iter_specs() {
        most = most.max(s.pages_per_request(m, c.in_flight, c.dcp, c.encoder_tokens)?);
    }
    Ok(most)
}

pub(super) struct Ctx<'a, 'g> {
    pub(super) in_flight: u64,
    pub(super) dcp: u64,
    /// The scheduler's `max_num_encoder_input_tokens` (`max_num_batched_tokens`), tokens.
    pub(super) encoder_tokens: u64,
    pub(super) tp: usize,
    /// Per stage.
    pub(super) stages: &'a [Worker<'g>],
}

impl Ctx<'_, '_> {
    /// Worker `w`'s part (stage-major, `pp × tp`).
    pub(super) fn worker(&self, w: usize) -> &Worker<'_> {
        &self.stages[w / self.tp]
    }

    /// `_max_memory_usage_bytes_from_groups` on worker `w` at `m` tokens.
    pub(super) fn per_request(&self, w: usize, m: u64) -> Result<i128, VllmError> {
        let wk = self.worker(w);
        let mut total: i128 = 0;
        for g in wk.groups.iter() {
            total += i128::from(group_pages(&g.spec, m, self)?);
        }
        Ok(i128::from(wk.bytes_per_block) * total)
    }

    /// `_estimate_max_model_len_from_groups`: binary search over `[1, max]`.
    pub(super) fn estimate(&self, w: usize, avail: i128, max: u64) -> Result<u64, VllmError> {
        if self.per_request(w, 1)? > avail {
            return Ok(0);
        }
        let (mut lo, mut hi, mut best) = (1i128, i128::from(max), 1u64);
        while lo <= hi {
            let mid = (lo + hi).div_euclid(2);
            if self.per_request(w, mid as u64)? <= avail {
                best = mid as u64;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        Ok(best)
    }
}

/// The group as the result reports it (its layers named as `merged` names them).
pub(super) fn out_group(g: &IdGroup, merged: &Merged, bytes_per_block: Option<u64>) -> VllmGroup {
    let pages = layer_pages(g);
    let page = g.spec.page_size_bytes();
    let unused = bytes_per_block.map(|b| b - pages);
    VllmGroup {
        layers: g
            .layers
            .iter()
            .map(|&m| merged.name(m).to_owned())
            .collect(),
        spec: g.spec.class_name().to_owned(),
        block_size: g.spec.block_size(),
        page_size_bytes: page,
        layer_pages_bytes: pages,
        is_eagle_group: g.is_eagle_group,
        unused_bytes_per_block: unused,
        padding_layers: unused.and_then(|u| (page > 0 && u % page == 0).then(|| u / page)),
    }
}

/// Euclid's greatest common divisor.
pub(crate) fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// vLLM 0.33.0's plan for `layers` (registration order, drafter layers last),
/// `available` KV bytes (one value for all workers, one per PP stage, or one
/// per worker, `pp × tp` stage-major) and `engine`.
pub fn plan(
    layers: &[VllmLayer],
    available: &[i64],
    engine: &VllmEngine,
) -> Result<VllmPlan, VllmError> {
    let mut log = Vec::new();
    plan_inner(layers, available, engine, &mut log).map_err(|mut e| {
        e.log = log;
        e
    })
}

/// The most workers (`pp × tp`) a plan holds: far above any deployment, low
/// enough that the per-worker records stay small.
pub const MAX_WORKERS: u64 = 1 << 14;

fn plan_inner(
    layers: &[VllmLayer],
    available: &[i64],
    e: &VllmEngine,
    log: &mut Vec<LogLine>,
) -> Result<VllmPlan, VllmError> {
    let lengths = check_engine(layers, e)?;
    let mut budgets = expand_budgets(available, e)?;
    with_layout(layers, e, lengths, log, |lay, log| {
        let (num_blocks, max_model_len) = lay.capacity(&mut budgets, log)?;
        lay.result(num_blocks, max_model_len, log)
    })
}

/// The engine's own checks, before any layer or budget is read: the start
/// `max_model_len` and whether it is auto-fit.
pub(crate) fn check_engine(layers: &[VllmLayer], e: &VllmEngine) -> Result<(u64, bool), VllmError> {
    let input = |m: String| VllmError::new(ErrorKind::Input, m);
    if e.tp == 0 || e.pp == 0 || e.dcp == 0 || e.block_size == 0 {
        return Err(input(
            "tp, pp, dcp and block_size must be positive".to_owned(),
        ));
    }
    if layers.len() > MAX_LAYERS {
        return Err(input(format!(
            "{} layers: at most {MAX_LAYERS}",
            layers.len()
        )));
    }
    let (start_len, auto_fit) = e.start_max_model_len()?;
    let lengths = [
        ("max_num_batched_tokens", Some(e.max_num_batched_tokens)),
        ("num_gpu_blocks_override", e.num_gpu_blocks_override),
        ("max_model_len", Some(start_len)),
        ("num_speculative_tokens", e.num_speculative_tokens),
        ("num_nextn_predict_layers", e.num_nextn_predict_layers),
    ];
    for (name, v) in lengths {
        if let Some(v) = v.filter(|v| *v > MAX_ENGINE_LENGTH) {
            return Err(input(format!("{name}={v} is above {MAX_ENGINE_LENGTH}")));
        }
    }
    if e.block_size > MAX_LAYER_SIZE {
        return Err(input(format!(
            "block_size={} is above {MAX_LAYER_SIZE}",
            e.block_size
        )));
    }
    if e.pp.checked_mul(e.tp).is_none_or(|w| w > MAX_WORKERS) {
        return Err(input(format!(
            "pp={} x tp={} workers: at most {MAX_WORKERS} (one plan per worker)",
            e.pp, e.tp
        )));
    }
    Ok((start_len, auto_fit))
}

/// Each worker's budget (stage-major, `pp × tp`) from one value, one per stage or one per
/// worker, bytes.
pub(crate) fn expand_budgets(available: &[i64], e: &VllmEngine) -> Result<Vec<i128>, VllmError> {
    let (pp, tp) = (e.pp as usize, e.tp as usize);
    Ok(match available.len() {
        n if n == pp * tp => available.iter().map(|&a| i128::from(a)).collect(),
        n if n == pp => available
            .iter()
            .flat_map(|&a| std::iter::repeat_n(i128::from(a), tp))
            .collect(),
        1 => vec![i128::from(available[0]); pp * tp],
        n => {
            return Err(VllmError::new(
                ErrorKind::Input,
                format!("{n} budgets for pp={pp} x tp={tp} workers"),
            ))
        }
    })
}

/// A deployment's budget-independent part: the merged layers, the global groups and each
/// stage's projection; [`Layout::capacity`] prices budgets against it.
pub(crate) struct Layout<'a, 'g> {
    pub(super) e: &'a VllmEngine,
    pub(super) start_len: u64,
    pub(super) auto_fit: bool,
    pub(super) merged: &'a Merged<'a>,
    pub(super) global: &'g [IdGroup],
    pub(super) hybrid: Option<HybridAlignment>,
    pub(super) ctx: Ctx<'a, 'g>,
}

/// Builds the layout of `layers` under `e` (checked by [`check_engine`], which gave
/// `lengths`) and runs `k` on it.
pub(crate) fn with_layout<R>(
    layers: &[VllmLayer],
    e: &VllmEngine,
    (start_len, auto_fit): (u64, bool),
    log: &mut Vec<LogLine>,
    k: impl FnOnce(&Layout<'_, '_>, &mut Vec<LogLine>) -> Result<R, VllmError>,
) -> Result<R, VllmError> {
    let input = |m: String| VllmError::new(ErrorKind::Input, m);
    // `determine_available_memory` returns a non-zero `kv_cache_memory_bytes` as every
    // worker's budget (a text model reserves nothing for multimodal IPC): applied in
    // `capacity`, checked here.
    if let Some(b) = e.kv_cache_memory_bytes.filter(|&b| b > 0) {
        if i64::try_from(b).is_err() {
            return Err(input(format!(
                "kv_cache_memory_bytes={b} is above {}",
                i64::MAX
            )));
        }
    }
    let (pp, tp) = (e.pp as usize, e.tp as usize);
    // vLLM's configuration of state layers: the Mamba cache mode, block sizes, padded page.
    let hybrid = align_hybrid_block_size(layers, e, start_len, log)?;
    // One spec per layer per stage, in the oracle's checks' order, merged by name.
    let mut merged = merge_stages(layers, pp, |l| layer_spec(l, e, hybrid.as_ref()))?;
    let extra = e.num_prefill_lookahead_tokens().saturating_sub(1);
    for s in &mut merged.kinds {
        if s.class == SpecClass::Sliding {
            s.extra_retained_tokens = extra;
        }
    }
    if merged.len() == 0 {
        return Err(input(
            "no attention layers (attention-free models are not modelled)".to_owned(),
        ));
    }
    let merged = &merged;
    let mut global = kv_cache_groups(
        merged.specs(),
        &|m| merged.name(m),
        (e.disable_hybrid_kv_cache_manager, e.kv_cache_layout),
        log,
    )?;
    if e.use_eagle_block_drop() {
        for g in &mut global {
            g.is_eagle_group = g.layers.iter().any(|&m| merged.is_draft(m));
        }
        let has_state = |g: &IdGroup| g.spec.iter_specs().any(|s| s.class == SpecClass::Mamba);
        if !global.iter().any(|g| g.is_eagle_group) && global.iter().any(has_state) {
            log.push(LogLine::warning(format!(
                "Speculative decoding (method={}) is enabled but no KV cache group could be identified as the draft model's.",
                e.speculative_method.as_deref().unwrap_or("None")
            )));
        }
    }
    // Project onto each stage (its TP ranks are identical).
    let stages: Vec<Worker> = merged
        .project(&global, pp)
        .into_iter()
        .map(|groups| {
            let bytes_per_block = groups.iter().map(layer_pages).max().unwrap_or(0);
            Worker {
                groups,
                bytes_per_block,
            }
        })
        .collect();
    let in_flight = e
        .max_in_flight_tokens()
        .ok_or_else(|| VllmError::overflow("in-flight tokens"))?;
    let lay = Layout {
        e,
        start_len,
        auto_fit,
        merged,
        global: &global,
        hybrid,
        ctx: Ctx {
            in_flight,
            encoder_tokens: e.max_num_batched_tokens,
            dcp: e.dcp,
            tp,
            stages: &stages,
        },
    };
    k(&lay, log)
}
