//! Input generation, driven by the core's field table: every input field
//! gets a raw value (what a Python caller could pass) drawn from its kind
//! ([`FieldInfo::py`], [`FieldInfo::kind`], [`FieldInfo::choices`]); batch
//! cells are those values in the field's cell encoding
//! ([`FieldInfo::cell_dtype`]). [`HINTS`] only makes some fields' values
//! realistic; a field without a hint gets its kind's generic values.
//! Batch cases (cells in each field's encoding) are generated in `batch.rs`.

use crate::rng::Rng;
use kvbudget_core::fields::{FieldInfo, PyRepr, ScenarioField, ValueType};
use kvbudget_core::{ConfiguratorKind, DraftGeometry, Named};

/// A raw input value, as Python could spell it.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    None,
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(String),
    /// A `DraftGeometry`, field by field.
    Draft(Vec<(&'static str, Raw)>),
}

/// Realistic values of one field, where its kind's generic values are not.
#[derive(Debug)]
pub struct Hint {
    pub name: &'static str,
    /// Percent of `None` (optional kinds).
    pub none: u64,
    /// Realistic integers (empty: the kind's generic ones).
    pub ints: &'static [i64],
    /// Percent of `true` (flags).
    pub yes: u64,
}

const fn ints(name: &'static str, none: u64, ints: &'static [i64]) -> Hint {
    Hint {
        name,
        none,
        ints,
        yes: 50,
    }
}

const fn flag(name: &'static str, yes: u64) -> Hint {
    Hint {
        name,
        none: 0,
        ints: &[],
        yes,
    }
}

const DIMS: &[i64] = &[1, 16, 32, 64, 80, 96, 128, 128, 192, 256, 512];
const HEADS: &[i64] = &[1, 2, 4, 8, 8, 16, 32, 64, 128];
const SMALL: &[i64] = &[0, 1, 2, 3, 4, 5, 6, 7, 8];

/// Names must be fields of the table (checked at startup: a renamed field fails the run).
pub const HINTS: &[Hint] = &[
    ints("num_full_layers", 0, &[1, 1, 2, 4, 5, 12, 24, 36, 61]),
    ints("num_swa_layers", 0, &[0, 0, 0, 1, 3, 12, 24, 36, 50]),
    ints("num_kv_heads", 0, HEADS),
    ints("head_dim", 0, DIMS),
    ints("v_head_dim", 60, DIMS),
    ints("swa_num_kv_heads", 60, HEADS),
    ints("swa_head_dim", 60, DIMS),
    ints("swa_v_head_dim", 70, DIMS),
    ints(
        "sliding_window_size",
        30,
        &[0, 1, 127, 511, 1023, 4095, 8191],
    ),
    ints("kv_lora_rank", 85, &[1, 64, 512]),
    ints("qk_rope_head_dim", 10, &[0, 1, 64]),
    ints("page_size", 0, &[1, 1, 3, 16, 32, 64, 128, 256]),
    ints("tp_size", 0, &[1, 1, 2, 4, 8, 16]),
    ints("dcp_size", 0, &[1, 1, 1, 1, 1, 1, 1, 1, 2, 4]),
    ints("attn_dp_size", 0, &[1, 1, 2, 4, 8]),
    ints("max_running_requests", 35, &[1, 8, 64, 256, 1024]),
    ints(
        "chunked_prefill_size",
        35,
        &[1, 512, 2048, 4096, 8192, 16_384],
    ),
    flag("disable_radix_cache", 60),
    ints(
        "disaggregation_decode_extra_slots",
        0,
        &[0, 0, 0, 1, 2, 8, 16],
    ),
    ints("swa_eviction_interval", 0, &[128, 128, 0, 1, 4, -1]),
    flag("disable_hybrid_swa_memory", 15),
    flag("is_draft_worker", 15),
    ints("draft_num_layers", 0, &[0, 0, 0, 0, 1, 2, 3, 4, 64]),
    ints("num_steps", 40, SMALL),
    ints("eagle_topk", 40, SMALL),
    ints("num_draft_tokens", 40, SMALL),
    ints("banded_draft_layers", 0, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]),
    ints(
        "dflash_draft_cell_size_per_token",
        50,
        &[1, 256, 4096, 65_536],
    ),
    ints("swa_kv_lora_rank", 90, &[64, 256, 512]),
    ints("swa_qk_rope_head_dim", 90, &[0, 32, 64]),
    flag("enable_unified_memory", 20),
    ints("model_context_len", 50, &[1, 512, 4096, 131_072]),
    ints("prefill_attention_backend", 30, &[]),
    ints("decode_attention_backend", 30, &[]),
    flag("is_sm100", 70),
    ints("draft_swa_num_layers", 0, &[0, 0, 0, 0, 0, 0, 1, 2]),
    ints("max_num_draft_tokens", 60, SMALL),
    ints("fused_full_entry_bytes", 90, &[1, 4096, 65_536, 1 << 20]),
    ints("fused_swa_entry_bytes", 90, &[1, 4096, 65_536, 1 << 20]),
    ints("draft", 80, &[]),
    ints("num_layers", 0, &[1, 1, 2, 3, 4]),
    ints("kv_cache_dtype", 50, &[]),
    ints("capacity", 60, &[]),
];

