//! Model attention geometry (target and draft) and its validation.

use crate::dtype::KvDtype;
use crate::error::{PlanError, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

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
    pub fn elements(&self) -> Result<u64> {
        self.kv_lora_rank
            .checked_add(self.qk_rope_head_dim)
            .ok_or_else(|| PlanError::overflow("MLA latent dim"))
    }
}

/// The target model's attention geometry (REFERENCE section 1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelGeometry {
    /// Global ids of full-attention layers (they keep every token).
    pub full_attention_layer_ids: Vec<u64>,
    /// Global ids of sliding-window layers (they keep the last W tokens).
    pub swa_attention_layer_ids: Vec<u64>,
    /// Total KV heads of a full layer (before tensor parallelism).
    pub num_kv_heads: u64,
    /// K head dim of a full layer, elements.
    pub head_dim: u64,
    /// V head dim of a full layer, elements.
    pub v_head_dim: u64,
    /// Total KV heads of an SWA layer.
    pub swa_num_kv_heads: u64,
    /// K head dim of an SWA layer, elements.
    pub swa_head_dim: u64,
    /// V head dim of an SWA layer, elements.
    pub swa_v_head_dim: u64,
    /// SGLang's exclusive sliding window (HF `sliding_window` minus 1), tokens.
    pub sliding_window_size: Option<u64>,
    /// MLA latent dims; `Some` makes this an MLA model.
    pub mla: Option<MlaDims>,
}

fn positive(name: &str, v: u64) -> Result<u64> {
    if v == 0 {
        Err(PlanError::invalid(format!("{name} must be >= 1, got 0")))
    } else {
        Ok(v)
    }
}

/// The most attention layers a model (or a draft) may have: far above any
/// real model, low enough that every layer count stays exact in doubles and a
/// plan's per-layer tensor list stays small.
pub const MAX_LAYERS: u64 = 1 << 20;

/// The sizing view of a geometry: layer counts and dims, no layer ids.
/// Everything the configurators' arithmetic needs; `Copy` and allocation-free,
/// so the batch API builds one per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttentionShape {
    /// `n_f`, full-attention layers.
    pub n_full: u64,
    /// `n_s`, sliding-window layers.
    pub n_swa: u64,
    /// Total KV heads of a full layer.
    pub num_kv_heads: u64,
    /// K head dim of a full layer, elements.
    pub head_dim: u64,
    /// V head dim of a full layer, elements.
    pub v_head_dim: u64,
    /// Total KV heads of an SWA layer.
    pub swa_num_kv_heads: u64,
    /// K head dim of an SWA layer, elements.
    pub swa_head_dim: u64,
    /// V head dim of an SWA layer, elements.
    pub swa_v_head_dim: u64,
    /// SGLang's exclusive sliding window, tokens.
    pub sliding_window_size: Option<u64>,
    /// MLA latent dims.
    pub mla: Option<MlaDims>,
}

impl AttentionShape {
    /// Applies the defaults of docs/semantics.md (V dim = K dim, SWA geometry =
    /// full geometry) and validates counts and dims.
    pub fn new(
        n_full: u64,
        n_swa: u64,
        num_kv_heads: u64,
        head_dim: u64,
        v_head_dim: Option<u64>,
        swa_num_kv_heads: Option<u64>,
        swa_head_dim: Option<u64>,
        swa_v_head_dim: Option<u64>,
        sliding_window_size: Option<u64>,
        kv_lora_rank: Option<u64>,
        qk_rope_head_dim: Option<u64>,
    ) -> Result<Self> {
        let shape = Self::with_defaults(
            n_full,
            n_swa,
            num_kv_heads,
            head_dim,
            v_head_dim,
            swa_num_kv_heads,
            swa_head_dim,
            swa_v_head_dim,
            sliding_window_size,
            kv_lora_rank,
            qk_rope_head_dim,
        )?;
        shape.validate()?;
        Ok(shape)
    }

