//! vLLM 0.33.0 with state (`mamba`) layers: the hybrid block-size alignment
//! (`Platform._align_hybrid_block_size`), the Mamba cache mode, `MambaSpec`
//! pages and per-request charges, on the Qwen3-Next worked case (VLLM.md's
//! hybrid numbers: TP 4, 20 GiB, 32,768 tokens) and on random geometries.
//! tests/test_vllm_state.py holds the same planner to vLLM's own code.

use kvbudget_core::vllm::mamba::FLASHINFER_GDN_CHECKPOINT_ALIGNMENT;
use kvbudget_core::vllm::{
    align_hybrid_block_size, plan, LayerKind, MambaCacheMode, MambaType, PrefillCheckpoint,
    VllmEngine, VllmLayer,
};
use proptest::prelude::*;

const GIB: i64 = 1 << 30;

fn state(name: String, shapes: Vec<Vec<u64>>, dtypes: &[&str]) -> VllmLayer {
    VllmLayer {
        name,
        kind: LayerKind::Mamba,
        state_shapes: shapes,
        state_dtypes: dtypes.iter().map(|d| (*d).to_owned()).collect(),
        mamba_type: MambaType::GdnAttn,
        prefill_checkpoint: PrefillCheckpoint::FlashinferGdn,
        ..VllmLayer::default()
    }
}

/// Qwen3-Next-80B-A3B on TP 4: 36 gated-delta-net layers, 12 full-attention layers
/// (1 KV head of 256 per rank), bf16 states.
fn qwen3_next() -> Vec<VllmLayer> {
    (0..48)
        .map(|i| {
            if i % 4 == 3 {
                VllmLayer::full(format!("model.layers.{i}.self_attn.attn"), 1, 256)
            } else {
                let conv = vec![3, (2 * 16 * 128 + 32 * 128) / 4];
                state(
                    format!("model.layers.{i}.linear_attn"),
                    vec![conv, vec![8, 128, 128]],
                    &["bfloat16", "bfloat16"],
                )
            }
        })
        .collect()
}

fn engine() -> VllmEngine {
    VllmEngine {
        max_model_len: kvbudget_core::vllm::MaxModelLen::Tokens(32_768),
        tp: 4,
        ..VllmEngine::default()
    }
}

#[test]
fn qwen3_next_with_prefix_caching_aligns_blocks_to_320_tokens() {
    let p = plan(&qwen3_next(), &[20 * GIB], &engine()).unwrap();
    let m = p.mamba.as_ref().unwrap();
    // State 274,432 B; kernel alignment lcm(16, 64) = 64; 64 x ceil(274,432 / 65,536) = 320.
    assert_eq!(
        (m.mamba_cache_mode, m.block_size, m.mamba_block_size),
        (MambaCacheMode::Align, 320, 320)
    );
    assert_eq!(m.mamba_page_size_padded, Some(327_680));
    assert_eq!(p.groups.len(), 4);
    assert!(p
        .groups
        .iter()
        .all(|g| g.layers.len() == 12 && g.page_size_bytes == 327_680));
    assert_eq!(p.num_blocks, 5_461);
    // Three state groups of 2 + 1 checkpoint pages, the attention group ceil(32,768 / 320).
    assert_eq!(p.blocks_per_request, vec![3, 3, 3, 103]);
    assert_eq!(p.kv_cache_size_tokens, 1_597_732);
    assert_eq!(format!("{:.2}", p.max_concurrency), "48.76");
}

#[test]
fn qwen3_next_without_prefix_caching_keeps_one_state_per_request() {
    let e = VllmEngine {
        enable_prefix_caching: false,
        ..engine()
    };
    let p = plan(&qwen3_next(), &[20 * GIB], &e).unwrap();
    let m = p.mamba.as_ref().unwrap();
    // No checkpoint alignment: 16 x ceil(274,432 / 16,384) = 272; the state block is M.
    assert_eq!(
        (m.mamba_cache_mode, m.block_size, m.mamba_block_size),
        (MambaCacheMode::None, 272, 32_768)
    );
    assert_eq!(
        (p.num_blocks, p.blocks_per_request.clone()),
        (6_425, vec![1, 1, 1, 121])
    );
    assert_eq!(format!("{:.2}", p.max_concurrency), "51.81");
}

