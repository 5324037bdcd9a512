//! Field kinds ([`Kind`]): how a field's values are checked, how a batch
//! cell encodes one, and what Python type stands for it.

use super::{Named, PyRepr, Value};
use crate::error::{PlanError, Result};
use std::marker::PhantomData;

/// A field's kind: how its values are checked and how a batch cell encodes one.
pub trait Kind {
    /// The Rust type of the field.
    type Value: Copy;
    /// The element type of a batch column of this field.
    type Cell: Copy;
    /// The kind's name as the field table reports it (`"count"`, `"ratio"`, ...).
    const NAME: &'static str;
    /// How Python spells a value.
    const PY: PyRepr;
    /// Whether `plan_many` takes this field as a column.
    const BATCH: bool = true;
    /// Canonical names of a choice's values (empty for other kinds).
    const CHOICES: &'static [&'static str] = &[];

    /// Checks a value of the field `name` on its own (field-level rules only).
    fn check(name: &str, v: Self::Value) -> Result<()>;
    /// The value a batch cell stands for (sentinels decoded), and whether the
    /// cell is valid (the scalar API would take the value it stands for). Branch
    /// free: the batch kernel applies a column in one tight loop, and a row with
    /// an invalid cell is an `invalid_config` row whatever its value.
    fn from_cell(c: Self::Cell) -> (Self::Value, bool);
    /// The value of a [`Value`], checked.
    fn from_value(name: &str, v: Value<'_>) -> Result<Self::Value>;
    /// The value as a [`Value`].
    fn to_value(v: Self::Value) -> Value<'static>;
    /// The batch code of the name `s` (choice kinds; others refuse).
    fn code(name: &str, s: &str) -> Result<u8> {
        let _ = s;
        Err(PlanError::invalid(format!("{name} takes no names")))
    }
}

fn wrong_type(name: &str, want: &str, v: Value<'_>) -> PlanError {
    PlanError::invalid(format!("{name} must be {want}, got {v:?}"))
}

fn int_of(name: &str, v: Value<'_>) -> Result<i128> {
    match v {
        Value::Int(i) => Ok(i),
        _ => Err(wrong_type(name, "an integer", v)),
    }
}

/// The largest integer a field holds: every quantity fits an i64 (see [`crate::arith::MAX_QUANTITY`]).
const INT_MAX: i128 = i64::MAX as i128;

fn count_in_range(name: &str, v: i128, min: i128) -> Result<u64> {
    if v < min {
        return Err(PlanError::invalid(format!(
            "{name} must be >= {min}, got {v}"
        )));
    }
    if v > INT_MAX {
        return Err(PlanError::invalid(format!(
            "{name} must be <= {}, got {v}",
            i64::MAX
        )));
    }
    Ok(v as u64)
}

/// A non-negative count (`u64`, at most `i64::MAX`). Batch cell: `i64`.
pub struct Count;
/// A count of at least 1. Batch cell: `i64`.
pub struct Positive;
/// An optional count (`Option<u64>`). Batch cell: `i64`, negative means `None`.
pub struct OptCount;
/// An optional count of at least 1 when given. Batch cell: `i64`, negative means `None`.
pub struct OptPositive;
/// A dim that defaults to another field's value: given, at least 1; `None`
/// until the value is resolved, never after. Batch cell: `i64`, negative means "not given".
pub struct Derived;
/// Any signed integer (`i64`). Batch cell: `i64`.
pub struct Signed;
/// An optional signed integer (`Option<i64>`); not a batch column.
pub struct OptSigned;
/// A positive finite float (`f64`). Batch cell: `f64`.
pub struct Ratio;
/// A bool. Batch cell: `bool`.
pub struct Flag;
/// One of a named enum's values. Batch cell: `u8`, the index in [`Named::ALL`].
pub struct Choice<T>(PhantomData<T>);
/// An optional named value; not a batch column.
pub struct OptChoice<T>(PhantomData<T>);
/// `SpeculativeConfig.draft`: an optional [`crate::DraftGeometry`]; not a batch column.
pub struct Draft;

