//! The batch kernel: blocks of rows, columns applied one loop per column,
//! rows solved one loop per configurator kind, large batches across threads.
//!
//! When no rarely used option varies or leaves its default ([`PINNED`],
//! checked once per batch), the rows go to the fast path
//! ([`super::fast`]): rows read straight from the columns and solved in
//! vector code, every error row and every row outside its domain handed to
//! the scalar API's functions. Otherwise (or when a base value is no valid
//! cell) the general loop below runs: columns applied to a block of
//! scenarios, then the scalar API's functions per row, with the "lean"
//! instantiation (the pinned fields reset to their defaults, constants the
//! compiler folds) when [`PINNED`] allows it: same functions, same scenario,
//! so the same results, errors included (INV-7). The fast path's results
//! are held to the scalar API's by its tests.

use super::{Batch, BatchOutputs, Budgets, CellType, Column, ColumnData, FieldSet, STATUS_OK};
use crate::error::{ErrorCode, PlanError, Result};
use crate::fields::{Kind, MemoryPoolConfig, Named, ScenarioField};
use crate::scenario::Scenario;
use crate::sizing::{kind_index, ConfiguratorKind, Sizing};

pub use super::BLOCK;

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
pub(super) fn check_columns(batch: &Batch<'_>) -> Result<()> {
    for c in batch.columns {
        if !c.field.info().batch {
            return Err(PlanError::invalid(format!(
                "{} is not a batch column",
                c.field.info().name
            )));
        }
        // An int32 column stands for an int64 field's cells (widened block by block).
        let data = match c.data {
            ColumnData::I32(_) if c.field.info().cell_dtype == <i64 as CellType>::DTYPE => {
                ColumnData::I64(&[])
            }
            d => d,
        };
        Scenario::apply_column(&mut [], &mut [], c.field, data)?;
    }
    Ok(())
}

/// The status every row starts with: a bad base field (a scalar the scalar API
/// rejects) makes every row invalid. Checked once: every cell is checked as it
/// is applied, so rows only need the rules across fields.
pub(super) fn base_status(batch: &Batch<'_>) -> u8 {
    let columns = FieldSet::of(batch.columns);
    let base_check = ScenarioField::ALL
        .iter()
        .filter(|f| !columns.contains(**f))
        .try_for_each(|f| f.check(&batch.base));
    match base_check {
        _ if batch.base_status != STATUS_OK => batch.base_status,
        Err(e) => e.code.status(),
        Ok(()) => STATUS_OK,
    }
}

/// Rows from which a lean batch takes the fast path: it fills a block of cells per field
/// (tens of KB) before its first row, which a few rows do not repay (measured in
/// `benches/bench_batch.py`'s small-batch table).
pub const FAST_MIN_ROWS: usize = 64;

/// The `n` rows of a well-formed batch (one thread's part), into `out`.
fn plan_rows(batch: &Batch<'_>, n: usize, out: &mut BatchOutputs<'_>) {
    let base_status = base_status(batch);
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
    // Checked once per batch: when no pinned field varies and the base holds
    // each at its default, every row holds them at their defaults too (rows
    // start as the base; columns set only their own field).
    let lean = is_lean(batch);
    if lean && n >= FAST_MIN_ROWS && super::fast::plan_rows(batch, n, out) {
        return;
    }
    let mut rows = vec![batch.base; BLOCK.min(n)]; // a small batch copies only its rows
    let mut by_kind: [[u16; BLOCK]; 3] = [[0; BLOCK]; 3];
    let mut wide = [0i64; BLOCK];
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let m = end - start;
        apply_block(
            batch,
            &mut rows[..m],
            &mut out.status[start..end],
            STATUS_OK,
            start,
            &mut wide,
        );
        let rows = &rows[..m];
        let mut block = out.rows(start, end);
        // Rows go to their configurator kind's loop (a bad cell's row is written now).
        let mut counts = [0usize; 3];
        for (i, row) in rows.iter().enumerate() {
            let st = block.status[i];
            if st == STATUS_OK {
                // Branch free: the kinds of consecutive rows are unrelated.
                let k = kind_index(&row.shape, &row.serving);
                by_kind[k][counts[k]] = i as u16;
                counts[k] += 1;
            } else {
                block.write_err(i, st);
            }
        }
        let budgets = batch.available_bytes.slice(start, end);
        if lean {
            solve_block::<true>(rows, &by_kind, counts, budgets, &mut block);
        } else {
            solve_block::<false>(rows, &by_kind, counts, budgets, &mut block);
        }
        start = end;
    }
}

