"""Named hybrid-state models: released checkpoints' ``config.json`` values, with their sources.

The models people serve with a recurrent state beside the KV cache (Qwen3-Next,
Qwen3.5 dense and MoE, Nemotron-H and Nemotron 3, Falcon-H1, Kimi-Linear, LFM2; Jamba, which only vLLM
serves: :attr:`HybridStateModel.engines`) are planned from
their config: the layer kinds, the state shapes and the attention geometry are
read as SGLang 0.5.23's config classes read them
(:func:`kvbudget.sglang.resolve_sglang`,
:func:`kvbudget.sglang.state_from_hf_config`). The bundled
``data/hybrid_state_models.json`` holds, per checkpoint, the published keys those
readers use, its Hugging Face id and file, and a note on how the values were
checked; ``kvbudget plan NAME`` plans one as if its config were given.

``tests/test_sglang_model.py`` and ``tests/test_sglang_state_model.py`` hold every
entry to SGLang's own config code; in vLLM mode (``kvbudget plan NAME --engine vllm``,
:func:`kvbudget.vllm.layers_from_hf_config`) the same configs are read as vLLM's model classes
read them (tests/test_vllm_state_models.py).
"""

from __future__ import annotations

from kvbudget.errors import UnknownNameError
from kvbudget.models.bundled import BundledConfig, table_functions

__all__ = ["HybridStateModel", "UnknownHybridStateModelError", "find_hybrid_state_model", "get_hybrid_state_model",
           "hybrid_state_entries", "list_hybrid_state_models"]  # fmt: skip


class UnknownHybridStateModelError(UnknownNameError):
    """No bundled hybrid-state model has this name; the message lists the closest names."""

    what = "hybrid-state model"
    lister = "list_hybrid_state_models"


#: One released hybrid-state checkpoint's config values (:class:`~kvbudget.models.bundled.BundledConfig`).
HybridStateModel = BundledConfig

#: The table's entries as stored; its names in order; a name's model or None; a name's model or
#: UnknownHybridStateModelError (:func:`~kvbudget.models.bundled.table_functions`).
hybrid_state_entries, list_hybrid_state_models, find_hybrid_state_model, get_hybrid_state_model = table_functions(
    "hybrid_state_models.json", UnknownHybridStateModelError)
