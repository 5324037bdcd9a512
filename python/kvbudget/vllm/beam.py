"""vLLM 0.33.0's Beam (``BeamForCausalLM``, ``vllm/models/beam``, its NVIDIA ``model.py`` and
``attention.py``): GQA layers, sliding or NoPE full attention by ``layer_types``.

The config is vLLM's own ``BeamConfig`` (``transformers_utils/configs/beam.py``, registered for
``beam``), which refuses a ``layer_types`` / ``mlp_layer_types`` that is not one valid entry per layer
(default: every layer sliding, every MLP sparse) and a per-type ``rope_parameters`` with other than
one non-null entry. Then, as vLLM builds the model (``SupportsPP``; layers split by
``get_pp_indices``):

* ``BeamModel`` clears the cache config's model-wide window (``cache_config.sliding_window = None``),
  so a full-attention layer never takes one;
* each ``BeamAttention`` at ``model.layers.<i>.self_attn.attn`` asserts that ``tp`` divides
  ``num_attention_heads`` and that the KV heads and ``tp`` divide one another; it keeps
  ``max(1, num_key_value_heads // tp)`` KV heads of ``head_dim`` (else ``hidden_size //
  num_attention_heads``), and a sliding layer passes the config's ``sliding_window`` as its own window
  (``--disable-sliding-window`` sets that to None first: the layer is then full);
* ``BeamForCausalLM`` refuses tied embeddings (``NotImplementedError``) once the model is built (and
  EPLB or sequence-parallel MoE, which kvbudget's engine settings do not have).

Drafters (Beam's DFlash2 head) are refused as unchecked. Held to vLLM's classes by
``tests/test_vllm_beam.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.refusal import gqa_per_rank, refused
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["BEAM", "beam_layers"]

BEAM: Final = "BeamForCausalLM"
#: vLLM 0.33.0's ``BeamConfig`` defaults of the keys read here (``layer_types``: all sliding).
_DEFAULTS: Final[Mapping[str, Any]] = {"num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4,
                                       "hidden_size": 2048, "sliding_window": 4096,
                                       "tie_word_embeddings": False}  # fmt: skip




def _config_checks(v: _View, n: int) -> list[str]:
    """``BeamConfig.__init__``'s checks; its layer types."""
    types = v.cfg.get("layer_types")
    types = ["sliding_attention"] * n if types is None else types
    if not isinstance(types, list) or len(types) != n or any(t not in ("full_attention", "sliding_attention")
                                                             for t in types):  # fmt: skip
        raise refused("ValueError: layer_types must contain one valid attention type per layer.", "layer_types")
    mlp = v.cfg.get("mlp_layer_types")
    if mlp is not None and (not isinstance(mlp, list) or len(mlp) != n or any(t not in ("dense", "sparse")
                                                                              for t in mlp)):  # fmt: skip
        raise refused("ValueError: mlp_layer_types must contain one 'dense' or 'sparse' entry per layer.",
                      "mlp_layer_types")  # fmt: skip
    rope = v.cfg.get("rope_parameters")
    if isinstance(rope, Mapping) and set(rope) <= {"sliding_attention", "full_attention"}:
        if sum(p is not None for p in rope.values()) != 1:
            raise refused("ValueError: Beam expects RoPE parameters for exactly one type.", "rope_parameters")
    return types


def beam_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Beam config (see the module doc).

    Raises:
        ConfigError: a drafter, or what vLLM's config class or model refuses (layer-type lists, heads
            over ``tp``, tied embeddings), or a key missing or invalid.
    """
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {BEAM}", "architectures")
    v = _View({**_DEFAULTS, **cfg}, "config.json", engine="vllm")
    n = v.req_int("num_hidden_layers", minimum=0)
    types = _config_checks(v, n)
    tp = engine.tp
    heads, kv = v.req_int("num_attention_heads"), v.req_int("num_key_value_heads")
    window = None if disable_sliding_window else v.opt_int("sliding_window")
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):  # each layer's BeamAttention, as built
            per_rank = gqa_per_rank(heads, kv, tp, "num_key_value_heads")
            dim = v.opt_int("head_dim", 0) or v.req_int("hidden_size") // heads
            sliding = window if types[i] == "sliding_attention" else None
            out.append(LayerSpec(f"model.layers.{i}.self_attn.attn", "sliding" if sliding else "full", per_rank, dim,
                                 head_size_v=dim, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                 sliding_window=sliding, pp_stage=stage))  # fmt: skip
    if v.raw("tie_word_embeddings"):
        raise refused("NotImplementedError: Beam requires tie_word_embeddings=False.", "tie_word_embeddings")
    return out
