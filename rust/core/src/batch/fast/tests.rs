//! The fast path against the scalar API, row by row, errors included: random
//! lean batches whose cells lie in and out of the fast domain (a proptest),
//! and rows at the domain's edges.

use super::cells::Sources;
use super::lanes::MODEL_DTYPE;
use super::{lane, plan_rows, simd, BLOCK, FAST};
use crate::batch::kernel::PINNED;
use crate::batch::{Batch, Budgets, Buffers, Cells, Column, Threads};
use crate::fields::{Named, ScenarioField, Value};
use crate::spec::SpecAlgorithm;
use crate::{AttentionShape, ModelGeometry, PlanError, PoolConfigurator, Scenario, ServingConfig};
use proptest::prelude::*;

type Out = (i64, i64, i64, u8);

/// The fast path's rows of a lean batch (asserting that it takes them), the
/// same at every SIMD level this CPU runs.
fn fast(base: &Scenario, cols: &[(ScenarioField, Cells)], budgets: &[i64]) -> Vec<Out> {
    let columns: Vec<Column<'_>> = cols.iter().map(|(f, c)| Column::of(*f, c)).collect();
    let batch = Batch::serial(*base, budgets, &columns);
    let n = budgets.len();
    let mut rows: Option<Vec<Out>> = None;
    for (name, level) in simd::levels() {
        let mut out = Buffers::new(n);
        simd::FORCED.with(|f| f.set(Some(level)));
        let took = plan_rows(&batch, n, &mut out.views());
        simd::FORCED.with(|f| f.set(None));
        assert!(took, "fast path refused");
        let got: Vec<Out> = (0..n).map(|i| out.row(i)).collect();
        match &rows {
            Some(best) => assert_eq!(&got, best, "{name} differs from the best level"),
            None => rows = Some(got),
        }
    }
    rows.expect("a level")
}

#[path = "../../../tests/common/scalar_row.rs"]
mod scalar_row;
use scalar_row::scalar;

fn base(n_swa: i128) -> Scenario {
    base_of(n_swa, false)
}

/// The base of the proptest's batches: Default (no SWA layer), HybridSwa,
/// or RequestCap (its inputs set).
fn base_of(n_swa: i128, cap: bool) -> Scenario {
    let mut sc = Scenario::default();
    if cap {
        sc.set("max_running_requests", Value::Int(64)).unwrap();
        sc.set("chunked_prefill_size", Value::Int(8192)).unwrap();
        sc.set("disable_radix_cache", Value::Bool(true)).unwrap();
    }
    for (name, v) in [
        ("num_full_layers", 4),
        ("num_swa_layers", n_swa),
        ("num_kv_heads", 8),
        ("head_dim", 128),
        ("sliding_window_size", 1023),
    ] {
        assert!(sc.set(name, Value::Int(v)).unwrap());
    }
    sc
}

fn check(base: &Scenario, cols: &[(ScenarioField, Cells)], budgets: &[i64]) {
    let got = fast(base, cols, budgets);
    for (i, row) in got.iter().enumerate() {
        assert_eq!(
            *row,
            scalar(*base, cols, i, budgets[i]),
            "row {i}: {cols:?}"
        );
    }
}

fn field(name: &str) -> ScenarioField {
    ScenarioField::from_name(name).expect(name)
}

/// The fast fields and the pinned ones are every field, each once; the
/// domain's model dtype is the default one.
#[test]
fn fast_and_pinned_fields_partition_the_scenario() {
    for f in ScenarioField::ALL {
        let n = usize::from(FAST.contains(f)) + usize::from(PINNED.contains(f));
        assert_eq!(n, 1, "{}", f.info().name);
    }
    assert_eq!(MODEL_DTYPE, ServingConfig::default().model_dtype);
}

