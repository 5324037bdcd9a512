//! A self-contained fuzz driver for kvbudget-core (INV-8: bad input gives a
//! typed error, never a panic or a wrong number).
//!
//! No dependencies: a splitmix64 PRNG draws raw inputs biased toward edges
//! (0, 1, powers of two, 2^31, 2^32, 2^53, 2^63 - 1, u64::MAX, i64::MIN,
//! negative budgets, NaN, +-inf, -0.0, subnormals, 1e-300 and 1e300 ratios,
//! layer id lists up to a few thousand, duplicate ids, every dtype, algorithm
//! and mode) and drives every entry point under `catch_unwind`:
//! `ModelGeometry::new`, `DraftGeometry::new`, `SpeculativeConfig::new`,
//! `ServingConfig::validate`, `PoolConfigurator::{create, new, from_shape}`,
//! `calculate_pool_sizes`, `calculate_pool_sizes_from_max_tokens`,
//! `calculate_pool_sizes_many`, `plan` (exact and sglang), `bytes_for_tokens`,
//! `batch::plan_many` with mixed scalar and array columns, and the `FromStr`
//! parsers.
//!
//! Oracles, on every execution: no panic; every error has a code and a
//! message; a configurator exists only for a valid serving config;
//! `calculate_pool_sizes*` results are positive, page-aligned and follow
//! REFERENCE 2.2-2.5 (INV-4, INV-5, the admission floor, monotone in the
//! budget: INV-3); an exact plan fits the budget, is maximal (one more page
//! does not fit: INV-2), and its tensors' bytes, offsets and shapes add up;
//! a sglang plan carries `calculate_pool_sizes`' numbers; every batch row
//! equals the scalar API on the same row (INV-7), through the shape and
//! through a real `ModelGeometry`.
//!
//! ```text
//! cargo run --release -p kvbudget-core --example fuzz -- [--iters N] [--seed S]
//!     [--replay I] [--unvalidated] [--show K]
//! ```
//!
//! `--replay I` reruns iteration `I` of seed `S` alone and prints its input.
//! `--unvalidated` also feeds struct literals that bypass the constructors
//! (what `_from_json`/pickle produce on the Python side). Exit status 1 on any
//! crash or oracle violation.
//!
//! Release builds of workspace crates have no overflow checks (Cargo.toml only
//! enables them for dependencies); run with
//! `CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true` so that a wrapping intermediate
//! is reported as a panic rather than silently giving a wrong number.

use kvbudget_core::batch::{plan_many, BatchInputs, BatchOutputs, Column};
use kvbudget_core::plan::TENSOR_ALIGNMENT;
use kvbudget_core::{
    AttentionShape, CellSize, ConfiguratorKind, DisaggregationMode, DraftCapacity, DraftGeometry,
    ErrorCode, Fit, KvDtype, MemoryPoolConfig, MlaDims, ModelGeometry, PlanError, PoolConfigurator,
    PoolName, PoolPlan, ServingConfig, SpecAlgorithm, SpeculativeConfig,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

// ---------------------------------------------------------------------------
// PRNG and edge-biased draws

/// splitmix64: tiny, fast, and every 64-bit seed is a good one.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n == 0`).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }

    fn u64_edge(&mut self) -> u64 {
        match self.below(8) {
            0..=3 => self.pick(&U64_EDGES),
            4 => 1u64 << self.below(64),
            5 => (1u64 << self.below(64)).wrapping_add(self.pick(&[1, u64::MAX])),
            6 => self.next_u64() >> self.below(64),
            _ => self.next_u64(),
        }
    }

    fn i64_edge(&mut self) -> i64 {
        match self.below(6) {
            0..=2 => self.pick(&I64_EDGES),
            3 => -((self.next_u64() >> self.range(1, 63)) as i64),
            4 => (self.next_u64() >> self.range(1, 63)) as i64,
            _ => self.next_u64() as i64,
        }
    }

    fn f64_edge(&mut self) -> f64 {
        match self.below(5) {
            0..=2 => self.pick(&F64_EDGES),
            3 => f64::from_bits(self.next_u64()),
            _ => (self.below(1 << 20) as f64 + 1.0) / f64::from(1u32 << 20),
        }
    }

    fn opt<T>(&mut self, none_percent: u64, f: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.chance(none_percent) {
            None
        } else {
            Some(f(self))
        }
    }
}

const U64_EDGES: [u64; 31] = [
    0,
    1,
    2,
    3,
    7,
    8,
    31,
    32,
    33,
    64,
    255,
    256,
    4096,
    65_535,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 1,
    (1 << 53) - 1,
    1 << 53,
    (1 << 53) + 1,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 1,
    u64::MAX - 1,
    u64::MAX,
    u64::MAX / 3,
    1_000_000_007,
    0x5555_5555_5555_5555,
];

const I64_EDGES: [i64; 22] = [
    0,
    1,
    -1,
    2,
    -2,
    63,
    64,
    65,
    i64::MIN,
    i64::MIN + 1,
    i64::MAX,
    i64::MAX - 1,
    1 << 31,
    -(1 << 31),
    1 << 32,
    (1 << 32) - 1,
    1 << 53,
    -(1 << 53),
    (1 << 53) + 1,
    1 << 62,
    -(1 << 62),
    i64::MAX / 3,
];

const F64_EDGES: [f64; 24] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    5e-324,
    f64::MIN_POSITIVE,
    f64::MIN_POSITIVE / 2.0,
    1e-300,
    1e300,
    f64::MAX,
    -f64::MAX,
    -1.0,
    1e-9,
    1e9,
    1e18,
    1e19,
    0.1,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    9_223_372_036_854_775_808.0,
];

const ALGORITHMS: [SpecAlgorithm; 7] = [
    SpecAlgorithm::None,
    SpecAlgorithm::Eagle,
    SpecAlgorithm::Eagle3,
    SpecAlgorithm::NextN,
    SpecAlgorithm::Standalone,
    SpecAlgorithm::Ngram,
    SpecAlgorithm::Dflash,
];
const MODES: [DisaggregationMode; 3] = [
    DisaggregationMode::Null,
    DisaggregationMode::Prefill,
    DisaggregationMode::Decode,
];
const KINDS: [ConfiguratorKind; 3] = [
    ConfiguratorKind::Default,
    ConfiguratorKind::HybridSwa,
    ConfiguratorKind::ChunkCap,
];

/// Layer totals above this are not planned (the plan materialises one entry per
/// layer; see the report: millions of layers exhaust memory instead of erroring).
const PLAN_LAYER_LIMIT: u64 = 1 << 16;

// ---------------------------------------------------------------------------
// Inputs

#[derive(Debug, Clone)]
struct GeomArgs {
    full: Vec<u64>,
    swa: Vec<u64>,
    num_kv_heads: u64,
    head_dim: u64,
    v_head_dim: Option<u64>,
    swa_num_kv_heads: Option<u64>,
    swa_head_dim: Option<u64>,
    swa_v_head_dim: Option<u64>,
    sliding_window_size: Option<u64>,
    kv_lora_rank: Option<u64>,
    qk_rope_head_dim: Option<u64>,
}

#[derive(Debug, Clone)]
struct DraftArgs {
    num_layers: u64,
    num_kv_heads: u64,
    head_dim: u64,
    v_head_dim: Option<u64>,
    kv_cache_dtype: Option<KvDtype>,
    capacity: Option<DraftCapacity>,
}

#[derive(Debug, Clone)]
struct SpecArgs {
    algorithm: SpecAlgorithm,
    draft_num_layers: u64,
    num_steps: Option<u64>,
    eagle_topk: Option<u64>,
    num_draft_tokens: Option<u64>,
    banded_draft_layers: u64,
    dflash: Option<u64>,
    draft: Option<DraftArgs>,
}

