//! Unified memory (SGLang's `--enable-unified-memory`): full and SWA layers
//! share one byte pool of `full * U + swa * S * n_s` bytes, the draft pool is
//! sized over the pool's virtual ids (`ceil_p(span) + p` tokens, `span =
//! bytes // U - 1`), and the full capacity is the largest page-aligned count
//! whose allocation fits (SGLang's `_max_unified_full_tokens`, a bisection).

use super::Sizing;
use crate::arith::{floor_div, to_i64};
use crate::error::Fail;

impl Sizing {
    /// Bytes one full-side token takes in the unified pool: the fused entry, else `F * n_f`.
    #[inline(always)]
    pub fn unified_full_cell(&self) -> u64 {
        if self.fused_full {
            self.full_cell
        } else {
            // F * n_f <= F * (n_f + d_f), which init_swa computed checked.
            self.full_per_token * self.num_full_layers
        }
    }

    /// The unified pool's bytes for `full` and `swa` tokens: `full * U + swa * S * n_s`
    /// (saturating at `i128::MAX`).
    #[inline(always)]
    pub fn unified_pool_bytes(&self, full: i64, swa: i64) -> i128 {
        // Saturating: a count beyond i128 is beyond any budget (and refused as an overflow).
        let swa_row =
            i128::from(self.swa_per_token).saturating_mul(i128::from(self.num_swa_layers));
        // i64 * u64 fits in i128; the saturating sum keeps "beyond any budget" monotone.
        (i128::from(full) * i128::from(self.unified_full_cell()))
            .saturating_add(i128::from(swa).saturating_mul(swa_row))
    }

    /// Unified memory: the bytes allocated at `full_pages` pages of full
    /// tokens (the unified pool, then the draft pool sized over the virtual-id
    /// span, `ceil_p(span) + p` tokens).
    fn unified_allocation_bytes<E: Fail>(
        &self,
        full_pages: i64,
        p: i64,
        fixed_swa: Option<i64>,
    ) -> std::result::Result<i128, E> {
        let full = full_pages * p;
        let swa = match fixed_swa {
            Some(t) => t,
            None => floor_div(self.ratio_tokens(full)?, p) * p,
        };
        let target = self.unified_pool_bytes(full, swa);
        let u = i128::from(self.unified_full_cell().max(1));
        let span = (target.div_euclid(u) - 1).max(0);
        let p128 = i128::from(p);
        // ceil_p(span) + p, saturating: a span near i128::MAX comes from a saturated target.
        let draft_tokens = span
            .saturating_add(p128 - 1)
            .div_euclid(p128)
            .saturating_mul(p128)
            .saturating_add(p128);
        // Saturated sums stand for "more than any budget", as Python's unbounded ints compare.
        let draft = draft_tokens.saturating_mul(i128::from(self.draft_pool_cell::<E>()?));
        Ok(target.saturating_add(draft))
    }

    /// Unified memory: the largest page-aligned full capacity whose allocation
    /// fits `available_bytes` (SGLang's `_max_unified_full_tokens`), tokens.
    pub fn max_unified_full_tokens<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
        fixed_swa: Option<i64>,
    ) -> std::result::Result<i64, E> {
        let u = self.unified_full_cell();
        if u == 0 {
            return Err(E::invalid_with(|| {
                "unified memory needs full-side bytes per token".into()
            }));
        }
        let max_pages = floor_div(floor_div(available_bytes, to_i64(u, "unified cell")?), p);
        let a = i128::from(available_bytes);
        // The largest pages in 0..=max_pages whose bytes fit; -1 (then 0) when none does.
        let (mut lo, mut hi) = (-1i128, i128::from(max_pages) + 1);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            // mid lies in 0..=max_pages, an i64.
            if self.unified_allocation_bytes::<E>(mid as i64, p, fixed_swa)? <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(lo.max(0) as i64 * p)
    }
}

#[cfg(test)]
mod tests {
    use crate::error::ErrorCode;
    use crate::{
        AttentionShape, PoolConfigurator, Scenario, ServingConfig, SpecAlgorithm, SpeculativeConfig,
    };

    #[test]
    fn the_bisection_is_the_largest_fitting_page_count() {
        let shape = AttentionShape {
            num_full_layers: 2,
            num_swa_layers: 6,
            num_kv_heads: 2,
            head_dim: 64,
            sliding_window_size: Some(127),
            ..AttentionShape::default()
        };
        let serving = ServingConfig {
            enable_unified_memory: true,
            page_size: 16,
            swa_full_tokens_ratio: 0.37,
            ..ServingConfig::default()
        };
        let spec = SpeculativeConfig {
            algorithm: SpecAlgorithm::Eagle3,
            draft_num_layers: 2,
            draft_swa_num_layers: 1,
            ..SpeculativeConfig::default()
        };
        let sc = Scenario {
            shape,
            serving,
            spec,
        }
        .resolved()
        .unwrap();
        let cfg = PoolConfigurator::from_scenario(None, &sc).unwrap();
        let s = cfg.sizing();
        assert!(s.unified && s.draft_pool_cell::<ErrorCode>().unwrap() > 0);
        for a in [0i64, 1, 5_000, 123_456, 1 << 20, 987_654_321] {
            let got = s.max_unified_full_tokens::<ErrorCode>(a, 16, None).unwrap();
            // A linear scan of SGLang's allocation bytes.
            let fits = |pages: i64| {
                s.unified_allocation_bytes::<ErrorCode>(pages, 16, None)
                    .unwrap()
                    <= i128::from(a)
            };
            let want = (0..=a / 256 / 16 + 1)
                .filter(|p| fits(*p))
                .max()
                .unwrap_or(0)
                * 16;
            assert_eq!(got, want, "budget {a}");
        }
    }

    /// Found by the coverage-guided fuzzer (batch and api targets): fused
    /// entries with a huge SWA row saturate the pool's bytes at i128::MAX, and
    /// the draft span's page rounding overflowed (a panic in the wheel).
    #[test]
    fn a_saturated_pool_size_is_over_budget_not_a_panic() {
        let shape = AttentionShape {
            num_full_layers: 1,
            num_swa_layers: 129,
            num_kv_heads: 1,
            head_dim: 64,
            sliding_window_size: Some(127),
            ..AttentionShape::default()
        };
        let serving = ServingConfig {
            enable_unified_memory: true,
            ..ServingConfig::default()
        };
        let sc = Scenario {
            shape,
            serving,
            spec: SpeculativeConfig::default(),
        }
        .resolved()
        .unwrap();
        let cfg = PoolConfigurator::from_scenario(None, &sc).unwrap();
        let mut s = *cfg.sizing();
        (s.swa_per_token, s.full_cell, s.fused_full) = (2_314_168_040_099_108_324, 1, true);
        let p = 1_457_990_165_580_554_601;
        let bytes = s.unified_allocation_bytes::<ErrorCode>(3, p, None).unwrap();
        assert_eq!(bytes, i128::MAX);
        assert_eq!(
            s.max_unified_full_tokens::<ErrorCode>(i64::MAX, p, None)
                .unwrap(),
            p
        );
    }
}