/// A base value that is no valid cell is refused (the general loop plans it).
#[test]
fn base_values_round_trip_through_cells() {
    let batch = |base| Batch {
        base,
        base_status: 0,
        available_bytes: Budgets::Scalar(1 << 30),
        columns: &[],
        threads: Threads::Fixed(1),
    };
    assert!(Sources::new(&batch(base(12))).is_some());
    let mut bad = base(12);
    bad.serving.swa_full_tokens_ratio = f64::NAN;
    assert!(Sources::new(&batch(bad)).is_none());
}

/// Integer cells per fast field: mostly realistic values inside the fast
/// domain, else its edges (the last value inside, the first outside),
/// values far beyond them, invalid cells and "None".
fn int_cell(name: &str) -> BoxedStrategy<i64> {
    const COUNT: i64 = 1 << 16;
    const SPAN: i64 = 1 << 32;
    const SIZE: i64 = 1 << 20;
    let (inside, edges): (BoxedStrategy<i64>, &'static [i64]) = match name {
        "num_full_layers" => (
            (0i64..64).boxed(),
            &[4095, 4096, 4097, (1 << 20) + 1, -1, i64::MAX],
        ),
        "num_swa_layers" => (
            prop_oneof![Just(0i64), 0i64..48].boxed(),
            &[4000, 4096, i64::MAX, -1],
        ),
        "num_kv_heads" => (
            prop::sample::select(&[1i64, 2, 8, 16, 32, 3][..]).boxed(),
            &[4095, 4096, 4097, 1 << 30, 0, -1],
        ),
        "head_dim" => (
            prop::sample::select(&[64i64, 128, 256, 1, 80][..]).boxed(),
            &[16383, 16384, 16385, 1 << 40, i64::MAX, 0, -1],
        ),
        "sliding_window_size" => (
            prop::sample::select(&[-1i64, 0, 127, 1023, 4095][..]).boxed(),
            &[SPAN, SPAN + 1, 1 << 40, i64::MAX],
        ),
        "page_size" => (
            prop::sample::select(&[1i64, 16, 64, 3][..]).boxed(),
            &[SIZE, SIZE + 1, 1 << 40, i64::MAX, 0],
        ),
        "tp_size" => (
            prop::sample::select(&[1i64, 2, 4, 8, 3][..]).boxed(),
            &[SIZE, SIZE + 1, 1 << 40, 0],
        ),
        "max_running_requests" => (
            prop::sample::select(&[-1i64, 1, 64, 256][..]).boxed(),
            &[COUNT, COUNT + 1, 1 << 40, i64::MAX, 0],
        ),
        "chunked_prefill_size" => (
            prop::sample::select(&[-1i64, 512, 8192][..]).boxed(),
            &[SPAN, SPAN + 1, 1 << 62, 0],
        ),
        "swa_eviction_interval" => (
            prop::sample::select(&[128i64, 0, -5, 4][..]).boxed(),
            &[COUNT, COUNT + 1, 1 << 40, i64::MIN, i64::MAX],
        ),
        "draft_num_layers" => (
            prop::sample::select(&[0i64, 0, 1, 2, 3][..]).boxed(),
            &[1023, 1024, 1025, 1 << 20, -1],
        ),
        "num_steps" | "eagle_topk" | "num_draft_tokens" => (
            prop::sample::select(&[-1i64, 0, 1, 3, 4][..]).boxed(),
            &[COUNT, COUNT + 1, 1 << 40, i64::MAX],
        ),
        "dflash_draft_cell_size_per_token" => (
            prop::sample::select(&[-1i64, 0, 4096][..]).boxed(),
            &[1 << 40, (1 << 40) + 1, i64::MAX],
        ),
        other => panic!("no cell strategy for {other}"),
    };
    prop_oneof![6 => inside, 1 => prop::sample::select(edges)].boxed()
}

