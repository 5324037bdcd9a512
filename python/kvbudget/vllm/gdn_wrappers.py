"""vLLM 0.33.0's multimodal classes that build a Qwen3.5 gated-delta-net text model themselves.

``MiniCPMV4_6ForConditionalGeneration`` (``models/minicpmv4_6.py``) and
``MiniCPMV4_7ForConditionalGeneration`` (``models/minicpmv4_7.py``, a subclass whose ``__init__`` adds
only M-RoPE settings) do not go through ``init_vllm_registered_model``
(:mod:`kvbudget.vllm.wrappers`): their ``__init__`` builds ``Qwen3_5ForCausalLM(vllm_config=vllm_config,
prefix="language_model")`` on the wrapper's own ``VllmConfig`` (with the outer ``model_type`` set to
``qwen3_5_text`` around the call, which no KV layer reads). So:

* **The text config** is ``hf_text_config``, transformers 5.19.0's ``MiniCPMV4_6Config`` /
  ``MiniCPMV4_7Config`` ``text_config``: built as ``CONFIG_MAPPING[text_config["model_type"]]`` (a
  text config without ``model_type``, or of a type transformers does not know, fails to load), or
  ``Qwen3_5TextConfig()`` when absent. ``Qwen3_5DecoderLayer`` builds its MLP by that type and raises
  ``ValueError: Invalid model_type`` for any but ``qwen3_5_text`` and ``qwen3_5_moe_text`` (and the
  gated delta net reads keys only those carry): kvbudget refuses the others.
* **The layers** are ``Qwen3_5Model``'s (:mod:`kvbudget.vllm.state_models`), at
  ``language_model.model.layers.<i>``: gated delta nets at ``.linear_attn``, attention at
  ``.self_attn.attn``, split over PP stages (the class implements ``SupportsPP``).
* **The state** is the wrapper's own ``get_mamba_state_shape_from_config`` /
  ``get_mamba_state_dtype_from_config`` (Qwen3.5's, over ``hf_text_config``), but
  ``MODELS_CONFIG_MAP`` (``models/config.py``) has no entry for either name: the text config's
  ``mamba_ssm_dtype`` does not replace an ``auto`` SSM dtype as Qwen3.5's own hook does.
* Drafters on these classes (``SupportsEagle3``; its checkpoint's ``mtp.`` weights are dropped)
  are refused as unchecked, and ``--use-replayssm`` as vLLM refuses it (not ``SupportsReplaySSM``).

Intern-S2-Mobius (``InternS2MobiusForConditionalGeneration``) builds Qwen3.5's layers in its own
classes on a config vLLM loads from the checkpoint's code: after the two refusals above it is read
by :mod:`kvbudget.vllm.interns2_mobius`.

Held to vLLM's classes by ``tests/test_vllm_minicpmv.py`` (and ``tests/test_vllm_interns2_mobius.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.interns2_mobius import ARCH as MOBIUS
from kvbudget.vllm.interns2_mobius import interns2_mobius_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_models import state_layers_from_hf_config

__all__ = ["GDN_WRAPPERS", "gdn_wrapper_layers"]

#: The registered names -> the layer-name prefix of their text model's layers.
GDN_WRAPPERS: Final[Mapping[str, str]] = {
    "MiniCPMV4_6ForConditionalGeneration": "language_model.model.layers",
    "MiniCPMV4_7ForConditionalGeneration": "language_model.model.layers",
    MOBIUS: "language_model.model.layers",
}
#: The text ``model_type`` -> the Qwen3.5 class kvbudget reads it as (the same model either way).
_TEXT_TYPES: Final[Mapping[str, str]] = {"qwen3_5_text": "Qwen3_5ForCausalLM",
                                         "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM"}  # fmt: skip


def _text_config(cfg: Mapping[str, Any], arch: str) -> dict[str, Any]:
    """The text config as the wrapper's transformers class builds it (see the module doc)."""
    text = cfg.get("text_config")
    if text is None:
        return {"model_type": "qwen3_5_text"}  # Qwen3_5TextConfig()'s defaults
    if not isinstance(text, Mapping):
        raise ConfigError("config.json: key 'text_config' must be an object", "text_config")
    model_type = text.get("model_type")
    if not isinstance(model_type, str):
        raise ConfigError(f"config.json: transformers 5.19.0's {arch.removesuffix('ForConditionalGeneration')}"
                          "Config refuses it: KeyError 'model_type' (it builds text_config as "
                          "CONFIG_MAPPING[text_config['model_type']])", "text_config.model_type")  # fmt: skip
    if model_type not in _TEXT_TYPES:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Invalid model_type {model_type} ({arch} builds "
                          "Qwen3_5ForCausalLM, whose decoder layers take qwen3_5_text or qwen3_5_moe_text)",
                          "text_config.model_type")  # fmt: skip
    return dict(text)


def gdn_wrapper_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                       mamba_cache_dtype: str, mamba_ssm_cache_dtype: str,
                       gdn_prefill_backend: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a MiniCPM-V 4.6 / 4.7 or Intern-S2-Mobius config (see the module doc).

    Raises:
        ConfigError: a drafter or ``--use-replayssm``, a text config vLLM does not build, or what
            :func:`~kvbudget.vllm.state_models.state_layers_from_hf_config` refuses of its text model.
    """
    arch = cfg["architectures"][0]
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch}", "architectures")
    if engine.use_replayssm:
        raise ConfigError(f"vLLM 0.33.0 refuses it: --use-replayssm is not supported for architecture {arch!r}",
                          "use_replayssm")  # fmt: skip
    if arch == MOBIUS:
        return interns2_mobius_layers(cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                      mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                                      gdn_prefill_backend=gdn_prefill_backend)  # fmt: skip
    text = _text_config(cfg, arch)
    text.pop("mamba_ssm_dtype", None)  # no config hook reads it for these names
    text["architectures"] = [_TEXT_TYPES[text["model_type"]]]
    layers = state_layers_from_hf_config(text, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                         mamba_cache_dtype=mamba_cache_dtype,
                                         mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                                         gdn_prefill_backend=gdn_prefill_backend)  # fmt: skip
    prefix = GDN_WRAPPERS[arch]
    return [replace(x, name=prefix + x.name.removeprefix("model.layers")) for x in layers]
