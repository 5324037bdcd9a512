//! INV-7 (batch equals scalar, errors included) as a property test: random
//! scenarios, some fields as columns of random cells, against the scalar
//! path rebuilt row by row (`Scenario::set` of each decoded value, layer ids
//! `0..n_f` and `n_f..n_f+n_s`, `PoolConfigurator::create`,
//! `calculate_pool_sizes`); and the thread split gives the serial results.
use kvbudget_core::batch::{
    plan_many, Batch, Budgets, Buffers, Cells, Column, ColumnData, Threads,
};
use kvbudget_core::fields::{ScenarioField, Value};
use kvbudget_core::*;
use proptest::prelude::*;

/// Integer cells per field: mostly realistic, some invalid, some "None".
fn int_cell(name: &str) -> BoxedStrategy<i64> {
    let pick = |xs: &'static [i64]| prop::sample::select(xs).boxed();
    match name {
        "num_full_layers" => prop_oneof![0i64..8, 0i64..48, Just(-1)].boxed(),
        "num_swa_layers" => prop_oneof![Just(0i64), 0i64..40, Just(-2)].boxed(),
        "num_kv_heads" | "swa_num_kv_heads" => pick(&[1, 2, 8, 16, 0, -1]),
        "head_dim" | "v_head_dim" | "swa_head_dim" | "swa_v_head_dim" => {
            prop_oneof![pick(&[64, 128, 256, -1]), 1i64..600, Just(1 << 40)].boxed()
        }
        "sliding_window_size" => pick(&[-1, 0, 127, 1023, 4095, 1 << 50]),
        "kv_lora_rank" | "swa_kv_lora_rank" => pick(&[-1, -1, -1, 512, 0]),
        "qk_rope_head_dim" | "swa_qk_rope_head_dim" => pick(&[-1, 64, 0]),
        "index_head_dim" => pick(&[-1, -1, 128, 64, 0]),
        "index_kpool" => pick(&[1, 1, 2, 4, 0]),
        "index_shared_layers" => pick(&[0, 0, 1, 3, -1]),
        "page_size" => pick(&[1, 16, 64, 3, 0]),
        "tp_size" => pick(&[1, 2, 4, 8, 3]),
        "dcp_size" => pick(&[1, 1, 2, 3]),
        "attn_dp_size" => pick(&[1, 2, 4, 0]),
        "max_running_requests" => pick(&[-1, 1, 64, 256, 0]),
        "chunked_prefill_size" => pick(&[-1, 512, 8192, 0]),
        "model_context_len" => pick(&[-1, 4096, 131_072, 0]),
        "disaggregation_decode_extra_slots" => pick(&[0, 2, 8, -1]),
        "swa_eviction_interval" => pick(&[128, 0, -5, 4, i64::MIN]),
        "draft_num_layers" => pick(&[0, 1, 2, 3, 1 << 30]),
        "banded_draft_layers" | "draft_swa_num_layers" => pick(&[0, 0, 1, 5]),
        "num_steps" | "eagle_topk" | "num_draft_tokens" | "max_num_draft_tokens" => {
            pick(&[-1, 0, 1, 3, 4])
        }
        "dflash_draft_cell_size_per_token" => pick(&[-1, 4096, 0]),
        "fused_full_entry_bytes" | "fused_swa_entry_bytes" => pick(&[-1, -1, 0, 4096, 1 << 20]),
        other => panic!("no cell strategy for {other}"),
    }
}

