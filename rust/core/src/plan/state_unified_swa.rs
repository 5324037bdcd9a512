//! kvbudget's plan of a model that is both hybrid-state and hybrid-SWA (Inkling-class) under
//! SGLang 0.5.23's unified memory: the tri-pool (`KVCacheConfigurator._init_unified_mamba_swa_pools`,
//! `mem_cache/unified_memory_pool.py`'s `init_unified_mamba_swa_pools`). One `uint8` buffer holds
//! the state slots (growing up from its low end), the sliding-window layers' KV tokens (floating
//! between) and the full-attention layers' (growing down from its high end).
//!
//! SGLang sizes the token side with its hybrid-SWA configurator (`HybridSWAPoolConfigurator`'s
//! unified branch: the full and SWA labels) on the KV budget left after the state charge, and
//! the buffer holds `X + S * E_m` bytes, `X` that budget floored to 4096 bytes, `S` the state
//! slots and `E_m` one slot over the stage's state layers, as in the two-pool buffer
//! (`state_unified.rs`). A full-side token takes `E_f` bytes, the stage's full layers' K and V
//! rows rounded up to 32 bytes (the full KV heads split over TP and DCP); an SWA-side token
//! `E_s`, the SWA layers' rows at the SWA geometry (`swa_num_kv_heads` over TP, the SWA head
//! dims), rounded likewise. The plan lists one [`super::PoolName::Unified`] pool of the buffer,
//! `tokens` the full label, its config's `unified_memory_pool_bytes` the buffer's bytes.
//! `Fit::Sglang` takes SGLang's bytes; `Fit::Exact` the same construction on the whole budget.
//!
//! SGLang's refusals, in its order: its launch checks (`unified_launch.rs`), an MLA full side
//! (`_init_unified_mamba_swa_pools`' assertion), a tri-pool without full, SWA or state layers;
//! the bs=1 floor: one sliding window of SWA tokens (`min(context, window + page)`, the whole
//! context without a window), `3 * E_m` for the state slots one request locks, and the slot-0
//! sink (the largest entry, or a page of a KV side's entries); then per sub-pool in the chain's
//! order (state, SWA, full) the checks of the two-pool buffer. Refused by kvbudget: a speculative
//! draft (SGLang fuses its layers into the sub-pools: not modelled here), a fused state entry,
//! and a floor it cannot decide without the model's context length
//! (`ServingConfig::model_context_len`).

use super::state_unified::{
    check_floor, check_sub_pools, full_entry, kv_side, state_entry, token_side, KvSide,
    BUDGET_ALIGN,
};
use super::{Fit, PoolPlan};
use crate::arith::{add, mul, to_i64};
use crate::cell::swa_kv_heads_per_rank;
use crate::configurator::PoolConfigurator;
use crate::error::{PlanError, Result};
use crate::sizing::state::StateBudget;
use crate::state::StateConfig;

fn invalid(msg: impl Into<String>) -> PlanError {
    PlanError::invalid(msg)
}

/// The SWA side of the tri-pool (`MHASubPoolSpec` "swa", grow direction "float").
fn swa_side(cfg: &PoolConfigurator) -> Result<KvSide> {
    let (model, serving) = (cfg.shape(), cfg.serving());
    let b = serving.kv_dtype().element_bytes();
    let n = swa_kv_heads_per_rank(model.swa_heads(), serving.tp_size);
    let rows = vec![
        ("K", mul(mul(n, model.swa_k_dim(), "K row")?, b, "K row")?),
        ("V", mul(mul(n, model.swa_v_dim(), "V row")?, b, "V row")?),
    ];
    kv_side("swa", rows, model.num_swa_layers, b)
}

impl PoolConfigurator {
    /// `(E_f, E_s, E_m)`: bytes of one full-side token, one SWA-side token and one state slot in
    /// SGLang's unified tri-pool for this model and `state` (see the module doc).
    ///
    /// Errors: what SGLang refuses of the entries (its launch checks, an MLA full side, a
    /// sub-pool without layers) and what kvbudget does not lay out (mxfp8, a draft).
    pub fn unified_tri_entries(&self, state: &StateConfig) -> Result<(u64, u64, u64)> {
        self.check_unified_hooks(true)?;
        let state = state.resolved()?;
        self.check_tri()?;
        Ok((
            full_entry(self)?.entry,
            swa_side(self)?.entry,
            state_entry(&state)?,
        ))
    }

