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
    /// UNO (no draft KV pool; a decode step allocates one slot beyond the draft tokens).
    Uno,
    /// DSPARK (the DFLASH family: a draft with its own bytes per token).
    Dspark,
    /// Frozen-KV MTP (SGLang counts it with EAGLE).
    FrozenKvMtp,
}

impl SpecAlgorithm {
    /// The EAGLE family (eagle, eagle3, nextn, frozen_kv_mtp: SGLang's `is_eagle()`).
    pub const fn is_eagle(self) -> bool {
        matches!(
            self,
            Self::Eagle | Self::Eagle3 | Self::NextN | Self::FrozenKvMtp
        )
    }

    /// EAGLE-family or standalone: SGLang counts their draft KV layers
    /// (`is_eagle() or is_standalone()`).
    pub const fn counts_draft_layers(self) -> bool {
        self.is_eagle() || matches!(self, Self::Standalone)
    }

    /// The DFLASH family (dflash, dspark): a draft priced by its own bytes per
    /// token, or by layer scaling (SGLang's `is_dflash_family()`).
    pub const fn is_dflash_family(self) -> bool {
        matches!(self, Self::Dflash | Self::Dspark)
    }

    /// The draft phase writes KV (every algorithm but ngram; SGLang's `has_draft_kv()`).
    pub const fn has_draft_kv(self) -> bool {
        !matches!(self, Self::Ngram)
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
            Self::Uno => "uno",
            Self::Dspark => "dspark",
            Self::FrozenKvMtp => "frozen_kv_mtp",
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
        Self::Uno,
        Self::Dspark,
        Self::FrozenKvMtp,
    ];
    const NAMES: &'static [&'static str] = &[
        "none",
        "eagle",
        "eagle3",
        "nextn",
        "standalone",
        "ngram",
        "dflash",
        "uno",
        "dspark",
        "frozen_kv_mtp",
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
            "uno" => Self::Uno,
            "dspark" => Self::Dspark,
            "frozen_kv_mtp" => Self::FrozenKvMtp,
            _ => {
                return Err(PlanError::invalid(format!(
                    "algorithm: unknown speculative algorithm {s:?}; expected one of none, eagle, eagle3, \
                     nextn (mtp), standalone, ngram, dflash, uno, dspark, frozen_kv_mtp"
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
    /// [`crate::geometry::MAX_LAYERS`], the banded depths and the SWA draft
    /// layers at most `d` and not both given (SGLang reads `d_s` only without
    /// `mtp_local_layer_ids`), and no fused entries with a draft geometry of
    /// its own.
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
        for (name, n) in [
            ("banded_draft_layers", self.banded_draft_layers),
            ("draft_swa_num_layers", self.draft_swa_num_layers),
        ] {
            if n > d {
                return Err(E::invalid_with(|| {
                    format!("{name}={n} exceeds draft_num_layers={d}")
                }));
            }
        }
        if self.banded_draft_layers > 0 && self.draft_swa_num_layers > 0 {
            return Err(E::invalid_with(|| {
                "banded_draft_layers and draft_swa_num_layers exclude each other: SGLang counts SWA draft \
                 layers only for a draft without mtp_local_layer_ids"
                    .into()
            }));
        }
        if self.draft.is_some() && self.is_fused() {
            return Err(E::invalid_with(|| {
                "a fused draft lives in the target's entries and has no pool of its own: give \
                 fused entries or a draft geometry, not both"
                    .into()
            }));
        }
        Ok(())
    }

    /// Re-checks a config built field by field (e.g. deserialized) as [`Self::resolved`] would.
    pub fn validate(&self) -> Result<()> {
        self.resolved().map(drop)
    }

    /// A fused draft entry is given (the draft lives in the target's entries).
    #[inline]
    pub fn is_fused(&self) -> bool {
        self.fused_full_entry_bytes.is_some() || self.fused_swa_entry_bytes.is_some()
    }

    /// `(d_f, d_s, d_sf)`: draft layers at full geometry, at SWA geometry and
    /// capacity, and banded depths at SWA geometry but full capacity, as the
    /// SWA configurators count them; zeros on the draft worker or for an
    /// algorithm whose draft KV SGLang does not count. (Fused entries zero them
    /// too; [`crate::Sizing`] applies that.)
    #[inline]
    pub fn counted_draft_layers(&self, is_draft_worker: bool) -> (u64, u64, u64) {
        let d = self.num_draft_layers();
        if is_draft_worker || !self.algorithm.counts_draft_layers() || d == 0 {
            (0, 0, 0)
        } else if self.banded_draft_layers > 0 {
            (d - self.banded_draft_layers, 0, self.banded_draft_layers)
        } else {
            (d - self.draft_swa_num_layers, self.draft_swa_num_layers, 0)
        }
    }

    /// `d_c`: DFLASH-family draft bytes per token on the target worker
    /// (`cell * dcp`), else 0 (also for a given cell of 0, as SGLang reads it).
    pub fn dflash_cell<E: Fail>(
        &self,
        is_draft_worker: bool,
        dcp_size: u64,
    ) -> std::result::Result<u64, E> {
        match self.dflash_draft_cell_size_per_token {
            Some(c) if c > 0 && self.algorithm.is_dflash_family() && !is_draft_worker => c
                .checked_mul(dcp_size)
                .filter(|v| *v <= crate::arith::MAX_QUANTITY)
                .ok_or_else(|| E::overflow_of("dflash draft cell size")),
            _ => Ok(0),
        }
    }

    /// The draft-token bound a decode step allocates for (SGLang's
    /// `max_speculative_num_draft_tokens()`: the larger of `num_draft_tokens`
    /// and `max_num_draft_tokens`, `None` when neither is given), tokens.
    #[inline]
    pub fn max_draft_tokens(&self) -> Option<u64> {
        match (self.num_draft_tokens, self.max_num_draft_tokens) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}
