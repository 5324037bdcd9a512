//! [`Scenario`]: the unit every path plans from. A copyable bundle of a
//! model's [`AttentionShape`], a [`ServingConfig`] and a
//! [`SpeculativeConfig`]; the scalar configurators, the batch kernel (a base
//! scenario plus the columns that vary), the workload queries and the CLI all
//! start from one.

use crate::error::{Fail, Result};
use crate::fields::{AttentionShape, ServingConfig, SpeculativeConfig};
use serde::{Deserialize, Serialize};

/// A model's shape, its serving settings and its speculative decoding.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The target's layer counts and dims.
    pub shape: AttentionShape,
    /// Dtype, paging, parallelism, ratio, request-cap inputs.
    pub serving: ServingConfig,
    /// The speculative algorithm and its draft.
    pub spec: SpeculativeConfig,
}

impl Scenario {
    /// Field-level checks of every part (each value on its own).
    pub fn check_fields(&self) -> Result<()> {
        use crate::fields::ValueType;
        self.shape.check_fields()?;
        self.serving.check_fields()?;
        self.spec.check_fields()
    }

    /// Checks each part (fields and the rules across them) and fills their
    /// defaults, in the order the scalar API's constructors run.
    #[inline]
    pub fn resolved(self) -> Result<Self> {
        Ok(Self {
            shape: self.shape.resolved()?,
            serving: self.serving.resolved()?,
            spec: self.spec.resolved()?,
        })
    }

    /// The rules across fields of each part, in the order [`Self::resolved`]
    /// runs them, without the field-level checks or filling any default: for a
    /// scenario whose every field was set through a checked path
    /// ([`Self::set`], a batch cell). The arithmetic reads defaulted fields
    /// through accessors, so such a scenario plans exactly as its resolved copy.
    #[inline]
    pub fn check_rules<E: Fail>(&self) -> std::result::Result<(), E> {
        self.shape.check_rules()?;
        self.serving.check_rules()?;
        self.spec.check_rules()
    }
}
