//! vLLM 0.33.0's `get_kv_cache_groups` for attention layers (VLLM.md section 3):
//! case 0 (hybrid manager disabled: local layers promoted to full attention),
//! case 1 (all specs equal), case 2 (one type, different sizes:
//! `UniformTypeKVCacheSpecs`) and case 4 (hybrid, uniform page: page
//! unification, buckets, the 1.5 group-width rule and the strided cut), with
//! the MLA + sliding-window full-allocation fallback; case 3 (block-outer
//! packing) is [`super::packed`].

use super::packed::packed_groups;
use super::place::py_repr;
use super::spec::{Spec, SpecClass};
use super::{ErrorKind, KvCacheLayout, LogLine, VllmError};
use std::borrow::Cow;

/// A group's spec: one spec for all its layers, or one per layer. `L` names a
/// layer: its name, or (inside the planner) its index in the merged layers.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupSpec<L = String> {
    /// Every layer of the group has this spec.
    Single(Spec),
    /// `UniformTypeKVCacheSpecs`: one spec per layer (in order), one block size.
    Uniform {
        /// Tokens per block.
        block_size: u64,
        /// The layers' specs, in the group's order.
        specs: Vec<(L, Spec)>,
    },
}

impl<L> GroupSpec<L> {
    /// vLLM's class name of the group spec.
    pub fn class_name(&self) -> &'static str {
        match self {
            Self::Single(s) => s.class.class_name(),
            Self::Uniform { .. } => "UniformTypeKVCacheSpecs",
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u64 {
        match self {
            Self::Single(s) => s.block_size,
            Self::Uniform { block_size, .. } => *block_size,
        }
    }

    /// The group spec's `page_size_bytes` (a uniform group: the sum of its layers' pages).
    pub fn page_size_bytes(&self) -> u64 {
        self.iter_specs().map(Spec::page_size_bytes).sum()
    }

    /// The spec of one layer of the group.
    pub fn layer_spec<Q: ?Sized>(&self, name: &Q) -> Option<&Spec>
    where
        L: PartialEq<Q>,
    {
        match self {
            Self::Single(s) => Some(s),
            Self::Uniform { specs, .. } => specs.iter().find(|(n, _)| n == name).map(|(_, s)| s),
        }
    }

    /// The first layer's spec (what the scheduler keeps of a uniform group).
    pub fn first_spec(&self) -> &Spec {
        match self {
            Self::Single(s) => s,
            Self::Uniform { specs, .. } => &specs[0].1,
        }
    }

    /// Every per-layer spec the group covers (`iter_layer_specs`).
    pub fn layer_specs(&self) -> Vec<&Spec> {
        self.iter_specs().collect()
    }

    /// Every per-layer spec the group covers, in order, without collecting them.
    pub(crate) fn iter_specs(&self) -> impl Iterator<Item = &Spec> {
        let (one, many) = match self {
            Self::Single(s) => (Some(s), &[][..]),
            Self::Uniform { specs, .. } => (None, &specs[..]),
        };
        one.into_iter().chain(many.iter().map(|(_, s)| s))
    }
}

/// One KV-cache group: its layer names (in vLLM's order) and its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Layer names.
    pub layers: Vec<String>,
    /// The group's spec.
    pub spec: GroupSpec,
    /// Whether the group holds a drafter layer under EAGLE block drop.
    pub is_eagle_group: bool,
}

/// A group as the planner holds it: its layers by their index in the merged
/// layers, its spec boxed (a list of groups stays small: no allocation of a
/// kilobyte or more for a few groups).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdGroup {
    /// The layers' indices, in vLLM's order.
    pub layers: Vec<usize>,
    /// The group's spec.
    pub spec: Box<GroupSpec<usize>>,
    /// Whether the group holds a drafter layer under EAGLE block drop.
    pub is_eagle_group: bool,
}

