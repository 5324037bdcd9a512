//! Unit checks of the vLLM 0.33.0 planner's circular buffers (`CircularBufferSpec`) and
//! compressed caches (`tokens_per_state` above 1), on QSA's layout (Qwen4-Exp): pages, groups,
//! blocks per request, views, the scheduler's block size and vLLM's prefix-cache alignment
//! check, by hand (the rest of the planner's unit checks are in tests/vllm_units.rs).
use kvbudget_core::vllm::{plan, ErrorKind, LayerKind, MaxModelLen, VllmEngine, VllmLayer};

const GIB: i64 = 1 << 30;

/// Two layers of full attention (`heads` x `head_size`, bf16), each followed by a ring of
/// `capacity` tokens (one bf16 head of 128 elements, no V part: QSA's raw keys) and, for a
/// `ratio`, a compressed MLA key cache of 512 elements, `ratio` tokens per state.
fn qsa(heads: u64, head_size: u64, capacity: u64, ratio: Option<u64>) -> Vec<VllmLayer> {
    let mut out = Vec::new();
    for i in 0..2 {
        out.push(VllmLayer::full(format!("l{i}"), heads, head_size));
        out.push(VllmLayer {
            kind: LayerKind::CircularBuffer,
            head_size_v: Some(0),
            block_size: Some(capacity),
            ..VllmLayer::full(format!("r{i}"), 1, 128)
        });
        if let Some(tokens_per_state) = ratio {
            out.push(VllmLayer {
                kind: LayerKind::Mla,
                tokens_per_state,
                ..VllmLayer::full(format!("c{i}"), 1, 512)
            });
        }
    }
    out
}

/// A circular buffer holds one block per request whatever the length, and takes page
/// unification as attention does (scaled when its page divides the largest, else padded); its
/// small block is not the scheduler's `cache_config.block_size` (it is not prefix-cacheable).
#[test]
fn vllm_circular_buffer_holds_one_block_per_request() {
    let e = |m: u64| VllmEngine {
        max_model_len: MaxModelLen::Tokens(m),
        ..VllmEngine::default()
    };
    // Full pages 16 tokens x 8 heads x 256 x 2 B = 65,536 B; a 6-token ring's 6 x 128 x 2 B =
    // 1,536 B does not divide it: padded, its block stays 6 tokens.
    let p = plan(&qsa(8, 128, 6, None), &[GIB], &e(8192)).unwrap();
    let groups: Vec<(&str, u64, u64)> = p
        .groups
        .iter()
        .map(|g| (g.spec.as_str(), g.block_size, g.page_size_bytes))
        .collect();
    assert_eq!(
        groups,
        [
            ("FullAttentionSpec", 16, 65_536),
            ("CircularBufferSpec", 6, 65_536)
        ]
    );
    // 2^30 / 131,072 B blocks; 8,192 / 16 full blocks and the ring's one per request.
    assert_eq!(
        (
            p.num_blocks,
            p.blocks_per_request.as_slice(),
            p.cache_block_size
        ),
        (8192, &[512, 1][..], 16)
    );
    let t = &p.workers[0].tensors[1];
    assert_eq!(
        (t.shape, t.strides),
        ([8192, 1, 6, 256], [65_536, 256, 256, 1])
    );
    // An 8-token ring's 2,048 B page divides 65,536 B 32 times: 256-token blocks, still one.
    let p = plan(&qsa(8, 128, 8, None), &[GIB], &e(32_768)).unwrap();
    assert_eq!(
        (p.groups[1].block_size, p.blocks_per_request.as_slice()),
        (256, &[2048, 1][..])
    );
}

