//! A speculative draft in SGLang 0.5.23's unified Mamba pool (`--enable-unified-memory`
//! with EAGLE / EAGLE3 / NEXTN, DFLASH or DSPARK on a hybrid-state target; see
//! `state_unified.rs` for the buffer).
//!
//! SGLang keeps no draft pool there: the draft's K/V rows ride in every full-side entry
//! of the target's buffer (`KVCacheConfigurator._fused_draft_decision`, then
//! [`super::fused_draft::place_fused_draft`] over the hosts `full` and `mamba`), so one
//! full-side token takes the fused entry `E_f = align32(align16(host) + lanes * (K + V
//! draft rows))` bytes, which also prices the Default configurator's token label
//! (`fused_entry_bytes("full")` replaces its cell, in its EAGLE and its DFLASH branch alike).
//! The draft worker binds views of those lanes (`unified_draft_pool.bind_fused_draft`) and
//! allocates nothing; it has no budget of its own (it takes the target's `MemoryPoolConfig`).
//! Beside the buffer the target's `UnifiedMambaPool` allocates the verify buffers:
//! `intermediate_ssm` `[L, R + 1, D, heads, head_dim, state_dim]` (SSM dtype) and one
//! `intermediate_conv_window` `[L, R + 1, D, *conv_shape]` per conv shape (conv dtype; never
//! deduplicated), `L` the stage's state layers, `D` `--speculative-num-draft-tokens`, `R + 1`
//! rows over SGLang's `max_num_reqs`. SGLang's state budget reserved them
//! (`_handle_max_mamba_cache`: `per_req` times `capped + 1` times `D` bytes); kvbudget lists
//! them as one [`super::PoolName::State`] pool after the unified one, `R` the running requests
//! the state serves (`min(max_running_requests / attn_dp, slots / mamba_ratio)`, at least
//! SGLang's `max_num_reqs`), the conv windows stacked as one tensor.
//!
//! The draft kvbudget places is what the scenario says: `d` full-attention layers
//! (`spec.num_draft_layers()`) at the draft geometry (`spec.draft`, default the target's
//! full geometry; its heads split over `tp` alone: a draft never joins DCP, and SGLang's
//! `draft_attn_tp_size` is the attention TP without prefill context parallelism, which
//! kvbudget does not model), one replicated head served by one runner (`num_depths = 1`, as
//! SGLang takes it for a DFLASH-family draft). The draft runs without
//! `--speculative-draft-attention-backend`: an EAGLE draft on the target's pair, a DFLASH-family
//! one on the prefill backend (`resolve_draft_worker_attention_backend`). Its rows are in the
//! host's KV dtype; a draft KV dtype given must be the host's, except that a DFLASH-family
//! draft on fa4 keeps its KV in the model dtype (`configure_kv_cache_dtype`), which its region
//! then holds (`allow_target_draft_different_cache_dtype`; DSPARK only: DFLASH's launch check
//! keeps the target off fa4). Not modelled, so not planned: multi-layer EAGLE runners, a
//! per-depth head, draft sliding-window layers, a draft state block (a conv-chain MTP head
//! with `mtp_local_layer_ids`), HiCache and host-pool retraction.
//!
//! Refused in SGLang's words, in its order: the launch checks (`unified_launch.rs`: FP4, the
//! page-major layout's backends, PD disaggregation, whatever the transfer backend, in
//! kvbudget's words (SGLang's name the backend); then `handle_unified_memory_pool`'s:
//! algorithms other than EAGLE, EAGLE3, DFLASH and DSPARK, NEXTN counting as EAGLE; an
//! `eagle_topk` above 1; for EAGLE the target's and the draft's attention backends off
//! the audited rails, when both backends are given; for DFLASH and DSPARK
//! `_assert_spec_verify_backends` on the backends given; `_validate_unified_memory_dcp`),
//! then a draft that cannot fuse (`_fused_draft_for_mamba_factory`'s ValueError for EAGLE and
//! DFLASH, its reason SGLang's: no draft layer, an MLA draft, DCP, a draft KV dtype of its own,
//! the placement's declines) after the Default configurator's own errors. Refused by kvbudget: a DSPARK draft that
//! cannot fuse (SGLang boots it with a private draft pool beside the buffer that nothing
//! prices, overcommitting the budget), a DSPARK draft whose KV dtype hangs on an unknown
//! prefill backend (fa4 or not), given fused entry bytes, SWA or banded draft layers, and
//! asymmetric draft rows or an MLA target without both attention backends given (SGLang's
//! answer depends on the backends it resolves).

