//! How a configurator's pools are laid out: each pool's layers and tensors
//! per row, the slab layout at a token count, and the exact fit (the largest
//! page-aligned count whose bytes fit a budget).

use super::tensors::{
    dequant_workspace, layers_of, layout_pool, mha_layer, mla_layer, pool, tensor, PoolLayout,
    Sized, TensorLayout,
};
use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec};
use crate::arith::{add, align_down, last_fitting, mul, narrow};
use crate::cell::{kv_heads_per_rank, mla_cache_dim, swa_kv_heads_per_rank};
use crate::configurator::PoolConfigurator;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::fields::MemoryPoolConfig;
use crate::fp4::{fp4_buffers, Fp4Buffers};
use crate::geometry::{DraftCapacity, DsaIndexer, DSA_QUANT_BLOCK};
use crate::sizing::ConfiguratorKind;

/// The most target plus draft layers an exact plan holds (far above any real
/// model; it bounds a plan to a few hundred thousand tensors).
pub const MAX_PLAN_LAYERS: u64 = 1 << 16;

/// The planner's view of a configurator: its pools, and how their token
/// counts follow from one primary count `x` (full tokens, or SWA tokens for
/// an all-SWA target).
#[derive(Debug, Clone)]
pub struct PlanLayout<'a> {
    cfg: &'a PoolConfigurator,
    pools: Vec<PoolLayout>,
}

/// Which layers a pool holds and what each layer's tensors are.
struct Geometry<'s> {
    cfg: &'s PoolConfigurator,
    dtype: KvDtype,
    buffers: Option<Fp4Buffers>,
}

impl Geometry<'_> {
    fn heads(&self, h: u64) -> u64 {
        let s = self.cfg.serving();
        if self.cfg.kind() == ConfiguratorKind::Default {
            kv_heads_per_rank(h, s.tp_size, s.heads_dcp_size())
        } else {
            swa_kv_heads_per_rank(h, s.tp_size)
        }
    }

    /// A full layer's tensors, and the pool-wide workspace they need.
    fn full(&self) -> Result<(Vec<TensorLayout>, Vec<TensorLayout>)> {
        let m = self.cfg.shape();
        match &m.mla() {
            Some(mla) => {
                let mut ts = mla_layer(mla_cache_dim(m, mla, self.cfg.serving())?, self.dtype)?;
                if let Some(dsa) = m.dsa() {
                    ts.push(self.index_keys(dsa)?);
                }
                Ok((ts, Vec::new()))
            }
            None => self.mha(self.heads(m.num_kv_heads), m.head_dim, m.v_dim()),
        }
    }

    /// A DSA layer's index-key tensor, as SGLang's `DSATokenToKVPool` allocates
    /// it on CUDA: 64-token physical pages (`page_size = 64 * index_kpool`), so
    /// `rows / index_kpool` keys of `key_bytes` per layer. Its asserts are errors here.
    fn index_keys(&self, dsa: DsaIndexer) -> Result<TensorLayout> {
        let s = self.cfg.serving();
        let (dim, kpool) = (dsa.index_head_dim, dsa.index_kpool);
        if dim != DSA_QUANT_BLOCK {
            return Err(PlanError::invalid(format!(
                "SGLang's DSA pool needs index_head_dim == {DSA_QUANT_BLOCK}, got {dim}"
            )));
        }
        let pages = mul(64, kpool, "the DSA page size")?;
        if s.page_size != pages {
            return Err(PlanError::invalid(format!(
                "DSA requires 64-token physical pages, got page_size={} with index_kpool={kpool} \
                 (SGLang's DSATokenToKVPool on CUDA; its launch sets --page-size {pages})",
                s.page_size,
            )));
        }
        if s.kv_dtype() == KvDtype::Mxfp8 {
            return Err(PlanError::invalid(
                "the exact plan does not model a DSA pool in mxfp8 (SGLang's sizing, calculate_pool_sizes, does)",
            ));
        }
        if self.cfg.shape().index_shared_layers > 0 {
            return Err(PlanError::invalid(
                "the exact plan needs the ids of the DSA layers sharing top-k (index_shared_layers \
                 gives their count only; SGLang's sizing, calculate_pool_sizes, needs no more)",
            ));
        }
        let key = dsa.key_bytes::<PlanError>()?;
        if key % kpool != 0 || s.dcp_size != 1 {
            return Err(PlanError::invalid(format!(
                "the exact plan models DSA index keys of whole bytes per token without decode context \
                 parallelism; got {key} bytes per {kpool} tokens at dcp_size={}",
                s.dcp_size
            )));
        }
        tensor(TensorKind::IndexK, vec![key / kpool], StorageDtype::Uint8)
    }

    /// An SWA layer's tensors, and the pool-wide workspace they need.
    fn swa(&self) -> Result<(Vec<TensorLayout>, Vec<TensorLayout>)> {
        let m = self.cfg.shape();
        match &m.swa_mla() {
            Some(mla) => Ok((
                mla_layer(mla_cache_dim(m, mla, self.cfg.serving())?, self.dtype)?,
                Vec::new(),
            )),
            None => self.mha(self.heads(m.swa_heads()), m.swa_k_dim(), m.swa_v_dim()),
        }
    }

    fn mha(&self, heads: u64, dk: u64, dv: u64) -> Result<(Vec<TensorLayout>, Vec<TensorLayout>)> {
        let ws = match self.buffers {
            Some(b) if b.dequant_workspace => dequant_workspace(heads, dk)?,
            _ => Vec::new(),
        };
        Ok((mha_layer(heads, dk, dv, self.dtype, self.buffers)?, ws))
    }

    /// A pool of the target layers `ids` at one geometry, or its fused entry.
    fn target_pool(
        &self,
        name: PoolName,
        sized: Sized,
        ids: Vec<u64>,
        layer: &(Vec<TensorLayout>, Vec<TensorLayout>),
        fused_entry: Option<u64>,
    ) -> Result<PoolLayout> {
        let mut ids = ids;
        ids.sort_unstable();
        let layers = match fused_entry {
            // One entry per token holds the target's layers, the draft's and the padding.
            Some(bytes) => {
                let entry = tensor(TensorKind::Entry, vec![bytes], StorageDtype::Uint8)?;
                let mut layers: Vec<_> = ids.iter().map(|id| (*id, Vec::new())).collect();
                if let Some(first) = layers.first_mut() {
                    first.1.push(entry);
                }
                layers
            }
            None => layers_of(ids, &layer.0, &layer.1),
        };
        pool(name, sized, self.dtype, layers)
    }
}

