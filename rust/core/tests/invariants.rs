//! REFERENCE section 6 invariants as property tests (INV-2 to INV-6, INV-8).
//! INV-1 (SGLang parity) is the golden test plus the Python differential test;
//! INV-7 (batch equals scalar) lives with the batch API.
use kvbudget_core::plan::TENSOR_ALIGNMENT;
use kvbudget_core::*;
use proptest::prelude::*;

fn dtype() -> impl Strategy<Value = KvDtype> {
    prop::sample::select(KvDtype::ALL.to_vec())
}

fn algorithm() -> impl Strategy<Value = SpecAlgorithm> {
    prop::sample::select(SpecAlgorithm::ALL.to_vec())
}

prop_compose! {
    fn model()(n_f in 0u64..8, n_s in 0u64..10, heads in 1u64..64, dk in 1u64..300, dv in prop::option::of(1u64..300),
               swa_heads in prop::option::of(1u64..64), swa_dk in prop::option::of(1u64..300),
               window in prop::option::of(0u64..5000), mla in prop::option::of((1u64..600, 0u64..128)),
               swa_mla in prop::option::of((1u64..600, prop::option::of(0u64..128))))
        -> Option<ModelGeometry> {
        let n_f = if n_f + n_s == 0 { 1 } else { n_f };
        let full: Vec<u64> = (0..n_f).map(|i| 2 * i + 1).collect();
        let swa: Vec<u64> = (0..n_s).map(|i| 2 * i).collect();
        // MLA: some all-full, some hybrid SWA with their own SWA latent dims.
        let (swa, mla) = match mla { Some(m) if n_s % 3 == 0 => (vec![], Some(m)), Some(m) if n_s % 3 == 1 => (swa, Some(m)), _ => (swa, None) };
        let swa = if swa.is_empty() && n_f == 0 { vec![0] } else { swa };
        let swa_mla = swa_mla.filter(|_| mla.is_some());
        ModelGeometry::new(full, swa, AttentionShape { num_kv_heads: heads, head_dim: dk, v_head_dim: dv, swa_num_kv_heads: swa_heads, swa_head_dim: swa_dk, sliding_window_size: window, kv_lora_rank: mla.map(|m| m.0), qk_rope_head_dim: mla.map(|m| m.1), swa_kv_lora_rank: swa_mla.map(|m| m.0), swa_qk_rope_head_dim: swa_mla.and_then(|m| m.1), ..AttentionShape::default() }).ok()
    }
}

prop_compose! {
    fn serving()(dtype in dtype(), page in prop::sample::select(vec![1u64, 1, 16, 64, 3, 256]),
                 tp in prop::sample::select(vec![1u64, 2, 4, 8, 16]), dcp_div in 0u32..2,
                 ratio in 0.01f64..2.0, chunk in prop::option::of((1u64..512, 1u64..16384)),
                 overlap_off in any::<bool>(), decode in any::<bool>(), extra in 0u64..8, e in -2i64..300,
                 draft_worker in prop::bool::weighted(0.1), unified in prop::bool::weighted(0.2),
                 model_dtype in prop::sample::select(dtype::ModelDtype::ALL.to_vec()),
                 backends in prop::option::of((0usize..9, 0usize..9)), sm100 in any::<bool>(),
                 no_chunk in prop::bool::weighted(0.2))
        -> ServingConfig {
        let dcp = if dcp_div == 1 && tp % 2 == 0 { 2 } else { 1 };
        let backend = |i: usize| fp4::AttentionBackend::ALL[i];
        ServingConfig {
            kv_cache_dtype: dtype, model_dtype, page_size: page, tp_size: tp, dcp_size: dcp, swa_full_tokens_ratio: ratio,
            max_running_requests: chunk.map(|c| c.0),
            // PD decode sizes the request cap without a chunk.
            chunked_prefill_size: chunk.filter(|_| !(decode && no_chunk)).map(|c| c.1),
            disable_radix_cache: chunk.is_some(), disable_overlap_schedule: overlap_off,
            disaggregation_mode: if decode { DisaggregationMode::Decode } else { DisaggregationMode::Null },
            disaggregation_decode_extra_slots: extra, swa_eviction_interval: e, is_draft_worker: draft_worker,
            enable_unified_memory: unified, prefill_attention_backend: backends.map(|b| backend(b.0)),
            decode_attention_backend: backends.map(|b| backend(b.1)), is_sm100: sm100,
            ..ServingConfig::default()
        }
    }
}

