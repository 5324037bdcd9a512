//! Golden vectors shared with pytest: tests/data/golden.json.
//!
//! Every expectation is SGLang 0.5.23's own answer (tests/data/make_golden.py
//! runs each case through its released `pool_configurator.py`). A case's
//! kwargs are set through the field table by name, and a call's `expect` is
//! compared field by field with `MemoryPoolConfig`, so new fields need no
//! change here.
use kvbudget_core::*;
use serde_json::Value;
use std::collections::BTreeSet;

/// A field value from JSON, in the field table's form.
fn field_value(v: &Value) -> fields::Value<'_> {
    match v {
        Value::Null => fields::Value::None,
        Value::Bool(b) => fields::Value::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(
            || fields::Value::Float(n.as_f64().unwrap()),
            |i| fields::Value::Int(i128::from(i)),
        ),
        Value::String(s) => fields::Value::Str(s),
        other => panic!("golden.json: unexpected value {other}"),
    }
}

/// A value type from a JSON object, key by key through the field table
/// (keys in `skip` are read by the caller).
fn from_json<T: ValueType>(v: &Value, skip: &[&str]) -> Result<T> {
    let mut out = T::default();
    for (k, x) in v.as_object().into_iter().flatten() {
        if !skip.contains(&k.as_str()) {
            assert!(
                out.set(k, field_value(x))?,
                "golden.json: {} has no field {k}",
                T::NAME
            );
        }
    }
    Ok(out)
}

fn ids(v: &Value, k: &str) -> Vec<u64> {
    v.get(k)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_u64().unwrap()).collect())
        .unwrap_or_default()
}

fn model(v: &Value) -> Result<ModelGeometry> {
    let (full, swa) = ("full_attention_layer_ids", "swa_attention_layer_ids");
    ModelGeometry::new(ids(v, full), ids(v, swa), from_json(v, &[full, swa])?)
}

fn serving(v: &Value) -> Result<ServingConfig> {
    from_json::<ServingConfig>(v, &[])?.resolved()
}

fn spec(v: &Value) -> Result<SpeculativeConfig> {
    from_json::<SpeculativeConfig>(v, &[])?.resolved()
}

fn build(case: &Value) -> Result<PoolConfigurator> {
    PoolConfigurator::create(
        model(&case["model"])?,
        serving(&case["serving"])?,
        spec(&case["spec"])?,
    )
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
    assert!(cases.len() >= 80, "golden.json has too few cases");
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
                    e.message()
                );
            } else {
                let c = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                let exp = call["expect"].as_object().unwrap();
                let keys: BTreeSet<&str> = exp.keys().map(String::as_str).collect();
                let fields: BTreeSet<&str> =
                    MemoryPoolConfig::FIELDS.iter().map(|f| f.name).collect();
                assert_eq!(
                    keys, fields,
                    "{name}: expect must list every MemoryPoolConfig field"
                );
                for (k, v) in exp {
                    assert_eq!(c.get(k), Some(field_value(v)), "{name}: {k}");
                }
            }
            checked += 1;
        }
        match &built {
            Ok(c) => {
                assert_eq!(
                    Some(c.kind().as_str()),
                    case["configurator"].as_str(),
                    "{name}"
                );
                let cell = &case["cell_size"];
                match c.cell_size() {
                    // An int cell is a JSON integer, a float one a JSON float (`430899.2`, `47872.0`).
                    CellSize::Int(v) => assert_eq!(Some(v), cell.as_u64(), "{name}"),
                    CellSize::Float(v) => {
                        assert!(cell.is_f64(), "{name}: cell size {cell} is not a float");
                        assert_eq!(Some(v), cell.as_f64(), "{name}");
                    }
                }
                assert_eq!(
                    c.swa_cap(),
                    case.get("swa_cap").and_then(Value::as_u64),
                    "{name}"
                );
            }
            Err(e) => assert!(case["configurator"].is_null(), "{name}: {e}"),
        }
    }
    assert!(checked >= 100, "golden.json has too few calls ({checked})");
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
