//! The state tensors' shapes on one tensor-parallel rank, as SGLang 0.5.23's
//! `Mamba2StateShape.create`, `Mamba2StateShape.create_full_rank` and
//! `KimiLinearStateShape.create` build them (`configs/mamba_utils.py`): what
//! a [`crate::StateConfig`]'s `conv_elems`, `ssm_*` and `k_heads_per_tp` are.

use crate::arith::{add, mul};
use crate::error::{PlanError, Result};

/// One rank's state dims of one state layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateDims {
    /// Elements of the conv state(s), per request (the product of each conv shape, summed).
    pub conv_elems: u64,
    /// Temporal (SSM) state heads on this rank.
    pub ssm_heads: u64,
    /// Temporal state head dim (the value dim), elements.
    pub ssm_head_dim: u64,
    /// Temporal state size (the key dim), elements.
    pub ssm_state_dim: u64,
    /// Key (group) heads on this rank (the ReplaySSM ring's `H`).
    pub k_heads_per_tp: u64,
    /// The conv kernel width (each conv state keeps `conv_kernel - 1` steps), steps.
    pub conv_kernel: u64,
}

/// SGLang's `divide`: `a / b`, which must be exact.
fn divide(a: u64, b: u64, what: &str) -> Result<u64> {
    if b == 0 || !a.is_multiple_of(b) {
        return Err(PlanError::invalid(format!(
            "{what}: {a} is not divisible by {b}"
        )));
    }
    Ok(a / b)
}

fn positive(v: u64, what: &str) -> Result<u64> {
    if v == 0 {
        return Err(PlanError::invalid(format!("{what} must be positive")));
    }
    Ok(v)
}

/// Key heads on this rank: `n / tp` when exact, else `ceil(n / tp)`.
fn heads_per_rank(n: u64, tp: u64) -> u64 {
    n.div_ceil(tp)
}

/// B/C groups as both engines shard them: groups that do not divide the ranks are
/// replicated up to `tp` (`extra_groups_for_head_shards`; `n_groups == 1` gives `tp`).
pub(crate) fn groups_on_ranks(n_groups: u64, tp: u64) -> u64 {
    if n_groups.is_multiple_of(tp) {
        n_groups
    } else {
        tp
    }
}

/// `Mamba2StateShape.create`: a Mamba2 (or gated-delta) mixer with
/// `intermediate_size` channels, `n_groups` B/C groups (extended to `tp_size`
/// when they do not divide it), `num_heads` heads of `head_dim`, state size
/// `state_size` and a conv of width `conv_kernel`.
pub fn mamba2(
    tp_size: u64,
    intermediate_size: u64,
    n_groups: u64,
    num_heads: u64,
    head_dim: u64,
    state_size: u64,
    conv_kernel: u64,
) -> Result<StateDims> {
    let tp = positive(tp_size, "tp_size")?;
    positive(conv_kernel, "conv_kernel")?;
    let k_heads_per_tp = heads_per_rank(n_groups, tp);
    let groups = groups_on_ranks(n_groups, tp);
    let what = "mamba2 conv dim";
    let conv_dim = add(
        intermediate_size,
        mul(mul(2, groups, what)?, state_size, what)?,
        what,
    )?;
    Ok(StateDims {
        conv_elems: mul(divide(conv_dim, tp, what)?, conv_kernel - 1, what)?,
        ssm_heads: divide(num_heads, tp, "mamba2 heads")?,
        ssm_head_dim: head_dim,
        ssm_state_dim: state_size,
        k_heads_per_tp,
        conv_kernel,
    })
}

/// `Mamba2StateShape.create_full_rank`: a Mamba1 selective scan, conv over
/// `intermediate_size` only, a `(intermediate_size / tp, 1, state_size)` state.
pub fn full_rank(
    tp_size: u64,
    intermediate_size: u64,
    state_size: u64,
    conv_kernel: u64,
) -> Result<StateDims> {
    let tp = positive(tp_size, "tp_size")?;
    positive(conv_kernel, "conv_kernel")?;
    let channels = divide(intermediate_size, tp, "mamba1 intermediate_size")?;
    Ok(StateDims {
        conv_elems: mul(channels, conv_kernel - 1, "mamba1 conv state")?,
        ssm_heads: channels,
        ssm_head_dim: 1,
        ssm_state_dim: state_size,
        k_heads_per_tp: 1,
        conv_kernel,
    })
}

/// `KimiLinearStateShape.create`: KDA with `num_heads` value heads of
/// `head_dim`, `num_k_heads` key heads of `head_k_dim` (default: the value
/// side's), a conv of width `conv_kernel` over q, k and v; the recurrent state
/// is `(num_heads / tp, head_dim, head_dim)`.
pub fn kda(
    tp_size: u64,
    num_heads: u64,
    head_dim: u64,
    num_k_heads: Option<u64>,
    head_k_dim: Option<u64>,
    conv_kernel: u64,
) -> Result<StateDims> {
    let tp = positive(tp_size, "tp_size")?;
    positive(conv_kernel, "conv_kernel")?;
    let nk = num_k_heads.unwrap_or(num_heads);
    let dk = head_k_dim.unwrap_or(head_dim);
    let what = "kda conv state";
    let proj = divide(mul(num_heads, head_dim, what)?, tp, what)?;
    let proj_k = divide(mul(nk, dk, what)?, tp, what)?;
    let channels = add(proj, mul(proj_k, 2, what)?, what)?;
    Ok(StateDims {
        conv_elems: mul(conv_kernel - 1, channels, what)?,
        ssm_heads: divide(num_heads, tp, "kda heads")?,
        ssm_head_dim: head_dim,
        ssm_state_dim: head_dim,
        k_heads_per_tp: heads_per_rank(nk, tp),
        conv_kernel,
    })
}
