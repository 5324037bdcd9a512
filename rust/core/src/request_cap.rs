//! The SWA request cap: how many SWA tokens `max_running_requests` requests
//! can hold live at once (REFERENCE 2.4 and 2.7; SGLang 0.5.23's
//! `compute_swa_request_cap` and `SWARequestCapPoolConfigurator.is_applicable`).

use crate::arith::{add, mul};
use crate::error::Fail;
use crate::serving::{DisaggregationMode, ServingConfig};
use crate::spec::{SpecAlgorithm, SpeculativeConfig};

fn ceil_to<E: Fail>(a: u64, p: u64, what: &str) -> Result<u64, E> {
    mul(a.div_ceil(p), p, what)
}

/// Tokens one request allocates ahead per decode step, in tokens.
///
/// No speculation: `p`. Overlap disabled (spec v1): SGLang's
/// `spec_decode_alloc_len_per_request` (`steps`, `topk`, `k` default to 1 when
/// unset or 0). Overlap enabled (spec v2): `2 * get_alloc_len_per_decode()`,
/// which pages by `p * dcp`, reads the adaptive bound
/// [`SpeculativeConfig::max_draft_tokens`] (required: SGLang fails without
/// it), and gives UNO `tokens + 1`.
#[inline(always)]
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
    let what = "decode allocation per request";
    if serving.disable_overlap_schedule {
        // spec v1
        let k = or1(spec.num_draft_tokens);
        if p > 1 && topk > 1 {
            Ok(mul(ceil_to(add(steps, p, what)?, p, what)?, topk, what)?.max(ceil_to(k, p, what)?))
        } else if p > 1 {
            Ok(mul(ceil_to(steps, p, what)?, topk, what)?.max(ceil_to(k, p, what)?))
        } else {
            Ok(mul(steps, topk, what)?.max(k))
        }
    } else {
        // spec v2: the overlap allocator keeps two allocations outstanding.
        let Some(k) = spec.max_draft_tokens() else {
            return Err(E::invalid_with(|| {
                format!(
                    "the spec-v2 decode allocation of {} needs num_draft_tokens (SGLang's \
                     get_alloc_len_per_decode reads it)",
                    spec.algorithm.as_str()
                )
            }));
        };
        let pp = mul(p, serving.dcp_size, what)?;
        let inner = if spec.algorithm == SpecAlgorithm::Uno {
            add(k, 1, what)?
        } else if pp == 1 || topk == 1 || !spec.algorithm.has_draft_kv() {
            mul(steps, topk, what)?.max(k)
        } else {
            // ((p'-1) + steps + p'-1) // p' pages per topk branch.
            let num = add(mul(2, pp - 1, what)?, steps, what)?;
            mul(mul(num / pp, pp, what)?, topk, what)?.max(k)
        };
        mul(2, inner, what)
    }
}

/// Why the request cap does not apply, or `None` when it does (SGLang's
/// `is_applicable`): it needs `max_running_requests`, the radix cache off, a
/// positive chunked-prefill size outside PD decode, a window and full layers.
#[inline]
pub fn request_cap_inapplicable_reason(
    serving: &ServingConfig,
    window: Option<u64>,
    num_full_layers: u64,
) -> Option<&'static str> {
    if serving.max_running_requests.is_none() {
        Some("max_running_requests is not set")
    } else if !serving.disable_radix_cache {
        Some("the radix cache is enabled (disable_radix_cache=False)")
    } else if serving.disaggregation_mode != DisaggregationMode::Decode
        && serving.chunked_prefill_size.is_none()
    {
        Some("chunked_prefill_size is not set (needed outside PD decode)")
    } else if window.is_none() {
        Some("sliding_window_size is not set")
    } else if num_full_layers == 0 {
        Some("the model has no full-attention layers")
    } else {
        None
    }
}

/// True when the request cap applies: [`request_cap_inapplicable_reason`] is
/// `None` (the same conditions, as one branch-free expression for the batch
/// kernel's classification of rows; a test checks the two agree on every
/// combination of the conditions).
// `&` and `|`, not `&&` and `||`: no branch (the batch rows come in any order).
#[allow(clippy::needless_bitwise_bool)]
#[inline(always)]
pub fn request_cap_applies(
    serving: &ServingConfig,
    window: Option<u64>,
    num_full_layers: u64,
) -> bool {
    serving.max_running_requests.is_some()
        & serving.disable_radix_cache
        & ((serving.disaggregation_mode == DisaggregationMode::Decode)
            | serving.chunked_prefill_size.is_some())
        & window.is_some()
        & (num_full_layers > 0)
}

/// The SWA token cap (before page alignment), in tokens.
///
/// `trailing = W + max(1, E) * k + p` (`k` = `num_draft_tokens`, 1 when unset
/// or 0); `per_request = trailing + decode_alloc`; `N = max(1,
/// max_running_requests // attn_dp_size)`; PD decode adds `(W + p)` per extra
/// slot, otherwise `c * chunked_prefill_size + p` with `c` = 1 (overlap off)
/// or 2. `p` here is the serving page size.
#[inline(always)]
pub fn swa_request_cap<E: Fail>(
    serving: &ServingConfig,
    spec: &SpeculativeConfig,
    window: u64,
) -> Result<u64, E> {
    let what = "SWA request cap";
    let p = serving.page_size;
    let k = spec.num_draft_tokens.filter(|x| *x > 0).unwrap_or(1);
    let e = serving.swa_eviction_interval.max(1) as u64;
    let trailing = add(add(window, mul(e, k, what)?, what)?, p, what)?;
    let per_request = add(trailing, decode_alloc_per_request(serving, spec)?, what)?;
    let mrr = serving
        .max_running_requests
        .ok_or_else(|| E::invalid_with(|| "the request cap needs max_running_requests".into()))?;
    let n = (mrr / serving.attn_dp_size).max(1);
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
        let chunk = serving.chunked_prefill_size.ok_or_else(|| {
            E::invalid_with(|| "the request cap needs chunked_prefill_size".into())
        })?;
        let c = if serving.disable_overlap_schedule {
            1
        } else {
            2
        };
        add(add(base, mul(c, chunk, what)?, what)?, p, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Named;

    /// The branch-free predicate and the reasons agree on every combination of
    /// the conditions they read (each condition's values: set or not, on or off,
    /// every mode, zero or some full layers).
    #[test]
    fn request_cap_applies_exactly_when_no_reason_is_given() {
        let mut seen = 0;
        for mrr in [None, Some(64)] {
            for radix_off in [false, true] {
                for mode in DisaggregationMode::ALL {
                    for chunk in [None, Some(8192)] {
                        for window in [None, Some(1023)] {
                            for n_f in [0, 1, 7] {
                                let serving = ServingConfig {
                                    max_running_requests: mrr,
                                    disable_radix_cache: radix_off,
                                    disaggregation_mode: *mode,
                                    chunked_prefill_size: chunk,
                                    ..ServingConfig::default()
                                };
                                assert_eq!(
                                    request_cap_applies(&serving, window, n_f),
                                    request_cap_inapplicable_reason(&serving, window, n_f)
                                        .is_none(),
                                    "{serving:?} window {window:?} n_f {n_f}"
                                );
                                seen += 1;
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(seen, 2 * 2 * DisaggregationMode::ALL.len() * 2 * 2 * 3);
    }
}
