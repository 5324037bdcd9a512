//! What the core derives from the vLLM declaration ([`crate::for_each_vllm_record!`]):
//! the structs [`VllmLayer`] and [`VllmEngine`], their defaults, their JSON
//! forms and their rows of the table ([`Setting`]), through each field's kind
//! ([`SettingKind`]).

use super::{
    Choice, KvCacheLayout, LayerKind, MambaBackend, MambaType, MaxModelLen, PrefillCheckpoint,
};
use serde_json::{json, Map, Value};
use std::marker::PhantomData;

/// One declared field of a vLLM record: a row of the table Python builds its classes from.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The field's name (a Python keyword, a JSON key).
    pub name: &'static str,
    /// How Python spells a value ([`SettingKind::PY`]).
    pub py: &'static str,
    /// The names a choice takes, in order (empty for other kinds).
    pub choices: &'static [&'static str],
    /// The constructor needs it (no default).
    pub required: bool,
    /// Its unit (`"tokens"`, `"bytes"`, `"blocks"`, `"ranks"`, `"elements"`, ...; `""` for none).
    pub unit: &'static str,
    /// kvbudget's `--engine vllm` flag for it, if it has one.
    pub flag: Option<&'static str>,
    /// The doc text, units included (the lines of its `///` doc).
    pub doc: &'static str,
    /// The default value in the JSON form.
    pub default: fn() -> Value,
}

impl Setting {
    /// The row as JSON (the default `null` for a required field).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name, "py": self.py, "choices": self.choices, "required": self.required,
            "unit": self.unit, "flag": self.flag, "doc": crate::fields::doc_text(self.doc),
            "default": if self.required { Value::Null } else { (self.default)() },
        })
    }
}

/// A record declared in [`crate::for_each_vllm_record!`]: its table and JSON form.
pub trait Record: Sized + Default {
    /// The record's name (`"VllmLayer"`, `"VllmEngine"`).
    const NAME: &'static str;
    /// Its doc.
    const DOC: &'static str;
    /// Its fields, in declaration (and positional-argument) order.
    const SETTINGS: &'static [Setting];
    /// Sets field `name` from its JSON form; `Ok(false)` when there is no such field.
    fn set_json(&mut self, name: &str, v: &Value) -> Result<bool, String>;
    /// Every field in its JSON form.
    fn to_json(&self) -> Value;

    /// The record of a JSON object: the given fields over the defaults; an unknown
    /// or missing required field is an error.
    fn from_json(v: &Value) -> Result<Self, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("{}: expected an object", Self::NAME))?;
        let mut out = Self::default();
        for (k, x) in obj {
            if !out.set_json(k, x)? {
                return Err(format!("unknown field {k}"));
            }
        }
        match Self::SETTINGS
            .iter()
            .find(|s| s.required && !obj.contains_key(s.name))
        {
            Some(s) => Err(format!("missing field {}", s.name)),
            None => Ok(out),
        }
    }
}

/// A field's kind: its Rust type's JSON form and how Python spells it.
pub trait SettingKind {
    /// The Rust type of the field.
    type Value;
    /// The Python spelling: `"int"`, `"opt_int"`, `"bool"`, `"str"`, `"opt_str"`,
    /// `"model_len"` (`int | "auto"`), `"shapes"` (tuples of ints), `"names"`
    /// (a tuple of strings) or `"choice"` (one of [`Self::CHOICES`]).
    const PY: &'static str;
    /// What a JSON value must be, for the error message.
    const EXPECTED: &'static str;
    /// The names a choice takes (empty for other kinds).
    const CHOICES: &'static [&'static str] = &[];
    /// The value of a JSON value, or `None` when it is not of this kind.
    fn from_json(v: &Value) -> Option<Self::Value>;
    /// The JSON form of a value.
    fn to_json(v: &Self::Value) -> Value;
}