prop_compose! {
    fn spec()(alg in algorithm(), d in 0u64..5, banded in 0u64..3, d_s in 0u64..3, steps in prop::option::of(0u64..6),
              topk in prop::option::of(0u64..5), k in prop::option::of(0u64..9), max_k in prop::option::of(0u64..12),
              cell in prop::option::of(0u64..100_000),
              fused in prop::option::of((prop::option::of(1u64..1 << 20), prop::option::of(1u64..1 << 20))))
        -> SpeculativeConfig {
        let banded = banded.min(d);
        let d_s = if banded > 0 { 0 } else { d_s.min(d) };
        // Fused entries only with a drafting algorithm (the configurators refuse others).
        let fused = fused.filter(|_| alg.counts_draft_layers() || alg.is_dflash_family());
        SpeculativeConfig { algorithm: alg, draft_num_layers: d, num_steps: steps, eagle_topk: topk, num_draft_tokens: k,
            max_num_draft_tokens: max_k, banded_draft_layers: banded, draft_swa_num_layers: d_s,
            dflash_draft_cell_size_per_token: cell, fused_full_entry_bytes: fused.and_then(|f| f.0),
            fused_swa_entry_bytes: fused.and_then(|f| f.1), ..SpeculativeConfig::default() }.resolved().unwrap()
    }
}

fn configurator() -> impl Strategy<Value = PoolConfigurator> {
    (model(), serving(), spec()).prop_filter_map("valid configurator", |(m, s, sp)| {
        PoolConfigurator::create(m?, s, sp).ok()
    })
}

fn tokens(c: &MemoryPoolConfig) -> [i64; 3] {
    [
        c.max_total_num_tokens,
        c.full_max_total_num_tokens.unwrap_or(0),
        c.swa_max_total_num_tokens.unwrap_or(0),
    ]
}

