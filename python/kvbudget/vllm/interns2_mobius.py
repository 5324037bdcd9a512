"""vLLM 0.33.0's reading of Intern-S2-Mobius (``InternS2MobiusForConditionalGeneration``).

``models/interns2_mobius.py``: the wrapper's ``__init__`` builds ``InternS2MobiusForCausalLM``
(prefix ``language_model``), whose ``InternS2MobiusModel`` (at ``language_model.model``) reads
``hf_text_config``. Neither vLLM nor transformers 5.19.0 has a config class for ``interns2_mobius``:
vLLM loads the checkpoint's own config code (``trust_remote_code``), for which kvbudget reads SGLang
0.5.23's ``InternS2MobiusConfig`` / ``InternS2MobiusTextConfig`` (``sglang/srt/configs/interns2_mobius.py``,
on SGLang's ``Qwen3NextConfig``) as its stand-in. So:

* **The text config** is ``text_config`` (``InternS2MobiusTextConfig()``'s defaults when absent):
  SGLang's ``Qwen3NextConfig`` defaults (48 layers, 16 heads, 2 KV heads, ``head_dim`` 256, gated
  delta nets of 16 key / 32 value heads of 128, a conv kernel of 4, 512 experts) and ``num_blocks``
  4. It keeps ``layer_types`` only when the config gives one, verbatim (no interval, no legacy
  names): without one ``InternS2MobiusModel`` fails on ``config.layer_types`` (AttributeError).
* **The layers** (``InternS2MobiusDecoderLayer``, any text ``model_type``): ``layer_types[i]`` for
  each of ``num_hidden_layers`` layers, a ``QwenGatedDeltaNetAttention`` at
  ``language_model.model.layers.<i>.linear_attn`` or a ``Qwen3NextAttention`` at
  ``.self_attn.attn`` (any other kind: ``ValueError: Invalid layer_type``; a list too short:
  IndexError); the heads per rank and asserts are Qwen3.5's (:mod:`kvbudget.vllm.state_models`),
  split over PP stages (the class is ``SupportsPP`` through Qwen3-VL).
* **The shared MoE banks**: ``num_blocks`` ``InternS2MobiusMetaMoeBlock`` (built before the
  layers; each raises when TP exceeds ``num_experts``); none at all is the wrapper's
  ``RuntimeError`` (``set_moe_parameters``: at least one MoE bank).
* **The state** is ``Qwen3_5ForConditionalGeneration``'s ``get_mamba_state_shape_from_config`` /
  ``get_mamba_state_dtype_from_config`` (inherited through ``InternS2PreviewForConditionalGeneration``
  and ``Qwen3_5MoeForConditionalGeneration``), over ``hf_text_config``; ``MODELS_CONFIG_MAP``
  (``models/config.py``) names no hook for this architecture, so a ``mamba_ssm_dtype`` does not
  replace an ``auto`` SSM dtype.
* Drafters (``SupportsEagle`` / ``SupportsEagle3``, and the registered ``InternS2MobiusMTP``) are
  refused as unchecked, and ``--use-replayssm`` as vLLM refuses it (not ``SupportsReplaySSM``), by
  :func:`kvbudget.vllm.gdn_wrappers.gdn_wrapper_layers`, which calls this module.

Held to vLLM's classes by ``tests/test_vllm_interns2_mobius.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_models import state_layers_from_hf_config

__all__ = ["ARCH", "interns2_mobius_layers"]

ARCH: Final = "InternS2MobiusForConditionalGeneration"
#: SGLang 0.5.23's ``Qwen3NextConfig`` defaults of the keys vLLM's layers read, and
#: ``InternS2MobiusTextConfig``'s ``num_blocks``.
_DEFAULTS: Final[Mapping[str, Any]] = {
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "hidden_size": 2048, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "num_experts": 512, "num_blocks": 4,
}  # fmt: skip
_KINDS: Final = frozenset({"linear_attention", "full_attention"})
_REFUSES: Final = "config.json: vLLM 0.33.0 refuses it:"


def _int(text: Mapping[str, Any], key: str) -> int:
    value = text.get(key, _DEFAULTS[key])
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"config.json: text_config.{key} must be an integer (got {value!r})", f"text_config.{key}")
    return value


def _kinds(text: Mapping[str, Any], n: int) -> list[str]:
    """``config.layer_types[i]`` for each layer, as ``InternS2MobiusModel`` reads them."""
    kinds = text.get("layer_types")
    if kinds is None:
        raise ConfigError(f"{_REFUSES} AttributeError: no layer_types (the stand-in InternS2MobiusTextConfig keeps "
                          "them only when given; InternS2MobiusModel reads config.layer_types)",
                          "text_config.layer_types")  # fmt: skip
    if not isinstance(kinds, list):
        raise ConfigError("config.json: text_config.layer_types must be a list", "text_config.layer_types")
    if len(kinds) < n:
        raise ConfigError(f"{_REFUSES} IndexError: layer_types names {len(kinds)} kinds for {n} layers",
                          "text_config.layer_types")  # fmt: skip
    bad = next((k for k in kinds[:n] if k not in _KINDS), None)
    if bad is not None:
        raise ConfigError(f"{_REFUSES} Invalid layer_type {bad}", "text_config.layer_types")
    return [str(k) for k in kinds[:n]]


def interns2_mobius_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                           mamba_cache_dtype: str, mamba_ssm_cache_dtype: str,
                           gdn_prefill_backend: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for an Intern-S2-Mobius config (see the module doc); the
    caller has refused drafters and ``--use-replayssm``.

    Raises:
        ConfigError: no ``layer_types`` or one vLLM refuses, no MoE bank, TP over the experts, or
            what :func:`~kvbudget.vllm.state_models.state_layers_from_hf_config` refuses of the
            Qwen3.5 layers (heads that do not shard, a key missing or invalid).
    """
    text = cfg.get("text_config")
    if text is None:
        text = {}  # InternS2MobiusTextConfig()'s defaults
    if not isinstance(text, Mapping):
        raise ConfigError("config.json: key 'text_config' must be an object", "text_config")
    blocks, experts = _int(text, "num_blocks"), _int(text, "num_experts")
    if engine.tp > experts and blocks > 0:
        raise ConfigError(f"{_REFUSES} Tensor parallel size {engine.tp} is greater than the number of experts "
                          f"{experts}", "text_config.num_experts")  # fmt: skip
    n = _int(text, "num_hidden_layers")
    kinds = _kinds(text, n)
    if blocks < 1:
        raise ConfigError(f"{_REFUSES} RuntimeError: Intern-S2-Mobius requires at least one MoE bank "
                          f"(num_blocks={blocks})", "text_config.num_blocks")  # fmt: skip
    qwen = {**_DEFAULTS, **{k: v for k, v in text.items() if k in _DEFAULTS}, "layer_types": kinds,
            "model_type": "qwen3_5_moe_text", "architectures": ["Qwen3_5MoeForCausalLM"]}  # fmt: skip
    layers = state_layers_from_hf_config(qwen, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                         mamba_cache_dtype=mamba_cache_dtype,
                                         mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                                         gdn_prefill_backend=gdn_prefill_backend)  # fmt: skip
    return [replace(x, name="language_model." + x.name) for x in layers]
