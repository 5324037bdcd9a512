//! The batch fast path: rows solved straight from the columns.
//!
//! The domain is the lean one of [`super::kernel`]: no
//! [`PINNED`](super::kernel::PINNED) field varies or leaves its default
//! (checked once per batch), so a row is fully given by its `FAST` fields
//! (every other field), each read from its column or, where it does not
//! vary, from the base's value repeated in a block buffer: struct-of-arrays
//! reads, no scenario per row. Per block of 256 rows the rows are classified
//! by configurator kind ([`kind_index`], branch free) and each kind runs in a
//! loop of its own, where the kind is a constant.
//!
//! A row's cells are decoded by their kind's own [`Kind::from_cell`], with the
//! domain's bounds checked in the same pass (validation fused in). Inside
//! the domain ([`MAX_FAST_LAYERS`] and the bounds beside it) no cell-size
//! intermediate can overflow, so `fast_row` computes the cell size without
//! per-step checks, branch free (the Default cell's draft terms share one
//! division), and solves with the scalar path's own functions: the
//! [`Sizing`] solve of each kind, [`swa_request_cap`], the heads per rank of
//! [`crate::cell`], CPython's float division and alignment of
//! [`crate::arith`] (all checked). A row it does not finish (a bad cell, a
//! cell outside the domain, a rule across fields, an FP4 Default cell, any
//! error of the solve) goes to the exact path, `exact_row`: the row's
//! scenario (the base's pinned fields are the defaults, every other field
//! the row's cell decoded as the general loop decodes it) solved by the
//! scalar API's functions. So every error row takes the exact path, and the
//! fast rows are held to the scalar API by the tests (`fast_tests.rs`: a
//! proptest with rows in and out of the domain, and the domain's edges).

use super::kernel::solve_row;
use super::{Batch, BatchOutputs, Budgets, STATUS_OK};
use crate::cell::{kv_heads_per_rank, MXFP8_SCALE_BLOCK};
use crate::dtype::{KvDtype, ModelDtype};
use crate::error::ErrorCode;
use crate::fields::{
    Choice, Count, Flag, Kind, MemoryPoolConfig, Named, OptCount, OptPositive, Positive, Ratio,
    ScenarioField, Signed,
};
use crate::request_cap::swa_request_cap;
use crate::scenario::Scenario;
use crate::sizing::{kind_index, CellSize, ConfiguratorKind, Sizing};
use crate::spec::SpecAlgorithm;
use crate::{ServingConfig, SpeculativeConfig};

/// A kind whose cells the base's value can be written as (the inverse of
/// [`Kind::from_cell`] on valid values).
trait Encode: Kind {
    fn to_cell(v: Self::Value) -> Self::Cell;
}

macro_rules! encode {
    ($($k:ty => |$v:ident| $e:expr;)*) => {$(
        impl Encode for $k {
            #[inline]
            fn to_cell($v: Self::Value) -> Self::Cell {
                $e
            }
        }
    )*};
}
encode! {
    Count => |v| v as i64;
    Positive => |v| v as i64;
    OptCount => |v| v.map_or(-1, |x| x as i64);
    OptPositive => |v| v.map_or(-1, |x| x as i64);
    Signed => |v| v;
    Ratio => |v| v;
    Flag => |v| v;
}

impl<T: Named + PartialEq> Encode for Choice<T> {
    #[inline]
    fn to_cell(v: T) -> u8 {
        T::ALL.iter().position(|x| *x == v).unwrap_or(usize::MAX) as u8
    }
}

/// Rows per block: a row's index in its block is a `u8`, so that indexing a
/// block's cells needs no bounds check.
const BLOCK: usize = 1 << u8::BITS;

/// One field's cells: its column's, or the base's value repeated.
struct Source<'a, T: Copy> {
    column: Option<&'a [T]>,
    /// A narrower column of the field (int32 cells of an int64 field),
    /// widened into `fill` block by block.
    narrow: Option<&'a [i32]>,
    /// The base's cell (what pads a column's last partial block).
    pad: T,
    /// The base's cell repeated (no column), the column's last partial
    /// block (padded with the base's cell), or a narrow column's current block.
    fill: [T; BLOCK],
}

