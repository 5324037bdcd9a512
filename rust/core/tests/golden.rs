//! Golden vectors shared with pytest: tests/data/golden.json.
use kvbudget_core::*;
use serde_json::Value;

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn ids(v: &Value, k: &str) -> Vec<u64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_u64().unwrap()).collect())
        .unwrap_or_default()
}

fn model(v: &Value) -> Result<ModelGeometry> {
    ModelGeometry::new(
        ids(v, "full_attention_layer_ids"),
        ids(v, "swa_attention_layer_ids"),
        u(v, "num_kv_heads").unwrap(),
        u(v, "head_dim").unwrap(),
        u(v, "v_head_dim"),
        u(v, "swa_num_kv_heads"),
        u(v, "swa_head_dim"),
        u(v, "swa_v_head_dim"),
        u(v, "sliding_window_size"),
        u(v, "kv_lora_rank"),
        u(v, "qk_rope_head_dim"),
    )
}

fn serving(v: &Value) -> Result<ServingConfig> {
    let d = ServingConfig::default();
    let b = |k: &str, def: bool| v.get(k).and_then(Value::as_bool).unwrap_or(def);
    Ok(ServingConfig {
        kv_cache_dtype: v
            .get("kv_cache_dtype")
            .and_then(Value::as_str)
            .unwrap_or("bf16")
            .parse()?,
        page_size: u(v, "page_size").unwrap_or(d.page_size),
        tp_size: u(v, "tp_size").unwrap_or(d.tp_size),
        dcp_size: u(v, "dcp_size").unwrap_or(d.dcp_size),
        attn_dp_size: u(v, "attn_dp_size").unwrap_or(d.attn_dp_size),
        swa_full_tokens_ratio: v
            .get("swa_full_tokens_ratio")
            .and_then(Value::as_f64)
            .unwrap_or(d.swa_full_tokens_ratio),
        max_running_requests: u(v, "max_running_requests"),
        chunked_prefill_size: u(v, "chunked_prefill_size"),
        disable_radix_cache: b("disable_radix_cache", false),
        disable_overlap_schedule: b("disable_overlap_schedule", false),
        disaggregation_mode: v
            .get("disaggregation_mode")
            .and_then(Value::as_str)
            .unwrap_or("null")
            .parse()?,
        disaggregation_decode_extra_slots: u(v, "disaggregation_decode_extra_slots").unwrap_or(0),
        swa_eviction_interval: v
            .get("swa_eviction_interval")
            .and_then(Value::as_i64)
            .unwrap_or(128),
        disable_hybrid_swa_memory: b("disable_hybrid_swa_memory", false),
        is_draft_worker: b("is_draft_worker", false),
    })
}

fn spec(v: &Value) -> Result<SpeculativeConfig> {
    if v.is_null() {
        return Ok(SpeculativeConfig::default());
    }
    SpeculativeConfig::new(
        v.get("algorithm")
            .and_then(Value::as_str)
            .unwrap_or("none")
            .parse()?,
        u(v, "draft_num_layers").unwrap_or(0),
        u(v, "num_steps"),
        u(v, "eagle_topk"),
        u(v, "num_draft_tokens"),
        u(v, "banded_draft_layers").unwrap_or(0),
        u(v, "dflash_draft_cell_size_per_token"),
        None,
    )
}

fn build(case: &Value) -> Result<PoolConfigurator> {
    let s = serving(&case["serving"])?;
    s.validate()?;
    PoolConfigurator::create(model(&case["model"])?, s, spec(&case["spec"])?)
}

fn golden() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/golden.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read golden.json"))
        .expect("parse golden.json")
}

#[test]
fn golden_cases() {
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "golden.json has too few cases");
    let mut checked = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let built = build(case);
        for call in case["calls"].as_array().unwrap() {
            let value = call["value"].as_i64().unwrap();
            let page = call["page_size"].as_u64();
            let got = built
                .clone()
                .and_then(|c| match call["entry"].as_str().unwrap() {
                    "bytes" => c.calculate_pool_sizes(value, page),
                    "max_tokens" => c.calculate_pool_sizes_from_max_tokens(value, page),
                    other => panic!("{name}: unknown entry {other}"),
                });
            if let Some(err) = call.get("error") {
                let e = got.expect_err(name);
                assert_eq!(
                    e.code.as_str(),
                    err.as_str().unwrap(),
                    "{name}: {}",
                    e.message
                );
            } else {
                let c = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                let exp = &call["expect"];
                assert_eq!(
                    Some(c.max_total_num_tokens),
                    exp["max_total_num_tokens"].as_i64(),
                    "{name}"
                );
                assert_eq!(
                    c.full_max_total_num_tokens,
                    exp["full_max_total_num_tokens"].as_i64(),
                    "{name}"
                );
                assert_eq!(
                    c.swa_max_total_num_tokens,
                    exp["swa_max_total_num_tokens"].as_i64(),
                    "{name}"
                );
            }
            checked += 1;
        }
        if let Ok(c) = &built {
            if let Some(kind) = case["configurator"].as_str() {
                assert_eq!(c.kind().as_str(), kind, "{name}");
            }
            if let Some(cell) = case.get("cell_size") {
                match c.cell_size() {
                    CellSize::Int(v) => assert_eq!(Some(v), cell.as_u64(), "{name}"),
                    CellSize::Float(v) => assert_eq!(Some(v), cell.as_f64(), "{name}"),
                }
            }
            if let Some(cap) = case.get("swa_cap") {
                assert_eq!(c.swa_cap(), cap.as_u64(), "{name}");
            }
        }
    }
    assert!(checked >= 30);
}

#[test]
fn golden_exact_plans() {
    let g = golden();
    for case in g["exact_plan"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let cfg = build(case).unwrap();
        let fit: Fit = case["fit"].as_str().unwrap().parse().unwrap();
        let plan = cfg
            .plan(case["available_bytes"].as_i64().unwrap(), fit)
            .unwrap();
        let exp = &case["expect"];
        assert_eq!(
            Some(plan.total_bytes),
            exp["total_bytes"].as_u64(),
            "{name}"
        );
        assert_eq!(
            Some(plan.over_budget_bytes()),
            exp["over_budget_bytes"].as_u64(),
            "{name}"
        );
        assert_eq!(
            Some(plan.padding_bytes()),
            exp["padding_bytes"].as_u64(),
            "{name}"
        );
    }
}
