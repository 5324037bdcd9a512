//! Workload queries on the configurator handle (see `kvbudget.workload`).

use crate::errors::{nonneg, Result};
use crate::plan::PoolConfigurator;
use crate::values::MemoryPoolConfig;
use kvbudget_core::workload;
use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pymethods]
impl PoolConfigurator {
    /// `(full_tokens, swa_tokens)` one request of `context_len` tokens holds.
    #[pyo3(name = "_footprint")]
    fn footprint(&self, context_len: i64) -> Result<(u64, u64)> {
        let f = workload::footprint(&self.0, nonneg("context_len", context_len)?)?;
        Ok((f.full_tokens, f.swa_tokens))
    }
    /// Requests of `context_len` tokens that `config`'s pools hold at once.
    #[pyo3(name = "_concurrency")]
    fn concurrency(&self, config: &MemoryPoolConfig, context_len: i64) -> Result<u64> {
        Ok(workload::concurrency(
            &self.0,
            &config.0,
            nonneg("context_len", context_len)?,
        )?)
    }
    /// The longest context at which `config` holds `requests` requests (None: unbounded).
    #[pyo3(name = "_max_context_len")]
    fn max_context_len(&self, config: &MemoryPoolConfig, requests: i64) -> Result<Option<u64>> {
        Ok(workload::max_context_len(
            &self.0,
            &config.0,
            nonneg("requests", requests)?,
        )?)
    }
    /// `(bytes, primary_tokens)`: the smallest exact-fit budget for `requests` x `context_len`.
    #[pyo3(name = "_min_budget")]
    fn min_budget(&self, requests: i64, context_len: i64) -> Result<(u64, i64)> {
        Ok(workload::min_budget(
            &self.0,
            nonneg("requests", requests)?,
            nonneg("context_len", context_len)?,
        )?)
    }
    /// The workload-aware SWA ratio, as a dict (see `kvbudget.workload.suggest_swa_ratio`).
    #[pyo3(name = "_suggest_swa_ratio", signature = (context_lengths, weights, available_bytes))]
    fn suggest_swa_ratio<'py>(
        &self,
        py: Python<'py>,
        context_lengths: Vec<i64>,
        weights: Option<Vec<f64>>,
        available_bytes: i64,
    ) -> Result<Bound<'py, PyDict>> {
        let lens = context_lengths
            .into_iter()
            .map(|l| nonneg("context_lengths", l))
            .collect::<Result<Vec<u64>>>()?;
        let r = workload::suggest_swa_ratio(&self.0, &lens, weights.as_deref(), available_bytes)?;
        let d = PyDict::new(py);
        d.set_item("ratio", r.ratio)?;
        d.set_item("concurrency", r.concurrency)?;
        d.set_item("config", MemoryPoolConfig(r.config))?;
        d.set_item("baseline_ratio", r.baseline_ratio)?;
        d.set_item("baseline_concurrency", r.baseline_concurrency)?;
        d.set_item("baseline_config", r.baseline_config.map(MemoryPoolConfig))?;
        d.set_item("full_tokens_per_request", r.full_tokens_per_request)?;
        d.set_item("swa_tokens_per_request", r.swa_tokens_per_request)?;
        d.set_item("idle_full_bytes", r.idle_full_bytes)?;
        d.set_item("idle_swa_bytes", r.idle_swa_bytes)?;
        d.set_item("baseline_idle_full_bytes", r.baseline_idle_full_bytes)?;
        d.set_item("baseline_idle_swa_bytes", r.baseline_idle_swa_bytes)?;
        Ok(d)
    }
}
