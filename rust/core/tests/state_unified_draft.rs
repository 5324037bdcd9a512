//! A speculative draft in SGLang 0.5.23's unified Mamba pool: Qwen3-Next-80B-A3B's MTP head
//! fused into the full-side entries, the verify buffers beside the buffer, and SGLang's refusals.
use kvbudget_core::plan::fused_draft::*;
use kvbudget_core::sizing::state::mamba_ratio;
use kvbudget_core::*;

mod common;

/// Qwen3-Next-80B-A3B (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct, config.json): 36
/// gated-delta layers (32 value heads, 16 key heads, head dims 128, conv kernel 4) and 12
/// full-attention layers of 2 KV heads of 256; its MTP head is one full-attention block.
fn qwen3_next(tp: u64) -> (StateConfig, ModelGeometry) {
    let state = common::qwen3_next_state(tp);
    let shape = AttentionShape {
        num_kv_heads: 2,
        head_dim: 256,
        ..AttentionShape::default()
    };
    (
        state,
        ModelGeometry::new((0..12).collect(), vec![], shape).unwrap(),
    )
}

fn mtp(algorithm: SpecAlgorithm, layers: u64) -> SpeculativeConfig {
    SpeculativeConfig {
        algorithm,
        draft_num_layers: layers,
        num_steps: Some(3),
        eagle_topk: Some(1),
        num_draft_tokens: Some(4),
        ..SpeculativeConfig::default()
    }
}

fn serving() -> ServingConfig {
    ServingConfig {
        tp_size: 4,
        enable_unified_memory: true,
        max_running_requests: Some(64),
        ..ServingConfig::default()
    }
}

#[test]
fn qwen3_next_mtp_rides_in_the_full_entries() {
    // TP 4: one KV head of 256 per rank, bf16: 12 layers x 1,024 bytes = 12,288 host bytes per
    // token; the MTP layer's K and V rows add 1,024: E_f = align32(align16(12,288) + 1,024).
    let (s, m) = qwen3_next(4);
    let cfg = PoolConfigurator::create(m, serving(), mtp(SpecAlgorithm::NextN, 1)).unwrap();
    let FusedDraftDecision::Placed { placement, note } = cfg.unified_draft_decision().unwrap()
    else {
        panic!("declined")
    };
    assert_eq!(note, None);
    assert_eq!(placement.runners, vec![vec![(Host::Full, 0, 1)]]);
    assert_eq!(
        placement.region(Host::Full).unwrap().entry_bytes().unwrap(),
        1_024
    );
    assert_eq!(cfg.unified_state_entries(&s).unwrap(), (13_312, 19_316_736));

    let a = 28i64 << 30;
    let (sglang, budget) = cfg.plan_with_state(a, Fit::Sglang, &s).unwrap();
    let (exact, _) = cfg.plan_with_state(a, Fit::Exact, &s).unwrap();
    let slots = budget.max_mamba_cache_size;
    let requests = 64.min(slots / mamba_ratio(&s, &serving()).unwrap());
    let kv = budget.kv_budget_bytes().unwrap();
    let buffer = (kv - kv % 4096) as u64 + slots * 19_316_736;
    for plan in [&sglang, &exact] {
        plan.check().unwrap();
        let names: Vec<_> = plan.pools.iter().map(|p| p.name).collect();
        assert_eq!(names, vec![PoolName::Unified, PoolName::State]);
        let verify = plan.pool(PoolName::State).unwrap();
        let shapes: Vec<_> = verify
            .tensors
            .iter()
            .map(|t| (t.kind, t.shape.clone()))
            .collect();
        let rows = requests + 1;
        assert_eq!(
            shapes,
            vec![
                (TensorKind::IntermediateSsm, vec![36, rows, 4, 8, 128, 128]),
                (TensorKind::IntermediateConv, vec![36, rows, 4, 2048, 3]),
            ]
        );
        assert_eq!(
            plan.total_bytes,
            plan.pools.iter().map(|p| p.nbytes).sum::<u64>()
        );
    }
    assert_eq!(sglang.pool(PoolName::Unified).unwrap().nbytes, buffer);
    assert!(exact.total_bytes <= a as u64);
    // The token label is the Default configurator's over the fused entry.
    let fused = SpeculativeConfig {
        fused_full_entry_bytes: Some(13_312),
        ..mtp(SpecAlgorithm::NextN, 1)
    };
    let (_, m) = qwen3_next(4);
    let priced = PoolConfigurator::create(m, serving(), fused).unwrap();
    assert_eq!(
        sglang.config.max_total_num_tokens,
        priced
            .calculate_pool_sizes(kv, None)
            .unwrap()
            .max_total_num_tokens
    );
}

