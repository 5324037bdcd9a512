"""SGLang 0.5.23's state cache for hybrid models (Mamba2, gated delta net, KDA).

A hybrid model (Qwen3-Next, Qwen3.5, Nemotron-H, Falcon-H1, Granite-4.0-H,
Kimi-Linear, ...) keeps a recurrent state per request in each of its state
layers. SGLang takes the state pool out of the profiled budget *before* it
sizes the KV pool (``KVCacheConfigurator._handle_max_mamba_cache``), then caps
the running requests by the state slots (``resolve_max_num_reqs``). The
arithmetic is the Rust core's (``rust/core/src/state``,
``rust/core/src/sizing/state.rs``); this module names it:

* :class:`StateConfig`: the state of one request per layer on one rank, and
  SGLang's serving inputs for its cache (declared once in the core's field
  table). Build its dims with :func:`mamba2_dims`, :func:`full_rank_dims` or
  :func:`kda_dims`, SGLang's ``Mamba2StateShape.create``,
  ``Mamba2StateShape.create_full_rank`` and ``KimiLinearStateShape.create``.
* :func:`state_budget`: ``_handle_max_mamba_cache(rest_gib)`` -> a
  :class:`StateBudget` (the state slots, the GiB left for the KV pool).
* :func:`kv_budget_bytes`: the KV pool's byte budget after the state pool, as
  ``_profile_available_bytes`` returns it; :func:`available_bytes` the same from
  memory measurements.
* :func:`max_num_reqs`: ``resolve_max_num_reqs``.
* :func:`plan_with_state`: kvbudget's exact plan of a hybrid model, the state pool laid out as
  SGLang's ``MambaPool`` allocates it beside the KV pools (``rust/core/src/plan/state.rs``);
  :func:`state_pool` that pool alone; under ``--enable-unified-memory`` one buffer of the KV
  tokens and the state slots (``rust/core/src/plan/state_unified.rs``), :func:`unified_entries`
  their bytes; for a hybrid-SWA state model the tri-pool (``state_unified_swa.rs``),
  :func:`unified_tri_entries` its entries.
* :func:`plan_state_only`: the plan of a model without attention layers (Mamba-1, Falcon-Mamba,
  Mamba-2): the state pool alone, and SGLang's zero-KV token label
  (``rust/core/src/plan/state_only.rs``).

``tests/test_sglang_state.py`` holds every function to SGLang's own code,
lifted from the pinned wheel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict

from typing import TYPE_CHECKING

from kvbudget import _core
from kvbudget._core import MemoryPoolConfig, PoolPlan, PoolSpec, ServingConfig, SpeculativeConfig, StateConfig
from kvbudget.errors import NotEnoughMemoryError
from kvbudget.budget import PerRank
from kvbudget.sglang.budget import sglang_rest_gib

if TYPE_CHECKING:
    from kvbudget.sglang.configurators import PoolConfiguratorBase
    from kvbudget.types import Fit

__all__ = [
    "StateBudget",
    "StateCacheTooSmallError",
    "StateConfig",
    "StateDims",
    "available_bytes",
    "full_rank_dims",
    "kda_dims",
    "kv_budget_bytes",
    "mamba2_dims",
    "mamba_ratio",
    "max_num_reqs",
    "calculate_pool_sizes_with_state",
    "plan_state_only",
    "plan_with_state",
    "unified_entries",
    "unified_tri_entries",
    "state_budget",
    "state_pool",
]

_GIB = 1 << 30


class StateCacheTooSmallError(NotEnoughMemoryError):
    """SGLang's "Not enough GPU memory for hybrid (mamba/linear-attention) state
    cache" and "state cache is too small to serve any requests" (its RuntimeErrors),
    with SGLang's message. A :class:`~kvbudget.errors.NotEnoughMemoryError`."""


class StateDims(TypedDict):
    """One rank's state dims of one state layer: :class:`StateConfig`'s keywords."""

    conv_elems: int
    ssm_heads: int
    ssm_head_dim: int
    ssm_state_dim: int
    k_heads_per_tp: int
    conv_kernel: int


