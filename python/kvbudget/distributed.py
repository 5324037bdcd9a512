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

Same plan, checked
------------------
A MIN is only meaningful between ranks that plan the same thing, so the one
``all_gather`` that carries each rank's value also carries a fingerprint of
what it plans: a sha256 digest of each field below (a fixed 304-byte int64
row per rank, whatever the model). Every rank compares every rank's row; on a
difference every rank raises the same :class:`InvalidConfigError`, naming the
ranks and the field (``ranks 0, 2 plan page_size 64, rank 1 plans 16``).

======================  ==================  ====================================
field                   ``"bytes"`` mode    ``"tokens"`` mode (pipeline stages)
======================  ==================  ====================================
mode, fit               must match          must match
page size               must match          must match
serving (every other    must match          must match (server arguments are
field of its JSON)                          the same on every stage)
model geometry (heads,  must match          must match
dims, window, MLA dims)
model layer ids         must match          may differ (each stage its slice)
configurator kind       must match          may differ (it follows from the
                                            stage's layers and ``serving``)
spec                    must match          must match among the ranks that
                                            carry a draft; the others pass none
======================  ==================  ====================================

When the modes differ only the fields both modes check are compared.

A rank that fails before the collective (invalid arguments, or in
``"tokens"`` mode its own solve) still joins it, with an error code in place
of its value, so the other ranks do not wait for the process-group timeout:
every rank raises at once, the same class, naming the failed rank(s), the
error kind and message. When a check fails, a second ``all_gather`` (sized
from the first) carries each rank's fields and error text for the message;
it runs only then, on every rank alike.

torch is imported lazily, inside :func:`agree`; importing this module (or
kvbudget) does not import torch.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from kvbudget._core import (
    InvalidConfigError,
    KVBudgetError,
    MemoryPoolConfig,
    NotEnoughMemoryError,
    PlanOverflowError,
    PoolPlan,
    SWAPoolTooSmallError,
)

if TYPE_CHECKING:
    from kvbudget.types import Fit
from kvbudget.errors import _missing_extra
from kvbudget.sglang.configurators import PoolConfiguratorBase

__all__ = ["AgreedPlan", "AgreeMode", "agree"]

AgreeMode = Literal["bytes", "tokens"]

# --------------------------------------------------------------------------- the row

# Every rank contributes one int64 row: this header, then one sha256 digest
# (4 int64 words) per fingerprint field.
_MAGIC = 0x6B76_6267_0002  # "kvbg", agree protocol 2 (value, error code, fingerprint)
_H_MAGIC, _H_ERROR, _H_STAGE, _H_VALUE, _H_DETAIL, _H_DRAFT = range(6)
_HEADER = 6
_WORDS = 4

# Fingerprint fields, in the order a mismatch is reported.
_FIELDS = ("mode", "fit", "page_size", "serving", "geometry", "kind", "layers", "spec")
_ALWAYS = ("mode", "fit", "page_size", "serving", "geometry")  # both modes
_BYTES_ONLY = ("kind", "layers", "spec")  # "bytes" mode; "tokens" compares spec among drafters
_ROW = _HEADER + _WORDS * len(_FIELDS)

# _H_STAGE: where a rank failed. A rank failing at _STAGE_INPUTS has no fingerprint.
_STAGE_OK = 0
_STAGE_INPUTS = 1  # its arguments are invalid (or its configurator cannot be read)
_STAGE_SOLVE = 2  # "tokens" mode: its own max token count cannot be solved

# _H_ERROR: the failed rank's error kind; every rank raises that class.
_ERR_NONE = 0
_ERR_NOT_ENOUGH = 1
_ERR_SWA_TOO_SMALL = 2
_ERR_INVALID = 3
_ERR_OVERFLOW = 4
_ERR_KVBUDGET = 5  # another KVBudgetError
_ERR_FOREIGN = 6  # not a kvbudget error (TypeError, ...): the ranks raise KVBudgetError
# Subclasses before their bases: a rank's error takes the first code it is an instance of.
_ERRORS: dict[int, type[KVBudgetError]] = {
    _ERR_OVERFLOW: PlanOverflowError,
    _ERR_SWA_TOO_SMALL: SWAPoolTooSmallError,
    _ERR_NOT_ENOUGH: NotEnoughMemoryError,
    _ERR_INVALID: InvalidConfigError,
    _ERR_KVBUDGET: KVBudgetError,
}
_MAX_MESSAGE = 4000  # characters of a failed rank's message sent to the others
_MAX_SHOWN = 60  # characters of one field value in a mismatch message
_MAX_CLAUSES = 8


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


def _error_code(e: BaseException) -> int:
    """The ``_ERR_*`` code of ``e``."""
    return next((code for code, cls in _ERRORS.items() if isinstance(e, cls)), _ERR_FOREIGN)


def _digest(fields: dict[str, Any]) -> list[int]:
    """sha256 of ``fields``' canonical JSON as 4 signed int64 words."""
    raw = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    h = hashlib.sha256(raw).digest()
    return [int.from_bytes(h[i : i + 8], "little", signed=True) for i in range(0, 32, 8)]


_BYTES_MODE = _digest({"mode": "bytes"})
_TOKENS_MODE = _digest({"mode": "tokens"})


class _Fingerprint(NamedTuple):
    """What a rank plans: every field's readable values (JSON), digests, and draft or not."""

    fields_json: str  # {field: {readable key: value}}, sent only when a check fails
    words: tuple[int, ...]  # _WORDS per field of _FIELDS, in that order
    has_draft: bool


@functools.lru_cache(maxsize=32)
def _fingerprint(
    kind: str, model_json: str, serving_json: str, spec_json: str, mode: str, fit: str
) -> _Fingerprint:
    """The fingerprint of these inputs (cached: ``agree`` is called again with the same)."""
    model = json.loads(model_json)
    serving = json.loads(serving_json)
    spec = json.loads(spec_json)
    page_size = serving.pop("page_size")
    counts = ("num_full_layers", "num_swa_layers")  # they follow from the layer ids
    shape = {k: v for k, v in model["shape"].items() if k not in counts}
    fields = {
        "mode": {"mode": mode},
        "fit": {"fit": fit},
        "page_size": {"page_size": page_size},
        "serving": {f"serving.{k}": v for k, v in serving.items()},
        "geometry": {f"model.{k}": v for k, v in shape.items()},
        "kind": {"configurator kind": kind},
        "layers": {
            f"model.{k}": model[k]
            for k in ("full_attention_layer_ids", "swa_attention_layer_ids")
        },
        "spec": {f"spec.{k}": v for k, v in spec.items()},
    }
    words = tuple(w for name in _FIELDS for w in _digest(fields[name]))
    return _Fingerprint(json.dumps(fields), words, spec["algorithm"] != "none")


@dataclass
class _Local:
    """This rank's contribution: its value, fingerprint, or the error that stopped it."""

    fp: _Fingerprint | None = None
    value: int = 0
    stage: int = _STAGE_OK
    error: Exception | None = None

    def fail(self, stage: int, error: Exception) -> None:
        self.stage, self.error, self.value = stage, error, 0

    def detail(self) -> bytes:
        """The text sent in the second exchange: fields and error (kind, message)."""
        err = None
        if self.error is not None:
            err = [type(self.error).__name__, str(self.error)[:_MAX_MESSAGE]]
        fields = "null" if self.fp is None else self.fp.fields_json
        return f'{{"fields": {fields}, "error": {json.dumps(err)}}}'.encode()

    def row(self, detail_len: int) -> list[int]:
        code = _ERR_NONE if self.error is None else _error_code(self.error)
        draft = self.fp is not None and self.fp.has_draft
        row = [_MAGIC, code, self.stage, self.value, detail_len, int(draft)]
        return row + (list(self.fp.words) if self.fp is not None else [0] * _WORDS * len(_FIELDS))


def _prepare(
    configurator: PoolConfiguratorBase, available_bytes: int, mode: str, fit: str
) -> _Local:
    """Check the arguments and fingerprint them; never raises (a failure is recorded)."""
    local = _Local()
    try:
        if mode not in ("bytes", "tokens"):
            raise InvalidConfigError(f'mode: expected "bytes" or "tokens", got {mode!r}')
        if fit not in ("exact", "sglang"):
            raise InvalidConfigError(f'fit: expected "exact" or "sglang", got {fit!r}')
        local.value = _check_int("available_bytes", available_bytes)
        if not isinstance(configurator, PoolConfiguratorBase):
            raise InvalidConfigError(
                f"configurator must be a PoolConfiguratorBase, got {type(configurator).__name__}"
            )
        c = configurator
        local.fp = _fingerprint(
            c.kind, c.model.to_json(), c.serving.to_json(), c.spec.to_json(), mode, fit
        )
    except Exception as e:  # noqa: BLE001 - every failure must reach the collective
        local.fail(_STAGE_INPUTS, e)
    return local


# --------------------------------------------------------------------------- collectives


def _dist(local: _Local) -> tuple[Any, Any]:
    """``(torch, torch.distributed)``; without an initialized group, this rank's error or ours."""
    try:
        import torch
        import torch.distributed as dist
    except ModuleNotFoundError as e:
        if local.error is not None:
            raise local.error from None
        raise _missing_extra("kvbudget.agree", e) from None
    if not dist.is_available() or not dist.is_initialized():
        if local.error is not None:
            raise local.error
        raise InvalidConfigError(
            "torch.distributed is not initialized: call torch.distributed.init_process_group first"
        )
    return torch, dist


def _device_for(torch: Any, dist: Any, group: Any) -> Any:
    """The device collectives on ``group`` need: the current CUDA device for NCCL, else CPU."""
    backend = str(dist.get_backend(group)).lower()
    # A single-backend NCCL group only moves CUDA tensors; mixed groups
    # ("cpu:gloo,cuda:nccl"), gloo, mpi and ucc take CPU tensors.
    if "nccl" in backend and "gloo" not in backend and "cpu" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather(dist: Any, group: Any, mine: Any) -> list[Any]:
    """Every rank's tensor (shaped like ``mine``), indexed by group rank, on the CPU."""
    out = [mine.new_empty(mine.shape) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, mine, group=group)
    return [t.cpu() for t in out]


def _exchange_details(
    torch: Any, dist: Any, group: Any, device: Any, rows: list[list[int]], mine: bytes
) -> list[dict[str, Any]]:
    """The second exchange: every rank's :meth:`_Local.detail`, padded to the longest."""
    size = max(r[_H_DETAIL] for r in rows)
    buf = torch.zeros(size, dtype=torch.uint8)
    buf[: len(mine)] = torch.frombuffer(bytearray(mine), dtype=torch.uint8)
    out = []
    for r, t in enumerate(_all_gather(dist, group, buf.to(device))):
        try:
            out.append(json.loads(bytes(t[: rows[r][_H_DETAIL]].tolist())))
        except ValueError:
            out.append({"fields": None, "error": None})
    return out


# --------------------------------------------------------------------------- checks


def _ranks(rs: list[int]) -> str:
    return f"rank {rs[0]}" if len(rs) == 1 else "ranks " + ", ".join(map(str, rs))


def _show(value: Any) -> str:
    s = json.dumps(value)
    return s if len(s) <= _MAX_SHOWN else s[: _MAX_SHOWN - 3] + "..."


def _clause(key: str, shown: dict[int, str]) -> str:
    """``ranks 0, 2 plan page_size 64, rank 1 plans 16``: ranks grouped by value, lowest first."""
    groups: dict[str, list[int]] = {}
    for r in sorted(shown):
        groups.setdefault(shown[r], []).append(r)
    parts = []
    for i, (value, rs) in enumerate(groups.items()):
        verb = "plans" if len(rs) == 1 else "plan"
        parts.append(f"{_ranks(rs)} {verb} {key + ' ' if i == 0 else ''}{value}")
    return ", ".join(parts)


def _mismatches(rows: list[list[int]]) -> tuple[list[tuple[str, list[int]]], str]:
    """The fields (with the ranks compared) whose digests differ among ranks with a
    fingerprint, and the rule that applied."""
    have = [r for r, row in enumerate(rows) if row[_H_STAGE] != _STAGE_INPUTS]

    def digest(r: int, name: str) -> tuple[int, ...]:
        at = _HEADER + _WORDS * _FIELDS.index(name)
        return tuple(rows[r][at : at + _WORDS])

    def differs(name: str, ranks: list[int]) -> bool:
        return len({digest(r, name) for r in ranks}) > 1

    out = [(name, have) for name in _ALWAYS if differs(name, have)]
    rule = "every rank must pass the same mode, fit, page size, serving and model geometry"
    if not have or differs("mode", have):
        return out, rule
    if list(digest(have[0], "mode")) == _BYTES_MODE:
        out += [(name, have) for name in _BYTES_ONLY if differs(name, have)]
        rule = (
            'in "bytes" mode every rank must plan the same configurator, model, serving, spec, '
            "page size and fit"
        )
    elif list(digest(have[0], "mode")) == _TOKENS_MODE:
        drafters = [r for r in have if rows[r][_H_DRAFT]]
        if differs("spec", drafters):
            out.append(("spec", drafters))
        rule = (
            'in "tokens" mode the stages may differ only in their layers and in which of them '
            "carry the draft"
        )
    out.sort(key=lambda m: _FIELDS.index(m[0]))
    return out, rule


def _mismatch_text(
    mismatches: list[tuple[str, list[int]]], rule: str, details: list[dict[str, Any]]
) -> str:
    clauses = []
    for name, ranks in mismatches:
        per_rank = {r: (details[r].get("fields") or {}).get(name) or {} for r in ranks}
        keys = list(dict.fromkeys(k for r in ranks for k in per_rank[r]))
        found = False
        for key in keys:
            shown = {r: _show(per_rank[r].get(key)) for r in ranks}
            if len(set(shown.values())) > 1:
                clauses.append(_clause(key, shown))
                found = True
        if not found:  # the details could not be read: name the field only
            clauses.append(f"{_ranks(ranks)} plan different {name}")
    more = len(clauses) - _MAX_CLAUSES
    text = "; ".join(clauses[:_MAX_CLAUSES]) + (f"; and {more} more" if more > 0 else "")
    return f"the ranks do not plan the same thing: {text} ({rule})"


def _failure_text(rows: list[list[int]], failed: list[int], details: list[dict[str, Any]]) -> str:
    parts = []
    for r in failed:
        err = details[r].get("error") or ["an error", "(its message did not arrive)"]
        what = f"{err[0]}: {err[1]}"
        if rows[r][_H_STAGE] == _STAGE_SOLVE:
            parts.append(f"rank {r} cannot size its KV pools from its own budget: {what}")
        else:
            parts.append(f"rank {r} failed before agreeing: {what}")
    return "; ".join(parts)


def _gather_checked(local: _Local, torch: Any, dist: Any, group: Any) -> tuple[int, ...]:
    """Exchange rows, check them, and return every rank's value, indexed by group rank.

    Raises on every rank alike when a rank failed or the fingerprints differ.
    """
    if int(dist.get_rank(group)) < 0:
        raise InvalidConfigError("this rank is not a member of the group passed to agree")
    device = _device_for(torch, dist, group)
    detail = local.detail()
    mine = torch.tensor(local.row(len(detail)), dtype=torch.int64, device=device)
    rows = [t.tolist() for t in _all_gather(dist, group, mine)]
    alien = [r for r, row in enumerate(rows) if len(row) != _ROW or row[_H_MAGIC] != _MAGIC]
    if alien:
        raise InvalidConfigError(
            f"{_ranks(alien)} sent no kvbudget agree row: every rank of the group must call "
            "kvbudget.agree, of the same kvbudget version, at the same point"
        )
    failed = [r for r, row in enumerate(rows) if row[_H_STAGE] != _STAGE_OK]
    mismatches, rule = _mismatches(rows)
    if failed or mismatches:
        details = _exchange_details(torch, dist, group, device, rows, detail)
        if mismatches:
            cls: type[KVBudgetError] = InvalidConfigError
            msg = _mismatch_text(mismatches, rule, details)
            if failed:
                msg += "; also " + _failure_text(rows, failed, details)
        else:
            cls = _ERRORS.get(rows[failed[0]][_H_ERROR], KVBudgetError)
            msg = _failure_text(rows, failed, details)
        raise cls(msg) from local.error
    return tuple(row[_H_VALUE] for row in rows)


def _own_tokens(configurator: PoolConfiguratorBase, available_bytes: int, fit: Fit) -> int:
    """This rank's own max token count from its own budget ("tokens" mode)."""
    if fit == "exact":
        return configurator.plan(available_bytes, "exact").config.max_total_num_tokens
    return configurator.calculate_pool_sizes(available_bytes).max_total_num_tokens

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

    One ``all_gather`` of a fixed int64 row per rank carries every rank's
    value, error code and plan fingerprint (see the module docstring for the
    fields each mode checks), so the MIN (what SGLang's all-reduce computes),
    the limiting rank (the lowest rank holding the minimum) and every check
    are the same on every rank; a second ``all_gather`` runs only when a check
    fails, for the message. Tensors live on the current CUDA device for an
    NCCL group and on the CPU otherwise (gloo, mpi, ucc, mixed groups).

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
        InvalidConfigError: on every rank, when the ranks do not plan the same
            thing (naming the ranks and fields), or when a rank's arguments are
            invalid (naming it); on this rank alone, when torch.distributed is
            not initialized (then a bad argument raises its own error).
        ModuleNotFoundError: torch is not installed (the message names the
            ``kvbudget[torch]`` extra; a bad argument raises its own error first).
        NotEnoughMemoryError, SWAPoolTooSmallError: the agreed value gives no
            valid pools, or in ``"tokens"`` mode a rank's own solve fails:
            every rank raises the failed rank's class, naming it and carrying
            its message. A failure that is not a kvbudget error (say a
            configurator's own ``plan`` raising ``RuntimeError``) makes every
            rank raise :class:`KVBudgetError` naming its kind.
    """
    local = _prepare(configurator, available_bytes, mode, fit)
    torch, dist = _dist(local)
    if mode == "tokens" and local.error is None:
        try:
            local.value = _own_tokens(configurator, local.value, fit)
        except Exception as e:  # noqa: BLE001 - the other ranks must hear of it
            local.fail(_STAGE_SOLVE, e)
    per_rank = _gather_checked(local, torch, dist, group)
    lim = _lowest_min(per_rank)
    plan_or_none: PoolPlan | None
    if mode == "bytes":
        plan = configurator.plan(per_rank[lim], fit)
        config, plan_or_none = plan.config, plan
    else:
        config = configurator.calculate_pool_sizes_from_max_tokens(per_rank[lim])
        plan_or_none = _plan_at_tokens(configurator, config)
    return AgreedPlan(
        config=config,
        plan=plan_or_none,
        mode=mode,
        fit=fit,
        limiting_rank=lim,
        per_rank=per_rank,
        available_bytes=available_bytes,
        reason=_reason(mode, per_rank, lim),
    )