impl IdGroup {
    /// A group of `layers` with `spec`, not (yet) an EAGLE group.
    pub(crate) fn new(layers: Vec<usize>, spec: GroupSpec<usize>) -> Self {
        Self {
            layers,
            spec: Box::new(spec),
            is_eagle_group: false,
        }
    }
}

/// The layers' specs, each distinct spec held once: layer `m`'s spec is
/// `kinds[kind[m]]`. Every kind is some layer's, and the kinds are in the order
/// of their first layers, so the first kind is the first layer's.
#[derive(Clone, Copy)]
pub(crate) struct LayerSpecs<'s> {
    /// The specs (distinct when built; a transform may make two equal).
    pub kinds: &'s [Spec],
    /// Each layer's index into `kinds`.
    pub kind: &'s [u32],
}

impl<'s> LayerSpecs<'s> {
    pub(crate) fn len(&self) -> usize {
        self.kind.len()
    }

    pub(crate) fn spec(&self, m: usize) -> &'s Spec {
        &self.kinds[self.kind[m] as usize]
    }

    /// The same layers over `kinds` (each of this one's kinds transformed).
    fn with_kinds<'t>(&self, kinds: &'t [Spec]) -> LayerSpecs<'t>
    where
        's: 't,
    {
        LayerSpecs {
            kinds,
            kind: self.kind,
        }
    }

    /// The first layer of kind `k`.
    fn first_layer(&self, k: usize) -> usize {
        self.kind
            .iter()
            .position(|&x| x as usize == k)
            .expect("every kind is some layer's")
    }

    /// Every layer's spec, once per kind, the first layer's first. vLLM's
    /// `merge` and uniformity checks read their list's first spec and the set
    /// of the others, so this list answers as the per-layer one does.
    fn all(&self) -> Vec<&'s Spec> {
        self.kinds.iter().collect()
    }

    /// The specs of `layers` (in order, not empty), once per kind, the first layer's first.
    fn distinct(&self, layers: &[usize]) -> Vec<&'s Spec> {
        let mut seen = KindSet::new(self.kinds.len());
        layers
            .iter()
            .map(|&m| self.kind[m] as usize)
            .filter(|&k| seen.insert(k))
            .map(|k| &self.kinds[k])
            .collect()
    }
}

/// A set of kind indices: a bit mask for at most 64 kinds, else a flag per kind.
enum KindSet {
    Bits(u64),
    Flags(Vec<bool>),
}

impl KindSet {
    fn new(kinds: usize) -> Self {
        if kinds <= 64 {
            Self::Bits(0)
        } else {
            Self::Flags(vec![false; kinds])
        }
    }

    /// Adds `k`; whether it was new.
    fn insert(&mut self, k: usize) -> bool {
        match self {
            Self::Bits(b) => {
                let new = *b & (1 << k) == 0;
                *b |= 1 << k;
                new
            }
            Self::Flags(f) => !std::mem::replace(&mut f[k], true),
        }
    }
}

/// `is_kv_cache_spec_uniform` over `all` (one spec per kind, the first layer's
/// first): the first spec's merge of all, or none when it fails with an
/// `AssertionError` (a `ValueError` propagates, as in vLLM).
fn uniform_merge(all: &[&Spec]) -> Result<Option<Spec>, VllmError> {
    match Spec::merge(all) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind == ErrorKind::AssertionError => Ok(None),
        Err(e) => Err(e),
    }
}

/// `is_kv_cache_spec_uniform` (true without layers).
fn is_uniform(all: &[&Spec]) -> Result<bool, VllmError> {
    Ok(all.is_empty() || uniform_merge(all)?.is_some())
}

/// `UniformTypeKVCacheSpecs.is_uniform_type` over `all` (as [`is_uniform`]).
fn is_uniform_type(all: &[&Spec]) -> bool {
    let Some(first) = all.first() else {
        return false;
    };
    all.iter().all(|s| s.block_size == first.block_size) && first.is_uniform_with(all)
}