    /// The tri-pool's refusals before its entries: SGLang's assertions (an MLA full side, a
    /// sub-pool without layers) and kvbudget's (a draft).
    fn check_tri(&self) -> Result<()> {
        let shape = self.shape();
        if shape.mla().is_some() {
            return Err(invalid(
                "unified tri-pool does not support an MLA full side yet",
            ));
        }
        if self.spec().algorithm.is_speculative() {
            return Err(invalid(
                "kvbudget does not plan a speculative draft in SGLang's unified tri-pool (SGLang fuses the \
                 draft's layers into its sub-pools)",
            ));
        }
        if shape.num_full_layers == 0 {
            return Err(invalid(
                "tri-pool with zero full-attention layers is degenerate",
            ));
        }
        Ok(())
    }

    /// SGLang's `swa_window_kv` floor term: one sliding window of SWA tokens plus a page, clamped
    /// to the context (the whole context without a window), times `e_s` bytes; `None` when it
    /// hangs on a context length the scenario does not give.
    fn swa_window_term(&self, e_s: u64, page: u64) -> Result<Option<u64>> {
        let context = self.serving().model_context_len;
        let tokens = match (self.shape().sliding_window_size, context) {
            (Some(w), Some(c)) => c.min(add(w, page, "the SWA window")?),
            (Some(w), None) => add(w, page, "the SWA window")?,
            (None, Some(c)) => c,
            (None, None) => return Ok(None),
        };
        Ok(Some(mul(tokens, e_s, "the SWA window")?))
    }

    /// The tri-pool plan (see the module doc) on `available_bytes`, SGLang's state budget
    /// `budget` already taken.
    ///
    /// Errors: SGLang's refusals and kvbudget's (see the module doc); the hybrid-SWA
    /// configurator's own (no token fits the token side).
    pub(super) fn plan_unified_tri(
        &self,
        available_bytes: i64,
        fit: Fit,
        state: &StateConfig,
        budget: &StateBudget,
    ) -> Result<PoolPlan> {
        // SGLang sizes the token side first (`config_from_budget`), then its factory asserts.
        let stage_state = state.stage_state_layers.unwrap_or(state.num_state_layers);
        let slots = budget.max_mamba_cache_size;
        let token_side = token_side(fit, budget, available_bytes, || {
            if stage_state == 0 {
                return Err(invalid("tri-pool with zero state layers is degenerate"));
            }
            mul(slots, state_entry(state)?, "state slots")
        })?;
        let mut config = self.calculate_pool_sizes(token_side, None)?;
        self.check_tri()?;
        if self.shape().num_swa_layers == 0 {
            return Err(invalid(
                "tri-pool with zero SWA-attention layers is degenerate",
            ));
        }
        if stage_state == 0 {
            return Err(invalid("tri-pool with zero state layers is degenerate"));
        }
        if state.fused_state_entry_bytes.is_some() {
            return Err(invalid(
                "kvbudget does not lay out SGLang's unified pool with a fused state entry",
            ));
        }
        let (full, swa) = (full_entry(self)?, swa_side(self)?);
        let e_m = state_entry(state)?;
        let state_bytes = mul(slots, e_m, "state slots")?;
        let x = token_side - token_side % BUDGET_ALIGN;
        let total = add(x.unsigned_abs(), state_bytes, "unified pool bytes")?;
        let page = self.resolve_page_size(None)?.unsigned_abs();
        // SGLang's window term; without the context, its bound (window + page tokens): a floor
        // that holds at the bound holds at any context, one that does not is not decided.
        let window = self.swa_window_term(swa.entry, page)?;
        let floor = |w: u64| {
            let terms = ("init_unified_mamba_swa_pools", vec![("swa_window_kv", w)]);
            check_floor(total, &[&swa, &full], e_m, page, terms)
        };
        match window {
            Some(w) if self.serving().model_context_len.is_some() => floor(w)?,
            Some(w) if floor(w).is_ok() => {}
            _ => {
                return Err(invalid(
                    "kvbudget cannot decide SGLang's unified tri-pool bs=1 floor without model_context_len \
                     (its sliding-window term is min(context, window + page) SWA tokens, the whole context \
                     without a window)",
                ))
            }
        }
        check_sub_pools(total, &[&swa, &full], e_m, state, page)?;
        let tokens = u64::try_from(config.max_total_num_tokens)
            .map_err(|_| PlanError::not_enough_memory("the full side holds no token"))?;
        config.unified_memory_pool_bytes = Some(to_i64(total, "unified pool bytes")?);
        let ids = self.layer_ids();
        let pool = self.unified_pool(
            ids.full.iter().chain(&ids.swa).copied().collect(),
            tokens,
            total,
        );
        Ok(PoolPlan {
            fit,
            configurator: self.kind(),
            available_bytes,
            page_size: page,
            config,
            pools: vec![pool],
            total_bytes: total,
        })
    }
}
