//! Unit checks of the vLLM 0.33.0 planner (kvbudget_core::vllm): page sizes,
//! the group-width rule and the strided cut, page unification and padding
//! warnings, the admission error and its estimate, auto-fit, and the extra
//! tokens multi-module MTP retains. The worked cases are in tests/vllm.rs.
use kvbudget_core::vllm::{plan, ErrorKind, LayerKind, MaxModelLen, VllmEngine, VllmLayer};

const GIB: i64 = 1 << 30;

fn round_to(x: f64, d: usize) -> f64 {
    format!("{x:.d$}").parse().expect("a float")
}

fn layers_a() -> Vec<VllmLayer> {
    (0..62)
        .map(|i| {
            let name = format!("model.layers.{i}.self_attn.attn");
            if i % 6 == 5 {
                VllmLayer::full(name, 16, 128)
            } else {
                VllmLayer::sliding(name, 16, 128, 1024)
            }
        })
        .collect()
}

#[test]
fn vllm_page_sizes_of_section_2() {
    let one = |l: VllmLayer| {
        plan(&[l], &[40 * GIB], &VllmEngine::default())
            .unwrap()
            .groups[0]
            .page_size_bytes
    };
    assert_eq!(one(VllmLayer::full("x", 8, 128)), 65_536);
    let fp8 = VllmLayer {
        kv_cache_dtype: "fp8".into(),
        ..VllmLayer::full("x", 8, 128)
    };
    assert_eq!(one(fp8), 32_768);
    let f32 = VllmLayer {
        model_dtype: "float32".into(),
        ..VllmLayer::full("x", 8, 128)
    };
    assert_eq!(one(f32), 131_072);
    let mla = VllmLayer {
        kind: LayerKind::Mla,
        ..VllmLayer::full("x", 1, 576)
    };
    assert_eq!(one(mla.clone()), 18_432);
    assert_eq!(
        one(VllmLayer {
            kv_cache_dtype: "fp8_ds_mla".into(),
            ..mla.clone()
        }),
        10_496
    );
    assert_eq!(
        one(VllmLayer {
            kv_cache_dtype: "nvfp4_ds_mla".into(),
            ..mla
        }),
        5_632
    );
    let hv = VllmLayer {
        head_size_v: Some(64),
        ..VllmLayer::full("x", 8, 128)
    };
    assert_eq!(one(hv), 16 * 8 * 192 * 2);
    let bad = VllmLayer {
        kv_cache_dtype: "fp7".into(),
        ..VllmLayer::full("x", 8, 128)
    };
    let e = plan(&[bad], &[GIB], &VllmEngine::default()).unwrap_err();
    assert_eq!(
        (e.kind, e.message.as_str()),
        (ErrorKind::ValueError, "Invalid kv cache dtype: fp7")
    );
}

#[test]
fn vllm_group_width_rule_and_strided_cut() {
    let e = VllmEngine {
        max_model_len: MaxModelLen::Tokens(8192),
        ..VllmEngine::default()
    };
    let p = plan(&layers_a(), &[40 * GIB], &e).unwrap();
    // 52 sliding, 10 full: G = 10 (52 >= 15), 6 sliding groups cut layers[i::6].
    let swa: Vec<String> = (0..62)
        .filter(|i| i % 6 != 5)
        .map(|i| format!("model.layers.{i}.self_attn.attn"))
        .collect();
    for (i, g) in p.groups[..6].iter().enumerate() {
        let want: Vec<String> = swa.iter().skip(i).step_by(6).cloned().collect();
        assert_eq!(g.layers, want);
    }
    assert_eq!(p.blocks_per_request.iter().sum::<u64>(), 3590);
    assert_eq!(p.workers[0].per_request_bytes, 3590 * 1_310_720);
    assert!(p.log.iter().any(|l| l.message == "GPU KV cache size: 74,773 tokens, Maximum concurrency for 8,192 tokens per request: 9.13x"));
    // 12 sliding + 13 full: 13 < 1.5 * 12, so G = 13 (one padding layer on the sliding bucket).
    let mut l: Vec<VllmLayer> = (0..25)
        .map(|i| {
            if i % 2 == 0 && i < 24 {
                VllmLayer::sliding(format!("l{i}"), 8, 64, 128)
            } else {
                VllmLayer::full(format!("l{i}"), 8, 64)
            }
        })
        .collect();
    let p = plan(&l, &[10 * GIB], &VllmEngine::default()).unwrap();
    assert_eq!(
        p.groups.iter().map(|g| g.layers.len()).collect::<Vec<_>>(),
        vec![12, 13]
    );
    assert_eq!(
        p.warnings,
        vec!["Add 1 padding layers, may waste at most 8.33% KV cache memory"]
    );
    // 12 sliding + 18 full: 18 = 1.5 * 12 is not below it, so G = 12.
    l.extend((25..30).map(|i| VllmLayer::full(format!("l{i}"), 8, 64)));
    let p = plan(&l, &[10 * GIB], &VllmEngine::default()).unwrap();
    assert_eq!(
        p.groups.iter().map(|g| g.layers.len()).collect::<Vec<_>>(),
        vec![12, 9, 9]
    );
    assert_eq!(
        p.warnings,
        vec!["Add 6 padding layers, may waste at most 33.33% KV cache memory"]
    );
}

