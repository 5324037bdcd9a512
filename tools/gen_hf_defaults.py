#!/usr/bin/env python3
"""Write the config-class defaults kvbudget reads sparse ``config.json`` files with.

A released ``config.json`` may leave keys to its config class (the sparse
Gemma 3 ``text_config``, a Qwen3 config without ``head_dim``). SGLang loads it
with transformers 5.19.0 (the version SGLang 0.5.23 pins), or with SGLang's own
class for the model types of its ``_CONFIG_REGISTRY``, and reads the class
defaults. kvbudget has neither at run time, so this tool records, per model
type, the defaults of the keys kvbudget's readers use
(``python/kvbudget/models/data/hf_defaults.json``).

Only plain defaults are recorded: a key whose default value changes when the
other inputs change (``head_dim`` computed from ``hidden_size`` in
``__post_init__``, ``layer_types`` from ``num_hidden_layers``) is derived, not a
default, and kvbudget derives it by its own rule. Usage:
``python tools/gen_hf_defaults.py [--check]`` (``--check`` exits 1 when the
committed file differs, as ``tests/test_hf_defaults.py`` does).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "python" / "kvbudget" / "models" / "data" / "hf_defaults.json"
TRANSFORMERS_VERSION = "5.19.0"

#: The keys the readers use (kvbudget.models.hf, kvbudget.sglang.model, kvbudget.vllm.models).
KEYS = (
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
    "v_head_dim", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim", "sliding_window",
    "sliding_window_size", "sliding_window_pattern", "attention_chunk_size", "no_rope_layer_interval",
    "use_sliding_window", "max_window_layers", "num_kv_shared_layers", "kv_lora_rank",
    "qk_rope_head_dim", "qk_nope_head_dim", "global_head_dim", "num_global_key_value_heads",
    "attention_k_eq_v", "multi_query", "layer_types", "hybrid_layer_pattern", "full_attention_interval",
    "linear_attn_config", "full_attn_idxs", "num_attention_groups", "index_topk", "index_head_dim",
    "index_kpool", "index_kpool_compress", "indexer_types", "index_topk_freq", "index_topk_pattern",
    "index_skip_topk_offset", "cli_factor", "num_nextn_predict_layers", "no_rope_layers", "encoder_layers",
    "decoder_layers", "loop_num", "num_loops", "rotary_dim", "use_qk_norm",
)  # fmt: skip
#: Model types recorded: the families the SGLang model-resolution test builds (text types
#: of multimodal configs included).
MODEL_TYPES = (
    "gemma2", "gemma3_text", "gemma3n_text", "gemma4_text", "cohere2", "exaone4", "olmo2", "olmo3",
    "mistral", "phi3", "qwen2", "qwen3", "llama", "llama4_text", "gpt_oss", "mimo_v2_flash",
    "granite_swa", "laguna", "deepseek_v3", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "kimi_linear", "lfm2",
    "step3p5", "deepseek_v32", "glm_moe_dsa", "mellum", "muse_glimmer", "muse_glimmer_text",
    "nemotron_h", "falcon_h1", "granitemoehybrid", "lfm2_moe", "minicpm3",
    "whisper", "nanbeige", "qwen2_moe", "qwen3_moe", "mixtral", "phimoe", "glm4_moe_lite", "hy_v3", "glm4_moe", "minimax_m2", "gemma", "granite",
    "olmoe", "granitemoe", "granitemoeshared", "glm4", "ernie4_5", "ernie4_5_moe", "hyperclovax", "apertus",
    "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text", "qwen3_vl_moe_text", "glm4v_text", "glm4v_moe_text",
    "beam", "gemma4_unified_text", "stablelm", "afmoe", "qwen2_5_omni_text", "qwen3_omni_moe_text", "glm_ocr_text", "paddleocr_vl_text", "aria_text", "mamba",
    "mamba2", "falcon_mamba", "diffusion_gemma_text", "nemotron",
)  # fmt: skip
#: Outer model types whose SGLang config class builds its text config (the attribute named) with a
#: class of its own (SGLang's copy of ``DeepseekV2Config``): that class's defaults, under the key
#: ``kvbudget.models.hf`` reads them by (dots.vlm1's text is the file's own keys: its model type).
SGLANG_TEXT_CLASSES = {"kimi_vl": ("text_config", "kimi_vl_text"), "dots_vlm": ("language_config", "dots_vlm"),
                       "deepseek_vl_v2": ("language_config", "deepseek_vl_v2_text")}
#: Model types whose vLLM 0.33.0 config class (transformers', or vLLM's own for Kimi-Linear) kvbudget's
#: vLLM reader takes defaults from (the hybrid-state families), and the keys that reader uses.
VLLM_MODEL_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h", "granitemoehybrid",
                    "falcon_h1", "lfm2", "lfm2_moe", "jamba", "kimi_linear", "afmoe", "qwen3_asr_text", "mamba",
                    "falcon_mamba", "mamba2")
VLLM_KEYS = (*KEYS, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
             "linear_value_head_dim", "linear_conv_kernel_dim", "mamba_ssm_dtype", "mamba_num_heads", "mamba_head_dim",
             "n_groups", "conv_kernel", "ssm_state_size", "mamba_ssm_cache_dtype", "mamba_n_heads", "mamba_n_groups",
             "mamba_d_state", "mamba_d_head", "mamba_d_conv", "mamba_expand", "mamba_d_ssm", "conv_L_cache", "num_dense_layers",
             "num_experts", "attn_layer_period", "attn_layer_offset", "global_attn_every_n_layers", "state_size",
             "expand", "num_heads")  # fmt: skip
#: The classic decoders' model types (``kvbudget.vllm.classic``: transformers' classes and vLLM's own
#: ``ChatGLMConfig``, as vLLM's loader takes them) and the keys that reader uses; read through the class's ``attribute_map`` (GPT-2 saves ``hidden_size``
#: as ``n_embd``).
VLLM_CLASSIC_TYPES = ("gpt2", "gptj", "opt", "bloom", "falcon", "chatglm")
VLLM_CLASSIC_KEYS = ("num_hidden_layers", "num_attention_heads", "hidden_size", "sliding_window", "layer_types",
                     "rotary_dim", "multi_query", "add_cross_attention", "scale_attn_by_inverse_layer_idx",
                     "reorder_and_upcast_attn", "tie_word_embeddings", "new_decoder_architecture",
                     "num_kv_heads", "alibi", "multi_query_attention", "multi_query_group_num")  # fmt: skip
#: The text families of ``kvbudget.vllm.text_families`` (transformers' classes, vLLM's loader) and the keys
#: that reader uses.
VLLM_TEXT_TYPES = ("exaone_moe", "laguna", "cohere2_moe", "axk1", "hy_v3", "mimo_v2_flash")
VLLM_TEXT_KEYS = (*VLLM_KEYS, "first_k_dense_replace", "sliding_window_pattern", "mlp_layer_types", "hidden_act",
                  "prefix_dense_sliding_window_pattern", "max_position_embeddings", "routed_scaling_factor",
                  "n_routed_experts", "num_experts_per_tok", "num_shared_experts")  # fmt: skip
#: The DSA models of ``kvbudget.vllm.dsa`` (transformers' classes, vLLM's loader) and the keys that reader uses.
VLLM_DSA_TYPES = ("deepseek_v32", "glm_moe_dsa", "hy_v4")
VLLM_DSA_KEYS = (*KEYS, "rope_parameters", "q_lora_rank", "gated_mla", "gating_type")
#: Inputs perturbed to tell a derived key from a default.
_PERTURB = {"hidden_size": 2, "num_attention_heads": 2, "num_hidden_layers": 1, "head_dim": 2,
            "num_key_value_heads": 2, "sliding_window": 2, "qk_rope_head_dim": 2}  # fmt: skip


@functools.cache
def _sglang_classes() -> Any:
    sys.path.insert(0, str(REPO / "tests"))
    from sglang_oracle._configs import REAL, ConfigClasses
    from sglang_oracle._fetch import sglang_root
    from sglang_oracle._plumbing import Builder

    return ConfigClasses(Builder(sglang_root(), real=REAL))


def _config_class(model_type: str) -> Any:
    """The class SGLang 0.5.23 loads ``model_type`` with: its own where its registry has one."""
    import transformers

    classes = _sglang_classes()
    if model_type in classes.types:
        return classes.types[model_type]()
    return transformers.CONFIG_MAPPING[model_type]


def _vllm_config_class(model_type: str) -> Any:
    """The class vLLM 0.33.0 loads ``model_type`` with (its own for Kimi-Linear, from the wheel)."""
    sys.path.insert(0, str(REPO / "tests"))
    from vllm_oracle._hf import vllm_config_class

    return vllm_config_class(model_type)


def _values(cls: Any, keys: tuple[str, ...], aliased: bool = False, **kw: Any) -> dict[str, Any]:
    saved = cls(**kw).to_dict()  # the base values (a per-layer spec hides them from getattr)
    alias = (getattr(cls, "attribute_map", None) or {}) if aliased else {}
    return {k: saved.get(k, saved.get(alias.get(k, k))) for k in keys}


def defaults_of(cls: Any, keys: tuple[str, ...] = KEYS, aliased: bool = False) -> dict[str, Any]:
    """The plain (not derived) non-null defaults of ``keys`` (``aliased``: a key saved under its
    ``attribute_map`` name is read by that name)."""
    from huggingface_hub.errors import StrictDataclassClassValidationError

    base = _values(cls, keys, aliased)
    derived: set[str] = set()
    for key, step in _PERTURB.items():
        if isinstance(base.get(key), int):
            value = base[key] * step if step > 1 else base[key] + step
            try:
                other = _values(cls, keys, aliased, **{key: value})
            except (ValueError, StrictDataclassClassValidationError):  # the class ties the key to others
                # (Granite-4.0-H's, Mamba-2's Mamba dims): nothing
                continue  # derives from it alone; its own default stands
            derived |= {k for k in keys if k != key and other[k] != base[k]}
    return {k: v for k, v in base.items() if v is not None and k not in derived}


def attribute_maps() -> dict[str, dict[str, str]]:
    """Per model type (every type transformers registers and every type SGLang's config registry
    has, with SGLang's own class where it has one), the ``attribute_map`` aliases of :data:`KEYS`:
    a config object answers ``num_hidden_layers`` with its ``n_layer`` (GPT-2, GPT-J, ...; SGLang's
    ``ChatGLMConfig`` with its ``num_layers``), and both engines read the object. ``layer_types``
    aside: the hybrid-state readers take ``layers_block_type`` themselves."""
    import transformers

    out: dict[str, dict[str, str]] = {}
    for model_type in sorted({*transformers.CONFIG_MAPPING.keys(), *_sglang_classes().types}):
        try:
            cls = _config_class(model_type)
        except Exception:  # noqa: BLE001 - an SGLang-only config module its sandbox cannot run (PIL, a
            if model_type in transformers.CONFIG_MAPPING:  # class it does not lift): no aliases read
                raise
            continue
        aliases = getattr(cls, "attribute_map", None) or {}
        picked = {k: v for k, v in aliases.items() if k in KEYS and k != "layer_types"}
        if picked:
            out[model_type] = dict(sorted(picked.items()))
    return out


def causal_lm_names() -> dict[str, str]:
    """transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``: model type -> its causal-LM class name.
    vLLM's ``VllmConfig.with_hf_config`` names a wrapped text config's architecture by it when the
    text config has none (a LLaVA ``text_config``)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return {k: v for k, v in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()) if isinstance(v, str)}


