"""Allocate an exact plan as torch tensors (REFERENCE.md section 3).

:func:`allocate` turns a :class:`~kvbudget.PoolPlan` into tensors laid out as
SGLang lays out its KV pools: per layer, K ``[rows, heads, dk]`` and V
``[rows, heads, dv]`` (MLA: one latent ``kv`` tensor), with ``rows = tokens +
page_size``. The storage it takes is exactly ``plan.total_bytes`` (one slab per pool) or
``plan.tensor_bytes`` (one tensor per K/V, as SGLang allocates).

Checked once, cached per plan: the first :func:`allocate` of a plan object runs
the core's checker (``PoolPlan.check``) and derives the plan's layout
(:mod:`kvbudget._alloc_layout`); later calls with the same object reuse it.

Few torch calls: with ``strategy="slab"`` each pool costs one allocation and
one ``as_strided`` view per run of same-shaped tensors at a constant byte step
(K and V of every layer, when they share a shape, are one run), split into the
per-layer tensors by one ``unbind``. A pool whose tensors are one run of one
dtype is allocated in that dtype (its bytes the same; :attr:`KVPools.slabs`
views it as uint8 when asked); any other pool is a uint8 slab with one dtype
view per dtype. The per-layer records (``__slots__`` objects made without
``__init__``) are made on first use, not by :func:`allocate`: the steady-state
call does the torch work and little else (``benches/bench_alloc.py`` reports
it against a torch floor; the bound is 1.3x).

Interrupt-safe release: whatever leaves :func:`allocate` (``KeyboardInterrupt``
included), every tensor it made is unreferenced first, including from the
frames its traceback keeps (their locals are cleared).

This module imports torch at its top; ``import kvbudget`` does not import it
(``kvbudget.allocate`` and ``kvbudget.KVPools`` load this module on first use).
"""

from __future__ import annotations