/// The rows `start..start + rows.len()` of the batch's scenario columns applied to `rows`
/// (each cell checked; a bad one sets its row's status), every status first `initial`. The
/// cell types were checked by `check_columns`.
pub(super) fn apply_block(
    batch: &Batch<'_>,
    rows: &mut [Scenario],
    status: &mut [u8],
    initial: u8,
    start: usize,
    wide: &mut [i64; BLOCK],
) {
    status.fill(initial);
    for c in batch.columns {
        let data = c.data.slice(start, start + rows.len()).widen(wide);
        let _ = Scenario::apply_column(rows, status, c.field, data);
    }
}

/// Declares the fields the lean loops pin to their defaults: [`PINNED`] and
/// [`pin`] from one list, so that the two cannot disagree.
macro_rules! pinned_fields {
    ($( $part:ident . $f:ident ),* $(,)?) => {
        /// The fields the lean loops hold at their defaults: options whose
        /// default keeps the arithmetic on its common path (no MLA, no
        /// decode context parallelism, no disaggregation, no fused entries or
        /// draft geometry, not the draft worker, no unified memory, no FP4
        /// backends). The batch columns autoscalers vary are not among them.
        pub(crate) const PINNED: &[ScenarioField] = &[$( ScenarioField::$f ),*];

        /// Sets every [`PINNED`] field of `sc` to its value in `d`.
        #[inline(always)]
        fn pin(sc: &mut Scenario, d: &Scenario) {
            $( sc.$part.$f = d.$part.$f; )*
        }
    };
}

pinned_fields!(
    shape.v_head_dim,
    shape.swa_num_kv_heads,
    shape.swa_head_dim,
    shape.swa_v_head_dim,
    shape.kv_lora_rank,
    shape.qk_rope_head_dim,
    shape.swa_kv_lora_rank,
    shape.swa_qk_rope_head_dim,
    shape.index_head_dim,
    shape.index_kpool,
    shape.index_shared_layers,
    serving.dcp_size,
    serving.attn_dp_size,
    serving.disable_overlap_schedule,
    serving.disaggregation_mode,
    serving.disaggregation_decode_extra_slots,
    serving.disable_hybrid_swa_memory,
    serving.is_draft_worker,
    serving.enable_unified_memory,
    serving.model_context_len,
    serving.prefill_attention_backend,
    serving.decode_attention_backend,
    serving.is_sm100,
    serving.model_dtype,
    serving.dsa_raw_kv_layout,
    spec.banded_draft_layers,
    spec.draft,
    spec.draft_swa_num_layers,
    spec.max_num_draft_tokens,
    spec.fused_full_entry_bytes,
    spec.fused_swa_entry_bytes,
);

/// True when every row of `batch` holds each [`PINNED`] field at its default:
/// none is a column, and the base holds the default.
fn is_lean(batch: &Batch<'_>) -> bool {
    let mut pinned = batch.base;
    pin(&mut pinned, &Scenario::default());
    let columns = FieldSet::of(batch.columns);
    pinned == batch.base && !PINNED.iter().any(|f| columns.contains(*f))
}

/// The valid rows of one block, one loop per configurator kind. With `LEAN`
/// (every row holds the [`PINNED`] fields at their defaults, [`is_lean`]),
/// each row is solved from a copy with those fields set to their defaults
/// again: the same scenario, the same functions, but the defaults are
/// constants there, so the compiler folds the branches they decide (MLA, DCP,
/// fused entries, the draft worker, unified memory...) out of the loop.
#[inline(always)]
fn solve_block<const LEAN: bool>(
    rows: &[Scenario],
    by_kind: &[[u16; BLOCK]; 3],
    counts: [usize; 3],
    budgets: Budgets<'_>,
    out: &mut BatchOutputs<'_>,
) {
    let defaults = Scenario::default();
    // Each kind in a loop of its own: the kind is a constant there, so the
    // sizing and the solve carry no branch on it.
    for (k, kind) in <ConfiguratorKind as Named>::ALL.iter().enumerate() {
        for &i in &by_kind[k][..counts[k]] {
            let i = usize::from(i);
            let a = budgets.get(i);
            let mut row = rows[i];
            if LEAN {
                pin(&mut row, &defaults);
            }
            let r = match kind {
                ConfiguratorKind::Default => solve_row(ConfiguratorKind::Default, &row, a),
                ConfiguratorKind::HybridSwa => solve_row(ConfiguratorKind::HybridSwa, &row, a),
                ConfiguratorKind::RequestCap => solve_row(ConfiguratorKind::RequestCap, &row, a),
            };
            out.write(i, r);
        }
    }
}

