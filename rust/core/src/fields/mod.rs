//! The one declaration of every input (and every small value type): each
//! field's name, Rust type, default, kind and doc, written once in
//! [`for_each_value_type!`]. Everything else derives from it:
//!
//! - the structs themselves ([`crate::AttentionShape`], [`crate::ServingConfig`],
//!   [`crate::SpeculativeConfig`], [`crate::DraftGeometry`],
//!   [`crate::MemoryPoolConfig`]), their `Default`, field-level checks and
//!   name-based access ([`ValueType`]);
//! - the field table [`SCENARIO_FIELDS`] and each type's [`ValueType::FIELDS`]
//!   (what the Python bridge builds its constructors, getters, reprs and
//!   `replace` from, and what `kvbudget.batch` builds its keyword table from);
//! - the batch columns ([`ScenarioField`], [`crate::batch::ColumnData`]): a
//!   column is a field plus a slice of its kind's [`Kind::Cell`] type.
//!
//! A field's *kind* ([`Kind`]) says how a value is checked, how a batch cell
//! encodes it (the "None" sentinel of optional integers is any negative
//! value), and what Python type stands for it.
//!
//! Adding a serving option is one line in the declaration below (plus its use
//! in the arithmetic); the bridge, the stubs (`make stubs`), the batch API and
//! the CLI's scenario keywords pick it up.

use crate::error::{PlanError, Result};

/// A field value in a kind-independent form: what the bridge converts Python
/// objects to and from, and what reprs and defaults are rendered from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Python `None`.
    None,
    /// An integer (any kind of count or signed number).
    Int(i128),
    /// A float.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A name (dtype, algorithm, mode, capacity).
    Str(&'a str),
    /// A draft geometry (`SpeculativeConfig.draft`).
    Draft(crate::DraftGeometry),
}

/// How Python spells a kind's values: the bridge converts Python objects by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyRepr {
    /// `int`.
    Int,
    /// `int | None`.
    OptInt,
    /// `float`.
    Float,
    /// `bool`.
    Bool,
    /// `str` (a name; `None` means the default).
    Name,
    /// `str | None`.
    OptName,
    /// `DraftGeometry | None`.
    Draft,
}

mod decl;
mod generate;
mod kinds;

pub use generate::*;
pub use kinds::*;

/// A named enum: its values in batch-code order, and its canonical names.
/// Names and aliases are parsed by the enum's `FromStr`, in one place.
pub trait Named: Copy + Default + std::str::FromStr<Err = PlanError> + 'static {
    /// Every value; a batch code is an index into this array.
    const ALL: &'static [Self];
    /// Canonical names, in the order of [`Self::ALL`].
    const NAMES: &'static [&'static str];
    /// The canonical name (`NAMES[i]` for `ALL[i]`).
    fn name(self) -> &'static str;
}

/// One row of the field table.
#[derive(Debug, Clone, Copy)]
pub struct FieldInfo {
    /// The field's name (a Python keyword, a batch column, a JSON key).
    pub name: &'static str,
    /// The value type it belongs to (`"AttentionShape"`, `"ServingConfig"`, ...).
    pub owner: &'static str,
    /// The kind's name ([`Kind::NAME`]).
    pub kind: &'static str,
    /// How Python spells a value.
    pub py: PyRepr,
    /// Whether `plan_many` takes it as a column.
    pub batch: bool,
    /// The numpy dtype of its batch column (`"int64"`, `"float64"`, `"bool"`, `"uint8"`).
    pub cell_dtype: &'static str,
    /// Canonical names of a choice (empty otherwise).
    pub choices: &'static [&'static str],
    /// The constructor needs it (no default).
    pub required: bool,
    /// The doc text, units included.
    pub doc: &'static str,
    /// The default value.
    pub default: fn() -> Value<'static>,
}

/// A value type declared in [`for_each_value_type!`]: its field table and
/// name-based access (what the bridge and `replace` use).
pub trait ValueType: Sized + Copy + Default {
    /// The type's name.
    const NAME: &'static str;
    /// Its fields, in declaration (and positional-argument) order.
    const FIELDS: &'static [FieldInfo];
    /// Field-level checks of every field (each value on its own).
    fn check_fields(&self) -> Result<()>;
    /// The value of field `name`, or `None` when it has no such field.
    fn get(&self, name: &str) -> Option<Value<'static>>;
    /// Sets field `name` (checked on its own); `Ok(false)` when there is no such field.
    fn set(&mut self, name: &str, v: Value<'_>) -> Result<bool>;
}

/// A value's full check: every field on its own, the rules across fields,
/// and the defaulted fields filled in. What a constructor, `replace` and
/// unpickling run; each type's inherent `resolved` is the same function.
pub trait Resolve: Sized {
    /// The checked value with its defaults filled.
    fn resolved(self) -> Result<Self>;
}

macro_rules! resolve_by_inherent {
    ($($t:ty),*) => {$(
        impl Resolve for $t {
            fn resolved(self) -> Result<Self> {
                <$t>::resolved(self)
            }
        }
    )*};
}
resolve_by_inherent!(
    crate::AttentionShape,
    crate::ServingConfig,
    crate::SpeculativeConfig,
    crate::DraftGeometry,
    crate::MemoryPoolConfig,
    crate::StateConfig,
    crate::ModelGeometry,
    crate::Scenario
);

/// `default_or!()` is `Default::default()`; `default_or!(x)` is `x`.
#[doc(hidden)]
#[macro_export]
macro_rules! default_or {
    () => {
        ::core::default::Default::default()
    };
    ($e:expr) => {
        $e
    };
}

/// Defines a declared struct (`pub` fields, their docs) and its `Default`: each field's
/// `= default`, else `Default::default()`. What both declarations' callbacks build on.
#[doc(hidden)]
#[macro_export]
macro_rules! declared_struct {
    (
        $(#[$attr:meta])*
        $T:ident { $( $(#[doc = $doc:literal])* $f:ident : $ty:ty $(= $def:expr)?, )* }
    ) => {
        $(#[$attr])*
        pub struct $T {
            $( $(#[doc = $doc])* pub $f: $ty, )*
        }

        impl Default for $T {
            fn default() -> Self {
                Self { $( $f: $crate::default_or!($($def)?), )* }
            }
        }
    };
}

/// `is_required!()` is true (no default given); `is_required!(x)` is false.
#[doc(hidden)]
#[macro_export]
macro_rules! is_required {
    () => {
        true
    };
    ($e:expr) => {
        false
    };
}

/// A `///` doc as the declarations hold it (`concat!` of its lines) made plain:
/// each line trimmed, blank lines dropped, joined by `\n`.
pub fn doc_text(raw: &str) -> String {
    raw.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}
