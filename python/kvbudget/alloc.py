"""Allocate an exact plan as torch tensors (REFERENCE.md section 3).

:func:`allocate` turns a :class:`~kvbudget.PoolPlan` into tensors laid out as
SGLang lays out its KV pools: per layer, K ``[rows, heads, dk]`` and V
``[rows, heads, dv]`` (MLA: one latent ``kv`` tensor), with ``rows = tokens +
page_size``. The storage it takes is exactly ``plan.total_bytes`` (one slab per pool) or
``plan.tensor_bytes`` (one tensor per K/V, as SGLang allocates).

Checked once, cached per plan: the first :func:`allocate` of a plan object runs
the core's checker (``PoolPlan.check``) and derives the plan's layout
(:mod:`kvbudget._alloc_layout`); later calls with the same object reuse it.

Few torch calls: with ``strategy="slab"`` each pool costs one allocation, one
dtype view of its slab, and one ``as_strided`` view per run of same-shaped
tensors at a constant byte step (K and V of every layer, when they share a
shape, are one run), split into the per-layer tensors by one ``unbind``.
Records are ``__slots__`` objects made without ``__init__``.

Interrupt-safe release: whatever leaves :func:`allocate` (``KeyboardInterrupt``
included), every tensor it made is unreferenced first, including from the
frames its traceback keeps (their locals are cleared).

This module imports torch at its top; ``import kvbudget`` does not import it
(``kvbudget.allocate`` and ``kvbudget.KVPools`` load this module on first use).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from typing import Literal, Protocol

import torch

from kvbudget._alloc_layout import LayerKV, PoolLayout, layout_of
from kvbudget._core import PoolPlan
from kvbudget.errors import AllocationError, InvalidConfigError


__all__ = ["Allocator", "KVPools", "LayerKV", "Strategy", "allocate"]

Strategy = Literal["slab", "per_layer"]
"""``"slab"``: one allocation per pool, tensors are views into it.
``"per_layer"``: one allocation per tensor, as SGLang does."""

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


class KVPools:
    """The allocated pools of a plan.

    Attributes:
        plan: the plan that was allocated.
        device: where the tensors live.
        strategy: ``"slab"`` or ``"per_layer"``.

    ``full``, ``swa`` and ``draft`` list the per-layer records of each pool in
    plan order (an empty list for a pool the plan does not have); ``state`` is a
    hybrid model's state record (or None). :meth:`layer`
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
        index: dict[tuple[str, int], LayerKV] | None = None,
    ) -> None:
        """Built by :func:`allocate` (which passes ``index``); not meant to be called directly."""
        self._plan = plan
        self._device = device
        self._strategy: Strategy = strategy
        self._pools = pools
        self._roots = roots
        self._slabs = slabs
        if index is None:
            index = {(rec.pool, rec.layer_id): rec for records in pools.values() for rec in records}
        self._index = index

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
    def state(self) -> LayerKV | None:
        """A hybrid model's state pool (``plan.pool("state")``): one record whose tensors
        (``conv_state``, ``temporal_state``, the speculative and ReplaySSM buffers) stack the
        state layers, ``[layers, rows, ...]``; None without one."""
        records = self._pools.get("state")
        return records[0] if records else None

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
            pool: ``None`` searches the target pools (``"full"``, ``"swa"``,
                ``"unified"``); otherwise the pool to look in.

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


# --------------------------------------------------------------------------- allocation


class _Build:
    """Everything allocated so far: the only owner of the tensors until :class:`KVPools` exists.

    ``at_pool``/``at_tensor`` say what is being made (for the error); on
    failure :meth:`clear` drops every tensor.
    """

    __slots__ = ("at_pool", "at_tensor", "index", "pools", "roots", "slabs")

    def __init__(self) -> None:
        self.roots: list[torch.Tensor] = []
        self.slabs: dict[str, torch.Tensor] = {}
        self.pools: dict[str, list[LayerKV]] = {}
        self.index: dict[tuple[str, int], LayerKV] = {}
        self.at_pool = 0
        self.at_tensor: int | None = None

    def clear(self) -> None:
        """Drops every tensor reference."""
        self.roots.clear()
        self.slabs.clear()
        self.pools.clear()
        self.index.clear()

    def add(self, pl: PoolLayout, made: tuple[torch.Tensor, ...]) -> None:
        """The pool's :class:`LayerKV` objects from its run-order tensors, without ``__init__``."""
        new = object.__new__
        out: list[LayerKV] = []
        for info, get in pl.records:
            rec = new(LayerKV)
            rec._info = info
            rec._vals = get(made)
            out.append(rec)
        self.pools[pl.name] = out
        self.index.update(zip(pl.keys, out))


def _fill_slab(
    build: _Build, layout: tuple[PoolLayout, ...], device: torch.device, zero: bool,
    allocator: Allocator,
) -> None:
    """One uint8 slab per pool, its tensors views at their planned offsets (kept in ``build``)."""
    uint8 = torch.uint8
    for i, pl in enumerate(layout):
        build.at_pool = i
        slab = allocator((pl.nbytes,), uint8, device, zero)
        build.roots.append(slab)
        build.slabs[pl.name] = slab
        # A plain loop, not a comprehension: an interrupt inside a comprehension's
        # own frame could leave a view of ``slab`` reachable from the traceback.
        bases: list[torch.Tensor] = []
        for dt, n in pl.bases:
            bases.append(slab if dt is uint8 else (slab if n is None else slab[:n]).view(dt))
        made: tuple[torch.Tensor, ...] = ()
        for base, size, stride, offset, many in pl.views:
            view = bases[base].as_strided(size, stride, offset)
            made += view.unbind(0) if many else (view,)
        build.add(pl, made)