impl<'a, T: super::CellType> Source<'a, T> {
    /// The cells of `field` (a column of cell type `T`, or int32 cells of an
    /// int64 field), or the base's value `v` as a cell when it is no column;
    /// `None` when that value does not round-trip through its cell (the base
    /// is then not planned here).
    fn new<K>(batch: &Batch<'a>, field: ScenarioField, v: K::Value) -> Option<Self>
    where
        K: Encode<Cell = T>,
        K::Value: PartialEq,
    {
        let c = K::to_cell(v);
        match batch.columns.iter().find(|c| c.field == field) {
            Some(col) => match T::of(col.data) {
                Some(cells) => Some(Self::cells(cells, c)),
                None => Some(Self {
                    narrow: Some(T::narrow(col.data)?),
                    ..Self::repeat(c)
                }),
            },
            None => (K::from_cell(c) == (v, true)).then_some(Self::repeat(c)),
        }
    }

    /// The cell `c` in every row.
    fn repeat(c: T) -> Self {
        Self {
            column: None,
            narrow: None,
            pad: c,
            fill: [c; BLOCK],
        }
    }

    /// A column's cells (`pad` past its last partial block).
    fn cells(column: &'a [T], pad: T) -> Self {
        let mut fill = [pad; BLOCK];
        let tail = column.len() % BLOCK;
        fill[..tail].copy_from_slice(&column[column.len() - tail..]);
        Self {
            column: Some(column),
            fill,
            ..Self::repeat(pad)
        }
    }

    /// The block of rows from `start` (past the last row: anything): read
    /// in place from a column of `T`, widened into `fill` from a narrow one.
    #[inline(always)]
    fn block(&mut self, start: usize) -> &[T; BLOCK] {
        if let Some(narrow) = self.narrow {
            let cells = narrow.get(start..).unwrap_or_default();
            let n = cells.len().min(BLOCK);
            T::widen(&cells[..n], &mut self.fill[..n]);
            self.fill[n..].fill(self.pad);
            return &self.fill;
        }
        match self.column.and_then(|c| c.get(start..)?.first_chunk()) {
            Some(full) => full,
            None => &self.fill,
        }
    }
}

/// Declares the fields the fast path reads: [`FAST`], the sources and the
/// per-block cells from one list.
macro_rules! fast_fields {
    ($( $part:ident . $f:ident : $kind:ty => $domain:expr ),* $(,)?) => {
        /// The fields a lean row is made of (every field but the [`PINNED`](super::kernel::PINNED) ones).
        #[cfg(test)]
        pub(crate) const FAST: &[ScenarioField] = &[$( ScenarioField::$f ),*];

        struct Sources<'a> { $( $f: Source<'a, <$kind as Kind>::Cell>, )* }

        /// One block's cells of every fast field, each a slice of the block's rows.
        struct Cells<'b> { $( $f: &'b [<$kind as Kind>::Cell; BLOCK], )* }

        impl<'a> Sources<'a> {
            fn new(batch: &Batch<'a>) -> Option<Self> {
                let b = &batch.base;
                Some(Self { $(
                    $f: Source::new::<$kind>(batch, ScenarioField::$f, b.$part.$f)?,
                )* })
            }


            #[inline(always)]
            fn block(&mut self, start: usize) -> Cells<'_> {
                Cells { $( $f: self.$f.block(start), )* }
            }
        }

        /// A row's values, each decoded by its kind's `from_cell`.
        #[derive(Clone, Copy)]
        struct Row { $( $f: <$kind as Kind>::Value, )* }

        impl Cells<'_> {
            /// Row `i`'s values; whether every cell is valid; whether every
            /// cell is also inside its field's bound in the fast domain.
            #[inline(always)]
            fn row(&self, i: u8) -> (Row, bool, bool) {
                let i = usize::from(i);
                let (mut valid, mut inside) = (true, true);
                let row = Row { $( $f: {
                    let c = self.$f[i];
                    let (v, ok) = <$kind as Kind>::from_cell(c);
                    valid &= ok;
                    inside &= ok & ($domain)(c);
                    v
                }, )* };
                (row, valid, inside)
            }
        }

        impl Row {
            /// The row's scenario: the pinned fields at their defaults.
            #[inline(always)]
            fn scenario(&self) -> Scenario {
                let mut sc = Scenario::default();
                $( sc.$part.$f = self.$f; )*
                sc
            }
        }
    };
}

