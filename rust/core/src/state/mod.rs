//! Recurrent state beside the KV cache (Mamba2, gated delta net, KDA): the
//! per-request state a hybrid model keeps in each of its state layers, as
//! SGLang 0.5.23's `configs/mamba_utils.py` shapes it. [`StateConfig`]'s
//! fields are declared in [`crate::for_each_value_type!`]; this module holds
//! the names, the rules across fields, the shapes ([`shape`]) and the bytes a
//! request's state takes. SGLang's budget for it is [`crate::sizing::state`].

pub mod shape;

use crate::arith::{add, mul};
use crate::error::{Fail, PlanError, Result};
use crate::fields::{Named, ValueType};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

pub use crate::fields::StateConfig;

/// A named enum of this module: the enum, its [`Named`] table, `as_str` and a
/// `FromStr` that reads the canonical names (case-insensitive).
macro_rules! state_enum {
    ($(#[doc = $doc:literal])* $T:ident { $( $(#[$vattr:meta])* $V:ident = $name:literal, )* }
     field $field:literal) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
        pub enum $T {
            $( $(#[$vattr])* #[serde(rename = $name)] $V, )*
        }
        impl Named for $T {
            const ALL: &'static [Self] = &[$(Self::$V),*];
            const NAMES: &'static [&'static str] = &[$($name),*];
            fn name(self) -> &'static str {
                self.as_str()
            }
        }
        impl $T {
            /// The canonical name.
            pub const fn as_str(self) -> &'static str {
                match self { $( Self::$V => $name, )* }
            }
        }
        impl FromStr for $T {
            type Err = PlanError;
            fn from_str(s: &str) -> Result<Self> {
                let low = s.to_ascii_lowercase();
                $( if low == $name { return Ok(Self::$V); } )*
                Err(PlanError::invalid(format!(
                    "{}: expected one of {}, got {s:?}",
                    $field,
                    Self::NAMES.join(", ")
                )))
            }
        }
    };
}

state_enum! {
    /// A state tensor's dtype (SGLang's `mamba_ssm_dtype` and `SGLANG_MAMBA_CONV_DTYPE` names).
    StateDtype {
        /// 4 bytes.
        #[default]
        F32 = "float32",
        /// 2 bytes.
        Bf16 = "bfloat16",
        /// 2 bytes.
        F16 = "float16",
    } field "state dtype"
}

impl StateDtype {
    /// Bytes per element.
    pub const fn itemsize(self) -> u64 {
        match self {
            Self::F32 => 4,
            Self::Bf16 | Self::F16 => 2,
        }
    }
}

state_enum! {
    /// The state mixer: which of SGLang's linear-state configs the model has
    /// (`hybrid_gdn_config`, `hybrid_kda_config`, or neither).
    StateMixer {
        /// Mamba2 (or Mamba1 full-rank) mixers: Nemotron-H, Falcon-H1, Granite-4.0-H, Jamba.
        #[default]
        Mamba2 = "mamba2",
        /// Gated delta net: Qwen3-Next, Qwen3.5 (`hybrid_gdn_config`).
        Gdn = "gdn",
        /// Kimi delta attention: Kimi-Linear (`hybrid_kda_config`).
        Kda = "kda",
    } field "mixer"
}

state_enum! {
    /// SGLang's `--mamba-radix-cache-strategy`, resolved (`auto` is resolved at launch).
    MambaRadixStrategy {
        /// No extra state buffer.
        #[default]
        NoBuffer = "no_buffer",
        /// An extra state buffer per request (ping-pong with overlap).
        ExtraBuffer = "extra_buffer",
        /// The extra buffer, its second slot deferred.
        ExtraBufferLazy = "extra_buffer_lazy",
    } field "mamba_radix_cache_strategy"
}

impl StateConfig {
    /// Checks every field and the rules across them; fills `stage_state_layers`
    /// (default: every state layer).
    pub fn resolved(mut self) -> Result<Self> {
        self.check_fields()?;
        let stage = self.stage_state_layers.unwrap_or(self.num_state_layers);
        if stage > self.num_state_layers {
            return Err(PlanError::invalid(format!(
                "stage_state_layers={stage} exceeds num_state_layers={}",
                self.num_state_layers
            )));
        }
        self.stage_state_layers = Some(stage);
        self.per_layer_bytes::<PlanError>()?;
        Ok(self)
    }

    /// The state one request keeps in one state layer, bytes: the conv state at
    /// `conv_dtype` plus the temporal (SSM) state at `ssm_dtype`.
    pub fn per_layer_bytes<E: Fail>(&self) -> std::result::Result<u64, E> {
        let what = "state bytes per layer";
        let ssm = mul(
            mul(self.ssm_heads, self.ssm_head_dim, what)?,
            self.ssm_state_dim,
            what,
        )?;
        add(
            mul(self.conv_elems, self.conv_dtype.itemsize(), what)?,
            mul(ssm, self.ssm_dtype.itemsize(), what)?,
            what,
        )
    }

    /// SGLang's `mamba_cache_per_req`: the state of one request over every state
    /// layer of the model, bytes.
    pub fn cache_per_req<E: Fail>(&self) -> std::result::Result<u64, E> {
        mul(
            self.per_layer_bytes::<E>()?,
            self.num_state_layers,
            "mamba_cache_per_req",
        )
    }

    /// SGLang's `replayssm_ring_bytes_per_req(record_len)`: the ReplaySSM
    /// spec-verify rings of one request over every state layer, bytes (GDN keeps
    /// d, normalised k and a scalar gate, plus the low parts of d and k when the
    /// conv dtype is not float32; KDA keeps raw v and k, beta, a per-K gate, d and k).
    pub fn replay_ring_per_req<E: Fail>(&self, record_len: u64) -> std::result::Result<u64, E> {
        let what = "ReplaySSM ring bytes";
        let (hv, v, k, hk) = (
            self.ssm_heads,
            self.ssm_head_dim,
            self.ssm_state_dim,
            self.k_heads_per_tp,
        );
        let conv = self.conv_dtype.itemsize();
        let m = |a: u64, b: u64| mul::<E>(a, b, what);
        let dv = m(m(m(hv, record_len)?, v)?, conv)?; // hv * L * v * conv
        let kk = m(m(m(hk, record_len)?, k)?, conv)?; // h_k * L * k * conv
        let beta = m(m(hv, record_len)?, 4)?; // hv * L * fp32
        let per_layer = if self.mixer == StateMixer::Kda {
            let g = m(m(m(hv, record_len)?, k)?, 4)?; // hv * L * k * fp32
            [dv, kk, beta, g, dv, kk]
                .into_iter()
                .try_fold(0u64, |s, x| add::<E>(s, x, what))?
        } else {
            let mut s = [dv, kk, beta]
                .into_iter()
                .try_fold(0u64, |s, x| add::<E>(s, x, what))?;
            if self.conv_dtype != StateDtype::F32 {
                s = add(add(s, dv, what)?, kk, what)?;
            }
            s
        };
        m(per_layer, self.num_state_layers)
    }
}