#[test]
fn vllm_page_unification_and_padding() {
    // A drafter of another geometry in a hybrid target (VLLM.md s4): 25 groups, pages padded.
    let mut l: Vec<VllmLayer> = (0..24)
        .map(|i| {
            if i % 3 == 0 {
                VllmLayer::full(format!("t{i}"), 4, 96)
            } else {
                VllmLayer::sliding(format!("t{i}"), 4, 96, 512)
            }
        })
        .collect();
    l.push(VllmLayer {
        is_draft: true,
        ..VllmLayer::full("d0", 4, 128)
    });
    let e = VllmEngine {
        max_model_len: MaxModelLen::Tokens(32768),
        speculative_method: Some("eagle".into()),
        num_speculative_tokens: Some(3),
        ..VllmEngine::default()
    };
    let p = plan(&l, &[20 * GIB], &e).unwrap();
    assert_eq!(p.groups.len(), 25);
    assert!(p.groups.iter().all(|g| g.page_size_bytes == 32_768));
    assert!(p.warnings.is_empty());
    assert_eq!(round_to(p.max_concurrency, 2), 18.54);
    // A smaller page that divides the largest scales its block size instead.
    let l = vec![
        VllmLayer::full("f", 8, 128),
        VllmLayer::sliding("s", 4, 128, 1024),
    ];
    let p = plan(&l, &[10 * GIB], &VllmEngine::default()).unwrap();
    assert_eq!(
        p.groups.iter().map(|g| g.block_size).collect::<Vec<_>>(),
        vec![16, 32]
    );
    assert_eq!(p.cache_block_size, 16);
    // MLA whose page does not divide: NotImplementedError, unless the MLA + SWA fallback applies.
    let mla = VllmLayer {
        kind: LayerKind::Mla,
        ..VllmLayer::full("m", 1, 576)
    };
    let chunked = VllmLayer {
        kind: LayerKind::Chunked,
        attention_chunk_size: Some(8192),
        ..VllmLayer::full("c", 8, 128)
    };
    let e = plan(&[mla.clone(), chunked], &[10 * GIB], &VllmEngine::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotImplementedError);
    assert!(
        e.message.starts_with("Layer m: page size is not divisible"),
        "{}",
        e.message
    );
    let p = plan(
        &[mla, VllmLayer::sliding("s", 8, 128, 1024)],
        &[10 * GIB],
        &VllmEngine::default(),
    )
    .unwrap();
    assert_eq!(p.groups[0].spec, "UniformTypeKVCacheSpecs");
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].starts_with("KV cache page sizes cannot be unified"));
}

