//! A plan read from any JSON text: the checker and every getter give an answer,
//! never a panic; a plan the checker accepts keeps its sums within its total.
#![no_main]

use kvbudget_core::PoolPlan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = serde_json::from_str::<PoolPlan>(text) else {
        return;
    };
    let ok = plan.check().is_ok();
    let (t, a, p) = (
        plan.tensor_bytes(),
        plan.alignment_bytes(),
        plan.padding_bytes(),
    );
    let _ = (plan.leftover_bytes(), plan.over_budget_bytes());
    if ok {
        assert!(t <= plan.total_bytes && a <= plan.total_bytes && p <= plan.total_bytes);
        let back: PoolPlan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
    }
});