fn cells(field: ScenarioField, n: usize) -> BoxedStrategy<Cells> {
    let info = field.info();
    match info.cell_dtype {
        // int64 cells, or the same cells in int32 (saturated), which the kernel
        // widens block by block.
        "int64" => prop_oneof![
            3 => prop::collection::vec(int_cell(info.name), n).prop_map(Cells::I64),
            1 => prop::collection::vec(int_cell(info.name), n).prop_map(|v| Cells::I32(
                v.into_iter()
                    .map(|x| x.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
                    .collect()
            )),
        ]
        .boxed(),
        "float64" => prop::collection::vec(
            prop_oneof![
                4 => 0.01f64..2.0,
                1 => prop::sample::select(&[0.8, 1e-300, 1e300, 0.0, -1.0, f64::NAN, f64::INFINITY][..]),
            ],
            n,
        )
        .prop_map(Cells::F64)
        .boxed(),
        "bool" => prop::collection::vec(any::<bool>(), n)
            .prop_map(Cells::Bool)
            .boxed(),
        _ => prop::collection::vec(prop_oneof![8 => 0u8..10, 1 => Just(200)], n)
            .prop_map(Cells::U8)
            .boxed(),
    }
}

fn budget() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => (1i64 << 20)..(1 << 40),
        1 => -(1i64 << 30)..(1 << 16),
        1 => prop::sample::select(&[0, 1, i64::MAX, i64::MIN, 1 << 62][..]),
    ]
}

type Case = (u8, Vec<(ScenarioField, Cells)>, Vec<i64>);

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..300,
        0u8..3,
        prop::sample::subsequence(FAST.to_vec(), 1..=FAST.len()),
    )
        .prop_flat_map(|(n, kind, fields)| {
            let cols: Vec<_> = fields
                .into_iter()
                .map(|f| cells(f, n).prop_map(move |c| (f, c)))
                .collect();
            (Just(kind), cols, prop::collection::vec(budget(), n))
        })
}

fn case_base(kind: u8) -> Scenario {
    base_of(if kind == 0 { 0 } else { 12 }, kind == 2)
}

proptest! {
    // Cases: proptest's default (256), or PROPTEST_CASES (CI sets 10,000).
    #![proptest_config(ProptestConfig::default())]

    /// INV-7 on the fast path: every row of a lean batch (rows in and out of
    /// the domain, bad cells, every kind) equals the scalar API's, errors included.
    #[test]
    fn fast_path_equals_scalar((kind, cols, budgets) in case()) {
        let base = case_base(kind);
        let got = fast(&base, &cols, &budgets);
        for (i, row) in got.iter().enumerate() {
            prop_assert_eq!(*row, scalar(base, &cols, i, budgets[i]), "row {}", i);
        }
    }
}