#[test]
fn refused_in_sglangs_words() {
    let (s, m) = qwen3_next(4);
    let a = 28i64 << 30;
    let refusal = |spec: SpeculativeConfig, serving: ServingConfig| {
        let cfg = PoolConfigurator::create(m.clone(), serving, spec).unwrap();
        cfg.plan_with_state(a, Fit::Sglang, &s)
            .unwrap_err()
            .message()
            .to_owned()
    };
    let e = refusal(mtp(SpecAlgorithm::Ngram, 0), serving());
    assert!(e.contains("Got --speculative-algorithm='NGRAM'"), "{e}");
    let topk = SpeculativeConfig {
        eagle_topk: Some(4),
        ..mtp(SpecAlgorithm::Eagle, 1)
    };
    assert!(refusal(topk, serving()).contains("Got --speculative-eagle-topk=4."));
    let e = refusal(mtp(SpecAlgorithm::Eagle, 0), serving());
    assert!(
        e.contains("this draft cannot fuse (fusion does not apply to it)"),
        "{e}"
    );
    let dcp = ServingConfig {
        dcp_size: 2,
        ..serving()
    };
    let e = refusal(mtp(SpecAlgorithm::Eagle, 1), dcp);
    assert!(
        e.contains("(--dcp-size > 1) supports MLA models only"),
        "{e}"
    );
    let pd = ServingConfig {
        disaggregation_mode: DisaggregationMode::Decode,
        ..serving()
    };
    let e = refusal(mtp(SpecAlgorithm::Dflash, 1), pd);
    assert!(
        e.contains("with PD disaggregation and a speculative draft"),
        "{e}"
    );
    let e = refusal(mtp(SpecAlgorithm::Dflash, 0), serving());
    assert!(
        e.contains("EAGLE/EAGLE3/DFLASH on a mamba-hybrid target")
            && e.contains("does not apply to it"),
        "{e}"
    );
    // DSPARK boots a draft that cannot fuse on a private pool nothing prices: kvbudget refuses.
    let e = refusal(mtp(SpecAlgorithm::Dspark, 0), serving());
    assert!(
        e.starts_with("kvbudget does not plan")
            && e.contains("DSPARK draft that cannot fuse (fusion does not apply to it)"),
        "{e}"
    );
    let on = |prefill, decode| ServingConfig {
        prefill_attention_backend: Some(prefill),
        decode_attention_backend: Some(decode),
        ..serving()
    };
    let e = refusal(
        mtp(SpecAlgorithm::Dflash, 1),
        on(AttentionBackend::Fa4, AttentionBackend::Fa3),
    );
    assert_eq!(
        e,
        "--enable-unified-memory + DFLASH requires spec-verify-audited attention backends ['fa3', \
         'flashinfer', 'triton', 'trtllm_mha'] for both prefill and decode; got ['fa3', 'fa4']. Other \
         backends do not translate speculative verify indices to the unified pool's physical ids yet."
    );
}

/// A DFLASH draft (five Qwen3-style layers of 8 KV heads of 128) fuses like an MTP head;
/// a DSPARK draft on fa4 keeps its rows in the model dtype under an fp8 host.
#[test]
fn dflash_family_drafts_ride_in_the_full_entries() {
    let (s, m) = qwen3_next(4);
    let draft = DraftGeometry {
        num_layers: 5,
        num_kv_heads: 8,
        head_dim: 128,
        ..DraftGeometry::default()
    };
    let spec = |algorithm| SpeculativeConfig {
        draft: Some(draft),
        num_steps: None,
        eagle_topk: None,
        num_draft_tokens: Some(16),
        ..mtp(algorithm, 0)
    };
    // TP 4: 2 draft KV heads per rank; bf16 K and V rows of 512 bytes each over 5 layers.
    let cfg = PoolConfigurator::create(m.clone(), serving(), spec(SpecAlgorithm::Dflash)).unwrap();
    assert_eq!(cfg.unified_state_entries(&s).unwrap().0, 12_288 + 5 * 1_024);
    let a = 28i64 << 30;
    let (plan, budget) = cfg.plan_with_state(a, Fit::Sglang, &s).unwrap();
    let fused = SpeculativeConfig {
        fused_full_entry_bytes: Some(12_288 + 5_120),
        draft: None,
        ..spec(SpecAlgorithm::Dflash)
    };
    let priced = PoolConfigurator::create(m.clone(), serving(), fused).unwrap();
    let kv = budget.kv_budget_bytes().unwrap();
    assert_eq!(
        plan.config.max_total_num_tokens,
        priced
            .calculate_pool_sizes(kv, None)
            .unwrap()
            .max_total_num_tokens
    );
    let names: Vec<_> = plan.pools.iter().map(|p| p.name).collect();
    assert_eq!(names, vec![PoolName::Unified, PoolName::State]);

    let fp8 = |prefill| ServingConfig {
        kv_cache_dtype: KvDtype::Fp8E4m3,
        prefill_attention_backend: prefill,
        decode_attention_backend: prefill,
        ..serving()
    };
    let entry = |serving| {
        PoolConfigurator::create(m.clone(), serving, spec(SpecAlgorithm::Dspark))
            .unwrap()
            .unified_state_entries(&s)
    };
    // fp8 host rows of 6,144 bytes; the fa4 draft's bf16 rows 5,120, flashinfer's fp8 ones 2,560.
    assert_eq!(
        entry(fp8(Some(AttentionBackend::Fa4))).unwrap().0,
        6_144 + 5_120
    );
    assert_eq!(
        entry(fp8(Some(AttentionBackend::Flashinfer))).unwrap().0,
        6_144 + 2_560
    );
    let e = entry(fp8(None)).unwrap_err();
    assert!(
        e.message().contains("without prefill_attention_backend"),
        "{e}"
    );
    // The same draft under DFLASH never runs on fa4 (its launch check), so an unknown one is fine.
    let dflash =
        PoolConfigurator::create(m.clone(), fp8(None), spec(SpecAlgorithm::Dflash)).unwrap();
    assert_eq!(dflash.unified_state_entries(&s).unwrap().0, 6_144 + 2_560);
}

