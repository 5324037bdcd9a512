//! The workload queries (footprint, concurrency, max context, min budget, the
//! SWA ratio) on every built configurator, and plans read back from mutated
//! JSON: no panic, a typed error or an answer that holds.

use crate::oracles::{check_err, Check, Stats};
use crate::plans::tractable;
use crate::rng::Rng;
use kvbudget_core::workload::{
    concurrency, footprint, max_context_len, min_budget, suggest_swa_ratio,
};
use kvbudget_core::{Fit, MemoryPoolConfig, PoolConfigurator, PoolPlan};

fn context_len(r: &mut Rng) -> u64 {
    match r.below(5) {
        0 => r.u64_edge(),
        1 => r.range(1, 64),
        _ => r.range(1, 1 << 20),
    }
}

/// The queries on `cfg` at budget `available`; `seed` draws their arguments.
pub fn check_workload(cfg: &PoolConfigurator, available: i64, seed: u64, st: &mut Stats) -> Check {
    let mut r = Rng(seed ^ 0x776f_726b_6c6f_6164);
    let l = context_len(&mut r);
    let f = match footprint(cfg, l) {
        Ok(f) => f,
        Err(e) => return check_err(&e, st, "footprint"),
    };
    let p = cfg.serving().page_size;
    ensure!(
        f.full_tokens % p == 0 && f.swa_tokens % p == 0,
        "footprint({l}) not page-aligned: {f:?}"
    );
    ensure!(
        cfg.is_all_swa() || f.full_tokens >= l,
        "footprint({l}) holds fewer full tokens than the context: {f:?}"
    );
    let Ok(sizes) = cfg.calculate_pool_sizes(available, None) else {
        return Ok(());
    };
    // Concurrency never grows with the context length.
    let l2 = l.saturating_add(r.range(1, 1 << 16));
    if let (Ok(a), Ok(b)) = (concurrency(cfg, &sizes, l), concurrency(cfg, &sizes, l2)) {
        ensure!(
            b <= a,
            "concurrency grows with context: {a} at {l}, {b} at {l2}"
        );
    }
    let n = r.pick(&[1, 2, 7, 64, u64::MAX]);
    match max_context_len(cfg, &sizes, n) {
        Ok(Some(m)) if m > 0 => {
            let at = concurrency(cfg, &sizes, m).map_err(|e| e.to_string())?;
            ensure!(
                at >= n,
                "max_context_len({n}) = {m} but only {at} requests fit"
            );
        }
        Ok(_) => {}
        Err(e) => check_err(&e, st, "max_context_len")?,
    }
    if tractable(cfg) && r.chance(30) {
        check_min_budget(cfg, r.pick(&[1, 3, 100]), r.range(1, 1 << 16), st)?;
    }
    if r.chance(30) {
        let lens: Vec<u64> = (0..r.range(0, 4)).map(|_| context_len(&mut r)).collect();
        let weights: Option<Vec<f64>> = r.chance(50).then(|| {
            lens.iter()
                .map(|_| r.pick(&[0.0, 1.0, 0.5, 1e308, f64::MAX, -1.0, f64::NAN]))
                .collect()
        });
        match suggest_swa_ratio(cfg, &lens, weights.as_deref(), available) {
            Ok(s) => {
                ensure!(
                    s.ratio.is_finite() && s.ratio > 0.0,
                    "suggested ratio {}",
                    s.ratio
                );
                ensure!(
                    s.concurrency >= s.baseline_concurrency,
                    "suggested ratio admits fewer requests than the baseline"
                );
                ensure!(
                    s.full_tokens_per_request.is_finite() && s.swa_tokens_per_request.is_finite(),
                    "tokens per request not finite"
                );
            }
            Err(e) => check_err(&e, st, "suggest_swa_ratio")?,
        }
    }
    Ok(())
}

/// `min_budget`: its bytes are the exact plan's at its token count, and that plan holds the requests.
fn check_min_budget(cfg: &PoolConfigurator, n: u64, l: u64, st: &mut Stats) -> Check {
    match min_budget(cfg, n, l) {
        Ok((bytes, x)) => {
            let b = cfg.bytes_for_tokens(x).map_err(|e| e.to_string())?;
            ensure!(
                b == bytes,
                "min_budget bytes {bytes} != bytes_for_tokens({x}) = {b}"
            );
            let plan = cfg
                .plan(i64::try_from(bytes).unwrap_or(i64::MAX), Fit::Exact)
                .map_err(|e| format!("the min_budget plan: {e}"))?;
            let holds = concurrency(cfg, &plan.config, l).map_err(|e| e.to_string())?;
            ensure!(
                holds >= n,
                "min_budget({n}, {l}) = {bytes} holds only {holds}"
            );
            Ok(())
        }
        Err(e) => check_err(&e, st, "min_budget"),
    }
}

/// A plan's JSON with one number replaced by an edge value: reading it back
/// either fails or gives a plan whose check and getters do not panic, and a
/// plan that passes the check keeps its sums within its total.
pub fn check_plan_json(plan: &PoolPlan, seed: u64) -> Check {
    let mut r = Rng(seed ^ 0x6a73_6f6e);
    let mut v = serde_json::to_value(plan).map_err(|e| e.to_string())?;
    let mut numbers = Vec::new();
    collect_numbers(&mut v, &mut numbers);
    if numbers.is_empty() {
        return Ok(());
    }
    let edges = [
        serde_json::json!(u64::MAX),
        serde_json::json!(i64::MAX),
        serde_json::json!(i64::MIN),
        serde_json::json!(0),
        serde_json::json!(1u64 << 63),
        serde_json::json!(-1),
    ];
    let edge = edges[r.index(edges.len())].clone();
    *numbers.swap_remove(r.index(numbers.len())) = edge;
    let Ok(back) = serde_json::from_value::<PoolPlan>(v) else {
        return Ok(());
    };
    let checked = back.check().is_ok();
    let (t, a, p) = (
        back.tensor_bytes(),
        back.alignment_bytes(),
        back.padding_bytes(),
    );
    let _ = (back.leftover_bytes(), back.over_budget_bytes());
    if checked {
        ensure!(
            t <= back.total_bytes && a <= back.total_bytes && p <= back.total_bytes,
            "a checked plan's sums exceed its total"
        );
    }
    let _: Option<MemoryPoolConfig> = Some(back.config);
    Ok(())
}

fn collect_numbers<'a>(v: &'a mut serde_json::Value, out: &mut Vec<&'a mut serde_json::Value>) {
    match v {
        serde_json::Value::Number(_) => out.push(v),
        serde_json::Value::Array(xs) => xs.iter_mut().for_each(|x| collect_numbers(x, out)),
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| collect_numbers(x, out)),
        _ => {}
    }
}
