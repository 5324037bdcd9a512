//! vLLM 0.33.0's grouping case 3, block-outer packing (`_get_packed_kv_cache_groups`,
//! VLLM.md section 3): under a block-outer layout, layers whose pages differ are
//! packed side by side into every block instead of being unified to one page.
//!
//! - Layers are bucketed greedily, in registration order, into uniform-type buckets
//!   (the first bucket that stays `UniformTypeKVCacheSpecs` takes the layer).
//! - A bucket with as many layers of each page size is a repeating pattern (one
//!   layer of each page size a repeat). Such buckets are cut into groups of a
//!   common number of repeats, picked by [`approximate_gcd`] (least rounding-up),
//!   never below the largest bucket that mixes page sizes; other buckets stay whole.
//! - State buckets (Mamba, circular buffers, and sliding windows when nothing
//!   repeats) may split down to one layer a group: they are cut into as many groups
//!   as needed for each to fit the block the other buckets already need.
//!
//! Every group is a `UniformTypeKVCacheSpecs`, whole buckets included.

use super::group::{GroupSpec, IdGroup, LayerSpecs};
use super::spec::{Spec, SpecClass};
use super::{ErrorKind, KvCacheLayout, VllmError};

/// `_approximate_gcd`: the `d` in `[max(1, lower_bound), max(values)]` (values
/// positive, not empty) that minimises `Σ (d − x mod d) mod d`, the larger on ties;
/// `lower_bound` itself when it is above every value.
pub fn approximate_gcd(values: &[u64], lower_bound: u64) -> u64 {
    let min_d = lower_bound.max(1);
    let max_d = values.iter().copied().max().unwrap_or(0);
    let mut best = (min_d, u64::MAX);
    for d in min_d..=max_d {
        let pad: u64 = values.iter().map(|&x| (d - x % d) % d).sum();
        if pad <= best.1 {
            best = (d, pad);
        }
    }
    best.0
}

/// One bucket: its layers in order, and each page size's layers (first appearance order).
struct Bucket {
    layers: Vec<usize>,
    by_page: Vec<(u64, Vec<usize>)>,
}

impl Bucket {
    /// `get_max_layers_per_page_size`: the most layers sharing one page size.
    fn max_per_page(&self) -> u64 {
        self.by_page
            .iter()
            .map(|(_, l)| l.len() as u64)
            .max()
            .unwrap_or(0)
    }

    /// One layer of each page size a repeat (every page size has as many layers).
    fn balanced(&self) -> bool {
        self.by_page
            .windows(2)
            .all(|w| w[0].1.len() == w[1].1.len())
    }

    /// `widest_group_bytes`: the pages of the largest of `n` groups, bytes.
    fn widest_group_bytes(&self, n: u64) -> u64 {
        self.by_page
            .iter()
            .map(|(page, l)| (l.len() as u64).div_ceil(n) * page)
            .sum()
    }
}

/// A `UniformTypeKVCacheSpecs` group of `layers` (not empty; the first layer's block size).
fn uniform(specs: LayerSpecs<'_>, layers: Vec<usize>) -> IdGroup {
    let block_size = specs.spec(layers[0]).block_size;
    let per_layer = layers.iter().map(|&m| (m, specs.spec(m).clone())).collect();
    IdGroup::new(
        layers,
        GroupSpec::Uniform {
            block_size,
            specs: per_layer,
        },
    )
}