pub fn hint(name: &str) -> Option<&'static Hint> {
    HINTS.iter().find(|h| h.name == name)
}

const RATIOS: [f64; 7] = [0.8, 0.5, 0.1, 1.0, 0.25, 0.9, 0.333];

/// How often one case draws unusual values, percent.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    pub edge: u64,
    pub wrong_type: u64,
}

impl Mix {
    pub fn draw(r: &mut Rng) -> Self {
        let edge = r.pick(&[0, 0, 0, 1, 2, 5, 15]);
        Self {
            edge,
            wrong_type: edge / 4,
        }
    }
}

fn gen_int(r: &mut Rng, f: &FieldInfo, h: Option<&Hint>, mix: Mix) -> i128 {
    if r.chance(mix.edge) {
        return r.int_edge();
    }
    let generic: &[i64] = match f.kind {
        "positive" | "opt_positive" => &[1, 1, 2, 4, 8, 16, 64, 128, 1024],
        "count" | "opt_count" => &[0, 0, 1, 2, 3, 4, 8, 64],
        _ => &[0, 1, -1, 2, 128],
    };
    let vals = h.map_or(
        generic,
        |h| if h.ints.is_empty() { generic } else { h.ints },
    );
    i128::from(r.pick(vals))
}

fn gen_name(r: &mut Rng, f: &FieldInfo, mix: Mix) -> Raw {
    if r.chance(mix.edge) {
        return match r.below(10) {
            0..=4 => Raw::Str(gen_string(r)),
            5..=6 => Raw::None,
            _ => Raw::Str(r.pick(f.choices).to_ascii_uppercase()),
        };
    }
    Raw::Str(r.pick(f.choices).to_string())
}

/// A value of another type than the field takes.
fn wrong_type(r: &mut Rng, py: PyRepr) -> Raw {
    loop {
        let v = match r.below(6) {
            0 => Raw::None,
            1 => Raw::Int(1),
            2 => Raw::Float(1.5),
            3 => Raw::Float(8.0),
            4 => Raw::Bool(true),
            _ => Raw::Str("8".into()),
        };
        let same = matches!(
            (&v, py),
            (
                Raw::None,
                PyRepr::OptInt | PyRepr::OptName | PyRepr::Draft | PyRepr::Name
            ) | (Raw::Int(_), PyRepr::Int | PyRepr::OptInt | PyRepr::Float)
                | (Raw::Float(_), PyRepr::Float)
                | (Raw::Bool(_), PyRepr::Bool)
                | (Raw::Str(_), PyRepr::Name | PyRepr::OptName)
        );
        if !same {
            return v;
        }
    }
}