/// A field without a bound of its own in the domain.
fn any<T>(_: T) -> bool {
    true
}

/// At most `max` (a cell of a count; a negative one is `None` or bad, which
/// the cell's own check decides).
const fn at_most(max: u64) -> impl Fn(i64) -> bool {
    move |c| c <= max as i64
}

fast_fields!(
    shape.num_full_layers: Count => at_most(MAX_FAST_LAYERS),
    shape.num_swa_layers: Count => at_most(MAX_FAST_LAYERS),
    shape.num_kv_heads: Positive => at_most(MAX_FAST_HEADS),
    shape.head_dim: Positive => at_most(MAX_FAST_DIM),
    shape.sliding_window_size: OptCount => any,
    serving.kv_cache_dtype: Choice<KvDtype> => any,
    serving.page_size: Positive => any,
    serving.tp_size: Positive => any,
    serving.swa_full_tokens_ratio: Ratio => any,
    serving.max_running_requests: OptPositive => any,
    serving.chunked_prefill_size: OptPositive => any,
    serving.disable_radix_cache: Flag => any,
    serving.swa_eviction_interval: Signed => any,
    spec.algorithm: Choice<SpecAlgorithm> => any,
    spec.draft_num_layers: Count => at_most(MAX_FAST_DRAFT),
    spec.num_steps: OptCount => any,
    spec.eagle_topk: OptCount => any,
    spec.num_draft_tokens: OptCount => any,
    spec.dflash_draft_cell_size_per_token: OptCount => at_most(MAX_FAST_DFLASH),
);

impl Cells<'_> {
    /// Row `i`'s configurator kind ([`kind_index`] of its scenario; any
    /// kind for a row with a bad cell).
    #[inline(always)]
    fn kind(&self, i: u8) -> usize {
        let sc = self.row(i).0.scenario();
        kind_index(&sc.shape, &sc.serving)
    }
}

/// Bounds of the fast domain, beyond the cells' own checks: with at most
/// [`MAX_FAST_LAYERS`] layers, [`MAX_FAST_HEADS`] KV heads, head dims up to
/// [`MAX_FAST_DIM`], [`MAX_FAST_DRAFT`] draft layers and DFLASH cells up to
/// [`MAX_FAST_DFLASH`] bytes, every cell-size intermediate stays below 2^53
/// (the Default cell below 2^42 before its draft term, `C * d` below 2^52), so
/// no checked step of the scalar path can fail there, the doubles hold them
/// exactly, and CPython's true division of the EAGLE term is the integer
/// quotient. Rows beyond them take the exact path.
const MAX_FAST_LAYERS: u64 = 1 << 12;
/// See [`MAX_FAST_LAYERS`].
const MAX_FAST_HEADS: u64 = 1 << 12;
/// See [`MAX_FAST_LAYERS`].
const MAX_FAST_DIM: u64 = 1 << 14;
/// See [`MAX_FAST_LAYERS`].
const MAX_FAST_DRAFT: u64 = 1 << 10;
/// See [`MAX_FAST_LAYERS`].
const MAX_FAST_DFLASH: u64 = 1 << 40;

