//! A lean batch's cells, block by block: each fast field read from its
//! column or, where it does not vary, from the base's value repeated in a
//! block buffer (struct-of-arrays reads, no scenario per row), int32 cells
//! widened as they are read. A row's cells are decoded by their kind's own
//! [`Kind::from_cell`], the fast domain's bounds checked in the same pass
//! (validation fused in).
//!
//! The `fast_fields!` list below names the fields, each with its bound in
//! the domain; every other field is
//! [`PINNED`](super::super::kernel::PINNED) at its default.

use super::lanes::{
    MAX_FAST_COUNT, MAX_FAST_DFLASH, MAX_FAST_DIM, MAX_FAST_DRAFT, MAX_FAST_HEADS, MAX_FAST_LAYERS,
    MAX_FAST_SIZE, MAX_FAST_SPAN,
};
use crate::batch::{Batch, CellType, BLOCK};
use crate::dtype::KvDtype;
use crate::fields::{
    Choice, Count, Flag, Kind, Named, OptCount, OptPositive, Positive, Ratio, ScenarioField, Signed,
};
use crate::scenario::Scenario;
use crate::spec::SpecAlgorithm;

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

/// One field's cells: its column's, or the base's value repeated.
pub(super) struct Source<'a, T: Copy> {
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

impl<'a, T: CellType> Source<'a, T> {
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
    pub(super) fn repeat(c: T) -> Self {
        Self {
            column: None,
            narrow: None,
            pad: c,
            fill: [c; BLOCK],
        }
    }

    /// A column's cells (`pad` past its last partial block).
    pub(super) fn cells(column: &'a [T], pad: T) -> Self {
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
    pub(super) fn block(&mut self, start: usize) -> &[T; BLOCK] {
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

/// Declares the fields the fast path reads: `FAST` (the tests' list), the sources and the
/// per-block cells from one list.
macro_rules! fast_fields {
    ($( $part:ident . $f:ident : $kind:ty => $domain:expr ),* $(,)?) => {
        /// The fields a lean row is made of (every field but the
        /// [`PINNED`](super::super::kernel::PINNED) ones).
        #[cfg(test)]
        pub(crate) const FAST: &[ScenarioField] = &[$( ScenarioField::$f ),*];

        pub(super) struct Sources<'a> { $( $f: Source<'a, <$kind as Kind>::Cell>, )* }

        /// One block's cells of every fast field, each a slice of the block's rows.
        pub(super) struct Cells<'b> { $( pub(super) $f: &'b [<$kind as Kind>::Cell; BLOCK], )* }

        impl<'a> Sources<'a> {
            pub(super) fn new(batch: &Batch<'a>) -> Option<Self> {
                let b = &batch.base;
                Some(Self { $(
                    $f: Source::new::<$kind>(batch, ScenarioField::$f, b.$part.$f)?,
                )* })
            }


            #[inline(always)]
            pub(super) fn block(&mut self, start: usize) -> Cells<'_> {
                Cells { $( $f: self.$f.block(start), )* }
            }
        }

        /// A row's values, each decoded by its kind's `from_cell`.
        #[derive(Clone, Copy)]
        pub(super) struct Row { $( pub(super) $f: <$kind as Kind>::Value, )* }

        impl Cells<'_> {
            /// Row `i`'s values; whether every cell is valid; whether every
            /// cell is also inside its field's bound in the fast domain.
            #[inline(always)]
            pub(super) fn row(&self, i: usize) -> (Row, bool, bool) {
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
            pub(super) fn scenario(&self) -> Scenario {
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
    shape.sliding_window_size: OptCount => at_most(MAX_FAST_SPAN),
    serving.kv_cache_dtype: Choice<KvDtype> => any,
    serving.page_size: Positive => at_most(MAX_FAST_SIZE),
    serving.tp_size: Positive => at_most(MAX_FAST_SIZE),
    serving.swa_full_tokens_ratio: Ratio => any,
    serving.max_running_requests: OptPositive => at_most(MAX_FAST_COUNT),
    serving.chunked_prefill_size: OptPositive => at_most(MAX_FAST_SPAN),
    serving.disable_radix_cache: Flag => any,
    serving.swa_eviction_interval: Signed => at_most(MAX_FAST_COUNT),
    spec.algorithm: Choice<SpecAlgorithm> => any,
    spec.draft_num_layers: Count => at_most(MAX_FAST_DRAFT),
    spec.num_steps: OptCount => at_most(MAX_FAST_COUNT),
    spec.eagle_topk: OptCount => at_most(MAX_FAST_COUNT),
    spec.num_draft_tokens: OptCount => at_most(MAX_FAST_COUNT),
    spec.dflash_draft_cell_size_per_token: OptCount => at_most(MAX_FAST_DFLASH),
);
