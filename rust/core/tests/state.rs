//! The hybrid-state budget (SGLang's `_handle_max_mamba_cache`): a worked
//! example from Qwen3-Next-80B-A3B's published config, and properties: the
//! state pool, the speculative reserve and the KV rest never exceed the
//! budget; more memory never gives fewer slots; an explicit size is kept.
use kvbudget_core::sizing::state::{max_num_reqs, state_budget};
use kvbudget_core::state::shape;
use kvbudget_core::state::{StateDtype, StateMixer};
use kvbudget_core::*;
use proptest::prelude::*;

const GIB: f64 = (1u64 << 30) as f64;

/// Qwen3-Next-80B-A3B (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct, config.json):
/// 48 layers, full attention every 4th, so 36 gated-delta layers; 32 value heads,
/// 16 key heads, key and value head dims 128, conv kernel 4.
fn qwen3_next(tp: u64) -> StateConfig {
    let d = shape::mamba2(tp, 32 * 128, 16, 32, 128, 128, 4).unwrap();
    StateConfig {
        num_state_layers: 36,
        conv_elems: d.conv_elems,
        ssm_heads: d.ssm_heads,
        ssm_head_dim: d.ssm_head_dim,
        ssm_state_dim: d.ssm_state_dim,
        k_heads_per_tp: d.k_heads_per_tp,
        mixer: StateMixer::Gdn,
        ..StateConfig::default()
    }
    .resolved()
    .unwrap()
}

#[test]
fn qwen3_next_state_per_request() {
    // conv: (4096 + 2 * 16 * 128) channels x 3 taps, bf16; state: 32 x 128 x 128, f32.
    let s = qwen3_next(1);
    assert_eq!(s.conv_elems, 8192 * 3);
    let per_layer = 8192 * 3 * 2 + 32 * 128 * 128 * 4;
    assert_eq!(s.cache_per_req::<PlanError>().unwrap(), per_layer * 36);
    // TP 4 shards channels and heads.
    let s4 = qwen3_next(4);
    assert_eq!(
        (s4.conv_elems, s4.ssm_heads, s4.k_heads_per_tp),
        (2048 * 3, 8, 4)
    );
}

#[test]
fn auto_split_follows_the_ratio() {
    let s = qwen3_next(1);
    let b = state_budget(
        &s,
        &ServingConfig::default(),
        &SpeculativeConfig::default(),
        60.0,
    )
    .unwrap();
    // 0.9 / 1.9 of 60 GiB for state, one padding slot included.
    let share = 60.0 * 0.9 / 1.9 * GIB;
    let per = s.cache_per_req::<PlanError>().unwrap() as f64;
    assert_eq!(b.max_mamba_cache_size, ((share - per) / per).floor() as u64);
    assert_eq!(
        b.state_bytes,
        (b.max_mamba_cache_size + 1) * b.per_req_bytes
    );
    assert!((b.rest_gib - (60.0 - b.state_bytes as f64 / GIB)).abs() < 1e-9);
}

#[test]
fn too_little_memory_is_not_enough_memory() {
    let e = state_budget(
        &qwen3_next(1),
        &ServingConfig::default(),
        &SpeculativeConfig::default(),
        0.01,
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotEnoughMemory);
    assert!(e.message().starts_with("Not enough GPU memory for hybrid"));
}

#[test]
fn speculation_needs_max_running_requests() {
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle,
        num_draft_tokens: Some(4),
        ..Default::default()
    };
    let e = state_budget(&qwen3_next(1), &ServingConfig::default(), &spec, 60.0).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
}

