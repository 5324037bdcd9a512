"""MiniMax-M3 in the model-reading oracle's tables (:mod:`._hf_tables`, which imports this module at
its end): vLLM 0.33.0's ``vllm/models/minimax_m3`` (NVIDIA branch), its config classes, its KV specs
and the block size its backends make the platform choose. Restated glue, as there: where each
registered class is entered, what is lifted of its files, the stand-ins its namespaces get, and how a
layer's spec becomes a record.

* Entered at ``MiniMaxM3SparseForCausalLM`` (kept to its model), built by
  ``MiniMaxM3SparseForConditionalGeneration``'s own statements: its text hidden-size assert and its
  ``init_vllm_registered_model`` call (lifted; the vision tower is not built: it owns no KV). After the
  model, the startup check of the indexer's metadata builder (``MiniMaxM3IndexerMetadataBuilder``'s
  index-heads-over-TP asserts, lifted), on a stage that holds an indexer cache.
* Kept: ``MiniMaxM3Model`` to its config reads, top-k buffer and layers; ``MiniMaxM3DecoderLayer`` to
  its config, attention kind (``_sparse_attention_layer_ids``) and FFN kind (``_is_moe_layer``);
  ``MiniMaxM3Attention`` to its geometry, asserts and ``Attention``; ``MiniMaxM3SparseAttention`` to
  its geometry, asserts, KV dtypes, backend (``select_main_backend_and_impl_cls``, whole), indexer and
  registration, with its own ``get_kv_cache_spec``; the MoE block to its TP check and shared expert,
  the MLP to its activation check. Whole: ``MiniMaxM3Indexer``'s impl choice
  (``select_indexer_impl_cls``) and ``MiniMaxM3IndexerCache``'s dtype choice and registration (with
  its own ``get_kv_cache_spec``). Inert: norms, linears, the experts, the attention impl.
* The platform: CUDA Hopper (sm90: no MSA kernels, no ROCm AITER); vLLM's ``AttentionConfig``
  defaults (``indexer_kv_dtype`` "auto", no ROCm indexer context parallelism, the Triton MSA decode).
* The configs: vLLM's own ``MiniMaxM3Config`` / ``MiniMaxM3TextConfig`` (registered for
  ``minimax_m3_vl`` over transformers' classes), lifted whole.
* A record (:func:`minimax_m3_record`): the layer's ``get_kv_cache_spec`` on spec stand-ins that keep
  their arguments (the engine's block size a sentinel: ``block_size`` None), and the name of the
  backend the layer reports (``get_attn_backend``). :func:`platform_block_size` is the block size
  ``Platform.update_block_size_for_backend`` picks for a stage's backends and
  :func:`worker_block_size` the kernel block ``select_common_block_size`` takes for a block the user
  gave (both lifted, over the lifted MiniMax-M3 backends and FLASH_ATTN's ``MultipleOf(16)``, its
  kernel blocks on Hopper outside its FA4 cases).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import enum
import functools
import itertools
import math
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import transformers

from oracle_kit.lift import Source
from oracle_kit.strict import StrictModule

from ._hf_lift import _inert, _lift_stmts, _run, _stores
from ._hf_tables import ENTRY, MODELS, NAMESPACES
from ._strict import StrictConfig

__all__ = ["FLASH_ATTN", "MINIMAX_M3_CONFIGS", "minimax_m3_config_class", "minimax_m3_record", "platform_block_size",
           "worker_block_size"]  # fmt: skip

_PKG = "models/minimax_m3"
_MODEL, _INDEXER, _SPARSE = f"{_PKG}/nvidia/model", f"{_PKG}/common/indexer", f"{_PKG}/common/sparse_attention"
#: model_type -> vLLM's own config class for it (``transformers_utils/config.py``'s ``_CONFIG_REGISTRY``).
MINIMAX_M3_CONFIGS = {"minimax_m3_vl": "MiniMaxM3Config"}
#: The backend of a plain ``Attention`` layer (restated: vLLM's first choice on Hopper).
FLASH_ATTN = "FLASH_ATTN"
_ENGINE_BLOCK = object()  # the engine's block size, as the record's config hands it to get_kv_cache_spec
_INDEXER_ROLE = object()  # SparseCacheRole.INDEXER


def _root() -> Any:
    from ._hf import _root as root

    return root()


@functools.cache
def _configs() -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.minimax_m3_configs", "Any": Any,
                          "PreTrainedConfig": transformers.PreTrainedConfig}  # fmt: skip
    Source(_root(), "vllm/transformers_utils/configs/minimax_m3.py").lift(ns, "MiniMaxM3TextConfig", "MiniMaxM3Config")
    return ns


def minimax_m3_config_class(model_type: str) -> Any:
    """vLLM's own config class for ``model_type`` (a key of :data:`MINIMAX_M3_CONFIGS`), lifted."""
    return _configs()[MINIMAX_M3_CONFIGS[model_type]]


