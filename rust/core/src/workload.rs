//! Workload questions an autoscaler asks of a plan: how many requests of a
//! given context length fit, the longest context for a concurrency, the
//! smallest budget for both, and the SWA ratio at which the full and SWA pools
//! run out together.
//!
//! A request of context length `L` tokens holds `ceil_p(L)` full-pool tokens
//! and `min(ceil_p(L), ceil_p(W + chunk + p))` SWA-pool tokens (the window,
//! one prefill chunk in flight and a page; `chunk` is `chunked_prefill_size`,
//! or `L` when chunked prefill is off). The draft pool mirrors the pool whose
//! capacity it shares, so it never limits on its own.

use crate::arith::{add, align_up, last_fitting, mul, to_i64};
use crate::configurator::PoolConfigurator;
use crate::error::{ErrorCode, PlanError, Result};
use crate::fields::MemoryPoolConfig;
use crate::plan::PlanLayout;
use crate::sizing::ConfiguratorKind;

/// Tokens one request holds in each pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Full-pool tokens (0 for an all-SWA target).
    pub full_tokens: u64,
    /// SWA-pool tokens (0 when there is no SWA pool).
    pub swa_tokens: u64,
}

fn has_swa_pool(cfg: &PoolConfigurator) -> bool {
    cfg.kind() != ConfiguratorKind::Default
}

/// The tokens a request of `context_len` tokens holds in each pool.
pub fn footprint(cfg: &PoolConfigurator, context_len: u64) -> Result<Footprint> {
    if context_len == 0 {
        return Err(PlanError::invalid("context_len must be >= 1, got 0"));
    }
    let p = cfg.serving().page_size;
    let what = "request footprint";
    let full = align_up(context_len, p, what)?;
    let swa = if has_swa_pool(cfg) {
        let window = cfg.shape().sliding_window_size.unwrap_or(context_len);
        let chunk = cfg.serving().chunked_prefill_size.unwrap_or(context_len);
        full.min(align_up(add(add(window, chunk, what)?, p, what)?, p, what)?)
    } else {
        0
    };
    Ok(Footprint {
        full_tokens: if cfg.is_all_swa() { 0 } else { full },
        swa_tokens: swa,
    })
}

fn pool_tokens(config: &MemoryPoolConfig) -> (u64, u64) {
    let full = config
        .full_max_total_num_tokens
        .unwrap_or(config.max_total_num_tokens)
        .max(0) as u64;
    let swa = config.swa_max_total_num_tokens.unwrap_or(0).max(0) as u64;
    (full, swa)
}

/// Requests of `context_len` tokens the pools of `config` hold at once
/// (the smaller of the full-pool and SWA-pool limits).
pub fn concurrency(
    cfg: &PoolConfigurator,
    config: &MemoryPoolConfig,
    context_len: u64,
) -> Result<u64> {
    let f = footprint(cfg, context_len)?;
    let (full, swa) = pool_tokens(config);
    // A pool the request does not use (footprint 0) does not limit.
    let full_limit = full.checked_div(f.full_tokens).unwrap_or(u64::MAX);
    let swa_limit = swa.checked_div(f.swa_tokens).unwrap_or(u64::MAX);
    Ok(full_limit.min(swa_limit))
}

/// The longest context (tokens) at which `config` still holds `requests`
/// requests at once; `None` when no length bounds it (an all-SWA target whose
/// footprint saturates at the window), `Some(0)` when not even one token fits.
pub fn max_context_len(
    cfg: &PoolConfigurator,
    config: &MemoryPoolConfig,
    requests: u64,
) -> Result<Option<u64>> {
    if requests == 0 {
        return Err(PlanError::invalid("requests must be >= 1, got 0"));
    }
    let (full, swa) = pool_tokens(config);
    let hi_bound = if cfg.is_all_swa() { swa } else { full };
    let fits = |l: u64| concurrency(cfg, config, l).is_ok_and(|n| n >= requests);
    if cfg.is_all_swa() && fits(hi_bound.saturating_add(1).max(1)) {
        return Ok(None);
    }
    if !fits(1) {
        return Ok(Some(0));
    }
    // Concurrency never grows with the context length: find the last length that fits.
    Ok(Some(last_fitting(1, hi_bound.saturating_add(1), fits)))
}

