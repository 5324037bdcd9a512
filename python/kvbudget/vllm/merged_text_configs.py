"""vLLM 0.33.0's wrappers that merge their text config into their own: PaddleOCR-VL.

``models/paddleocr_vl.py``: ``PaddleOCRVLForConditionalGeneration.__init__`` takes the model's
``hf_config`` and, where it has a ``text_config``, ``config.update(...)``s it with that text
config's ``to_dict()`` less ``model_type``, ``architectures`` and ``tie_word_embeddings``; it then
builds ``Ernie4_5ForCausalLM(vllm_config=vllm_config, prefix=maybe_prefix(prefix,
"language_model"))`` on that merged config (vLLM's Ernie 4.5 class is its Llama class), so the
layers are ``language_model.model.layers.<i>.self_attn.attn``. The text config's ``to_dict()`` is
the loaded text class's (transformers 5.19.0's ``PaddleOCRTextConfig``, model type
``paddleocr_vl_text``), every key it defines set: a key the saved text config leaves out takes
that class's default (``data/hf_defaults.json``), not the outer config's; the text config's other
saved keys (a window) ride along, as transformers keeps a config's extra keys.

Held to vLLM's class by ``tests/test_vllm_merged_text_configs.py`` (the oracle runs the
``__init__``'s merging statement, lifted, then builds the text class).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import _CLASS_DEFAULTS, ConfigError, text_config_of

__all__ = ["MERGED", "merged_text_config"]

#: Wrapper architecture -> (the class it builds on its merged config, the text config class's
#: model type, the layer-name prefix).
MERGED: Final[dict[str, tuple[str, str, str]]] = {
    "PaddleOCRVLForConditionalGeneration": ("Ernie4_5ForCausalLM", "paddleocr_vl_text", "language_model"),
}
#: The text config's keys the merge leaves out.
_UNSAFE: Final = ("model_type", "architectures", "tie_word_embeddings")


def merged_text_config(cfg: Mapping[str, Any], arch: str, label: str = "config.json") -> tuple[dict[str, Any], str]:
    """``(the merged config, named as the class vLLM builds on it, layer-name prefix)``: the
    outer config's keys, the text config's over them (its class's defaults for the keys it
    leaves out, through its ``model_type``).

    Raises:
        ConfigError: the config has no ``text_config`` (vLLM would build the text class on the
            outer config alone; kvbudget does not read that).
    """
    builds, text_type, prefix = MERGED[arch]
    text = text_config_of(cfg)
    if text is None:
        raise ConfigError(f"{label}: kvbudget reads {arch} with its text_config (vLLM merges it into the "
                          "model's config), which this config lacks", "text_config")  # fmt: skip
    merged = {k: v for k, v in cfg.items() if k != "text_config"}
    merged.update(_CLASS_DEFAULTS.get(text_type, {}))  # the text class's to_dict() sets its own keys
    merged.update({k: v for k, v in text.items() if k not in _UNSAFE})
    return {**merged, "model_type": text_type, "architectures": [builds]}, prefix