    /// [`Self::new`] without [`Self::validate`]: applies the defaults and only
    /// checks that an MLA latent comes with its rope dim. For callers that
    /// validate later (a configurator checks its inputs when it is built).
    pub fn with_defaults(
        n_full: u64,
        n_swa: u64,
        num_kv_heads: u64,
        head_dim: u64,
        v_head_dim: Option<u64>,
        swa_num_kv_heads: Option<u64>,
        swa_head_dim: Option<u64>,
        swa_v_head_dim: Option<u64>,
        sliding_window_size: Option<u64>,
        kv_lora_rank: Option<u64>,
        qk_rope_head_dim: Option<u64>,
    ) -> Result<Self> {
        let mla = match (kv_lora_rank, qk_rope_head_dim) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(PlanError::invalid(
                    "qk_rope_head_dim is required when kv_lora_rank is given (MLA)",
                ))
            }
            (Some(r), Some(q)) => Some(MlaDims {
                kv_lora_rank: r,
                qk_rope_head_dim: q,
            }),
        };
        let v_head_dim = v_head_dim.unwrap_or(head_dim);
        let swa_v_default = if swa_head_dim.is_some() {
            swa_head_dim
        } else {
            Some(v_head_dim)
        };
        Ok(Self {
            n_full,
            n_swa,
            num_kv_heads,
            head_dim,
            v_head_dim,
            swa_num_kv_heads: swa_num_kv_heads.unwrap_or(num_kv_heads),
            swa_head_dim: swa_head_dim.unwrap_or(head_dim),
            swa_v_head_dim: swa_v_head_dim.or(swa_v_default).unwrap_or(head_dim),
            sliding_window_size,
            mla,
        })
    }

    /// Checks counts and dims (also of a shape built field by field, e.g. deserialized).
    pub fn validate(&self) -> Result<()> {
        positive("num_kv_heads", self.num_kv_heads)?;
        positive("head_dim", self.head_dim)?;
        positive("v_head_dim", self.v_head_dim)?;
        positive("swa_num_kv_heads", self.swa_num_kv_heads)?;
        positive("swa_head_dim", self.swa_head_dim)?;
        positive("swa_v_head_dim", self.swa_v_head_dim)?;
        let (n_full, n_swa) = (self.n_full, self.n_swa);
        if n_full == 0 && n_swa == 0 {
            return Err(PlanError::invalid(
                "the model has no attention layers: full_attention_layer_ids and swa_attention_layer_ids are both empty",
            ));
        }
        if n_full.checked_add(n_swa).is_none_or(|l| l > MAX_LAYERS) {
            return Err(PlanError::invalid(format!(
                "the model has {n_full} full + {n_swa} SWA layers; at most {MAX_LAYERS} in total"
            )));
        }
        if let Some(m) = self.mla {
            positive("kv_lora_rank", m.kv_lora_rank)?;
            if n_swa > 0 {
                return Err(PlanError::invalid(format!(
                    "an MLA model (kv_lora_rank={}) cannot have SWA layers, got {n_swa} swa_attention_layer_ids",
                    m.kv_lora_rank
                )));
            }
        }
        Ok(())
    }

    /// `n_f`, the number of full-attention layers.
    pub fn num_full_layers(&self) -> u64 {
        self.n_full
    }

    /// `n_s`, the number of sliding-window layers.
    pub fn num_swa_layers(&self) -> u64 {
        self.n_swa
    }

    /// `L = n_f + n_s`, every attention layer.
    pub fn num_layers(&self) -> u64 {
        self.n_full + self.n_swa
    }
}

impl ModelGeometry {
    /// Builds and validates a geometry; `None` fields take the defaults of
    /// docs/semantics.md (V dim = K dim, SWA geometry = full geometry).
    pub fn new(
        full_attention_layer_ids: Vec<u64>,
        swa_attention_layer_ids: Vec<u64>,
        num_kv_heads: u64,
        head_dim: u64,
        v_head_dim: Option<u64>,
        swa_num_kv_heads: Option<u64>,
        swa_head_dim: Option<u64>,
        swa_v_head_dim: Option<u64>,
        sliding_window_size: Option<u64>,
        kv_lora_rank: Option<u64>,
        qk_rope_head_dim: Option<u64>,
    ) -> Result<Self> {
        let shape = AttentionShape::new(
            full_attention_layer_ids.len() as u64,
            swa_attention_layer_ids.len() as u64,
            num_kv_heads,
            head_dim,
            v_head_dim,
            swa_num_kv_heads,
            swa_head_dim,
            swa_v_head_dim,
            sliding_window_size,
            kv_lora_rank,
            qk_rope_head_dim,
        )?;
        check_layer_ids("full_attention_layer_ids", &full_attention_layer_ids)?;
        check_layer_ids("swa_attention_layer_ids", &swa_attention_layer_ids)?;
        let full: HashSet<u64> = full_attention_layer_ids.iter().copied().collect();
        if let Some(dup) = swa_attention_layer_ids.iter().find(|id| full.contains(id)) {
            return Err(PlanError::invalid(format!(
                "layer id {dup} is in both full_attention_layer_ids and swa_attention_layer_ids"
            )));
        }
        Ok(Self {
            full_attention_layer_ids,
            swa_attention_layer_ids,
            num_kv_heads: shape.num_kv_heads,
            head_dim: shape.head_dim,
            v_head_dim: shape.v_head_dim,
            swa_num_kv_heads: shape.swa_num_kv_heads,
            swa_head_dim: shape.swa_head_dim,
            swa_v_head_dim: shape.swa_v_head_dim,
            sliding_window_size: shape.sliding_window_size,
            mla: shape.mla,
        })
    }

