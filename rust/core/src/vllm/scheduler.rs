//! The scheduler's side of vLLM 0.33.0's plan, after the capacity log (`EngineCore`'s
//! `_initialize_kv_caches`, VLLM.md section 1 step 6): the `cache_config.block_size`
//! write-back and the check `resolve_kv_cache_block_sizes` makes of prefix-cache
//! boundaries against compressed caches (`kv_cache_utils.py`).
//!
//! kvbudget takes no `prefix_match_unit` and no KV connector; with those, the hash block size is
//! the GCD of the prefix-cacheable groups' block sizes (which it divides), prefix-cache hits land
//! on the scheduler block size or, where an aligned state group's block is wider than the hash
//! block (`partial_hash_hits_enabled`), on the hash block; a state group outside align mode
//! disables the check; and the one failure left is a compressed cache whose ratio does not
//! divide where the hits land.
//!
//! Units: tokens.

use super::group::IdGroup;
use super::plan::{gcd, Layout};
use super::spec::Spec;
use super::{ErrorKind, VllmError};

/// The scheduler's view of each group: its first layer's spec (`generate_scheduler_kv_cache_config`).
fn scheduler_specs(groups: &[IdGroup]) -> impl Iterator<Item = &Spec> + Clone {
    groups.iter().map(|g| g.spec.first_spec())
}

/// `cache_config.block_size` after the engine's write-back: the smallest block size among the
/// scheduler's prefix-cacheable groups (a ring's small block is left out), or among all groups
/// when none is, tokens; `None` without groups.
pub(crate) fn cache_block_size(groups: &[IdGroup]) -> Option<u64> {
    let specs = scheduler_specs(groups);
    specs
        .clone()
        .filter(|s| s.class.prefix_cacheable())
        .map(|s| s.block_size)
        .min()
        .or_else(|| specs.map(|s| s.block_size).min())
}

impl Layout<'_, '_> {
    /// `resolve_kv_cache_block_sizes`'s alignment check on the scheduler's groups (worker 0's):
    /// with prefix caching and more than one group, every prefix-cacheable compressed cache's
    /// `tokens_per_state` must divide the scheduler block size (the LCM of the groups' block
    /// sizes, a DCP-sharded one's times `dcp`), else vLLM's `ValueError`.
    pub(crate) fn check_prefix_alignment(&self) -> Result<(), VllmError> {
        let groups: &[IdGroup] = &self.ctx.stages[0].groups;
        let specs = scheduler_specs(groups);
        let compressed = |s: &&Spec| s.class.prefix_cacheable() && s.tokens_per_state > 1;
        if !self.e.enable_prefix_caching
            || groups.len() <= 1
            || !specs.clone().any(|s| compressed(&s))
        {
            return Ok(());
        }
        let ov = || VllmError::overflow("scheduler block size");
        // `resolve_dcp_kv_block_size`: a group's tokens per block across the DCP ranks.
        let span = |s: &Spec| {
            if s.class.dcp_sharded() {
                s.block_size.checked_mul(self.e.dcp).ok_or_else(ov)
            } else {
                Ok(s.block_size)
            }
        };
        // The LCM of the groups' spans, and the hash block size: the GCD of the prefix-cacheable
        // ones' (a compressed cache is one).
        let (mut scheduler, mut hash) = (1u64, 0u64);
        for s in specs.clone() {
            let b = span(s)?;
            scheduler = (scheduler / gcd(scheduler, b))
                .checked_mul(b)
                .ok_or_else(ov)?;
            if s.class.prefix_cacheable() {
                hash = gcd(hash, b);
            }
        }
        // Mamba groups outside align mode back off to the scheduler block size (no check).
        let state = |s: &Spec| s.mamba.as_ref().map(|m| m.align);
        if specs.clone().any(|s| state(s) == Some(false)) {
            return Ok(());
        }
        let mut alignments: Vec<u64> = specs
            .clone()
            .filter(compressed)
            .map(|s| s.tokens_per_state as u64)
            .collect();
        alignments.sort_unstable();
        alignments.dedup();
        // `partial_hash_hits_enabled`: an aligned state group wider than the hash block makes
        // prefix-cache hits land on the hash block instead of the scheduler's.
        let partial = specs.clone().any(|s| {
            state(s) == Some(true)
                && if self.e.dcp == 1 {
                    s.block_size > hash
                } else {
                    s.block_size >= hash
                }
        });
        let hit = if partial { hash } else { scheduler };
        if alignments.iter().all(|a| hit % a == 0) {
            return Ok(());
        }
        let listed: Vec<String> = alignments.iter().map(u64::to_string).collect();
        Err(VllmError::new(
            ErrorKind::ValueError,
            format!(
                "Invalid prefix_match_unit={hash}; prefix-cache boundaries must align with each spec's per-state compression. Got alignments=[{}].",
                listed.join(", ")
            ),
        ))
    }
}
