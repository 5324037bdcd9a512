"""Parsing Hugging Face config.json files into ModelGeometry / DraftGeometry kwargs.

Every model of the bundled model table (python/kvbudget/models/data/models.json,
a copy of shared/data/models.json) is parsed from a config laid out the way
its family's real config.json is (same keys, same nesting, same omissions),
and the result must equal the table's independently researched layer ids,
heads, dims, window and bytes per token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kvbudget.models.hf import (
    DRAFT_KEYS,
    GEOMETRY_KEYS,
    ConfigError,
    draft_kwargs_from_hf_config,
    geometry_kwargs_from_hf_config,
    load_hf_config,
)

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


def test_every_table_entry_has_a_parsing_test() -> None:
    covered = set(TARGET_BUILDERS) | set(DRAFT_BUILDERS) | set(MLA_DRAFTS)
    assert covered == set(ENTRIES)
    assert all(ENTRIES[n]["role"] == "target" for n in TARGET_BUILDERS)
    assert all(ENTRIES[n]["role"] != "target" for n in DRAFT_BUILDERS)


# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------


def _owned(e: Entry, key: str) -> list[int]:
    owning = e.get("kv_owning_layer_ids")
    return [i for i in e[key] if owning is None or i in owning]


def _expected_window(e: Entry) -> int | None:
    if not e["swa_layer_ids"]:
        return None
    if e["name"].startswith("Llama-4"):
        return 8192  # SGLang model_runner: attention_chunk_size as is
    if e["name"].startswith("MiMo-V2"):
        return 128  # SGLang model_runner: config sliding_window_size as is
    return int(e["sliding_window"]) - 1  # HF inclusive -> SGLang exclusive


@pytest.mark.parametrize("name", sorted(TARGET_BUILDERS))
def test_target_matches_table(name: str) -> None:
    e = ENTRIES[name]
    kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[name](e))
    assert tuple(kw) == GEOMETRY_KEYS

    assert kw["full_attention_layer_ids"] == _owned(e, "full_layer_ids")
    assert kw["swa_attention_layer_ids"] == _owned(e, "swa_layer_ids")
    assert len(kw["full_attention_layer_ids"]) == e["kv_cache_layers_full"]
    assert len(kw["swa_attention_layer_ids"]) == e["kv_cache_layers_swa"]
    assert kw["num_kv_heads"] == e["num_kv_heads"]
    assert kw["head_dim"] == e["head_dim"]
    v = kw["v_head_dim"] or kw["head_dim"]
    assert v == e["v_head_dim"]
    assert kw["sliding_window_size"] == _expected_window(e)

    if e["mla"]:
        assert kw["kv_lora_rank"] == e["mla"]["kv_lora_rank"]
        assert kw["qk_rope_head_dim"] == e["mla"]["qk_rope_head_dim"]
        per_layer = (kw["kv_lora_rank"] + kw["qk_rope_head_dim"]) * 2
    else:
        assert kw["kv_lora_rank"] is None and kw["qk_rope_head_dim"] is None
        per_layer = kw["num_kv_heads"] * (kw["head_dim"] + v) * 2
    assert per_layer == e["kv_bytes_per_token_full_layer_bf16"]

    if e["swa_layer_ids"]:
        sh = kw["swa_num_kv_heads"] or kw["num_kv_heads"]
        sd = kw["swa_head_dim"] or kw["head_dim"]
        sv = kw["swa_v_head_dim"] or (kw["swa_head_dim"] if kw["swa_head_dim"] else v)
        assert (sh, sd, sv) == (e["swa_num_kv_heads"], e["swa_head_dim"], e["swa_v_head_dim"])
        assert sh * (sd + sv) * 2 == e["kv_bytes_per_token_swa_layer_bf16"]
    else:
        assert kw["swa_num_kv_heads"] is None and kw["swa_head_dim"] is None


def test_window_is_hf_sliding_window_minus_one() -> None:
    """HF's sliding_window counts the current token; SGLang's window does not."""
    kw = geometry_kwargs_from_hf_config(gemma3_mm(ENTRIES["Gemma-3-27B (text)"]))
    assert kw["sliding_window_size"] == 1023
    kw = geometry_kwargs_from_hf_config(gpt_oss(ENTRIES["gpt-oss-120b"]))
    assert kw["sliding_window_size"] == 127  # REFERENCE example 2's W
    kw = geometry_kwargs_from_hf_config(mistral(ENTRIES["Mistral-7B-v0.1"]))
    assert kw["sliding_window_size"] == 4095
    cfg = gemma3_1b(ENTRIES["Gemma-3-1B"])
    cfg["sliding_window"] = 1
    assert geometry_kwargs_from_hf_config(cfg)["sliding_window_size"] == 0


def test_mimo_v2_separate_swa_geometry() -> None:
    kw = geometry_kwargs_from_hf_config(mimo_v2_flash(ENTRIES["MiMo-V2-Flash"]))
    assert kw["full_attention_layer_ids"][:3] == [0, 5, 11]
    assert (kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"]) == (4, 192, 128)
    assert (kw["swa_num_kv_heads"], kw["swa_head_dim"], kw["swa_v_head_dim"]) == (8, 192, 128)
    # attention_chunk_size=128 is present too, but hybrid_layer_pattern decides.
    assert kw["sliding_window_size"] == 128


def test_layer_types_override_patterns() -> None:
    """Configs re-saved by newer transformers carry layer_types plus _sliding_window_pattern."""
    e = ENTRIES["Gemma-3-27B (text)"]
    cfg = gemma3_mm(e)
    n = e["num_layers"]
    cfg["text_config"]["_sliding_window_pattern"] = 6
    cfg["text_config"]["layer_types"] = [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    # An explicit list wins over the pattern.
    cfg["text_config"]["layer_types"] = ["full_attention"] * n
    assert geometry_kwargs_from_hf_config(cfg)["swa_attention_layer_ids"] == []


def test_cohere2_layer_types_form() -> None:
    e = ENTRIES["Command-R7B"]
    cfg = cohere2(e)
    del cfg["sliding_window_pattern"]
    cfg["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    # Without the key, the Cohere2 class default (4) applies.
    cfg = cohere2(e)
    del cfg["sliding_window_pattern"]
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == e["full_layer_ids"]


def test_llama4_no_rope_layers_forms() -> None:
    e = ENTRIES["Llama-4-Scout-17B-16E-Instruct (text)"]
    cfg = llama4(e)
    del cfg["text_config"]["no_rope_layers"]  # the aiconfigurator copy omits the key
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == e["full_layer_ids"]
    cfg["text_config"]["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(48)]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["swa_attention_layer_ids"] == e["swa_layer_ids"]
    cfg["text_config"]["no_rope_layers"] = [1] * 47 + [0]
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == [47]
    # Newer transformers: layer_types with chunked_attention.
    cfg["text_config"]["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(48)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    assert kw["sliding_window_size"] == 8192
    # No attention_chunk_size: no chunking, every layer global.
    cfg = llama4(e)
    cfg["text_config"]["attention_chunk_size"] = None
    kw = geometry_kwargs_from_hf_config(cfg)
    assert len(kw["full_attention_layer_ids"]) == 48 and kw["sliding_window_size"] is None


def test_qwen2_use_sliding_window_true() -> None:
    """MiMo-7B's edge case: with the switch on, layers >= max_window_layers slide."""
    cfg = mimo_7b(ENTRIES["MiMo-7B-Base"])
    cfg["use_sliding_window"] = True
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["swa_attention_layer_ids"] == [32, 33, 34, 35]
    assert kw["full_attention_layer_ids"] == list(range(32))
    assert kw["sliding_window_size"] == 32767
    del cfg["max_window_layers"]
    with pytest.raises(ConfigError, match="max_window_layers"):
        geometry_kwargs_from_hf_config(cfg)