@dataclass(frozen=True)
class _Backend:
    """Restated: a backend class the model files name, by its class name (the lifted class is
    looked up by it when a block size is chosen)."""

    cls: str


def _importer(modules: dict[str, Any]) -> dict[str, Any]:
    """Builtins whose ``import`` serves ``modules`` (the lifted functions' own imports)."""

    def importer(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if name in modules:
            return StrictModule(name, modules[name])
        return builtins.__import__(name, globals, locals, fromlist, level)

    return dict(builtins.__dict__, __import__=importer)


@functools.cache
def _backends() -> dict[str, Any]:
    """The lifted backends (``AttentionBackend``'s block-size methods, the two MiniMax-M3 backends,
    FLASH_ATTN restated), the platform's and the worker's block-size choices."""
    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.minimax_m3_backends", "dataclass": dataclass, "math": math,
                          "itertools": itertools, "ClassVar": typing.ClassVar, "torch": torch}  # fmt: skip
    backend = Source(_root(), "vllm/v1/attention/backend.py")
    backend.lift(ns, "MultipleOf")
    ns["__builtins__"] = _importer({"vllm.config.vllm": {"set_current_vllm_config": lambda c: contextlib.nullcontext()},
                                    "vllm.v1.attention.backend": {"MultipleOf": ns["MultipleOf"]}})  # fmt: skip
    ns["AttentionBackend"] = backend.lift_class(
        ns, "AttentionBackend", ("get_supported_kernel_block_sizes", "supports_block_size", "get_preferred_block_size"),
        ("object",))  # fmt: skip
    members = ("get_name", "get_supported_kernel_block_sizes")
    for file, cls in ((_SPARSE, "MiniMaxM3SparseBackend"), (_INDEXER, "MiniMaxM3IndexerBackend")):
        ns[cls] = Source(_root(), f"vllm/{file}.py").lift_class(ns, cls, members, ("AttentionBackend",))
    multiple = ns["MultipleOf"]
    ns["FlashAttentionBackend"] = type("FlashAttentionBackend", (ns["AttentionBackend"],), {
        "get_name": staticmethod(lambda: FLASH_ATTN),
        "get_supported_kernel_block_sizes": staticmethod(lambda kv_cache_spec=None: [multiple(16)])})  # fmt: skip
    ns["preferred"] = Source(_root(), "vllm/platforms/interface.py").lift_member(
        ns, "Platform", "_preferred_block_size_for_backends").__func__  # fmt: skip
    Source(_root(), "vllm/v1/worker/utils.py").lift(ns, "_block_size_is_supported", "select_common_block_size")
    ns["by_name"] = {c.get_name(): c for c in (ns["FlashAttentionBackend"], ns["MiniMaxM3SparseBackend"],
                                               ns["MiniMaxM3IndexerBackend"])}  # fmt: skip
    return ns


def _classes(names: Sequence[str]) -> list[Any]:
    """The lifted backends named (in order, each once)."""
    b = _backends()["by_name"]
    return [b[n] for n in dict.fromkeys(names)]


def platform_block_size(backends: Sequence[str]) -> int:
    """``Platform.update_block_size_for_backend``'s block size, tokens, for a worker whose layers
    report ``backends`` (names, in layer order) when the user gave no ``--block-size``."""
    return int(_backends()["preferred"](object, _classes(backends), 16, None))


