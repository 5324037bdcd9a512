//! Model attention geometry (target and draft) and its validation.
//!
//! [`AttentionShape`] and [`DraftGeometry`] are declared, field by field, in
//! [`crate::for_each_value_type!`]; this module holds their rules: the
//! defaults of docs/semantics.md, the checks that span fields, and the one
//! rule for using a model as a draft ([`DraftGeometry::from_model`]).

use crate::error::{Fail, PlanError, Result};
use crate::fields::{Named, ValueType};
use serde::{Deserialize, Serialize};

pub use crate::fields::{AttentionShape, DraftGeometry};

/// MLA latent dimensions (DeepSeek-style): the cache holds one latent vector
/// of `kv_lora_rank + qk_rope_head_dim` elements per token per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MlaDims {
    /// Latent rank, elements.
    pub kv_lora_rank: u64,
    /// Rotary part of the key head, elements.
    pub qk_rope_head_dim: u64,
}

impl MlaDims {
    /// Elements per token per layer (`kv_lora_rank + qk_rope_head_dim`).
    pub fn elements<E: crate::error::Fail>(&self) -> std::result::Result<u64, E> {
        crate::arith::add(self.kv_lora_rank, self.qk_rope_head_dim, "MLA latent dim")
    }
}

/// SGLang's DSA indexer (DeepSeek-V3.2 style): one FP8 index key per token per
/// layer, with an f32 scale per [`DSA_QUANT_BLOCK`] elements, pooled by `kpool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DsaIndexer {
    /// Index key dim, elements (SGLang's pool requires 128).
    pub index_head_dim: u64,
    /// Index keys pooled per stored key, tokens.
    pub index_kpool: u64,
}

/// Elements per f32 scale of a DSA index key or of DSA's scaled FP8 latent
/// (SGLang's `DSATokenToKVPool.quant_block_size`).
pub const DSA_QUANT_BLOCK: u64 = 128;

impl DsaIndexer {
    /// Bytes of one index key and its scales, before pooling:
    /// `index_head_dim + index_head_dim / 128 * 4`.
    pub fn key_bytes<E: Fail>(&self) -> std::result::Result<u64, E> {
        let scales =
            crate::arith::mul(self.index_head_dim / DSA_QUANT_BLOCK, 4, "DSA index scales")?;
        crate::arith::add(self.index_head_dim, scales, "DSA index key bytes")
    }

    /// Bytes per token per indexer layer as SGLang sizes them: `ceil(key_bytes / kpool)`.
    pub fn bytes_per_token<E: Fail>(&self) -> std::result::Result<u64, E> {
        Ok(self.key_bytes::<E>()?.div_ceil(self.index_kpool))
    }
}

/// The most attention layers a model (or a draft) may have: far above any
/// real model, low enough that every layer count stays exact in doubles and a
/// plan's per-layer tensor list stays small.
pub const MAX_LAYERS: u64 = 1 << 20;

impl AttentionShape {
    /// Fills the defaulted dims (V dim = K dim, SWA geometry = full geometry,
    /// docs/semantics.md) and checks every field and the rules across them.
    /// The result has every defaulted dim set.
    #[inline]
    pub fn resolved(mut self) -> Result<Self> {
        self.check_fields()?;
        self.check_rules::<PlanError>()?;
        self.v_head_dim = Some(self.v_dim());
        self.swa_num_kv_heads = Some(self.swa_heads());
        self.swa_v_head_dim = Some(self.swa_v_dim());
        self.swa_head_dim = Some(self.swa_k_dim());
        if let Some(swa) = self.swa_mla() {
            self.swa_kv_lora_rank = Some(swa.kv_lora_rank);
            self.swa_qk_rope_head_dim = Some(swa.qk_rope_head_dim);
        }
        Ok(self)
    }

    /// Re-checks a shape built field by field (e.g. deserialized) as [`Self::resolved`] would.
    pub fn validate(&self) -> Result<()> {
        self.resolved().map(drop)
    }