fn cells(field: ScenarioField, n: usize) -> BoxedStrategy<Cells> {
    let info = field.info();
    match info.cell_dtype {
        // int64 cells, or the same cells in int32 (saturated), which the
        // kernel widens as it reads them.
        "int64" => prop_oneof![
            prop::collection::vec(int_cell(info.name), n).prop_map(Cells::I64),
            prop::collection::vec(int_cell(info.name), n).prop_map(|v| Cells::I32(
                v.into_iter()
                    .map(|x| x.clamp(i32::MIN.into(), i32::MAX.into()) as i32)
                    .collect()
            )),
        ]
        .boxed(),
        "float64" => prop::collection::vec(
            prop_oneof![0.01f64..2.0, Just(0.8), Just(0.0), Just(f64::NAN)],
            n,
        )
        .prop_map(Cells::F64)
        .boxed(),
        "bool" => prop::collection::vec(any::<bool>(), n)
            .prop_map(Cells::Bool)
            .boxed(),
        _ => prop::collection::vec(prop_oneof![0u8..10, Just(200)], n)
            .prop_map(Cells::U8)
            .boxed(),
    }
}

fn batch_case() -> impl Strategy<Value = (usize, Vec<(ScenarioField, Cells)>, Vec<i64>)> {
    let batch_fields: Vec<ScenarioField> = ScenarioField::ALL
        .iter()
        .copied()
        .filter(|f| f.info().batch)
        .collect();
    (1usize..40, prop::sample::subsequence(batch_fields, 1..12)).prop_flat_map(|(n, fields)| {
        let cols: Vec<_> = fields
            .into_iter()
            .map(|f| cells(f, n).prop_map(move |c| (f, c)))
            .collect();
        (
            Just(n),
            cols,
            prop::collection::vec(prop_oneof![-(1i64 << 30)..(1 << 40), Just(i64::MAX)], n),
        )
    })
}

fn base() -> Scenario {
    let mut sc = Scenario::default();
    for (name, v) in [
        ("num_full_layers", Value::Int(4)),
        ("num_swa_layers", Value::Int(12)),
        ("num_kv_heads", Value::Int(8)),
        ("head_dim", Value::Int(128)),
        ("sliding_window_size", Value::Int(1023)),
    ] {
        sc.set(name, v).unwrap();
    }
    sc
}

fn run(batch: &Batch<'_>, n: usize) -> Vec<(i64, i64, i64, u8)> {
    let mut out = Buffers::new(n);
    plan_many(batch, &mut out.views()).unwrap();
    (0..n).map(|i| out.row(i)).collect()
}

#[path = "common/scalar_row.rs"]
mod scalar_row;
use scalar_row::scalar;

proptest! {
    // Cases: proptest's default (256), or PROPTEST_CASES (CI sets 10,000).
    #![proptest_config(ProptestConfig::default())]

    /// INV-7: every batch row equals the scalar API on that row, errors included.
    #[test]
    fn inv7_batch_equals_scalar((n, cols, budgets) in batch_case()) {
        let columns: Vec<Column<'_>> = cols.iter().map(|(f, c)| Column::of(*f, c)).collect();
        let batch = Batch::serial(base(), &budgets, &columns);
        let got = run(&batch, n);
        for (i, row) in got.iter().enumerate() {
            prop_assert_eq!(*row, scalar(base(), &cols, i, budgets[i]), "row {}", i);
        }
    }
}

#[test]
fn threads_give_the_serial_results() {
    let n = 200_000;
    let heads: Vec<i64> = (0..n).map(|i| [1, 2, 8, 16, 0][i % 5]).collect();
    let pages: Vec<i64> = (0..n).map(|i| [1, 16, 64, 3][i % 4]).collect();
    let ratios: Vec<f64> = (0..n).map(|i| 0.05 + (i % 97) as f64 / 50.0).collect();
    let budgets: Vec<i64> = (0..n).map(|i| (i as i64 % 1000 - 10) << 24).collect();
    let field = |s| ScenarioField::from_name(s).unwrap();
    let columns = [
        Column {
            field: field("num_kv_heads"),
            data: ColumnData::I64(&heads),
        },
        Column {
            field: field("page_size"),
            data: ColumnData::I64(&pages),
        },
        Column {
            field: field("swa_full_tokens_ratio"),
            data: ColumnData::F64(&ratios),
        },
    ];
    let batch = |threads| Batch {
        base: base(),
        base_status: 0,
        available_bytes: Budgets::Array(&budgets),
        columns: &columns,
        threads,
    };
    let serial = run(&batch(Threads::Fixed(1)), n);
    assert!(serial.iter().any(|r| r.3 == 0) && serial.iter().any(|r| r.3 != 0));
    for t in [
        Threads::Fixed(2),
        Threads::Fixed(3),
        Threads::Fixed(7),
        Threads::Auto,
    ] {
        assert_eq!(run(&batch(t), n), serial, "{t:?}");
    }
    assert_eq!(Threads::Auto.for_rows(10), 1);
    assert_eq!(Threads::Fixed(4).for_rows(10), 1);
    assert_eq!(Threads::Fixed(4).for_rows(n), 4);
}

