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
from kvbudget.vllm.refusal import split_unevenly

__all__ = ["IQUEST_LOOPCODER", "iquest_loopcoder_layers"]

IQUEST_LOOPCODER: Final = "IQuestLoopCoderForCausalLM"


def _refused(v: _View, what: str, key: str) -> ConfigError:
    return ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: {what}", v.name(key))


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
        raise _refused(v, f"AssertionError: Sliding window for some but all layers is not supported (max_window_layers "
                          f"{v.raw('max_window_layers')} < num_hidden_layers {n})", "max_window_layers")  # fmt: skip
    loops = v.opt_int("loop_num", 0)
    loops = 2 if loops is None else loops
    loop_window = v.opt_int("loop_window_size")
    loop_window = 64 if loop_window is None else loop_window
    if not v.has("num_key_value_heads"):
        raise _refused(v, "AttributeError: the config has no attribute 'num_key_value_heads' (LoopCoderDecoderLayer "
                          "reads it)", "num_key_value_heads")  # fmt: skip
    heads, kv, tp = v.req_int("num_attention_heads"), v.req_int("num_key_value_heads"), engine.tp
    if heads % tp:
        raise _refused(v, f"AssertionError: LoopCoderAttention: tp ({tp}) does not divide num_attention_heads "
                          f"({heads})", "num_attention_heads")  # fmt: skip
    if split_unevenly(kv, tp):
        raise _refused(v, f"AssertionError: LoopCoderAttention: the {kv} KV heads and tp={tp} do not divide one "
                          "another", "num_key_value_heads")  # fmt: skip
    per_rank = max(1, kv // tp)
    if (heads // tp) % per_rank:
        raise _refused(v, f"AssertionError: Attention: num_heads ({heads // tp}) is not divisible by num_kv_heads "
                          f"({per_rank})", "num_key_value_heads")  # fmt: skip
    dim = v.req_int("hidden_size") // heads
    out = []
    for i in range(n):
        for loop in range(loops):
            w = window if loop == 0 else loop_window
            out.append(LayerSpec(f"model.layers.{loop * n + i}.self_attn.attn", "sliding" if w else "full",
                                 num_kv_heads=per_rank, head_size=dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, sliding_window=w or None))  # fmt: skip
    return out
