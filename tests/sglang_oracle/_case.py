"""A kvbudget case dict -> SGLang's inputs: a KVCacheConfigurator and the runtime context.

The mapping is documented field by field in the package docstring
(:mod:`sglang_oracle`); this module is its implementation. Every object built
here is a :class:`~._strict.StrictNamespace`, so SGLang reading an input the
oracle does not map fails loudly instead of getting a made-up value.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from kvbudget.fields import SCENARIO_FIELDS

from ._helpers import GatedDeltaHFConfig
from ._sandbox import HFConfig, Sandbox
from ._strict import StrictNamespace, StubError

#: Keys every case must carry (geometry and the serving values without an "off" state).
REQUIRED: tuple[str, ...] = (
    "num_full_layers",
    "num_swa_layers",
    "num_kv_heads",
    "head_dim",
    "v_head_dim",
    "swa_num_kv_heads",
    "swa_head_dim",
    "swa_v_head_dim",
    "kv_cache_dtype",
    "model_dtype",
    "page_size",
    "swa_full_tokens_ratio",
    "swa_eviction_interval",
)

#: Keys a case may leave out, with the "feature off" value used then.
OPTIONAL: dict[str, object] = {
    "sliding_window_size": None,
    "kv_lora_rank": None,
    "qk_rope_head_dim": None,
    "swa_kv_lora_rank": None,
    "swa_qk_rope_head_dim": None,
    "index_head_dim": None,
    "index_kpool": 1,
    "index_shared_layers": 0,
    "dsa_raw_kv_layout": False,
    "dsa_backends": None,  # SGLang's (prefill, decode) DSA backends; None: from dsa_raw_kv_layout
    "tp_size": 1,
    "dcp_size": 1,
    "attn_dp_size": 1,
    "max_running_requests": None,
    "chunked_prefill_size": None,
    "disable_radix_cache": False,
    "disable_overlap_schedule": False,
    "disaggregation_mode": "null",
    "disaggregation_decode_extra_slots": 0,
    "disable_hybrid_swa_memory": False,
    # SGLang's model_config.is_hybrid_swa (None: the case has SWA layers); a hybrid
    # architecture may have none, or (False here) no layer ids at all.
    "hybrid_swa": None,
    "hybrid_layer_ids": True,
    "is_draft_worker": False,
    "enable_unified_memory": False,
    "prefill_attention_backend": None,
    "decode_attention_backend": None,
    "is_sm100": False,
    "algorithm": "none",
    "draft_num_layers": 0,
    "num_steps": None,
    "eagle_topk": None,
    "num_draft_tokens": None,
    "max_num_draft_tokens": None,
    "banded_draft_layers": 0,
    "draft_swa_num_layers": 0,
    "dflash_draft_cell_size_per_token": None,
    "fused_full_entry_bytes": None,
    "fused_swa_entry_bytes": None,
    "context_len": 131072,
    # kvbudget's name for model_config.context_len (the scenario's field): context_len when given
    "model_context_len": None,
    # A hybrid-state model (a gated-delta-net config, SGLang's Qwen3NextConfig): the ids of
    # its state layers among num_full_layers + len(state_layer_ids) layers, every other
    # layer full attention; None: no state pool. No sliding-window layers with it.
    "state_layer_ids": None,
    # The pipeline stage this worker holds: (start_layer, end_layer, pp_size); None: every
    # layer, pp_size 1.
    "stage": None,
}

#: kvbudget kv_cache_dtype -> (SGLang --kv-cache-dtype, model dtype forced by it or None).
KV_CACHE_DTYPES: dict[str, tuple[str, torch.dtype | None]] = {
    "auto": ("auto", None),
    "bf16": ("bf16", None),
    "fp16": ("auto", torch.float16),
    "fp32": ("auto", torch.float32),
    "fp8_e4m3": ("fp8_e4m3", None),
    "fp8_e5m2": ("fp8_e5m2", None),
    "mxfp8": ("mxfp8", None),
    "nvfp4": ("nvfp4", None),
    "fp4_mx_block16": ("fp4_mx_block16", None),
}
MODEL_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}
#: kvbudget's names, from its field table (SGLang takes the algorithm upper-cased,
#: the mode as is).
ALGORITHMS = SCENARIO_FIELDS["algorithm"].choices
DISAGGREGATION_MODES = SCENARIO_FIELDS["disaggregation_mode"].choices

#: Hugging Face config attributes SGLang probes with getattr/hasattr that a plain
#: Llama/DeepSeek-V2 text config does not have (so the probe must see "unset").
HF_ABSENT: frozenset[str] = frozenset(
    {
        "multi_query",  # ModelConfig.get_total_num_kv_heads (falcon MQA)
        "n_head_kv",
        "num_kv_heads",  # get_total_num_kv_heads, probed before num_key_value_heads
        "text_config",  # kimi_linear_config, qsa _text_config: not a multimodal config
        "indexer_n_heads",  # parse_qsa_profile: no QSA indexer
        "mtp_local_layer_ids",  # HybridSWAPoolConfigurator: set only with banded_draft_layers > 0
        # dsa_layer_skips_topk: no shared top-k layers (every DSA layer has its own indexer)
        "indexer_types", "cli_factor", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset",
        "index_kpool_compress",
    }
)
#: The DSA backends of a case: the raw MLA layout (TRT-LLM, or TileLang on both
#: sides) or the scaled one (FlashMLA's sparse kernels).
DSA_BACKENDS = {True: (("trtllm", "trtllm"), ("tilelang", "tilelang")),
                False: (("flashmla_sparse", "flashmla_kv"), ("flashmla_sparse", "tilelang"))}

CONFIG_KEYS = (
    "max_total_num_tokens",
    "full_max_total_num_tokens",
    "swa_max_total_num_tokens",
    "unified_memory_pool_bytes",
)


class CaseError(ValueError):
    """The case dict itself is malformed (unknown key, missing key, unknown name)."""


# Every kvbudget name must have its SGLang mapping (a new dtype fails here, loudly).
for _field, _mapping in (("kv_cache_dtype", KV_CACHE_DTYPES), ("model_dtype", MODEL_DTYPES)):
    if set(_mapping) != set(SCENARIO_FIELDS[_field].choices):
        raise CaseError(f"the oracle maps {sorted(_mapping)}, kvbudget's {_field} has "
                        f"{sorted(SCENARIO_FIELDS[_field].choices)}: map the new names")


def resolve_case(case: Mapping[str, object]) -> dict[str, Any]:
    """The case with defaults filled; unknown or missing keys and unknown names raise CaseError."""
    unknown = sorted(set(case) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise CaseError(f"unknown case keys: {unknown}")
    missing = [k for k in REQUIRED if k not in case]
    if missing:
        raise CaseError(f"missing case keys: {missing}")
    c: dict[str, Any] = {**OPTIONAL, **case}
    if c["model_context_len"] is not None:
        c["context_len"] = c["model_context_len"]
    for key, allowed in (
        ("kv_cache_dtype", KV_CACHE_DTYPES),
        ("model_dtype", MODEL_DTYPES),
        ("algorithm", ALGORITHMS),
        ("disaggregation_mode", DISAGGREGATION_MODES),
    ):
        if c[key] not in allowed:
            raise CaseError(f"{key}={c[key]!r}: expected one of {sorted(allowed)}")
    return c


def _positive_or_none(value: Any) -> Any:
    return value if value is not None and value > 0 else None


def build_inputs(sb: Sandbox, c: Mapping[str, Any]) -> tuple[StrictNamespace, StrictNamespace]:
    """``(kvc, runtime context)`` for one resolved case; fresh objects every call."""
    algo_name = c["algorithm"]
    spec_algorithm = sb.speculative_algorithm.from_string(
        None if algo_name == "none" else algo_name.upper()
    )
    is_mla = c["kv_lora_rank"] is not None
    is_draft = bool(c["is_draft_worker"])

    sglang_dtype, forced_model_dtype = KV_CACHE_DTYPES[c["kv_cache_dtype"]]
    model_dtype = forced_model_dtype or MODEL_DTYPES[c["model_dtype"]]
    resolved_str, kv_cache_dtype = sb.configure_kv_cache_dtype(
        server_args_kv_cache_dtype=sglang_dtype,
        model=None,
        model_dtype=model_dtype,
        is_draft_worker=is_draft,
        is_dflash=spec_algorithm.is_dflash_family(),
        speculative_draft_attention_backend=None,
        speculative_draft_kv_cache_dtype=None,
    )

    hf_attrs: dict[str, Any] = {
        "architectures": ["DeepseekV2ForCausalLM" if is_mla else "LlamaForCausalLM"],
        "model_type": "deepseek_v2" if is_mla else "llama",
        "num_key_value_heads": c["num_kv_heads"],
        "swa_num_key_value_heads": c["swa_num_kv_heads"],
    }
    absent = HF_ABSENT
    is_dsa = c["index_head_dim"] is not None
    if is_dsa:  # DeepSeek-V3.2: SGLang's is_deepseek_dsa (architecture and index_topk)
        hf_attrs.update(architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32",
                        index_topk=2048, index_head_dim=c["index_head_dim"])  # fmt: skip
        if c["index_kpool"] != 1 or c["index_head_dim"] % 2:  # sometimes the default spelled out
            hf_attrs["index_kpool"] = c["index_kpool"]
        else:
            absent = absent | {"index_kpool"}
        shared = c["index_shared_layers"]
        if shared:  # the last `shared` layers reuse their predecessor's top-k
            n = c["num_full_layers"]
            hf_attrs["indexer_types"] = ["full"] * (n - shared) + ["shared"] * shared
            absent = absent - {"indexer_types"}
    dsa_backends = c["dsa_backends"] or DSA_BACKENDS[bool(c["dsa_raw_kv_layout"])][c["num_full_layers"] % 2]
    if c["banded_draft_layers"] > 0:
        hf_attrs["mtp_local_layer_ids"] = list(range(c["banded_draft_layers"]))
        absent = absent - {"mtp_local_layer_ids"}
    state = c["state_layer_ids"]
    total = c["num_full_layers"] + c["num_swa_layers"] + len(state or ())
    start, end, pp_size = c["stage"] or (0, total, 1)
    if not 0 <= start <= end <= total or pp_size < 1:
        raise CaseError(f"stage={c['stage']!r}: expected 0 <= start <= end <= {total}, pp_size >= 1")
    if state is None:
        hf = HFConfig("hf_config", absent, **hf_attrs)
    else:
        if c["num_swa_layers"] or not set(state) <= set(range(total)) or len(set(state)) != len(state):
            raise CaseError(f"state_layer_ids={state!r}: distinct ids below {total}, no sliding-window layers")
        full_ids = [i for i in range(total) if i not in set(state)]
        hf = GatedDeltaHFConfig("hf_config", absent, **hf_attrs, full_attention_layer_ids=full_ids)

    mc_attrs: dict[str, Any] = {
        "hf_config": hf,
        "hf_text_config": hf,
        "is_draft_model": is_draft,
        "attention_arch": sb.attention_arch.MLA if is_mla else sb.attention_arch.MHA,
        "head_dim": c["head_dim"],
        "v_head_dim": c["v_head_dim"],
        "swa_head_dim": c["swa_head_dim"],
        "swa_v_head_dim": c["swa_v_head_dim"],
        "context_len": c["context_len"],
        "is_multimodal": False,
        "linear_attn_registry_result": None,
    }
    if is_mla:
        mc_attrs.update(
            kv_lora_rank=c["kv_lora_rank"],
            qk_rope_head_dim=c["qk_rope_head_dim"],
            swa_kv_lora_rank=c["swa_kv_lora_rank"],
            swa_qk_rope_head_dim=c["swa_qk_rope_head_dim"],
        )
    model_config = sb.model_config_cls("ModelConfig", (), **mc_attrs)

    n_f, n_s = c["num_full_layers"], c["num_swa_layers"]
    hybrid = n_s > 0 if c["hybrid_swa"] is None else bool(c["hybrid_swa"])
    is_hybrid_swa = hybrid and not c["disable_hybrid_swa_memory"]
    has_ids = is_hybrid_swa and c["hybrid_layer_ids"]
    layer_info = StrictNamespace(
        "ModelLayerInfo",
        start_layer=start,
        end_layer=end,
        num_effective_layers=end - start,
        full_attention_layer_ids=list(range(n_f)) if has_ids else None,
        swa_attention_layer_ids=list(range(n_f, n_f + n_s)) if has_ids else None,
        is_hybrid_swa_mtp_draft=False,
    )

    eagle_like = spec_algorithm.is_eagle() or spec_algorithm.is_standalone()
    dflash_like = spec_algorithm.is_dflash_family()
    spec_aux = StrictNamespace(
        "SpecAuxHiddenStateConfig",
        eagle_draft_num_layers=_positive_or_none(c["draft_num_layers"]) if eagle_like else None,
        eagle_draft_swa_num_layers=_positive_or_none(c["draft_swa_num_layers"])
        if eagle_like
        else None,
        dflash_draft_num_layers=_positive_or_none(c["draft_num_layers"]) if dflash_like else None,
        dspark_num_stages=None,
    )

    fused = {"full": c["fused_full_entry_bytes"], "swa": c["fused_swa_entry_bytes"]}

    def fused_entry_bytes(sub_pool_name: str) -> Any:
        if sub_pool_name not in fused:
            raise StubError(
                f"sglang_oracle: kvc.fused_entry_bytes({sub_pool_name!r}) is not mapped"
            )
        return fused[sub_pool_name]

    kvc = sb.kvc_cls(
        "KVCacheConfigurator",
        device="cpu",
        attn_dp_size=c["attn_dp_size"],
        pp_size=pp_size,
        model_config=model_config,
        server_args=StrictNamespace("ServerArgs", enable_hisparse=False),
        kv_cache_dtype=kv_cache_dtype,
        kv_cache_dtype_str=resolved_str if resolved_str is not None else sglang_dtype,
        model_dtype=model_dtype,
        page_size=c["page_size"],
        sliding_window_size=c["sliding_window_size"],
        spec_algorithm=spec_algorithm,
        is_draft_worker=is_draft,
        spec_aux_config=spec_aux,
        is_hybrid_swa=is_hybrid_swa,
        use_mla_backend=is_mla,
        layer_info=layer_info,
        dflash_draft_cell_size_per_token=c["dflash_draft_cell_size_per_token"],
        mambaish_config=sb.mambaish_config(model_config),
        token_to_kv_pool_allocator=None,
        fused_entry_bytes=fused_entry_bytes,
    )

    ctx = StrictNamespace(
        "runtime context",
        parallel=StrictNamespace(
            "get_parallel()",
            attn_tp_size=c["tp_size"],
            attn_dcp_size=c["dcp_size"],
            attn_dp_size=c["attn_dp_size"],
            pp_size=pp_size,
            enable_dsa_cache_layer_split=False,
            enable_kv_cache_sharding=False,
        ),
        schedule=StrictNamespace(
            "get_schedule()",
            page_size=c["page_size"],
            max_total_tokens=None,
            swa_full_tokens_ratio=c["swa_full_tokens_ratio"],
            max_running_requests=c["max_running_requests"],
            chunked_prefill_size=c["chunked_prefill_size"],
            disable_overlap_schedule=c["disable_overlap_schedule"],
        ),
        spec=StrictNamespace(
            "get_spec()",
            speculative_algorithm=None if spec_algorithm.is_none() else spec_algorithm.name,
            speculative_num_steps=c["num_steps"],
            speculative_eagle_topk=c["eagle_topk"],
            speculative_num_draft_tokens=c["num_draft_tokens"],
            max_speculative_num_draft_tokens=c["max_num_draft_tokens"],
            enable_multi_layer_eagle=False,
        ),
        memory=StrictNamespace(
            "get_memory()",
            enable_hisparse=False,
            enable_unified_cache_external_linker=False,
            enable_unified_memory=c["enable_unified_memory"],
            disable_radix_cache=c["disable_radix_cache"],
        ),
        disagg=StrictNamespace(
            "get_disagg()",
            disaggregation_mode=c["disaggregation_mode"],
            disaggregation_decode_extra_slots=c["disaggregation_decode_extra_slots"],
        ),
        platform=StrictNamespace("get_platform()", is_sm100=c["is_sm100"]),
        model=StrictNamespace("get_model()"),
        exec=StrictNamespace("get_exec()", kernel=StrictNamespace(
            "get_exec().kernel", dsa_prefill_backend=dsa_backends[0], dsa_decode_backend=dsa_backends[1])),
        envs={
            "SGLANG_SWA_EVICTION_INTERVAL": c["swa_eviction_interval"],
            "SGLANG_NPU_ENABLE_SPARSE_KV_OFFLOAD": False,
        },
        resolved_view=StrictNamespace(
            "resolved_view(server_args)",
            attention_backends=(c["prefill_attention_backend"], c["decode_attention_backend"]),
        ),
    )
    return kvc, ctx