// ---- place_fused_draft on its own

fn kv(ids: Vec<u64>, h: u64, d: u64, v: u64) -> DraftLayerSet {
    DraftLayerSet {
        kind: DraftLayerKind::Full,
        layer_ids: ids,
        geometry: DraftLayerGeometry::Kv {
            head_num: h,
            head_dim: d,
            v_head_dim: v,
        },
        window: None,
    }
}

fn ctx(hosts: Vec<Host>) -> PlacementContext {
    PlacementContext {
        hosts,
        target_window: None,
        asymmetric_rows_ok: false,
        draft_backends: vec!["flashinfer".into()],
    }
}

#[test]
fn a_replicated_mtp_head_rides_in_the_full_host() {
    let profile = DraftProfile {
        num_depths: 1,
        kinds: vec![kv(vec![0], 2, 256, 256)],
    };
    let d = place_fused_draft(&profile, 1, &ctx(vec![Host::Full, Host::Mamba]), 2).unwrap();
    let FusedDraftDecision::Placed { placement, note } = d else {
        panic!("{d:?}")
    };
    assert_eq!(note, None);
    let r = placement.region(Host::Full).unwrap();
    assert_eq!(r.entry_bytes().unwrap(), 2 * 2 * 256 * 2);
    assert_eq!(placement.runners, vec![vec![(Host::Full, 0, 1)]]);
    // 12 full layers of 2 x 256 bf16 K and V: 24,576 host bytes, plus 2,048 draft bytes.
    assert_eq!(host_entry_bytes(24_576, true, Some(&r)).unwrap(), 26_624);
    assert_eq!(host_entry_bytes(24_577, true, Some(&r)).unwrap(), 26_656);
    assert_eq!(host_entry_bytes(24_577, false, None).unwrap(), 24_577);
}

#[test]
fn declines_in_sglangs_words() {
    let per_depth = DraftProfile {
        num_depths: 3,
        kinds: vec![kv(vec![0, 1, 2], 2, 128, 128)],
    };
    let c = ctx(vec![Host::Full, Host::Mamba]);
    assert_eq!(
        place_fused_draft(&per_depth, 1, &c, 2).unwrap(),
        FusedDraftDecision::Declined(
            "a per-depth draft head (3 depths) needs one runner per depth (multi-layer EAGLE)"
                .into()
        )
    );
    let odd = DraftProfile {
        num_depths: 1,
        kinds: vec![kv(vec![0], 1, 100, 100)],
    };
    let FusedDraftDecision::Declined(why) = place_fused_draft(&odd, 1, &c, 1).unwrap() else {
        panic!()
    };
    assert!(why.starts_with("the draft's K/V rows are 100 B"), "{why}");
    let mut window = kv(vec![1], 2, 128, 128);
    window.kind = DraftLayerKind::Window;
    let with_window = DraftProfile {
        num_depths: 1,
        kinds: vec![kv(vec![0], 4, 128, 128), window],
    };
    let FusedDraftDecision::Declined(why) =
        place_fused_draft(&with_window, 1, &ctx(vec![Host::Full]), 2).unwrap()
    else {
        panic!()
    };
    assert!(
        why.contains("carries no per-step sliding-window rail"),
        "{why}"
    );
}
