//! Frozen value types: model geometry, draft geometry, speculative and serving configs.

use crate::errors::{invalid, nonneg, opt_nonneg, IntoPyResult};
use kvbudget_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Implements `to_json`, `_from_json`, `__reduce__`, `__repr__` via serde.
macro_rules! json_value {
    ($ty:ident, $core:ty) => {
        #[pymethods]
        impl $ty {
            /// The value as a JSON string.
            fn to_json(&self) -> PyResult<String> {
                serde_json::to_string(&self.0).map_err(|e| invalid(e.to_string()))
            }
            /// Rebuilds a value from `to_json` output.
            #[classmethod]
            fn _from_json(_cls: &Bound<'_, PyType>, s: &str) -> PyResult<Self> {
                let v: $core =
                    serde_json::from_str(s).map_err(|e| invalid(format!("malformed JSON: {e}")))?;
                crate::values::Validate::validate(&v).py()?;
                Ok(Self(v))
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

/// Re-validation of a value rebuilt from JSON (pickle), as its constructor would.
pub trait Validate {
    fn validate(&self) -> kvbudget_core::Result<()>;
}

impl Validate for core::ModelGeometry {
    fn validate(&self) -> kvbudget_core::Result<()> {
        core::ModelGeometry::validate(self)
    }
}
impl Validate for core::DraftGeometry {
    fn validate(&self) -> kvbudget_core::Result<()> {
        core::DraftGeometry::validate(self)
    }
}
impl Validate for core::SpeculativeConfig {
    fn validate(&self) -> kvbudget_core::Result<()> {
        core::SpeculativeConfig::validate(self)
    }
}
impl Validate for core::ServingConfig {
    fn validate(&self) -> kvbudget_core::Result<()> {
        core::ServingConfig::validate(self)
    }
}
/// Plain data: any value is well-formed.
macro_rules! plain_data {
    ($($t:ty),*) => {$(
        impl Validate for $t {
            fn validate(&self) -> kvbudget_core::Result<()> {
                Ok(())
            }
        }
    )*};
}
plain_data!(core::MemoryPoolConfig, core::PoolSpec, core::TensorSpec);

/// Target attention geometry. See `kvbudget.ModelGeometry`.
#[pyclass(module = "kvbudget._core", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct ModelGeometry(pub core::ModelGeometry);

fn layer_ids(name: &str, ids: Vec<i64>) -> PyResult<Vec<u64>> {
    ids.into_iter()
        .map(|v| {
            u64::try_from(v)
                .map_err(|_| invalid(format!("{name}: layer ids must be >= 0, got {v}")))
        })
        .collect()
}

#[pymethods]
impl ModelGeometry {
    #[new]
    #[pyo3(signature = (full_attention_layer_ids, swa_attention_layer_ids, num_kv_heads, head_dim, v_head_dim=None,
        swa_num_kv_heads=None, swa_head_dim=None, swa_v_head_dim=None, sliding_window_size=None,
        kv_lora_rank=None, qk_rope_head_dim=None))]
    fn new(
        full_attention_layer_ids: Vec<i64>,
        swa_attention_layer_ids: Vec<i64>,
        num_kv_heads: i64,
        head_dim: i64,
        v_head_dim: Option<i64>,
        swa_num_kv_heads: Option<i64>,
        swa_head_dim: Option<i64>,
        swa_v_head_dim: Option<i64>,
        sliding_window_size: Option<i64>,
        kv_lora_rank: Option<i64>,
        qk_rope_head_dim: Option<i64>,
    ) -> PyResult<Self> {
        core::ModelGeometry::new(
            layer_ids("full_attention_layer_ids", full_attention_layer_ids)?,
            layer_ids("swa_attention_layer_ids", swa_attention_layer_ids)?,
            nonneg("num_kv_heads", num_kv_heads)?,
            nonneg("head_dim", head_dim)?,
            opt_nonneg("v_head_dim", v_head_dim)?,
            opt_nonneg("swa_num_kv_heads", swa_num_kv_heads)?,
            opt_nonneg("swa_head_dim", swa_head_dim)?,
            opt_nonneg("swa_v_head_dim", swa_v_head_dim)?,
            opt_nonneg("sliding_window_size", sliding_window_size)?,
            opt_nonneg("kv_lora_rank", kv_lora_rank)?,
            opt_nonneg("qk_rope_head_dim", qk_rope_head_dim)?,
        )
        .py()
        .map(Self)
    }

    /// Builds a geometry from a Hugging Face config.json (a dict, a file, or a model directory).
    #[classmethod]
    fn from_hf_config<'py>(
        cls: &Bound<'py, PyType>,
        path_or_dict: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hf = cls.py().import("kvbudget.models.hf")?;
        let kwargs = hf.call_method1("geometry_kwargs_from_hf_config", (path_or_dict,))?;
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
    #[getter]
    fn num_kv_heads(&self) -> u64 {
        self.0.num_kv_heads
    }
    #[getter]
    fn head_dim(&self) -> u64 {
        self.0.head_dim
    }
    #[getter]
    fn v_head_dim(&self) -> u64 {
        self.0.v_head_dim
    }
    #[getter]
    fn swa_num_kv_heads(&self) -> u64 {
        self.0.swa_num_kv_heads
    }
    #[getter]
    fn swa_head_dim(&self) -> u64 {
        self.0.swa_head_dim
    }
    #[getter]
    fn swa_v_head_dim(&self) -> u64 {
        self.0.swa_v_head_dim
    }
    #[getter]
    fn sliding_window_size(&self) -> Option<u64> {
        self.0.sliding_window_size
    }
    #[getter]
    fn kv_lora_rank(&self) -> Option<u64> {
        self.0.mla.map(|m| m.kv_lora_rank)
    }
    #[getter]
    fn qk_rope_head_dim(&self) -> Option<u64> {
        self.0.mla.map(|m| m.qk_rope_head_dim)
    }
    #[getter]
    fn is_mla(&self) -> bool {
        self.0.mla.is_some()
    }
    #[getter]
    fn num_layers(&self) -> u64 {
        self.0.num_layers()
    }
    fn __repr__(&self) -> String {
        let m = &self.0;
        format!(
            "ModelGeometry(full={} layers, swa={} layers, num_kv_heads={}, head_dim={}, v_head_dim={}, \
             swa_num_kv_heads={}, swa_head_dim={}, swa_v_head_dim={}, sliding_window_size={:?}, mla={:?})",
            m.num_full_layers(),
            m.num_swa_layers(),
            m.num_kv_heads,
            m.head_dim,
            m.v_head_dim,
            m.swa_num_kv_heads,
            m.swa_head_dim,
            m.swa_v_head_dim,
            m.sliding_window_size,
            m.mla.map(|x| (x.kv_lora_rank, x.qk_rope_head_dim)),
        )
    }
}
json_value!(ModelGeometry, core::ModelGeometry);

/// The draft model's own KV geometry. See `kvbudget.DraftGeometry`.
#[pyclass(module = "kvbudget._core", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct DraftGeometry(pub core::DraftGeometry);

#[pymethods]
impl DraftGeometry {
    #[new]
    #[pyo3(signature = (num_layers, num_kv_heads, head_dim, v_head_dim=None, kv_cache_dtype=None, capacity=None))]
    fn new(
        num_layers: i64,
        num_kv_heads: i64,
        head_dim: i64,
        v_head_dim: Option<i64>,
        kv_cache_dtype: Option<&str>,
        capacity: Option<&str>,
    ) -> PyResult<Self> {
        let dtype = kv_cache_dtype
            .map(str::parse::<core::KvDtype>)
            .transpose()
            .py()?;
        let cap = capacity
            .map(str::parse::<core::DraftCapacity>)
            .transpose()
            .py()?;
        core::DraftGeometry::new(
            nonneg("num_layers", num_layers)?,
            nonneg("num_kv_heads", num_kv_heads)?,
            nonneg("head_dim", head_dim)?,
            opt_nonneg("v_head_dim", v_head_dim)?,
            dtype,
            cap,
        )
        .py()
        .map(Self)
    }
    #[getter]
    fn num_layers(&self) -> u64 {
        self.0.num_layers
    }
    #[getter]
    fn num_kv_heads(&self) -> u64 {
        self.0.num_kv_heads
    }
    #[getter]
    fn head_dim(&self) -> u64 {
        self.0.head_dim
    }
    #[getter]
    fn v_head_dim(&self) -> u64 {
        self.0.v_head_dim
    }
    #[getter]
    fn kv_cache_dtype(&self) -> Option<&'static str> {
        self.0.kv_cache_dtype.map(core::KvDtype::as_str)
    }
    #[getter]
    fn capacity(&self) -> Option<&'static str> {
        self.0.capacity.map(|c| match c {
            core::DraftCapacity::Full => "full",
            core::DraftCapacity::Swa => "swa",
        })
    }
    fn __repr__(&self) -> String {
        format!(
            "DraftGeometry(num_layers={}, num_kv_heads={}, head_dim={}, v_head_dim={}, kv_cache_dtype={:?}, capacity={:?})",
            self.0.num_layers,
            self.0.num_kv_heads,
            self.0.head_dim,
            self.0.v_head_dim,
            self.kv_cache_dtype(),
            self.capacity()
        )
    }
}
json_value!(DraftGeometry, core::DraftGeometry);

