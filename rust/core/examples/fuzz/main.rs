//! A self-contained fuzz driver for kvbudget-core (INV-8: bad input gives a
//! typed error, never a panic or a wrong number).
//!
//! Inputs come from the core's field table, not from lists of its own: every
//! field of `SCENARIO_FIELDS` (and `DraftGeometry::FIELDS`) gets a raw value
//! drawn by its kind (`FieldInfo::py`, `kind`, `choices`): realistic most of
//! the time (a few per-field hints, checked against the table at startup),
//! else edges (0, 1, powers of two, 2^63 - 1, u64::MAX, i64::MIN, beyond 64
//! bits, negatives, NaN, +-inf, -0.0, subnormals, 1e-300 and 1e300 ratios,
//! unknown and mangled names, values of the wrong type). A splitmix64 PRNG
//! (no dependencies) drives, under `catch_unwind`:
//!
//! - the validating path: `ValueType::set` / `Scenario::set` of each raw
//!   value, the `resolved` constructors, `ModelGeometry::new` (id lists up to
//!   a few thousand, duplicates, ids above i64::MAX), `PoolConfigurator::
//!   {create, new, for_model, from_scenario, with_scenario, with_ratio}`;
//! - with `--unvalidated`, the same values deserialized from JSON (what
//!   pickle / `_from_json` produce on the Python side: nothing checked until
//!   the configurator resolves them), which must give the same configurator
//!   or an error of the same code;
//! - `calculate_pool_sizes`, `calculate_pool_sizes_from_max_tokens`,
//!   `calculate_pool_sizes_many`, `plan` (exact and sglang), `plan_for_config`,
//!   `bytes_for_tokens`, `PoolPlan::check`;
//! - `batch::plan_many`: a random subset of the batch fields as columns
//!   (typed by `cell_dtype`, up to 150 rows: several blocks), the rest in the
//!   base scenario, scalar or array budgets, a forced base status, and now and
//!   then a column of the wrong length or dtype, a duplicate column, a column
//!   of a non-batch field, outputs of the wrong length;
//! - the `FromStr` parsers and every choice field's setter on arbitrary names.
//!
//! Oracles, on every execution: no panic; every error has a code and a
//! message; the field table is consistent (checked once); a configurator's
//! scenario is resolved (resolving again is the identity), rebuilds to itself
//! and has the layer ids it was given, and the factory's kind is
//! `select_kind`'s; `calculate_pool_sizes*` results are positive,
//! page-aligned and follow REFERENCE 2.2-2.5 (INV-4, INV-5, the admission
//! floor, the ChunkCap cap) and are monotone in the budget (INV-3); every
//! plan passes `PoolPlan::check` and matches its configurator (page size,
//! kind, every model layer once in the right pool, tensors in layer order);
//! an exact plan is maximal (one more page does not fit: INV-2), costs
//! `bytes_for_tokens` of its count and is reproduced by `plan_for_config`; a
//! sglang plan carries `calculate_pool_sizes`' numbers; plans round-trip
//! through JSON and `check` refuses a plan with one field broken; every
//! batch row equals the scalar API on the same row (INV-7): the oracle decodes
//! the cells itself and rebuilds the row with `Scenario::set`, through
//! `from_scenario` and through a `ModelGeometry`; a malformed batch is an
//! error of the call; `calculate_pool_sizes_many` rows equal single calls.
//!
//! ```text
//! cargo run --release -p kvbudget-core --example fuzz -- [--iters N] [--seed S]
//!     [--replay I] [--unvalidated] [--show K]
//! ```
//!
//! `--replay I` reruns iteration `I` of seed `S` alone and prints its input.
//! `--unvalidated` also builds every other configurator case from JSON.
//! Exit status 1 on any crash or oracle violation.
//!
//! The release profile keeps overflow checks on for workspace crates
//! (Cargo.toml), so a wrapping intermediate in the core is reported as a
//! panic rather than silently giving a wrong number.

/// Returns `Err(format!(..))` from the enclosing check when `cond` is false.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

mod batch;
mod build;
mod gen;
mod oracles;
mod plans;
mod rng;
mod table;
mod workload;

use batch::BatchCase;
use gen::ConfigCase;
use oracles::{Check, Stats};
use plans::PLAN_LAYER_LIMIT;
use rng::Rng;
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Clone)]
enum Input {
    Config(Box<ConfigCase>),
    Batch(Box<BatchCase>),
    Parse(String),
}

fn gen_input(r: &mut Rng, unvalidated: bool) -> Input {
    match r.below(100) {
        0..=64 => Input::Config(Box::new(gen::gen_config(r, unvalidated))),
        65..=96 => Input::Batch(Box::new(batch::gen_batch(r))),
        _ => Input::Parse(gen::gen_string(r)),
    }
}

fn run(input: &Input, st: &mut Stats) -> Check {
    match input {
        Input::Config(c) => oracles::run_config(c, st),
        Input::Batch(b) => batch::run_batch(b, st),
        Input::Parse(s) => table::run_parse(s),
    }
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

fn truncated(s: &str, max: usize) -> String {
    if s.len() <= max {
        s.to_string()
    } else {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} chars)", &s[..end], s.len())
    }
}

