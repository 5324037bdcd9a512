//! Criterion benches of the planning hot paths:
//!
//! - `plan_many/varied/{1000,1000000}`: [`plan_many`] with 18 columns besides
//!   the budget varying (layer counts, heads, head dim, window, dtype, page
//!   size, TP, ratio, request-cap inputs, speculative algorithm and draft
//!   layers; `common/varied.rs`), one thread;
//! - `plan_many/varied_int32/{1000,1000000}`: the same rows with their integer
//!   columns in int32 cells (half the memory streamed), one thread;
//! - `plan_many/budget_only/{1000,1000000}`: only the budget varies (one
//!   sizing for every row, REFERENCE example 1), one thread, in the same run,
//!   so that the ratio of the two is measured under the same conditions;
//! - `plan_many/varied_threads/1000000`: the varied rows on every core;
//! - `single/*`: one `calculate_pool_sizes` and one `plan(Fit::Exact)` call on
//!   a prebuilt configurator, per configurator kind.
//!
//! Run with `cargo bench -p kvbudget-core --bench plan`. Measurement times are
//! kept short (the 1e6-row groups take 10 samples over about 3 s). Outputs are
//! reused across iterations (the `out=` path). Instruction counts per row:
//! `benches/callgrind.sh`.

#[path = "common/varied.rs"]
mod varied;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kvbudget_core::batch::Threads;
use kvbudget_core::{
    AttentionShape, Fit, KvDtype, ModelGeometry, PoolConfigurator, ServingConfig, SpecAlgorithm,
    SpeculativeConfig,
};

const GIB: i64 = varied::GIB;

fn bench_plan_many(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan_many");
    for n in [1_000_usize, 1_000_000] {
        if n >= 1_000_000 {
            g.sample_size(10)
                .measurement_time(Duration::from_secs(3))
                .warm_up_time(Duration::from_millis(500));
        } else {
            g.sample_size(20)
                .measurement_time(Duration::from_secs(2))
                .warm_up_time(Duration::from_millis(300));
        }
        g.throughput(Throughput::Elements(n as u64));
        let mut out = varied::Outs::new(n);
        let varied = varied::varied(n, 7);
        let cols = varied.columns();
        varied.run(&cols, &mut out.views(), Threads::Fixed(1));
        let ok = out
            .status
            .iter()
            .map(|s| usize::from(*s == 0))
            .sum::<usize>();
        assert!(ok * 10 >= n * 9, "mostly valid rows: {ok} of {n}");
        g.bench_function(BenchmarkId::new("varied", n), |b| {
            b.iter(|| varied.run(black_box(&cols), &mut out.views(), Threads::Fixed(1)));
        });
        let thin = varied::varied(n, 7).narrowed();
        let thin_cols = thin.columns();
        g.bench_function(BenchmarkId::new("varied_int32", n), |b| {
            b.iter(|| thin.run(black_box(&thin_cols), &mut out.views(), Threads::Fixed(1)));
        });
        let one = varied::one_setup(n, 11);
        let none = one.columns();
        g.bench_function(BenchmarkId::new("budget_only", n), |b| {
            b.iter(|| one.run(black_box(&none), &mut out.views(), Threads::Fixed(1)));
        });
        if n >= 1_000_000 {
            g.bench_function(BenchmarkId::new("varied_threads", n), |b| {
                b.iter(|| varied.run(black_box(&cols), &mut out.views(), Threads::Auto));
            });
        }
    }
    g.finish();
}

fn configurators() -> Vec<(&'static str, PoolConfigurator)> {
    let gemma_full: Vec<u64> = (0..62).filter(|i| i % 6 == 5).collect();
    let gemma_swa: Vec<u64> = (0..62).filter(|i| i % 6 != 5).collect();
    let hybrid_model = || {
        ModelGeometry::new(
            gemma_full.clone(),
            gemma_swa.clone(),
            AttentionShape {
                num_kv_heads: 16,
                head_dim: 128,
                sliding_window_size: Some(1024),
                ..AttentionShape::default()
            },
        )
        .expect("valid model")
    };
    let eagle3 = || {
        SpeculativeConfig {
            algorithm: SpecAlgorithm::Eagle3,
            draft_num_layers: 1,
            ..SpeculativeConfig::default()
        }
        .resolved()
        .expect("valid spec")
    };
    let paged = ServingConfig {
        page_size: 64,
        ..ServingConfig::default()
    };
    let llama = ModelGeometry::new(
        (0..32).collect(),
        vec![],
        AttentionShape {
            num_kv_heads: 8,
            head_dim: 128,
            ..AttentionShape::default()
        },
    )
    .expect("valid model");
    let chunk_cap = ServingConfig {
        page_size: 64,
        kv_cache_dtype: KvDtype::Fp8E4m3,
        max_running_requests: Some(64),
        chunked_prefill_size: Some(8192),
        disable_radix_cache: true,
        ..ServingConfig::default()
    };
    vec![
        (
            "default",
            PoolConfigurator::create(
                llama,
                ServingConfig::default(),
                SpeculativeConfig::default(),
            )
            .expect("default"),
        ),
        (
            "hybrid_swa",
            PoolConfigurator::create(hybrid_model(), paged, eagle3()).expect("hybrid"),
        ),
        (
            "chunk_cap",
            PoolConfigurator::create(hybrid_model(), chunk_cap, eagle3()).expect("chunk cap"),
        ),
    ]
}

fn bench_single(c: &mut Criterion) {
    let mut g = c.benchmark_group("single");
    g.sample_size(30)
        .measurement_time(Duration::from_secs(1))
        .warm_up_time(Duration::from_millis(300));
    let budget = 40 * GIB;
    for (name, cfg) in configurators() {
        cfg.calculate_pool_sizes(budget, None)
            .expect("plans at 40 GiB");
        g.bench_function(BenchmarkId::new("calculate_pool_sizes", name), |b| {
            b.iter(|| black_box(&cfg).calculate_pool_sizes(black_box(budget), None));
        });
        g.bench_function(BenchmarkId::new("plan_exact", name), |b| {
            b.iter(|| black_box(&cfg).plan(black_box(budget), Fit::Exact));
        });
    }
    g.finish();
}

criterion_group!(benches, bench_plan_many, bench_single);
criterion_main!(benches);
