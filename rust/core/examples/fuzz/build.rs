//! The scalar path from raw values: through the validating setters
//! (`ValueType::set`, `Scenario::set`, then the constructors), and, for
//! `--unvalidated`, through JSON deserialization (what pickle and
//! `_from_json` produce on the Python side: nothing is checked until the
//! configurator resolves its inputs).

use crate::gen::{Build, ConfigCase, Raw};
use kvbudget_core::fields::{ScenarioField, Value, ValueType};
use kvbudget_core::{
    AttentionShape, DraftGeometry, ModelGeometry, PlanError, PoolConfigurator, Scenario,
    ServingConfig, SpeculativeConfig,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value as Json;

/// The `Value` of a raw input; a draft is built field by field and resolved
/// (what the `DraftGeometry` constructor does).
pub fn value_of(raw: &Raw) -> Result<Value<'_>, PlanError> {
    Ok(match raw {
        Raw::None => Value::None,
        Raw::Int(i) => Value::Int(*i),
        Raw::Float(x) => Value::Float(*x),
        Raw::Bool(b) => Value::Bool(*b),
        Raw::Str(s) => Value::Str(s),
        Raw::Draft(fields) => {
            let mut d = DraftGeometry::default();
            for (name, raw) in fields {
                set_known(&mut d, name, value_of(raw)?)?;
            }
            Value::Draft(d.resolved()?)
        }
    })
}

/// `x.set(name, v)`, where `name` comes from `T`'s own field table.
fn set_known<T: ValueType>(x: &mut T, name: &str, v: Value<'_>) -> Result<(), PlanError> {
    let known = x.set(name, v)?;
    assert!(known, "{}::set does not know its field {name}", T::NAME);
    Ok(())
}

/// `Scenario::set` of one raw value.
pub fn set_field(sc: &mut Scenario, f: ScenarioField, v: Value<'_>) -> Result<(), PlanError> {
    let known = sc.set(f.info().name, v)?;
    assert!(known, "Scenario::set does not know field {}", f.info().name);
    Ok(())
}

/// A default scenario with each raw value set, in order.
pub fn scenario_of(fields: &[(ScenarioField, Raw)]) -> Result<Scenario, PlanError> {
    let mut sc = Scenario::default();
    for (f, raw) in fields {
        set_field(&mut sc, *f, value_of(raw)?)?;
    }
    Ok(sc)
}

fn build_with(
    build: Build,
    model: ModelGeometry,
    serving: ServingConfig,
    spec: SpeculativeConfig,
) -> Result<PoolConfigurator, PlanError> {
    match build {
        Build::Create => PoolConfigurator::create(model, serving, spec),
        Build::New(kind) => PoolConfigurator::new(kind, model, serving, spec),
        Build::ForModel(kind) => PoolConfigurator::for_model(kind, model, serving, spec),
        Build::FromScenario(kind) => PoolConfigurator::from_scenario(
            kind,
            &Scenario {
                shape: model.shape,
                serving,
                spec,
            },
        ),
    }
}

/// The configurator through the validating path: setters, then constructors.
pub fn build_validated(c: &ConfigCase) -> Result<PoolConfigurator, PlanError> {
    let sc = scenario_of(&c.fields)?;
    let Some((full, swa)) = &c.ids else {
        let Build::FromScenario(kind) = c.build else {
            unreachable!("only from_scenario has no layer ids")
        };
        return PoolConfigurator::from_scenario(kind, &sc);
    };
    let model = ModelGeometry::new(full.clone(), swa.clone(), sc.shape)?;
    // The Python constructors resolve each value on its own first.
    build_with(c.build, model, sc.serving.resolved()?, sc.spec.resolved()?)
}

fn int_json(i: i128) -> Json {
    u64::try_from(i)
        .map(Json::from)
        .or_else(|_| i64::try_from(i).map(Json::from))
        // Beyond 64 bits: JSON numbers do not reach (serde refuses a string).
        .unwrap_or_else(|_| Json::String(i.to_string()))
}