use super::fused_draft::{
    host_entry_bytes, place_fused_draft, DraftLayerGeometry, DraftLayerKind, DraftLayerSet,
    DraftProfile, FusedDraftDecision, Host, PlacementContext,
};
use super::state::{conv_inner, slab_pool, storage};
use super::unified_launch::{
    check_unified_dcp, given_backends, py_list, ASYMMETRIC_OK, VERIFY_AUDITED,
};
use super::{PoolSpec, TensorKind};
use crate::arith::add;
use crate::cell::kv_heads_per_rank;
use crate::configurator::PoolConfigurator;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::fields::Named;
use crate::fp4::AttentionBackend;
use crate::serving::ServingConfig;
use crate::sizing::state::{mamba_ratio, running_per_rank};
use crate::spec::{SpecAlgorithm, SpeculativeConfig};
use crate::state::StateConfig;

/// `_SPEC_MHA_AUDITED_BACKENDS` (`kv_cache_hook.py`), sorted as Python sorts it.
const MHA_AUDITED: [&str; 4] = ["fa3", "flashinfer", "triton", "trtllm_mha"];
/// DSPARK's verify set (`_SPEC_VERIFY_AUDITED_BACKENDS | {"fa4"}`), sorted.
const DSPARK_VERIFY: [&str; 7] = [
    "cutedsl_mla",
    "fa3",
    "fa4",
    "flashinfer",
    "flashmla",
    "triton",
    "trtllm_mla",
];
/// `DRAFT_ATTENTION_BACKEND_CHOICES` (`arg_groups/choices.py`), those kvbudget names.
const DRAFT_CHOICES: [AttentionBackend; 5] = [
    AttentionBackend::Flashinfer,
    AttentionBackend::Fa3,
    AttentionBackend::Fa4,
    AttentionBackend::Triton,
    AttentionBackend::TrtllmMha,
];

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::invalid(msg)
}

/// SGLang's name of the resolved algorithm (NEXTN collapses to EAGLE).
fn sglang_name(a: SpecAlgorithm) -> String {
    match a {
        SpecAlgorithm::NextN => "EAGLE".into(),
        a => a.as_str().to_ascii_uppercase(),
    }
}

/// `torch.<dtype>` of a KV dtype SGLang resolves (unified memory takes no other).
fn torch_dtype(d: KvDtype) -> &'static str {
    match d {
        KvDtype::Fp16 => "torch.float16",
        KvDtype::Fp32 => "torch.float32",
        KvDtype::Fp8E4m3 => "torch.float8_e4m3fn",
        KvDtype::Fp8E5m2 => "torch.float8_e5m2",
        _ => "torch.bfloat16",
    }
}

/// The resolved (prefill, decode) backends, sorted and deduplicated; `None` unless both are given.
fn backends(serving: &ServingConfig) -> Option<Vec<&'static str>> {
    let mut b = vec![
        serving.prefill_attention_backend?.name(),
        serving.decode_attention_backend?.name(),
    ];
    b.sort_unstable();
    b.dedup();
    Some(b)
}

/// `handle_unified_memory_pool`'s EAGLE / EAGLE3 checks of the target's backends `b` (both given).
fn check_eagle_backends(b: &[&str], mla: bool) -> Result<()> {
    let allowed: &[&str] = if mla { &VERIFY_AUDITED } else { &MHA_AUDITED };
    if !b.iter().all(|x| allowed.contains(x)) {
        return Err(invalid(format!(
            "--enable-unified-memory + EAGLE/EAGLE3 requires the target on the spec-verify-audited \
             attention backends {} (got {}).",
            py_list(allowed),
            py_list(b)
        )));
    }
    if !b.iter().all(|x| MHA_AUDITED.contains(x)) {
        return Err(invalid(format!(
            "--enable-unified-memory + EAGLE/EAGLE3 runs the draft on {}, but a fused draft is MHA-shaped \
             and reads its KV through the translated MHA rails {}. Set \
             --speculative-draft-attention-backend to one of them.",
            py_list(b),
            py_list(&MHA_AUDITED)
        )));
    }
    Ok(())
}

