"""vLLM 0.33.0's "thinker" wrappers: the text model of Qwen2.5-Omni, Qwen3-Omni and Qwen3-ASR.

These classes (``models/qwen2_5_omni_thinker.py``, ``models/qwen3_omni_moe_thinker.py``,
``models/qwen3_asr.py``) keep the config they build from one level further down than the other
multimodal wrappers: their ``__init__`` takes ``thinker_config =
vllm_config.model_config.hf_config.thinker_config`` and builds the text model on
``thinker_config.text_config`` (Qwen2.5-Omni through ``init_vllm_registered_model`` as
``Qwen2ForCausalLM``; Qwen3-Omni its own ``Qwen3MoeLLMForCausalLM``, a ``Qwen3MoeForCausalLM``;
Qwen3-ASR ``Qwen3ForCausalLM`` itself), under the prefix ``language_model``. What each hands over
is read from the wheel by ``tools/gen_vllm_archs.py`` (``hf_config`` =
``config.thinker_config.text_config``); the talker and code-to-wave models are not built (vLLM
serves the thinker only).

What the config classes make of a saved ``thinker_config.text_config``:

* Qwen2.5-Omni and Qwen3-Omni load with transformers 5.19.0's classes, whose thinker class builds
  its text config with a fixed class (``Qwen2_5OmniTextConfig``, ``Qwen3OmniMoeTextConfig``)
  whatever ``model_type`` the dict carries: a sparse text config takes that class's defaults.
* Qwen3-ASR loads with vLLM's own ``Qwen3ASRConfig`` (``transformers_utils/configs/qwen3_asr.py``,
  registered for ``qwen3_asr`` over transformers'): without a ``thinker_config`` it makes one of
  the top-level ``text_config`` (the layout transformers 5.19.0's own class saves), and its text
  class is vLLM's ``Qwen3ASRTextConfig`` (32 KV heads, head size 128 by default). That class
  keeps a ``sliding_window`` whatever ``use_sliding_window`` says (vLLM's Qwen3 model then slides
  every layer), where transformers' Qwen3 class drops it: kvbudget refuses a Qwen3-ASR text config
  with a window or a sliding ``layer_types`` entry as unchecked (released checkpoints carry none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError

__all__ = ["THINKER", "thinker_text_config"]

#: The ``hf_config`` form of a thinker wrapper in ``data/vllm_architectures.json``.
THINKER: Final = "config.thinker_config.text_config"

#: transformers 5.19.0's ``Qwen2_5OmniTextConfig`` default ``sliding_window``, which it keeps only
#: with ``use_sliding_window`` (else None: the saved defaults record none, so a text config with
#: ``use_sliding_window: true`` and no window takes this one; ``tests/test_vllm_thinkers.py``
#: checks it against the class).
QWEN2_5_OMNI_WINDOW: Final = 32768
#: Outer model type -> the model type of the class its thinker builds the text config with.
_TEXT_TYPE: Final[dict[str, str]] = {
    "qwen2_5_omni": "qwen2_5_omni_text",
    "qwen3_omni_moe": "qwen3_omni_moe_text",
    "qwen3_asr": "qwen3_asr_text",
}


def thinker_text_config(cfg: Mapping[str, Any], arch: str, label: str = "config.json") -> dict[str, Any]:
    """The thinker's text config of ``cfg`` as its config class loads it (its ``model_type`` set to
    the text class's, which fixes the defaults a sparse config takes).

    Raises:
        ConfigError: a model type kvbudget does not know the thinker class of, or no text config
            (the config class would build one of its defaults; kvbudget does not guess them).
    """
    outer = str(cfg.get("model_type"))
    text_type = _TEXT_TYPE.get(outer)
    if text_type is None:
        raise ConfigError(f"{label}: kvbudget does not know the thinker config class vLLM 0.33.0 loads "
                          f"{arch}'s model_type {outer!r} with", "model_type")  # fmt: skip
    thinker = cfg.get("thinker_config")
    if thinker is None and outer == "qwen3_asr":  # vLLM's Qwen3ASRConfig: the saved text_config moves in
        thinker = {"text_config": cfg["text_config"]} if "text_config" in cfg else None
    text = thinker.get("text_config") if isinstance(thinker, Mapping) else None
    if not isinstance(text, Mapping):
        raise ConfigError(f"{label}: vLLM 0.33.0 builds {arch}'s text model from thinker_config.text_config, "
                          "which this config lacks (its config class would fill it in)",
                          "thinker_config.text_config")  # fmt: skip
    types = text.get("layer_types")
    sliding = isinstance(types, list) and any(t != "full_attention" for t in types)
    if outer == "qwen3_asr" and (text.get("sliding_window") is not None or sliding):
        key = "layer_types" if sliding else "sliding_window"
        raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's sliding window on {arch}'s text "
                          "config (vLLM's Qwen3ASRTextConfig keeps sliding_window whatever use_sliding_window "
                          "says, unlike transformers' Qwen3 class)", f"thinker_config.text_config.{key}")  # fmt: skip
    out = {**text, "model_type": text_type}
    if outer == "qwen2_5_omni" and out.get("use_sliding_window") is True and "sliding_window" not in out:
        out["sliding_window"] = QWEN2_5_OMNI_WINDOW  # the class keeps its default window only then
    return out
