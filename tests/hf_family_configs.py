"""config.json builders, per model family, for every entry of the bundled model table."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

Config = dict[str, Any]
Entry = dict[str, Any]


def _entries() -> dict[str, Entry]:
    text = resources.files("kvbudget.models").joinpath("data/models.json").read_text("utf-8")
    return {m["name"]: m for m in json.loads(text)["models"]}


ENTRIES = _entries()


# --------------------------------------------------------------------------
# Family config builders: the keys each family's real config.json carries.
# --------------------------------------------------------------------------


def gemma2(e: Entry) -> Config:
    cfg: Config = {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "attn_logit_softcapping": 50.0,
        "cache_implementation": "hybrid",
        "final_logit_softcapping": 30.0,
        "head_dim": e["head_dim"],
        "hidden_size": e["hidden_size"],
        "max_position_embeddings": 8192,
        "num_attention_heads": e["num_attention_heads"],
        "num_hidden_layers": e["num_layers"],
        "num_key_value_heads": e["num_kv_heads"],
        "query_pre_attn_scalar": 256,
        "sliding_window": e["sliding_window"],
        "torch_dtype": "bfloat16",
    }
    if e["name"] != "Gemma-2-2B":
        # The 9B/27B configs carry a duplicate key with the same value.
        cfg["sliding_window_size"] = e["sliding_window"]
    return cfg


def gemma3_1b(e: Entry) -> Config:
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "head_dim": 256,
        "hidden_size": 1152,
        "num_attention_heads": 4,
        "num_hidden_layers": 26,
        "num_key_value_heads": 1,
        "query_pre_attn_scalar": 256,
        "rope_local_base_freq": 10000,
        "rope_theta": 1000000,
        "sliding_window": 512,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }


def gemma3_mm(e: Entry) -> Config:
    """Released multimodal config: a sparse text_config, the rest class defaults."""
    text: Config = {
        "hidden_size": e["hidden_size"],
        "intermediate_size": 4 * e["hidden_size"],
        "model_type": "gemma3_text",
        "num_hidden_layers": e["num_layers"],
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": e["sliding_window"],
    }
    if e["name"].startswith("Gemma-3-12B"):
        text.update(num_attention_heads=16, num_key_value_heads=8)
    if e["name"].startswith("Gemma-3-27B"):
        text.update(
            head_dim=128, num_attention_heads=32, num_key_value_heads=16, query_pre_attn_scalar=168
        )
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "boi_token_index": 255999,
        "mm_tokens_per_image": 256,
        "text_config": text,
        "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"},
        "torch_dtype": "bfloat16",
    }


def gemma3n(e: Entry) -> Config:
    if e["name"].startswith("Gemma-3n-E4B"):
        # E4B is the Gemma3nTextConfig defaults: a text_config with no geometry keys.
        text: Config = {"model_type": "gemma3n_text", "vocab_size": 262400}
    else:
        n = e["num_layers"]
        text = {
            "model_type": "gemma3n_text",
            "hidden_size": 2048,
            "num_hidden_layers": n,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "num_kv_shared_layers": 10,
            "sliding_window": 512,
            "layer_types": [
                "full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)
            ],
        }
    return {
        "architectures": ["Gemma3nForConditionalGeneration"],
        "model_type": "gemma3n",
        "text_config": text,
        "audio_config": {"model_type": "gemma3n_audio"},
        "vision_config": {"model_type": "gemma3n_vision"},
    }


def cohere2(e: Entry) -> Config:
    return {
        "architectures": ["Cohere2ForCausalLM"],
        "model_type": "cohere2",
        "hidden_size": e["hidden_size"],
        "num_attention_heads": e["num_attention_heads"],
        "num_key_value_heads": e["num_kv_heads"],
        "num_hidden_layers": e["num_layers"],
        "sliding_window": e["sliding_window"],
        "sliding_window_pattern": 4,
        "order_of_interleaved_layers": "local_attn_first",
        "max_position_embeddings": e["max_position_embeddings"],
        "logit_scale": 0.25,
        "torch_dtype": "bfloat16",
    }


def mimo_v2_flash(e: Entry) -> Config:
    n = e["num_layers"]
    return {
        "architectures": ["MiMoV2FlashForCausalLM"],
        "model_type": "mimo_v2_flash",
        "hidden_size": 4096,
        "num_hidden_layers": n,
        "hybrid_layer_pattern": [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(n)],
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 192,
        "v_head_dim": 128,
        "swa_num_attention_heads": 64,
        "swa_num_key_value_heads": 8,
        "swa_head_dim": 192,
        "swa_v_head_dim": 128,
        "sliding_window": 128,
        "sliding_window_size": 128,
        "attention_chunk_size": 128,
        "add_swa_attention_sink_bias": True,
        "add_full_attention_sink_bias": False,
        "partial_rotary_factor": 0.334,
        "rope_theta": 5000000,
        "swa_rope_theta": 10000,
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    }


def mimo_7b(e: Entry) -> Config:
    return {
        "architectures": ["MiMoForCausalLM"],
        "model_type": "mimo",
        "attention_bias": True,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 36,
        "max_position_embeddings": 32768,
        "max_window_layers": 32,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "num_nextn_predict_layers": 1,
        "torch_dtype": "bfloat16",
    }


def gpt_oss(e: Entry) -> Config:
    n = e["num_layers"]
    return {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "attention_bias": True,
        "head_dim": 64,
        "hidden_size": 2880,
        "initial_context_length": 4096,
        "layer_types": [
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)
        ],
        "max_position_embeddings": 131072,
        "num_attention_heads": 64,
        "num_hidden_layers": n,
        "num_key_value_heads": 8,
        "sliding_window": 128,
        "quantization_config": {"quant_method": "mxfp4"},
        "rope_scaling": {"factor": 32.0, "rope_type": "yarn"},
    }


def llama4(e: Entry) -> Config:
    return {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "attention_chunk_size": 8192,
            "head_dim": 128,
            "hidden_size": 5120,
            "interleave_moe_layer_step": 1,
            "max_position_embeddings": 10485760,
            "no_rope_layers": [],
            "num_attention_heads": 40,
            "num_hidden_layers": 48,
            "num_key_value_heads": 8,
            "use_qk_norm": True,
        },
        "vision_config": {"model_type": "llama4_vision_model"},
    }


def mistral(e: Entry) -> Config:
    return {
        "architectures": ["MistralForCausalLM"],
        "model_type": "mistral",
        "hidden_size": 4096,
        "max_position_embeddings": 32768,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "sliding_window": 4096,
        "torch_dtype": "bfloat16",
    }


def qwen3(e: Entry) -> Config:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "head_dim": e["head_dim"],
        "hidden_size": e["hidden_size"],
        "max_position_embeddings": 40960,
        "max_window_layers": e["num_layers"],
        "num_attention_heads": e["num_attention_heads"],
        "num_hidden_layers": e["num_layers"],
        "num_key_value_heads": e["num_kv_heads"],
        "sliding_window": None,
        "use_sliding_window": False,
        "torch_dtype": "bfloat16",
    }


def qwen2(e: Entry) -> Config:
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 3584,
        "max_position_embeddings": 32768,
        "max_window_layers": 28,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "torch_dtype": "bfloat16",
    }


def llama(e: Entry) -> Config:
    cfg: Config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": e["hidden_size"],
        "max_position_embeddings": 131072,
        "num_attention_heads": e["num_attention_heads"],
        "num_hidden_layers": e["num_layers"],
        "num_key_value_heads": e["num_kv_heads"],
        "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "torch_dtype": "bfloat16",
    }
    if e["name"].startswith("Llama-3.2-1B"):
        cfg["head_dim"] = 64  # explicit in the 3.2 config; 3.1 has none
        cfg["tie_word_embeddings"] = True
    return cfg


def deepseek_v3(e: Entry) -> Config:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "num_hidden_layers": 61,
        "num_nextn_predict_layers": 1,
        "max_position_embeddings": 163840,
        "torch_dtype": "bfloat16",
    }


def eagle3(e: Entry) -> Config:
    """SpecForge EAGLE3 template: one Llama decoder layer."""
    cfg: Config = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": e["hidden_size"],
        "num_attention_heads": e["num_attention_heads"],
        "num_key_value_heads": e["num_kv_heads"],
        "num_hidden_layers": 1,
        "max_position_embeddings": e["max_position_embeddings"],
        "draft_vocab_size": 32000,
        "torch_dtype": e["dtype"],
    }
    if e["hidden_size"] // e["num_attention_heads"] != e["head_dim"]:
        cfg["head_dim"] = e["head_dim"]  # gpt-oss, Gemma: decoupled head_dim
    if e["target"] == "Gemma-3-1B":
        # Copied from the target but inactive in a Llama draft.
        cfg.update(sliding_window=512, use_sliding_window=False)
    if e["name"] == "EAGLE3 draft for Llama-3.1-8B-Instruct":
        # yuhuili's original file names the plain Llama architecture.
        cfg["architectures"] = ["LlamaForCausalLM"]
    return cfg


TARGET_BUILDERS: dict[str, Callable[[Entry], Config]] = {
    "Gemma-2-2B": gemma2,
    "Gemma-2-9B": gemma2,
    "Gemma-2-27B": gemma2,
    "Gemma-3-1B": gemma3_1b,
    "Gemma-3-4B (text)": gemma3_mm,
    "Gemma-3-12B (text)": gemma3_mm,
    "Gemma-3-27B (text)": gemma3_mm,
    "Gemma-3n-E2B (text)": gemma3n,
    "Gemma-3n-E4B (text)": gemma3n,
    "Command-R7B": cohere2,
    "Command A": cohere2,
    "MiMo-V2-Flash": mimo_v2_flash,
    "MiMo-7B-Base": mimo_7b,
    "gpt-oss-20b": gpt_oss,
    "gpt-oss-120b": gpt_oss,
    "Llama-4-Scout-17B-16E-Instruct (text)": llama4,
    "Mistral-7B-v0.1": mistral,
    "Qwen3-8B": qwen3,
    "Qwen2.5-7B-Instruct": qwen2,
    "Llama-3.1-8B": llama,
    "Llama-3.1-70B": llama,
    "DeepSeek-V3": deepseek_v3,
}

# Draft entries: (config builder, draft kind passed, num_layers override)
DRAFT_BUILDERS: dict[str, tuple[Callable[[Entry], Config], str, int | None]] = {
    "EAGLE3 draft for Llama-3.1-8B-Instruct": (eagle3, "auto", None),
    "EAGLE3 draft for Llama-3.1-70B (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for gpt-oss-20b (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for gpt-oss-120b (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for Gemma-3-1B (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for Llama-4-Scout (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for DeepSeek-V3 (SpecForge template)": (eagle3, "auto", None),
    "EAGLE3 draft for Qwen3-8B (SpecForge template)": (eagle3, "auto", None),
    "MiMo-7B MTP module": (mimo_7b, "auto", None),
    # The Flash config does not state its MTP depth (3, per the tech report).
    "MiMo-V2-Flash MTP modules": (mimo_v2_flash, "auto", 3),
    "Llama-3.2-1B (standalone draft)": (llama, "auto", None),
    "Qwen3-0.6B (standalone draft)": (qwen3, "auto", None),
}

# MLA drafts DraftGeometry cannot describe (tested separately).
MLA_DRAFTS = {"DeepSeek-V3 MTP module": deepseek_v3}
