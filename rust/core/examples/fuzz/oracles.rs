//! Oracles on a configurator: how it was built, both solve paths
//! (REFERENCE 2.2-2.5), monotonicity in the budget, many budgets at once.

use crate::build::{build_from_json, build_validated, same_configurator};
use crate::gen::{Build, ConfigCase};
use crate::plans::check_plans;
use kvbudget_core::batch::Threads;
use kvbudget_core::{
    select_kind, CellSize, ConfiguratorKind, ErrorCode, LayerIds, MemoryPoolConfig, PlanError,
    PoolConfigurator, Sizing,
};

/// What the run covered.
#[derive(Debug, Default)]
pub struct Stats {
    pub configs_built: u64,
    pub build_errors: u64,
    pub json_built: u64,
    pub json_refused: u64,
    pub sizes_ok: u64,
    pub exact_plans: u64,
    pub sglang_plans: u64,
    pub given_plans: u64,
    pub plans_skipped: u64,
    pub mutations: u64,
    pub batch_calls: u64,
    pub batch_call_errors: u64,
    pub batch_rows: u64,
    pub batch_rows_ok: u64,
    pub errors_by_code: [u64; 5],
}

pub type Check = Result<(), String>;

/// Every error has a code with a nonzero status and a message.
pub fn check_err(e: &PlanError, st: &mut Stats, what: &str) -> Check {
    ensure!(
        !e.message().is_empty(),
        "{what}: error with code {:?} has an empty message",
        e.code
    );
    ensure!(
        e.code.status() != 0 && !e.code.as_str().is_empty(),
        "{what}: error code {:?} has status 0",
        e.code
    );
    st.errors_by_code[usize::from(e.code.status())] += 1;
    Ok(())
}

/// `x // p * p` (Python floor), in i128 so it cannot overflow here.
fn align_down(x: i128, p: i128) -> i128 {
    x.div_euclid(p) * p
}

fn ceil_p(x: u64, p: u64) -> u128 {
    u128::from(x).div_ceil(u128::from(p)) * u128::from(p)
}

#[derive(Debug, Clone, Copy)]
enum SizesPath {
    Bytes(i64),
    Tokens(i64),
}

/// `(A // C) // p * p` of an integer cell size, on the bytes path.
fn from_cell(path: SizesPath, cell: CellSize, pi: i128) -> Option<(i64, u64, i128)> {
    match (path, cell) {
        (SizesPath::Bytes(a), CellSize::Int(c)) => Some((
            a,
            c,
            align_down(i128::from(a).div_euclid(i128::from(c)), pi),
        )),
        _ => None,
    }
}

