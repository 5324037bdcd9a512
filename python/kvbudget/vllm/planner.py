"""vLLM 0.33.0 mode: what vLLM allocates for a model, drafter and budget.

vLLM plans unlike SGLang: one shared block pool per worker, layers grouped by
spec (padding layers included), the drafter's layers joining the target's
groups, a per-request charge that counts the tokens in flight, and a log line
whose "N tokens" is concurrency times ``max_model_len``. :func:`plan` gives
vLLM 0.33.0's own numbers for per-layer specs, each worker's KV budget and the
engine settings, from kvbudget's restatement of vLLM's planner in the Rust
core (``rust/core/src/vllm``); ``tests/test_vllm_plan.py`` holds it to vLLM's
released code, field by field.

Scope: full, sliding-window, chunked-local and MLA attention; vLLM's
FLASH_ATTN defaults (no backend packing, the layer-outer ``LBNHC`` layout).
Block-outer packing, Mamba and hidden-state layers are not modelled.

Example::

    from kvbudget.vllm import EngineConfig, LayerSpec, plan

    layers = [LayerSpec(f"model.layers.{i}.self_attn.attn", "full" if i % 6 == 5 else "sliding",
                        num_kv_heads=16, head_size=128, sliding_window=1024) for i in range(62)]
    p = plan(layers, 40 << 30, EngineConfig(max_model_len=131072))
    p.num_blocks, p.kv_cache_size_tokens     # 32768, 291658
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from kvbudget import _core
from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError

__all__ = [
    "VLLM_VERSION",
    "EngineConfig",
    "LayerSpec",
    "VllmError",
    "VllmGroup",
    "VllmPlan",
    "VllmStartupError",
    "VllmTensor",
    "plan",
]

_DEFAULTS: dict[str, Any] = json.loads(_core._vllm_defaults())
#: The vLLM release whose planner this restates.
VLLM_VERSION: str = _DEFAULTS["version"]

LayerKind = Literal["full", "sliding", "chunked", "mla"]


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer as one vLLM worker registers it (registration order matters).

    Attributes:
        name: the layer's name (e.g. ``model.layers.3.self_attn.attn``); unique per stage.
        kind: ``"full"``, ``"sliding"``, ``"chunked"`` or ``"mla"``.
        num_kv_heads: KV heads on one rank (vLLM: ``max(1, total // tp)``); ignored for MLA.
        head_size: K head dim, elements (MLA: the latent dim, e.g. 576).
        head_size_v: V head dim, elements (default ``head_size``).
        kv_cache_dtype: vLLM's ``--kv-cache-dtype`` (``"auto"``, ``"fp8"``, ``"fp8_e5m2"``,
            ``"fp8_ds_mla"``, ...).
        model_dtype: what ``"auto"`` stores (``"bfloat16"``, ``"float16"``, ``"float32"``).
        sliding_window: the window of a sliding layer, tokens.
        attention_chunk_size: the chunk of a chunked layer, tokens.
        block_size: tokens per block (default: the engine's).
        is_draft: the drafter registered this layer (it groups like a target layer).
        pp_stage: the pipeline stage holding the layer (drafter layers: the last).
    """

    name: str
    kind: LayerKind
    num_kv_heads: int
    head_size: int
    head_size_v: int | None = None
    kv_cache_dtype: str = "auto"
    model_dtype: str = "bfloat16"
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    block_size: int | None = None
    is_draft: bool = False
    pp_stage: int = 0


def _engine_default(name: str) -> Any:
    value = _DEFAULTS["engine"][name]
    if name == "max_model_len":  # the core's tagged form, {"Tokens": n}
        return value["Tokens"]
    return value