def worker_block_size(block_size: int, backends: Sequence[str]) -> int:
    """``select_common_block_size``: the kernel block, tokens, the backends run a ``block_size`` the
    user gave in (its ``ValueError`` when they share none)."""
    classes = _classes(backends)
    return int(_backends()["select_common_block_size"](block_size, classes, [None] * len(classes)))


@functools.cache
def _quant() -> dict[str, Any]:
    """``get_kv_quant_mode`` and ``KVQuantMode`` (``v1/kv_cache_interface.py``) over vLLM's (empty)
    handler table (``config/cache.py``), lifted."""
    cache: dict[str, Any] = {"__name__": "vllm_oracle.hf.minimax_m3_cache", "Any": Any}
    Source(_root(), "vllm/config/cache.py").lift(cache, "_KV_CACHE_DTYPE_HANDLERS", "get_kv_cache_dtype_handler")
    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.minimax_m3_quant", "IntEnum": enum.IntEnum,
                          "__builtins__": _importer({"vllm.config.cache": {
                              "get_kv_cache_dtype_handler": cache["get_kv_cache_dtype_handler"]}})}  # fmt: skip
    Source(_root(), "vllm/v1/kv_cache_interface.py").lift(ns, "KVQuantMode", "get_kv_quant_mode")
    torch_utils: dict[str, Any] = {"__name__": "vllm_oracle.hf.minimax_m3_torch_utils", "torch": torch}
    Source(_root(), "vllm/utils/torch_utils.py").lift(torch_utils, "STR_DTYPE_TO_TORCH_DTYPE",
                                                      "kv_cache_dtype_str_to_dtype")  # fmt: skip
    ns["kv_cache_dtype_str_to_dtype"] = torch_utils["kv_cache_dtype_str_to_dtype"]
    return ns


@functools.cache
def _attention_config() -> Any:
    """vLLM's ``AttentionConfig`` defaults the MiniMax-M3 classes read, with its
    ``resolve_indexer_kv_dtype`` (lifted)."""
    resolve = Source(_root(), "vllm/config/attention.py").lift_member(
        {"__name__": "vllm_oracle.hf.minimax_m3_attention"}, "AttentionConfig", "resolve_indexer_kv_dtype")  # fmt: skip
    cls = type("AttentionConfig", (StrictConfig,), {"resolve_indexer_kv_dtype": resolve})
    return cls(indexer_kv_dtype="auto", minimax_m3_indexer_cp=False, minimax_m3_msa_decode_backend="triton")


class _WithAttention:
    """Restated: the build's ``VllmConfig`` with vLLM's default ``attention_config``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.attention_config = _attention_config()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _current() -> Any:
    from ._hf import _ctx

    return _WithAttention(_ctx("vllm_config"))


def _spec(kind: str) -> Any:
    """A spec class stand-in: the spec's kind and the arguments it was built with."""
    return lambda **kw: {"kind": kind, **kw}


@functools.cache
def _wrapper_code() -> Any:
    """``MiniMaxM3SparseForConditionalGeneration.__init__``'s text hidden-size assert and its
    ``init_vllm_registered_model`` call, lifted."""
    src = Source(_root(), f"vllm/{_MODEL}.py")
    names = {"config", "text_hidden_size", "self.language_model"}
    return _lift_stmts(src, "MiniMaxM3SparseForConditionalGeneration", "__init__", lambda s: (
        isinstance(s, (ast.Assign, ast.AnnAssign)) and bool(_stores(s)) and _stores(s) <= names) or (
        isinstance(s, ast.Assert) and ast.unparse(s.test) == "text_hidden_size is not None"))  # fmt: skip


@functools.cache
def _builder_check() -> Any:
    """``MiniMaxM3IndexerMetadataBuilder.__init__``'s index-heads-over-TP asserts, lifted."""
    src = Source(_root(), f"vllm/{_INDEXER}.py")
    names = {"hf_config", "text_config", "sparse_cfg", "total_index_heads", "tp_size"}
    return _lift_stmts(src, "MiniMaxM3IndexerMetadataBuilder", "__init__", lambda s: (
        isinstance(s, ast.Assign) and bool(_stores(s)) and _stores(s) <= names) or (
        isinstance(s, ast.If) and ast.unparse(s.test) == "total_index_heads >= tp_size"))  # fmt: skip


