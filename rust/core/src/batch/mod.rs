//! Batch planning for autoscalers: a base [`Scenario`] plus the columns that
//! vary, one row per scenario, a status per row instead of an error.
//!
//! Row `i` is the base with row `i`'s cells applied, each cell checked as the
//! scalar API checks that argument ([`crate::fields::Kind::from_cell`]); then
//! the scalar API's own functions run on it: [`Scenario::check_rules`],
//! [`crate::Sizing::new`]'s arithmetic and the profiling path. They are generic
//! over the error type ([`crate::error::Fail`]): the batch instantiation keeps
//! only the [`ErrorCode`] (no message is ever formatted, results stay in
//! registers), the scalar one builds [`PlanError`]s. One implementation, two
//! instantiations: row for row the result equals the scalar API, errors
//! included (INV-7), by construction.
//!
//! The kernel is in [`kernel`]: blocks of [`kernel::BLOCK`] rows, columns applied to
//! a block in one branch-free loop each, rows solved in one loop per
//! configurator kind; large batches split across threads ([`Threads`]). The
//! common domain (no rarely used option set) takes the fast path in `fast`:
//! rows read from the columns and solved many at once in vector code (the
//! configurator formulas restated branch free, compiled per instruction set
//! and chosen at run time), every error row and every row outside its domain
//! handed to the functions above. Its rows are held to the scalar API by
//! its tests, at every instruction set the CPU has.

mod fast;
pub(crate) mod kernel;
mod state;

pub use fast::simd_level;
pub use kernel::{plan_many, Threads, PARALLEL_ROWS};
pub use state::{cell_value, plan_many_with_state, StateBatch, StateColumn};

use crate::error::{ErrorCode, PlanError, Result};
use crate::fields::{MemoryPoolConfig, ScenarioField, Value};
use crate::scenario::Scenario;

/// Status of a successful row; failed rows carry [`crate::ErrorCode::status`].
pub const STATUS_OK: u8 = 0;

/// Rows sized together: a block's scenarios (or, on the fast path, its
/// cells) stay in L1/L2 while its columns are read.
pub const BLOCK: usize = 256;

/// The cells of a batch column: one slice of the field kind's [`Kind::Cell`] type.
#[derive(Debug, Clone, Copy)]
pub enum ColumnData<'a> {
    /// Integers (counts, sizes; a negative cell of an optional field means `None`).
    I64(&'a [i64]),
    /// The cells of an [`I64`](Self::I64) field in 32 bits: the same values,
    /// half the memory the kernel streams (it widens each block as it reads it).
    I32(&'a [i32]),
    /// Floats (the ratio).
    F64(&'a [f64]),
    /// Bools (flags).
    Bool(&'a [bool]),
    /// Codes of a named field (index in its `Named::ALL`).
    U8(&'a [u8]),
}

impl<'a> ColumnData<'a> {
    /// The number of cells.
    pub fn len(&self) -> usize {
        match self {
            Self::I64(a) => a.len(),
            Self::I32(a) => a.len(),
            Self::F64(a) => a.len(),
            Self::Bool(a) => a.len(),
            Self::U8(a) => a.len(),
        }
    }

    /// True when there are no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn slice(self, start: usize, end: usize) -> Self {
        match self {
            Self::I64(a) => Self::I64(&a[start..end]),
            Self::I32(a) => Self::I32(&a[start..end]),
            Self::F64(a) => Self::F64(&a[start..end]),
            Self::Bool(a) => Self::Bool(&a[start..end]),
            Self::U8(a) => Self::U8(&a[start..end]),
        }
    }

    /// The cells as the kernel applies them: an [`I32`](Self::I32) column's
    /// first [`BLOCK`] cells widened into `buf`, any other column as it is.
    pub(crate) fn widen<'b>(self, buf: &'b mut [i64; BLOCK]) -> ColumnData<'b>
    where
        'a: 'b,
    {
        match self {
            Self::I32(a) => {
                let n = a.len().min(BLOCK);
                widen_into(&a[..n], &mut buf[..n]);
                ColumnData::I64(&buf[..n])
            }
            other => other,
        }
    }

    /// The element type's name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::I64(_) => "int64",
            Self::I32(_) => "int32",
            Self::F64(_) => "float64",
            Self::Bool(_) => "bool",
            Self::U8(_) => "uint8",
        }
    }
}