impl<'a> PlanLayout<'a> {
    /// Lays out the pools of `cfg` (shapes per row; token counts come later).
    /// At most [`MAX_PLAN_LAYERS`] target and draft layers: a plan lists every
    /// layer's tensors. Refuses the pools SGLang does not build under unified
    /// memory ([`PoolConfigurator::check_unified_default`]).
    pub fn new(cfg: &'a PoolConfigurator) -> Result<Self> {
        cfg.check_unified_default()?;
        let m = cfg.shape();
        let layers = m.num_layers() + cfg.spec().num_draft_layers();
        if layers > MAX_PLAN_LAYERS {
            return Err(PlanError::invalid(format!(
                "an exact plan lists every layer's tensors: at most {MAX_PLAN_LAYERS} target and draft \
                 layers, got {layers} (SGLang's sizing, calculate_pool_sizes, has no such limit)"
            )));
        }
        let crate::LayerIds {
            full: full_ids,
            swa: swa_ids,
        } = cfg.layer_ids();
        let s = cfg.serving();
        let spec = cfg.spec();
        let dtype = s.kv_dtype();
        let geo = Geometry {
            cfg,
            dtype,
            buffers: if m.mla().is_some() {
                None
            } else {
                fp4_buffers::<PlanError>(dtype, s)?
            },
        };
        let sizing = cfg.sizing();
        let default_kind = cfg.kind() == ConfiguratorKind::Default;
        let unified = sizing.unified;
        let fused_full = spec.fused_full_entry_bytes;
        let full_cap = Sized::Tokens(DraftCapacity::Full);
        let swa_cap = Sized::Tokens(DraftCapacity::Swa);

        let mut pools = Vec::new();
        if default_kind {
            let ids: Vec<u64> = full_ids.iter().chain(&swa_ids).copied().collect();
            pools.push(geo.target_pool(PoolName::Full, full_cap, ids, &geo.full()?, fused_full)?);
        } else if unified {
            // One byte buffer for the full and SWA layers (SGLang's unified pool).
            let mut ids: Vec<u64> = full_ids.iter().chain(&swa_ids).copied().collect();
            ids.sort_unstable();
            let bytes = tensor(TensorKind::Bytes, Vec::new(), StorageDtype::Uint8)?;
            let layers = layers_of(ids, &[], std::slice::from_ref(&bytes));
            pools.push(pool(PoolName::Unified, Sized::UnifiedBytes, dtype, layers)?);
        } else {
            if m.num_full_layers > 0 {
                pools.push(geo.target_pool(
                    PoolName::Full,
                    full_cap,
                    full_ids,
                    &geo.full()?,
                    fused_full,
                )?);
            }
            let fused_swa = spec.fused_swa_entry_bytes;
            pools.push(geo.target_pool(PoolName::Swa, swa_cap, swa_ids, &geo.swa()?, fused_swa)?);
        }
        for p in Self::draft_pools(cfg, &geo)? {
            pools.push(p);
        }
        Ok(Self { cfg, pools })
    }

