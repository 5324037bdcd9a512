//! `PoolPlan::check`, the one plan checker (JSON, pickle, allocate, fuzz):
//! every plan the planner makes passes; each kind of corruption is refused.
mod common;
use common::*;
use kvbudget_core::*;

fn plan() -> PoolPlan {
    let spec = SpeculativeConfig {
        draft: Some(
            DraftGeometry {
                num_layers: 1,
                num_kv_heads: 8,
                head_dim: 128,
                kv_cache_dtype: Some(KvDtype::Fp8E4m3),
                ..DraftGeometry::default()
            }
            .resolved()
            .unwrap(),
        ),
        ..eagle3(0)
    }
    .resolved()
    .unwrap();
    PoolConfigurator::create(gemma3_27b(), serving(KvDtype::Bf16, 64, 1), spec)
        .unwrap()
        .plan(40 * GIB, Fit::Exact)
        .unwrap()
}

fn refused(p: &PoolPlan, why: &str) {
    let e = p.check().expect_err(why);
    assert_eq!(e.code, ErrorCode::InvalidConfig, "{why}");
    assert!(e.message().starts_with("plan: "), "{why}: {}", e.message());
}

#[test]
fn planned_plans_pass() {
    let p = plan();
    p.check().unwrap();
    assert_eq!(p.pools.len(), 3);
    let sg = PoolConfigurator::create(gpt_oss_120b(), serving(KvDtype::Mxfp8, 64, 4), eagle3(1))
        .unwrap()
        .plan(30 * GIB, Fit::Sglang)
        .unwrap();
    sg.check().unwrap();
}

#[test]
fn corruptions_are_refused() {
    let p = plan();
    let mut q = p.clone();
    q.total_bytes += 1;
    refused(&q, "total");
    let mut q = p.clone();
    q.available_bytes = i64::try_from(q.total_bytes).unwrap() - 1;
    refused(&q, "exact fit above its budget");
    let mut q = p.clone();
    q.pools.push(q.pools[0].clone());
    refused(&q, "a pool twice");
    let mut q = p.clone();
    q.pools[0].tensors[1].dtype = StorageDtype::Uint8;
    refused(&q, "a uint8 tensor in a bf16 pool");
    let mut q = p.clone();
    let t = q.pools[1].tensors[0].clone();
    q.pools[1].tensors.insert(1, t);
    refused(&q, "a duplicate tensor");
    let mut q = p.clone();
    q.pools[0].layer_ids.push(1000);
    refused(&q, "a layer without tensors");
    let mut q = p.clone();
    q.pools[0].padding_bytes += 1;
    refused(&q, "padding");
    let mut q = p.clone();
    q.config.full_max_total_num_tokens = Some(q.config.max_total_num_tokens + 64);
    refused(&q, "config disagrees with the pools");
    let mut q = p.clone();
    q.pools[2].tokens -= 64;
    q.pools[2].rows -= 64;
    refused(&q, "draft tokens match neither pool");
    let mut q = p;
    q.pools[0].tensors[0].offset += 256;
    refused(&q, "misplaced tensor");
}