import threading
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
    """The default :class:`Allocator`: ``torch.zeros`` or ``torch.empty``.

    ``size=`` by keyword: torch parses a positional shape tuple against its varargs
    overload first, which costs about as much as a one-tensor ``unbind``."""
    if zero:
        return torch.zeros(size=shape, dtype=dtype, device=device)
    return torch.empty(size=shape, dtype=dtype, device=device)


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

    Every tensor exists once :func:`allocate` returns; the :class:`LayerKV`
    records that name them are made on the first call that reads one (any of the
    above but ``plan``, ``device``, ``strategy``, ``slabs``, ``nbytes``, ``len``),
    all at once and once only (the same objects afterwards, from any thread).
    """

    __slots__ = (
        "_device", "_layout", "_made", "_plan", "_records", "_roots", "_slabs", "_strategy",
        "__weakref__",
    )

    def __init__(
        self,
        plan: PoolPlan,
        device: torch.device,
        strategy: Strategy,
        layout: tuple[PoolLayout, ...],
        made: list[tuple[torch.Tensor, ...]],
        roots: list[torch.Tensor],
    ) -> None:
        """Built by :func:`allocate`; not meant to be called directly.

        ``made``: each pool's tensors in the run order of its layout; ``roots``: the
        allocations (for ``"slab"``, one per pool in layout order, typed as
        ``PoolLayout.one`` says: uint8 otherwise).
        """
        self._plan = plan
        self._device = device
        self._strategy: Strategy = strategy
        self._layout = layout
        self._made = made
        self._roots = roots
        self._records: tuple[dict[str, list[LayerKV]], dict[tuple[str, int], LayerKV]] | None = None
        self._slabs: dict[str, torch.Tensor] | None = None

    def _built(self) -> tuple[dict[str, list[LayerKV]], dict[tuple[str, int], LayerKV]]:
        """The records by pool and by ``(pool, layer_id)``, made on the first call."""
        built = self._records
        if built is None:
            with _RECORDS_LOCK:
                built = self._records
                if built is None:
                    built = self._records = _make_records(self._layout, self._made)
        return built

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
        return list(self._built()[0].get("full", ()))

    @property
    def swa(self) -> list[LayerKV]:
        """The sliding-window pool's layers."""
        return list(self._built()[0].get("swa", ()))

    @property
    def draft(self) -> list[LayerKV]:
        """The draft pool's layers (draft-local ids), the SWA-capacity draft pool's after them."""
        pools = self._built()[0]
        return list(pools.get("draft", ())) + list(pools.get("draft_swa", ()))

    @property
    def unified(self) -> list[LayerKV]:
        """Unified memory's pool: every target layer; the first holds the ``bytes`` buffer."""
        return list(self._built()[0].get("unified", ()))

    @property
    def state(self) -> LayerKV | None:
        """A hybrid model's state pool (``plan.pool("state")``): one record whose tensors
        (``conv_state``, ``temporal_state``, the speculative and ReplaySSM buffers) stack the
        state layers, ``[layers, rows, ...]``; None without one."""
        records = self._built()[0].get("state")
        return records[0] if records else None

    @property
    def pools(self) -> dict[str, list[LayerKV]]:
        """Every pool's layers by pool name, in plan order."""
        return {name: list(records) for name, records in self._built()[0].items()}

    @property
    def slabs(self) -> dict[str, torch.Tensor]:
        """The uint8 slab of each pool (``"slab"`` strategy); empty for ``"per_layer"``.

        A pool allocated in its tensors' dtype is given as a uint8 view of that
        allocation (the same storage and bytes), made once, on the first call."""
        slabs = self._slabs
        if slabs is None:
            with _RECORDS_LOCK:
                slabs = self._slabs
                if slabs is None:
                    uint8 = torch.uint8
                    slabs = self._slabs = {} if self._strategy != "slab" else {
                        pl.name: root if root.dtype is uint8 else root.view(uint8)
                        for pl, root in zip(self._layout, self._roots)
                    }  # fmt: skip
        return dict(slabs)

    @property
    def released(self) -> bool:
        """True once :meth:`release` has run."""
        return not self._roots and not self._made

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
        for records in self._built()[0].values():
            yield from records

    def __len__(self) -> int:
        """Number of layer records across pools."""
        return sum(len(pl.records) for pl in self._layout)

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
        index = self._built()[1]
        names = _TARGET_POOLS if pool is None else (pool,)
        for name in names:
            rec = index.get((name, layer_id))
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
        self._records = ({}, {})
        self._slabs = {}
        self._layout = ()
        self._made = []
        self._roots = []

    def __repr__(self) -> str:
        if self.released:
            return f"KVPools(released, device={self._device}, strategy={self._strategy!r})"
        sizes = ", ".join(f"{pl.name}={len(pl.records)}" for pl in self._layout)
        return (
            f"KVPools(device={self._device}, strategy={self._strategy!r}, layers=({sizes}), "
            f"nbytes={self.nbytes})"
        )


# --------------------------------------------------------------------------- allocation

_RECORDS_LOCK = threading.Lock()


def _make_records(
    layout: tuple[PoolLayout, ...], made: list[tuple[torch.Tensor, ...]]
) -> tuple[dict[str, list[LayerKV]], dict[tuple[str, int], LayerKV]]:
    """Each pool's :class:`LayerKV` objects (without ``__init__``) from its run-order tensors,
    by pool name and by ``(pool, layer_id)``."""
    new = object.__new__
    pools: dict[str, list[LayerKV]] = {}
    index: dict[tuple[str, int], LayerKV] = {}
    for pl, tensors in zip(layout, made):
        out: list[LayerKV] = []
        for info, get in pl.records:
            rec = new(LayerKV)
            rec._info = info
            rec._vals = get(tensors)
            out.append(rec)
        pools[pl.name] = out
        index.update(zip(pl.keys, out))
    return pools, index


