"""vLLM 0.33.0's Step-3.5 (``Step3p5ForCausalLM``, ``models/step3p5.py``).

The config is transformers 5.19.0's ``Step3p7TextConfig`` (vLLM's ``_CONFIG_REGISTRY`` names it for
``step3p5``), whose ``__post_init__`` shapes what vLLM reads:

* ``num_attention_groups`` is ``num_key_value_heads`` (``attribute_map``; ``moe_num_experts`` is
  ``n_routed_experts``); per-layer lists padded with ``num_nextn_predict_layers`` MTP entries are
  cut to ``num_hidden_layers``, and ``layer_types`` must then hold one entry per layer (default: all
  full attention);
* ``mlp_layer_types`` defaults from the legacy ``moe_layers_enum`` (else every layer from the
  fourth is sparse);
* ``num_sliding_attention_heads`` defaults from the legacy ``attention_other_setting``'s
  ``num_attention_heads`` (else ``num_attention_heads``), and ``per_layer_config`` may give a layer
  its own ``num_attention_heads``;
* ``rope_parameters`` becomes one dict per layer type (kept if saved so, else built from the first
  layer of each type's ``rope_theta`` / ``partial_rotary_factors``).

vLLM then builds, per PP stage (``SupportsPP``), ``model.layers.<i>.self_attn.attn`` for each layer
(``Step3p5DecoderLayer`` clears the cache config's model-wide window first):

* heads: a sliding layer's ``num_sliding_attention_heads``, else the layer's ``per_layer_config``
  heads, else ``num_attention_heads``; ``max(1, num_attention_groups // tp)`` KV heads after vLLM's
  asserts; ``head_dim`` (else ``hidden_size // heads``); a sliding layer's window is the config's
  ``sliding_window`` (none with ``--disable-sliding-window``), a full layer none;
* refusals, as vLLM raises them: ``att_impl_type`` other than ``GQA``, a partial rotary factor other
  than 1 or 0.5; on a sparse (MoE) layer ``tp`` above the experts, ``use_moe_router_bias`` /
  ``need_fp32_gate`` unset or false, ``norm_expert_weight`` unset, a SwiGLU limit other than 7; and
  a PP stage holding no MoE layer (``Step3p5ForCausalLM``'s assert).

Drafters (``Step3p5MTP``) and ``sparse_attention_config`` layer kinds are refused as unchecked. Held
to vLLM's classes by ``tests/test_vllm_step3p5.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.refusal import gqa_per_rank, refused
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["STEP3P5", "step3p5_layers"]

STEP3P5: Final = "Step3p5ForCausalLM"
#: transformers 5.19.0's ``Step3p7TextConfig`` defaults of the keys read here.
_DEFAULTS: Final[Mapping[str, Any]] = {"num_hidden_layers": 45, "num_attention_heads": 64, "num_key_value_heads": 8,
                                       "head_dim": 128, "hidden_size": 4096, "n_routed_experts": 288,
                                       "max_position_embeddings": 128000}  # fmt: skip
_ALIASES: Final[Mapping[str, str]] = {"num_attention_groups": "num_key_value_heads",
                                      "moe_num_experts": "n_routed_experts",
                                      "num_mtp_layers": "num_nextn_predict_layers"}  # fmt: skip




def _trimmed(value: Any, n: int, padded: int) -> Any:
    return value[:n] if isinstance(value, list) and len(value) == padded and padded != n else value


class _Config:
    """What ``Step3p7TextConfig.__post_init__`` leaves of a config dict (see the module doc)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        raw = {_ALIASES.get(k, k): x for k, x in cfg.items()}
        self.v = v = _View({**_DEFAULTS, **raw}, "config.json", engine="vllm")
        self.raw = raw
        n = self.n = v.req_int("num_hidden_layers", minimum=0)
        padded = n + (v.opt_int("num_nextn_predict_layers", 0) or 0)
        if raw.get("sparse_attention_config"):
            raise ConfigError("config.json: sparse_attention_config: kvbudget has not checked vLLM 0.33.0's Step-3.5 "
                              "on sparse attention layers", "sparse_attention_config")  # fmt: skip
        types = _trimmed(raw.get("layer_types"), n, padded)
        self.types: list[str] = ["full_attention"] * n if types is None else types
        if not isinstance(self.types, list) or len(self.types) != n:
            raise ConfigError("config.json: transformers 5.19.0's Step3p7TextConfig refuses it: layer_types must "
                              "hold one entry per layer", "layer_types")  # fmt: skip
        mlp = _trimmed(raw.get("mlp_layer_types"), n, padded)
        if mlp is None:
            enum = raw.get("moe_layers_enum")
            items: list[Any] = enum.split(",") if isinstance(enum, str) else list(enum or [])
            moe = set(range(3, n)) if enum is None else {int(i) for i in items if str(i).strip()}
            mlp = ["sparse" if i in moe else "dense" for i in range(n)]
        self.mlp: list[Any] = mlp
        self.swiglu: list[Any] = _trimmed(raw.get("swiglu_limits"), n, padded) or []
        heads = v.req_int("num_attention_heads")
        other = raw.get("attention_other_setting")
        sliding = raw.get("num_sliding_attention_heads")
        self.sliding_heads: int = sliding or (other.get("num_attention_heads", heads) if other else heads)
        self.per_layer = raw.get("per_layer_config") or {}
        if isinstance(self.per_layer, Mapping) and any(not str(k).isdigit() or int(k) >= n for k in self.per_layer):
            raise ConfigError(f"config.json: transformers 5.19.0 refuses it: per_layer_config keys must be layer "
                              f"indices in [0, {n})", "per_layer_config")  # fmt: skip
        self.rotary = self._rotary_factors(_trimmed(raw.get("partial_rotary_factors"), n, padded))

    def _rotary_factors(self, factors: Any) -> dict[str, Any]:
        rp = self.raw.get("rope_parameters") or {}
        kinds = set(self.types)
        if all(isinstance(rp.get(k), Mapping) for k in kinds):  # saved per layer type
            return {k: rp[k].get("partial_rotary_factor", 1.0) for k in kinds}
        return {k: factors[self.types.index(k)] if factors else 1.0 for k in kinds}

    def heads(self, i: int) -> int:
        """``_get_num_attention_heads``: the sliding heads, the layer's own, else the model's."""
        if self.types[i] == "sliding_attention" and self.sliding_heads:
            return self.sliding_heads
        own = self.per_layer.get(str(i), self.per_layer.get(i)) if isinstance(self.per_layer, Mapping) else None
        value = own.get("num_attention_heads") if isinstance(own, Mapping) else None
        return int(value) if isinstance(value, int) else self.v.req_int("num_attention_heads")

    def moe_checks(self, i: int, tp: int) -> None:
        """``FusedMoEBlock.__init__``'s refusals for layer ``i``."""
        experts = self.v.req_int("n_routed_experts")
        if tp > experts:
            raise refused(f"ValueError: Tensor parallel size {tp} is greater than the number of experts {experts}.",
                          "moe_num_experts")  # fmt: skip
        for key in ("use_moe_router_bias", "need_fp32_gate"):
            if key not in self.raw:
                raise refused(f"AttributeError: the config has no {key}", key)
            if not self.raw[key]:
                raise refused(f"AssertionError: Step-3.5's MoE block needs {key}", key)
        limit = self.swiglu[i] if i < len(self.swiglu) else None
        if limit not in (None, 0) and float(limit) != 7.0:
            raise refused("AssertionError: Swiglu limit in fused moe block only support 7.0 now.", "swiglu_limits")
        if "norm_expert_weight" not in self.raw:
            raise refused("AttributeError: the config has no norm_expert_weight", "norm_expert_weight")


