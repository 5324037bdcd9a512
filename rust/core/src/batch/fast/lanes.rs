//! One fast row's arithmetic, straight-line: every configurator kind's
//! result is computed and the row's own is selected, with no branch, no
//! table load and no conversion instruction, so that the loop over a block
//! of rows compiles to vector code (see `super::simd` for the instruction
//! sets it is compiled for).
//!
//! Every quantity is an integer below 2^52 held by a double (exactly): sums
//! and products below 2^52 are exact, the truncated quotient of two such
//! numbers is the floor of the exact one ([`floor_div`]), and integers move
//! in and out of doubles by the 2^52 trick ([`int`], [`uint`]). The
//! domain's bounds ([`MAX_FAST_LAYERS`] and the constants beside it) keep
//! every intermediate there; a row whose value would leave it is `slow`.
//!
//! Each result is what the scalar path computes (`Sizing::build` and the
//! kind's `*_from_bytes`, the pinned fields at their defaults), SGLang's
//! formulas of REFERENCE 2.2 to 2.7 restated. Whatever the scalar path would
//! reject or compute differently (a bad or out-of-domain cell, an error of
//! any step, a float floor division too close to an integer for CPython's
//! result to be sure, an FP4 Default cell) makes the row `slow`: the caller
//! hands it to the exact path, so a lane's result is used only where it is
//! the scalar one. The tests (`tests.rs`) hold the two equal row by row.

// `&` and `|`, not `&&` and `||`, between the lanes' conditions: no branch.
#![allow(clippy::needless_bitwise_bool)]

use super::cells::Row;
use crate::arith::{floor_is_sure, FLOORDIV_SURE_BELOW};
use crate::cell::MXFP8_SCALE_BLOCK;
use crate::dtype::{KvDtype, ModelDtype};
use crate::fields::Named;
use crate::sizing::kind_index;
use crate::spec::SpecAlgorithm;

/// 2^52: every lane quantity is an integer below it.
const M: f64 = (1u64 << 52) as f64;

/// Bounds of the fast domain, beyond the cells' own checks: with at most
/// [`MAX_FAST_LAYERS`] layers, [`MAX_FAST_HEADS`] KV heads, head dims up to
/// [`MAX_FAST_DIM`], [`MAX_FAST_DRAFT`] draft layers and DFLASH cells up to
/// [`MAX_FAST_DFLASH`] bytes, every cell-size intermediate stays below 2^52
/// (the Default cell below 2^42 before its draft term, `C * d` below 2^52).
pub(super) const MAX_FAST_LAYERS: u64 = 1 << 12;
/// See [`MAX_FAST_LAYERS`].
pub(super) const MAX_FAST_HEADS: u64 = 1 << 12;
/// See [`MAX_FAST_LAYERS`].
pub(super) const MAX_FAST_DIM: u64 = 1 << 14;
/// See [`MAX_FAST_LAYERS`].
pub(super) const MAX_FAST_DRAFT: u64 = 1 << 10;
/// See [`MAX_FAST_LAYERS`].
pub(super) const MAX_FAST_DFLASH: u64 = 1 << 40;
/// Page and tensor-parallel sizes: at most 2^20 each.
pub(super) const MAX_FAST_SIZE: u64 = 1 << 20;
/// The request cap's counts (`max_running_requests`, `swa_eviction_interval`,
/// `num_steps`, `eagle_topk`, `num_draft_tokens`): at most 2^16 each...
pub(super) const MAX_FAST_COUNT: u64 = 1 << 16;
/// ...and its token spans (`sliding_window_size`, `chunked_prefill_size`):
/// at most 2^32 each, so that the cap per request stays below 2^39 tokens.
pub(super) const MAX_FAST_SPAN: u64 = 1 << 32;
/// The request cap's SWA tokens before the chunk, at most (a row above it is slow).
const MAX_FAST_CAP: f64 = (1u64 << 50) as f64;
/// The budget, bytes: nonnegative (a negative one fails every kind) and
/// below 2^52.
const MAX_FAST_BUDGET: i64 = 1 << 52;

/// The model dtype `auto` stands for in the domain (`model_dtype` is pinned
/// at its default; a test holds the two equal).
pub(super) const MODEL_DTYPE: ModelDtype = ModelDtype::Bf16;