/// Field `name` of a `T` as JSON holds it.
fn json_of<T: ValueType + Serialize>(name: &str, raw: &Raw) -> Json {
    match raw {
        Raw::None => Json::Null,
        Raw::Int(i) => int_json(*i),
        // NaN and infinities have no JSON form: null, which serde refuses for a float.
        Raw::Float(x) => serde_json::Number::from_f64(*x).map_or(Json::Null, Json::Number),
        Raw::Bool(b) => Json::Bool(*b),
        Raw::Str(s) => {
            // A valid name as serde spells it (what `to_json` writes); else the string itself.
            let mut tmp = T::default();
            match tmp.set(name, Value::Str(s)) {
                Ok(true) => serde_json::to_value(tmp)
                    .ok()
                    .and_then(|o| o.get(name).cloned())
                    .unwrap_or(Json::Null),
                _ => Json::String(s.clone()),
            }
        }
        Raw::Draft(fields) => object_of::<DraftGeometry, _>(fields.iter().map(|(n, r)| (*n, r))),
    }
}

/// A `T`'s JSON object: its defaults with the given fields' raw values.
fn object_of<'a, T, I>(fields: I) -> Json
where
    T: ValueType + Serialize,
    I: Iterator<Item = (&'a str, &'a Raw)>,
{
    let mut obj = serde_json::to_value(T::default()).expect("a default value serializes");
    for (name, raw) in fields {
        obj[name] = json_of::<T>(name, raw);
    }
    obj
}

/// The part `T` of a scenario, deserialized from text (as `_from_json` does).
fn part<T>(fields: &[(ScenarioField, Raw)]) -> Option<T>
where
    T: ValueType + Serialize + DeserializeOwned,
{
    let obj = object_of::<T, _>(
        fields
            .iter()
            .filter(|(f, _)| f.info().owner == T::NAME)
            .map(|(f, r)| (f.info().name, r)),
    );
    serde_json::from_str(&obj.to_string()).ok()
}

/// The configurator from inputs deserialized from JSON (no checks until the
/// configurator resolves them); `None` when serde refuses the JSON.
pub fn build_from_json(c: &ConfigCase) -> Option<Result<PoolConfigurator, PlanError>> {
    let shape: AttentionShape = part(&c.fields)?;
    let serving: ServingConfig = part(&c.fields)?;
    let spec: SpeculativeConfig = part(&c.fields)?;
    let (full, swa) = c.ids.clone().unwrap_or_default();
    let model = ModelGeometry {
        full_attention_layer_ids: full,
        swa_attention_layer_ids: swa,
        shape,
    };
    Some(build_with(c.build, model, serving, spec))
}

fn summary(r: &Result<PoolConfigurator, PlanError>) -> String {
    match r {
        Ok(c) => format!("Ok({:?}, {:?})", c.kind(), c.sizing()),
        Err(e) => format!("Err({:?}: {})", e.code, e.message()),
    }
}

/// Both paths give the same configurator, or errors with the same code.
pub fn same_configurator(
    checked: &Result<PoolConfigurator, PlanError>,
    json: &Result<PoolConfigurator, PlanError>,
) -> Result<(), String> {
    // A constructed draft has its defaults filled; one from JSON may not (same meaning).
    let norm = |c: &PoolConfigurator| {
        let mut sc = *c.scenario();
        sc.spec.draft = sc.spec.draft.map(|d| d.resolved().unwrap_or(d));
        sc
    };
    let same = match (checked, json) {
        (Ok(a), Ok(b)) => {
            a.kind() == b.kind()
                && a.sizing() == b.sizing()
                && norm(a) == norm(b)
                && a.layer_ids() == b.layer_ids()
        }
        (Err(a), Err(b)) => a.code == b.code,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(format!(
            "the setters and constructors give {} but the same values through JSON give {}",
            summary(checked),
            summary(json)
        ))
    }
}
