//! Where SGLang 0.5.23 puts a speculative draft's KV inside the target's unified
//! sub-pools (`mem_cache/layout/fused_draft.py`'s `place_fused_draft`), and the
//! entry bytes a host sub-pool then has (`MHASubPoolSpec` / `MLASubPoolSpec` /
//! `MambaSubPoolSpec.entry_bytes` with a `draft_region`).
//!
//! The nesting, as SGLang names it: a *host* is a unified sub-pool (`full`,
//! `swa`, `mamba`) whose every slot entry also carries draft bytes; its *region*
//! is the draft's geometry there; a *lane* is one draft layer of one *runner*
//! (the draft's execution copies), present in every slot; a runner's lanes in a
//! host are one contiguous range, and the runners' ranges tile the region in
//! runner order. A replicated head gives every runner all the draft's layers; a
//! per-depth head (`num_depths > 1`, one block per predicted position) gives each
//! runner the one depth it serves.
//!
//! Each draft layer kind has its first-choice host (full-attention layers: `full`;
//! sliding-window layers: `swa`, falling back to `full`; recurrent-state layers:
//! `mamba`). A kind its host turns away *folds* into the fallback when the draft has
//! no layers of the fallback's own kind or both kinds share one row geometry; else
//! the whole draft is declined, as it is for a per-depth head without a runner per
//! depth, a window kind on a backend without the per-step window rail, asymmetric
//! K/V rows on a backend that does not carry `v_head_dim`, and rows off the 16-byte
//! part alignment. [`place_fused_draft`] answers in SGLang's words.
//!
//! A fused entry's bytes (`align32(align16(host) + region)`) and the placement types are in
//! `fused_entry.rs`, re-exported here.

pub use super::fused_entry::{
    align_entry, align_part, host_entry_bytes, DraftRegion, FusedDraftDecision,
    FusedDraftPlacement, ENTRY_ALIGN, ROW_ALIGN,
};
use crate::arith::add;
use crate::error::{PlanError, Result};

/// The backends whose multi-step draft builds the per-step sliding-window rails
/// (`WINDOW_RAIL_BACKENDS`).
const WINDOW_RAIL_BACKENDS: [&str; 1] = ["triton"];

/// The most draft runners a placement takes (far above any deployment; keeps lane counts small).
pub const MAX_RUNNERS: u64 = 4096;

/// The value of `all` whose SGLang name (`as_str`) is `name`, or an error naming `what` and
/// every name.
fn by_name<T: Copy>(all: &[T], name: &str, what: &str, as_str: fn(T) -> &'static str) -> Result<T> {
    all.iter()
        .copied()
        .find(|x| as_str(*x) == name)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|x| as_str(*x)).collect();
            PlanError::invalid(format!("unknown {what} {name:?} ({})", names.join(", ")))
        })
}

/// A host sub-pool (`HOST_KINDS`, in registration order: the order placements report hosts in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// `full`: dense K/V rows of full-attention layers.
    Full,
    /// `swa`: dense K/V rows of sliding-window layers (falls back to `full`).
    Swa,
    /// `mamba`: recurrent state blocks.
    Mamba,
}

impl Host {
    /// Every host, in registration order.
    pub const ALL: [Self; 3] = [Self::Full, Self::Swa, Self::Mamba];

    /// SGLang's sub-pool name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Swa => "swa",
            Self::Mamba => "mamba",
        }
    }

    /// The host named `name` (one of [`Self::as_str`]'s names).
    pub fn from_name(name: &str) -> Result<Self> {
        by_name(&Self::ALL, name, "host sub-pool", Self::as_str)
    }

    /// The host a kind this host turns away falls back to (`fallback_host`).
    const fn fallback(self) -> Option<Self> {
        match self {
            Self::Swa => Some(Self::Full),
            _ => None,
        }
    }

    /// The layer kind this host serves first (`serves`).
    const fn serves(self) -> DraftLayerKind {
        match self {
            Self::Full => DraftLayerKind::Full,
            Self::Swa => DraftLayerKind::Window,
            Self::Mamba => DraftLayerKind::State,
        }
    }
}