/// One `UniformTypeKVCacheSpecs` group of every layer (at least one).
fn uniform_group(specs: LayerSpecs) -> IdGroup {
    let n = specs.len();
    IdGroup::new(
        (0..n).collect(),
        GroupSpec::Uniform {
            block_size: specs.spec(0).block_size,
            specs: (0..n).map(|m| (m, specs.spec(m).clone())).collect(),
        },
    )
}

/// `_promote_local_kv_cache_specs`: sliding and chunked layers become full
/// attention (keeping their window / chunk as a field) when full attention is
/// present. The kinds, promoted (the same kinds when nothing is promoted).
fn promote_local(specs: LayerSpecs<'_>) -> Result<Cow<'_, [Spec]>, VllmError> {
    let all = specs.all();
    if is_uniform(&all)? || is_uniform_type(&all) {
        return Ok(Cow::Borrowed(specs.kinds));
    }
    let kinds = specs.kinds;
    let mut out = kinds.to_vec();
    let has_full = kinds.iter().any(|s| s.class.is_full_family());
    let has_local = kinds
        .iter()
        .any(|s| matches!(s.class, SpecClass::Sliding | SpecClass::Chunked));
    let mut full_bs: Vec<u64> = kinds
        .iter()
        .filter(|s| s.class.is_full_family())
        .map(|s| s.block_size)
        .collect();
    full_bs.sort_unstable();
    full_bs.dedup();
    let full_block = if full_bs.len() == 1 {
        Some(full_bs[0])
    } else {
        None
    };
    if has_full && has_local {
        for s in &mut out {
            if matches!(s.class, SpecClass::Sliding | SpecClass::Chunked) {
                let bs = full_block.unwrap_or(s.block_size);
                let padded = s
                    .page_size_padded
                    .map(|p| p.max(s.unpadded_page_size_bytes() * bs / s.block_size));
                s.class = SpecClass::Full;
                s.block_size = bs;
                s.page_size_padded = padded;
                s.extra_retained_tokens = 0;
            }
        }
    }
    let all = specs.with_kinds(&out).all();
    if !(is_uniform(&all)? || is_uniform_type(&all)) {
        return Err(VllmError::new(
            ErrorKind::ValueError,
            "Failed to promote local KV cache specs to one unified type.",
        ));
    }
    Ok(Cow::Owned(out))
}

/// `unify_kv_cache_spec_page_size`: smaller pages that divide the largest
/// scale their block size (and must then be the largest); others are padded
/// (non-MLA) or fail (MLA) at their first layer (`name`: a layer's name). The
/// kinds, unified.
fn unify_page_size<'s, 'n>(
    specs: LayerSpecs<'s>,
    name: &dyn Fn(usize) -> &'n str,
) -> Result<Cow<'s, [Spec]>, VllmError> {
    let pages: Vec<u64> = specs.kinds.iter().map(Spec::page_size_bytes).collect();
    let max_page = pages.iter().copied().max().unwrap_or(0);
    if pages.iter().all(|&p| p == max_page) {
        return Ok(Cow::Borrowed(specs.kinds));
    }
    // Kind by kind: the kinds are in the order of their first layers, so the
    // first kind that fails holds the first layer that does.
    let mut out = Vec::with_capacity(specs.kinds.len());
    for (k, (s, &page)) in specs.kinds.iter().zip(&pages).enumerate() {
        let mut n = s.clone();
        if page != max_page {
            if s.class == SpecClass::Mamba {
                // A state page does not scale with the block size: it is padded.
                n.page_size_padded = Some(max_page);
            } else if max_page % page == 0 {
                n.block_size = s
                    .block_size
                    .checked_mul(max_page / page)
                    .ok_or_else(|| VllmError::overflow("block size"))?;
                // vLLM asserts the scaled page is the largest: a block of several tokens per
                // state that the ratio does not divide leaves it another size.
                if n.checked_unpadded_page_size_bytes() != Some(max_page) {
                    return Err(VllmError::new(ErrorKind::AssertionError, ""));
                }
            } else if s.class != SpecClass::Mla {
                n.page_size_padded = Some(max_page);
            } else {
                let name = name(specs.first_layer(k));
                return Err(VllmError::new(
                    ErrorKind::NotImplementedError,
                    format!("Layer {name}: page size is not divisible by the maximum page size and cannot be padded. Padding is only supported for non-MLA attention layers."),
                ));
            }
        }
        out.push(n);
    }
    Ok(Cow::Owned(out))
}