    /// The rules across fields (each field already checked on its own): at
    /// least one and at most [`MAX_LAYERS`] layers; MLA needs its rope dim; the
    /// SWA latent dims belong to MLA models only. Reads the defaulted dims through their accessors, so it
    /// holds before and after [`Self::resolved`] fills them.
    #[inline]
    pub fn check_rules<E: Fail>(&self) -> std::result::Result<(), E> {
        let (n_full, n_swa) = (self.num_full_layers, self.num_swa_layers);
        if n_full == 0 && n_swa == 0 {
            return Err(E::invalid_with(|| {
                "the model has no attention layers: full_attention_layer_ids and swa_attention_layer_ids are both empty".into()
            }));
        }
        if n_full.checked_add(n_swa).is_none_or(|l| l > MAX_LAYERS) {
            return Err(E::invalid_with(|| {
                format!("the model has {n_full} full + {n_swa} SWA layers; at most {MAX_LAYERS} in total")
            }));
        }
        match (self.kv_lora_rank, self.qk_rope_head_dim) {
            (Some(_), None) => Err(E::invalid_with(|| {
                "qk_rope_head_dim is required when kv_lora_rank is given (MLA)".into()
            })),
            (None, _) if self.swa_kv_lora_rank.is_some() || self.swa_qk_rope_head_dim.is_some() => {
                Err(E::invalid_with(|| {
                    "swa_kv_lora_rank and swa_qk_rope_head_dim are MLA dims: give kv_lora_rank too"
                        .into()
                }))
            }
            (None, _) | (Some(_), Some(_)) => Ok(()),
        }?;
        if self.index_head_dim.is_none() {
            if self.index_kpool != 1 || self.index_shared_layers != 0 {
                return Err(E::invalid_with(|| {
                    "index_kpool and index_shared_layers are DSA indexer inputs: give index_head_dim too"
                        .into()
                }));
            }
        } else if self.index_shared_layers > n_full {
            return Err(E::invalid_with(|| {
                format!(
                    "index_shared_layers={} exceeds the model's {n_full} layers",
                    self.index_shared_layers
                )
            }));
        } else if self.kv_lora_rank.is_none() {
            return Err(E::invalid_with(|| {
                "index_head_dim (a DSA indexer) needs an MLA model: give kv_lora_rank too".into()
            }));
        } else if self.num_swa_layers > 0 {
            return Err(E::invalid_with(|| {
                "a DSA indexer with sliding-window layers is not modelled (SGLang sizes DSA in its \
                 Default configurator only)"
                    .into()
            }));
        }
        Ok(())
    }

    /// The DSA indexer, for a DSA model (`index_head_dim` given).
    #[inline]
    pub fn dsa(&self) -> Option<DsaIndexer> {
        self.index_head_dim.map(|index_head_dim| DsaIndexer {
            index_head_dim,
            index_kpool: self.index_kpool,
        })
    }

    /// The MLA latent dims, for an MLA model.
    #[inline]
    pub fn mla(&self) -> Option<MlaDims> {
        match (self.kv_lora_rank, self.qk_rope_head_dim) {
            (Some(kv_lora_rank), Some(qk_rope_head_dim)) => Some(MlaDims {
                kv_lora_rank,
                qk_rope_head_dim,
            }),
            _ => None,
        }
    }

    /// The MLA latent dims of an SWA layer, for an MLA model (default: the
    /// full layers'; SGLang's `swa_kv_lora_rank`, `swa_qk_rope_head_dim`).
    #[inline]
    pub fn swa_mla(&self) -> Option<MlaDims> {
        self.mla().map(|full| MlaDims {
            kv_lora_rank: self.swa_kv_lora_rank.unwrap_or(full.kv_lora_rank),
            qk_rope_head_dim: self.swa_qk_rope_head_dim.unwrap_or(full.qk_rope_head_dim),
        })
    }

    /// V head dim of a full layer, elements.
    #[inline]
    pub fn v_dim(&self) -> u64 {
        self.v_head_dim.unwrap_or(self.head_dim)
    }

    /// KV heads of an SWA layer (total, before tensor parallelism).
    #[inline]
    pub fn swa_heads(&self) -> u64 {
        self.swa_num_kv_heads.unwrap_or(self.num_kv_heads)
    }