def test_mistral_v03_null_window_is_all_full() -> None:
    cfg = mistral(ENTRIES["Mistral-7B-v0.1"])
    cfg["sliding_window"] = None
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == list(range(32))
    assert kw["swa_attention_layer_ids"] == [] and kw["sliding_window_size"] is None


def test_gemma3n_kv_shared_layers_optional() -> None:
    e = ENTRIES["Gemma-3n-E2B (text)"]
    kw = geometry_kwargs_from_hf_config(gemma3n(e), include_kv_shared_layers=True)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    assert kw["swa_attention_layer_ids"] == e["swa_layer_ids"]


def test_defaults_head_dim_and_kv_heads() -> None:
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
           "num_hidden_layers": 2}
    kw = geometry_kwargs_from_hf_config(cfg)
    assert (kw["num_kv_heads"], kw["head_dim"]) == (32, 128)
    cfg["num_key_value_heads"] = None  # null means the default too
    assert geometry_kwargs_from_hf_config(cfg)["num_kv_heads"] == 32


# --------------------------------------------------------------------------
# Drafts
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DRAFT_BUILDERS))
def test_draft_matches_table(name: str) -> None:
    e = ENTRIES[name]
    builder, kind, layers = DRAFT_BUILDERS[name]
    kw = draft_kwargs_from_hf_config(
        builder(e), kind=kind, num_layers=layers  # type: ignore[arg-type]
    )
    assert tuple(kw) == DRAFT_KEYS
    assert kw["num_layers"] == e["kv_cache_layers_full"] + e["kv_cache_layers_swa"]
    assert kw["num_layers"] == e["num_layers"]
    swa_only = not e["full_layer_ids"]
    heads = e["swa_num_kv_heads"] if swa_only else e["num_kv_heads"]
    hd = e["swa_head_dim"] if swa_only else e["head_dim"]
    vd = e["swa_v_head_dim"] if swa_only else e["v_head_dim"]
    assert (kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"] or kw["head_dim"]) == (
        heads,
        hd,
        vd,
    )
    # Without the target, capacity is left to DraftGeometry (SGLang's rule),
    # except for SWA-geometry drafts.
    assert kw["capacity"] == ("swa" if swa_only else None)
    assert kw["kv_cache_dtype"] is None
    target = e["target"] if e["target"] in TARGET_BUILDERS else None
    if target is not None:
        target_kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[target](ENTRIES[target]))
        with_target = draft_kwargs_from_hf_config(
            builder(e), target_kw, kind=kind, num_layers=layers  # type: ignore[arg-type]
        )
        assert with_target == {**kw, "capacity": "swa" if swa_only else "full"}
    per_layer = kw["num_kv_heads"] * (kw["head_dim"] + (kw["v_head_dim"] or kw["head_dim"])) * 2
    key = "kv_bytes_per_token_swa_layer_bf16" if swa_only else "kv_bytes_per_token_full_layer_bf16"
    assert per_layer == e[key]


