"""The layout of a plan as :func:`kvbudget.allocate` builds it: derived once per plan, cached.

:func:`layout_of` runs the core's plan checker (``PoolPlan.check``) and walks the
plan once, turning each pool into a :class:`PoolLayout`: the dtype views of its
slab, one ``as_strided`` view per run of same-shaped tensors at a constant byte
step (split by ``unbind``; a pool that is one such run is allocated in its dtype,
``PoolLayout.one``), and the getters that hand each layer record its tensors.
The result is cached per ``PoolPlan`` object (the last :data:`CACHE_SIZE`, held
by strong reference so an id is never reused while cached). A ``PoolPlan`` is an
immutable native value, made only by the core's planner or by
``from_json``/unpickling (which check it), so a cached layout cannot go stale;
objects that are not a ``PoolPlan`` are walked on every call.

:class:`LayerKV`, the record of one layer's tensors, is here too: one read-only
attribute per tensor kind the core declares (``kvbudget._core.TENSOR_KINDS``, documented
by ``TENSOR_KIND_DOCS``), attached at import; the properties between the ``GENERATED``
markers only type them (``tools/stubgen.py`` renders them from the same tables).

Private to :mod:`kvbudget.alloc` (which exports :class:`LayerKV`); imports torch at its top.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, overload

import torch

from kvbudget import _core
from kvbudget._core import TENSOR_KIND_DOCS, PoolPlan, PoolSpec
from kvbudget.errors import InvalidConfigError

__all__ = ["CACHE", "CACHE_SIZE", "DTYPES", "KIND_RANK", "KINDS", "Getter", "Info", "LayerKV",
           "OneView", "PoolLayout", "View", "layout_of"]

DTYPES: dict[str, torch.dtype] = {
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "uint8": torch.uint8,
    "int32": torch.int32,
    "int8": torch.int8,
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

OneView: TypeAlias = tuple[torch.dtype, int, tuple[int, ...], tuple[int, ...], int, bool]
"""A pool whose tensors are one run of one dtype that divides its bytes: ``(dtype, numel, size,
stride, storage_offset, many)``. Its slab is allocated as ``numel`` elements of ``dtype`` (no
dtype view to make), then its one :data:`View` is made of it."""


class PoolLayout(NamedTuple):
    """One pool as :func:`allocate` builds it, derived once per plan object.

    ``bases``: the slab's dtype views, ``(dtype, bytes)`` (``bytes`` None: the
    whole slab; entry 0 is the uint8 slab itself); ``views`` make the pool's
    tensors in run order. ``tensors`` (shape, dtype, nbytes, layer_id, kind)
    are what ``"per_layer"`` allocates, in plan order; ``to_runs`` reorders
    those into run order. ``records``: each layer's info and the getter of its
    tensors out of the run-order tuple; ``keys``: each record's (pool, layer_id).
    ``one``: the pool's allocation and only view when its tensors are one run
    (:data:`OneView`; the common case, K and V of every layer in one run: one
    allocation, one ``as_strided``, one ``unbind``), else None.
    """

    name: str
    nbytes: int
    bases: tuple[tuple[torch.dtype, int | None], ...]
    views: tuple[View, ...]
    tensors: tuple[tuple[tuple[int, ...], torch.dtype, int, int, str], ...]
    to_runs: Getter
    records: tuple[tuple[Info, Getter], ...]
    keys: tuple[tuple[str, int], ...]
    one: OneView | None


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
    one: OneView | None = None
    if len(views) == 1 and nbytes % bases[views[0][0]][0].itemsize == 0:
        b, size_, stride, off, many = views[0]
        one = (bases[b][0], nbytes // bases[b][0].itemsize, size_, stride, off, many)
    return PoolLayout(
        name, nbytes, tuple(bases), tuple(views),
        tuple((shape, dtype, n, layer_id, kind) for layer_id, kind, shape, dtype, n, _ in specs),
        _getter(order), tuple(records), tuple((name, layer_id) for layer_id in pool.layer_ids), one,
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


_OptT: TypeAlias = "torch.Tensor | None"


class _TensorField:
    """A read-only :class:`LayerKV` attribute: the layer's tensor of one kind, or None."""

    def __init__(self, kind: str, doc: str) -> None:
        self.__doc__ = doc
        self.kind = kind

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _TensorField: ...
    @overload
    def __get__(self, obj: LayerKV, owner: type | None = None) -> torch.Tensor | None: ...
    def __get__(self, obj: LayerKV | None, owner: type | None = None) -> torch.Tensor | None | _TensorField:
        if obj is None:
            return self
        i = obj._info[2].get(self.kind)
        return None if i is None else obj._vals[i]

    def __set__(self, obj: LayerKV, value: object) -> None:
        raise AttributeError(f"LayerKV is read-only: cannot assign to {self.kind!r}")


