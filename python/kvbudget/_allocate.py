"""``kvbudget.allocate``: a plan of either engine to torch tensors.

A :class:`~kvbudget.PoolPlan` goes to :func:`kvbudget.alloc.allocate`, a
:class:`~kvbudget.vllm.VllmPlan` to :func:`kvbudget.vllm.alloc.allocate_vllm`.
Importing this module imports torch (``kvbudget.allocate`` loads it on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

import torch

from kvbudget._core import PoolPlan
from kvbudget.alloc import Allocator, KVPools, Strategy
from kvbudget.alloc import allocate as allocate_pools
from kvbudget.errors import InvalidConfigError

if TYPE_CHECKING:
    from kvbudget.vllm.alloc import VllmKV
    from kvbudget.vllm.planner import VllmPlan

__all__ = ["allocate"]


@overload
def allocate(plan: PoolPlan, device: str | torch.device | None = None, strategy: Strategy = "slab",
             zero: bool = True, *, worker: int = 0, _allocator: Allocator | None = None) -> KVPools: ...
@overload
def allocate(plan: VllmPlan, device: str | torch.device | None = None, strategy: Strategy = "slab",
             zero: bool = True, *, worker: int = 0, _allocator: Allocator | None = None) -> VllmKV: ...
def allocate(
    plan: PoolPlan | VllmPlan,
    device: str | torch.device | None = None,
    strategy: Strategy = "slab",
    zero: bool = True,
    *,
    worker: int = 0,
    _allocator: Allocator | None = None,
) -> KVPools | VllmKV:  # fmt: skip
    """Allocates every pool of ``plan``, exactly as planned.

    A :class:`PoolPlan` is :func:`kvbudget.alloc.allocate`'s (its arguments and
    errors). A :class:`~kvbudget.vllm.VllmPlan` is allocated as vLLM does it, for
    one ``worker`` (stage-major): one int8 buffer of ``plan.allocated_bytes[worker]``
    bytes and every layer's view into it (:func:`kvbudget.vllm.alloc.allocate_vllm`,
    which returns a :class:`~kvbudget.vllm.alloc.VllmKV`); ``strategy`` must then be
    ``"slab"``. ``worker`` is ignored for a PoolPlan.
    """
    if isinstance(plan, PoolPlan):
        return allocate_pools(plan, device, strategy, zero, _allocator=_allocator)
    from kvbudget.vllm.planner import VllmPlan

    if not isinstance(plan, VllmPlan):
        raise TypeError(f"plan: expected a PoolPlan or a VllmPlan, got {type(plan).__name__}")
    if strategy not in ("slab", "per_layer"):
        raise InvalidConfigError(f"strategy: expected \"slab\" or \"per_layer\", got {strategy!r}")
    if strategy != "slab":
        raise InvalidConfigError("a vLLM plan is one buffer per worker: strategy must be \"slab\"")
    from kvbudget.vllm.alloc import allocate_vllm

    return allocate_vllm(plan, device, zero, worker=worker, _allocator=_allocator)