def _causal_lm(*, vllm_config: Any, prefix: str = "") -> Any:
    """Restated entry: ``MiniMaxM3SparseForCausalLM`` (lifted), then the indexer builder's startup
    check where this stage holds an indexer cache."""
    from ._hf import _env

    models = _env(_root()).models
    built = models[_MODEL]["MiniMaxM3SparseForCausalLM"](vllm_config=vllm_config, prefix=prefix)
    cache = models[_INDEXER]["MiniMaxM3IndexerCache"]
    if any(isinstance(x, cache) for x in vllm_config.compilation_config.static_forward_context.values()):
        _run(_builder_check(), vllm_config=vllm_config,
             get_tensor_model_parallel_world_size=models[_MODEL]["get_tensor_model_parallel_world_size"])  # fmt: skip
    return built


def _conditional_generation(*, vllm_config: Any, prefix: str = "") -> Any:
    """Restated entry: the wrapper's statements that build its text model (lifted)."""
    from ._hf import _env

    env = _env(_root())
    scope = _run(_wrapper_code(), self=StrictConfig(language_model=None), vllm_config=vllm_config, prefix=prefix,
                 maybe_prefix=env.maybe_prefix, init_vllm_registered_model=env.wrapped)  # fmt: skip
    return scope["self"].language_model


ENTRY[("vllm.models.minimax_m3", "MiniMaxM3SparseForCausalLM")] = (f"{_MODEL}:_causal_lm", None, "", False)
ENTRY[("vllm.models.minimax_m3", "MiniMaxM3SparseForConditionalGeneration")] = (
    f"{_MODEL}:_conditional_generation", None, "", False)
_HEADS = """tp_size self.total_num_heads self.num_heads self.total_num_kv_heads self.num_kv_heads self.head_dim
    self.q_size self.kv_size self.scaling""".split() + ["if self.total_num_kv_heads >= tp_size"]  # fmt: skip
MODELS.update({
    _SPARSE: (["_minimax_m3_aiter_sparse_pa_requested", "minimax_m3_use_aiter_sparse_pa",
               "select_main_backend_and_impl_cls"], "", {}),
    _INDEXER: ([("MiniMaxM3IndexerCache", "get_kv_cache_spec", "get_attn_backend", frozenset(
                   """cache_dtype self.head_dim self.indexer_kv_dtype self.dtype self.prefix self.backend_cls
                   compilation_config compilation_config.static_forward_context[prefix]""".split())),
                ("MiniMaxM3IndexerImpl", frozenset("""self.num_kv_heads self.topk_blocks self.num_index_heads
                   self.index_head_dim self.indexer_kv_dtype self.index_cache""".split())),
                "MiniMaxM3IndexerTritonImpl", "select_indexer_impl_cls",
                ("MiniMaxM3Indexer", frozenset({"impl_cls", "self.impl"}))], "", {}),
    _MODEL: (["_sparse_attention_layer_ids", "_is_moe_layer", ("MiniMaxM3MLP", frozenset()),
              ("MiniMaxM3MoE", frozenset({"self.tp_size", "self.n_shared_experts", "self.shared_experts"})),
              ("MiniMaxM3Attention", frozenset(_HEADS + ["self.attn"])),
              ("MiniMaxM3SparseAttention", "get_kv_cache_spec", "get_attn_backend", frozenset(_HEADS + """sparse_cfg
                  self.total_idx_heads self.num_idx_heads self.idx_head_dim self.index_q_size vllm_config
                  self.layer_name self.kv_cache_dtype self.kv_cache_torch_dtype self.indexer_kv_dtype
                  self.topk_indices_buffer self.attn_backend impl_cls self.impl self.indexer compilation_config
                  compilation_config.static_forward_context[self.layer_name]""".split())),
              ("MiniMaxM3DecoderLayer", frozenset("""config cache_config quant_config layer_id self.layer_id
                  is_sparse_attention_layer self.self_attn reduce_results self.is_moe_layer self.block_sparse_moe
                  self.mlp""".split())),
              ("MiniMaxM3Model", frozenset("""config quant_config self.config sparse_cfg tp_size num_index_heads
                  max_num_batched_tokens padded_num_tokens self.topk_indices_buffer self.start_layer self.end_layer
                  self.layers""".split())),
              ("MiniMaxM3SparseForCausalLM", frozenset("config quant_config self.config self.model".split()))],
             "MiniMAXGemmaRMSNorm MinimaxM3QKVParallelLinearWithIndexer GateLinear FusedMoEFactory",
             {"MiniMaxM3Indexer": _INDEXER, "select_main_backend_and_impl_cls": _SPARSE}),
})  # fmt: skip
_HOPPER = StrictModule("current_platform", {"device_type": "cuda", "is_rocm": lambda: False, "is_cuda": lambda: True,
                                            "is_device_capability_family": lambda family: family == 90,
                                            "supports_fp8": lambda: True})  # fmt: skip
