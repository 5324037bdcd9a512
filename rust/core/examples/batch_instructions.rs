//! A small driver for counting instructions per batch row with callgrind
//! (repeatable, unlike timings on a shared machine):
//!
//! ```text
//! cargo build --release -p kvbudget-core --example batch_instructions
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/batch_instructions varied 20000
//! ```
//!
//! `--toggle-collect='kvbudget_core::batch::plan_many'` counts only the call;
//! divide by the rows (`benches/callgrind.sh` does this). Modes: `varied` (18
//! varying columns besides the budget), `varied32` (the same rows, their
//! integer columns in int32 cells), `budget` (only the budget varies) and `single` (the
//! varied rows, one `plan_many` call per row: the fixed cost of a call, per call).
//! Arguments: `MODE ROWS [REPEATS [THREADS]]` (THREADS 0: automatic); it also
//! prints the best wall time per row of REPEATS calls and the instruction set
//! the fast path ran on (`KVBUDGET_SIMD` caps it).

#[path = "../benches/common/varied.rs"]
mod varied;

use std::hint::black_box;

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "varied".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let owner = match mode.as_str() {
        "varied" | "single" => varied::varied(n, 7),
        "varied32" => varied::varied(n, 7).narrowed(),
        "budget" => varied::one_setup(n, 11),
        other => {
            eprintln!("unknown mode {other:?}: expected varied, varied32, budget or single");
            std::process::exit(2);
        }
    };
    let columns = owner.columns();
    let mut out = varied::Outs::new(n);
    let repeats: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    // Threads: the fourth argument (default 1, so that callgrind counts one thread's work).
    let threads = match args.next().and_then(|s| s.parse::<usize>().ok()) {
        Some(0) => kvbudget_core::batch::Threads::Auto,
        Some(t) => kvbudget_core::batch::Threads::Fixed(t),
        None => kvbudget_core::batch::Threads::Fixed(1),
    };
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let t = std::time::Instant::now();
        if mode == "single" {
            owner.run_each_row(black_box(&mut out));
        } else {
            owner.run(black_box(&columns), &mut out.views(), threads);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    let ok = out
        .status
        .iter()
        .map(|s| usize::from(*s == 0))
        .sum::<usize>();
    println!(
        "{mode}: {n} rows, {ok} ok, best of {repeats}: {:.1} ns/row (simd level {})",
        best * 1e9 / n as f64,
        kvbudget_core::batch::simd_level()
    );
}