#[test]
fn vllm_admission_error_estimate_and_auto_fit() {
    let e = VllmEngine {
        disable_hybrid_kv_cache_manager: true,
        ..VllmEngine::default()
    };
    let err = plan(&layers_a(), &[40 * GIB], &e).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ValueError);
    assert!(err.message.starts_with("To serve at least one request with the model's max seq len (131072), (62.0 GiB KV cache is needed, which is larger than the available KV cache memory (39.99 GiB). Based on the available memory, the estimated maximum model length is 84544. "), "{}", err.message);
    assert_eq!(err.estimated_max_model_len, Some(84_544));
    assert!(err
        .log
        .iter()
        .any(|l| l.message.starts_with("Hybrid KV cache manager is disabled")));
    let auto = VllmEngine {
        max_model_len: MaxModelLen::Auto,
        derived_max_model_len: Some(131_072),
        ..e
    };
    let p = plan(&layers_a(), &[40 * GIB], &auto).unwrap();
    assert_eq!(
        (p.num_blocks, p.max_model_len, p.kv_cache_size_tokens),
        (5285, 84_544, 84_560)
    );
    assert!(p.log.iter().any(|l| l.message == "Auto-fit max_model_len: reduced from 131072 to 84544 to fit in available KV cache memory (39.99 GiB GPU)"));
    // The null block costs 16 tokens of M (VLLM.md s9, c at 8 GiB).
    let c: Vec<VllmLayer> = (0..32)
        .map(|i| VllmLayer::full(format!("l{i}"), 8, 128))
        .collect();
    let p = plan(
        &c,
        &[8 * GIB],
        &VllmEngine {
            max_model_len: MaxModelLen::Auto,
            derived_max_model_len: Some(131_072),
            ..VllmEngine::default()
        },
    )
    .unwrap();
    assert_eq!((p.num_blocks, p.max_model_len), (4096, 65_520));
    let err = plan(&c, &[0], &VllmEngine::default()).unwrap_err();
    assert!(err
        .message
        .starts_with("No available memory for the cache blocks."));
    // num_gpu_blocks_override: the admission check runs against override x bytes_per_block.
    let o = |n| {
        plan(
            &c,
            &[40 * GIB],
            &VllmEngine {
                num_gpu_blocks_override: Some(n),
                ..VllmEngine::default()
            },
        )
    };
    assert_eq!(
        o(10_000).unwrap().workers[0].allocated_bytes,
        10_000 * 2_097_152
    );
    assert!(o(8192).is_err());
    assert!(o(8193).is_ok());
}

#[test]
fn vllm_multi_module_mtp_retains_extra_tokens() {
    let l = vec![
        VllmLayer::full("f", 8, 128),
        VllmLayer::sliding("s", 8, 128, 1024),
    ];
    let base = VllmEngine {
        max_model_len: MaxModelLen::Tokens(32768),
        ..VllmEngine::default()
    };
    let mtp = VllmEngine {
        speculative_method: Some("mtp".into()),
        num_speculative_tokens: Some(3),
        num_nextn_predict_layers: Some(3),
        ..base.clone()
    };
    // ceil(min(1023 + 16384, M) / 16) + 1 = 1089; k - 1 = 2 extra tokens make it 1090.
    assert_eq!(
        plan(&l, &[10 * GIB], &base).unwrap().blocks_per_request,
        vec![2048, 1089]
    );
    assert_eq!(
        plan(&l, &[10 * GIB], &mtp).unwrap().blocks_per_request,
        vec![2048, 1090]
    );
    let big = VllmEngine {
        num_speculative_tokens: Some(40),
        num_nextn_predict_layers: Some(40),
        ..mtp
    };
    assert_eq!(
        plan(&l, &[10 * GIB], &big).unwrap().blocks_per_request,
        vec![2048, 1092]
    );
}

#[test]
fn vllm_views_are_lbnhc_over_one_buffer() {
    // Case (a): each tensor's layer view is [B, H, N, C] bytes with strides
    // [page, C, H*C, 1]; layers of one spec follow one another a whole layer apart.
    let p = plan(&layers_a(), &[40 * GIB], &VllmEngine::default()).unwrap();
    let w = &p.workers[0];
    for t in &w.tensors {
        let content = (128 + 128) * 2; // K + V of one head and token, bf16
        assert_eq!(t.shape, [p.num_blocks, 16, 16, content]);
        assert_eq!(t.strides, [t.block_stride, content, 16 * content, 1]);
        assert_eq!(t.layer_stride, t.block_stride * p.num_blocks);
        assert_eq!(t.dtype, "bfloat16");
        let last = t.offset + (t.layers.len() as u64 - 1) * t.layer_stride;
        assert!(last + p.num_blocks * t.block_stride <= t.size);
    }
    let fp8 = VllmLayer {
        kv_cache_dtype: "fp8_ds_mla".into(),
        kind: LayerKind::Mla,
        ..VllmLayer::full("m", 1, 576)
    };
    let p = plan(&[fp8], &[GIB], &VllmEngine::default()).unwrap();
    let t = &p.workers[0].tensors[0];
    assert_eq!(
        (t.shape[1], t.shape[3], t.dtype.as_str()),
        (1, 656, "uint8")
    );
}

