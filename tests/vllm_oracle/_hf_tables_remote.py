"""The model-reading oracle's tables for remote-code decoders (:mod:`._hf_tables`, which imports
this module at its end; ``tests/test_vllm_remote_code.py``): restated glue, as there."""

from __future__ import annotations

from typing import Any

import torch

from oracle_kit.strict import StrictModule

from ._hf_tables import ENTRY, MODELS, NAMESPACES

# Remote-code decoders (tests/test_vllm_remote_code.py; their configs are the checkpoint's own class,
# stood in by tests/oracle_kit/remote_code.py, or SGLang's ExaoneConfig for EXAONE 3): InternLM2, Orion,
# Solar, MiniCPM, EXAONE 3, Nemotron-NAS and Ling / Bailing MoE,
# each one Attention per layer under its own name. MLP / MoE blocks, norms and embeddings are inert (no KV).
ENTRY.update({
    ("internlm2", "InternLM2ForCausalLM"): ("InternLM2Model", None, "model", False),
    ("orion", "OrionForCausalLM"): ("OrionModel", None, "model", False),
    ("solar", "SolarForCausalLM"): ("SolarModel", None, "model", False),
    ("minicpm", "MiniCPMForCausalLM"): ("MiniCPMModel", None, "model", False),
    ("bailing_moe", "BailingMoeForCausalLM"): ("BailingMoeModel", None, "model", False),
    ("bailing_moe", "BailingMoeV2ForCausalLM"): ("BailingMoeModel", None, "model", False),
    # Sarvam-MoE: vLLM's Bailing MoE class with its own weight loading only
    ("sarvam", "SarvamMoEForCausalLM"): ("bailing_moe:BailingMoeModel", None, "model", False),
    ("exaone", "ExaoneForCausalLM"): ("ExaoneModel", None, "model", False),
    ("nemotron_nas", "DeciLMForCausalLM"): ("DeciModel", None, "model", False),
    ("iquest_loopcoder", "IQuestLoopCoderForCausalLM"): ("IQuestLoopCoderModel", None, "model", False),
    ("step1", "Step1ForCausalLM"): ("StepDecoderModel", None, "model", False),
    ("sarvam", "SarvamMLAForCausalLM"): ("SarvamMLAModel", None, "model", False),
})  # fmt: skip
MODELS.update({
    "internlm2": (["InternLM2Attention", "InternLMDecoderLayer", "InternLM2Model"], "InternLM2MLP", {}),
    "orion": (["OrionAttention", "OrionDecoderLayer", "OrionModel"], "OrionMLP", {}),
    "solar": (["SolarAttention", "SolarDecoderLayer", "SolarModel"], "SolarMLP", {}),
    "bailing_moe": (["BailingAttention", "BailingMoeBlock", "BailingMoeModel"], "BailingMLP BailingMoE", {}),
    "exaone": (["ExaoneAttention", "ExaoneBlockAttention", "ExaoneDecoderLayer", "ExaoneModel"], "ExaoneGatedMLP", {}),
    # Nemotron-NAS: vLLM's Llama attention per block, its KV heads the block's, no-op blocks none
    "nemotron_nas": (["_ffn_mult_to_intermediate_size", "_find_multiple", ("DeciLMAttention", "_init_rotary_emb"),
                      "DeciLMDecoderLayer", "DeciModel"], "",
                     {"LlamaAttention": "llama", "LlamaMLP": "llama"}),
    # IQuest-Coder-Loop: one Attention per loop in each layer, the later loops' on a windowed CacheConfig
    "iquest_loopcoder": (["LoopCoderAttention", "LoopCoderDecoderLayer", "IQuestLoopCoderModel"],
                         "LoopGateProjection", {"LlamaMLP": "llama"}),
    # Step1: ALiBi attention (its slopes computed, as the class does) over num_attention_groups KV heads
    # Sarvam-MLA: DeepSeek-style latent attention through MultiHeadLatentAttentionWrapper
    "sarvam": (["SarvamMLAAttention", "SarvamMLABlock", "SarvamMLAModel"], "SarvamMLAMLP SarvamMLAMoE", {}),
    "step1": (["_get_step_alibi_slopes", "StepAttention", "StepDecoderLayer", "StepDecoderModel"], "StepMLP", {}),
})  # fmt: skip


def _replaced(record: Any, **changes: Any) -> Any:
    """Restated ``dataclasses.replace`` over the oracle's strict config records: a new record of the
    same fields, ``changes`` over them (a field the record lacks fails loudly)."""
    fields = {f: record.__dict__[f] for f in record._fields}
    missing = set(changes) - set(fields)
    if missing:
        raise TypeError(f"replace: {type(record).__name__} has no field {sorted(missing)}")
    return type(record)(**{**fields, **changes})


NAMESPACES["iquest_loopcoder"] = {"replace": _replaced}
# its `import math` and the torch calls _get_step_alibi_slopes makes (real torch for those names only)
NAMESPACES["step1"] = {"math": __import__("math"), "torch": StrictModule("torch", {
    n: getattr(torch, n) for n in ("tensor", "pow", "arange", "cat", "float32", "int32")})}