/// `_try_get_full_allocation_fallback_groups`: MLA next to regular sliding layers.
fn full_allocation_fallback(
    specs: LayerSpecs,
    log: &mut Vec<LogLine>,
) -> Result<Option<Vec<IdGroup>>, VllmError> {
    let kinds = specs.kinds;
    if kinds.iter().any(|s| s.class == SpecClass::Chunked) {
        return Ok(None);
    }
    let has_mla = kinds.iter().any(|s| s.class == SpecClass::Mla);
    let has_swa = kinds.iter().any(|s| s.class == SpecClass::Sliding);
    if !(has_mla && has_swa) {
        return Ok(None);
    }
    let promoted = match promote_local(specs) {
        Ok(p) => p,
        Err(e) if e.kind == ErrorKind::ValueError => return Ok(None),
        Err(e) => return Err(e),
    };
    let promoted = specs.with_kinds(&promoted);
    if !is_uniform_type(&promoted.all()) {
        return Ok(None);
    }
    log.push(LogLine::warning("KV cache page sizes cannot be unified; treating sliding-window layers as full attention for cache allocation. Sliding-window attention compute is unchanged."));
    Ok(Some(vec![uniform_group(promoted)]))
}

/// `_get_kv_cache_groups_uniform_page_size`: buckets, the group width `G`, the strided cut.
fn uniform_page_groups(
    specs: LayerSpecs,
    log: &mut Vec<LogLine>,
) -> Result<Vec<IdGroup>, VllmError> {
    // Buckets by spec equality, in order of first appearance (page unification
    // may have made two kinds equal): each kind's bucket, and each bucket's spec.
    let mut same: Vec<&Spec> = Vec::new();
    let same_of: Vec<usize> = specs
        .kinds
        .iter()
        .map(|s| {
            same.iter().position(|k| *k == s).unwrap_or_else(|| {
                same.push(s);
                same.len() - 1
            })
        })
        .collect();
    // Merge a later bucket into an earlier one its spec's merge accepts: each
    // bucket's merged bucket, and each merged bucket's specs.
    let mut merged: Vec<Vec<&Spec>> = Vec::new();
    let into: Vec<usize> = same
        .iter()
        .map(|&s| {
            for (b, bs) in merged.iter_mut().enumerate() {
                bs.push(s); // the candidate: the merged bucket's specs and this one
                if Spec::merge(bs).is_ok() {
                    return b;
                }
                bs.pop();
            }
            merged.push(vec![s]);
            merged.len() - 1
        })
        .collect();
    // Each bucket's layers in order, then each merged bucket's: its buckets' layers,
    // bucket by bucket (every list allocated at its size).
    let mut counts = vec![0usize; same.len()];
    for &k in specs.kind {
        counts[same_of[k as usize]] += 1;
    }
    let mut same_layers: Vec<Vec<usize>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (m, &k) in specs.kind.iter().enumerate() {
        same_layers[same_of[k as usize]].push(m);
    }
    let mut sizes = vec![0usize; merged.len()];
    for (&b, &n) in into.iter().zip(&counts) {
        sizes[b] += n;
    }
    let mut lists: Vec<Vec<usize>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    for (&b, ids) in into.iter().zip(&same_layers) {
        lists[b].extend_from_slice(ids);
    }
    let min = lists.iter().map(Vec::len).min().unwrap_or(1) as u64;
    let max = lists.iter().map(Vec::len).max().unwrap_or(1) as u64;
    // `max < 1.5 * min`, exactly.
    let g = if 2 * max < 3 * min { max } else { min };
    let cuts = |ids: &[usize]| (ids.len() as u64).div_ceil(g) as usize;
    let mut groups = Vec::with_capacity(lists.iter().map(|ids| cuts(ids)).sum());
    for ids in &lists {
        let len = ids.len() as u64;
        let pad = g - len % g;
        if pad != g {
            let pct = pad as f64 / len as f64 * 100.0;
            log.push(LogLine::warning(format!(
                "Add {pad} padding layers, may waste at most {pct:.2}% KV cache memory"
            )));
        }
        let k = cuts(ids);
        for i in 0..k {
            let layers: Vec<usize> = ids.iter().skip(i).step_by(k).copied().collect();
            let spec = Spec::merge(&specs.distinct(&layers))?;
            groups.push(IdGroup::new(layers, GroupSpec::Single(spec)));
        }
    }
    Ok(groups)
}

