//! SGLang 0.5.23's launch checks of `--enable-unified-memory` that hold on every unified path
//! (the Mamba pool, with or without a draft; the hybrid-SWA pools; a model SGLang then refuses at
//! pool construction), in its order (`arg_groups/pipeline.py` runs the hooks):
//!
//! 1. `handle_kv4_compatibility`: no FP4 KV cache;
//! 2. `handle_page_major_kv_layout` (unified memory implies the page-major layout): the attention
//!    backends given among those that read the strided per-layer views, by model (MLA; K and V
//!    rows of different widths, `has_asymmetric_kv`; MHA). Its linear-attention and Mamba
//!    backend checks read flags kvbudget does not have (SGLang's defaults pass them);
//! 3. `handle_unified_memory_pool`: under PD disaggregation the transfer backend must be
//!    mooncake (`ServerArgs._unified_memory_pd_transfer_backends`) with one pipeline stage, and
//!    mooncake takes no speculative draft. kvbudget knows neither the transfer backend nor the
//!    pipeline size, so it refuses by name (in its words; SGLang's name the backend) what SGLang
//!    refuses whatever they are: a draft in the unified Mamba pool, or `--dcp-size > 1` (the DCP
//!    gate's PD assertion), under PD; it plans PD otherwise, as mooncake with one stage. Then the
//!    draft's checks (a unified Mamba pool with a draft: `state_unified_draft.rs`), then
//!    `_validate_unified_memory_dcp` under `--dcp-size > 1`: an MLA model, not hybrid-SWA, the
//!    backends given among those that translate a DCP block table.
//!
//! Not modelled (SGLang's defaults assumed): two-batch overlap, LMCache, the external linker,
//! HiSparse, decode KV offload, host-pool retraction, `SGLANG_DISABLE_LAZY_COMPACTION`, the
//! pipeline size under PD; a draft's own checks on the hybrid-SWA pools (PD, the algorithm,
//! `--speculative-eagle-topk`, the verify backends).

use crate::configurator::PoolConfigurator;
use crate::error::{PlanError, Result};
use crate::fields::Named;
use crate::serving::ServingConfig;
use crate::DisaggregationMode;

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::invalid(msg)
}

/// `_SPEC_VERIFY_AUDITED_BACKENDS`, sorted; `handle_page_major_kv_layout`'s set for an MLA model
/// holds the same names.
pub(super) const VERIFY_AUDITED: [&str; 6] = [
    "cutedsl_mla",
    "fa3",
    "flashinfer",
    "flashmla",
    "triton",
    "trtllm_mla",
];

/// `ASYMMETRIC_KV_BACKENDS`, sorted: backends that carry `v_head_dim` to the kernel.
pub(super) const ASYMMETRIC_OK: [&str; 3] = ["fa3", "fa4", "triton"];

/// Python's `repr` of a sorted list of names.
pub(super) fn py_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The backends given (prefill, decode, either), sorted and deduplicated (SGLang's set less `None`).
pub(super) fn given_backends(serving: &ServingConfig) -> Vec<&'static str> {
    let mut given: Vec<&str> = [
        serving.prefill_attention_backend,
        serving.decode_attention_backend,
    ]
    .into_iter()
    .flatten()
    .map(Named::name)
    .collect();
    given.sort_unstable();
    given.dedup();
    given
}

/// `handle_kv4_compatibility`'s refusal of `--enable-unified-memory` with an FP4 KV cache.
pub(super) fn check_unified_launch(serving: &ServingConfig) -> Result<()> {
    if serving.enable_unified_memory && serving.kv_dtype().is_fp4() {
        return Err(invalid(
            "FP4 KV cache does not yet support --enable-unified-memory: the unified MHA pool does not \
             allocate FP4 block scales or the prefill dequant workspace.",
        ));
    }
    Ok(())
}

/// `handle_page_major_kv_layout`'s allow-list of the full-attention backends (sorted): an MLA
/// model, one with K and V rows of different widths, the others.
fn check_page_major(serving: &ServingConfig, mla: bool, asymmetric: bool) -> Result<()> {
    let allowed: &[&str] = if mla {
        &VERIFY_AUDITED
    } else if asymmetric {
        &ASYMMETRIC_OK
    } else {
        &["fa3", "fa4", "flashinfer", "triton", "trtllm_mha"]
    };
    let given = given_backends(serving);
    if given.iter().all(|b| allowed.contains(b)) {
        return Ok(());
    }
    Err(invalid(format!(
        "--enable-page-major-kv-layout: the resolved attention backends {} are not in the allowed set {} \
         for this configuration. Pass a compatible --attention-backend.",
        py_list(&given),
        py_list(allowed)
    )))
}