@dataclass(frozen=True)
class StateBudget:
    """What ``_handle_max_mamba_cache`` decided (per attention-DP rank)."""

    max_mamba_cache_size: int
    """State slots (``max_mamba_cache_size`` after the call), > 0."""
    rest_gib: float
    """The budget left for the KV pool, GiB (SGLang's return value)."""
    mamba_ratio: int | None
    """State slots per running request; None where SGLang's ratio asserts."""
    per_req_bytes: int
    """One slot's state on the largest pipeline stage (``stage_per_req``), bytes."""
    extra_per_slot: int
    """Bytes each slot carries beside its state (KDA replay rings, the caller's extra)."""
    fixed_bytes: int
    """Fixed bytes (GDN replay rings, one per request slot)."""
    intermediate_bytes: int
    """Speculative intermediate state reserved, bytes."""
    state_bytes: int
    """The state pool, ``(max_mamba_cache_size + 1) * (per_req + extra) + fixed``, bytes."""


def _dims(d: dict[str, int]) -> StateDims:
    return StateDims(conv_elems=d["conv_elems"], ssm_heads=d["ssm_heads"], ssm_head_dim=d["ssm_head_dim"],
                     ssm_state_dim=d["ssm_state_dim"], k_heads_per_tp=d["k_heads_per_tp"],
                     conv_kernel=d["conv_kernel"])  # fmt: skip


def mamba2_dims(
    tp_size: int,
    intermediate_size: int,
    n_groups: int,
    num_heads: int,
    head_dim: int,
    state_size: int,
    conv_kernel: int,
) -> StateDims:
    """SGLang's ``Mamba2StateShape.create`` on one of ``tp_size`` ranks (Mamba2, and
    gated delta net with ``intermediate_size = value dim``, ``n_groups = key heads``).

    Raises:
        InvalidConfigError: a dim that does not divide by ``tp_size`` as SGLang requires.
    """
    return _dims(_core._mamba2_dims(tp_size, intermediate_size, n_groups, num_heads, head_dim, state_size, conv_kernel))


def full_rank_dims(tp_size: int, intermediate_size: int, state_size: int, conv_kernel: int) -> StateDims:
    """SGLang's ``Mamba2StateShape.create_full_rank`` (a Mamba1 selective scan) on one rank."""
    return _dims(_core._full_rank_dims(tp_size, intermediate_size, state_size, conv_kernel))


def kda_dims(
    tp_size: int,
    num_heads: int,
    head_dim: int,
    num_k_heads: int | None = None,
    head_k_dim: int | None = None,
    conv_kernel: int = 4,
) -> StateDims:
    """SGLang's ``KimiLinearStateShape.create`` (Kimi delta attention) on one rank."""
    return _dims(_core._kda_dims(tp_size, num_heads, head_dim, num_k_heads, head_k_dim, conv_kernel))


def _too_small(e: NotEnoughMemoryError) -> StateCacheTooSmallError:
    return StateCacheTooSmallError(str(e))


def state_budget(state: StateConfig, serving: ServingConfig, spec: SpeculativeConfig, rest_gib: float) -> StateBudget:
    """SGLang's ``_handle_max_mamba_cache(rest_gib)``: the state slots and the GiB left.

    ``rest_gib`` is the profiled budget before the state pool (``available -
    slack - multimodal reserve``, GiB). Reads ``serving.max_running_requests``,
    ``attn_dp_size``, ``disable_radix_cache``, ``disable_overlap_schedule``,
    ``disaggregation_mode``, ``enable_unified_memory`` and ``spec.algorithm`` /
    ``num_draft_tokens``.

    Raises:
        StateCacheTooSmallError: no state slot fits (SGLang's message).
        InvalidConfigError: where SGLang asserts (speculation without
            ``max_running_requests`` or ``num_draft_tokens``; an empty auto-sized state).
    """
    try:
        d = _core._state_budget(state, serving, spec, float(rest_gib))
    except NotEnoughMemoryError as e:
        raise _too_small(e) from None
    return StateBudget(**d)


def kv_budget_bytes(budget: StateBudget) -> int:
    """The KV pool's budget after the state pool, bytes: ``int(rest_gib * 2**30)``
    (zero or negative where SGLang raises "Loaded weights leave no GPU memory")."""
    return math.trunc(budget.rest_gib * _GIB)


