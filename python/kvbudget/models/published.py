"""Named published models: released attention checkpoints' ``config.json`` files, with their sources.

Models served today whose layers a config describes in the engines' own terms (DeepSeek-V3.2 and
GLM-5's DSA indexers, Kimi-K2.5's MLA, Gemma 4's per-layer shapes and windows, Llama 4's chunked
layers, Qwen3's MoE) are bundled whole in ``data/published_models.json``, each with the public
copy it was taken from; ``kvbudget plan NAME`` plans one as if its config were given, in SGLang
mode (:func:`kvbudget.sglang.resolve_sglang`) and in vLLM mode
(:func:`kvbudget.vllm.layers_from_hf_config`). ``tests/test_published_models.py`` holds every
entry to both engines' own reading. The hybrid-state models are
:mod:`kvbudget.models.hybrid_state`'s.
"""

from __future__ import annotations

from kvbudget.errors import UnknownNameError
from kvbudget.models.bundled import BundledConfig as PublishedModel
from kvbudget.models.bundled import table_functions


class UnknownPublishedModelError(UnknownNameError):
    """No bundled published model has this name; the message lists the closest names."""

    what, lister = "published model", "list_published_models"


#: The table's entries as stored; its names in order; a name's model or None; a name's model or
#: UnknownPublishedModelError (:func:`~kvbudget.models.bundled.table_functions`). A model is a
#: :class:`~kvbudget.models.bundled.BundledConfig` (``PublishedModel``).
published_model_entries, list_published_models, find_published_model, get_published_model = table_functions(
    "published_models.json", UnknownPublishedModelError)

__all__ = ["PublishedModel", "UnknownPublishedModelError", "find_published_model", "get_published_model",
           "list_published_models", "published_model_entries"]  # fmt: skip
