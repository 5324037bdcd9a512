//! The configurator handle and the exact plan's value types.

use crate::errors::{invalid, Result};
use crate::state::budget_dict;
use crate::values::{
    json_value, MemoryPoolConfig, ModelGeometry, ServingConfig, SpeculativeConfig, StateConfig,
};
use kvbudget_core as core;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::sync::Arc;

/// The native configurator: the Python configurator classes subclass it, so that their
/// calls (`calculate_pool_sizes`, ...) reach Rust without a Python frame between.
#[pyclass(module = "kvbudget", frozen, subclass)]
pub struct PoolConfigurator(pub core::PoolConfigurator);

fn cell_to_py(py: Python<'_>, c: core::CellSize) -> PyResult<Bound<'_, PyAny>> {
    Ok(match c {
        core::CellSize::Int(v) => v.into_pyobject(py)?.into_any(),
        core::CellSize::Float(v) => v.into_pyobject(py)?.into_any(),
    })
}

/// `None` or a page size >= 1.
pub fn page_arg(page_size: Option<i64>) -> Result<Option<u64>> {
    match page_size {
        None => Ok(None),
        Some(p) if p >= 1 => Ok(Some(p as u64)),
        Some(p) => Err(invalid(format!("page_size must be >= 1, got {p}"))),
    }
}

#[pymethods]
impl PoolConfigurator {
    /// `kind`: None picks SGLang's factory choice; else "default", "hybrid_swa" or
    /// "request_cap" ("chunk_cap" is its old name).
    #[new]
    #[pyo3(signature = (model, serving, spec=None, kind=None))]
    fn new(
        model: &ModelGeometry,
        serving: &ServingConfig,
        spec: Option<&SpeculativeConfig>,
        kind: Option<&str>,
    ) -> Result<Self> {
        let spec = spec.map(|s| s.0).unwrap_or_default();
        let kind = kind.map(str::parse::<core::ConfiguratorKind>).transpose()?;
        Ok(Self(core::PoolConfigurator::for_model(
            kind,
            model.0.clone(),
            serving.0,
            spec,
        )?))
    }
    /// The kind SGLang's factory picks for `model` and `serving` ("default", "hybrid_swa"
    /// or "request_cap"), without building a configurator.
    #[staticmethod]
    fn factory_kind(model: &ModelGeometry, serving: &ServingConfig) -> &'static str {
        core::select_kind(&model.0.shape, &serving.0).as_str()
    }
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind().as_str()
    }
    #[getter]
    fn cell_size<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        cell_to_py(py, self.0.cell_size())
    }
    #[getter]
    fn full_per_token(&self) -> u64 {
        self.0.full_per_token()
    }
    #[getter]
    fn swa_per_token(&self) -> u64 {
        self.0.swa_per_token()
    }
    #[getter]
    fn swa_cap(&self) -> Option<u64> {
        self.0.swa_cap()
    }
    #[getter]
    fn draft_terms(&self) -> (u64, u64, u64, u64) {
        self.0.draft_terms()
    }
    #[getter]
    fn model(&self) -> ModelGeometry {
        ModelGeometry(self.0.model())
    }
    #[getter]
    fn serving(&self) -> ServingConfig {
        ServingConfig(*self.0.serving())
    }
    #[getter]
    fn spec(&self) -> SpeculativeConfig {
        SpeculativeConfig(*self.0.spec())
    }
    #[pyo3(signature = (available_bytes, page_size=None))]
    fn calculate_pool_sizes(
        &self,
        available_bytes: i64,
        page_size: Option<i64>,
    ) -> Result<MemoryPoolConfig> {
        Ok(MemoryPoolConfig(self.0.calculate_pool_sizes(
            available_bytes,
            page_arg(page_size)?,
        )?))
    }
    #[pyo3(signature = (max_total_num_tokens, page_size=None))]
    fn calculate_pool_sizes_from_max_tokens(
        &self,
        max_total_num_tokens: i64,
        page_size: Option<i64>,
    ) -> Result<MemoryPoolConfig> {
        Ok(MemoryPoolConfig(
            self.0
                .calculate_pool_sizes_from_max_tokens(max_total_num_tokens, page_arg(page_size)?)?,
        ))
    }
    #[pyo3(signature = (available_bytes, fit="exact"))]
    fn plan(&self, available_bytes: i64, fit: &str) -> Result<PoolPlan> {
        let fit = fit.parse::<core::Fit>()?;
        Ok(PoolPlan(Arc::new(self.0.plan(available_bytes, fit)?)))
    }
    /// `calculate_pool_sizes` after a hybrid model's state pool, and SGLang's state budget (as a dict).
    #[pyo3(name = "_calculate_pool_sizes_with_state")]
    fn calculate_pool_sizes_with_state<'py>(
        &self,
        py: Python<'py>,
        available_bytes: i64,
        state: &StateConfig,
    ) -> Result<(MemoryPoolConfig, Bound<'py, PyDict>)> {
        let (c, budget) = self
            .0
            .calculate_pool_sizes_with_state(available_bytes, &state.0)?;
        Ok((MemoryPoolConfig(c), budget_dict(py, budget)?))
    }
    /// The plan with a hybrid model's state pool, and SGLang's state budget (as a dict).
    #[pyo3(name = "_plan_with_state", signature = (available_bytes, state, fit="exact"))]
    fn plan_with_state<'py>(
        &self,
        py: Python<'py>,
        available_bytes: i64,
        state: &StateConfig,
        fit: &str,
    ) -> Result<(PoolPlan, Bound<'py, PyDict>)> {
        let fit = fit.parse::<core::Fit>()?;
        let (plan, budget) = self.0.plan_with_state(available_bytes, fit, &state.0)?;
        Ok((PoolPlan(Arc::new(plan)), budget_dict(py, budget)?))
    }
    /// `(full-side token, state slot)` bytes in SGLang's unified buffer of a hybrid-state model.
    #[pyo3(name = "_unified_state_entries")]
    fn unified_state_entries(&self, state: &StateConfig) -> Result<(u64, u64)> {
        Ok(self.0.unified_state_entries(&state.0)?)
    }
    /// `(full-side token, SWA-side token, state slot)` bytes in SGLang's unified tri-pool of a
    /// hybrid-state hybrid-SWA model.
    #[pyo3(name = "_unified_tri_entries")]
    fn unified_tri_entries(&self, state: &StateConfig) -> Result<(u64, u64, u64)> {
        Ok(self.0.unified_tri_entries(&state.0)?)
    }
    /// The plan of given pool sizes (e.g. agreed across ranks); `available_bytes=None`: its own bytes.
    #[pyo3(signature = (config, available_bytes=None))]
    fn plan_for_config(
        &self,
        config: &MemoryPoolConfig,
        available_bytes: Option<i64>,
    ) -> Result<PoolPlan> {
        Ok(PoolPlan(Arc::new(
            self.0.plan_for_config(&config.0, available_bytes)?,
        )))
    }
    /// Exact bytes the plan holding `tokens` primary tokens takes (padding and draft included).
    fn bytes_for_tokens(&self, tokens: i64) -> Result<u64> {
        Ok(self.0.bytes_for_tokens(tokens)?)
    }
}

