"""kvbudget: exact KV-cache pool planning and allocation for LLM servers.

Plan how many tokens each KV pool holds (full, sliding-window, draft) from a
model's attention geometry, a speculative-decoding draft, parallelism and a
memory budget; SGLang's numbers exactly, plus an exact plan whose tensors
add up to what is allocated, and fit.

Importing kvbudget does not import torch; :func:`allocate` does, lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvbudget._core import (
    DraftGeometry,
    MemoryPoolConfig,
    ModelGeometry,
    PoolPlan,
    PoolSpec,
    ServingConfig,
    SpeculativeConfig,
    TensorSpec,
    __version__,
)
from kvbudget.configurators import (
    DefaultPoolConfigurator,
    HybridSWAPoolConfigurator,
    PoolConfiguratorBase,
    SWAChunkCapPoolConfigurator,
    create_pool_configurator,
)
from kvbudget.errors import (
    AllocationError,
    InvalidConfigError,
    KVBudgetError,
    NotEnoughMemoryError,
    PlanOverflowError,
    SWAPoolTooSmallError,
)

if TYPE_CHECKING:
    from kvbudget.alloc import KVPools, allocate

__all__ = [
    "AllocationError",
    "DefaultPoolConfigurator",
    "DraftGeometry",
    "HybridSWAPoolConfigurator",
    "InvalidConfigError",
    "KVBudgetError",
    "KVPools",
    "MemoryPoolConfig",
    "ModelGeometry",
    "NotEnoughMemoryError",
    "PlanOverflowError",
    "PoolConfiguratorBase",
    "PoolPlan",
    "PoolSpec",
    "SWAChunkCapPoolConfigurator",
    "SWAPoolTooSmallError",
    "ServingConfig",
    "SpeculativeConfig",
    "TensorSpec",
    "__version__",
    "allocate",
    "create_pool_configurator",
]

_LAZY = {"allocate": "kvbudget.alloc", "KVPools": "kvbudget.alloc"}


def __getattr__(name: str) -> Any:
    """Loads the torch-dependent names on first use, so ``import kvbudget`` stays torch-free."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvbudget' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
