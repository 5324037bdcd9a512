//! vLLM 0.33.0's `get_kv_cache_groups` for attention layers (VLLM.md section 3):
//! case 0 (hybrid manager disabled: local layers promoted to full attention),
//! case 1 (all specs equal), case 2 (one type, different sizes:
//! `UniformTypeKVCacheSpecs`) and case 4 (hybrid, uniform page: page
//! unification, buckets, the 1.5 group-width rule and the strided cut), with
//! the MLA + sliding-window full-allocation fallback. Case 3 (block-outer
//! packing) needs a block-outer layout, which is not an input here.

use super::spec::{Spec, SpecClass};
use super::{ErrorKind, LogLine, VllmError};

/// A group's spec: one spec for all its layers, or one per layer.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupSpec {
    /// Every layer of the group has this spec.
    Single(Spec),
    /// `UniformTypeKVCacheSpecs`: one spec per layer (names in order), one block size.
    Uniform {
        /// Tokens per block.
        block_size: u64,
        /// The layers' specs, in the group's order.
        specs: Vec<(String, Spec)>,
    },
}

impl GroupSpec {
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
        match self {
            Self::Single(s) => s.page_size_bytes(),
            Self::Uniform { specs, .. } => specs.iter().map(|(_, s)| s.page_size_bytes()).sum(),
        }
    }

    /// The spec of one layer of the group.
    pub fn layer_spec(&self, name: &str) -> Option<&Spec> {
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
        match self {
            Self::Single(s) => vec![s],
            Self::Uniform { specs, .. } => specs.iter().map(|(_, s)| s).collect(),
        }
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

type Specs = Vec<(String, Spec)>;

fn refs(specs: &Specs) -> Vec<&Spec> {
    specs.iter().map(|(_, s)| s).collect()
}

/// `is_kv_cache_spec_uniform`: the first spec's merge accepts all (an
/// `AssertionError` means no; a `ValueError` propagates, as in vLLM).
fn is_uniform(specs: &Specs) -> Result<bool, VllmError> {
    if specs.is_empty() {
        return Ok(true);
    }
    match Spec::merge(&refs(specs)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind == ErrorKind::AssertionError => Ok(false),
        Err(e) => Err(e),
    }
}

/// `UniformTypeKVCacheSpecs.is_uniform_type`.
fn is_uniform_type(specs: &Specs) -> bool {
    let Some((_, first)) = specs.first() else {
        return false;
    };
    specs.iter().all(|(_, s)| s.block_size == first.block_size)
        && first.is_uniform_with(&refs(specs))
}

fn uniform_group(specs: &Specs) -> Group {
    Group {
        layers: specs.iter().map(|(n, _)| n.clone()).collect(),
        spec: GroupSpec::Uniform {
            block_size: specs[0].1.block_size,
            specs: specs.clone(),
        },
        is_eagle_group: false,
    }
}

/// `_promote_local_kv_cache_specs`: sliding and chunked layers become full
/// attention (keeping their window / chunk as a field) when full attention is present.
fn promote_local(specs: &Specs) -> Result<Specs, VllmError> {
    if is_uniform(specs)? || is_uniform_type(specs) {
        return Ok(specs.clone());
    }
    let mut out = specs.clone();
    let has_full = specs.iter().any(|(_, s)| s.class.is_full_family());
    let has_local = specs
        .iter()
        .any(|(_, s)| matches!(s.class, SpecClass::Sliding | SpecClass::Chunked));
    let mut full_bs: Vec<u64> = specs
        .iter()
        .filter(|(_, s)| s.class.is_full_family())
        .map(|(_, s)| s.block_size)
        .collect();
    full_bs.sort_unstable();
    full_bs.dedup();
    let full_block = if full_bs.len() == 1 {
        Some(full_bs[0])
    } else {
        None
    };
    if has_full && has_local {
        for (_, s) in &mut out {
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
    if !(is_uniform(&out)? || is_uniform_type(&out)) {
        return Err(VllmError::new(
            ErrorKind::ValueError,
            "Failed to promote local KV cache specs to one unified type.",
        ));
    }
    Ok(out)
}

/// `unify_kv_cache_spec_page_size`: smaller pages that divide the largest
/// scale their block size; others are padded (non-MLA) or fail (MLA).
fn unify_page_size(specs: &Specs) -> Result<Specs, VllmError> {
    let max_page = specs
        .iter()
        .map(|(_, s)| s.page_size_bytes())
        .max()
        .unwrap_or(0);
    if specs.iter().all(|(_, s)| s.page_size_bytes() == max_page) {
        return Ok(specs.clone());
    }
    let mut out = Vec::with_capacity(specs.len());
    for (name, s) in specs {
        let page = s.page_size_bytes();
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
            } else if s.class != SpecClass::Mla {
                n.page_size_padded = Some(max_page);
            } else {
                return Err(VllmError::new(
                    ErrorKind::NotImplementedError,
                    format!("Layer {name}: page size is not divisible by the maximum page size and cannot be padded. Padding is only supported for non-MLA attention layers."),
                ));
            }
        }
        out.push((name.clone(), n));
    }
    Ok(out)
}

/// `_try_get_full_allocation_fallback_groups`: MLA next to regular sliding layers.
fn full_allocation_fallback(
    specs: &Specs,
    log: &mut Vec<LogLine>,
) -> Result<Option<Vec<Group>>, VllmError> {
    if specs.iter().any(|(_, s)| s.class == SpecClass::Chunked) {
        return Ok(None);
    }
    let has_mla = specs.iter().any(|(_, s)| s.class == SpecClass::Mla);
    let has_swa = specs.iter().any(|(_, s)| s.class == SpecClass::Sliding);
    if !(has_mla && has_swa) {
        return Ok(None);
    }
    let promoted = match promote_local(specs) {
        Ok(p) => p,
        Err(e) if e.kind == ErrorKind::ValueError => return Ok(None),
        Err(e) => return Err(e),
    };
    if !is_uniform_type(&promoted) {
        return Ok(None);
    }
    log.push(LogLine::warning("KV cache page sizes cannot be unified; treating sliding-window layers as full attention for cache allocation. Sliding-window attention compute is unchanged."));
    Ok(Some(vec![uniform_group(&promoted)]))
}

/// `_get_kv_cache_groups_uniform_page_size`: buckets, the group width `G`, the strided cut.
fn uniform_page_groups(specs: &Specs, log: &mut Vec<LogLine>) -> Result<Vec<Group>, VllmError> {
    // Buckets by spec equality, in order of first appearance.
    let mut same: Vec<(Spec, Vec<String>)> = Vec::new();
    for (name, s) in specs {
        match same.iter_mut().find(|(k, _)| k == s) {
            Some((_, names)) => names.push(name.clone()),
            None => same.push((s.clone(), vec![name.clone()])),
        }
    }
    // Merge a later bucket into an earlier one its spec's merge accepts.
    let mut buckets: Vec<(Vec<String>, Vec<Spec>)> = Vec::new();
    for (s, names) in same {
        let mut placed = false;
        for (bn, bs) in &mut buckets {
            let mut cand: Vec<&Spec> = bs.iter().collect();
            cand.push(&s);
            if Spec::merge(&cand).is_ok() {
                bn.extend(names.iter().cloned());
                bs.push(s.clone());
                placed = true;
                break;
            }
        }
        if !placed {
            buckets.push((names, vec![s]));
        }
    }
    let min = buckets.iter().map(|(n, _)| n.len()).min().unwrap_or(1) as u64;
    let max = buckets.iter().map(|(n, _)| n.len()).max().unwrap_or(1) as u64;
    // `max < 1.5 * min`, exactly.
    let g = if 2 * max < 3 * min { max } else { min };
    let by_name = |n: &String| {
        specs
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, s)| s)
            .expect("layer in specs")
    };
    let mut groups = Vec::new();
    for (names, _) in &buckets {
        let len = names.len() as u64;
        let pad = g - len % g;
        if pad != g {
            let pct = pad as f64 / len as f64 * 100.0;
            log.push(LogLine::warning(format!(
                "Add {pad} padding layers, may waste at most {pct:.2}% KV cache memory"
            )));
        }
        let k = len.div_ceil(g) as usize;
        for i in 0..k {
            let layers: Vec<String> = names.iter().skip(i).step_by(k).cloned().collect();
            let member: Vec<&Spec> = layers.iter().map(by_name).collect();
            let spec = Spec::merge(&member)?;
            groups.push(Group {
                layers,
                spec: GroupSpec::Single(spec),
                is_eagle_group: false,
            });
        }
    }
    Ok(groups)
}

