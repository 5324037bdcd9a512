"""Rendering: number formats, the rich console, the shared tables and JSON emission.

rich is imported inside the functions that draw, never at import.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Final

import kvbudget
from kvbudget import MemoryPoolConfig, PoolPlan, PoolSpec, ServingConfig

if TYPE_CHECKING:
    from rich.console import Console

    from kvbudget.cli.scenario import CliScenario
    from kvbudget.sglang.configurators import PoolConfiguratorBase
    from kvbudget.sglang.state import StateBudget

GIB: Final = 1 << 30
SOURCE_WIDTH: Final = 56


class MissingDependency(Exception):
    """An optional dependency is missing (exit status 1)."""


# --------------------------------------------------------------------------- numbers


def b(n: int | float) -> str:
    """A count with thousands separators (floats with one decimal)."""
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.2f} MiB"


def percent(part: int, whole: int, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole`` ("-" when whole is 0)."""
    return f"{100 * part / whole:.{digits}f}%" if whole else "-"


# --------------------------------------------------------------------------- JSON


def emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def document(command: str, sc: CliScenario, **members: Any) -> dict[str, Any]:
    """A command's JSON document: version, command, the scenario, then ``members``."""
    return {"kvbudget_version": kvbudget.__version__, "command": command, **sc.to_dict(), **members}


def sizes(config: MemoryPoolConfig) -> dict[str, int | None]:
    """SGLang's pool sizes as a JSON object."""
    doc: dict[str, int | None] = json.loads(config.to_json())
    return doc


# --------------------------------------------------------------------------- console


