//! The frozen value types: model geometry, draft geometry, serving and
//! speculative configs, pool sizes. Their constructors, `replace`, reprs and
//! getters all derive from the core's field declaration
//! (`kvbudget_core::for_each_value_type!`); nothing here lists a field.

use crate::convert::{apply, bind, params, repr_fields};
use crate::errors::{invalid, Result};
use kvbudget_core as core;
use kvbudget_core::fields::{Kind, ValueType};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Implements `to_json`, `_from_json`, `__reduce__` via serde.
macro_rules! json_value {
    ($ty:ident, $core:ty) => {
        json_value!($ty, $core, |v| kvbudget_core::fields::Resolve::resolved(v));
    };
    ($ty:ident, $core:ty, $check:expr) => {
        #[pymethods]
        impl $ty {
            /// The value as a JSON string.
            fn to_json(&self) -> crate::errors::Result<String> {
                serde_json::to_string(&self.0).map_err(|e| crate::errors::invalid(e.to_string()))
            }
            /// Rebuilds (and re-checks) a value from `to_json` output.
            #[classmethod]
            fn _from_json(_cls: &Bound<'_, PyType>, s: &str) -> crate::errors::Result<Self> {
                let v: $core = serde_json::from_str(s)
                    .map_err(|e| crate::errors::invalid(format!("malformed JSON: {e}")))?;
                let check: fn($core) -> kvbudget_core::Result<$core> = $check;
                Ok(Self(check(v)?))
            }
            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
                let py = slf.py();
                let ctor = slf.get_type().getattr("_from_json")?;
                let s = slf.get().to_json()?;
                PyTuple::new(py, [ctor.into_any(), PyTuple::new(py, [s])?.into_any()])
            }
        }
    };
}
pub(crate) use json_value;

/// The methods of a value type whose fields are exactly one declared type's
/// (the class itself, its docs and getters come from the declaration, below).
macro_rules! plain_value {
    ($ty:ident, $core:ty) => {
        #[pymethods]
        impl $ty {
            #[new]
            #[pyo3(signature = (*args, **kwargs))]
            fn new(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> Result<Self> {
                let bound = bind(<$core>::NAME, &params::<$core>(&[]), args, kwargs)?;
                let mut v = <$core>::default();
                apply(&mut v, &bound)?;
                Ok(Self(v.resolved()?))
            }
            /// A copy with the given fields changed (the others keep their values), re-checked.
            #[pyo3(signature = (**changes))]
            fn replace(&self, changes: Option<&Bound<'_, PyDict>>) -> Result<Self> {
                let names: Vec<&'static str> = <$core>::FIELDS.iter().map(|f| f.name).collect();
                let ch = crate::convert::changes(<$core>::NAME, &names, changes)?;
                let mut v = self.0;
                apply(&mut v, &ch)?;
                Ok(Self(v.resolved()?))
            }
            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                Ok(format!(
                    "{}({})",
                    <$core>::NAME,
                    repr_fields(py, &self.0, &[])?.join(", ")
                ))
            }
        }
        json_value!($ty, $core);
    };
}

plain_value!(ServingConfig, core::ServingConfig);
plain_value!(SpeculativeConfig, core::SpeculativeConfig);
plain_value!(DraftGeometry, core::DraftGeometry);
plain_value!(MemoryPoolConfig, core::MemoryPoolConfig);
plain_value!(StateConfig, core::StateConfig);

/// `__hash__` of an immutable value whose fields are all hashable.
macro_rules! hashable {
    ($($ty:ident),*) => {$(
        #[pymethods]
        impl $ty {
            fn __hash__(&self) -> u64 {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                self.0.hash(&mut h);
                h.finish()
            }
        }
    )*};
}
hashable!(DraftGeometry, MemoryPoolConfig);

#[pymethods]
impl DraftGeometry {
    /// The one rule for using a whole model as a (standalone) draft: see
    /// `kvbudget_core::DraftGeometry::from_model`.
    #[staticmethod]
    #[pyo3(signature = (model, num_layers=None, kv_cache_dtype=None))]
    fn from_model(
        model: &ModelGeometry,
        num_layers: Option<i64>,
        kv_cache_dtype: Option<&str>,
    ) -> Result<Self> {
        let num_layers = num_layers
            .map(|n| crate::errors::nonneg("num_layers", n))
            .transpose()?;
        let dtype = kv_cache_dtype.map(str::parse).transpose()?;
        Ok(Self(core::DraftGeometry::from_model(
            &model.0.shape,
            num_layers,
            dtype,
        )?))
    }
}