class LayerKV:
    """The tensors of one layer of one pool (read-only).

    One attribute per tensor kind of the core (``kvbudget._core.TENSOR_KINDS``, in that
    order; each documented by ``TENSOR_KIND_DOCS``), None where the layer has no tensor
    of that kind. MHA/GQA layers have ``k`` and ``v`` (and ``k_scale``/``v_scale`` for
    mxfp8 and the FP4 recipes; ``native_k_scale``/``native_v_scale`` for NVFP4's
    native layout); MLA layers have the latent ``kv`` (and ``kv_scale``) and no
    ``k``/``v``; a DFLASH draft given only its bytes per token has one opaque uint8
    ``cache`` tensor; a DSA layer adds its uint8 ``index_k``. Buffers a pool keeps
    once sit on its first layer: NVFP4's dequant workspace (``dq_k``/``dq_v``), a
    fused draft ``entry`` (the pool's only tensor: its other layers' records are
    empty), the unified pool's one-dimensional ``bytes``. The first dimension of
    every tensor is rows (``tokens + page_size``; the unified pool's is its bytes).
    ``layer_id`` is the global target layer id for the target pools and the
    draft-local index for ``"draft"`` and ``"draft_swa"``. Compared by identity
    (tensors have no boolean equality); assigning or deleting an attribute raises
    ``AttributeError``.

    Two slots: ``_info`` (:data:`Info`) and ``_vals``, the tensors in kind order.
    """

    __slots__ = ("__weakref__", "_info", "_vals")

    _info: Info
    _vals: tuple[torch.Tensor, ...]

    def __init__(self, pool: str, layer_id: int, *tensors: _OptT, **by_kind: _OptT) -> None:
        """A record of ``pool``'s layer ``layer_id`` holding the tensors given, by kind
        (positional ones in ``TENSOR_KINDS`` order)."""
        if len(tensors) > len(KINDS):
            raise TypeError(f"LayerKV() takes at most {len(KINDS)} tensors, got {len(tensors)}")
        given = dict(zip(KINDS, tensors))
        for kind, t in by_kind.items():
            if kind not in KIND_RANK or kind in given:
                why = "an unexpected" if kind not in KIND_RANK else "a repeated"
                raise TypeError(f"LayerKV() got {why} tensor kind {kind!r}")
            given[kind] = t
        present = [(kind, t) for kind in KINDS if (t := given.get(kind)) is not None]
        self._info = (pool, layer_id, {kind: i for i, (kind, _) in enumerate(present)})
        self._vals = tuple(t for _, t in present)

    if TYPE_CHECKING:
        # BEGIN GENERATED (tools/stubgen.py)
        __match_args__ = ("pool", "layer_id", "k", "v", "k_scale", "v_scale", "kv", "kv_scale",
            "cache", "native_k_scale", "native_v_scale", "dq_k", "dq_v", "entry", "bytes",
            "index_k", "conv_state", "temporal_state", "intermediate_ssm",
            "intermediate_conv_window", "replay_d", "replay_k", "replay_g", "replay_raw_v",
            "replay_raw_k", "replay_beta", "replay_write_pos", "replay_cache_base",
            "replay_is_flush", "state_extra")
        (k, v, k_scale, v_scale, kv, kv_scale, cache, native_k_scale, native_v_scale, dq_k,
            dq_v, entry, bytes, index_k, conv_state, temporal_state, intermediate_ssm,
            intermediate_conv_window, replay_d, replay_k, replay_g, replay_raw_v, replay_raw_k,
            replay_beta, replay_write_pos, replay_cache_base, replay_is_flush,
            state_extra) = ((_TensorField("", ""),) * 28)
        # END GENERATED
    else:
        __match_args__ = ("pool", "layer_id", *KINDS)

    @property
    def pool(self) -> str:
        """The pool's name: ``"full"``, ``"swa"``, ``"unified"``, ``"draft"`` or ``"draft_swa"``."""
        return self._info[0]

    @property
    def layer_id(self) -> int:
        """Global target layer id (target pools) or draft-local index (draft pools)."""
        return self._info[1]

    @property
    def is_mla(self) -> bool:
        """True for an MLA layer (one latent ``kv`` tensor, no separate V)."""
        return "kv" in self._info[2]

    def tensors(self) -> dict[str, torch.Tensor]:
        """The tensors present, by kind (``"k"``, ``"v"``, ``"k_scale"``, ...), in plan order."""
        return dict(zip(self._info[2], self._vals))

    @property
    def nbytes(self) -> int:
        """Bytes of this layer's tensors (elements times element size; views counted as views)."""
        return sum(t.numel() * t.element_size() for t in self._vals)

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{kind}={tuple(t.shape)}:{str(t.dtype).removeprefix('torch.')}"
            for kind, t in self.tensors().items()
        )
        return f"LayerKV(pool={self.pool!r}, layer_id={self.layer_id}, {parts})"


for _kind in KINDS:
    setattr(LayerKV, _kind, _TensorField(_kind, " ".join(TENSOR_KIND_DOCS[_kind].split()) + " None if absent."))
del _kind
