//! The one declaration of vLLM's inputs: every field of a layer ([`VllmLayer`])
//! and every engine setting ([`VllmEngine`]), each with its name, Rust type,
//! default, kind ([`super::record::SettingKind`]: its JSON and Python forms),
//! unit, kvbudget's `--engine vllm` flag (where it has one) and doc, written
//! once in [`for_each_vllm_record!`]. Everything else derives from it:
//!
//! - the structs, their `Default` (vLLM 0.33.0's own defaults) and their JSON
//!   forms (what `tests/vllm_oracle` takes; [`super::json`]);
//! - the table [`settings_json`], which the bridge hands to Python
//!   (`kvbudget._core._vllm_settings()`): `kvbudget.vllm.LayerSpec` and
//!   `kvbudget.vllm.EngineConfig` are built from it, their typing and docs are
//!   rendered from it (`tools/stubgen.py`), and the `--engine vllm` flags are
//!   generated from its `flag`s (`kvbudget.cli.parser`).
//!
//! Adding an engine setting is one entry below plus the code that reads it
//! (the planner, `plan.rs`); the Python class, its docs, the CLI flag and the
//! JSON form pick it up.
//!
//! [`VllmLayer`]: super::VllmLayer
//! [`VllmEngine`]: super::VllmEngine

use super::record::{Record, Setting};
use super::{VllmEngine, VllmLayer, VLLM_VERSION};
use serde_json::{json, Value};

