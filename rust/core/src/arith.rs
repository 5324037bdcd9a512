//! Checked integer helpers and CPython-exact float operations.
//!
//! SGLang computes in CPython. Where a ratio enters, the cell size is an
//! IEEE-754 double and `A // C` is CPython's float floor division, which is
//! built on `fmod` rather than `floor(A / C)`. These helpers reproduce those
//! operations bit for bit (REFERENCE 2.6).

use crate::error::Fail;

/// The largest byte or token quantity the core holds: every quantity must fit
/// a signed 64-bit integer (`i64::MAX`), so that it can be compared with a
/// signed budget and returned to Python unchanged.
pub const MAX_QUANTITY: u64 = i64::MAX as u64;

/// `a * b`, or an overflow error naming `what` when it exceeds [`MAX_QUANTITY`].
#[inline(always)]
pub fn mul<E: Fail>(a: u64, b: u64, what: &str) -> Result<u64, E> {
    match a.checked_mul(b) {
        Some(v) if v <= MAX_QUANTITY => Ok(v),
        _ => Err(E::overflow_of(what)),
    }
}

/// `a + b`, or an overflow error naming `what` when it exceeds [`MAX_QUANTITY`].
#[inline(always)]
pub fn add<E: Fail>(a: u64, b: u64, what: &str) -> Result<u64, E> {
    match a.checked_add(b) {
        Some(v) if v <= MAX_QUANTITY => Ok(v),
        _ => Err(E::overflow_of(what)),
    }
}

/// Converts a u64 to i64, or an overflow error naming `what`.
#[inline(always)]
pub fn to_i64<E: Fail>(a: u64, what: &str) -> Result<i64, E> {
    i64::try_from(a).map_err(|_| E::overflow_of(what))
}

/// Converts an i128 to i64, or an overflow error naming `what`.
#[inline(always)]
pub fn narrow<E: Fail>(a: i128, what: &str) -> Result<i64, E> {
    i64::try_from(a).map_err(|_| E::overflow_of(what))
}

/// Python's integer floor division `a // b` for `b > 0` (rounds toward minus infinity).
pub fn floor_div(a: i64, b: i64) -> i64 {
    debug_assert!(b > 0);
    a.div_euclid(b)
}

/// `a // p * p`: the largest multiple of `p` not above `a` (`p > 0`); an
/// overflow error when that multiple is below `i64::MIN`.
#[inline(always)]
pub fn align_down<E: Fail>(a: i64, p: i64) -> Result<i64, E> {
    if p & (p - 1) == 0 {
        // A power of two: clearing the low bits floors in two's complement and
        // never leaves the i64 range.
        return Ok(a & !(p - 1));
    }
    a.div_euclid(p)
        .checked_mul(p)
        .ok_or_else(|| E::overflow_of("page-aligned token count"))
}

/// `ceil(a / p) * p` for `a >= 0`, `p > 0` (SGLang's `ceil_align`).
#[inline(always)]
pub fn align_up<E: Fail>(a: u64, p: u64, what: &str) -> Result<u64, E> {
    let pages = a.div_ceil(p);
    mul(pages, p, what)
}

/// The largest `x` in `lo..hi` with `fits(x)`, for a `fits` that holds up to
/// some point and fails after it, given that `fits(lo)` holds (or `lo` is the
/// answer by convention) and `fits(hi)` fails: bisection in `O(log(hi - lo))` calls.
pub fn last_fitting(mut lo: u64, mut hi: u64, mut fits: impl FnMut(u64) -> bool) -> u64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// CPython's `float.__floordiv__` (`Objects/floatobject.c`, `_float_div_mod`).
///
/// `b` must be nonzero and finite. A fast path returns `floor(a / b)` when the
/// rounded quotient is far (relative 2^-40) from an integer, where it equals
/// the floor of the exact quotient and so CPython's result; otherwise it
/// follows CPython's fmod-based steps. The two agree on every input (tested).
#[inline(always)]
pub fn py_float_floordiv(a: f64, b: f64) -> f64 {
    let q = a / b;
    if q.is_finite() && q.abs() < FLOORDIV_SURE_BELOW {
        // floor(q) from a truncation (exact below 2^63): no libm call on baseline x86-64.
        let t = q as i64 as f64;
        let f = if t > q { t - 1.0 } else { t };
        if floor_is_sure(q, f) {
            return f;
        }
    }
    py_float_floordiv_exact(a, b)
}

/// Below this quotient (in magnitude, under 2^52) the floor of a rounded
/// quotient is CPython's floor division where [`floor_is_sure`] says so.
pub(crate) const FLOORDIV_SURE_BELOW: f64 = 4.5e15;

/// Whether `f = floor(q)` of the rounded quotient `q` is the floor of the
/// exact one: `q` is far (relative 2^-40) from an integer. Branch free.
// `&`, not `&&`: the batch kernel's lanes call it.
#[allow(clippy::needless_bitwise_bool)]
#[inline(always)]
pub(crate) fn floor_is_sure(q: f64, f: f64) -> bool {
    let frac = q - f;
    let margin = q.abs().max(1.0) * 1e-12;
    (frac > margin) & (frac < 1.0 - margin)
}

/// `int(a // b)` for doubles (CPython's float floor division, then `int`):
/// the profiling path's `int(available_bytes // cell_size)`. The fast path of
/// [`py_float_floordiv`] yields the integer directly; elsewhere it is
/// `py_int(py_float_floordiv(a, b))`.
#[inline(always)]
pub fn py_int_floordiv<E: Fail>(a: f64, b: f64, what: &str) -> Result<i64, E> {
    let q = a / b;
    if q.abs() < FLOORDIV_SURE_BELOW {
        // |q| < 2^53: the truncation is exact and in range (NaN fails the test).
        let t = q as i64;
        let tf = t as f64;
        let (f, fi) = if tf > q { (tf - 1.0, t - 1) } else { (tf, t) };
        if floor_is_sure(q, f) {
            return Ok(fi);
        }
    }
    py_int(py_float_floordiv_exact(a, b), what)
}

