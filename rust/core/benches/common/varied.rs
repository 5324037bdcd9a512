//! The batch inputs the benchmarks and the instruction-count driver share:
//! `n` rows with every listed column varying (mostly valid rows of every
//! configurator kind, the distribution of `benches/bench_batch.py`), and the
//! one-setup scenario (REFERENCE example 1) for the budget-only path.
#![allow(dead_code)]

#[path = "../../examples/fuzz/rng.rs"]
mod rng;

pub use kvbudget_core::batch::Buffers as Outs;
use kvbudget_core::batch::{
    Batch, BatchOutputs, Budgets, Cells as Owned, Column, ColumnData, Threads,
};
use kvbudget_core::fields::{ScenarioField, Value};
use kvbudget_core::Scenario;
use rng::Rng;

pub const GIB: i64 = 1 << 30;

/// Uniform in `lo..hi`.
fn range(r: &mut Rng, lo: i64, hi: i64) -> i64 {
    lo + r.below((hi - lo) as u64) as i64
}

/// Owned batch data: budgets, varying columns, the base scenario.
pub struct Owner {
    pub base: Scenario,
    pub budgets: Vec<i64>,
    pub columns: Vec<(ScenarioField, Owned)>,
}

impl Owner {
    /// The batch view of the data.
    pub fn columns(&self) -> Vec<Column<'_>> {
        self.columns
            .iter()
            .map(|(field, o)| Column {
                field: *field,
                data: o.data(),
            })
            .collect()
    }

    /// `plan_many` over it, into `out`, on up to `threads` threads.
    ///
    /// # Panics
    /// On a malformed batch (it never is: the columns are built here).
    pub fn run(&self, columns: &[Column<'_>], out: &mut BatchOutputs<'_>, threads: Threads) {
        let batch = Batch {
            base: self.base,
            base_status: 0,
            available_bytes: Budgets::Array(&self.budgets),
            columns,
            threads,
        };
        kvbudget_core::batch::plan_many(&batch, out).expect("well-formed batch");
    }
}

impl Owner {
    /// `plan_many` once per row, each call a batch of that one row (the fixed cost of a
    /// call: what a caller planning one scenario at a time pays), into `out`.
    ///
    /// # Panics
    /// On a malformed batch (it never is: the columns are built here).
    pub fn run_each_row(&self, out: &mut Outs) {
        for i in 0..self.budgets.len() {
            let columns: Vec<Column<'_>> = self
                .columns
                .iter()
                .map(|(field, o)| Column {
                    field: *field,
                    data: match o {
                        Owned::I64(v) => ColumnData::I64(&v[i..=i]),
                        Owned::I32(v) => ColumnData::I32(&v[i..=i]),
                        Owned::F64(v) => ColumnData::F64(&v[i..=i]),
                        Owned::Bool(v) => ColumnData::Bool(&v[i..=i]),
                        Owned::U8(v) => ColumnData::U8(&v[i..=i]),
                    },
                })
                .collect();
            let batch = Batch {
                base: self.base,
                base_status: 0,
                available_bytes: Budgets::Array(&self.budgets[i..=i]),
                columns: &columns,
                threads: Threads::Fixed(1),
            };
            let mut one = Outs::new(1);
            kvbudget_core::batch::plan_many(&batch, &mut one.views()).expect("well-formed batch");
            out.max_total_num_tokens[i] = one.max_total_num_tokens[0];
            out.full_max_total_num_tokens[i] = one.full_max_total_num_tokens[0];
            out.swa_max_total_num_tokens[i] = one.swa_max_total_num_tokens[0];
            out.status[i] = one.status[0];
        }
    }

    /// The same rows with every int64 column given as int32 cells (the
    /// values all fit), as a caller that keeps small integers narrow would.
    ///
    /// # Panics
    /// If a value did not fit 32 bits (none of [`varied`]'s does).
    pub fn narrowed(mut self) -> Self {
        for (_, cells) in &mut self.columns {
            if let Owned::I64(v) = cells {
                let v = v.iter().map(|x| i32::try_from(*x).expect("fits i32"));
                *cells = Owned::I32(v.collect());
            }
        }
        self
    }
}

