"""vLLM 0.33.0's HRM-Text (``HrmTextForCausalLM``, ``models/hrm_text.py``): one KV cache per
recurrence step.

``HrmTextModel`` holds two stacks (``L_module``, then ``H_module``) of ``num_layers_per_stack``
decoder layers each, whose weights every recurrence step shares; but each ``HrmTextAttention`` builds
one ``PrefillPrefixLMAttention`` per step its stack runs, each with its own KV cache:

* the L stack runs at steps ``h·(L_cycles + 1) + l`` (``h < H_cycles``, ``l < L_cycles``), the H stack
  at ``h·(L_cycles + 1) + L_cycles``;
* layer ``i`` of a stack registers, for each of its steps in that order, ``model.<L|H>_module.layers.
  <step·num_layers_per_stack + i>.self_attn.attn`` (the L stack's layers first, each with all its
  steps, then the H stack's);
* each is multi-head: ``num_attention_heads / tp`` KV heads (vLLM asserts ``tp`` divides them) of
  ``head_dim``, with no per-layer window (the cache config's model-wide one, if the config gives a
  ``sliding_window``).

The config is transformers 5.19.0's ``HrmTextConfig``: when a config saves no
``num_layers_per_stack`` its ``__post_init__`` takes ``num_hidden_layers`` as the per-stack count
(and rewrites ``num_hidden_layers`` to the inflated total, which is what a saved config then
carries beside ``num_layers_per_stack``). ``PrefillPrefixLMAttention``'s spec is a
``FullAttentionSpec`` with ``non_causal=True``, which makes vLLM's engine core turn chunked prefill and
prefix caching off; the layout, and so the plan, is a full-attention layer's. The class does not
implement ``SupportsPP`` (:data:`~kvbudget.vllm.registry.NOT_PIPELINE_PARALLEL`); drafters are refused
as unchecked.

Held to vLLM's classes by ``tests/test_vllm_hrm_text.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["HRM_TEXT", "hrm_text_layers"]

HRM_TEXT: Final = "HrmTextForCausalLM"
#: transformers 5.19.0's ``HrmTextConfig`` defaults of the keys read here.
_DEFAULTS: Final[Mapping[str, int]] = {"num_hidden_layers": 16, "num_attention_heads": 12, "head_dim": 128,
                                       "H_cycles": 2, "L_cycles": 3}  # fmt: skip


def _model_window(v: _View, disable_sliding_window: bool) -> int | None:
    """vLLM's ``CacheConfig.sliding_window``: the config's ``sliding_window`` where its
    ``layer_types`` are absent or all sliding, unless ``--disable-sliding-window``."""
    types = v.cfg.get("layer_types")
    uniform = types is None or isinstance(types, list) and all(t == "sliding_attention" for t in types)
    window = v.opt_int("sliding_window", 0) or None
    return None if disable_sliding_window or not uniform else window


def hrm_text_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                    disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for an HRM-Text config (see the module doc).

    Raises:
        ConfigError: a drafter, ``tp`` not dividing the heads, or a key missing or invalid.
    """
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {HRM_TEXT}",
                          "architectures")  # fmt: skip
    v = _View({**cfg, **{k: x for k, x in _DEFAULTS.items() if k not in cfg}}, "config.json", engine="vllm")
    per_stack = v.opt_int("num_layers_per_stack") or v.req_int("num_hidden_layers")
    heads, tp = v.req_int("num_attention_heads"), engine.tp
    if heads % tp:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: num_attention_heads={heads} must be divisible by "
                          f"tp_size={tp}", "num_attention_heads")  # fmt: skip
    high, low = v.req_int("H_cycles", minimum=0), v.req_int("L_cycles", minimum=0)
    steps = {"L": [h * (low + 1) + j for h in range(high) for j in range(low)],
             "H": [h * (low + 1) + low for h in range(high)]}  # fmt: skip
    window = _model_window(v, disable_sliding_window)
    head_dim = v.req_int("head_dim")
    return [LayerSpec(f"model.{stack}_module.layers.{step * per_stack + i}.self_attn.attn",
                      "sliding" if window else "full", heads // tp, head_dim, head_size_v=head_dim,
                      kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, sliding_window=window)
            for stack in ("L", "H") for i in range(per_stack) for step in steps[stack]]  # fmt: skip