#[derive(Debug, Clone, Copy)]
enum Build {
    Create,
    New(ConfiguratorKind),
    /// `from_shape(kind, shape)`; the counts override the id lists' lengths when given.
    FromShape(Option<ConfiguratorKind>, Option<(u64, u64)>),
}

#[derive(Debug, Clone)]
struct ManyCase {
    budgets: Vec<i64>,
    out_lens: [usize; 4],
}

#[derive(Debug, Clone)]
struct ConfigCase {
    geom: GeomArgs,
    spec: SpecArgs,
    serving: ServingConfig,
    build: Build,
    /// Struct literals instead of the validating constructors.
    unvalidated: bool,
    available: i64,
    available_delta: i64,
    max_tokens: i64,
    page: Option<u64>,
    many: Option<ManyCase>,
}

#[derive(Debug, Clone)]
enum Col<T> {
    S(T),
    A(Vec<T>),
}

impl<T: Copy> Col<T> {
    fn column(&self) -> Column<'_, T> {
        match self {
            Self::S(v) => Column::Scalar(*v),
            Self::A(a) => Column::Array(a),
        }
    }
    fn get(&self, i: usize) -> T {
        match self {
            Self::S(v) => *v,
            Self::A(a) => a[i],
        }
    }
    fn len(&self) -> Option<usize> {
        match self {
            Self::S(_) => None,
            Self::A(a) => Some(a.len()),
        }
    }
}

// Indices of the i64 columns of a batch case.
const AVAIL: usize = 0;
const NF: usize = 1;
const NS: usize = 2;
const HEADS: usize = 3;
const DK: usize = 4;
const DV: usize = 5;
const SHEADS: usize = 6;
const SDK: usize = 7;
const SDV: usize = 8;
const WINDOW: usize = 9;
const LORA: usize = 10;
const ROPE: usize = 11;
const PAGE: usize = 12;
const TP: usize = 13;
const DCP: usize = 14;
const DP: usize = 15;
const MRR: usize = 16;
const CHUNK: usize = 17;
const EXTRA: usize = 18;
const EVICT: usize = 19;
const D: usize = 20;
const STEPS: usize = 21;
const TOPK: usize = 22;
const K: usize = 23;
const BANDED: usize = 24;
const DFLASH: usize = 25;
const N_I64: usize = 26;
// u8 columns.
const DTYPE: usize = 0;
const MODE: usize = 1;
const ALG: usize = 2;
// bool columns.
const RADIX: usize = 0;
const OVERLAP: usize = 1;
const HYBRID_OFF: usize = 2;
const DRAFT_WORKER: usize = 3;

#[derive(Debug, Clone)]
struct BatchCase {
    i: Vec<Col<i64>>,
    u: Vec<Col<u8>>,
    ratio: Col<f64>,
    b: Vec<Col<bool>>,
    out_lens: [usize; 4],
}

#[derive(Debug, Clone)]
enum Input {
    Config(Box<ConfigCase>),
    Batch(Box<BatchCase>),
    Parse(String),
}

// ---------------------------------------------------------------------------
// Generation

fn gen_layer_count(r: &mut Rng, zero_percent: u64) -> u64 {
    if r.chance(zero_percent) {
        return 0;
    }
    match r.below(100) {
        0..=89 => r.range(1, 64),
        90..=98 => r.range(65, 512),
        _ => r.range(513, 3000),
    }
}

fn gen_heads(r: &mut Rng) -> u64 {
    if r.chance(85) {
        r.pick(&[1, 2, 4, 8, 8, 16, 32, 64, 128])
    } else {
        r.u64_edge()
    }
}

fn gen_dim(r: &mut Rng) -> u64 {
    if r.chance(85) {
        r.pick(&[1, 16, 32, 64, 80, 96, 128, 128, 192, 256, 512])
    } else {
        r.u64_edge()
    }
}

fn gen_ids(r: &mut Rng, nf: u64, ns: u64) -> (Vec<u64>, Vec<u64>) {
    let total = nf + ns;
    match r.below(10) {
        0..=6 => {
            // A permutation of 0..total split into full and SWA ids.
            let mut ids: Vec<u64> = (0..total).collect();
            if r.chance(70) {
                for i in (1..ids.len()).rev() {
                    let j = r.below(i as u64 + 1) as usize;
                    ids.swap(i, j);
                }
            }
            let swa = ids.split_off(nf as usize);
            (ids, swa)
        }
        7 => {
            // Arbitrary ids (edges collide often: duplicates).
            let full = (0..nf).map(|_| r.u64_edge()).collect();
            let swa = (0..ns).map(|_| r.u64_edge()).collect();
            (full, swa)
        }
        8 => {
            // A duplicate inside one list, or across the lists.
            let mut full: Vec<u64> = (0..nf).collect();
            let mut swa: Vec<u64> = (nf..total).collect();
            match r.below(3) {
                0 if nf > 0 => full.push(r.below(nf)),
                1 if ns > 0 => swa.push(nf + r.below(ns)),
                _ if nf > 0 => swa.push(r.below(nf)),
                _ => swa.push(0),
            }
            (full, swa)
        }
        _ => {
            // Ids at the top of the range.
            let full = (0..nf).map(|i| u64::MAX - i).collect();
            let swa = (0..ns).map(|i| u64::MAX - nf - i).collect();
            (full, swa)
        }
    }
}

fn gen_geom(r: &mut Rng) -> GeomArgs {
    let nf = gen_layer_count(r, 20);
    let ns = gen_layer_count(r, 40);
    let (full, swa) = gen_ids(r, nf, ns);
    let mla = r.chance(15);
    GeomArgs {
        full,
        swa,
        num_kv_heads: gen_heads(r),
        head_dim: gen_dim(r),
        v_head_dim: r.opt(60, gen_dim),
        swa_num_kv_heads: r.opt(60, gen_heads),
        swa_head_dim: r.opt(60, gen_dim),
        swa_v_head_dim: r.opt(70, gen_dim),
        sliding_window_size: r.opt(30, |r| {
            if r.chance(75) {
                r.pick(&[0, 1, 127, 511, 1023, 4095, 8191])
            } else {
                r.u64_edge()
            }
        }),
        kv_lora_rank: if mla {
            Some(if r.chance(80) {
                r.pick(&[0, 1, 64, 512])
            } else {
                r.u64_edge()
            })
        } else {
            None
        },
        qk_rope_head_dim: if mla || r.chance(5) {
            r.opt(10, |r| {
                if r.chance(80) {
                    r.pick(&[0, 1, 64])
                } else {
                    r.u64_edge()
                }
            })
        } else {
            None
        },
    }
}

fn gen_small_opt(r: &mut Rng) -> Option<u64> {
    r.opt(40, |r| {
        if r.chance(80) {
            r.below(9)
        } else {
            r.u64_edge()
        }
    })
}