/// A raw value for field `f`: realistic most of the time, an edge or a wrong type with `mix`.
pub fn gen_value(r: &mut Rng, f: &FieldInfo, mix: Mix) -> Raw {
    if r.chance(mix.wrong_type) {
        return wrong_type(r, f.py);
    }
    let h = hint(f.name);
    let none = h.map_or(40, |h| h.none);
    match f.py {
        PyRepr::OptInt | PyRepr::OptName | PyRepr::Draft if r.chance(none) => Raw::None,
        PyRepr::Int | PyRepr::OptInt => Raw::Int(gen_int(r, f, h, mix)),
        PyRepr::Float if r.chance(mix.edge) => Raw::Float(r.f64_edge()),
        PyRepr::Float => Raw::Float(r.pick(&RATIOS)),
        PyRepr::Bool => Raw::Bool(r.chance(h.map_or(50, |h| h.yes))),
        PyRepr::Name | PyRepr::OptName => gen_name(r, f, mix),
        PyRepr::Draft => {
            let mut fields = Vec::new();
            for g in DraftGeometry::FIELDS {
                if g.required || r.chance(85) {
                    fields.push((g.name, gen_value(r, g, mix)));
                }
            }
            Raw::Draft(fields)
        }
    }
}

fn gen_layer_count(r: &mut Rng, zero_percent: u64) -> u64 {
    if r.chance(zero_percent) {
        return 0;
    }
    match r.below(100) {
        0..=89 => r.range(1, 64),
        90..=98 => r.range(65, 512),
        _ => r.range(513, 3000),
    }
}

/// Full and SWA layer ids: a (shuffled) partition of `0..nf+ns` most of the
/// time; with edges, arbitrary ids, duplicates, or ids at the top of the range.
fn gen_ids(r: &mut Rng, nf: u64, ns: u64, mix: Mix) -> (Vec<u64>, Vec<u64>) {
    let total = nf + ns;
    match if r.chance(mix.edge * 3) {
        r.below(3)
    } else {
        3
    } {
        0 => {
            // Arbitrary ids (edges collide often: duplicates).
            let full = (0..nf).map(|_| r.u64_edge()).collect();
            let swa = (0..ns).map(|_| r.u64_edge()).collect();
            (full, swa)
        }
        1 => {
            // A duplicate inside one list, or across the lists.
            let mut full: Vec<u64> = (0..nf).collect();
            let mut swa: Vec<u64> = (nf..total).collect();
            match r.below(3) {
                0 if nf > 0 => full.push(r.below(nf)),
                1 if ns > 0 => swa.push(nf + r.below(ns)),
                _ if nf > 0 => swa.push(r.below(nf)),
                _ => swa.push(0),
            }
            (full, swa)
        }
        2 => {
            // Ids at the top of the range (above i64::MAX: refused).
            let top = if r.chance(50) {
                u64::MAX
            } else {
                i64::MAX as u64
            };
            let full = (0..nf).map(|i| top - i).collect();
            let swa = (0..ns).map(|i| top - nf - i).collect();
            (full, swa)
        }
        _ => {
            let mut ids: Vec<u64> = (0..total).collect();
            if r.chance(70) {
                for i in (1..ids.len()).rev() {
                    let j = r.index(i + 1);
                    ids.swap(i, j);
                }
            }
            let swa = ids.split_off(nf as usize);
            (ids, swa)
        }
    }
}

pub fn gen_budget(r: &mut Rng) -> i64 {
    match r.below(10) {
        0..=4 => r.range(1 << 20, 1 << 40) as i64,
        5..=6 => r.below(1 << 20) as i64,
        _ => r.i64_edge(),
    }
}

/// How a configurator is built.
#[derive(Debug, Clone, Copy)]
pub enum Build {
    Create,
    New(ConfiguratorKind),
    ForModel(Option<ConfiguratorKind>),
    /// `from_scenario`: layer ids synthesized from the counts.
    FromScenario(Option<ConfiguratorKind>),
}

#[derive(Debug, Clone)]
pub struct ManyCase {
    pub budgets: Vec<i64>,
    pub out_lens: [usize; 4],
}

#[derive(Debug, Clone)]
pub struct ConfigCase {
    /// Raw values applied in order (a field not listed keeps its default).
    pub fields: Vec<(ScenarioField, Raw)>,
    /// The layer ids, for the builds that take a `ModelGeometry`.
    pub ids: Option<(Vec<u64>, Vec<u64>)>,
    pub build: Build,
    /// Also build the inputs by deserializing JSON (no checks until the configurator).
    pub json: bool,
    pub available: i64,
    pub available_delta: i64,
    pub max_tokens: i64,
    pub page: Option<u64>,
    pub many: Option<ManyCase>,
    /// Picks the plan mutation (and whether to round-trip plans through JSON).
    pub mutation: u64,
}

