//! vLLM mode: the core's planner, typed at the boundary. Layers are converted once into a
//! [`VllmLayers`] handle (re-planning the same model converts nothing), engine settings are
//! read from the `EngineConfig` object by the declaration's names, and the result stays a
//! native [`VllmResult`] until Python asks for its parts. The JSON forms
//! (`kvbudget_core::vllm::json`, [`_vllm_plan`]) remain the oracle's and the CLI's.

use crate::errors::{invalid, type_error, Result};
use kvbudget_core::vllm::json::result_to_json;
use kvbudget_core::vllm::{ErrorKind, Record, VllmEngine, VllmError, VllmLayer, VllmPlan};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PySequence, PyString, PyTuple};
use serde_json::Value;
use std::sync::Arc;

/// The JSON value of a Python setting (None, bool, int, float, str, or a list or tuple of
/// them): the form the declaration's setting kinds read ([`Record::set_json`]).
fn py_to_value(obj: &Bound<'_, PyAny>, what: &str, field: &str) -> Result<Value> {
    Ok(if obj.is_none() {
        Value::Null
    } else if obj.is_instance_of::<PyBool>() {
        Value::Bool(obj.extract()?)
    } else if obj.is_instance_of::<PyInt>() {
        match obj.extract::<i64>() {
            Ok(v) => Value::from(v),
            Err(_) => Value::from(obj.extract::<u64>()?),
        }
    } else if obj.is_instance_of::<PyFloat>() {
        Value::from(obj.extract::<f64>()?)
    } else if let Ok(s) = obj.cast::<PyString>() {
        Value::String(s.to_str()?.to_owned())
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let items = obj.cast::<PySequence>().map_err(PyErr::from)?;
        Value::Array(
            items
                .try_iter()?
                .map(|x| py_to_value(&x?, what, field))
                .collect::<Result<_>>()?,
        )
    } else {
        return Err(type_error(format!(
            "{what}: {field}: expected None, a bool, an int, a float, a str or a list of them, got {}",
            obj.get_type().name()?
        )));
    })
}

/// The Python value of a JSON value (the result's parts, as the JSON path gives them).
fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => PyList::new(
            py,
            a.iter()
                .map(|x| value_to_py(py, x))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, value_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A record from a Python object's attributes named by the declaration (`None` leaves a
/// setting at its default, as the JSON form's absent key does). `Ok(Err(message))`: the
/// declaration refuses a value (`prefix` + its message, the JSON path's text).
fn record_from_attrs<R: Record>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    prefix: &str,
) -> Result<std::result::Result<R, String>> {
    let mut out = R::default();
    for s in R::SETTINGS {
        let v = obj.getattr(s.name)?;
        if v.is_none() {
            if s.required {
                return Ok(Err(format!("{prefix}missing field {}", s.name)));
            }
            continue;
        }
        if let Err(m) = out.set_json(s.name, &py_to_value(&v, what, s.name)?) {
            return Ok(Err(format!("{prefix}{m}")));
        }
    }
    Ok(Ok(out))
}

/// A model's layers converted once (`kvbudget.vllm.Layers`): plans reuse them as they are.
#[pyclass(module = "kvbudget.vllm", name = "Layers", frozen, sequence)]
pub struct VllmLayers(Arc<Vec<VllmLayer>>);

#[pymethods]
impl VllmLayers {
    /// From `LayerSpec` objects (any object with the declared layer fields as attributes).
    #[new]
    fn new(layers: &Bound<'_, PyAny>) -> Result<Self> {
        let mut out = Vec::new();
        for x in layers.try_iter()? {
            out.push(record_from_attrs::<VllmLayer>(&x?, "layers", "layers: ")?.map_err(invalid)?);
        }
        Ok(Self(Arc::new(out)))
    }
    fn __len__(&self) -> usize {
        self.0.len()
    }
    fn __repr__(&self) -> String {
        format!("Layers(<{} layers>)", self.0.len())
    }
}

/// One plan or failure, held natively; Python reads its parts as it needs them.
#[pyclass(module = "kvbudget.vllm", frozen)]
pub struct VllmResult(Arc<std::result::Result<VllmPlan, VllmError>>);

fn log_tuples<'py>(
    py: Python<'py>,
    log: &[kvbudget_core::vllm::LogLine],
) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        log.iter()
            .map(|l| (l.level.as_str(), l.message.as_str()))
            .collect::<Vec<_>>(),
    )
}

