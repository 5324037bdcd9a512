//! The scalar API and the workload queries on any scenario: a typed error or
//! an answer, never a panic; an exact plan always passes the plan checker and
//! fits its budget.
#![no_main]

mod common;

use common::{scenario, Bytes};
use kvbudget_core::workload::{
    concurrency, footprint, max_context_len, min_budget, suggest_swa_ratio,
};
use kvbudget_core::{ConfiguratorKind, Fit, Named, PoolConfigurator};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let Ok(sc) = scenario(&mut b).resolved() else {
        return;
    };
    let kind = match b.u8() % 4 {
        0 => None,
        k => ConfiguratorKind::ALL.get(usize::from(k - 1)).copied(),
    };
    let Ok(cfg) = PoolConfigurator::from_scenario(kind, &sc) else {
        return;
    };
    // Plans list every layer's tensors: keep them small enough to run fast.
    if sc.shape.num_layers() + sc.spec.num_draft_layers() > 4096 {
        return;
    }
    let a = b.u64() as i64;
    let page = (b.u8() % 4 == 0).then(|| b.u64());
    let sizes = cfg.calculate_pool_sizes(a, page);
    let _ = cfg.calculate_pool_sizes_from_max_tokens(b.u64() as i64, page);
    if let Ok(plan) = cfg.plan(a, Fit::Exact) {
        assert!(plan.check().is_ok(), "an exact plan fails the checker");
        assert!(
            i128::from(plan.total_bytes) <= i128::from(a),
            "an exact plan over its budget"
        );
    }
    if let Ok(plan) = cfg.plan(a, Fit::Sglang) {
        let _ = (
            plan.leftover_bytes(),
            plan.over_budget_bytes(),
            plan.tensor_bytes(),
        );
    }
    if let Ok(c) = &sizes {
        let _ = cfg.plan_for_config(c, None);
        let l = b.u64();
        let _ = footprint(&cfg, l);
        let _ = concurrency(&cfg, c, l);
        let _ = max_context_len(&cfg, c, b.u64());
    }
    let _ = cfg.bytes_for_tokens(b.u64() as i64);
    if b.u8() % 8 == 0 {
        let _ = min_budget(&cfg, 1 + u64::from(b.u8()), 1 + u64::from(b.u8()) * 64);
    }
    let lens: Vec<u64> = (0..b.u8() % 4).map(|_| b.u64()).collect();
    let weights: Vec<f64> = lens.iter().map(|_| f64::from_bits(b.u64())).collect();
    let _ = suggest_swa_ratio(&cfg, &lens, (b.u8() % 2 == 0).then_some(&weights[..]), a);
});
