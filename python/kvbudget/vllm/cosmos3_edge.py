"""vLLM 0.33.0's Cosmos3 Edge: a dense text model that vLLM builds as Nemotron-H.

``models/cosmos3_edge.py``: ``Cosmos3EdgeForConditionalGeneration.__init__`` (``SupportsPP``) builds
``Cosmos3EdgeForCausalLM(vllm_config=vllm_config.with_hf_config(config.text_config),
prefix=maybe_prefix(prefix, "language_model"))``, whose ``__init__`` turns the text config
(transformers 5.19.0's ``Cosmos3EdgeTextConfig``) into a transformers ``NemotronHConfig`` with
``layers_block_type = ["full_attention", "mlp"] * num_hidden_layers`` and the text config's other keys,
and builds ``Cosmos3EdgeTextModel`` (vLLM's ``NemotronHModel``) over those ``2 * num_hidden_layers``
layers: an attention layer at each even index, ``language_model.model.layers.<2i>.mixer.attn``, an
MLP layer (no KV) at each odd one; the pipeline splits all ``2 * num_hidden_layers`` of them.

Each attention layer is ``NemotronHAttention``'s: ``tp`` divides the query heads (asserted), the
KV heads and ``tp`` divide one another, ``max(1, kv // tp)`` per rank (``Attention``'s assert that
they divide the rank's query heads), head size ``head_dim`` (the text class types it ``int``: a null
one is refused; KV heads null are the query heads), and a window
``getattr(config, "sliding_window", None)``: the text class defines none, so a layer slides only on a
window the file saves (which ``--disable-sliding-window``, or a window of 0, clears). The text class
refuses a hidden size its heads do not divide and M-RoPE sections that are not three summing to
``head_dim // 2`` (``rope_type`` must be ``default``): vLLM cannot load such a config.

Held to vLLM's classes by ``tests/test_vllm_cosmos3_edge.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.refusal import refused, text_int, text_kv_per_rank
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["COSMOS3_EDGE", "TEXT_DEFAULTS", "cosmos3_edge_layers"]

#: The registry name vLLM 0.33.0 serves with ``Cosmos3EdgeForConditionalGeneration``.
COSMOS3_EDGE: Final = "Cosmos3EdgeForConditionalGeneration"
#: transformers 5.19.0's ``Cosmos3EdgeTextConfig`` defaults of the keys read (checked against the
#: class by ``tests/test_vllm_cosmos3_edge.py``).
TEXT_DEFAULTS: Final[dict[str, Any]] = {
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "hidden_size": 2048, "rope_parameters": {"rope_type": "default", "mrope_section": [24, 20, 20]},
}  # fmt: skip




def cosmos3_edge_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                        disable_sliding_window: bool, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The attention layers vLLM 0.33.0 registers for a Cosmos3 Edge config, in order.

    Raises:
        ConfigError: a config vLLM (or transformers' class loading it) refuses.
    """
    saved = cfg.get("text_config") or {}
    if not isinstance(saved, Mapping):
        raise ConfigError(f"{label}: key 'text_config' must be an object", "text_config")
    text = {**TEXT_DEFAULTS, **saved}
    n, heads, hidden = (text_int(text, k, label)
                        for k in ("num_hidden_layers", "num_attention_heads", "hidden_size"))  # fmt: skip
    kv = heads if text["num_key_value_heads"] is None else text_int(text, "num_key_value_heads", label)
    dim = text_int(text, "head_dim", label)  # typed int: the class refuses a null one
    rope = text["rope_parameters"] or {}
    section = rope.get("mrope_section") if isinstance(rope, Mapping) else None
    if hidden % heads or not isinstance(rope, Mapping) or rope.get("rope_type") != "default" or not (
            isinstance(section, list) and len(section) == 3 and sum(section) == dim // 2):  # fmt: skip
        raise ConfigError(f"{label}: transformers 5.19.0's Cosmos3EdgeTextConfig (vLLM's loader) refuses it: the heads "
                          "must divide hidden_size, and rope_parameters be 'default' with three mrope_section parts "
                          "summing to head_dim // 2", "text_config")  # fmt: skip
    window = saved.get("sliding_window")
    if disable_sliding_window or not window:  # ModelConfig.__post_init__ sets it None (a window of 0 too)
        window = None
    elif isinstance(window, bool) or not isinstance(window, int):
        raise ConfigError(f"{label}: key 'text_config.sliding_window' must be an integer, not {window!r}",
                          "text_config.sliding_window")  # fmt: skip
    tp = engine.tp
    if heads % tp:  # ModelConfig.verify_with_parallel_config, and NemotronHAttention's assert
        raise refused(f"ValueError: Total number of attention heads ({heads}) must be divisible by tensor "
                      f"parallel size ({tp}).", "text_config.num_attention_heads", label)  # fmt: skip
    per_rank = text_kv_per_rank(heads, kv, tp, label)
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(2 * n, engine.pp)):
        for j in range(start + start % 2, end, 2):  # the attention layers: the even indexes
            out.append(LayerSpec(f"language_model.model.layers.{j}.mixer.attn", "sliding" if window else "full",
                                 num_kv_heads=per_rank, head_size=dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, sliding_window=window, pp_stage=stage))  # fmt: skip
    return out
