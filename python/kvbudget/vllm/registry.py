"""vLLM 0.33.0's model registry: which class serves each architecture.

vLLM builds an architecture with the ``(module, class)`` of its ``_TEXT_GENERATION_MODELS`` or
``_MULTIMODAL_MODELS`` table (``data/vllm_architectures.json``, generated from the pinned
wheel by ``tools/gen_vllm_archs.py``). Several names share a class: ``InternLM3ForCausalLM``,
``IQuestCoderForCausalLM``, ``LLaMAForCausalLM`` and ``TeleChat3ForCausalLM`` are vLLM's
``LlamaForCausalLM``, ``Ministral3ForCausalLM`` its ``MistralForCausalLM``, ``CohereForCausalLM``
and ``Cohere2ForCausalLM`` one ``commandr`` class. kvbudget reads a model by that class, so every
name vLLM serves with a class kvbudget reads is read: :func:`served_as`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection
from importlib import resources
from typing import Any

__all__ = ["NOT_PIPELINE_PARALLEL", "registry", "served_as", "wrapper_table"]

#: The registry's architectures whose vLLM 0.33.0 class does not implement ``SupportsPP``:
#: ``ModelConfig.verify_with_parallel_config`` refuses more than one pipeline stage for them, before
#: any model is built (the class vLLM serves the name with decides, not the text model a wrapper
#: builds). Held to the wheel's class hierarchies by ``tests/test_vllm_wrappers.py``.
NOT_PIPELINE_PARALLEL: frozenset[str] = frozenset({
    "AriaForConditionalGeneration", "DiffusionGemmaForBlockDiffusion", "Gemma3nForCausalLM",
    "Gemma3nForConditionalGeneration", "HrmTextForCausalLM", "IQuestLoopCoderForCausalLM",
    "Idefics3ForConditionalGeneration", "Mamba2ForCausalLM", "NemotronH_Nano_Omni_Reasoning_V3",
    "NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3",
    "PaddleOCRVLForConditionalGeneration", "SmolVLMForConditionalGeneration", "WhisperForConditionalGeneration",
    "Zamba2ForCausalLM",
})  # fmt: skip


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files("kvbudget.models").joinpath("data/vllm_architectures.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def registry() -> dict[str, tuple[str, str]]:
    """Architecture -> (module, class) vLLM 0.33.0 serves it with (generation tables only)."""
    tables: dict[str, dict[str, list[str]]] = _data()["tables"]
    return {arch: (where[0], where[1]) for table in tables.values() for arch, where in table.items()}


def wrapper_table() -> dict[str, dict[str, Any]]:
    """Architecture -> what its class hands ``init_vllm_registered_model`` for its text model
    (``hf_config`` and ``architectures`` as written, the prefix, and the ``__init__``'s own
    text-architecture rules), for the classes that build one that way; read by
    :mod:`kvbudget.vllm.wrappers`."""
    table: dict[str, dict[str, Any]] = _data()["wrappers"]
    return table


def served_as(arch: str, known: Collection[str]) -> str:
    """``arch`` itself if ``known`` holds it, else the first of ``known`` (sorted) that vLLM serves
    with the same class, else ``arch``."""
    if arch in known:
        return arch
    where = registry().get(arch)
    return next((k for k in sorted(known) if where is not None and registry().get(k) == where), arch)
