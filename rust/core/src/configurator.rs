//! The configurator handle: a resolved [`Scenario`], the model's layer ids
//! (for the exact plan) and the [`Sizing`] of SGLang's configurator for them
//! (REFERENCE 2.2 to 2.5; the arithmetic is in [`crate::sizing`]).

use crate::error::Result;
use crate::fields::MemoryPoolConfig;
use crate::geometry::{AttentionShape, ModelGeometry};
use crate::scenario::Scenario;
use crate::serving::ServingConfig;
use crate::sizing::{CellSize, ConfiguratorKind, Sizing};
use crate::spec::SpeculativeConfig;
use std::sync::Arc;

/// A model's full and SWA layer ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LayerIds {
    /// Full-attention layer ids.
    pub full: Vec<u64>,
    /// Sliding-window layer ids.
    pub swa: Vec<u64>,
}

/// A configured planner: SGLang's configurator for one scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfigurator {
    scenario: Scenario,
    /// `None` when built from a shape alone: ids are then `0..n_f` for full
    /// layers and `n_f..n_f+n_s` for SWA layers.
    layer_ids: Option<Arc<LayerIds>>,
    sizing: Sizing,
}

impl PoolConfigurator {
    /// SGLang's `create_pool_configurator`: picks the kind, then builds it.
    pub fn create(
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        Self::for_model(None, model, serving, spec)
    }

    /// Builds a configurator of the given kind, validating that it applies.
    pub fn new(
        kind: ConfiguratorKind,
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        Self::for_model(Some(kind), model, serving, spec)
    }

    /// A configurator for a model with layer ids (`kind: None` picks SGLang's factory choice).
    pub fn for_model(
        kind: Option<ConfiguratorKind>,
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig,
    ) -> Result<Self> {
        let model = model.resolved()?;
        let ids = LayerIds {
            full: model.full_attention_layer_ids,
            swa: model.swa_attention_layer_ids,
        };
        let scenario = Scenario {
            shape: model.shape,
            serving,
            spec,
        };
        Self::build(kind, &scenario, Some(Arc::new(ids)))
    }

    /// A configurator for a scenario, layer ids synthesized from its counts
    /// (`kind: None` picks SGLang's factory choice).
    pub fn from_scenario(kind: Option<ConfiguratorKind>, scenario: &Scenario) -> Result<Self> {
        Self::build(kind, scenario, None)
    }

    fn build(
        kind: Option<ConfiguratorKind>,
        scenario: &Scenario,
        layer_ids: Option<Arc<LayerIds>>,
    ) -> Result<Self> {
        // Inputs may have been built field by field (pub fields, serde): check them all here.
        let scenario = scenario.resolved()?;
        let sizing = Sizing::new(kind, &scenario)?;
        Ok(Self {
            scenario,
            layer_ids,
            sizing,
        })
    }

    /// The same configurator kind and layer ids with another scenario.
    pub fn with_scenario(&self, scenario: &Scenario) -> Result<Self> {
        Self::build(Some(self.kind()), scenario, self.layer_ids.clone())
    }

    /// The same configurator kind, layer ids and spec with another serving config.
    pub fn with_serving(&self, serving: ServingConfig) -> Result<Self> {
        self.with_scenario(&Scenario {
            serving,
            ..self.scenario
        })
    }

    /// The same configurator with another `swa_full_tokens_ratio`.
    pub fn with_ratio(&self, ratio: f64) -> Result<Self> {
        self.with_serving(ServingConfig {
            swa_full_tokens_ratio: ratio,
            ..self.scenario.serving
        })
    }

