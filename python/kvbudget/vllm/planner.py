"""vLLM 0.33.0 mode: what vLLM allocates for a model, drafter and budget.

vLLM plans unlike SGLang: one shared block pool per worker, layers grouped by
spec (padding layers included), the drafter's layers joining the target's
groups, a per-request charge that counts the tokens in flight, and a log line
whose "N tokens" is concurrency times ``max_model_len``. :func:`plan` gives
vLLM 0.33.0's own numbers for per-layer specs, each worker's KV budget and the
engine settings, from kvbudget's restatement of vLLM's planner in the Rust
core (``rust/core/src/vllm``); ``tests/test_vllm_plan.py`` holds it to vLLM's
released code, field by field.

:class:`LayerSpec` and :class:`EngineConfig` are built from the core's declaration
of vLLM's inputs (:mod:`kvbudget.vllm.settings`).

Scope: full, sliding-window, chunked-local and MLA attention (compressed caches,
``tokens_per_state`` above 1, among them), circular buffers (``kind="circular_buffer"``:
vLLM's ``CircularBufferSpec``), and state layers (``kind="mamba"``: vLLM's ``MambaSpec``,
with the hybrid block-size alignment of ``Platform._align_hybrid_block_size``,
:attr:`VllmPlan.mamba`); vLLM's FLASH_ATTN defaults (no backend packing): the layers are
planned as given, under the layout ``EngineConfig.kv_cache_layout`` names (``LBNHC`` by
default; a block-outer one packs layers of different pages into each block: grouping case
3); :func:`kvbudget.vllm.backend_block_size` gives a model's block size on vLLM's Hopper
backends, or refuses a KV dtype that would take vLLM to another backend. Hidden-state
layers and an MLA layer with a window (``SlidingWindowMLASpec``) are not modelled.

Example::

    from kvbudget.vllm import EngineConfig, LayerSpec, plan

    layers = [LayerSpec(f"model.layers.{i}.self_attn.attn", "full" if i % 6 == 5 else "sliding",
                        num_kv_heads=16, head_size=128, sliding_window=1024) for i in range(62)]
    p = plan(layers, 40 << 30, EngineConfig(max_model_len=131072))
    p.num_blocks, p.kv_cache_size_tokens     # 32768, 291658
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvbudget import _core
from kvbudget._core import Layers
from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError
from kvbudget.vllm.settings import VLLM_VERSION, EngineConfig, LayerSpec
from kvbudget.vllm.settings import LayerKind as LayerKind

__all__ = [
    "VLLM_VERSION",
    "EngineConfig",
    "LayerSpec",
    "VllmError",
    "VllmGroup",
    "VllmHybrid",
    "VllmPlan",
    "VllmStartupError",
    "VllmTensor",
    "Layers",
    "layers",
    "plan",
]

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
class VllmHybrid:
    """What vLLM's configuration decides for a model with state layers
    (``MambaModelConfig`` and ``Platform._align_hybrid_block_size``).

    Attributes:
        mamba_cache_mode: ``"align"`` with prefix caching, ``"none"`` without.
        block_size: the attention block size, raised until an attention page holds
            a state page, tokens.
        mamba_block_size: the state layers' block size (the attention block size in
            align mode, ``max_model_len`` otherwise), tokens.
        mamba_page_size_padded: the state page padded to the attention page, bytes
            (None when they already match).
    """

    mamba_cache_mode: str
    block_size: int
    mamba_block_size: int
    mamba_page_size_padded: int | None


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
        mamba: vLLM's configuration of the state layers (None without one).
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
    mamba: VllmHybrid | None = None

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            # Only reached for an attribute not yet made: a record part of a plan from
            # plan(), made (all four at once) from the native result on first read.
            native = self.__dict__.get("_native")
            if native is None or name not in _LAZY:
                raise AttributeError(f"'VllmPlan' object has no attribute {name!r}")
            self.__dict__.update(_records(native.raw()))
            del self.__dict__["_native"]
            return self.__dict__[name]

    def __getstate__(self) -> dict[str, Any]:
        """Every field, the records made (the native result does not pickle)."""
        return {f: getattr(self, f) for f in (*_HEAD, *_LAZY, "mamba")}

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
    """vLLM fails at startup: the budget holds no block, not one request of
    ``max_model_len`` ("To serve at least one request ..."), or, with
    ``max_model_len="auto"``, not one token ("Cannot auto-fit max_model_len ...").
    ``vllm_message`` is vLLM's
    text; ``estimated_max_model_len`` its estimate of the longest length that fits."""

    def __init__(self, message: str, estimated_max_model_len: int | None) -> None:
        super().__init__(message)
        self.vllm_message = message
        self.estimated_max_model_len = estimated_max_model_len


#: The parts of a plan :meth:`VllmResult.head` gives, in its order (the rest are made on
#: first read, :data:`_LAZY`).
_HEAD = ("num_blocks", "max_model_len", "bytes_per_block", "per_request_bytes", "allocated_bytes",
         "blocks_per_request", "max_concurrency", "kv_cache_size_tokens", "kv_tp_replicas",
         "cache_block_size", "warnings", "log")  # fmt: skip
#: The parts of a plan made from the native result on first read (lists of records).
_LAZY = ("tensors", "groups", "worker_groups")


def _tensor(t: dict[str, Any]) -> VllmTensor:
    return VllmTensor(**{**t, "layers": tuple(t["layers"]), "shape": tuple(t["shape"]),
                         "strides": tuple(t["strides"])})  # fmt: skip


def _group(g: dict[str, Any]) -> VllmGroup:
    return VllmGroup(**{**g, "layers": tuple(g["layers"])})


def _records(r: dict[str, Any]) -> dict[str, Any]:
    """The :data:`_LAZY` parts of a plan from its dict form."""
    return {
        "tensors": tuple(tuple(_tensor(t) for t in w) for w in r["tensors"]),
        "groups": tuple(_group(g) for g in r["groups"]),
        "worker_groups": tuple(tuple(_group(g) for g in w) for w in r["worker_groups"]),
    }


def _error(kind: str, message: str, estimated: int | None, startup: bool) -> VllmError | VllmStartupError:
    """The exception of a failure (the core says which are startup failures)."""
    return VllmStartupError(message, estimated) if startup else VllmError(message, kind)


def _input_failure(message: str) -> dict[str, Any]:
    """An input the restatement refuses, in the result's dict form."""
    return {"ok": False, "error_type": "Input", "error": message, "estimated_max_model_len": None,
            "log": [], "warnings": []}  # fmt: skip