def _fill_per_layer(
    build: _Build, layout: tuple[PoolLayout, ...], device: torch.device, zero: bool,
    allocator: Allocator,
) -> None:
    """One allocation per tensor, in plan order (kept in ``build``)."""
    for i, pl in enumerate(layout):
        build.at_pool, first = i, len(build.roots)
        for j, (shape, dtype, _, _, _) in enumerate(pl.tensors):
            build.at_tensor = j
            build.roots.append(allocator(shape, dtype, device, zero))
        build.at_tensor = None
        build.add(pl, pl.to_runs(tuple(build.roots[first:])))


def _resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a torch.device; a ValueError naming it when torch cannot parse it."""
    if isinstance(device, torch.device):
        return device
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{device!r} is not a torch device (\"cpu\", \"cuda\", \"cuda:1\", \"meta\", ...): {exc}"
        ) from None


def _clear_traceback_frames(exc: BaseException) -> None:
    """Clears the locals of every finished frame in the tracebacks of ``exc`` and its chain."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is not None and id(e) not in seen:
            seen.add(id(e))
            traceback.clear_frames(e.__traceback__)
            todo += [e.__cause__, e.__context__]


def _failure(
    build: _Build, layout: tuple[PoolLayout, ...], dev: object, exc: Exception
) -> AllocationError:
    """The AllocationError naming where allocation stopped; call it before :meth:`_Build.clear`."""
    pl, done = layout[build.at_pool], len(build.roots)
    layer_id: int | None = None
    if build.at_tensor is None or build.at_tensor >= len(pl.tensors):
        held, kind, requested = sum(p.nbytes for p in layout[:done]), "slab", pl.nbytes
        where = f"pool {pl.name!r} slab"
    else:
        held = sum([t[2] for p in layout for t in p.tensors][:done])
        _, _, requested, layer_id, kind = pl.tensors[build.at_tensor]
        where = f"pool {pl.name!r} layer {layer_id} {kind}"
    return AllocationError(
        f"allocating {where} ({requested} bytes) on {dev} failed with "
        f"{held} bytes already allocated (all released): {type(exc).__name__}: {exc}",
        pool=pl.name,
        layer_id=layer_id,
        kind=kind,
        requested_bytes=requested,
        held_bytes=held,
    )


def allocate(
    plan: PoolPlan,
    device: str | torch.device | None = None,
    strategy: Strategy = "slab",
    zero: bool = True,
    *,
    _allocator: Allocator | None = None,
) -> KVPools:
    """Allocates every pool of ``plan``, exactly as planned (``kvbudget.allocate`` also takes
    a vLLM plan).

    The storage taken is exactly ``plan.total_bytes`` with ``strategy="slab"``
    (tensors plus the 256-byte alignment gaps between them), and exactly
    ``plan.tensor_bytes`` with ``"per_layer"``; both are at most the plan's budget.

    Args:
        plan: an exact plan from ``configurator.plan(...)``; checked
            (``plan.check()``) on its first allocation only (module docstring).
        device: where to allocate; default ``"cuda"`` when available, else
            ``"cpu"``. ``"meta"`` is a dry run: shapes and dtypes, no memory, no
            zeroing.
        strategy: ``"slab"`` makes one uint8 allocation of ``pool.nbytes`` per
            pool and hands out views at the planned offsets (one
            ``as_strided`` per run of same-shaped tensors, split by
            ``unbind``); ``"per_layer"`` makes one ``torch.zeros``/``torch.empty``
            per tensor, as SGLang does. The shapes and dtypes are the same either way.
        zero: zero the memory (SGLang zeroes its KV buffers); ignored on meta.
        _allocator: private test hook replacing the tensor factory.

    Returns:
        The pools, with per-layer records and :meth:`KVPools.layer` lookup.

    Raises:
        AllocationError: an allocation failed (out of memory, an unknown
            device such as ``"bogus"`` or ``"cuda:9"``, or any other error).
            Everything allocated before it was released first; the error names
            the pool, the layer (``None`` for a slab) and kind, the bytes asked
            for and the bytes that had been held (for an unknown device: the
            first allocation, nothing held).
        InvalidConfigError: an unknown strategy, or a plan that fails its check.

    Any other exception (``KeyboardInterrupt``, ``SystemExit``) leaves as it is,
    after every tensor made was released and its traceback's frames cleared.
    """
    if strategy not in ("slab", "per_layer"):
        raise InvalidConfigError(f"strategy: expected \"slab\" or \"per_layer\", got {strategy!r}")
    if not isinstance(plan, PoolPlan):
        raise TypeError(f"plan: expected a PoolPlan, got {type(plan).__name__} (kvbudget.allocate takes a "
                        "vLLM plan too)")  # fmt: skip
    alloc: Allocator = _torch_allocator if _allocator is None else _allocator
    build = _Build()
    layout: tuple[PoolLayout, ...] = ()
    dev: torch.device | str | None = device
    try:
        layout = layout_of(plan)
        if strategy == "per_layer":
            build.at_tensor = 0  # what an unknown device fails to allocate
        dev = _resolve_device(device)
        if dev.type == "meta":
            zero = False
        (_fill_slab if strategy == "slab" else _fill_per_layer)(build, layout, dev, zero, alloc)
        return KVPools(plan, dev, strategy, build.pools, build.roots, build.slabs, build.index)
    except BaseException as exc:
        error = _failure(build, layout, dev, exc) if isinstance(exc, Exception) and layout else None
        build.clear()
        _clear_traceback_frames(exc)
        if error is None:
            raise
        raise error from exc