@dataclass(frozen=True)
class EngineConfig:
    """vLLM's engine settings that change the plan (defaults: vLLM 0.33.0's, from the core).

    Attributes:
        block_size: ``--block-size``, tokens per block.
        max_model_len: ``--max-model-len``, tokens, or ``"auto"`` (shrink
            ``derived_max_model_len``, the model's own limit, to what fits).
        derived_max_model_len: the model's limit ``"auto"`` starts from, tokens.
        max_num_batched_tokens: ``--max-num-batched-tokens`` (``T``), tokens.
        async_scheduling: async scheduling (in-flight tokens ``F = (pp + 1) * T`` with
            Model Runner V2).
        use_v2_model_runner: Model Runner V2 (the default runner).
        tp, pp, dcp: tensor-, pipeline- and decode-context-parallel sizes.
        num_gpu_blocks_override: ``--num-gpu-blocks-override``, blocks.
        disable_hybrid_kv_cache_manager: ``--disable-hybrid-kv-cache-manager``.
        speculative_method: ``"eagle"``, ``"eagle3"``, ``"mtp"``, ``"dflash"``, ... or None.
        num_speculative_tokens: ``k``.
        num_nextn_predict_layers: the drafter's MTP modules (multi-module MTP retains
            ``k - 1`` extra tokens in sliding layers).
        draft_kv_cache_dtype: ``speculative_config.kv_cache_dtype``: the KV dtype of every
            drafter layer (``is_draft``); None keeps each layer's own ``kv_cache_dtype``.
    """

    block_size: int = field(default_factory=lambda: _engine_default("block_size"))
    max_model_len: int | Literal["auto"] = field(default_factory=lambda: _engine_default("max_model_len"))
    derived_max_model_len: int | None = None
    max_num_batched_tokens: int = field(default_factory=lambda: _engine_default("max_num_batched_tokens"))
    async_scheduling: bool = field(default_factory=lambda: _engine_default("async_scheduling"))
    use_v2_model_runner: bool = field(default_factory=lambda: _engine_default("use_v2_model_runner"))
    tp: int = field(default_factory=lambda: _engine_default("tp"))
    pp: int = field(default_factory=lambda: _engine_default("pp"))
    dcp: int = field(default_factory=lambda: _engine_default("dcp"))
    num_gpu_blocks_override: int | None = None
    disable_hybrid_kv_cache_manager: bool = False
    speculative_method: str | None = None
    num_speculative_tokens: int | None = None
    num_nextn_predict_layers: int | None = None
    draft_kv_cache_dtype: str | None = None


@dataclass(frozen=True)
class VllmTensor:
    """Layers viewing a worker's single KV buffer (vLLM's ``KVCacheTensor``), bytes.

    Layer ``i`` of ``layers`` is the ``[B, H, N, C]`` view of ``shape`` / ``strides``
    (bytes) at ``offset + i * layer_stride``, reinterpreted as ``dtype`` (so its last
    dimension holds ``C // dtype size`` elements: K then V of one head and token).
    """

    size: int
    layers: tuple[str, ...]
    layer_stride: int
    block_stride: int
    offset: int
    shape: tuple[int, int, int, int]
    strides: tuple[int, int, int, int]
    dtype: str


@dataclass(frozen=True)
class VllmGroup:
    """One KV-cache group: its layers, vLLM's spec class, block size and page, bytes.

    ``unused_bytes_per_block`` / ``padding_layers`` (per worker only): the bytes of
    every block this group leaves unused (``bytes_per_block`` minus its layers'
    pages) and, when whole, the padding layers they stand for.
    """

    layers: tuple[str, ...]
    spec: str
    block_size: int
    page_size_bytes: int
    layer_pages_bytes: int
    is_eagle_group: bool
    unused_bytes_per_block: int | None = None
    padding_layers: int | None = None


@dataclass(frozen=True)
class VllmPlan:
    """vLLM 0.33.0's KV-cache plan.

    Attributes:
        num_blocks: blocks every worker allocates (the minimum over workers; the
            null block included).
        max_model_len: after ``"auto"``, tokens.
        bytes_per_block, per_request_bytes, allocated_bytes: per worker (stage-major,
            ``pp * tp``), bytes; one buffer of ``allocated_bytes`` per worker.
        tensors: per worker, the views over that buffer.
        groups: the global groups, in vLLM's order; ``worker_groups`` per worker.
        blocks_per_request: blocks one request of ``max_model_len`` takes per group.
        max_concurrency: ``num_blocks / sum(blocks_per_request)`` (vLLM's float).
        kv_cache_size_tokens: the log's "GPU KV cache size: N tokens", which is
            ``int(max_concurrency * max_model_len)``, not the pool's capacity.
        kv_tp_replicas: consecutive TP ranks holding identical KV.
        cache_block_size: the scheduler's block size, tokens.
        warnings: vLLM's warnings (padding layers, hybrid manager disabled, ...).
        log: every message vLLM logs while planning, ``(level, text)``.
    """

    num_blocks: int
    max_model_len: int
    bytes_per_block: tuple[int, ...]
    per_request_bytes: tuple[int, ...]
    allocated_bytes: tuple[int, ...]
    tensors: tuple[tuple[VllmTensor, ...], ...]
    groups: tuple[VllmGroup, ...]
    worker_groups: tuple[tuple[VllmGroup, ...], ...]
    blocks_per_request: tuple[int, ...]
    max_concurrency: float
    kv_cache_size_tokens: int
    kv_tp_replicas: int
    cache_block_size: int
    warnings: tuple[str, ...]
    log: tuple[tuple[str, str], ...]

    @property
    def padding_bytes_per_request(self) -> int:
        """Bytes of one ``max_model_len`` request's blocks (worker 0) that hold no layer's KV:
        per group, its blocks per request times the bytes of each block it leaves unused."""
        groups = self.worker_groups[0]
        return sum(n * (g.unused_bytes_per_block or 0) for g, n in zip(groups, self.blocks_per_request))


