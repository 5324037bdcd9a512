//! The batch fast path: rows solved straight from the columns, many at once.
//!
//! The domain is the lean one of [`super::kernel`]: no
//! [`PINNED`](super::kernel::PINNED) field varies or leaves its default
//! (checked once per batch), so a row is fully given by its fast fields
//! ([`cells`]: each read from its column or from the base's value, decoded by
//! its kind's `from_cell` with the domain's bounds checked in the same pass).
//!
//! Per block of [`BLOCK`] rows, two straight-line loops ([`lanes`]) solve
//! every row: the first computes each row's configurator kind and the
//! budget's quotient by that kind's cell, the second the page-aligned pools.
//! No branch, table load or conversion instruction is left in them, so the
//! compiler turns each into vector code; [`simd`] compiles them once per
//! instruction set and picks the best the CPU has, at run time.
//!
//! A row the lanes do not finish (a bad cell, a cell outside the domain, a
//! rule across fields, an FP4 Default cell, any error of the solve, a float
//! quotient too close to an integer) goes to the exact path, `exact_row`: the
//! row's scenario (the base's pinned fields are the defaults, every other
//! field the row's cell decoded as the general loop decodes it) solved by the
//! scalar API's functions. So every error row takes the exact path, and the
//! fast rows are held to the scalar API by the tests (`tests.rs`: a proptest
//! with rows in and out of the domain, and the domain's edges).

mod cells;
mod lanes;
mod simd;

use super::kernel::solve_row;
use super::{Batch, BatchOutputs, Budgets, BLOCK, STATUS_OK};
use crate::error::ErrorCode;
use crate::fields::{Kind, Named, OptCount};
use crate::sizing::{kind_index, ConfiguratorKind};
use cells::{Cells, Source, Sources};
pub use simd::simd_level;

#[cfg(test)]
pub(crate) use cells::FAST;

/// Plans the `n` rows of a lean batch (one thread's part; the base checked,
/// some column given) into `out`. False, with nothing written, when a base
/// value does not round-trip through its cell (the caller then takes the
/// general loop).
pub(super) fn plan_rows(batch: &Batch<'_>, n: usize, out: &mut BatchOutputs<'_>) -> bool {
    let Some(sources) = Sources::new(batch) else {
        return false;
    };
    let budgets: Source<'_, i64> = match batch.available_bytes {
        Budgets::Scalar(v) => Source::repeat(v),
        Budgets::Array(a) => Source::cells(a, 0),
    };
    // By reference: the sources hold a block buffer per field (tens of KB,
    // not to be copied through the dispatch).
    simd::run(&mut Blocks {
        sources,
        budgets,
        n,
        out,
    });
    true
}

/// One thread's rows, block by block: what [`simd::run`] compiles per
/// instruction set.
struct Blocks<'a, 'o, 'b> {
    sources: Sources<'a>,
    budgets: Source<'a, i64>,
    n: usize,
    out: &'o mut BatchOutputs<'b>,
}

impl Blocks<'_, '_, '_> {
    /// Every block: the lanes, then their results and the slow rows' into `out`.
    #[inline(always)]
    fn run(&mut self) {
        let mut lanes = Lanes::new();
        let mut start = 0;
        while start < self.n {
            let end = (start + BLOCK).min(self.n);
            let cells = self.sources.block(start);
            let budget = self.budgets.block(start);
            lanes.solve(&cells, budget, end - start);
            lanes.write(&cells, budget, &mut self.out.rows(start, end));
            start = end;
        }
    }
}

/// Rows in a whole number of vectors at every level (8 doubles for AVX-512,
/// unrolled twice).
const VECTOR: usize = 16;

/// One block's lane results (struct of arrays: the loops store and load
/// whole vectors): the first stage's quotients, then `(max_total, full,
/// swa)` per row and whether the row is slow.
struct Lanes {
    quotient: [f64; BLOCK],
    cap_swa: [f64; BLOCK],
    pools: [lanes::Pools; BLOCK],
    ok: [bool; BLOCK],
    max_total: [i64; BLOCK],
    full: [i64; BLOCK],
    swa: [i64; BLOCK],
    /// 1 where the row is slow (bytes, read eight at a time).
    slow: [u8; BLOCK],
}

impl Lanes {
    fn new() -> Box<Self> {
        Box::new(Self {
            quotient: [0.0; BLOCK],
            cap_swa: [0.0; BLOCK],
            pools: [lanes::Pools::Default; BLOCK],
            ok: [false; BLOCK],
            max_total: [0; BLOCK],
            full: [0; BLOCK],
            swa: [0; BLOCK],
            slow: [0; BLOCK],
        })
    }

