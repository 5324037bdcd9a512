//! The JSON forms of a plan request and its result, the forms of tests/vllm_oracle
//! (engine settings in, the plan dict out), so a plan compares with vLLM's own field
//! by field; `kvbudget.vllm` speaks them through the binding. The layer and engine
//! forms derive from the declaration ([`super::settings`]).

use super::{Record, VllmEngine, VllmError, VllmGroup, VllmLayer, VllmPlan};
use serde_json::{json, Map, Value};

/// Engine settings from the oracle's `engine` dict: the declared settings
/// ([`super::settings`]) over vLLM's defaults.
pub fn engine_from_json(v: &Value) -> Result<VllmEngine, String> {
    let mut e = VllmEngine::default();
    let empty = Map::new();
    let obj = match v {
        Value::Null => &empty,
        Value::Object(o) => o,
        _ => return Err("engine must be an object".into()),
    };
    for (k, x) in obj {
        if !e.set_json(k, x).map_err(|m| format!("engine {m}"))? {
            return Err(format!("unknown engine setting {k}"));
        }
    }
    Ok(e)
}

/// Layers from the oracle's layer dicts.
pub fn layers_from_json(v: &Value) -> Result<Vec<VllmLayer>, String> {
    v.as_array()
        .ok_or("layers: expected a list")?
        .iter()
        .map(|l| VllmLayer::from_json(l).map_err(|m| format!("layers: {m}")))
        .collect()
}

/// Budgets from the oracle's `available` (one int or a list).
pub fn available_from_json(v: &Value) -> Result<Vec<i64>, String> {
    match v {
        Value::Number(n) => Ok(vec![n.as_i64().ok_or("available: expected an integer")?]),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_i64()
                    .ok_or_else(|| "available: expected integers".to_owned())
            })
            .collect(),
        _ => Err("available: expected an integer or a list".into()),
    }
}

fn group_json(g: &VllmGroup, with_unused: bool) -> Value {
    let mut o = json!({
        "layers": g.layers, "spec": g.spec, "block_size": g.block_size,
        "page_size_bytes": g.page_size_bytes, "layer_pages_bytes": g.layer_pages_bytes,
        "is_eagle_group": g.is_eagle_group,
    });
    if with_unused {
        o["unused_bytes_per_block"] = json!(g.unused_bytes_per_block);
        o["padding_layers"] = json!(g.padding_layers);
    }
    o
}

/// A plan (or failure) as the oracle's result dict.
pub fn result_to_json(r: &Result<VllmPlan, VllmError>) -> Value {
    match r {
        Ok(p) => json!({
            "ok": true,
            "num_blocks": p.num_blocks,
            "max_model_len": p.max_model_len,
            "bytes_per_block": p.workers.iter().map(|w| w.bytes_per_block).collect::<Vec<_>>(),
            "per_request_bytes": p.workers.iter().map(|w| w.per_request_bytes).collect::<Vec<_>>(),
            "allocated_bytes": p.workers.iter().map(|w| vec![w.allocated_bytes]).collect::<Vec<_>>(),
            "tensors": p.workers.iter().map(|w| &w.tensors).collect::<Vec<_>>(),
            "groups": p.groups.iter().map(|g| group_json(g, false)).collect::<Vec<_>>(),
            "worker_groups": p.workers.iter().map(|w| w.groups.iter().map(|g| group_json(g, true)).collect::<Vec<_>>()).collect::<Vec<_>>(),
            "blocks_per_request": p.blocks_per_request,
            "max_concurrency": p.max_concurrency,
            "kv_cache_size_tokens": p.kv_cache_size_tokens,
            "kv_tp_replicas": p.kv_tp_replicas,
            "cache_block_size": p.cache_block_size,
            "mamba": p.mamba.as_ref().map(|a| json!({
                "mamba_cache_mode": a.mamba_cache_mode.name(), "block_size": a.block_size,
                "mamba_block_size": a.mamba_block_size, "mamba_page_size_padded": a.mamba_page_size_padded,
            })),
            "log": p.log.iter().map(|l| json!([l.level, l.message])).collect::<Vec<_>>(),
            "warnings": p.warnings,
        }),
        Err(e) => json!({
            "ok": false,
            "error_type": e.kind,
            "error": e.message,
            "estimated_max_model_len": e.estimated_max_model_len,
            "log": e.log.iter().map(|l| json!([l.level, l.message])).collect::<Vec<_>>(),
            "warnings": e.log.iter().filter(|l| l.level == "warning").map(|l| l.message.clone()).collect::<Vec<_>>(),
        }),
    }
}

/// Plans one oracle-form request `{"layers", "available", "engine"}`.
pub fn plan_json(input: &Value) -> Value {
    let parsed = (|| -> Result<_, String> {
        Ok((
            layers_from_json(&input["layers"])?,
            available_from_json(&input["available"])?,
            engine_from_json(&input["engine"])?,
        ))
    })();
    match parsed {
        Ok((l, a, e)) => result_to_json(&super::plan(&l, &a, &e)),
        Err(m) => {
            json!({"ok": false, "error_type": "Input", "error": m, "estimated_max_model_len": null, "log": [], "warnings": []})
        }
    }
}