/// Speculative-decoding settings. See `kvbudget.SpeculativeConfig`.
#[pyclass(module = "kvbudget._core", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct SpeculativeConfig(pub core::SpeculativeConfig);

#[pymethods]
impl SpeculativeConfig {
    #[new]
    #[pyo3(signature = (algorithm="none", draft_num_layers=0, num_steps=None, eagle_topk=None, num_draft_tokens=None,
        banded_draft_layers=0, dflash_draft_cell_size_per_token=None, draft=None))]
    fn new(
        algorithm: Option<&str>,
        draft_num_layers: i64,
        num_steps: Option<i64>,
        eagle_topk: Option<i64>,
        num_draft_tokens: Option<i64>,
        banded_draft_layers: i64,
        dflash_draft_cell_size_per_token: Option<i64>,
        draft: Option<DraftGeometry>,
    ) -> PyResult<Self> {
        let algorithm = algorithm
            .unwrap_or("none")
            .parse::<core::SpecAlgorithm>()
            .py()?;
        core::SpeculativeConfig::new(
            algorithm,
            nonneg("draft_num_layers", draft_num_layers)?,
            opt_nonneg("num_steps", num_steps)?,
            opt_nonneg("eagle_topk", eagle_topk)?,
            opt_nonneg("num_draft_tokens", num_draft_tokens)?,
            nonneg("banded_draft_layers", banded_draft_layers)?,
            opt_nonneg(
                "dflash_draft_cell_size_per_token",
                dflash_draft_cell_size_per_token,
            )?,
            draft.map(|d| d.0),
        )
        .py()
        .map(Self)
    }
    #[getter]
    fn algorithm(&self) -> &'static str {
        self.0.algorithm.as_str()
    }
    #[getter]
    fn draft_num_layers(&self) -> u64 {
        self.0.draft_num_layers
    }
    #[getter]
    fn num_steps(&self) -> Option<u64> {
        self.0.num_steps
    }
    #[getter]
    fn eagle_topk(&self) -> Option<u64> {
        self.0.eagle_topk
    }
    #[getter]
    fn num_draft_tokens(&self) -> Option<u64> {
        self.0.num_draft_tokens
    }
    #[getter]
    fn banded_draft_layers(&self) -> u64 {
        self.0.banded_draft_layers
    }
    #[getter]
    fn dflash_draft_cell_size_per_token(&self) -> Option<u64> {
        self.0.dflash_draft_cell_size_per_token
    }
    #[getter]
    fn draft(&self) -> Option<DraftGeometry> {
        self.0.draft.map(DraftGeometry)
    }
    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "SpeculativeConfig(algorithm={:?}, draft_num_layers={}, num_steps={:?}, eagle_topk={:?}, num_draft_tokens={:?}, \
             banded_draft_layers={}, dflash_draft_cell_size_per_token={:?}, draft={})",
            s.algorithm.as_str(),
            s.draft_num_layers,
            s.num_steps,
            s.eagle_topk,
            s.num_draft_tokens,
            s.banded_draft_layers,
            s.dflash_draft_cell_size_per_token,
            s.draft.map_or_else(|| "None".to_string(), |d| DraftGeometry(d).__repr__())
        )
    }
}
json_value!(SpeculativeConfig, core::SpeculativeConfig);

