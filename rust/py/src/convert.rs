//! Conversions between Python objects and the field table's [`Value`]s, and
//! the table-driven pieces every value type shares: binding constructor
//! arguments (Python call semantics), `replace`, reprs, and `FIELDS`.
//!
//! Type mapping (by [`PyRepr`]): `Int` is a Python `int` (not a `bool`) that
//! fits an i64; `OptInt` adds `None`; `Float` is a `float` or `int`; `Bool`
//! a `bool` (numpy's too); `Name`/`OptName` a `str` or `None` (`None` meaning
//! the default); `Draft` a `DraftGeometry` or `None`. A wrong type is a
//! `TypeError`; an integer beyond i64 an `OverflowError`; a value out of
//! range a `kvbudget.InvalidConfigError`.

use crate::errors::{type_error, Result};
use kvbudget_core::fields::{FieldInfo, PyRepr, Value, ValueType};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

/// The [`Value`] a Python object stands for in field `f` of type `owner`.
pub fn to_value<'a>(owner: &str, f: &FieldInfo, obj: &'a Bound<'_, PyAny>) -> Result<Value<'a>> {
    let bad = |want: &str| {
        type_error(format!(
            "{owner}: {} must be {want}, got {}",
            f.name,
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    };
    // Python's bool, or numpy's `bool_` (by name: numpy is not imported here). The name is
    // looked up only for objects that are neither an exact int nor an exact float.
    let is_bool = obj.is_instance_of::<PyBool>()
        || (!obj.is_exact_instance_of::<PyInt>()
            && !obj.is_exact_instance_of::<PyFloat>()
            && obj.get_type().name().is_ok_and(|n| n == "bool_"));
    Ok(match f.py {
        PyRepr::Int | PyRepr::OptInt => {
            if obj.is_none() && f.py == PyRepr::OptInt {
                Value::None
            } else if is_bool || obj.is_instance_of::<PyFloat>() || obj.is_instance_of::<PyString>()
            {
                return Err(bad(if f.py == PyRepr::Int {
                    "an int"
                } else {
                    "an int or None"
                }));
            } else {
                // PyO3 takes any integer (numpy's too, via __index__); beyond i64: OverflowError.
                Value::Int(i128::from(obj.extract::<i64>().map_err(|e| {
                    if obj.is_instance_of::<PyInt>() || obj.hasattr("__index__").unwrap_or(false) {
                        crate::errors::Error::Py(e)
                    } else {
                        bad("an int")
                    }
                })?))
            }
        }
        PyRepr::Float => {
            if is_bool {
                return Err(bad("a number"));
            }
            Value::Float(obj.extract::<f64>().map_err(|_| bad("a number"))?)
        }
        PyRepr::Bool => Value::Bool(obj.extract::<bool>().map_err(|_| bad("a bool"))?),
        PyRepr::Name | PyRepr::OptName => {
            if obj.is_none() {
                Value::None
            } else {
                let s = obj.cast::<PyString>().map_err(|_| bad("a str"))?;
                Value::Str(s.to_str()?)
            }
        }
        PyRepr::Draft => {
            if obj.is_none() {
                Value::None
            } else {
                let d = obj
                    .extract::<crate::values::DraftGeometry>()
                    .map_err(|_| bad("a DraftGeometry or None"))?;
                Value::Draft(d.0)
            }
        }
    })
}

/// A [`Value`] as a Python object.
pub fn to_py<'py>(py: Python<'py>, v: Value<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::None => py.None().into_bound(py),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(x) => x.into_pyobject(py)?.into_any(),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Draft(d) => Bound::new(py, crate::values::DraftGeometry(d))?.into_any(),
    })
}

/// Binds `args`/`kwargs` to `params` as a Python call would: positionals in
/// order, then keywords; a parameter given twice, an unknown keyword, too many
/// positionals or a missing required parameter is a `TypeError`. Returns the
/// given parameters in `params` order.
pub fn bind<'py>(
    owner: &str,
    params: &[(&'static str, bool)],
    args: &Bound<'py, PyTuple>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> Result<Vec<(&'static str, Bound<'py, PyAny>)>> {
    if args.len() > params.len() {
        return Err(type_error(format!(
            "{owner}() takes at most {} positional arguments ({} given)",
            params.len(),
            args.len()
        )));
    }
    let mut slots: Vec<Option<Bound<'py, PyAny>>> = vec![None; params.len()];
    for (slot, a) in slots.iter_mut().zip(args.iter()) {
        *slot = Some(a);
    }
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            let key = k
                .cast::<PyString>()
                .map_err(|_| type_error("keywords must be strings"))?;
            let key = key.to_str()?;
            let Some(i) = params.iter().position(|(p, _)| *p == key) else {
                return Err(type_error(format!(
                    "{owner}() got an unexpected keyword argument '{key}'"
                )));
            };
            if slots[i].is_some() {
                return Err(type_error(format!(
                    "{owner}() got multiple values for argument '{key}'"
                )));
            }
            slots[i] = Some(v);
        }
    }
    let mut out = Vec::with_capacity(params.len());
    for ((name, required), slot) in params.iter().zip(slots) {
        match slot {
            Some(v) => out.push((*name, v)),
            None if *required => {
                return Err(type_error(format!(
                    "{owner}() missing required argument '{name}'"
                )))
            }
            None => {}
        }
    }
    Ok(out)
}

