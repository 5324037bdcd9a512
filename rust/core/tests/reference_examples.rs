//! REFERENCE section 5 and SGLang's request-cap unit tests (REFERENCE 2.4),
//! number for number. tests/test_reference_examples.py checks each number
//! against SGLang 0.5.23's own code: 0.5.23 (REFERENCE 2.7) changes none of
//! them, only the configurator's name (`SWAChunkCapPoolConfigurator` is now
//! `SWARequestCapPoolConfigurator`).
mod common;
use common::*;
use kvbudget_core::*;

#[test]
fn example1_gemma3_eagle3() {
    let a = 40 * GIB;
    let cfg =
        PoolConfigurator::create(gemma3_27b(), serving(KvDtype::Bf16, 1, 1), eagle3(1)).unwrap();
    assert_eq!(cfg.kind(), ConfiguratorKind::HybridSwa);
    assert_eq!(cfg.cell_size(), CellSize::Float(430_899.2));
    let c = cfg.calculate_pool_sizes(a, None).unwrap();
    assert_eq!(sizes(&c), (99_674, Some(99_674), Some(79_739)));
    // Before #29622: no draft terms.
    let before = PoolConfigurator::create(
        gemma3_27b(),
        serving(KvDtype::Bf16, 1, 1),
        SpeculativeConfig::default(),
    )
    .unwrap();
    assert_eq!(before.cell_size(), CellSize::Float(422_707.2));
    assert_eq!(
        before
            .calculate_pool_sizes(a, None)
            .unwrap()
            .max_total_num_tokens,
        101_606
    );
    // p 64 and SGLang's over-commit.
    let cfg64 =
        PoolConfigurator::create(gemma3_27b(), serving(KvDtype::Bf16, 64, 1), eagle3(1)).unwrap();
    let c = cfg64.calculate_pool_sizes(a, None).unwrap();
    assert_eq!(sizes(&c), (99_648, Some(99_648), Some(79_680)));
    let plan = cfg64.plan(a, Fit::Sglang).unwrap();
    assert_eq!(plan.padding_bytes(), 33_030_144);
    assert_eq!(plan.over_budget_bytes(), 5_242_880);
    let exact = cfg64.plan(a, Fit::Exact).unwrap();
    assert!(exact.total_bytes <= a as u64);
    assert_eq!(exact.over_budget_bytes(), 0);
}

#[test]
fn example1_draft_overrun_before_fix() {
    // Before #29622 the draft pool (1 layer at 8192 B/token over 101,606 tokens) overran the budget by ~0.775 GiB.
    let a = 40 * GIB;
    let before = PoolConfigurator::create(
        gemma3_27b(),
        serving(KvDtype::Bf16, 1, 1),
        SpeculativeConfig::default(),
    )
    .unwrap();
    let c = before.calculate_pool_sizes(a, None).unwrap();
    let full = c.full_max_total_num_tokens.unwrap();
    let swa = c.swa_max_total_num_tokens.unwrap();
    let used = (full * 10 + swa * 52 + full) * 8192;
    let over = (used - a) as f64 / GIB as f64;
    assert!((over - 0.775).abs() < 0.001, "over = {over}");
}

#[test]
fn example2_gpt_oss() {
    let a = 30 * GIB;
    let cfg = PoolConfigurator::create(gpt_oss_120b(), serving(KvDtype::Fp8E4m3, 64, 4), eagle3(1))
        .unwrap();
    assert_eq!(cfg.full_per_token(), 256);
    assert_eq!(cfg.cell_size(), CellSize::Float(8_550.4));
    assert_eq!(
        sizes(&cfg.calculate_pool_sizes(a, None).unwrap()),
        (3_767_296, Some(3_767_296), Some(3_013_824))
    );
    let tp16 =
        PoolConfigurator::create(gpt_oss_120b(), serving(KvDtype::Fp8E4m3, 64, 16), eagle3(1))
            .unwrap();
    assert_eq!(
        sizes(&tp16.calculate_pool_sizes(a, None).unwrap()),
        (7_534_656, Some(7_534_656), Some(6_027_712))
    );
    let mx = PoolConfigurator::create(gpt_oss_120b(), serving(KvDtype::Mxfp8, 64, 4), eagle3(1))
        .unwrap();
    assert_eq!(mx.full_per_token(), 264);
    assert_eq!(
        sizes(&mx.calculate_pool_sizes(a, None).unwrap()),
        (3_653_120, Some(3_653_120), Some(2_922_496))
    );
}

#[test]
fn example3_all_swa() {
    let m = ModelGeometry::new(
        vec![],
        (0..24).collect(),
        AttentionShape {
            num_kv_heads: 8,
            head_dim: 128,
            ..AttentionShape::default()
        },
    )
    .unwrap();
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle,
        draft_num_layers: 1,
        ..SpeculativeConfig::default()
    }
    .resolved()
    .unwrap();
    let cfg = PoolConfigurator::create(m, serving(KvDtype::Bf16, 1, 1), spec).unwrap();
    assert_eq!(cfg.cell_size(), CellSize::Int(102_400));
    assert_eq!(
        sizes(&cfg.calculate_pool_sizes(16 * GIB, None).unwrap()),
        (167_772, Some(0), Some(167_772))
    );
}