    /// K head dim of an SWA layer, elements.
    #[inline]
    pub fn swa_k_dim(&self) -> u64 {
        self.swa_head_dim.unwrap_or(self.head_dim)
    }

    /// V head dim of an SWA layer, elements.
    #[inline]
    pub fn swa_v_dim(&self) -> u64 {
        self.swa_v_head_dim
            .unwrap_or_else(|| self.swa_head_dim.unwrap_or(self.v_dim()))
    }

    /// `L = n_f + n_s`, every attention layer.
    #[inline]
    pub fn num_layers(&self) -> u64 {
        self.num_full_layers + self.num_swa_layers
    }
}

/// The target model's attention geometry: its layer ids and their shape
/// (REFERENCE section 1). `shape`'s layer counts are the id lists' lengths.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelGeometry {
    /// Global ids of full-attention layers (they keep every token).
    pub full_attention_layer_ids: Vec<u64>,
    /// Global ids of sliding-window layers (they keep the last W tokens).
    pub swa_attention_layer_ids: Vec<u64>,
    /// Heads, dims, window, MLA dims; the layer counts of the id lists.
    pub shape: AttentionShape,
}

impl ModelGeometry {
    /// Builds and validates a geometry. `shape`'s layer counts must be 0 (they
    /// are taken from the id lists) or equal to the lists' lengths.
    pub fn new(
        full_attention_layer_ids: Vec<u64>,
        swa_attention_layer_ids: Vec<u64>,
        shape: AttentionShape,
    ) -> Result<Self> {
        let mut shape = shape;
        for (name, given, ids) in [
            (
                "num_full_layers",
                &mut shape.num_full_layers,
                &full_attention_layer_ids,
            ),
            (
                "num_swa_layers",
                &mut shape.num_swa_layers,
                &swa_attention_layer_ids,
            ),
        ] {
            let n = ids.len() as u64;
            if *given != 0 && *given != n {
                return Err(PlanError::invalid(format!(
                    "{name}={given} disagrees with the {n} layer ids given"
                )));
            }
            *given = n;
        }
        let shape = shape.resolved()?;
        check_layer_ids(&full_attention_layer_ids, &swa_attention_layer_ids)?;
        Ok(Self {
            full_attention_layer_ids,
            swa_attention_layer_ids,
            shape,
        })
    }

    /// The same layer ids with another shape (validated; layer counts as in [`Self::new`]).
    pub fn with_shape(&self, shape: AttentionShape) -> Result<Self> {
        Self::new(
            self.full_attention_layer_ids.clone(),
            self.swa_attention_layer_ids.clone(),
            shape,
        )
    }

    /// Checks a geometry built field by field (e.g. deserialized) as [`Self::new`]
    /// would, and fills the shape's defaulted dims.
    pub fn resolved(self) -> Result<Self> {
        Self::new(
            self.full_attention_layer_ids,
            self.swa_attention_layer_ids,
            self.shape,
        )
    }

    /// `n_f`, the number of full-attention layers.
    pub fn num_full_layers(&self) -> u64 {
        self.full_attention_layer_ids.len() as u64
    }

    /// `n_s`, the number of sliding-window layers.
    pub fn num_swa_layers(&self) -> u64 {
        self.swa_attention_layer_ids.len() as u64
    }

    /// `L = n_f + n_s`, every attention layer.
    pub fn num_layers(&self) -> u64 {
        self.num_full_layers() + self.num_swa_layers()
    }
}

/// Layer ids are at most `i64::MAX`, unique within each list and not in both.
/// One sort of both lists (cheaper than hashing for models' few dozen layers).
fn check_layer_ids(full: &[u64], swa: &[u64]) -> Result<()> {
    const FULL: &str = "full_attention_layer_ids";
    const SWA: &str = "swa_attention_layer_ids";
    let mut all: Vec<(u64, bool)> = full
        .iter()
        .map(|id| (*id, false))
        .chain(swa.iter().map(|id| (*id, true)))
        .collect();
    all.sort_unstable();
    if let Some((id, is_swa)) = all.last().filter(|(id, _)| *id > i64::MAX as u64) {
        let name = if *is_swa { SWA } else { FULL };
        return Err(PlanError::invalid(format!(
            "{name}: layer id {id} is above {}",
            i64::MAX
        )));
    }
    for w in all.windows(2) {
        let ((a, a_swa), (b, b_swa)) = (w[0], w[1]);
        if a == b {
            return Err(PlanError::invalid(if a_swa == b_swa {
                let name = if a_swa { SWA } else { FULL };
                format!("{name} has duplicate layer id {a}")
            } else {
                format!("layer id {a} is in both {FULL} and {SWA}")
            }));
        }
    }
    Ok(())
}

