//! Builders shared by the integration tests.
#![allow(dead_code)]

use kvbudget_core::*;

pub const GIB: i64 = 1 << 30;

/// Gemma-3-27B-like: 62 layers, full = {5, 11, ..., 59}, 16 KV heads, D 128, W 1024.
pub fn gemma3_27b() -> ModelGeometry {
    let full: Vec<u64> = (0..62).filter(|i| i % 6 == 5).collect();
    let swa: Vec<u64> = (0..62).filter(|i| i % 6 != 5).collect();
    ModelGeometry::new(
        full,
        swa,
        AttentionShape {
            num_kv_heads: 16,
            head_dim: 128,
            sliding_window_size: Some(1024),
            ..AttentionShape::default()
        },
    )
    .unwrap()
}

/// gpt-oss-120b-like: 18 full + 18 SWA (alternating), 8 KV heads, D 64, W 127.
pub fn gpt_oss_120b() -> ModelGeometry {
    let full: Vec<u64> = (0..36).filter(|i| i % 2 == 1).collect();
    let swa: Vec<u64> = (0..36).filter(|i| i % 2 == 0).collect();
    ModelGeometry::new(
        full,
        swa,
        AttentionShape {
            num_kv_heads: 8,
            head_dim: 64,
            sliding_window_size: Some(127),
            ..AttentionShape::default()
        },
    )
    .unwrap()
}

pub fn eagle3(d: u64) -> SpeculativeConfig {
    SpeculativeConfig {
        algorithm: SpecAlgorithm::Eagle3,
        draft_num_layers: d,
        ..SpeculativeConfig::default()
    }
    .resolved()
    .unwrap()
}

pub fn serving(dtype: KvDtype, page: u64, tp: u64) -> ServingConfig {
    ServingConfig {
        kv_cache_dtype: dtype,
        page_size: page,
        tp_size: tp,
        ..ServingConfig::default()
    }
}

pub fn sizes(c: &MemoryPoolConfig) -> (i64, Option<i64>, Option<i64>) {
    (
        c.max_total_num_tokens,
        c.full_max_total_num_tokens,
        c.swa_max_total_num_tokens,
    )
}

/// Qwen3-Next-80B-A3B's state at TP `tp` (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct,
/// config.json): 36 gated-delta layers, 32 value heads, 16 key heads, head dims 128, conv kernel 4.
pub fn qwen3_next_state(tp: u64) -> StateConfig {
    let d = state::shape::mamba2(tp, 32 * 128, 16, 32, 128, 128, 4).unwrap();
    StateConfig {
        num_state_layers: 36,
        conv_elems: d.conv_elems,
        conv_kernel: Some(4),
        ssm_heads: d.ssm_heads,
        ssm_head_dim: d.ssm_head_dim,
        ssm_state_dim: d.ssm_state_dim,
        k_heads_per_tp: d.k_heads_per_tp,
        mixer: state::StateMixer::Gdn,
        ..StateConfig::default()
    }
    .resolved()
    .unwrap()
}