class VllmError(InvalidConfigError):
    """vLLM refuses the deployment (its ``ValueError``, ``NotImplementedError`` or
    assertion), or the restatement does not model it; ``vllm_error_type`` says which
    (``"ValueError"``, ``"NotImplementedError"``, ``"AssertionError"``, ``"Input"``)."""

    def __init__(self, message: str, vllm_error_type: str) -> None:
        super().__init__(message)
        self.vllm_error_type = vllm_error_type


class VllmStartupError(NotEnoughMemoryError):
    """vLLM fails at startup: the budget holds no block, or not one request of
    ``max_model_len`` ("To serve at least one request ..."). ``vllm_message`` is vLLM's
    text; ``estimated_max_model_len`` its estimate of the longest length that fits."""

    def __init__(self, message: str, estimated_max_model_len: int | None) -> None:
        super().__init__(message)
        self.vllm_message = message
        self.estimated_max_model_len = estimated_max_model_len


_LAYER_FIELDS = tuple(f.name for f in fields(LayerSpec))
_ENGINE_FIELDS = tuple(f.name for f in fields(EngineConfig))


def _layer_json(layer: LayerSpec) -> dict[str, Any]:
    if not isinstance(layer, LayerSpec):
        raise TypeError(f"layers: expected LayerSpec, got {type(layer).__name__}")
    d = layer.__dict__
    return {k: d[k] for k in _LAYER_FIELDS if d[k] is not None}


def _engine_json(engine: EngineConfig) -> dict[str, Any]:
    out = {k: getattr(engine, k) for k in _ENGINE_FIELDS}
    if out["max_model_len"] == "auto" and out["derived_max_model_len"] is None:
        raise InvalidConfigError("max_model_len='auto' needs derived_max_model_len (the model's own limit)")
    return out


def _tensor(t: dict[str, Any]) -> VllmTensor:
    return VllmTensor(**{**t, "layers": tuple(t["layers"]), "shape": tuple(t["shape"]),
                         "strides": tuple(t["strides"])})  # fmt: skip


def _group(g: dict[str, Any]) -> VllmGroup:
    return VllmGroup(**{**g, "layers": tuple(g["layers"])})


def _raise(r: dict[str, Any]) -> None:
    message, kind = r["error"], r["error_type"]
    if kind == "ValueError" and (message.startswith("To serve at least one request")
                                 or message.startswith("No available memory for the cache blocks")):  # fmt: skip
        raise VllmStartupError(message, r["estimated_max_model_len"])
    raise VllmError(message, kind)


def plan_raw(layers: Sequence[LayerSpec], available_bytes: int | Sequence[int],
             engine: EngineConfig | None = None) -> dict[str, Any]:  # fmt: skip
    """:func:`plan` as the plain dict the core returns (the oracle's form)."""
    engine = engine or EngineConfig()
    if isinstance(available_bytes, bool) or not isinstance(available_bytes, (int, Sequence)):
        raise TypeError("available_bytes: expected an int or one int per worker")
    request = {"layers": [_layer_json(x) for x in layers], "engine": _engine_json(engine),
               "available": available_bytes if isinstance(available_bytes, int) else list(available_bytes)}  # fmt: skip
    result: dict[str, Any] = json.loads(_core._vllm_plan(json.dumps(request)))
    return result


def plan(layers: Sequence[LayerSpec], available_bytes: int | Sequence[int],
         engine: EngineConfig | None = None) -> VllmPlan:  # fmt: skip
    """vLLM 0.33.0's plan for ``layers`` (registration order, drafter layers last) with
    ``available_bytes`` for KV on each worker (one int for all, one per PP stage, or one
    per worker, ``pp * tp`` of them, stage-major).

    Raises:
        VllmStartupError: vLLM's startup check fails (a :class:`NotEnoughMemoryError`).
        VllmError: vLLM refuses the deployment otherwise (an :class:`InvalidConfigError`).
    """
    r = plan_raw(layers, available_bytes, engine)
    if not r["ok"]:
        _raise(r)
    return VllmPlan(
        num_blocks=r["num_blocks"], max_model_len=r["max_model_len"],
        bytes_per_block=tuple(r["bytes_per_block"]), per_request_bytes=tuple(r["per_request_bytes"]),
        allocated_bytes=tuple(a[0] for a in r["allocated_bytes"]),
        tensors=tuple(tuple(_tensor(t) for t in w) for w in r["tensors"]),
        groups=tuple(_group(g) for g in r["groups"]),
        worker_groups=tuple(tuple(_group(g) for g in w) for w in r["worker_groups"]),
        blocks_per_request=tuple(r["blocks_per_request"]), max_concurrency=r["max_concurrency"],
        kv_cache_size_tokens=r["kv_cache_size_tokens"], kv_tp_replicas=r["kv_tp_replicas"],
        cache_block_size=r["cache_block_size"], warnings=tuple(r["warnings"]),
        log=tuple((lvl, text) for lvl, text in r["log"]),
    )  # fmt: skip
