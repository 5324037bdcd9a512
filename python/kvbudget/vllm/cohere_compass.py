"""vLLM 0.33.0's Cohere Compass: the text model its multimodal class builds itself.

``models/cohere_compass.py``: ``CohereCompassForConditionalGeneration.__init__`` (``SupportsPP``)
builds ``CohereCompassForCausalLM(vllm_config=vllm_config.with_hf_config(config.text_config),
prefix=maybe_prefix(prefix, "language_model"))``: a ``CohereForCausalLM`` subclass over its own
``CohereCompassTextModel``, not Cohere's decoder, so its layers are
``language_model.model.layers.<i>.self_attn.attn`` read by this file's rules:

* ``with_hf_config`` copies the multimodal config's ``tie_word_embeddings`` onto the text config
  (transformers 5.19.0's ``CohereCompassConfig`` has one, default false), and
  ``CohereCompassForCausalLM`` asserts it: a config that does not tie its embeddings is refused;
* ``CohereCompassAttention`` per layer: ``layer_types[i]``; head size ``config.head_dim``, which
  ``CohereCompassTextConfig`` always sets to ``hidden_size // num_attention_heads``; the query heads
  over ``tp`` (``ModelConfig`` asserts ``tp`` divides them), ``max(1, kv // tp)`` KV heads after its
  asserts (the KV heads and ``tp`` divide one another) and ``Attention``'s; a sliding layer's window
  is ``sliding_window`` as it is (no ``+ 1``, unlike Cohere 2), a full layer none of its own (a
  layer without one falls back to ``CacheConfig.sliding_window``, which is that window when every
  layer slides, else none: no full layer takes a window);
* after the language model, on every pipeline rank but the first, the wrapper asserts the rank's
  first layer is at least the number of ``vision_config.deepstack_visual_indexes`` (when any).

``--disable-sliding-window`` (or a window of 0) makes ``ModelConfig`` set the text config's window to
None (the class types it optional): every layer is then full. Held to vLLM's classes by
``tests/test_vllm_cohere_compass.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.refusal import refused, section, text_int, text_kv_per_rank
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["COHERE_COMPASS", "DEFAULTS", "cohere_compass_layers"]

#: The registry name vLLM 0.33.0 serves with ``CohereCompassForConditionalGeneration``.
COHERE_COMPASS: Final = "CohereCompassForConditionalGeneration"
#: transformers 5.19.0's class defaults of the keys read: ``(config, text_config, vision_config)``
#: (checked against ``CohereCompassConfig`` by ``tests/test_vllm_cohere_compass.py``).
DEFAULTS: Final[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = (
    {"tie_word_embeddings": False},
    {"num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": None, "hidden_size": 8192,
     "sliding_window": 4096, "layer_types": None},
    {"deepstack_visual_indexes": [8, 16, 24]},
)  # fmt: skip
_TYPES: Final = ("full_attention", "sliding_attention")




def cohere_compass_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                          disable_sliding_window: bool, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The attention layers vLLM 0.33.0 registers for a Cohere Compass config, in order.

    Raises:
        ConfigError: a config vLLM (or transformers' class loading it) refuses.
    """
    outer = {**DEFAULTS[0], **cfg}
    text = {**DEFAULTS[1], **section(cfg, "text_config", label)}
    vision = {**DEFAULTS[2], **section(cfg, "vision_config", label)}
    n, heads, hidden = (text_int(text, k, label)
                        for k in ("num_hidden_layers", "num_attention_heads", "hidden_size"))  # fmt: skip
    kv = heads if text["num_key_value_heads"] is None else text_int(text, "num_key_value_heads", label)
    types = text["layer_types"] if text["layer_types"] is not None else ["full_attention"] * n
    if not isinstance(types, list) or len(types) != n or any(t not in _TYPES for t in types):
        raise ConfigError(f"{label}: kvbudget reads Cohere Compass's layer_types as {n} of {list(_TYPES)} "
                          "(transformers 5.19.0's class refuses another count)", "text_config.layer_types")  # fmt: skip
    window = text["sliding_window"]
    if disable_sliding_window or not window:  # ModelConfig.__post_init__: None (a window of 0 disables it)
        window = None
    elif isinstance(window, bool) or not isinstance(window, int):
        raise ConfigError(f"{label}: key 'text_config.sliding_window' must be an integer, not {window!r}",
                          "text_config.sliding_window")  # fmt: skip
    tp = engine.tp
    if heads % tp:  # ModelConfig.verify_with_parallel_config
        raise refused(f"ValueError: Total number of attention heads ({heads}) must be divisible by tensor "
                      f"parallel size ({tp}).", "text_config.num_attention_heads", label)  # fmt: skip
    if not outer["tie_word_embeddings"]:
        raise refused("AssertionError: CohereCompassForCausalLM asserts tie_word_embeddings (with_hf_config "
                      "copies the model's, default false, onto the text config)", "tie_word_embeddings", label)
    per_rank = text_kv_per_rank(heads, kv, tp, label)
    levels = vision["deepstack_visual_indexes"]
    levels = len(levels) if levels else 0
    dim = hidden // heads
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            w = window if types[i] == "sliding_attention" else None  # (the cache's is this or None)
            out.append(LayerSpec(f"language_model.model.layers.{i}.self_attn.attn", "sliding" if w else "full",
                                 num_kv_heads=per_rank, head_size=dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, sliding_window=w, pp_stage=stage))  # fmt: skip
        if stage > 0 and levels and start < levels:
            raise refused(f"AssertionError: pipeline stage {stage} starts at layer {start}, before the "
                                  f"{levels} deepstack levels of vision_config.deepstack_visual_indexes",
                           "vision_config.deepstack_visual_indexes", label)  # fmt: skip
    return out
