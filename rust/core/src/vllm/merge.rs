//! The workers' layer specs merged by layer name (vLLM's `get_kv_cache_configs`
//! checks each PP stage's layers, then merges the stages' spec dicts by name),
//! and the global groups projected back onto one stage's layers.
//!
//! Inside the planner a layer is an index: [`Merged`]'s layers are numbered in
//! the merged (stage-major, first appearance) order, and the groups hold those
//! numbers ([`IdGroup`]); names are read from the input only for the results
//! and the message texts. Each distinct spec is held once ([`LayerSpecs`]).
//! Names are compared through one table of layer indices, and no step keeps a
//! per-layer `Spec` or name, so a plan of a few dozen layers allocates nothing
//! of a kilobyte or more (glibc consolidates its free lists on such a request).

use super::group::{GroupSpec, IdGroup, LayerSpecs};
use super::place::py_repr;
use super::spec::Spec;
use super::{ErrorKind, VllmError, VllmLayer};
use std::borrow::Cow;

/// Digits of pi, the hash's constants.
const PI: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
];

/// The 128-bit product of `a` and `b`, its halves XORed (foldhash's step).
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// A layer name's hash: one folded multiply per 16 bytes, the last 16 (or the
/// short name's head and tail) read overlapping, the length mixed in.
fn name_hash(name: &str) -> u64 {
    let b = name.as_bytes();
    let n = b.len();
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let half = |i: usize| u64::from(u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes")));
    let mut h = (n as u64).wrapping_mul(PI[2]);
    let (x, y) = if n >= 16 {
        let mut i = 0;
        while n - i > 16 {
            h = fold(word(i) ^ PI[0] ^ h, word(i + 8) ^ PI[1]);
            i += 16;
        }
        (word(n - 16), word(n - 8))
    } else if n >= 8 {
        (word(0), word(n - 8))
    } else if n >= 4 {
        (half(0), half(n - 4))
    } else if n > 0 {
        let byte = |i: usize| u64::from(b[i]);
        ((byte(0) << 16) | (byte(n / 2) << 8) | byte(n - 1), 0)
    } else {
        (0, 0)
    };
    fold(x ^ PI[0] ^ h, y ^ PI[1])
}

/// For each of `n` items (at most [`super::plan::MAX_LAYERS`]), the first item
/// equal to it, through an open-addressing table of item indices (linear
/// probing, at most half full); `hash` and `eq` define the equality. Colliding
/// hashes cost comparisons (as the linear scans this replaces did), never a
/// wrong answer.
fn firsts(n: usize, hash: impl Fn(usize) -> u64, eq: impl Fn(usize, usize) -> bool) -> Vec<u32> {
    let mask = (2 * n).next_power_of_two().max(8) - 1;
    let mut table = vec![0u32; mask + 1]; // an item's index + 1; 0: empty
    (0..n)
        .map(|i| {
            let mut slot = hash(i) as usize & mask;
            loop {
                match table[slot] {
                    0 => {
                        table[slot] = i as u32 + 1;
                        return i as u32;
                    }
                    j if eq(i, j as usize - 1) => return j - 1,
                    _ => slot = (slot + 1) & mask,
                }
            }
        })
        .collect()
}

/// The index of `s` in `kinds`, added when new.
fn kind_index(kinds: &mut Vec<Spec>, s: Spec) -> u32 {
    if let Some(k) = kinds.iter().position(|k| *k == s) {
        return k as u32;
    }
    kinds.push(s);
    (kinds.len() - 1) as u32
}

/// The layers of every stage, merged by name.
pub(crate) struct Merged<'a> {
    layers: &'a [VllmLayer],
    /// Each merged layer's input layer (empty with one stage, where the merged
    /// layers are the input's, in order).
    first: Vec<u32>,
    /// The distinct specs, in the order of their first merged layers.
    pub kinds: Vec<Spec>,
    /// Each merged layer's index into `kinds`.
    kind: Vec<u32>,
    /// The input layers in stage-major order (input order within a stage;
    /// empty with one stage, which holds every layer).
    order: Vec<u32>,
    /// Each input layer's merged index (empty with one stage).
    index: Vec<u32>,
}