/// The constructor parameters of `T`: its fields minus `skip`, required first as declared.
pub fn params<T: ValueType>(skip: &[&str]) -> Vec<(&'static str, bool)> {
    T::FIELDS
        .iter()
        .filter(|f| !skip.contains(&f.name))
        .map(|f| (f.name, f.required))
        .collect()
}

/// The field `name` of `T`.
pub fn field<T: ValueType>(name: &str) -> Option<&'static FieldInfo> {
    T::FIELDS.iter().find(|f| f.name == name)
}

/// Sets each bound argument on `v` (each checked on its own).
pub fn apply<T: ValueType>(v: &mut T, bound: &[(&'static str, Bound<'_, PyAny>)]) -> Result<()> {
    for (name, obj) in bound {
        let Some(f) = field::<T>(name) else {
            return Err(type_error(format!("{}: no field {name:?}", T::NAME)));
        };
        v.set(name, to_value(T::NAME, f, obj)?)?;
    }
    Ok(())
}

/// `kwargs` as (field name, value) pairs of `T`, unknown names a `TypeError`
/// (`replace`'s keywords; `extra` names the caller handles itself).
pub fn changes<'py>(
    owner: &str,
    names: &[&'static str],
    kwargs: Option<&Bound<'py, PyDict>>,
) -> Result<Vec<(&'static str, Bound<'py, PyAny>)>> {
    let mut out = Vec::new();
    for (k, v) in kwargs.into_iter().flat_map(PyDictMethods::iter) {
        let key = k
            .cast::<PyString>()
            .map_err(|_| type_error("keywords must be strings"))?;
        let key = key.to_str()?;
        let Some(name) = names.iter().find(|n| **n == key) else {
            return Err(type_error(format!(
                "{owner}.replace() got an unexpected keyword argument '{key}'"
            )));
        };
        out.push((*name, v));
    }
    Ok(out)
}

/// `name=repr(value)` for each field of `v` (minus `skip`), Python reprs.
pub fn repr_fields<T: ValueType>(py: Python<'_>, v: &T, skip: &[&str]) -> PyResult<Vec<String>> {
    T::FIELDS
        .iter()
        .filter(|f| !skip.contains(&f.name))
        .map(|f| {
            let value = v.get(f.name).unwrap_or(Value::None);
            Ok(format!("{}={}", f.name, to_py(py, value)?.repr()?))
        })
        .collect()
}

/// One field table row as a dict (what `kvbudget.fields` reads).
fn field_dict<'py>(py: Python<'py>, f: &FieldInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", f.name)?;
    d.set_item("owner", f.owner)?;
    d.set_item("kind", f.kind)?;
    d.set_item(
        "py",
        match f.py {
            PyRepr::Int => "int",
            PyRepr::OptInt => "opt_int",
            PyRepr::Float => "float",
            PyRepr::Bool => "bool",
            PyRepr::Name => "name",
            PyRepr::OptName => "opt_name",
            PyRepr::Draft => "draft",
        },
    )?;
    d.set_item("batch", f.batch)?;
    d.set_item("cell_dtype", f.cell_dtype)?;
    d.set_item("choices", PyTuple::new(py, f.choices)?)?;
    d.set_item("required", f.required)?;
    let doc: Vec<&str> = f
        .doc
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    d.set_item("doc", doc.join("\n"))?;
    d.set_item("default", to_py(py, (f.default)())?)?;
    Ok(d)
}

/// `FIELDS`: owner type name -> tuple of field dicts, in declaration order.
pub fn fields_table(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use kvbudget_core::fields as f;
    let out = PyDict::new(py);
    for (owner, table) in [
        (f::AttentionShape::NAME, f::AttentionShape::FIELDS),
        (f::ServingConfig::NAME, f::ServingConfig::FIELDS),
        (f::SpeculativeConfig::NAME, f::SpeculativeConfig::FIELDS),
        (f::DraftGeometry::NAME, f::DraftGeometry::FIELDS),
        (f::MemoryPoolConfig::NAME, f::MemoryPoolConfig::FIELDS),
        (f::StateConfig::NAME, f::StateConfig::FIELDS),
    ] {
        let rows = table
            .iter()
            .map(|x| field_dict(py, x))
            .collect::<PyResult<Vec<_>>>()?;
        out.set_item(owner, PyTuple::new(py, rows)?)?;
    }
    Ok(out)
}
