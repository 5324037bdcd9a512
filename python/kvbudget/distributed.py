"""All ranks agree: one KV plan for every rank of a ``torch.distributed`` group.

Every rank of a tensor- or pipeline-parallel server must allocate the same
number of KV tokens. SGLang gets there by MIN-reducing free memory across
ranks (``get_available_gpu_memory(distributed=True)``) and, under pipeline
parallelism, by MIN-reducing ``max_total_num_tokens`` over the world group's
CPU group, because stages hold different layers (SGLang PR #10214,
``ModelRunner.init_memory_pool``). It does not say which rank was short.

:func:`agree` does the same reduction and re-solves the pools from the agreed
value, so every rank gets the same :class:`AgreedPlan`, and it reports every
rank's value and the rank that limited the result (vLLM #34076 asks for it).

torch is imported lazily, inside :func:`agree`; importing this module (or
kvbudget) does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kvbudget._core import (
    InvalidConfigError,
    KVBudgetError,
    MemoryPoolConfig,
    NotEnoughMemoryError,
    PoolPlan,
    SWAPoolTooSmallError,
)

if TYPE_CHECKING:
    from kvbudget.types import Fit
from kvbudget.configurators import PoolConfiguratorBase

__all__ = ["AgreedPlan", "AgreeMode", "agree"]

AgreeMode = Literal["bytes", "tokens"]

# A rank whose own solve failed contributes one of these (valid token counts
# are > 0), so that every rank leaves the collective and raises the same error
# instead of the healthy ranks waiting forever for the failed one.
_ERR_NOT_ENOUGH = 0
_ERR_SWA_TOO_SMALL = -1
_ERR_OTHER = -2
_ERRORS: dict[int, type[KVBudgetError]] = {
    _ERR_NOT_ENOUGH: NotEnoughMemoryError,
    _ERR_SWA_TOO_SMALL: SWAPoolTooSmallError,
    _ERR_OTHER: KVBudgetError,
}


@dataclass(frozen=True)
class AgreedPlan:
    """The pool sizes every rank of a group agreed on.

    Attributes:
        config: the agreed pool sizes (tokens); the same on every rank in
            ``"bytes"`` mode and the same ``max_total_num_tokens`` on every
            rank in ``"tokens"`` mode (the other pools follow each rank's own
            layers through the constraint path).
        plan: this rank's plan of those sizes (every pool and tensor). In
            ``"bytes"`` mode it is ``configurator.plan(agreed bytes, fit)``. In
            ``"tokens"`` mode it is the layout of ``config`` (an exact-fit plan
            whose ``available_bytes`` is the bytes ``config`` takes, not this
            rank's budget; compare its ``total_bytes`` with
            ``available_bytes`` below), or ``None`` where the layout cannot
            reproduce ``config`` (a RequestCap configurator whose SWA cap
            exceeds the agreed token count).
        mode: ``"bytes"`` (MIN of available bytes) or ``"tokens"`` (MIN of max
            token counts, for pipeline parallelism).
        fit: ``"sglang"`` (SGLang's token counts) or ``"exact"`` (counts whose
            exact tensor bytes fit the budget).
        limiting_rank: the lowest group rank holding the minimum.
        per_rank: every rank's value, indexed by group rank: available bytes
            (``"bytes"``) or max token counts (``"tokens"``).
        available_bytes: this rank's own budget, as passed to :func:`agree`.
        reason: a readable sentence naming the limiting rank and its margin.
    """

    config: MemoryPoolConfig
    plan: PoolPlan | None
    mode: AgreeMode
    fit: Fit
    limiting_rank: int
    per_rank: tuple[int, ...]
    available_bytes: int
    reason: str

    @property
    def agreed_value(self) -> int:
        """The MIN across ranks: bytes (``"bytes"`` mode) or tokens (``"tokens"`` mode)."""
        return self.per_rank[self.limiting_rank]

    @property
    def world_size(self) -> int:
        """Number of ranks that agreed."""
        return len(self.per_rank)


def _lowest_min(values: tuple[int, ...] | list[int]) -> int:
    """Index of the minimum of ``values``; the lowest index among ties."""
    if not values:
        raise InvalidConfigError("no ranks to agree across")
    lo = min(values)
    return next(i for i, v in enumerate(values) if v == lo)


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{name} must be an int, got {type(value).__name__}")
    if not -(2**63) <= value < 2**63:
        raise InvalidConfigError(f"{name} = {value} does not fit in 64 bits")
    return value


def _device_for(torch: Any, dist: Any, group: Any) -> Any:
    """The device collectives on ``group`` need: the current CUDA device for NCCL, else CPU."""
    backend = str(dist.get_backend(group)).lower()
    # A single-backend NCCL group only moves CUDA tensors; mixed groups
    # ("cpu:gloo,cuda:nccl"), gloo, mpi and ucc take CPU tensors.
    if "nccl" in backend and "gloo" not in backend and "cpu" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather_int(value: int, group: Any) -> tuple[tuple[int, ...], int]:
    """Every rank's ``value`` (int64), indexed by group rank, and this rank's group rank."""
    import torch
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise InvalidConfigError(
            "torch.distributed is not initialized: call torch.distributed.init_process_group first"
        )
    device = _device_for(torch, dist, group)
    world = dist.get_world_size(group)
    mine = torch.tensor([value], dtype=torch.int64, device=device)
    out = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(out, mine, group=group)
    return tuple(int(t.item()) for t in out), int(dist.get_rank(group))


def _local_tokens(
    configurator: PoolConfiguratorBase, available_bytes: int, fit: Fit
) -> tuple[int, str]:
    """This rank's own max token count, or an error code and message (never raises)."""
    try:
        if fit == "exact":
            return configurator.plan(available_bytes, "exact").config.max_total_num_tokens, ""
        return configurator.calculate_pool_sizes(available_bytes).max_total_num_tokens, ""
    except SWAPoolTooSmallError as e:
        return _ERR_SWA_TOO_SMALL, str(e)
    except NotEnoughMemoryError as e:
        return _ERR_NOT_ENOUGH, str(e)
    except KVBudgetError as e:
        return _ERR_OTHER, str(e)


