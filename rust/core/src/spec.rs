//! Speculative decoding: the algorithm and the draft-layer rules.
//! [`SpeculativeConfig`]'s fields are declared in [`crate::for_each_value_type!`].

use crate::error::{Fail, PlanError, Result};
use crate::fields::{Named, ValueType};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

pub use crate::fields::SpeculativeConfig;

/// SGLang's `--speculative-algorithm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecAlgorithm {
    /// No speculative decoding.
    #[default]
    None,
    /// EAGLE (draft reuses the target's attention config).
    Eagle,
    /// EAGLE-3.
    Eagle3,
    /// NextN / MTP (DeepSeek- or MiMo-style multi-token prediction).
    #[serde(rename = "nextn")]
    NextN,
    /// A standalone small draft model.
    Standalone,
    /// N-gram lookup (no draft KV).
    Ngram,
    /// DFLASH (draft with its own bytes per token).
    Dflash,
}

impl SpecAlgorithm {
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

impl Named for SpecAlgorithm {
    const ALL: &'static [Self] = &[
        Self::None,
        Self::Eagle,
        Self::Eagle3,
        Self::NextN,
        Self::Standalone,
        Self::Ngram,
        Self::Dflash,
    ];
    const NAMES: &'static [&'static str] = &[
        "none",
        "eagle",
        "eagle3",
        "nextn",
        "standalone",
        "ngram",
        "dflash",
    ];
    fn name(self) -> &'static str {
        self.as_str()
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

impl SpeculativeConfig {
    /// Checks every field and the rules across them, and fills `draft_num_layers`
    /// from `draft` when it is 0.
    #[inline]
    pub fn resolved(mut self) -> Result<Self> {
        self.check_fields()?;
        self.check_rules::<PlanError>()?;
        self.draft_num_layers = self.num_draft_layers();
        self.draft = self.draft.map(crate::DraftGeometry::resolved).transpose()?;
        Ok(self)
    }

    /// `d`: `draft_num_layers`, or the draft geometry's layer count when that is 0.
    #[inline]
    pub fn num_draft_layers(&self) -> u64 {
        match &self.draft {
            Some(g) if self.draft_num_layers == 0 => g.num_layers,
            _ => self.draft_num_layers,
        }
    }

    /// The rules across fields (each field already checked on its own): a draft
    /// geometry agrees with `draft_num_layers`, `d` is at most
    /// [`crate::geometry::MAX_LAYERS`], the banded depths at most `d`.
    #[inline]
    pub fn check_rules<E: Fail>(&self) -> std::result::Result<(), E> {
        if let Some(g) = &self.draft {
            if self.draft_num_layers != 0 && g.num_layers != self.draft_num_layers {
                return Err(E::invalid_with(|| {
                    format!(
                        "draft_num_layers={} disagrees with draft.num_layers={}",
                        self.draft_num_layers, g.num_layers
                    )
                }));
            }
        }
        let d = self.num_draft_layers();
        let limit = crate::geometry::MAX_LAYERS;
        if d > limit {
            return Err(E::invalid_with(|| {
                format!("draft_num_layers must be <= {limit}, got {d}")
            }));
        }
        if self.banded_draft_layers > d {
            return Err(E::invalid_with(|| {
                format!(
                    "banded_draft_layers={} exceeds draft_num_layers={d}",
                    self.banded_draft_layers
                )
            }));
        }
        Ok(())
    }

    /// Re-checks a config built field by field (e.g. deserialized) as [`Self::resolved`] would.
    pub fn validate(&self) -> Result<()> {
        self.resolved().map(drop)
    }

    /// `(d_f, d_sf)`: draft layers at full geometry and banded depths at SWA
    /// geometry, as the SWA configurators count them; `(0, 0)` on the draft
    /// worker or for an algorithm whose draft KV SGLang does not count.
    pub fn counted_draft_layers(&self, is_draft_worker: bool) -> (u64, u64) {
        let d = self.num_draft_layers();
        if is_draft_worker || !self.algorithm.counts_draft_layers() || d == 0 {
            (0, 0)
        } else {
            (d - self.banded_draft_layers, self.banded_draft_layers)
        }
    }

    /// `d_c`: DFLASH draft bytes per token on the target worker (`cell * dcp`), else 0.
    pub fn dflash_cell<E: Fail>(
        &self,
        is_draft_worker: bool,
        dcp_size: u64,
    ) -> std::result::Result<u64, E> {
        match (self.algorithm, self.dflash_draft_cell_size_per_token) {
            (SpecAlgorithm::Dflash, Some(c)) if !is_draft_worker => c
                .checked_mul(dcp_size)
                .ok_or_else(|| E::overflow_of("dflash draft cell size")),
            _ => Ok(0),
        }
    }
}