pub fn gen_config(r: &mut Rng, allow_json: bool) -> ConfigCase {
    let mix = Mix::draw(r);
    let kind = |r: &mut Rng| r.pick(<ConfiguratorKind as Named>::ALL);
    let opt_kind = |r: &mut Rng| if r.chance(50) { None } else { Some(kind(r)) };
    let build = match r.below(10) {
        0..=2 => Build::Create,
        3..=5 => Build::New(kind(r)),
        6 => Build::ForModel(opt_kind(r)),
        _ => Build::FromScenario(opt_kind(r)),
    };
    let ids = (!matches!(build, Build::FromScenario(_))).then(|| {
        let (nf, ns) = (gen_layer_count(r, 10), gen_layer_count(r, 40));
        gen_ids(r, nf, ns, mix)
    });
    let mut fields = Vec::new();
    for &f in ScenarioField::ALL {
        let info = f.info();
        // With layer ids, the counts are usually left for ModelGeometry to fill.
        let from_ids = match (f, &ids) {
            (ScenarioField::num_full_layers, Some((full, _))) => Some(full.len()),
            (ScenarioField::num_swa_layers, Some((_, swa))) => Some(swa.len()),
            _ => None,
        };
        match from_ids {
            Some(n) => match r.below(100) {
                0..=79 => {}
                80..=95 => fields.push((f, Raw::Int(n as i128))),
                _ => fields.push((f, gen_value(r, info, mix))),
            },
            None if info.required || r.chance(85) => fields.push((f, gen_value(r, info, mix))),
            None => {}
        }
    }
    let many = (r.chance(10)).then(|| {
        let n = r.index(5);
        let budgets = (0..n).map(|_| gen_budget(r)).collect();
        let mut out_lens = [n; 4];
        if r.chance(20) {
            out_lens[r.index(4)] = if n > 0 && r.chance(50) { n - 1 } else { n + 1 };
        }
        ManyCase { budgets, out_lens }
    });
    ConfigCase {
        fields,
        ids,
        build,
        json: allow_json && r.chance(50),
        available: gen_budget(r),
        available_delta: if r.chance(70) {
            r.below(1 << 30) as i64
        } else {
            r.i64_edge().unsigned_abs().min(i64::MAX as u64) as i64
        },
        max_tokens: if r.chance(50) {
            r.below(1 << 22) as i64
        } else {
            r.i64_edge()
        },
        page: (r.chance(25)).then(|| {
            if r.chance(50) {
                r.pick(&[1, 2, 16, 64])
            } else {
                r.u64_edge()
            }
        }),
        many,
        mutation: r.next_u64(),
    }
}

/// A name to parse: every choice of the field table, aliases, other names, mangled.
pub fn gen_string(r: &mut Rng) -> String {
    const OTHER: [&str; 22] = [
        "bfloat16",
        "half",
        "float",
        "float16",
        "float32",
        "fp8",
        "float8_e4m3fn",
        "float8_e5m2",
        "fp4",
        "mtp",
        "next_n",
        "EAGLE3",
        "none",
        "",
        "Decode",
        "exact",
        "sglang",
        "given",
        "default",
        "hybrid_swa",
        "chunk_cap",
        "fp8_e4m3 ",
    ];
    let names = kvbudget_core::fields::SCENARIO_FIELDS
        .iter()
        .chain(DraftGeometry::FIELDS)
        .flat_map(|f| f.choices.iter())
        .count();
    let k = r.index(names + OTHER.len());
    let mut s = kvbudget_core::fields::SCENARIO_FIELDS
        .iter()
        .chain(DraftGeometry::FIELDS)
        .flat_map(|f| f.choices.iter().copied())
        .chain(OTHER)
        .nth(k)
        .unwrap_or_default()
        .to_string();
    match r.below(6) {
        0 => s = s.to_ascii_uppercase(),
        1 => s.push(char::from_u32(r.below(0x11_0000) as u32).unwrap_or('\u{fffd}')),
        2 => s.insert(0, ' '),
        3 => s = "\u{130}".repeat(r.index(4)) + &s, // 'İ' lowercases to two chars
        _ => {}
    }
    s
}