/// The smallest budget (bytes) whose exact plan holds `requests` requests of
/// `context_len` tokens at once, and that plan's primary token count.
pub fn min_budget(cfg: &PoolConfigurator, requests: u64, context_len: u64) -> Result<(u64, i64)> {
    if requests == 0 {
        return Err(PlanError::invalid("requests must be >= 1, got 0"));
    }
    let layout = PlanLayout::new(cfg)?;
    let p = cfg.resolve_page_size(None)?;
    let f = footprint(cfg, context_len)?;
    let ok = |pages: u64| -> Result<bool> {
        let x = to_i64(mul(pages, p as u64, "tokens")?, "tokens")?;
        let (full, swa) = layout.tokens_for(x, p)?;
        let config = MemoryPoolConfig {
            max_total_num_tokens: x,
            full_max_total_num_tokens: Some(full),
            swa_max_total_num_tokens: Some(swa),
            unified_memory_pool_bytes: None,
        };
        let floor_ok =
            !has_swa_pool(cfg) || cfg.is_all_swa() || cfg.check_admission_floor(swa).is_ok();
        Ok(floor_ok && concurrency(cfg, &config, context_len)? >= requests)
    };
    if cfg.kind() == ConfiguratorKind::RequestCap {
        let swa = cfg.request_cap_swa_tokens(p)? as u64;
        if swa < mul(requests, f.swa_tokens, "SWA tokens needed")? {
            return Err(PlanError::not_enough_memory(format!(
                "no budget holds {requests} requests of {context_len} tokens: the SWA pool is capped at {swa} tokens \
                 ({} per request); raise max_running_requests",
                f.swa_tokens
            )));
        }
    }
    // Enough pages for the larger footprint, then double until it holds
    // (the SWA share grows with the ratio; the admission floor may need more).
    let need = mul(requests, f.full_tokens.max(f.swa_tokens), "tokens needed")?;
    let mut hi = need.div_ceil(p as u64).max(1);
    while !ok(hi)? {
        hi = mul(hi, 2, "tokens needed")?;
    }
    let mut lo = 0u64; // pages known not to suffice (0 never does)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let x = to_i64(mul(hi, p as u64, "tokens")?, "tokens")?;
    Ok((cfg.bytes_for_tokens(x)?, x))
}

/// The outcome of [`suggest_swa_ratio`].
#[derive(Debug, Clone, PartialEq)]
pub struct RatioSuggestion {
    /// The suggested `swa_full_tokens_ratio`.
    pub ratio: f64,
    /// Average requests admitted at once with it.
    pub concurrency: u64,
    /// SGLang's pool sizes with it, tokens.
    pub config: MemoryPoolConfig,
    /// The baseline ratio compared against (the configurator's own, usually 0.8).
    pub baseline_ratio: f64,
    /// Average requests admitted at once with the baseline, 0 if it fails.
    pub baseline_concurrency: u64,
    /// SGLang's pool sizes with the baseline, if it plans at all.
    pub baseline_config: Option<MemoryPoolConfig>,
    /// Full-pool tokens per average request.
    pub full_tokens_per_request: f64,
    /// SWA-pool tokens per average request.
    pub swa_tokens_per_request: f64,
    /// Bytes of the full pool left idle at that concurrency (suggested ratio).
    pub idle_full_bytes: u64,
    /// Bytes of the SWA pool left idle at that concurrency (suggested ratio).
    pub idle_swa_bytes: u64,
    /// Same, for the baseline ratio.
    pub baseline_idle_full_bytes: u64,
    /// Same, for the baseline ratio.
    pub baseline_idle_swa_bytes: u64,
}

/// Average requests `config` admits, and the idle bytes of each pool at that load.
fn load(
    cfg: &PoolConfigurator,
    config: &MemoryPoolConfig,
    f: f64,
    s: f64,
) -> Result<(u64, u64, u64)> {
    let (full, swa) = pool_tokens(config);
    let n = ((full as f64) / f).min((swa as f64) / s).floor().max(0.0);
    let what = "idle pool bytes";
    let full_row = mul(cfg.full_per_token(), cfg.shape().num_full_layers, what)?;
    let swa_row = mul(cfg.swa_per_token(), cfg.shape().num_swa_layers, what)?;
    // Float estimates of idle bytes; `as` saturates (a pool's bytes fit i64 anyway).
    let idle_full = ((full as f64 - n * f).max(0.0) * full_row as f64) as u64;
    let idle_swa = ((swa as f64 - n * s).max(0.0) * swa_row as f64) as u64;
    Ok((n as u64, idle_full, idle_swa))
}