def available_bytes(
    free_before_load: PerRank,
    free_now: PerRank,
    mem_fraction_static: float,
    state: StateConfig,
    serving: ServingConfig,
    spec: SpeculativeConfig,
    multimodal_reserve: int = 0,
) -> tuple[int, StateBudget]:
    """SGLang's ``_profile_available_bytes`` for a hybrid model: the profiled rest
    (:func:`kvbudget.sglang.budget.sglang_rest_gib`), the state pool taken out
    (:func:`state_budget`), then ``int(rest * 2**30)``: the KV pool's budget, bytes,
    and the state budget. A zero or negative budget is where SGLang raises "Loaded
    weights leave no GPU memory". Not modelled: the pre-capture activation reserve
    SGLang puts in the slack when the KV pool is allocated after CUDA-graph capture.

    Raises:
        StateCacheTooSmallError, InvalidConfigError: as :func:`state_budget`.
    """
    rest = sglang_rest_gib(free_before_load, free_now, mem_fraction_static, multimodal_reserve)
    budget = state_budget(state, serving, spec, rest)
    return kv_budget_bytes(budget), budget


def mamba_ratio(state: StateConfig, serving: ServingConfig) -> int:
    """SGLang's ``_calculate_mamba_ratio``: state slots per running request.

    Raises:
        InvalidConfigError: ``extra_buffer_lazy`` with the overlap scheduler disabled.
    """
    return _core._mamba_ratio(state, serving)


def max_num_reqs(
    token_capacity: int,
    context_len: int,
    serving: ServingConfig,
    state: StateConfig | None = None,
    max_mamba_cache_size: int | None = None,
) -> int:
    """SGLang's ``resolve_max_num_reqs(token_capacity)``: running requests per
    attention-DP rank; with ``state`` (and the slots :func:`state_budget` gave),
    capped at ``max_mamba_cache_size // mamba_ratio``.

    Raises:
        StateCacheTooSmallError: the state cache serves no request (SGLang's message).
    """
    try:
        return _core._max_num_reqs(token_capacity, context_len, serving, state, max_mamba_cache_size)
    except NotEnoughMemoryError as e:
        raise _too_small(e) from None


def calculate_pool_sizes_with_state(
    configurator: PoolConfiguratorBase, available_bytes: int, state: StateConfig
) -> tuple[MemoryPoolConfig, StateBudget]:
    """SGLang's pool sizes of a hybrid model on one rank: its state budget on ``available_bytes``
    (as GiB) takes the state slots out first, then ``configurator`` (the attention layers) sizes
    the KV pool on the rest (:func:`kv_budget_bytes`), serving page size. What
    :func:`kvbudget.plan_many` computes per row with ``state=``.

    Raises:
        StateCacheTooSmallError, InvalidConfigError: as :func:`state_budget`; and the
            configurator's own errors on the KV budget.
    """
    try:
        config, budget = configurator._calculate_pool_sizes_with_state(available_bytes, state)
    except NotEnoughMemoryError as e:
        if "state cache" in str(e):
            raise _too_small(e) from None
        raise
    return config, StateBudget(**budget)


def state_pool(state: StateConfig, serving: ServingConfig, spec: SpeculativeConfig, slots: int) -> PoolSpec:
    """The state pool of :func:`plan_with_state` for ``slots`` state slots (its tensors, bytes and
    padding; ``slots`` is SGLang's ``max_mamba_cache_size`` there).

    Raises:
        StateCacheTooSmallError: the slots serve no request (SGLang's message).
        InvalidConfigError: as :func:`plan_with_state`.
    """
    try:
        return _core._state_pool(state, serving, spec, slots)
    except NotEnoughMemoryError as e:
        raise _too_small(e) from None