fn gen_spec(r: &mut Rng) -> SpecArgs {
    let d = match r.below(20) {
        0..=6 => 0,
        7..=16 => r.range(1, 4),
        17..=18 => r.range(5, 64),
        _ => r.u64_edge(),
    };
    let banded = match r.below(10) {
        0..=6 => 0,
        7..=8 => r.below(d.min(8) + 1),
        _ => r.u64_edge(),
    };
    let draft = r.opt(80, |r| DraftArgs {
        num_layers: if r.chance(70) {
            r.range(0, 4)
        } else {
            r.u64_edge()
        },
        num_kv_heads: gen_heads(r),
        head_dim: gen_dim(r),
        v_head_dim: r.opt(70, gen_dim),
        kv_cache_dtype: r.opt(50, |r| r.pick(&KvDtype::ALL)),
        capacity: r.opt(60, |r| r.pick(&[DraftCapacity::Full, DraftCapacity::Swa])),
    });
    SpecArgs {
        algorithm: r.pick(&ALGORITHMS),
        draft_num_layers: d,
        num_steps: gen_small_opt(r),
        eagle_topk: gen_small_opt(r),
        num_draft_tokens: gen_small_opt(r),
        banded_draft_layers: banded,
        dflash: r.opt(50, |r| {
            if r.chance(80) {
                r.pick(&[1, 256, 4096, 65_536])
            } else {
                r.u64_edge()
            }
        }),
        draft,
    }
}

fn gen_serving(r: &mut Rng) -> ServingConfig {
    let tp = if r.chance(85) {
        r.pick(&[1, 1, 2, 4, 8, 16])
    } else {
        r.u64_edge()
    };
    ServingConfig {
        kv_cache_dtype: r.pick(&KvDtype::ALL),
        page_size: if r.chance(80) {
            r.pick(&[1, 1, 3, 16, 32, 64, 128, 256])
        } else {
            r.u64_edge()
        },
        tp_size: tp,
        dcp_size: match r.below(10) {
            0..=6 => 1,
            7..=8 => r.pick(&[1, 2, 4, 8]),
            _ => r.u64_edge(),
        },
        attn_dp_size: if r.chance(85) {
            r.pick(&[1, 1, 2, 4, 8])
        } else {
            r.u64_edge()
        },
        swa_full_tokens_ratio: if r.chance(70) {
            r.pick(&[0.8, 0.5, 0.1, 1.0, 0.25, 0.9, 0.333])
        } else {
            r.f64_edge()
        },
        max_running_requests: r.opt(35, |r| {
            if r.chance(85) {
                r.range(1, 1024)
            } else {
                r.u64_edge()
            }
        }),
        chunked_prefill_size: r.opt(35, |r| {
            if r.chance(85) {
                r.pick(&[1, 512, 2048, 4096, 8192, 16_384])
            } else {
                r.u64_edge()
            }
        }),
        disable_radix_cache: r.chance(60),
        disable_overlap_schedule: r.chance(50),
        disaggregation_mode: r.pick(&MODES),
        disaggregation_decode_extra_slots: match r.below(10) {
            0..=6 => 0,
            7..=8 => r.range(1, 16),
            _ => r.u64_edge(),
        },
        swa_eviction_interval: if r.chance(60) {
            r.pick(&[128, 0, 1, 4, -1])
        } else {
            r.i64_edge()
        },
        disable_hybrid_swa_memory: r.chance(15),
        is_draft_worker: r.chance(15),
    }
}

fn gen_budget(r: &mut Rng) -> i64 {
    match r.below(10) {
        0..=4 => r.range(1 << 20, 1 << 40) as i64,
        5..=6 => r.below(1 << 20) as i64,
        _ => r.i64_edge(),
    }
}

fn gen_config(r: &mut Rng, allow_unvalidated: bool) -> ConfigCase {
    let geom = gen_geom(r);
    let spec = gen_spec(r);
    let serving = gen_serving(r);
    let build = match r.below(10) {
        0..=3 => Build::Create,
        4..=7 => Build::New(r.pick(&KINDS)),
        _ => Build::FromShape(
            r.opt(50, |r| r.pick(&KINDS)),
            r.opt(70, |r| (r.u64_edge(), r.u64_edge())),
        ),
    };
    let many = r.opt(90, |r| {
        let n = r.below(5) as usize;
        let budgets = (0..n).map(|_| gen_budget(r)).collect();
        let mut out_lens = [n; 4];
        if r.chance(20) {
            let j = r.below(4) as usize;
            out_lens[j] = if n > 0 && r.chance(50) { n - 1 } else { n + 1 };
        }
        ManyCase { budgets, out_lens }
    });
    ConfigCase {
        geom,
        spec,
        serving,
        build,
        unvalidated: allow_unvalidated && r.chance(50),
        available: gen_budget(r),
        available_delta: if r.chance(70) {
            r.below(1 << 30) as i64
        } else {
            (r.i64_edge()).unsigned_abs().min(i64::MAX as u64) as i64
        },
        max_tokens: if r.chance(50) {
            r.below(1 << 22) as i64
        } else {
            r.i64_edge()
        },
        page: r.opt(75, |r| {
            if r.chance(50) {
                r.pick(&[1, 2, 16, 64])
            } else {
                r.u64_edge()
            }
        }),
        many,
    }
}

/// A batch value: realistic most of the time, an edge (negatives included) otherwise.
fn gen_batch_i64(r: &mut Rng, col: usize) -> i64 {
    if r.chance(12) {
        return r.i64_edge();
    }
    let realistic: &[i64] = match col {
        AVAIL => return gen_budget(r),
        NF => &[0, 1, 1, 2, 4, 12, 24, 36, 61],
        NS => &[0, 0, 1, 3, 12, 24, 36],
        HEADS | SHEADS => &[1, 2, 4, 8, 16, 64, -1],
        DK | DV | SDK | SDV => &[64, 128, 128, 256, -1, -1, 1],
        WINDOW => &[-1, 0, 127, 1023, 4095],
        LORA => &[-1, -1, -1, -1, 512, 1],
        ROPE => &[-1, 0, 64],
        PAGE => &[1, 1, 16, 64, 3],
        TP => &[1, 1, 2, 4, 8],
        DCP => &[1, 1, 1, 2],
        DP => &[1, 1, 2, 8],
        MRR => &[-1, 1, 64, 256],
        CHUNK => &[-1, 512, 8192],
        EXTRA => &[0, 0, 2, 8],
        EVICT => &[128, 0, -5, 4],
        D => &[0, 0, 1, 2, 3],
        STEPS | TOPK | K => &[-1, 0, 1, 3, 4],
        BANDED => &[0, 0, 0, 1],
        _ => &[-1, -1, 1, 4096],
    };
    r.pick(realistic)
}

fn gen_col<T: Copy>(r: &mut Rng, n: usize, mut f: impl FnMut(&mut Rng) -> T) -> Col<T> {
    if r.chance(60) {
        Col::S(f(r))
    } else {
        // Occasionally a column of the wrong length.
        let len = if r.chance(2) { n + 1 } else { n };
        Col::A((0..len).map(|_| f(r)).collect())
    }
}

fn gen_batch(r: &mut Rng) -> BatchCase {
    let n = if r.chance(5) {
        0
    } else {
        r.range(1, 6) as usize
    };
    let i = (0..N_I64)
        .map(|c| gen_col(r, n, |r| gen_batch_i64(r, c)))
        .collect();
    let u = [7u64, 3, 7]
        .iter()
        .map(|&m| {
            gen_col(r, n, |r| {
                if r.chance(95) {
                    r.below(m) as u8
                } else {
                    r.next_u64() as u8
                }
            })
        })
        .collect();
    let ratio = gen_col(r, n, |r| {
        if r.chance(80) {
            r.pick(&[0.8, 0.5, 0.1])
        } else {
            r.f64_edge()
        }
    });
    let b = (0..4).map(|_| gen_col(r, n, |r| r.chance(50))).collect();
    let mut out_lens = [n; 4];
    if r.chance(2) {
        out_lens[r.below(4) as usize] = n + 1;
    }
    BatchCase {
        i,
        u,
        ratio,
        b,
        out_lens,
    }
}