/// Per KV dtype code (index in `Named::ALL`), four bits: its element bytes
/// once `auto` is resolved (low 3 bits) and whether it is mxfp8 (bit 3).
const DTYPE_BYTES: u64 = {
    let all = <KvDtype as Named>::ALL;
    let mut t = 0u64;
    let mut i = 0;
    while i < all.len() {
        let d = all[i].or_model(MODEL_DTYPE);
        let mx = matches!(d, KvDtype::Mxfp8) as u64;
        t |= (d.element_bytes() | mx << 3) << (4 * i);
        i += 1;
    }
    t
};

/// A set of codes (indices in `Named::ALL`), one bit each, from a `const fn`.
macro_rules! codes_where {
    ($t:ty, |$x:ident| $pred:expr) => {{
        let all = <$t as Named>::ALL;
        let mut m = 0u64;
        let mut i = 0;
        while i < all.len() {
            let $x = all[i];
            if $pred {
                m |= 1 << i;
            }
            i += 1;
        }
        m
    }};
}
/// The FP4 recipes.
const FP4: u64 = codes_where!(KvDtype, |x| x.is_fp4());
/// The algorithms whose draft layers SGLang counts.
const COUNTS_DRAFT_LAYERS: u64 = codes_where!(SpecAlgorithm, |x| x.counts_draft_layers());
/// The DFLASH family.
const DFLASH_FAMILY: u64 = codes_where!(SpecAlgorithm, |x| x.is_dflash_family());
/// Every speculative algorithm (all but `none`).
const SPECULATIVE: u64 = codes_where!(SpecAlgorithm, |x| x.is_speculative());
/// The algorithms whose draft phase writes KV.
const HAS_DRAFT_KV: u64 = codes_where!(SpecAlgorithm, |x| x.has_draft_kv());
/// UNO (its decode allocation is `num_draft_tokens + 1`).
const UNO: u64 = codes_where!(SpecAlgorithm, |x| matches!(x, SpecAlgorithm::Uno));

/// Whether `code` is in the set `codes` (a code past 63 reads some bit: its
/// cell is invalid, so the row is slow anyway).
#[inline(always)]
fn has(codes: u64, code: u8) -> bool {
    codes.wrapping_shr(u32::from(code)) & 1 != 0
}

/// `x` (below 2^52) as a double, exactly.
#[inline(always)]
fn int(x: u64) -> f64 {
    f64::from_bits(x | M.to_bits()) - M
}

/// A double holding an integer in `0..2^52` as that integer.
#[inline(always)]
fn uint(x: f64) -> i64 {
    (x + M).to_bits().wrapping_sub(M.to_bits()) as i64
}

/// `floor(q)` for `q` in `0..2^52`: adding 2^52 rounds to the nearest integer.
#[inline(always)]
fn floor(q: f64) -> f64 {
    let r = (q + M) - M;
    r - if r > q { 1.0 } else { 0.0 }
}

/// `floor(a / b)` for integers `a` in `0..2^52` and `b` in `1..2^52`: the
/// rounding of the double quotient cannot reach the next integer (that
/// would need `a + b >= 2^53`), nor leave an integer quotient.
#[inline(always)]
fn floor_div(a: f64, b: f64) -> f64 {
    floor(a / b)
}

/// `a // p * p`.
#[inline(always)]
fn align_down(a: f64, p: f64) -> f64 {
    floor_div(a, p) * p
}

