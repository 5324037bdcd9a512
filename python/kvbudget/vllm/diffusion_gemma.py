"""vLLM 0.33.0's DiffusionGemma: Gemma 4's decoder built directly by the block-diffusion wrapper.

``models/diffusion_gemma.py``: the registry serves ``DiffusionGemmaForBlockDiffusion`` with
``DiffusionGemmaForConditionalGeneration``, whose ``__init__`` takes ``hf_text_config`` (the
config's ``text_config``, which transformers 5.19.0's ``DiffusionGemmaConfig`` loads with its
``DiffusionGemmaTextConfig`` whatever the dict's ``model_type``), sets
``text_config.attention_k_eq_v = True`` (its full layers ship no ``v_proj``) and builds
``Gemma4Model(vllm_config, prefix="model")`` itself (no ``init_vllm_registered_model``): the layers
are Gemma 4's, ``model.layers.<i>.self_attn.attn``, read by :mod:`kvbudget.vllm.text_families`.

The forced flag changes no KV geometry: vLLM's Gemma 4 attention takes each layer's head size and
KV heads from ``per_layer_config``, which the text class computed when it loaded, and
``DiffusionGemmaTextConfig`` (which declares no ``attention_k_eq_v``) applies
``num_global_key_value_heads`` to its full layers ungated, as Gemma 4's class does only under
``attention_k_eq_v``: kvbudget hands Gemma 4's reader the text config with the flag set, which is
that rule. The class's ``use_bidirectional_attention: "all"`` halves the window it loads (``// 2 +
1``) and its last layer is full, as Gemma 4's. The wrapper class does not implement ``SupportsPP``
(:data:`kvbudget.vllm.registry.NOT_PIPELINE_PARALLEL`: vLLM refuses more than one stage); the vision
tower, LM head and self-conditioning block own no KV.

Held to vLLM's classes by ``tests/test_vllm_diffusion_gemma.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.text_families import text_family_layers

__all__ = ["DIFFUSION_GEMMA", "diffusion_gemma_layers"]

#: The registry name vLLM 0.33.0 serves with ``DiffusionGemmaForConditionalGeneration``.
DIFFUSION_GEMMA: Final = "DiffusionGemmaForBlockDiffusion"


def diffusion_gemma_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                           disable_sliding_window: bool, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The attention layers vLLM 0.33.0 registers for a DiffusionGemma config, in order.

    Raises:
        ConfigError: a config vLLM (or transformers' class loading it) refuses, or no text config.
    """
    text = cfg.get("text_config", {})  # DiffusionGemmaConfig: the text class's defaults without one
    if not isinstance(text, Mapping):
        raise ConfigError(f"{label}: key 'text_config' must be an object", "text_config")
    gemma4 = {**text, "model_type": "diffusion_gemma_text", "architectures": ["Gemma4ForCausalLM"],
              "attention_k_eq_v": True}  # fmt: skip
    return text_family_layers(gemma4, engine, kv_cache_dtype, model_dtype, disable_sliding_window,
                              f"{label} (text_config)")  # fmt: skip
