"""Workload questions an autoscaler asks, answered by the Rust core.

A request of context length ``L`` holds ``ceil_p(L)`` full-pool tokens and
``min(ceil_p(L), ceil_p(W + chunk + p))`` SWA-pool tokens (window, one prefill
chunk, a page; ``chunk`` is ``chunked_prefill_size``, or ``L`` without chunked
prefill). The draft pool mirrors the pool it shares capacity with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from kvbudget._core import MemoryPoolConfig, PoolPlan
from kvbudget.configurators import PoolConfiguratorBase

__all__ = [
    "MinBudget",
    "SwaRatioSuggestion",
    "bytes_for_tokens",
    "concurrency",
    "max_context_len",
    "min_budget",
    "suggest_swa_ratio",
]

Pools = Union[PoolPlan, MemoryPoolConfig]


def _config(pools: Pools) -> MemoryPoolConfig:
    return pools.config if isinstance(pools, PoolPlan) else pools


def bytes_for_tokens(configurator: PoolConfiguratorBase, tokens: int) -> int:
    """Exact bytes of the plan whose primary pool holds ``tokens`` (rounded up to a page).

    Padding rows, alignment gaps and the draft pool are included.
    """
    return configurator.bytes_for_tokens(tokens)


def concurrency(configurator: PoolConfiguratorBase, pools: Pools, context_len: int) -> int:
    """Requests of ``context_len`` tokens that ``pools`` (a plan or SGLang's sizes) hold at once."""
    return configurator.handle.concurrency(_config(pools), context_len)


def max_context_len(configurator: PoolConfiguratorBase, pools: Pools, requests: int) -> int | None:
    """The longest context at which ``pools`` still hold ``requests`` requests at once.

    ``None`` when no length bounds it (an all-SWA model), 0 when not even one token fits.
    """
    return configurator.handle.max_context_len(_config(pools), requests)


@dataclass(frozen=True)
class MinBudget:
    """The smallest budget for a workload: ``available_bytes`` and the plan it gives."""

    available_bytes: int
    primary_tokens: int
    plan: PoolPlan


def min_budget(configurator: PoolConfiguratorBase, requests: int, context_len: int) -> MinBudget:
    """The smallest budget (bytes) whose exact plan holds ``requests`` requests of ``context_len``.

    Raises:
        NotEnoughMemoryError: no budget does (a ChunkCap SWA pool capped below the need).
    """
    available, tokens = configurator.handle.min_budget(requests, context_len)
    return MinBudget(available, tokens, configurator.plan(available, fit="exact"))


@dataclass(frozen=True)
class SwaRatioSuggestion:
    """What :func:`suggest_swa_ratio` found. Concurrency counts average requests of the workload."""

    ratio: float
    concurrency: int
    config: MemoryPoolConfig
    baseline_ratio: float
    baseline_concurrency: int
    baseline_config: MemoryPoolConfig | None
    full_tokens_per_request: float
    swa_tokens_per_request: float
    idle_full_bytes: int
    idle_swa_bytes: int
    baseline_idle_full_bytes: int
    baseline_idle_swa_bytes: int

    @property
    def gain(self) -> float:
        """Concurrency with the suggested ratio over the baseline's (inf if the baseline admits none)."""
        if self.baseline_concurrency == 0:
            return float("inf")
        return self.concurrency / self.baseline_concurrency


def suggest_swa_ratio(
    configurator: PoolConfiguratorBase,
    context_lengths: Sequence[int],
    available_bytes: int,
    *,
    weights: Sequence[float] | None = None,
) -> SwaRatioSuggestion:
    """The ``swa_full_tokens_ratio`` at which the full and SWA pools run out together.

    For a workload of ``context_lengths`` (weighted by ``weights``, else equally) at
    ``available_bytes``, with SGLang's sizing: the balance point ``S/F`` (SWA over
    full tokens per average request), refined among its neighbours, the smallest
    ratio that clears the admission floor and the configurator's own ratio (the
    baseline, 0.8 by default). So it never admits fewer requests than the
    baseline and never breaks the admission floor.

    Raises:
        InvalidConfigError: not a HybridSWA configurator with full and SWA layers,
            or an empty workload.
        SWAPoolTooSmallError / NotEnoughMemoryError: no ratio plans at this budget.
    """
    d = configurator.handle.suggest_swa_ratio(
        [int(x) for x in context_lengths],
        None if weights is None else [float(w) for w in weights],
        available_bytes,
    )
    return SwaRatioSuggestion(**d)