/// Serving settings. See `kvbudget.ServingConfig`.
#[pyclass(module = "kvbudget._core", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct ServingConfig(pub core::ServingConfig);

#[pymethods]
impl ServingConfig {
    #[new]
    #[pyo3(signature = (kv_cache_dtype="bf16", page_size=1, tp_size=1, dcp_size=1, attn_dp_size=1,
        swa_full_tokens_ratio=0.8, max_running_requests=None, chunked_prefill_size=None, disable_radix_cache=false,
        disable_overlap_schedule=false, disaggregation_mode="null", disaggregation_decode_extra_slots=0,
        swa_eviction_interval=128, disable_hybrid_swa_memory=false, is_draft_worker=false))]
    fn new(
        kv_cache_dtype: &str,
        page_size: i64,
        tp_size: i64,
        dcp_size: i64,
        attn_dp_size: i64,
        swa_full_tokens_ratio: f64,
        max_running_requests: Option<i64>,
        chunked_prefill_size: Option<i64>,
        disable_radix_cache: bool,
        disable_overlap_schedule: bool,
        disaggregation_mode: Option<&str>,
        disaggregation_decode_extra_slots: i64,
        swa_eviction_interval: i64,
        disable_hybrid_swa_memory: bool,
        is_draft_worker: bool,
    ) -> PyResult<Self> {
        let s = core::ServingConfig {
            kv_cache_dtype: kv_cache_dtype.parse().py()?,
            page_size: nonneg("page_size", page_size)?,
            tp_size: nonneg("tp_size", tp_size)?,
            dcp_size: nonneg("dcp_size", dcp_size)?,
            attn_dp_size: nonneg("attn_dp_size", attn_dp_size)?,
            swa_full_tokens_ratio,
            max_running_requests: opt_nonneg("max_running_requests", max_running_requests)?,
            chunked_prefill_size: opt_nonneg("chunked_prefill_size", chunked_prefill_size)?,
            disable_radix_cache,
            disable_overlap_schedule,
            disaggregation_mode: disaggregation_mode.unwrap_or("null").parse().py()?,
            disaggregation_decode_extra_slots: nonneg(
                "disaggregation_decode_extra_slots",
                disaggregation_decode_extra_slots,
            )?,
            swa_eviction_interval,
            disable_hybrid_swa_memory,
            is_draft_worker,
        };
        s.validate().py()?;
        Ok(Self(s))
    }
    #[getter]
    fn kv_cache_dtype(&self) -> &'static str {
        self.0.kv_cache_dtype.as_str()
    }
    #[getter]
    fn page_size(&self) -> u64 {
        self.0.page_size
    }
    #[getter]
    fn tp_size(&self) -> u64 {
        self.0.tp_size
    }
    #[getter]
    fn dcp_size(&self) -> u64 {
        self.0.dcp_size
    }
    #[getter]
    fn attn_dp_size(&self) -> u64 {
        self.0.attn_dp_size
    }
    #[getter]
    fn swa_full_tokens_ratio(&self) -> f64 {
        self.0.swa_full_tokens_ratio
    }
    #[getter]
    fn max_running_requests(&self) -> Option<u64> {
        self.0.max_running_requests
    }
    #[getter]
    fn chunked_prefill_size(&self) -> Option<u64> {
        self.0.chunked_prefill_size
    }
    #[getter]
    fn disable_radix_cache(&self) -> bool {
        self.0.disable_radix_cache
    }
    #[getter]
    fn disable_overlap_schedule(&self) -> bool {
        self.0.disable_overlap_schedule
    }
    #[getter]
    fn disaggregation_mode(&self) -> &'static str {
        self.0.disaggregation_mode.as_str()
    }
    #[getter]
    fn disaggregation_decode_extra_slots(&self) -> u64 {
        self.0.disaggregation_decode_extra_slots
    }
    #[getter]
    fn swa_eviction_interval(&self) -> i64 {
        self.0.swa_eviction_interval
    }
    #[getter]
    fn disable_hybrid_swa_memory(&self) -> bool {
        self.0.disable_hybrid_swa_memory
    }
    #[getter]
    fn is_draft_worker(&self) -> bool {
        self.0.is_draft_worker
    }
    fn __repr__(&self) -> String {
        let s = &self.0;
        format!(
            "ServingConfig(kv_cache_dtype={:?}, page_size={}, tp_size={}, dcp_size={}, attn_dp_size={}, \
             swa_full_tokens_ratio={}, max_running_requests={:?}, chunked_prefill_size={:?}, disable_radix_cache={}, \
             disable_overlap_schedule={}, disaggregation_mode={:?}, disaggregation_decode_extra_slots={}, \
             swa_eviction_interval={}, disable_hybrid_swa_memory={}, is_draft_worker={})",
            s.kv_cache_dtype.as_str(),
            s.page_size,
            s.tp_size,
            s.dcp_size,
            s.attn_dp_size,
            s.swa_full_tokens_ratio,
            s.max_running_requests,
            s.chunked_prefill_size,
            py_bool(s.disable_radix_cache),
            py_bool(s.disable_overlap_schedule),
            s.disaggregation_mode.as_str(),
            s.disaggregation_decode_extra_slots,
            s.swa_eviction_interval,
            py_bool(s.disable_hybrid_swa_memory),
            py_bool(s.is_draft_worker)
        )
    }
}
json_value!(ServingConfig, core::ServingConfig);

pub fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}
