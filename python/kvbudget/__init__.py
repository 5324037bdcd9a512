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
    MAX_PLAN_LAYERS,
    SGLANG_VERSION,
    DraftGeometry,
    MemoryPoolConfig,
    ModelGeometry,
    PoolPlan,
    PoolSpec,
    ServingConfig,
    SpeculativeConfig,
    StateConfig,
    TensorSpec,
    __version__,
)
from kvbudget.sglang.configurators import (
    DefaultPoolConfigurator,
    HybridSWAPoolConfigurator,
    PoolConfiguratorBase,
    SWARequestCapPoolConfigurator,
    create_pool_configurator,
)
from kvbudget.sglang.configurators import Scenario
from kvbudget.errors import (
    _missing_extra,
    AllocationError,
    InvalidConfigError,
    KVBudgetError,
    NotEnoughMemoryError,
    PlanOverflowError,
    SWAPoolTooSmallError,
    UnknownNameError,
)

if TYPE_CHECKING:
    from kvbudget.sglang.configurators import SWAChunkCapPoolConfigurator
    from kvbudget._allocate import allocate
    from kvbudget.alloc import KVPools, LayerKV
    from kvbudget.workload import MinBudget, SwaRatioSuggestion, WithoutDraftTerms
    from kvbudget.batch import BatchResult, StateBatchResult, plan_many
    from kvbudget.distributed import AgreedPlan, agree
    from kvbudget.ranks import Parallelism, RankPlans, plan_ranks

__all__ = [
    "AgreedPlan",
    "AllocationError",
    "BatchResult",
    "DefaultPoolConfigurator",
    "DraftGeometry",
    "HybridSWAPoolConfigurator",
    "InvalidConfigError",
    "KVBudgetError",
    "KVPools",
    "LayerKV",
    "MAX_PLAN_LAYERS",
    "MemoryPoolConfig",
    "StateConfig",
    "MinBudget",
    "ModelGeometry",
    "NotEnoughMemoryError",
    "Parallelism",
    "PlanOverflowError",
    "PoolConfiguratorBase",
    "PoolPlan",
    "PoolSpec",
    "RankPlans",
    "SGLANG_VERSION",
    "SWARequestCapPoolConfigurator",
    "SWAPoolTooSmallError",
    "Scenario",
    "ServingConfig",
    "SpeculativeConfig",
    "StateBatchResult",
    "SwaRatioSuggestion",
    "TensorSpec",
    "UnknownNameError",
    "WithoutDraftTerms",
    "__version__",
    "agree",
    "allocate",
    "create_pool_configurator",
    "plan_many",
    "plan_ranks",
]

# Loaded on first use: torch (alloc), numpy (batch) and dataclasses stay out of
# `import kvbudget`.
_LAZY = {
    "allocate": "kvbudget._allocate",
    "KVPools": "kvbudget.alloc",
    "LayerKV": "kvbudget.alloc",
    "plan_many": "kvbudget.batch",
    "BatchResult": "kvbudget.batch",
    "StateBatchResult": "kvbudget.batch",
    "agree": "kvbudget.distributed",
    "AgreedPlan": "kvbudget.distributed",
    "plan_ranks": "kvbudget.ranks",
    "Parallelism": "kvbudget.ranks",
    "RankPlans": "kvbudget.ranks",
    "MinBudget": "kvbudget.workload",
    "SwaRatioSuggestion": "kvbudget.workload",
    "WithoutDraftTerms": "kvbudget.workload",
}


def __getattr__(name: str) -> Any:
    """Loads the heavier names on first use, so ``import kvbudget`` stays torch- and numpy-free."""
    module = _LAZY.get(name)
    if module is None:
        from kvbudget.sglang.configurators import deprecated_name

        return deprecated_name("kvbudget", name)
    import importlib

    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise _missing_extra(f"kvbudget.{name}", e) from None
    value = getattr(loaded, name)
    globals()[name] = value
    return value

