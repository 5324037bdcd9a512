//! The tensors of one layer (MHA/GQA, MLA, the FP4 recipes' scale layouts
//! and workspace), a pool's layers, and the slab layout of a pool at a row count.

use super::{PoolName, TensorKind, TENSOR_ALIGNMENT};
use crate::arith::{add, mul};
use crate::cell::MXFP8_SCALE_BLOCK;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::fp4::{Fp4Buffers, FP4_SCALE_BLOCK};
use crate::geometry::DraftCapacity;

/// Per-row shape of one tensor (every dimension after rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TensorLayout {
    pub(super) kind: TensorKind,
    pub(super) inner: Vec<u64>,
    pub(super) dtype: StorageDtype,
    pub(super) row_bytes: u64,
}

/// How a pool's token count follows from the plan's (full, SWA) counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sized {
    /// As many tokens as the target pool of this capacity, plus a page of rows.
    Tokens(DraftCapacity),
    /// Unified memory: one byte buffer of `full * U + swa * S * n_s` bytes.
    UnifiedBytes,
    /// Unified memory's draft: `ceil_p(span)` tokens plus a page, the span
    /// being the unified pool's virtual ids (`bytes // U - 1`).
    VirtualSpan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PoolLayout {
    pub(super) name: PoolName,
    pub(super) sized: Sized,
    pub(super) kv_cache_dtype: KvDtype,
    pub(super) layers: Vec<(u64, Vec<TensorLayout>)>,
    /// Bytes per row summed over every layer and tensor (0 for the unified pool).
    pub(super) row_bytes: u64,
}

pub(super) fn tensor(
    kind: TensorKind,
    inner: Vec<u64>,
    dtype: StorageDtype,
) -> Result<TensorLayout> {
    let mut row_bytes = dtype.bytes();
    for d in &inner {
        row_bytes = mul(row_bytes, *d, "tensor row bytes")?;
    }
    Ok(TensorLayout {
        kind,
        inner,
        dtype,
        row_bytes,
    })
}

/// The tensors of one MHA/GQA layer. The FP4 recipes store K and V at the K
/// head dim `dk` (as SGLang's FP4 pools do), with the scale layouts `buffers` names.
pub(super) fn mha_layer(
    heads: u64,
    dk: u64,
    dv: u64,
    dtype: KvDtype,
    buffers: Option<Fp4Buffers>,
) -> Result<Vec<TensorLayout>> {
    let st = dtype.storage();
    let u8t = StorageDtype::Uint8;
    if let Some(b) = buffers {
        let scale = vec![heads, dk / FP4_SCALE_BLOCK];
        let mut ts = vec![
            tensor(TensorKind::K, vec![heads, dk / 2], st)?,
            tensor(TensorKind::V, vec![heads, dk / 2], st)?,
        ];
        if b.flat_scales {
            let flat = vec![mul(heads, dk, "FP4 scales")? / FP4_SCALE_BLOCK];
            ts.push(tensor(TensorKind::KScale, flat.clone(), u8t)?);
            ts.push(tensor(TensorKind::VScale, flat, u8t)?);
        }
        if b.linear_scales {
            ts.push(tensor(TensorKind::KScale, scale.clone(), u8t)?);
            ts.push(tensor(TensorKind::VScale, scale.clone(), u8t)?);
        }
        if b.native_scales {
            ts.push(tensor(TensorKind::NativeKScale, scale.clone(), u8t)?);
            ts.push(tensor(TensorKind::NativeVScale, scale, u8t)?);
        }
        return Ok(ts);
    }
    Ok(match dtype {
        KvDtype::Mxfp8 => vec![
            tensor(TensorKind::K, vec![heads, dk], st)?,
            tensor(TensorKind::V, vec![heads, dv], st)?,
            tensor(
                TensorKind::KScale,
                vec![heads, dk.div_ceil(MXFP8_SCALE_BLOCK)],
                u8t,
            )?,
            tensor(
                TensorKind::VScale,
                vec![heads, dv.div_ceil(MXFP8_SCALE_BLOCK)],
                u8t,
            )?,
        ],
        _ => vec![
            tensor(TensorKind::K, vec![heads, dk], st)?,
            tensor(TensorKind::V, vec![heads, dv], st)?,
        ],
    })
}

