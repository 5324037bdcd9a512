"""vLLM 0.33.0's wrappers that build a bare text *model* class themselves: Idefics3, SmolVLM, Aria.

``models/idefics3.py``: ``Idefics3ForConditionalGeneration.__init__`` builds ``Idefics3Model``
under ``model``, whose ``__init__`` builds ``LlamaModel(vllm_config=
vllm_config.with_hf_config(config.text_config), prefix=maybe_prefix(prefix, "text_model"))``:
not through ``init_vllm_registered_model``, so whatever its text config's ``model_type`` or
``architectures`` say, the decoder is vLLM's ``LlamaModel`` (``with_hf_config`` is given no
architectures: the text config keeps its own, unread), and its layers are named
``model.text_model.layers.<i>.self_attn.attn`` (no ``...ForCausalLM`` level in between).
``models/smolvlm.py``: ``SmolVLMForConditionalGeneration`` is an ``Idefics3ForConditionalGeneration``
whose ``__init__`` only calls its base's.

``models/aria.py``: Aria builds ``AriaTextModel`` (vLLM's ``LlamaModel`` with a decoder layer
whose MLP is a mixture of experts: the attention is Llama's) on
``with_hf_config(config.text_config)`` under ``language_model.model``; transformers'
``AriaConfig`` loads a text config that names a ``model_type`` with its ``AriaTextConfig``.

``models/granite4_vision.py``: Granite 4 Vision builds its own ``Granite4VisionLLMForCausalLM`` (a
``GraniteForCausalLM`` over vLLM's ``GraniteModel``) on ``with_hf_config(config.text_config)``
(read from the wheel by ``tools/gen_vllm_archs.py``); vLLM's Granite decoder reads
``config.residual_multiplier`` and ``config.attention_multiplier`` unguarded, so a text config
whose class sets neither (transformers' default Llama text config of ``Granite4VisionConfig``)
fails to build: :func:`check_built_class` refuses it with vLLM's reason.

Held to vLLM's classes by ``tests/test_vllm_bare_text_models.py`` (the oracle enters
``Idefics3Model``, lifted, under ``model``; Granite 4 Vision's class is lifted and built).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, text_config_of

__all__ = ["BARE", "BUILT_CLASS_KEYS", "NO_WINDOW_ATTRIBUTE", "bare_text_model", "check_built_class", "check_window",
           "layer_name"]

#: Wrapper architecture -> (the architecture whose reading is the bare model's: the class vLLM
#: serves it with builds that very model class; the prefix the bare model's layers take; the
#: model type of the text class the wrapper's config class loads its text config with, where it
#: fixes one).
BARE: Final[dict[str, tuple[str, str, str | None]]] = {
    "Idefics3ForConditionalGeneration": ("LlamaForCausalLM", "model.text_model", None),
    "SmolVLMForConditionalGeneration": ("LlamaForCausalLM", "model.text_model", None),
    "AriaForConditionalGeneration": ("LlamaForCausalLM", "language_model.model", "aria_text"),
}


def bare_text_model(cfg: Mapping[str, Any], arch: str, label: str = "config.json") -> tuple[dict[str, Any], str]:
    """``(text config named as the class whose model vLLM builds, layer-name prefix)``.

    Raises:
        ConfigError: the config has no ``text_config``.
    """
    named, prefix, text_type = BARE[arch]
    inner = text_config_of(cfg)
    if inner is None:
        raise ConfigError(f"{label}: vLLM 0.33.0 builds {arch}'s text model from text_config, which this "
                          "config lacks (its config class would fill it in)", "text_config")  # fmt: skip
    if text_type is None:
        if inner.get("model_type") not in _LLAMA_TEXT_TYPES:
            raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's {arch} on a text config of model_type "
                              f"{inner.get('model_type')!r} (its class derives keys vLLM's LlamaModel reads; "
                              f"read: {sorted(_LLAMA_TEXT_TYPES)})", "text_config.model_type")  # fmt: skip
        return {**inner, "architectures": [named]}, prefix
    if "model_type" not in inner:  # AriaConfig keeps such a text config a plain dict
        raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's {arch} with a text_config that names "
                          "no model_type (its config class leaves it unloaded)", "text_config.model_type")  # fmt: skip
    return {**inner, "model_type": text_type, "architectures": [named]}, prefix


#: The text model types read inside Idefics3 / SmolVLM (whose config class loads any type): the
#: Llama ones, whose classes derive no layer types (a Qwen2 class derives them from
#: ``use_sliding_window``, which vLLM's ``LlamaModel`` then reads).
_LLAMA_TEXT_TYPES: Final = frozenset({"llama", "mistral"})
#: Text config classes (transformers 5.19.0) that define no ``sliding_window`` attribute (checked
#: against the classes by ``tests/test_vllm_bare_text_models.py``).
NO_WINDOW_ATTRIBUTE: Final = frozenset({"llama", "aria_text", "paddleocr_vl_text"})


def check_window(arch: str, text: Mapping[str, Any], disable_sliding_window: bool, label: str = "config.json") -> None:
    """Refuse, as vLLM fails, a bare or merged text model (:data:`BARE`, PaddleOCR-VL's) whose
    ``layer_types`` name a sliding layer while its config has no ``sliding_window`` (vLLM's Llama
    attention reads ``config.sliding_window`` for it; ``--disable-sliding-window`` sets the text
    config's to None first, so that run builds).

    Raises:
        ConfigError: vLLM's ``AttributeError``.
    """
    from kvbudget.vllm.merged_text_configs import MERGED

    types = text.get("layer_types")
    if (arch in BARE or arch in MERGED) and not disable_sliding_window and isinstance(types, list) and (
            "sliding_attention" in types and "sliding_window" not in text
            and text.get("model_type") in NO_WINDOW_ATTRIBUTE):  # fmt: skip
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: {arch}'s text config (model_type "
                          f"{text.get('model_type')!r}) has no attribute 'sliding_window' (its Llama attention reads "
                          "it for a sliding layer)", "text_config.sliding_window")  # fmt: skip


def layer_name(arch: str, prefix: str, name: str) -> str:
    """A text layer's name under the wrapper: the bare model's (its ``...ForCausalLM``'s name less
    the leading ``model.``) under ``prefix`` for :data:`BARE`, else the whole name under it."""
    return f"{prefix}.{name.removeprefix('model.')}" if arch in BARE else f"{prefix}.{name}"


#: Wrapper architecture -> (the text model types whose transformers 5.19.0 class sets the keys,
#: the keys the class vLLM builds reads without a default, in the order it reads them).
BUILT_CLASS_KEYS: Final[dict[str, tuple[frozenset[str], tuple[str, ...]]]] = {
    "Granite4VisionForConditionalGeneration": (frozenset(
        "granite granite4_vision_text granite_swa granitemoe granitemoe_swa granitemoehybrid granitemoeshared "
        "hyperclovax".split()), ("residual_multiplier", "attention_multiplier")),
}


def check_built_class(arch: str, text: Mapping[str, Any], label: str = "config.json") -> None:
    """Refuse, as vLLM's build fails, a text config lacking a key the class :data:`BUILT_CLASS_KEYS`
    names for ``arch`` reads (neither saved nor set by its config class).

    Raises:
        ConfigError: vLLM's ``AttributeError``.
    """
    types, keys = BUILT_CLASS_KEYS.get(arch, (frozenset(), ()))
    if str(text.get("model_type")) in types:
        return
    for key in keys:
        if key not in text:
            raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: {arch}'s text config (model_type "
                              f"{text.get('model_type')!r}) has no attribute {key!r}", f"text_config.{key}")  # fmt: skip
