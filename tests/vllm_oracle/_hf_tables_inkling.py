"""Inkling in the model-reading oracle's tables (:mod:`._hf_tables`, which imports this module at its
end): vLLM 0.33.0's ``vllm/models/inkling`` (NVIDIA branch), its config classes and its KV specs.
Restated glue, as there: where each registered class is entered, what is lifted of its files, the
stand-ins its namespaces get, and how a layer's spec becomes a record.

* Entered at ``InklingForCausalLM`` / ``InklingForConditionalGeneration`` themselves (their
  ``__init__`` and ``_TmlForCausalLMBase._build`` whole), after the heads check of
  ``ModelConfig.verify_with_parallel_config`` (lifted): vLLM makes it for every model, and the oracle
  runs it here because Inkling's sliding layers take ``swa_num_attention_heads``, so the model
  build alone does not reach the config's ``num_attention_heads`` when every layer is local.
* Whole: ``InklingModel``, ``InklingDecoderLayer``, the towers' constructors (``InklingVision``,
  ``HMLPPatchEncoder`` with ``plan_out_scales``, ``InklingAudio``: their checks; their linears,
  embeddings and norms inert) and ``inkling_*_enabled``. Kept: ``InklingConvState`` and
  ``InklingAttention`` to their geometry, asserts, window, dtypes and registration (with their own
  ``get_kv_cache_spec``), ``InklingMoE`` to its asserts. Inert: the norms, MLPs, short convolutions,
  embedding and logits processor; Lamport's collective setup (it owns no KV and catches its failures).
* The configs: vLLM's own ``InklingModelConfig`` / ``InklingMMConfig`` (registered for
  ``inkling_model`` / ``inkling_mm_model`` over transformers' classes), lifted whole.
* A record (:func:`inkling_record`): the layer's ``get_kv_cache_spec`` on spec stand-ins that keep
  their arguments; ``head_size_v`` defaults to ``head_size`` as ``AttentionSpec.__post_init__``
  does; the engine's block size is a sentinel (``block_size`` None); ``kv_cache_dtype`` is the
  attention's cache-config string, and ``"auto"`` for a conv state whose spec stores the model dtype.
"""

from __future__ import annotations

import ast
import builtins
import functools
import itertools
import re
import typing
from dataclasses import dataclass, field
from typing import Any

import numpy
import torch
import transformers

from oracle_kit.lift import Source
from oracle_kit.strict import Poison

from ._hf_lift import _lift_stmts, _run, _stores
from ._hf_tables import ENTRY, MODELS, NAMESPACES
from ._strict import StrictConfig

__all__ = ["INKLING_CONFIGS", "inkling_config_class", "inkling_record"]

_PKG = "models/inkling"
_MODEL, _ATTN, _SCONV = f"{_PKG}/nvidia/model", f"{_PKG}/nvidia/attention", f"{_PKG}/nvidia/sconv_swa_attn"
_MOE, _TOWERS, _MM = f"{_PKG}/nvidia/moe", f"{_PKG}/common/towers", f"{_PKG}/common/mm_preprocess"
#: model_type -> vLLM's own config class for it (``transformers_utils/config.py``'s ``_CONFIG_REGISTRY``).
INKLING_CONFIGS = {"inkling_model": "InklingModelConfig", "inkling_mm_model": "InklingMMConfig"}
_ENGINE_BLOCK = object()  # the engine's block size, as the record's config hands it to get_kv_cache_spec


@functools.cache
def _configs() -> dict[str, Any]:
    from ._hf import _root

    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.inkling_configs", "PreTrainedConfig": transformers.PreTrainedConfig,
                          "Any": Any, "ClassVar": typing.ClassVar, "Literal": typing.Literal, "cast": typing.cast,
                          "torch": torch, "dataclass": dataclass, "field": field}  # fmt: skip
    Source(_root(), f"vllm/{_PKG}/configs.py").lift(
        ns, "InklingModelConfig", "InklingAudioConfig", "InklingVisionConfig", "InklingMMConfig")
    return ns


def inkling_config_class(model_type: str) -> Any:
    """vLLM's own config class for ``model_type`` (a key of :data:`INKLING_CONFIGS`), lifted."""
    return _configs()[INKLING_CONFIGS[model_type]]


@functools.cache
def _torch_utils() -> dict[str, Any]:
    from ._hf import _root

    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.inkling_torch_utils", "torch": torch}
    Source(_root(), "vllm/utils/torch_utils.py").lift(ns, "STR_DTYPE_TO_TORCH_DTYPE", "kv_cache_dtype_str_to_dtype")
    return ns


def _kv_cache_dtype_str_to_dtype(kv_cache_dtype: str, model_config: Any) -> Any:
    return _torch_utils()["kv_cache_dtype_str_to_dtype"](kv_cache_dtype, model_config)


@functools.cache
def _heads_check() -> Any:
    """``ModelConfig.verify_with_parallel_config``'s ``tp``-divides-the-heads check, lifted."""
    from ._hf import _root

    names = {"total_num_attention_heads", "tensor_parallel_size"}
    return _lift_stmts(Source(_root(), "vllm/config/model.py"), "ModelConfig", "verify_with_parallel_config",
                       lambda s: (isinstance(s, ast.Assign) and _stores(s) <= names) or (
                           isinstance(s, ast.If) and ast.unparse(s.test) == "total_num_attention_heads % "
                           "tensor_parallel_size != 0"))  # fmt: skip


