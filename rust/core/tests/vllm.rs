//! vLLM 0.33.0 planner (kvbudget_core::vllm) against the worked cases of
//! VLLM.md section 9 (tests/data/vllm_golden.json, the vectors pytest checks
//! against vLLM's own code through tests/vllm_oracle); unit checks are in
//! tests/vllm_units.rs.
use kvbudget_core::vllm::json::engine_from_json;
use kvbudget_core::vllm::{plan, ErrorKind, LayerKind, MaxModelLen, Record, VllmLayer, VllmPlan};
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/vllm_golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("vllm_golden.json")).expect("JSON")
}

/// The case's layers (target then drafter), as tests/test_vllm_oracle.py's `expand`.
fn expand(case: &Value) -> Vec<VllmLayer> {
    let m = &case["model"];
    let n = m["num_layers"].as_u64().unwrap() as usize;
    let full: BTreeSet<u64> = if m["full_at"] == "all" {
        (0..n as u64).collect()
    } else {
        m["full_at"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let split: Vec<usize> = m.get("pp_split").map_or(vec![n], |s| {
        s.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as usize)
            .collect()
    });
    let stage_of: Vec<u32> = split
        .iter()
        .enumerate()
        .flat_map(|(s, &k)| std::iter::repeat_n(s as u32, k))
        .collect();
    let mut out = Vec::new();
    for (i, &stage) in stage_of.iter().enumerate() {
        let mut l = VllmLayer::full(
            format!("model.layers.{i}.self_attn.attn"),
            m["num_kv_heads"].as_u64().unwrap(),
            m["head_size"].as_u64().unwrap(),
        );
        m["kv_cache_dtype"]
            .as_str()
            .unwrap()
            .clone_into(&mut l.kv_cache_dtype);
        l.pp_stage = stage;
        if !full.contains(&(i as u64)) {
            l.kind = LayerKind::Sliding;
            l.sliding_window = m["sliding_window"].as_u64();
        }
        out.push(l);
    }
    let mut j = 0;
    for seg in case["drafter"].as_array().unwrap() {
        for _ in 0..seg["count"].as_u64().unwrap() {
            let mut d = seg.as_object().unwrap().clone();
            d.remove("count");
            d.insert(
                "name".into(),
                json!(format!("drafter.layers.{j}.self_attn.attn")),
            );
            d.insert("is_draft".into(), json!(true));
            d.insert("pp_stage".into(), json!(split.len() - 1));
            out.push(VllmLayer::from_json(&Value::Object(d)).unwrap());
            j += 1;
        }
    }
    out
}

fn available(case: &Value) -> Vec<i64> {
    match &case["available_bytes"] {
        Value::Array(a) => a.iter().map(|x| x.as_i64().unwrap()).collect(),
        v => vec![v.as_i64().unwrap()],
    }
}

fn run(
    case: &Value,
    max_model_len: Option<u64>,
) -> Result<VllmPlan, kvbudget_core::vllm::VllmError> {
    let mut e = engine_from_json(&case["engine"]).unwrap();
    if let Some(m) = max_model_len {
        e.max_model_len = MaxModelLen::Tokens(m);
    }
    plan(&expand(case), &available(case), &e)
}

/// Python's `round(x, 2)`-style rounding to `d` decimals.
fn round_to(x: f64, d: usize) -> f64 {
    format!("{x:.d$}").parse().unwrap()
}

fn kind(spec: &str) -> &'static str {
    match spec {
        "SlidingWindowSpec" => "sliding",
        "FullAttentionSpec" => "full",
        "UniformTypeKVCacheSpecs" => "uniform",
        other => panic!("unexpected spec {other}"),
    }
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn check_views_inside_buffer(p: &VllmPlan) {
    for w in &p.workers {
        for t in &w.tensors {
            let end = t.offset
                + (t.layers.len() as u64 - 1) * t.layer_stride
                + p.num_blocks * t.block_stride;
            assert!(end <= t.size, "{} ends at {end} > {}", t.layers[0], t.size);
        }
    }
}

fn check_case(case: &Value) {
    let id = case["id"].as_str().unwrap();
    let exp = &case["expect"];
    let r = run(case, None);
    if let Some(prefix) = exp.get("error_startswith") {
        let e = r.expect_err(id);
        assert_eq!(e.kind, ErrorKind::ValueError, "{id}");
        assert!(
            e.message.starts_with(prefix.as_str().unwrap()),
            "{id}: {}",
            e.message
        );
        let needed: f64 = e
            .message
            .split("), (")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            needed.round() as u64,
            exp["needed_gib"].as_u64().unwrap(),
            "{id}"
        );
        assert_eq!(
            e.estimated_max_model_len,
            exp["estimated_max_model_len"].as_u64(),
            "{id}"
        );
    } else {
        let p = r.unwrap_or_else(|e| panic!("{id}: {e}"));
        check_views_inside_buffer(&p);
        let sizes: Vec<u64> = p.groups.iter().map(|g| g.layers.len() as u64).collect();
        let kinds: Vec<&str> = p.groups.iter().map(|g| kind(&g.spec)).collect();
        let simple = [
            ("num_blocks", json!(p.num_blocks)),
            ("kv_cache_size_tokens", json!(p.kv_cache_size_tokens)),
            ("max_model_len", json!(p.max_model_len)),
            ("group_kinds", json!(kinds)),
            ("group_sizes", json!(sizes)),
            ("warnings", json!(p.warnings)),
            ("workers", json!(p.workers.len())),
            ("group_width", json!(sizes.iter().max())),
        ];
        for (k, got) in simple {
            if let Some(want) = exp.get(k) {
                assert_eq!(&got, want, "{id}: {k}");
            }
        }
        if let Some(want) = exp.get("padding_layers") {
            for w in &p.workers {
                assert_eq!(
                    json!(w
                        .groups
                        .iter()
                        .map(|g| g.padding_layers)
                        .collect::<Vec<_>>()),
                    *want,
                    "{id}"
                );
            }
        }
        if let Some(want) = exp.get("max_concurrency_2dp") {
            assert_eq!(
                round_to(p.max_concurrency, 2),
                want.as_f64().unwrap(),
                "{id}"
            );
        }
        if let Some(want) = exp.get("bytes_per_block") {
            assert!(
                p.workers
                    .iter()
                    .all(|w| w.bytes_per_block == want.as_u64().unwrap()),
                "{id}"
            );
        }
        if let Some(want) = exp.get("allocated_bytes") {
            assert!(
                p.workers
                    .iter()
                    .all(|w| w.allocated_bytes == want.as_u64().unwrap()),
                "{id}"
            );
            for w in &p.workers {
                assert!(
                    w.tensors.iter().all(|t| t.size == w.allocated_bytes),
                    "{id}: one buffer per worker"
                );
            }
        }
        if let Some(want) = exp.get("page_size_bytes") {
            assert!(
                p.groups
                    .iter()
                    .all(|g| g.page_size_bytes == want.as_u64().unwrap()),
                "{id}"
            );
        }
        if let Some(want) = exp.get("group_layer_pages") {
            let g0: BTreeSet<&String> = p.groups[0].layers.iter().collect();
            let mut pages: Vec<u64> = p.workers[0]
                .tensors
                .iter()
                .filter(|t| t.layers.iter().all(|n| g0.contains(n)))
                .map(|t| t.block_stride)
                .collect();
            pages.sort_unstable_by(|a, b| b.cmp(a));
            pages.dedup();
            assert_eq!(pages, u64s(want), "{id}");
        }
        if let Some(want) = exp.get("drafter_group_kind") {
            let gs: Vec<_> = p
                .groups
                .iter()
                .filter(|g| g.layers.iter().any(|n| n.starts_with("drafter.")))
                .collect();
            assert_eq!(gs.len(), 1, "{id}");
            assert_eq!(kind(&gs[0].spec), want.as_str().unwrap(), "{id}");
            let eagle = matches!(
                case["engine"]["speculative_method"].as_str(),
                Some("eagle" | "eagle3" | "mtp")
            );
            assert_eq!(gs[0].is_eagle_group, eagle, "{id}");
        }
        if let Some(want) = exp.get("worker_group_width") {
            let got: Vec<u64> = p
                .workers
                .iter()
                .map(|w| {
                    w.groups
                        .iter()
                        .map(|g| g.layers.len() as u64)
                        .max()
                        .unwrap()
                })
                .collect();
            assert_eq!(got, u64s(want), "{id}");
        }
    }
    for (m, want) in exp
        .get("at_max_model_len")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let p = run(case, Some(m.parse().unwrap())).unwrap_or_else(|e| panic!("{id} @{m}: {e}"));
        assert_eq!(
            round_to(p.max_concurrency, 2),
            want["max_concurrency_2dp"].as_f64().unwrap(),
            "{id} @{m}"
        );
        if let Some(t) = want["kv_cache_size_tokens"].as_u64() {
            assert_eq!(p.kv_cache_size_tokens, t, "{id} @{m}");
        }
        if let Some(n) = exp.get("num_blocks") {
            assert_eq!(p.num_blocks, n.as_u64().unwrap(), "{id} @{m}");
        }
    }
    for (m, want) in exp
        .get("blocks_per_request_at")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        assert_eq!(
            run(case, Some(m.parse().unwrap()))
                .unwrap()
                .blocks_per_request,
            u64s(want),
            "{id} @{m}"
        );
    }
    for (m, want) in exp
        .get("num_blocks_at")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        assert_eq!(
            run(case, Some(m.parse().unwrap())).unwrap().num_blocks,
            want.as_u64().unwrap(),
            "{id} @{m}"
        );
    }
    for (m, want) in exp
        .get("max_concurrency_1dp_at")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let c = run(case, Some(m.parse().unwrap())).unwrap().max_concurrency;
        assert_eq!(round_to(c, 1), want.as_f64().unwrap(), "{id} @{m}");
    }
}

#[test]
fn vllm_golden_cases() {
    let g = golden();
    let cases = g["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 19);
    for c in cases {
        check_case(c);
    }
}

#[test]
fn vllm_golden_checker_fails_on_a_wrong_expectation() {
    let g = golden();
    let a = g["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "a")
        .unwrap()
        .clone();
    let mutations: [fn(&mut Value); 3] = [
        |e| e["num_blocks"] = json!(32769),
        |e| e["group_sizes"] = json!([9, 9, 9, 9, 9, 7, 10]),
        |e| {
            e["warnings"] =
                json!(["Add 8 padding layers, may waste at most 15.39% KV cache memory"]);
        },
    ];
    for m in mutations {
        let mut c = a.clone();
        m(&mut c["expect"]);
        assert!(std::panic::catch_unwind(|| check_case(&c)).is_err());
    }
}