class _Build:
    """Everything allocated so far: the only owner of the tensors until :class:`KVPools` exists.

    ``roots``: the allocations; ``made``: each finished pool's tensors, in run order.
    ``at_pool``/``at_tensor`` say what is being made (for the error); on failure
    :meth:`clear` drops every tensor.
    """

    __slots__ = ("at_pool", "at_tensor", "made", "roots")

    def __init__(self) -> None:
        self.roots: list[torch.Tensor] = []
        self.made: list[tuple[torch.Tensor, ...]] = []
        self.at_pool = 0
        self.at_tensor: int | None = None

    def clear(self) -> None:
        """Drops every tensor reference."""
        self.roots.clear()
        self.made.clear()


def _fill_slab(
    build: _Build, layout: tuple[PoolLayout, ...], device: torch.device, zero: bool,
    allocator: Allocator,
) -> None:
    """One slab per pool, its tensors views at their planned offsets (kept in ``build``).

    The slab is ``PoolLayout.one``'s dtype when the pool is one run (no dtype view
    to make), else uint8 with a dtype view per dtype its tensors use."""
    uint8 = torch.uint8
    roots, made = build.roots, build.made
    for i, pl in enumerate(layout):
        build.at_pool = i
        one = pl.one
        if one is not None:  # one run of one dtype: the slab in that dtype, one view, one unbind
            dt, numel, size, stride, offset, many = one
            slab = allocator((numel,), dt, device, zero)
            roots.append(slab)
            # Without an offset as_strided keeps the fresh slab's (0), and parses one argument less.
            view = slab.as_strided(size, stride, offset) if offset else slab.as_strided(size, stride)
            made.append(view.unbind(0) if many else (view,))
            continue
        slab = allocator((pl.nbytes,), uint8, device, zero)
        roots.append(slab)
        # A plain loop, not a comprehension: an interrupt inside a comprehension's
        # own frame could leave a view of ``slab`` reachable from the traceback.
        bases: list[torch.Tensor] = []
        for dt, n in pl.bases:
            bases.append(slab if dt is uint8 else (slab if n is None else slab[:n]).view(dt))
        out: tuple[torch.Tensor, ...] = ()
        for base, size, stride, offset, many in pl.views:
            view = bases[base].as_strided(size, stride, offset)
            out += view.unbind(0) if many else (view,)
        made.append(out)


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
        build.made.append(pl.to_runs(tuple(build.roots[first:])))


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


_DEVICES: dict[str | torch.device, tuple[torch.device, bool]] = {}
_DEVICES_SIZE = 64


def _device_of(device: str | torch.device | None) -> tuple[torch.device, bool]:
    """:func:`_resolve_device`'s device and whether it is meta, remembered per ``str`` or
    ``torch.device`` (a pure function of it; ``None`` depends on CUDA, so is resolved each time)."""
    if device is None or not (type(device) is str or type(device) is torch.device):
        dev = _resolve_device(device)
        return dev, dev.type == "meta"
    hit = _DEVICES.get(device)
    if hit is None:
        dev = _resolve_device(device)
        hit = (dev, dev.type == "meta")
        if len(_DEVICES) < _DEVICES_SIZE:
            _DEVICES[device] = hit
    return hit


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
        strategy: ``"slab"`` makes one allocation of ``pool.nbytes`` per
            pool (uint8, or the dtype of its tensors when they are one run of
            one dtype; :attr:`KVPools.slabs` gives each as uint8) and hands out
            views at the planned offsets (one ``as_strided`` per run of
            same-shaped tensors, split by ``unbind``); ``"per_layer"`` makes one
            ``torch.zeros``/``torch.empty`` per tensor, as SGLang does. The shapes
            and dtypes are the same either way.
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
        dev, meta = _device_of(device)
        if meta:
            zero = False
        (_fill_slab if strategy == "slab" else _fill_per_layer)(build, layout, dev, zero, alloc)
        return KVPools(plan, dev, strategy, layout, build.made, build.roots)
    except BaseException as exc:
        error = _failure(build, layout, dev, exc) if isinstance(exc, Exception) and layout else None
        build.clear()
        _clear_traceback_frames(exc)
        if error is None:
            raise
        raise error from exc