/// `dst[i] = src[i]` widened (one vectorised loop).
#[inline(always)]
pub(crate) fn widen_into(src: &[i32], dst: &mut [i64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = i64::from(*s);
    }
}

/// A column's cells, owned (what a caller builds a [`ColumnData`] view from).
#[derive(Debug, Clone, PartialEq)]
pub enum Cells {
    /// Integers.
    I64(Vec<i64>),
    /// Integers in 32 bits.
    I32(Vec<i32>),
    /// Floats.
    F64(Vec<f64>),
    /// Bools.
    Bool(Vec<bool>),
    /// Codes of a named field.
    U8(Vec<u8>),
}

impl Cells {
    /// The value the scalar API reads for cell `i` of a column of `field`
    /// (the batch encoding decoded): a negative integer of an optional
    /// integer field is None, a code is its choice's name, and a code past
    /// the choices reads as a name no choice has (so setting it fails with
    /// the error the kernel gives that row). Panics if `i` is out of range.
    pub fn scalar_value(&self, field: ScenarioField, i: usize) -> Value<'static> {
        cell_value(field.info(), self.data(), i)
    }

    /// The borrowed view.
    pub fn data(&self) -> ColumnData<'_> {
        match self {
            Self::I64(v) => ColumnData::I64(v),
            Self::I32(v) => ColumnData::I32(v),
            Self::F64(v) => ColumnData::F64(v),
            Self::Bool(v) => ColumnData::Bool(v),
            Self::U8(v) => ColumnData::U8(v),
        }
    }
}

/// The output arrays of a batch, owned (fresh outputs, or buffers reused across calls).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffers {
    /// `max_total_num_tokens`, tokens.
    pub max_total_num_tokens: Vec<i64>,
    /// `full_max_total_num_tokens`, tokens (-1: None).
    pub full_max_total_num_tokens: Vec<i64>,
    /// `swa_max_total_num_tokens`, tokens (-1: None).
    pub swa_max_total_num_tokens: Vec<i64>,
    /// Per-row status.
    pub status: Vec<u8>,
}

impl Buffers {
    /// Zeroed buffers for `n` rows.
    pub fn new(n: usize) -> Self {
        Self::with_lens([n; 4])
    }

    /// Buffers of the given lengths (a malformed call, in tests).
    pub fn with_lens(lens: [usize; 4]) -> Self {
        Self {
            max_total_num_tokens: vec![0; lens[0]],
            full_max_total_num_tokens: vec![0; lens[1]],
            swa_max_total_num_tokens: vec![0; lens[2]],
            status: vec![0; lens[3]],
        }
    }

    /// The mutable view `plan_many` writes into.
    pub fn views(&mut self) -> BatchOutputs<'_> {
        BatchOutputs {
            max_total_num_tokens: &mut self.max_total_num_tokens,
            full_max_total_num_tokens: &mut self.full_max_total_num_tokens,
            swa_max_total_num_tokens: &mut self.swa_max_total_num_tokens,
            status: &mut self.status,
        }
    }

    /// Row `i` as `(max_total, full, swa, status)`.
    pub fn row(&self, i: usize) -> (i64, i64, i64, u8) {
        (
            self.max_total_num_tokens[i],
            self.full_max_total_num_tokens[i],
            self.swa_max_total_num_tokens[i],
            self.status[i],
        )
    }
}