def text_config_defaults() -> dict[str, dict[str, Any]]:
    """Per outer model type whose config class merges its own defaults under a ``text_config``
    dict (``_default_text_config_kwargs``: GLM-ASR, Voxtral, ...), those defaults of :data:`KEYS`:
    a sparse ``text_config`` of such a model takes them, not its text class's."""
    import transformers

    out: dict[str, dict[str, Any]] = {}
    for model_type in sorted(transformers.CONFIG_MAPPING.keys()):
        kwargs = getattr(_config_class(model_type), "_default_text_config_kwargs", None) or {}
        picked = {k: v for k, v in kwargs.items() if k in KEYS}
        if picked:
            out[model_type] = dict(sorted(picked.items()))
    return out


def generate() -> dict[str, Any]:
    import transformers

    if transformers.__version__ != TRANSFORMERS_VERSION:
        raise SystemExit(f"gen_hf_defaults: needs transformers {TRANSFORMERS_VERSION}, "
                         f"found {transformers.__version__}")  # fmt: skip
    return {
        "generated_by": "tools/gen_hf_defaults.py",
        "transformers": TRANSFORMERS_VERSION,
        "model_types": {**{mt: defaults_of(_config_class(mt)) for mt in MODEL_TYPES},
                        **{key: defaults_of(type(getattr(_config_class(outer)(), attr)))
                           for outer, (attr, key) in SGLANG_TEXT_CLASSES.items()}},
        "vllm_model_types": {**{mt: defaults_of(_vllm_config_class(mt), VLLM_KEYS) for mt in VLLM_MODEL_TYPES},
                             **{mt: defaults_of(_vllm_config_class(mt), VLLM_CLASSIC_KEYS, aliased=True)
                                for mt in VLLM_CLASSIC_TYPES},
                             **{mt: defaults_of(_vllm_config_class(mt), VLLM_TEXT_KEYS) for mt in VLLM_TEXT_TYPES},
                             **{mt: defaults_of(_vllm_config_class(mt), VLLM_DSA_KEYS) for mt in VLLM_DSA_TYPES}},
        "attribute_maps": attribute_maps(),
        "causal_lm_names": causal_lm_names(),
        "text_config_defaults": text_config_defaults(),
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    return write_or_check(OUT, lambda: render(generate()), tool="tools/gen_hf_defaults.py", doc=__doc__ or "", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
