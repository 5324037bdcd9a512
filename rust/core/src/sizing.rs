//! SGLang's configurator arithmetic (REFERENCE 2.2 to 2.5) as a small `Copy`
//! value: [`Sizing`] holds one configurator's coefficients (the cell size
//! `C`, `F`, `S`, the draft terms, the request cap) and solves both paths
//! (from bytes, from max tokens). It allocates nothing, so the batch kernel
//! builds one per row; [`crate::PoolConfigurator`] wraps one with its
//! scenario and layer ids.

use crate::arith::{add, align_down, align_up, mul, narrow, py_int, py_int_floordiv, to_i64};
use crate::cell::{default_cell_size, layer_bytes_per_token, swa_kv_heads_per_rank};
use crate::chunk_cap::{chunk_cap_inapplicable_reason, swa_chunk_cap};
use crate::dtype::KvDtype;
use crate::error::{Fail, PlanError, Result};
use crate::fields::{MemoryPoolConfig, Named};
use crate::scenario::Scenario;
use crate::serving::ServingConfig;
use crate::AttentionShape;
use serde::{Deserialize, Serialize};

/// Which SGLang configurator applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConfiguratorKind {
    /// `DefaultPoolConfigurator`: one pool, every layer at full geometry.
    #[default]
    Default,
    /// `HybridSWAPoolConfigurator`: full and SWA pools split by the ratio.
    HybridSwa,
    /// `SWAChunkCapPoolConfigurator`: SWA pool sized from a per-request cap.
    ChunkCap,
}

impl ConfiguratorKind {
    /// The snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::HybridSwa => "hybrid_swa",
            Self::ChunkCap => "chunk_cap",
        }
    }

    /// SGLang's class name.
    pub const fn class_name(self) -> &'static str {
        match self {
            Self::Default => "DefaultPoolConfigurator",
            Self::HybridSwa => "HybridSWAPoolConfigurator",
            Self::ChunkCap => "SWAChunkCapPoolConfigurator",
        }
    }
}

impl Named for ConfiguratorKind {
    const ALL: &'static [Self] = &[Self::Default, Self::HybridSwa, Self::ChunkCap];
    const NAMES: &'static [&'static str] = &["default", "hybrid_swa", "chunk_cap"];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl std::str::FromStr for ConfiguratorKind {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "default" => Ok(Self::Default),
            "hybrid_swa" => Ok(Self::HybridSwa),
            "chunk_cap" => Ok(Self::ChunkCap),
            _ => Err(PlanError::invalid(format!(
                "configurator kind: expected default, hybrid_swa or chunk_cap, got {s:?}"
            ))),
        }
    }
}

/// SGLang's coefficient: bytes per token of `max_total_num_tokens`; a double
/// where the SWA ratio enters (hybrid with full layers), else an integer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CellSize {
    /// Integer bytes per token.
    Int(u64),
    /// Bytes per token as SGLang's double.
    Float(f64),
}

/// The configurator SGLang's factory picks (REFERENCE 2.5).
#[inline]
pub fn select_kind(shape: &AttentionShape, serving: &ServingConfig) -> ConfiguratorKind {
    if shape.num_swa_layers > 0 && !serving.disable_hybrid_swa_memory {
        if chunk_cap_inapplicable_reason(serving, shape.sliding_window_size, shape.num_full_layers)
            .is_none()
        {
            ConfiguratorKind::ChunkCap
        } else {
            ConfiguratorKind::HybridSwa
        }
    } else {
        ConfiguratorKind::Default
    }
}

/// One configurator's coefficients and what its two solve paths read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sizing {
    /// Which configurator.
    pub kind: ConfiguratorKind,
    /// SGLang's coefficient `C`, bytes per token of `max_total_num_tokens`.
    pub cell_size: CellSize,
    /// `F`, bytes per token of one full layer on this rank (SWA kinds; 0 for Default).
    pub full_per_token: u64,
    /// `S`, bytes per token of one SWA layer on this rank (SWA kinds; 0 for Default).
    pub swa_per_token: u64,
    /// `d_f`, counted draft layers at full geometry.
    pub draft_full_layers: u64,
    /// `d_sf`, counted banded draft depths at SWA geometry.
    pub draft_swa_layers: u64,
    /// `d_c`, DFLASH draft bytes per token.
    pub draft_cell: u64,
    /// ChunkCap's SWA token cap before page alignment, tokens.
    pub swa_cap: Option<u64>,
    /// `n_f`, full-attention layers.
    pub num_full_layers: u64,
    /// `n_s`, sliding-window layers.
    pub num_swa_layers: u64,
    /// `W`, the window, tokens.
    pub sliding_window_size: Option<u64>,
    /// The serving page size, tokens.
    pub page_size: u64,
    /// `r`.
    pub swa_full_tokens_ratio: f64,
}

impl Sizing {
    /// A placeholder (every coefficient 0), for buffers filled later.
    pub const EMPTY: Self = Self {
        kind: ConfiguratorKind::Default,
        cell_size: CellSize::Int(0),
        full_per_token: 0,
        swa_per_token: 0,
        draft_full_layers: 0,
        draft_swa_layers: 0,
        draft_cell: 0,
        swa_cap: None,
        num_full_layers: 0,
        num_swa_layers: 0,
        sliding_window_size: None,
        page_size: 0,
        swa_full_tokens_ratio: 0.0,
    };