#[test]
fn vllm_draft_kv_cache_dtype_replaces_the_drafters_dtype() {
    // VLLM.md section 9, sensitivity: case (c) with an fp8 target and a bf16
    // drafter (speculative_config.kv_cache_dtype) holds 27,306 blocks at 40 GiB.
    let fp8 = |l: VllmLayer| VllmLayer {
        kv_cache_dtype: "fp8".into(),
        ..l
    };
    let mut layers: Vec<VllmLayer> = (0..32)
        .map(|i| fp8(VllmLayer::full(format!("t{i}"), 8, 128)))
        .collect();
    layers.extend((0..16).map(|i| VllmLayer {
        is_draft: true,
        ..fp8(VllmLayer::full(format!("d{i}"), 8, 64))
    }));
    let e = VllmEngine {
        speculative_method: Some("draft_model".into()),
        draft_kv_cache_dtype: Some("auto".into()),
        ..VllmEngine::default()
    };
    assert_eq!(plan(&layers, &[40 * GIB], &e).unwrap().num_blocks, 27_306);
    let same = VllmEngine {
        draft_kv_cache_dtype: None,
        ..e
    };
    assert_ne!(
        plan(&layers, &[40 * GIB], &same).unwrap().num_blocks,
        27_306
    );
}

#[test]
fn vllm_kv_cache_memory_bytes_is_every_workers_budget() {
    // gpu_worker.determine_available_memory: a non-zero kv_cache_memory_bytes replaces the
    // measured budget of every worker; 0 keeps it.
    let with = |b: u64| VllmEngine {
        kv_cache_memory_bytes: Some(b),
        ..VllmEngine::default()
    };
    let at_20 = plan(&layers_a(), &[20 * GIB], &VllmEngine::default());
    assert_eq!(plan(&layers_a(), &[40 * GIB], &with(20 << 30)), at_20);
    assert_eq!(
        plan(&layers_a(), &[40 * GIB], &with(0)),
        plan(&layers_a(), &[40 * GIB], &VllmEngine::default())
    );
    let err = plan(&layers_a(), &[40 * GIB], &with(u64::MAX)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
}

/// DeepSeek sparse attention: each decoder layer registers its indexer's key cache
/// (`mla_indexer`: one head of 132 bytes) before its sparse MLA layer. The two MLA
/// specs differ in `cache_role`, so they do not merge: one uniform-type group whose
/// block holds every layer's page.
#[test]
fn vllm_dsa_indexer_pages_join_one_uniform_group() {
    let mut layers = Vec::new();
    for i in 0..4 {
        layers.push(VllmLayer {
            kind: LayerKind::MlaIndexer,
            kv_cache_dtype: "fp8".into(), // ignored: the indexer stores uint8 rows
            ..VllmLayer::full(
                format!("model.layers.{i}.self_attn.indexer.k_cache"),
                1,
                132,
            )
        });
        layers.push(VllmLayer {
            kind: LayerKind::Mla,
            kv_cache_dtype: "fp8_ds_mla".into(),
            ..VllmLayer::full(format!("model.layers.{i}.self_attn.attn"), 1, 576)
        });
    }
    let e = VllmEngine {
        block_size: 64,
        ..VllmEngine::default()
    };
    let p = plan(&layers, &[GIB], &e).unwrap();
    assert_eq!(p.groups.len(), 1);
    let g = &p.groups[0];
    assert_eq!(g.spec, "UniformTypeKVCacheSpecs");
    assert_eq!(g.layers.len(), 8);
    let per_block = 4 * (64 * 132 + 64 * 656);
    assert_eq!(g.page_size_bytes, per_block);
    assert_eq!(p.workers[0].bytes_per_block, per_block);
    assert_eq!(p.num_blocks, GIB as u64 / per_block);
    // Beside state layers the indexer is refused (not modelled), never planned silently.
    let mut hybrid = layers.clone();
    hybrid.push(VllmLayer {
        kind: LayerKind::Mamba,
        state_shapes: vec![vec![4, 8]],
        state_dtypes: vec!["bfloat16".into()],
        ..VllmLayer::full("model.layers.9.mixer", 1, 1)
    });
    let err = plan(&hybrid, &[GIB], &e).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
}

/// An encoder-decoder model (Whisper): each decoder layer's self-attention is full attention,
/// its cross-attention a `CrossAttentionSpec` charged for the scheduler's encoder budget
/// (`max_num_batched_tokens`), not for `max_model_len`. The two kinds do not share a type:
/// one group of each.
#[test]
fn vllm_cross_attention_is_charged_for_the_encoder_budget() {
    let mut layers = Vec::new();
    for i in 0..4 {
        layers.push(VllmLayer::full(
            format!("model.decoder.layers.{i}.self_attn.attn"),
            6,
            64,
        ));
        layers.push(VllmLayer {
            kind: LayerKind::Cross,
            ..VllmLayer::full(format!("model.decoder.layers.{i}.encoder_attn.attn"), 6, 64)
        });
    }
    let e = VllmEngine {
        max_model_len: MaxModelLen::Tokens(448),
        ..VllmEngine::default()
    };
    let p = plan(&layers, &[GIB], &e).unwrap();
    let specs: Vec<&str> = p.groups.iter().map(|g| g.spec.as_str()).collect();
    assert_eq!(specs, ["FullAttentionSpec", "CrossAttentionSpec"]);
    // 448 / 16 = 28 blocks of decoder tokens; 8,192 / 16 = 512 blocks of encoder tokens
    assert_eq!(p.blocks_per_request, [28, 512]);
}

/// MiniMax-M3's sparse layers: full attention beside an indexer key cache of bf16 rows with no
/// TP-shard cap (`key_indexer`). Both specs are full-attention types of one block size, so they
/// form one uniform-type group whose page holds both; without a shard cap the indexer does not
/// make TP ranks replicas of one another (DeepSeek's `mla_indexer` beside MLA does).
#[test]
fn vllm_key_indexer_stores_its_own_dtype_and_is_tp_sharded() {
    let mut layers = Vec::new();
    for i in 0..2 {
        layers.push(VllmLayer {
            kind: LayerKind::KeyIndexer,
            indexer_dtype: "bfloat16".into(),
            kv_cache_dtype: "fp8".into(), // ignored: the indexer stores its own dtype
            ..VllmLayer::full(format!("model.layers.{i}.self_attn.attn.indexer"), 1, 128)
        });
        layers.push(VllmLayer::full(
            format!("model.layers.{i}.self_attn.attn"),
            4,
            128,
        ));
    }
    let e = VllmEngine {
        block_size: 128,
        tp: 2,
        ..VllmEngine::default()
    };
    let p = plan(&layers, &[GIB], &e).unwrap();
    // Full attention and MLA specs share a type and a block size: one uniform-type group.
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].spec, "UniformTypeKVCacheSpecs");
    assert_eq!(
        p.groups[0].page_size_bytes,
        2 * (128 * 128 * 2 + 128 * 4 * 256 * 2)
    );
    assert_eq!(p.kv_tp_replicas, 1);
    // DeepSeek's kind on MLA layers: one uint8 head, capped at one shard, so ranks replicate.
    let dsa: Vec<VllmLayer> = (0..2)
        .flat_map(|i| {
            [
                VllmLayer {
                    kind: LayerKind::MlaIndexer,
                    ..VllmLayer::full(
                        format!("model.layers.{i}.self_attn.indexer.k_cache"),
                        1,
                        132,
                    )
                },
                VllmLayer {
                    kind: LayerKind::Mla,
                    ..VllmLayer::full(format!("model.layers.{i}.self_attn.attn"), 1, 576)
                },
            ]
        })
        .collect();
    assert_eq!(plan(&dsa, &[GIB], &e).unwrap().kv_tp_replicas, 2);
    let bad = vec![VllmLayer {
        kind: LayerKind::KeyIndexer,
        indexer_dtype: "fp8".into(), // vLLM's KV-dtype name, not torch's
        ..VllmLayer::full("model.layers.0.self_attn.attn.indexer", 1, 128)
    }];
    let err = plan(&bad, &[GIB], &e).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("indexer_dtype"), "{}", err.message);
}

/// An MLA layer with a window is vLLM's `SlidingWindowMLASpec`, a spec kvbudget does not model:
/// refused, never planned as a full MLA layer.
#[test]
fn vllm_mla_with_a_window_is_refused() {
    let layer = VllmLayer {
        kind: LayerKind::Mla,
        sliding_window: Some(128),
        ..VllmLayer::full("model.layers.0.self_attn.attn", 1, 576)
    };
    let err = plan(&[layer], &[GIB], &VllmEngine::default()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(
        err.message.contains("SlidingWindowMLASpec"),
        "{}",
        err.message
    );
}
