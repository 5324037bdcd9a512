//! Unit checks of the vLLM 0.33.0 planner's block-outer packing (grouping case 3) and layout
//! validation, by hand: buckets, the state buckets' split to the block the others need, bytes
//! per block, the packed tensors' strides and offsets, and vLLM's refusal of mixed pages in
//! layouts that cannot express them.
use kvbudget_core::vllm::{plan, ErrorKind, KvCacheLayout, VllmEngine, VllmLayer, VllmPlan};

const BUDGET: i64 = 8 << 30;

/// `full` full-attention layers (8 heads of 128, bf16: 65,536 B a 16-token page) and then
/// `sliding` window layers of 4 heads (32,768 B a page), planned under `layout`.
fn mixed(
    full: usize,
    sliding: usize,
    layout: KvCacheLayout,
) -> Result<VllmPlan, kvbudget_core::vllm::VllmError> {
    let mut layers: Vec<VllmLayer> = (0..full)
        .map(|i| VllmLayer::full(format!("f{i}"), 8, 128))
        .collect();
    layers.extend((0..sliding).map(|i| VllmLayer::sliding(format!("s{i}"), 4, 128, 128)));
    let e = VllmEngine {
        kv_cache_layout: layout,
        ..VllmEngine::default()
    };
    plan(&layers, &[BUDGET], &e)
}

fn groups(p: &VllmPlan) -> Vec<(String, Vec<String>)> {
    p.groups
        .iter()
        .map(|g| (g.spec.clone(), g.layers.clone()))
        .collect()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// Nothing repeats, so the sliding bucket is a state bucket: it takes as many groups as it
/// needs for each to fit the full bucket's 131,072-byte block (four 32,768-byte pages a group).
#[test]
fn vllm_block_outer_packing_splits_a_state_bucket_to_the_block_the_others_need() {
    let p = mixed(2, 4, KvCacheLayout::Blhnc).unwrap();
    let u = "UniformTypeKVCacheSpecs".to_owned();
    assert_eq!(
        groups(&p),
        [
            (u.clone(), names(&["f0", "f1"])),
            (u.clone(), names(&["s0", "s1", "s2", "s3"]))
        ]
    );
    assert_eq!(p.workers[0].bytes_per_block, 131_072);
    assert_eq!(p.num_blocks, 65_536); // 8 GiB / 131,072
                                      // Six window layers no longer fit one block: two groups, strided.
    let p = mixed(2, 6, KvCacheLayout::Blnhc).unwrap();
    assert_eq!(
        groups(&p),
        [
            (u.clone(), names(&["f0", "f1"])),
            (u.clone(), names(&["s0", "s2", "s4"])),
            (u, names(&["s1", "s3", "s5"]))
        ]
    );
    assert_eq!(p.workers[0].bytes_per_block, 131_072);
}

/// Each block is one record of its group's pages: the block stride is the bytes per block, a
/// layer's stride its page, and a group's spec regions follow one another within the block.
#[test]
fn vllm_block_outer_tensors_pack_each_block() {
    let p = mixed(2, 4, KvCacheLayout::Blnhc).unwrap();
    let t: Vec<(u64, u64, u64, [u64; 4])> = p.workers[0]
        .tensors
        .iter()
        .map(|t| (t.offset, t.layer_stride, t.block_stride, t.strides))
        .collect();
    // [B, H, N, C] strides: BLNHC puts N outside H (a head's 512 bytes: K and V, 128 bf16
    // each; then 8 or 4 heads a token).
    assert_eq!(
        t,
        [
            (0, 65_536, 131_072, [131_072, 512, 4_096, 1]),
            (0, 32_768, 131_072, [131_072, 512, 2_048, 1])
        ]
    );
    let p = mixed(2, 4, KvCacheLayout::Blhnc).unwrap();
    // BLHNC: H outside N (16 tokens of 512 bytes a head).
    assert_eq!(p.workers[0].tensors[0].strides, [131_072, 8_192, 512, 1]);
}

/// Under the default layer-outer layout the same layers are unified to one page (case 4); a
/// layout that is not block-compact cannot hold pages of two sizes, nor can a layer-outer one
/// hold them in several groups: vLLM's `validate_kv_cache_layout` refuses both.
#[test]
fn vllm_layouts_that_cannot_express_mixed_pages_are_refused() {
    let p = mixed(2, 4, KvCacheLayout::Lbnhc).unwrap();
    assert!(
        p.groups.iter().all(|g| g.page_size_bytes == 65_536),
        "{:?}",
        p.groups
    );
    // Full layers of two head counts: one uniform-type group of two page sizes.
    let two_pages = [VllmLayer::full("a", 8, 128), VllmLayer::full("b", 4, 128)];
    let e = |layout| VllmEngine {
        kv_cache_layout: layout,
        ..VllmEngine::default()
    };
    assert!(plan(&two_pages, &[BUDGET], &e(KvCacheLayout::Lbhnc)).is_ok());
    let err = plan(&two_pages, &[BUDGET], &e(KvCacheLayout::Lhbnc)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::ValueError);
    assert_eq!(
        err.message,
        "KV cache layout LHBNC cannot express this model's mixed page sizes ([32768, 65536]); a \
         backend should declare block-outermost supported layouts (e.g. BLHNC), or set \
         VLLM_KV_CACHE_LAYOUT=BLHNC."
    );
}