/// A target model's attention geometry: its full-attention and sliding-window
/// layer ids, their heads and dims, the window, or MLA latent dims.
/// Constructor arguments: the two id lists, then the fields below (SGLang's
/// defaults: V dim = K dim, SWA geometry = full geometry).
#[pyclass(module = "kvbudget", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct ModelGeometry(pub core::ModelGeometry);

const FULL_IDS: &str = "full_attention_layer_ids";
const SWA_IDS: &str = "swa_attention_layer_ids";
/// The shape's fields that ModelGeometry takes as id lists instead.
const COUNTS: [&str; 2] = ["num_full_layers", "num_swa_layers"];

fn layer_ids(name: &str, obj: &Bound<'_, PyAny>) -> Result<Vec<u64>> {
    let ids: Vec<i64> = obj.extract().map_err(|e: PyErr| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) {
            crate::errors::Error::Py(e)
        } else {
            crate::errors::type_error(format!("ModelGeometry: {name} must be a list of ints"))
        }
    })?;
    ids.into_iter()
        .map(|v| {
            u64::try_from(v)
                .map_err(|_| invalid(format!("{name}: layer ids must be >= 0, got {v}")))
        })
        .collect()
}

impl ModelGeometry {
    /// Builds from bound arguments: the two id lists and the shape's other fields.
    fn build(
        mut full: Vec<u64>,
        mut swa: Vec<u64>,
        mut shape: core::AttentionShape,
        bound: &[(&'static str, Bound<'_, PyAny>)],
    ) -> Result<Self> {
        let mut rest = Vec::with_capacity(bound.len());
        for (name, obj) in bound {
            match *name {
                FULL_IDS => full = layer_ids(name, obj)?,
                SWA_IDS => swa = layer_ids(name, obj)?,
                _ => rest.push((*name, obj.clone())),
            }
        }
        apply(&mut shape, &rest)?;
        shape.num_full_layers = 0; // taken from the id lists
        shape.num_swa_layers = 0;
        Ok(Self(core::ModelGeometry::new(full, swa, shape)?))
    }

    fn param_names() -> Vec<(&'static str, bool)> {
        let mut p = vec![(FULL_IDS, true), (SWA_IDS, true)];
        p.extend(params::<core::AttentionShape>(&COUNTS));
        p
    }
}

#[pymethods]
impl ModelGeometry {
    #[new]
    #[pyo3(signature = (*args, **kwargs))]
    fn new(args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> Result<Self> {
        let bound = bind("ModelGeometry", &Self::param_names(), args, kwargs)?;
        Self::build(
            Vec::new(),
            Vec::new(),
            core::AttentionShape::default(),
            &bound,
        )
    }

    /// A copy with the given fields changed (the others keep their values), re-checked.
    #[pyo3(signature = (**changes))]
    fn replace(&self, changes: Option<&Bound<'_, PyDict>>) -> Result<Self> {
        let names: Vec<&'static str> = Self::param_names().into_iter().map(|p| p.0).collect();
        let ch = crate::convert::changes("ModelGeometry", &names, changes)?;
        let m = &self.0;
        Self::build(
            m.full_attention_layer_ids.clone(),
            m.swa_attention_layer_ids.clone(),
            m.shape,
            &ch,
        )
    }

    /// Builds a geometry from a Hugging Face config.json (a dict, a file, or a model
    /// directory), read as `engine` reads it (`kvbudget.models.geometry_kwargs_for`).
    #[classmethod]
    #[pyo3(signature = (path_or_dict, engine = "sglang"))]
    fn from_hf_config<'py>(
        cls: &Bound<'py, PyType>,
        path_or_dict: &Bound<'py, PyAny>,
        engine: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let models = cls.py().import("kvbudget.models")?;
        let kwargs = models.call_method1("geometry_kwargs_for", (path_or_dict, engine))?;
        cls.call((), Some(kwargs.cast::<PyDict>()?))
    }