/// vLLM's checks of each stage's layers and the merge of the stages' specs:
/// `layers` in registration order over `pp` stages, `spec_of` builds one
/// layer's spec. The errors and their order are vLLM's (per layer: the stage,
/// a name repeated in its stage, the spec; then specs differing across stages).
pub(crate) fn merge_stages(
    layers: &[VllmLayer],
    pp: usize,
    mut spec_of: impl FnMut(&VllmLayer) -> Result<Spec, VllmError>,
) -> Result<Merged<'_>, VllmError> {
    let n = layers.len();
    // Each layer's name id (the first layer of its name), and the first layer of its
    // name in its stage.
    let name_id = firsts(
        n,
        |i| name_hash(&layers[i].name),
        |i, j| layers[i].name == layers[j].name,
    );
    let by_stage;
    let first_in_stage: &[u32] = if pp == 1 {
        &name_id
    } else {
        let stage = |i: usize| layers[i].pp_stage;
        by_stage = firsts(
            n,
            |i| fold(u64::from(name_id[i]) ^ PI[0], u64::from(stage(i)) ^ PI[1]),
            |i, j| name_id[i] == name_id[j] && stage(i) == stage(j),
        );
        &by_stage
    };
    let mut kinds = Vec::new();
    let mut kind = Vec::with_capacity(n); // per input layer
    for (i, l) in layers.iter().enumerate() {
        if l.pp_stage as usize >= pp {
            return Err(VllmError::new(
                ErrorKind::ValueError,
                format!(
                    "layer {}: pp_stage {} outside 0..{}",
                    py_repr(&l.name),
                    l.pp_stage,
                    pp - 1
                ),
            ));
        }
        if first_in_stage[i] as usize != i {
            return Err(VllmError::new(
                ErrorKind::ValueError,
                format!("duplicate layer name {}", py_repr(&l.name)),
            ));
        }
        kind.push(kind_index(&mut kinds, spec_of(l)?));
    }
    let mut out = Merged {
        layers,
        first: Vec::new(),
        kinds,
        kind,
        order: Vec::new(),
        index: Vec::new(),
    };
    if pp == 1 {
        // One stage: every layer is merged (a repeated name failed above), in order.
        return Ok(out);
    }
    out.order = (0..n as u32).collect();
    // Stable: input order within a stage.
    out.order.sort_by_key(|&i| layers[i as usize].pp_stage);
    // Each name id's merged index, set at its first layer (stage-major).
    let mut merged_of = vec![u32::MAX; n];
    for &i in &out.order {
        let i = i as usize;
        let m = &mut merged_of[name_id[i] as usize];
        if *m == u32::MAX {
            *m = out.first.len() as u32;
            out.first.push(i as u32);
        } else if out.kind[i] != out.kind[out.first[*m as usize] as usize] {
            return Err(VllmError::new(
                ErrorKind::AssertionError,
                "The KV cache specs for the same layer are different across workers. This is not supported yet.",
            ));
        }
    }
    out.index = name_id.iter().map(|&id| merged_of[id as usize]).collect();
    // The merged layers' kinds, renumbered in the order of their first merged layers.
    let input_kind = std::mem::take(&mut out.kind);
    let mut input_kinds: Vec<Option<Spec>> = std::mem::take(&mut out.kinds)
        .into_iter()
        .map(Some)
        .collect();
    let mut renumber = vec![u32::MAX; input_kinds.len()];
    for &i in &out.first {
        let k = input_kind[i as usize] as usize;
        if renumber[k] == u32::MAX {
            renumber[k] = out.kinds.len() as u32;
            out.kinds
                .push(input_kinds[k].take().expect("each kind is taken once"));
        }
        out.kind.push(renumber[k]);
    }
    Ok(out)
}

impl<'a> Merged<'a> {
    /// The number of merged layers.
    pub(crate) fn len(&self) -> usize {
        self.kind.len()
    }

    /// Merged layer `m`'s input layer.
    fn input(&self, m: usize) -> &'a VllmLayer {
        match self.first.get(m) {
            Some(&i) => &self.layers[i as usize],
            None => &self.layers[m], // one stage: the input's order
        }
    }

    /// Merged layer `m`'s name.
    pub(crate) fn name(&self, m: usize) -> &'a str {
        &self.input(m).name
    }

    /// Whether merged layer `m` is a drafter layer (its first stage's).
    pub(crate) fn is_draft(&self, m: usize) -> bool {
        self.input(m).is_draft
    }

    /// The merged layers' specs.
    pub(crate) fn specs(&self) -> LayerSpecs<'_> {
        LayerSpecs {
            kinds: &self.kinds,
            kind: &self.kind,
        }
    }

    /// The global groups as each stage's workers see them (stage order): the
    /// groups themselves when the stage holds every layer, else each group cut
    /// to the stage's layers (a group keeps its spec when none of its layers is
    /// there; a uniform group's per-layer specs are cut with its layers).
    pub(crate) fn project<'g>(&self, global: &'g [IdGroup], pp: usize) -> Vec<Cow<'g, [IdGroup]>> {
        if pp == 1 {
            return vec![Cow::Borrowed(global)];
        }
        let mut on = vec![false; self.len()];
        let mut out = Vec::with_capacity(pp);
        let mut start = 0;
        for st in 0..pp {
            let end = start
                + self.order[start..]
                    .partition_point(|&i| self.layers[i as usize].pp_stage as usize == st);
            let members = &self.order[start..end];
            let mut held = 0;
            for &i in members {
                let m = self.index[i as usize] as usize;
                if !on[m] {
                    on[m] = true;
                    held += 1;
                }
            }
            out.push(if held == self.len() {
                Cow::Borrowed(global)
            } else {
                Cow::Owned(global.iter().map(|g| project_group(g, &on)).collect())
            });
            for &i in members {
                on[self.index[i as usize] as usize] = false;
            }
            start = end;
        }
        out
    }
}

/// One group cut to the layers `on` marks.
fn project_group(g: &IdGroup, on: &[bool]) -> IdGroup {
    let layers: Vec<usize> = g.layers.iter().copied().filter(|&m| on[m]).collect();
    if layers.len() == g.layers.len() {
        return g.clone();
    }
    let spec = match &*g.spec {
        GroupSpec::Uniform { block_size, specs } if !layers.is_empty() => {
            Box::new(GroupSpec::Uniform {
                block_size: *block_size,
                specs: specs.iter().filter(|(m, _)| on[*m]).cloned().collect(),
            })
        }
        _ => g.spec.clone(),
    };
    IdGroup {
        layers,
        spec,
        is_eagle_group: g.is_eagle_group,
    }
}
