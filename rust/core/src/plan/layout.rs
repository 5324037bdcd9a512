//! How a configurator's pools are laid out: each pool's layers and tensors
//! per row, the slab layout at a token count, and the exact fit (the largest
//! page-aligned count whose bytes fit a budget).

use super::{Fit, PoolName, PoolPlan, PoolSpec, TensorKind, TensorSpec, TENSOR_ALIGNMENT};
use crate::arith::{add, align_down, last_fitting, mul};
use crate::cell::{kv_heads_per_rank, swa_kv_heads_per_rank, FP4_SCALE_BLOCK, MXFP8_SCALE_BLOCK};
use crate::configurator::PoolConfigurator;
use crate::dtype::{KvDtype, StorageDtype};
use crate::error::{PlanError, Result};
use crate::fields::MemoryPoolConfig;
use crate::geometry::{DraftCapacity, MlaDims};
use crate::sizing::ConfiguratorKind;
use crate::spec::SpecAlgorithm;

/// Per-row shape of one tensor (every dimension after rows).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TensorLayout {
    kind: TensorKind,
    inner: Vec<u64>,
    dtype: StorageDtype,
    row_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PoolLayout {
    name: PoolName,
    capacity: DraftCapacity,
    kv_cache_dtype: KvDtype,
    layers: Vec<(u64, Vec<TensorLayout>)>,
    /// Bytes per row summed over every layer and tensor.
    row_bytes: u64,
}

