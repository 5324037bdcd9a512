//! Oracles on plans. `PoolPlan::check` is the structural checker (shapes,
//! bytes, offsets, alignment, rows, padding, dtypes, duplicates, config
//! agreement, an exact fit within budget); these add what it cannot know:
//! the plan matches its configurator (page size, kind, every model layer in
//! the right pool, tensors in layer order), an exact fit is maximal (one more
//! page does not fit: INV-2) and costs `bytes_for_tokens`, a sglang plan
//! carries `calculate_pool_sizes`' numbers, `plan_for_config` reproduces a
//! plan, plans round-trip through JSON, and `check` refuses broken plans.

use crate::gen::ConfigCase;
use crate::oracles::{check_err, Check, Stats};
use kvbudget_core::{
    ConfiguratorKind, Fit, LayerIds, PlanError, PoolConfigurator, PoolName, PoolPlan, TensorKind,
};

/// Layer totals above this are not planned (the core refuses them: a plan lists every layer's tensors).
pub const PLAN_LAYER_LIMIT: u64 = kvbudget_core::plan::MAX_PLAN_LAYERS;

pub fn tractable(cfg: &PoolConfigurator) -> bool {
    cfg.shape().num_layers() + cfg.spec().num_draft_layers() <= PLAN_LAYER_LIMIT
}

/// `PoolPlan::check`, and what only the configurator knows.
fn check_plan(cfg: &PoolConfigurator, plan: &PoolPlan) -> Check {
    plan.check().map_err(|e| format!("PoolPlan::check: {e}"))?;
    let p = cfg.serving().page_size;
    ensure!(
        plan.page_size == p,
        "plan page size {} != {p}",
        plan.page_size
    );
    ensure!(
        plan.configurator == cfg.kind(),
        "plan of configurator {:?} from a {:?}",
        plan.configurator,
        cfg.kind()
    );
    ensure!(
        plan.tensor_bytes() + plan.alignment_bytes() == plan.total_bytes,
        "tensor_bytes + alignment_bytes != total_bytes"
    );
    for pool in &plan.pools {
        // Tensors come layer by layer, in the pool's layer order.
        let mut layers = pool.tensors.iter().map(|t| t.layer_id).collect::<Vec<_>>();
        layers.dedup();
        // A fused entry or the unified buffer: one tensor, on the pool's first layer.
        let shared = pool
            .tensors
            .iter()
            .any(|t| matches!(t.kind, TensorKind::Entry | TensorKind::Bytes));
        let want = if shared {
            pool.layer_ids[..1].to_vec()
        } else {
            pool.layer_ids.clone()
        };
        ensure!(
            layers == want,
            "pool {:?}: tensors are not in the order of the pool's layer_ids",
            pool.name
        );
        ensure!(
            pool.name.is_draft() || pool.kv_cache_dtype == cfg.serving().kv_dtype(),
            "target pool {:?} is {:?}, the serving dtype {:?}",
            pool.name,
            pool.kv_cache_dtype,
            cfg.serving().kv_cache_dtype
        );
    }
    // Every target layer exactly once, sorted, in the right pool.
    let LayerIds { mut full, mut swa } = cfg.layer_ids();
    if cfg.kind() == ConfiguratorKind::Default {
        full.append(&mut swa);
    }
    full.sort_unstable();
    swa.sort_unstable();
    let ids = |n: PoolName| {
        plan.pool(n)
            .map(|p| p.layer_ids.clone())
            .unwrap_or_default()
    };
    if plan.pool(PoolName::Unified).is_some() {
        // Unified memory: one pool of every target layer.
        full.append(&mut swa);
        full.sort_unstable();
        ensure!(
            ids(PoolName::Unified) == full,
            "unified pool layer ids differ from the model's"
        );
    } else {
        ensure!(
            ids(PoolName::Full) == full,
            "full pool layer ids differ from the model's"
        );
        ensure!(
            ids(PoolName::Swa) == swa,
            "swa pool layer ids differ from the model's"
        );
    }
    // The draft's layers: 0..n over its pool and then its SWA-capacity pool.
    let mut draft = ids(PoolName::Draft);
    draft.extend(ids(PoolName::DraftSwa));
    let n = draft.len() as u64;
    ensure!(
        draft == (0..n).collect::<Vec<_>>(),
        "draft layer ids are not 0..{n}"
    );
    Ok(())
}