proptest! {
    // Cases: proptest's default (256), or PROPTEST_CASES (CI sets 10,000).
    #![proptest_config(ProptestConfig::default())]

    /// INV-3: more bytes never gives fewer tokens in any pool (and never turns success into an error).
    #[test]
    fn inv3_monotone(cfg in configurator(), a in 0i64..(1 << 40), extra in 0i64..(1 << 36)) {
        if let Ok(small) = cfg.calculate_pool_sizes(a, None) {
            let big = cfg.calculate_pool_sizes(a + extra, None).expect("more budget must not fail");
            for (x, y) in tokens(&small).iter().zip(tokens(&big)) {
                prop_assert!(*x <= y);
            }
        }
        if let (Ok(p1), Ok(p2)) = (cfg.plan(a, Fit::Exact), cfg.plan(a + extra, Fit::Exact)) {
            for (x, y) in p1.pools.iter().zip(&p2.pools) {
                prop_assert!(x.tokens <= y.tokens);
            }
        }
    }

    /// INV-4 (alignment) and INV-5 (ratio) on the profiling path.
    #[test]
    fn inv4_inv5_alignment_and_ratio(cfg in configurator(), a in -(1i64 << 30)..(1 << 42), page in prop::option::of(1u64..300)) {
        let p = page.unwrap_or(cfg.serving().page_size) as i64;
        if let Ok(c) = cfg.calculate_pool_sizes(a, page) {
            for t in tokens(&c) {
                prop_assert_eq!(t % p, 0);
            }
            prop_assert!(c.max_total_num_tokens > 0);
            if cfg.kind() == ConfiguratorKind::HybridSwa && !cfg.is_all_swa() {
                let full = c.full_max_total_num_tokens.unwrap();
                let r = cfg.serving().swa_full_tokens_ratio;
                prop_assert_eq!(c.swa_max_total_num_tokens.unwrap(), ((full as f64 * r).trunc() as i64).div_euclid(p) * p);
            }
        }
    }

    /// INV-6: counted draft layers make the cell larger; none or a non-drafting algorithm leaves it unchanged.
    #[test]
    fn inv6_draft_grows_cell(m in model(), s in serving(), alg in algorithm(), d in 1u64..6, d_s in 0u64..6, k in 1u64..8) {
        let Some(m) = m else { return Ok(()) };
        // The request cap's spec-v2 decode allocation needs num_draft_tokens.
        let base_spec = SpeculativeConfig { num_draft_tokens: Some(k), ..SpeculativeConfig::default() };
        let Ok(base) = PoolConfigurator::create(m.clone(), s, base_spec) else { return Ok(()) };
        let sp = SpeculativeConfig { algorithm: alg, draft_num_layers: d, draft_swa_num_layers: d_s.min(d), ..base_spec }.resolved().unwrap();
        let with = PoolConfigurator::create(m, s, sp).unwrap();
        let as_f = |c: CellSize| match c { CellSize::Int(v) => v as f64, CellSize::Float(v) => v };
        let (b, w) = (as_f(base.cell_size()), as_f(with.cell_size()));
        // The DFLASH family without a cell size is priced by SGLang's layer scaling in Default only.
        let drafts = alg.counts_draft_layers() || (alg.is_dflash_family() && base.kind() == ConfiguratorKind::Default);
        if drafts && !s.is_draft_worker {
            prop_assert!(w > b, "{w} > {b}");
        } else {
            prop_assert_eq!(w, b);
        }
    }

    /// INV-2: the exact plan fits, its tensors add up, and one more page would not fit.
    #[test]
    fn inv2_exact_plan(cfg in configurator(), a in 0i64..(1 << 42)) {
        if let Ok(plan) = cfg.plan(a, Fit::Exact) {
            prop_assert!(plan.total_bytes <= a as u64);
            let slabs: u64 = plan.pools.iter().map(|p| p.nbytes).sum();
            prop_assert_eq!(slabs, plan.total_bytes);
            prop_assert!(plan.tensor_bytes() <= plan.total_bytes);
            for pool in &plan.pools {
                prop_assert_eq!(pool.tokens % plan.page_size, 0);
                let mut end: u64 = 0;
                for t in &pool.tensors {
                    let elems: u64 = t.shape.iter().product();
                    prop_assert_eq!(elems * t.dtype.bytes(), t.nbytes);
                    // Aligned, in order, no overlap, and no gap beyond the alignment.
                    prop_assert_eq!(t.offset % TENSOR_ALIGNMENT, 0);
                    prop_assert_eq!(t.offset, end.next_multiple_of(TENSOR_ALIGNMENT));
                    end = t.offset + t.nbytes;
                }
                prop_assert_eq!(end, pool.nbytes);
            }
            let primary = if cfg.is_all_swa() { plan.config.swa_max_total_num_tokens.unwrap() } else { plan.config.max_total_num_tokens };
            prop_assert_eq!(cfg.bytes_for_tokens(primary).unwrap(), plan.total_bytes);
            let next = cfg.bytes_for_tokens(primary + plan.page_size as i64).unwrap();
            prop_assert!(next > a as u64, "one more page ({next} bytes) fits in {a}");
        }
    }

    /// INV-8: arbitrary integers and floats give a typed error or a result, never a panic.
    #[test]
    fn inv8_no_panic(n_f in 0u64..4, n_s in 0u64..4, heads in any::<u64>(), dk in any::<u64>(), dv in any::<u64>(),
                     window in any::<Option<u64>>(), page in any::<u64>(), tp in any::<u64>(), ratio in any::<f64>(),
                     mrr in any::<Option<u64>>(), chunk in any::<Option<u64>>(), e in any::<i64>(),
                     d in any::<u64>(), k in any::<Option<u64>>(), a in any::<i64>(), t in any::<i64>(),
                     dtype in dtype(), alg in algorithm(), cell in any::<Option<u64>>()) {
        let m = ModelGeometry::new((0..n_f).collect(), (n_f..n_f + n_s).collect(), AttentionShape { num_kv_heads: heads, head_dim: dk, v_head_dim: Some(dv), sliding_window_size: window, ..AttentionShape::default() });
        let s = ServingConfig { kv_cache_dtype: dtype, page_size: page, tp_size: tp, swa_full_tokens_ratio: ratio,
            max_running_requests: mrr, chunked_prefill_size: chunk, disable_radix_cache: true, swa_eviction_interval: e,
            ..ServingConfig::default() };
        let sp = SpeculativeConfig { algorithm: alg, draft_num_layers: d, num_steps: k, eagle_topk: k, num_draft_tokens: k, dflash_draft_cell_size_per_token: cell, ..SpeculativeConfig::default() }.resolved();
        if let (Ok(m), Ok(sp)) = (m, sp) {
            if let Ok(cfg) = PoolConfigurator::create(m, s, sp) {
                let _ = cfg.calculate_pool_sizes(a, None);
                let _ = cfg.calculate_pool_sizes_from_max_tokens(t, None);
                if let Ok(plan) = cfg.plan(a, Fit::Exact) {
                    prop_assert!(plan.total_bytes <= a as u64);
                }
                let _ = cfg.plan(a, Fit::Sglang);
            }
        }
    }
}