fn tensor(kind: TensorKind, inner: Vec<u64>, dtype: StorageDtype) -> Result<TensorLayout> {
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

/// The tensors of one MHA/GQA layer.
fn mha_layer(heads: u64, dk: u64, dv: u64, dtype: KvDtype) -> Result<Vec<TensorLayout>> {
    let st = dtype.storage();
    let u8t = StorageDtype::Uint8;
    Ok(match dtype {
        KvDtype::Fp4E2m1 => vec![
            tensor(TensorKind::K, vec![heads, dk.div_ceil(2)], st)?,
            tensor(TensorKind::V, vec![heads, dv.div_ceil(2)], st)?,
            tensor(
                TensorKind::KScale,
                vec![heads, dk.div_ceil(FP4_SCALE_BLOCK)],
                u8t,
            )?,
            tensor(
                TensorKind::VScale,
                vec![heads, dv.div_ceil(FP4_SCALE_BLOCK)],
                u8t,
            )?,
        ],
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

/// The tensors of one MLA layer.
fn mla_layer(mla: &MlaDims, dtype: KvDtype) -> Result<Vec<TensorLayout>> {
    let dim = mla.elements()?;
    let st = dtype.storage();
    let u8t = StorageDtype::Uint8;
    Ok(match dtype {
        KvDtype::Fp4E2m1 => vec![
            tensor(TensorKind::Kv, vec![1, dim.div_ceil(2)], st)?,
            tensor(
                TensorKind::KvScale,
                vec![1, dim.div_ceil(FP4_SCALE_BLOCK)],
                u8t,
            )?,
        ],
        KvDtype::Mxfp8 => vec![
            tensor(TensorKind::Kv, vec![1, dim], st)?,
            tensor(
                TensorKind::KvScale,
                vec![1, dim.div_ceil(MXFP8_SCALE_BLOCK)],
                u8t,
            )?,
        ],
        _ => vec![tensor(TensorKind::Kv, vec![1, dim], st)?],
    })
}

fn pool(
    name: PoolName,
    capacity: DraftCapacity,
    kv_cache_dtype: KvDtype,
    layers: Vec<(u64, Vec<TensorLayout>)>,
) -> Result<PoolLayout> {
    let mut row_bytes = 0u64;
    for (_, ts) in &layers {
        for t in ts {
            row_bytes = add(row_bytes, t.row_bytes, "pool row bytes")?;
        }
    }
    Ok(PoolLayout {
        name,
        capacity,
        kv_cache_dtype,
        layers,
        row_bytes,
    })
}

/// Lays out one pool's tensors at `rows` rows: calls `emit(layer_id, tensor,
/// offset, nbytes)` for each, every offset a multiple of [`TENSOR_ALIGNMENT`];
/// returns the slab size in bytes, or `None` on overflow.
fn layout_pool(
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

/// The planner's view of a configurator: its pools, and how their token
/// counts follow from one primary count `x` (full tokens, or SWA tokens for
/// an all-SWA target).
#[derive(Debug, Clone)]
pub struct PlanLayout<'a> {
    cfg: &'a PoolConfigurator,
    pools: Vec<PoolLayout>,
}

impl<'a> PlanLayout<'a> {
    /// Lays out the pools of `cfg` (shapes per row; token counts come later).
    pub fn new(cfg: &'a PoolConfigurator) -> Result<Self> {
        let m = cfg.shape();
        let crate::LayerIds {
            full: full_ids,
            swa: swa_ids,
        } = cfg.layer_ids();
        let s = cfg.serving();
        let spec = cfg.spec();
        let dtype = s.kv_cache_dtype;
        let default_kind = cfg.kind() == ConfiguratorKind::Default;
        let heads_rule = |h: u64| {
            if default_kind {
                kv_heads_per_rank(h, s.tp_size, s.dcp_size)
            } else {
                swa_kv_heads_per_rank(h, s.tp_size)
            }
        };
        let full_layer = || -> Result<Vec<TensorLayout>> {
            match &m.mla() {
                Some(mla) => mla_layer(mla, dtype),
                None => mha_layer(heads_rule(m.num_kv_heads), m.head_dim, m.v_dim(), dtype),
            }
        };
        let swa_layer = || {
            mha_layer(
                heads_rule(m.swa_heads()),
                m.swa_k_dim(),
                m.swa_v_dim(),
                dtype,
            )
        };

        let mut pools = Vec::new();
        if default_kind {
            let mut ids: Vec<u64> = full_ids.iter().chain(&swa_ids).copied().collect();
            ids.sort_unstable();
            let proto = full_layer()?;
            let layers = ids.into_iter().map(|id| (id, proto.clone())).collect();
            pools.push(pool(PoolName::Full, DraftCapacity::Full, dtype, layers)?);
        } else {
            if m.num_full_layers > 0 {
                let mut ids = full_ids;
                ids.sort_unstable();
                let proto = full_layer()?;
                pools.push(pool(
                    PoolName::Full,
                    DraftCapacity::Full,
                    dtype,
                    ids.into_iter().map(|id| (id, proto.clone())).collect(),
                )?);
            }
            let mut ids = swa_ids;
            ids.sort_unstable();
            let proto = swa_layer()?;
            pools.push(pool(
                PoolName::Swa,
                DraftCapacity::Swa,
                dtype,
                ids.into_iter().map(|id| (id, proto.clone())).collect(),
            )?);
        }

        // The draft pool (target worker only).
        let all_swa = cfg.is_all_swa();
        let rule_capacity = if all_swa {
            DraftCapacity::Swa
        } else {
            DraftCapacity::Full
        };
        let target = !s.is_draft_worker;
        let drafting = spec.algorithm.counts_draft_layers() && spec.num_draft_layers() > 0;
        let dflash = spec.algorithm == SpecAlgorithm::Dflash;
        if target && (drafting || dflash) {
            let draft_pool = if let Some(g) = &spec.draft {
                let dt = g.kv_cache_dtype.unwrap_or(dtype);
                let proto = mha_layer(heads_rule(g.num_kv_heads), g.head_dim, g.v_dim(), dt)?;
                let layers = (0..g.num_layers).map(|i| (i, proto.clone())).collect();
                Some(pool(
                    PoolName::Draft,
                    g.capacity.unwrap_or(rule_capacity),
                    dt,
                    layers,
                )?)
            } else if drafting {
                // Default prices every draft layer at the full geometry (layer ratio);
                // the SWA kinds price banded depths at the SWA geometry.
                let (d_f, d_sf, _) = cfg.draft_terms();
                let (d_f, d_sf) = if default_kind {
                    (d_f + d_sf, 0)
                } else {
                    (d_f, d_sf)
                };
                let fp = full_layer()?;
                let sp = if d_sf > 0 { swa_layer()? } else { Vec::new() };
                let layers = (0..d_f)
                    .map(|i| (i, fp.clone()))
                    .chain((d_f..d_f + d_sf).map(|i| (i, sp.clone())))
                    .collect();
                Some(pool(PoolName::Draft, rule_capacity, dtype, layers)?)
            } else {
                let (_, _, d_c) = cfg.draft_terms();
                if d_c > 0 {
                    let t = tensor(TensorKind::Cache, vec![d_c], StorageDtype::Uint8)?;
                    Some(pool(
                        PoolName::Draft,
                        rule_capacity,
                        dtype,
                        vec![(0, vec![t])],
                    )?)
                } else {
                    None
                }
            };
            if let Some(p) = draft_pool {
                if p.capacity == DraftCapacity::Swa && default_kind {
                    return Err(PlanError::invalid(
                        "draft capacity \"swa\" needs an SWA pool, but DefaultPoolConfigurator plans a single full pool",
                    ));
                }
                if p.capacity == DraftCapacity::Full && all_swa {
                    return Err(PlanError::invalid(
                        "draft capacity \"full\" needs a full pool, but this all-SWA target has none",
                    ));
                }
                pools.push(p);
            }
        }
        Ok(Self { cfg, pools })
    }

    /// `(full_tokens, swa_tokens)` for a primary count `x` (a multiple of `p`), tokens.
    pub fn tokens_for(&self, x: i64, p: i64) -> Result<(i64, i64)> {
        let cfg = self.cfg;
        Ok(match cfg.kind() {
            ConfiguratorKind::Default => (x, 0),
            _ if cfg.is_all_swa() => (0, x),
            ConfiguratorKind::HybridSwa => (x, align_down(cfg.ratio_tokens(x)?, p)?),
            ConfiguratorKind::ChunkCap => (x, cfg.chunk_cap_swa_tokens(p)?),
        })
    }

    /// Total bytes of the plan at primary count `x`, or `None` if it overflows.
    pub(crate) fn total_bytes_at(&self, x: i64, p: i64) -> Option<u64> {
        let (full, swa) = self.tokens_for(x, p).ok()?;
        let mut total = 0u64;
        for pl in &self.pools {
            let tokens = match pl.capacity {
                DraftCapacity::Full => full,
                DraftCapacity::Swa => swa,
            };
            let rows = u64::try_from(tokens.checked_add(p)?).ok()?;
            total = total.checked_add(layout_pool(pl, rows, |_, _, _, _| {})?)?;
        }
        Some(total)
    }

    /// Bytes per primary token of the pools whose size is the primary count itself.
    fn primary_row_bytes(&self) -> u64 {
        let primary = if self.cfg.is_all_swa() {
            DraftCapacity::Swa
        } else {
            DraftCapacity::Full
        };
        self.pools
            .iter()
            .filter(|p| p.capacity == primary)
            .map(|p| p.row_bytes)
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
        let config = match cfg.kind() {
            ConfiguratorKind::Default => MemoryPoolConfig {
                max_total_num_tokens: full,
                full_max_total_num_tokens: None,
                swa_max_total_num_tokens: None,
            },
            _ if cfg.is_all_swa() => MemoryPoolConfig {
                max_total_num_tokens: swa,
                full_max_total_num_tokens: Some(0),
                swa_max_total_num_tokens: Some(swa),
            },
            _ => MemoryPoolConfig {
                max_total_num_tokens: full,
                full_max_total_num_tokens: Some(full),
                swa_max_total_num_tokens: Some(swa),
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
            let tokens = match pl.capacity {
                DraftCapacity::Full => full,
                DraftCapacity::Swa => swa,
            };
            let tokens = u64::try_from(tokens).map_err(|_| {
                PlanError::not_enough_memory(format!(
                    "{} pool would hold {tokens} tokens",
                    pl.name.as_str()
                ))
            })?;
            let rows = add(tokens, pu, "pool rows")?;
            let mut tensors = Vec::new();
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
            let padding = mul(pu, pl.row_bytes, "padding bytes")?;
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