/// One row: its rules, the sizing of `kind` (the factory's choice) and the
/// profiling path, exactly the scalar API's steps, keeping only the error code.
#[inline(always)]
pub(super) fn solve_row(
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

#[cfg(test)]
mod tests {
    use super::{is_lean, pin, FieldSet, Threads, PINNED};
    use crate::batch::{Batch, Budgets, Column, ColumnData};
    use crate::fields::{FieldInfo, ScenarioField, SCENARIO_FIELDS};
    use crate::Scenario;

    fn batch<'a>(base: &Scenario, columns: &'a [Column<'a>]) -> Batch<'a> {
        Batch {
            base: *base,
            base_status: 0,
            available_bytes: Budgets::Scalar(1 << 30),
            columns,
            threads: Threads::Fixed(1),
        }
    }

    /// `pin` resets exactly the fields `PINNED` lists: a scenario with every
    /// field off its default keeps the others.
    #[test]
    fn pin_resets_the_pinned_fields_only() {
        let default = Scenario::default();
        let changed = |f: &FieldInfo| {
            let mut sc = default;
            let v = match (f.default)() {
                crate::fields::Value::Int(i) => crate::fields::Value::Int(i + 3),
                crate::fields::Value::None if f.choices.is_empty() => {
                    if f.kind == "draft" {
                        return None;
                    }
                    crate::fields::Value::Int(5)
                }
                crate::fields::Value::None => crate::fields::Value::Str(f.choices[1]),
                crate::fields::Value::Bool(b) => crate::fields::Value::Bool(!b),
                crate::fields::Value::Float(x) => crate::fields::Value::Float(x / 2.0),
                crate::fields::Value::Str(d) => {
                    crate::fields::Value::Str(f.choices.iter().find(|c| **c != d).expect("choices"))
                }
                crate::fields::Value::Draft(_) => return None,
            };
            assert!(sc.set(f.name, v).expect(f.name), "{}", f.name);
            assert_ne!(sc, default, "{} did not change", f.name);
            Some(sc)
        };
        for (k, f) in SCENARIO_FIELDS.iter().enumerate() {
            let field = ScenarioField::ALL[k];
            let Some(mut sc) = changed(f) else {
                assert!(PINNED.contains(&field), "{}", f.name);
                continue;
            };
            let before = sc;
            pin(&mut sc, &default);
            if PINNED.contains(&field) {
                assert_eq!(sc, default, "{} is pinned", f.name);
                assert!(!is_lean(&batch(&before, &[])), "{}", f.name);
            } else {
                assert_eq!(sc, before, "{} is not pinned", f.name);
                assert!(is_lean(&batch(&before, &[])), "{}", f.name);
            }
        }
    }

    /// A pinned field given as a column, even at its default, leaves the lean loops.
    #[test]
    fn a_pinned_column_is_not_lean() {
        let cells = [1i64, 1];
        let dcp = [Column {
            field: ScenarioField::dcp_size,
            data: ColumnData::I64(&cells),
        }];
        let tp = [Column {
            field: ScenarioField::tp_size,
            data: ColumnData::I64(&cells),
        }];
        assert!(!is_lean(&batch(&Scenario::default(), &dcp)));
        assert!(is_lean(&batch(&Scenario::default(), &tp)));
    }

    /// A column given twice is an error of the call; every field is a distinct member of
    /// the column set (its bit), the last one included.
    #[test]
    fn column_sets_and_duplicate_columns() {
        let cells = [1i64];
        let col = |field| Column {
            field,
            data: ColumnData::I64(&cells),
        };
        let twice = [col(ScenarioField::tp_size), col(ScenarioField::tp_size)];
        let err = batch(&Scenario::default(), &twice).rows().unwrap_err();
        assert!(err.message().contains("tp_size is given twice"), "{err}");
        for (k, f) in ScenarioField::ALL.iter().enumerate() {
            let set = FieldSet::of(&[col(*f)]);
            assert!(set.contains(*f));
            assert_eq!(
                ScenarioField::ALL
                    .iter()
                    .filter(|g| set.contains(**g))
                    .count(),
                1,
                "field {k}"
            );
        }
    }
}
