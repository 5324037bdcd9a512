//! Startup checks of the field table the generators are driven by, and of
//! the named enums (what a choice cell's code and a name mean).

use crate::batch::CELL_DTYPES;
use crate::gen::HINTS;
use crate::oracles::Check;
use kvbudget_core::fields::{FieldInfo, PyRepr, ScenarioField, Value, ValueType, SCENARIO_FIELDS};
use kvbudget_core::{
    AttentionShape, ConfiguratorKind, DisaggregationMode, DraftCapacity, DraftGeometry, ErrorCode,
    Fit, KvDtype, Named, Scenario, ServingConfig, SpecAlgorithm, SpeculativeConfig,
};
use std::collections::HashSet;
use std::fmt::Debug;

fn get(sc: &Scenario, name: &str) -> Option<Value<'static>> {
    sc.shape
        .get(name)
        .or_else(|| sc.serving.get(name))
        .or_else(|| sc.spec.get(name))
}

/// `T::FIELDS` are the table's rows of owner `T`, in order.
fn check_part<T: ValueType>() -> Check {
    let rows: Vec<&str> = SCENARIO_FIELDS
        .iter()
        .filter(|f| f.owner == T::NAME)
        .map(|f| f.name)
        .collect();
    let own: Vec<&str> = T::FIELDS.iter().map(|f| f.name).collect();
    ensure!(
        rows == own,
        "{}::FIELDS {own:?} != its SCENARIO_FIELDS rows {rows:?}",
        T::NAME
    );
    Ok(())
}

fn check_kind(f: &FieldInfo) -> Check {
    let named = matches!(f.py, PyRepr::Name | PyRepr::OptName);
    ensure!(
        named != f.choices.is_empty(),
        "{}: kind {} with choices {:?}",
        f.name,
        f.kind,
        f.choices
    );
    ensure!(
        !f.batch || CELL_DTYPES.contains(&f.cell_dtype),
        "{}: batch cell dtype {}",
        f.name,
        f.cell_dtype
    );
    ensure!(!f.doc.is_empty(), "{} has no doc", f.name);
    Ok(())
}

pub fn check_table() -> Check {
    ensure!(
        SCENARIO_FIELDS.len() == ScenarioField::ALL.len(),
        "SCENARIO_FIELDS and ScenarioField::ALL differ in length"
    );
    let mut names = HashSet::new();
    let defaults = Scenario::default();
    for (k, &f) in ScenarioField::ALL.iter().enumerate() {
        let info = f.info();
        ensure!(
            info.name == SCENARIO_FIELDS[k].name && info.owner == SCENARIO_FIELDS[k].owner,
            "{f:?}.info() is not row {k}"
        );
        ensure!(names.insert(info.name), "field {} listed twice", info.name);
        ensure!(
            ScenarioField::from_name(info.name) == Some(f),
            "ScenarioField::from_name({}) is not {f:?}",
            info.name
        );
        check_kind(info)?;
        let default = (info.default)();
        ensure!(
            get(&defaults, info.name) == Some(default),
            "{}: default {default:?} != the default scenario's {:?}",
            info.name,
            get(&defaults, info.name)
        );
        if !info.required {
            let mut sc = Scenario::default();
            ensure!(
                sc.set(info.name, default) == Ok(true) && sc == defaults,
                "{}: setting its default fails or changes the scenario",
                info.name
            );
        }
        for &c in info.choices {
            let mut sc = Scenario::default();
            ensure!(
                sc.set(info.name, Value::Str(c)) == Ok(true)
                    && get(&sc, info.name) == Some(Value::Str(c)),
                "{}: choice {c:?} does not round-trip through set/get",
                info.name
            );
        }
    }
    for f in DraftGeometry::FIELDS {
        check_kind(f)?;
    }
    check_part::<AttentionShape>()?;
    check_part::<ServingConfig>()?;
    check_part::<SpeculativeConfig>()?;
    for h in HINTS {
        ensure!(
            SCENARIO_FIELDS
                .iter()
                .chain(DraftGeometry::FIELDS)
                .any(|f| f.name == h.name),
            "the driver's hint for {} names no field of the table",
            h.name
        );
    }
    check_named::<KvDtype>()?;
    check_named::<SpecAlgorithm>()?;
    check_named::<DisaggregationMode>()?;
    check_named::<DraftCapacity>()?;
    check_named::<ConfiguratorKind>()
}

/// `ALL[i]` is called `NAMES[i]`, parses back, and round-trips through serde.
fn check_named<T>() -> Check
where
    T: Named + PartialEq + Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    ensure!(
        T::ALL.len() == T::NAMES.len() && T::ALL.len() <= 256,
        "{:?}: ALL and NAMES differ",
        T::ALL
    );
    for (v, n) in T::ALL.iter().zip(T::NAMES) {
        ensure!(v.name() == *n, "{v:?}.name() is {:?}, not {n:?}", v.name());
        ensure!(
            n.parse::<T>().ok() == Some(*v),
            "{n:?} does not parse to {v:?}"
        );
        let json = serde_json::to_string(v).map_err(|e| e.to_string())?;
        let back: Option<T> = serde_json::from_str(&json).ok();
        ensure!(
            back == Some(*v),
            "{v:?} does not round-trip through JSON {json}"
        );
    }
    Ok(())
}

/// A parsed name's canonical name parses back to it; a refused one is invalid_config.
fn parse_named<T: Named + PartialEq + Debug>(s: &str) -> Check {
    match s.parse::<T>() {
        Ok(v) => ensure!(
            v.name().parse::<T>().ok() == Some(v) && T::ALL.contains(&v),
            "{s:?} parses to {v:?}, whose name {:?} does not parse back",
            v.name()
        ),
        Err(e) => ensure!(
            e.code == ErrorCode::InvalidConfig && !e.message().is_empty(),
            "parsing {s:?} fails with code {:?}",
            e.code
        ),
    }
    Ok(())
}

/// Every parser, and every choice field's setter, on one string.
pub fn run_parse(s: &str) -> Check {
    parse_named::<KvDtype>(s)?;
    parse_named::<SpecAlgorithm>(s)?;
    parse_named::<DisaggregationMode>(s)?;
    parse_named::<DraftCapacity>(s)?;
    parse_named::<ConfiguratorKind>(s)?;
    if let Err(e) = s.parse::<Fit>() {
        ensure!(
            e.code == ErrorCode::InvalidConfig && !e.message().is_empty(),
            "Fit {s:?}: code {:?}",
            e.code
        );
    }
    for f in SCENARIO_FIELDS.iter().filter(|f| !f.choices.is_empty()) {
        let mut sc = Scenario::default();
        match sc.set(f.name, Value::Str(s)) {
            Ok(known) => {
                ensure!(known, "Scenario::set does not know {}", f.name);
                let got = get(&sc, f.name);
                ensure!(
                    matches!(got, Some(Value::Str(n)) if f.choices.contains(&n)),
                    "{} set to {s:?} reads back as {got:?}",
                    f.name
                );
            }
            Err(e) => ensure!(
                e.code == ErrorCode::InvalidConfig,
                "{} = {s:?}: code {:?}",
                f.name,
                e.code
            ),
        }
    }
    Ok(())
}
