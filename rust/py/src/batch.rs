//! numpy batch API: a base scenario from the scalars, one contiguous array
//! per varying column, four arrays out (fresh, or the caller's `out`).
//!
//! GIL policy (one helper, [`without_gil`]): batches of [`DETACH_ROWS`] rows or
//! more run with the GIL released; from `kvbudget_core::batch::PARALLEL_ROWS`
//! rows the core also splits them across threads (`threads=`, default one per
//! available core). The input arrays are borrowed, not copied
//! (copying would cost as much as planning); callers must not write to them
//! from another thread during the call. Output arrays are written only by the
//! call. Everything the core touches is plain data, so the module also
//! declares itself safe without the GIL (`gil_used = false`).

use crate::errors::{invalid, type_error, Result};
use crate::plan::PoolConfigurator;
use crate::values::StateConfig;
use kvbudget_core::batch::{
    self, Batch, BatchOutputs, Budgets, Buffers, Column, ColumnData, StateBatch, StateColumn,
    Threads,
};
use kvbudget_core::fields::{FieldInfo, ScenarioField, Value, ValueType};
use kvbudget_core::Scenario;
use numpy::{
    Element, IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadwriteArray1,
    PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

/// Rows from which the GIL is released while planning.
pub const DETACH_ROWS: usize = 4096;

/// `threads=None`: one per available core for large batches; else at most that many.
fn thread_policy(threads: Option<i64>) -> Result<Threads> {
    match threads {
        None => Ok(Threads::Auto),
        Some(t) if t >= 1 => Ok(Threads::Fixed(usize::try_from(t).unwrap_or(usize::MAX))),
        Some(t) => Err(invalid(format!("threads must be >= 1 or None, got {t}"))),
    }
}

/// Runs `f` with the GIL released when `rows >= DETACH_ROWS` (see the module doc).
pub fn without_gil<T: Send>(py: Python<'_>, rows: usize, f: impl FnOnce() -> T + Send) -> T {
    if rows >= DETACH_ROWS {
        py.detach(f)
    } else {
        f()
    }
}

type Out<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u8>>,
);

/// The output arrays: fresh vectors, or the caller's arrays written in place.
enum Outputs<'py> {
    Fresh(Buffers),
    Given(
        [PyReadwriteArray1<'py, i64>; 3],
        PyReadwriteArray1<'py, u8>,
        Out<'py>,
    ),
}

fn writable<'py, T: Element>(
    o: &Bound<'py, PyAny>,
    k: usize,
) -> Result<(PyReadwriteArray1<'py, T>, Bound<'py, PyArray1<T>>)> {
    let arr = o.cast::<PyArray1<T>>().map_err(|_| {
        type_error(format!(
            "out[{k}] must be a 1-D numpy array of {}",
            if k == 3 { "uint8" } else { "int64" }
        ))
    })?;
    let rw = arr
        .try_readwrite()
        .map_err(|_| invalid(format!("out[{k}] is not writable or is borrowed")))?;
    if !rw.is_c_contiguous() {
        return Err(invalid(format!("out[{k}] must be contiguous")));
    }
    Ok((rw, arr.clone()))
}

impl<'py> Outputs<'py> {
    fn new(n: usize, out: Option<&Bound<'py, PyTuple>>) -> Result<Self> {
        let Some(out) = out else {
            return Ok(Self::Fresh(Buffers::new(n)));
        };
        if out.len() != 4 {
            return Err(type_error("out must be a tuple of 4 arrays"));
        }
        let (a, a_) = writable::<i64>(&out.get_item(0)?, 0)?;
        let (b, b_) = writable::<i64>(&out.get_item(1)?, 1)?;
        let (c, c_) = writable::<i64>(&out.get_item(2)?, 2)?;
        let (s, s_) = writable::<u8>(&out.get_item(3)?, 3)?;
        for (k, len) in [a.len(), b.len(), c.len(), s.len()].into_iter().enumerate() {
            if len != n {
                return Err(invalid(format!("out[{k}] has {len} rows, the batch {n}")));
            }
        }
        Ok(Self::Given([a, b, c], s, (a_, b_, c_, s_)))
    }

