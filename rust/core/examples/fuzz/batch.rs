//! Batch cases, and `batch::plan_many` against the scalar API, row by row (INV-7).
//!
//! A case: a random subset of the batch fields (`FieldInfo::batch`) as
//! columns of their `cell_dtype`, the other fields' raw values in the base
//! scenario; now and then a malformed call (a column of the wrong length or
//! dtype, a duplicate column, a non-batch field, outputs of the wrong length).
//!
//! The oracle decodes the batch encoding itself (a negative cell of an
//! optional integer is `None`, a choice cell is an index into the field's
//! names) and rebuilds each row through the scalar path: a default
//! `Scenario`, `Scenario::set` of every base value and every decoded cell,
//! then `ModelGeometry::new` (layer ids `0..n_f`, `n_f..n_f+n_s`) +
//! `PoolConfigurator::create` and, independently, `from_scenario`; a failing
//! `set` is an invalid_config row.

use crate::build::{set_field, value_of};
use crate::gen::{gen_budget, gen_value, Mix, Raw};
use crate::oracles::{check_err, compare_row, Check, Stats};
use crate::rng::Rng;
use kvbudget_core::batch::{plan_many, Batch, Budgets, Buffers, Column, Threads};
use kvbudget_core::fields::{FieldInfo, PyRepr, ScenarioField, Value};
use kvbudget_core::{
    ErrorCode, MemoryPoolConfig, ModelGeometry, PlanError, PoolConfigurator, Scenario,
};

/// The cells of a batch column, as numpy would hold them (the core's owned column).
pub use kvbudget_core::batch::Cells;

pub const CELL_DTYPES: [&str; 5] = ["int64", "int32", "float64", "bool", "uint8"];

/// Output buffers of the given lengths, prefilled with values no row writes
/// (7 and status 9), so that an unwritten row shows.
pub fn sentinel_buffers(lens: [usize; 4]) -> Buffers {
    let mut b = Buffers::with_lens(lens);
    b.max_total_num_tokens.fill(7);
    b.full_max_total_num_tokens.fill(7);
    b.swa_max_total_num_tokens.fill(7);
    b.status.fill(9);
    b
}

/// `len` cells of dtype `dtype` for field `f`: its raw values in the batch
/// encoding (negative for `None`, a choice's index in its names).
pub fn gen_cells(r: &mut Rng, f: &FieldInfo, dtype: &str, len: usize, mix: Mix) -> Cells {
    let raws = (0..len)
        .map(|_| gen_value(r, f, mix))
        .collect::<Vec<_>>()
        .into_iter();
    match dtype {
        "float64" => Cells::F64(
            raws.map(|v| match v {
                Raw::Float(x) => x,
                Raw::Int(i) => i as f64,
                _ => r.f64_edge(),
            })
            .collect(),
        ),
        "bool" => Cells::Bool(
            raws.map(|v| match v {
                Raw::Bool(b) => b,
                _ => r.chance(50),
            })
            .collect(),
        ),
        "uint8" => Cells::U8(
            raws.map(|v| {
                let code = match &v {
                    Raw::Str(s) => f.choices.iter().position(|c| c == s),
                    Raw::None if !f.choices.is_empty() => Some(r.index(f.choices.len())),
                    _ => None,
                };
                code.map_or_else(|| r.next_u64() as u8, |c| c as u8)
            })
            .collect(),
        ),
        _ => {
            let ints = raws.map(|v| match v {
                Raw::Int(i) => i64::try_from(i).unwrap_or_else(|_| r.i64_edge()),
                Raw::None if r.chance(80) => -1,
                Raw::None => -1 - (r.next_u64() >> r.range(1, 63)) as i64,
                Raw::Float(x) => x as i64,
                Raw::Bool(b) => i64::from(b),
                _ => r.i64_edge(),
            });
            if dtype == "int32" {
                // Saturated: the large values become i32's bounds.
                let narrow = |x: i64| x.clamp(i32::MIN.into(), i32::MAX.into()) as i32;
                Cells::I32(ints.map(narrow).collect())
            } else {
                Cells::I64(ints.collect())
            }
        }
    }
}

/// Whether a column of `dtype` is one of field `f`'s: its `cell_dtype`, or
/// int32 cells of an int64 field.
fn takes(f: &FieldInfo, dtype: &str) -> bool {
    dtype == f.cell_dtype || (dtype == "int32" && f.cell_dtype == "int64")
}

/// The budgets of a batch.
#[derive(Debug, Clone)]
pub enum BudgetCase {
    Scalar(i64),
    Array(Vec<i64>),
}

#[derive(Debug, Clone)]
pub struct BatchCase {
    /// Scalar inputs, applied to the base scenario with `Scenario::set`.
    pub base: Vec<(ScenarioField, Raw)>,
    /// A base status forced on every row (0: none).
    pub forced_status: u8,
    pub budgets: BudgetCase,
    pub columns: Vec<(ScenarioField, Cells)>,
    pub out_lens: [usize; 4],
    /// The thread policy (the result must not depend on it).
    pub threads: Threads,
}