def layers(specs: Sequence[LayerSpec] | Layers) -> Layers:
    """``specs`` converted once for planning (:class:`Layers`): pass the result to :func:`plan`
    to re-plan the same model (another budget, block size or ``max_model_len``) without
    converting its layers again.

    Raises:
        TypeError: an item is not a :class:`LayerSpec`.
        VllmError: a layer the restatement refuses (``vllm_error_type`` ``"Input"``).
    """
    if isinstance(specs, Layers):
        return specs
    for x in specs:
        if not isinstance(x, LayerSpec):
            raise TypeError(f"layers: expected LayerSpec, got {type(x).__name__}")
    try:
        return Layers(specs)
    except VllmError:
        raise
    except InvalidConfigError as e:
        raise VllmError(str(e), "Input") from None


def _result(specs: Sequence[LayerSpec] | Layers, available_bytes: int | Sequence[int],
            engine: EngineConfig | None) -> Any:  # fmt: skip
    if isinstance(available_bytes, bool) or not isinstance(available_bytes, (int, Sequence)):
        raise TypeError("available_bytes: expected an int or one int per worker")
    return _core._vllm_plan_typed(layers(specs), available_bytes, engine or EngineConfig())


def plan_raw(layers: Sequence[LayerSpec] | Layers, available_bytes: int | Sequence[int],
             engine: EngineConfig | None = None) -> dict[str, Any]:  # fmt: skip
    """:func:`plan` as the plain dict the core's JSON form gives (the oracle's form)."""
    try:
        result = _result(layers, available_bytes, engine)
    except VllmError as e:
        if e.vllm_error_type != "Input":
            raise
        return _input_failure(str(e))
    raw: dict[str, Any] = result.raw()
    return raw


def plan(layers: Sequence[LayerSpec] | Layers, available_bytes: int | Sequence[int],
         engine: EngineConfig | None = None) -> VllmPlan:  # fmt: skip
    """vLLM 0.33.0's plan for ``layers`` (registration order, drafter layers last; a
    :class:`Layers` from :func:`kvbudget.vllm.layers` skips their conversion) with
    ``available_bytes`` for KV on each worker (one int for all, one per PP stage, or one
    per worker, ``pp * tp`` of them, stage-major).

    The plan's scalar and per-worker parts are made at once; its records (``tensors``,
    ``groups``, ``worker_groups``) on first read.

    Raises:
        VllmStartupError: vLLM's startup check fails (a :class:`NotEnoughMemoryError`).
        VllmError: vLLM refuses the deployment otherwise (an :class:`InvalidConfigError`).
    """
    result = _result(layers, available_bytes, engine)
    head = result.head()
    if head is None:
        raise _error(*result.failure())
    p = object.__new__(VllmPlan)
    d = p.__dict__
    d.update(zip(_HEAD, head))
    mamba = head[len(_HEAD)]
    d["mamba"] = None if mamba is None else VllmHybrid(*mamba)
    d["_native"] = result
    return p