    /// The block's first `m` rows, rounded up to a whole number of vectors
    /// (past the batch's last row: the padding's cells, whose results are not
    /// written out), in two loops: each keeps its chain of divisions short,
    /// so that many rows are in flight.
    // Indexed loops over many arrays of one length: the shape the compiler vectorizes.
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    fn solve(&mut self, cells: &Cells<'_>, budget: &[i64; BLOCK], m: usize) {
        let rows = m.next_multiple_of(VECTOR).min(BLOCK);
        for i in 0..rows {
            let q = first_stage(cells, i, budget[i]);
            self.quotient[i] = q.quotient;
            self.cap_swa[i] = q.cap_swa;
            self.pools[i] = q.pools;
            self.ok[i] = q.ok;
        }
        for i in 0..rows {
            let q = lanes::FirstStage {
                quotient: self.quotient[i],
                cap_swa: self.cap_swa[i],
                pools: self.pools[i],
                ok: self.ok[i],
            };
            let ([t, f, s], slow) = second_stage(cells, i, &q);
            self.max_total[i] = t;
            self.full[i] = f;
            self.swa[i] = s;
            self.slow[i] = u8::from(slow);
        }
    }

    /// The block's rows into `out` (its length): the lanes' results, then
    /// the exact path's for the slow rows.
    #[inline(always)]
    fn write(&self, cells: &Cells<'_>, budget: &[i64; BLOCK], out: &mut BatchOutputs<'_>) {
        let m = out.status.len();
        out.max_total_num_tokens
            .copy_from_slice(&self.max_total[..m]);
        out.full_max_total_num_tokens
            .copy_from_slice(&self.full[..m]);
        out.swa_max_total_num_tokens.copy_from_slice(&self.swa[..m]);
        out.status.fill(STATUS_OK);
        // Slow rows are rare: skip eight flags (one word) at a time.
        for (k, eight) in self.slow.chunks_exact(8).enumerate().take(m.div_ceil(8)) {
            let mut word = u64::from_le_bytes(eight.try_into().expect("eight flags"));
            while word != 0 {
                let i = 8 * k + word.trailing_zeros() as usize / 8;
                word &= word - 1;
                if i < m {
                    exact_row(cells, i, budget[i], out);
                }
            }
        }
    }
}

/// The first stage of row `i` of a block at budget `a` bytes: its cells
/// decoded and checked, its codes.
#[inline(always)]
fn first_stage(cells: &Cells<'_>, i: usize, a: i64) -> lanes::FirstStage {
    let (row, _, inside) = cells.row(i);
    let codes = (cells.kv_cache_dtype[i], cells.algorithm[i]);
    lanes::quotient(&row, codes, inside, a)
}

/// The second stage of row `i`: the cells it reads again (valid where the
/// first stage is `ok`).
#[inline(always)]
fn second_stage(cells: &Cells<'_>, i: usize, q: &lanes::FirstStage) -> lanes::Lane {
    let page = cells.page_size[i] as u64;
    let window = OptCount::from_cell(cells.sliding_window_size[i]).0;
    lanes::finish(q, page, cells.swa_full_tokens_ratio[i], window)
}

/// Row `i` of a block through the lanes alone (the tests' view of which rows
/// the fast kernel solves).
#[cfg(test)]
fn lane(cells: &Cells<'_>, i: usize, a: i64) -> lanes::Lane {
    second_stage(cells, i, &first_stage(cells, i, a))
}

/// The exact path for one row: its scenario (the base's pinned fields are
/// the defaults, every other field is the row's cell decoded by its kind's
/// `from_cell`, as the general loop sets it), `invalid_config` for a bad
/// cell, else the scalar API's functions ([`solve_row`]) on it.
#[cold]
#[inline(never)]
fn exact_row(cells: &Cells<'_>, i: usize, a: i64, out: &mut BatchOutputs<'_>) {
    let (row, ok, _) = cells.row(i);
    if !ok {
        out.write_err(i, ErrorCode::InvalidConfig.status());
        return;
    }
    let sc = row.scenario();
    let kind = <ConfiguratorKind as Named>::ALL[kind_index(&sc.shape, &sc.serving)];
    out.write(i, solve_row(kind, &sc, a));
}

#[cfg(test)]
mod tests;
