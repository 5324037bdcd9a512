//! Batch rows of a hybrid-state model: SGLang's state budget on each row's
//! bytes first, then its KV pool sizes on the rest, exactly as the scalar
//! [`PoolConfigurator::calculate_pool_sizes_with_state`] computes them.
//!
//! A [`StateBatch`] is a base [`StateConfig`] and the state fields that vary
//! (columns named by [`StateConfig`]'s field table, cells in the scalar API's
//! batch encoding). Every row of the batch then has that state; its scenario
//! columns are applied as [`super::kernel`] applies them, its state cells through
//! the scalar setters (so each is checked as the constructor checks it), and
//! the row is solved by the same functions as the scalar call (INV-7). These
//! rows take this general path, never the vector one, on the calling thread.

use super::{Batch, BatchOutputs, ColumnData, Scenario, BLOCK, STATUS_OK};
use crate::arith::py_int;
use crate::configurator::PoolConfigurator;
use crate::error::{PlanError, Result};
use crate::fields::{FieldInfo, MemoryPoolConfig, Named, PyRepr, Value, ValueType};
use crate::sizing::state::{state_budget, StateBudget};
use crate::sizing::{kind_index, ConfiguratorKind};
use crate::state::StateConfig;

const GIB: f64 = (1u64 << 30) as f64;

/// One varying state field: its row of [`StateConfig`]'s field table and its cells.
#[derive(Debug, Clone, Copy)]
pub struct StateColumn<'a> {
    /// The field (a row of `<StateConfig as ValueType>::FIELDS`).
    pub field: &'static FieldInfo,
    /// Its cells, in the field's batch encoding.
    pub data: ColumnData<'a>,
}

impl<'a> StateColumn<'a> {
    /// The column of the [`StateConfig`] field called `name`.
    pub fn new(name: &str, data: ColumnData<'a>) -> Result<Self> {
        let field = <StateConfig as ValueType>::FIELDS
            .iter()
            .find(|f| f.name == name && f.batch)
            .ok_or_else(|| {
                PlanError::invalid(format!("{name} is not a StateConfig batch column"))
            })?;
        let ok = field.cell_dtype == data.type_name()
            || (field.cell_dtype == "int64" && matches!(data, ColumnData::I32(_)));
        if !ok {
            return Err(PlanError::invalid(format!(
                "{name}: a column of {} cells, got {}",
                field.cell_dtype,
                data.type_name()
            )));
        }
        Ok(Self { field, data })
    }
}

/// The state every row of a batch has: a base and the fields that vary.
#[derive(Debug, Clone, Copy)]
pub struct StateBatch<'a> {
    /// The state every row starts from (its scalar inputs applied).
    pub base: StateConfig,
    /// The status of every row when a scalar state input was bad on its own (0: none).
    pub base_status: u8,
    /// The columns that vary, at most one per field.
    pub columns: &'a [StateColumn<'a>],
}