/// The ratio at which the full and SWA pools run out together for a workload
/// of `context_lengths` (weighted by `weights`, else equally), at
/// `available_bytes`, with SGLang's sizing. It is the best of the balance point
/// `S/F`, its neighbours, the smallest ratio that clears the admission floor,
/// and the configurator's own ratio, so it never admits fewer requests than
/// that baseline and never breaks the admission floor.
pub fn suggest_swa_ratio(
    cfg: &PoolConfigurator,
    context_lengths: &[u64],
    weights: Option<&[f64]>,
    available_bytes: i64,
) -> Result<RatioSuggestion> {
    if cfg.kind() != ConfiguratorKind::HybridSwa || cfg.is_all_swa() {
        return Err(PlanError::invalid(format!(
            "suggest_swa_ratio needs a HybridSWAPoolConfigurator with full and SWA layers; this is {}{}",
            cfg.kind().class_name(),
            if cfg.is_all_swa() { " of an all-SWA model (no ratio)" } else { "" }
        )));
    }
    if context_lengths.is_empty() {
        return Err(PlanError::invalid("context_lengths is empty"));
    }
    let w: Vec<f64> = match weights {
        Some(ws) if ws.len() != context_lengths.len() => {
            return Err(PlanError::invalid(format!(
                "weights has {} entries, context_lengths {}",
                ws.len(),
                context_lengths.len()
            )))
        }
        Some(ws)
            if ws.iter().any(|x| !x.is_finite() || *x < 0.0)
                || !(ws.iter().sum::<f64>().is_finite() && ws.iter().sum::<f64>() > 0.0) =>
        {
            return Err(PlanError::invalid(
                "weights must be finite, >= 0, not all 0, and sum to a finite number",
            ))
        }
        Some(ws) => ws.to_vec(),
        None => vec![1.0; context_lengths.len()],
    };
    // Normalized weights (each at most 1), so the weighted sums cannot overflow.
    let total_w: f64 = w.iter().sum();
    let (mut f, mut s) = (0.0, 0.0);
    for (l, wi) in context_lengths.iter().zip(&w) {
        let fp = footprint(cfg, *l)?;
        f += wi / total_w * fp.full_tokens as f64;
        s += wi / total_w * fp.swa_tokens as f64;
    }

    let at = |r: f64| -> Option<(MemoryPoolConfig, u64, u64, u64)> {
        let c = cfg
            .with_ratio(r)
            .ok()?
            .calculate_pool_sizes(available_bytes, None)
            .ok()?;
        let (n, idle_f, idle_s) = load(cfg, &c, f, s).ok()?;
        Some((c, n, idle_f, idle_s))
    };
    let baseline_ratio = cfg.serving().swa_full_tokens_ratio;
    let balance = s / f;
    let mut candidates = vec![balance, baseline_ratio];
    for k in 1..=8 {
        let step = 0.005 * f64::from(k);
        candidates.push(balance * (1.0 + step));
        candidates.push(balance * (1.0 - step));
    }
    if let Some(r) = floor_ratio(cfg, available_bytes) {
        candidates.push(r);
    }
    let mut best: Option<(f64, (MemoryPoolConfig, u64, u64, u64))> = None;
    for r in candidates.into_iter().filter(|r| r.is_finite() && *r > 0.0) {
        if let Some(res) = at(r) {
            let better = match &best {
                None => true,
                Some((br, b)) => {
                    res.1 > b.1 || (res.1 == b.1 && (r - balance).abs() < (br - balance).abs())
                }
            };
            if better {
                best = Some((r, res));
            }
        }
    }
    let Some((ratio, (config, n, idle_full, idle_swa))) = best else {
        // Nothing plans: report the baseline's own error.
        let err = cfg
            .calculate_pool_sizes(available_bytes, None)
            .err()
            .unwrap_or_else(|| {
                PlanError::swa_too_small("no SWA ratio gives an SWA pool above the admission floor")
            });
        return Err(err);
    };
    let base = at(baseline_ratio);
    Ok(RatioSuggestion {
        ratio,
        concurrency: n,
        config,
        baseline_ratio,
        baseline_concurrency: base.as_ref().map_or(0, |b| b.1),
        baseline_config: base.as_ref().map(|b| b.0),
        full_tokens_per_request: f,
        swa_tokens_per_request: s,
        idle_full_bytes: idle_full,
        idle_swa_bytes: idle_swa,
        baseline_idle_full_bytes: base.as_ref().map_or(0, |b| b.2),
        baseline_idle_swa_bytes: base.as_ref().map_or(0, |b| b.3),
    })
}