/// `_assert_spec_verify_backends` for DFLASH (`_SPEC_MHA_AUDITED_BACKENDS`) and DSPARK (the
/// verify set and `fa4`), flashinfer excluded under DCP: the backends given, any one of them.
fn check_verify_backends(serving: &ServingConfig, algorithm: SpecAlgorithm) -> Result<()> {
    let mut allowed: Vec<&str> = if algorithm == SpecAlgorithm::Dspark {
        DSPARK_VERIFY.to_vec()
    } else {
        MHA_AUDITED.to_vec()
    };
    let mut note = "";
    if serving.dcp_size > 1 {
        allowed.retain(|b| *b != "flashinfer");
        note = " (flashinfer is excluded under --dcp-size > 1)";
    }
    let given = given_backends(serving);
    if given.iter().all(|b| allowed.contains(b)) {
        return Ok(());
    }
    Err(invalid(format!(
        "--enable-unified-memory + {} requires spec-verify-audited attention backends {}{note} for both \
         prefill and decode; got {}. Other backends do not translate speculative verify indices to the \
         unified pool's physical ids yet.",
        sglang_name(algorithm),
        py_list(&allowed),
        py_list(&given)
    )))
}

/// The dtype of the fused draft's rows (`_fused_draft_decision`'s region KV dtype), or SGLang's
/// reason it declines: the host's; a draft KV dtype given (`--speculative-draft-kv-cache-dtype`)
/// must be the host's; a DFLASH-family draft on fa4 keeps its KV in the model dtype
/// (`configure_kv_cache_dtype`), which its region may hold (`allow_target_draft_different_cache_dtype`).
fn region_kv_dtype(
    serving: &ServingConfig,
    draft_kv: Option<KvDtype>,
    fa4: bool,
) -> std::result::Result<KvDtype, String> {
    let host = serving.kv_dtype();
    if fa4 {
        return Ok(KvDtype::Auto.or_model(serving.model_dtype));
    }
    match draft_kv.map(|x| x.or_model(serving.model_dtype)) {
        Some(x) if x != host => Err(format!(
            "the draft's KV cache dtype ({}) differs from the host's ({})",
            torch_dtype(x),
            torch_dtype(host)
        )),
        _ => Ok(host),
    }
}

impl PoolConfigurator {
    /// SGLang's launch checks of `--enable-unified-memory` with a draft after its PD block
    /// (`unified_launch.rs`), and what kvbudget does not plan of one (see the module doc), in
    /// SGLang's order.
    pub(super) fn check_unified_draft_launch(&self) -> Result<()> {
        let (spec, serving) = (self.spec(), self.serving());
        let algorithm = spec.algorithm;
        if !matches!(
            algorithm,
            SpecAlgorithm::Eagle
                | SpecAlgorithm::Eagle3
                | SpecAlgorithm::NextN
                | SpecAlgorithm::Dflash
                | SpecAlgorithm::Dspark
        ) {
            return Err(invalid(format!(
                "--enable-unified-memory only supports --speculative-algorithm DSPARK, DFLASH, EAGLE and EAGLE3; \
                 other speculative algorithms are not yet audited for the unified pool's virtual-to-physical loc \
                 translation. Got --speculative-algorithm='{}'.",
                sglang_name(algorithm)
            )));
        }
        if let Some(k) = spec.eagle_topk.filter(|k| *k != 1) {
            return Err(invalid(format!(
                "--enable-unified-memory supports a linear draft chain only (--speculative-eagle-topk in {{None, 1}}); \
                 tree verify relocates accepted tokens one at a time inside the target pool, which the unified \
                 pool's page-granular move_kv_cache cannot express. Got --speculative-eagle-topk={k}."
            )));
        }
        let mla = self.shape().mla().is_some();
        let given = backends(serving);
        if algorithm.is_dflash_family() {
            check_verify_backends(serving, algorithm)?;
        } else if let Some(b) = &given {
            check_eagle_backends(b, mla)?;
        }
        if given.is_none() && mla && spec.draft.is_some() {
            return Err(invalid(
                "kvbudget does not plan a draft in SGLang's unified Mamba pool of an MLA target without \
                 prefill_attention_backend and decode_attention_backend (SGLang's launch check reads the \
                 backends it resolves)",
            ));
        }
        check_unified_dcp(serving, mla, self.shape().num_swa_layers > 0)?;
        if spec.fused_swa_entry_bytes.is_some() {
            return Err(invalid(
                "SGLang's unified Mamba pool has no 'swa' sub-pool to fuse a draft into \
                 (fused_swa_entry_bytes given)",
            ));
        }
        if spec.draft_swa_num_layers > 0 || spec.banded_draft_layers > 0 {
            return Err(invalid(
                "kvbudget does not plan draft sliding-window or banded layers in SGLang's unified Mamba pool",
            ));
        }
        Ok(())
    }