def unified_entries(configurator: PoolConfiguratorBase, state: StateConfig) -> tuple[int, int]:
    """Bytes of one full-side token and of one state slot, ``(E_f, E_m)``, in SGLang's unified
    buffer of a hybrid-state model (``--enable-unified-memory``; ``MHASubPoolSpec`` /
    ``MLASubPoolSpec`` and ``MambaSubPoolSpec``'s ``entry_bytes``): the full layers' K and V rows
    rounded up to 32 bytes, and the state layers' conv and temporal rows. A buffer of ``B`` bytes
    holds ``B // E_f`` full tokens with no state, or ``B // E_m`` state slots with no KV; SGLang
    lets the split float between them. With a speculative draft ``E_f`` is the fused entry (the
    draft's K and V rows after the host's, :mod:`kvbudget.sglang.fused_draft`).

    Raises:
        InvalidConfigError: what SGLang refuses of the entries (an FP4 KV cache, no full or no
            state layer, a draft that cannot fuse) and what kvbudget does not lay out (an mxfp8 KV
            cache, a DSA indexer, the drafts :func:`plan_with_state` refuses).
    """
    return configurator._unified_state_entries(state)


def unified_tri_entries(configurator: PoolConfiguratorBase, state: StateConfig) -> tuple[int, int, int]:
    """Bytes of one full-side token, one SWA-side token and one state slot, ``(E_f, E_s, E_m)``, in
    SGLang's unified tri-pool of a model that is both hybrid-state and hybrid-SWA (Inkling-class;
    ``init_unified_mamba_swa_pools``): the full layers' K and V rows (KV heads over TP and DCP) and
    the sliding-window layers' (at the SWA geometry), each rounded up to 32 bytes, and the state
    layers' conv and temporal rows. The buffer's three sub-pools share its bytes; SGLang lets the
    split float.

    Raises:
        InvalidConfigError: what SGLang refuses of the entries (its launch checks, an MLA full side,
            no full, SWA or state layer) and what kvbudget does not lay out (an mxfp8 KV cache, a
            speculative draft).
    """
    return configurator._unified_tri_entries(state)


def plan_with_state(
    configurator: PoolConfiguratorBase, available_bytes: int, state: StateConfig, fit: Fit = "exact"
) -> tuple[PoolPlan, StateBudget]:
    """kvbudget's plan of a hybrid model on one rank, and SGLang's state budget it follows.

    ``configurator`` holds the model's attention layers (and the serving and speculative
    inputs the state budget reads). SGLang's :func:`state_budget` on ``available_bytes``
    (as GiB) gives the state slots; the state pool (``plan.pool("state")``, listed after the
    KV pools; ``tokens`` are slots, ``rows`` one more: SGLang's padding slot) is laid out as
    SGLang's ``MambaPool`` allocates it on CUDA, one record (layer 0) whose tensors stack the
    largest stage's state layers:

    * ``conv_state`` ``[layers, rows, conv_elems]`` and ``temporal_state`` ``[layers, rows,
      heads, head_dim, state_dim]``;
    * with speculation, for the running requests the state serves plus one: the verify
      snapshots ``intermediate_ssm`` and the conv windows ``intermediate_conv_window``
      (deduplicated for a linear draft chain of a non-KDA mixer, as on CUDA);
    * with ReplaySSM spec-verify, its rings (and GDN's cursors) instead of the snapshots;
    * ``state_extra``, the caller's extra bytes per slot.

    Under unified memory (``serving.enable_unified_memory`` on a target worker) SGLang keeps the
    full-attention KV cache and the state slots in one byte buffer instead
    (``init_unified_mamba_pools``): the plan's one pool is ``plan.pool("unified")``, a ``uint8``
    tensor of ``unified_total_bytes + slots * E_m`` bytes (:func:`unified_entries`), its
    ``tokens`` the Default configurator's count (SGLang's label: the split floats at run time).
    ``"sglang"`` takes SGLang's buffer; ``"exact"`` the same construction on the whole budget.
    SGLang's refusals of that buffer are raised (its bs=1 floor as :class:`NotEnoughMemoryError`).
    A speculative draft (EAGLE, EAGLE3, NEXTN, DFLASH, DSPARK) rides in the full-side entries as
    SGLang places it (:func:`kvbudget.sglang.fused_draft.unified_draft_decision`): ``E_f`` is then
    the fused entry, which also prices the token label, and a second pool, ``plan.pool("state")``,
    holds the verify buffers SGLang's ``UnifiedMambaPool`` allocates beside the buffer
    (``intermediate_ssm`` and ``intermediate_conv_window`` for the running requests the state
    serves plus one). Under ``dcp_size > 1`` SGLang's DCP launch checks apply. An EAGLE or
    DFLASH draft SGLang cannot fuse is refused in SGLang's words; a DSPARK draft that cannot fuse
    is refused by kvbudget (SGLang boots it on a private draft pool nothing prices, beyond the
    budget), as are multi-layer EAGLE and draft window or state layers (not modelled).

    A model that is both hybrid-state and hybrid-SWA (a hybrid-SWA ``configurator``, Inkling-class)
    gets SGLang's tri-pool instead (``init_unified_mamba_swa_pools``): one buffer of the same
    ``unified_total_bytes + slots * E_m`` bytes whose state slots, sliding-window tokens and full
    tokens float (:func:`unified_tri_entries`), ``tokens`` the hybrid-SWA configurator's full
    label. Its bs=1 floor charges one sliding window of SWA tokens, ``min(context, window +
    page)``: without ``serving.model_context_len`` a floor that the bound does not settle is
    refused. A speculative draft there is refused (not modelled).

    With ``fit="exact"`` the KV pools fit ``available_bytes`` minus the state pool, so
    ``plan.total_bytes <= available_bytes`` and :func:`kvbudget.allocate` takes exactly
    ``plan.total_bytes``; with ``"sglang"`` they take SGLang's counts on SGLang's rest
    (``over_budget_bytes`` says by how much that allocation overshoots).

    Raises:
        StateCacheTooSmallError: no state slot, or no request, fits (SGLang's messages).
        NotEnoughMemoryError: the state pool leaves no bytes for the KV pools, or the KV
            pools' own.
        InvalidConfigError: where SGLang asserts (and its ReplaySSM ring checks), a
            speculative model's state without ``conv_kernel``, a fused draft's state entry; under
            unified memory SGLang's launch checks and its refusal of a draft that cannot fuse.
    """
    try:
        plan, budget = configurator._plan_with_state(available_bytes, state, fit)
    except NotEnoughMemoryError as e:
        if "state cache" in str(e):
            raise _too_small(e) from None
        raise
    return plan, StateBudget(**budget)


