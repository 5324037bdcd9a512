//! The batch kernel: blocks of rows, columns applied one loop per column,
//! rows solved one loop per configurator kind, large batches across threads.

use super::{Batch, BatchOutputs, Column, STATUS_OK};
use crate::error::{ErrorCode, PlanError, Result};
use crate::fields::{Kind, MemoryPoolConfig, Named, ScenarioField};
use crate::scenario::Scenario;
use crate::sizing::{select_kind, ConfiguratorKind, Sizing};

/// Rows sized together: a block's scenarios stay in cache while its columns
/// are applied.
pub const BLOCK: usize = 256;

/// Rows from which the work is split across threads (below it, thread start-up
/// costs more than it saves).
pub const PARALLEL_ROWS: usize = 1 << 16;

/// How many threads a batch call may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Threads {
    /// One thread per available core (`std::thread::available_parallelism`,
    /// which honours CPU quotas), for batches of [`PARALLEL_ROWS`] rows or more.
    #[default]
    Auto,
    /// At most this many (1: the calling thread only).
    Fixed(usize),
}

impl Threads {
    /// The threads for `rows` rows: each gets at least half of [`PARALLEL_ROWS`].
    pub fn for_rows(self, rows: usize) -> usize {
        let cap = match self {
            Self::Auto if rows < PARALLEL_ROWS => 1,
            Self::Auto => std::thread::available_parallelism().map_or(1, usize::from),
            Self::Fixed(t) => t.max(1),
        };
        cap.min(rows.div_ceil(PARALLEL_ROWS / 2)).max(1)
    }
}

