//! What the core derives from the declaration: the structs, their defaults,
//! checks and name-based access, the scenario's field enum and table, and
//! the scenario's setters (scalar and batch).

use super::{FieldInfo, Kind, Value, ValueType};
use crate::error::Result;

/// The [`FieldInfo`] of field `$f` of type `$T`.
macro_rules! field_info {
    ($T:ident, $f:ident, $kind:ty, [$($def:expr)?], [$($doc:literal),*]) => {
        FieldInfo {
            name: stringify!($f),
            owner: stringify!($T),
            kind: <$kind as Kind>::NAME,
            py: <$kind as Kind>::PY,
            batch: <$kind as Kind>::BATCH,
            cell_dtype: <<$kind as Kind>::Cell as crate::batch::CellType>::DTYPE,
            choices: <$kind as Kind>::CHOICES,
            required: $crate::is_required!($($def)?),
            doc: concat!($($doc, "\n"),*),
            default: || <$kind as Kind>::to_value(<$T as Default>::default().$f),
        }
    };
}

/// Defines one value type from its declaration.
macro_rules! define_value_type {
    (
        $(#[doc = $tdoc:literal])*
        $T:ident [$($derive:ident),*] {
            $( $(#[doc = $doc:literal])* $f:ident : $ty:ty $(= $def:expr)? => $kind:ty, )*
        }
    ) => {
        $crate::declared_struct! {
            $(#[doc = $tdoc])*
            ///
            /// Declared in [`crate::for_each_value_type!`].
            #[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize $(, $derive)*)]
            #[serde(deny_unknown_fields)]
            $T { $( $(#[doc = $doc])* $f : $ty $(= $def)?, )* }
        }

        impl ValueType for $T {
            const NAME: &'static str = stringify!($T);
            const FIELDS: &'static [FieldInfo] = &[ $(
                field_info!($T, $f, $kind, [$($def)?], [$($doc),*]),
            )* ];

            fn check_fields(&self) -> Result<()> {
                $( <$kind as Kind>::check(stringify!($f), self.$f)?; )*
                Ok(())
            }

            fn get(&self, name: &str) -> Option<Value<'static>> {
                match name {
                    $( stringify!($f) => Some(<$kind as Kind>::to_value(self.$f)), )*
                    _ => None,
                }
            }

            fn set(&mut self, name: &str, v: Value<'_>) -> Result<bool> {
                match name {
                    $( stringify!($f) => {
                        let v = <$kind as Kind>::from_value(stringify!($f), v)?;
                        <$kind as Kind>::check(stringify!($f), v)?;
                        self.$f = v;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }
        }
    };
}

/// The core's callback: every value type, the scenario's field enum and table.
macro_rules! define_value_types {
    (
        scenario { $(
            $(#[doc = $sdoc:literal])*
            $S:ident ($g:ident) [$($sderive:ident),*] {
                $( $(#[doc = $doc:literal])* $f:ident : $ty:ty $(= $def:expr)? => $kind:ty, )*
            }
        )* }
        values { $( $values:tt )* }
    ) => {
        $( define_value_type! {
            $(#[doc = $sdoc])*
            $S [$($sderive),*] { $( $(#[doc = $doc])* $f : $ty $(= $def)? => $kind, )* }
        } )*
        define_value_types!(@values $( $values )*);

        /// Every field of a [`crate::Scenario`], in declaration order: a batch
        /// column is one of these with a slice of its kind's cells.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ScenarioField { $( $( $f, )* )* }

        impl ScenarioField {
            /// Every field, in declaration order.
            pub const ALL: &'static [ScenarioField] = &[ $( $( ScenarioField::$f, )* )* ];

            /// The field called `name`.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( $( stringify!($f) => Some(Self::$f), )* )*
                    _ => None,
                }
            }

            /// Its row of [`SCENARIO_FIELDS`].
            pub fn info(self) -> &'static FieldInfo {
                &SCENARIO_FIELDS[self as usize]
            }

            /// Checks this field of `sc` on its own (its kind's rules).
            pub fn check(self, sc: &crate::Scenario) -> Result<()> {
                match self { $( $( Self::$f => <$kind as Kind>::check(stringify!($f), sc.$g.$f), )* )* }
            }

            /// The batch code of the name `s` of this choice field (its `FromStr`
            /// parses names and aliases); an error for an unknown name or a field
            /// that is not a choice.
            pub fn code(self, s: &str) -> Result<u8> {
                match self { $( $( Self::$f => <$kind as Kind>::code(stringify!($f), s), )* )* }
            }
        }

        /// The field table of a [`crate::Scenario`]: the model's, the serving
        /// config's and the speculative config's fields, in declaration order.
        pub static SCENARIO_FIELDS: &[FieldInfo] = &[ $( $(
            field_info!($S, $f, $kind, [$($def)?], [$($doc),*]),
        )* )* ];

        impl crate::Scenario {
            /// Sets field `name` of whichever part of the scenario has it (checked on its own).
            pub fn set(&mut self, name: &str, v: Value<'_>) -> Result<bool> {
                $( if self.$g.set(name, v)? { return Ok(true); } )*
                Ok(false)
            }

            /// Sets one field of every row of `rows` from a batch column (each
            /// cell checked on its own); a bad cell sets that row's `status`
            /// (if it has none yet).
            pub(crate) fn apply_column(
                rows: &mut [crate::Scenario],
                status: &mut [u8],
                field: ScenarioField,
                cells: crate::batch::ColumnData<'_>,
            ) -> Result<()> {
                match field { $( $(
                    ScenarioField::$f => crate::batch::kernel::apply_cells::<$kind>(
                        rows,
                        status,
                        crate::batch::cells::<<$kind as Kind>::Cell>(stringify!($f), cells)?,
                        |row, v| row.$g.$f = v,
                    ),
                )* )* }
                Ok(())
            }
        }
    };
    (@values $(
        $(#[doc = $tdoc:literal])*
        $T:ident [$($derive:ident),*] { $($body:tt)* }
    )*) => {
        $( define_value_type! { $(#[doc = $tdoc])* $T [$($derive),*] { $($body)* } } )*
    };
}

crate::for_each_value_type!(define_value_types);
