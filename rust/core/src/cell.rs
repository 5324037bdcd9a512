//! Bytes per token: KV heads per rank, bytes per layer, and the Default
//! configurator's cell size (REFERENCE 2.1 and 2.2).

use crate::arith::{add, mul, py_int_true_div};
use crate::dtype::KvDtype;
use crate::error::Fail;
use crate::fp4::{fp4_buffers, fp4_cell_size, FP4_SCALE_BLOCK};
use crate::geometry::{AttentionShape, MlaDims, DSA_QUANT_BLOCK};
use crate::serving::ServingConfig;
use crate::spec::SpeculativeConfig;

/// Elements per mxfp8 scale byte.
pub const MXFP8_SCALE_BLOCK: u64 = 32;

/// KV heads held by one rank in the Default configurator:
/// `max(1, heads // (tp // dcp))`; with `tp > heads` each rank keeps one replicated head.
pub fn kv_heads_per_rank(num_kv_heads: u64, tp_size: u64, dcp_size: u64) -> u64 {
    let shards = div(tp_size, dcp_size).max(1);
    div(num_kv_heads, shards).max(1)
}

/// `a / b` for `b >= 1`, by a shift when `b` is a power of two (parallel sizes
/// usually are; a hardware division costs tens of cycles).
#[inline(always)]
fn div(a: u64, b: u64) -> u64 {
    if b & b.wrapping_sub(1) == 0 {
        // 0 or a power of two (b = 0 is excluded by the callers' checks).
        a >> b.trailing_zeros().min(63)
    } else {
        a / b
    }
}

/// KV heads held by one rank in the SWA configurators (`dcp = 1`): `max(1, heads // tp)`.
pub fn swa_kv_heads_per_rank(num_kv_heads: u64, tp_size: u64) -> u64 {
    div(num_kv_heads, tp_size).max(1)
}

/// Bytes per token of one MHA/GQA layer on one rank:
/// `heads * (dk + dv) * b`, plus `(heads * (dk + dv)) // 32` scale bytes for mxfp8.
/// This is `F` (full layers) or `S` (SWA layers) of REFERENCE 2.1.
#[inline(always)]
pub fn layer_bytes_per_token<E: Fail>(
    heads_per_rank: u64,
    dk: u64,
    dv: u64,
    dtype: KvDtype,
) -> Result<u64, E> {
    let elems = mul(
        heads_per_rank,
        add(dk, dv, "head dims")?,
        "elements per token per layer",
    )?;
    let mut bytes = mul(elems, dtype.element_bytes(), "bytes per token per layer")?;
    if dtype == KvDtype::Mxfp8 {
        bytes = add(bytes, elems / MXFP8_SCALE_BLOCK, "mxfp8 scale bytes")?;
    }
    Ok(bytes)
}

/// Elements per token per layer of an MLA latent as SGLang stores it
/// (`calculate_mla_kv_cache_dim`): `kv_lora_rank + qk_rope_head_dim`, except
/// a DSA model's `fp8_e4m3` (or `mxfp8`) latent in the scaled layout (unless
/// `dsa_raw_kv_layout`): `kv_lora_rank + kv_lora_rank / 128 * 4` FP8 bytes
/// and scales, plus the rotary part in bf16 (`2 * qk_rope_head_dim` bytes).
pub fn mla_cache_dim<E: Fail>(
    model: &AttentionShape,
    mla: &MlaDims,
    serving: &ServingConfig,
) -> Result<u64, E> {
    // SGLang tests `kv_cache_dtype == torch.float8_e4m3fn`, which mxfp8's elements are too.
    let scaled = model.index_head_dim.is_some()
        && matches!(serving.kv_dtype(), KvDtype::Fp8E4m3 | KvDtype::Mxfp8)
        && !serving.dsa_raw_kv_layout;
    if !scaled {
        return mla.elements();
    }
    let r = mla.kv_lora_rank;
    if !r.is_multiple_of(DSA_QUANT_BLOCK) {
        return Err(E::invalid_with(|| {
            format!("kv_lora_rank {r} must be multiple of quant_block_size {DSA_QUANT_BLOCK} (SGLang's scaled DSA layout)")
        }));
    }
    let scales = mul(r / DSA_QUANT_BLOCK, 4, "DSA latent scales")?;
    let rope = mul(mla.qk_rope_head_dim, 2, "DSA bf16 rope bytes")?;
    add(add(r, scales, "DSA latent dim")?, rope, "DSA latent dim")
}

