//! SGLang 0.5.23's unified tri-pool of a model that is both hybrid-state and hybrid-SWA
//! (`init_unified_mamba_swa_pools`): one buffer of the state slots, the sliding-window tokens and
//! the full tokens, its bs=1 floor and kvbudget's refusals. (`tests/test_sglang_state_unified_swa.py`
//! holds it to SGLang's own code.)
use kvbudget_core::*;
use proptest::prelude::*;

mod common;

/// Two full layers of 8 KV heads of 128 and six sliding-window layers (window 511) of 4 KV heads
/// of 64, beside Qwen3-Next's gated-delta state (36 layers).
fn model(window: Option<u64>) -> ModelGeometry {
    let shape = AttentionShape {
        num_kv_heads: 8,
        head_dim: 128,
        swa_num_kv_heads: Some(4),
        swa_head_dim: Some(64),
        sliding_window_size: window,
        ..AttentionShape::default()
    };
    ModelGeometry::new(vec![3, 7], vec![0, 1, 2, 4, 5, 6], shape).unwrap()
}

fn serving(context: Option<u64>, page: u64) -> ServingConfig {
    ServingConfig {
        enable_unified_memory: true,
        model_context_len: context,
        page_size: page,
        ..ServingConfig::default()
    }
}

fn tri(window: Option<u64>, context: Option<u64>, page: u64) -> PoolConfigurator {
    PoolConfigurator::create(
        model(window),
        serving(context, page),
        SpeculativeConfig::default(),
    )
    .unwrap()
}

#[test]
fn the_tri_pool_holds_state_swa_and_full_tokens() {
    // bf16, TP 1: full rows 2 x (8 x 128 x 2) x 2 bytes per layer, two layers: E_f = 8,192; SWA
    // rows 2 x (4 x 64 x 2) bytes, six layers: E_s = 6,144; E_m is the two-pool buffer's.
    let s = common::qwen3_next_state(1);
    let cfg = tri(Some(511), Some(32_768), 1);
    assert_eq!(cfg.kind(), ConfiguratorKind::HybridSwa);
    let default = PoolConfigurator::create(
        ModelGeometry::new(
            (0..2).collect(),
            vec![],
            AttentionShape {
                num_kv_heads: 8,
                head_dim: 128,
                ..Default::default()
            },
        )
        .unwrap(),
        serving(None, 1),
        SpeculativeConfig::default(),
    )
    .unwrap();
    let (_, e_m) = default.unified_state_entries(&s).unwrap();
    assert_eq!(cfg.unified_tri_entries(&s).unwrap(), (8_192, 6_144, e_m));

    let a = 40i64 << 30;
    let (sglang, budget) = cfg.plan_with_state(a, Fit::Sglang, &s).unwrap();
    let (exact, _) = cfg.plan_with_state(a, Fit::Exact, &s).unwrap();
    let kv = budget.kv_budget_bytes().unwrap();
    assert_eq!(
        sglang.total_bytes,
        (kv - kv % 4096) as u64 + budget.max_mamba_cache_size * e_m
    );
    assert!(exact.total_bytes <= a as u64 && exact.total_bytes + 4096 > a as u64);
    for plan in [&sglang, &exact] {
        plan.check().unwrap();
        let pool = plan.pool(PoolName::Unified).unwrap();
        assert_eq!(plan.pools.len(), 1);
        assert_eq!(pool.layer_ids, (0..8).collect::<Vec<u64>>());
        assert_eq!(
            Some(pool.tokens as i64),
            plan.config.full_max_total_num_tokens
        );
        assert!(plan.config.swa_max_total_num_tokens.unwrap() > 0);
    }
}

