//! kvbudget's plan of a hybrid-state model under SGLang 0.5.23's unified memory
//! (`--enable-unified-memory`: `KVCacheConfigurator._init_unified_mamba_pools`,
//! `mem_cache/unified_memory_pool.py`'s `init_unified_mamba_pools` and
//! `UnifiedKVPool`): the full-attention KV cache and the state slots share one
//! `uint8` buffer, the state growing up from its low end and the KV tokens down
//! from its high end, so the split between them floats at run time.
//!
//! SGLang's buffer holds `X + S * E_m` bytes: `X` the KV budget
//! `_profile_available_bytes` returned (after the state charge) floored to 4096
//! bytes (`config_from_budget`'s `unified_total_bytes`), `S` the state slots
//! (`max_mamba_cache_size`) and `E_m` one slot over the stage's state layers
//! (`MambaSubPoolSpec.entry_bytes`: every conv row, then the temporal row, per
//! layer, unaligned). One full-side token takes `E_f` bytes, the stage's full
//! layers' K and V rows rounded up to 32 bytes (`MHASubPoolSpec.entry_bytes`;
//! MLA: the latent row). The Default configurator's `max_total_num_tokens` and
//! `S` stay SGLang's boot labels.
//!
//! The plan lists one [`PoolName::Unified`] pool: one `uint8` tensor of the
//! buffer's bytes, `tokens = rows` the full-side label, the state slots in the
//! [`StateBudget`] beside it. `Fit::Sglang` takes SGLang's bytes; `Fit::Exact`
//! the same construction on the whole budget, `X = floor_4096(available - S *
//! E_m)`, so the buffer fits. SGLang's own is mostly one state slot under the
//! budget (its state charge counts a padding slot the buffer does not hold); a
//! pipeline stage's share priced as `int(per_req * share)`, a byte under the
//! slot it lays out, can make it overshoot by about a byte a slot.
//!
//! SGLang's refusals, in its order: its launch checks (`unified_launch.rs`), a
//! sub-pool without layers, the bs=1 floor (`3 * E_m` plus the slot-0 sink, the
//! largest entry or a page of full tokens); then per sub-pool, state first: no
//! slot past the sink, a state entry that is not a whole number of conv or
//! temporal elements, the buffer not a whole number of them (torch's dtype
//! view); on the full side 2^31 physical ids or more, a K, V or latent row that
//! is not a multiple of 16 bytes, the buffer not a whole number of KV elements.
//! A speculative draft (EAGLE, EAGLE3, NEXTN, DFLASH, DSPARK) rides in the full-side entries, `E_f`
//! then the fused entry, and its verify buffers are a second pool beside the
//! buffer (`state_unified_draft.rs`). A hybrid-SWA state model's buffer is the tri-pool
//! (`state_unified_swa.rs`). Not planned (refused by name): an mxfp8 KV cache and a fused
//! state entry. The
//! extra bytes per slot and ReplaySSM's rings SGLang's state budget charges are
//! not in the buffer (SGLang allocates neither there).

use super::fused_draft::{ENTRY_ALIGN, ROW_ALIGN};
use super::state_unified_draft::verify_buffers;
use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec};
use crate::arith::{add, mul, to_i64};
use crate::cell::{kv_heads_per_rank, mla_cache_dim};
use crate::configurator::PoolConfigurator;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::sizing::state::StateBudget;
use crate::sizing::ConfiguratorKind;
use crate::state::StateConfig;

/// `config_from_budget` floors the profiled budget to this many bytes.
pub(super) const BUDGET_ALIGN: i64 = 4096;

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::invalid(msg)
}

