//! The instruction sets the lanes are compiled for, and the one a call uses.
//!
//! The lanes are plain Rust that the compiler vectorizes; how wide depends
//! on the instructions it may use. `fearless_simd` compiles the block loop
//! once per x86 level (AVX-512, AVX2, SSE4.2, SSE2; NEON on aarch64) and
//! picks the best one the CPU has at run time: no `unsafe` here, and one
//! source for every level. Every level computes the same results (the
//! lanes use no instruction whose result depends on the level: exact
//! double arithmetic, no fused multiply-add), and the tests run each level
//! the CPU has.
//!
//! `KVBUDGET_SIMD` (read once) caps the level: `avx512`, `avx2`, `sse4.2`,
//! `sse2` (for benchmarks, or to rule out a level); an unknown or
//! unavailable name leaves the detected level.

use super::Blocks;
use fearless_simd::{dispatch, Level, Simd};
use std::sync::OnceLock;

/// The levels from the best down, with their names.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
fn below(level: Level) -> Vec<(&'static str, Level)> {
    let mut all = Vec::new();
    if let Some(s) = level.as_avx512() {
        all.push(("avx512", Level::Avx512(s)));
    }
    if let Some(s) = level.as_avx2() {
        all.push(("avx2", Level::Avx2(s)));
    }
    if let Some(s) = level.as_sse4_2() {
        all.push(("sse4.2", Level::Sse4_2(s)));
    }
    if let Some(s) = level.as_sse2() {
        all.push(("sse2", Level::Sse2(s)));
    }
    all
}

/// Other targets: the baseline level only.
#[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
fn below(level: Level) -> Vec<(&'static str, Level)> {
    vec![(
        if level.is_fallback() {
            "scalar"
        } else {
            "baseline"
        },
        level,
    )]
}

/// The level batch calls use and its name: the CPU's best, capped by
/// `KVBUDGET_SIMD`.
fn level() -> (&'static str, Level) {
    static LEVEL: OnceLock<(&'static str, Level)> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let all = below(Level::new());
        let cap = std::env::var("KVBUDGET_SIMD").unwrap_or_default();
        all.iter()
            .find(|(name, _)| *name == cap)
            .or(all.first())
            .copied()
            .expect("a baseline level")
    })
}

/// The instruction set the batch fast path runs on in this process:
/// `"avx512"`, `"avx2"`, `"sse4.2"` or `"sse2"` on x86, else `"baseline"`
/// (the target's own vector unit, e.g. NEON) or `"scalar"`. The CPU's best,
/// unless `KVBUDGET_SIMD` names a lower one.
pub fn simd_level() -> &'static str {
    level().0
}

/// Every level this CPU runs, the best first (the tests run each).
#[cfg(test)]
pub(super) fn levels() -> Vec<(&'static str, Level)> {
    below(Level::new())
}

#[cfg(test)]
thread_local! {
    /// The level this thread's batch calls use in a test (None: [`level`]).
    pub(super) static FORCED: std::cell::Cell<Option<Level>> = const { std::cell::Cell::new(None) };
}

/// Runs `blocks` at the chosen level.
pub(super) fn run(blocks: &mut Blocks<'_, '_, '_>) {
    let level = level().1;
    #[cfg(test)]
    let level = FORCED.with(std::cell::Cell::get).unwrap_or(level);
    dispatch!(level, simd => at(simd, blocks));
}

/// The block loop, compiled with `S`'s target features (everything it
/// calls is inlined into it).
#[inline(always)]
fn at<S: Simd>(_: S, blocks: &mut Blocks<'_, '_, '_>) {
    blocks.run();
}
