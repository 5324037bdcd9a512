"""SGLang 0.5.23's fused speculative draft: where a draft's layers ride inside the target's
unified sub-pools (``--enable-unified-memory``; ``mem_cache/layout/fused_draft.py``).

Under unified memory SGLang keeps no draft pool: every slot entry of a *host* sub-pool
(``"full"``, ``"swa"``, ``"mamba"``) also carries the draft's bytes, so one allocation, free and
relocation covers target and draft. A host's *region* is the draft's geometry there; a *lane* is
one draft layer of one *runner* (the draft's execution copies); each runner's lanes in a host are
one contiguous ``(start, count)`` range, the ranges tiling the region in runner order. A
replicated head gives every runner all the draft's layers; a per-depth head (``num_depths > 1``)
one depth per runner. Full-attention layers ride in ``"full"``, sliding-window layers in ``"swa"``
(else folded into ``"full"`` when the two share a row geometry or the draft has no full layers),
recurrent-state layers in ``"mamba"``. A host entry with a region is ``align32(align16(host) +
region)`` bytes.

* :func:`place_fused_draft`: SGLang's ``place_fused_draft`` on a draft profile, its placement or
  its reason to decline, in SGLang's words.
* :func:`unified_draft_decision`: what SGLang decides for a configurator's own draft in the
  unified Mamba pool (``KVCacheConfigurator._fused_draft_decision``; EAGLE, EAGLE3, NEXTN, DFLASH,
  DSPARK);
  :func:`kvbudget.sglang.state.plan_with_state` plans it (``rust/core/src/plan/state_unified_draft.rs``).

The arithmetic is the Rust core's (``rust/core/src/plan/fused_draft.rs``);
``tests/test_sglang_unified_draft.py`` holds both to SGLang's own code from the pinned wheel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from kvbudget import _core

if TYPE_CHECKING:
    from kvbudget.sglang.configurators import PoolConfiguratorBase

__all__ = ["DraftKind", "FusedDraftDecision", "Region", "place_fused_draft", "unified_draft_decision"]

HostName = Literal["full", "swa", "mamba"]


class Region(TypedDict, total=False):
    """The draft's region in one host."""

    #: Lanes: draft layers over every runner.
    lane_num: int
    #: Draft bytes per slot before the host entry's alignment, bytes.
    entry_bytes: int
    #: The host's whole fused entry (host, draft, padding), bytes; given where ``host_bytes`` names the host.
    entry: int


class FusedDraftDecision(TypedDict):
    """SGLang's ``FusedDraftDecision``: a placement, or why the draft cannot fuse."""

    #: SGLang's reason the draft cannot fuse (then ``regions`` and ``runners`` are empty).
    declined: str | None
    #: Why a placed kind did not get its first-choice host.
    note: str | None
    #: The region of each host that carries draft lanes.
    regions: dict[str, Region]
    #: Per runner, in runner order: host -> its ``(start, count)`` lanes.
    runners: list[dict[str, tuple[int, int]]]


#: One kind of draft layers: ``(kind, layer ids, geometry, window)``. ``kind`` is ``"full"``,
#: ``"window"`` or ``"state"``; geometry is ``(kv heads on one rank, head_dim, v_head_dim)``
#: (elements) for the attention kinds, the state bytes of one layer of one slot for ``"state"``;
#: ``window`` (tokens) only for ``"window"`` (``None``: not declared).
DraftKind = tuple[str, list[int], "tuple[int, int, int] | int", "int | None"]


def place_fused_draft(
    kinds: list[DraftKind],
    *,
    num_runners: int = 1,
    num_depths: int = 1,
    hosts: tuple[HostName, ...] = ("full", "mamba"),
    target_window: int | None = None,
    asymmetric_rows_ok: bool = False,
    draft_backends: tuple[str, ...] = (),
    itemsize: int = 2,
    host_bytes: dict[str, tuple[int, bool]] | None = None,
) -> FusedDraftDecision:
    """SGLang's ``place_fused_draft``: each draft layer kind (``kinds``, in SGLang's order full,
    window, state) assigned to a host of ``hosts`` for ``num_runners`` runners.

    ``target_window`` is the target's sliding window (tokens); ``asymmetric_rows_ok`` says every
    resolved attention backend carries ``v_head_dim`` to the kernel; ``draft_backends`` are the
    backends the draft runs on (SGLang's names; a window kind needs ``triton``'s per-step rail);
    ``itemsize`` is the region rows' storage element (bytes; fp8 is stored as 1-byte uint8).
    ``host_bytes`` maps a host to ``(its own rows of one slot, unaligned bytes; dense)`` to get its
    fused ``entry`` (``dense`` false for a state host).

    Raises:
        InvalidConfigError: SGLang's assertions on a region (zero heads or dims), unknown names.
    """
    return _core._place_fused_draft(  # type: ignore[return-value]
        list(kinds), num_depths=num_depths, num_runners=num_runners, hosts=list(hosts),
        target_window=target_window, asymmetric_rows_ok=asymmetric_rows_ok, draft_backends=list(draft_backends),
        itemsize=itemsize, host_bytes=dict(host_bytes or {}),
    )  # fmt: skip


def unified_draft_decision(configurator: PoolConfiguratorBase) -> FusedDraftDecision:
    """What SGLang decides for ``configurator``'s draft in its unified Mamba pool
    (``_fused_draft_decision``): ``d`` full-attention layers (``spec.num_draft_layers()``) at the
    draft geometry (``spec.draft``, default the target's; heads over ``tp`` alone), one replicated
    head on one runner, over the hosts ``"full"`` and ``"mamba"``. Declined: no draft layer, an MLA
    draft, ``dcp_size > 1``, a draft KV dtype of its own, and the placement's declines. The rows are
    in the host's KV dtype, except that a DFLASH-family draft on fa4 (a DSPARK draft whose
    ``prefill_attention_backend`` is fa4: no ``--speculative-draft-attention-backend``) keeps its KV
    in the model dtype (``configure_kv_cache_dtype``), which its region then holds.

    Raises:
        InvalidConfigError: asymmetric draft rows without both attention backends given, and a
            DSPARK draft whose KV dtype hangs on an unknown prefill backend (SGLang's answer
            depends on the backends it resolves).
    """
    return configurator._unified_draft_decision()  # type: ignore[return-value]