#[pymethods]
impl VllmResult {
    #[getter]
    fn ok(&self) -> bool {
        self.0.is_ok()
    }
    /// The failure `(error_type, message, estimated_max_model_len, is_startup)`; None for a
    /// plan.
    fn failure(&self) -> Option<(String, String, Option<u64>, bool)> {
        let e = self.0.as_ref().as_ref().err()?;
        let kind = serde_json::to_value(e.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        Some((
            kind,
            e.message.clone(),
            e.estimated_max_model_len,
            e.is_startup(),
        ))
    }
    /// The plan's small parts in `VllmPlan`'s field order: num_blocks, max_model_len,
    /// bytes_per_block, per_request_bytes, allocated_bytes, blocks_per_request,
    /// max_concurrency, kv_cache_size_tokens, kv_tp_replicas, cache_block_size, warnings,
    /// log, and the state layers' configuration `(mamba_cache_mode, block_size,
    /// mamba_block_size, mamba_page_size_padded)` or None. None for a failure.
    fn head<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let Ok(p) = self.0.as_ref() else {
            return Ok(None);
        };
        let per_worker = |f: fn(&kvbudget_core::vllm::VllmWorker) -> u64| {
            PyTuple::new(py, p.workers.iter().map(f))
        };
        let items: Vec<Bound<'py, PyAny>> = vec![
            p.num_blocks.into_pyobject(py)?.into_any(),
            p.max_model_len.into_pyobject(py)?.into_any(),
            per_worker(|w| w.bytes_per_block)?.into_any(),
            per_worker(|w| w.per_request_bytes)?.into_any(),
            per_worker(|w| w.allocated_bytes)?.into_any(),
            PyTuple::new(py, &p.blocks_per_request)?.into_any(),
            p.max_concurrency.into_pyobject(py)?.into_any(),
            p.kv_cache_size_tokens.into_pyobject(py)?.into_any(),
            p.kv_tp_replicas.into_pyobject(py)?.into_any(),
            p.cache_block_size.into_pyobject(py)?.into_any(),
            PyTuple::new(py, &p.warnings)?.into_any(),
            log_tuples(py, &p.log)?.into_any(),
            match &p.mamba {
                None => py.None().into_bound(py),
                Some(a) => (
                    a.mamba_cache_mode.name(),
                    a.block_size,
                    a.mamba_block_size,
                    a.mamba_page_size_padded,
                )
                    .into_pyobject(py)?
                    .into_any(),
            },
        ];
        Ok(Some(PyTuple::new(py, items)?))
    }
    /// The whole result as the JSON path's dict (`kvbudget.vllm.plan_raw`'s form).
    fn raw<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        value_to_py(py, &result_to_json(&self.0))
    }
}

/// Plans `layers` (a [`VllmLayers`]) with `available` bytes (an int, or one per stage or
/// worker) and the settings of `engine` (an `EngineConfig`: its attributes named by the
/// declaration).
#[pyfunction]
pub fn _vllm_plan_typed(
    layers: &VllmLayers,
    available: &Bound<'_, PyAny>,
    engine: &Bound<'_, PyAny>,
) -> Result<VllmResult> {
    let available: Vec<i64> = if available.is_instance_of::<PyInt>() {
        vec![available.extract()?]
    } else {
        available.extract()?
    };
    let result = match record_from_attrs::<VllmEngine>(engine, "engine", "engine ")? {
        Ok(engine) => kvbudget_core::vllm::plan(&layers.0, &available, &engine),
        Err(message) => Err(VllmError {
            kind: ErrorKind::Input,
            message,
            estimated_max_model_len: None,
            log: Vec::new(),
        }),
    };
    Ok(VllmResult(Arc::new(result)))
}

/// Plans one request `{"layers", "available", "engine"}` (JSON text); returns the
/// plan or the failure as JSON text. Runs without the GIL (the input is a copied string).
#[pyfunction]
pub fn _vllm_plan(py: Python<'_>, request: &str) -> Result<String> {
    let value: serde_json::Value =
        serde_json::from_str(request).map_err(|e| invalid(format!("vLLM plan request: {e}")))?;
    Ok(py.detach(|| kvbudget_core::vllm::json::plan_json(&value).to_string()))
}

/// The vLLM declaration (`kvbudget_core::vllm::settings`): the release, and every
/// layer field and engine setting with its type, default, unit, flag and doc, as JSON text.
#[pyfunction]
pub fn _vllm_settings() -> String {
    kvbudget_core::vllm::settings::settings_json().to_string()
}

