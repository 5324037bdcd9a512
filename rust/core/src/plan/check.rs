//! The one plan checker: what a plan from anywhere (JSON, pickle, a caller)
//! must satisfy before it is trusted or allocated. `PoolPlan.from_json`,
//! `allocate` and the fuzz driver all run [`PoolPlan::check`].

use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec, TENSOR_ALIGNMENT};
use crate::dtype::StorageDtype;
use crate::error::{PlanError, Result};
use crate::sizing::ConfiguratorKind;
use std::collections::HashSet;

fn bad(what: impl std::fmt::Display) -> PlanError {
    PlanError::invalid(format!("plan: {what}"))
}

/// Checks that `t`'s shape gives its bytes, that it starts at the first aligned offset after
/// `end` and that its rows are right (`rows_ok`); returns where it ends.
fn placed(t: &TensorSpec, end: u64, rows_ok: bool, what: &str) -> Result<u64> {
    let bytes = t
        .shape
        .iter()
        .try_fold(t.dtype.bytes(), |acc, &d| acc.checked_mul(d));
    let want_offset = end.checked_next_multiple_of(TENSOR_ALIGNMENT);
    if !rows_ok || bytes != Some(t.nbytes) || want_offset != Some(t.offset) {
        return Err(bad(format!(
            "{what} has inconsistent shape, rows, nbytes or offset"
        )));
    }
    t.offset
        .checked_add(t.nbytes)
        .ok_or_else(|| bad(format!("{what}: size overflows")))
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

    /// Checks the unified pool: one byte buffer of `config`'s
    /// `unified_memory_pool_bytes`, rows = tokens (no padding page).
    fn check_unified(&self, pool: &PoolSpec) -> Result<u64> {
        let ok = pool.rows == pool.tokens
            && pool.padding_bytes == 0
            && pool.tensors.len() == 1
            && pool.tensors.iter().all(|t| {
                t.kind == TensorKind::Bytes
                    && t.pool == PoolName::Unified
                    && t.dtype == StorageDtype::Uint8
                    && t.shape == [pool.nbytes]
                    && t.nbytes == pool.nbytes
                    && t.offset == 0
                    && pool.layer_ids.first() == Some(&t.layer_id)
            })
            && u64::try_from(self.config.unified_memory_pool_bytes.unwrap_or(-1)).ok()
                == Some(pool.nbytes);
        if !ok {
            return Err(bad(
                "the unified pool must be one uint8 byte buffer of the config's unified_memory_pool_bytes, \
                 listed with its first layer, rows = tokens",
            ));
        }
        Ok(pool.nbytes)
    }

    /// Checks the state pool (`plan/state.rs`): rows = slots + 1, one record (layer 0)
    /// of state kinds, each tensor's dtype of its kind (conv-side, SSM-side, float32,
    /// int32 or int8 kinds alike), its slot axis `rows` or the one request count (at most
    /// `rows`) every per-request tensor shares, consecutive aligned offsets, and padding
    /// bytes one slot (or request) of each tensor. Beside a unified pool (`verify`) it holds
    /// the verify buffers alone (the state slots live in the unified buffer).
    fn check_state(pool: &PoolSpec, verify: bool) -> Result<u64> {
        use TensorKind as K;
        if pool.tokens.checked_add(1) != Some(pool.rows) || pool.layer_ids != [0] {
            return Err(bad(
                "the state pool must have rows = slots + 1 and one record, layer 0",
            ));
        }
        let (mut end, mut padding) = (0u64, 0u64);
        let mut seen = HashSet::new();
        let (mut conv, mut ssm, mut requests) = (None, None, None);
        for t in &pool.tensors {
            let what = format!("state tensor {}", t.kind.as_str());
            let floats = [
                StorageDtype::Float32,
                StorageDtype::Bfloat16,
                StorageDtype::Float16,
            ];
            let dtype_ok = match t.kind {
                K::ConvState
                | K::IntermediateConv
                | K::ReplayD
                | K::ReplayK
                | K::ReplayRawV
                | K::ReplayRawK => {
                    floats.contains(&t.dtype) && *conv.get_or_insert(t.dtype) == t.dtype
                }
                K::TemporalState | K::IntermediateSsm => {
                    floats.contains(&t.dtype) && *ssm.get_or_insert(t.dtype) == t.dtype
                }
                K::ReplayG | K::ReplayBeta => t.dtype == StorageDtype::Float32,
                K::ReplayWritePos | K::ReplayCacheBase => t.dtype == StorageDtype::Int32,
                K::ReplayIsFlush => t.dtype == StorageDtype::Int8,
                K::StateExtra => t.dtype == StorageDtype::Uint8,
                _ => return Err(bad(format!("{what}: not a state tensor kind"))),
            };
            if t.pool != PoolName::State || t.layer_id != 0 || !seen.insert(t.kind) || !dtype_ok {
                return Err(bad(format!(
                    "{what}: wrong pool, layer, dtype, or listed twice"
                )));
            }
            let axis = super::state::row_axis(t.kind);
            let count = *t
                .shape
                .get(axis)
                .ok_or_else(|| bad(format!("{what}: too few dims")))?;
            let by_slot = matches!(
                t.kind,
                K::ConvState | K::TemporalState | K::StateExtra | K::ReplayBeta
            );
            let per_request = matches!(
                t.kind,
                K::IntermediateSsm
                    | K::IntermediateConv
                    | K::ReplayWritePos
                    | K::ReplayCacheBase
                    | K::ReplayIsFlush
            );
            let rows_ok = if by_slot {
                count == pool.rows
            } else if per_request {
                count <= pool.rows && *requests.get_or_insert(count) == count
            } else {
                count == pool.rows || count <= pool.rows && *requests.get_or_insert(count) == count
            };
            end = placed(t, end, rows_ok && count > 0, &what)?;
            padding = padding
                .checked_add(t.nbytes / count)
                .ok_or_else(|| bad("state padding overflows"))?;
        }
        let slots = seen.contains(&K::ConvState) && seen.contains(&K::TemporalState);
        let verify_only = seen
            .iter()
            .all(|k| matches!(k, K::IntermediateSsm | K::IntermediateConv));
        if !(if verify {
            verify_only && !seen.is_empty()
        } else {
            slots
        }) {
            return Err(bad(if verify {
                "the state pool beside a unified pool holds the verify buffers alone"
            } else {
                "the state pool holds no conv or temporal state"
            }));
        }
        if end != pool.nbytes || padding != pool.padding_bytes {
            return Err(bad(
                "the state pool's nbytes or padding_bytes does not match its tensors",
            ));
        }
        Ok(end)
    }

    /// Checks one pool; returns its slab bytes.
    fn check_pool(&self, pool: &PoolSpec) -> Result<u64> {
        let name = pool.name.as_str();
        if pool.name == PoolName::Unified {
            return self.check_unified(pool);
        }
        if pool.name == PoolName::State {
            return Self::check_state(pool, self.pool(PoolName::Unified).is_some());
        }
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
                | TensorKind::Cache
                | TensorKind::NativeKScale
                | TensorKind::NativeVScale
                | TensorKind::DqK
                | TensorKind::DqV
                | TensorKind::Entry
                | TensorKind::Bytes
                | TensorKind::IndexK => StorageDtype::Uint8,
                _ => {
                    return Err(bad(format!(
                        "{what}: a state tensor outside the state pool"
                    )))
                }
            };
            if t.dtype != want_dtype {
                return Err(bad(format!(
                    "{what} is {}, but the pool's {} KV cache stores it as {}",
                    t.dtype.torch_name(),
                    pool.kv_cache_dtype.as_str(),
                    want_dtype.torch_name()
                )));
            }
            end = placed(t, end, t.shape.first() == Some(&pool.rows), &what)?;
            // rows >= 1 (page_size >= 1), and nbytes is a multiple of rows by the shape.
            row_bytes = row_bytes
                .checked_add(t.nbytes / pool.rows.max(1))
                .ok_or_else(|| bad(format!("{what}: row bytes overflow")))?;
        }
        let with_tensors: HashSet<u64> = seen.iter().map(|(l, _)| *l).collect();
        // A fused entry is one buffer for every layer of its pool, listed with the first.
        let fused = seen.iter().any(|(_, k)| *k == TensorKind::Entry);
        if fused && (pool.tensors.len() != 1 || pool.tensors[0].layer_id != pool.layer_ids[0]) {
            return Err(bad(format!(
                "pool {name} holds a fused entry: it must be the pool's one tensor, listed with its first layer"
            )));
        }
        if let Some(id) = pool
            .layer_ids
            .iter()
            .find(|id| !fused && !with_tensors.contains(id))
        {
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
        let unified = self.pool(PoolName::Unified);
        let tokens = |n: PoolName| match (n, unified) {
            (PoolName::Full, Some(u)) => Some(u.tokens),
            _ => self.pool(n).map(|p| p.tokens),
        };
        let c = &self.config;
        let as_tokens = |v: Option<i64>| {
            v.map(|x| u64::try_from(x).map_err(|_| bad("config holds a negative count")))
        };
        let full = as_tokens(c.full_max_total_num_tokens).transpose()?;
        let swa = as_tokens(c.swa_max_total_num_tokens).transpose()?;
        let max_total = u64::try_from(c.max_total_num_tokens)
            .map_err(|_| bad("config holds a negative max_total_num_tokens"))?;
        let agrees = if self.configurator == ConfiguratorKind::Default {
            // A stage without attention layers: the state pool alone, max_total SGLang's label.
            let state_only = self.pools.len() == 1 && self.pool(PoolName::State).is_some();
            full.is_none()
                && swa.is_none()
                && (tokens(PoolName::Full) == Some(max_total) || state_only)
        } else {
            let full_ok = match tokens(PoolName::Full) {
                Some(t) => full == Some(t) && max_total == t,
                // an all-SWA target: no full pool, max_total is the SWA pool
                None => full == Some(0) && swa == Some(max_total),
            };
            let swa_ok = match unified {
                Some(_) => swa.is_some(),
                None => swa == tokens(PoolName::Swa),
            };
            full_ok && swa_ok
        };
        if !agrees {
            return Err(bad(format!(
                "config {c:?} disagrees with the pools' token counts"
            )));
        }
        if unified.is_none() && c.unified_memory_pool_bytes.is_some() {
            return Err(bad(
                "config names unified_memory_pool_bytes but the plan has no unified pool",
            ));
        }
        if let Some(d) = self.pool(PoolName::Draft) {
            let span_ok = unified.is_some_and(|u| {
                // Sized over the unified pool's virtual ids, ceil_p(bytes // U - 1)
                // tokens with U >= 1 bytes per full token: page-aligned, its rows
                // at least the full tokens, its tokens at most the pool's bytes.
                d.tokens % self.page_size.max(1) == 0
                    && d.rows >= u.tokens
                    && d.tokens <= u.nbytes.saturating_add(self.page_size)
            });
            if !span_ok
                && Some(d.tokens) != tokens(PoolName::Full)
                && Some(d.tokens) != tokens(PoolName::Swa)
            {
                return Err(bad("the draft pool's tokens match neither target pool"));
            }
        }
        if let Some(d) = self.pool(PoolName::DraftSwa) {
            if swa != Some(d.tokens) {
                return Err(bad("the draft_swa pool's tokens are not the SWA pool's"));
            }
        }
        Ok(())
    }
}