/// The smallest ratio (to 1e-6 relative) whose SGLang sizing clears the admission floor, if any.
fn floor_ratio(cfg: &PoolConfigurator, available_bytes: i64) -> Option<f64> {
    let passes = |r: f64| match cfg
        .with_ratio(r)
        .and_then(|c| c.calculate_pool_sizes(available_bytes, None))
    {
        Ok(_) => Some(true),
        Err(e) if e.code == ErrorCode::SwaPoolTooSmall => Some(false),
        Err(_) => None,
    };
    let (mut lo, mut hi) = (1e-6, 1.0);
    while passes(hi) == Some(false) && hi < 1e6 {
        hi *= 2.0;
    }
    if passes(hi) != Some(true) {
        return None;
    }
    if passes(lo) == Some(true) {
        return Some(lo);
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if passes(mid) == Some(true) {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo < 1e-6 * hi {
            break;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::ModelGeometry;
    use crate::plan::Fit;
    use crate::spec::SpeculativeConfig;
    use crate::{AttentionShape, ServingConfig};

    fn gpt_oss(page: u64, ratio: f64) -> PoolConfigurator {
        let full: Vec<u64> = (0..36).filter(|i| i % 2 == 1).collect();
        let swa: Vec<u64> = (0..36).filter(|i| i % 2 == 0).collect();
        let m = ModelGeometry::new(
            full,
            swa,
            AttentionShape {
                num_kv_heads: 8,
                head_dim: 64,
                sliding_window_size: Some(127),
                ..AttentionShape::default()
            },
        )
        .unwrap();
        let s = ServingConfig {
            page_size: page,
            swa_full_tokens_ratio: ratio,
            chunked_prefill_size: Some(8192),
            ..ServingConfig::default()
        };
        PoolConfigurator::create(m, s, SpeculativeConfig::default()).unwrap()
    }

    #[test]
    fn footprint_caps_swa_at_window_chunk_and_page() {
        let cfg = gpt_oss(64, 0.8);
        assert_eq!(
            footprint(&cfg, 100).unwrap(),
            Footprint {
                full_tokens: 128,
                swa_tokens: 128
            }
        );
        // W 127 + chunk 8192 + p 64 = 8383 -> 8384 tokens.
        assert_eq!(
            footprint(&cfg, 100_000).unwrap(),
            Footprint {
                full_tokens: 100_032,
                swa_tokens: 8384
            }
        );
    }

    #[test]
    fn concurrency_is_the_tighter_pool() {
        let cfg = gpt_oss(64, 0.8);
        let c = MemoryPoolConfig {
            max_total_num_tokens: 1_000_000,
            full_max_total_num_tokens: Some(1_000_000),
            swa_max_total_num_tokens: Some(800_000),
            unified_memory_pool_bytes: None,
        };
        // Short requests: full 128 and SWA 128 per request; SWA (800k) limits.
        assert_eq!(concurrency(&cfg, &c, 100).unwrap(), 800_000 / 128);
        // Long requests: full limits.
        assert_eq!(concurrency(&cfg, &c, 100_000).unwrap(), 1_000_000 / 100_032);
        let l = max_context_len(&cfg, &c, 9).unwrap().unwrap();
        assert!(concurrency(&cfg, &c, l).unwrap() >= 9);
        assert!(concurrency(&cfg, &c, l + 1).unwrap() < 9);
    }

    #[test]
    fn min_budget_is_tight() {
        let cfg = gpt_oss(64, 0.8);
        let (bytes, _) = min_budget(&cfg, 32, 20_000).unwrap();
        let ok = |a: u64| {
            cfg.plan(a as i64, Fit::Exact)
                .is_ok_and(|p| concurrency(&cfg, &p.config, 20_000).unwrap() >= 32)
        };
        assert!(ok(bytes));
        assert!(!ok(bytes - 1));
    }

    #[test]
    fn suggested_ratio_beats_the_default_on_short_and_long_workloads() {
        let a = 30 << 30;
        for lens in [
            vec![512_u64; 4],
            vec![120_000; 4],
            vec![512, 4096, 32_000, 120_000],
        ] {
            let cfg = gpt_oss(64, 0.8);
            let r = suggest_swa_ratio(&cfg, &lens, None, a).unwrap();
            assert!(r.concurrency >= r.baseline_concurrency, "{lens:?}: {r:?}");
            assert!(cfg
                .with_ratio(r.ratio)
                .unwrap()
                .calculate_pool_sizes(a, None)
                .is_ok());
        }
    }
}