/// The model dtype `auto` stands for in the domain (`model_dtype` is pinned
/// at its default; a test holds the two equal).
const MODEL_DTYPE: ModelDtype = ModelDtype::Bf16;
/// [`DTYPE_TERMS`]: an mxfp8 dtype.
const MXFP8: u8 = 8;
/// [`DTYPE_TERMS`]: an FP4 recipe.
const FP4: u8 = 16;

/// Per KV dtype (by discriminant): its element bytes once `auto` is resolved
/// (low 3 bits), [`MXFP8`] and [`FP4`]; from the dtype's own `const fn`s.
const DTYPE_TERMS: [u8; 16] = {
    let all = <KvDtype as Named>::ALL;
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < all.len() {
        let d = all[i].or_model(MODEL_DTYPE);
        let mut v = d.element_bytes() as u8;
        if matches!(d, KvDtype::Mxfp8) {
            v |= MXFP8;
        }
        if d.is_fp4() {
            v |= FP4;
        }
        t[all[i] as usize] = v;
        i += 1;
    }
    t
};

/// A set of speculative algorithms, one bit per discriminant, from a `const fn` of theirs.
macro_rules! algorithms_where {
    ($pred:ident) => {{
        let all = <SpecAlgorithm as Named>::ALL;
        let mut m = 0u32;
        let mut i = 0;
        while i < all.len() {
            if all[i].$pred() {
                m |= 1 << all[i] as u32;
            }
            i += 1;
        }
        m
    }};
}
/// The algorithms whose draft layers SGLang counts.
const COUNTS_DRAFT_LAYERS: u32 = algorithms_where!(counts_draft_layers);
/// The DFLASH family.
const DFLASH_FAMILY: u32 = algorithms_where!(is_dflash_family);

/// What the cell sizes of every kind read of a fast row.
struct Terms {
    /// `L`, every attention layer.
    layers: u64,
    /// Bytes per token of one layer (`heads_per_rank * 2 * head_dim * b` plus
    /// the mxfp8 scale bytes), before the layer count.
    elems: u64,
    /// The dtype's element bytes.
    b: u64,
    /// The dtype is mxfp8 (one scale byte per 32 elements).
    mx: bool,
    /// The dtype is an FP4 recipe.
    fp4: bool,
    /// The algorithm counts draft layers (EAGLE family, standalone).
    counts: bool,
    /// The algorithm is of the DFLASH family.
    dflash: bool,
    /// `d`.
    d: u64,
    /// `d_c`, the DFLASH draft cell on the target worker (dcp 1), bytes.
    d_c: u64,
}

impl Row {
    /// The terms, or `None` outside the fast domain (the rules across fields
    /// included: 1 to [`MAX_FAST_LAYERS`] layers, at most [`MAX_FAST_DRAFT`]
    /// draft layers, the pinned fields at their defaults).
    #[inline(always)]
    fn terms(&self) -> Option<Terms> {
        // The fields' own bounds were checked with their cells (`Cells::row`).
        let layers = self.num_full_layers + self.num_swa_layers;
        if layers.wrapping_sub(1) >= MAX_FAST_LAYERS {
            return None;
        }
        let d_c = self.dflash_draft_cell_size_per_token.unwrap_or(0);
        let dtype = DTYPE_TERMS[self.kv_cache_dtype as usize];
        let a = 1u32 << (self.algorithm as u32);
        let dflash = DFLASH_FAMILY & a != 0;
        // Heads split over tp (dcp 1): the Default and the SWA kinds agree here.
        let heads = kv_heads_per_rank(self.num_kv_heads, self.tp_size, 1);
        Some(Terms {
            layers,
            elems: heads * 2 * self.head_dim,
            b: u64::from(dtype & 7),
            mx: dtype & MXFP8 != 0,
            fp4: dtype & FP4 != 0,
            counts: COUNTS_DRAFT_LAYERS & a != 0,
            dflash,
            d: self.draft_num_layers,
            // SpeculativeConfig::dflash_cell at dcp 1 on the target worker.
            d_c: d_c * u64::from(dflash),
        })
    }
}