pub fn gen_batch(r: &mut Rng) -> BatchCase {
    let mix = Mix::draw(r);
    let n = match r.below(100) {
        0..=3 => 0,
        4..=89 => r.range(1, 8) as usize,
        _ => r.range(60, 150) as usize,
    };
    // Now and then one column (or the budgets) of the wrong length.
    let mut bad_len = r
        .chance(4)
        .then(|| (r.index(40), n + 1 - 2 * r.index(2).min(n)));
    let mut k = 0;
    let mut len = |_: &mut Rng| {
        k += 1;
        match bad_len {
            Some((at, l)) if at < k => {
                bad_len = None;
                l
            }
            _ => n,
        }
    };
    let column_percent = r.pick(&[0, 10, 25, 50, 80]);
    let (mut base, mut columns) = (Vec::new(), Vec::new());
    for &f in ScenarioField::ALL {
        let info = f.info();
        if info.batch && r.chance(column_percent) {
            let l = len(r);
            let dtype = if info.cell_dtype == "int64" && r.chance(30) {
                "int32"
            } else {
                info.cell_dtype
            };
            columns.push((f, gen_cells(r, info, dtype, l, mix)));
        } else if info.required || r.chance(85) {
            base.push((f, gen_value(r, info, mix)));
        }
    }
    if r.chance(50) {
        for i in (1..columns.len()).rev() {
            let j = r.index(i + 1);
            columns.swap(i, j);
        }
    }
    if !columns.is_empty() && r.chance(2) {
        // A column given twice.
        let c = columns[r.index(columns.len())].clone();
        let at = r.index(columns.len() + 1);
        columns.insert(at, c);
    }
    if !columns.is_empty() && r.chance(2) {
        // A column of the wrong dtype.
        let k = r.index(columns.len());
        let (f, cells) = &columns[k];
        let dtype = loop {
            let d = r.pick(&CELL_DTYPES);
            if !takes(f.info(), d) {
                break d;
            }
        };
        let cells = gen_cells(r, f.info(), dtype, cells.data().len(), mix);
        columns[k].1 = cells;
    }
    if r.chance(1) {
        // A column for a field that is not a batch column.
        let fields: Vec<_> = ScenarioField::ALL
            .iter()
            .filter(|f| !f.info().batch)
            .collect();
        if !fields.is_empty() {
            let f = *fields[r.index(fields.len())];
            let l = len(r);
            columns.push((f, gen_cells(r, f.info(), f.info().cell_dtype, l, mix)));
        }
    }
    let budgets = if r.chance(50) {
        BudgetCase::Scalar(gen_budget(r))
    } else {
        let l = len(r);
        BudgetCase::Array((0..l).map(|_| gen_budget(r)).collect())
    };
    let mut case = BatchCase {
        base,
        forced_status: if r.chance(3) {
            r.range(1, 255) as u8
        } else {
            0
        },
        budgets,
        columns,
        out_lens: [0; 4],
        threads: if r.chance(50) {
            Threads::Auto
        } else {
            Threads::Fixed(r.range(1, 4) as usize)
        },
    };
    let rows = case.expected_rows().0;
    case.out_lens = [rows; 4];
    if r.chance(2) {
        case.out_lens[r.index(4)] = rows + 1;
    }
    case
}

impl BatchCase {
    /// The rows `plan_many` must see (the first array's length, 1 without
    /// arrays) and whether every array has that length.
    pub fn expected_rows(&self) -> (usize, bool) {
        let mut lens = Vec::new();
        if let BudgetCase::Array(a) = &self.budgets {
            lens.push(a.len());
        }
        lens.extend(self.columns.iter().map(|(_, c)| c.data().len()));
        let rows = lens.first().copied().unwrap_or(1);
        (rows, lens.iter().all(|l| *l == rows))
    }
}

/// Rows whose model has at most this many layers are also built through a `ModelGeometry`.
const GEOMETRY_LAYER_LIMIT: u64 = 1 << 12;

/// The value cell `i` of a column of field `f` stands for, decoded here
/// (not by the core's `Kind::from_cell`).
fn decode(f: &FieldInfo, cells: &Cells, i: usize) -> Result<Value<'static>, PlanError> {
    if !f.batch {
        return Err(PlanError::invalid(format!(
            "{} is not a batch column",
            f.name
        )));
    }
    Ok(match cells {
        Cells::I64(a) if a[i] < 0 && f.py == PyRepr::OptInt => Value::None,
        Cells::I64(a) => Value::Int(i128::from(a[i])),
        Cells::I32(a) if a[i] < 0 && f.py == PyRepr::OptInt => Value::None,
        Cells::I32(a) => Value::Int(i128::from(a[i])),
        Cells::F64(a) => Value::Float(a[i]),
        Cells::Bool(a) => Value::Bool(a[i]),
        Cells::U8(a) => Value::Str(f.choices.get(usize::from(a[i])).ok_or_else(|| {
            PlanError::invalid(format!("{}: code {} out of range", f.name, a[i]))
        })?),
    })
}

