//! Decoding a fuzzer's bytes into the core's inputs, driven by the field table
//! (`kvbudget_core::fields::SCENARIO_FIELDS`): every scenario field may be set,
//! with values biased to the kind's edges (0, 1, small counts, 2^63 - 1, None).

use kvbudget_core::fields::{FieldInfo, PyRepr, ScenarioField, Value};
use kvbudget_core::Scenario;

/// A byte reader that yields zeros once the input is exhausted.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    pub fn u64(&mut self) -> u64 {
        let mut x = 0u64;
        for _ in 0..8 {
            x = (x << 8) | u64::from(self.u8());
        }
        x
    }

    /// An integer biased to edges and small values.
    pub fn int(&mut self) -> i128 {
        match self.u8() % 8 {
            0 => 0,
            1 => 1,
            2 => i128::from(self.u8()),
            3 => i128::from(self.u8()) << (self.u8() % 40),
            4 => i128::from(i64::MAX),
            5 => -i128::from(self.u8()),
            6 => i128::from(self.u64()),
            _ => i128::from(self.u64() as i64),
        }
    }
}

/// A value of `f`'s kind, or (sometimes) of another kind.
pub fn value(b: &mut Bytes<'_>, f: &FieldInfo) -> Value<'static> {
    let tag = b.u8();
    if tag % 29 == 0 {
        return Value::None;
    }
    match f.py {
        PyRepr::Int | PyRepr::OptInt => Value::Int(b.int()),
        PyRepr::Float => Value::Float(match b.u8() % 6 {
            0 => 0.8,
            1 => f64::from(b.u8()) / 64.0,
            2 => f64::from_bits(b.u64()),
            3 => 1e300,
            4 => 5e-324,
            _ => 0.5,
        }),
        PyRepr::Bool => Value::Bool(tag % 2 == 0),
        PyRepr::Name | PyRepr::OptName => {
            let names = f.choices;
            if names.is_empty() || tag % 17 == 0 {
                Value::Str("bogus")
            } else {
                Value::Str(names[usize::from(b.u8()) % names.len()])
            }
        }
        PyRepr::Draft => Value::None,
    }
}

/// A scenario: each field set with probability 1/2 from the bytes (errors ignored:
/// a refused value leaves the field as it was).
pub fn scenario(b: &mut Bytes<'_>) -> Scenario {
    let mut sc = Scenario::default();
    for f in ScenarioField::ALL {
        if b.u8() % 2 == 0 {
            let info = f.info();
            let _ = sc.set(info.name, value(b, info));
        }
    }
    sc
}