/// One planned tensor: its pool, layer and kind, its shape (rows first) and
/// storage dtype, its bytes and its byte offset in the pool's slab.
#[pyclass(module = "kvbudget", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct TensorSpec(pub core::TensorSpec);

#[pymethods]
impl TensorSpec {
    #[getter]
    fn pool(&self) -> &'static str {
        self.0.pool.as_str()
    }
    #[getter]
    fn layer_id(&self) -> u64 {
        self.0.layer_id
    }
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.as_str()
    }
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.0.shape)
    }
    #[getter]
    fn dtype(&self) -> &'static str {
        self.0.dtype.torch_name()
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.0.nbytes
    }
    #[getter]
    fn offset(&self) -> u64 {
        self.0.offset
    }
    fn __repr__(&self) -> String {
        format!(
            "TensorSpec(pool='{}', layer_id={}, kind='{}', shape={}, dtype='{}', nbytes={}, offset={})",
            self.0.pool.as_str(),
            self.0.layer_id,
            self.0.kind.as_str(),
            py_tuple(&self.0.shape),
            self.0.dtype.torch_name(),
            self.0.nbytes,
            self.0.offset
        )
    }
}
// A lone tensor or pool has no rules of its own: `PoolPlan::check` checks them in their plan.
json_value!(TensorSpec, core::TensorSpec, Ok);

/// One planned pool: its usable tokens, its rows per layer (tokens plus a
/// page), its layers, dtype, slab bytes, padding bytes and tensors.
#[pyclass(module = "kvbudget", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct PoolSpec(pub core::PoolSpec);

#[pymethods]
impl PoolSpec {
    #[getter]
    fn name(&self) -> &'static str {
        self.0.name.as_str()
    }
    #[getter]
    fn tokens(&self) -> u64 {
        self.0.tokens
    }
    #[getter]
    fn rows(&self) -> u64 {
        self.0.rows
    }
    #[getter]
    fn layer_ids(&self) -> Vec<u64> {
        self.0.layer_ids.clone()
    }
    #[getter]
    fn num_layers(&self) -> usize {
        self.0.layer_ids.len()
    }
    #[getter]
    fn kv_cache_dtype(&self) -> &'static str {
        self.0.kv_cache_dtype.as_str()
    }
    #[getter]
    fn nbytes(&self) -> u64 {
        self.0.nbytes
    }
    #[getter]
    fn padding_bytes(&self) -> u64 {
        self.0.padding_bytes
    }
    #[getter]
    fn tensors(&self) -> Vec<TensorSpec> {
        self.0.tensors.iter().cloned().map(TensorSpec).collect()
    }
    fn __repr__(&self) -> String {
        format!(
            "PoolSpec(name='{}', tokens={}, rows={}, num_layers={}, kv_cache_dtype='{}', nbytes={}, padding_bytes={})",
            self.0.name.as_str(),
            self.0.tokens,
            self.0.rows,
            self.0.layer_ids.len(),
            self.0.kv_cache_dtype.as_str(),
            self.0.nbytes,
            self.0.padding_bytes
        )
    }
}
json_value!(PoolSpec, core::PoolSpec, Ok);