/// Defines kinds whose JSON form is the value's own: each `Kind: RustType, py, expected, |v| read`.
macro_rules! plain_kinds {
    ($( $(#[doc = $doc:literal])* $kind:ident: $t:ty, $py:literal, $expected:literal, |$v:ident| $read:expr; )*) => {$(
        $(#[doc = $doc])*
        pub struct $kind;

        impl SettingKind for $kind {
            type Value = $t;
            const PY: &'static str = $py;
            const EXPECTED: &'static str = $expected;
            fn from_json($v: &Value) -> Option<$t> {
                $read
            }
            fn to_json(v: &$t) -> Value {
                json!(v)
            }
        }
    )*};
}

plain_kinds! {
    /// A non-negative count (`u64`).
    Count: u64, "int", "a non-negative integer", |v| v.as_u64();
    /// A pipeline stage (`u32`).
    Stage: u32, "int", "a non-negative integer below 2**32", |v| v.as_u64().and_then(|x| u32::try_from(x).ok());
    /// An optional count (`Option<u64>`, JSON `null` for none).
    OptCount: Option<u64>, "opt_int", "a non-negative integer or null",
        |v| if v.is_null() { Some(None) } else { v.as_u64().map(Some) };
    /// A switch (`bool`).
    Flag: bool, "bool", "a bool", |v| v.as_bool();
    /// A name (`String`).
    Text: String, "str", "a string", |v| v.as_str().map(str::to_owned);
    /// An optional name (`Option<String>`).
    OptText: Option<String>, "opt_str", "a string or null",
        |v| if v.is_null() { Some(None) } else { v.as_str().map(|s| Some(s.to_owned())) };
}

/// `--max-model-len`: tokens, or `"auto"` ([`MaxModelLen`]).
pub struct ModelLen;

impl SettingKind for ModelLen {
    type Value = MaxModelLen;
    const PY: &'static str = "model_len";
    const EXPECTED: &'static str = "a non-negative integer or \"auto\"";
    fn from_json(v: &Value) -> Option<MaxModelLen> {
        match v.as_str() {
            Some("auto") => Some(MaxModelLen::Auto),
            Some(_) => None,
            None => v.as_u64().map(MaxModelLen::Tokens),
        }
    }
    fn to_json(v: &MaxModelLen) -> Value {
        match v {
            MaxModelLen::Tokens(n) => json!(n),
            MaxModelLen::Auto => json!("auto"),
        }
    }
}

/// One of a [`Choice`]'s values, by its name.
pub struct Pick<T>(PhantomData<T>);

impl<T: Choice> SettingKind for Pick<T> {
    type Value = T;
    const PY: &'static str = "choice";
    const EXPECTED: &'static str = T::EXPECTED;
    const CHOICES: &'static [&'static str] = T::NAMES;
    fn from_json(v: &Value) -> Option<T> {
        let name = v.as_str()?;
        let i = T::NAMES.iter().position(|n| *n == name)?;
        T::ALL.get(i).copied()
    }
    fn to_json(v: &T) -> Value {
        let i = T::ALL.iter().position(|x| x == v).unwrap_or(0);
        json!(T::NAMES[i])
    }
}

/// A layer's KV-cache kind ([`LayerKind`]).
pub type Attention = Pick<LayerKind>;
/// A state layer's backend ([`MambaType`]).
pub type Backend = Pick<MambaType>;
/// A state layer's prefill-checkpoint export ([`PrefillCheckpoint`]).
pub type Checkpoint = Pick<PrefillCheckpoint>;
/// The Mamba selective-state-update backend ([`MambaBackend`]).
pub type SsuBackend = Pick<MambaBackend>;
/// The resolved KV-cache layout ([`KvCacheLayout`]).
pub type Layout = Pick<KvCacheLayout>;

/// State tensor shapes, elements per dim (`Vec<Vec<u64>>`; JSON: a list of integer lists).
pub struct Shapes;

impl SettingKind for Shapes {
    type Value = Vec<Vec<u64>>;
    const PY: &'static str = "shapes";
    const EXPECTED: &'static str = "a list of lists of non-negative integers";
    fn from_json(v: &Value) -> Option<Vec<Vec<u64>>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_array()?.iter().map(Value::as_u64).collect())
            .collect()
    }
    fn to_json(v: &Vec<Vec<u64>>) -> Value {
        json!(v)
    }
}

/// A list of names (`Vec<String>`).
pub struct Names;

impl SettingKind for Names {
    type Value = Vec<String>;
    const PY: &'static str = "names";
    const EXPECTED: &'static str = "a list of strings";
    fn from_json(v: &Value) -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|s| s.as_str().map(str::to_owned))
            .collect()
    }
    fn to_json(v: &Vec<String>) -> Value {
        json!(v)
    }
}

/// `opt_flag!()` is `None`; `opt_flag!("--x")` is `Some("--x")`.
macro_rules! opt_flag {
    () => {
        None
    };
    ($flag:literal) => {
        Some($flag)
    };
}

/// The core's callback: defines each record from its declaration.
macro_rules! define_vllm_records {
    ($(
        $(#[doc = $tdoc:literal])*
        $T:ident {
            $( $(#[doc = $doc:literal])* $f:ident : $ty:ty $(= $def:expr)? => $kind:ident, $unit:literal $(, $flag:literal)?; )*
        }
    )*) => {$(
        $crate::declared_struct! {
            $(#[doc = $tdoc])*
            ///
            /// Declared in [`crate::for_each_vllm_record!`]; its JSON form is [`Record::from_json`].
            #[derive(Debug, Clone, PartialEq)]
            $T { $( $(#[doc = $doc])* $f : $ty $(= $def)?, )* }
        }

        impl Record for $T {
            const NAME: &'static str = stringify!($T);
            const DOC: &'static str = concat!($($tdoc, "\n"),*);
            const SETTINGS: &'static [Setting] = &[ $( Setting {
                name: stringify!($f),
                py: <$kind as SettingKind>::PY,
                choices: <$kind as SettingKind>::CHOICES,
                required: $crate::is_required!($($def)?),
                unit: $unit,
                flag: opt_flag!($($flag)?),
                doc: concat!($($doc, "\n"),*),
                default: || <$kind as SettingKind>::to_json(&<$T as Default>::default().$f),
            }, )* ];

            fn set_json(&mut self, name: &str, v: &Value) -> Result<bool, String> {
                match name {
                    $( stringify!($f) => {
                        self.$f = <$kind as SettingKind>::from_json(v).ok_or_else(|| {
                            format!("{}: expected {}, got {v}", stringify!($f), <$kind as SettingKind>::EXPECTED)
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            fn to_json(&self) -> Value {
                let mut o = Map::new();
                $( o.insert(stringify!($f).to_owned(), <$kind as SettingKind>::to_json(&self.$f)); )*
                Value::Object(o)
            }
        }
    )*};
}

crate::for_each_vllm_record!(define_vllm_records);