/// `get_kv_cache_groups` over the merged per-layer specs (registration order).
/// `disable_hybrid` is `--disable-hybrid-kv-cache-manager`; warnings go to `log`.
pub fn kv_cache_groups(
    specs: &Specs,
    disable_hybrid: bool,
    log: &mut Vec<LogLine>,
) -> Result<Vec<Group>, VllmError> {
    let mut specs = specs.clone();
    if disable_hybrid {
        let promoted = promote_local(&specs)?;
        if promoted != specs {
            log.push(LogLine::warning("Hybrid KV cache manager is disabled for this hybrid model, This means we do not enable any optimizations for saving KV cache memory (e.g., dropping the KV cache outside the sliding window). The compute of layers like sliding window is still saved."));
            specs = promoted;
        }
    }
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let uniform = is_uniform(&specs)?;
    // The first read of every page (after the checks that compare fields only).
    if specs.iter().any(|(_, s)| s.padding_too_small()) {
        return Err(VllmError::new(ErrorKind::AssertionError, ""));
    }
    if uniform {
        let spec = Spec::merge(&refs(&specs))?;
        return Ok(vec![Group {
            layers: specs.iter().map(|(n, _)| n.clone()).collect(),
            spec: GroupSpec::Single(spec),
            is_eagle_group: false,
        }]);
    }
    if is_uniform_type(&specs) {
        return Ok(vec![uniform_group(&specs)]);
    }
    let unified = match unify_page_size(&specs) {
        Ok(u) => u,
        Err(e) if e.kind == ErrorKind::NotImplementedError => {
            return match full_allocation_fallback(&specs, log)? {
                Some(groups) => Ok(groups),
                None => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    uniform_page_groups(&unified, log)
}