    fn views(&mut self) -> Result<BatchOutputs<'_>> {
        Ok(match self {
            Self::Fresh(b) => b.views(),
            Self::Given([a, b, c], s, _) => BatchOutputs {
                max_total_num_tokens: a
                    .as_slice_mut()
                    .map_err(|_| invalid("out[0] must be contiguous"))?,
                full_max_total_num_tokens: b
                    .as_slice_mut()
                    .map_err(|_| invalid("out[1] must be contiguous"))?,
                swa_max_total_num_tokens: c
                    .as_slice_mut()
                    .map_err(|_| invalid("out[2] must be contiguous"))?,
                status: s
                    .as_slice_mut()
                    .map_err(|_| invalid("out[3] must be contiguous"))?,
            },
        })
    }

    fn into_py(self, py: Python<'py>) -> Out<'py> {
        match self {
            // Small batches are copied into arrays numpy owns (one object each); large ones
            // hand their vectors over (no copy, one more object each, the vector's owner).
            Self::Fresh(b) if b.status.len() < DETACH_ROWS => (
                PyArray1::from_slice(py, &b.max_total_num_tokens),
                PyArray1::from_slice(py, &b.full_max_total_num_tokens),
                PyArray1::from_slice(py, &b.swa_max_total_num_tokens),
                PyArray1::from_slice(py, &b.status),
            ),
            Self::Fresh(b) => (
                b.max_total_num_tokens.into_pyarray(py),
                b.full_max_total_num_tokens.into_pyarray(py),
                b.swa_max_total_num_tokens.into_pyarray(py),
                b.status.into_pyarray(py),
            ),
            Self::Given(_, _, arrays) => arrays,
        }
    }
}

/// A readonly contiguous array of one cell type.
enum Held<'py> {
    I64(PyReadonlyArray1<'py, i64>),
    I32(PyReadonlyArray1<'py, i32>),
    F64(PyReadonlyArray1<'py, f64>),
    Bool(PyReadonlyArray1<'py, bool>),
    U8(PyReadonlyArray1<'py, u8>),
}

fn contiguous<'a, T: Element>(name: &str, a: &'a PyReadonlyArray1<'_, T>) -> Result<&'a [T]> {
    a.as_slice()
        .map_err(|_| invalid(format!("plan_many: column {name} must be contiguous")))
}

impl<'py> Held<'py> {
    fn extract(name: &str, dtype: &str, v: &Bound<'py, PyAny>) -> Result<Self> {
        let want = if dtype == "int64" {
            "int64 or int32"
        } else {
            dtype
        };
        let bad = || {
            type_error(format!(
                "plan_many: column {name} must be a 1-D {want} numpy array"
            ))
        };
        Ok(match dtype {
            // An int64 field also takes int32 cells (read in place, widened by the kernel).
            "int64" => match v.extract() {
                Ok(a) => Self::I64(a),
                Err(_) => Self::I32(v.extract().map_err(|_| bad())?),
            },
            "float64" => Self::F64(v.extract().map_err(|_| bad())?),
            "bool" => Self::Bool(v.extract().map_err(|_| bad())?),
            "uint8" => Self::U8(v.extract().map_err(|_| bad())?),
            _ => return Err(bad()),
        })
    }

    fn data(&self, name: &str) -> Result<ColumnData<'_>> {
        Ok(match self {
            Self::I64(a) => ColumnData::I64(contiguous(name, a)?),
            Self::I32(a) => ColumnData::I32(contiguous(name, a)?),
            Self::F64(a) => ColumnData::F64(contiguous(name, a)?),
            Self::Bool(a) => ColumnData::Bool(contiguous(name, a)?),
            Self::U8(a) => ColumnData::U8(contiguous(name, a)?),
        })
    }
}

fn field_of(name: &Bound<'_, PyAny>) -> Result<ScenarioField> {
    let name = name
        .cast::<PyString>()
        .map_err(|_| type_error("plan_many: column names must be strings"))?;
    let name = name.to_str()?;
    ScenarioField::from_name(name)
        .filter(|f| f.info().batch)
        .ok_or_else(|| {
            type_error(format!(
                "plan_many() got an unexpected keyword argument '{name}'"
            ))
        })
}

/// A value type's base from the scalar inputs (each checked as the scalar constructors
/// check it; the first bad one's status, which makes every row invalid).
fn base_of<T>(
    mut base: T,
    scalars: &Bound<'_, PyDict>,
    field: impl Fn(&Bound<'_, PyAny>) -> Result<&'static FieldInfo>,
    set: impl Fn(&mut T, &str, Value<'_>) -> kvbudget_core::Result<bool>,
) -> Result<(T, u8)> {
    let mut status = batch::STATUS_OK;
    for (k, v) in scalars.iter() {
        let info = field(&k)?;
        let value = crate::convert::to_value("plan_many", info, &v)?;
        if let Err(e) = set(&mut base, info.name, value) {
            if status == batch::STATUS_OK {
                status = e.code.status();
            }
        }
    }
    Ok((base, status))
}

/// The held arrays of `columns`, by field.
fn held_columns<'py>(
    columns: &Bound<'py, PyDict>,
    field: impl Fn(&Bound<'_, PyAny>) -> Result<&'static FieldInfo>,
) -> Result<Vec<(&'static FieldInfo, Held<'py>)>> {
    columns
        .iter()
        .map(|(k, v)| {
            let info = field(&k)?;
            Ok((info, Held::extract(info.name, info.cell_dtype, &v)?))
        })
        .collect()
}

/// The budgets: an int, or a held int64 array.
fn budgets_of<'py>(
    available_bytes: &Bound<'py, PyAny>,
) -> Result<Option<PyReadonlyArray1<'py, i64>>> {
    if available_bytes.is_instance_of::<pyo3::types::PyInt>() {
        return Ok(None);
    }
    Ok(Some(available_bytes.extract().map_err(|_| {
        type_error("plan_many: available_bytes must be an int or a 1-D int64 numpy array")
    })?))
}

fn budgets<'a>(
    available_bytes: &Bound<'_, PyAny>,
    held: Option<&'a PyReadonlyArray1<'_, i64>>,
) -> Result<Budgets<'a>> {
    Ok(match held {
        Some(a) => Budgets::Array(contiguous("available_bytes", a)?),
        None => Budgets::Scalar(available_bytes.extract()?),
    })
}

fn scenario_info(k: &Bound<'_, PyAny>) -> Result<&'static FieldInfo> {
    Ok(field_of(k)?.info())
}

fn scenario_columns<'a>(held: &'a [(&'static FieldInfo, Held<'_>)]) -> Result<Vec<Column<'a>>> {
    held.iter()
        .map(|(info, h)| {
            let field = ScenarioField::from_name(info.name).ok_or_else(|| invalid(info.name))?;
            Ok(Column {
                field,
                data: h.data(info.name)?,
            })
        })
        .collect()
}

