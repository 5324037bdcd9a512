//! The batch kernel on any base scenario and columns of any cells: a status
//! per row, never a panic, and every row equal to the scalar path's answer.
#![no_main]

mod common;

use common::{scenario, Bytes};
use kvbudget_core::batch::{plan_many, Batch, Buffers, Cells, Column};
use kvbudget_core::fields::ScenarioField;
use kvbudget_core::{PlanError, PoolConfigurator};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let base = scenario(&mut b);
    let n = 1 + usize::from(b.u8() % 16);
    let fields: Vec<ScenarioField> = ScenarioField::ALL
        .iter()
        .copied()
        .filter(|f| f.info().batch)
        .collect();
    let mut owned: Vec<(ScenarioField, Cells)> = Vec::new();
    for _ in 0..b.u8() % 4 {
        let f = fields[usize::from(b.u8()) % fields.len()];
        let cells = match f.info().cell_dtype {
            // int64 cells, or int32 ones (the kernel widens them).
            "int64" if b.u8() % 4 == 0 => Cells::I32((0..n).map(|_| b.int() as i32).collect()),
            "int64" => Cells::I64((0..n).map(|_| b.int() as i64).collect()),
            "float64" => Cells::F64((0..n).map(|_| f64::from(b.u8()) / 100.0).collect()),
            "bool" => Cells::Bool((0..n).map(|_| b.u8() % 2 == 0).collect()),
            _ => Cells::U8((0..n).map(|_| b.u8() % 12).collect()),
        };
        if owned.iter().all(|(g, _)| *g != f) {
            owned.push((f, cells));
        }
    }
    let budgets: Vec<i64> = (0..n).map(|_| b.u64() as i64).collect();
    let columns: Vec<Column<'_>> = owned.iter().map(|(f, c)| Column::of(*f, c)).collect();
    let batch = Batch::serial(base, &budgets, &columns);
    let mut out = Buffers::new(n);
    if plan_many(&batch, &mut out.views()).is_err() {
        return;
    }
    // Row 0 through the scalar path: the same numbers or the same error code.
    let mut sc = base;
    let mut err: Option<PlanError> = None;
    for (f, c) in &owned {
        let v = c.scalar_value(*f, 0);
        if let Err(e) = sc.set(f.info().name, v) {
            err.get_or_insert(e);
        }
    }
    let scalar = match err {
        Some(e) => Err(e),
        None => sc
            .resolved()
            .and_then(|sc| PoolConfigurator::from_scenario(None, &sc))
            .and_then(|cfg| cfg.calculate_pool_sizes(budgets[0], None)),
    };
    let (t, f, s, status) = out.row(0);
    match scalar {
        Ok(c) => {
            assert_eq!(
                status, 0,
                "batch row 0 failed where the scalar path planned"
            );
            assert_eq!(t, c.max_total_num_tokens);
            assert_eq!(f, c.full_max_total_num_tokens.unwrap_or(-1));
            assert_eq!(s, c.swa_max_total_num_tokens.unwrap_or(-1));
        }
        Err(e) => assert_eq!(
            status,
            e.code.status(),
            "batch and scalar error codes differ"
        ),
    }
});