/// QSA's layout with its compressed key cache: the page holds `block_size / tokens_per_state`
/// states; a ratio that does not divide the scheduler block size fails vLLM's prefix-cache
/// alignment check (with prefix caching on), one that leaves a scaled page short its assertion.
#[test]
fn vllm_tokens_per_state_shrinks_the_page_and_must_align_with_prefix_caching() {
    let e = VllmEngine {
        max_model_len: MaxModelLen::Tokens(8192),
        ..VllmEngine::default()
    };
    // Full pages 16 x 2 x 256 x 2 B = 16,384 B; the compressed one 16 / 4 = 4 states of 1,024 B,
    // scaled 4x to 64-token blocks of 16 states; the ring's 8 x 256 B, scaled 8x.
    let p = plan(&qsa(2, 128, 8, Some(4)), &[GIB], &e).unwrap();
    let groups: Vec<(&str, u64)> = p
        .groups
        .iter()
        .map(|g| (g.spec.as_str(), g.block_size))
        .collect();
    assert_eq!(
        groups,
        [
            ("FullAttentionSpec", 16),
            ("CircularBufferSpec", 64),
            ("MLAAttentionSpec", 64)
        ]
    );
    assert_eq!(
        (p.num_blocks, p.blocks_per_request.as_slice()),
        (32_768, &[512, 1, 128][..])
    );
    let t = &p.workers[0].tensors[2];
    assert_eq!(
        (t.shape, t.strides),
        ([32_768, 1, 16, 1024], [16_384, 1024, 1024, 1])
    );
    // 3 tokens per state: 16 / 3 = 5 states, 5,120 B, the largest page (full 4,096 B and the
    // ring's 2,048 B are padded to it): blocks of 16 and 8 tokens, whose LCM 16 3 does not divide.
    let err = plan(&qsa(1, 64, 8, Some(3)), &[GIB], &e).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ValueError);
    assert_eq!(err.message, "Invalid prefix_match_unit=16; prefix-cache boundaries must align with each spec's per-state compression. Got alignments=[3].");
    assert!(err
        .log
        .last()
        .unwrap()
        .message
        .starts_with("GPU KV cache size")); // logged first
    let off = VllmEngine {
        enable_prefix_caching: false,
        ..e.clone()
    };
    let p = plan(&qsa(1, 64, 8, Some(3)), &[GIB], &off).unwrap();
    assert_eq!(
        (p.workers[0].tensors[2].shape, p.cache_block_size),
        ([104_857, 1, 5, 1024], 16)
    );
    // Full pages of 5 heads, 20,480 B: the compressed page scales 4x to 64 tokens, whose 21 states
    // make 21,504 B: vLLM's (empty) assertion. A ratio of 0 is refused.
    let err = plan(&qsa(5, 64, 8, Some(3)), &[GIB], &e).unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (ErrorKind::AssertionError, "")
    );
    let err = plan(&qsa(2, 128, 8, Some(0)), &[GIB], &e).unwrap_err();
    assert!(
        err.kind == ErrorKind::Input && err.message.contains("tokens_per_state"),
        "{}",
        err.message
    );
}

/// QSA's caches beside gated-delta-net states (Qwen4-Exp): the hybrid alignment reads the QSA
/// layer's own attention (8 heads of 128, bf16: 4,096 B a token), not the ring or the compressed
/// keys registered before it; the state page, 3 x 4,096 + 16 x 128 x 128 bf16 = 548,864 B, needs
/// 16 x cdiv(548,864, 16 x 4,096) = 144 tokens.
#[test]
fn vllm_qsa_caches_beside_states_align_on_the_attention() {
    use kvbudget_core::vllm::{MambaType, PrefillCheckpoint};
    let mut layers = vec![VllmLayer {
        kind: LayerKind::Mamba,
        state_shapes: vec![vec![3, 4096], vec![16, 128, 128]],
        state_dtypes: vec!["bfloat16".into(), "bfloat16".into()],
        mamba_type: MambaType::GdnAttn,
        prefill_checkpoint: PrefillCheckpoint::None,
        ..VllmLayer::full("l0.linear_attn", 0, 0)
    }];
    // Each layer's ring and compressed keys first, then its attention (QSA's registration order).
    let mut per_layer = qsa(8, 128, 4, Some(4));
    for three in per_layer.chunks_mut(3) {
        three.rotate_left(1);
    }
    assert_eq!(per_layer[0].kind, LayerKind::CircularBuffer);
    layers.extend(per_layer);
    let e = VllmEngine {
        max_model_len: MaxModelLen::Tokens(8192),
        ..VllmEngine::default()
    };
    let p = plan(&layers, &[8 * GIB], &e).unwrap();
    let m = p.mamba.expect("a hybrid alignment");
    assert_eq!(
        (m.block_size, m.mamba_page_size_padded),
        (144, Some(144 * 4096))
    );
}