prop_compose! {
    fn state()(layers in 1u64..80, stage_div in 1u64..4, conv in 0u64..40_000, heads in 1u64..64,
               hd in 1u64..256, sd in 1u64..256, conv_f32 in any::<bool>(), ssm in 0usize..3,
               mixer in 0usize..3, extra in prop::sample::select(vec![0u64, 0, 4096, 1 << 20]),
               given in prop::option::of(0u64..4096), ratio in 0.05f64..5.0, strategy in 0usize..3,
               skip in any::<bool>(), replay in any::<bool>(), ring in 1u64..64) -> StateConfig {
        StateConfig {
            num_state_layers: layers,
            stage_state_layers: Some(layers.div_ceil(stage_div)),
            conv_elems: conv, ssm_heads: heads, ssm_head_dim: hd, ssm_state_dim: sd,
            k_heads_per_tp: heads.div_ceil(2),
            conv_dtype: if conv_f32 { StateDtype::F32 } else { StateDtype::Bf16 },
            ssm_dtype: StateDtype::ALL[ssm],
            mixer: StateMixer::ALL[mixer],
            extra_bytes_per_req: extra,
            max_mamba_cache_size: given,
            mamba_full_memory_ratio: ratio,
            mamba_radix_cache_strategy: state::MambaRadixStrategy::ALL[strategy],
            mamba_skip_decode_lock: skip,
            enable_linear_replayssm_spec: replay,
            linear_replayssm_cache_len: ring,
            ..StateConfig::default()
        }
    }
}