fn gen_string(r: &mut Rng) -> String {
    const WORDS: [&str; 30] = [
        "bf16",
        "bfloat16",
        "fp16",
        "half",
        "float",
        "fp32",
        "fp8",
        "fp8_e4m3",
        "float8_e4m3fn",
        "fp8_e5m2",
        "mxfp8",
        "fp4",
        "fp4_e2m1",
        "none",
        "",
        "eagle",
        "EAGLE3",
        "nextn",
        "mtp",
        "standalone",
        "ngram",
        "dflash",
        "null",
        "prefill",
        "Decode",
        "exact",
        "sglang",
        "default",
        "hybrid_swa",
        "chunk_cap",
    ];
    let mut s = r.pick(&WORDS).to_string();
    match r.below(6) {
        0 => s = s.to_ascii_uppercase(),
        1 => s.push(char::from_u32(r.below(0x11_0000) as u32).unwrap_or('\u{fffd}')),
        2 => s.insert(0, ' '),
        3 => s = "\u{130}".repeat(r.below(4) as usize) + &s, // 'İ' lowercases to two chars
        _ => {}
    }
    s
}

fn gen_input(r: &mut Rng, unvalidated: bool) -> Input {
    match r.below(100) {
        0..=69 => Input::Config(Box::new(gen_config(r, unvalidated))),
        70..=96 => Input::Batch(Box::new(gen_batch(r))),
        _ => Input::Parse(gen_string(r)),
    }
}

// ---------------------------------------------------------------------------
// Oracles

#[derive(Debug, Default)]
struct Stats {
    configs_built: u64,
    build_errors: u64,
    exact_plans: u64,
    sglang_plans: u64,
    plans_skipped: u64,
    sizes_ok: u64,
    batch_rows: u64,
    errors_by_code: [u64; 5],
}

type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

fn check_err(e: &PlanError, st: &mut Stats, what: &str) -> Check {
    ensure!(
        !e.message.is_empty(),
        "{what}: error with code {:?} has an empty message",
        e.code
    );
    ensure!(
        e.code.status() != 0 && !e.code.as_str().is_empty(),
        "{what}: error code {:?} has status 0",
        e.code
    );
    st.errors_by_code[usize::from(e.code.status())] += 1;
    Ok(())
}

fn build_configurator(c: &ConfigCase) -> Result<PoolConfigurator, PlanError> {
    let g = &c.geom;
    let s = &c.spec;
    let (model, draft, spec) = if c.unvalidated {
        let v_head_dim = g.v_head_dim.unwrap_or(g.head_dim);
        let swa_head_dim = g.swa_head_dim.unwrap_or(g.head_dim);
        let model = ModelGeometry {
            full_attention_layer_ids: g.full.clone(),
            swa_attention_layer_ids: g.swa.clone(),
            num_kv_heads: g.num_kv_heads,
            head_dim: g.head_dim,
            v_head_dim,
            swa_num_kv_heads: g.swa_num_kv_heads.unwrap_or(g.num_kv_heads),
            swa_head_dim,
            swa_v_head_dim: g.swa_v_head_dim.unwrap_or(swa_head_dim),
            sliding_window_size: g.sliding_window_size,
            mla: g.kv_lora_rank.map(|kv_lora_rank| MlaDims {
                kv_lora_rank,
                qk_rope_head_dim: g.qk_rope_head_dim.unwrap_or(0),
            }),
        };
        let draft = s.draft.as_ref().map(|d| DraftGeometry {
            num_layers: d.num_layers,
            num_kv_heads: d.num_kv_heads,
            head_dim: d.head_dim,
            v_head_dim: d.v_head_dim.unwrap_or(d.head_dim),
            kv_cache_dtype: d.kv_cache_dtype,
            capacity: d.capacity,
        });
        let spec = SpeculativeConfig {
            algorithm: s.algorithm,
            draft_num_layers: s.draft_num_layers,
            num_steps: s.num_steps,
            eagle_topk: s.eagle_topk,
            num_draft_tokens: s.num_draft_tokens,
            banded_draft_layers: s.banded_draft_layers,
            dflash_draft_cell_size_per_token: s.dflash,
            draft,
        };
        (model, draft, spec)
    } else {
        let model = ModelGeometry::new(
            g.full.clone(),
            g.swa.clone(),
            g.num_kv_heads,
            g.head_dim,
            g.v_head_dim,
            g.swa_num_kv_heads,
            g.swa_head_dim,
            g.swa_v_head_dim,
            g.sliding_window_size,
            g.kv_lora_rank,
            g.qk_rope_head_dim,
        )?;
        let draft = s
            .draft
            .as_ref()
            .map(|d| {
                DraftGeometry::new(
                    d.num_layers,
                    d.num_kv_heads,
                    d.head_dim,
                    d.v_head_dim,
                    d.kv_cache_dtype,
                    d.capacity,
                )
            })
            .transpose()?;
        let spec = SpeculativeConfig::new(
            s.algorithm,
            s.draft_num_layers,
            s.num_steps,
            s.eagle_topk,
            s.num_draft_tokens,
            s.banded_draft_layers,
            s.dflash,
            draft,
        )?;
        (model, draft, spec)
    };
    let _ = draft;
    match c.build {
        Build::Create => PoolConfigurator::create(model, c.serving, spec),
        Build::New(kind) => PoolConfigurator::new(kind, model, c.serving, spec),
        Build::FromShape(kind, counts) => {
            let shape = if c.unvalidated {
                let mut shape = model.shape();
                if let Some((nf, ns)) = counts {
                    shape.n_full = nf;
                    shape.n_swa = ns;
                }
                shape
            } else {
                let (nf, ns) = counts.unwrap_or((model.num_full_layers(), model.num_swa_layers()));
                AttentionShape::new(
                    nf,
                    ns,
                    g.num_kv_heads,
                    g.head_dim,
                    g.v_head_dim,
                    g.swa_num_kv_heads,
                    g.swa_head_dim,
                    g.swa_v_head_dim,
                    g.sliding_window_size,
                    g.kv_lora_rank,
                    g.qk_rope_head_dim,
                )?
            };
            PoolConfigurator::from_shape(kind, shape, c.serving, spec)
        }
    }
}

/// `x // p * p` (Python floor), in i128 so it cannot overflow here.
fn align_down(x: i128, p: i128) -> i128 {
    x.div_euclid(p) * p
}

fn ceil_p(x: u64, p: u64) -> u128 {
    u128::from(x).div_ceil(u128::from(p)) * u128::from(p)
}

#[derive(Debug, Clone, Copy)]
enum SizesPath {
    Bytes(i64),
    Tokens(i64),
}

