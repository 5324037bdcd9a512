"""vLLM 0.33.0's multimodal wrappers: the text model a ``...ForConditionalGeneration`` builds.

Many of vLLM's multimodal classes (LLaVA and its successors, Mistral 3, PaliGemma, BLIP-2,
InternVL, Qwen2-VL, Voxtral, ...) own no KV cache of their own: their ``__init__`` hands a text
config to ``init_vllm_registered_model``, which builds whichever registered class that config
names, under the prefix the wrapper gives. What each class hands over is read from the wheel
(``data/vllm_architectures.json``, ``wrappers``; ``tools/gen_vllm_archs.py`` takes only a single
call of the plain forms below):

* ``hf_config``: ``config.text_config`` (or ``config.get_text_config()``), the thinker's
  ``config.thinker_config.text_config`` (:mod:`kvbudget.vllm.thinkers`), else the model's own
  config;
* ``architectures``: a fixed list (Qwen2-VL's ``["Qwen2ForCausalLM"]``; GLM-4.1V's by its own
  ``model_type``), else the text config's own ``architectures``; where those are unset,
  ``VllmConfig.with_hf_config`` names the class transformers maps the text ``model_type`` to
  (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``);
* a class built directly on ``vllm_config.with_hf_config(...)`` (Qwen3-VL's
  ``Qwen3LLMForCausalLM``) is taken where it subclasses the class vLLM serves the named
  architectures with, and read as that class;
* before the call, the ``__init__``'s own rules by text ``model_type``: LLaVA's Pixtral case
  (``mistral`` without architectures is ``MistralForCausalLM``), PaliGemma's Gemma / Gemma 2.

:func:`unwrap` gives the text config to read and the prefix its layer names take; the reading
is then the text model's own (``tests/test_vllm_wrappers.py`` holds it to vLLM's classes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import CAUSAL_LM_NAMES, ConfigError, text_config_of
from kvbudget.vllm.bare_text_models import BARE, bare_text_model, check_built_class
from kvbudget.vllm.merged_text_configs import MERGED, merged_text_config
from kvbudget.vllm.registry import wrapper_table
from kvbudget.vllm.thinkers import THINKER as _THINKER
from kvbudget.vllm.thinkers import thinker_text_config

__all__ = ["CONFIG_ATTRS_MAPPING", "WRAPPERS", "remap_config_attrs", "unwrap"]

#: The architectures whose vLLM class builds its text model with ``init_vllm_registered_model``
#: (in the pinned model files), with what it hands over.
WRAPPERS: Final[dict[str, dict[str, Any]]] = wrapper_table()
#: ``_CONFIG_ATTRS_MAPPING``: the attributes ``get_config`` copies to another name after loading
#: (``_maybe_remap_hf_config_attrs``, where the config lacks the new one): InternVL's ``llm_config``.
CONFIG_ATTRS_MAPPING: Final[dict[str, str]] = {"llm_config": "text_config"}


def remap_config_attrs(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """``cfg`` as vLLM 0.33.0's ``get_config`` leaves it: each attribute of
    :data:`CONFIG_ATTRS_MAPPING` also under its new name where that is absent."""
    extra = {new: cfg[old] for old, new in CONFIG_ATTRS_MAPPING.items() if old in cfg and new not in cfg}
    return {**cfg, **extra} if extra else cfg


def unwrap(cfg: Mapping[str, Any], label: str = "config.json") -> tuple[dict[str, Any], str] | None:
    """``(text config with the architectures vLLM builds it as, layer-name prefix)`` for a
    wrapper's config, or None when ``cfg`` names no wrapper.

    Raises:
        ConfigError: the wrapper's text config is missing or names no class vLLM would build.
    """
    cfg = remap_config_attrs(cfg)
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch in BARE:  # Idefics3, SmolVLM: vLLM's LlamaModel built directly (kvbudget.vllm.bare_text_models)
        return bare_text_model(cfg, arch, label)
    if arch in MERGED:  # PaddleOCR-VL: its text config merged into its own (kvbudget.vllm.merged_text_configs)
        return merged_text_config(cfg, arch, label)
    w = WRAPPERS.get(arch or "")
    if w is None:
        return None
    if w["hf_config"] is None and not isinstance(w["architectures"], (list, dict)):
        raise ConfigError(f"{label}: kvbudget reads no vLLM wrapper that builds its own config as itself ({arch})",
                          "architectures")  # fmt: skip
    if w["hf_config"] is None:  # the model's own config, built as the named class
        text: dict[str, Any] = dict(cfg)
        model_type = cfg.get("model_type")
    elif w["hf_config"] == _THINKER:  # Qwen2.5-Omni, Qwen3-Omni, Qwen3-ASR: the thinker's text model
        text = thinker_text_config(cfg, arch or "", label)
        model_type = text["model_type"]
    else:
        inner = text_config_of(cfg)
        if inner is None:
            raise ConfigError(f"{label}: vLLM 0.33.0 builds {arch}'s text model from text_config, which this "
                              "config lacks (its config class would fill it in)", "text_config")  # fmt: skip
        text = dict(inner)
        model_type = text.get("model_type")
    given = text.get("architectures") or None
    overrides = w.get("text_overrides") or {}
    if overrides and w["hf_config"] is not None:
        given = overrides.get(str(model_type), overrides.get("*"))
    defaults = w.get("text_defaults") or {}
    if given is None and str(model_type) in defaults:
        given = defaults[str(model_type)]
    fixed = w["architectures"]
    if isinstance(fixed, dict):  # named by the wrapper's own model type (GLM-4.1V / 4.5V)
        table = fixed["by_model_type"]
        fixed = table.get(str(cfg.get("model_type")), table.get("*"))
    named = fixed if isinstance(fixed, list) else given
    if named is None:  # VllmConfig.with_hf_config: transformers' causal-LM class for the model type
        name = CAUSAL_LM_NAMES.get(str(model_type))
        if name is None:
            raise ConfigError(f"{label}: kvbudget does not know which class vLLM 0.33.0 builds {arch}'s text model "
                              f"with: its text config names no architectures, and transformers 5.19.0 maps model_type "
                              f"{model_type!r} to no causal-LM class (vLLM's own config class may name one)",
                              "text_config.architectures")  # fmt: skip
        named = [name]
    text["architectures"] = list(named)
    check_built_class(arch or "", text, label)  # Granite 4 Vision's Granite class reads Granite's keys
    return text, str(w["prefix"])
