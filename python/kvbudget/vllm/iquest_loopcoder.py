"""vLLM 0.33.0's IQuest-Coder-Loop (``IQuestLoopCoderForCausalLM``, ``models/iquest_loopcoder.py``):
one set of decoder weights run ``loop_num`` times, each pass with its own KV caches.

Each decoder layer ``i`` of ``num_hidden_layers`` (``N``) builds one ``Attention`` per loop ``l``
(``loop_num``, 2 when the config has none), in that order, at
``model.layers.{l·N + i}.self_attn.attn``:

* loop 0 on the engine's ``CacheConfig``: the model-wide window (vLLM's ``CacheConfig.sliding_window``:
  the config's ``sliding_window`` where set, unless ``--disable-sliding-window``), else full
  attention;
* every later loop on a copy of it whose window is ``loop_window_size`` (64 when the config has
  none): a sliding layer whatever ``--disable-sliding-window`` says, in the same KV dtype.

Every one has ``num_key_value_heads`` KV heads (read as an attribute) of ``hidden_size //
num_attention_heads``, with the class's asserts (``tp`` divides the query heads; the KV heads and
``tp`` divide one another; ``max(1, kv // tp)`` per rank and ``Attention``'s that they divide the
rank's query heads). With a model-wide window, the model asserts ``max_window_layers`` (where the
config has it) equals ``num_hidden_layers``. The class does not implement ``SupportsPP``
(:data:`~kvbudget.vllm.registry.NOT_PIPELINE_PARALLEL`); drafters, an encoder-only config
(``is_causal`` false) and dual-chunk attention are refused as unchecked.

Held to vLLM's classes by ``tests/test_vllm_remote_code.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import gqa_per_rank, refused

__all__ = ["IQUEST_LOOPCODER", "iquest_loopcoder_layers"]

IQUEST_LOOPCODER: Final = "IQuestLoopCoderForCausalLM"


def iquest_loopcoder_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                            disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for an IQuest-Coder-Loop config (see the module doc).

    Raises:
        ConfigError: what vLLM refuses (the asserts above, a missing ``num_key_value_heads``), what
            kvbudget has not checked, or a key missing or invalid (drafters and more than one
            pipeline stage are refused before this runs).
    """
    v = _View(cfg, "config.json", engine="vllm")
    for key in ("dual_chunk_attention_config",):
        if v.raw(key) is not None:
            raise ConfigError(f"config.json: kvbudget has not checked {IQUEST_LOOPCODER} with {key}", v.name(key))
    if v.raw("is_causal") is False:
        raise ConfigError(f"config.json: kvbudget has not checked {IQUEST_LOOPCODER} as an encoder (is_causal false)",
                          v.name("is_causal"))  # fmt: skip
    n = v.req_int("num_hidden_layers")
    window = None if disable_sliding_window else v.opt_int("sliding_window", 0) or None
    if window is not None and v.has("max_window_layers") and v.raw("max_window_layers") != n:
        raise refused(f"AssertionError: Sliding window for some but all layers is not supported (max_window_layers "
                      f"{v.raw('max_window_layers')} < num_hidden_layers {n})", v.name("max_window_layers"),
                      v.label)  # fmt: skip
    loops = v.opt_int("loop_num", 0)
    loops = 2 if loops is None else loops
    loop_window = v.opt_int("loop_window_size")
    loop_window = 64 if loop_window is None else loop_window
    if not v.has("num_key_value_heads"):
        raise refused("AttributeError: the config has no attribute 'num_key_value_heads' (LoopCoderDecoderLayer "
                      "reads it)", v.name("num_key_value_heads"), v.label)  # fmt: skip
    heads, kv, tp = v.req_int("num_attention_heads"), v.req_int("num_key_value_heads"), engine.tp
    per_rank = gqa_per_rank(heads, kv, tp, "num_key_value_heads", " (LoopCoderAttention)")
    dim = v.req_int("hidden_size") // heads
    out = []
    for i in range(n):
        for loop in range(loops):
            w = window if loop == 0 else loop_window
            out.append(LayerSpec(f"model.layers.{loop * n + i}.self_attn.attn", "sliding" if w else "full",
                                 num_kv_heads=per_rank, head_size=dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, sliding_window=w or None))  # fmt: skip
    return out
