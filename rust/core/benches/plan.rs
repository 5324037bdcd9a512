//! Criterion benches of the planning hot paths:
//!
//! - `plan_many/varied/{1000,1000000}`: [`batch::plan_many`] with every
//!   varying column an array (budgets, layer counts, heads, head dim, window,
//!   dtype, page size, TP, ratio, chunk-cap inputs, speculative algorithm and
//!   draft layers), so each row builds its own configurator;
//! - `plan_many/one_setup/{1000,1000000}`: only the budget varies (one
//!   configurator for every row);
//! - `single/*`: one `calculate_pool_sizes` and one `plan(Fit::Exact)` call on
//!   a prebuilt configurator, per configurator kind.
//!
//! Run with `cargo bench -p kvbudget-core --bench plan`. Measurement times are
//! kept short (the 1e6-row groups take 10 samples over about 3 s).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kvbudget_core::batch::{plan_many, BatchInputs, BatchOutputs, Column};
use kvbudget_core::{
    Fit, KvDtype, ModelGeometry, PoolConfigurator, ServingConfig, SpecAlgorithm, SpeculativeConfig,
};

const GIB: i64 = 1 << 30;

/// A small deterministic generator (SplitMix64), so the bench needs no `rand`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64) as i64
    }
}

/// Owned column data for `n` rows; mostly valid rows of every configurator kind.
struct Varied {
    available_bytes: Vec<i64>,
    num_full_layers: Vec<i64>,
    num_swa_layers: Vec<i64>,
    num_kv_heads: Vec<i64>,
    head_dim: Vec<i64>,
    sliding_window_size: Vec<i64>,
    kv_cache_dtype: Vec<u8>,
    page_size: Vec<i64>,
    tp_size: Vec<i64>,
    swa_full_tokens_ratio: Vec<f64>,
    max_running_requests: Vec<i64>,
    chunked_prefill_size: Vec<i64>,
    disable_radix_cache: Vec<bool>,
    algorithm: Vec<u8>,
    draft_num_layers: Vec<i64>,
    num_steps: Vec<i64>,
    eagle_topk: Vec<i64>,
    num_draft_tokens: Vec<i64>,
    dflash_draft_cell_size_per_token: Vec<i64>,
}

impl Varied {
    fn new(n: usize, seed: u64) -> Self {
        let mut r = Rng(seed);
        let mut v = Self {
            available_bytes: Vec::with_capacity(n),
            num_full_layers: Vec::with_capacity(n),
            num_swa_layers: Vec::with_capacity(n),
            num_kv_heads: Vec::with_capacity(n),
            head_dim: Vec::with_capacity(n),
            sliding_window_size: Vec::with_capacity(n),
            kv_cache_dtype: Vec::with_capacity(n),
            page_size: Vec::with_capacity(n),
            tp_size: Vec::with_capacity(n),
            swa_full_tokens_ratio: Vec::with_capacity(n),
            max_running_requests: Vec::with_capacity(n),
            chunked_prefill_size: Vec::with_capacity(n),
            disable_radix_cache: Vec::with_capacity(n),
            algorithm: Vec::with_capacity(n),
            draft_num_layers: Vec::with_capacity(n),
            num_steps: Vec::with_capacity(n),
            eagle_topk: Vec::with_capacity(n),
            num_draft_tokens: Vec::with_capacity(n),
            dflash_draft_cell_size_per_token: Vec::with_capacity(n),
        };
        for _ in 0..n {
            v.available_bytes.push(r.range(GIB, 80 * GIB));
            v.num_full_layers.push(r.range(1, 64));
            v.num_swa_layers
                .push(if r.below(2) == 0 { 0 } else { r.range(1, 48) });
            v.num_kv_heads.push(r.pick(&[1, 2, 4, 8, 16, 32]));
            v.head_dim.push(r.pick(&[64, 128, 256]));
            v.sliding_window_size.push(r.pick(&[-1, 128, 1024, 4096]));
            v.kv_cache_dtype.push(r.below(6) as u8); // no fp4 (Default-only)
            v.page_size.push(r.pick(&[1, 16, 32, 64]));
            v.tp_size.push(r.pick(&[1, 2, 4, 8]));
            v.swa_full_tokens_ratio
                .push(0.05 + 0.95 * (r.below(1 << 20) as f64 / f64::from(1 << 20)));
            v.max_running_requests.push(r.pick(&[-1, 64, 256]));
            v.chunked_prefill_size.push(r.pick(&[-1, 8192]));
            v.disable_radix_cache.push(r.below(4) == 0);
            v.algorithm.push(r.pick(&[0, 1, 2, 3, 6]));
            v.draft_num_layers.push(r.range(0, 3));
            v.num_steps.push(r.pick(&[-1, 3]));
            v.eagle_topk.push(r.pick(&[-1, 1, 4]));
            v.num_draft_tokens.push(r.pick(&[-1, 4, 8]));
            v.dflash_draft_cell_size_per_token.push(r.pick(&[-1, 4096]));
        }
        v
    }