/// `check` refuses the plan with one field broken; the plan round-trips through JSON.
fn check_checker(plan: &PoolPlan, which: u64, st: &mut Stats) -> Check {
    if which.is_multiple_of(8) {
        let text = serde_json::to_string(plan).map_err(|e| format!("plan to JSON: {e}"))?;
        let back: PoolPlan =
            serde_json::from_str(&text).map_err(|e| format!("plan from its own JSON: {e}"))?;
        ensure!(back == *plan, "a plan does not round-trip through JSON");
        back.check()
            .map_err(|e| format!("a plan read back from JSON fails check: {e}"))?;
    }
    if which % 4 != 1 {
        return Ok(());
    }
    let mut m = plan.clone();
    let pick = (which >> 8) as usize;
    let pools = m.pools.len();
    let what = match (which >> 4) % 7 {
        0 if pools > 0 => {
            m.pools[pick % pools].rows += 1;
            "a pool's rows + 1"
        }
        1 if pools > 0 => {
            let pool = &mut m.pools[pick % pools];
            if pool.tensors.is_empty() {
                return Ok(());
            }
            let n = pool.tensors.len();
            pool.tensors[pick % n].offset += 1;
            "a tensor's offset + 1"
        }
        2 if pools > 0 => {
            m.pools[pick % pools].padding_bytes += 1;
            "a pool's padding_bytes + 1"
        }
        3 if pools > 0 => {
            m.pools.push(m.pools[pick % pools].clone());
            "a pool listed twice"
        }
        4 if pools > 0 => {
            let pool = &mut m.pools[pick % pools];
            pool.tokens += m.page_size;
            "a pool's tokens + page_size"
        }
        5 => {
            m.config.max_total_num_tokens += 1;
            "config.max_total_num_tokens + 1"
        }
        _ => {
            m.total_bytes += 1;
            "total_bytes + 1"
        }
    };
    st.mutations += 1;
    ensure!(
        m.check().is_err(),
        "PoolPlan::check accepts a plan with {what}"
    );
    Ok(())
}

fn count(r: &Result<PoolPlan, PlanError>, n: &mut u64) {
    if r.is_ok() {
        *n += 1;
    }
}

pub fn check_plans(cfg: &PoolConfigurator, c: &ConfigCase, st: &mut Stats) -> Check {
    if !tractable(cfg) {
        st.plans_skipped += 1;
        return Ok(());
    }
    // The exact plan: fits, is maximal, costs bytes_for_tokens.
    let exact = cfg.plan(c.available, Fit::Exact);
    count(&exact, &mut st.exact_plans);
    match &exact {
        Ok(plan) => {
            check_plan(cfg, plan).map_err(|e| format!("exact plan: {e}"))?;
            check_checker(plan, c.mutation, st)?;
            crate::workload::check_plan_json(plan, c.mutation)?;
            ensure!(
                plan.config.max_total_num_tokens > 0,
                "exact plan with max_total {}",
                plan.config.max_total_num_tokens
            );
            let x = plan.config.max_total_num_tokens;
            match cfg.bytes_for_tokens(x) {
                Ok(b) => ensure!(
                    b == plan.total_bytes,
                    "bytes_for_tokens({x}) = {b} != exact plan total {}",
                    plan.total_bytes
                ),
                Err(e) => {
                    return Err(format!(
                        "bytes_for_tokens({x}) of a planned count failed: {e}"
                    ))
                }
            }
            let ps = i64::try_from(cfg.serving().page_size).unwrap_or(i64::MAX);
            if let Some(next) = x.checked_add(ps) {
                if let Ok(b) = cfg.bytes_for_tokens(next) {
                    ensure!(
                        i128::from(b) > i128::from(c.available),
                        "INV-2: one more page ({next} tokens, {b} bytes) fits {} too",
                        c.available
                    );
                }
            }
            // The same counts through plan_for_config give the same pools.
            let given = cfg
                .plan_for_config(&plan.config, Some(c.available))
                .map_err(|e| format!("plan_for_config of an exact plan's config: {e}"))?;
            ensure!(
                given.pools == plan.pools
                    && given.total_bytes == plan.total_bytes
                    && given.fit == Fit::Given,
                "plan_for_config(exact plan's config) differs from the exact plan"
            );
        }
        Err(e) => check_err(e, st, "plan(exact)")?,
    }

    // SGLang's fit carries calculate_pool_sizes' numbers (serving page size).
    let sg_sizes = cfg.calculate_pool_sizes(c.available, None);
    let sglang = cfg.plan(c.available, Fit::Sglang);
    count(&sglang, &mut st.sglang_plans);
    match &sglang {
        Ok(plan) => {
            match &sg_sizes {
                Ok(m) => ensure!(
                    plan.config == *m,
                    "sglang plan config {:?} != calculate_pool_sizes {m:?}",
                    plan.config
                ),
                Err(e) => {
                    return Err(format!(
                        "sglang plan succeeded but calculate_pool_sizes failed: {e}"
                    ))
                }
            }
            check_plan(cfg, plan).map_err(|e| format!("sglang plan: {e}"))?;
            check_checker(plan, c.mutation >> 1, st)?;
        }
        Err(e) => check_err(e, st, "plan(sglang)")?,
    }

    // The constraint path's counts, planned as given (exactly the bytes they take).
    if let Ok(m) = cfg.calculate_pool_sizes_from_max_tokens(c.max_tokens, None) {
        let given = cfg.plan_for_config(&m, None);
        count(&given, &mut st.given_plans);
        match &given {
            Ok(plan) => {
                check_plan(cfg, plan).map_err(|e| format!("plan_for_config: {e}"))?;
                ensure!(
                    plan.config == m
                        && i128::from(plan.available_bytes) == i128::from(plan.total_bytes),
                    "plan_for_config(m, None) has config {:?} and budget {} for {} bytes",
                    plan.config,
                    plan.available_bytes,
                    plan.total_bytes
                );
            }
            Err(e) => check_err(e, st, "plan_for_config")?,
        }
    }

    if let Err(e) = cfg.bytes_for_tokens(c.max_tokens) {
        check_err(&e, st, "bytes_for_tokens")?;
    }
    Ok(())
}