fn request_cap_serving() -> ServingConfig {
    ServingConfig {
        page_size: 64,
        max_running_requests: Some(64),
        chunked_prefill_size: Some(8192),
        disable_radix_cache: true,
        ..ServingConfig::default()
    }
}

#[test]
fn example4_request_cap() {
    let a = 40 * GIB;
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle3,
        draft_num_layers: 1,
        num_steps: Some(3),
        eagle_topk: Some(1),
        num_draft_tokens: Some(4),
        ..SpeculativeConfig::default()
    }
    .resolved()
    .unwrap();
    let cfg = PoolConfigurator::create(gpt_oss_120b(), request_cap_serving(), spec).unwrap();
    // REFERENCE 2.7: SGLang's SWARequestCapPoolConfigurator (was SWAChunkCapPoolConfigurator).
    assert_eq!(cfg.kind(), ConfiguratorKind::RequestCap);
    assert_eq!(cfg.swa_cap(), Some(61_952));
    assert_eq!(
        cfg.calculate_pool_sizes(a, None)
            .unwrap()
            .max_total_num_tokens,
        1_045_056
    );

    let pd = ServingConfig {
        disaggregation_mode: DisaggregationMode::Decode,
        disaggregation_decode_extra_slots: 8,
        ..request_cap_serving()
    };
    let cfg = PoolConfigurator::create(gpt_oss_120b(), pd, spec).unwrap();
    assert_eq!(cfg.swa_cap(), Some(47_032));
    assert_eq!(
        sizes(&cfg.calculate_pool_sizes(a, None).unwrap()),
        (1_059_200, Some(1_059_200), Some(47_040))
    );

    let off = ServingConfig {
        disable_overlap_schedule: true,
        ..request_cap_serving()
    };
    let cfg = PoolConfigurator::create(gpt_oss_120b(), off, spec).unwrap();
    assert_eq!(cfg.swa_cap(), Some(57_344));
    assert_eq!(
        cfg.calculate_pool_sizes(a, None)
            .unwrap()
            .max_total_num_tokens,
        1_049_408
    );
}

#[test]
fn example5_admission_floor() {
    let s = ServingConfig {
        page_size: 64,
        swa_full_tokens_ratio: 0.1,
        ..ServingConfig::default()
    };
    let cfg = PoolConfigurator::create(gemma3_27b(), s, eagle3(1)).unwrap();
    let err = cfg
        .calculate_pool_sizes_from_max_tokens(10_000, None)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SwaPoolTooSmall);
    assert!(
        err.message().contains("960") && err.message().contains("1024"),
        "{}",
        err.message()
    );
    let ok = cfg
        .calculate_pool_sizes_from_max_tokens(12_000, None)
        .unwrap();
    assert!(ok.swa_max_total_num_tokens.unwrap() > 1024 + 64);
}

#[test]
fn sglang_request_cap_unit_tests() {
    // SGLang's own request-cap tests: window 8 (4 in PD decode), E = 4, 1 full + 1 SWA layer.
    let m = |w| {
        ModelGeometry::new(
            vec![0],
            vec![1],
            AttentionShape {
                num_kv_heads: 1,
                head_dim: 8,
                sliding_window_size: Some(w),
                ..AttentionShape::default()
            },
        )
        .unwrap()
    };
    let base = ServingConfig {
        swa_eviction_interval: 4,
        disable_radix_cache: true,
        chunked_prefill_size: Some(4),
        ..ServingConfig::default()
    };
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle,
        draft_num_layers: 1,
        num_steps: Some(3),
        eagle_topk: Some(2),
        num_draft_tokens: Some(5),
        ..SpeculativeConfig::default()
    }
    .resolved()
    .unwrap();
    let cap = |s: ServingConfig, sp: SpeculativeConfig, w| {
        PoolConfigurator::create(m(w), s, sp)
            .unwrap()
            .swa_cap()
            .unwrap()
    };
    let v1 = ServingConfig {
        page_size: 4,
        max_running_requests: Some(2),
        disable_overlap_schedule: true,
        ..base
    };
    assert_eq!(cap(v1, spec, 8), 104);
    let v2 = ServingConfig {
        page_size: 1,
        max_running_requests: Some(2),
        ..base
    };
    assert_eq!(cap(v2, spec, 8), 91);
    let pd = ServingConfig {
        page_size: 1,
        max_running_requests: Some(10),
        disaggregation_mode: DisaggregationMode::Decode,
        ..base
    };
    assert_eq!(cap(pd, SpeculativeConfig::default(), 4), 100);
    assert_eq!(
        cap(
            ServingConfig {
                disaggregation_decode_extra_slots: 2,
                ..pd
            },
            SpeculativeConfig::default(),
            4
        ),
        110
    );
    let pf = ServingConfig {
        page_size: 4,
        max_running_requests: Some(2),
        chunked_prefill_size: Some(16),
        disaggregation_mode: DisaggregationMode::Prefill,
        ..base
    };
    assert_eq!(cap(pf, SpeculativeConfig::default(), 8), 76);
}