    /// The draft's pools on the target worker: a private pool at the full (or
    /// an all-SWA target's SWA) capacity, an SWA-capacity pool for `d_s`, or
    /// under unified memory one pool over the virtual-id span. None when the
    /// draft is fused into the target's entries.
    fn draft_pools(cfg: &PoolConfigurator, geo: &Geometry<'_>) -> Result<Vec<PoolLayout>> {
        let (s, spec, sizing) = (cfg.serving(), cfg.spec(), cfg.sizing());
        let default_kind = cfg.kind() == ConfiguratorKind::Default;
        let all_swa = cfg.is_all_swa();
        let rule = if all_swa {
            DraftCapacity::Swa
        } else {
            DraftCapacity::Full
        };
        let algorithm = spec.algorithm;
        let d = spec.num_draft_layers();
        let drafting = algorithm.counts_draft_layers() && d > 0;
        if s.is_draft_worker || spec.is_fused() || !(drafting || algorithm.is_dflash_family()) {
            return Ok(Vec::new());
        }
        let sized = if sizing.unified {
            Sized::VirtualSpan
        } else {
            Sized::Tokens(rule)
        };
        let mut out = Vec::new();
        if let Some(g) = &spec.draft {
            let dt = g
                .kv_cache_dtype
                .map_or(geo.dtype, |t| t.or_model(s.model_dtype));
            let buffers = fp4_buffers::<PlanError>(dt, s)?;
            let heads = geo.heads(g.num_kv_heads);
            let ws = match buffers {
                Some(b) if b.dequant_workspace => dequant_workspace(heads, g.head_dim)?,
                _ => Vec::new(),
            };
            let proto = mha_layer(heads, g.head_dim, g.v_dim(), dt, buffers)?;
            // The last d_s draft layers keep the SWA pool's token count (SGLang's d_s).
            let (_, d_s, _, _) = cfg.draft_terms();
            let private_swa = if all_swa || sizing.unified || default_kind {
                0
            } else {
                d_s
            };
            let own = g.num_layers - private_swa.min(g.num_layers);
            if private_swa > 0 {
                let layers = layers_of(own..g.num_layers, &proto, &ws);
                let swa = Sized::Tokens(DraftCapacity::Swa);
                out.push(pool(PoolName::DraftSwa, swa, dt, layers)?);
            }
            let layers = layers_of(0..own, &proto, &ws);
            if layers.is_empty() {
                return Ok(out);
            }
            let sized = match (g.capacity, sizing.unified) {
                (_, true) => Sized::VirtualSpan,
                (Some(c), false) => Sized::Tokens(c),
                (None, false) => Sized::Tokens(rule),
            };
            if sized == Sized::Tokens(DraftCapacity::Swa) && default_kind {
                return Err(PlanError::invalid(
                    "draft capacity \"swa\" needs an SWA pool, but DefaultPoolConfigurator plans a single full pool",
                ));
            }
            if sized == Sized::Tokens(DraftCapacity::Full) && all_swa {
                return Err(PlanError::invalid(
                    "draft capacity \"full\" needs a full pool, but this all-SWA target has none",
                ));
            }
            out.insert(0, pool(PoolName::Draft, sized, dt, layers)?);
            return Ok(out);
        }
        let (d_f, d_s, d_sf, d_c) = cfg.draft_terms();
        // Default prices every draft layer at the full geometry (layer ratio).
        let (d_f, d_s, d_sf) = if default_kind {
            (d, 0, 0)
        } else {
            (d_f, d_s, d_sf)
        };
        let (fp, fws) = geo.full()?;
        let (sp, sws) = if d_s + d_sf > 0 {
            geo.swa()?
        } else {
            (Vec::new(), Vec::new())
        };
        // d_s shares the draft pool where it shares its capacity (all-SWA, unified).
        let private_swa = d_s > 0 && !all_swa && !sizing.unified;
        let banded = if private_swa { d_sf } else { d_s + d_sf };
        let mut layers: Vec<(u64, Vec<TensorLayout>)> = layers_of(0..d_f, &fp, &fws);
        layers.extend(layers_of(
            d_f..d_f + banded,
            &sp,
            if d_f == 0 { &sws } else { &[] },
        ));
        if d_c > 0 {
            let cache = tensor(TensorKind::Cache, vec![d_c], StorageDtype::Uint8)?;
            match layers.first_mut() {
                Some(first) => first.1.push(cache),
                None => layers.push((0, vec![cache])),
            }
        }
        if !layers.is_empty() {
            out.push(pool(PoolName::Draft, sized, geo.dtype, layers)?);
        }
        if private_swa {
            let first = d_f + banded;
            let layers = layers_of(first..first + d_s, &sp, &sws);
            out.push(pool(
                PoolName::DraftSwa,
                Sized::Tokens(DraftCapacity::Swa),
                geo.dtype,
                layers,
            )?);
        }
        Ok(out)
    }