    #[getter]
    fn full_attention_layer_ids(&self) -> Vec<u64> {
        self.0.full_attention_layer_ids.clone()
    }
    #[getter]
    fn swa_attention_layer_ids(&self) -> Vec<u64> {
        self.0.swa_attention_layer_ids.clone()
    }
    /// True for an MLA model (`kv_lora_rank` given).
    #[getter]
    fn is_mla(&self) -> bool {
        self.0.shape.kv_lora_rank.is_some()
    }
    /// Every attention layer, `n_f + n_s`.
    #[getter]
    fn num_layers(&self) -> u64 {
        self.0.num_layers()
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let m = &self.0;
        let mut parts = vec![
            format!("{FULL_IDS}={:?}", m.full_attention_layer_ids),
            format!("{SWA_IDS}={:?}", m.swa_attention_layer_ids),
        ];
        parts.extend(repr_fields(py, &m.shape, &COUNTS)?);
        Ok(format!("ModelGeometry({})", parts.join(", ")))
    }
}
json_value!(ModelGeometry, core::ModelGeometry);

/// The getters of one declared type, on the Python class that holds it
/// (`decl()` leads from the class to the declared struct).
macro_rules! getters {
    ($Host:ident, { $( $(#[doc = $doc:literal])* $f:ident : $ty:ty $(= $def:expr)? => $kind:ty, )* }) => {
        #[pymethods]
        impl $Host {
            $(
                $(#[doc = $doc])*
                #[getter]
                fn $f<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                    crate::convert::to_py(py, <$kind as Kind>::to_value(self.decl().$f))
                }
            )*
        }
    };
}

/// The Python class of each declared type (its docs from the declaration),
/// and where its fields live: `AttentionShape` inside `ModelGeometry`.
macro_rules! getters_for {
    ($(#[doc = $tdoc:literal])* AttentionShape [$($d:ident),*] { $($body:tt)* }) => {
        impl ModelGeometry {
            fn decl(&self) -> &core::AttentionShape {
                &self.0.shape
            }
        }
        getters!(ModelGeometry, { $($body)* });
    };
    ($(#[doc = $tdoc:literal])* $T:ident [$($d:ident),*] { $($body:tt)* }) => {
        $(#[doc = $tdoc])*
        // A freelist: a value returned per call (`MemoryPoolConfig`) reuses a freed object's
        // memory instead of a fresh allocation. `__eq__` is written out below because
        // PyO3 0.29 cannot combine its `eq` option with `freelist`.
        #[pyclass(module = "kvbudget", frozen, from_py_object, freelist = 32)]
        #[derive(Clone, PartialEq $(, $d)*)]
        pub struct $T(pub core::$T);

        impl $T {
            fn decl(&self) -> &core::$T {
                &self.0
            }
        }

        #[pymethods]
        impl $T {
            fn __richcmp__(
                &self,
                other: &Bound<'_, PyAny>,
                op: pyo3::basic::CompareOp,
            ) -> PyResult<Py<PyAny>> {
                let py = other.py();
                let Ok(other) = other.cast::<Self>() else {
                    return Ok(py.NotImplemented());
                };
                let equal = self.0 == other.get().0;
                Ok(match op {
                    pyo3::basic::CompareOp::Eq => equal.into_pyobject(py)?.to_owned().into_any().unbind(),
                    pyo3::basic::CompareOp::Ne => (!equal).into_pyobject(py)?.to_owned().into_any().unbind(),
                    _ => py.NotImplemented(),
                })
            }
        }
        getters!($T, { $($body)* });
    };
}

/// The bridge's callback on the declaration: getters for every type.
macro_rules! define_getters {
    (
        scenario { $( $(#[doc = $sdoc:literal])* $S:ident ($g:ident) [$($sd:ident),*] { $($sbody:tt)* } )* }
        values { $( $(#[doc = $tdoc:literal])* $T:ident [$($td:ident),*] { $($tbody:tt)* } )* }
    ) => {
        $( getters_for!($(#[doc = $sdoc])* $S [$($sd),*] { $($sbody)* }); )*
        $( getters_for!($(#[doc = $tdoc])* $T [$($td),*] { $($tbody)* }); )*
    };
}

kvbudget_core::for_each_value_type!(define_getters);