/// REFERENCE 2.2-2.5 on a successful `calculate_pool_sizes*`.
fn check_sizes(cfg: &PoolConfigurator, m: &MemoryPoolConfig, p: u64, path: SizesPath) -> Check {
    let pi = i128::from(p);
    let total = m.max_total_num_tokens;
    ensure!(
        total > 0,
        "success with max_total_num_tokens = {total} <= 0"
    );
    ensure!(
        i128::from(total) % pi == 0,
        "max_total_num_tokens {total} is not a multiple of page size {p}"
    );
    let s = cfg.serving();
    match cfg.kind() {
        ConfiguratorKind::Default => {
            ensure!(
                m.full_max_total_num_tokens.is_none() && m.swa_max_total_num_tokens.is_none(),
                "Default returned full/swa counts {m:?}"
            );
            if let (SizesPath::Bytes(a), CellSize::Int(c)) = (path, cfg.cell_size()) {
                let want = align_down(i128::from(a).div_euclid(i128::from(c)), pi);
                ensure!(
                    i128::from(total) == want,
                    "Default: max_total {total} != (A // C) // p * p = {want} (A={a}, C={c}, p={p})"
                );
            }
        }
        ConfiguratorKind::HybridSwa => {
            let (Some(full), Some(swa)) = (m.full_max_total_num_tokens, m.swa_max_total_num_tokens)
            else {
                return Err(format!("HybridSWA without full/swa counts: {m:?}"));
            };
            if cfg.is_all_swa() {
                ensure!(
                    full == 0 && swa == total,
                    "all-SWA: expected full 0, swa == max_total, got {m:?}"
                );
                if let (SizesPath::Bytes(a), CellSize::Int(c)) = (path, cfg.cell_size()) {
                    let want = align_down(i128::from(a).div_euclid(i128::from(c)), pi);
                    ensure!(
                        i128::from(total) == want,
                        "all-SWA: swa {total} != (A // C) // p * p = {want}"
                    );
                }
            } else {
                ensure!(full == total, "HybridSWA: full {full} != max_total {total}");
                let prod = full as f64 * s.swa_full_tokens_ratio;
                ensure!(
                    prod.is_finite() && prod.abs() < 9.3e18,
                    "HybridSWA: full * r = {prod} is out of range but the call succeeded"
                );
                let want = align_down(i128::from(prod.trunc() as i64), pi);
                ensure!(
                    i128::from(swa) == want,
                    "INV-5: swa {swa} != int(full * r) // p * p = {want} (full={full}, r={}, p={p})",
                    s.swa_full_tokens_ratio
                );
                ensure!(
                    swa >= 0 && i128::from(swa) % pi == 0,
                    "swa {swa} not aligned to {p}"
                );
                if let Some(w) = cfg.shape().sliding_window_size {
                    ensure!(
                        i128::from(swa) > i128::from(w) + i128::from(s.page_size),
                        "admission floor: swa {swa} <= W {w} + page {} yet no error",
                        s.page_size
                    );
                }
            }
        }
        ConfiguratorKind::ChunkCap => {
            let (Some(full), Some(swa)) = (m.full_max_total_num_tokens, m.swa_max_total_num_tokens)
            else {
                return Err(format!("ChunkCap without full/swa counts: {m:?}"));
            };
            ensure!(full == total, "ChunkCap: full {full} != max_total {total}");
            let Some(cap) = cfg.swa_cap() else {
                return Err("ChunkCap without a cap".into());
            };
            let cap_p = ceil_p(cap, p);
            match path {
                SizesPath::Bytes(_) => ensure!(
                    u128::try_from(swa).ok() == Some(cap_p),
                    "ChunkCap from bytes: swa {swa} != ceil_p(cap {cap}) = {cap_p}"
                ),
                SizesPath::Tokens(t) => {
                    let want = cap_p.min(u128::try_from(t).unwrap_or(0));
                    ensure!(
                        u128::try_from(swa).ok() == Some(want),
                        "ChunkCap from tokens: swa {swa} != min(ceil_p(cap {cap}), T {t}) = {want}"
                    );
                }
            }
        }
    }
    if let SizesPath::Tokens(t) = path {
        ensure!(total <= t, "from max tokens: max_total {total} > T {t}");
    }
    Ok(())
}

/// INV-3: more budget never gives fewer tokens in any pool.
fn check_monotone(a: &MemoryPoolConfig, b: &MemoryPoolConfig) -> Check {
    let t = |c: &MemoryPoolConfig| {
        [
            c.max_total_num_tokens,
            c.full_max_total_num_tokens.unwrap_or(0),
            c.swa_max_total_num_tokens.unwrap_or(0),
        ]
    };
    ensure!(
        t(a).iter().zip(t(b)).all(|(x, y)| *x <= y),
        "INV-3: more budget gave fewer tokens: {a:?} then {b:?}"
    );
    Ok(())
}

/// Structural checks common to both fits: bytes, offsets, shapes, alignment.
fn check_plan(cfg: &PoolConfigurator, plan: &PoolPlan, c: &ConfigCase) -> Check {
    let p = cfg.serving().page_size;
    ensure!(
        plan.page_size == p,
        "plan page size {} != {p}",
        plan.page_size
    );
    let mut total: u128 = 0;
    let mut names = Vec::new();
    for pool in &plan.pools {
        ensure!(
            !names.contains(&pool.name),
            "pool {:?} appears twice",
            pool.name
        );
        names.push(pool.name);
        ensure!(
            pool.tokens % p == 0,
            "INV-4: pool {:?} tokens {} not a multiple of {p}",
            pool.name,
            pool.tokens
        );
        ensure!(
            u128::from(pool.rows) == u128::from(pool.tokens) + u128::from(p),
            "pool {:?} rows {} != tokens {} + p {p}",
            pool.name,
            pool.rows,
            pool.tokens
        );
        // Tensors come layer by layer, in the pool's layer order.
        let mut layers = pool.tensors.iter().map(|t| t.layer_id).collect::<Vec<_>>();
        layers.dedup();
        ensure!(
            c.unvalidated || layers == pool.layer_ids,
            "pool {:?}: tensors' layers are not the pool's layer_ids",
            pool.name
        );
        let mut end: u128 = 0;
        let mut row_bytes: u128 = 0;
        for t in &pool.tensors {
            ensure!(
                t.pool == pool.name,
                "tensor in pool {:?} says {:?}",
                pool.name,
                t.pool
            );
            ensure!(
                t.shape.first() == Some(&pool.rows),
                "tensor shape {:?} does not start with rows {}",
                t.shape,
                pool.rows
            );
            let elems = t
                .shape
                .iter()
                .try_fold(1u128, |acc, &d| acc.checked_mul(u128::from(d)));
            let want = elems.and_then(|e| e.checked_mul(u128::from(t.dtype.bytes())));
            ensure!(
                want == Some(u128::from(t.nbytes)),
                "tensor {:?} layer {} shape {:?} x {} bytes != nbytes {}",
                t.kind,
                t.layer_id,
                t.shape,
                t.dtype.bytes(),
                t.nbytes
            );
            ensure!(
                t.offset % TENSOR_ALIGNMENT == 0 && u128::from(t.offset) >= end,
                "tensor offset {} misaligned or overlapping (previous end {end})",
                t.offset
            );
            ensure!(
                u128::from(t.offset) < end + u128::from(TENSOR_ALIGNMENT),
                "tensor offset {} leaves a gap of a whole alignment block after {end}",
                t.offset
            );
            end = u128::from(t.offset) + u128::from(t.nbytes);
            row_bytes += u128::from(t.nbytes) / u128::from(pool.rows);
        }
        ensure!(
            end == u128::from(pool.nbytes),
            "pool {:?} nbytes {} != end of its last tensor {end}",
            pool.name,
            pool.nbytes
        );
        ensure!(
            u128::from(pool.padding_bytes) == row_bytes * u128::from(p),
            "pool {:?} padding {} != p * row bytes {}",
            pool.name,
            pool.padding_bytes,
            row_bytes * u128::from(p)
        );
        total += end;
    }
    ensure!(
        total == u128::from(plan.total_bytes),
        "total_bytes {} != sum of pools {total}",
        plan.total_bytes
    );
    ensure!(
        plan.tensor_bytes() + plan.alignment_bytes() == plan.total_bytes,
        "tensor_bytes + alignment_bytes != total_bytes"
    );
    // Pool token counts follow the config.
    let cfgm = &plan.config;
    let full_tokens = cfgm
        .full_max_total_num_tokens
        .unwrap_or(cfgm.max_total_num_tokens);
    if let Some(full) = plan.pool(PoolName::Full) {
        ensure!(
            i128::from(full.tokens) == i128::from(full_tokens),
            "full pool tokens {} != config {full_tokens}",
            full.tokens
        );
    }
    if let Some(swa) = plan.pool(PoolName::Swa) {
        ensure!(
            Some(i128::from(swa.tokens)) == cfgm.swa_max_total_num_tokens.map(i128::from),
            "swa pool tokens {} != config {:?}",
            swa.tokens,
            cfgm.swa_max_total_num_tokens
        );
    }
    // Layer ids: every target layer exactly once, sorted, in the right pool.
    if !c.unvalidated && !matches!(c.build, Build::FromShape(..)) {
        let mut full = c.geom.full.clone();
        let mut swa = c.geom.swa.clone();
        let ids = |n: PoolName| {
            plan.pool(n)
                .map(|p| p.layer_ids.clone())
                .unwrap_or_default()
        };
        if cfg.kind() == ConfiguratorKind::Default {
            full.extend_from_slice(&swa);
            swa.clear();
        }
        full.sort_unstable();
        swa.sort_unstable();
        ensure!(
            ids(PoolName::Full) == full,
            "full pool layer ids differ from the model's"
        );
        ensure!(
            ids(PoolName::Swa) == swa,
            "swa pool layer ids differ from the model's"
        );
    }
    Ok(())
}