/// The FP8 dequant workspace an `nvfp4` pool with FlashInfer prefill keeps
/// once (shared by its layers), per K and V: `[rows, heads, dk]`.
pub(super) fn dequant_workspace(heads: u64, dk: u64) -> Result<Vec<TensorLayout>> {
    let u8t = StorageDtype::Uint8;
    Ok(vec![
        tensor(TensorKind::DqK, vec![heads, dk], u8t)?,
        tensor(TensorKind::DqV, vec![heads, dk], u8t)?,
    ])
}

/// The tensors of one MLA layer whose latent has `dim` elements per token
/// ([`crate::cell::mla_cache_dim`]).
pub(super) fn mla_layer(dim: u64, dtype: KvDtype) -> Result<Vec<TensorLayout>> {
    let st = dtype.storage();
    let u8t = StorageDtype::Uint8;
    Ok(if dtype.is_fp4() {
        vec![
            tensor(TensorKind::Kv, vec![1, dim.div_ceil(2)], st)?,
            tensor(
                TensorKind::KvScale,
                vec![1, dim.div_ceil(FP4_SCALE_BLOCK)],
                u8t,
            )?,
        ]
    } else if dtype == KvDtype::Mxfp8 {
        vec![
            tensor(TensorKind::Kv, vec![1, dim], st)?,
            tensor(
                TensorKind::KvScale,
                vec![1, dim.div_ceil(MXFP8_SCALE_BLOCK)],
                u8t,
            )?,
        ]
    } else {
        vec![tensor(TensorKind::Kv, vec![1, dim], st)?]
    })
}

pub(super) fn pool(
    name: PoolName,
    sized: Sized,
    kv_cache_dtype: KvDtype,
    layers: Vec<(u64, Vec<TensorLayout>)>,
) -> Result<PoolLayout> {
    // A tensor of no bytes (an FP4 scale layout of a head dim below 16) allocates nothing;
    // a layer left with none (FP4 of a head dim of 1) stores nothing at all.
    let mut layers = layers;
    for (id, ts) in &mut layers {
        let had = !ts.is_empty();
        ts.retain(|t| t.row_bytes > 0);
        if had && ts.is_empty() {
            return Err(PlanError::invalid(format!(
                "layer {id} of the {} pool stores nothing in {} (FP4 packs two elements per byte; \
                 its head dim is below 2)",
                name.as_str(),
                kv_cache_dtype.as_str()
            )));
        }
    }
    let mut row_bytes = 0u64;
    for (_, ts) in &layers {
        for t in ts {
            row_bytes = add(row_bytes, t.row_bytes, "pool row bytes")?;
        }
    }
    Ok(PoolLayout {
        name,
        sized,
        kv_cache_dtype,
        layers,
        row_bytes,
    })
}

/// Every id of `ids` with the tensors `proto`, the first also with `extra`
/// (a buffer the pool keeps once, e.g. a dequant workspace).
pub(super) fn layers_of(
    ids: impl IntoIterator<Item = u64>,
    proto: &[TensorLayout],
    extra: &[TensorLayout],
) -> Vec<(u64, Vec<TensorLayout>)> {
    ids.into_iter()
        .enumerate()
        .map(|(i, id)| {
            let mut ts = proto.to_vec();
            if i == 0 {
                ts.extend_from_slice(extra);
            }
            (id, ts)
        })
        .collect()
}

/// Lays out one pool's tensors at `rows` rows: calls `emit(layer_id, tensor,
/// offset, nbytes)` for each, every offset a multiple of [`TENSOR_ALIGNMENT`];
/// returns the slab size in bytes, or `None` on overflow.
pub(super) fn layout_pool(
    pl: &PoolLayout,
    rows: u64,
    mut emit: impl FnMut(u64, &TensorLayout, u64, u64),
) -> Option<u64> {
    let mut end = 0u64;
    for (layer_id, ts) in &pl.layers {
        for t in ts {
            let offset = end.checked_next_multiple_of(TENSOR_ALIGNMENT)?;
            let nbytes = rows.checked_mul(t.row_bytes)?;
            emit(*layer_id, t, offset, nbytes);
            end = offset.checked_add(nbytes)?;
        }
    }
    (end <= crate::arith::MAX_QUANTITY).then_some(end)
}
