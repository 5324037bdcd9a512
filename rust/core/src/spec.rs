//! Speculative decoding: the algorithm and the draft-layer rules.

use crate::error::{PlanError, Result};
use crate::geometry::DraftGeometry;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// SGLang's `--speculative-algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecAlgorithm {
    /// No speculative decoding.
    None,
    /// EAGLE (draft reuses the target's attention config).
    Eagle,
    /// EAGLE-3.
    Eagle3,
    /// NextN / MTP (DeepSeek- or MiMo-style multi-token prediction).
    NextN,
    /// A standalone small draft model.
    Standalone,
    /// N-gram lookup (no draft KV).
    Ngram,
    /// DFLASH (draft with its own bytes per token).
    Dflash,
}

impl SpecAlgorithm {
    /// Every algorithm, in a stable order (the batch API's codes are indices into it).
    pub const ALL: [SpecAlgorithm; 7] = [
        Self::None,
        Self::Eagle,
        Self::Eagle3,
        Self::NextN,
        Self::Standalone,
        Self::Ngram,
        Self::Dflash,
    ];

    /// EAGLE-family (eagle, eagle3, nextn) or standalone: SGLang counts their draft KV layers.
    pub const fn counts_draft_layers(self) -> bool {
        matches!(
            self,
            Self::Eagle | Self::Eagle3 | Self::NextN | Self::Standalone
        )
    }

    /// Any speculative algorithm (everything but `None`).
    pub const fn is_speculative(self) -> bool {
        !matches!(self, Self::None)
    }

    /// The canonical name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Eagle => "eagle",
            Self::Eagle3 => "eagle3",
            Self::NextN => "nextn",
            Self::Standalone => "standalone",
            Self::Ngram => "ngram",
            Self::Dflash => "dflash",
        }
    }
}

impl FromStr for SpecAlgorithm {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" | "" => Self::None,
            "eagle" => Self::Eagle,
            "eagle3" => Self::Eagle3,
            "nextn" | "mtp" => Self::NextN,
            "standalone" => Self::Standalone,
            "ngram" => Self::Ngram,
            "dflash" => Self::Dflash,
            _ => {
                return Err(PlanError::invalid(format!(
                    "algorithm: unknown speculative algorithm {s:?}; expected one of none, eagle, eagle3, nextn (mtp), standalone, ngram, dflash"
                )))
            }
        })
    }
}

/// Speculative-decoding settings (REFERENCE section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpeculativeConfig {
    /// The algorithm.
    pub algorithm: SpecAlgorithm,
    /// `d`, the draft model's KV layers.
    pub draft_num_layers: u64,
    /// `--speculative-num-steps`.
    pub num_steps: Option<u64>,
    /// `--speculative-eagle-topk`.
    pub eagle_topk: Option<u64>,
    /// `--speculative-num-draft-tokens`.
    pub num_draft_tokens: Option<u64>,
    /// `d_sf`: banded draft depths at SWA geometry but full capacity.
    pub banded_draft_layers: u64,
    /// DFLASH draft bytes per token (per DCP rank), bytes.
    pub dflash_draft_cell_size_per_token: Option<u64>,
    /// The draft's own geometry for the exact plan; `None` means the target's full geometry.
    pub draft: Option<DraftGeometry>,
}

impl Default for SpeculativeConfig {
    fn default() -> Self {
        Self {
            algorithm: SpecAlgorithm::None,
            draft_num_layers: 0,
            num_steps: None,
            eagle_topk: None,
            num_draft_tokens: None,
            banded_draft_layers: 0,
            dflash_draft_cell_size_per_token: None,
            draft: None,
        }
    }
}

impl SpeculativeConfig {
    /// Builds and validates. With `draft` given and `draft_num_layers == 0`, `d`
    /// becomes the draft's layer count; both given and different is an error.
    pub fn new(
        algorithm: SpecAlgorithm,
        draft_num_layers: u64,
        num_steps: Option<u64>,
        eagle_topk: Option<u64>,
        num_draft_tokens: Option<u64>,
        banded_draft_layers: u64,
        dflash_draft_cell_size_per_token: Option<u64>,
        draft: Option<DraftGeometry>,
    ) -> Result<Self> {
        // A draft geometry gives d when draft_num_layers is left at 0.
        let d = match &draft {
            Some(g) if draft_num_layers == 0 => g.num_layers,
            _ => draft_num_layers,
        };
        let spec = Self {
            algorithm,
            draft_num_layers: d,
            num_steps,
            eagle_topk,
            num_draft_tokens,
            banded_draft_layers,
            dflash_draft_cell_size_per_token,
            draft,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Re-checks a config built field by field (e.g. deserialized) as [`Self::new`] would.
    pub fn validate(&self) -> Result<()> {
        let limit = crate::geometry::MAX_LAYERS;
        let d = self.draft_num_layers;
        if let Some(g) = &self.draft {
            g.validate()?;
            if g.num_layers != d {
                return Err(PlanError::invalid(format!(
                    "draft_num_layers={d} disagrees with draft.num_layers={}",
                    g.num_layers
                )));
            }
        }
        if d > limit {
            return Err(PlanError::invalid(format!(
                "draft_num_layers must be <= {limit}, got {d}"
            )));
        }
        if self.banded_draft_layers > d {
            return Err(PlanError::invalid(format!(
                "banded_draft_layers={} exceeds draft_num_layers={d}",
                self.banded_draft_layers
            )));
        }
        if self.dflash_draft_cell_size_per_token == Some(0) {
            return Err(PlanError::invalid(
                "dflash_draft_cell_size_per_token must be >= 1 when given, got 0",
            ));
        }
        Ok(())
    }

    /// `(d_f, d_sf)`: draft layers at full geometry and banded depths at SWA
    /// geometry, as the SWA configurators count them; `(0, 0)` on the draft
    /// worker or for an algorithm whose draft KV SGLang does not count.
    pub fn counted_draft_layers(&self, is_draft_worker: bool) -> (u64, u64) {
        if is_draft_worker || !self.algorithm.counts_draft_layers() || self.draft_num_layers == 0 {
            (0, 0)
        } else {
            (
                self.draft_num_layers - self.banded_draft_layers,
                self.banded_draft_layers,
            )
        }
    }

    /// `d_c`: DFLASH draft bytes per token on the target worker (`cell * dcp`), else 0.
    pub fn dflash_cell(&self, is_draft_worker: bool, dcp_size: u64) -> Result<u64> {
        match (self.algorithm, self.dflash_draft_cell_size_per_token) {
            (SpecAlgorithm::Dflash, Some(c)) if !is_draft_worker => c
                .checked_mul(dcp_size)
                .ok_or_else(|| PlanError::overflow("dflash draft cell size")),
            _ => Ok(0),
        }
    }
}