    /// Re-checks a geometry built field by field (e.g. deserialized) as [`Self::new`] would.
    pub fn validate(&self) -> Result<()> {
        let m = self.mla;
        Self::new(
            self.full_attention_layer_ids.clone(),
            self.swa_attention_layer_ids.clone(),
            self.num_kv_heads,
            self.head_dim,
            Some(self.v_head_dim),
            Some(self.swa_num_kv_heads),
            Some(self.swa_head_dim),
            Some(self.swa_v_head_dim),
            self.sliding_window_size,
            m.map(|x| x.kv_lora_rank),
            m.map(|x| x.qk_rope_head_dim),
        )
        .map(|_| ())
    }

    /// The sizing view (counts and dims).
    pub fn shape(&self) -> AttentionShape {
        AttentionShape {
            n_full: self.num_full_layers(),
            n_swa: self.num_swa_layers(),
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
            v_head_dim: self.v_head_dim,
            swa_num_kv_heads: self.swa_num_kv_heads,
            swa_head_dim: self.swa_head_dim,
            swa_v_head_dim: self.swa_v_head_dim,
            sliding_window_size: self.sliding_window_size,
            mla: self.mla,
        }
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

fn check_layer_ids(name: &str, ids: &[u64]) -> Result<()> {
    let mut seen = HashSet::with_capacity(ids.len());
    for id in ids {
        if !seen.insert(*id) {
            return Err(PlanError::invalid(format!(
                "{name} has duplicate layer id {id}"
            )));
        }
    }
    Ok(())
}

/// Which target pool's token count the draft pool takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftCapacity {
    /// As many tokens as the target's full pool.
    Full,
    /// As many tokens as the target's SWA pool.
    Swa,
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

/// The draft model's own KV geometry, when it differs from the target's full layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DraftGeometry {
    /// Draft KV layers.
    pub num_layers: u64,
    /// Total draft KV heads (before tensor parallelism).
    pub num_kv_heads: u64,
    /// Draft K head dim, elements.
    pub head_dim: u64,
    /// Draft V head dim, elements.
    pub v_head_dim: u64,
    /// Draft KV dtype; `None` means the target's.
    pub kv_cache_dtype: Option<KvDtype>,
    /// Draft pool capacity; `None` means SGLang's rule (full pool tokens, or
    /// SWA tokens for an all-SWA target).
    pub capacity: Option<DraftCapacity>,
}

impl DraftGeometry {
    /// Builds and validates a draft geometry.
    pub fn new(
        num_layers: u64,
        num_kv_heads: u64,
        head_dim: u64,
        v_head_dim: Option<u64>,
        kv_cache_dtype: Option<KvDtype>,
        capacity: Option<DraftCapacity>,
    ) -> Result<Self> {
        let num_layers = positive("draft num_layers", num_layers)?;
        let num_kv_heads = positive("draft num_kv_heads", num_kv_heads)?;
        let head_dim = positive("draft head_dim", head_dim)?;
        let v_head_dim = positive("draft v_head_dim", v_head_dim.unwrap_or(head_dim))?;
        if num_layers > MAX_LAYERS {
            return Err(PlanError::invalid(format!(
                "draft num_layers must be <= {MAX_LAYERS}, got {num_layers}"
            )));
        }
        Ok(Self {
            num_layers,
            num_kv_heads,
            head_dim,
            v_head_dim,
            kv_cache_dtype,
            capacity,
        })
    }

    /// Re-checks a draft geometry built field by field (e.g. deserialized).
    pub fn validate(&self) -> Result<()> {
        Self::new(
            self.num_layers,
            self.num_kv_heads,
            self.head_dim,
            Some(self.v_head_dim),
            self.kv_cache_dtype,
            self.capacity,
        )
        .map(|_| ())
    }
}