fn tractable(cfg: &PoolConfigurator) -> bool {
    let s = cfg.shape();
    let spec = cfg.spec();
    let draft = spec
        .draft
        .map_or(spec.draft_num_layers, |g| g.num_layers)
        .max(spec.draft_num_layers);
    s.n_full
        .saturating_add(s.n_swa)
        .saturating_add(draft)
        .saturating_add(spec.banded_draft_layers)
        <= PLAN_LAYER_LIMIT
}

fn run_config(c: &ConfigCase, st: &mut Stats) -> Check {
    let cfg = match build_configurator(c) {
        Ok(cfg) => cfg,
        Err(e) => {
            st.build_errors += 1;
            return check_err(&e, st, "build");
        }
    };
    st.configs_built += 1;
    if let Err(e) = cfg.serving().validate() {
        return Err(format!(
            "a configurator was built with an invalid serving config ({e})"
        ));
    }
    // Both factories agree on the kind.
    let p = c.page.unwrap_or(cfg.serving().page_size);

    // The profiling path, and INV-3.
    let sizes = cfg.calculate_pool_sizes(c.available, c.page);
    match &sizes {
        Ok(m) => {
            ensure!(
                i64::try_from(p).is_ok(),
                "page size {p} > i64::MAX accepted"
            );
            st.sizes_ok += 1;
            check_sizes(&cfg, m, p, SizesPath::Bytes(c.available))
                .map_err(|e| format!("calculate_pool_sizes({}): {e}", c.available))?;
        }
        Err(e) => check_err(e, st, "calculate_pool_sizes")?,
    }
    if let Some(a2) = c.available.checked_add(c.available_delta) {
        let more = cfg.calculate_pool_sizes(a2, c.page);
        if let Ok(m1) = &sizes {
            match &more {
                Ok(m2) => check_monotone(m1, m2)?,
                Err(e) if e.code == ErrorCode::Overflow => {}
                Err(e) => {
                    return Err(format!(
                        "INV-3: budget {} succeeded but the larger {a2} failed: {e}",
                        c.available
                    ))
                }
            }
        }
    }

    // The constraint path.
    match cfg.calculate_pool_sizes_from_max_tokens(c.max_tokens, c.page) {
        Ok(m) => check_sizes(&cfg, &m, p, SizesPath::Tokens(c.max_tokens)).map_err(|e| {
            format!(
                "calculate_pool_sizes_from_max_tokens({}): {e}",
                c.max_tokens
            )
        })?,
        Err(e) => check_err(&e, st, "calculate_pool_sizes_from_max_tokens")?,
    }

    // Many budgets at once.
    if let Some(many) = &c.many {
        let [a, b, s, z] = many.out_lens;
        let (mut o1, mut o2, mut o3, mut o4) = (vec![7; a], vec![7; b], vec![7; s], vec![9u8; z]);
        let mut out = BatchOutputs {
            max_total_num_tokens: &mut o1,
            full_max_total_num_tokens: &mut o2,
            swa_max_total_num_tokens: &mut o3,
            status: &mut o4,
        };
        let n = many.budgets.len();
        let r = cfg.calculate_pool_sizes_many(&many.budgets, &mut out);
        let lens_ok = many.out_lens.iter().all(|l| *l == n);
        match r {
            Ok(()) => {
                ensure!(
                    lens_ok,
                    "calculate_pool_sizes_many accepted output lengths {:?} for {n} rows",
                    many.out_lens
                );
                for (i, &a) in many.budgets.iter().enumerate() {
                    let want = cfg.calculate_pool_sizes(a, None);
                    compare_row(&want, o1[i], o2[i], o3[i], o4[i])
                        .map_err(|e| format!("calculate_pool_sizes_many row {i}: {e}"))?;
                }
            }
            Err(e) => {
                ensure!(
                    !lens_ok,
                    "calculate_pool_sizes_many failed with matching lengths: {e}"
                );
                check_err(&e, st, "calculate_pool_sizes_many")?;
            }
        }
    }

    if !tractable(&cfg) {
        st.plans_skipped += 1;
        return Ok(());
    }

    // The exact plan: fits, is maximal, adds up.
    match cfg.plan(c.available, Fit::Exact) {
        Ok(plan) => {
            st.exact_plans += 1;
            ensure!(
                i128::from(plan.total_bytes) <= i128::from(c.available),
                "INV-2: exact plan total {} > available {}",
                plan.total_bytes,
                c.available
            );
            ensure!(
                plan.config.max_total_num_tokens > 0,
                "exact plan with max_total {}",
                plan.config.max_total_num_tokens
            );
            check_plan(&cfg, &plan, c).map_err(|e| format!("exact plan: {e}"))?;
            let x = plan.config.max_total_num_tokens;
            match cfg.bytes_for_tokens(x) {
                Ok(b) => ensure!(
                    b == plan.total_bytes,
                    "bytes_for_tokens({x}) = {b} != exact plan total {}",
                    plan.total_bytes
                ),
                Err(e) => {
                    return Err(format!(
                        "bytes_for_tokens({x}) of a planned count failed: {e}"
                    ))
                }
            }
            let ps = i64::try_from(cfg.serving().page_size).unwrap_or(i64::MAX);
            if let Some(next) = x.checked_add(ps) {
                if let Ok(b) = cfg.bytes_for_tokens(next) {
                    ensure!(
                        i128::from(b) > i128::from(c.available),
                        "INV-2: one more page ({next} tokens, {b} bytes) fits {} too",
                        c.available
                    );
                }
            }
        }
        Err(e) => check_err(&e, st, "plan(exact)")?,
    }

    // SGLang's fit carries calculate_pool_sizes' numbers (serving page size).
    let sg_sizes = cfg.calculate_pool_sizes(c.available, None);
    match cfg.plan(c.available, Fit::Sglang) {
        Ok(plan) => {
            st.sglang_plans += 1;
            match &sg_sizes {
                Ok(m) => ensure!(
                    plan.config == *m,
                    "sglang plan config {:?} != calculate_pool_sizes {m:?}",
                    plan.config
                ),
                Err(e) => {
                    return Err(format!(
                        "sglang plan succeeded but calculate_pool_sizes failed: {e}"
                    ))
                }
            }
            check_plan(&cfg, &plan, c).map_err(|e| format!("sglang plan: {e}"))?;
        }
        Err(e) => check_err(&e, st, "plan(sglang)")?,
    }

    match cfg.bytes_for_tokens(c.max_tokens) {
        Ok(_) => {}
        Err(e) => check_err(&e, st, "bytes_for_tokens")?,
    }
    Ok(())
}