macro_rules! count_kind {
    ($kind:ident, $name:literal, $min:literal) => {
        impl Kind for $kind {
            type Value = u64;
            type Cell = i64;
            const NAME: &'static str = $name;
            const PY: PyRepr = PyRepr::Int;
            #[inline]
            fn check(name: &str, v: u64) -> Result<()> {
                count_in_range(name, i128::from(v), $min).map(drop)
            }
            #[inline(always)]
            fn from_cell(c: i64) -> (u64, bool) {
                (c as u64, c >= $min)
            }
            fn from_value(name: &str, v: Value<'_>) -> Result<u64> {
                count_in_range(name, int_of(name, v)?, $min)
            }
            fn to_value(v: u64) -> Value<'static> {
                Value::Int(i128::from(v))
            }
        }
    };
}
count_kind!(Count, "count", 0);
count_kind!(Positive, "positive", 1);

macro_rules! opt_count_kind {
    ($kind:ident, $name:literal, $min:literal) => {
        impl Kind for $kind {
            type Value = Option<u64>;
            type Cell = i64;
            const NAME: &'static str = $name;
            const PY: PyRepr = PyRepr::OptInt;
            #[inline]
            fn check(name: &str, v: Option<u64>) -> Result<()> {
                v.map_or(Ok(()), |x| {
                    count_in_range(name, i128::from(x), $min).map(drop)
                })
            }
            #[inline(always)]
            fn from_cell(c: i64) -> (Option<u64>, bool) {
                // Negative: None; 0..$min: invalid.
                ((c >= 0).then_some(c as u64), !(0..$min).contains(&c))
            }
            fn from_value(name: &str, v: Value<'_>) -> Result<Option<u64>> {
                match v {
                    Value::None => Ok(None),
                    _ => count_in_range(name, int_of(name, v)?, $min).map(Some),
                }
            }
            fn to_value(v: Option<u64>) -> Value<'static> {
                v.map_or(Value::None, |x| Value::Int(i128::from(x)))
            }
        }
    };
}
opt_count_kind!(OptCount, "opt_count", 0);
opt_count_kind!(OptPositive, "opt_positive", 1);
opt_count_kind!(Derived, "derived", 1);

fn signed_of(name: &str, v: Value<'_>) -> Result<i64> {
    let i = int_of(name, v)?;
    i64::try_from(i).map_err(|_| {
        PlanError::invalid(format!("{name} must fit a signed 64-bit integer, got {i}"))
    })
}

impl Kind for Signed {
    type Value = i64;
    type Cell = i64;
    const NAME: &'static str = "signed";
    const PY: PyRepr = PyRepr::Int;
    #[inline]
    fn check(_: &str, _: i64) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn from_cell(c: i64) -> (i64, bool) {
        (c, true)
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<i64> {
        signed_of(name, v)
    }
    fn to_value(v: i64) -> Value<'static> {
        Value::Int(i128::from(v))
    }
}

impl Kind for OptSigned {
    type Value = Option<i64>;
    type Cell = i64;
    const NAME: &'static str = "opt_signed";
    const PY: PyRepr = PyRepr::OptInt;
    const BATCH: bool = false;
    fn check(_: &str, _: Option<i64>) -> Result<()> {
        Ok(())
    }
    fn from_cell(_: i64) -> (Option<i64>, bool) {
        (None, false) // not a batch column
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<Option<i64>> {
        match v {
            Value::None => Ok(None),
            _ => signed_of(name, v).map(Some),
        }
    }
    fn to_value(v: Option<i64>) -> Value<'static> {
        v.map_or(Value::None, |x| Value::Int(i128::from(x)))
    }
}

impl Kind for Ratio {
    type Value = f64;
    type Cell = f64;
    const NAME: &'static str = "ratio";
    const PY: PyRepr = PyRepr::Float;
    #[inline]
    fn check(name: &str, v: f64) -> Result<()> {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(PlanError::invalid(format!(
                "{name} must be a positive finite number, got {v}"
            )))
        }
    }
    #[inline(always)]
    fn from_cell(c: f64) -> (f64, bool) {
        // Positive and finite: the bits lie in 1..=MAX's (sign clear, exponent
        // below infinity's, not +0.0); -0.0, infinities and NaNs fall outside.
        const MAX_FINITE: u64 = 0x7fef_ffff_ffff_ffff;
        (c, c.to_bits().wrapping_sub(1) < MAX_FINITE)
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<f64> {
        let x = match v {
            Value::Float(x) => x,
            Value::Int(i) => i as f64,
            _ => return Err(wrong_type(name, "a number", v)),
        };
        Self::check(name, x).map(|()| x)
    }
    fn to_value(v: f64) -> Value<'static> {
        Value::Float(v)
    }
}