/// REFERENCE 2.2-2.5 on a successful `calculate_pool_sizes*`.
fn check_sizes(cfg: &PoolConfigurator, m: &MemoryPoolConfig, p: u64, path: SizesPath) -> Check {
    let pi = i128::from(p);
    let total = m.max_total_num_tokens;
    ensure!(
        total > 0,
        "success with max_total_num_tokens = {total} <= 0"
    );
    ensure!(
        i128::from(total) % pi == 0,
        "max_total_num_tokens {total} is not a multiple of page size {p}"
    );
    let s = cfg.serving();
    match cfg.kind() {
        ConfiguratorKind::Default => {
            ensure!(
                m.full_max_total_num_tokens.is_none() && m.swa_max_total_num_tokens.is_none(),
                "Default returned full/swa counts {m:?}"
            );
            if let Some((a, c, want)) = from_cell(path, cfg.cell_size(), pi) {
                ensure!(
                    i128::from(total) == want,
                    "Default: max_total {total} != (A // C) // p * p = {want} (A={a}, C={c}, p={p})"
                );
            }
        }
        ConfiguratorKind::HybridSwa => {
            let (Some(full), Some(swa)) = (m.full_max_total_num_tokens, m.swa_max_total_num_tokens)
            else {
                return Err(format!("HybridSWA without full/swa counts: {m:?}"));
            };
            if cfg.is_all_swa() {
                ensure!(
                    full == 0 && swa == total,
                    "all-SWA: expected full 0, swa == max_total, got {m:?}"
                );
                if let Some((_, _, want)) = from_cell(path, cfg.cell_size(), pi) {
                    ensure!(
                        i128::from(total) == want,
                        "all-SWA: swa {total} != (A // C) // p * p = {want}"
                    );
                }
            } else {
                ensure!(full == total, "HybridSWA: full {full} != max_total {total}");
                let prod = full as f64 * s.swa_full_tokens_ratio;
                ensure!(
                    prod.is_finite() && prod.abs() < 9.3e18,
                    "HybridSWA: full * r = {prod} is out of range but the call succeeded"
                );
                let want = align_down(i128::from(prod.trunc() as i64), pi);
                ensure!(
                    i128::from(swa) == want,
                    "INV-5: swa {swa} != int(full * r) // p * p = {want} (full={full}, r={}, p={p})",
                    s.swa_full_tokens_ratio
                );
                ensure!(
                    swa >= 0 && i128::from(swa) % pi == 0,
                    "swa {swa} not aligned to {p}"
                );
                // Unified memory has no admission floor (SGLang skips it).
                if let Some(w) = cfg
                    .shape()
                    .sliding_window_size
                    .filter(|_| !cfg.sizing().unified)
                {
                    ensure!(
                        i128::from(swa) > i128::from(w) + i128::from(s.page_size),
                        "admission floor: swa {swa} <= W {w} + page {} yet no error",
                        s.page_size
                    );
                }
            }
        }
        ConfiguratorKind::RequestCap => {
            let (Some(full), Some(swa)) = (m.full_max_total_num_tokens, m.swa_max_total_num_tokens)
            else {
                return Err(format!("ChunkCap without full/swa counts: {m:?}"));
            };
            ensure!(full == total, "ChunkCap: full {full} != max_total {total}");
            let Some(cap) = cfg.swa_cap() else {
                return Err("ChunkCap without a cap".into());
            };
            let cap_p = ceil_p(cap, p);
            match path {
                SizesPath::Bytes(_) => ensure!(
                    u128::try_from(swa).ok() == Some(cap_p),
                    "ChunkCap from bytes: swa {swa} != ceil_p(cap {cap}) = {cap_p}"
                ),
                SizesPath::Tokens(t) => {
                    let want = cap_p.min(u128::try_from(t).unwrap_or(0));
                    ensure!(
                        u128::try_from(swa).ok() == Some(want),
                        "ChunkCap from tokens: swa {swa} != min(ceil_p(cap {cap}), T {t}) = {want}"
                    );
                }
            }
        }
    }
    if let SizesPath::Tokens(t) = path {
        ensure!(total <= t, "from max tokens: max_total {total} > T {t}");
    }
    Ok(())
}

/// INV-3: more budget never gives fewer tokens in any pool.
fn check_monotone(a: &MemoryPoolConfig, b: &MemoryPoolConfig) -> Check {
    let t = |c: &MemoryPoolConfig| {
        [
            c.max_total_num_tokens,
            c.full_max_total_num_tokens.unwrap_or(0),
            c.swa_max_total_num_tokens.unwrap_or(0),
        ]
    };
    ensure!(
        t(a).iter().zip(t(b)).all(|(x, y)| *x <= y),
        "INV-3: more budget gave fewer tokens: {a:?} then {b:?}"
    );
    Ok(())
}

/// A batch row's outputs equal the scalar API's result (INV-7).
pub fn compare_row(
    want: &Result<MemoryPoolConfig, PlanError>,
    t: i64,
    f: i64,
    s: i64,
    status: u8,
) -> Check {
    match want {
        Ok(m) => ensure!(
            status == 0
                && t == m.max_total_num_tokens
                && f == m.full_max_total_num_tokens.unwrap_or(-1)
                && s == m.swa_max_total_num_tokens.unwrap_or(-1),
            "batch ({t}, {f}, {s}, status {status}) != scalar {m:?}"
        ),
        Err(e) => ensure!(
            status == e.code.status() && t == 0 && f == 0 && s == 0,
            "batch ({t}, {f}, {s}, status {status}) != scalar error {:?}: {}",
            e.code,
            e.message()
        ),
    }
    Ok(())
}