    /// Whether a DFLASH-family draft runs on fa4 (`resolve_draft_worker_attention_backend`: no
    /// `--speculative-draft-attention-backend`, so the prefill backend, flashinfer for one off
    /// `DRAFT_ATTENTION_BACKEND_CHOICES`); `Some(false)` for an EAGLE draft (its KV dtype rule
    /// has no fa4 case) and a DFLASH draft (its launch check keeps the target off fa4); `None`
    /// for a DSPARK draft without `prefill_attention_backend` (unknown).
    fn draft_on_fa4(&self) -> Option<bool> {
        let (spec, serving) = (self.spec(), self.serving());
        if spec.algorithm != SpecAlgorithm::Dspark {
            return Some(false);
        }
        let prefill = serving.prefill_attention_backend?;
        let draft = if DRAFT_CHOICES.contains(&prefill) {
            prefill
        } else {
            AttentionBackend::Flashinfer
        };
        Some(draft == AttentionBackend::Fa4)
    }

    /// Whether and where SGLang fuses this scenario's draft into its unified Mamba pool
    /// (`_fused_draft_decision`; see the module doc): the placement over the hosts `full`
    /// and `mamba`, or SGLang's reason it declines.
    ///
    /// Errors: what kvbudget does not decide (asymmetric draft rows without both attention
    /// backends given) and SGLang's assertions on the region.
    pub fn unified_draft_decision(&self) -> Result<FusedDraftDecision> {
        let (spec, serving, shape) = (self.spec(), self.serving(), self.shape());
        let d = spec.num_draft_layers();
        let eagle = spec.algorithm.is_eagle();
        if d == 0 || !(eagle || spec.algorithm.is_dflash_family()) {
            return Ok(FusedDraftDecision::Declined(
                "fusion does not apply to it".into(),
            ));
        }
        let draft = match &spec.draft {
            Some(g) => Some((*g).resolved()?),
            None => None,
        };
        if draft.is_none() && shape.mla().is_some() {
            return Ok(FusedDraftDecision::Declined(
                "the draft's attention is MLA; the fused region holds dense MHA K/V rows".into(),
            ));
        }
        if serving.dcp_size > 1 {
            return Ok(FusedDraftDecision::Declined(format!(
                "--dcp-size {} shards the host's rows, but the replicated draft reads every token",
                serving.dcp_size
            )));
        }
        let draft_kv = draft.as_ref().and_then(|g| g.kv_cache_dtype);
        let kv = if let Some(fa4) = self.draft_on_fa4() {
            region_kv_dtype(serving, draft_kv, fa4)
        } else {
            let other = region_kv_dtype(serving, draft_kv, false);
            if other != region_kv_dtype(serving, draft_kv, true) {
                return Err(invalid(
                    "kvbudget does not decide the KV dtype of SGLang's fused DSPARK draft without \
                     prefill_attention_backend (the draft runs on it, and on fa4 keeps its KV in the model \
                     dtype)",
                ));
            }
            other
        };
        let kv = match kv {
            Ok(kv) => kv,
            Err(reason) => return Ok(FusedDraftDecision::Declined(reason)),
        };
        let (heads, head_dim, v_head_dim) = match &draft {
            Some(g) => (g.num_kv_heads, g.head_dim, g.v_dim()),
            None => (shape.num_kv_heads, shape.head_dim, shape.v_dim()),
        };
        let b = backends(serving);
        if head_dim != v_head_dim && b.is_none() {
            return Err(invalid(
                "kvbudget does not decide whether SGLang fuses asymmetric draft K/V rows without \
                 prefill_attention_backend and decode_attention_backend (only backends that carry v_head_dim \
                 take them)",
            ));
        }
        let ctx = PlacementContext {
            hosts: vec![Host::Full, Host::Mamba],
            target_window: None,
            asymmetric_rows_ok: b
                .as_ref()
                .is_some_and(|b| b.iter().all(|x| ASYMMETRIC_OK.contains(x))),
            draft_backends: b
                .unwrap_or_default()
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        };
        let profile = DraftProfile {
            num_depths: 1,
            kinds: vec![DraftLayerSet {
                kind: DraftLayerKind::Full,
                layer_ids: (0..d).collect(),
                geometry: DraftLayerGeometry::Kv {
                    head_num: kv_heads_per_rank(heads, serving.tp_size, 1),
                    head_dim,
                    v_head_dim,
                },
                window: None,
            }],
        };
        place_fused_draft(&profile, 1, &ctx, kv.element_bytes())
    }