impl Terms {
    /// `F = S`: one layer's bytes per token on this rank in the SWA kinds
    /// (`layer_bytes_per_token`; the SWA geometry is the full one here).
    #[inline(always)]
    fn layer_bytes(&self) -> u64 {
        self.elems * self.b + (self.elems / MXFP8_SCALE_BLOCK) * u64::from(self.mx)
    }

    /// `default_cell_size` in the domain, branch free: `e * L * b` (plus
    /// mxfp8's scales), then the EAGLE term `int(C * d / L)` (`C * d` below
    /// 2^52: the integer quotient) or the DFLASH term (`d_c`, or the layer scaling
    /// `ceil(C * (L + d) / L) = C + ceil(C * d / L)`), one division for both.
    #[inline(always)]
    fn default_cell(&self) -> u64 {
        let e = self.elems * self.layers;
        let c = e * self.b + (e / MXFP8_SCALE_BLOCK) * u64::from(self.mx);
        let scaled_d = self.d * u64::from(self.counts | self.dflash);
        let num = c * scaled_d;
        let (q, r) = (num / self.layers, num % self.layers);
        let dflash = if self.d_c > 0 && self.d > 0 {
            self.d_c
        } else {
            q + u64::from(r != 0)
        };
        c + if self.dflash { dflash } else { q }
    }
}

/// `(max_total, full, swa)` of a pool config, -1 for None.
#[inline(always)]
fn triple(c: MemoryPoolConfig) -> (i64, i64, i64) {
    (
        c.max_total_num_tokens,
        c.full_max_total_num_tokens.unwrap_or(-1),
        c.swa_max_total_num_tokens.unwrap_or(-1),
    )
}

/// One fast row of configurator kind `K` (index in `ConfiguratorKind::ALL`,
/// the row's own) with every cell valid: `(max_total, full, swa)` with -1 for None, or
/// `None` to hand the row to the exact path (outside the domain, or any error).
#[inline(always)]
fn fast_row<const K: usize>(row: &Row, a: i64) -> Option<(i64, i64, i64)> {
    let kind = <ConfiguratorKind as Named>::ALL[K];
    let t = row.terms()?;
    let base = Sizing {
        kind,
        num_full_layers: row.num_full_layers,
        num_swa_layers: row.num_swa_layers,
        sliding_window_size: row.sliding_window_size,
        page_size: row.page_size,
        swa_full_tokens_ratio: row.swa_full_tokens_ratio,
        ..Sizing::EMPTY
    };
    let p = base.resolve_page_size::<ErrorCode>(None).ok()?;
    if kind == ConfiguratorKind::Default {
        if t.fp4 {
            return None; // FP4 cells read the attention backends: the exact path prices them
        }
        let s = Sizing {
            cell_size: CellSize::Int(t.default_cell()),
            ..base
        };
        return s.default_from_bytes::<ErrorCode>(a, p).ok().map(triple);
    }
    // The SWA kinds (Sizing's init_swa in the domain: no fused entries, no
    // banded or SWA draft layers, no unified memory).
    let (n_f, n_s) = (row.num_full_layers, row.num_swa_layers);
    let f = t.layer_bytes();
    let d_f = t.d * u64::from(t.counts);
    let full_cell = f * (n_f + d_f);
    let swa_cell = f * n_s;
    let cell_size = if n_f == 0 {
        CellSize::Int(f * n_s + f * d_f + t.d_c)
    } else {
        // Below 2^52 (the domain): as signed integers they convert to the same
        // doubles, in one instruction each.
        let float = |x: u64| x as i64 as f64;
        let r = row.swa_full_tokens_ratio;
        CellSize::Float((float(full_cell) + r * float(swa_cell)) + float(t.d_c))
    };
    let mut s = Sizing {
        cell_size,
        full_per_token: f,
        swa_per_token: f,
        draft_full_layers: d_f,
        draft_cell: t.d_c,
        full_cell,
        swa_cell,
        ..base
    };
    if kind == ConfiguratorKind::HybridSwa {
        return s.hybrid_from_bytes::<ErrorCode>(a, p).ok().map(triple);
    }
    let (serving, spec) = row.cap_parts();
    let window = row.sliding_window_size?;
    s.swa_cap = Some(swa_request_cap::<ErrorCode>(&serving, &spec, window).ok()?);
    s.request_cap_from_bytes::<ErrorCode>(a, p).ok().map(triple)
}