/// A KV side of the buffer (`MHASubPoolSpec` / `MLASubPoolSpec`): the full layers', or the
/// tri-pool's sliding-window layers' (`state_unified_swa.rs`).
pub(super) struct KvSide {
    /// SGLang's sub-pool name (`full`, `swa`).
    pub(super) name: &'static str,
    /// One token over the stage's layers of this side, rounded up to [`ENTRY_ALIGN`] (a fused
    /// draft's parts included once [`PoolConfigurator::plan_unified_state`] sets them), bytes.
    pub(super) entry: u64,
    /// The stage's layers' own rows of one token, unaligned, bytes.
    pub(super) host: u64,
    /// The per-layer rows SGLang checks (`K`, `V`; `latent`), bytes.
    pub(super) rows: Vec<(&'static str, u64)>,
    /// The storage dtype's element, bytes.
    pub(super) itemsize: u64,
}

/// A side of `layers` layers whose one-token rows are `rows` (see [`KvSide`]).
pub(super) fn kv_side(
    name: &'static str,
    rows: Vec<(&'static str, u64)>,
    layers: u64,
    itemsize: u64,
) -> Result<KvSide> {
    if layers == 0 {
        return Err(invalid("layer_num must be positive; got 0"));
    }
    let host = rows
        .iter()
        .try_fold(0u64, |acc, (_, r)| add(acc, *r, "entry"))?;
    let host = mul(host, layers, "entry")?;
    let entry = host
        .checked_next_multiple_of(ENTRY_ALIGN)
        .ok_or_else(|| PlanError::overflow("entry"))?;
    Ok(KvSide {
        name,
        entry,
        host,
        rows,
        itemsize,
    })
}

/// The full side of the buffer for `cfg`'s stage.
pub(super) fn full_entry(cfg: &PoolConfigurator) -> Result<KvSide> {
    let (model, serving) = (cfg.shape(), cfg.serving());
    let dtype = serving.kv_dtype();
    if dtype == KvDtype::Mxfp8 {
        return Err(invalid(
            "kvbudget does not lay out SGLang's unified pool for an mxfp8 KV cache (its scale rows)",
        ));
    }
    // `_store_dtype_for`: fp8 is stored as uint8, one byte either way.
    let b = dtype.element_bytes();
    // The Default configurator prices every layer at the full geometry; the tri-pool's full side
    // holds the full layers alone (its SWA layers are the SWA side's).
    let layers = if cfg.kind() == ConfiguratorKind::Default {
        model.num_layers()
    } else {
        model.num_full_layers
    };
    let rows = if let Some(mla) = model.mla() {
        for (what, v) in [
            ("kv_lora_rank", mla.kv_lora_rank),
            ("qk_rope_head_dim", mla.qk_rope_head_dim),
        ] {
            if v == 0 {
                return Err(invalid(format!("{what} must be positive; got 0")));
            }
        }
        if model.dsa().is_some() {
            return Err(invalid(
                "kvbudget does not lay out SGLang's unified pool for a DSA indexer",
            ));
        }
        vec![(
            "latent",
            mul(
                mla_cache_dim::<PlanError>(model, &mla, serving)?,
                b,
                "latent row",
            )?,
        )]
    } else {
        let n = kv_heads_per_rank(
            model.num_kv_heads,
            serving.tp_size,
            serving.heads_dcp_size(),
        );
        vec![
            ("K", mul(mul(n, model.head_dim, "K row")?, b, "K row")?),
            ("V", mul(mul(n, model.v_dim(), "V row")?, b, "V row")?),
        ]
    };
    kv_side("full", rows, layers, b)
}

/// One state slot over the stage's state layers (`MambaSubPoolSpec.entry_bytes`), bytes.
pub(super) fn state_entry(state: &StateConfig) -> Result<u64> {
    let layers = state.stage_state_layers.unwrap_or(state.num_state_layers);
    if layers == 0 {
        return Err(invalid("layer_num must be positive; got 0"));
    }
    mul(state.per_layer_bytes::<PlanError>()?, layers, "state entry")
}

/// SGLang's checks on a buffer of `total` bytes, in its order (see the module doc): the bs=1
/// floor of `factory` (its own `terms` before the state slots and the sink:
/// [`check_floor`]), then [`check_sub_pools`].
pub(super) fn check_buffer(
    total: u64,
    sides: &[&KvSide],
    e_m: u64,
    state: &StateConfig,
    page: u64,
    factory: (&str, Vec<(&str, u64)>),
) -> Result<()> {
    check_floor(total, sides, e_m, page, factory)?;
    check_sub_pools(total, sides, e_m, state, page)
}

/// `_reserved_floor_bytes`: the slot-0 sink, the largest entry or a page of a KV side's, bytes.
fn sink_bytes(sides: &[&KvSide], e_m: u64, page: u64) -> Result<u64> {
    let mut sink = e_m;
    for side in sides {
        sink = sink
            .max(side.entry)
            .max(mul(page, side.entry, "the slot-0 sink")?);
    }
    Ok(sink)
}

/// `_check_bs1_feasibility_floor` of `factory`: its own `terms`, then the state slots one request
/// locks (`3 * E_m`) and the slot-0 sink.
pub(super) fn check_floor(
    total: u64,
    sides: &[&KvSide],
    e_m: u64,
    page: u64,
    (factory, terms): (&str, Vec<(&str, u64)>),
) -> Result<()> {
    let sink = sink_bytes(sides, e_m, page)?;
    let mut terms = terms;
    terms.extend([
        ("bs1_state_slots", mul(3, e_m, "the bs=1 floor")?),
        ("sink", sink),
    ]);
    let floor = terms
        .iter()
        .try_fold(0u64, |acc, (_, b)| add(acc, *b, "the bs=1 floor"))?;
    if total < floor {
        let detail: Vec<String> = terms.iter().map(|(n, b)| format!("{n}={b}")).collect();
        return Err(PlanError::not_enough_memory(format!(
            "[unified-memory-pool] {factory}: byte budget {total} cannot fit ONE worst-case request (bs=1 \
             floor {floor} = {}). A pool this size retract-livelocks at runtime. Raise --mem-fraction-static, \
             lower the model context length, or reduce reserved memory.",
            detail.join(" + ")
        )));
    }
    Ok(())
}

/// `UnifiedKVPool`'s checks per sub-pool in the buffer's chain order: the state (grow-up) end
/// first, then `sides` (the float middle before the grow-down end).
pub(super) fn check_sub_pools(
    total: u64,
    sides: &[&KvSide],
    e_m: u64,
    state: &StateConfig,
    page: u64,
) -> Result<()> {
    let sink = sink_bytes(sides, e_m, page)?;
    let min_slot = |name: &str, entry: u64| -> Result<u64> {
        let max_slots = total / entry;
        if max_slots <= sink.div_ceil(entry) {
            return Err(PlanError::not_enough_memory(format!(
                "UnifiedKVPool: sub-pool '{name}' fits only {max_slots} slots in {total} bytes, but \
                 min_slot_index={} leaves no room for real data. Increase total_bytes.",
                sink.div_ceil(entry)
            )));
        }
        Ok(max_slots)
    };
    min_slot("mamba", e_m)?;
    // `build_mamba_entry_views`: the entry in whole elements, then the buffer viewed as them.
    for (what, size) in [
        ("conv-state", state.conv_dtype),
        ("temporal-state", state.ssm_dtype),
    ] {
        let item = size.itemsize();
        if !e_m.is_multiple_of(item) {
            return Err(invalid(format!(
                "misaligned mamba spec: per-slot entry_bytes={e_m} is not a multiple of the {what} \
                 itemsize {item} B"
            )));
        }
        viewable(total, item)?;
    }
    for side in sides {
        let name = side.name;
        let max_slots = min_slot(name, side.entry)?;
        // `_build_mha_views` / `_build_mla_views`: int32 physical ids, the rows, the dtype view.
        let ids = max_slots / page * page;
        if ids >= 1 << 31 {
            return Err(invalid(format!(
                "sub-pool '{name}': {ids} physical ids exceed the int32 bound (2^31) that read-index \
                 buffers assume. Reduce max_total_num_tokens."
            )));
        }
        if let Some((part, bytes)) = side.rows.iter().find(|(_, r)| !r.is_multiple_of(ROW_ALIGN)) {
            return Err(invalid(format!(
                "--enable-unified-memory needs every per-rank KV row to be a multiple of {ROW_ALIGN} \
                 bytes; sub-pool '{name}' has a {bytes}-byte {part} row. Run this model without \
                 --enable-unified-memory."
            )));
        }
        viewable(total, side.itemsize)?;
    }
    Ok(())
}

/// The unified buffer's token side, bytes: SGLang's KV budget after the state charge
/// (`Fit::Sglang`), or `available_bytes` less the `reserved` bytes beside it (`Fit::Exact`: the
/// state slots, and a draft's verify buffers).
///
/// Errors: a fit that is neither; no byte left for the KV tokens.
pub(super) fn token_side(
    fit: Fit,
    budget: &StateBudget,
    available_bytes: i64,
    reserved: impl FnOnce() -> Result<u64>,
) -> Result<i64> {
    let (side, reserved) = match fit {
        Fit::Sglang => (budget.kv_budget_bytes()?, None),
        Fit::Exact => {
            let reserved = reserved()?;
            let side = available_bytes.saturating_sub(to_i64(reserved, "state slots")?);
            (side, Some(reserved))
        }
        Fit::Given => return Err(invalid("plan_with_state takes fit \"exact\" or \"sglang\"")),
    };
    if side <= 0 {
        let what = reserved.map_or("SGLang's state charge".to_owned(), |r| format!("{r} bytes"));
        return Err(PlanError::not_enough_memory(format!(
            "Not enough memory: the state slots ({} slots) and the buffers beside the unified one ({what}) \
             leave no bytes of the {available_bytes} for the KV tokens",
            budget.max_mamba_cache_size
        )));
    }
    Ok(side)
}

/// torch's `raw.view(dtype)` of the `total`-byte buffer: whole elements of `item` bytes.
fn viewable(total: u64, item: u64) -> Result<()> {
    if total.is_multiple_of(item) {
        return Ok(());
    }
    Err(invalid(format!(
        "the unified buffer's {total} bytes are no whole number of {item}-byte elements, which SGLang views \
         it as (torch refuses the view)"
    )))
}

impl PoolConfigurator {
    /// SGLang's launch checks of `--enable-unified-memory` (`unified_launch.rs`), and `_init_pools`'
    /// refusals on a target worker: a model that is neither hybrid-SWA nor hybrid-state (a Default
    /// plan; a state model's plan takes [`Self::plan_unified_state`] instead), and MLA
    /// sliding-window pools (`_init_unified_swa_pools`' assertion).
    pub fn check_unified_default(&self) -> Result<()> {
        self.check_unified_hooks(false)?;
        let serving = self.serving();
        if !serving.enable_unified_memory || serving.is_draft_worker {
            return Ok(());
        }
        if self.kind() != ConfiguratorKind::Default && self.shape().mla().is_some() {
            return Err(invalid(
                "unified memory pool does not support MLA-SWA hybrid yet",
            ));
        }
        if self.kind() == ConfiguratorKind::Default {
            return Err(invalid(
                "--enable-unified-memory only supports hybrid Mamba and hybrid sliding-window-attention models \
                 (DeepSeek-V4 excluded); the current model is neither, so the unified memory pool cannot be \
                 built. Drop --enable-unified-memory for this model.",
            ));
        }
        Ok(())
    }

    /// The configurator SGLang's Default configurator prices a hybrid-state target with under
    /// unified memory: with an EAGLE- or DFLASH-family draft that fuses into the full-side entries, this
    /// one with `fused_full_entry_bytes` the fused entry; `None` where nothing changes.
    ///
    /// Errors: the full side's and the draft decision's (see `state_unified_draft.rs`).
    pub(crate) fn unified_draft_pricing(&self) -> Result<Option<Self>> {
        let (serving, spec) = (self.serving(), self.spec());
        if !serving.enable_unified_memory
            || serving.is_draft_worker
            || !spec.algorithm.is_speculative()
            || spec.is_fused()
            || self.kind() != ConfiguratorKind::Default
        {
            return Ok(None);
        }
        self.unified_draft_priced(full_entry(self)?.host)
    }

    /// Bytes of one full-side token and of one state slot in SGLang's unified buffer for
    /// this model and `state`, `(E_f, E_m)` (see the module doc): the buffer holds
    /// `bytes // E_f` full tokens with no state, `bytes // E_m` state slots with no KV.
    /// With a speculative draft `E_f` is the fused entry (the draft's rows included).
    ///
    /// Errors: what SGLang refuses of the entries (an FP4 KV cache, a sub-pool without
    /// layers, MLA dims of zero, a draft that cannot fuse) and what kvbudget does not lay
    /// out (mxfp8, DSA; see `state_unified_draft.rs` for the draft).
    pub fn unified_state_entries(&self, state: &StateConfig) -> Result<(u64, u64)> {
        self.check_unified_hooks(true)?;
        let state = state.resolved()?;
        let mut full = full_entry(self)?;
        if self.spec().algorithm.is_speculative() {
            full.entry = self.unified_fused_full_entry(full.host)?.map_err(invalid)?;
        }
        Ok((full.entry, state_entry(&state)?))
    }

    /// The plan's one unified pool: a `uint8` buffer of `total` bytes over `ids`, listed with its
    /// first layer, `tokens` the full-side label (rows alike: no padding page).
    pub(super) fn unified_pool(&self, mut ids: Vec<u64>, tokens: u64, total: u64) -> PoolSpec {
        ids.sort_unstable();
        let first = ids.first().copied().unwrap_or(0);
        PoolSpec {
            name: PoolName::Unified,
            tokens,
            rows: tokens,
            layer_ids: ids,
            kv_cache_dtype: self.serving().kv_cache_dtype,
            nbytes: total,
            padding_bytes: 0,
            tensors: vec![TensorSpec {
                pool: PoolName::Unified,
                layer_id: first,
                kind: TensorKind::Bytes,
                shape: vec![total],
                dtype: StorageDtype::Uint8,
                nbytes: total,
                offset: 0,
            }],
        }
    }

    /// The plan of a hybrid-state model under unified memory (see the module doc), on
    /// `available_bytes` with SGLang's state budget `budget` already taken.
    ///
    /// Errors: SGLang's refusals and what kvbudget does not plan (see the module doc);
    /// the Default configurator's own (no KV token fits the token side).
    pub(super) fn plan_unified_state(
        &self,
        available_bytes: i64,
        fit: Fit,
        state: &StateConfig,
        budget: &StateBudget,
    ) -> Result<PoolPlan> {
        if self.kind() != ConfiguratorKind::Default {
            // state, SWA and full layers in one buffer (`state_unified_swa.rs`)
            return self.plan_unified_tri(available_bytes, fit, state, budget);
        }
        if state.fused_state_entry_bytes.is_some() {
            return Err(invalid(
                "kvbudget does not lay out SGLang's unified pool with a fused state entry",
            ));
        }
        let drafting = self.spec().algorithm.is_speculative();
        let mut full = full_entry(self)?;
        let e_m = state_entry(state)?;
        let slots = budget.max_mamba_cache_size;
        let state_bytes = to_i64(mul(slots, e_m, "state slots")?, "state slots")?;
        // The verify buffers SGLang allocates beside the buffer (a draft only).
        let side = if drafting {
            Some(verify_buffers(state, self.serving(), self.spec(), slots)?)
        } else {
            None
        };
        let side_bytes = side.as_ref().map_or(0, |p| p.nbytes);
        let token_side = token_side(fit, budget, available_bytes, || {
            add(
                state_bytes.unsigned_abs(),
                side_bytes,
                "state and verify buffers",
            )
        })?;
        let config = if drafting {
            // SGLang's Default configurator prices a fused draft by the fused entry; one that
            // cannot fuse at the target's geometry, then the factory refuses it.
            match self.unified_fused_full_entry(full.host)? {
                Ok(e_f) => {
                    full.entry = e_f;
                    let mut spec = *self.spec();
                    (spec.draft, spec.fused_full_entry_bytes) = (None, Some(e_f));
                    let mut scenario = *self.scenario();
                    scenario.spec = spec;
                    self.with_scenario(&scenario)?
                        .calculate_pool_sizes(token_side, None)?
                }
                Err(refusal) => {
                    self.calculate_pool_sizes(token_side, None)?;
                    return Err(invalid(refusal));
                }
            }
        } else {
            self.calculate_pool_sizes(token_side, None)?
        };
        let x = token_side - token_side % BUDGET_ALIGN;
        let total = add(
            x.unsigned_abs(),
            state_bytes.unsigned_abs(),
            "unified pool bytes",
        )?;
        let page = self.resolve_page_size(None)?.unsigned_abs();
        check_buffer(
            total,
            &[&full],
            e_m,
            state,
            page,
            ("init_unified_mamba_pools", Vec::new()),
        )?;
        let tokens = u64::try_from(config.max_total_num_tokens)
            .map_err(|_| PlanError::not_enough_memory("the full side holds no token"))?;
        let mut config = config;
        config.unified_memory_pool_bytes = Some(to_i64(total, "unified pool bytes")?);
        let pool = self.unified_pool(self.layer_ids().full, tokens, total);
        let total_bytes = add(total, side_bytes, "plan bytes")?;
        Ok(PoolPlan {
            fit,
            configurator: self.kind(),
            available_bytes,
            page_size: page,
            config,
            pools: std::iter::once(pool).chain(side).collect(),
            total_bytes,
        })
    }
}