/// Runs `work` on `threads` contiguous parts of `out` (rows `start..end` each).
fn split_rows<F>(n: usize, threads: usize, out: &mut BatchOutputs<'_>, work: F)
where
    F: Fn(usize, usize, &mut BatchOutputs<'_>) + Sync,
{
    if threads <= 1 {
        work(0, n, out);
        return;
    }
    let chunk = n.div_ceil(threads);
    std::thread::scope(|scope| {
        let mut rest = BatchOutputs {
            max_total_num_tokens: &mut *out.max_total_num_tokens,
            full_max_total_num_tokens: &mut *out.full_max_total_num_tokens,
            swa_max_total_num_tokens: &mut *out.swa_max_total_num_tokens,
            status: &mut *out.status,
        };
        let mut start = 0;
        while start < n {
            let end = (start + chunk).min(n);
            let (mut part, tail) = std::mem::replace(
                &mut rest,
                BatchOutputs {
                    max_total_num_tokens: &mut [],
                    full_max_total_num_tokens: &mut [],
                    swa_max_total_num_tokens: &mut [],
                    status: &mut [],
                },
            )
            .split_into(end - start);
            rest = tail;
            let work = &work;
            if end == n {
                work(start, end, &mut part); // the last part on this thread
            } else {
                scope.spawn(move || work(start, end, &mut part));
            }
            start = end;
        }
    });
}

/// Plans every row from bytes (`calculate_pool_sizes` with the serving page
/// size). Fails only when the columns are malformed (lengths, dtypes) or the
/// outputs have the wrong length; row errors go to `out.status`.
pub fn plan_many(batch: &Batch<'_>, out: &mut BatchOutputs<'_>) -> Result<()> {
    let n = batch.rows()?;
    out.check_rows(n)?;
    check_columns(batch)?;
    let threads = batch.threads.for_rows(n);
    split_rows(n, threads, out, |start, end, part| {
        let cols: Vec<Column<'_>> = batch
            .columns
            .iter()
            .map(|c| Column {
                field: c.field,
                data: c.data.slice(start, end),
            })
            .collect();
        let sub = Batch {
            available_bytes: batch.available_bytes.slice(start, end),
            columns: &cols,
            ..*batch
        };
        plan_rows(&sub, end - start, part);
    });
    Ok(())
}

/// A column that is no batch field, or of the wrong cell type, is an error of
/// the call, not of its rows.
fn check_columns(batch: &Batch<'_>) -> Result<()> {
    for c in batch.columns {
        if !c.field.info().batch {
            return Err(PlanError::invalid(format!(
                "{} is not a batch column",
                c.field.info().name
            )));
        }
        Scenario::apply_column(&mut [], &mut [], c.field, c.data)?;
    }
    Ok(())
}

/// The `n` rows of a well-formed batch (one thread's part), into `out`.
fn plan_rows(batch: &Batch<'_>, n: usize, out: &mut BatchOutputs<'_>) {
    // A bad base field (a scalar the scalar API rejects) makes every row invalid.
    // Checked once here: every cell is checked as it is applied, so rows only
    // need the rules across fields.
    let base_check = ScenarioField::ALL
        .iter()
        .filter(|f| !batch.columns.iter().any(|c| c.field == **f))
        .try_for_each(|f| f.check(&batch.base));
    let base_status = match base_check {
        _ if batch.base_status != STATUS_OK => batch.base_status,
        Err(e) => e.code.status(),
        Ok(()) => STATUS_OK,
    };
    if base_status != STATUS_OK {
        for i in 0..n {
            out.write_err(i, base_status);
        }
        return;
    }
    if batch.columns.is_empty() {
        // One setup: only the budget varies.
        let base = &batch.base;
        match base
            .check_rules()
            .and_then(|()| Sizing::build::<ErrorCode>(None, base))
        {
            Ok(sizing) => solve_rows(
                &sizing,
                (0..n).map(|i| (i, batch.available_bytes.get(i))),
                out,
            ),
            Err(e) => (0..n).for_each(|i| out.write_err(i, e.status())),
        }
        return;
    }
    let mut rows = vec![batch.base; BLOCK];
    let mut by_kind: [[u16; BLOCK]; 3] = [[0; BLOCK]; 3];
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let m = end - start;
        let status = &mut out.status[start..end];
        status.fill(STATUS_OK);
        for c in batch.columns {
            // The cell types were checked by `check_columns`.
            let _ =
                Scenario::apply_column(&mut rows[..m], status, c.field, c.data.slice(start, end));
        }
        // Rows go to their configurator kind's loop (a bad cell's row is written now).
        let mut counts = [0usize; 3];
        for (i, row) in rows[..m].iter().enumerate() {
            let st = out.status[start + i];
            if st == STATUS_OK {
                let k = select_kind(&row.shape, &row.serving) as usize;
                by_kind[k][counts[k]] = i as u16;
                counts[k] += 1;
            } else {
                out.write_err(start + i, st);
            }
        }
        // Each kind in a loop of its own: the kind is a constant there, so the
        // sizing and the solve carry no branch on it.
        let budgets = &batch.available_bytes;
        for (k, kind) in <ConfiguratorKind as Named>::ALL.iter().enumerate() {
            for &i in &by_kind[k][..counts[k]] {
                let i = usize::from(i);
                let row = &rows[i];
                let a = budgets.get(start + i);
                let r = match kind {
                    ConfiguratorKind::Default => solve_row(ConfiguratorKind::Default, row, a),
                    ConfiguratorKind::HybridSwa => solve_row(ConfiguratorKind::HybridSwa, row, a),
                    ConfiguratorKind::RequestCap => solve_row(ConfiguratorKind::RequestCap, row, a),
                };
                out.write(start + i, r);
            }
        }
        start = end;
    }
}

/// One row: its rules, the sizing of `kind` (the factory's choice) and the
/// profiling path, exactly the scalar API's steps, keeping only the error code.
#[inline(always)]
fn solve_row(
    kind: ConfiguratorKind,
    row: &Scenario,
    available_bytes: i64,
) -> std::result::Result<MemoryPoolConfig, ErrorCode> {
    row.check_rules()?;
    let s = Sizing::build::<ErrorCode>(Some(kind), row)?;
    let p = s.resolve_page_size(None)?;
    match kind {
        ConfiguratorKind::Default => s.default_from_bytes(available_bytes, p),
        ConfiguratorKind::HybridSwa => s.hybrid_from_bytes(available_bytes, p),
        ConfiguratorKind::RequestCap => s.request_cap_from_bytes(available_bytes, p),
    }
}

/// Solves `(row, budget)` pairs with one sizing, the kind's branch hoisted out of the loop.
fn solve_rows(
    sizing: &Sizing,
    rows: impl Iterator<Item = (usize, i64)>,
    out: &mut BatchOutputs<'_>,
) {
    let p = match sizing.resolve_page_size::<ErrorCode>(None) {
        Ok(p) => p,
        Err(e) => {
            rows.for_each(|(i, _)| out.write_err(i, e.status()));
            return;
        }
    };
    match sizing.kind {
        ConfiguratorKind::Default => {
            rows.for_each(|(i, a)| out.write(i, sizing.default_from_bytes(a, p)));
        }
        ConfiguratorKind::HybridSwa => {
            rows.for_each(|(i, a)| out.write(i, sizing.hybrid_from_bytes(a, p)));
        }
        ConfiguratorKind::RequestCap => {
            rows.for_each(|(i, a)| out.write(i, sizing.request_cap_from_bytes(a, p)));
        }
    }
}

impl Sizing {
    /// `calculate_pool_sizes` (serving page size) for many budgets at once,
    /// into `out`, on up to `threads` threads.
    pub fn calculate_pool_sizes_many(
        &self,
        available_bytes: &[i64],
        out: &mut BatchOutputs<'_>,
        threads: Threads,
    ) -> Result<()> {
        let n = available_bytes.len();
        out.check_rows(n)?;
        split_rows(n, threads.for_rows(n), out, |start, end, part| {
            solve_rows(
                self,
                available_bytes[start..end].iter().copied().enumerate(),
                part,
            );
        });
        Ok(())
    }
}

/// Applies every cell of a column to `rows`: the kind's `from_cell` checks
/// each; an invalid cell makes its row `invalid_config` (whatever value it
/// leaves there). Used by the generated `Scenario::apply_column`.
#[inline]
pub(crate) fn apply_cells<K: Kind>(
    rows: &mut [Scenario],
    status: &mut [u8],
    cells: &[K::Cell],
    mut set: impl FnMut(&mut Scenario, K::Value),
) {
    // Cells only ever mark rows invalid, and the block's statuses start at OK,
    // so OR-ing the invalid status in keeps "first error wins".
    const INVALID: u8 = ErrorCode::InvalidConfig.status();
    let n = rows.len().min(status.len()).min(cells.len());
    let (rows, status, cells) = (&mut rows[..n], &mut status[..n], &cells[..n]);
    for i in 0..n {
        let (v, ok) = K::from_cell(cells[i]);
        set(&mut rows[i], v);
        status[i] |= INVALID * u8::from(!ok);
    }
}