impl Row {
    /// The serving and speculative configs the request cap reads (the pinned
    /// fields at their defaults).
    #[inline(always)]
    fn cap_parts(&self) -> (ServingConfig, SpeculativeConfig) {
        let sc = self.scenario();
        (sc.serving, sc.spec)
    }
}

/// The exact path for one row: its scenario (the base's pinned fields are
/// the defaults, every other field is the row's cell decoded by its kind's
/// `from_cell`, as the general loop sets it), `invalid_config` for a bad
/// cell, else the scalar API's functions ([`solve_row`]) on it.
#[cold]
#[inline(never)]
fn exact_row(cells: &Cells<'_>, i: u8, a: i64, out: &mut BatchOutputs<'_>) {
    let (row, ok, _) = cells.row(i);
    let i = usize::from(i);
    if !ok {
        out.write_err(i, ErrorCode::InvalidConfig.status());
        return;
    }
    let sc = row.scenario();
    let kind = <ConfiguratorKind as Named>::ALL[kind_index(&sc.shape, &sc.serving)];
    out.write(i, solve_row(kind, &sc, a));
}

/// Plans the `n` rows of a lean batch (one thread's part; the base checked,
/// some column given) into `out`. False, with nothing written, when a base
/// value does not round-trip through its cell (the caller then takes the
/// general loop).
pub(super) fn plan_rows(batch: &Batch<'_>, n: usize, out: &mut BatchOutputs<'_>) -> bool {
    let Some(mut sources) = Sources::new(batch) else {
        return false;
    };
    let mut budgets: Source<'_, i64> = match batch.available_bytes {
        Budgets::Scalar(v) => Source::repeat(v),
        Budgets::Array(a) => Source::cells(a, 0),
    };
    let mut by_kind = [[0u8; BLOCK]; 3];
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let cells = sources.block(start);
        let budget = budgets.block(start);
        let mut block = out.rows(start, end);
        // Rows go to their kind's loop, branch free (an invalid row's kind is
        // any: its loop hands it to the exact path).
        let (mut c0, mut c1, mut c2) = (0usize, 0usize, 0usize);
        let [l0, l1, l2] = &mut by_kind;
        for i in 0..=((end - start - 1) as u8) {
            // Written to every list, kept in one: no branch, no store-to-load chain.
            let k = cells.kind(i);
            l0[c0 % BLOCK] = i;
            l1[c1 % BLOCK] = i;
            l2[c2 % BLOCK] = i;
            c0 += usize::from(k == 0);
            c1 += usize::from(k == 1);
            c2 += usize::from(k == 2);
        }
        let counts = [c0, c1, c2];
        macro_rules! kind_loop {
            ($k:literal) => {
                for &i in &by_kind[$k][..counts[$k]] {
                    let (row, _, inside) = cells.row(i);
                    let a = budget[usize::from(i)];
                    match if inside {
                        fast_row::<$k>(&row, a)
                    } else {
                        None
                    } {
                        Some((t, f, s)) => {
                            let i = usize::from(i);
                            block.max_total_num_tokens[i] = t;
                            block.full_max_total_num_tokens[i] = f;
                            block.swa_max_total_num_tokens[i] = s;
                            block.status[i] = STATUS_OK;
                        }
                        None => exact_row(&cells, i, a, &mut block),
                    }
                }
            };
        }
        kind_loop!(0);
        kind_loop!(1);
        kind_loop!(2);
        start = end;
    }
    true
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
