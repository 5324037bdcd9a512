//! kvbudget's plan of a pure state model (Mamba-1, Falcon-Mamba, Mamba-2: SGLang 0.5.23's
//! `PURE_SSM_ARCHITECTURES`), or of a pipeline stage that holds state layers and no attention
//! layer.
//!
//! SGLang sizes the state pool first (`_handle_max_mamba_cache`, the same budget as a hybrid
//! model's, [`crate::sizing::state::state_budget`]), then builds its KV pool over the stage's
//! attention layers: none. `DefaultPoolConfigurator`'s cell size is then 0 bytes per token and
//! `calculate_pool_sizes` answers `_zero_kv_max_tokens` whatever the budget: `--max-total-tokens`,
//! else the model's context length (`int64` max on a stage whose model has attention layers on
//! another stage), floored to a page. That count is a label: the pool holds no layer and no byte.
//!
//! The plan lists the state pool alone ([`super::state::state_pool`], laid out as SGLang's
//! `MambaPool` allocates it); `config.max_total_num_tokens` is the label. Both fits take SGLang's
//! state slots: `Fit::Exact` checks that the pool fits the budget, `Fit::Sglang` takes SGLang's
//! pool as it is.

use super::state::state_pool;
use super::{Fit, PoolPlan};
use crate::arith::to_i64;
use crate::error::{PlanError, Result};
use crate::fields::MemoryPoolConfig;
use crate::serving::ServingConfig;
use crate::sizing::state::{state_budget, StateBudget};
use crate::sizing::ConfiguratorKind;
use crate::spec::SpeculativeConfig;
use crate::state::StateConfig;

const GIB: f64 = (1u64 << 30) as f64;

/// The plan of a stage without attention layers (see the module doc).
///
/// `zero_kv_tokens` is SGLang's label for the empty KV pool before page alignment, tokens:
/// `--max-total-tokens`, else the model's context length.
///
/// Errors, in SGLang's order: the unified-memory launch check (FP4), the state budget's own
/// ([`state_budget`]), `--enable-unified-memory` on a target (its unified pool needs a
/// full-attention layer: "layer_num must be positive"), a speculative draft (not modelled), a
/// state cache too small to serve a request, no budget left after the state pool (SGLang's
/// "Loaded weights leave no GPU memory", both fits), and (`Fit::Exact`) a state pool above the
/// budget.
pub fn plan_state_only(
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    state: &StateConfig,
    available_bytes: i64,
    fit: Fit,
    zero_kv_tokens: u64,
) -> Result<(PoolPlan, StateBudget)> {
    let state = state.resolved()?;
    if available_bytes.unsigned_abs() > 1 << 53 {
        return Err(PlanError::overflow("available_bytes"));
    }
    if fit == Fit::Given {
        return Err(PlanError::invalid(
            "plan_state_only takes fit \"exact\" or \"sglang\"",
        ));
    }
    super::unified_launch::check_unified_launch(serving)?;
    let budget = state_budget(&state, serving, spec, available_bytes as f64 / GIB)?;
    if serving.enable_unified_memory && !serving.is_draft_worker {
        return Err(PlanError::invalid("layer_num must be positive; got 0"));
    }
    if spec.algorithm.is_speculative() {
        return Err(PlanError::invalid(
            "kvbudget does not plan a speculative draft beside a model without attention layers \
             (SGLang's draft worker sizes its own pools against the target's zero-KV count)",
        ));
    }
    let pool = state_pool(&state, serving, spec, budget.max_mamba_cache_size)?;
    // `_profile_available_bytes`: the rest after the state pool must be positive, KV layers or not.
    if budget.rest_gib <= 0.0 {
        return Err(PlanError::not_enough_memory(format!(
            "Loaded weights leave no GPU memory for the KV cache: the state pool ({} slots, {} bytes) \
             leaves {} GiB of the {available_bytes} bytes (SGLang raises where that is not positive)",
            budget.max_mamba_cache_size, pool.nbytes, budget.rest_gib
        )));
    }
    if fit == Fit::Exact && i128::from(pool.nbytes) > i128::from(available_bytes) {
        return Err(PlanError::not_enough_memory(format!(
            "Not enough memory: the state pool ({} slots) takes {} bytes, above the {available_bytes} available",
            budget.max_mamba_cache_size, pool.nbytes
        )));
    }
    let page = serving.page_size.max(1);
    let label = to_i64::<PlanError>(zero_kv_tokens / page * page, "the zero-KV token count")?;
    let total_bytes = pool.nbytes;
    let plan = PoolPlan {
        fit,
        configurator: ConfiguratorKind::Default,
        available_bytes,
        page_size: page,
        config: MemoryPoolConfig {
            max_total_num_tokens: label,
            full_max_total_num_tokens: None,
            swa_max_total_num_tokens: None,
            unified_memory_pool_bytes: None,
        },
        pools: vec![pool],
        total_bytes,
    };
    Ok((plan, budget))
}