/// The declaration: both records, every field. `$callback!` receives it.
///
/// Syntax: `Record { fields }`; a field is
/// `name: RustType = default => Kind, "unit";`, or with a flag
/// `name: RustType = default => Kind, "unit", "--flag";` (kvbudget's
/// `--engine vllm` flag; settings without one come from elsewhere on the
/// command line). Without `= default` the field is required (its Rust
/// default is `Default`). The unit is `""` for names and switches.
#[macro_export]
macro_rules! for_each_vllm_record {
    ($callback:ident) => {
        $callback! {
            /// One attention layer as one vLLM worker registers it (registration order matters).
            VllmLayer {
                /// The layer's name (e.g. `model.layers.3.self_attn.attn`); unique per stage.
                name: String => Text, "";
                /// The layer's kind: full, sliding-window, chunked-local, cross or MLA attention,
                /// an indexer's key cache, a circular buffer, or a state layer.
                kind: $crate::vllm::LayerKind => Attention, "";
                /// KV heads on one rank (vLLM: `max(1, total // tp)`); ignored for MLA,
                /// which has one latent head.
                num_kv_heads: u64 => Count, "heads";
                /// K head dim, elements (MLA: the latent dim, e.g. 576).
                head_size: u64 => Count, "elements";
                /// V head dim, elements (default `head_size`; chunked and MLA layers take none).
                head_size_v: Option<u64> = None => OptCount, "elements";
                /// vLLM's `--kv-cache-dtype` (`"auto"`, `"fp8"`, `"fp8_e4m3"`, `"fp8_e5m2"`,
                /// `"fp8_per_token_head"`, `"int8_per_token_head"`, `"nvfp4"`, `"fp8_ds_mla"`, ...).
                kv_cache_dtype: String = "auto".to_owned() => Text, "";
                /// The model dtype `"auto"` stores (`"bfloat16"`, `"float16"`, `"float32"`).
                model_dtype: String = "bfloat16".to_owned() => Text, "";
                /// The window of a sliding layer, tokens.
                sliding_window: Option<u64> = None => OptCount, "tokens";
                /// The chunk of a chunked layer, tokens.
                attention_chunk_size: Option<u64> = None => OptCount, "tokens";
                /// Tokens per block (default: the engine's `block_size`; a circular buffer: its
                /// ring's capacity).
                block_size: Option<u64> = None => OptCount, "tokens";
                /// The drafter registered this layer (it groups like a target layer).
                is_draft: bool = false => Flag, "";
                /// The pipeline stage holding the layer (drafter layers: the last).
                pp_stage: u32 = 0 => Stage, "stages";
                /// A state (`mamba`) layer's tensors on one rank, elements per dim, in the
                /// layer's order (`get_state_shape()`: e.g. the conv state, then the SSM state).
                state_shapes: Vec<Vec<u64>> = Vec::new() => Shapes, "elements";
                /// Their torch dtypes, one per shape (`"float32"`, `"bfloat16"`, `"float16"`).
                state_dtypes: Vec<String> = Vec::new() => Names, "";
                /// The state shapes vLLM's model class reports for its configuration
                /// (`get_mamba_state_shape_from_config`, which sizes the attention block), where they
                /// differ from the layer's own (LFM2 with a drafter: no speculative conv rows); empty:
                /// the layer's, elements per dim.
                config_state_shapes: Vec<Vec<u64>> = Vec::new() => Shapes, "elements";
                /// A state layer's backend (`mamba_type`).
                mamba_type: $crate::vllm::MambaType = $crate::vllm::MambaType::Mamba2 => Backend, "";
                /// The prefill-checkpoint export a state layer's class adds to its spec.
                prefill_checkpoint: $crate::vllm::PrefillCheckpoint = $crate::vllm::PrefillCheckpoint::None
                    => Checkpoint, "";
                /// Every TP rank holds the layer's state whole (`is_kv_cache_tp_replicated`).
                tp_replicated: bool = false => Flag, "";
                /// An indexer layer's row dtype, torch's name (`mla_indexer`, `key_indexer`):
                /// `"uint8"` (DeepSeek's), `"bfloat16"` or `"float8_e4m3fn"` (MiniMax-M3's).
                indexer_dtype: String = "uint8".to_owned() => Text, "";
                /// Tokens one stored state covers (an attention spec's `tokens_per_state`): 1, or
                /// a compressed cache's ratio (QSA's and DeepSeek-V4's compressed keys, GLM-5-Next's
                /// kpool indexer), whose page holds `block_size / tokens_per_state` states.
                tokens_per_state: u64 = 1 => Count, "tokens";
            }
            /// vLLM's engine settings that change the plan (defaults: vLLM 0.33.0's).
            VllmEngine {
                /// Tokens per block.
                block_size: u64 = 16 => Count, "tokens", "--block-size";
                /// The longest request, tokens, or `"auto"`: start from `derived_max_model_len`
                /// and shrink it to what fits.
                max_model_len: $crate::vllm::MaxModelLen = $crate::vllm::MaxModelLen::Tokens(131_072)
                    => ModelLen, "tokens", "--max-model-len";
                /// The model's own limit `"auto"` starts from (its `max_position_embeddings`), tokens.
                derived_max_model_len: Option<u64> = None => OptCount, "tokens";
                /// `T`, the tokens one step schedules.
                max_num_batched_tokens: u64 = 8192 => Count, "tokens", "--max-num-batched-tokens";
                /// Async scheduling (vLLM's `--async-scheduling`, on by default): `F = (pp + 1) * T`
                /// tokens in flight with Model Runner V2.
                async_scheduling: bool = true => Flag, "", "--no-async-scheduling";
                /// Model Runner V2, the default runner (`VLLM_USE_V2_MODEL_RUNNER`).
                use_v2_model_runner: bool = true => Flag, "";
                /// Tensor-parallel size (vLLM's `--tensor-parallel-size`), ranks.
                tp: u64 = 1 => Count, "ranks";
                /// Pipeline-parallel size (vLLM's `--pipeline-parallel-size`), stages.
                pp: u64 = 1 => Count, "stages", "--pp";
                /// Decode-context-parallel size (vLLM's `--decode-context-parallel-size`), ranks.
                dcp: u64 = 1 => Count, "ranks";
                /// Blocks every worker allocates, whatever its budget holds.
                num_gpu_blocks_override: Option<u64> = None => OptCount, "blocks", "--num-gpu-blocks-override";
                /// Each worker's KV budget, bytes, in place of the one it measures (vLLM's
                /// worker skips its memory profiling); 0 or none: the budget given.
                kv_cache_memory_bytes: Option<u64> = None => OptCount, "bytes", "--kv-cache-memory-bytes";
                /// One group of full-attention pages for every layer (the hybrid KV-cache manager off).
                disable_hybrid_kv_cache_manager: bool = false => Flag, "", "--disable-hybrid-kv-cache-manager";
                /// The speculative method (`"eagle"`, `"eagle3"`, `"mtp"`, `"dflash"`, `"dspark"`,
                /// `"draft_model"`, ...), or none.
                speculative_method: Option<String> = None => OptText, "";
                /// `k`, the tokens the drafter proposes per step
                /// (`speculative_config.num_speculative_tokens`).
                num_speculative_tokens: Option<u64> = None => OptCount, "tokens", "--num-speculative-tokens";
                /// The drafter's MTP modules (`num_nextn_predict_layers`; absent means 1):
                /// multi-module MTP retains `k - 1` extra tokens in sliding layers.
                num_nextn_predict_layers: Option<u64> = None => OptCount, "layers";
                /// `speculative_config.kv_cache_dtype`: the KV dtype of every drafter layer
                /// (`is_draft`); none keeps each layer's own `kv_cache_dtype`.
                draft_kv_cache_dtype: Option<String> = None => OptText, "";
                /// Prefix caching (vLLM's default). With state layers it decides the Mamba cache
                /// mode (`MambaModelConfig`): `align` with it, `none` without.
                enable_prefix_caching: bool = true => Flag, "";
                /// ReplaySSM (`--use-replayssm`): state layers keep no per-draft-token state blocks;
                /// a Mamba-2 state carries its rings.
                use_replayssm: bool = false => Flag, "";
                /// ReplaySSM's logical ring (`--replayssm-buffer-len`), steps.
                replayssm_buffer_len: u64 = 16 => Count, "steps";
                /// The Mamba selective-state-update backend (`--mamba-backend`: `"triton"`,
                /// `"flashinfer"`); ReplaySSM's rings and checks read it.
                mamba_backend: $crate::vllm::MambaBackend = $crate::vllm::MambaBackend::Triton => SsuBackend, "";
                /// The attention backend's smallest kernel block, tokens (FLASH_ATTN: any
                /// multiple of 16): the unit a hybrid model's attention block size is raised in.
                attention_kernel_block_size: u64 = 16 => Count, "tokens";
                /// The KV-cache layout vLLM resolved for the model (`cache_config.kv_cache_layout`,
                /// `VLLM_KV_CACHE_LAYOUT`): `"LBNHC"` under FLASH_ATTN; a block-outer one
                /// (`"BLHNC"`, `"BLNHC"`, `"BHLNC"`) where a backend declares only those, which packs
                /// layers of different page sizes into each block (grouping case 3).
                kv_cache_layout: $crate::vllm::KvCacheLayout = $crate::vllm::KvCacheLayout::Lbnhc
                    => Layout, "", "--kv-cache-layout";
            }
        }
    };
}