def test_mimo_v2_mtp_depth_must_be_given() -> None:
    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    with pytest.raises(ConfigError, match="num_nextn_predict_layers"):
        draft_kwargs_from_hf_config(cfg)
    cfg["num_nextn_predict_layers"] = 3  # later mimo_v2 configs state it
    kw = draft_kwargs_from_hf_config(cfg)
    assert (kw["num_layers"], kw["num_kv_heads"], kw["capacity"]) == (3, 8, "swa")


def test_deepseek_mtp_is_mla_and_refused() -> None:
    cfg = deepseek_v3(ENTRIES["DeepSeek-V3"])
    with pytest.raises(ConfigError, match="kv_lora_rank") as info:
        draft_kwargs_from_hf_config(cfg)
    assert "num_nextn_predict_layers" in str(info.value)


def test_eagle_ignores_copied_sliding_window() -> None:
    e = ENTRIES["EAGLE3 draft for Gemma-3-1B (SpecForge template)"]
    cfg = eagle3(e)
    cfg["use_sliding_window"] = True  # even if it were on, an EAGLE head is full attention
    cfg["max_window_layers"] = 0
    target = geometry_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]))
    kw = draft_kwargs_from_hf_config(cfg, target)
    assert kw["capacity"] == "full" and kw["num_layers"] == 1
    assert (kw["num_kv_heads"], kw["head_dim"]) == (1, 256)


def test_draft_kinds_and_capacity_from_target() -> None:
    e = ENTRIES["Llama-3.2-1B (standalone draft)"]
    assert draft_kwargs_from_hf_config(llama(e), kind="eagle")["num_layers"] == 16
    mistral_kw = geometry_kwargs_from_hf_config(mistral(ENTRIES["Mistral-7B-v0.1"]))
    kw = draft_kwargs_from_hf_config(llama(e), mistral_kw)
    assert kw["capacity"] == "swa"  # an all-SWA target has no full pool
    gemma_kw = geometry_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]))
    assert draft_kwargs_from_hf_config(llama(e), gemma_kw)["capacity"] == "full"
    # A standalone draft with SWA layers: every KV layer counted at full geometry.
    kw = draft_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]), kind="standalone")
    assert (kw["num_layers"], kw["num_kv_heads"], kw["head_dim"]) == (26, 1, 256)
    with pytest.raises(ConfigError, match="kind"):
        draft_kwargs_from_hf_config(llama(e), kind="medusa")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_layers"):
        draft_kwargs_from_hf_config(llama(e), num_layers=0)


# --------------------------------------------------------------------------
# Errors and inputs
# --------------------------------------------------------------------------