/// A cell type of [`ColumnData`].
pub trait CellType: Copy + Sized {
    /// The name of the numpy dtype a column of it has.
    const DTYPE: &'static str;
    /// The cells, when `data` holds this type.
    fn of(data: ColumnData<'_>) -> Option<&[Self]>;
    /// The narrower cells `data` holds for this type (an int32 column of an
    /// int64 field; `None` for every other type).
    #[inline]
    fn narrow(data: ColumnData<'_>) -> Option<&[i32]> {
        let _ = data;
        None
    }
    /// `dst[i]` = `src[i]` widened (only called with [`Self::narrow`]'s cells).
    #[inline]
    fn widen(src: &[i32], dst: &mut [Self]) {
        let _ = (src, dst);
    }
}

macro_rules! cell_type {
    ($t:ty, $variant:ident, $dtype:literal $(, $narrow:ident)?) => {
        impl CellType for $t {
            const DTYPE: &'static str = $dtype;
            #[inline]
            fn of(data: ColumnData<'_>) -> Option<&[Self]> {
                match data {
                    ColumnData::$variant(a) => Some(a),
                    _ => None,
                }
            }
            $(
                #[inline]
                fn $narrow(data: ColumnData<'_>) -> Option<&[i32]> {
                    match data {
                        ColumnData::I32(a) => Some(a),
                        _ => None,
                    }
                }
                #[inline(always)]
                fn widen(src: &[i32], dst: &mut [Self]) {
                    widen_into(src, dst);
                }
            )?
        }
    };
}
cell_type!(i64, I64, "int64", narrow);
cell_type!(f64, F64, "float64");
cell_type!(bool, Bool, "bool");
cell_type!(u8, U8, "uint8");

/// The cells of column `name` as `T`, or an error naming the dtype it needs.
pub(crate) fn cells<'a, T: CellType>(name: &str, data: ColumnData<'a>) -> Result<&'a [T]> {
    T::of(data).ok_or_else(|| {
        PlanError::invalid(format!(
            "batch column {name} must be {}, got {}",
            T::DTYPE,
            data.type_name()
        ))
    })
}

/// The numpy dtype a batch column of `field` has.
pub fn column_dtype(field: ScenarioField) -> &'static str {
    field.info().cell_dtype
}

/// One varying input: a scenario field and its cells.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    /// Which field.
    pub field: ScenarioField,
    /// One cell per row.
    pub data: ColumnData<'a>,
}

impl<'a> Column<'a> {
    /// The column of `field` holding `cells`.
    pub fn of(field: ScenarioField, cells: &'a Cells) -> Self {
        Column {
            field,
            data: cells.data(),
        }
    }
}

/// The budgets: one for every row, or one per row.
#[derive(Debug, Clone, Copy)]
pub enum Budgets<'a> {
    /// Broadcast to every row, bytes.
    Scalar(i64),
    /// One per row, bytes.
    Array(&'a [i64]),
}

impl Budgets<'_> {
    /// The rows `start..end`.
    pub(crate) fn slice(self, start: usize, end: usize) -> Self {
        match self {
            Self::Scalar(v) => Self::Scalar(v),
            Self::Array(a) => Self::Array(&a[start..end]),
        }
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> i64 {
        match self {
            Self::Scalar(v) => *v,
            Self::Array(a) => a[i],
        }
    }
}

/// A batch: the base scenario (every scalar input applied), the budgets and
/// the columns that vary.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    /// The scenario every row starts from (not yet resolved: defaults that
    /// depend on other fields are filled per row).
    pub base: Scenario,
    /// The status of every row when a scalar input was bad on its own (0: none).
    pub base_status: u8,
    /// Available bytes on this rank.
    pub available_bytes: Budgets<'a>,
    /// The inputs that vary, at most one column per field.
    pub columns: &'a [Column<'a>],
    /// How many threads may share the work.
    pub threads: Threads,
}

impl<'a> Batch<'a> {
    /// Rows of `base` with `columns` applied and one budget each, on one
    /// thread, every scalar input valid: the batches the tests and fuzzers build.
    pub fn serial(base: Scenario, available_bytes: &'a [i64], columns: &'a [Column<'a>]) -> Self {
        Batch {
            base,
            base_status: 0,
            available_bytes: Budgets::Array(available_bytes),
            columns,
            threads: Threads::Fixed(1),
        }
    }
}

/// Output arrays, one entry per row. `-1` stands for `None` in the full and
/// SWA columns of a successful row; failed rows hold 0 and a nonzero status.
#[derive(Debug)]
pub struct BatchOutputs<'a> {
    /// `max_total_num_tokens`, tokens.
    pub max_total_num_tokens: &'a mut [i64],
    /// `full_max_total_num_tokens`, tokens (-1: None).
    pub full_max_total_num_tokens: &'a mut [i64],
    /// `swa_max_total_num_tokens`, tokens (-1: None).
    pub swa_max_total_num_tokens: &'a mut [i64],
    /// 0 for success, else the [`crate::ErrorCode`] status.
    pub status: &'a mut [u8],
}

