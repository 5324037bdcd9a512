//! SGLang's configurator arithmetic (REFERENCE 2.2 to 2.7) as a small `Copy`
//! value: [`Sizing`] holds one configurator's coefficients (the cell size
//! `C`, `F`, `S`, the draft terms, the request cap) and solves both paths
//! (from bytes, from max tokens). It allocates nothing, so the batch kernel
//! builds one per row; [`crate::PoolConfigurator`] wraps one with its
//! scenario and layer ids.
//!
//! - [`kind`]: which configurator (SGLang's factory), and the cell size's type;
//! - this module: the coefficients of each configurator;
//! - `solve`: both solve paths of each configurator (`calculate_pool_sizes`,
//!   `calculate_pool_sizes_from_max_tokens`), the admission floor;
//! - `unified`: unified memory's pool bytes and its bisection.

mod kind;
mod solve;
pub mod state;
mod unified;

pub(crate) use kind::kind_index;
pub use kind::{select_kind, CellSize, ConfiguratorKind};

use crate::arith::{add, align_up, mul, py_int, to_i64};
use crate::cell::{
    default_cell_size, layer_bytes_per_token, swa_kv_heads_per_rank, MXFP8_SCALE_BLOCK,
};
use crate::dtype::KvDtype;
use crate::error::{Fail, Result};
use crate::fields::{MemoryPoolConfig, ValueType};
use crate::request_cap::{request_cap_inapplicable_reason, swa_request_cap};
use crate::scenario::Scenario;
use crate::serving::ServingConfig;
use crate::AttentionShape;

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
    /// `d_s`, counted draft layers at SWA geometry and SWA capacity.
    pub draft_swa_layers: u64,
    /// `d_sf`, counted banded draft depths at SWA geometry and full capacity.
    pub draft_banded_layers: u64,
    /// `d_c`, DFLASH draft bytes per token.
    pub draft_cell: u64,
    /// Bytes per full-side token: the fused entry, else `F * (n_f + d_f)` (SWA kinds).
    pub full_cell: u64,
    /// Bytes per SWA-side token: the fused entry, else `S * (n_s + d_s)` (SWA kinds).
    pub swa_cell: u64,
    /// A fused draft entry replaces the full cell (the draft terms are then 0).
    pub fused_full: bool,
    /// Full and SWA layers share one byte pool (SWA kinds).
    pub unified: bool,
    /// RequestCap's SWA token cap before page alignment, tokens.
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
        draft_banded_layers: 0,
        draft_cell: 0,
        full_cell: 0,
        swa_cell: 0,
        fused_full: false,
        unified: false,
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
        if spec.is_fused()
            && (worker_is_draft
                || !(spec.algorithm.counts_draft_layers() || spec.algorithm.is_dflash_family()))
        {
            return Err(E::invalid_with(|| {
                "fused draft entries hold a draft inside the target's entries: they need a drafting \
                 algorithm (EAGLE family, standalone, DFLASH family) on the target worker"
                    .into()
            }));
        }
        let (d_f, d_s, d_sf) = spec.counted_draft_layers(worker_is_draft);
        let mut this = Self {
            kind,
            cell_size: CellSize::Int(0),
            full_per_token: 0,
            swa_per_token: 0,
            draft_full_layers: d_f,
            draft_swa_layers: d_s,
            draft_banded_layers: d_sf,
            draft_cell: spec.dflash_cell(worker_is_draft, s.dcp_size)?,
            full_cell: 0,
            swa_cell: 0,
            fused_full: false,
            unified: false,
            swa_cap: None,
            num_full_layers: m.num_full_layers,
            num_swa_layers: m.num_swa_layers,
            sliding_window_size: m.sliding_window_size,
            page_size: s.page_size,
            swa_full_tokens_ratio: s.swa_full_tokens_ratio,
        };
        match kind {
            ConfiguratorKind::Default => {
                if spec.fused_swa_entry_bytes.is_some() {
                    return Err(E::invalid_with(|| {
                        "fused_swa_entry_bytes: DefaultPoolConfigurator plans no SWA pool to fuse into"
                            .into()
                    }));
                }
                this.cell_size = CellSize::Int(default_cell_size(m, s, spec)?);
            }
            ConfiguratorKind::HybridSwa | ConfiguratorKind::RequestCap => this.init_swa(sc)?,
        }
        Ok(this)
    }

    #[inline(always)]
    fn init_swa<E: Fail>(&mut self, sc: &Scenario) -> std::result::Result<(), E> {
        let name = self.kind.class_name();
        let (m, s, spec) = (&sc.shape, &sc.serving, &sc.spec);
        if m.num_swa_layers == 0 {
            return Err(E::invalid_with(|| {
                format!("{name} needs at least one SWA layer; swa_attention_layer_ids is empty")
            }));
        }
        let (f, sw) = swa_kind_layer_bytes(m, s)?;
        self.full_per_token = f;
        self.swa_per_token = sw;
        // SGLang's all-SWA path ignores unified memory (no full pool to share).
        self.unified = s.enable_unified_memory && m.num_full_layers > 0;
        if spec.is_fused() {
            // The draft lives in the target's entries: no private draft terms.
            self.draft_full_layers = 0;
            self.draft_swa_layers = 0;
            self.draft_banded_layers = 0;
            self.draft_cell = 0;
        }
        let (n_f, n_s) = (m.num_full_layers, m.num_swa_layers);
        let (d_f, d_s, d_sf, d_c) = (
            self.draft_full_layers,
            self.draft_swa_layers,
            self.draft_banded_layers,
            self.draft_cell,
        );
        let what = "SWA cell size";
        self.fused_full = spec.fused_full_entry_bytes.is_some();
        self.full_cell = match spec.fused_full_entry_bytes {
            Some(e) => e,
            None => mul(f, add(n_f, d_f, what)?, what)?,
        };
        self.swa_cell = match spec.fused_swa_entry_bytes {
            Some(e) => e,
            None => mul(sw, add(n_s, d_s, what)?, what)?,
        };
        let banded = mul(sw, d_sf, what)?;
        self.cell_size = if n_f == 0 {
            // All-SWA: no full pool to relate to, no ratio (fused entries unused).
            let ints = add(mul(sw, n_s, what)?, mul(f, d_f, what)?, what)?;
            let ints = add(ints, mul(sw, add(d_s, d_sf, what)?, what)?, what)?;
            CellSize::Int(add(ints, d_c, what)?)
        } else {
            let ints = add(self.full_cell, banded, what)?;
            let r = s.swa_full_tokens_ratio;
            CellSize::Float((ints as f64 + r * (self.swa_cell as f64)) + d_c as f64)
        };
        if self.kind == ConfiguratorKind::RequestCap {
            if let Some(reason) = request_cap_inapplicable_reason(s, m.sliding_window_size, n_f) {
                return Err(E::invalid_with(|| {
                    format!("SWARequestCapPoolConfigurator does not apply: {reason}")
                }));
            }
            let window = m.sliding_window_size.unwrap_or_default();
            self.swa_cap = Some(swa_request_cap(s, spec, window)?);
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

    /// RequestCap's SWA pool: the cap rounded up to a page of `p` tokens, tokens.
    #[inline(always)]
    pub fn request_cap_swa_tokens<E: Fail>(&self, p: i64) -> std::result::Result<i64, E> {
        let swa = align_up(
            self.swa_cap.unwrap_or_default(),
            p as u64,
            "RequestCap SWA tokens",
        )?;
        to_i64(swa, "RequestCap SWA tokens")
    }

    /// RequestCap's full-pool bytes per token: the full cell plus `S*d_sf + d_c`.
    #[inline(always)]
    fn request_cap_full_cell<E: Fail>(&self) -> std::result::Result<u64, E> {
        let what = "RequestCap full cell size";
        let banded = mul(self.swa_per_token, self.draft_banded_layers, what)?;
        add(add(self.full_cell, banded, what)?, self.draft_cell, what)
    }

    /// The private draft pool's bytes per token, `F*d_f + S*(d_s + d_sf) + d_c`.
    #[inline(always)]
    pub fn draft_pool_cell<E: Fail>(&self) -> std::result::Result<u64, E> {
        let what = "draft pool bytes per token";
        let swa_layers = add(self.draft_swa_layers, self.draft_banded_layers, what)?;
        let b = add(
            mul(self.full_per_token, self.draft_full_layers, what)?,
            mul(self.swa_per_token, swa_layers, what)?,
            what,
        )?;
        add(b, self.draft_cell, what)
    }

    /// `int(full * r)`, truncated toward zero as CPython does.
    #[inline(always)]
    pub(crate) fn ratio_tokens<E: Fail>(&self, full: i64) -> std::result::Result<i64, E> {
        py_int(
            full as f64 * self.swa_full_tokens_ratio,
            "SWA tokens (full * ratio)",
        )
    }
}

/// `(F, S)`: bytes per token of one full and one SWA layer on this rank in the
/// SWA configurators: heads split over `tp` only; FP4 priced at its element
/// size (SGLang has no FP4 branch here). MLA prices the latents and, for
/// mxfp8, still adds SGLang's scale bytes of the head dims
/// (`heads * (dk + dv) // 32`), as its code does.
#[inline(always)]
fn swa_kind_layer_bytes<E: Fail>(
    m: &AttentionShape,
    s: &ServingConfig,
) -> std::result::Result<(u64, u64), E> {
    let dtype = s.kv_dtype();
    let heads = swa_kv_heads_per_rank(m.num_kv_heads, s.tp_size);
    let swa_heads = swa_kv_heads_per_rank(m.swa_heads(), s.tp_size);
    let (Some(full), Some(swa)) = (m.mla(), m.swa_mla()) else {
        return Ok((
            layer_bytes_per_token(heads, m.head_dim, m.v_dim(), dtype)?,
            layer_bytes_per_token(swa_heads, m.swa_k_dim(), m.swa_v_dim(), dtype)?,
        ));
    };
    let b = dtype.element_bytes();
    let what = "MLA bytes per token";
    let mut f = mul(full.elements()?, b, what)?;
    let mut sw = mul(swa.elements()?, b, what)?;
    if dtype == KvDtype::Mxfp8 {
        let scales = |h: u64, dk: u64, dv: u64| -> std::result::Result<u64, E> {
            Ok(mul(h, add(dk, dv, what)?, what)? / MXFP8_SCALE_BLOCK)
        };
        f = add(f, scales(heads, m.head_dim, m.v_dim())?, what)?;
        sw = add(sw, scales(swa_heads, m.swa_k_dim(), m.swa_v_dim())?, what)?;
    }
    Ok((f, sw))
}

impl MemoryPoolConfig {
    /// Every field is any integer: nothing to check or fill.
    pub fn resolved(self) -> Result<Self> {
        self.check_fields()?;
        Ok(self)
    }
}
