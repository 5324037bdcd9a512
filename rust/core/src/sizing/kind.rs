//! Which SGLang configurator applies ([`select_kind`], SGLang's factory) and
//! the type of its coefficient ([`CellSize`]).

use crate::error::{PlanError, Result};
use crate::fields::Named;
use crate::request_cap::request_cap_applies;
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
    /// `SWARequestCapPoolConfigurator`: SWA pool sized from a per-request cap
    /// (called `SWAChunkCapPoolConfigurator` before SGLang 0.5.23).
    #[serde(alias = "chunk_cap")]
    RequestCap,
}

impl ConfiguratorKind {
    /// The snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::HybridSwa => "hybrid_swa",
            Self::RequestCap => "request_cap",
        }
    }

    /// SGLang's class name.
    pub const fn class_name(self) -> &'static str {
        match self {
            Self::Default => "DefaultPoolConfigurator",
            Self::HybridSwa => "HybridSWAPoolConfigurator",
            Self::RequestCap => "SWARequestCapPoolConfigurator",
        }
    }
}

impl Named for ConfiguratorKind {
    const ALL: &'static [Self] = &[Self::Default, Self::HybridSwa, Self::RequestCap];
    const NAMES: &'static [&'static str] = &["default", "hybrid_swa", "request_cap"];
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
            "request_cap" | "chunk_cap" => Ok(Self::RequestCap),
            _ => Err(PlanError::invalid(format!(
                "configurator kind: expected default, hybrid_swa or request_cap, got {s:?}"
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
    const KINDS: [ConfiguratorKind; 3] = [
        ConfiguratorKind::Default,
        ConfiguratorKind::HybridSwa,
        ConfiguratorKind::RequestCap,
    ];
    KINDS[kind_index(shape, serving)]
}

/// [`select_kind`]'s index in [`ConfiguratorKind`]'s `Named::ALL`, without
/// branches (the batch kernel classifies every row by it): SWA layers with
/// hybrid memory on pick an SWA kind, the request cap when it applies.
// `&` and `|`, not `&&` and `||`: no branch (the batch rows come in any order).
#[allow(clippy::needless_bitwise_bool)]
#[inline(always)]
pub(crate) fn kind_index(shape: &AttentionShape, serving: &ServingConfig) -> usize {
    let swa = usize::from((shape.num_swa_layers > 0) & !serving.disable_hybrid_swa_memory);
    let cap = usize::from(request_cap_applies(
        serving,
        shape.sliding_window_size,
        shape.num_full_layers,
    ));
    swa + (swa & cap)
}
