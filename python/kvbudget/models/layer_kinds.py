"""``layer_types`` as transformers 5.19.0's config classes derive them, for both engines' readers.

A config saved without ``layer_types`` still has them once transformers loads
it: each config class's ``__post_init__`` fills them by a rule of its own.
SGLang's ``ModelConfig`` and vLLM's model classes read the loaded config, so
both kvbudget readers (:mod:`kvbudget.sglang.model`, :mod:`kvbudget.vllm.models`)
take the kinds from :func:`derived_layer_types`, one table for both, which the
SGLang and vLLM differentials (``tests/test_sglang_model.py``,
``tests/test_vllm_hf_oracle.py``) hold to the engines' own readings of the
configs transformers builds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

__all__ = ["LEGACY_KINDS", "NEMOTRON_H_PATTERN", "SLIDES", "derived_layer_types", "is_kda_layer"]

#: model_type -> whether layer ``i`` of ``n`` slides, when the config gives no ``layer_types``.
#: Gemma 2 / 3 and Cohere2 slide but every ``sliding_window_pattern``-th layer (default
#: below); Laguna and Mellum derive every layer full attention.
SLIDES: dict[str, Callable[[int, int], bool]] = {
    "gpt_oss": lambda i, n: (i + 1) % 2 == 1, "granite_swa": lambda i, n: i % 4 != 0,
    "laguna": lambda i, n: False, "mellum": lambda i, n: False,
    "mimo_v2_flash": lambda i, n: i != 0 and (i + 1) % 6 != 0, "gemma4_text": lambda i, n: (i + 1) % 6 != 0,
    "muse_glimmer_text": lambda i, n: (n - 1 - i) % 4 != 0,
    "beam": lambda i, n: (i + 1) % 6 != 0 and i != n - 1,  # SGLang's BeamConfig: every 6th and the last full
    "gemma4_unified_text": lambda i, n: (i + 1) % 6 != 0, "diffusion_gemma_text": lambda i, n: (i + 1) % 6 != 0,
}  # fmt: skip
#: The model types whose transformers class forces the last layer to full attention (Gemma 4's).
_LAST_FULL = frozenset({"gemma4_text", "gemma4_unified_text", "diffusion_gemma_text"})
#: Nemotron-H's ``hybrid_override_pattern`` characters -> the layer kinds transformers 5.19.0's
#: ``NemotronHConfig`` names (vLLM's model class reads the characters back). SGLang 0.5.23's own
#: config class uses the legacy names (:data:`LEGACY_KINDS`' keys) for the same characters.
NEMOTRON_H_PATTERN: dict[str, str] = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
#: transformers' ``_LEGACY_LAYER_TYPE_REMAP`` for the state hybrids: legacy kind -> today's name.
LEGACY_KINDS: dict[str, str] = {"mamba": "linear_attention", "attention": "full_attention"}
#: model_type -> the default ``sliding_window_pattern`` (full every that many layers).
PATTERNS: dict[str, int] = {"gemma2": 2, "gemma3_text": 6, "cohere2": 4, "exaone4": 4}


def derived_layer_types(model_type: str, n: int, given: Any, pattern: int | None = None) -> list[str] | None:
    """``layer_types`` as transformers leaves them after ``__post_init__``: ``given`` when the
    config has them (Gemma 4's last layer forced to full attention), else the class's rule
    (``pattern``: the config's ``sliding_window_pattern``, for the pattern families), else None."""
    if given is None:
        every = PATTERNS.get(model_type)
        if every is not None:
            every = pattern or every
            return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]
        rule = SLIDES.get(model_type)
        if rule is None:
            return None
        given = ["sliding_attention" if rule(i, n) else "full_attention" for i in range(n)]
    types = list(given) if isinstance(given, list) else given
    if model_type in _LAST_FULL and isinstance(types, list) and types:
        types[-1] = "full_attention"  # transformers forces Gemma 4's last layer to full attention
    return types


def is_kda_layer(kda_layers: Collection[int], i: int) -> bool:
    """``KimiLinearConfig.is_kda_layer`` (SGLang's and vLLM's classes alike): whether layer ``i``
    (0-based) is a Kimi Delta Attention layer, ``kda_layers`` being 1-based."""
    return (i + 1) in kda_layers
