"""vLLM 0.33.0's Nemotron-NAS (``DeciLMForCausalLM``, ``models/nemotron_nas.py``): the
Llama-3.1/3.3-Nemotron Super and Ultra checkpoints, whose layers a neural architecture search cut.

Layer ``i`` is the config's ``block_configs[i]`` (the checkpoint's own config class, remote code,
reads each entry into an object whose ``attention`` vLLM reads):

* an attention block that is a no-op (``attention.no_op``) registers no attention layer;
* else vLLM's ``LlamaAttention`` at ``model.layers.{i}.self_attn.attn`` with
  ``num_attention_heads // attention.n_heads_in_group`` KV heads (its asserts: ``tp`` divides the
  query heads, the KV heads and ``tp`` divide one another; ``max(1, kv // tp)`` per rank, and
  ``Attention``'s that they divide the rank's query heads), so the KV heads may differ from layer to
  layer (variable GQA, which SGLang refuses and vLLM serves);
* the head size is the config's ``head_dim``, else ``hidden_size // num_attention_heads``; the
  window the model-wide one (vLLM's ``CacheConfig.sliding_window``), if the config gives a
  ``sliding_window`` and not ``--disable-sliding-window``.

vLLM's ``ModelConfig`` takes the model's KV heads from the first attention block that is not a
no-op; with none, it raises (refused here in its words). A config with ``layer_types`` (per-layer
windows in ``LlamaAttention``) is refused as unchecked, as are drafters.

Held to vLLM's classes by ``tests/test_vllm_remote_code.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import gqa_per_rank, refused

__all__ = ["DECILM", "nemotron_nas_layers"]

DECILM: Final = "DeciLMForCausalLM"


def _attention_blocks(v: _View) -> list[Mapping[str, Any] | None]:
    """Per layer, its attention block, or None where it is a no-op."""
    blocks = v.raw("block_configs")
    n = v.req_int("num_hidden_layers")
    if not isinstance(blocks, list) or len(blocks) < n:
        raise ConfigError(f"{v.label}: vLLM 0.33.0's DeciLM reads block_configs[i] for each of the {n} layers",
                          v.name("block_configs"))  # fmt: skip
    out: list[Mapping[str, Any] | None] = []
    for block in blocks[:n]:
        attention = block.get("attention") if isinstance(block, Mapping) else None
        if not isinstance(attention, Mapping) or not isinstance(attention.get("no_op", False), bool):
            raise ConfigError(f"{v.label}: each block_configs entry needs an attention block", v.name("block_configs"))
        out.append(None if attention.get("no_op", False) else attention)
    return out


def _kv_heads(v: _View, attention: Mapping[str, Any], heads: int) -> int:
    group = attention.get("n_heads_in_group")
    if not isinstance(group, int) or isinstance(group, bool):
        raise refused(f"TypeError: DeciLMDecoderLayer divides num_attention_heads by n_heads_in_group ({group!r})",
                      v.name("block_configs"), v.label)
    if group <= 0:
        raise refused(f"ZeroDivisionError: n_heads_in_group is {group}" if group == 0 else
                      f"n_heads_in_group {group} gives negative KV heads", v.name("block_configs"), v.label)  # fmt: skip
    kv = heads // group
    if kv <= 0:
        raise refused(f"ZeroDivisionError: num_attention_heads ({heads}) // n_heads_in_group ({group}) is 0 KV "
                      "heads", v.name("block_configs"), v.label)  # fmt: skip
    return kv


def nemotron_nas_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                        disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Nemotron-NAS config (see the module doc).

    Raises:
        ConfigError: what vLLM refuses (no attention block, the asserts above), a config with
            ``layer_types``, or a key missing or invalid (drafters are refused before this runs).
    """
    v = _View(cfg, "config.json", engine="vllm")
    if v.raw("layer_types") is not None:
        raise ConfigError(f"config.json: kvbudget has not checked {DECILM} with layer_types (LlamaAttention's "
                          "per-layer windows)", v.name("layer_types"))  # fmt: skip
    blocks = _attention_blocks(v)
    heads = v.req_int("num_attention_heads")
    first = next((b for b in blocks if b is not None), None)
    if first is None:  # ModelConfig: the convertor's get_total_num_kv_heads
        raise refused("RuntimeError: Could not determine the number of key-value attention heads from model "
                      "configuration (every attention block is a no-op)", v.name("block_configs"), v.label)  # fmt: skip
    _kv_heads(v, first, heads)
    tp = engine.tp
    dim = v.opt_int("head_dim") or v.req_int("hidden_size") // heads
    window = None if disable_sliding_window else v.opt_int("sliding_window", 0) or None
    out = []
    for stage, (start, end) in enumerate(pp_stage_layers(len(blocks), engine.pp)):
        for i in range(start, end):
            attention = blocks[i]
            if attention is None:
                continue
            kv = _kv_heads(v, attention, heads)
            per_rank = gqa_per_rank(heads, kv, tp, "block_configs", f" (LlamaAttention, layer {i})")
            out.append(LayerSpec(f"model.layers.{i}.self_attn.attn", "sliding" if window else "full",
                                 num_kv_heads=per_rank, head_size=dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, sliding_window=window, pp_stage=stage))  # fmt: skip
    return out