fn budget(b: &BudgetCase, i: usize) -> i64 {
    match b {
        BudgetCase::Scalar(a) => *a,
        BudgetCase::Array(a) => a[i],
    }
}

/// Row `i` through the scalar API: `(from_scenario, through a ModelGeometry)`.
type RowResult = Result<MemoryPoolConfig, PlanError>;

fn row_reference(c: &BatchCase, i: usize) -> (RowResult, Option<RowResult>) {
    let mut sc = Scenario::default();
    let set = |sc: &mut Scenario| -> Result<(), PlanError> {
        for (f, raw) in &c.base {
            set_field(sc, *f, value_of(raw)?)?;
        }
        for (f, cells) in &c.columns {
            set_field(sc, *f, decode(f.info(), cells, i)?)?;
        }
        Ok(())
    };
    if let Err(e) = set(&mut sc) {
        return (Err(e), None);
    }
    let a = budget(&c.budgets, i);
    let via_scenario = PoolConfigurator::from_scenario(None, &sc)
        .and_then(|cfg| cfg.calculate_pool_sizes(a, None));
    let (n_f, n_s) = (sc.shape.num_full_layers, sc.shape.num_swa_layers);
    let via_model = (n_f.saturating_add(n_s) <= GEOMETRY_LAYER_LIMIT).then(|| {
        let model = ModelGeometry::new((0..n_f).collect(), (n_f..n_f + n_s).collect(), sc.shape)?;
        PoolConfigurator::create(model, sc.serving, sc.spec)?.calculate_pool_sizes(a, None)
    });
    (via_scenario, via_model)
}

fn same(a: &RowResult, b: &RowResult) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(x), Err(y)) => x.code == y.code,
        _ => false,
    }
}

pub fn run_batch(c: &BatchCase, st: &mut Stats) -> Check {
    st.batch_calls += 1;
    let (rows, consistent) = c.expected_rows();
    let duplicate = c
        .columns
        .iter()
        .enumerate()
        .any(|(k, (f, _))| c.columns[..k].iter().any(|(g, _)| g == f));
    let wrong_dtype = c
        .columns
        .iter()
        .any(|(f, cells)| !takes(f.info(), cells.data().type_name()));
    let not_batch = c.columns.iter().any(|(f, _)| !f.info().batch);
    let outputs_ok = c.out_lens.iter().all(|l| *l == rows);
    let must_fail = duplicate || wrong_dtype || !consistent || !outputs_ok;

    // The base: every scalar input set on a default scenario; a bad one is every row's status.
    let mut base = Scenario::default();
    let mut base_status = c.forced_status;
    for (f, raw) in &c.base {
        if let Err(e) = value_of(raw).and_then(|v| set_field(&mut base, *f, v)) {
            if base_status == 0 {
                base_status = e.code.status();
            }
        }
    }
    let columns: Vec<Column<'_>> = c
        .columns
        .iter()
        .map(|(field, cells)| Column {
            field: *field,
            data: cells.data(),
        })
        .collect();
    let batch = Batch {
        base,
        base_status,
        available_bytes: match &c.budgets {
            BudgetCase::Scalar(a) => Budgets::Scalar(*a),
            BudgetCase::Array(a) => Budgets::Array(a),
        },
        columns: &columns,
        threads: c.threads,
    };
    let mut bufs = sentinel_buffers(c.out_lens);
    match plan_many(&batch, &mut bufs.views()) {
        Ok(()) => ensure!(
            !must_fail,
            "plan_many accepted a malformed batch (duplicate {duplicate}, wrong dtype {wrong_dtype}, \
             lengths consistent {consistent}, outputs {:?} for {rows} rows)",
            c.out_lens
        ),
        Err(e) => {
            ensure!(
                must_fail || not_batch,
                "plan_many failed on a well-formed batch: {e}"
            );
            ensure!(
                e.code == ErrorCode::InvalidConfig,
                "plan_many failed with {:?}",
                e.code
            );
            st.batch_call_errors += 1;
            return check_err(&e, st, "plan_many");
        }
    }
    for i in 0..rows {
        let (o1, o2, o3, o4) = bufs.row(i);
        st.batch_rows += 1;
        if o4 == 0 {
            st.batch_rows_ok += 1;
        }
        if c.forced_status != 0 {
            ensure!(
                (o1, o2, o3, o4) == (0, 0, 0, c.forced_status),
                "row {i}: ({o1}, {o2}, {o3}, status {o4}) under base status {}",
                c.forced_status
            );
            continue;
        }
        let (want, via_model) = row_reference(c, i);
        compare_row(&want, o1, o2, o3, o4).map_err(|e| format!("INV-7 row {i}: {e}"))?;
        if let Some(m) = via_model {
            ensure!(
                same(&want, &m),
                "INV-7 row {i}: from_scenario gives {want:?} but ModelGeometry + create gives {m:?}"
            );
        }
    }
    Ok(())
}