/// `_get_packed_kv_cache_groups`: the groups under `layout`, or none when it is not
/// block-outer or every layer's page is the same (the other cases apply).
/// A state bucket cut into more groups than it has repeats (rings of different pages:
/// vLLM fails with a `StopIteration`) is refused as not modelled.
pub(crate) fn packed_groups(
    specs: LayerSpecs<'_>,
    layout: KvCacheLayout,
) -> Result<Option<Vec<IdGroup>>, VllmError> {
    let first_page = specs.kinds.first().map(Spec::page_size_bytes);
    if !layout.is_block_outermost()
        || specs
            .kinds
            .iter()
            .all(|s| Some(s.page_size_bytes()) == first_page)
    {
        return Ok(None);
    }
    let mut buckets: Vec<Bucket> = Vec::new();
    for m in 0..specs.len() {
        let s = specs.spec(m);
        let fits = |b: &Bucket| {
            let first = specs.spec(b.layers[0]);
            first.block_size == s.block_size && first.is_uniform_with(&[s])
        };
        let page = s.page_size_bytes();
        match buckets.iter_mut().find(|b| fits(b)) {
            Some(b) => {
                b.layers.push(m);
                match b.by_page.iter_mut().find(|(p, _)| *p == page) {
                    Some((_, l)) => l.push(m),
                    None => b.by_page.push((page, vec![m])),
                }
            }
            None => buckets.push(Bucket {
                layers: vec![m],
                by_page: vec![(page, vec![m])],
            }),
        }
    }
    let balanced: Vec<bool> = buckets.iter().map(Bucket::balanced).collect();
    let repeating = || {
        buckets
            .iter()
            .zip(&balanced)
            .filter(|(_, &b)| b)
            .map(|(k, _)| k)
    };
    let min_repeats = repeating()
        .filter(|b| b.by_page.len() > 1)
        .map(Bucket::max_per_page)
        .max()
        .unwrap_or(0);
    let repeats = (min_repeats > 0).then(|| {
        let counts: Vec<u64> = repeating().map(Bucket::max_per_page).collect();
        approximate_gcd(&counts, min_repeats)
    });
    let num_groups_for = |b: &Bucket, balanced: bool| match repeats {
        Some(r) if balanced => b.max_per_page().div_ceil(r),
        _ => 1,
    };
    let is_state = |b: &Bucket| match specs.spec(b.layers[0]).class {
        SpecClass::Mamba | SpecClass::CircularBuffer => true,
        SpecClass::Sliding => repeats.is_none(),
        _ => false,
    };
    let anchor_bytes = buckets
        .iter()
        .zip(&balanced)
        .map(|(b, &bal)| {
            let n = if is_state(b) {
                b.layers.len() as u64
            } else {
                num_groups_for(b, bal)
            };
            b.widest_group_bytes(n)
        })
        .max()
        .unwrap_or(0);
    let mut groups = Vec::new();
    for (b, &bal) in buckets.iter().zip(&balanced) {
        let mut n = num_groups_for(b, bal);
        if anchor_bytes > 0 && is_state(b) {
            let state_page = specs.spec(b.layers[0]).page_size_bytes();
            let per_block = (anchor_bytes / state_page).max(1);
            n = n.max((b.layers.len() as u64).div_ceil(per_block));
        }
        if n == 1 {
            groups.push(uniform(specs, b.layers.clone()));
            continue;
        }
        // `zip(*page_size_layers.values())`: repeat `r` is the `r`-th layer of each page size,
        // as many repeats as the shortest list (an uneven state bucket loses the rest, which
        // the partition check then reports); group `i` takes repeats `i, i + n, ...`.
        let n = n as usize;
        let repeats = b.by_page.iter().map(|(_, l)| l.len()).min().unwrap_or(0);
        if n > repeats {
            return Err(VllmError::new(
                ErrorKind::Input,
                format!(
                    "block-outer packing would cut a state bucket of {} layers with pages of \
                     different sizes into {n} groups, more than its {repeats} repeats (vLLM fails \
                     with StopIteration): not modelled",
                    b.layers.len()
                ),
            ));
        }
        for i in 0..n {
            let layers: Vec<usize> = (i..repeats)
                .step_by(n)
                .flat_map(|r| b.by_page.iter().map(move |(_, l)| l[r]))
                .collect();
            groups.push(uniform(specs, layers));
        }
    }
    Ok(Some(groups))
}

#[cfg(test)]
mod tests {
    use super::approximate_gcd;

    #[test]
    fn approximate_gcd_minimises_padding_and_prefers_the_larger_on_ties() {
        assert_eq!(approximate_gcd(&[4, 8, 12], 1), 4);
        // 3 and 5: d = 5 pads 2, d = 3 pads 1 (5 -> 6), d = 1 pads 0 and so does nothing larger.
        assert_eq!(approximate_gcd(&[3, 5], 1), 1);
        assert_eq!(approximate_gcd(&[3, 5], 3), 3);
        assert_eq!(approximate_gcd(&[6, 6], 2), 6);
        assert_eq!(approximate_gcd(&[2], 7), 7);
    }
}
