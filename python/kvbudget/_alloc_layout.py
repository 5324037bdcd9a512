"""The layout of a plan as :func:`kvbudget.allocate` builds it: derived once per plan, cached.

:func:`layout_of` runs the core's plan checker (``PoolPlan.check``) and walks the
plan once, turning each pool into a :class:`PoolLayout`: the dtype views of its
slab, one ``as_strided`` view per run of same-shaped tensors at a constant byte
step (split by ``unbind``), and the getters that hand each layer record its
tensors. The result is cached per ``PoolPlan`` object (the last
:data:`CACHE_SIZE`, held by strong reference so an id is never reused while
cached). A ``PoolPlan`` is an immutable native value, made only by the core's
planner or by ``from_json``/unpickling (which check it), so a cached layout
cannot go stale; objects that are not a ``PoolPlan`` are walked on every call.

Private to :mod:`kvbudget.alloc`; imports torch at its top.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import NamedTuple, TypeAlias

import torch

from kvbudget import _core
from kvbudget._core import PoolPlan, PoolSpec
from kvbudget.errors import InvalidConfigError

__all__ = ["CACHE", "CACHE_SIZE", "DTYPES", "KINDS", "Getter", "Info", "PoolLayout", "View", "layout_of"]

DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "uint8": torch.uint8,
}

KINDS: tuple[str, ...] = _core.TENSOR_KINDS
"""The core's tensor kinds, in layer order (``LayerKV``'s attributes follow it)."""
KIND_RANK: dict[str, int] = {kind: i for i, kind in enumerate(KINDS)}

Info: TypeAlias = "tuple[str, int, dict[str, int]]"
"""A record's ``(pool, layer_id, kind -> position in its tensors)``; the map is shared by
the records of a pool with the same kinds."""


Getter: TypeAlias = Callable[[Sequence[torch.Tensor]], tuple[torch.Tensor, ...]]
"""Picks tensors out of a tuple, as a tuple (an ``itemgetter``: C speed)."""

View: TypeAlias = tuple[int, tuple[int, ...], tuple[int, ...], int, bool]
"""``(base, size, stride, storage_offset, many)``: ``bases[base].as_strided(size, stride,
storage_offset)``, then ``unbind(0)`` when ``many`` (a run of tensors)."""


class PoolLayout(NamedTuple):
    """One pool as :func:`allocate` builds it, derived once per plan object.

    ``bases``: the slab's dtype views, ``(dtype, bytes)`` (``bytes`` None: the
    whole slab; entry 0 is the uint8 slab itself); ``views`` make the pool's
    tensors in run order. ``tensors`` (shape, dtype, nbytes, layer_id, kind)
    are what ``"per_layer"`` allocates, in plan order; ``to_runs`` reorders
    those into run order. ``records``: each layer's info and the getter of its
    tensors out of the run-order tuple; ``keys``: each record's (pool, layer_id).
    """

    name: str
    nbytes: int
    bases: tuple[tuple[torch.dtype, int | None], ...]
    views: tuple[View, ...]
    tensors: tuple[tuple[tuple[int, ...], torch.dtype, int, int, str], ...]
    to_runs: Getter
    records: tuple[tuple[Info, Getter], ...]
    keys: tuple[tuple[str, int], ...]


CACHE_SIZE = 16
CACHE: dict[int, tuple[PoolPlan, tuple[PoolLayout, ...]]] = {}
_CACHE_LOCK = threading.Lock()


def _getter(positions: Sequence[int]) -> Getter:
    """An itemgetter returning a tuple (for zero or one position, a slice of the tuple)."""
    if len(positions) > 1:
        return itemgetter(*positions)
    start = positions[0] if positions else 0
    return itemgetter(slice(start, start + len(positions)))


def _specs(pool: PoolSpec) -> list[tuple[int, str, tuple[int, ...], torch.dtype, int, int]]:
    """The pool's tensors as ``(layer_id, kind, shape, dtype, nbytes, offset)``.

    The core's plan checker (``PoolPlan.check``, run by :func:`layout_of` first)
    holds the layout contract: each listed layer's tensors once, shapes giving
    their bytes, offsets 256-byte aligned inside the slab. Only torch's side is
    looked up here: InvalidConfigError for a storage dtype or kind torch views
    cannot make.
    """
    out: list[tuple[int, str, tuple[int, ...], torch.dtype, int, int]] = []
    for t in pool.tensors:
        dtype = DTYPES.get(t.dtype)
        if dtype is None or t.kind not in KIND_RANK:
            raise InvalidConfigError(
                f"tensor {pool.name}/{t.layer_id}/{t.kind}: no torch view for dtype {t.dtype!r}, kind {t.kind!r}"
            )
        out.append((t.layer_id, t.kind, tuple(t.shape), dtype, t.nbytes, t.offset))
    return out


def _pool_layout(pool: PoolSpec, shared: dict[tuple[str, ...], dict[str, int]]) -> PoolLayout:
    """One pool's views and records (``shared``: the kind maps, one per set of kinds)."""
    name, nbytes, specs = pool.name, pool.nbytes, _specs(pool)
    # Runs of same-shaped tensors at a constant byte step, in plan order: one view each.
    runs: list[list[int]] = []
    open_runs: dict[tuple[tuple[int, ...], torch.dtype], list[int]] = {}
    for i, (_, _, shape, dtype, _, off) in enumerate(specs):
        run = open_runs.get((shape, dtype))
        if run is not None:
            step = off - specs[run[-1]][5]
            if step >= 0 and step % dtype.itemsize == 0 and (
                len(run) == 1 or step == specs[run[1]][5] - specs[run[0]][5]
            ):
                run.append(i)
                continue
        open_runs[(shape, dtype)] = run = [i]
        runs.append(run)

    bases: list[tuple[torch.dtype, int | None]] = [(torch.uint8, None)]
    base_of: dict[torch.dtype, int] = {torch.uint8: 0}
    views: list[View] = []
    for run in runs:
        _, _, shape, dtype, _, off = specs[run[0]]
        size = dtype.itemsize
        if dtype not in base_of:
            base_of[dtype] = len(bases)
            bases.append((dtype, None if nbytes % size == 0 else nbytes - nbytes % size))
        strides = [1] * len(shape)
        for d in range(len(shape) - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        b, many = base_of[dtype], len(run) > 1
        step = (specs[run[-1]][5] - off) // size // max(1, len(run) - 1)
        size_, stride = ((len(run), *shape), (step, *strides)) if many else (shape, tuple(strides))
        views.append((b, size_, stride, off // size, many))

    order = [i for run in runs for i in run]  # run position -> plan index
    where: dict[int, list[tuple[int, int]]] = {}
    for pos, i in enumerate(order):
        where.setdefault(specs[i][0], []).append((KIND_RANK[specs[i][1]], pos))
    records: list[tuple[Info, Getter]] = []
    for layer_id in pool.layer_ids:
        items = sorted(where.get(layer_id, ()))
        kinds = tuple(KINDS[rank] for rank, _ in items)
        idx = shared.setdefault(kinds, {kind: j for j, kind in enumerate(kinds)})
        records.append(((name, layer_id, idx), _getter([pos for _, pos in items])))
    return PoolLayout(
        name, nbytes, tuple(bases), tuple(views),
        tuple((shape, dtype, n, layer_id, kind) for layer_id, kind, shape, dtype, n, _ in specs),
        _getter(order), tuple(records), tuple((name, layer_id) for layer_id in pool.layer_ids),
    )


def layout_of(plan: PoolPlan) -> tuple[PoolLayout, ...]:
    """The plan's layout: cached per ``PoolPlan`` object, ``plan.check()`` run once, when derived."""
    cacheable = type(plan) is PoolPlan
    if cacheable:
        hit = CACHE.get(id(plan))
        if hit is not None and hit[0] is plan:
            return hit[1]
    plan.check()
    shared: dict[tuple[str, ...], dict[str, int]] = {}
    layout = tuple(_pool_layout(pool, shared) for pool in plan.pools)
    if cacheable:
        with _CACHE_LOCK:
            while len(CACHE) >= CACHE_SIZE:
                del CACHE[next(iter(CACHE))]
            CACHE[id(plan)] = (plan, layout)
    return layout