/// A built configurator is resolved, rebuilds to itself, and has the ids it was given.
fn check_configurator(cfg: &PoolConfigurator, c: &ConfigCase) -> Check {
    let sc = *cfg.scenario();
    ensure!(
        sc.resolved().as_ref() == Ok(&sc),
        "resolving a configurator's scenario again changes it or fails: {:?}",
        sc.resolved()
    );
    ensure!(
        cfg.shape().validate().is_ok()
            && cfg.serving().validate().is_ok()
            && cfg.spec().validate().is_ok(),
        "a configurator holds a value that does not validate"
    );
    let sizing = Sizing::new(Some(cfg.kind()), &sc);
    ensure!(
        sizing.as_ref() == Ok(cfg.sizing()),
        "Sizing::new of the configurator's own scenario gives {sizing:?}"
    );
    let again = cfg.with_scenario(&sc);
    ensure!(
        again.as_ref() == Ok(cfg),
        "with_scenario(own scenario) differs: {:?}",
        again.map(|c| c.kind())
    );
    let again = cfg.with_ratio(cfg.serving().swa_full_tokens_ratio);
    ensure!(
        again.as_ref() == Ok(cfg),
        "with_ratio(own ratio) differs: {:?}",
        again.map(|c| c.kind())
    );
    if let Build::Create | Build::ForModel(None) | Build::FromScenario(None) = c.build {
        let want = select_kind(cfg.shape(), cfg.serving());
        ensure!(
            cfg.kind() == want,
            "the factory built {:?} but select_kind says {want:?}",
            cfg.kind()
        );
    }
    let ids = cfg.layer_ids();
    let want = if let Some((full, swa)) = &c.ids {
        LayerIds {
            full: full.clone(),
            swa: swa.clone(),
        }
    } else {
        let (n_f, n_s) = (sc.shape.num_full_layers, sc.shape.num_swa_layers);
        LayerIds {
            full: (0..n_f).collect(),
            swa: (n_f..n_f + n_s).collect(),
        }
    };
    ensure!(ids == want, "layer_ids() are not the model's layer ids");
    Ok(())
}

pub fn run_config(c: &ConfigCase, st: &mut Stats) -> Check {
    let checked = build_validated(c);
    let built = if c.json {
        if let Some(json) = build_from_json(c) {
            st.json_built += 1;
            same_configurator(&checked, &json)?;
            json
        } else {
            st.json_refused += 1;
            checked
        }
    } else {
        checked
    };
    let cfg = match built {
        Ok(cfg) => cfg,
        Err(e) => {
            st.build_errors += 1;
            return check_err(&e, st, "build");
        }
    };
    st.configs_built += 1;
    check_configurator(&cfg, c)?;
    let p = c.page.unwrap_or(cfg.serving().page_size);

    // The profiling path, and INV-3.
    let sizes = cfg.calculate_pool_sizes(c.available, c.page);
    match &sizes {
        Ok(m) => {
            ensure!(
                i64::try_from(p).is_ok(),
                "page size {p} > i64::MAX accepted"
            );
            st.sizes_ok += 1;
            check_sizes(&cfg, m, p, SizesPath::Bytes(c.available))
                .map_err(|e| format!("calculate_pool_sizes({}): {e}", c.available))?;
        }
        Err(e) => check_err(e, st, "calculate_pool_sizes")?,
    }
    if let Some(a2) = c.available.checked_add(c.available_delta) {
        let more = cfg.calculate_pool_sizes(a2, c.page);
        if let Ok(m1) = &sizes {
            match &more {
                Ok(m2) => check_monotone(m1, m2)?,
                Err(e) if e.code == ErrorCode::Overflow => {}
                Err(e) => {
                    return Err(format!(
                        "INV-3: budget {} succeeded but the larger {a2} failed: {e}",
                        c.available
                    ))
                }
            }
        }
    }

    // The constraint path.
    match cfg.calculate_pool_sizes_from_max_tokens(c.max_tokens, c.page) {
        Ok(m) => check_sizes(&cfg, &m, p, SizesPath::Tokens(c.max_tokens)).map_err(|e| {
            format!(
                "calculate_pool_sizes_from_max_tokens({}): {e}",
                c.max_tokens
            )
        })?,
        Err(e) => check_err(&e, st, "calculate_pool_sizes_from_max_tokens")?,
    }

    // Many budgets at once (INV-7 on one configurator).
    if let Some(many) = &c.many {
        let mut bufs = crate::batch::sentinel_buffers(many.out_lens);
        let n = many.budgets.len();
        let r =
            cfg.sizing()
                .calculate_pool_sizes_many(&many.budgets, &mut bufs.views(), Threads::Auto);
        let lens_ok = many.out_lens.iter().all(|l| *l == n);
        match r {
            Ok(()) => {
                ensure!(
                    lens_ok,
                    "calculate_pool_sizes_many accepted output lengths {:?} for {n} rows",
                    many.out_lens
                );
                for (i, &a) in many.budgets.iter().enumerate() {
                    let want = cfg.calculate_pool_sizes(a, None);
                    let (o1, o2, o3, o4) = bufs.row(i);
                    compare_row(&want, o1, o2, o3, o4)
                        .map_err(|e| format!("calculate_pool_sizes_many row {i}: {e}"))?;
                }
            }
            Err(e) => {
                ensure!(
                    !lens_ok,
                    "calculate_pool_sizes_many failed with matching lengths: {e}"
                );
                check_err(&e, st, "calculate_pool_sizes_many")?;
            }
        }
    }
    check_plans(&cfg, c, st)?;
    crate::workload::check_workload(&cfg, c.available, c.mutation, st)
}