/// Plans every row (see `kvbudget.plan_many`): `scalars` make the base
/// scenario (each checked as the scalar constructors check it; a bad one
/// makes every row invalid), `columns` hold one contiguous array per varying
/// field in its field's dtype. Returns `(max_total, full, swa, status)`.
#[pyfunction]
#[pyo3(signature = (available_bytes, scalars, columns, out=None, threads=None))]
pub fn _plan_many<'py>(
    py: Python<'py>,
    available_bytes: &Bound<'py, PyAny>,
    scalars: &Bound<'py, PyDict>,
    columns: &Bound<'py, PyDict>,
    out: Option<&Bound<'py, PyTuple>>,
    threads: Option<i64>,
) -> Result<Out<'py>> {
    let (base, base_status) = base_of(Scenario::default(), scalars, scenario_info, Scenario::set)?;
    let held = held_columns(columns, scenario_info)?;
    let cols = scenario_columns(&held)?;
    let budgets_held = budgets_of(available_bytes)?;
    let batch = Batch {
        base,
        base_status,
        available_bytes: budgets(available_bytes, budgets_held.as_ref())?,
        columns: &cols,
        threads: thread_policy(threads)?,
    };
    let n = batch.rows()?;
    let mut outputs = Outputs::new(n, out)?;
    {
        let mut views = outputs.views()?;
        without_gil(py, n, || batch::plan_many(&batch, &mut views))?;
    }
    Ok(outputs.into_py(py))
}

fn state_info(k: &Bound<'_, PyAny>) -> Result<&'static FieldInfo> {
    let name = k
        .cast::<PyString>()
        .map_err(|_| type_error("plan_many: column names must be strings"))?;
    let name = name.to_str()?;
    <kvbudget_core::StateConfig as ValueType>::FIELDS
        .iter()
        .find(|f| f.name == name && f.batch)
        .ok_or_else(|| {
            type_error(format!(
                "plan_many() got an unexpected keyword argument '{name}'"
            ))
        })
}

/// [`_plan_many`] with a hybrid-state model's state: `state` is the base every row
/// starts from, `state_scalars` / `state_columns` its fields that are given / vary
/// (see the core's `plan_many_with_state`). Returns the four arrays and each row's
/// `max_mamba_cache_size` (-1 for a failed row). Runs on the calling thread.
#[pyfunction]
#[pyo3(signature = (available_bytes, scalars, columns, state, state_scalars, state_columns, out=None))]
#[allow(clippy::too_many_arguments)]
pub fn _plan_many_state<'py>(
    py: Python<'py>,
    available_bytes: &Bound<'py, PyAny>,
    scalars: &Bound<'py, PyDict>,
    columns: &Bound<'py, PyDict>,
    state: &StateConfig,
    state_scalars: &Bound<'py, PyDict>,
    state_columns: &Bound<'py, PyDict>,
    out: Option<&Bound<'py, PyTuple>>,
) -> Result<(Out<'py>, Bound<'py, PyArray1<i64>>)> {
    let (base, base_status) = base_of(Scenario::default(), scalars, scenario_info, Scenario::set)?;
    let held = held_columns(columns, scenario_info)?;
    let cols = scenario_columns(&held)?;
    let (state_base, state_status) = base_of(
        state.0,
        state_scalars,
        state_info,
        kvbudget_core::StateConfig::set,
    )?;
    let state_held = held_columns(state_columns, state_info)?;
    let state_cols = state_held
        .iter()
        .map(|(info, h)| Ok(StateColumn::new(info.name, h.data(info.name)?)?))
        .collect::<Result<Vec<_>>>()?;
    let budgets_held = budgets_of(available_bytes)?;
    let batch = Batch {
        base,
        base_status,
        available_bytes: budgets(available_bytes, budgets_held.as_ref())?,
        columns: &cols,
        threads: Threads::Fixed(1),
    };
    let state_batch = StateBatch {
        base: state_base,
        base_status: state_status,
        columns: &state_cols,
    };
    let scenario_rows = batch.rows()?;
    let arrays = !cols.is_empty() || budgets_held.is_some();
    let n = match state_cols.first() {
        Some(c) if !arrays => c.data.len(),
        _ => scenario_rows,
    };
    let mut outputs = Outputs::new(n, out)?;
    let mut slots = vec![0i64; n];
    {
        let mut views = outputs.views()?;
        without_gil(py, n, || {
            batch::plan_many_with_state(&batch, &state_batch, &mut views, &mut slots)
        })?;
    }
    Ok((outputs.into_py(py), slots.into_pyarray(py)))
}