fn compare_row(
    want: &Result<MemoryPoolConfig, PlanError>,
    t: i64,
    f: i64,
    s: i64,
    status: u8,
) -> Check {
    match want {
        Ok(m) => ensure!(
            status == 0
                && t == m.max_total_num_tokens
                && f == m.full_max_total_num_tokens.unwrap_or(-1)
                && s == m.swa_max_total_num_tokens.unwrap_or(-1),
            "batch ({t}, {f}, {s}, status {status}) != scalar {m:?}"
        ),
        Err(e) => ensure!(
            status == e.code.status() && t == 0 && f == 0 && s == 0,
            "batch ({t}, {f}, {s}, status {status}) != scalar error {:?}: {}",
            e.code,
            e.message
        ),
    }
    Ok(())
}

fn cnt(name: &str, v: i64) -> Result<u64, PlanError> {
    u64::try_from(v).map_err(|_| PlanError::invalid(format!("{name} < 0")))
}

fn opt_none_if_negative(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

/// The scalar API on row `r`, written independently of `batch.rs`. With
/// `geometry`, through a real `ModelGeometry` (ids `0..n_f`, `n_f..n_f+n_s`)
/// and `PoolConfigurator::create`; else through `AttentionShape`.
fn row_reference(c: &BatchCase, r: usize, geometry: bool) -> Result<MemoryPoolConfig, PlanError> {
    let g = |k: usize| c.i[k].get(r);
    let o = |k: usize| opt_none_if_negative(g(k));
    let (nf, ns) = (cnt("n_f", g(NF))?, cnt("n_s", g(NS))?);
    let (heads, dk) = (cnt("heads", g(HEADS))?, cnt("head_dim", g(DK))?);
    let model = if geometry {
        Some(ModelGeometry::new(
            (0..nf).collect(),
            (nf..nf + ns).collect(),
            heads,
            dk,
            o(DV),
            o(SHEADS),
            o(SDK),
            o(SDV),
            o(WINDOW),
            o(LORA),
            o(ROPE),
        )?)
    } else {
        None
    };
    let shape = if model.is_none() {
        Some(AttentionShape::new(
            nf,
            ns,
            heads,
            dk,
            o(DV),
            o(SHEADS),
            o(SDK),
            o(SDV),
            o(WINDOW),
            o(LORA),
            o(ROPE),
        )?)
    } else {
        None
    };
    let table = |k: usize, n: usize| -> Result<usize, PlanError> {
        let v = usize::from(c.u[k].get(r));
        if v < n {
            Ok(v)
        } else {
            Err(PlanError::invalid("code out of range"))
        }
    };
    let serving = ServingConfig {
        kv_cache_dtype: KvDtype::ALL[table(DTYPE, 7)?],
        page_size: cnt("page_size", g(PAGE))?,
        tp_size: cnt("tp", g(TP))?,
        dcp_size: cnt("dcp", g(DCP))?,
        attn_dp_size: cnt("dp", g(DP))?,
        swa_full_tokens_ratio: c.ratio.get(r),
        max_running_requests: o(MRR),
        chunked_prefill_size: o(CHUNK),
        disable_radix_cache: c.b[RADIX].get(r),
        disable_overlap_schedule: c.b[OVERLAP].get(r),
        disaggregation_mode: MODES[table(MODE, 3)?],
        disaggregation_decode_extra_slots: cnt("extra", g(EXTRA))?,
        swa_eviction_interval: g(EVICT),
        disable_hybrid_swa_memory: c.b[HYBRID_OFF].get(r),
        is_draft_worker: c.b[DRAFT_WORKER].get(r),
    };
    let spec = SpeculativeConfig::new(
        ALGORITHMS[table(ALG, 7)?],
        cnt("d", g(D))?,
        o(STEPS),
        o(TOPK),
        o(K),
        cnt("banded", g(BANDED))?,
        o(DFLASH),
        None,
    )?;
    let cfg = match (model, shape) {
        (Some(m), _) => PoolConfigurator::create(m, serving, spec)?,
        (None, Some(s)) => PoolConfigurator::from_shape(None, s, serving, spec)?,
        (None, None) => unreachable!(),
    };
    cfg.calculate_pool_sizes(g(AVAIL), None)
}

fn run_batch(c: &BatchCase, st: &mut Stats) -> Check {
    // The expected row count, from the column lengths.
    let mut lens: Vec<usize> = c.i.iter().filter_map(Col::len).collect();
    lens.extend(c.u.iter().filter_map(Col::len));
    lens.extend(c.ratio.len());
    lens.extend(c.b.iter().filter_map(Col::len));
    let rows = lens.first().copied().unwrap_or(1);
    let consistent = lens.iter().all(|l| *l == rows) && c.out_lens.iter().all(|l| *l == rows);

    let inputs = BatchInputs {
        available_bytes: c.i[AVAIL].column(),
        num_full_layers: c.i[NF].column(),
        num_swa_layers: c.i[NS].column(),
        num_kv_heads: c.i[HEADS].column(),
        head_dim: c.i[DK].column(),
        v_head_dim: c.i[DV].column(),
        swa_num_kv_heads: c.i[SHEADS].column(),
        swa_head_dim: c.i[SDK].column(),
        swa_v_head_dim: c.i[SDV].column(),
        sliding_window_size: c.i[WINDOW].column(),
        kv_lora_rank: c.i[LORA].column(),
        qk_rope_head_dim: c.i[ROPE].column(),
        kv_cache_dtype: c.u[DTYPE].column(),
        page_size: c.i[PAGE].column(),
        tp_size: c.i[TP].column(),
        dcp_size: c.i[DCP].column(),
        attn_dp_size: c.i[DP].column(),
        swa_full_tokens_ratio: c.ratio.column(),
        max_running_requests: c.i[MRR].column(),
        chunked_prefill_size: c.i[CHUNK].column(),
        disable_radix_cache: c.b[RADIX].column(),
        disable_overlap_schedule: c.b[OVERLAP].column(),
        disaggregation_mode: c.u[MODE].column(),
        disaggregation_decode_extra_slots: c.i[EXTRA].column(),
        swa_eviction_interval: c.i[EVICT].column(),
        disable_hybrid_swa_memory: c.b[HYBRID_OFF].column(),
        is_draft_worker: c.b[DRAFT_WORKER].column(),
        algorithm: c.u[ALG].column(),
        draft_num_layers: c.i[D].column(),
        num_steps: c.i[STEPS].column(),
        eagle_topk: c.i[TOPK].column(),
        num_draft_tokens: c.i[K].column(),
        banded_draft_layers: c.i[BANDED].column(),
        dflash_draft_cell_size_per_token: c.i[DFLASH].column(),
    };
    let [a, b, s, z] = c.out_lens;
    let (mut o1, mut o2, mut o3, mut o4) = (vec![7; a], vec![7; b], vec![7; s], vec![9u8; z]);
    let mut out = BatchOutputs {
        max_total_num_tokens: &mut o1,
        full_max_total_num_tokens: &mut o2,
        swa_max_total_num_tokens: &mut o3,
        status: &mut o4,
    };
    match plan_many(&inputs, &mut out) {
        Ok(()) => ensure!(
            consistent,
            "plan_many accepted inconsistent lengths (columns {lens:?}, outputs {:?})",
            c.out_lens
        ),
        Err(e) => {
            ensure!(!consistent, "plan_many failed on consistent lengths: {e}");
            return check_err(&e, st, "plan_many");
        }
    }
    for r in 0..rows {
        st.batch_rows += 1;
        let want = row_reference(c, r, false);
        compare_row(&want, o1[r], o2[r], o3[r], o4[r])
            .map_err(|e| format!("INV-7 row {r}: {e}"))?;
        // Through a real ModelGeometry when the id lists are small enough to build.
        let (nf, ns) = (c.i[NF].get(r), c.i[NS].get(r));
        if (0..=4096).contains(&nf) && (0..=4096).contains(&ns) {
            let via_geometry = row_reference(c, r, true);
            let same = match (&want, &via_geometry) {
                (Ok(x), Ok(y)) => x == y,
                (Err(x), Err(y)) => x.code == y.code,
                _ => false,
            };
            ensure!(
                same,
                "INV-7 row {r}: shape path {want:?} != ModelGeometry path {via_geometry:?}"
            );
        }
    }
    Ok(())
}

fn run_parse(s: &str) -> Check {
    if let Ok(d) = s.parse::<KvDtype>() {
        ensure!(
            d.as_str().parse::<KvDtype>().ok() == Some(d),
            "KvDtype {d:?} does not round-trip"
        );
    }
    if let Ok(a) = s.parse::<SpecAlgorithm>() {
        ensure!(
            a.as_str().parse::<SpecAlgorithm>().ok() == Some(a),
            "SpecAlgorithm {a:?} does not round-trip"
        );
    }
    if let Ok(m) = s.parse::<DisaggregationMode>() {
        ensure!(
            m.as_str().parse::<DisaggregationMode>().ok() == Some(m),
            "DisaggregationMode {m:?} does not round-trip"
        );
    }
    if let Ok(k) = s.parse::<ConfiguratorKind>() {
        ensure!(
            k.as_str().parse::<ConfiguratorKind>().ok() == Some(k),
            "ConfiguratorKind {k:?} does not round-trip"
        );
    }
    for r in [
        s.parse::<Fit>().err(),
        s.parse::<DraftCapacity>().err(),
        s.parse::<KvDtype>().err(),
        s.parse::<SpecAlgorithm>().err(),
        s.parse::<DisaggregationMode>().err(),
        s.parse::<ConfiguratorKind>().err(),
    ]
    .into_iter()
    .flatten()
    {
        ensure!(
            r.code == ErrorCode::InvalidConfig && !r.message.is_empty(),
            "parse error with code {:?}",
            r.code
        );
    }
    Ok(())
}

fn run(input: &Input, st: &mut Stats) -> Check {
    match input {
        Input::Config(c) => run_config(c, st),
        Input::Batch(b) => run_batch(b, st),
        Input::Parse(s) => run_parse(s),
    }
}

// ---------------------------------------------------------------------------
// Driver

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn exec_seed(seed: u64, iter: u64) -> u64 {
    let mut r = Rng(seed ^ iter.wrapping_mul(0xD134_2543_DE82_EF95));
    r.next_u64()
}

fn truncated(s: &str, max: usize) -> String {
    if s.len() <= max {
        s.to_string()
    } else {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} chars)", &s[..end], s.len())
    }
}

