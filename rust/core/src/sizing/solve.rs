//! The two solve paths of each configurator: pool sizes from available bytes
//! (the profiling path) and from a token count (the constraint path), with
//! SGLang's alignment, admission floor and errors.

use super::{CellSize, ConfiguratorKind, Sizing};
use crate::arith::{align_down, mul, narrow, py_int_floordiv, to_i64};
use crate::error::{Fail, PlanError, Result};
use crate::fields::MemoryPoolConfig;

impl Sizing {
    /// The admission floor: with a window W, the SWA pool must exceed `W + page_size` tokens.
    /// `Err(SwaPoolTooSmall)` when `swa` tokens do not.
    #[inline(always)]
    pub fn check_admission_floor<E: Fail>(&self, swa: i64) -> std::result::Result<(), E> {
        // No window: no floor (below every token count, so that the test below
        // needs no branch on the window: batch rows come with and without one).
        let floor = self
            .sliding_window_size
            .map_or(i128::MIN, |w| i128::from(w) + i128::from(self.page_size));
        if floor >= i128::from(swa) {
            let w = self.sliding_window_size.unwrap_or_default();
            return Err(E::swa_too_small_with(|| {
                format!(
                    "SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is \
                     sliding_window_size ({w}) + page_size ({}). Increase swa_full_tokens_ratio \
                     (now {}) or the total KV budget.",
                    self.page_size, self.swa_full_tokens_ratio
                )
            }));
        }
        Ok(())
    }

    /// The pool config of an SWA kind at `full` and `swa` tokens (SGLang's
    /// `_make_pool_config`): not enough memory when `full <= 0`.
    #[inline(always)]
    fn swa_config<E: Fail>(&self, full: i64, swa: i64) -> std::result::Result<MemoryPoolConfig, E> {
        if full <= 0 {
            return Err(not_enough(full));
        }
        let unified = if self.unified {
            Some(narrow(
                self.unified_pool_bytes(full, swa),
                "unified pool bytes",
            )?)
        } else {
            None
        };
        Ok(MemoryPoolConfig {
            max_total_num_tokens: full,
            full_max_total_num_tokens: Some(full),
            swa_max_total_num_tokens: Some(swa),
            unified_memory_pool_bytes: unified,
        })
    }

    /// HybridSWA's split of a token count into pools (SGLang's `_solve_pool_sizes`).
    #[inline(always)]
    fn solve_hybrid<E: Fail>(
        &self,
        max_total: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        if self.num_full_layers == 0 {
            let swa = align_down(max_total, p)?;
            if swa <= 0 {
                return Err(not_enough(swa));
            }
            return Ok(pools(swa, Some(0), Some(swa)));
        }
        let full = align_down(max_total, p)?;
        let swa = align_down(self.ratio_tokens(full)?, p)?;
        if !self.unified {
            self.check_admission_floor(swa)?;
        }
        self.swa_config(full, swa)
    }

    /// The profiling path: pool sizes from available bytes on this rank
    /// (`page_size: None` is the serving page size).
    pub fn calculate_pool_sizes(
        &self,
        available_bytes: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        self.pools_from_bytes(available_bytes, page_size)
    }

    /// [`Self::calculate_pool_sizes`] for any error type.
    #[inline]
    pub(crate) fn pools_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        page_size: Option<u64>,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let p = self.resolve_page_size(page_size)?;
        match self.kind {
            ConfiguratorKind::Default => self.default_from_bytes(available_bytes, p),
            ConfiguratorKind::HybridSwa => self.hybrid_from_bytes(available_bytes, p),
            ConfiguratorKind::RequestCap => self.request_cap_from_bytes(available_bytes, p),
        }
    }

    /// Default's profiling path at page size `p`.
    #[inline(always)]
    pub fn default_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let CellSize::Int(c) = self.cell_size else {
            return Err(E::invalid_with(|| {
                "DefaultPoolConfigurator has an integer cell size".into()
            }));
        };
        let t = available_bytes.div_euclid(to_i64(c, "cell size")?);
        self.pools_from_max_tokens(t, p)
    }

    /// HybridSWA's profiling path at page size `p` (unified memory with full
    /// layers: the largest full capacity whose allocation fits).
    #[inline(always)]
    pub fn hybrid_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let t = if self.unified && self.num_full_layers > 0 {
            self.max_unified_full_tokens(available_bytes, p, None)?
        } else {
            match self.cell_size {
                CellSize::Int(c) => available_bytes.div_euclid(to_i64(c, "cell size")?),
                CellSize::Float(c) => py_int_floordiv(available_bytes as f64, c, "max tokens")?,
            }
        };
        self.solve_hybrid(t, p)
    }

    /// RequestCap's profiling path at page size `p`: the SWA pool at its cap,
    /// the rest to the full pool.
    #[inline(always)]
    pub fn request_cap_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let what = "RequestCap pool sizes";
        let swa = self.request_cap_swa_tokens(p)?;
        let fixed = mul(swa as u64, self.swa_cell, what)?;
        let full = if self.unified && self.draft_pool_cell::<E>()? > 0 {
            self.max_unified_full_tokens(available_bytes, p, Some(swa))?
        } else {
            let full_cell = self.request_cap_full_cell()?;
            let rest = i128::from(available_bytes) - i128::from(fixed);
            align_down(
                narrow(rest.div_euclid(i128::from(full_cell.max(1))), what)?,
                p,
            )?
        };
        if full <= 0 {
            return Err(E::not_enough_memory_with(|| {
                format!(
                    "SWA cap leaves no room for the full pool: the SWA pool cap ({swa} tokens, {fixed} bytes) \
                     leaves no room for the full KV pool within the available {available_bytes} bytes. \
                     Reduce max_running_requests, lower swa_eviction_interval, or raise the budget."
                )
            }));
        }
        self.swa_config(full, swa)
    }

    /// The constraint path: pool sizes from a token count (a user cap, or the
    /// MIN across ranks); `page_size: None` is the serving page size.
    #[inline]
    pub fn calculate_pool_sizes_from_max_tokens(
        &self,
        max_total_num_tokens: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        let p = self.resolve_page_size::<PlanError>(page_size)?;
        self.pools_from_max_tokens(max_total_num_tokens, p)
    }

    #[inline(always)]
    fn pools_from_max_tokens<E: Fail>(
        &self,
        max_total_num_tokens: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        match self.kind {
            ConfiguratorKind::Default => {
                let t = align_down(max_total_num_tokens, p)?;
                if t <= 0 {
                    return Err(not_enough(t));
                }
                Ok(pools(t, None, None))
            }
            ConfiguratorKind::HybridSwa => self.solve_hybrid(max_total_num_tokens, p),
            ConfiguratorKind::RequestCap => {
                let swa = self.request_cap_swa_tokens(p)?;
                let full = align_down(max_total_num_tokens, p)?;
                self.swa_config(full, swa.min(max_total_num_tokens))
            }
        }
    }
}

#[inline]
fn pools(max_total: i64, full: Option<i64>, swa: Option<i64>) -> MemoryPoolConfig {
    MemoryPoolConfig {
        max_total_num_tokens: max_total,
        full_max_total_num_tokens: full,
        swa_max_total_num_tokens: swa,
        unified_memory_pool_bytes: None,
    }
}

fn not_enough<E: Fail>(tokens: i64) -> E {
    E::not_enough_memory_with(|| {
        format!(
            "Not enough memory: max_total_num_tokens would be {tokens}. Increase the KV budget \
             (mem_fraction_static) or lower the draft or pool requirements."
        )
    })
}