/// A state layer's tensor shapes on one rank as vLLM 0.33.0's `MambaStateShapeCalculator`
/// builds them (`kvbudget_core::vllm::state_shape`): `family` is `"gated_delta_net"` (`dims`:
/// tp, num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel, num_spec) or `"mamba2"`
/// (tp, intermediate_size, n_groups, num_heads, head_dim, state_size, conv_kernel, num_spec) or
/// `"short_conv"` (tp, intermediate_size, conv_kernel, num_spec) or `"mamba1"` (tp,
/// intermediate_size, state_size, conv_kernel) or `"kda"` (tp, num_heads, head_dim, conv_kernel,
/// num_spec).
#[pyfunction]
pub fn _vllm_state_shapes(family: &str, dims: Vec<u64>) -> Result<Vec<Vec<u64>>> {
    use kvbudget_core::vllm::state_shape;
    let shapes = match (family, dims.as_slice()) {
        ("gated_delta_net", &[tp, nk, nv, dk, dv, k, s]) => {
            state_shape::gated_delta_net(tp, nk, nv, dk, dv, k, s)
        }
        ("mamba2", &[tp, i, g, h, hd, ds, k, s]) => state_shape::mamba2(tp, i, g, h, hd, ds, k, s),
        ("mamba2_replayssm", &[tp, i, g, h, hd, ds, k, s, window, flashinfer]) => {
            state_shape::mamba2(tp, i, g, h, hd, ds, k, s).and_then(|base| {
                state_shape::replayssm_ring(base, g, tp, window, flashinfer != 0, s)
            })
        }
        ("short_conv", &[tp, i, k, s]) => state_shape::short_conv(tp, i, k, s),
        ("mamba1", &[tp, i, ds, k]) => state_shape::mamba1(tp, i, ds, k),
        ("kda", &[tp, h, d, k, s]) => state_shape::kda(tp, h, d, k, s),
        _ => {
            return Err(invalid(format!(
                "state family {family:?} with {} dims",
                dims.len()
            )))
        }
    };
    shapes.map_err(|e| invalid(format!("vLLM state shape: {}", e.message)))
}

/// The outputs of [`_vllm_plan_many`]: num_blocks, max_model_len, max_concurrency,
/// kv_cache_size_tokens, status.
type BatchArrays<'py> = (
    Bound<'py, numpy::PyArray1<u64>>,
    Bound<'py, numpy::PyArray1<u64>>,
    Bound<'py, numpy::PyArray1<f64>>,
    Bound<'py, numpy::PyArray1<u64>>,
    Bound<'py, numpy::PyArray1<u8>>,
);

/// vLLM 0.33.0's plan of one model for every row of `available` (bytes for every worker)
/// and, where given, `max_model_len` (tokens per row): `kvbudget_core::vllm::batch`. An
/// engine the declaration refuses makes every row an input failure.
#[pyfunction]
#[pyo3(signature = (layers, available, engine, max_model_len=None))]
pub fn _vllm_plan_many<'py>(
    py: Python<'py>,
    layers: &VllmLayers,
    available: numpy::PyReadonlyArray1<'py, i64>,
    engine: &Bound<'py, PyAny>,
    max_model_len: Option<numpy::PyReadonlyArray1<'py, u64>>,
) -> Result<BatchArrays<'py>> {
    use kvbudget_core::vllm::batch::{plan_many, VllmBatchOut, STATUS_INPUT};
    let available = available
        .as_slice()
        .map_err(|_| invalid("available_bytes must be contiguous"))?;
    let lengths = match &max_model_len {
        Some(m) => Some(
            m.as_slice()
                .map_err(|_| invalid("max_model_len must be contiguous"))?,
        ),
        None => None,
    };
    let n = available.len();
    let (mut blocks, mut lens, mut conc, mut tokens, mut status) = (
        vec![0u64; n],
        vec![0u64; n],
        vec![0f64; n],
        vec![0u64; n],
        vec![0u8; n],
    );
    match record_from_attrs::<VllmEngine>(engine, "engine", "engine ")? {
        Ok(e) => {
            let mut out = VllmBatchOut {
                num_blocks: &mut blocks,
                max_model_len: &mut lens,
                max_concurrency: &mut conc,
                kv_cache_size_tokens: &mut tokens,
                status: &mut status,
            };
            let layers = &layers.0;
            crate::batch::without_gil(py, n, || {
                plan_many(layers, &e, available, lengths, &mut out)
            })
            .map_err(invalid)?;
        }
        Err(_) => status.fill(STATUS_INPUT),
    }
    Ok((
        numpy::PyArray1::from_vec(py, blocks),
        numpy::PyArray1::from_vec(py, lens),
        numpy::PyArray1::from_vec(py, conc),
        numpy::PyArray1::from_vec(py, tokens),
        numpy::PyArray1::from_vec(py, status),
    ))
}