/// One row of `cols` (single cells) at every budget, fast against scalar,
/// and whether the fast kernel itself (no exact path) solved it at `budgets[0]`.
fn edge(base: &Scenario, cells: &[(&str, Value<'_>)], budgets: &[i64]) -> bool {
    let cols: Vec<(ScenarioField, Cells)> = cells
        .iter()
        .map(|(name, v)| {
            let f = field(name);
            let c = match *v {
                Value::Int(i) => Cells::I64(vec![i as i64; budgets.len()]),
                Value::Float(x) => Cells::F64(vec![x; budgets.len()]),
                Value::Bool(b) => Cells::Bool(vec![b; budgets.len()]),
                Value::Str(s) => Cells::U8(vec![f.code(s).unwrap(); budgets.len()]),
                _ => unreachable!(),
            };
            (f, c)
        })
        .collect();
    check(base, &cols, budgets);
    // The fast kernel alone on row 0.
    let mut sc = *base;
    for (name, v) in cells {
        sc.set(name, *v).unwrap();
    }
    let batch = Batch {
        base: sc,
        base_status: 0,
        available_bytes: Budgets::Scalar(budgets[0]),
        columns: &[],
        threads: Threads::Fixed(1),
    };
    let mut sources = Sources::new(&batch).unwrap();
    let cells = sources.block(0);
    assert!(cells.row(0).1);
    !lane(&cells, 0, budgets[0]).1
}

const GIB: i64 = 1 << 30;

/// The domain's edges: the last value inside is solved by the fast kernel,
/// the first outside goes to the exact path; both equal the scalar API.
#[test]
fn domain_edges() {
    let budgets = [1 << 50, 40 * GIB, 0, -1, 1, i64::MAX, i64::MIN];
    for hybrid in [0, 12] {
        let b = base(hybrid);
        for (name, inside, outside) in [
            ("num_full_layers", 4096 - hybrid, 4097 - hybrid),
            ("num_kv_heads", 4096, 4097),
            ("head_dim", 16384, 16385),
            ("draft_num_layers", 1024, 1025),
            ("page_size", 1 << 20, (1 << 20) + 1),
            ("tp_size", 1 << 20, (1 << 20) + 1),
            ("max_running_requests", 1 << 16, (1 << 16) + 1),
            ("swa_eviction_interval", 1 << 16, (1 << 16) + 1),
            ("num_steps", 1 << 16, (1 << 16) + 1),
            ("eagle_topk", 1 << 16, (1 << 16) + 1),
            ("num_draft_tokens", 1 << 16, (1 << 16) + 1),
            ("sliding_window_size", 1 << 32, (1 << 32) + 1),
            ("chunked_prefill_size", 1 << 32, (1 << 32) + 1),
        ] {
            let alg = ("algorithm", Value::Str("eagle"));
            let at = |v| [(name, Value::Int(v)), alg];
            assert!(edge(&b, &at(inside), &budgets), "{name}={inside}");
            assert!(!edge(&b, &at(outside), &budgets), "{name}={outside}");
        }
        // The budget: below 2^52 bytes the lanes solve it, from 2^52 the exact path.
        assert!(edge(&b, &[], &[(1 << 52) - 1, 1 << 52]));
        assert!(!edge(&b, &[], &[1 << 52, (1 << 52) - 1]));
        let dflash = |c| {
            [
                ("algorithm", Value::Str("dflash")),
                ("draft_num_layers", Value::Int(2)),
                ("dflash_draft_cell_size_per_token", Value::Int(c)),
            ]
        };
        let big = [1 << 51, 1 << 62, 40 * GIB, 0, -1];
        assert!(edge(&b, &dflash(1 << 40), &big));
        assert!(!edge(&b, &dflash((1 << 40) + 1), &big));
        // Overflow edges beyond the domain: the exact path's errors.
        edge(&b, &[("head_dim", Value::Int(1 << 40))], &budgets);
        edge(&b, &[("head_dim", Value::Int(i64::MAX.into()))], &budgets);
        edge(&b, &[("page_size", Value::Int(1 << 62))], &budgets);
        edge(
            &b,
            &[("sliding_window_size", Value::Int(1 << 62))],
            &budgets,
        );
    }
}

/// Zero and negative budgets, budgets one byte either side of a whole page
/// of tokens, pages that are no power of two, the smallest budgets that plan.
#[test]
fn budgets_at_page_and_cell_edges() {
    for (hybrid, page) in [
        (0, 1i64),
        (0, 64),
        (0, 3),
        (12, 1),
        (12, 64),
        (12, 48),
        (12, 3),
    ] {
        let b = base(hybrid);
        let cells = [("page_size", Value::Int(page.into()))];
        // The cell size: the budget of one token.
        let mut sc = b;
        sc.set("page_size", Value::Int(page.into())).unwrap();
        let cell = match scalar(sc, &[], 0, 1 << 40) {
            (t, ..) if t > 0 => (1i64 << 40) / t,
            other => panic!("{other:?}"),
        };
        let mut budgets = vec![0, -1, -(1 << 40), i64::MIN, i64::MAX, 1];
        for k in [1i64, 2, 63, 64, 65, 1000, 1 << 20] {
            for d in [-1, 0, 1] {
                budgets.push(k * page * cell + d);
                budgets.push(k * cell + d);
            }
        }
        edge(&b, &cells, &budgets);
    }
}

/// All-SWA rows (no full layer), the request cap (PD off, overlap on), the
/// draft terms of every algorithm family, every dtype.
#[test]
fn kinds_algorithms_and_dtypes() {
    let budgets = [GIB, 40 * GIB, 3 * GIB / 2];
    for &alg in <SpecAlgorithm as Named>::NAMES {
        for dtype in [
            "bf16",
            "fp16",
            "fp32",
            "fp8_e4m3",
            "mxfp8",
            "auto",
            "nvfp4",
            "fp4_mx_block16",
        ] {
            for (n_f, n_s) in [(4, 0), (4, 12), (0, 12)] {
                for cap in [false, true] {
                    let mut cells = vec![
                        ("algorithm", Value::Str(alg)),
                        ("kv_cache_dtype", Value::Str(dtype)),
                        ("num_full_layers", Value::Int(n_f)),
                        ("num_swa_layers", Value::Int(n_s)),
                        ("draft_num_layers", Value::Int(1)),
                        ("num_draft_tokens", Value::Int(4)),
                        ("eagle_topk", Value::Int(4)),
                        ("num_steps", Value::Int(3)),
                        ("dflash_draft_cell_size_per_token", Value::Int(4096)),
                        ("head_dim", Value::Int(80)),
                    ];
                    if cap {
                        cells.extend([
                            ("max_running_requests", Value::Int(64)),
                            ("chunked_prefill_size", Value::Int(8192)),
                            ("disable_radix_cache", Value::Bool(true)),
                            ("page_size", Value::Int(16)),
                        ]);
                    }
                    edge(&base(12), &cells, &budgets);
                }
            }
        }
    }
}

/// Which rows the fast kernel solves itself (the others take the exact path).
fn solved(base: &Scenario, cols: &[(ScenarioField, Cells)], budgets: &[i64]) -> Vec<bool> {
    let columns: Vec<Column<'_>> = cols.iter().map(|(f, c)| Column::of(*f, c)).collect();
    let batch = Batch::serial(*base, budgets, &columns);
    let mut sources = Sources::new(&batch).unwrap();
    (0..budgets.len())
        .map(|i| !lane(&sources.block(i / BLOCK * BLOCK), i % BLOCK, budgets[i]).1)
        .collect()
}

/// The proptest's batches hold many rows of both paths (about one in five
/// rows is fast), of every kind on the fast one, and fast rows read from
/// int32 columns.
#[test]
fn the_proptest_exercises_both_paths() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut fast_rows, mut exact_rows, mut kinds, mut narrow) = (0, 0, [0usize; 3], 0);
    for _ in 0..200 {
        let (kind, cols, budgets) = case().new_tree(&mut runner).unwrap().current();
        let base = case_base(kind);
        let has_i32 = cols.iter().any(|(_, c)| matches!(c, Cells::I32(_)));
        for (i, s) in solved(&base, &cols, &budgets).into_iter().enumerate() {
            if s {
                fast_rows += 1;
                narrow += usize::from(has_i32);
                let mut sc = base;
                for (f, c) in &cols {
                    sc.set(f.info().name, c.scalar_value(*f, i)).unwrap();
                }
                kinds[crate::sizing::kind_index(&sc.shape, &sc.serving)] += 1;
            } else {
                exact_rows += 1;
            }
        }
    }
    let all = fast_rows + exact_rows;
    assert!(
        fast_rows * 6 > all && exact_rows * 6 > all,
        "{fast_rows} fast, {exact_rows} exact"
    );
    assert!(kinds.iter().all(|k| *k > 20), "{kinds:?}");
    assert!(
        narrow * 4 > fast_rows,
        "{narrow} of {fast_rows} fast rows with int32 columns"
    );
}
