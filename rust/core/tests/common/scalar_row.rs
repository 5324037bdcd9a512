//! The scalar API on one batch row: the oracle the batch tests hold every
//! row to. Included (`#[path]`) by `tests/batch.rs` and by the fast path's
//! unit tests (`src/batch/fast/tests.rs`), each of which imports the names
//! it uses.

use super::{
    AttentionShape, Cells, ModelGeometry, PlanError, PoolConfigurator, Scenario, ScenarioField,
};

/// The scalar API on row `i`: each cell's value set by name, the layer ids
/// built, `PoolConfigurator::create` and `calculate_pool_sizes`.
pub fn scalar(
    mut sc: Scenario,
    cols: &[(ScenarioField, Cells)],
    i: usize,
    a: i64,
) -> (i64, i64, i64, u8) {
    let err = |e: PlanError| (0, 0, 0, e.code.status());
    for (f, c) in cols {
        if let Err(e) = sc.set(f.info().name, c.scalar_value(*f, i)) {
            return err(e);
        }
    }
    let (n_f, n_s) = (sc.shape.num_full_layers, sc.shape.num_swa_layers);
    // The shape's own checks first (as `ModelGeometry::new` runs them), so
    // that no layer-id list is built for a layer count the rules refuse.
    if let Err(e) = sc.shape.resolved() {
        return err(e);
    }
    let r = ModelGeometry::new(
        (0..n_f).collect(),
        (n_f..n_f + n_s).collect(),
        AttentionShape {
            num_full_layers: 0,
            num_swa_layers: 0,
            ..sc.shape
        },
    )
    .and_then(|m| Ok((m, sc.serving.resolved()?, sc.spec.resolved()?)))
    .and_then(|(m, s, sp)| PoolConfigurator::create(m, s, sp))
    .and_then(|c| c.calculate_pool_sizes(a, None));
    match r {
        Ok(c) => (
            c.max_total_num_tokens,
            c.full_max_total_num_tokens.unwrap_or(-1),
            c.swa_max_total_num_tokens.unwrap_or(-1),
            0,
        ),
        Err(e) => err(e),
    }
}
