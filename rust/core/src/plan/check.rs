//! The one plan checker: what a plan from anywhere (JSON, pickle, a caller)
//! must satisfy before it is trusted or allocated. `PoolPlan.from_json`,
//! `allocate` and the fuzz driver all run [`PoolPlan::check`].

use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TENSOR_ALIGNMENT};
use crate::dtype::StorageDtype;
use crate::error::{PlanError, Result};
use crate::sizing::ConfiguratorKind;
use std::collections::HashSet;

fn bad(what: impl std::fmt::Display) -> PlanError {
    PlanError::invalid(format!("plan: {what}"))
}

impl PoolPlan {
    /// Checks that the plan is self-consistent: each pool's rows are its
    /// tokens plus a page, every tensor's shape gives its bytes and starts at
    /// the next [`TENSOR_ALIGNMENT`] boundary of its pool's slab, the pools'
    /// bytes add up to `total_bytes`, padding is a page of rows, dtypes match
    /// the pool's KV dtype, every listed layer has tensors and no
    /// (layer, kind) repeats, pools appear once, `config` names the pools'
    /// token counts, and an exact fit stays within `available_bytes`.
    pub fn check(&self) -> Result<()> {
        let mut total: u64 = 0;
        let mut names = HashSet::new();
        for pool in &self.pools {
            if !names.insert(pool.name) {
                return Err(bad(format!("pool {} is listed twice", pool.name.as_str())));
            }
            total = total
                .checked_add(self.check_pool(pool)?)
                .filter(|t| *t <= crate::arith::MAX_QUANTITY)
                .ok_or_else(|| bad("total bytes overflow"))?;
        }
        if total != self.total_bytes {
            return Err(bad(format!(
                "total_bytes {} does not equal the sum of its pools, {total}",
                self.total_bytes
            )));
        }
        if self.fit == Fit::Exact && i128::from(self.total_bytes) > i128::from(self.available_bytes)
        {
            return Err(bad(format!(
                "an exact fit takes {} bytes, above its available_bytes {}",
                self.total_bytes, self.available_bytes
            )));
        }
        self.check_config()
    }

    /// Checks one pool; returns its slab bytes.
    fn check_pool(&self, pool: &PoolSpec) -> Result<u64> {
        let name = pool.name.as_str();
        if pool.tokens.checked_add(self.page_size) != Some(pool.rows) {
            return Err(bad(format!("pool {name} has rows != tokens + page_size")));
        }
        let layers: HashSet<u64> = pool.layer_ids.iter().copied().collect();
        if layers.len() != pool.layer_ids.len() {
            return Err(bad(format!("pool {name} lists a layer id twice")));
        }
        let storage = pool.kv_cache_dtype.storage();
        let mut seen = HashSet::new();
        let mut end: u64 = 0;
        let mut row_bytes: u64 = 0;
        for t in &pool.tensors {
            let what = format!(
                "tensor {} of layer {} in pool {name}",
                t.kind.as_str(),
                t.layer_id
            );
            if t.pool != pool.name {
                return Err(bad(format!(
                    "{what} says it is in pool {}",
                    t.pool.as_str()
                )));
            }
            if !layers.contains(&t.layer_id) {
                return Err(bad(format!(
                    "{what}: its layer is not in the pool's layer_ids"
                )));
            }
            if !seen.insert((t.layer_id, t.kind)) {
                return Err(bad(format!("{what} appears twice")));
            }
            let want_dtype = match t.kind {
                TensorKind::K | TensorKind::V | TensorKind::Kv => storage,
                TensorKind::KScale
                | TensorKind::VScale
                | TensorKind::KvScale
                | TensorKind::Cache => StorageDtype::Uint8,
            };
            if t.dtype != want_dtype {
                return Err(bad(format!(
                    "{what} is {}, but the pool's {} KV cache stores it as {}",
                    t.dtype.torch_name(),
                    pool.kv_cache_dtype.as_str(),
                    want_dtype.torch_name()
                )));
            }
            let bytes = t
                .shape
                .iter()
                .try_fold(t.dtype.bytes(), |acc, &d| acc.checked_mul(d))
                .ok_or_else(|| bad(format!("{what}: shape overflows")))?;
            let want_offset = end
                .checked_next_multiple_of(TENSOR_ALIGNMENT)
                .ok_or_else(|| bad(format!("{what}: offset overflows")))?;
            if bytes != t.nbytes || t.offset != want_offset || t.shape.first() != Some(&pool.rows) {
                return Err(bad(format!(
                    "{what} has inconsistent shape, rows, nbytes or offset"
                )));
            }
            end = t
                .offset
                .checked_add(t.nbytes)
                .ok_or_else(|| bad(format!("{what}: size overflows")))?;
            // rows >= 1 (page_size >= 1), and nbytes is a multiple of rows by the shape.
            row_bytes = row_bytes
                .checked_add(t.nbytes / pool.rows.max(1))
                .ok_or_else(|| bad(format!("{what}: row bytes overflow")))?;
        }
        let with_tensors: HashSet<u64> = seen.iter().map(|(l, _)| *l).collect();
        if let Some(id) = pool.layer_ids.iter().find(|id| !with_tensors.contains(id)) {
            return Err(bad(format!("layer {id} of pool {name} has no tensors")));
        }
        if end != pool.nbytes {
            return Err(bad(format!(
                "pool {name} nbytes does not match its tensors"
            )));
        }
        if self.page_size.checked_mul(row_bytes) != Some(pool.padding_bytes) {
            return Err(bad(format!(
                "pool {name} padding_bytes is not page_size rows of its tensors"
            )));
        }
        Ok(end)
    }

    /// `config` must name the pools' token counts.
    fn check_config(&self) -> Result<()> {
        let tokens = |n: PoolName| self.pool(n).map(|p| p.tokens);
        let c = &self.config;
        let as_tokens = |v: Option<i64>| {
            v.map(|x| u64::try_from(x).map_err(|_| bad("config holds a negative count")))
        };
        let full = as_tokens(c.full_max_total_num_tokens).transpose()?;
        let swa = as_tokens(c.swa_max_total_num_tokens).transpose()?;
        let max_total = u64::try_from(c.max_total_num_tokens)
            .map_err(|_| bad("config holds a negative max_total_num_tokens"))?;
        let agrees = if self.configurator == ConfiguratorKind::Default {
            full.is_none() && swa.is_none() && tokens(PoolName::Full) == Some(max_total)
        } else {
            let full_ok = match tokens(PoolName::Full) {
                Some(t) => full == Some(t) && max_total == t,
                // an all-SWA target: no full pool, max_total is the SWA pool
                None => full == Some(0) && swa == Some(max_total),
            };
            full_ok && swa == tokens(PoolName::Swa)
        };
        if !agrees {
            return Err(bad(format!(
                "config {c:?} disagrees with the pools' token counts"
            )));
        }
        if let Some(d) = self.pool(PoolName::Draft) {
            if Some(d.tokens) != tokens(PoolName::Full) && Some(d.tokens) != tokens(PoolName::Swa) {
                return Err(bad("the draft pool's tokens match neither target pool"));
            }
        }
        Ok(())
    }
}
