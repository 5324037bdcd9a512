"""Allocate an exact plan as torch tensors (REFERENCE.md section 3).

:func:`allocate` turns a :class:`~kvbudget.PoolPlan` into tensors laid out as
SGLang lays out its KV pools: per layer, K ``[rows, heads, dk]`` and V
``[rows, heads, dv]`` (MLA: one latent ``kv`` tensor), with ``rows = tokens +
page_size``. The storage it takes is exactly ``plan.total_bytes`` (one slab per pool) or
``plan.tensor_bytes`` (one tensor per K/V, as SGLang allocates).

This module imports torch at its top; ``import kvbudget`` does not import it
(``kvbudget.allocate`` and ``kvbudget.KVPools`` load this module on first use).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Literal, Protocol

import torch

from kvbudget._core import PoolPlan, PoolSpec, TensorSpec
from kvbudget.errors import AllocationError, InvalidConfigError

__all__ = ["Allocator", "KVPools", "LayerKV", "Strategy", "allocate"]

Strategy = Literal["slab", "per_layer"]
"""``"slab"``: one allocation per pool, tensors are views into it.
``"per_layer"``: one allocation per tensor, as SGLang does."""

_DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "uint8": torch.uint8,
}

_KINDS: tuple[str, ...] = (
    "k", "v", "k_scale", "v_scale", "kv", "kv_scale", "cache", "native_k_scale", "native_v_scale",
    "dq_k", "dq_v", "entry", "bytes",
)
_TARGET_POOLS: tuple[str, ...] = ("full", "swa", "unified")


class Allocator(Protocol):
    """Makes one tensor: ``(shape, dtype, device, zero) -> Tensor``.

    The default calls ``torch.zeros`` (``zero=True``) or ``torch.empty``. Tests
    pass their own through ``allocate(..., _allocator=...)`` to force a failure
    at the N-th call.
    """

    def __call__(
        self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, zero: bool
    ) -> torch.Tensor: ...


def _torch_allocator(
    shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, zero: bool
) -> torch.Tensor:
    """The default :class:`Allocator`: ``torch.zeros`` or ``torch.empty``."""
    if zero:
        return torch.zeros(shape, dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


@dataclasses.dataclass(frozen=True, eq=False)
class LayerKV:
    """The tensors of one layer of one pool.

    MHA/GQA layers have ``k`` and ``v`` (and ``k_scale``/``v_scale`` for mxfp8
    and the FP4 recipes; ``native_k_scale``/``native_v_scale`` for NVFP4's
    native layout); MLA layers have the latent ``kv`` (and ``kv_scale``) and no
    ``k``/``v``; a DFLASH draft given only its bytes per token has one opaque
    uint8 ``cache`` tensor. Buffers a pool keeps once sit on its first layer:
    NVFP4's dequant workspace (``dq_k``/``dq_v``), a fused draft ``entry`` (the
    pool's only tensor: its other layers' records are empty), the unified
    pool's one-dimensional ``bytes``. The first dimension of every tensor is
    rows (``tokens + page_size``; the unified pool's is its bytes).
    ``layer_id`` is the global target layer id for the target pools and the
    draft-local index for ``"draft"`` and ``"draft_swa"``. Compared by
    identity (tensors have no boolean equality).
    """

    pool: str
    layer_id: int
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None
    kv: torch.Tensor | None = None
    kv_scale: torch.Tensor | None = None
    cache: torch.Tensor | None = None
    native_k_scale: torch.Tensor | None = None
    native_v_scale: torch.Tensor | None = None
    dq_k: torch.Tensor | None = None
    dq_v: torch.Tensor | None = None
    entry: torch.Tensor | None = None
    bytes: torch.Tensor | None = None

    @property
    def is_mla(self) -> bool:
        """True for an MLA layer (one latent ``kv`` tensor, no separate V)."""
        return self.kv is not None

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensors present, by kind (``"k"``, ``"v"``, ``"k_scale"``, ...), in plan order."""
        out: dict[str, torch.Tensor] = {}
        for kind in _KINDS:
            t = getattr(self, kind)
            if t is not None:
                out[kind] = t
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of this layer's tensors (elements times element size; views counted as views)."""
        return sum(t.numel() * t.element_size() for t in self.tensors().values())

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{kind}={tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"
            for kind, t in self.tensors().items()
        )
        return f"LayerKV(pool={self.pool!r}, layer_id={self.layer_id}, {parts})"


class KVPools:
    """The allocated pools of a plan.

    Attributes:
        plan: the plan that was allocated.
        device: where the tensors live.
        strategy: ``"slab"`` or ``"per_layer"``.

    ``full``, ``swa`` and ``draft`` list the per-layer records of each pool in
    plan order (an empty list for a pool the plan does not have). :meth:`layer`
    maps a global target layer id to its ``(k, v)``. :meth:`release` drops every
    reference this object holds; the memory is freed once the caller drops its
    own references to the tensors too.
    """

    __slots__ = ("_device", "_index", "_plan", "_pools", "_roots", "_slabs", "_strategy", "__weakref__")

    def __init__(
        self,
        plan: PoolPlan,
        device: torch.device,
        strategy: Strategy,
        pools: dict[str, list[LayerKV]],
        roots: list[torch.Tensor],
        slabs: dict[str, torch.Tensor],
    ) -> None:
        """Built by :func:`allocate`; not meant to be called directly."""
        self._plan = plan
        self._device = device
        self._strategy: Strategy = strategy
        self._pools = pools
        self._roots = roots
        self._slabs = slabs
        self._index: dict[tuple[str, int], LayerKV] = {
            (rec.pool, rec.layer_id): rec for records in pools.values() for rec in records
        }

    @property
    def plan(self) -> PoolPlan:
        """The plan that was allocated."""
        return self._plan

    @property
    def device(self) -> torch.device:
        """The device of every tensor."""
        return self._device

    @property
    def strategy(self) -> Strategy:
        """``"slab"`` (one allocation per pool) or ``"per_layer"`` (one per tensor)."""
        return self._strategy

    @property
    def full(self) -> list[LayerKV]:
        """The full-attention pool's layers (every layer, for a Default plan)."""
        return list(self._pools.get("full", ()))

    @property
    def swa(self) -> list[LayerKV]:
        """The sliding-window pool's layers."""
        return list(self._pools.get("swa", ()))

    @property
    def draft(self) -> list[LayerKV]:
        """The draft pool's layers (draft-local ids), the SWA-capacity draft pool's after them."""
        return list(self._pools.get("draft", ())) + list(self._pools.get("draft_swa", ()))

    @property
    def unified(self) -> list[LayerKV]:
        """Unified memory's pool: every target layer; the first holds the ``bytes`` buffer."""
        return list(self._pools.get("unified", ()))

    @property
    def pools(self) -> dict[str, list[LayerKV]]:
        """Every pool's layers by pool name, in plan order."""
        return {name: list(records) for name, records in self._pools.items()}

    @property
    def slabs(self) -> dict[str, torch.Tensor]:
        """The uint8 slab of each pool (``"slab"`` strategy); empty for ``"per_layer"``."""
        return dict(self._slabs)

    @property
    def released(self) -> bool:
        """True once :meth:`release` has run."""
        return not self._roots and not self._pools

    @property
    def nbytes(self) -> int:
        """Bytes of tensor storage held, from the tensors themselves.

        Each allocation's ``untyped_storage().nbytes()`` counted once (a slab
        once, not once per view). Equals ``plan.total_bytes`` until
        :meth:`release`, then 0.
        """
        return sum(root.untyped_storage().nbytes() for root in self._roots)

    def __iter__(self) -> Iterator[LayerKV]:
        """Every layer record, pool by pool in plan order."""
        for records in self._pools.values():
            yield from records

    def __len__(self) -> int:
        """Number of layer records across pools."""
        return sum(len(records) for records in self._pools.values())

    def record(self, layer_id: int, pool: str | None = None) -> LayerKV:
        """The record of one layer.

        Args:
            layer_id: a global target layer id, or a draft-local index when
                ``pool="draft"``.
            pool: ``None`` searches the target pools (``"full"``, ``"swa"``);
                otherwise the pool to look in.

        Raises:
            KeyError: no such layer in those pools.
        """
        names = _TARGET_POOLS if pool is None else (pool,)
        for name in names:
            rec = self._index.get((name, layer_id))
            if rec is not None:
                return rec
        where = "the target pools" if pool is None else f"pool {pool!r}"
        raise KeyError(f"layer {layer_id} is not in {where}")

    def layer(
        self, layer_id: int, pool: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(k, v)`` of a layer, by global target layer id (or draft index with ``pool="draft"``).

        For an MLA layer this is ``(kv, None)``: the latent holds keys and values
        together and there is no V tensor (SGLang's value view is
        ``kv[..., :kv_lora_rank]``). For a DFLASH ``cache``-only draft layer it
        is ``(cache, None)``.

        Raises:
            KeyError: no such layer.
        """
        rec = self.record(layer_id, pool)
        if rec.k is not None:
            return rec.k, rec.v
        if rec.kv is not None:
            return rec.kv, None
        assert rec.cache is not None
        return rec.cache, None

    def release(self) -> None:
        """Drops every tensor reference held here (idempotent).

        The memory returns to the allocator once no caller holds a tensor of
        these pools either; on CUDA, ``torch.cuda.memory_allocated`` then drops
        by the plan's bytes (the cached segments stay reserved until
        ``torch.cuda.empty_cache``).
        """
        self._pools = {}
        self._index = {}
        self._slabs = {}
        self._roots = []

    def __repr__(self) -> str:
        if self.released:
            return f"KVPools(released, device={self._device}, strategy={self._strategy!r})"
        sizes = ", ".join(f"{name}={len(records)}" for name, records in self._pools.items())
        return (
            f"KVPools(device={self._device}, strategy={self._strategy!r}, layers=({sizes}), "
            f"nbytes={self.nbytes})"
        )


@dataclasses.dataclass
class _Build:
    """Everything allocated so far; the only owner of the tensors until :class:`KVPools` exists.

    On failure :meth:`clear` drops them all, so the frames kept alive by the
    exception's traceback hold no tensor.
    """

    roots: list[torch.Tensor] = dataclasses.field(default_factory=list)
    slabs: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
    pools: dict[str, list[LayerKV]] = dataclasses.field(default_factory=dict)
    partial: dict[int, dict[str, torch.Tensor]] = dataclasses.field(default_factory=dict)
    held_bytes: int = 0
    pool: str = ""
    layer_id: int | None = None
    kind: str = ""
    requested_bytes: int = 0

    def at(self, pool: str, layer_id: int | None, kind: str, nbytes: int) -> None:
        """Notes the allocation about to be attempted."""
        self.pool, self.layer_id, self.kind, self.requested_bytes = pool, layer_id, kind, nbytes

    def clear(self) -> None:
        """Drops every tensor reference."""
        self.roots.clear()
        self.slabs.clear()
        self.pools.clear()
        self.partial.clear()


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def _dtype(spec: TensorSpec) -> torch.dtype:
    try:
        return _DTYPES[spec.dtype]
    except KeyError:
        raise InvalidConfigError(
            f"tensor {spec.pool}/{spec.layer_id}/{spec.kind}: unknown storage dtype {spec.dtype!r}"
        ) from None


def _check_plan(plan: PoolPlan, pools: list[tuple[PoolSpec, list[TensorSpec]]]) -> None:
    """Validates what the slab views rely on, before anything is allocated: the core's
    one plan checker (``PoolPlan.check``), and that torch has every storage dtype."""
    plan.check()
    for _pool, tensors in pools:
        for t in tensors:
            _dtype(t)


def _records(pool: PoolSpec, tensors: dict[int, dict[str, torch.Tensor]]) -> list[LayerKV]:
    """One :class:`LayerKV` per layer of ``pool``, in the pool's layer order."""
    return [LayerKV(pool.name, layer_id, **tensors.get(layer_id, {})) for layer_id in pool.layer_ids]


def _slab_views(tensors: list[TensorSpec], slab: torch.Tensor) -> dict[int, dict[str, torch.Tensor]]:
    """Views of ``slab`` at the planned offsets: ``slab[off:off+n].view(dtype).view(shape)``."""
    out: dict[int, dict[str, torch.Tensor]] = {}
    for t in tensors:
        view = slab[t.offset : t.offset + t.nbytes].view(_dtype(t)).view(tuple(t.shape))
        out.setdefault(t.layer_id, {})[t.kind] = view
    return out


def _fill(
    build: _Build,
    pools: list[tuple[PoolSpec, list[TensorSpec]]],
    device: torch.device,
    strategy: Strategy,
    zero: bool,
    allocator: Allocator,
) -> None:
    """Allocates every pool into ``build``. Tensors live only inside ``build``."""
    for pool, tensors in pools:
        if strategy == "slab":
            build.at(pool.name, None, "slab", pool.nbytes)
            build.roots.append(allocator((pool.nbytes,), torch.uint8, device, zero))
            build.held_bytes += pool.nbytes
            build.slabs[pool.name] = build.roots[-1]
            build.pools[pool.name] = _records(pool, _slab_views(tensors, build.roots[-1]))
        else:
            build.partial.clear()
            for t in tensors:
                build.at(pool.name, t.layer_id, t.kind, t.nbytes)
                build.roots.append(allocator(tuple(t.shape), _dtype(t), device, zero))
                build.held_bytes += t.nbytes
                build.partial.setdefault(t.layer_id, {})[t.kind] = build.roots[-1]
            build.pools[pool.name] = _records(pool, build.partial)
            build.partial.clear()


def allocate(
    plan: PoolPlan,
    device: str | torch.device | None = None,
    strategy: Strategy = "slab",
    zero: bool = True,
    *,
    _allocator: Allocator | None = None,
) -> KVPools:
    """Allocates every pool of ``plan``, exactly as planned.

    The storage taken is exactly ``plan.total_bytes`` with ``strategy="slab"``
    (tensors plus the 256-byte alignment gaps between them), and exactly
    ``plan.tensor_bytes`` with ``"per_layer"``; both are at most the plan's budget.

    Args:
        plan: an exact plan from ``configurator.plan(...)``.
        device: where to allocate; default ``"cuda"`` when available, else
            ``"cpu"``. ``"meta"`` is a dry run: shapes and dtypes, no memory, no
            zeroing.
        strategy: ``"slab"`` makes one uint8 allocation of ``pool.nbytes`` per
            pool and hands out views at the planned offsets
            (``slab[off:off+n].view(dtype).view(shape)``); ``"per_layer"`` makes
            one ``torch.zeros``/``torch.empty`` per tensor, as SGLang does. The
            shapes and dtypes are the same either way.
        zero: zero the memory (SGLang zeroes its KV buffers); ignored on meta.
        _allocator: private test hook replacing the tensor factory.

    Returns:
        The pools, with per-layer records and :meth:`KVPools.layer` lookup.

    Raises:
        AllocationError: an allocation failed (out of memory or any other
            error). Everything allocated before it was released first; the
            error names the pool, the layer (``None`` for a slab) and kind, the
            bytes asked for and the bytes that had been held.
        InvalidConfigError: an unknown strategy, or a plan whose tensors are
            not at their planned (aligned, consecutive) offsets.
    """
    if strategy not in ("slab", "per_layer"):
        raise InvalidConfigError(f"strategy: expected \"slab\" or \"per_layer\", got {strategy!r}")
    dev = _resolve_device(device)
    if dev.type == "meta":
        zero = False
    pools = [(pool, list(pool.tensors)) for pool in plan.pools]  # fetched once from the native plan
    _check_plan(plan, pools)
    alloc: Allocator = _torch_allocator if _allocator is None else _allocator
    build = _Build()
    try:
        _fill(build, pools, dev, strategy, zero, alloc)
    except Exception as exc:
        build.clear()
        where = f"pool {build.pool!r}" + (
            " slab" if build.layer_id is None else f" layer {build.layer_id} {build.kind}"
        )
        raise AllocationError(
            f"allocating {where} ({build.requested_bytes} bytes) on {dev} failed with "
            f"{build.held_bytes} bytes already allocated (all released): "
            f"{type(exc).__name__}: {exc}",
            pool=build.pool,
            layer_id=build.layer_id,
            kind=build.kind,
            requested_bytes=build.requested_bytes,
            held_bytes=build.held_bytes,
        ) from exc
    return KVPools(plan, dev, strategy, build.pools, build.roots, build.slabs)