/// A draft layer kind (`LAYER_FULL`, `LAYER_WINDOW`, `LAYER_STATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DraftLayerKind {
    /// Full-attention layers.
    Full,
    /// Sliding-window layers.
    Window,
    /// Recurrent-state (Mamba, linear-attention) layers.
    State,
}

impl DraftLayerKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::Full, Self::Window, Self::State];

    /// SGLang's name (`LAYER_FULL`, `LAYER_WINDOW`, `LAYER_STATE`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Window => "window",
            Self::State => "state",
        }
    }

    /// The kind named `name` (one of [`Self::as_str`]'s names).
    pub fn from_name(name: &str) -> Result<Self> {
        by_name(&Self::ALL, name, "draft layer kind", Self::as_str)
    }

    /// `_LAYER_KIND_NOUN`.
    const fn noun(self) -> &'static str {
        match self {
            Self::Full => "full-attention",
            Self::Window => "sliding-window",
            Self::State => "recurrent-state",
        }
    }

    /// The host that serves this kind first (`host_for`).
    const fn host(self) -> Host {
        match self {
            Self::Full => Host::Full,
            Self::Window => Host::Swa,
            Self::State => Host::Mamba,
        }
    }
}

/// The per-GPU geometry one kind of draft layer shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DraftLayerGeometry {
    /// `DraftKVGeometry`: K/V heads on one rank and the K and V head dims, elements.
    Kv {
        /// KV heads on one rank.
        head_num: u64,
        /// K head dim, elements.
        head_dim: u64,
        /// V head dim, elements.
        v_head_dim: u64,
    },
    /// `DraftStateGeometry`, by its bytes: every conv row and the temporal row of one
    /// layer of one slot (`layer_bytes()`), bytes.
    State {
        /// One layer's state in one slot, bytes.
        layer_bytes: u64,
    },
}

/// `DraftLayerSet`: the draft's layers of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DraftLayerSet {
    /// The kind.
    pub kind: DraftLayerKind,
    /// Layer ids (a replicated head) or depth ids (a per-depth head).
    pub layer_ids: Vec<u64>,
    /// The geometry every layer of the set shares.
    pub geometry: DraftLayerGeometry,
    /// Sliding-window kinds: how many tokens back the layers read (`None`: not declared), tokens.
    pub window: Option<u64>,
}

/// `DraftKVProfile`: what the draft checkpoint asks of the host sub-pools.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DraftProfile {
    /// Depths of a per-depth head (`num_nextn_predict_layers`); 1: a replicated head.
    pub num_depths: u64,
    /// The kinds the draft has, in SGLang's order (full, window, state), each at most once.
    pub kinds: Vec<DraftLayerSet>,
}

/// `PlacementContext`: target-side facts the hosts consult.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PlacementContext {
    /// The sub-pools the target's unified factory builds.
    pub hosts: Vec<Host>,
    /// The target's sliding window (`None`: not declared), tokens.
    pub target_window: Option<u64>,
    /// Every resolved attention backend carries `v_head_dim` to the kernel.
    pub asymmetric_rows_ok: bool,
    /// The backends the draft may run on (SGLang's resolved names).
    pub draft_backends: Vec<String>,
}

/// `_runner_layer_counts`: per kind (profile order), each runner's layer count; or why none.
fn runner_counts(
    profile: &DraftProfile,
    runners: u64,
) -> std::result::Result<Vec<Vec<u64>>, String> {
    let n = usize::try_from(runners).unwrap_or(usize::MAX);
    if profile.num_depths <= 1 {
        return Ok(profile
            .kinds
            .iter()
            .map(|k| vec![k.layer_ids.len() as u64; n])
            .collect());
    }
    if runners == 1 {
        return Err(format!(
            "a per-depth draft head ({} depths) needs one runner per depth (multi-layer EAGLE)",
            profile.num_depths
        ));
    }
    if runners > profile.num_depths {
        return Err(format!(
            "{runners} draft runners exceed the head's {} depths",
            profile.num_depths
        ));
    }
    Ok(profile
        .kinds
        .iter()
        .map(|k| {
            (0..runners)
                .map(|r| u64::from(k.layer_ids.contains(&r)))
                .collect()
        })
        .collect())
}