    /// The full side's fused entry `E_f` for `host_bytes` of the target's own rows, or
    /// SGLang's refusal of a draft that cannot fuse (`_fused_draft_for_mamba_factory`).
    pub(super) fn unified_fused_full_entry(
        &self,
        host_bytes: u64,
    ) -> Result<std::result::Result<u64, String>> {
        match self.unified_draft_decision()? {
            FusedDraftDecision::Declined(reason) if self.spec().algorithm == SpecAlgorithm::Dspark => {
                Ok(Err(format!(
                    "kvbudget does not plan SGLang's unified Mamba pool with a DSPARK draft that cannot fuse \
                     ({reason}): SGLang then keeps the draft's private KV pool beside the unified buffer, \
                     unpriced (the buffer already takes the whole KV budget), so its boot would overcommit GPU \
                     memory; plan without --enable-unified-memory"
                )))
            }
            FusedDraftDecision::Declined(reason) => Ok(Err(format!(
                "--enable-unified-memory + EAGLE/EAGLE3/DFLASH on a mamba-hybrid target needs the draft's KV \
                 fused into the target's pages, but this draft cannot fuse ({reason}). A private draft pool would \
                 overcommit the KV budget the unified buffer already takes."
            ))),
            FusedDraftDecision::Placed { placement, .. } => {
                if placement.region(Host::Mamba).is_some() {
                    return Err(invalid("kvbudget does not lay out a fused draft state block"));
                }
                let e_f = host_entry_bytes(host_bytes, true, placement.region(Host::Full).as_ref())?;
                match self.spec().fused_full_entry_bytes {
                    Some(given) if given != e_f => Err(invalid(format!(
                        "fused_full_entry_bytes {given} is not the entry SGLang lays out for this draft ({e_f} \
                         bytes: the target's full rows and the draft's)"
                    ))),
                    _ => Ok(Ok(e_f)),
                }
            }
        }
    }
}

impl PoolConfigurator {
    /// The configurator SGLang's Default configurator prices with under unified memory on a
    /// hybrid-state target with an EAGLE- or DFLASH-family draft that fuses (`fused_entry_bytes("full")`
    /// replaces the cell): this one with the fused entry `E_f` for `host_bytes` of the target's
    /// own rows; `None` where SGLang prices as without unified memory (no such draft, a draft
    /// worker, given fused entries, a draft that does not fuse).
    ///
    /// Errors: [`Self::unified_draft_decision`]'s.
    pub(super) fn unified_draft_priced(&self, host_bytes: u64) -> Result<Option<Self>> {
        let (serving, spec) = (self.serving(), self.spec());
        let drafts = spec.algorithm.is_eagle() || spec.algorithm.is_dflash_family();
        if !serving.enable_unified_memory || serving.is_draft_worker || !drafts || spec.is_fused() {
            return Ok(None);
        }
        match self.unified_fused_full_entry(host_bytes)? {
            Ok(e_f) => {
                let mut scenario = *self.scenario();
                (scenario.spec.draft, scenario.spec.fused_full_entry_bytes) = (None, Some(e_f));
                Ok(Some(self.with_scenario(&scenario)?))
            }
            Err(_) => Ok(None),
        }
    }
}

/// The verify buffers SGLang's `UnifiedMambaPool` allocates beside the unified buffer (see the
/// module doc) for `slots` state slots, as one [`super::PoolName::State`] pool of `R` requests, `R + 1`
/// rows.
///
/// Errors: a speculative model without `num_draft_tokens` or `max_running_requests`, no request
/// served, overflow.
pub(super) fn verify_buffers(
    state: &StateConfig,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    slots: u64,
) -> Result<PoolSpec> {
    let d = spec
        .num_draft_tokens
        .ok_or_else(|| invalid("the state pool of a speculative model needs num_draft_tokens"))?;
    let ratio = mamba_ratio(state, serving)?;
    let running = running_per_rank(serving, "the unified pool's verify buffers")?;
    let requests = running.min(slots / ratio);
    if requests == 0 {
        return Err(PlanError::not_enough_memory(format!(
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. \
             max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs=0."
        )));
    }
    let rows = add(requests, 1, "verify buffer rows")?;
    let layers = state.stage_state_layers.unwrap_or(state.num_state_layers);
    let conv_inner = conv_inner(state);
    let tensors: Vec<(TensorKind, Vec<u64>, StorageDtype)> = vec![
        (
            TensorKind::IntermediateSsm,
            vec![
                layers,
                rows,
                d,
                state.ssm_heads,
                state.ssm_head_dim,
                state.ssm_state_dim,
            ],
            storage(state.ssm_dtype),
        ),
        (
            TensorKind::IntermediateConv,
            [vec![layers, rows, d], conv_inner].concat(),
            storage(state.conv_dtype),
        ),
    ];
    slab_pool(tensors, requests, serving)
}