/// The Default configurator's cell size `C` in bytes per token, over every
/// attention layer, with the draft terms of REFERENCE 2.2 and 2.7: EAGLE
/// family and standalone add `int(C * d / L)` (as CPython divides), the
/// DFLASH family adds `d_c` or scales by layers, and a fused full entry
/// replaces the cell. A draft worker's heads ignore DCP.
#[inline(always)]
pub fn default_cell_size<E: Fail>(
    model: &AttentionShape,
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
) -> Result<u64, E> {
    let dtype = serving.kv_dtype();
    let b = dtype.element_bytes();
    let l = model.num_layers();
    let mut cell = if let Some(mla) = &model.mla() {
        let dim = mla_cache_dim(model, mla, serving)?;
        let c = mul(mul(dim, l, "MLA cell size")?, b, "MLA cell size")?;
        if dtype.is_fp4() {
            let scale = mul(
                mul(dim / FP4_SCALE_BLOCK, l, "MLA fp4 scale bytes")?,
                b,
                "MLA fp4 scale bytes",
            )?;
            add(c / 2, scale, "MLA fp4 cell size")?
        } else {
            c
        }
    } else {
        let n = kv_heads_per_rank(
            model.num_kv_heads,
            serving.tp_size,
            serving.heads_dcp_size(),
        );
        if let Some(buffers) = fp4_buffers(dtype, serving)? {
            fp4_cell_size(buffers, n, model.head_dim, l)?
        } else {
            let elems_l = mul(
                mul(
                    n,
                    add(model.head_dim, model.v_dim(), "head dims")?,
                    "cell size",
                )?,
                l,
                "cell size",
            )?;
            let c = mul(elems_l, b, "cell size")?;
            if dtype == KvDtype::Mxfp8 {
                add(c, elems_l / MXFP8_SCALE_BLOCK, "mxfp8 cell size")?
            } else {
                c
            }
        }
    };

    // The DSA indexer: replicated under DCP on the target worker, which stores no index
    // keys for the layers sharing the previous layer's top-k (a draft worker stores all).
    let mut indexer = 0;
    if let Some(dsa) = model.dsa() {
        if serving.is_draft_worker {
            indexer = mul(dsa.bytes_per_token()?, l, "DSA indexer cell size")?;
        } else {
            let own = l - model.index_shared_layers.min(l);
            indexer = mul(dsa.bytes_per_token()?, own, "DSA indexer cell size")?;
            indexer = mul(indexer, serving.dcp_size, "DSA indexer cell size")?;
        }
        cell = add(cell, indexer, "DSA cell size")?;
    }
    if cell == 0 {
        // SGLang falls back to context_len here; kvbudget has nothing to plan.
        return Err(E::invalid_with(|| {
            "the KV cell size is 0 bytes per token (FP4 of head dims below 16); nothing to plan"
                .into()
        }));
    }
    if serving.is_draft_worker {
        return Ok(cell);
    }
    let algorithm = spec.algorithm;
    let drafting = algorithm.counts_draft_layers() || algorithm.is_dflash_family();
    if let (true, Some(entry)) = (drafting, spec.fused_full_entry_bytes) {
        // The draft lives in the target's full entries.
        return Ok(entry);
    }
    let d = spec.num_draft_layers();
    if let (true, Some(dsa)) = (
        algorithm.counts_draft_layers() && d > 0 && l > 0,
        model.dsa(),
    ) {
        // SGLang's DSA branch: the latent part scaled by layers, then the draft's own
        // indexer (every draft layer), both across the DCP-widened location space.
        let dcp = serving.dcp_size;
        let latent = u128::from(cell - indexer) * u128::from(d);
        let draft_kv = mul(
            py_int_true_div(latent, l, "DSA draft cell size")?,
            dcp,
            "DSA draft cell size",
        )?;
        let draft_indexer = mul(
            mul(dsa.bytes_per_token()?, d, "DSA draft indexer")?,
            dcp,
            "DSA draft indexer",
        )?;
        cell = add(
            cell,
            add(draft_kv, draft_indexer, "DSA draft cell size")?,
            "DSA draft cell size",
        )?;
    } else if algorithm.counts_draft_layers() && d > 0 && l > 0 {
        // SGLang: cell + int(cell * d / L), a true division of integers.
        let scaled = u128::from(cell) * u128::from(d);
        let draft = py_int_true_div(scaled, l, "draft-scaled cell size")?;
        cell = add(cell, draft, "draft-scaled cell size")?;
    }
    if algorithm.is_dflash_family() && d > 0 && l > 0 {
        let d_c = spec.dflash_cell(false, serving.dcp_size)?;
        cell = if d_c > 0 {
            add(cell, d_c, "DFLASH cell size")?
        } else {
            // SGLang's layer scaling: ceil(cell * (L + d * dcp) / L).
            let total = add(
                l,
                mul(d, serving.dcp_size, "DFLASH draft layers")?,
                "DFLASH layers",
            )?;
            let num = mul(cell, total, "DFLASH cell size")?;
            num.div_ceil(l)
        };
    }
    Ok(cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn heads_replicate_when_tp_exceeds_heads() {
        assert_eq!(kv_heads_per_rank(8, 4, 1), 2);
        assert_eq!(kv_heads_per_rank(8, 16, 1), 1);
        assert_eq!(kv_heads_per_rank(8, 16, 2), 1);
        assert_eq!(kv_heads_per_rank(8, 8, 2), 2);
        assert_eq!(swa_kv_heads_per_rank(8, 16), 1);
    }

    #[test]
    fn layer_bytes_examples() {
        // REFERENCE example 1: 16 heads, 128 + 128, bf16 -> 8192.
        assert_eq!(
            layer_bytes_per_token::<ErrorCode>(16, 128, 128, KvDtype::Bf16).unwrap(),
            8192
        );
        // Example 2: 2 heads/rank, 64 + 64, fp8 -> 256; mxfp8 -> 264.
        assert_eq!(
            layer_bytes_per_token::<ErrorCode>(2, 64, 64, KvDtype::Fp8E4m3).unwrap(),
            256
        );
        assert_eq!(
            layer_bytes_per_token::<ErrorCode>(2, 64, 64, KvDtype::Mxfp8).unwrap(),
            264
        );
    }
}