    /// The configurator kind.
    pub fn kind(&self) -> ConfiguratorKind {
        self.sizing.kind
    }
    /// The resolved scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }
    /// The coefficients and solve paths.
    pub fn sizing(&self) -> &Sizing {
        &self.sizing
    }
    /// The target's counts and dims.
    pub fn shape(&self) -> &AttentionShape {
        &self.scenario.shape
    }
    /// The target geometry (layer ids synthesized as `0..n_f`, `n_f..n_f+n_s`
    /// when built from a shape alone).
    pub fn model(&self) -> ModelGeometry {
        let ids = self.layer_ids();
        ModelGeometry {
            full_attention_layer_ids: ids.full,
            swa_attention_layer_ids: ids.swa,
            shape: self.scenario.shape,
        }
    }
    /// The full and SWA layer ids.
    pub fn layer_ids(&self) -> LayerIds {
        if let Some(ids) = &self.layer_ids {
            LayerIds::clone(ids)
        } else {
            let m = &self.scenario.shape;
            let n_f = m.num_full_layers;
            LayerIds {
                full: (0..n_f).collect(),
                swa: (n_f..n_f + m.num_swa_layers).collect(),
            }
        }
    }
    /// The serving config.
    pub fn serving(&self) -> &ServingConfig {
        &self.scenario.serving
    }
    /// The speculative config.
    pub fn spec(&self) -> &SpeculativeConfig {
        &self.scenario.spec
    }
    /// SGLang's coefficient `C`, bytes per token of `max_total_num_tokens`.
    pub fn cell_size(&self) -> CellSize {
        self.sizing.cell_size
    }
    /// `F`, bytes per token of one full layer on this rank (SWA kinds; 0 for Default).
    pub fn full_per_token(&self) -> u64 {
        self.sizing.full_per_token
    }
    /// `S`, bytes per token of one SWA layer on this rank (SWA kinds; 0 for Default).
    pub fn swa_per_token(&self) -> u64 {
        self.sizing.swa_per_token
    }
    /// `(d_f, d_s, d_sf, d_c)`: counted draft layers at full geometry, at SWA
    /// geometry and capacity, banded depths at SWA geometry and full capacity,
    /// and DFLASH bytes per token.
    pub fn draft_terms(&self) -> (u64, u64, u64, u64) {
        let s = &self.sizing;
        (
            s.draft_full_layers,
            s.draft_swa_layers,
            s.draft_banded_layers,
            s.draft_cell,
        )
    }
    /// RequestCap's SWA token cap before page alignment, tokens.
    pub fn swa_cap(&self) -> Option<u64> {
        self.sizing.swa_cap
    }
    /// True for an SWA kind whose model has no full-attention layer.
    pub fn is_all_swa(&self) -> bool {
        self.sizing.is_all_swa()
    }
    /// The page size to solve with: the argument, or the serving page size.
    pub fn resolve_page_size(&self, page_size: Option<u64>) -> Result<i64> {
        self.sizing.resolve_page_size(page_size)
    }
    /// RequestCap's SWA pool: the cap rounded up to a page of `p` tokens, tokens.
    pub fn request_cap_swa_tokens(&self, p: i64) -> Result<i64> {
        self.sizing.request_cap_swa_tokens(p)
    }
    /// `int(full * r)`, truncated toward zero as CPython does.
    pub(crate) fn ratio_tokens(&self, full: i64) -> Result<i64> {
        self.sizing.ratio_tokens(full)
    }
    /// The admission floor: with a window W, the SWA pool must exceed `W + page_size` tokens.
    pub fn check_admission_floor(&self, swa: i64) -> Result<()> {
        self.sizing.check_admission_floor(swa)
    }
    /// The profiling path: pool sizes from available bytes on this rank.
    pub fn calculate_pool_sizes(
        &self,
        available_bytes: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        self.sizing.calculate_pool_sizes(available_bytes, page_size)
    }
    /// The constraint path: pool sizes from a token count (a user cap, or the MIN across ranks).
    pub fn calculate_pool_sizes_from_max_tokens(
        &self,
        max_total_num_tokens: i64,
        page_size: Option<u64>,
    ) -> Result<MemoryPoolConfig> {
        self.sizing
            .calculate_pool_sizes_from_max_tokens(max_total_num_tokens, page_size)
    }
}
