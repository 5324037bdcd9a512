"""vLLM 0.33.0's Kimi-K3 (``KimiK3ForConditionalGeneration``): Kimi-Linear's text model in a wrapper.

The class (``vllm/models/kimi_k3``, its NVIDIA ``model.py``; implements ``SupportsPP``) builds its
text model with ``init_vllm_registered_model(vllm_config=vllm_config, hf_config=config.text_config,
prefix="language_model", architectures=["KimiLinearForCausalLM"])``, and its state classmethods are
``KimiLinearForCausalLM``'s on ``vllm_config.with_hf_config(text_config)``. Its config is vLLM's own
``KimiK3Config`` (``transformers_utils/configs/kimi_k3.py``, registered for ``kimi_k3``), which loads
``text_config`` with vLLM's ``KimiLinearConfig`` (whatever the dict's ``model_type``), or that class's
defaults when absent. So the layers are :mod:`kvbudget.vllm.state_models`' Kimi-Linear reading of the
text config, under ``language_model.model.layers``: KDA where ``linear_attn_config.kda_layers`` names
a layer, else Kimi's MLA, which vLLM asserts is NoPE-only (``mla_use_nope``: the config class's
defaults are refused so, after its asserts on the MLA dims).

Not read (refused): Kimi-K3's own full-rank-gate KDA (``linear_attn_config.use_full_rank_gate``:
``KimiK3DeltaAttention``, whose spec adds KDA prefill checkpoints), drafters and ``--use-replayssm``.
Its config hook (``KimiK3ForConditionalGenerationConfig``) rewrites only an MXFP4 quantisation method.

Held to vLLM's classes by ``tests/test_vllm_kimi_k3.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_models import state_layers_from_hf_config

__all__ = ["KIMI_K3", "kimi_k3_layers"]

KIMI_K3: Final = "KimiK3ForConditionalGeneration"


def kimi_k3_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                   mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Kimi-K3 config (see the module doc).

    Raises:
        ConfigError: a drafter or ``--use-replayssm`` (unchecked), or what the Kimi-Linear reading of
            the text config refuses (vLLM's asserts, the full-rank-gate KDA).
    """
    if engine.speculative_method is not None or engine.use_replayssm:
        what = "drafters" if engine.speculative_method is not None else "--use-replayssm"
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's {what} on {KIMI_K3}", "architectures")
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise ConfigError("config.json: key 'text_config' must be an object", "text_config")
    # KimiLinearConfig(**text_config) (its class defaults where absent), built as the fixed class
    inner = {**(text or {}), "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"]}
    layers = state_layers_from_hf_config(inner, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                         mamba_cache_dtype=mamba_cache_dtype,
                                         mamba_ssm_cache_dtype=mamba_ssm_cache_dtype)  # fmt: skip
    return [replace(x, name="language_model." + x.name) for x in layers]