NAMESPACES.update({
    _SPARSE: {"current_platform": _HOPPER, "MiniMaxM3SparseBackend": _Backend("MiniMaxM3SparseBackend"),
              "MiniMaxM3SparseTritonImpl": _inert("MiniMaxM3SparseTritonImpl"),
              "get_kv_quant_mode": lambda s: _quant()["get_kv_quant_mode"](s),
              "rocm_aiter_ops": StrictModule("rocm_aiter_ops", {"is_enabled": lambda: False})},
    _INDEXER: {"current_platform": _HOPPER, "torch": torch, "get_current_vllm_config": _current,
               "MiniMaxM3IndexerBackend": _Backend("MiniMaxM3IndexerBackend"), "MLAAttentionSpec": _spec("mla"),
               "SparseCacheRole": StrictModule("SparseCacheRole", {"INDEXER": _INDEXER_ROLE})},
    # restated: the top-k buffer on the meta device
    _MODEL: {"torch": StrictModule("torch", {"empty": functools.partial(torch.empty, device="meta"),
                                             "int32": torch.int32}),
             "get_current_vllm_config": _current, "FullAttentionSpec": _spec("full"),
             "get_kv_quant_mode": lambda s: _quant()["get_kv_quant_mode"](s),
             "kv_cache_dtype_str_to_dtype": lambda s, mc: _quant()["kv_cache_dtype_str_to_dtype"](s, mc),
             "_causal_lm": _causal_lm, "_conditional_generation": _conditional_generation},
})  # fmt: skip


def minimax_m3_record(layer: Any) -> dict[str, Any] | None:
    """The spec fields of a MiniMax-M3 sparse attention layer (its main K/V cache) or indexer cache,
    and its backend's name; None for any other layer."""
    from ._hf import _env

    models = _env(_root()).models
    sparse, cache = models[_MODEL]["MiniMaxM3SparseAttention"], models[_INDEXER]["MiniMaxM3IndexerCache"]
    if not isinstance(layer, (sparse, cache)):
        return None
    spec = layer.get_kv_cache_spec(StrictConfig(cache_config=StrictConfig(block_size=_ENGINE_BLOCK)))
    assert spec["block_size"] is _ENGINE_BLOCK, spec
    out = {"num_kv_heads": spec["num_kv_heads"], "head_size": spec["head_size"], "sliding_window": None,
           "attention_chunk_size": None, "block_size": None,
           "backend": _backends()[layer.get_attn_backend().cls].get_name()}  # fmt: skip
    if isinstance(layer, sparse):
        assert spec["kind"] == "full" and spec["kv_quant_mode"] == _quant()["get_kv_quant_mode"](layer.kv_cache_dtype)
        return {**out, "kind": "full", "head_size_v": spec["head_size_v"], "kv_cache_dtype": layer.kv_cache_dtype}
    assert spec["kind"] == "mla" and spec["cache_role"] is _INDEXER_ROLE and "max_tp_shards" not in spec, spec
    return {**out, "kind": "key_indexer", "head_size_v": None, "kv_cache_dtype": None,
            "indexer_dtype": str(spec["dtype"]).removeprefix("torch.")}  # fmt: skip
