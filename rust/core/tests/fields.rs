//! The field table (`for_each_value_type!`) against the types it declares:
//! every field can be read and written by name, the table's defaults are the
//! types' `Default`, named enums agree with their `FromStr`, and the scenario
//! table lists the three parts' fields once each.
use kvbudget_core::fields::{
    FieldInfo, Kind, Named, ScenarioField, Value, ValueType, SCENARIO_FIELDS,
};
use kvbudget_core::*;
use std::collections::HashSet;

fn check_type<T: ValueType + std::fmt::Debug>() {
    let d = T::default();
    let mut names = HashSet::new();
    for f in T::FIELDS {
        assert!(
            names.insert(f.name),
            "{}: {} declared twice",
            T::NAME,
            f.name
        );
        assert_eq!(f.owner, T::NAME);
        assert_eq!(d.get(f.name), Some((f.default)()), "{}.{}", T::NAME, f.name);
        assert!(
            !f.doc.trim().is_empty(),
            "{}.{} has no doc",
            T::NAME,
            f.name
        );
        // Writing a field's own value back by name leaves the value unchanged.
        let mut v = d;
        if f.required {
            continue; // the default (0) of a required field is not a valid value
        }
        assert!(v.set(f.name, (f.default)()).expect("the default is valid"));
        assert_eq!(format!("{v:?}"), format!("{d:?}"));
    }
    let mut v = d;
    assert!(!v.set("no_such_field", Value::None).unwrap());
    assert_eq!(v.get("no_such_field"), None);
}

#[test]
fn every_declared_type_round_trips_by_name() {
    check_type::<AttentionShape>();
    check_type::<ServingConfig>();
    check_type::<SpeculativeConfig>();
    check_type::<DraftGeometry>();
    check_type::<MemoryPoolConfig>();
}

fn check_named<T: Named + std::fmt::Debug + PartialEq>() {
    assert_eq!(T::ALL.len(), T::NAMES.len());
    for (i, (v, name)) in T::ALL.iter().zip(T::NAMES).enumerate() {
        assert_eq!(v.name(), *name, "{v:?}");
        assert_eq!(name.parse::<T>().unwrap(), *v, "{name}");
        assert_eq!(
            name.to_ascii_uppercase().parse::<T>().unwrap(),
            *v,
            "{name}"
        );
        // The batch code of a value is its index; serde writes the canonical name.
        assert_eq!(T::ALL.iter().position(|x| x == v), Some(i));
    }
    assert!("no such name".parse::<T>().is_err());
}

#[test]
fn named_enums_agree_with_their_parsers() {
    check_named::<KvDtype>();
    check_named::<SpecAlgorithm>();
    check_named::<DisaggregationMode>();
    check_named::<DraftCapacity>();
    check_named::<ConfiguratorKind>();
    for a in <SpecAlgorithm as Named>::ALL {
        let json = serde_json::to_string(a).unwrap();
        assert_eq!(
            json,
            format!("\"{}\"", a.name()),
            "serde and FromStr spell {a:?} alike"
        );
    }
    assert_eq!(
        "mtp".parse::<SpecAlgorithm>().unwrap(),
        SpecAlgorithm::NextN
    );
}

#[test]
fn the_scenario_table_is_its_three_parts() {
    let parts: Vec<&FieldInfo> = AttentionShape::FIELDS
        .iter()
        .chain(ServingConfig::FIELDS)
        .chain(SpeculativeConfig::FIELDS)
        .collect();
    assert_eq!(parts.len(), SCENARIO_FIELDS.len());
    for ((f, g), field) in parts.iter().zip(SCENARIO_FIELDS).zip(ScenarioField::ALL) {
        assert_eq!((f.name, f.owner), (g.name, g.owner));
        assert_eq!(field.info().name, f.name);
        assert_eq!(ScenarioField::from_name(f.name), Some(*field));
    }
    let names: HashSet<_> = SCENARIO_FIELDS.iter().map(|f| f.name).collect();
    assert_eq!(
        names.len(),
        SCENARIO_FIELDS.len(),
        "scenario field names are unique"
    );
    // A scenario routes a field to its part.
    let mut sc = Scenario::default();
    assert!(sc.set("page_size", Value::Int(64)).unwrap());
    assert!(sc.set("head_dim", Value::Int(256)).unwrap());
    assert!(sc.set("algorithm", Value::Str("eagle3")).unwrap());
    assert_eq!(
        (sc.serving.page_size, sc.shape.head_dim, sc.spec.algorithm),
        (64, 256, SpecAlgorithm::Eagle3)
    );
    assert!(!sc.set("num_layers", Value::Int(1)).unwrap());
}

#[test]
fn batch_cells_and_values_agree() {
    // A cell is valid exactly when the value it stands for is accepted by the scalar path.
    for c in [-3_i64, -1, 0, 1, 2, 1 << 40] {
        let (v, ok) = <fields::Positive as Kind>::from_cell(c);
        let scalar = <fields::Positive as Kind>::from_value("f", Value::Int(i128::from(c)));
        assert_eq!(ok, scalar.is_ok(), "{c}");
        if ok {
            assert_eq!(Ok(v), scalar);
        }
        let (v, ok) = <fields::OptPositive as Kind>::from_cell(c);
        let scalar = <fields::OptPositive as Kind>::from_value(
            "f",
            if c < 0 {
                Value::None
            } else {
                Value::Int(i128::from(c))
            },
        );
        assert_eq!(ok, scalar.is_ok(), "{c}");
        if ok {
            assert_eq!(Ok(v), scalar);
        }
    }
    for x in [
        0.8,
        0.0,
        -0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        1e-300,
        5e-324,
    ] {
        let (_, ok) = <fields::Ratio as Kind>::from_cell(x);
        assert_eq!(
            ok,
            <fields::Ratio as Kind>::from_value("r", Value::Float(x)).is_ok(),
            "{x}"
        );
    }
    for code in 0..=255u8 {
        let (v, ok) = <fields::Choice<KvDtype> as Kind>::from_cell(code);
        assert_eq!(ok, usize::from(code) < <KvDtype as Named>::ALL.len());
        if ok {
            assert_eq!(v, <KvDtype as Named>::ALL[usize::from(code)]);
        }
    }
}