/// `get_kv_cache_groups` over the merged layers' specs (registration order;
/// `name`: a layer's name). The groups name layers by their index.
/// `disable_hybrid` is `--disable-hybrid-kv-cache-manager`; warnings go to `log`.
pub(crate) fn kv_cache_groups<'n>(
    specs: LayerSpecs,
    name: &dyn Fn(usize) -> &'n str,
    (disable_hybrid, layout): (bool, KvCacheLayout),
    log: &mut Vec<LogLine>,
) -> Result<Vec<IdGroup>, VllmError> {
    let promoted = match disable_hybrid.then(|| promote_local(specs)).transpose()? {
        Some(Cow::Owned(p)) if p[..] != specs.kinds[..] => {
            log.push(LogLine::warning("Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable any optimizations for saving KV cache memory (e.g., dropping the KV cache outside the sliding window). The compute of layers like sliding window is still saved."));
            Some(p)
        }
        _ => None,
    };
    let specs = promoted.as_deref().map_or(specs, |p| specs.with_kinds(p));
    let n = specs.len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let all = specs.all();
    let uniform = uniform_merge(&all)?;
    // The first read of every page (after the checks that compare fields only).
    if specs.kinds.iter().any(Spec::padding_too_small) {
        return Err(VllmError::new(ErrorKind::AssertionError, ""));
    }
    if let Some(spec) = uniform {
        return Ok(vec![IdGroup::new(
            (0..n).collect(),
            GroupSpec::Single(spec),
        )]);
    }
    if is_uniform_type(&all) {
        return Ok(vec![uniform_group(specs)]);
    }
    if let Some(groups) = packed_groups(specs, layout)? {
        return check_partition(groups, n, name);
    }
    let unified = match unify_page_size(specs, name) {
        Ok(u) => u,
        Err(e) if e.kind == ErrorKind::NotImplementedError => {
            return match full_allocation_fallback(specs, log)? {
                Some(groups) => Ok(groups),
                None => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    uniform_page_groups(specs.with_kinds(&unified), log)
}

/// `_check_exact_partition`: every layer in some group (the packed cut of an uneven
/// state bucket drops layers).
fn check_partition<'n>(
    groups: Vec<IdGroup>,
    n: usize,
    name: &dyn Fn(usize) -> &'n str,
) -> Result<Vec<IdGroup>, VllmError> {
    let mut grouped = vec![false; n];
    for &m in groups.iter().flat_map(|g| &g.layers) {
        grouped[m] = true;
    }
    let mut missing: Vec<&str> = (0..n).filter(|&m| !grouped[m]).map(name).collect();
    if missing.is_empty() {
        return Ok(groups);
    }
    missing.sort_unstable();
    let list: Vec<String> = missing.iter().map(|s| py_repr(s)).collect();
    Err(VllmError::new(
        ErrorKind::AssertionError,
        format!("KV cache groups miss layers: [{}].", list.join(", ")),
    ))
}