    /// `(full_tokens, swa_tokens)` for a primary count `x` (a multiple of `p`), tokens.
    pub fn tokens_for(&self, x: i64, p: i64) -> Result<(i64, i64)> {
        let cfg = self.cfg;
        Ok(match cfg.kind() {
            ConfiguratorKind::Default => (x, 0),
            _ if cfg.is_all_swa() => (0, x),
            ConfiguratorKind::HybridSwa => (x, align_down(cfg.ratio_tokens(x)?, p)?),
            ConfiguratorKind::RequestCap => (x, cfg.request_cap_swa_tokens(p)?),
        })
    }

    /// A pool's token and row counts at `(full, swa)` tokens: `None` if they
    /// overflow or are negative.
    fn rows_of(&self, pl: &PoolLayout, full: i64, swa: i64, p: i64) -> Option<(u64, u64)> {
        let sizing = self.cfg.sizing();
        let tokens = match pl.sized {
            Sized::Tokens(DraftCapacity::Full) => full,
            Sized::Tokens(DraftCapacity::Swa) => swa,
            Sized::UnifiedBytes => {
                // The buffer is a byte count: rows are the full tokens, no padding page.
                let t = u64::try_from(full).ok()?;
                return Some((t, t));
            }
            Sized::VirtualSpan => {
                let bytes = sizing.unified_pool_bytes(full, swa);
                let u = i128::from(sizing.unified_full_cell().max(1));
                let span = (bytes / u - 1).max(0);
                let tokens = (span + i128::from(p) - 1) / i128::from(p) * i128::from(p);
                i64::try_from(tokens).ok()?
            }
        };
        let t = u64::try_from(tokens).ok()?;
        Some((t, t.checked_add(p as u64)?))
    }

    /// A pool's bytes at `(full, swa)` tokens, `None` on overflow.
    fn pool_bytes(&self, pl: &PoolLayout, full: i64, swa: i64, p: i64) -> Option<u64> {
        if pl.sized == Sized::UnifiedBytes {
            let b = self.cfg.sizing().unified_pool_bytes(full, swa);
            return u64::try_from(b)
                .ok()
                .filter(|b| *b <= crate::arith::MAX_QUANTITY);
        }
        let (_, rows) = self.rows_of(pl, full, swa, p)?;
        layout_pool(pl, rows, |_, _, _, _| {})
    }

    /// Total bytes of the plan at primary count `x`, or `None` if it overflows.
    pub(crate) fn total_bytes_at(&self, x: i64, p: i64) -> Option<u64> {
        let (full, swa) = self.tokens_for(x, p).ok()?;
        let mut total = 0u64;
        for pl in &self.pools {
            total = total.checked_add(self.pool_bytes(pl, full, swa, p)?)?;
        }
        // Every byte count the core returns fits an i64.
        (total <= crate::arith::MAX_QUANTITY).then_some(total)
    }

    /// Bytes per primary token of the pools whose size is the primary count
    /// itself (a lower bound of the plan's growth per token).
    fn primary_row_bytes(&self) -> u64 {
        let primary = if self.cfg.is_all_swa() {
            DraftCapacity::Swa
        } else {
            DraftCapacity::Full
        };
        self.pools
            .iter()
            .map(|p| match p.sized {
                Sized::Tokens(c) if c == primary => p.row_bytes,
                Sized::UnifiedBytes => self.cfg.sizing().unified_full_cell(),
                _ => 0,
            })
            .sum()
    }