/// int32 cells of an int64 field plan as the same values in int64 do, on the
/// fast path and on the general one (a pinned field as a column), across
/// threads; int32 cells of any other field are an error of the call.
#[test]
fn int32_cells_stand_for_int64_ones() {
    let n = 70_000; // above PARALLEL_ROWS / 2: two threads share it
    let heads: Vec<i64> = (0..n).map(|i| [1, 2, 8, 16, 0, -1][i % 6]).collect();
    let windows: Vec<i64> = (0..n).map(|i| [-1, 127, 4096, 1 << 40][i % 4]).collect();
    let dcp: Vec<i64> = (0..n).map(|i| [1, 2][i % 2]).collect();
    let budgets: Vec<i64> = (0..n).map(|i| (i as i64 % 1000 - 10) << 24).collect();
    let narrow = |v: &[i64]| -> Vec<i32> {
        v.iter()
            .map(|x| i32::try_from(*x).unwrap_or(i32::MAX))
            .collect()
    };
    let (heads32, windows32, dcp32) = (narrow(&heads), narrow(&windows), narrow(&dcp));
    // The int64 twin of the int32 windows (the large window saturated alike).
    let windows_sat: Vec<i64> = windows32.iter().map(|x| i64::from(*x)).collect();
    let field = |s: &str| ScenarioField::from_name(s).unwrap();
    let plan = |cols: &[(&str, ColumnData<'_>)], threads| {
        let columns: Vec<Column<'_>> = cols
            .iter()
            .map(|(name, data)| Column {
                field: field(name),
                data: *data,
            })
            .collect();
        let batch = Batch {
            base: base(),
            base_status: 0,
            available_bytes: Budgets::Array(&budgets),
            columns: &columns,
            threads,
        };
        run(&batch, n)
    };
    for with_dcp in [false, true] {
        let mut wide = vec![
            ("num_kv_heads", ColumnData::I64(&heads)),
            ("sliding_window_size", ColumnData::I64(&windows_sat)),
        ];
        let mut thin = vec![
            ("num_kv_heads", ColumnData::I32(&heads32)),
            ("sliding_window_size", ColumnData::I32(&windows32)),
        ];
        if with_dcp {
            wide.push(("dcp_size", ColumnData::I64(&dcp)));
            thin.push(("dcp_size", ColumnData::I32(&dcp32)));
        }
        let want = plan(&wide, Threads::Fixed(1));
        assert!(want.iter().any(|r| r.3 == 0) && want.iter().any(|r| r.3 != 0));
        assert_eq!(
            plan(&thin, Threads::Fixed(1)),
            want,
            "dcp column: {with_dcp}"
        );
        assert_eq!(
            plan(&thin, Threads::Fixed(2)),
            want,
            "dcp column: {with_dcp}"
        );
    }
    let ratios = vec![1i32; n];
    let columns = [Column {
        field: field("swa_full_tokens_ratio"),
        data: ColumnData::I32(&ratios),
    }];
    let batch = Batch {
        base: base(),
        base_status: 0,
        available_bytes: Budgets::Array(&budgets),
        columns: &columns,
        threads: Threads::Fixed(1),
    };
    let err = plan_many(&batch, &mut Buffers::new(n).views()).unwrap_err();
    assert!(
        err.message()
            .contains("swa_full_tokens_ratio must be float64, got int32"),
        "{err}"
    );
}