impl BatchOutputs<'_> {
    /// Rows `..mid` and `mid..`.
    pub(crate) fn split_into(self, mid: usize) -> (Self, Self) {
        let (a0, a1) = self.max_total_num_tokens.split_at_mut(mid);
        let (b0, b1) = self.full_max_total_num_tokens.split_at_mut(mid);
        let (c0, c1) = self.swa_max_total_num_tokens.split_at_mut(mid);
        let (s0, s1) = self.status.split_at_mut(mid);
        (
            BatchOutputs {
                max_total_num_tokens: a0,
                full_max_total_num_tokens: b0,
                swa_max_total_num_tokens: c0,
                status: s0,
            },
            BatchOutputs {
                max_total_num_tokens: a1,
                full_max_total_num_tokens: b1,
                swa_max_total_num_tokens: c1,
                status: s1,
            },
        )
    }

    /// The rows `start..end`, reborrowed.
    #[inline]
    pub(crate) fn rows(&mut self, start: usize, end: usize) -> BatchOutputs<'_> {
        BatchOutputs {
            max_total_num_tokens: &mut self.max_total_num_tokens[start..end],
            full_max_total_num_tokens: &mut self.full_max_total_num_tokens[start..end],
            swa_max_total_num_tokens: &mut self.swa_max_total_num_tokens[start..end],
            status: &mut self.status[start..end],
        }
    }

    /// Every output array must have `n` rows.
    pub fn check_rows(&self, n: usize) -> Result<()> {
        let lens = [
            self.max_total_num_tokens.len(),
            self.full_max_total_num_tokens.len(),
            self.swa_max_total_num_tokens.len(),
            self.status.len(),
        ];
        if lens.iter().any(|l| *l != n) {
            return Err(PlanError::invalid(format!(
                "batch outputs must have {n} rows, got {lens:?}"
            )));
        }
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn write(&mut self, i: usize, r: std::result::Result<MemoryPoolConfig, ErrorCode>) {
        match r {
            Ok(c) => self.write_ok(i, &c),
            Err(e) => self.write_err(i, e.status()),
        }
    }

    #[inline(always)]
    pub(crate) fn write_ok(&mut self, i: usize, c: &MemoryPoolConfig) {
        self.max_total_num_tokens[i] = c.max_total_num_tokens;
        self.full_max_total_num_tokens[i] = c.full_max_total_num_tokens.unwrap_or(-1);
        self.swa_max_total_num_tokens[i] = c.swa_max_total_num_tokens.unwrap_or(-1);
        self.status[i] = STATUS_OK;
    }

    #[inline]
    pub(crate) fn write_err(&mut self, i: usize, status: u8) {
        self.max_total_num_tokens[i] = 0;
        self.full_max_total_num_tokens[i] = 0;
        self.swa_max_total_num_tokens[i] = 0;
        self.status[i] = status;
    }
}

/// A set of scenario fields, one bit each (the columns of a batch: membership tests in a
/// call's fixed cost, not a scan of the columns per field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FieldSet(u128);

const _: () = assert!(ScenarioField::ALL.len() <= 128, "FieldSet holds 128 fields");

impl FieldSet {
    #[inline]
    fn bit(f: ScenarioField) -> u128 {
        1u128 << (f as usize)
    }

    /// The fields of `columns`.
    #[inline]
    pub(crate) fn of(columns: &[Column<'_>]) -> Self {
        Self(columns.iter().fold(0, |m, c| m | Self::bit(c.field)))
    }

    #[inline]
    pub(crate) fn contains(self, f: ScenarioField) -> bool {
        self.0 & Self::bit(f) != 0
    }

    /// Adds `f`; false when it was already there.
    #[inline]
    fn insert(&mut self, f: ScenarioField) -> bool {
        let new = !self.contains(f);
        self.0 |= Self::bit(f);
        new
    }
}

impl Batch<'_> {
    /// The number of rows: the common length of the columns and budgets (1 if all are scalars).
    pub fn rows(&self) -> Result<usize> {
        let mut n: Option<usize> = match self.available_bytes {
            Budgets::Scalar(_) => None,
            Budgets::Array(a) => Some(a.len()),
        };
        let mut seen = FieldSet::default();
        for c in self.columns {
            if !seen.insert(c.field) {
                return Err(PlanError::invalid(format!(
                    "batch column {} is given twice",
                    c.field.info().name
                )));
            }
            let l = c.data.len();
            match n {
                Some(m) if m != l => {
                    return Err(PlanError::invalid(format!(
                        "batch columns have different lengths ({m} and {l})"
                    )))
                }
                _ => n = Some(l),
            }
        }
        Ok(n.unwrap_or(1))
    }
}
