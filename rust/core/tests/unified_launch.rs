//! SGLang 0.5.23's launch checks of `--enable-unified-memory` on the unified paths without a
//! draft (the Mamba pool, the hybrid-SWA pools): the page-major layout's backends, PD
//! disaggregation with DCP, `_validate_unified_memory_dcp`.
use kvbudget_core::fp4::AttentionBackend;
use kvbudget_core::*;

mod common;

/// Qwen3-Next's 12 full-attention layers (2 KV heads of 256), or with `v` the V dim, or MLA.
fn full(v: Option<u64>, mla: bool) -> ModelGeometry {
    let shape = AttentionShape {
        num_kv_heads: 2,
        head_dim: 256,
        v_head_dim: v,
        kv_lora_rank: mla.then_some(512),
        qk_rope_head_dim: mla.then_some(64),
        ..AttentionShape::default()
    };
    ModelGeometry::new((0..12).collect(), vec![], shape).unwrap()
}

/// A hybrid-SWA model: 4 full and 12 sliding-window layers (MLA with `mla`).
fn swa(mla: bool) -> ModelGeometry {
    let shape = AttentionShape {
        num_kv_heads: 8,
        head_dim: 128,
        sliding_window_size: Some(4095),
        kv_lora_rank: mla.then_some(512),
        qk_rope_head_dim: mla.then_some(64),
        ..AttentionShape::default()
    };
    ModelGeometry::new((0..4).collect(), (4..16).collect(), shape).unwrap()
}

fn serving(dcp: u64, backends: Option<AttentionBackend>) -> ServingConfig {
    ServingConfig {
        tp_size: 4,
        dcp_size: dcp,
        enable_unified_memory: true,
        max_running_requests: Some(64),
        prefill_attention_backend: backends,
        decode_attention_backend: backends,
        ..ServingConfig::default()
    }
}

/// The Mamba pool's plan, or its refusal's message.
fn mamba(m: ModelGeometry, serving: ServingConfig) -> std::result::Result<PoolPlan, String> {
    let cfg = PoolConfigurator::create(m, serving, SpeculativeConfig::default()).unwrap();
    cfg.plan_with_state(28 << 30, Fit::Sglang, &common::qwen3_next_state(4))
        .map(|(p, _)| p)
        .map_err(|e| e.message().to_owned())
}

/// The hybrid-SWA plan's refusal, if any.
fn swa_refusal(m: ModelGeometry, serving: ServingConfig) -> Option<String> {
    let cfg = PoolConfigurator::create(m, serving, SpeculativeConfig::default()).unwrap();
    cfg.plan(28 << 30, Fit::Sglang)
        .err()
        .map(|e| e.message().to_owned())
}

const MLA_ONLY: &str =
    "--enable-unified-memory with decode context parallelism (--dcp-size > 1) supports \
                        MLA models only (e.g. kimi-linear)";

#[test]
fn dcp_needs_an_mla_target() {
    assert!(mamba(full(None, false), serving(1, None)).is_ok());
    let e = mamba(full(None, false), serving(2, None)).unwrap_err();
    assert!(e.starts_with(MLA_ONLY), "{e}");
    let e = swa_refusal(swa(false), serving(2, None)).unwrap();
    assert!(e.starts_with(MLA_ONLY), "{e}");
    assert!(swa_refusal(swa(false), serving(1, None)).is_none());
}

#[test]
fn dcp_refuses_a_hybrid_swa_model() {
    // Before `_init_unified_swa_pools`' MLA-SWA assertion, which it replaces under DCP.
    let e = swa_refusal(swa(true), serving(2, None)).unwrap();
    assert!(
        e.contains("does not support hybrid sliding-window models"),
        "{e}"
    );
    let e = swa_refusal(swa(true), serving(1, None)).unwrap();
    assert_eq!(e, "unified memory pool does not support MLA-SWA hybrid yet");
}

#[test]
fn dcp_on_mla_needs_a_dcp_backend() {
    let e = mamba(full(None, true), serving(2, Some(AttentionBackend::Fa3))).unwrap_err();
    assert_eq!(
        e,
        "--enable-unified-memory with decode context parallelism (--dcp-size > 1) requires ['cutedsl_mla', \
         'flashinfer', 'trtllm_mla'] for the full-attention layers; got ['fa3']. The other paged MLA \
         backends build their block table from raw (widened) req_to_token page ids and do not translate \
         them through the unified pool's virtual->physical page table."
    );
    let ok = mamba(
        full(None, true),
        serving(2, Some(AttentionBackend::Flashinfer)),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn page_major_layout_backends() {
    let e = mamba(
        full(None, false),
        serving(1, Some(AttentionBackend::TorchNative)),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "--enable-page-major-kv-layout: the resolved attention backends ['torch_native'] are not in the \
         allowed set ['fa3', 'fa4', 'flashinfer', 'triton', 'trtllm_mha'] for this configuration. Pass a \
         compatible --attention-backend."
    );
    // K and V rows of different widths: only the backends that carry v_head_dim.
    let e = mamba(
        full(Some(128), false),
        serving(1, Some(AttentionBackend::Flashinfer)),
    )
    .unwrap_err();
    assert!(e.contains("allowed set ['fa3', 'fa4', 'triton']"), "{e}");
    assert!(mamba(
        full(Some(128), false),
        serving(1, Some(AttentionBackend::Fa3))
    )
    .is_ok());
    // MLA: the paged MLA family; before the DCP gate.
    let e = mamba(full(None, true), serving(2, Some(AttentionBackend::Fa4))).unwrap_err();
    assert!(
        e.contains("['fa4'] are not in the allowed set ['cutedsl_mla', 'fa3'"),
        "{e}"
    );
    let e = swa_refusal(swa(false), serving(1, Some(AttentionBackend::Aiter))).unwrap();
    assert!(e.starts_with("--enable-page-major-kv-layout"), "{e}");
}

#[test]
fn pd_with_dcp_is_refused_whatever_the_transfer_backend() {
    let pd = |dcp| ServingConfig {
        disaggregation_mode: DisaggregationMode::Prefill,
        ..serving(dcp, Some(AttentionBackend::Flashinfer))
    };
    let e = mamba(full(None, true), pd(2)).unwrap_err();
    assert!(e.starts_with("kvbudget: SGLang refuses --enable-unified-memory with PD disaggregation and decode context"), "{e}");
    let e = swa_refusal(swa(false), pd(2)).unwrap();
    assert!(
        e.contains("with PD disaggregation and decode context"),
        "{e}"
    );
    // Without DCP SGLang plans it over mooncake with one pipeline stage (kvbudget knows neither).
    assert!(mamba(full(None, true), pd(1)).is_ok());
}
