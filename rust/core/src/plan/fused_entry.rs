//! The bytes of a fused entry: a host sub-pool's slot entry that also carries a draft's rows
//! (`MHASubPoolSpec` / `MLASubPoolSpec` / `MambaSubPoolSpec.entry_bytes` with a
//! `draft_region`), and the placement and decision types [`super::fused_draft::place_fused_draft`]
//! answers with.
//!
//! A host entry with a region is `align32(align16(host) + region)` bytes: the draft parts start
//! at the host's bytes rounded up to [`ROW_ALIGN`], the entry is rounded up to
//! [`ENTRY_ALIGN`]. Unfused, a dense entry is `align32(host)`, a state entry its raw `host`
//! bytes.

use super::fused_draft::Host;
use crate::arith::{add, mul};
use crate::error::{PlanError, Result};

/// `ENTRY_ALIGN_BYTES` (`layout/token_major.py`): a fused or dense entry's rounding, bytes.
pub const ENTRY_ALIGN: u64 = 32;
/// `ROW_ALIGN_BYTES`: every K, V or latent row's granule and a part's offset, bytes.
pub const ROW_ALIGN: u64 = 16;

/// A region: the draft's geometry inside one host's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DraftRegion {
    /// `DenseDraftRegion`: `lane_num` K and V row pairs after the host's rows.
    Dense {
        /// Lanes (draft layers over all runners).
        lane_num: u64,
        /// KV heads on one rank.
        head_num: u64,
        /// K head dim, elements.
        head_dim: u64,
        /// V head dim, elements.
        v_head_dim: u64,
        /// The storage dtype's element (fp8 stored as uint8), bytes.
        itemsize: u64,
    },
    /// `DraftStateRegion`: `lane_num` state blocks after the host's streams.
    State {
        /// Lanes.
        lane_num: u64,
        /// One lane's state in one slot, bytes.
        layer_bytes: u64,
    },
}

impl DraftRegion {
    /// Draft bytes per slot before the host entry's alignment (`entry_bytes()`), bytes.
    pub fn entry_bytes(&self) -> Result<u64> {
        let what = "fused draft region";
        match *self {
            Self::Dense {
                lane_num,
                head_num,
                head_dim,
                v_head_dim,
                itemsize,
            } => {
                let k = mul(mul(head_num, head_dim, what)?, itemsize, what)?;
                let v = mul(mul(head_num, v_head_dim, what)?, itemsize, what)?;
                mul(lane_num, add(k, v, what)?, what)
            }
            Self::State {
                lane_num,
                layer_bytes,
            } => mul(lane_num, layer_bytes, what),
        }
    }

    /// Lanes of the region.
    pub const fn lane_num(&self) -> u64 {
        match *self {
            Self::Dense { lane_num, .. } | Self::State { lane_num, .. } => lane_num,
        }
    }
}

/// `FusedDraftPlacement`: one region per host that carries draft lanes, and each
/// runner's `(start, count)` lane range in each host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FusedDraftPlacement {
    /// Regions in host order.
    pub regions: Vec<(Host, DraftRegion)>,
    /// Per runner, in runner order: its lane ranges `(host, start, count)` (count > 0).
    pub runners: Vec<Vec<(Host, u64, u64)>>,
}

impl FusedDraftPlacement {
    /// The region in `host`, if the draft rides there.
    pub fn region(&self, host: Host) -> Option<DraftRegion> {
        self.regions
            .iter()
            .find(|(h, _)| *h == host)
            .map(|(_, r)| *r)
    }
}

/// `FusedDraftDecision`: the placement, or why the draft cannot fuse.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FusedDraftDecision {
    /// Placed; `note` says why a kind did not get its first-choice host.
    Placed {
        /// The placement.
        placement: FusedDraftPlacement,
        /// SGLang's note (`None` when every kind got its first choice).
        note: Option<String>,
    },
    /// Declined, SGLang's reason.
    Declined(String),
}

/// `align_part_offset`: `n` rounded up to [`ROW_ALIGN`], bytes.
pub fn align_part(n: u64) -> Result<u64> {
    n.checked_next_multiple_of(ROW_ALIGN)
        .ok_or_else(|| PlanError::overflow("fused entry"))
}

/// `align_entry_bytes`: `n` rounded up to [`ENTRY_ALIGN`], bytes.
pub fn align_entry(n: u64) -> Result<u64> {
    n.checked_next_multiple_of(ENTRY_ALIGN)
        .ok_or_else(|| PlanError::overflow("fused entry"))
}

/// One slot's entry of a host sub-pool of `host_bytes` (its own rows, unaligned), with
/// `region` fused in: `align32(align16(host) + region)`; unfused `align32(host)` for a dense
/// host and `host` for a state host (`dense`: false), bytes.
pub fn host_entry_bytes(host_bytes: u64, dense: bool, region: Option<&DraftRegion>) -> Result<u64> {
    match region {
        Some(r) => align_entry(add(
            align_part(host_bytes)?,
            r.entry_bytes()?,
            "fused entry",
        )?),
        None if dense => align_entry(host_bytes),
        None => Ok(host_bytes),
    }
}