/// The value the scalar API reads for cell `i` of a column of `field` (the
/// batch encoding decoded: a negative integer of an optional integer field is
/// None, a code is its choice's name; a code past the choices is a name no
/// choice has, so setting it fails as the scalar call would).
pub fn cell_value(field: &FieldInfo, data: ColumnData<'_>, i: usize) -> Value<'static> {
    let int = |v: i64| {
        if v < 0 && field.py == PyRepr::OptInt {
            Value::None
        } else {
            Value::Int(i128::from(v))
        }
    };
    match data {
        ColumnData::I64(v) => int(v[i]),
        ColumnData::I32(v) => int(i64::from(v[i])),
        ColumnData::F64(v) => Value::Float(v[i]),
        ColumnData::Bool(v) => Value::Bool(v[i]),
        ColumnData::U8(v) => Value::Str(
            field
                .choices
                .get(usize::from(v[i]))
                .copied()
                .unwrap_or("<no such code>"),
        ),
    }
}

/// One row: the scenario's rules, SGLang's state budget on `available_bytes`
/// (as GiB), and the configurator `kind`'s pool sizes on the KV budget it leaves.
pub(super) fn solve_state_row(
    kind: ConfiguratorKind,
    row: &Scenario,
    state: &StateConfig,
    available_bytes: i64,
) -> Result<(MemoryPoolConfig, StateBudget)> {
    row.check_rules::<PlanError>()?;
    // Under unified memory a speculative draft fuses into the buffer's entries: the scalar
    // configurator prices it (or refuses it) as SGLang does.
    if row.serving.enable_unified_memory && row.spec.algorithm.is_speculative() {
        return PoolConfigurator::from_scenario(Some(kind), row)?
            .calculate_pool_sizes_with_state(available_bytes, state);
    }
    let (kv, budget) = kv_after_state(row, state, available_bytes)?;
    let r = super::kernel::solve_row(kind, row, kv).map_err(|code| PlanError::new(code, ""))?;
    Ok((r, budget))
}

/// SGLang's state budget for `state` on `available_bytes` (as GiB, the way
/// SGLang carries it) and the KV budget it leaves, bytes.
pub(crate) fn kv_after_state(
    sc: &Scenario,
    state: &StateConfig,
    available_bytes: i64,
) -> Result<(i64, StateBudget)> {
    let state = state.resolved()?;
    if available_bytes.unsigned_abs() > 1 << 53 {
        return Err(PlanError::overflow("available_bytes"));
    }
    let budget = state_budget(&state, &sc.serving, &sc.spec, available_bytes as f64 / GIB)?;
    Ok((
        py_int::<PlanError>(budget.rest_gib * GIB, "the KV budget")?,
        budget,
    ))
}

impl PoolConfigurator {
    /// `calculate_pool_sizes` of a hybrid-state model: SGLang's state budget on
    /// `available_bytes` takes the state slots out first
    /// ([`crate::sizing::state::state_budget`]), then this configurator sizes the
    /// KV pool on the rest (`int(rest_gib * 2**30)` bytes), serving page size. Under unified
    /// memory an EAGLE-family draft that fuses is priced by its fused entry, as SGLang does.
    pub fn calculate_pool_sizes_with_state(
        &self,
        available_bytes: i64,
        state: &StateConfig,
    ) -> Result<(MemoryPoolConfig, StateBudget)> {
        let (kv, budget) = kv_after_state(self.scenario(), state, available_bytes)?;
        // Under unified memory a fused draft's entry prices the KV pool (SGLang's Default configurator).
        if let Some(fused) = self.unified_draft_pricing()? {
            return Ok((fused.calculate_pool_sizes(kv, None)?, budget));
        }
        Ok((self.calculate_pool_sizes(kv, None)?, budget))
    }
}

/// Plans every row of `batch` with the state `state` (see the module doc), into
/// `out` and `slots` (each row's `max_mamba_cache_size`, -1 where the row failed).
/// Fails only when the columns are malformed or an output has the wrong length.
pub fn plan_many_with_state(
    batch: &Batch<'_>,
    state: &StateBatch<'_>,
    out: &mut BatchOutputs<'_>,
    slots: &mut [i64],
) -> Result<()> {
    let scenario_rows = batch.rows()?;
    let arrays =
        !batch.columns.is_empty() || matches!(batch.available_bytes, super::Budgets::Array(_));
    let n = match state.columns.first() {
        Some(c) if !arrays => c.data.len(),
        _ => scenario_rows,
    };
    for (k, c) in state.columns.iter().enumerate() {
        if c.data.len() != n
            || state.columns[..k]
                .iter()
                .any(|o| o.field.name == c.field.name)
        {
            return Err(PlanError::invalid(format!(
                "batch column {} must be given once, with {n} rows",
                c.field.name
            )));
        }
    }
    out.check_rows(n)?;
    if slots.len() != n {
        return Err(PlanError::invalid(format!(
            "batch outputs must have {n} rows, got {}",
            slots.len()
        )));
    }
    super::kernel::check_columns(batch)?;
    let base_status = match super::kernel::base_status(batch) {
        STATUS_OK => state.base_status,
        st => st,
    };
    let mut rows = vec![batch.base; BLOCK.min(n)]; // a small batch copies only its rows
    let mut wide = [0i64; BLOCK];
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let m = end - start;
        super::kernel::apply_block(
            batch,
            &mut rows[..m],
            &mut out.status[start..end],
            base_status,
            start,
            &mut wide,
        );
        for (j, row) in rows[..m].iter().enumerate() {
            let i = start + j;
            let result = if out.status[i] == STATUS_OK {
                let mut st = state.base;
                state
                    .columns
                    .iter()
                    .try_for_each(|c| {
                        st.set(c.field.name, cell_value(c.field, c.data, i))
                            .map(|_| ())
                    })
                    .and_then(|()| {
                        let kind =
                            <ConfiguratorKind as Named>::ALL[kind_index(&row.shape, &row.serving)];
                        solve_state_row(kind, row, &st, batch.available_bytes.get(i))
                    })
                    .map_err(|e| e.code.status())
            } else {
                Err(out.status[i])
            };
            match result {
                Ok((config, budget)) => {
                    out.write_ok(i, &config);
                    slots[i] = budget.max_mamba_cache_size as i64;
                }
                Err(status) => {
                    out.write_err(i, status);
                    slots[i] = -1;
                }
            }
        }
        start = end;
    }
    Ok(())
}