/// `_kv_rows_declined`: why one kind's K/V rows cannot be fused entry parts.
fn rows_declined(
    geometry: &DraftLayerGeometry,
    itemsize: u64,
    asymmetric_ok: bool,
) -> Option<String> {
    let DraftLayerGeometry::Kv {
        head_num,
        head_dim,
        v_head_dim,
    } = *geometry
    else {
        return None;
    };
    if head_dim != v_head_dim && !asymmetric_ok {
        return Some(format!(
            "the draft's K/V rows are asymmetric (head_dim={head_dim}, v_head_dim={v_head_dim}) and a \
             resolved attention backend does not carry v_head_dim through to the kernel"
        ));
    }
    for dim in [head_dim, v_head_dim] {
        let row = u128::from(head_num) * u128::from(dim) * u128::from(itemsize);
        if row % u128::from(ROW_ALIGN) != 0 {
            return Some(format!(
                "the draft's K/V rows are {row} B, not a multiple of the {ROW_ALIGN}-B row alignment a \
                 fused entry part needs"
            ));
        }
    }
    None
}

/// Python's `repr(sorted(names))` of string names.
fn py_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// `HostKind.prerequisite`: a window kind needs the per-step window rail on every draft backend.
fn prerequisite(host: Host, ctx: &PlacementContext) -> Option<String> {
    if host != Host::Swa {
        return None;
    }
    let mut off: Vec<&str> = ctx
        .draft_backends
        .iter()
        .map(String::as_str)
        .filter(|b| !WINDOW_RAIL_BACKENDS.contains(b))
        .collect();
    off.sort_unstable();
    off.dedup();
    if off.is_empty() {
        return None;
    }
    Some(format!(
        "the draft's attention backend {} carries no per-step sliding-window rail (only {} does)",
        py_list(&off),
        py_list(&WINDOW_RAIL_BACKENDS)
    ))
}

/// `HostKind.admits` (and `WindowHostKind.admits`): why `host` cannot carry `layers`.
fn admits(host: Host, layers: &DraftLayerSet, ctx: &PlacementContext) -> Option<String> {
    if !ctx.hosts.contains(&host) {
        return Some(format!("the host has no '{}' sub-pool", host.as_str()));
    }
    if host != Host::Swa {
        return None;
    }
    match (layers.window, ctx.target_window) {
        (None, _) => Some("the draft declares no sliding window size".into()),
        (_, None) => Some("the target declares no sliding window size".into()),
        (Some(w), Some(t)) if w > t => {
            Some(format!("its window {w} exceeds the target's window {t}"))
        }
        _ => None,
    }
}