prop_compose! {
    fn serving()(mrr in prop::option::of(1u64..1024), dp in 1u64..8, radix_off in any::<bool>(),
                 overlap_off in any::<bool>()) -> ServingConfig {
        ServingConfig { max_running_requests: mrr, attn_dp_size: dp, disable_radix_cache: radix_off,
                        disable_overlap_schedule: overlap_off, ..ServingConfig::default() }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// INV (plan <= budget): the state pool, the speculative reserve and the KV
    /// rest add up to the budget (to rounding), and a given size is kept.
    #[test]
    fn state_and_rest_fit_the_budget(s in state(), serving in serving(), rest in 0.001f64..200.0,
                                     d in prop::option::of(1u64..16)) {
        let spec = match d {
            Some(d) => SpeculativeConfig { algorithm: SpecAlgorithm::Eagle, num_draft_tokens: Some(d), ..Default::default() },
            None => SpeculativeConfig::default(),
        };
        let Ok(s) = s.resolved() else { return Ok(()) };
        match state_budget(&s, &serving, &spec, rest) {
            Ok(b) => {
                prop_assert!(b.max_mamba_cache_size > 0);
                let used = (b.state_bytes as f64 + b.intermediate_bytes as f64) / GIB;
                prop_assert!((rest - used - b.rest_gib).abs() <= 1e-9 * rest.max(1.0));
                if let Some(given) = s.max_mamba_cache_size {
                    prop_assert_eq!(b.max_mamba_cache_size, given / serving.attn_dp_size);
                } else if !(serving.disable_radix_cache && serving.max_running_requests.is_some()) {
                    // The auto split never spends more than its share on state.
                    let share = rest * s.mamba_full_memory_ratio / (1.0 + s.mamba_full_memory_ratio);
                    prop_assert!(used <= share * (1.0 + 1e-12) + 1e-12);
                }
                if let Ok(n) = max_num_reqs(1 << 20, 4096, &serving, Some((&s, b.max_mamba_cache_size))) {
                    prop_assert!(n > 0 && (n as u64) * b.mamba_ratio.unwrap_or(1) <= b.max_mamba_cache_size);
                }
            }
            Err(e) => prop_assert!(matches!(e.code, ErrorCode::NotEnoughMemory | ErrorCode::InvalidConfig | ErrorCode::Overflow)),
        }
    }

    /// More memory never gives fewer state slots (the auto split, no speculation).
    #[test]
    fn more_memory_more_slots(s in state(), serving in serving(), rest in 0.01f64..100.0, more in 0.0f64..100.0) {
        let s = StateConfig { max_mamba_cache_size: None, ..s };
        let serving = ServingConfig { disable_radix_cache: false, ..serving };
        let Ok(s) = s.resolved() else { return Ok(()) };
        let spec = SpeculativeConfig::default();
        if let (Ok(a), Ok(b)) = (state_budget(&s, &serving, &spec, rest), state_budget(&s, &serving, &spec, rest + more)) {
            prop_assert!(a.max_mamba_cache_size <= b.max_mamba_cache_size);
        }
    }

    /// A stage without attention layers: the state pool alone, SGLang's label floored to a page
    /// (no byte), an exact plan within the budget, and SGLang's "no GPU memory" refusal at a
    /// rest that is not positive.
    #[test]
    fn state_only_plan_is_the_state_pool(s in state(), serving in serving(), gib in 0.001f64..100.0,
                                         label in 0u64..1 << 40, exact in any::<bool>()) {
        let serving = ServingConfig { enable_unified_memory: false, ..serving };
        let spec = SpeculativeConfig::default();
        let available = (gib * (1u64 << 30) as f64) as i64;
        let fit = if exact { Fit::Exact } else { Fit::Sglang };
        match plan::plan_state_only(&serving, &spec, &s, available, fit, label) {
            Ok((p, b)) => {
                prop_assert!(p.check().is_ok(), "{:?}", p.check());
                prop_assert!(b.rest_gib > 0.0);
                prop_assert_eq!(p.pools.len(), 1);
                prop_assert_eq!(p.pools[0].tokens, b.max_mamba_cache_size);
                prop_assert_eq!(p.total_bytes, p.pools[0].nbytes);
                let page = serving.page_size.max(1);
                prop_assert_eq!(p.config.max_total_num_tokens as u64, label / page * page);
                prop_assert!(!exact || p.total_bytes as i64 <= available);
            }
            Err(e) => prop_assert!(matches!(e.code, ErrorCode::NotEnoughMemory | ErrorCode::InvalidConfig | ErrorCode::Overflow)),
        }
    }
}

/// A pool's tensors as (kind, shape), in allocation order.
fn tensor_shapes(pool: &PoolSpec) -> Vec<(TensorKind, Vec<u64>)> {
    pool.tensors
        .iter()
        .map(|t| (t.kind, t.shape.clone()))
        .collect()
}

/// Qwen3-Next's 12 attention layers at TP 4 (2 KV heads of 256), bf16, as the KV configurator.
fn qwen3_next_kv(serving: ServingConfig, spec: SpeculativeConfig) -> PoolConfigurator {
    let m = ModelGeometry::new(
        (0..12).collect(),
        vec![],
        AttentionShape {
            num_kv_heads: 2,
            head_dim: 256,
            ..AttentionShape::default()
        },
    )
    .unwrap();
    PoolConfigurator::create(m, serving, spec).unwrap()
}

#[test]
fn qwen3_next_exact_plan_holds_the_state_pool() {
    // TP 4, 28 GiB, no speculation: 736 slots, conv [36, 737, 2048, 3] bf16, temporal
    // [36, 737, 8, 128, 128] f32 (SGLang's own numbers: the README's example).
    let s = StateConfig {
        conv_kernel: Some(4),
        ..qwen3_next(4)
    };
    let cfg = qwen3_next_kv(
        ServingConfig {
            tp_size: 4,
            ..ServingConfig::default()
        },
        SpeculativeConfig::default(),
    );
    let a = 28i64 << 30;
    let (plan, budget) = cfg.plan_with_state(a, Fit::Exact, &s).unwrap();
    plan.check().unwrap();
    assert_eq!(budget.max_mamba_cache_size, 736);
    let pool = plan.pool(PoolName::State).unwrap();
    let shapes = tensor_shapes(pool);
    assert_eq!(
        shapes,
        vec![
            (TensorKind::ConvState, vec![36, 737, 2048, 3]),
            (TensorKind::TemporalState, vec![36, 737, 8, 128, 128])
        ]
    );
    assert_eq!(pool.nbytes, budget.state_bytes); // no speculation: SGLang's bytes exactly
    assert!(plan.total_bytes <= a as u64);
    let full = plan.config.max_total_num_tokens;
    assert!(cfg.bytes_for_tokens(full + 1).unwrap() > a as u64 - pool.nbytes);
}

#[test]
fn qwen3_next_unified_buffer_holds_kv_and_state() {
    // TP 4, 28 GiB, --enable-unified-memory: SGLang's buffer is the KV budget floored to 4,096
    // bytes plus 736 slots of 19,316,736 bytes; the exact one takes the whole budget.
    let s = qwen3_next(4);
    let serving = ServingConfig {
        tp_size: 4,
        enable_unified_memory: true,
        ..ServingConfig::default()
    };
    let cfg = qwen3_next_kv(serving, SpeculativeConfig::default());
    let a = 28i64 << 30;
    assert_eq!(cfg.unified_state_entries(&s).unwrap(), (12_288, 19_316_736));
    let (sglang, budget) = cfg.plan_with_state(a, Fit::Sglang, &s).unwrap();
    let (exact, _) = cfg.plan_with_state(a, Fit::Exact, &s).unwrap();
    let kv = budget.kv_budget_bytes().unwrap();
    assert_eq!(
        sglang.total_bytes,
        (kv - kv % 4096) as u64 + 736 * 19_316_736
    );
    assert_eq!(sglang.total_bytes, 30_045_454_336);
    assert_eq!(exact.total_bytes, a as u64);
    for plan in [&sglang, &exact] {
        plan.check().unwrap();
        let names: Vec<_> = plan.pools.iter().map(|p| p.name).collect();
        assert_eq!(names, vec![PoolName::Unified]);
    }
    // SGLang builds no unified pool for a model without state or sliding layers.
    let e = qwen3_next_kv(serving, SpeculativeConfig::default())
        .plan(a, Fit::Exact)
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidConfig);
}