struct Args {
    iters: u64,
    seed: u64,
    replay: Option<u64>,
    unvalidated: bool,
    show: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        iters: 1_000_000,
        seed: 0x6B76_6275_6467_6574, // "kvbudget"
        replay: None,
        unvalidated: false,
        show: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            let v = v.replace('_', "");
            if let Some(hex) = v.strip_prefix("0x") {
                u64::from_str_radix(hex, 16).map_err(|e| format!("{name}: {e}"))
            } else {
                v.parse().map_err(|e| format!("{name}: {e}"))
            }
        };
        match flag.as_str() {
            "--iters" => a.iters = num("--iters")?,
            "--seed" => a.seed = num("--seed")?,
            "--replay" => a.replay = Some(num("--replay")?),
            "--show" => a.show = num("--show")? as usize,
            "--unvalidated" => a.unvalidated = true,
            "-h" | "--help" => {
                return Err(
                    "usage: fuzz [--iters N] [--seed S] [--replay I] [--unvalidated] [--show K]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let flags = if args.unvalidated {
        " --unvalidated"
    } else {
        ""
    };

    if let Some(i) = args.replay {
        let input = gen_input(&mut Rng(exec_seed(args.seed, i)), args.unvalidated);
        println!("input: {}", truncated(&format!("{input:#?}"), 20_000));
        let mut st = Stats::default();
        let r = run(&input, &mut st); // panics propagate with the default hook
        println!("result: {r:?}");
        return if r.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }

    std::panic::set_hook(Box::new(|info| {
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("panic at {loc}: {msg}")));
    }));

    let start = Instant::now();
    let mut st = Stats::default();
    let (mut crashes, mut violations) = (0u64, 0u64);
    // Failure signature -> (count, first iteration, full message).
    let mut kinds: HashMap<String, (u64, u64, String)> = HashMap::new();
    let mut shown = 0usize;
    for i in 0..args.iters {
        let input = gen_input(&mut Rng(exec_seed(args.seed, i)), args.unvalidated);
        let r = catch_unwind(AssertUnwindSafe(|| run(&input, &mut st)));
        let failure = match r {
            Ok(Ok(())) => None,
            Ok(Err(msg)) => {
                violations += 1;
                Some(format!("oracle violation: {msg}"))
            }
            Err(_) => {
                crashes += 1;
                Some(
                    LAST_PANIC
                        .with(|p| p.borrow_mut().take())
                        .unwrap_or_else(|| "panic".into()),
                )
            }
        };
        if let Some(msg) = failure {
            // One kind per panic location, or per violation text up to its first number.
            let sig: String = if msg.starts_with("panic") {
                msg.split(": ").next().unwrap_or_default().to_string()
            } else {
                msg.chars()
                    .take_while(|c| !c.is_ascii_digit())
                    .take(90)
                    .collect()
            };
            let e = kinds.entry(sig).or_insert((0, i, msg.clone()));
            e.0 += 1;
            if shown < args.show {
                shown += 1;
                println!(
                    "FAIL iter {i} (reproduce: --seed {:#x} --replay {i}{flags}): {}",
                    args.seed,
                    truncated(&msg, 600)
                );
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();

    let mut report = String::new();
    let _ = writeln!(report, "seed: {:#x}{flags}", args.seed);
    let _ = writeln!(report, "executions: {}", args.iters);
    let _ = writeln!(report, "crashes: {crashes}");
    let _ = writeln!(report, "oracle violations: {violations}");
    let _ = writeln!(report, "elapsed: {secs:.2} s");
    let _ = writeln!(
        report,
        "executions/second: {:.0}",
        args.iters as f64 / secs.max(1e-9)
    );
    let _ = writeln!(
        report,
        "coverage: {} configurators built, {} build errors, {} sizes ok, {} exact plans, {} sglang plans, \
         {} plans skipped (> {PLAN_LAYER_LIMIT} layers), {} batch rows; errors by code \
         [invalid_config {}, overflow {}, not_enough_memory {}, swa_pool_too_small {}]",
        st.configs_built,
        st.build_errors,
        st.sizes_ok,
        st.exact_plans,
        st.sglang_plans,
        st.plans_skipped,
        st.batch_rows,
        st.errors_by_code[1],
        st.errors_by_code[2],
        st.errors_by_code[3],
        st.errors_by_code[4],
    );
    let mut kinds: Vec<_> = kinds.into_iter().collect();
    kinds.sort_by_key(|(_, (n, first, _))| (std::cmp::Reverse(*n), *first));
    for (_, (n, first, msg)) in &kinds {
        let _ = writeln!(
            report,
            "  {n} x, first at iter {first} (--seed {:#x} --replay {first}{flags}): {}",
            args.seed,
            truncated(msg, 300)
        );
    }
    print!("{report}");
    if crashes + violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
