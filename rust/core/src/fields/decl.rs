//! The declaration itself: every value type and every field, once.

/// The declaration: every value type, every field. `$callback!` receives it;
/// the core's callback defines the types, the bridge's defines the getters.
///
/// Syntax: `scenario { .. }` holds the three types a [`crate::Scenario`] is made
/// of (`Type(scenario_field) [extra derives] { fields }`); `values { .. }` the
/// other value types. A field is `name: RustType = default => Kind`; without
/// `= default` the constructor requires it (its Rust default is `Default`).
#[macro_export]
macro_rules! for_each_value_type {
    ($callback:ident) => {
        $callback! {
            scenario {
                /// The sizing view of a model's attention: layer counts and
                /// dims, no layer ids (what every formula needs). `None` in a
                /// defaulted dim means "not given"; [`AttentionShape::resolved`]
                /// fills it (V dim = K dim, SWA geometry = full geometry).
                AttentionShape(shape) [Eq, Hash] {
                    /// `n_f`, full-attention layers (`ModelGeometry` takes their ids instead).
                    num_full_layers: u64 = 0 => $crate::fields::Count,
                    /// `n_s`, sliding-window layers (`ModelGeometry` takes their ids instead).
                    num_swa_layers: u64 = 0 => $crate::fields::Count,
                    /// Total KV heads of a full layer, before tensor parallelism.
                    num_kv_heads: u64 => $crate::fields::Positive,
                    /// K head dim of a full layer, elements.
                    head_dim: u64 => $crate::fields::Positive,
                    /// V head dim of a full layer, elements (default: `head_dim`).
                    v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// Total KV heads of an SWA layer (default: `num_kv_heads`).
                    swa_num_kv_heads: Option<u64> = None => $crate::fields::Derived,
                    /// K head dim of an SWA layer, elements (default: `head_dim`).
                    swa_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// V head dim of an SWA layer, elements (default: `swa_head_dim` when given, else `v_head_dim`).
                    swa_v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// SGLang's exclusive sliding window (HF `sliding_window` minus 1), tokens.
                    sliding_window_size: Option<u64> = None => $crate::fields::OptCount,
                    /// MLA latent rank, elements; given, the model is MLA (DeepSeek-style).
                    kv_lora_rank: Option<u64> = None => $crate::fields::OptPositive,
                    /// MLA rotary key dim, elements (required with `kv_lora_rank`).
                    qk_rope_head_dim: Option<u64> = None => $crate::fields::OptCount,
                    /// MLA latent rank of an SWA layer, elements (MLA only; default: `kv_lora_rank`).
                    swa_kv_lora_rank: Option<u64> = None => $crate::fields::Derived,
                    /// MLA rotary key dim of an SWA layer, elements (MLA only; default: `qk_rope_head_dim`).
                    swa_qk_rope_head_dim: Option<u64> = None => $crate::fields::OptCount,
                    /// DSA indexer key dim, elements; given (with MLA), the model is DSA
                    /// (SGLang's `is_deepseek_dsa`): every layer also keeps an FP8 index key and
                    /// its f32 scales, `index_head_dim + index_head_dim / 128 * 4` bytes per token.
                    index_head_dim: Option<u64> = None => $crate::fields::OptPositive,
                    /// DSA index keys pooled per stored key (SGLang's `index_kpool`), tokens;
                    /// a token costs `ceil(index key bytes / index_kpool)`.
                    index_kpool: u64 = 1 => $crate::fields::Positive,
                    /// DSA layers that reuse the previous layer's top-k (SGLang's
                    /// `dsa_layer_skips_topk`): the target worker stores no index keys for them, layers.
                    index_shared_layers: u64 = 0 => $crate::fields::Count,
                }
                /// Serving settings (REFERENCE section 1): dtype, paging,
                /// parallelism, SWA ratio and the request-cap inputs.
                ServingConfig(serving) [] {
                    /// KV-cache dtype (SGLang's `--kv-cache-dtype` names; `auto` is `model_dtype`).
                    kv_cache_dtype: $crate::KvDtype = $crate::KvDtype::Bf16 => $crate::fields::Choice<$crate::KvDtype>,
                    /// `p`, tokens per page.
                    page_size: u64 = 1 => $crate::fields::Positive,
                    /// Attention tensor-parallel size, ranks.
                    tp_size: u64 = 1 => $crate::fields::Positive,
                    /// Decode context-parallel size, ranks (divides `tp_size`).
                    dcp_size: u64 = 1 => $crate::fields::Positive,
                    /// Attention data-parallel size, ranks.
                    attn_dp_size: u64 = 1 => $crate::fields::Positive,
                    /// `r`, SWA-pool tokens per full-pool token.
                    swa_full_tokens_ratio: f64 = 0.8 => $crate::fields::Ratio,
                    /// Requests admitted at once (a request-cap input).
                    max_running_requests: Option<u64> = None => $crate::fields::OptPositive,
                    /// Chunked-prefill size, tokens (a request-cap input).
                    chunked_prefill_size: Option<u64> = None => $crate::fields::OptPositive,
                    /// The radix cache is disabled (a request-cap input).
                    disable_radix_cache: bool = false => $crate::fields::Flag,
                    /// The overlap scheduler is disabled (spec v1 rather than v2).
                    disable_overlap_schedule: bool = false => $crate::fields::Flag,
                    /// PD disaggregation role.
                    disaggregation_mode: $crate::DisaggregationMode = $crate::DisaggregationMode::Null => $crate::fields::Choice<$crate::DisaggregationMode>,
                    /// Extra decode slots in PD decode, requests.
                    disaggregation_decode_extra_slots: u64 = 0 => $crate::fields::Count,
                    /// `E`, the SWA eviction interval, tokens (SGLang uses `max(1, E)`).
                    swa_eviction_interval: i64 = 128 => $crate::fields::Signed,
                    /// Price SWA layers as full layers (SGLang's `--disable-hybrid-swa-memory`).
                    disable_hybrid_swa_memory: bool = false => $crate::fields::Flag,
                    /// This is the draft worker (it counts no draft terms; its heads ignore DCP).
                    is_draft_worker: bool = false => $crate::fields::Flag,
                    /// Full and SWA layers share one byte pool (SGLang's `--enable-unified-memory`).
                    enable_unified_memory: bool = false => $crate::fields::Flag,
                    /// The model's context length (SGLang's `model_config.context_len`: `--context-length`,
                    /// else the config's), tokens; read only by the unified tri-pool's bs=1 floor (None: unknown).
                    model_context_len: Option<u64> = None => $crate::fields::OptPositive,
                    /// The prefill attention backend (read to price `nvfp4` and by the unified-memory launch checks).
                    prefill_attention_backend: Option<$crate::fp4::AttentionBackend> = None => $crate::fields::OptChoice<$crate::fp4::AttentionBackend>,
                    /// The decode attention backend (read to price `nvfp4` and by the unified-memory launch checks).
                    decode_attention_backend: Option<$crate::fp4::AttentionBackend> = None => $crate::fields::OptChoice<$crate::fp4::AttentionBackend>,
                    /// The GPU is SM100 (B200/GB200): TRT-LLM reads NVFP4's native scale layout
                    /// (SM120 reads the linear one); read only to price `nvfp4`.
                    is_sm100: bool = true => $crate::fields::Flag,
                    /// The model's dtype: what `kv_cache_dtype="auto"` stores.
                    model_dtype: $crate::dtype::ModelDtype = $crate::dtype::ModelDtype::Bf16 => $crate::fields::Choice<$crate::dtype::ModelDtype>,
                    /// The DSA attention backends read the raw MLA layout (TRT-LLM or TileLang): an
                    /// `fp8_e4m3` DSA latent has no per-block scales. Off: the scaled layout,
                    /// `kv_lora_rank + kv_lora_rank / 128 * 4 + 2 * qk_rope_head_dim` bytes per layer.
                    dsa_raw_kv_layout: bool = false => $crate::fields::Flag,
                }
                /// Speculative-decoding settings (REFERENCE section 1).
                SpeculativeConfig(spec) [] {
                    /// The algorithm (SGLang's `--speculative-algorithm`).
                    algorithm: $crate::SpecAlgorithm = $crate::SpecAlgorithm::None => $crate::fields::Choice<$crate::SpecAlgorithm>,
                    /// `d`, the draft model's KV layers (0 with `draft` given: the draft's).
                    draft_num_layers: u64 = 0 => $crate::fields::Count,
                    /// `--speculative-num-steps`.
                    num_steps: Option<u64> = None => $crate::fields::OptCount,
                    /// `--speculative-eagle-topk`.
                    eagle_topk: Option<u64> = None => $crate::fields::OptCount,
                    /// `--speculative-num-draft-tokens`, tokens.
                    num_draft_tokens: Option<u64> = None => $crate::fields::OptCount,
                    /// `d_sf`: banded draft depths at SWA geometry but full capacity, layers
                    /// (SGLang counts the draft layers listed in `mtp_local_layer_ids`).
                    banded_draft_layers: u64 = 0 => $crate::fields::Count,
                    /// DFLASH draft bytes per token per DCP rank, bytes (0 or `None`: none given).
                    dflash_draft_cell_size_per_token: Option<u64> = None => $crate::fields::OptCount,
                    /// The draft's own KV geometry for the exact plan (default: the target's full geometry).
                    draft: Option<$crate::DraftGeometry> = None => $crate::fields::Draft,
                    /// `d_s`: draft layers at SWA geometry and SWA capacity, layers
                    /// (SGLang's `eagle_draft_swa_num_layers`).
                    draft_swa_num_layers: u64 = 0 => $crate::fields::Count,
                    /// The largest draft-token count adaptive speculative decoding may switch to
                    /// (SGLang's `max_speculative_num_draft_tokens`), tokens.
                    max_num_draft_tokens: Option<u64> = None => $crate::fields::OptCount,
                    /// Bytes per token of a full-pool entry that holds the draft's KV too (host,
                    /// draft and padding; SGLang's `fused_entry_bytes("full")`), bytes.
                    fused_full_entry_bytes: Option<u64> = None => $crate::fields::OptPositive,
                    /// Bytes per token of an SWA-pool entry that holds the draft's KV too, bytes.
                    fused_swa_entry_bytes: Option<u64> = None => $crate::fields::OptPositive,
                }
            }
            values {
                /// The draft model's own KV geometry, when it differs from the
                /// target's full layers (exact plan only; SGLang's sizing prices
                /// the draft at the target's geometry).
                DraftGeometry [Eq, Hash] {
                    /// Draft KV layers.
                    num_layers: u64 => $crate::fields::Positive,
                    /// Total draft KV heads, before tensor parallelism.
                    num_kv_heads: u64 => $crate::fields::Positive,
                    /// Draft K head dim, elements.
                    head_dim: u64 => $crate::fields::Positive,
                    /// Draft V head dim, elements (default: `head_dim`).
                    v_head_dim: Option<u64> = None => $crate::fields::Derived,
                    /// Draft KV dtype (default: the target's).
                    kv_cache_dtype: Option<$crate::KvDtype> = None => $crate::fields::OptChoice<$crate::KvDtype>,
                    /// The target pool whose token count the draft pool takes (default:
                    /// SGLang's rule, the full pool or an all-SWA target's SWA pool).
                    capacity: Option<$crate::DraftCapacity> = None => $crate::fields::OptChoice<$crate::DraftCapacity>,
                }
                /// A hybrid model's recurrent state (Mamba2, gated delta net, KDA) and SGLang's
                /// serving inputs for its cache: the state one request keeps per state layer on
                /// one rank (`kvbudget.sglang.state` builds the dims from a config, as SGLang's
                /// `Mamba2StateShape` / `KimiLinearStateShape` do), and how SGLang sizes the pool.
                StateConfig [] {
                    /// State layers of the whole model (SGLang's `mamba2_cache_params.layers`; SGLang
                    /// accepts none, pricing a slot at 0 bytes), layers.
                    num_state_layers: u64 => $crate::fields::Count,
                    /// State layers of the largest pipeline stage (default: every state layer), layers.
                    stage_state_layers: Option<u64> = None => $crate::fields::OptCount,
                    /// Conv-state elements of one request in one layer on one rank (the product of
                    /// each conv shape, summed), elements.
                    conv_elems: u64 => $crate::fields::Count,
                    /// Temporal (SSM) state heads on one rank (the state's first dim).
                    ssm_heads: u64 => $crate::fields::Positive,
                    /// Temporal state head dim (the state's second dim), elements.
                    ssm_head_dim: u64 => $crate::fields::Positive,
                    /// Temporal state size (the state's third dim), elements.
                    ssm_state_dim: u64 => $crate::fields::Count,
                    /// Key (group) heads on one rank, read by the ReplaySSM rings (0 where the
                    /// shape has none: a lightning-attention state).
                    k_heads_per_tp: u64 = 1 => $crate::fields::Count,
                    /// The conv kernel width (SGLang's `shape.conv_kernel`; a conv state keeps
                    /// `conv_kernel - 1` steps), read by the exact plan's deduplicated
                    /// speculative conv windows (`None`: unknown), steps.
                    conv_kernel: Option<u64> = None => $crate::fields::OptPositive,
                    /// Conv-state dtype (SGLang's `SGLANG_MAMBA_CONV_DTYPE`, default bfloat16).
                    conv_dtype: $crate::state::StateDtype = $crate::state::StateDtype::Bf16 => $crate::fields::Choice<$crate::state::StateDtype>,
                    /// Temporal-state dtype (`--mamba-ssm-dtype`, the config's `mamba_ssm_dtype`, default float32).
                    ssm_dtype: $crate::state::StateDtype = $crate::state::StateDtype::F32 => $crate::fields::Choice<$crate::state::StateDtype>,
                    /// The mixer (`mamba2`, `gdn`: Qwen3-Next / Qwen3.5, `kda`: Kimi-Linear).
                    mixer: $crate::state::StateMixer = $crate::state::StateMixer::Mamba2 => $crate::fields::Choice<$crate::state::StateMixer>,
                    /// Extra state bytes per request SGLang's caller adds (`extra_mamba_cache_bytes_per_req`), bytes.
                    extra_bytes_per_req: u64 = 0 => $crate::fields::Count,
                    /// Bytes of one state slot that holds a fused draft's state too (SGLang's
                    /// `fused_entry_bytes("mamba")`; `None`: the host's `mamba_cache_per_req`), bytes.
                    fused_state_entry_bytes: Option<u64> = None => $crate::fields::OptPositive,
                    /// `--max-mamba-cache-size`: state slots over all attention-DP ranks (`None`: SGLang sizes it), slots.
                    max_mamba_cache_size: Option<u64> = None => $crate::fields::OptCount,
                    /// `--mamba-full-memory-ratio`: state bytes per KV byte of the auto split (SGLang's fallback 0.9).
                    mamba_full_memory_ratio: f64 = 0.9 => $crate::fields::Ratio,
                    /// `--mamba-radix-cache-strategy`, resolved (`no_buffer`, `extra_buffer`, `extra_buffer_lazy`).
                    mamba_radix_cache_strategy: $crate::state::MambaRadixStrategy = $crate::state::MambaRadixStrategy::NoBuffer => $crate::fields::Choice<$crate::state::MambaRadixStrategy>,
                    /// `SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK`: the decode-time skip frees one slot per request.
                    mamba_skip_decode_lock: bool = false => $crate::fields::Flag,
                    /// `--enable-linear-replayssm-spec` (GDN and KDA only): ReplaySSM spec-verify rings.
                    enable_linear_replayssm_spec: bool = false => $crate::fields::Flag,
                    /// `--linear-replayssm-cache-len`: ReplaySSM ring length, decode steps.
                    linear_replayssm_cache_len: u64 = 16 => $crate::fields::Count,
                    /// `--enable-pd-role-switch`: a PD prefill server keeps the spec state.
                    enable_pd_role_switch: bool = false => $crate::fields::Flag,
                }
                /// The pool sizes SGLang resolves, tokens (`None` where SGLang leaves them unset).
                MemoryPoolConfig [Eq, Hash] {
                    /// `max_total_num_tokens` (the full pool, or an all-SWA model's SWA pool), tokens.
                    max_total_num_tokens: i64 => $crate::fields::Signed,
                    /// Full-pool tokens (SWA configurators only).
                    full_max_total_num_tokens: Option<i64> = None => $crate::fields::OptSigned,
                    /// SWA-pool tokens (SWA configurators only).
                    swa_max_total_num_tokens: Option<i64> = None => $crate::fields::OptSigned,
                    /// Bytes of the unified pool (unified memory only), bytes.
                    unified_memory_pool_bytes: Option<i64> = None => $crate::fields::OptSigned,
                }
            }
        }
    };
}
