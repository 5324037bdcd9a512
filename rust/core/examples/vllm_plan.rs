//! Prints vLLM 0.33.0's KV-cache plan (kvbudget's restatement) as JSON in the
//! oracle's result form. Input on stdin: one JSON object
//! `{"layers": [...], "available": ..., "engine": {...}}` (tests/vllm_oracle's
//! forms), or a JSON array of such objects (one result per line).
use kvbudget_core::vllm::json::plan_json;
use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).expect("stdin");
    let v: serde_json::Value = serde_json::from_str(&s).expect("JSON input");
    match v {
        serde_json::Value::Array(items) => {
            for it in &items {
                println!("{}", plan_json(it));
            }
        }
        one => println!("{}", plan_json(&one)),
    }
}
