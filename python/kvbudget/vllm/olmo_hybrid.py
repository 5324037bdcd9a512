"""vLLM 0.33.0's reading of OLMo Hybrid (``OlmoHybridForCausalLM``, ``models/olmo_hybrid.py``): gated
delta nets beside full attention.

``OlmoHybridModel`` builds ``num_hidden_layers`` decoder layers (``make_layers``: PP stages as vLLM
splits them); layer ``i`` is ``config.layer_types[i]``:

* ``linear_attention``: ``OlmoHybridGatedDeltaNetAttention`` at ``model.layers.{i}.linear_attn``
  (``models/layers/mamba/gdn/olmo_gdn_linear_attn.py``; it asserts ``linear_use_gate``), with the
  gated delta net's conv state ``(k - 1, (2·nk·dk + nv·dv) / tp)`` and recurrent state
  ``(nv / tp, dv, dk)`` (``MambaStateShapeCalculator.gated_delta_net_state_shape``, as the model
  class's ``get_mamba_state_shape_from_config`` reports it too), in the
  ``gated_delta_net_state_dtype`` dtypes (no config hook). It always runs FLA's prefill: no prefill
  checkpoints (Qwen's gated delta net exports them with FlashInfer's).
* any other kind: ``OlmoHybridAttention`` at ``model.layers.{i}.self_attn.attn``: head size
  ``hidden_size / num_attention_heads`` (asserted to divide), ``max(1, kv / tp)`` KV heads
  (``num_key_value_heads``, else the heads; the usual TP assertions) and no window: the model-wide
  one (``CacheConfig.sliding_window``) is set only for a model whose layer types are all sliding,
  and transformers' class requires a ``linear_attention`` layer (and a layer of another kind).

transformers' ``OlmoHybridConfig`` fills what a sparse config leaves out: ``layer_types`` (every
fourth layer full, the last one full if none is), the linear heads (the attention heads), the key
head dim (``int(0.75 · hidden_size / nk)``) and the value head dim (twice that). The class is
``SupportsPP`` but not ``SupportsReplaySSM``; drafters are not read. Held to vLLM's classes by
``tests/test_vllm_olmo_hybrid.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError
from kvbudget.vllm.refusal import refused
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import _attention_template, _state_dtypes, _state_template, check_plain_state_engine

__all__ = ["OLMO_HYBRID_DEFAULTS", "olmo_hybrid_layers"]

#: transformers 5.19.0's ``OlmoHybridConfig`` defaults of the fields read here.
OLMO_HYBRID_DEFAULTS: Final[Mapping[str, int]] = {
    "num_hidden_layers": 32, "hidden_size": 3840, "num_attention_heads": 30, "linear_conv_kernel_dim": 4}  # fmt: skip


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None, minimum: int = 1) -> int:
    v = cfg.get(key)
    if v is None:
        v = OLMO_HYBRID_DEFAULTS.get(key) if default is None else default
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"config.json: key {key!r} must be an integer >= {minimum}, got {v!r}", key)
    return v




def _kinds(cfg: Mapping[str, Any], n: int) -> list[str]:
    given = cfg.get("layer_types")
    if given is None:  # OlmoHybridConfig.__post_init__
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if n and "full_attention" not in kinds:
            kinds[-1] = "full_attention"
        given = kinds
    elif not isinstance(given, list) or not all(isinstance(t, str) for t in given) or len(given) != n:
        raise ConfigError(f"config.json: transformers' OlmoHybridConfig refuses it: layer_types must name a kind for "
                          f"each of the {n} layers", "layer_types")  # fmt: skip
    if "linear_attention" not in given:  # OlmoHybridConfig.validate_architecture
        raise ConfigError("config.json: transformers' OlmoHybridConfig refuses it: OLMoHybrid expects at least one "
                          "'linear_attention' layer.", "layer_types")  # fmt: skip
    if all(t == "linear_attention" for t in given):
        raise ConfigError("config.json: transformers' OlmoHybridConfig refuses it: OLMoHybrid expects at least one "
                          "attention layer.", "layer_types")  # fmt: skip
    return list(given)


def olmo_hybrid_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                       cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for an OLMo Hybrid config (see the module doc), for
    ``engine``'s TP and PP; ``cache_dtypes``: ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype``.

    Raises:
        ConfigError: what vLLM (or transformers' config class) refuses, a drafter, or ReplaySSM.
    """
    check_plain_state_engine("OlmoHybridForCausalLM", engine)
    tp, n = engine.tp, _int(cfg, "num_hidden_layers", minimum=0)
    hidden, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    kinds = _kinds(cfg, n)
    attention: LayerSpec | None = None
    if any(k != "linear_attention" for k in kinds):
        if hidden % heads or heads % tp:
            raise refused(f"OlmoHybridAttention asserts num_attention_heads ({heads}) divides hidden_size ({hidden}) "
                          f"and tp={tp} divides the heads", "num_attention_heads")  # fmt: skip
        kv = _int(cfg, "num_key_value_heads", heads)
        if (kv >= tp and kv % tp) or (kv < tp and tp % kv) or (heads // tp) % max(1, kv // tp):
            raise refused(f"{heads} attention heads and {kv} KV heads do not shard over tp={tp}",
                          "num_key_value_heads")  # fmt: skip
        attention = _attention_template(max(1, kv // tp), hidden // heads, None, kv_cache_dtype, model_dtype)
    state: LayerSpec | None = None
    if "linear_attention" in kinds:
        if not cfg.get("linear_use_gate", True):
            raise refused("AssertionError: OlmoHybridGatedDeltaNet requires linear_use_gate=True", "linear_use_gate")
        nk, nv = _int(cfg, "linear_num_key_heads", heads), _int(cfg, "linear_num_value_heads", heads)
        dk = _int(cfg, "linear_key_head_dim", int(0.75 * hidden / nk))
        dv = _int(cfg, "linear_value_head_dim", 2 * dk)
        try:
            shapes = _core._vllm_state_shapes("gated_delta_net", [tp, nk, nv, dk, dv,
                                                                  _int(cfg, "linear_conv_kernel_dim"), 0])  # fmt: skip
        except ValueError as e:
            raise refused(str(e), "linear_num_value_heads") from None
        state = _state_template(shapes, _state_dtypes(model_dtype, *cache_dtypes), "gdn_attn", model_dtype)
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if kinds[i] == "linear_attention":
                assert state is not None
                out.append(replace(state, name=f"model.layers.{i}.linear_attn", pp_stage=stage))
            else:
                assert attention is not None
                out.append(replace(attention, name=f"model.layers.{i}.self_attn.attn", pp_stage=stage))
    return out