def _entered(cls: str) -> Any:
    """Restated entry: the heads check on the engine's model and parallel configs, then ``cls``."""

    def enter(*, vllm_config: Any, prefix: str = "") -> Any:
        from ._hf import _env, _root

        _run(_heads_check(), self=vllm_config.model_config, parallel_config=vllm_config.parallel_config)
        return _env(_root()).models[_MODEL][cls](vllm_config=vllm_config, prefix=prefix)

    return enter


def _spec(kind: str) -> Any:
    """A spec class stand-in: the spec's kind and the arguments it was built with."""
    return lambda **kw: {"kind": kind, **kw}


_ENTRIES = {"InklingForCausalLM": "_causal_lm", "InklingForConditionalGeneration": "_conditional_generation"}
for _arch, _name in _ENTRIES.items():
    ENTRY[("vllm.models.inkling", _arch)] = (f"{_MODEL}:{_name}", None, "", False)
_CONV_KEEP = frozenset("""self.prefix tp_size self.num_kv_heads hidden_per_head raw_head_size self.head_size
    self.sliding_window self.block_size vllm_config self._dtype torch compilation_config
    compilation_config.static_forward_context[prefix]""".split())  # fmt: skip
_ATTN_KEEP = frozenset("""self.prefix self.is_local self.head_dim tp_size self.num_total_heads self.num_total_kv_heads
    self.num_heads self.num_kv_heads self.local_extent self.window_size vllm_config cache_config self.kv_cache_dtype
    self.kv_cache_torch_dtype compilation_config compilation_config.static_forward_context[prefix]""".split()
                       + ["if self.num_total_kv_heads >= tp_size"])  # fmt: skip
MODELS.update({
    _MM: (["inkling_vision_enabled", "inkling_audio_enabled"], "", {}),
    _TOWERS: (["_prime_factors", "linear_sum_assignment", "plan_out_scales", "HMLPPatchEncoder", "InklingVision",
               "InklingAudio"], "", {}),
    _SCONV: ([("InklingConvState", "get_kv_cache_spec", _CONV_KEEP)], "", {}),
    _ATTN: ([("InklingAttention", "get_kv_cache_spec", _ATTN_KEEP)], "", {}),
    _MOE: ([("InklingMoE", frozenset())], "", {}),  # its asserts on the config
    _MODEL: (["_layer_id", "InklingDecoderLayer", "InklingModel", ("_TmlForCausalLMBase", "_build"),
              "InklingForCausalLM", "InklingForConditionalGeneration"],
             "InklingRMSNorm InklingDenseMLP InklingShortConv InklingReplicatedEmbedding InklingLogitsProcessor",
             {"InklingConvState": _SCONV, "InklingAttention": _ATTN, "InklingMoE": _MOE, "InklingVision": _TOWERS,
              "InklingAudio": _TOWERS, "inkling_vision_enabled": _MM, "inkling_audio_enabled": _MM}),
})  # fmt: skip
NAMESPACES.update({
    # numpy imports its own modules lazily, under the caller's builtins (the towers' code imports nothing)
    _TOWERS: {"np": numpy, "combinations": itertools.combinations, "__builtins__": builtins},
    _SCONV: {"SlidingWindowSpec": _spec("sliding")},
    _ATTN: {"SlidingWindowSpec": _spec("sliding"), "FullAttentionSpec": _spec("full"),
            "kv_cache_dtype_str_to_dtype": _kv_cache_dtype_str_to_dtype},
    # `import regex as re`: the layer-id pattern reads the same in `re`; the stream indices reach
    # only the inert short convolutions
    _MODEL: {"re": re, "initialize_lamport_rs_conv": lambda *args: None,
             **{n: Poison(f"{n} (a short convolution's stream)") for n in ("_ATTN", "_MLP")},
             **{name: _entered(arch) for arch, name in _ENTRIES.items()}},
})  # fmt: skip


def inkling_record(layer: Any, model_dtype: Any) -> dict[str, Any] | None:
    """The spec fields of an Inkling conv state or attention layer (``model_dtype``: the model
    config's torch dtype); None for any other layer."""
    from ._hf import _env, _root

    models = _env(_root()).models
    conv, attn = models[_SCONV]["InklingConvState"], models[_ATTN]["InklingAttention"]
    if not isinstance(layer, (conv, attn)):
        return None
    spec = layer.get_kv_cache_spec(StrictConfig(cache_config=StrictConfig(block_size=_ENGINE_BLOCK)))
    head_size_v = spec.get("head_size_v")
    if isinstance(layer, attn):
        kv_cache_dtype = layer.kv_cache_dtype
    else:
        kv_cache_dtype = "auto" if spec["dtype"] == model_dtype else str(spec["dtype"]).removeprefix("torch.")
    return {"kind": spec["kind"], "num_kv_heads": spec["num_kv_heads"], "head_size": spec["head_size"],
            "head_size_v": spec["head_size"] if head_size_v is None else head_size_v,
            "sliding_window": spec.get("sliding_window"), "attention_chunk_size": None,
            "block_size": None if spec["block_size"] is _ENGINE_BLOCK else spec["block_size"],
            "kv_cache_dtype": kv_cache_dtype}  # fmt: skip