def console(stderr: bool = False, min_width: int = 120) -> Console:
    """A rich console; when not writing to a terminal, at least ``min_width`` columns wide.

    A closed pipe raises ``BrokenPipeError`` (``kvbudget.cli.main`` reports it in one
    line, exit status 1) instead of rich's silent ``SystemExit(1)``.
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "broken pipe")

    width = None
    if not (sys.stderr if stderr else sys.stdout).isatty():
        width = max(min_width, _columns())
    return _Console(stderr=stderr, width=width, highlight=False, soft_wrap=True)


def _columns() -> int:
    """``$COLUMNS`` as a width (0 when unset or not a sane number)."""
    text = os.environ.get("COLUMNS", "").strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 5:
        return 0
    return int(text)


def serving_summary(s: ServingConfig, skip: str = "") -> str:
    parts = [f"kv dtype {s.kv_cache_dtype}"]
    if skip != "page-size":
        parts.append(f"page {s.page_size}")
    if skip != "tp":
        parts.append(f"TP {s.tp_size}")
    if s.dcp_size != 1:
        parts.append(f"DCP {s.dcp_size}")
    if s.attn_dp_size != 1:
        parts.append(f"attn-DP {s.attn_dp_size}")
    if skip != "ratio":
        parts.append(f"ratio {s.swa_full_tokens_ratio:g}")
    if s.max_running_requests is not None:
        parts.append(f"max running {s.max_running_requests}")
    if s.chunked_prefill_size is not None:
        parts.append(f"chunk {s.chunked_prefill_size}")
    if s.disable_radix_cache:
        parts.append("radix cache off")
    if s.disable_overlap_schedule:
        parts.append("overlap off")
    if s.disaggregation_mode != "null":
        parts.append(f"PD {s.disaggregation_mode}")
    if s.disable_hybrid_swa_memory:
        parts.append("hybrid SWA memory off")
    if s.is_draft_worker:
        parts.append("draft worker")
    return ", ".join(parts)


def header(out: Console, title: str, sc: CliScenario, cfg: PoolConfiguratorBase, budget: str = "budget") -> None:
    """The scenario's lines above ``cfg``'s numbers; the what-if only when ``cfg`` is the one it is
    about (``sc.configurator()``, not SGLang's own choice)."""
    from rich.markup import escape

    out.print(f"[bold]{escape(title)}[/bold]" + (" (embedded default)" if sc.is_default else ""))
    out.print(f"  model:   {escape(sc.model_label)}")
    out.print(f"  draft:   {escape(sc.draft_label)}")
    out.print(f"  {budget}:  {escape(sc.budget_label)}")
    out.print(f"  serving: {escape(serving_summary(cfg.serving))}")
    out.print(f"  SGLang:  {type(cfg).__name__}, cell size {b(cfg.cell_size)} bytes per token")
    if sc.sglang_pools is not None and sc.sglang_pools["hybrid_swa"] is not None:
        out.print(f"  SGLang 0.5.23 pools: {escape(sc.sglang_pools['reason'])}")
    what_if = [sc.what_if] if sc.what_if is not None and cfg.kind == sc.configurator().kind else []
    for note in (*sc.notes, *sc.sglang_notes, *what_if):
        out.print(f"  [yellow]note:[/yellow] {escape(note)}")


def pool_table(plan: PoolPlan, title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_footer=True)
    total = plan.total_bytes
    table.add_column("pool", footer="total")
    table.add_column("tokens", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("layers", justify="right")
    table.add_column("dtype")
    table.add_column("bytes", justify="right", footer=b(total))
    table.add_column("GiB", justify="right", footer=f"{total / GIB:,.3f}")
    table.add_column("padding", justify="right", footer=b(plan.padding_bytes))
    table.add_column("share", justify="right", footer="100.0%" if total else "-")
    # Beside a unified buffer (which holds the state slots) the state pool is the verify buffers, per request.
    per = "requests" if plan.pool("unified") is not None else "slots"
    for pool in plan.pools:
        state = pool.name == "state"  # slots, not tokens; its tensors stack the state layers
        dtypes = "/".join(dict.fromkeys(t.dtype for t in pool.tensors[:2])) if state else pool.kv_cache_dtype
        table.add_row(
            pool.name,
            f"{b(pool.tokens)} {per}" if state else b(pool.tokens),
            b(pool.rows),
            str(pool.tensors[0].shape[0] if state else pool.num_layers),
            dtypes,
            b(pool.nbytes),
            f"{pool.nbytes / GIB:,.3f}",
            b(pool.padding_bytes),
            percent(pool.nbytes, total),
        )
    return table


def holds(plan: PoolPlan) -> str:
    """What a plan's pools hold: ``full 1,288,112 tokens, 736 state slots``."""
    kv = ", ".join(f"{x.name} {b(x.tokens)}" for x in plan.pools if x.name != "state") + " tokens"
    state = plan.pool("state")
    return kv if state is None else f"{kv}, {b(state.tokens)} state slots"


def tokens_text(config: MemoryPoolConfig) -> str:
    full, swa = config.full_max_total_num_tokens, config.swa_max_total_num_tokens
    if full is None and swa is None:
        return f"{b(config.max_total_num_tokens)} tokens"
    return f"full {b(full or 0)}, swa {b(swa or 0)} tokens"


def fixed_table(
    title: str, headers: list[str], rows: list[list[str]], last: str
) -> tuple[Any, int]:
    """(table, the width it needs): columns keep their width; the last (long text) one is cut."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    used = 1
    for i, h in enumerate(headers):
        w = max([len(h), *(len(r[i]) for r in rows)])
        used += w + 3
        t.add_column(h, no_wrap=True, min_width=w)
    t.add_column(last, no_wrap=True, overflow="ellipsis", max_width=SOURCE_WIDTH)
    for r in rows:
        t.add_row(*r)
    return t, used + SOURCE_WIDTH + 3


def unified_lines(out: Console, pool: PoolSpec, sb: StateBudget, entries: tuple[int, ...]) -> None:
    """SGLang's unified buffer of a hybrid-state model: what it holds, and how far each side can grow
    (``entries``: ``(E_f, E_m)``, or the tri-pool's ``(E_f, E_s, E_m)``)."""
    e_f, e_m = entries[0], entries[-1]
    slots = sb.max_mamba_cache_size
    swa, most = "", f"{b(pool.nbytes // e_f)} tokens with no state"
    if len(entries) == 3:  # the tri-pool: its sliding-window side floats between the two
        swa = f", sliding-window tokens {b(entries[1])}"
        most = (f"{b(pool.nbytes // e_f)} full tokens with nothing else, {b(pool.nbytes // entries[1])} "
                "sliding-window tokens with nothing else")  # fmt: skip
    out.print(f"  unified buffer (--enable-unified-memory): {b(pool.nbytes)} bytes = {b(pool.nbytes - slots * e_m)} "
              f"token-side bytes + {b(slots)} state slots x {b(e_m)} bytes; full tokens take {b(e_f)} bytes "
              f"each{swa}. The split floats: at most {most}, {b(pool.nbytes // e_m)} state slots with no KV")  # fmt: skip


def state_lines(out: Console, sb: StateBudget, total: int) -> None:
    """The state pool SGLang takes out of the budget before the KV pool."""
    slot = sb.per_req_bytes + sb.extra_per_slot
    fixed = f" + {b(sb.fixed_bytes)} ReplaySSM bytes" if sb.fixed_bytes else ""
    out.print(f"  state pool (SGLang's, sized first): {b(sb.max_mamba_cache_size)} slots + 1 padding x {b(slot)} "
              f"bytes{fixed} = {b(sb.state_bytes)} bytes ({gib(sb.state_bytes)}), "
              f"{percent(sb.state_bytes, total, 2)} of the {b(total)}-byte budget")  # fmt: skip
    if sb.intermediate_bytes:
        out.print(f"  speculative state reserve: {b(sb.intermediate_bytes)} bytes ({gib(sb.intermediate_bytes)})")
    if sb.mamba_ratio:
        out.print(f"  running requests the state holds: {b(sb.max_mamba_cache_size // sb.mamba_ratio)} "
                  f"({sb.mamba_ratio} state slots per request)")  # fmt: skip