/// The larger of two doubles (neither NaN).
#[inline(always)]
fn max(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// 1 or 0.
#[inline(always)]
fn one_if(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// SGLang's `or 1` of the speculative counts: unset or 0 is 1.
#[inline(always)]
fn or1(v: Option<u64>) -> f64 {
    int(v.filter(|x| *x > 0).unwrap_or(1))
}

/// Which pools a row's kind plans (SGLang's factory, in the domain).
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Pools {
    /// DefaultPoolConfigurator: one pool.
    Default = 0,
    /// HybridSWAPoolConfigurator without full layers: the SWA pool only.
    AllSwa = 1,
    /// HybridSWAPoolConfigurator: full and SWA pools split by the ratio.
    Ratio = 2,
    /// SWARequestCapPoolConfigurator: the SWA pool at its cap.
    RequestCap = 3,
}

/// A row's first stage: the budget's quotient by its kind's cell, and what
/// the second stage reads besides the row's page size, ratio and window.
#[derive(Clone, Copy)]
pub(super) struct FirstStage {
    /// `bytes / cell` as a double (the bytes past the SWA pool for RequestCap).
    pub quotient: f64,
    /// RequestCap's SWA pool, tokens (page aligned).
    pub cap_swa: f64,
    /// The row's kind.
    pub pools: Pools,
    /// Nothing so far makes the row slow.
    pub ok: bool,
}

/// What a lane gives: `(max_total, full, swa)` with -1 for None, and whether
/// the row takes the exact path instead (then the triple means nothing).
pub(super) type Lane = ([i64; 3], bool);

/// The first stage of one row of the fast domain (its KV dtype and
/// algorithm as their codes), at budget `a` bytes; `inside`: its cells are
/// valid and inside their bounds (else the row is slow). Two stages, each a
/// loop over the block, keep the chain of divisions in each loop short.
#[inline(always)]
pub(super) fn quotient(row: &Row, (dtype, alg): (u8, u8), inside: bool, a: i64) -> FirstStage {
    let (n_f, n_s) = (int(row.num_full_layers), int(row.num_swa_layers));
    let layers = n_f + n_s;
    let p = int(row.page_size);
    let budget = int(a as u64);
    // The rules across fields, and the budget.
    let domain = inside
        & (layers >= 1.0)
        & (layers <= int(MAX_FAST_LAYERS))
        & (0..MAX_FAST_BUDGET).contains(&a);

    // The terms every kind reads.
    let packed = DTYPE_BYTES.wrapping_shr(4 * u32::from(dtype));
    let b = int(packed & 7);
    let mx = one_if(packed & 8 != 0);
    let counts = has(COUNTS_DRAFT_LAYERS, alg);
    let dflash = has(DFLASH_FAMILY, alg);
    // Heads split over tp (dcp 1): the Default and the SWA kinds agree here.
    let heads = max(floor_div(int(row.num_kv_heads), int(row.tp_size)), 1.0);
    let elems = heads * 2.0 * int(row.head_dim);
    let scale = int(MXFP8_SCALE_BLOCK);
    let d = int(row.draft_num_layers);
    // SpeculativeConfig::dflash_cell at dcp 1 on the target worker.
    let d_c = int(row.dflash_draft_cell_size_per_token.unwrap_or(0)) * one_if(dflash);

    // SGLang's factory: the scalar path's own `kind_index` on the row's
    // scenario (the pinned fields at their defaults; branch free).
    let kind = {
        let sc = row.scenario();
        kind_index(&sc.shape, &sc.serving)
    };
    let swa_kind = kind != 0;
    let cap_kind = kind == 2;
    let ratio_kind = (kind == 1) & (n_f > 0.0);
    let window = row.sliding_window_size;

    // Default's cell: `default_cell_size`. The EAGLE term `int(C * d / L)`
    // (C * d below 2^52: the integer quotient) or the DFLASH term (`d_c`, or
    // the layer scaling `ceil(C * (L + d) / L) = C + ceil(C * d / L)`).
    let default_cell = {
        let e = elems * layers;
        let c = e * b + floor_div(e, scale) * mx;
        let num = c * d * one_if(counts | dflash);
        let q = floor_div(num, layers);
        let ceil = q + one_if(num != q * layers);
        let dflash_term = if (d_c > 0.0) & (d > 0.0) { d_c } else { ceil };
        c + if dflash { dflash_term } else { q }
    };

    // The SWA kinds (`init_swa` in the domain: no fused entries, no banded or
    // SWA draft layers, no unified memory): `F = S` per layer.
    let f = elems * b + floor_div(elems, scale) * mx;
    let d_f = d * one_if(counts);
    let full_cell = f * (n_f + d_f);
    let swa_cell = f * n_s;
    let w = int(window.unwrap_or(0));
    let r = row.swa_full_tokens_ratio;

    // RequestCap's SWA pool: the cap (`swa_request_cap`: PD off, dp 1,
    // overlap on) rounded up to a page, and its bytes.
    let (cap_swa, cap_ok) = {
        let k = row.num_draft_tokens;
        let e = int(row.swa_eviction_interval.max(1) as u64);
        let trailing = w + e * or1(k) + p;
        // `decode_alloc_per_request`, spec v2: two allocations outstanding.
        let (steps, topk) = (or1(row.num_steps), or1(row.eagle_topk));
        let max_k = int(k.unwrap_or(0));
        let speculative = has(SPECULATIVE, alg);
        let simple = (p == 1.0) | (topk == 1.0) | !has(HAS_DRAFT_KV, alg);
        let paged = floor_div(2.0 * (p - 1.0) + steps, p) * p * topk;
        let inner = if has(UNO, alg) {
            max_k + 1.0
        } else {
            max(if simple { steps * topk } else { paged }, max_k)
        };
        let decode = if speculative { 2.0 * inner } else { p };
        let requests = int(row.max_running_requests.unwrap_or(1));
        let base = (trailing + decode) * requests;
        let chunk = int(row.chunked_prefill_size.unwrap_or(0));
        let swa = floor_div(base + 2.0 * chunk + p + (p - 1.0), p) * p;
        // spec v2 needs num_draft_tokens (max_num_draft_tokens is pinned unset).
        (swa, (k.is_some() | !speculative) & (base <= MAX_FAST_CAP))
    };
    let fixed = cap_swa * swa_cell;

    // One division of the budget for every kind: `a // C` (Default, and
    // HybridSwa without full layers: integer cells), CPython's `int(a //
    // C)` of the ratio's float cell (HybridSwa), or the bytes past the SWA
    // pool over the full cell (RequestCap); then aligned down to a page.
    let (num, cell) = if !swa_kind {
        (budget, default_cell)
    } else if cap_kind {
        (budget - fixed, full_cell + d_c)
    } else if ratio_kind {
        (budget, (full_cell + r * swa_cell) + d_c)
    } else {
        (budget, swa_cell + f * d_f + d_c)
    };
    let pools = if !swa_kind {
        Pools::Default
    } else if cap_kind {
        Pools::RequestCap
    } else if ratio_kind {
        Pools::Ratio
    } else {
        Pools::AllSwa
    };
    let ok = if !swa_kind {
        // FP4 cells read the attention backends: the exact path prices them.
        !has(FP4, dtype)
    } else if cap_kind {
        cap_ok & (fixed < M) & (num > 0.0)
    } else {
        true
    };
    FirstStage {
        quotient: num / cell,
        cap_swa,
        pools,
        ok: domain & ok,
    }
}

/// The second stage: the pools from the quotient, at page size `page`
/// (valid), ratio `r` and window `window` (the row's cells).
#[inline(always)]
pub(super) fn finish(s: &FirstStage, page: u64, r: f64, window: Option<u64>) -> Lane {
    let (q, p) = (s.quotient, int(page));
    let ratio_kind = s.pools == Pools::Ratio;
    let t = floor(q);
    let first = align_down(t, p);
    // Where the cell is a float, CPython's result is sure away from integers
    // (the fast path of `py_int_floordiv`).
    let sure = !ratio_kind | ((q < FLOORDIV_SURE_BELOW) & floor_is_sure(q, t));
    // HybridSwa's SWA pool: `int(full * r)` aligned down, which must exceed
    // `W + page_size` tokens (the admission floor).
    let x = first * r;
    let ratio_swa = align_down(floor(x), p);
    let floor_w = int(window.unwrap_or(0)) + p;
    let admitted = (x < M) & (window.is_none() | (ratio_swa > floor_w));
    // Selects, not a `match`: a jump table would keep the loop scalar.
    let (full, swa) = if s.pools == Pools::Default {
        (-1, -1)
    } else if s.pools == Pools::RequestCap {
        (uint(first), uint(s.cap_swa))
    } else if ratio_kind {
        (uint(first), uint(ratio_swa))
    } else {
        (0, uint(first))
    };
    let ok = !ratio_kind | admitted;
    (
        [uint(first), full, swa],
        !(s.ok & sure & (first > 0.0) & ok),
    )
}