#[test]
fn speculative_tokens_add_state_pages_unless_replayssm() {
    let spec = VllmEngine {
        speculative_method: Some("mtp".into()),
        num_speculative_tokens: Some(3),
        ..engine()
    };
    let mut layers = qwen3_next();
    layers.push(VllmLayer {
        is_draft: true,
        ..VllmLayer::full("mtp.layers.0.self_attn.attn", 1, 256)
    });
    let p = plan(&layers, &[20 * GIB], &spec).unwrap();
    assert!(
        p.blocks_per_request
            .iter()
            .filter(|&&b| b == 2 + 3 + 1)
            .count()
            == 3,
        "{:?}",
        p.blocks_per_request
    );
    let replay = VllmEngine {
        use_replayssm: true,
        ..spec
    };
    let p = plan(&layers, &[20 * GIB], &replay).unwrap();
    assert!(
        p.blocks_per_request.iter().filter(|&&b| b == 3).count() == 3,
        "{:?}",
        p.blocks_per_request
    );
}

#[test]
fn a_state_layer_without_its_dtypes_is_refused() {
    let mut layers = qwen3_next();
    layers[0].state_dtypes.pop();
    let e = plan(&layers, &[20 * GIB], &engine()).unwrap_err();
    assert!(e.message.contains("one dtype per state shape"), "{e}");
}

proptest! {
    /// After alignment an attention page holds a state page exactly (the state page is
    /// padded to it), the block is a multiple of the kernel block (and of FlashInfer's
    /// checkpoint alignment in align mode), and it is the smallest such block.
    #[test]
    fn the_aligned_attention_page_is_the_smallest_that_holds_the_state(
        heads in 1u64..9, dim in prop::sample::select(vec![64u64, 128, 256]),
        rows in 1u64..6, width in 1u64..20_000, ssm in 1u64..300_000,
        block in prop::sample::select(vec![16u64, 32, 64, 128]),
        kernel in prop::sample::select(vec![16u64, 32, 64]),
        prefix in any::<bool>(),
    ) {
        let layers = vec![
            state("s".into(), vec![vec![rows, width], vec![ssm]], &["bfloat16", "float32"]),
            VllmLayer::full("a", heads, dim),
        ];
        let e = VllmEngine { block_size: block, attention_kernel_block_size: kernel,
                             enable_prefix_caching: prefix, ..VllmEngine::default() };
        let a = align_hybrid_block_size(&layers, &e, 8192, &mut Vec::new()).unwrap().unwrap();
        let page1 = heads * dim * 2 * 2;
        let content = rows * width * 2 + ssm * 4;
        let attn_page = a.block_size * page1;
        prop_assert!(attn_page >= content);
        prop_assert_eq!(a.mamba_page_size_padded.unwrap_or(content), attn_page);
        prop_assert_eq!(a.block_size % kernel, 0);
        // Powers of two: the alignment unit (an LCM) is the largest of them.
        let unit = if prefix { FLASHINFER_GDN_CHECKPOINT_ALIGNMENT.max(kernel).max(block) } else { kernel.max(block) };
        if a.block_size > block {
            prop_assert_eq!(a.block_size % unit, 0);
            prop_assert!((a.block_size - unit) * page1 < content, "not the smallest block");
        }
        prop_assert_eq!(a.mamba_block_size, if prefix { a.block_size } else { 8192 });
    }
}

#[test]
fn state_shapes_follow_vllms_calculator() {
    use kvbudget_core::vllm::state_shape::{gated_delta_net, kda, mamba2};
    // Qwen3-Next on TP 4: 16 key heads, 32 value heads of 128, conv kernel 4.
    let gdn = gated_delta_net(4, 16, 32, 128, 128, 4, 0).unwrap();
    assert_eq!(gdn, vec![vec![3, 2048], vec![8, 128, 128]]);
    // Two speculative tokens keep two more conv rows.
    assert_eq!(gated_delta_net(4, 16, 32, 128, 128, 4, 2).unwrap()[0][0], 5);
    // 32 value heads do not split over 3 ranks: vLLM's `divide` asserts.
    let e = gated_delta_net(3, 16, 32, 128, 128, 4, 0).unwrap_err();
    assert_eq!(e.kind, kvbudget_core::vllm::ErrorKind::AssertionError);
    // Mamba-2 with one B/C group on TP 4: the group is replicated to the 4 ranks.
    let m = mamba2(4, 8192, 1, 128, 64, 128, 4, 0).unwrap();
    assert_eq!(
        m,
        vec![vec![3, (8192 + 2 * 4 * 128) / 4], vec![32, 64, 128]]
    );
    assert_eq!(
        mamba2(4, 8192, 8, 128, 64, 128, 4, 1).unwrap()[0],
        vec![4, (8192 + 2 * 8 * 128) / 4]
    );
    // Kimi-Linear's KDA on TP 2: 32 heads of 128, short conv kernel 4, one speculative token.
    let k = kda(2, 32, 128, 4, 1).unwrap();
    assert_eq!(k, vec![vec![4, 3 * 32 * 128 / 2], vec![16, 128, 128]]);
    assert!(kda(3, 32, 128, 4, 0).is_err());
}