    /// The coefficients of configurator `kind` for a resolved scenario
    /// (`kind: None` picks SGLang's factory choice). Errors when the kind does
    /// not apply or an intermediate overflows.
    pub fn new(kind: Option<ConfiguratorKind>, sc: &Scenario) -> Result<Self> {
        Self::build(kind, sc)
    }

    /// [`Self::new`] for any error type (the batch kernel keeps only codes).
    /// The scenario's rules must hold ([`Scenario::check_rules`]).
    #[inline(always)]
    pub(crate) fn build<E: Fail>(
        kind: Option<ConfiguratorKind>,
        sc: &Scenario,
    ) -> std::result::Result<Self, E> {
        let (m, s, spec) = (&sc.shape, &sc.serving, &sc.spec);
        let kind = kind.unwrap_or_else(|| select_kind(m, s));
        let worker_is_draft = s.is_draft_worker;
        let (d_f, d_sf) = spec.counted_draft_layers(worker_is_draft);
        let mut this = Self {
            kind,
            cell_size: CellSize::Int(0),
            full_per_token: 0,
            swa_per_token: 0,
            draft_full_layers: d_f,
            draft_swa_layers: d_sf,
            draft_cell: spec.dflash_cell(worker_is_draft, s.dcp_size)?,
            swa_cap: None,
            num_full_layers: m.num_full_layers,
            num_swa_layers: m.num_swa_layers,
            sliding_window_size: m.sliding_window_size,
            page_size: s.page_size,
            swa_full_tokens_ratio: s.swa_full_tokens_ratio,
        };
        match kind {
            ConfiguratorKind::Default => {
                this.cell_size = CellSize::Int(default_cell_size(m, s, spec)?);
            }
            ConfiguratorKind::HybridSwa | ConfiguratorKind::ChunkCap => this.init_swa(sc)?,
        }
        Ok(this)
    }

    #[inline(always)]
    fn init_swa<E: Fail>(&mut self, sc: &Scenario) -> std::result::Result<(), E> {
        let name = self.kind.class_name();
        let (m, s) = (&sc.shape, &sc.serving);
        if m.num_swa_layers == 0 {
            return Err(E::invalid_with(|| {
                format!("{name} needs at least one SWA layer; swa_attention_layer_ids is empty")
            }));
        }
        if m.kv_lora_rank.is_some() {
            return Err(E::invalid_with(|| {
                format!("{name} does not support MLA models")
            }));
        }
        if s.kv_cache_dtype == KvDtype::Fp4E2m1 {
            return Err(E::invalid_with(|| {
                format!("kv_cache_dtype fp4_e2m1 is supported by DefaultPoolConfigurator only, not {name}")
            }));
        }
        let f = layer_bytes_per_token(
            swa_kv_heads_per_rank(m.num_kv_heads, s.tp_size),
            m.head_dim,
            m.v_dim(),
            s.kv_cache_dtype,
        )?;
        let sw = layer_bytes_per_token(
            swa_kv_heads_per_rank(m.swa_heads(), s.tp_size),
            m.swa_k_dim(),
            m.swa_v_dim(),
            s.kv_cache_dtype,
        )?;
        self.full_per_token = f;
        self.swa_per_token = sw;
        let (n_f, n_s) = (m.num_full_layers, m.num_swa_layers);
        let (d_f, d_sf, d_c) = (
            self.draft_full_layers,
            self.draft_swa_layers,
            self.draft_cell,
        );
        let what = "SWA cell size";
        let draft_swa = mul(sw, d_sf, what)?;
        self.cell_size = if n_f == 0 {
            let ints = add(mul(sw, n_s, what)?, mul(f, d_f, what)?, what)?;
            CellSize::Int(add(add(ints, draft_swa, what)?, d_c, what)?)
        } else {
            let ints = add(mul(f, add(n_f, d_f, what)?, what)?, draft_swa, what)?;
            let r = s.swa_full_tokens_ratio;
            CellSize::Float((ints as f64 + r * (sw as f64) * (n_s as f64)) + d_c as f64)
        };
        if self.kind == ConfiguratorKind::ChunkCap {
            if let Some(reason) = chunk_cap_inapplicable_reason(s, m.sliding_window_size, n_f) {
                return Err(E::invalid_with(|| {
                    format!("SWAChunkCapPoolConfigurator does not apply: {reason}")
                }));
            }
            let window = m.sliding_window_size.unwrap_or_default();
            self.swa_cap = Some(swa_chunk_cap(s, &sc.spec, window)?);
        }
        Ok(())
    }

    /// True for an SWA kind whose model has no full-attention layer.
    #[inline]
    pub fn is_all_swa(&self) -> bool {
        self.kind != ConfiguratorKind::Default && self.num_full_layers == 0
    }