struct Args {
    iters: u64,
    seed: u64,
    replay: Option<u64>,
    unvalidated: bool,
    show: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        iters: 1_000_000,
        seed: 0x6B76_6275_6467_6574, // "kvbudget"
        replay: None,
        unvalidated: false,
        show: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            let v = v.replace('_', "");
            if let Some(hex) = v.strip_prefix("0x") {
                u64::from_str_radix(hex, 16).map_err(|e| format!("{name}: {e}"))
            } else {
                v.parse().map_err(|e| format!("{name}: {e}"))
            }
        };
        match flag.as_str() {
            "--iters" => a.iters = num("--iters")?,
            "--seed" => a.seed = num("--seed")?,
            "--replay" => a.replay = Some(num("--replay")?),
            "--show" => a.show = num("--show")? as usize,
            "--unvalidated" => a.unvalidated = true,
            "-h" | "--help" => {
                return Err(
                    "usage: fuzz [--iters N] [--seed S] [--replay I] [--unvalidated] [--show K]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("panic at {loc}: {msg}")));
    }));
}

fn report(args: &Args, st: &Stats, failures: &Failures, secs: f64) -> String {
    let flags = args.flags();
    let mut out = String::new();
    let _ = writeln!(out, "seed: {:#x}{flags}", args.seed);
    let _ = writeln!(out, "executions: {}", args.iters);
    let _ = writeln!(out, "crashes: {}", failures.crashes);
    let _ = writeln!(out, "oracle violations: {}", failures.violations);
    let _ = writeln!(out, "elapsed: {secs:.2} s");
    let _ = writeln!(
        out,
        "executions/second: {:.0}",
        args.iters as f64 / secs.max(1e-9)
    );
    let _ = writeln!(
        out,
        "coverage: {} configurators built, {} build errors, {} built from JSON, {} JSON refused, \
         {} sizes ok, {} exact plans, {} sglang plans, {} given plans, {} plans skipped \
         (> {PLAN_LAYER_LIMIT} layers), {} checker mutations, {} batch calls ({} refused), \
         {} batch rows ({} ok)",
        st.configs_built,
        st.build_errors,
        st.json_built,
        st.json_refused,
        st.sizes_ok,
        st.exact_plans,
        st.sglang_plans,
        st.given_plans,
        st.plans_skipped,
        st.mutations,
        st.batch_calls,
        st.batch_call_errors,
        st.batch_rows,
        st.batch_rows_ok,
    );
    let _ = writeln!(
        out,
        "errors by code: invalid_config {}, overflow {}, not_enough_memory {}, swa_pool_too_small {}",
        st.errors_by_code[1], st.errors_by_code[2], st.errors_by_code[3], st.errors_by_code[4],
    );
    let mut kinds: Vec<_> = failures.kinds.iter().collect();
    kinds.sort_by_key(|(_, (n, first, _))| (std::cmp::Reverse(*n), *first));
    for (_, (n, first, msg)) in kinds {
        let _ = writeln!(
            out,
            "  {n} x, first at iter {first} (--seed {:#x} --replay {first}{flags}): {}",
            args.seed,
            truncated(msg, 300)
        );
    }
    out
}

impl Args {
    fn flags(&self) -> &'static str {
        if self.unvalidated {
            " --unvalidated"
        } else {
            ""
        }
    }
}

#[derive(Default)]
struct Failures {
    crashes: u64,
    violations: u64,
    /// Failure signature -> (count, first iteration, full message).
    kinds: HashMap<String, (u64, u64, String)>,
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = table::check_table() {
        println!("field table: {e}");
        return ExitCode::FAILURE;
    }

    if let Some(i) = args.replay {
        let input = gen_input(&mut Rng::for_iteration(args.seed, i), args.unvalidated);
        println!("input: {}", truncated(&format!("{input:#?}"), 20_000));
        let mut st = Stats::default();
        let r = run(&input, &mut st); // panics propagate with the default hook
        println!("result: {r:?}");
        return if r.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }

    install_panic_hook();
    let start = Instant::now();
    let mut st = Stats::default();
    let mut failures = Failures::default();
    let mut shown = 0usize;
    for i in 0..args.iters {
        let input = gen_input(&mut Rng::for_iteration(args.seed, i), args.unvalidated);
        let failure = match catch_unwind(AssertUnwindSafe(|| run(&input, &mut st))) {
            Ok(Ok(())) => continue,
            Ok(Err(msg)) => {
                failures.violations += 1;
                format!("oracle violation: {msg}")
            }
            Err(_) => {
                failures.crashes += 1;
                LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .unwrap_or_else(|| "panic".into())
            }
        };
        // One kind per panic location, or per violation text up to its first number.
        let sig: String = if failure.starts_with("panic") {
            failure.split(": ").next().unwrap_or_default().to_string()
        } else {
            failure
                .chars()
                .take_while(|c| !c.is_ascii_digit())
                .take(90)
                .collect()
        };
        failures
            .kinds
            .entry(sig)
            .or_insert((0, i, failure.clone()))
            .0 += 1;
        if shown < args.show {
            shown += 1;
            println!(
                "FAIL iter {i} (reproduce: --seed {:#x} --replay {i}{}): {}",
                args.seed,
                args.flags(),
                truncated(&failure, 600)
            );
        }
    }
    let secs = start.elapsed().as_secs_f64();
    print!("{}", report(&args, &st, &failures, secs));
    if failures.crashes + failures.violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