/// CPython's steps verbatim: `mod = fmod(a, b)`, `div = (a - mod) / b`, then adjust.
#[cold]
#[inline(never)]
pub fn py_float_floordiv_exact(a: f64, b: f64) -> f64 {
    let m = a % b; // fmod, exact
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        (0.0f64).copysign(a / b)
    } else {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    }
}

/// CPython's `int(x)` for a double, truncating toward zero, into i64;
/// non-finite or out-of-range values are an overflow error naming `what`.
#[inline(always)]
pub fn py_int<E: Fail>(x: f64, what: &str) -> Result<i64, E> {
    // 2^63 is exactly representable; every double below it in magnitude truncates into range.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !x.is_finite() || !(-LIMIT..LIMIT).contains(&x) {
        return Err(E::overflow_of(what));
    }
    Ok(x as i64) // `as` truncates toward zero, like int()
}

/// CPython's `int(a / b)` for integers `a >= 0`, `b >= 1`: the true division
/// rounds the exact quotient to the nearest double (ties to even), then `int`
/// truncates. Below 2^52 that is `a // b`; from 2^52 a half or more of a unit
/// rounds up; from 2^53 the quotient is an overflow error naming `what` (far
/// beyond any byte count the core plans).
pub fn py_int_true_div<E: Fail>(a: u128, b: u64, what: &str) -> Result<u64, E> {
    let b64 = b.max(1);
    let b = u128::from(b64);
    // A 64-bit dividend (every realistic cell size times draft layers) takes the
    // 64-bit division: the same quotient and remainder, without the 128-bit
    // division's library call.
    let (q, r) = match u64::try_from(a) {
        Ok(a) => (u128::from(a / b64), u128::from(a % b64)),
        Err(_) => (a / b, a % b),
    };
    if q < 1 << 52 {
        Ok(q as u64)
    } else if q < 1 << 53 {
        let up = 2 * r > b || (2 * r == b && q % 2 == 1);
        Ok(q as u64 + u64::from(up))
    } else {
        Err(E::overflow_of(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn floordiv_matches_cpython_examples() {
        // Values checked against CPython 3.11.
        assert_eq!(py_float_floordiv(7.0, 2.0), 3.0);
        assert_eq!(py_float_floordiv(-7.0, 2.0), -4.0);
        assert_eq!(py_float_floordiv(1.0, 0.1), 9.0); // floor(1/0.1) would be 10
        assert_eq!(py_float_floordiv(42_949_672_960.0, 430_899.2), 99_674.0);
    }

    #[test]
    fn floordiv_fast_path_equals_cpython_steps() {
        // A deterministic sweep of awkward operands: near-integer quotients, huge and tiny values.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2_000_000 {
            let a = match next() % 4 {
                0 => (next() % (1 << 40)) as f64,
                1 => -((next() % (1 << 50)) as f64),
                2 => f64::from_bits(next() >> 2),
                _ => (next() % 1000) as f64 * 430_899.2,
            };
            let b = match next() % 4 {
                0 => 430_899.2,
                1 => 1.0 + (next() % 100_000) as f64 / 7.0,
                2 => f64::from_bits((next() >> 2) | 1),
                _ => 0.1 * (1 + next() % 1000) as f64,
            };
            if !(a.is_finite() && b.is_finite() && b != 0.0) {
                continue;
            }
            let fast = py_float_floordiv(a, b);
            let exact = py_float_floordiv_exact(a, b);
            assert!(
                fast == exact || (fast.is_nan() && exact.is_nan()),
                "{a} // {b}: {fast} != {exact}"
            );
            assert_eq!(
                py_int_floordiv::<ErrorCode>(a, b, "x"),
                py_int::<ErrorCode>(exact, "x"),
                "int({a} // {b})"
            );
        }
    }

    #[test]
    fn align_down_power_of_two_matches_division() {
        for a in [
            -130i64,
            -129,
            -128,
            -1,
            0,
            1,
            63,
            64,
            65,
            1 << 40,
            i64::MIN,
            i64::MIN + 1,
            i64::MAX,
        ] {
            for p in [1i64, 2, 4, 64, 1 << 20] {
                let slow = a.div_euclid(p).checked_mul(p);
                assert_eq!(align_down::<ErrorCode>(a, p).ok(), slow, "{a} {p}");
            }
        }
    }

    #[test]
    fn py_int_truncates_and_rejects_out_of_range() {
        assert_eq!(py_int::<ErrorCode>(-2.7, "x").unwrap(), -2);
        assert_eq!(py_int::<ErrorCode>(2.7, "x").unwrap(), 2);
        assert!(py_int::<ErrorCode>(f64::NAN, "x").is_err());
        assert!(py_int::<ErrorCode>(9.3e18, "x").is_err());
    }

    #[test]
    fn alignment() {
        assert_eq!(align_down::<ErrorCode>(-1, 64).unwrap(), -64);
        assert_eq!(align_down::<ErrorCode>(127, 64).unwrap(), 64);
        assert!(align_down::<ErrorCode>(i64::MIN, 3).is_err());
        assert_eq!(align_up::<ErrorCode>(61_952, 64, "x").unwrap(), 61_952);
        assert_eq!(align_up::<ErrorCode>(47_032, 64, "x").unwrap(), 47_040);
        assert_eq!(floor_div(-7, 2), -4);
    }
}