/// kvbudget's exact plan: every pool and tensor, the bytes allocating it takes
/// (`total_bytes`), the budget and the token counts in SGLang's form (`config`).
/// `PoolPlan.from_json(plan.to_json())` rebuilds it after `check()`.
#[pyclass(module = "kvbudget", frozen, eq, from_py_object)]
#[derive(Clone, PartialEq)]
pub struct PoolPlan(pub Arc<core::PoolPlan>);

#[pymethods]
impl PoolPlan {
    #[getter]
    fn fit(&self) -> &'static str {
        match self.0.fit {
            core::Fit::Exact => "exact",
            core::Fit::Sglang => "sglang",
            core::Fit::Given => "given",
        }
    }
    #[getter]
    fn configurator(&self) -> &'static str {
        self.0.configurator.as_str()
    }
    #[getter]
    fn available_bytes(&self) -> i64 {
        self.0.available_bytes
    }
    #[getter]
    fn total_bytes(&self) -> u64 {
        self.0.total_bytes
    }
    #[getter]
    fn leftover_bytes(&self) -> i128 {
        self.0.leftover_bytes()
    }
    #[getter]
    fn over_budget_bytes(&self) -> u64 {
        self.0.over_budget_bytes()
    }
    #[getter]
    fn padding_bytes(&self) -> u64 {
        self.0.padding_bytes()
    }
    #[getter]
    fn tensor_bytes(&self) -> u64 {
        self.0.tensor_bytes()
    }
    #[getter]
    fn alignment_bytes(&self) -> u64 {
        self.0.alignment_bytes()
    }
    #[getter]
    fn draft_bytes(&self) -> u64 {
        self.0
            .pools
            .iter()
            .filter(|p| p.name.is_draft())
            .fold(0u64, |acc, p| acc.saturating_add(p.nbytes))
    }
    #[getter]
    fn page_size(&self) -> u64 {
        self.0.page_size
    }
    #[getter]
    fn config(&self) -> MemoryPoolConfig {
        MemoryPoolConfig(self.0.config)
    }
    #[getter]
    fn pools(&self) -> Vec<PoolSpec> {
        self.0.pools.iter().cloned().map(PoolSpec).collect()
    }
    #[getter]
    fn tensors(&self) -> Vec<TensorSpec> {
        self.0
            .pools
            .iter()
            .flat_map(|p| p.tensors.iter().cloned().map(TensorSpec))
            .collect()
    }
    /// The pool named "full", "swa", "unified", "draft", "draft_swa" or "state", or
    /// None when the plan has none.
    fn pool(&self, name: &str) -> Result<Option<PoolSpec>> {
        let n = core::PoolName::from_name(name).ok_or_else(|| {
            invalid(format!(
                "pool name: expected full, swa, unified, draft, draft_swa or state, got {name:?}"
            ))
        })?;
        Ok(self.0.pool(n).cloned().map(PoolSpec))
    }
    /// The plan as a JSON string.
    fn to_json(&self) -> Result<String> {
        serde_json::to_string(&*self.0).map_err(|e| invalid(e.to_string()))
    }
    /// Rebuilds (and checks) a plan from `to_json` output.
    #[classmethod]
    fn from_json(_cls: &Bound<'_, PyType>, s: &str) -> Result<Self> {
        let p: core::PoolPlan =
            serde_json::from_str(s).map_err(|e| invalid(format!("malformed plan JSON: {e}")))?;
        p.check()?;
        Ok(Self(Arc::new(p)))
    }
    /// Checks that the plan is self-consistent (what `allocate` relies on):
    /// raises `InvalidConfigError` naming the first inconsistency.
    fn check(&self) -> Result<()> {
        Ok(self.0.check()?)
    }
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let ctor = slf.get_type().getattr("from_json")?;
        let s = slf.get().to_json()?;
        PyTuple::new(py, [ctor.into_any(), PyTuple::new(py, [s])?.into_any()])
    }
    fn __repr__(&self) -> String {
        let pools: Vec<String> = self
            .0
            .pools
            .iter()
            .map(|p| format!("{}={}", p.name.as_str(), p.tokens))
            .collect();
        format!(
            "PoolPlan(fit='{}', configurator='{}', tokens=({}), total_bytes={}, available_bytes={}, leftover_bytes={})",
            self.fit(),
            self.configurator(),
            pools.join(", "),
            self.0.total_bytes,
            self.0.available_bytes,
            self.0.leftover_bytes()
        )
    }
}

/// A shape as Python writes a tuple: `(3, 8, 128)`, `(5,)`.
fn py_tuple(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(u64::to_string).collect();
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}
