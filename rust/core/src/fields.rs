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
use std::marker::PhantomData;

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
        let v = T::ALL.get(usize::from(c)).copied();
        (v.unwrap_or_default(), v.is_some())
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
        let v: T = s.parse()?;
        // ALL holds every value, so the position exists; u8 holds it (at most 255 values).
        Ok(T::ALL
            .iter()
            .position(|x| x.name() == v.name())
            .unwrap_or(usize::MAX) as u8)
    }
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

/// The declaration: every value type, every field. `$callback!` receives it;
/// the core's callback defines the types, the bridge's defines the getters.
///
/// Syntax: `scenario { .. }` holds the three types a [`crate::Scenario`] is made
/// of (`Type(scenario_field) [extra derives] { fields }`); `values { .. }` the
/// other value types. A field is `name: RustType = default => Kind`; without
/// `= default` the constructor requires it (its Rust default is `Default`).
#[macro_export]
macro_rules! for_each_value_type {
    ($callback:ident) => {
        $callback! {
            scenario {
                /// The sizing view of a model's attention: layer counts and
                /// dims, no layer ids (what every formula needs). `None` in a
                /// defaulted dim means "not given"; [`AttentionShape::resolved`]
                /// fills it (V dim = K dim, SWA geometry = full geometry).
                AttentionShape(shape) [Eq, Hash] {
                    /// `n_f`, full-attention layers (`ModelGeometry` takes their ids instead).
                    num_full_layers: u64 = 0 => $crate::fields::Count,
                    /// `n_s`, sliding-window layers (`ModelGeometry` takes their ids instead).
                    num_swa_layers: u64 = 0 => $crate::fields::Count,
                    /// Total KV heads of a full layer, before tensor parallelism.
                    num_kv_heads: u64 => $crate::fields::Positive,
                    /// K head dim of a full layer, elements.
                    head_dim: u64 => $crate::fields::Positive,
                    /// V head dim of a full layer, elements (default: `head_dim`).
                    v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// Total KV heads of an SWA layer (default: `num_kv_heads`).
                    swa_num_kv_heads: Option<u64> = None => $crate::fields::Derived,
                    /// K head dim of an SWA layer, elements (default: `head_dim`).
                    swa_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// V head dim of an SWA layer, elements (default: `swa_head_dim` when given, else `v_head_dim`).
                    swa_v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// SGLang's exclusive sliding window (HF `sliding_window` minus 1), tokens.
                    sliding_window_size: Option<u64> = None => $crate::fields::OptCount,
                    /// MLA latent rank, elements; given, the model is MLA (DeepSeek-style).
                    kv_lora_rank: Option<u64> = None => $crate::fields::OptPositive,
                    /// MLA rotary key dim, elements (required with `kv_lora_rank`).
                    qk_rope_head_dim: Option<u64> = None => $crate::fields::OptCount,
                }
                /// Serving settings (REFERENCE section 1): dtype, paging,
                /// parallelism, SWA ratio and the request-cap inputs.
                ServingConfig(serving) [] {
                    /// KV-cache dtype (SGLang's `--kv-cache-dtype` names).
                    kv_cache_dtype: $crate::KvDtype = $crate::KvDtype::Bf16 => $crate::fields::Choice<$crate::KvDtype>,
                    /// `p`, tokens per page.
                    page_size: u64 = 1 => $crate::fields::Positive,
                    /// Attention tensor-parallel size, ranks.
                    tp_size: u64 = 1 => $crate::fields::Positive,
                    /// Decode context-parallel size, ranks (divides `tp_size`).
                    dcp_size: u64 = 1 => $crate::fields::Positive,
                    /// Attention data-parallel size, ranks.
                    attn_dp_size: u64 = 1 => $crate::fields::Positive,
                    /// `r`, SWA-pool tokens per full-pool token.
                    swa_full_tokens_ratio: f64 = 0.8 => $crate::fields::Ratio,
                    /// Requests admitted at once (a request-cap input).
                    max_running_requests: Option<u64> = None => $crate::fields::OptPositive,
                    /// Chunked-prefill size, tokens (a request-cap input).
                    chunked_prefill_size: Option<u64> = None => $crate::fields::OptPositive,
                    /// The radix cache is disabled (a request-cap input).
                    disable_radix_cache: bool = false => $crate::fields::Flag,
                    /// The overlap scheduler is disabled (spec v1 rather than v2).
                    disable_overlap_schedule: bool = false => $crate::fields::Flag,
                    /// PD disaggregation role.
                    disaggregation_mode: $crate::DisaggregationMode = $crate::DisaggregationMode::Null => $crate::fields::Choice<$crate::DisaggregationMode>,
                    /// Extra decode slots in PD decode, requests.
                    disaggregation_decode_extra_slots: u64 = 0 => $crate::fields::Count,
                    /// `E`, the SWA eviction interval, tokens (SGLang uses `max(1, E)`).
                    swa_eviction_interval: i64 = 128 => $crate::fields::Signed,
                    /// Price SWA layers as full layers (SGLang's `--disable-hybrid-swa-memory`).
                    disable_hybrid_swa_memory: bool = false => $crate::fields::Flag,
                    /// This is the draft worker (it counts no draft terms).
                    is_draft_worker: bool = false => $crate::fields::Flag,
                }
                /// Speculative-decoding settings (REFERENCE section 1).
                SpeculativeConfig(spec) [] {
                    /// The algorithm (SGLang's `--speculative-algorithm`).
                    algorithm: $crate::SpecAlgorithm = $crate::SpecAlgorithm::None => $crate::fields::Choice<$crate::SpecAlgorithm>,
                    /// `d`, the draft model's KV layers (0 with `draft` given: the draft's).
                    draft_num_layers: u64 = 0 => $crate::fields::Count,
                    /// `--speculative-num-steps`.
                    num_steps: Option<u64> = None => $crate::fields::OptCount,
                    /// `--speculative-eagle-topk`.
                    eagle_topk: Option<u64> = None => $crate::fields::OptCount,
                    /// `--speculative-num-draft-tokens`, tokens.
                    num_draft_tokens: Option<u64> = None => $crate::fields::OptCount,
                    /// `d_sf`: banded draft depths at SWA geometry but full capacity, layers.
                    banded_draft_layers: u64 = 0 => $crate::fields::Count,
                    /// DFLASH draft bytes per token per DCP rank, bytes.
                    dflash_draft_cell_size_per_token: Option<u64> = None => $crate::fields::OptPositive,
                    /// The draft's own KV geometry for the exact plan (default: the target's full geometry).
                    draft: Option<$crate::DraftGeometry> = None => $crate::fields::Draft,
                }
            }
            values {
                /// The draft model's own KV geometry, when it differs from the
                /// target's full layers (exact plan only; SGLang's sizing prices
                /// the draft at the target's geometry).
                DraftGeometry [Eq, Hash] {
                    /// Draft KV layers.
                    num_layers: u64 => $crate::fields::Positive,
                    /// Total draft KV heads, before tensor parallelism.
                    num_kv_heads: u64 => $crate::fields::Positive,
                    /// Draft K head dim, elements.
                    head_dim: u64 => $crate::fields::Positive,
                    /// Draft V head dim, elements (default: `head_dim`).
                    v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// Draft KV dtype (default: the target's).
                    kv_cache_dtype: Option<$crate::KvDtype> = None => $crate::fields::OptChoice<$crate::KvDtype>,
                    /// The target pool whose token count the draft pool takes (default:
                    /// SGLang's rule, the full pool or an all-SWA target's SWA pool).
                    capacity: Option<$crate::DraftCapacity> = None => $crate::fields::OptChoice<$crate::DraftCapacity>,
                }
                /// The pool sizes SGLang resolves, tokens (`None` where SGLang leaves them unset).
                MemoryPoolConfig [Eq, Hash] {
                    /// `max_total_num_tokens` (the full pool, or an all-SWA model's SWA pool), tokens.
                    max_total_num_tokens: i64 => $crate::fields::Signed,
                    /// Full-pool tokens (SWA configurators only).
                    full_max_total_num_tokens: Option<i64> = None => $crate::fields::OptSigned,
                    /// SWA-pool tokens (SWA configurators only).
                    swa_max_total_num_tokens: Option<i64> = None => $crate::fields::OptSigned,
                }
            }
        }
    };
}

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
        $(#[doc = $tdoc])*
        ///
        /// Declared in [`crate::for_each_value_type!`].
        #[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize $(, $derive)*)]
        #[serde(deny_unknown_fields)]
        pub struct $T {
            $( $(#[doc = $doc])* pub $f: $ty, )*
        }

        impl Default for $T {
            fn default() -> Self {
                Self { $( $f: $crate::default_or!($($def)?), )* }
            }
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

for_each_value_type!(define_value_types);
