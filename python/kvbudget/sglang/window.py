"""The sliding window SGLang 0.5.23 gives a hybrid-SWA model's pools, by its model class.

SGLang reads the window once the model is built
(``model_executor/model_runner_components/load_model_utils.py``,
``resolve_sliding_window_size``): the class's ``get_attention_sliding_window_size()``
when the class serving the model defines one, else the text config's
``sliding_window_size`` / ``sliding_window`` / ``window_size`` as is
(``ModelConfig._get_sliding_window_size``), else its ``attention_chunk_size``.
The class is ``ModelRegistry.resolve_model_cls``'s: the first architecture
SGLang has a class for, else its Transformers backend (which defines no window
method).

:data:`WINDOW_METHODS` lists every SGLang class that defines the method (bases
followed through the pinned model files) with the rule its body states;
``tests/test_sglang_model.py`` holds the list to the wheel, so a class that
gains the method fails the test instead of being read as "as is". A rule
kvbudget has not checked (``"unchecked"``) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kvbudget.models.config_io import ConfigError
from kvbudget.models.layer_kinds import derived_layer_types

__all__ = ["WINDOW_METHODS", "sglang_window"]

_MINUS_ONE = (
    "GptOssForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3nForCausalLM", "Gemma4ForCausalLM",
    "EmbeddingGemmaModel", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
    "Spark2_5ForCausalLM", "Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM",
)  # fmt: skip
_UNCHECKED = (
    "MuseSparkForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration",
    "InklingForConditionalGenerationMTP", "JetNemotronForCausalLM", "LlamaForCausalLMEagle3",
    "Olmo2ForCausalLM", "UnlimitedOCRForCausalLM", "DFlash2BeamDraftModel", "DFlash2DraftModel",
    "DFlashDraftModel", "DFlashLagunaForCausalLM", "DSparkDraftModel", "DSparkMiniMaxDraftModel",
    "Lfm2DSparkDraftModel", "LiLiCorrDraftModel", "LingDSparkModel", "MiniMaxDFlash2DraftModel",
    "MuseGlimmerAssistantModel", "Qwen3DSparkModel",
)  # fmt: skip

#: The SGLang classes defining ``get_attention_sliding_window_size``, by the rule it states:
#: ``"minus_one"`` (``config.sliding_window - 1``; a null window fails), ``"minus_one_or_none"``
#: (null stays None: Mellum, Exaone 4), ``"minus_one_if_positive"`` (Afmoe: None unless > 0),
#: ``"gemma4_text"`` (``getattr(config.text_config, "sliding_window", -1) - 1``; Gemma 4 Unified
#: inherits it), ``"text_minus_one"`` (DiffusionGemma: ``self.text_config.sliding_window - 1``, its
#: ``__init__``'s ``config.text_config``; a null window fails), ``"minus_one_if_sliding_layers"`` (Beam: ``sliding_window - 1`` when a
#: ``layer_types`` entry is sliding, else None), ``"text_window_size_minus_one"`` (Inkling:
#: ``self.text_config.sliding_window_size - 1``, its text class's default filled in by
#: :func:`kvbudget.sglang.inkling.inkling_config`; a config without a ``text_config`` fails), ``"unchecked"``.
WINDOW_METHODS: Final[Mapping[str, str]] = {
    **dict.fromkeys(_MINUS_ONE, "minus_one"), **dict.fromkeys(_UNCHECKED, "unchecked"),
    "MellumForCausalLM": "minus_one_or_none", "Exaone4ForCausalLM": "minus_one_or_none",
    "AfmoeForCausalLM": "minus_one_if_positive", "Gemma4ForConditionalGeneration": "gemma4_text",
    "Gemma4UnifiedForConditionalGeneration": "gemma4_text", "BeamForCausalLM": "minus_one_if_sliding_layers",
    "DiffusionGemmaForBlockDiffusion": "text_minus_one",
    "InklingForConditionalGeneration": "text_window_size_minus_one",
}  # fmt: skip

#: transformers 5.19.0's classes that replace ``sliding_window`` unless ``use_sliding_window``.
_UNLESS_USED: Final[Mapping[str, int | None]] = {
    **dict.fromkeys(("qwen2", "qwen3", "qwen3_moe", "qwen2_vl_text", "qwen2_5_vl_text"), None), "qwen2_moe": 0,
}  # fmt: skip


def sglang_window(archs: Sequence[str], v: Any, classes: frozenset[str]) -> int | None:
    """SGLang's exclusive window, tokens, for a hybrid model (``v``: the text config's
    ``kvbudget.models.hf._View``; ``classes``: the architectures SGLang has a class for)."""
    served = next((a for a in archs if a in classes), None)  # None: the Transformers backend
    rule = WINDOW_METHODS.get(served or "")
    if rule == "unchecked":
        raise ConfigError(f"{v.label}: kvbudget has not checked SGLang 0.5.23's window rule for {served}",
                          "architectures")  # fmt: skip
    if rule == "minus_one":
        return int(v.req_int("sliding_window")) - 1
    if rule in ("minus_one_or_none", "minus_one_if_positive"):
        w = v.raw("sliding_window")
        if w is None or (rule == "minus_one_if_positive" and isinstance(w, int) and w <= 0):
            return None
        return int(v.req_int("sliding_window")) - 1
    if rule == "minus_one_if_sliding_layers":  # Beam: its config class derives layer_types when absent
        types = derived_layer_types(v.model_type, int(v.req_int("num_hidden_layers")), v.raw("layer_types"))
        if not isinstance(types, list):
            raise v.fail("layer_types", "must be a list (SGLang's Beam reads it for its window)")
        return int(v.req_int("sliding_window")) - 1 if "sliding_attention" in types else None
    if rule == "text_window_size_minus_one":
        if not v.prefix:  # its __init__ reads config.text_config
            raise v.fail("text_config", "is missing; SGLang's Inkling class reads config.text_config's window")
        return int(v.req_int("sliding_window_size")) - 1
    if rule in ("gemma4_text", "text_minus_one"):
        w = v.opt_int("sliding_window")
        if w is not None and v.raw("use_bidirectional_attention") == "all":
            w = w // 2 + 1  # transformers' Gemma 4 (and DiffusionGemma) text class halves a bidirectional window
        if w is None and rule == "text_minus_one":
            raise v.fail("sliding_window", "is null; SGLang's DiffusionGemma subtracts 1 from its text config's "
                         "window and fails")  # fmt: skip
        return (w if w is not None else -1) - 1
    for key in ("sliding_window_size", "sliding_window", "window_size"):
        if key == "sliding_window" and v.model_type in _UNLESS_USED and not v.raw("use_sliding_window"):
            if _UNLESS_USED[v.model_type] is None:
                continue
            return _UNLESS_USED[v.model_type]
        if v.raw(key) is not None:
            return int(v.req_int(key, 0))
    chunk = v.opt_int("attention_chunk_size")
    return None if chunk is None else int(chunk)