    /// The largest page-aligned primary count whose plan fits `available_bytes`
    /// (0 when not even zero tokens fit).
    pub fn max_fitting_tokens(&self, available_bytes: i64, p: i64) -> i64 {
        let Ok(budget) = u64::try_from(available_bytes) else {
            return 0;
        };
        let slope = self.primary_row_bytes().max(1);
        let pu = p as u64;
        // total(x) >= x * slope, so x <= budget / slope.
        let fits = |pages: u64| -> bool {
            let Some(x) = pages.checked_mul(pu).and_then(|x| i64::try_from(x).ok()) else {
                return false;
            };
            self.total_bytes_at(x, p).is_some_and(|t| t <= budget)
        };
        // 0 pages by convention (nothing fits), budget / slope + 1 pages known not to fit.
        let lo = last_fitting(0, budget / slope / pu + 1, fits);
        if lo == 0 {
            0
        } else {
            (lo * pu) as i64
        }
    }

    /// The plan at primary count `x` (tokens, a multiple of `p`).
    pub fn plan_at(&self, x: i64, p: i64, fit: Fit, available_bytes: i64) -> Result<PoolPlan> {
        let (full, swa) = self.tokens_for(x, p)?;
        let cfg = self.cfg;
        let (max_total, full_cfg, swa_cfg) = match cfg.kind() {
            ConfiguratorKind::Default => (full, None, None),
            _ if cfg.is_all_swa() => (swa, Some(0), Some(swa)),
            _ => (full, Some(full), Some(swa)),
        };
        let unified = cfg.sizing().unified;
        let config = MemoryPoolConfig {
            max_total_num_tokens: max_total,
            full_max_total_num_tokens: full_cfg,
            swa_max_total_num_tokens: swa_cfg,
            unified_memory_pool_bytes: if unified {
                Some(narrow(
                    cfg.sizing().unified_pool_bytes(full, swa),
                    "unified pool bytes",
                )?)
            } else {
                None
            },
        };
        self.build(config, full, swa, p, fit, available_bytes)
    }

    pub(crate) fn build(
        &self,
        config: MemoryPoolConfig,
        full: i64,
        swa: i64,
        p: i64,
        fit: Fit,
        available_bytes: i64,
    ) -> Result<PoolPlan> {
        let pu = p as u64;
        let mut pools = Vec::with_capacity(self.pools.len());
        let mut total = 0u64;
        for pl in &self.pools {
            let (tokens, rows) = self.rows_of(pl, full, swa, p).ok_or_else(|| {
                PlanError::not_enough_memory(format!(
                    "the {} pool would hold a negative or overflowing token count",
                    pl.name.as_str()
                ))
            })?;
            let mut tensors = Vec::new();
            let (slab, padding) = if pl.sized == Sized::UnifiedBytes {
                let nbytes = self
                    .pool_bytes(pl, full, swa, p)
                    .ok_or_else(|| PlanError::overflow("unified pool bytes"))?;
                if let Some((layer_id, ts)) = pl.layers.first() {
                    for t in ts {
                        tensors.push(TensorSpec {
                            pool: pl.name,
                            layer_id: *layer_id,
                            kind: t.kind,
                            shape: vec![nbytes],
                            dtype: t.dtype,
                            nbytes,
                            offset: 0,
                        });
                    }
                }
                (nbytes, 0)
            } else {
                let slab = layout_pool(pl, rows, |layer_id, t, offset, nbytes| {
                    let mut shape = Vec::with_capacity(t.inner.len() + 1);
                    shape.push(rows);
                    shape.extend_from_slice(&t.inner);
                    tensors.push(TensorSpec {
                        pool: pl.name,
                        layer_id,
                        kind: t.kind,
                        shape,
                        dtype: t.dtype,
                        nbytes,
                        offset,
                    });
                })
                .ok_or_else(|| PlanError::overflow("pool bytes"))?;
                (slab, mul(pu, pl.row_bytes, "padding bytes")?)
            };
            total = add(total, slab, "plan bytes")?;
            pools.push(PoolSpec {
                name: pl.name,
                tokens,
                rows,
                layer_ids: pl.layers.iter().map(|(id, _)| *id).collect(),
                kv_cache_dtype: pl.kv_cache_dtype,
                nbytes: slab,
                padding_bytes: padding,
                tensors,
            });
        }
        Ok(PoolPlan {
            fit,
            configurator: self.cfg.kind(),
            available_bytes,
            page_size: pu,
            config,
            pools,
            total_bytes: total,
        })
    }
}