    /// The page size to solve with: the argument, or the serving page size.
    #[inline(always)]
    pub fn resolve_page_size<E: Fail>(
        &self,
        page_size: Option<u64>,
    ) -> std::result::Result<i64, E> {
        let p = page_size.unwrap_or(self.page_size);
        if p == 0 {
            return Err(E::invalid_with(|| "page_size must be >= 1, got 0".into()));
        }
        to_i64(p, "page_size")
    }

    /// ChunkCap's SWA pool: the cap rounded up to a page of `p` tokens, tokens.
    #[inline(always)]
    pub fn chunk_cap_swa_tokens<E: Fail>(&self, p: i64) -> std::result::Result<i64, E> {
        let swa = align_up(
            self.swa_cap.unwrap_or_default(),
            p as u64,
            "ChunkCap SWA tokens",
        )?;
        to_i64(swa, "ChunkCap SWA tokens")
    }

    /// ChunkCap's full-pool bytes per token `F*(n_f+d_f) + S*d_sf + d_c`.
    #[inline(always)]
    fn chunk_cap_full_cell<E: Fail>(&self) -> std::result::Result<u64, E> {
        let what = "ChunkCap full cell size";
        let full_layers = add(self.num_full_layers, self.draft_full_layers, what)?;
        let ints = add(
            mul(self.full_per_token, full_layers, what)?,
            mul(self.swa_per_token, self.draft_swa_layers, what)?,
            what,
        )?;
        add(ints, self.draft_cell, what)
    }

    /// `int(full * r)`, truncated toward zero as CPython does.
    #[inline(always)]
    pub(crate) fn ratio_tokens<E: Fail>(&self, full: i64) -> std::result::Result<i64, E> {
        py_int(
            full as f64 * self.swa_full_tokens_ratio,
            "SWA tokens (full * ratio)",
        )
    }

    /// The admission floor: with a window W, the SWA pool must exceed `W + page_size` tokens.
    /// `Err(SwaPoolTooSmall)` when `swa` tokens do not.
    #[inline(always)]
    pub fn check_admission_floor<E: Fail>(&self, swa: i64) -> std::result::Result<(), E> {
        if let Some(w) = self.sliding_window_size {
            let floor = i128::from(w) + i128::from(self.page_size);
            if floor >= i128::from(swa) {
                return Err(E::swa_too_small_with(|| {
                    format!(
                        "SWA pool ({swa} tokens) cannot hold even one request: the prefill admission floor is \
                         sliding_window_size ({w}) + page_size ({}). Increase swa_full_tokens_ratio \
                         (now {}) or the total KV budget.",
                        self.page_size, self.swa_full_tokens_ratio
                    )
                }));
            }
        }
        Ok(())
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
        self.check_admission_floor(swa)?;
        if full <= 0 {
            return Err(not_enough(full));
        }
        Ok(pools(full, Some(full), Some(swa)))
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
            ConfiguratorKind::ChunkCap => self.chunk_cap_from_bytes(available_bytes, p),
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

    /// HybridSWA's profiling path at page size `p`.
    #[inline(always)]
    pub fn hybrid_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let t = match self.cell_size {
            CellSize::Int(c) => available_bytes.div_euclid(to_i64(c, "cell size")?),
            CellSize::Float(c) => py_int_floordiv(available_bytes as f64, c, "max tokens")?,
        };
        self.solve_hybrid(t, p)
    }

    /// ChunkCap's profiling path at page size `p`.
    #[inline(always)]
    pub fn chunk_cap_from_bytes<E: Fail>(
        &self,
        available_bytes: i64,
        p: i64,
    ) -> std::result::Result<MemoryPoolConfig, E> {
        let what = "ChunkCap pool sizes";
        let swa = self.chunk_cap_swa_tokens(p)?;
        let fixed = mul(
            mul(swa as u64, self.swa_per_token, what)?,
            self.num_swa_layers,
            what,
        )?;
        let full_cell = self.chunk_cap_full_cell()?;
        let rest = i128::from(available_bytes) - i128::from(fixed);
        let full = align_down(narrow(rest.div_euclid(i128::from(full_cell)), what)?, p)?;
        if full <= 0 {
            return Err(E::not_enough_memory_with(|| {
                format!(
                    "SWA cap leaves no room for the full pool: the SWA pool cap ({swa} tokens, {fixed} bytes) \
                     leaves no room for the full KV pool within the available {available_bytes} bytes. \
                     Reduce max_running_requests, lower swa_eviction_interval, or raise the budget."
                )
            }));
        }
        Ok(pools(full, Some(full), Some(swa)))
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
            ConfiguratorKind::ChunkCap => {
                let swa = self.chunk_cap_swa_tokens(p)?;
                let full = align_down(max_total_num_tokens, p)?;
                let swa = swa.min(max_total_num_tokens);
                if full <= 0 {
                    return Err(not_enough(full));
                }
                Ok(pools(full, Some(full), Some(swa)))
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

impl MemoryPoolConfig {
    /// Every field is any integer: nothing to check or fill.
    pub fn resolved(self) -> Result<Self> {
        use crate::fields::ValueType;
        self.check_fields()?;
        Ok(self)
    }
}