/// `_validate_unified_memory_dcp` (`--dcp-size > 1` under unified memory): an MLA model, not
/// hybrid-SWA, the backends given among those that translate a DCP block table (its PD
/// assertion is [`PoolConfigurator::check_unified_hooks`]' refusal, made before).
pub(super) fn check_unified_dcp(
    serving: &ServingConfig,
    mla: bool,
    hybrid_swa: bool,
) -> Result<()> {
    const DCP_ALLOWED: [&str; 3] = ["cutedsl_mla", "flashinfer", "trtllm_mla"];
    if serving.dcp_size <= 1 {
        return Ok(());
    }
    if !mla {
        return Err(invalid(
            "--enable-unified-memory with decode context parallelism (--dcp-size > 1) supports MLA models only \
             (e.g. kimi-linear): the MHA unified pool has no DCP-aware masked write path \
             (UnifiedMHATokenToKVPool.set_kv_buffer asserts dcp_kv_mask is None).",
        ));
    }
    if hybrid_swa {
        return Err(invalid(
            "--enable-unified-memory with decode context parallelism (--dcp-size > 1) does not support hybrid \
             sliding-window models: UnifiedSWATokenToKVPoolAllocator does not widen its virtual id space, and \
             the full->swa mapping is not DCP-sharded.",
        ));
    }
    let given = given_backends(serving);
    if given.iter().all(|b| DCP_ALLOWED.contains(b)) {
        return Ok(());
    }
    Err(invalid(format!(
        "--enable-unified-memory with decode context parallelism (--dcp-size > 1) requires {} for the \
         full-attention layers; got {}. The other paged MLA backends build their block table from raw \
         (widened) req_to_token page ids and do not translate them through the unified pool's \
         virtual->physical page table.",
        py_list(&DCP_ALLOWED),
        py_list(&given)
    )))
}

impl PoolConfigurator {
    /// SGLang's launch check of `--enable-unified-memory` (`kv_cache_hook.py`): no FP4 KV cache.
    pub fn check_unified_launch(&self) -> Result<()> {
        check_unified_launch(self.serving())
    }

    /// SGLang's launch checks of `--enable-unified-memory` on a target worker, in its order (see
    /// the module doc); `mamba_draft`: the scenario is planned in the unified Mamba pool, whose
    /// draft checks (PD, then `check_unified_draft_launch`) then run. A draft on the hybrid-SWA
    /// pools gets the checks of a target without one (its own are not modelled).
    pub(super) fn check_unified_hooks(&self, mamba_draft: bool) -> Result<()> {
        let serving = self.serving();
        check_unified_launch(serving)?;
        if !serving.enable_unified_memory || serving.is_draft_worker {
            return Ok(());
        }
        let shape = self.shape();
        let mla = shape.mla().is_some();
        let asymmetric = shape.head_dim != shape.v_dim() || shape.swa_k_dim() != shape.swa_v_dim();
        check_page_major(serving, mla, asymmetric)?;
        let drafting = self.spec().algorithm.is_speculative();
        if serving.disaggregation_mode != DisaggregationMode::Null {
            if drafting && mamba_draft {
                // Its first checks: the transfer backend among `_unified_memory_pd_transfer_backends()`
                // (mooncake alone), then none of mooncake with a draft.
                return Err(invalid(
                    "kvbudget: SGLang refuses --enable-unified-memory with PD disaggregation and a speculative \
                     draft whatever the transfer backend (its unified pool ships page envelopes over mooncake \
                     alone, and mooncake does not support speculative decoding there)",
                ));
            }
            if serving.dcp_size > 1 {
                return Err(invalid(
                    "kvbudget: SGLang refuses --enable-unified-memory with PD disaggregation and decode context \
                     parallelism (--dcp-size > 1) whatever the transfer backend (its unified pool ships page \
                     envelopes over mooncake alone, and under DCP an envelope holds one rank's shard)",
                ));
            }
        }
        if drafting && mamba_draft {
            return self.check_unified_draft_launch();
        }
        check_unified_dcp(serving, mla, shape.num_swa_layers > 0)
    }
}
