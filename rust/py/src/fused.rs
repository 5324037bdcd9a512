//! SGLang's fused-draft placement (`kvbudget_core::plan::fused_draft`): Python tuples in, a
//! dict out (`kvbudget.sglang.fused_draft` types it).

use crate::errors::{nonneg, Result};
use crate::plan::PoolConfigurator;
use kvbudget_core::plan::fused_draft::{
    self as fd, DraftLayerGeometry, DraftLayerKind, DraftLayerSet, DraftProfile,
    FusedDraftDecision, Host, PlacementContext,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;

/// One draft layer set as Python gives it: kind, ids, `(heads, head_dim, v_head_dim)` or
/// state bytes per layer, window.
type KindTuple<'py> = (String, Vec<i64>, Bound<'py, PyAny>, Option<i64>);

fn layer_set(
    kind: &str,
    ids: Vec<i64>,
    geometry: &Bound<'_, PyAny>,
    window: Option<i64>,
) -> Result<DraftLayerSet> {
    let kind = DraftLayerKind::from_name(kind)?;
    let geometry = if kind == DraftLayerKind::State {
        DraftLayerGeometry::State {
            layer_bytes: nonneg("layer_bytes", geometry.extract::<i64>()?)?,
        }
    } else {
        let (h, d, v): (i64, i64, i64) = geometry.extract()?;
        DraftLayerGeometry::Kv {
            head_num: nonneg("head_num", h)?,
            head_dim: nonneg("head_dim", d)?,
            v_head_dim: nonneg("v_head_dim", v)?,
        }
    };
    Ok(DraftLayerSet {
        kind,
        layer_ids: ids
            .into_iter()
            .map(|i| nonneg("layer id", i))
            .collect::<Result<_>>()?,
        geometry,
        window: window.map(|w| nonneg("window", w)).transpose()?,
    })
}

/// The decision as a dict: `declined`, `note`, `regions` (host -> `lane_num`, `entry_bytes` and,
/// for hosts in `host_bytes`, the fused `entry`), `runners` (per runner, host -> `(start, count)`).
pub fn decision_dict<'py>(
    py: Python<'py>,
    d: &FusedDraftDecision,
    host_bytes: &HashMap<String, (i64, bool)>,
) -> Result<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    match d {
        FusedDraftDecision::Declined(why) => {
            out.set_item("declined", why)?;
            out.set_item("note", py.None())?;
            out.set_item("regions", PyDict::new(py))?;
            out.set_item("runners", Vec::<Bound<'py, PyDict>>::new())?;
        }
        FusedDraftDecision::Placed { placement, note } => {
            out.set_item("declined", py.None())?;
            out.set_item("note", note.as_deref())?;
            let regions = PyDict::new(py);
            for (h, r) in &placement.regions {
                let one = PyDict::new(py);
                one.set_item("lane_num", r.lane_num())?;
                one.set_item("entry_bytes", r.entry_bytes()?)?;
                if let Some((bytes, dense)) = host_bytes.get(h.as_str()) {
                    one.set_item(
                        "entry",
                        fd::host_entry_bytes(nonneg("host bytes", *bytes)?, *dense, Some(r))?,
                    )?;
                }
                regions.set_item(h.as_str(), one)?;
            }
            out.set_item("regions", regions)?;
            let mut runners = Vec::new();
            for lanes in &placement.runners {
                let one = PyDict::new(py);
                for (h, start, count) in lanes {
                    one.set_item(h.as_str(), (start, count))?;
                }
                runners.push(one);
            }
            out.set_item("runners", runners)?;
        }
    }
    Ok(out)
}

/// SGLang's `place_fused_draft` on a draft profile (see `kvbudget.sglang.fused_draft`).
#[pyfunction]
#[pyo3(signature = (kinds, *, num_depths, num_runners, hosts, target_window, asymmetric_rows_ok, draft_backends, itemsize, host_bytes))]
#[allow(clippy::too_many_arguments)]
pub fn _place_fused_draft<'py>(
    py: Python<'py>,
    kinds: Vec<KindTuple<'py>>,
    num_depths: i64,
    num_runners: i64,
    hosts: Vec<String>,
    target_window: Option<i64>,
    asymmetric_rows_ok: bool,
    draft_backends: Vec<String>,
    itemsize: i64,
    host_bytes: HashMap<String, (i64, bool)>,
) -> Result<Bound<'py, PyDict>> {
    let profile = DraftProfile {
        num_depths: nonneg("num_depths", num_depths)?,
        kinds: kinds
            .iter()
            .map(|(k, ids, g, w)| layer_set(k, ids.clone(), g, *w))
            .collect::<Result<_>>()?,
    };
    let ctx = PlacementContext {
        hosts: hosts
            .iter()
            .map(|h| Host::from_name(h))
            .collect::<std::result::Result<_, _>>()?,
        target_window: target_window
            .map(|w| nonneg("target_window", w))
            .transpose()?,
        asymmetric_rows_ok,
        draft_backends,
    };
    let runners = nonneg("num_runners", num_runners)?;
    let d = fd::place_fused_draft(&profile, runners, &ctx, nonneg("itemsize", itemsize)?)?;
    decision_dict(py, &d, &host_bytes)
}

#[pymethods]
impl PoolConfigurator {
    /// SGLang's fused-draft decision for this scenario's draft in the unified Mamba pool.
    #[pyo3(name = "_unified_draft_decision")]
    fn unified_draft_decision<'py>(&self, py: Python<'py>) -> Result<Bound<'py, PyDict>> {
        decision_dict(py, &self.0.unified_draft_decision()?, &HashMap::new())
    }
}
