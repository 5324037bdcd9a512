//! Serving settings: dtype, paging, parallelism, SWA ratio and chunk-cap inputs.

use crate::dtype::KvDtype;
use crate::error::{PlanError, Result};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// PD disaggregation role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisaggregationMode {
    /// Not disaggregated.
    Null,
    /// Prefill server.
    Prefill,
    /// Decode server.
    Decode,
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

/// Serving configuration (REFERENCE section 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServingConfig {
    /// KV-cache dtype.
    pub kv_cache_dtype: KvDtype,
    /// `p`, tokens per page.
    pub page_size: u64,
    /// Attention tensor-parallel size.
    pub tp_size: u64,
    /// Decode context-parallel size (divides `tp_size`).
    pub dcp_size: u64,
    /// Attention data-parallel size.
    pub attn_dp_size: u64,
    /// `r`, SWA tokens per full token.
    pub swa_full_tokens_ratio: f64,
    /// Requests admitted at once (chunk cap input).
    pub max_running_requests: Option<u64>,
    /// Chunked-prefill size, tokens.
    pub chunked_prefill_size: Option<u64>,
    /// Radix cache disabled (chunk cap input).
    pub disable_radix_cache: bool,
    /// Overlap scheduler disabled (spec v1 rather than v2).
    pub disable_overlap_schedule: bool,
    /// PD disaggregation role.
    pub disaggregation_mode: DisaggregationMode,
    /// Extra decode slots for PD decode, requests.
    pub disaggregation_decode_extra_slots: u64,
    /// `E`, SWA eviction interval in tokens (SGLang uses `max(1, E)`).
    pub swa_eviction_interval: i64,
    /// Price SWA layers as full layers (SGLang's `--disable-hybrid-swa-memory`).
    pub disable_hybrid_swa_memory: bool,
    /// This is the draft worker (no draft terms).
    pub is_draft_worker: bool,
}

impl Default for ServingConfig {
    fn default() -> Self {
        Self {
            kv_cache_dtype: KvDtype::Bf16,
            page_size: 1,
            tp_size: 1,
            dcp_size: 1,
            attn_dp_size: 1,
            swa_full_tokens_ratio: 0.8,
            max_running_requests: None,
            chunked_prefill_size: None,
            disable_radix_cache: false,
            disable_overlap_schedule: false,
            disaggregation_mode: DisaggregationMode::Null,
            disaggregation_decode_extra_slots: 0,
            swa_eviction_interval: 128,
            disable_hybrid_swa_memory: false,
            is_draft_worker: false,
        }
    }
}

impl ServingConfig {
    /// Checks every field against docs/semantics.md.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("page_size", self.page_size),
            ("tp_size", self.tp_size),
            ("dcp_size", self.dcp_size),
            ("attn_dp_size", self.attn_dp_size),
        ] {
            if v == 0 {
                return Err(PlanError::invalid(format!("{name} must be >= 1, got 0")));
            }
        }
        if self.page_size > i64::MAX as u64 {
            return Err(PlanError::invalid(format!(
                "page_size must be <= {}, got {}",
                i64::MAX,
                self.page_size
            )));
        }
        if self.tp_size % self.dcp_size != 0 {
            return Err(PlanError::invalid(format!(
                "tp_size={} must be a multiple of dcp_size={}",
                self.tp_size, self.dcp_size
            )));
        }
        let r = self.swa_full_tokens_ratio;
        if !(r.is_finite() && r > 0.0) {
            return Err(PlanError::invalid(format!(
                "swa_full_tokens_ratio must be a positive finite number, got {r}"
            )));
        }
        if self.max_running_requests == Some(0) {
            return Err(PlanError::invalid(
                "max_running_requests must be >= 1 when given, got 0",
            ));
        }
        if self.chunked_prefill_size == Some(0) {
            return Err(PlanError::invalid(
                "chunked_prefill_size must be >= 1 when given, got 0",
            ));
        }
        Ok(())
    }
}
