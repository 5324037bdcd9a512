//! The SWA chunk cap: how many SWA tokens a bounded number of requests can
//! hold at once (REFERENCE 2.4, SGLang's `SWAChunkCapPoolConfigurator`).

use crate::arith::{add, mul};
use crate::error::Fail;
use crate::serving::{DisaggregationMode, ServingConfig};
use crate::spec::{SpecAlgorithm, SpeculativeConfig};

fn ceil_to<E: Fail>(a: u64, p: u64, what: &str) -> Result<u64, E> {
    mul(a.div_ceil(p), p, what)
}

/// Tokens one request allocates ahead per decode step, in tokens.
///
/// No speculation: `p`. Overlap disabled (spec v1) and enabled (spec v2)
/// follow REFERENCE 2.4; `steps`, `topk` and `k` default to 1 when unset or 0.
pub fn decode_alloc_per_request<E: Fail>(
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
) -> Result<u64, E> {
    let p = serving.page_size;
    if !spec.algorithm.is_speculative() {
        return Ok(p);
    }
    let or1 = |v: Option<u64>| v.filter(|x| *x > 0).unwrap_or(1);
    let steps = or1(spec.num_steps);
    let topk = or1(spec.eagle_topk);
    let k = or1(spec.num_draft_tokens);
    let what = "decode allocation per request";
    if serving.disable_overlap_schedule {
        // spec v1
        if p > 1 && topk > 1 {
            Ok(mul(ceil_to(add(steps, p, what)?, p, what)?, topk, what)?.max(ceil_to(k, p, what)?))
        } else if p > 1 {
            Ok(mul(ceil_to(steps, p, what)?, topk, what)?.max(ceil_to(k, p, what)?))
        } else {
            Ok(mul(steps, topk, what)?.max(k))
        }
    } else {
        // spec v2: the overlap allocator keeps two allocations outstanding.
        let pp = mul(p, serving.dcp_size, what)?;
        let inner = if pp == 1 || topk == 1 || spec.algorithm == SpecAlgorithm::Ngram {
            mul(steps, topk, what)?.max(k)
        } else {
            // SGLang's get_alloc_len_per_decode: ((p'-1) + steps + p'-1) // p' pages per topk
            // branch, i.e. floor((2(p'-1) + steps) / p') = ceil((p'-1 + steps) / p').
            // REFERENCE 2.4 prints `ceil(...)` here; SGLang's floor wins (INV-1).
            let num = add(mul(2, pp - 1, what)?, steps, what)?;
            mul(mul(num / pp, pp, what)?, topk, what)?.max(k)
        };
        mul(2, inner, what)
    }
}

/// Why the chunk cap does not apply, or `None` when it does (SGLang's `is_applicable`).
pub fn chunk_cap_inapplicable_reason(
    serving: &ServingConfig,
    window: Option<u64>,
    num_full_layers: u64,
) -> Option<&'static str> {
    if serving.max_running_requests.is_none() {
        Some("max_running_requests is not set")
    } else if !serving.disable_radix_cache {
        Some("the radix cache is enabled (disable_radix_cache=False)")
    } else if serving.chunked_prefill_size.is_none() {
        Some("chunked_prefill_size is not set")
    } else if window.is_none() {
        Some("sliding_window_size is not set")
    } else if num_full_layers == 0 {
        Some("the model has no full-attention layers")
    } else {
        None
    }
}

/// The SWA token cap (before page alignment), in tokens.
///
/// `trailing = W + max(1, E) * k + p`; `per_request = trailing + decode_alloc`;
/// `N = max_running_requests // attn_dp_size`; PD decode adds `(W + p)` per
/// extra slot, otherwise `c * chunked_prefill_size + p` with `c` = 1 (overlap
/// off) or 2. `p` here is the serving page size.
pub fn swa_chunk_cap<E: Fail>(
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    window: u64,
) -> Result<u64, E> {
    let what = "SWA chunk cap";
    let p = serving.page_size;
    let k = spec.num_draft_tokens.filter(|x| *x > 0).unwrap_or(1);
    let e = serving.swa_eviction_interval.max(1) as u64;
    let trailing = add(add(window, mul(e, k, what)?, what)?, p, what)?;
    let per_request = add(trailing, decode_alloc_per_request(serving, spec)?, what)?;
    let mrr = serving
        .max_running_requests
        .ok_or_else(|| E::invalid_with(|| "the chunk cap needs max_running_requests".into()))?;
    let n = mrr / serving.attn_dp_size;
    let base = mul(per_request, n, what)?;
    if serving.disaggregation_mode == DisaggregationMode::Decode {
        add(
            base,
            mul(
                add(window, p, what)?,
                serving.disaggregation_decode_extra_slots,
                what,
            )?,
            what,
        )
    } else {
        let chunk = serving
            .chunked_prefill_size
            .ok_or_else(|| E::invalid_with(|| "the chunk cap needs chunked_prefill_size".into()))?;
        let c = if serving.disable_overlap_schedule {
            1
        } else {
            2
        };
        add(add(base, mul(c, chunk, what)?, what)?, p, what)
    }
}