fn budgets(r: &mut Rng, n: usize) -> Vec<i64> {
    (0..n).map(|_| range(r, GIB, 80 * GIB)).collect()
}

fn field(name: &str) -> ScenarioField {
    ScenarioField::from_name(name).expect("a scenario field")
}

/// `n` rows with 18 varying columns besides the budget, mostly valid.
pub fn varied(n: usize, seed: u64) -> Owner {
    let mut r = Rng(seed);
    let i64s =
        |r: &mut Rng, f: &mut dyn FnMut(&mut Rng) -> i64| (0..n).map(|_| f(r)).collect::<Vec<_>>();
    let cols: Vec<(&str, Owned)> = vec![
        (
            "num_full_layers",
            Owned::I64(i64s(&mut r, &mut |r| range(r, 1, 64))),
        ),
        (
            "num_swa_layers",
            Owned::I64(i64s(&mut r, &mut |r| {
                if r.below(2) == 0 {
                    0
                } else {
                    range(r, 1, 48)
                }
            })),
        ),
        (
            "num_kv_heads",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[1, 2, 4, 8, 16, 32]))),
        ),
        (
            "head_dim",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[64, 128, 256]))),
        ),
        (
            "sliding_window_size",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 128, 1024, 4096]))),
        ),
        (
            "kv_cache_dtype",
            Owned::U8((0..n).map(|_| r.below(6) as u8).collect()),
        ), // no fp4 (Default-only)
        (
            "page_size",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[1, 16, 32, 64]))),
        ),
        (
            "tp_size",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[1, 2, 4, 8]))),
        ),
        (
            "swa_full_tokens_ratio",
            Owned::F64(
                (0..n)
                    .map(|_| 0.05 + 0.95 * (r.below(1 << 20) as f64 / f64::from(1 << 20)))
                    .collect(),
            ),
        ),
        (
            "max_running_requests",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 64, 256]))),
        ),
        (
            "chunked_prefill_size",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 8192]))),
        ),
        (
            "disable_radix_cache",
            Owned::Bool((0..n).map(|_| r.below(4) == 0).collect()),
        ),
        (
            "algorithm",
            Owned::U8((0..n).map(|_| r.pick(&[0, 1, 2, 3, 6])).collect()),
        ),
        (
            "draft_num_layers",
            Owned::I64(i64s(&mut r, &mut |r| range(r, 0, 3))),
        ),
        (
            "num_steps",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 3]))),
        ),
        (
            "eagle_topk",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 1, 4]))),
        ),
        (
            "num_draft_tokens",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 4, 8]))),
        ),
        (
            "dflash_draft_cell_size_per_token",
            Owned::I64(i64s(&mut r, &mut |r| r.pick(&[-1, 4096]))),
        ),
    ];
    Owner {
        base: Scenario::default(),
        budgets: budgets(&mut r, n),
        columns: cols.into_iter().map(|(name, o)| (field(name), o)).collect(),
    }
}

/// REFERENCE example 1 (Gemma-3-27B-like hybrid, EAGLE3 draft, page 64), only the budget varying.
///
/// # Panics
/// If the scenario's values were invalid (they are constants).
pub fn one_setup(n: usize, seed: u64) -> Owner {
    let mut base = Scenario::default();
    for (name, v) in [
        ("num_full_layers", Value::Int(10)),
        ("num_swa_layers", Value::Int(52)),
        ("num_kv_heads", Value::Int(16)),
        ("head_dim", Value::Int(128)),
        ("sliding_window_size", Value::Int(1024)),
        ("page_size", Value::Int(64)),
        ("algorithm", Value::Str("eagle3")),
        ("draft_num_layers", Value::Int(1)),
    ] {
        assert!(base.set(name, v).expect("valid"), "{name}");
    }
    Owner {
        base,
        budgets: budgets(&mut Rng(seed), n),
        columns: Vec::new(),
    }
}