def test_missing_key_is_named() -> None:
    cfg = llama(ENTRIES["Llama-3.1-8B"])
    del cfg["num_attention_heads"]
    with pytest.raises(ConfigError) as info:
        geometry_kwargs_from_hf_config(cfg)
    assert str(info.value) == "config.json: missing key 'num_attention_heads'"
    assert info.value.key == "num_attention_heads"
    assert isinstance(info.value, ValueError)


def test_nested_missing_key_is_dotted() -> None:
    cfg = llama4(ENTRIES["Llama-4-Scout-17B-16E-Instruct (text)"])
    del cfg["text_config"]["num_hidden_layers"]
    with pytest.raises(ConfigError, match=r"'text_config\.num_hidden_layers'"):
        geometry_kwargs_from_hf_config(cfg)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda c: c.update(layer_types=c["layer_types"][:-1]), "layer_types"),
        (lambda c: c["layer_types"].__setitem__(0, "linear_attention"), "linear_attention"),
        (lambda c: c.update(num_key_value_heads=0), "num_key_value_heads"),
        (lambda c: c.update(head_dim="64"), "head_dim"),
        (lambda c: c.update(sliding_window=None), "sliding_window"),
        (lambda c: c.update(num_hidden_layers=None), "num_hidden_layers"),
    ],
)
def test_bad_values_name_the_key(mutate: Callable[[Config], Any], needle: str) -> None:
    cfg = gpt_oss(ENTRIES["gpt-oss-20b"])
    mutate(cfg)
    with pytest.raises(ConfigError, match=needle):
        geometry_kwargs_from_hf_config(cfg)


def test_head_dim_not_derivable() -> None:
    cfg = {"hidden_size": 1000, "num_attention_heads": 3, "num_hidden_layers": 1}
    with pytest.raises(ConfigError, match="head_dim"):
        geometry_kwargs_from_hf_config(cfg)


def test_mismatched_duplicate_window() -> None:
    cfg = gemma2(ENTRIES["Gemma-2-9B"])
    cfg["sliding_window_size"] = 2048
    with pytest.raises(ConfigError, match="disagree"):
        geometry_kwargs_from_hf_config(cfg)


def test_paths(tmp_path: Path) -> None:
    cfg = qwen3(ENTRIES["Qwen3-8B"])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    by_dir = geometry_kwargs_from_hf_config(tmp_path)
    by_file = geometry_kwargs_from_hf_config(str(tmp_path / "config.json"))
    assert by_dir == by_file == geometry_kwargs_from_hf_config(cfg)
    assert load_hf_config(tmp_path) == cfg
    with pytest.raises(ConfigError, match="no such file"):
        geometry_kwargs_from_hf_config(tmp_path / "missing")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_hf_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_hf_config(tmp_path / "list.json")


def test_config_error_is_kvbudget_invalid_config_error() -> None:
    kvbudget = pytest.importorskip("kvbudget")
    base = getattr(kvbudget, "InvalidConfigError", None)
    if base is None:
        pytest.skip("kvbudget.InvalidConfigError not available (extension not built)")
    assert issubclass(ConfigError, base)


# --------------------------------------------------------------------------
# The parsed kwargs build real geometries (needs the extension: make develop)
# --------------------------------------------------------------------------


def _kvbudget_class(name: str) -> Any:
    kvbudget = pytest.importorskip("kvbudget")
    cls = getattr(kvbudget, name, None)
    if cls is None:
        pytest.skip(f"kvbudget.{name} not available (run `make develop`)")
    return cls


@pytest.mark.parametrize("name", sorted(TARGET_BUILDERS))
def test_parsed_target_builds_model_geometry(name: str) -> None:
    cls = _kvbudget_class("ModelGeometry")
    kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[name](ENTRIES[name]))
    geom = cls(**kw)
    assert geom is not None


@pytest.mark.parametrize("name", sorted(DRAFT_BUILDERS))
def test_parsed_draft_builds_draft_geometry(name: str) -> None:
    cls = _kvbudget_class("DraftGeometry")
    builder, kind, layers = DRAFT_BUILDERS[name]
    kw = draft_kwargs_from_hf_config(
        builder(ENTRIES[name]), kind=kind, num_layers=layers  # type: ignore[arg-type]
    )
    assert cls(**kw) is not None


# --------------------------------------------------------------------------
# One rule for a model used as a draft: hf.py, the presets and the CLI agree
# --------------------------------------------------------------------------


def _cli_standalone_draft(preset: str) -> Any:
    """The DraftGeometry `kvbudget plan PRESET --draft standalone:PRESET` plans with."""
    from kvbudget.cli.parser import build_parser
    from kvbudget.cli.scenario import build_scenario

    args = build_parser().parse_args(
        ["plan", preset, "--draft", f"standalone:{preset}", "--available", "40GiB"]
    )
    return build_scenario(args).scenario.spec.draft


