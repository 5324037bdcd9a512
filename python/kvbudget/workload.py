"""Workload questions an autoscaler asks, answered by the Rust core.

A request of context length ``L`` holds ``ceil_p(L)`` full-pool tokens and
``min(ceil_p(L), ceil_p(W + chunk + p))`` SWA-pool tokens (window, one prefill
chunk, a page; ``chunk`` is ``chunked_prefill_size``, or ``L`` without chunked
prefill). The draft pool mirrors the pool it shares capacity with.
"""

from __future__ import annotations

import numbers

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from kvbudget._core import MemoryPoolConfig, PoolPlan
from kvbudget.sglang.configurators import PoolConfiguratorBase

__all__ = [
    "MinBudget",
    "SwaRatioSuggestion",
    "WithoutDraftTerms",
    "bytes_for_tokens",
    "concurrency",
    "max_context_len",
    "min_budget",
    "suggest_swa_ratio",
    "without_draft_configurator",
    "without_draft_terms",
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
    return configurator._concurrency(_config(pools), context_len)


def max_context_len(configurator: PoolConfiguratorBase, pools: Pools, requests: int) -> int | None:
    """The longest context at which ``pools`` still hold ``requests`` requests at once.

    ``None`` when no length bounds it (an all-SWA model), 0 when not even one token fits.
    """
    return configurator._max_context_len(_config(pools), requests)


@dataclass(frozen=True)
class MinBudget:
    """The smallest budget for a workload: ``available_bytes`` and the plan it gives."""

    available_bytes: int
    primary_tokens: int
    plan: PoolPlan


def min_budget(configurator: PoolConfiguratorBase, requests: int, context_len: int) -> MinBudget:
    """The smallest budget (bytes) whose exact plan holds ``requests`` requests of ``context_len``.

    Raises:
        NotEnoughMemoryError: no budget does (a RequestCap SWA pool capped below the need).
    """
    available, tokens = configurator._min_budget(requests, context_len)
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
    d = configurator._suggest_swa_ratio(
        _integers("context_lengths", context_lengths),
        None if weights is None else _reals("weights", weights),
        available_bytes,
    )
    return SwaRatioSuggestion(**d)


def _checked(name: str, values: Sequence[Any], kind: type, what: str) -> list[Any]:
    """``values`` if each is a ``kind`` (numpy's too) and not a bool, else a TypeError."""
    for v in values:
        if isinstance(v, bool) or not isinstance(v, kind):
            raise TypeError(f"{name} must hold {what}, got {v!r}")
    return list(values)


def _integers(name: str, values: Sequence[int]) -> list[int]:
    """``values`` as ints: integers only (numpy's too), not bools, floats or strings."""
    return [int(v) for v in _checked(name, values, numbers.Integral, "integers")]


def _reals(name: str, values: Sequence[float]) -> list[float]:
    """``values`` as floats: real numbers only, not bools or strings (finiteness is the core's check)."""
    return [float(v) for v in _checked(name, values, numbers.Real, "numbers")]


def without_draft_configurator(configurator: PoolConfiguratorBase) -> PoolConfiguratorBase:
    """The same configurator (same kind, model and serving) with no draft terms in SGLang's budget.

    The speculation keeps its algorithm and its step, top-k and draft-token
    settings; its draft layers (``draft_num_layers``, ``banded_draft_layers``,
    ``draft_swa_num_layers``, the DFLASH cell, fused entries and the draft geometry) are dropped, which is how SGLang
    sized the SWA pools before PR #29622 counted the draft.
    """
    spec = configurator.spec.replace(
        draft_num_layers=0,
        banded_draft_layers=0,
        draft_swa_num_layers=0,
        dflash_draft_cell_size_per_token=None,
        fused_full_entry_bytes=None,
        fused_swa_entry_bytes=None,
        draft=None,
    )
    return configurator.scenario.replace(spec=spec).configurator(configurator.kind)


@dataclass(frozen=True)
class WithoutDraftTerms:
    """What :func:`without_draft_terms` found: SGLang's sizing without the draft, then the draft
    pool allocated at those token counts anyway. Bytes unless named otherwise."""

    cell_size: Union[int, float]
    """SGLang's bytes per token without the draft terms."""
    config: MemoryPoolConfig
    """The pool sizes SGLang resolves without the draft terms, tokens."""
    target_pool_bytes: int
    """The target's pools at those sizes (SGLang's allocation, padding rows included)."""
    allocated_bytes: int
    """The target's pools and the draft pool at those sizes: what would be allocated."""
    draft_pool_bytes: int
    """``allocated_bytes - target_pool_bytes``: the draft pool the budget left out."""
    over_budget_bytes: int
    """``max(0, allocated_bytes - available_bytes)``."""


def without_draft_terms(
    configurator: PoolConfiguratorBase, available_bytes: int
) -> WithoutDraftTerms:
    """SGLang's pools at ``available_bytes`` with the draft left out of its budget, and the cost.

    SGLang before PR #29622 sized the SWA pools as if there were no draft
    (:func:`without_draft_configurator`) and then allocated the draft pool at the
    same token count, overrunning the budget. This gives those sizes, the bytes
    that allocating them with the draft pool takes (the primary pool's token
    count priced by ``configurator``, draft included), and the overrun.

    Raises:
        NotEnoughMemoryError / SWAPoolTooSmallError: no pools without the draft terms either.
    """
    bare = without_draft_configurator(configurator)
    config = bare.calculate_pool_sizes(available_bytes)
    target = bare.plan(available_bytes, fit="sglang")
    allocated = configurator.bytes_for_tokens(config.max_total_num_tokens)
    return WithoutDraftTerms(
        cell_size=bare.cell_size,
        config=config,
        target_pool_bytes=target.total_bytes,
        allocated_bytes=allocated,
        draft_pool_bytes=allocated - target.total_bytes,
        over_budget_bytes=max(0, allocated - available_bytes),
    )