#[pymethods]
impl PoolConfigurator {
    /// `calculate_pool_sizes` for many budgets (one setup): `(max_total, full, swa, status)` arrays.
    #[pyo3(name = "_calculate_pool_sizes_many", signature = (available_bytes, out=None, threads=None))]
    fn calculate_pool_sizes_many<'py>(
        &self,
        py: Python<'py>,
        available_bytes: PyReadonlyArray1<'py, i64>,
        out: Option<&Bound<'py, PyTuple>>,
        threads: Option<i64>,
    ) -> Result<Out<'py>> {
        let a = contiguous("available_bytes", &available_bytes)?;
        let threads = thread_policy(threads)?;
        let mut outputs = Outputs::new(a.len(), out)?;
        {
            let mut views = outputs.views()?;
            let sizing = self.0.sizing();
            without_gil(py, a.len(), || {
                sizing.calculate_pool_sizes_many(a, &mut views, threads)
            })?;
        }
        Ok(outputs.into_py(py))
    }
}

/// The instruction set the batch fast path runs on (the core's `simd_level`).
#[pyfunction]
pub fn simd_level() -> &'static str {
    kvbudget_core::batch::simd_level()
}

/// The batch codes of `names` for the choice field `field` (the core's
/// `FromStr` parses names and aliases); an unknown name gets code 255, an
/// invalid row.
#[pyfunction]
pub fn _choice_codes(field: &str, names: Vec<String>) -> Result<Vec<u16>> {
    // u16, not u8: PyO3 turns a Vec<u8> into bytes.
    if let Some(info) = <kvbudget_core::StateConfig as ValueType>::FIELDS
        .iter()
        .find(|f| f.name == field && !f.choices.is_empty())
    {
        return Ok(names
            .iter()
            .map(|s| u16::from(state_code(info, s)))
            .collect());
    }
    let f = ScenarioField::from_name(field)
        .filter(|f| !f.info().choices.is_empty())
        .ok_or_else(|| invalid(format!("{field} is not a choice field")))?;
    Ok(names
        .iter()
        .map(|s| u16::from(f.code(s).unwrap_or(u8::MAX)))
        .collect())
}

/// The batch code of the name `s` of a `StateConfig` choice field: its setter parses it, the
/// code is the canonical name's place among the choices (255 for an unknown name).
fn state_code(info: &FieldInfo, s: &str) -> u8 {
    let mut st = kvbudget_core::StateConfig::default();
    match st.set(info.name, Value::Str(s)) {
        Ok(true) => st
            .get(info.name)
            .and_then(|v| match v {
                Value::Str(c) => info.choices.iter().position(|x| *x == c),
                _ => None,
            })
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(u8::MAX),
        _ => u8::MAX,
    }
}

/// The canonical name of `name` for the choice field `field` (the core's
/// `FromStr` parses names and aliases); an unknown name is an `InvalidConfigError`.
#[pyfunction]
pub fn _canonical_name(field: &str, name: &str) -> Result<&'static str> {
    let f = ScenarioField::from_name(field)
        .filter(|f| !f.info().choices.is_empty())
        .ok_or_else(|| invalid(format!("{field} is not a choice field")))?;
    Ok(f.info().choices[usize::from(f.code(name)?)])
}