/// Which target pool's token count the draft pool takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftCapacity {
    /// As many tokens as the target's full pool.
    #[default]
    Full,
    /// As many tokens as the target's SWA pool.
    Swa,
}

impl Named for DraftCapacity {
    const ALL: &'static [Self] = &[Self::Full, Self::Swa];
    const NAMES: &'static [&'static str] = &["full", "swa"];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl DraftCapacity {
    /// `"full"` or `"swa"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Swa => "swa",
        }
    }
}

impl std::str::FromStr for DraftCapacity {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Self::Full),
            "swa" => Ok(Self::Swa),
            _ => Err(PlanError::invalid(format!(
                "capacity: expected \"full\" or \"swa\", got {s:?}"
            ))),
        }
    }
}

impl DraftGeometry {
    /// Fills `v_head_dim` (default: `head_dim`) and checks every field.
    pub fn resolved(mut self) -> Result<Self> {
        self.check_fields()?;
        self.v_head_dim.get_or_insert(self.head_dim);
        if self.num_layers > MAX_LAYERS {
            return Err(PlanError::invalid(format!(
                "draft num_layers must be <= {MAX_LAYERS}, got {}",
                self.num_layers
            )));
        }
        Ok(self)
    }

    /// Re-checks a draft geometry built field by field (e.g. deserialized).
    pub fn validate(&self) -> Result<()> {
        self.resolved().map(drop)
    }

    /// V head dim, elements.
    pub fn v_dim(&self) -> u64 {
        self.v_head_dim.unwrap_or(self.head_dim)
    }

    /// The one rule for using a whole model as a draft (a standalone draft):
    /// every layer of the model is a draft KV layer at one geometry.
    ///
    /// - A model with full layers: the full layers' heads and dims; its SWA
    ///   layers, if any, must have the same heads and dims (a draft pool has one
    ///   geometry). Capacity: SGLang's rule (`None`).
    /// - An all-SWA model: the SWA layers' heads and dims, capacity `"swa"`
    ///   (its KV never outgrows the window, as for SGLang's SWA-geometry MTP layers).
    /// - An MLA model is refused: a draft pool of MLA latents is not expressible.
    ///
    /// `num_layers` overrides the layer count (default: every attention layer).
    pub fn from_model(
        model: &AttentionShape,
        num_layers: Option<u64>,
        kv_cache_dtype: Option<crate::KvDtype>,
    ) -> Result<Self> {
        if let Some(r) = model.kv_lora_rank {
            return Err(PlanError::invalid(format!(
                "an MLA model (kv_lora_rank={r}) cannot be described as a DraftGeometry; \
                 give no draft geometry (the draft then takes the target's geometry)"
            )));
        }
        let full = (model.num_kv_heads, model.head_dim, model.v_dim());
        let swa = (model.swa_heads(), model.swa_k_dim(), model.swa_v_dim());
        let all_swa = model.num_full_layers == 0;
        if !all_swa && model.num_swa_layers > 0 && swa != full {
            return Err(PlanError::invalid(format!(
                "the model's SWA layers have another head geometry (heads, head_dim, v_head_dim) = \
                 {swa:?} than its full layers {full:?}; a DraftGeometry has one geometry"
            )));
        }
        let (heads, k, v) = if all_swa { swa } else { full };
        Self {
            num_layers: num_layers.unwrap_or_else(|| model.num_layers()),
            num_kv_heads: heads,
            head_dim: k,
            v_head_dim: Some(v),
            kv_cache_dtype,
            capacity: all_swa.then_some(DraftCapacity::Swa),
        }
        .resolved()
    }
}
