//! Serving settings: dtype, paging, parallelism, SWA ratio and request-cap
//! inputs. [`ServingConfig`]'s fields are declared in
//! [`crate::for_each_value_type!`]; this module holds the rules across them.

use crate::error::{Fail, PlanError, Result};
use crate::fields::{Named, ValueType};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

pub use crate::fields::ServingConfig;

/// PD disaggregation role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisaggregationMode {
    /// Not disaggregated.
    #[default]
    Null,
    /// Prefill server.
    Prefill,
    /// Decode server.
    Decode,
}

impl Named for DisaggregationMode {
    const ALL: &'static [Self] = &[Self::Null, Self::Prefill, Self::Decode];
    const NAMES: &'static [&'static str] = &["null", "prefill", "decode"];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl DisaggregationMode {
    /// The canonical name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Prefill => "prefill",
            Self::Decode => "decode",
        }
    }
}

impl FromStr for DisaggregationMode {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "null" | "none" | "" => Ok(Self::Null),
            "prefill" => Ok(Self::Prefill),
            "decode" => Ok(Self::Decode),
            _ => Err(PlanError::invalid(format!(
                "disaggregation_mode: expected null, prefill or decode, got {s:?}"
            ))),
        }
    }
}

impl ServingConfig {
    /// Checks every field and the rules across them (docs/semantics.md).
    #[inline]
    pub fn resolved(self) -> Result<Self> {
        self.check_fields()?;
        self.check_rules::<PlanError>()?;
        Ok(self)
    }

    /// The rules across fields (each field already checked on its own):
    /// `dcp_size` divides `tp_size`.
    #[inline]
    pub fn check_rules<E: Fail>(&self) -> std::result::Result<(), E> {
        if self.dcp_size != 1 && !self.tp_size.is_multiple_of(self.dcp_size) {
            return Err(E::invalid_with(|| {
                format!(
                    "tp_size={} must be a multiple of dcp_size={}",
                    self.tp_size, self.dcp_size
                )
            }));
        }
        Ok(())
    }

    /// The KV dtype the pools store: `kv_cache_dtype`, with `auto` as `model_dtype`.
    #[inline(always)]
    pub fn kv_dtype(&self) -> crate::KvDtype {
        self.kv_cache_dtype.or_model(self.model_dtype)
    }

    /// Heads of the Default configurator are split over `tp // dcp` ranks; a
    /// draft worker's model never joins the DCP group (SGLang sets its dcp to 1).
    #[inline(always)]
    pub fn heads_dcp_size(&self) -> u64 {
        if self.is_draft_worker {
            1
        } else {
            self.dcp_size
        }
    }

    /// Re-checks a config built field by field (e.g. deserialized) as [`Self::resolved`] would.
    pub fn validate(&self) -> Result<()> {
        self.resolved().map(drop)
    }
}