def _all_swa_mimo_v2() -> Config:
    """A MiMo-V2-style config whose every layer slides: SWA heads/dims differ from the full keys."""
    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    cfg["hybrid_layer_pattern"] = [1] * cfg["num_hidden_layers"]
    return cfg


@pytest.mark.parametrize(
    ("name", "all_swa"),
    [("Mistral-7B-v0.1", True), ("Gemma-3-1B", False), ("gpt-oss-20b", False)],
)
def test_model_as_draft_is_one_rule(name: str, all_swa: bool) -> None:
    import kvbudget
    from kvbudget.models import get_preset
    from kvbudget.models.presets import _draft_kwargs

    cfg = TARGET_BUILDERS[name](ENTRIES[name])
    preset = get_preset(name)
    rule = kvbudget.DraftGeometry.from_model(preset.model_geometry())
    from_hf = kvbudget.DraftGeometry(**draft_kwargs_from_hf_config(cfg, kind="standalone"))
    from_presets_kwargs = _draft_kwargs(preset.model_kwargs)
    assert from_presets_kwargs is not None
    from_presets = kvbudget.DraftGeometry(**from_presets_kwargs)
    assert from_hf == from_presets == preset.as_draft_geometry() == _cli_standalone_draft(preset.name) == rule
    m = preset.model_geometry()
    assert rule.num_layers == m.num_layers
    if all_swa:  # before: hf gave no capacity, the CLI "full" (then refused for an all-SWA target)
        assert rule.capacity == "swa"
        assert (rule.num_kv_heads, rule.head_dim, rule.v_head_dim) == (
            m.swa_num_kv_heads, m.swa_head_dim, m.swa_v_head_dim,
        )
    else:
        assert rule.capacity is None  # SGLang's rule: the full pool's token count
        assert (rule.num_kv_heads, rule.head_dim, rule.v_head_dim) == (
            m.num_kv_heads, m.head_dim, m.v_head_dim,
        )
    # The target itself plans with its own model as a standalone draft.
    spec = kvbudget.SpeculativeConfig("standalone", rule.num_layers, draft=rule)
    plan = kvbudget.Scenario(m, kvbudget.ServingConfig(), spec).plan(40 << 30)
    draft_pool = plan.pool("draft")
    assert draft_pool is not None and draft_pool.num_layers == m.num_layers


def test_all_swa_standalone_draft_takes_the_swa_geometry() -> None:
    import kvbudget

    cfg = _all_swa_mimo_v2()
    kw = draft_kwargs_from_hf_config(cfg, kind="standalone")
    # Before: refused (SWA geometry != the full keys'); now the SWA layers' own geometry.
    assert (kw["num_layers"], kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"]) == (48, 8, 192, 128)
    assert kw["capacity"] == "swa"
    model = kvbudget.ModelGeometry(**geometry_kwargs_from_hf_config(cfg))
    assert kvbudget.DraftGeometry(**kw) == kvbudget.DraftGeometry.from_model(model)
    # A target with full layers does not override the rule's "swa".
    target = geometry_kwargs_from_hf_config(llama(ENTRIES["Llama-3.1-8B"]))
    assert draft_kwargs_from_hf_config(cfg, target, kind="standalone")["capacity"] == "swa"


def test_hybrid_with_other_swa_geometry_is_refused_everywhere() -> None:
    import kvbudget
    from kvbudget.models import get_preset

    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    with pytest.raises(ConfigError, match="SWA layers") as info:
        draft_kwargs_from_hf_config(cfg, kind="standalone")
    assert info.value.key == "swa_num_key_value_heads"
    assert "one geometry" in str(info.value)
    with pytest.raises(kvbudget.InvalidConfigError, match="one geometry"):
        get_preset("mimo-v2-flash").as_draft_geometry()
    from kvbudget.cli import main

    assert main(["plan", "mimo-v2-flash", "--draft", "standalone:mimo-v2-flash", "--available", "40GiB"]) == 2


def test_mla_standalone_draft_is_refused_naming_the_key() -> None:
    cfg = deepseek_v3(ENTRIES["DeepSeek-V3"])
    with pytest.raises(ConfigError, match="kv_lora_rank") as info:
        draft_kwargs_from_hf_config(cfg, kind="standalone")
    assert info.value.key == "kv_lora_rank"
    assert "MLA" in str(info.value)