impl Kind for Flag {
    type Value = bool;
    type Cell = bool;
    const NAME: &'static str = "flag";
    const PY: PyRepr = PyRepr::Bool;
    #[inline]
    fn check(_: &str, _: bool) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn from_cell(c: bool) -> (bool, bool) {
        (c, true)
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<bool> {
        match v {
            Value::Bool(b) => Ok(b),
            _ => Err(wrong_type(name, "a bool", v)),
        }
    }
    fn to_value(v: bool) -> Value<'static> {
        Value::Bool(v)
    }
}

impl<T: Named> Kind for Choice<T> {
    type Value = T;
    type Cell = u8;
    const NAME: &'static str = "choice";
    const PY: PyRepr = PyRepr::Name;
    const CHOICES: &'static [&'static str] = T::NAMES;
    #[inline]
    fn check(_: &str, _: T) -> Result<()> {
        Ok(())
    }
    #[inline(always)]
    fn from_cell(c: u8) -> (T, bool) {
        // Branch free: a code past the choices reads the first one (and is invalid).
        let ok = usize::from(c) < T::ALL.len();
        (T::ALL[usize::from(c) * usize::from(ok)], ok)
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<T> {
        match v {
            Value::None => Ok(T::default()),
            Value::Str(s) => s.parse(),
            _ => Err(wrong_type(name, "a name", v)),
        }
    }
    fn to_value(v: T) -> Value<'static> {
        Value::Str(v.name())
    }
    fn code(_: &str, s: &str) -> Result<u8> {
        name_code::<T>(s)
    }
}

/// The position of the name `s` (parsed, aliases included) in [`Named::ALL`].
fn name_code<T: Named>(s: &str) -> Result<u8> {
    let v: T = s.parse()?;
    // ALL holds every value, so the position exists; u8 holds it (at most 255 values).
    Ok(T::ALL
        .iter()
        .position(|x| x.name() == v.name())
        .unwrap_or(usize::MAX) as u8)
}

impl<T: Named> Kind for OptChoice<T> {
    type Value = Option<T>;
    type Cell = u8;
    const NAME: &'static str = "opt_choice";
    const PY: PyRepr = PyRepr::OptName;
    const BATCH: bool = false;
    const CHOICES: &'static [&'static str] = T::NAMES;
    fn check(_: &str, _: Option<T>) -> Result<()> {
        Ok(())
    }
    fn from_cell(_: u8) -> (Option<T>, bool) {
        (None, false) // not a batch column
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<Option<T>> {
        match v {
            Value::None => Ok(None),
            Value::Str(s) => s.parse().map(Some),
            _ => Err(wrong_type(name, "a name or None", v)),
        }
    }
    fn to_value(v: Option<T>) -> Value<'static> {
        v.map_or(Value::None, |x| Value::Str(x.name()))
    }
    fn code(_: &str, s: &str) -> Result<u8> {
        name_code::<T>(s)
    }
}

impl Kind for Draft {
    type Value = Option<crate::DraftGeometry>;
    type Cell = u8;
    const NAME: &'static str = "draft";
    const PY: PyRepr = PyRepr::Draft;
    const BATCH: bool = false;
    fn check(_: &str, v: Option<crate::DraftGeometry>) -> Result<()> {
        v.map_or(Ok(()), |d| d.validate())
    }
    fn from_cell(_: u8) -> (Self::Value, bool) {
        (None, false) // not a batch column
    }
    fn from_value(name: &str, v: Value<'_>) -> Result<Self::Value> {
        match v {
            Value::None => Ok(None),
            Value::Draft(d) => Ok(Some(d)),
            _ => Err(wrong_type(name, "a DraftGeometry or None", v)),
        }
    }
    fn to_value(v: Self::Value) -> Value<'static> {
        v.map_or(Value::None, Value::Draft)
    }
}
