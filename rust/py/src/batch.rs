//! numpy batch API: columns in (arrays or scalars), four arrays out. The GIL
//! is released for large batches.

use crate::errors::{invalid, IntoPyResult};
use crate::plan::PoolConfigurator;
use kvbudget_core::batch::{plan_many as core_plan_many, BatchInputs, BatchOutputs, Column};
use numpy::{Element, IntoPyArray, PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Rows above which the GIL is released while planning.
const DETACH_ROWS: usize = 4096;

enum Holder<'py, T: Element + Copy> {
    Scalar(T),
    Array(PyReadonlyArray1<'py, T>),
}

impl<'py, T: Element + Copy + for<'a> FromPyObject<'a, 'py>> Holder<'py, T> {
    fn extract(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Self> {
        let v = d
            .get_item(key)?
            .ok_or_else(|| invalid(format!("plan_many: missing column {key:?}")))?;
        if let Ok(a) = v.extract::<PyReadonlyArray1<'py, T>>() {
            return Ok(Self::Array(a));
        }
        v.extract::<T>().map(Self::Scalar).map_err(|_| {
            invalid(format!(
                "plan_many: column {key:?} must be a scalar or a 1-D array of the right dtype"
            ))
        })
    }

    fn column(&self) -> PyResult<Column<'_, T>> {
        Ok(match self {
            Self::Scalar(v) => Column::Scalar(*v),
            Self::Array(a) => Column::Array(
                a.as_slice()
                    .map_err(|_| invalid("plan_many: arrays must be contiguous"))?,
            ),
        })
    }
}

type Out<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<u8>>,
);

struct OutVecs {
    max_total: Vec<i64>,
    full: Vec<i64>,
    swa: Vec<i64>,
    status: Vec<u8>,
}

impl OutVecs {
    fn new(n: usize) -> Self {
        Self {
            max_total: vec![0; n],
            full: vec![0; n],
            swa: vec![0; n],
            status: vec![0; n],
        }
    }
    fn views(&mut self) -> BatchOutputs<'_> {
        BatchOutputs {
            max_total_num_tokens: &mut self.max_total,
            full_max_total_num_tokens: &mut self.full,
            swa_max_total_num_tokens: &mut self.swa,
            status: &mut self.status,
        }
    }
    fn into_py(self, py: Python<'_>) -> Out<'_> {
        (
            self.max_total.into_pyarray(py),
            self.full.into_pyarray(py),
            self.swa.into_pyarray(py),
            self.status.into_pyarray(py),
        )
    }
}

/// Plans every row of `columns` (see `kvbudget.plan_many`); returns
/// `(max_total, full, swa, status)` arrays.
#[pyfunction]
pub fn _plan_many<'py>(py: Python<'py>, columns: &Bound<'py, PyDict>) -> PyResult<Out<'py>> {
    let i64c = |k: &str| Holder::<i64>::extract(columns, k);
    let u8c = |k: &str| Holder::<u8>::extract(columns, k);
    let boolc = |k: &str| Holder::<bool>::extract(columns, k);
    let (a, nf, ns, h, dk, dv, sh, sdk, sdv, w, lr, qr) = (
        i64c("available_bytes")?,
        i64c("num_full_layers")?,
        i64c("num_swa_layers")?,
        i64c("num_kv_heads")?,
        i64c("head_dim")?,
        i64c("v_head_dim")?,
        i64c("swa_num_kv_heads")?,
        i64c("swa_head_dim")?,
        i64c("swa_v_head_dim")?,
        i64c("sliding_window_size")?,
        i64c("kv_lora_rank")?,
        i64c("qk_rope_head_dim")?,
    );
    let (dt, p, tp, dcp, dp) = (
        u8c("kv_cache_dtype")?,
        i64c("page_size")?,
        i64c("tp_size")?,
        i64c("dcp_size")?,
        i64c("attn_dp_size")?,
    );
    let r = Holder::<f64>::extract(columns, "swa_full_tokens_ratio")?;
    let (mrr, chunk, radix, overlap, mode, extra, e, hyb, dw) = (
        i64c("max_running_requests")?,
        i64c("chunked_prefill_size")?,
        boolc("disable_radix_cache")?,
        boolc("disable_overlap_schedule")?,
        u8c("disaggregation_mode")?,
        i64c("disaggregation_decode_extra_slots")?,
        i64c("swa_eviction_interval")?,
        boolc("disable_hybrid_swa_memory")?,
        boolc("is_draft_worker")?,
    );
    let (alg, d, steps, topk, k, banded, cell) = (
        u8c("algorithm")?,
        i64c("draft_num_layers")?,
        i64c("num_steps")?,
        i64c("eagle_topk")?,
        i64c("num_draft_tokens")?,
        i64c("banded_draft_layers")?,
        i64c("dflash_draft_cell_size_per_token")?,
    );
    let inputs = BatchInputs {
        available_bytes: a.column()?,
        num_full_layers: nf.column()?,
        num_swa_layers: ns.column()?,
        num_kv_heads: h.column()?,
        head_dim: dk.column()?,
        v_head_dim: dv.column()?,
        swa_num_kv_heads: sh.column()?,
        swa_head_dim: sdk.column()?,
        swa_v_head_dim: sdv.column()?,
        sliding_window_size: w.column()?,
        kv_lora_rank: lr.column()?,
        qk_rope_head_dim: qr.column()?,
        kv_cache_dtype: dt.column()?,
        page_size: p.column()?,
        tp_size: tp.column()?,
        dcp_size: dcp.column()?,
        attn_dp_size: dp.column()?,
        swa_full_tokens_ratio: r.column()?,
        max_running_requests: mrr.column()?,
        chunked_prefill_size: chunk.column()?,
        disable_radix_cache: radix.column()?,
        disable_overlap_schedule: overlap.column()?,
        disaggregation_mode: mode.column()?,
        disaggregation_decode_extra_slots: extra.column()?,
        swa_eviction_interval: e.column()?,
        disable_hybrid_swa_memory: hyb.column()?,
        is_draft_worker: dw.column()?,
        algorithm: alg.column()?,
        draft_num_layers: d.column()?,
        num_steps: steps.column()?,
        eagle_topk: topk.column()?,
        num_draft_tokens: k.column()?,
        banded_draft_layers: banded.column()?,
        dflash_draft_cell_size_per_token: cell.column()?,
    };
    let n = inputs.rows().py()?;
    let mut out = OutVecs::new(n);
    let run = |out: &mut OutVecs| core_plan_many(&inputs, &mut out.views());
    if n >= DETACH_ROWS {
        py.detach(|| run(&mut out)).py()?;
    } else {
        run(&mut out).py()?;
    }
    Ok(out.into_py(py))
}

#[pymethods]
impl PoolConfigurator {
    /// `calculate_pool_sizes` for many budgets (one setup): `(max_total, full, swa, status)` arrays.
    fn calculate_pool_sizes_many<'py>(
        &self,
        py: Python<'py>,
        available_bytes: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Out<'py>> {
        let n = available_bytes.len();
        let a = available_bytes
            .as_slice()
            .map_err(|_| invalid("available_bytes must be contiguous"))?;
        let mut out = OutVecs::new(n);
        let cfg = &self.0;
        if n >= DETACH_ROWS {
            py.detach(|| cfg.calculate_pool_sizes_many(a, &mut out.views()))
                .py()?;
        } else {
            cfg.calculate_pool_sizes_many(a, &mut out.views()).py()?;
        }
        Ok(out.into_py(py))
    }
}