def plan_state_only(
    state: StateConfig,
    serving: ServingConfig,
    spec: SpeculativeConfig,
    available_bytes: int,
    zero_kv_tokens: int,
    fit: Fit = "exact",
) -> tuple[PoolPlan, StateBudget]:
    """kvbudget's plan of a model without attention layers on this rank (SGLang's pure state
    models: Mamba-1, Falcon-Mamba, Mamba-2), and SGLang's state budget it follows.

    SGLang sizes the state pool as for a hybrid model (:func:`state_budget` on
    ``available_bytes`` as GiB), then builds a KV pool over no layer: its cell size is 0 bytes
    and ``DefaultPoolConfigurator.calculate_pool_sizes`` answers ``_zero_kv_max_tokens`` whatever
    the budget. ``zero_kv_tokens`` is that count before page alignment: ``--max-total-tokens``,
    else the model's context length. The plan lists the state pool alone (``plan.pool("state")``,
    laid out as in :func:`plan_with_state`); ``plan.config.max_total_num_tokens`` is SGLang's
    label, floored to a page (no pool holds it: it takes no byte). Both fits take SGLang's state
    slots; ``"exact"`` also checks that the pool fits ``available_bytes``.

    Raises:
        StateCacheTooSmallError: no state slot, or no request, fits (SGLang's messages).
        NotEnoughMemoryError: (``"exact"``) the state pool is above ``available_bytes``.
        InvalidConfigError: where SGLang asserts (as :func:`state_budget`), unified memory on a
            target (SGLang's unified pool needs a full-attention layer: "layer_num must be
            positive"), an FP4 KV cache under unified memory, and a speculative draft (kvbudget
            does not plan one beside a model without attention layers).
    """
    try:
        plan, budget = _core._plan_state_only(state, serving, spec, available_bytes, zero_kv_tokens, fit)
    except NotEnoughMemoryError as e:
        if "state cache" in str(e):
            raise _too_small(e) from None
        raise
    return plan, StateBudget(**budget)