#[test]
fn a_lightning_state_keeps_no_conv_element() {
    // Ling 2.5's lightning attention at TP 4: SGLang's Mamba2StateShape.create with no conv
    // (intermediate_size and n_groups 0, a one-tap kernel) and 32 heads of 128, so a conv shape
    // (0, 0), no key heads, and a (8, 128, 128) temporal state; with EAGLE (4 draft tokens, top-k 1)
    // the deduplicated conv window (0, 4 + 1 - 2) as SGLang's CUDA pool lays it out.
    let d = shape::mamba2(4, 0, 0, 32, 128, 128, 1).unwrap();
    assert_eq!((d.conv_elems, d.k_heads_per_tp, d.ssm_heads), (0, 0, 8));
    let s = StateConfig {
        num_state_layers: 28,
        conv_elems: d.conv_elems,
        ssm_heads: d.ssm_heads,
        ssm_head_dim: d.ssm_head_dim,
        ssm_state_dim: d.ssm_state_dim,
        k_heads_per_tp: d.k_heads_per_tp,
        conv_kernel: Some(1),
        ..StateConfig::default()
    };
    let spec = SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle,
        draft_num_layers: 1,
        num_steps: Some(3),
        eagle_topk: Some(1),
        num_draft_tokens: Some(4),
        ..SpeculativeConfig::default()
    };
    let serving = ServingConfig {
        tp_size: 4,
        max_running_requests: Some(8),
        ..ServingConfig::default()
    };
    let cfg = qwen3_next_kv(serving, spec);
    let (plan, budget) = cfg.plan_with_state(20i64 << 30, Fit::Exact, &s).unwrap();
    plan.check().unwrap();
    let rows = budget.max_mamba_cache_size + 1;
    let pool = plan.pool(PoolName::State).unwrap();
    let shapes = tensor_shapes(pool);
    assert_eq!(shapes[0], (TensorKind::ConvState, vec![28, rows, 0, 0]));
    assert_eq!(
        shapes[1],
        (TensorKind::TemporalState, vec![28, rows, 8, 128, 128])
    );
    let window = shapes
        .iter()
        .find(|(k, _)| *k == TensorKind::IntermediateConv);
    assert_eq!(window.map(|(_, s)| &s[2..]), Some(&[0u64, 3][..]));
    assert_eq!(pool.tensors[0].nbytes, 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Under unified memory: the exact buffer fits the budget within a 4,096-byte step and holds
    /// SGLang's bytes where those fit; both are one byte buffer of the state slots and the tokens.
    #[test]
    fn unified_state_buffer_fits(s in state(), a in (1i64 << 28)..(1i64 << 38), page in prop::sample::select(vec![1u64, 16, 64])) {
        let serving = ServingConfig { enable_unified_memory: true, page_size: page, ..ServingConfig::default() };
        let cfg = qwen3_next_kv(serving, SpeculativeConfig::default());
        match (cfg.plan_with_state(a, Fit::Exact, &s), cfg.plan_with_state(a, Fit::Sglang, &s)) {
            (Ok((exact, budget)), Ok((sglang, _))) => {
                prop_assert!(exact.check().is_ok() && sglang.check().is_ok());
                prop_assert!(exact.total_bytes <= a as u64 && exact.total_bytes + 4096 > a as u64);
                prop_assert!(exact.total_bytes >= sglang.total_bytes.min(a as u64 - 4095));
                let (_, e_m) = cfg.unified_state_entries(&s).unwrap();
                let kv = budget.kv_budget_bytes().unwrap();
                prop_assert_eq!(sglang.total_bytes, (kv - kv % 4096) as u64 + budget.max_mamba_cache_size * e_m);
            }
            (Err(e), _) | (_, Err(e)) => prop_assert!(matches!(e.code, ErrorCode::NotEnoughMemory
                                                          | ErrorCode::InvalidConfig | ErrorCode::Overflow)),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// INV-2 with a state pool: the plan checks, fits the budget, lists the state pool of
    /// SGLang's slots, and one more KV page would not fit beside it; a speculative pool
    /// serves at least SGLang's running requests.
    #[test]
    fn exact_plan_with_state_fits(s in state(), serving in serving(), a in (1i64 << 28)..(1i64 << 38),
                                  d in prop::option::of(1u64..16), topk in prop::option::of(1u64..4)) {
        let s = StateConfig { conv_kernel: Some(4), conv_elems: s.conv_elems / 3 * 3, ..s };
        let spec = match d {
            Some(d) => SpeculativeConfig { algorithm: SpecAlgorithm::Eagle, num_draft_tokens: Some(d),
                                           eagle_topk: topk, ..Default::default() },
            None => SpeculativeConfig::default(),
        };
        let cfg = qwen3_next_kv(serving, spec);
        match cfg.plan_with_state(a, Fit::Exact, &s) {
            Ok((plan, budget)) => {
                prop_assert!(plan.check().is_ok());
                prop_assert!(plan.total_bytes <= a as u64);
                let pool = plan.pool(PoolName::State).unwrap().clone();
                prop_assert_eq!(pool.tokens, budget.max_mamba_cache_size);
                prop_assert_eq!(&pool, &plan::state_pool(&s, &serving, &spec, budget.max_mamba_cache_size).unwrap());
                let full = plan.config.max_total_num_tokens;
                prop_assert!(cfg.bytes_for_tokens(full + 1).unwrap() > a as u64 - pool.nbytes);
                if let Some(t) = pool.tensors.iter().find(|t| t.kind == TensorKind::IntermediateSsm) {
                    let ratio = budget.mamba_ratio.unwrap();
                    let running = serving.max_running_requests.unwrap() / serving.attn_dp_size;
                    prop_assert_eq!(t.shape[1], running.max(1).min(pool.tokens / ratio) + 1);
                }
            }
            Err(e) => prop_assert!(matches!(e.code, ErrorCode::NotEnoughMemory | ErrorCode::InvalidConfig
                                            | ErrorCode::Overflow)),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// INV-7 with a state: `plan_many_with_state` equals the scalar
    /// `calculate_pool_sizes_with_state` row by row (errors as statuses, slots -1).
    #[test]
    fn batch_state_rows_equal_the_scalar(s in state(), serving in serving(),
                                         budgets in prop::collection::vec(0i64..(1i64 << 38), 1..40),
                                         heads in prop::collection::vec(0i64..40, 40)) {
        use kvbudget_core::batch::{self, Batch, Buffers, ColumnData, StateBatch, StateColumn};
        let heads = &heads[..budgets.len()];
        let cfg = qwen3_next_kv(serving, SpeculativeConfig::default());
        let cols = [StateColumn::new("ssm_heads", ColumnData::I64(heads)).unwrap()];
        let state_batch = StateBatch { base: s, base_status: 0, columns: &cols };
        let b = Batch::serial(*cfg.scenario(), &budgets, &[]);
        let mut out = Buffers::new(budgets.len());
        let mut slots = vec![0i64; budgets.len()];
        batch::plan_many_with_state(&b, &state_batch, &mut out.views(), &mut slots).unwrap();
        for (i, &a) in budgets.iter().enumerate() {
            let row = StateConfig { ssm_heads: heads[i] as u64, ..s };
            let want = if heads[i] == 0 {
                Err(ErrorCode::InvalidConfig) // ssm_heads is positive
            } else {
                cfg.calculate_pool_sizes_with_state(a, &row).map_err(|e| e.code)
            };
            match want {
                Ok((c, budget)) => {
                    prop_assert_eq!((out.status[i], out.max_total_num_tokens[i]), (0, c.max_total_num_tokens));
                    prop_assert_eq!(slots[i], budget.max_mamba_cache_size as i64);
                }
                Err(code) => prop_assert_eq!((out.status[i], slots[i]), (code.status(), -1)),
            }
        }
    }
}