/// `place_fused_draft`: every draft layer of every runner assigned to a host (see the
/// module doc), `itemsize` the region rows' storage element in bytes.
///
/// Errors: SGLang's assertions on the result (no lane in any host, a region with zero heads
/// or dims) and overflow; a declined draft is `Ok`.
pub fn place_fused_draft(
    profile: &DraftProfile,
    num_runners: u64,
    ctx: &PlacementContext,
    itemsize: u64,
) -> Result<FusedDraftDecision> {
    if num_runners == 0 || num_runners > MAX_RUNNERS {
        return Err(PlanError::invalid(format!(
            "num_runners must be in 1..={MAX_RUNNERS}; got {num_runners}"
        )));
    }
    let counts = match runner_counts(profile, num_runners) {
        Ok(c) => c,
        Err(reason) => return Ok(FusedDraftDecision::Declined(reason)),
    };
    let what = |k: &DraftLayerSet| {
        format!(
            "the draft's {} {} layer(s)",
            k.layer_ids.len(),
            k.kind.noun()
        )
    };
    for k in &profile.kinds {
        let host = k.kind.host();
        if let Some(reason) = prerequisite(host, ctx) {
            return Ok(FusedDraftDecision::Declined(format!(
                "{}: {reason}",
                what(k)
            )));
        }
        if let Some(reason) = rows_declined(&k.geometry, itemsize, ctx.asymmetric_rows_ok) {
            return Ok(FusedDraftDecision::Declined(reason));
        }
    }
    // host -> (per-runner counts, the first layer set placed there)
    let mut placed: Vec<(Host, Vec<u64>, &DraftLayerSet)> = Vec::new();
    let mut notes = Vec::new();
    for (k, per_kind) in profile.kinds.iter().zip(&counts) {
        let mut host = k.kind.host();
        if let Some(reason) = admits(host, k, ctx) {
            let fallback = host.fallback();
            let fold = fallback.and_then(|f| {
                let own = profile.kinds.iter().find(|o| o.kind == f.serves());
                match own {
                    Some(o) if o.geometry != k.geometry => Some(format!(
                        "its {} layers' rows differ from its {} layers' rows, so they cannot share the '{}' \
                         sub-pool",
                        k.kind.noun(),
                        f.serves().noun(),
                        f.as_str()
                    )),
                    _ => admits(f, k, ctx),
                }
            });
            match (fallback, fold) {
                (Some(f), None) => {
                    notes.push(format!(
                        "{} ride in the '{}' sub-pool: {reason}",
                        what(k),
                        f.as_str()
                    ));
                    host = f;
                }
                (_, fold) => {
                    let reason = match fold {
                        Some(fold) => format!("{reason}, and {fold}"),
                        None => reason,
                    };
                    return Ok(FusedDraftDecision::Declined(format!(
                        "{} cannot ride in the '{}' sub-pool: {reason}",
                        what(k),
                        host.as_str()
                    )));
                }
            }
        }
        match placed.iter_mut().find(|(h, _, _)| *h == host) {
            Some((_, c, _)) => {
                for (a, b) in c.iter_mut().zip(per_kind) {
                    *a = add(*a, *b, "draft lanes")?;
                }
            }
            None => placed.push((host, per_kind.clone(), k)),
        }
    }
    placed.retain(|(_, c, _)| c.iter().any(|n| *n > 0));
    if placed.is_empty() {
        // `FusedDraftPlacement.from_counts` asserts on a placement with no lane anywhere.
        return Err(PlanError::invalid(
            "every host needs one layer count per runner; got {}",
        ));
    }
    placed.sort_by_key(|(h, _, _)| *h);
    let n = usize::try_from(num_runners).unwrap_or(usize::MAX);
    let mut runners: Vec<Vec<(Host, u64, u64)>> = vec![Vec::new(); n];
    let mut regions = Vec::new();
    for (host, per_runner, layers) in &placed {
        let lane_num = per_runner
            .iter()
            .try_fold(0u64, |a, b| add(a, *b, "draft lanes"))?;
        let region = match layers.geometry {
            DraftLayerGeometry::Kv {
                head_num,
                head_dim,
                v_head_dim,
            } if *host != Host::Mamba => DraftRegion::Dense {
                lane_num,
                head_num,
                head_dim,
                v_head_dim,
                itemsize,
            },
            DraftLayerGeometry::State { layer_bytes } if *host == Host::Mamba => {
                DraftRegion::State {
                    lane_num,
                    layer_bytes,
                }
            }
            _ => {
                return Err(PlanError::invalid(
                    "a host kind got a region of the other family",
                ))
            }
        };
        validate(&region)?;
        let mut start = 0u64;
        for (runner, count) in per_runner.iter().enumerate() {
            if *count > 0 {
                runners[runner].push((*host, start, *count));
            }
            start += count;
        }
        regions.push((*host, region));
    }
    Ok(FusedDraftDecision::Placed {
        placement: FusedDraftPlacement { regions, runners },
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

/// `DenseDraftRegion.validate` / `DraftStateRegion.validate` (SGLang's assertions).
fn validate(region: &DraftRegion) -> Result<()> {
    let fields: &[(&str, u64)] = match region {
        DraftRegion::Dense {
            lane_num,
            head_num,
            head_dim,
            v_head_dim,
            ..
        } => &[
            ("lane_num", *lane_num),
            ("head_num", *head_num),
            ("head_dim", *head_dim),
            ("v_head_dim", *v_head_dim),
        ],
        DraftRegion::State { lane_num, .. } => &[("lane_num", *lane_num)],
    };
    match fields.iter().find(|(_, v)| *v == 0) {
        Some((name, v)) => Err(PlanError::invalid(format!(
            "{name} must be positive; got {v}"
        ))),
        None => Ok(()),
    }
}
