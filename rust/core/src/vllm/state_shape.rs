//! vLLM 0.33.0's state tensor shapes on one tensor-parallel rank
//! (`MambaStateShapeCalculator`, `layers/mamba/mamba_utils.py`), in its
//! default `SD` conv layout (`(state_len, dim)`): what a state layer's
//! `state_shapes` are. Elements per dim; vLLM's `divide` asserts exactness.

use super::{ErrorKind, VllmError};
use crate::state::shape::groups_on_ranks;

/// vLLM's `divide`: `a / b`, asserted exact (an `AssertionError` otherwise).
fn divide(a: u64, b: u64) -> Result<u64, VllmError> {
    if b == 0 || !a.is_multiple_of(b) {
        return Err(VllmError::new(
            ErrorKind::AssertionError,
            format!("{a} is not divisible by {b}"),
        ));
    }
    Ok(a / b)
}

fn checked(x: Option<u64>) -> Result<u64, VllmError> {
    x.ok_or_else(|| VllmError::overflow("state shape"))
}

/// The conv state's rows: `conv_kernel - 1 + num_spec` (the speculative tokens' own rows).
fn conv_rows(conv_kernel: u64, num_spec: u64) -> Result<u64, VllmError> {
    if conv_kernel == 0 {
        return Err(VllmError::new(
            ErrorKind::Input,
            "conv_kernel must be positive",
        ));
    }
    checked((conv_kernel - 1).checked_add(num_spec))
}

/// `gated_delta_net_state_shape`: the conv state `(k - 1 + s, (2·nk·dk + nv·dv) / tp)` and
/// the recurrent state `(nv / tp, dv, dk)`.
pub fn gated_delta_net(
    tp: u64,
    num_k_heads: u64,
    num_v_heads: u64,
    head_k_dim: u64,
    head_v_dim: u64,
    conv_kernel: u64,
    num_spec: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    let k = checked(
        head_k_dim
            .checked_mul(num_k_heads)
            .and_then(|x| x.checked_mul(2)),
    )?;
    let conv_dim = checked(k.checked_add(checked(head_v_dim.checked_mul(num_v_heads))?))?;
    Ok(vec![
        vec![conv_rows(conv_kernel, num_spec)?, divide(conv_dim, tp)?],
        vec![divide(num_v_heads, tp)?, head_v_dim, head_k_dim],
    ])
}

/// `kda_state_shape` (Kimi Delta Attention) as Kimi-Linear calls it, with its key heads and key
/// head size defaulted to the value ones: the conv state `(k - 1 + s, 3·H·D / tp)` and the
/// recurrent state `(H / tp, D, D)` for `H` heads of `D` elements.
pub fn kda(
    tp: u64,
    num_heads: u64,
    head_dim: u64,
    conv_kernel: u64,
    num_spec: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    let projection = checked(num_heads.checked_mul(head_dim))?;
    let conv_dim = checked(projection.checked_mul(3))?;
    Ok(vec![
        vec![conv_rows(conv_kernel, num_spec)?, divide(conv_dim, tp)?],
        vec![divide(num_heads, tp)?, head_dim, head_dim],
    ])
}

/// `mamba2_state_shape`: B/C groups extended to the ranks when they do not divide
/// them, the conv state `(k - 1 + s, (I + 2·G·ds) / tp)` and the SSM state `(H / tp, hd, ds)`.
pub fn mamba2(
    tp: u64,
    intermediate_size: u64,
    n_groups: u64,
    num_heads: u64,
    head_dim: u64,
    state_size: u64,
    conv_kernel: u64,
    num_spec: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    if tp == 0 {
        return Err(VllmError::new(ErrorKind::Input, "tp must be positive"));
    }
    let groups = groups_on_ranks(n_groups, tp);
    let bc = checked(
        groups
            .checked_mul(2)
            .and_then(|x| x.checked_mul(state_size)),
    )?;
    let conv_dim = checked(intermediate_size.checked_add(bc))?;
    Ok(vec![
        vec![conv_rows(conv_kernel, num_spec)?, divide(conv_dim, tp)?],
        vec![divide(num_heads, tp)?, head_dim, state_size],
    ])
}

/// `short_conv_state_shape`: one conv state `(k - 1 + s, dim / tp)` (LFM2's short convolution).
pub fn short_conv(
    tp: u64,
    intermediate_size: u64,
    conv_kernel: u64,
    num_spec: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    Ok(vec![vec![
        conv_rows(conv_kernel, num_spec)?,
        divide(intermediate_size, tp)?,
    ]])
}

/// `mamba1_state_shape`: the conv state `(k - 1, I / tp)` and the SSM state `(I / tp, ds)`
/// (Jamba's Mamba-1 mixer; no speculative rows).
pub fn mamba1(
    tp: u64,
    intermediate_size: u64,
    state_size: u64,
    conv_kernel: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    let dim = divide(intermediate_size, tp)?;
    Ok(vec![
        vec![conv_rows(conv_kernel, 0)?, dim],
        vec![dim, state_size],
    ])
}

/// `append_replayssm_ring`: a Mamba-2 state's ReplaySSM rings after its `base` conv and SSM
/// shapes (`mamba2`'s): `x` `(H / tp, L, hd)`, `dt` `(H / tp, L)` and `B` `(G' / tp, L, ds)`,
/// the B/C groups `G'` extended to the ranks as the conv's are. The ring holds `window` steps
/// (`--replayssm-buffer-len`), and with the FlashInfer backend also the current verify window
/// (`1 + num_spec` more).
pub fn replayssm_ring(
    base: Vec<Vec<u64>>,
    n_groups: u64,
    tp: u64,
    window: u64,
    flashinfer: bool,
    num_spec: u64,
) -> Result<Vec<Vec<u64>>, VllmError> {
    let ring = if flashinfer {
        checked(window.checked_add(1).and_then(|x| x.checked_add(num_spec)))?
    } else {
        window
    };
    let Some(&[heads, head_dim, state_size]) = base.get(1).map(Vec::as_slice) else {
        return Err(VllmError::new(
            ErrorKind::Input,
            "a ReplaySSM ring follows a Mamba-2 (conv, SSM) state",
        ));
    };
    if tp == 0 {
        return Err(VllmError::new(ErrorKind::Input, "tp must be positive"));
    }
    let groups = divide(groups_on_ranks(n_groups, tp), tp)?;
    let mut out = base;
    out.extend([
        vec![heads, ring, head_dim],
        vec![heads, ring],
        vec![groups, ring, state_size],
    ]);
    Ok(out)
}