#[test]
fn the_floor_charges_one_window_of_swa_tokens() {
    // The smallest budget SGLang's tri-pool boots on: its floor charges min(context, 511 + 1) SWA
    // tokens of 6,144 bytes, so a 100-token context needs less; without the context, the bound
    // (512 tokens) decides wherever it holds, the same budget as any context above the window.
    let s = common::qwen3_next_state(1);
    let smallest = |context: Option<u64>| {
        let cfg = tri(Some(511), context, 1);
        let (mut lo, mut hi) = (1i64 << 20, 1i64 << 36);
        assert!(cfg.plan_with_state(hi, Fit::Sglang, &s).is_ok());
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match cfg.plan_with_state(mid, Fit::Sglang, &s) {
                Ok(_) => hi = mid,
                Err(e) => {
                    assert_ne!(e.code, ErrorCode::Overflow);
                    lo = mid;
                }
            }
        }
        hi
    };
    let (short, long) = (smallest(Some(100)), smallest(Some(32_768)));
    assert!(short < long, "{short} {long}");
    assert_eq!(smallest(None), long);
}

#[test]
fn what_the_tri_pool_refuses() {
    let s = common::qwen3_next_state(1);
    let a = 40i64 << 30;
    let message = |cfg: PoolConfigurator| {
        cfg.plan_with_state(a, Fit::Sglang, &s)
            .unwrap_err()
            .message()
            .to_owned()
    };
    // no window and no context: the floor's term is the whole context
    assert!(message(tri(None, None, 1)).contains("without model_context_len"));
    assert!(tri(None, Some(4096), 1)
        .plan_with_state(a, Fit::Sglang, &s)
        .is_ok());
    // a draft (SGLang fuses it into the sub-pools: not modelled)
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle,
        draft_num_layers: 1,
        num_steps: Some(1),
        eagle_topk: Some(1),
        num_draft_tokens: Some(2),
        ..Default::default()
    };
    let serving_d = ServingConfig {
        max_running_requests: Some(64),
        ..serving(Some(4096), 1)
    };
    let cfg = PoolConfigurator::create(model(Some(511)), serving_d, spec).unwrap();
    let m = message(cfg);
    assert!(
        m.contains("speculative draft in SGLang's unified tri-pool"),
        "{m}"
    );
    // an MLA full side (SGLang's assertion)
    let mla = AttentionShape {
        num_kv_heads: 1,
        head_dim: 576,
        kv_lora_rank: Some(512),
        qk_rope_head_dim: Some(64),
        sliding_window_size: Some(511),
        ..AttentionShape::default()
    };
    let cfg = PoolConfigurator::create(
        ModelGeometry::new(vec![3], vec![0, 1, 2], mla).unwrap(),
        serving(Some(4096), 1),
        SpeculativeConfig::default(),
    )
    .unwrap();
    let e = cfg.plan_with_state(a, Fit::Sglang, &s).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// The exact tri-pool fits the budget within a 4,096-byte step and holds SGLang's bytes where
    /// those fit; both are one byte buffer of the token side and the state slots.
    #[test]
    fn the_exact_tri_pool_fits(a in (1i64 << 28)..(1i64 << 38), page in prop::sample::select(vec![1u64, 16, 64]),
                               window in prop::option::of(1u64..8192), context in prop::option::of(1u64..300_000)) {
        let s = common::qwen3_next_state(1);
        let cfg = tri(window, context, page);
        match (cfg.plan_with_state(a, Fit::Exact, &s), cfg.plan_with_state(a, Fit::Sglang, &s)) {
            (Ok((exact, budget)), Ok((sglang, _))) => {
                prop_assert!(exact.check().is_ok() && sglang.check().is_ok());
                prop_assert!(exact.total_bytes <= a as u64 && exact.total_bytes + 4096 > a as u64);
                prop_assert!(exact.total_bytes >= sglang.total_bytes.min(a as u64 - 4095));
                let (_, _, e_m) = cfg.unified_tri_entries(&s).unwrap();
                let kv = budget.kv_budget_bytes().unwrap();
                prop_assert_eq!(sglang.total_bytes, (kv - kv % 4096) as u64 + budget.max_mamba_cache_size * e_m);
            }
            (Err(e), _) | (_, Err(e)) => prop_assert!(matches!(e.code, ErrorCode::NotEnoughMemory
                                                          | ErrorCode::InvalidConfig | ErrorCode::Overflow)),
        }
    }
}