def _plan_at_tokens(
    configurator: PoolConfiguratorBase, config: MemoryPoolConfig
) -> PoolPlan | None:
    """The plan (every pool and tensor) of ``config``'s sizes, or ``None`` if they plan nothing.

    Built by the core's ``plan_for_config``, so its pools are exactly ``config``'s
    (RequestCap's clamped SWA pool included); its ``available_bytes`` is the bytes
    it takes (``leftover_bytes`` 0), not a rank's budget.
    """
    try:
        return configurator.plan_for_config(config)
    except KVBudgetError:
        return None


def _fmt_gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _reason(mode: AgreeMode, values: tuple[int, ...], lim: int) -> str:
    lo, hi = values[lim], max(values)
    n = len(values)
    if mode == "bytes":
        if lo == hi:
            return f"all {n} ranks have the same available KV memory: {lo:,} bytes ({_fmt_gib(lo)})"
        hi_rank = values.index(hi)
        return (
            f"rank {lim} has the least available KV memory: {lo:,} bytes ({_fmt_gib(lo)}), "
            f"{hi - lo:,} bytes ({_fmt_gib(hi - lo)}) less than the most (rank {hi_rank}); "
            f"every rank plans with {lo:,} bytes"
        )
    if lo == hi:
        return f"all {n} ranks hold the same max token count: {lo:,} tokens"
    hi_rank = values.index(hi)
    return (
        f"rank {lim} holds the fewest KV tokens: {lo:,} ({hi - lo:,} fewer than the most, "
        f"rank {hi_rank} with {hi:,}); every rank plans {lo:,} tokens"
    )


def agree(
    configurator: PoolConfiguratorBase,
    available_bytes: int,
    group: Any = None,
    *,
    mode: AgreeMode = "bytes",
    fit: Fit = "sglang",
) -> AgreedPlan:
    """Agree on one KV plan across the ranks of ``group`` (collective: every rank must call it).

    ``mode="bytes"`` (tensor parallelism, SGLang's rule): the ranks agree on
    the MIN of their available bytes and every rank plans with it, so every
    rank returns the same config and plan. ``mode="tokens"`` (pipeline
    parallelism, where stages hold different layers and so cost different
    bytes per token): each rank solves its own max token count from its own
    budget (``calculate_pool_sizes``, or the exact-fit count with
    ``fit="exact"``), the ranks agree on the MIN, and each rank re-solves its
    pools from it through the constraint path
    (``calculate_pool_sizes_from_max_tokens``).

    One ``all_gather`` of an int64 per rank carries every rank's value, so the
    MIN (what SGLang's all-reduce computes) and the limiting rank (the lowest
    rank holding the minimum) are the same on every rank. Tensors live on the
    current CUDA device for an NCCL group and on the CPU otherwise (gloo, mpi,
    ucc, mixed CPU/CUDA groups).

    Args:
        configurator: this rank's configurator (its own stage's layers under
            pipeline parallelism).
        available_bytes: this rank's KV budget in bytes (REFERENCE section 4).
        group: a ``torch.distributed`` process group; ``None`` is the default
            group. Ranks are reported as ranks within ``group``.
        mode: ``"bytes"`` or ``"tokens"``.
        fit: ``"sglang"`` (SGLang's token counts; the plan reports any
            over-commit) or ``"exact"`` (counts whose tensors fit exactly).

    Returns:
        The :class:`AgreedPlan`.

    Raises:
        InvalidConfigError: bad ``mode``/``fit``/``available_bytes``, or
            torch.distributed is not initialized (raised before the
            collective, on the rank that passed it).
        NotEnoughMemoryError, SWAPoolTooSmallError: the agreed value gives no
            valid pools; every rank raises the same class (in ``"tokens"``
            mode a rank whose own solve fails makes every rank raise, naming it).
    """
    if mode not in ("bytes", "tokens"):
        raise InvalidConfigError(f'mode: expected "bytes" or "tokens", got {mode!r}')
    if fit not in ("exact", "sglang"):
        raise InvalidConfigError(f'fit: expected "exact" or "sglang", got {fit!r}')
    available_bytes = _check_int("available_bytes", available_bytes)

    if mode == "bytes":
        per_rank, _ = _all_gather_int(available_bytes, group)
        lim = _lowest_min(per_rank)
        plan = configurator.plan(per_rank[lim], fit)
        return AgreedPlan(
            config=plan.config,
            plan=plan,
            mode=mode,
            fit=fit,
            limiting_rank=lim,
            per_rank=per_rank,
            available_bytes=available_bytes,
            reason=_reason(mode, per_rank, lim),
        )

    local, message = _local_tokens(configurator, available_bytes, fit)
    per_rank, me = _all_gather_int(local, group)
    lim = _lowest_min(per_rank)
    tokens = per_rank[lim]
    if tokens <= 0:
        cls = _ERRORS.get(tokens, KVBudgetError)
        detail = message if me == lim else "see that rank's error"
        raise cls(f"rank {lim} cannot size its KV pools from its own budget: {detail}")
    config = configurator.calculate_pool_sizes_from_max_tokens(tokens)
    return AgreedPlan(
        config=config,
        plan=_plan_at_tokens(configurator, config),
        mode=mode,
        fit=fit,
        limiting_rank=lim,
        per_rank=per_rank,
        available_bytes=available_bytes,
        reason=_reason(mode, per_rank, lim),
    )