    fn inputs(&self) -> BatchInputs<'_> {
        let mut i = scalar_inputs(Column::Array(&self.available_bytes));
        i.num_full_layers = Column::Array(&self.num_full_layers);
        i.num_swa_layers = Column::Array(&self.num_swa_layers);
        i.num_kv_heads = Column::Array(&self.num_kv_heads);
        i.head_dim = Column::Array(&self.head_dim);
        i.sliding_window_size = Column::Array(&self.sliding_window_size);
        i.kv_cache_dtype = Column::Array(&self.kv_cache_dtype);
        i.page_size = Column::Array(&self.page_size);
        i.tp_size = Column::Array(&self.tp_size);
        i.swa_full_tokens_ratio = Column::Array(&self.swa_full_tokens_ratio);
        i.max_running_requests = Column::Array(&self.max_running_requests);
        i.chunked_prefill_size = Column::Array(&self.chunked_prefill_size);
        i.disable_radix_cache = Column::Array(&self.disable_radix_cache);
        i.algorithm = Column::Array(&self.algorithm);
        i.draft_num_layers = Column::Array(&self.draft_num_layers);
        i.num_steps = Column::Array(&self.num_steps);
        i.eagle_topk = Column::Array(&self.eagle_topk);
        i.num_draft_tokens = Column::Array(&self.num_draft_tokens);
        i.dflash_draft_cell_size_per_token = Column::Array(&self.dflash_draft_cell_size_per_token);
        i
    }
}

/// REFERENCE example 1 (Gemma-3-27B-like hybrid, EAGLE3 draft) as scalar
/// columns; `available_bytes` as given.
fn scalar_inputs(available_bytes: Column<'_, i64>) -> BatchInputs<'_> {
    BatchInputs {
        available_bytes,
        num_full_layers: Column::Scalar(10),
        num_swa_layers: Column::Scalar(52),
        num_kv_heads: Column::Scalar(16),
        head_dim: Column::Scalar(128),
        v_head_dim: Column::Scalar(-1),
        swa_num_kv_heads: Column::Scalar(-1),
        swa_head_dim: Column::Scalar(-1),
        swa_v_head_dim: Column::Scalar(-1),
        sliding_window_size: Column::Scalar(1024),
        kv_lora_rank: Column::Scalar(-1),
        qk_rope_head_dim: Column::Scalar(-1),
        kv_cache_dtype: Column::Scalar(0),
        page_size: Column::Scalar(64),
        tp_size: Column::Scalar(1),
        dcp_size: Column::Scalar(1),
        attn_dp_size: Column::Scalar(1),
        swa_full_tokens_ratio: Column::Scalar(0.8),
        max_running_requests: Column::Scalar(-1),
        chunked_prefill_size: Column::Scalar(-1),
        disable_radix_cache: Column::Scalar(false),
        disable_overlap_schedule: Column::Scalar(false),
        disaggregation_mode: Column::Scalar(0),
        disaggregation_decode_extra_slots: Column::Scalar(0),
        swa_eviction_interval: Column::Scalar(128),
        disable_hybrid_swa_memory: Column::Scalar(false),
        is_draft_worker: Column::Scalar(false),
        algorithm: Column::Scalar(2), // eagle3
        draft_num_layers: Column::Scalar(1),
        num_steps: Column::Scalar(-1),
        eagle_topk: Column::Scalar(-1),
        num_draft_tokens: Column::Scalar(-1),
        banded_draft_layers: Column::Scalar(0),
        dflash_draft_cell_size_per_token: Column::Scalar(-1),
    }
}

struct Outs {
    max_total: Vec<i64>,
    full: Vec<i64>,
    swa: Vec<i64>,
    status: Vec<u8>,
}

impl Outs {
    fn new(n: usize) -> Self {
        Self {
            max_total: vec![0; n],
            full: vec![0; n],
            swa: vec![0; n],
            status: vec![0; n],
        }
    }

    fn views(&mut self) -> BatchOutputs<'_> {
        BatchOutputs {
            max_total_num_tokens: &mut self.max_total,
            full_max_total_num_tokens: &mut self.full,
            swa_max_total_num_tokens: &mut self.swa,
            status: &mut self.status,
        }
    }
}

fn budgets(n: usize, seed: u64) -> Vec<i64> {
    let mut r = Rng(seed);
    (0..n).map(|_| r.range(GIB, 80 * GIB)).collect()
}

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

        let varied = Varied::new(n, 7);
        let inputs = varied.inputs();
        let mut out = Outs::new(n);
        plan_many(&inputs, &mut out.views()).expect("lengths agree");
        let ok: usize = out.status.iter().map(|s| usize::from(*s == 0)).sum();
        assert!(ok * 10 >= n * 9, "mostly valid rows: {ok} of {n}");
        g.bench_with_input(BenchmarkId::new("varied", n), &inputs, |b, inputs| {
            b.iter(|| plan_many(black_box(inputs), &mut out.views()));
        });

        let a = budgets(n, 11);
        let one = scalar_inputs(Column::Array(&a));
        g.bench_with_input(BenchmarkId::new("one_setup", n), &one, |b, inputs| {
            b.iter(|| plan_many(black_box(inputs), &mut out.views()));
        });
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
            16,
            128,
            None,
            None,
            None,
            None,
            Some(1024),
            None,
            None,
        )
        .expect("valid model")
    };
    let eagle3 = || {
        SpeculativeConfig::new(SpecAlgorithm::Eagle3, 1, None, None, None, 0, None, None)
            .expect("valid spec")
    };
    let paged = ServingConfig {
        page_size: 64,
        ..ServingConfig::default()
    };
    let llama = ModelGeometry::new(
        (0..32).collect(),
        vec![],
        8,
        128,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
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