def step3p5_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                   disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Step-3.5 config (see the module doc).

    Raises:
        ConfigError: a drafter, sparse attention, or what transformers' config class or vLLM's model
            refuses (see the module doc), or a key missing or invalid.
    """
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {STEP3P5}",
                          "architectures")  # fmt: skip
    c = _Config(cfg)
    v, tp = c.v, engine.tp
    kv = v.req_int("num_key_value_heads")
    window = None if disable_sliding_window else v.opt_int("sliding_window")
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(c.n, engine.pp)):
        for i in range(start, end):  # Step3p5DecoderLayer, as built
            if c.raw.get("att_impl_type", "GQA") != "GQA":
                raise refused(f"ValueError: Unsupported attention implementation: {c.raw['att_impl_type']}",
                              "att_impl_type")  # fmt: skip
            v.req_int("max_position_embeddings")
            heads = c.heads(i)
            per_rank = gqa_per_rank(heads, kv, tp, "num_attention_groups", f" (layer {i})")
            dim = v.opt_int("head_dim", 0) or v.req_int("hidden_size") // heads
            if c.rotary[c.types[i]] not in (1, 0.5):
                raise refused(f"AssertionError: partial_rotary_factor {c.rotary[c.types[i]]} (1 or 0.5)",
                              "partial_rotary_factors")  # fmt: skip
            sliding = window if c.types[i] == "sliding_attention" else None
            out.append(LayerSpec(f"model.layers.{i}.self_attn.attn", "sliding" if sliding else "full", per_rank, dim,
                                 head_size_v=dim, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                 sliding_window=sliding, pp_stage=stage))  # fmt: skip
            if i < len(c.mlp) and c.mlp[i] == "sparse":
                c.moe_checks(i, tp)
        if not any(i < len(c.mlp) and c.mlp[i] == "sparse" for i in range(start, end)):
            raise refused(f"AssertionError: No MoE layers found in the model (PP stage {stage})", "mlp_layer_types")
    return out
