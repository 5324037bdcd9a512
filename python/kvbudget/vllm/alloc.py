"""Allocate a vLLM plan as vLLM 0.33.0 does: one buffer per worker, every layer a view.

vLLM's ``allocate_kv_cache`` makes one ``torch.zeros(size, int8)`` per worker
(exact size on CUDA) and gives every attention layer an ``as_strided`` view
``[B, H, N, C]`` over it (``create_kv_cache_views``): layer ``i`` of a
:class:`~kvbudget.vllm.VllmTensor` starts at ``offset + i * layer_stride`` and
its bytes are reinterpreted as the spec's dtype. :func:`allocate_vllm` does the
same from the plan's own numbers (``tensors``: shapes, strides, offsets, dtype,
all computed by the core); ``tests/test_vllm_alloc.py`` holds every view to the
one vLLM's real ``create_kv_cache_views`` makes.

Reached through :func:`kvbudget.allocate` (which dispatches on the plan's type).
This module imports torch at its top.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from kvbudget.alloc import Allocator, _clear_traceback_frames, _resolve_device, _torch_allocator
from kvbudget.errors import AllocationError, InvalidConfigError
from kvbudget.vllm.planner import VllmPlan, VllmTensor

__all__ = ["VllmKV", "allocate_vllm"]


class VllmKV(Mapping[str, torch.Tensor]):
    """One vLLM worker's KV cache: the buffer and every layer's view, by layer name.

    A read-only mapping ``layer name -> view`` in plan order. ``buffer`` is the one
    int8 allocation (``plan.allocated_bytes[worker]`` bytes); :meth:`release` drops
    every reference held here.
    """

    __slots__ = ("_buffer", "_device", "_plan", "_views", "_worker")

    def __init__(self, plan: VllmPlan, worker: int, device: torch.device,
                 buffer: torch.Tensor, views: dict[str, torch.Tensor]) -> None:  # fmt: skip
        """Built by :func:`allocate_vllm`; not meant to be called directly."""
        self._plan, self._worker, self._device = plan, worker, device
        self._buffer: torch.Tensor | None = buffer
        self._views = views

    @property
    def plan(self) -> VllmPlan:
        """The plan that was allocated."""
        return self._plan

    @property
    def worker(self) -> int:
        """The worker (stage-major index, ``pp * tp`` of them) whose buffer this is."""
        return self._worker

    @property
    def device(self) -> torch.device:
        """Where the buffer lives."""
        return self._device

    @property
    def buffer(self) -> torch.Tensor:
        """The worker's one int8 buffer.

        Raises:
            RuntimeError: after :meth:`release`.
        """
        if self._buffer is None:
            raise RuntimeError("VllmKV was released")
        return self._buffer

    @property
    def nbytes(self) -> int:
        """Bytes of storage held (the buffer's), 0 after :meth:`release`."""
        return 0 if self._buffer is None else self._buffer.untyped_storage().nbytes()

    def __getitem__(self, name: str) -> torch.Tensor:
        """The ``[B, H, N, C]`` view of layer ``name`` (C in ``dtype`` elements)."""
        return self._views[name]

    def __iter__(self) -> Iterator[str]:
        """Layer names in plan order."""
        return iter(self._views)

    def __len__(self) -> int:
        """Number of layer views."""
        return len(self._views)

    def release(self) -> None:
        """Drops the buffer and every view held here (idempotent)."""
        self._buffer = None
        self._views = {}

    def __repr__(self) -> str:
        state = "released" if self._buffer is None else f"layers={len(self._views)}, nbytes={self.nbytes}"
        return f"VllmKV(worker={self._worker}, device={self._device}, {state})"


def _last_byte(t: VllmTensor) -> int:
    """One past the last byte a tensor's views touch (0 for no layers)."""
    if not t.layers or 0 in t.shape:
        return 0
    reach = sum((n - 1) * s for n, s in zip(t.shape, t.strides))
    return t.offset + (len(t.layers) - 1) * t.layer_stride + reach + 1


def _check(plan: VllmPlan, worker: int) -> tuple[int, tuple[VllmTensor, ...]]:
    """The worker's buffer size and tensors; InvalidConfigError when a view would leave it."""
    if not isinstance(plan, VllmPlan):
        raise TypeError(f"plan: expected a VllmPlan, got {type(plan).__name__}")
    workers = len(plan.allocated_bytes)
    if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < workers:
        raise InvalidConfigError(f"worker: expected 0..{workers - 1}, got {worker!r}")
    size, tensors = plan.allocated_bytes[worker], plan.tensors[worker]
    for t in tensors:
        if t.size != size or _last_byte(t) > size:
            raise InvalidConfigError(
                f"worker {worker}: the views of {t.layers[0] if t.layers else '?'} reach byte "
                f"{_last_byte(t)} of a {t.size}-byte tensor in a {size}-byte buffer"
            )
        if not hasattr(torch, t.dtype) or not isinstance(getattr(torch, t.dtype), torch.dtype):
            raise InvalidConfigError(f"worker {worker}: unknown torch dtype {t.dtype!r}")
    return size, tensors


def _build(alloc: Allocator, dev: torch.device, zero: bool, size: int, tensors: tuple[VllmTensor, ...],
           at: list[str | int]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:  # fmt: skip
    """The buffer and every layer's view (``at``: what is being made, bytes held)."""
    buf = alloc((size,), torch.int8, dev, zero)
    at[1] = size
    base = buf.storage_offset()
    views: dict[str, torch.Tensor] = {}
    for t in tensors:
        whole = buf.as_strided((len(t.layers), *t.shape), (t.layer_stride, *t.strides), base + t.offset)
        dtype = getattr(torch, t.dtype)
        for name, view in zip(t.layers, whole.unbind(0)):
            at[0] = name
            views[name] = view.view(dtype)
    return buf, views


def allocate_vllm(plan: VllmPlan, device: str | torch.device | None = None, zero: bool = True,
                  *, worker: int = 0, _allocator: Allocator | None = None) -> VllmKV:  # fmt: skip
    """Allocates one worker's KV cache of a vLLM plan: one buffer, every layer's view.

    Args:
        plan: a plan from :func:`kvbudget.vllm.plan`.
        device: default ``"cuda"`` when available, else ``"cpu"``; ``"meta"`` is a
            dry run (shapes, strides and dtypes, no memory).
        zero: zero the buffer (vLLM does); ignored on meta.
        worker: which worker's buffer (stage-major, ``pp * tp`` of them).
        _allocator: private test hook replacing the tensor factory.

    Raises:
        AllocationError: the buffer or a view could not be made (out of memory, an
            unknown device, a view torch refuses); nothing is left allocated.
        InvalidConfigError: a worker index outside the plan, or a plan whose views
            would leave the buffer.
    """
    size, tensors = _check(plan, worker)
    alloc: Allocator = _torch_allocator if _allocator is None else _allocator
    at: list[str | int] = ["buffer", 0]  # what is being made, and the bytes held
    dev: torch.device | str | None = device
    try:
        dev = _resolve_device(device)
        zero = zero and dev.type != "meta"
        # The buffer and views go straight into VllmKV, never into a local of this frame: the
        # traceback keeps this frame, which is still running when its frames are cleared.
        return VllmKV(plan, worker, dev, *_build(alloc, dev, zero, size, tensors, at))
    except BaseException as exc:
        _clear_traceback_frames(exc)  # _build's and VllmKV.__init__'s frames held the tensors
        if not isinstance(exc, Exception):
            raise
        where = "the buffer" if at[0] == "buffer" else f"the view of layer {at[0]!r}"
        raise AllocationError(
            f"allocating vLLM worker {worker}'s KV cache on {dev} failed at {where} ({size} bytes "
            f"requested, {at[1]} held and released): {type(exc).__name__}: {exc}",
            pool="vllm", layer_id=None, kind="buffer" if at[0] == "buffer" else "view",
            requested_bytes=size, held_bytes=int(at[1]),
        ) from exc  # fmt: skip