fn record_json<R: Record>() -> Value {
    let settings: Vec<Value> = R::SETTINGS.iter().map(Setting::to_json).collect();
    json!({"doc": crate::fields::doc_text(R::DOC), "settings": settings})
}

/// The declaration as data: `{"version", "records": {"VllmLayer": {"doc",
/// "settings"}, "VllmEngine": {..}}}`, each setting `{"name", "py", "choices",
/// "required", "default", "unit", "flag", "doc"}` (what `kvbudget.vllm` builds
/// its classes from).
pub fn settings_json() -> Value {
    let mut records = serde_json::Map::new();
    records.insert(VllmLayer::NAME.to_owned(), record_json::<VllmLayer>());
    records.insert(VllmEngine::NAME.to_owned(), record_json::<VllmEngine>());
    json!({"version": VLLM_VERSION, "records": records})
}

#[cfg(test)]
mod tests {
    use super::super::{LayerKind, MaxModelLen};
    use super::*;

    #[test]
    fn a_record_round_trips_through_its_json_form() {
        let mut e = VllmEngine {
            max_model_len: MaxModelLen::Auto,
            derived_max_model_len: Some(4096),
            speculative_method: Some("eagle3".into()),
            ..VllmEngine::default()
        };
        assert_eq!(VllmEngine::from_json(&e.to_json()), Ok(e.clone()));
        e.max_model_len = MaxModelLen::Tokens(7);
        assert_eq!(VllmEngine::from_json(&e.to_json()), Ok(e));
        let l = VllmLayer::sliding("a", 8, 128, 1024);
        assert_eq!(VllmLayer::from_json(&l.to_json()), Ok(l));
    }

    #[test]
    fn required_and_unknown_fields_are_refused() {
        let e = VllmLayer::from_json(&json!({"name": "a", "kind": "full", "head_size": 1}));
        assert_eq!(e, Err("missing field num_kv_heads".to_owned()));
        let e = VllmEngine::from_json(&json!({"tp": 1, "bogus": 2}));
        assert_eq!(e, Err("unknown field bogus".to_owned()));
        let e = VllmEngine::from_json(&json!({"max_model_len": "long"})).unwrap_err();
        assert!(e.starts_with("max_model_len: expected"), "{e}");
    }

    #[test]
    fn the_table_holds_every_field_once_with_its_default() {
        let t = settings_json();
        let engine = t["records"]["VllmEngine"]["settings"].as_array().unwrap();
        let names: Vec<&str> = engine.iter().map(|s| s["name"].as_str().unwrap()).collect();
        let keys: Vec<String> = VllmEngine::default()
            .to_json()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut sorted: Vec<&str> = names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, keys);
        assert_eq!(names[0], "block_size");
        assert_eq!(engine[0]["default"], json!(16));
        assert_eq!(engine[0]["flag"], json!("--block-size"));
        let layer = t["records"]["VllmLayer"]["settings"].as_array().unwrap();
        assert_eq!(layer[1]["choices"], json!(LayerKind::NAMES));
        assert!(layer[0]["required"].as_bool().unwrap() && layer[0]["default"].is_null());
        for s in engine.iter().chain(layer) {
            assert!(!s["doc"].as_str().unwrap().is_empty(), "{s}");
        }
    }

    #[test]
    fn layer_kind_names_are_the_serde_names() {
        for &k in LayerKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), json!(k.name()));
        }
    }
}
