"""``kvbudget compare``: fit=exact vs fit=sglang; SGLang with vs without the draft in its budget.

The numbers are :func:`kvbudget.compare.compare_fits`'s (``--engines``: :mod:`kvbudget.cli.engines`).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from kvbudget.cli import render
from kvbudget.cli.render import b
from kvbudget.cli.parser import UsageError
from kvbudget.cli.scenario import CliScenario, build_scenario
from kvbudget.cli.vllm_inputs import refuse_vllm_flags
from kvbudget.compare import FitComparison as Comparison
from kvbudget.compare import compare_fits

if TYPE_CHECKING:
    from rich.console import Console

_TOKEN_ROWS = (
    ("full_max_total_num_tokens", "full tokens"),
    ("swa_max_total_num_tokens", "swa tokens"),
    ("max_total_num_tokens", "max_total_num_tokens"),
)


def to_json(c: Comparison) -> dict[str, Any]:
    data: dict[str, Any] = {
        "configurator": c.cfg.kind,
        "cell_size": c.cfg.cell_size,
        "available_bytes": c.available,
        "fit": {"exact": json.loads(c.exact.to_json()), "sglang": json.loads(c.sglang.to_json())},
    }
    if not c.has_draft:
        data["draft_budget"] = None
        return data
    without: dict[str, Any] = {"cell_size": c.bare_cell_size}
    w = c.without
    if w is None:
        without.update(
            tokens=None, allocated_bytes=None, over_budget_bytes=None, error=c.without_error
        )
    else:
        without.update(
            tokens=render.sizes(w.config),
            target_pool_bytes=w.target_pool_bytes,
            allocated_bytes=w.allocated_bytes,
            draft_pool_bytes=w.draft_pool_bytes,
            over_budget_bytes=w.over_budget_bytes,
            error=None,
        )
    data["draft_budget"] = {
        "with_draft": {
            "cell_size": c.cfg.cell_size,
            "tokens": render.sizes(c.sglang.config),
            "allocated_bytes": c.sglang.total_bytes,
            "draft_pool_bytes": c.sglang.draft_bytes,
            "over_budget_bytes": c.sglang.over_budget_bytes,
        },
        "without_draft": without,
        "sglang_always_counted_draft": c.cfg.kind == "default",
    }
    return data


def run(args: argparse.Namespace) -> int:
    # with vLLM among the engines, a config only vLLM's reader takes is compared on vLLM's side alone
    sc = build_scenario(args, vllm_only="vllm" in (args.engines or ()))
    if args.engines:
        from kvbudget.cli import engines

        return engines.run(args, sc)
    if args.context_lengths or args.plot:
        raise UsageError("--context-lengths and --plot go with --engines")
    refuse_vllm_flags(args, "--engines ... vllm")
    kv_budget = sc.require_budget()
    c = compare_fits(sc.configurator(), kv_budget if sc.state is None else sc.available or 0, sc.state)
    if args.json:
        render.emit_json(render.document("compare", sc, **to_json(c)))
        return 0
    out = render.console()
    render.header(out, "kvbudget compare", sc, c.cfg)
    if sc.state_budget is not None:
        assert sc.available is not None
        render.state_lines(out, sc.state_budget, sc.available)
    _fits(out, c)
    if not c.has_draft:
        out.print("  No draft pool: nothing to compare for the draft budget (give --draft).")
        return 0
    _draft_budget(out, sc, c)
    return 0


def _fits(out: Console, c: Comparison) -> None:
    from rich.table import Table

    ex, sg = c.exact, c.sglang
    t = Table(title="fit=exact vs fit=sglang (same budget)", title_justify="left")
    t.add_column("")
    t.add_column("exact", justify="right")
    t.add_column("sglang", justify="right")
    t.add_column("sglang - exact", justify="right")

    def row(label: str, a: int, b_: int) -> None:
        t.add_row(label, b(a), b(b_), f"{b_ - a:+,}")

    for pool in sg.pools:
        p_ex = ex.pool(pool.name)
        row(f"{pool.name} {'slots' if pool.name == 'state' else 'tokens'}", p_ex.tokens if p_ex is not None else 0,
            pool.tokens)  # fmt: skip
    row("total bytes", ex.total_bytes, sg.total_bytes)
    row("padding bytes", ex.padding_bytes, sg.padding_bytes)
    row("leftover bytes", ex.leftover_bytes, sg.leftover_bytes)
    row("over-budget bytes", ex.over_budget_bytes, sg.over_budget_bytes)
    out.print(t)
    if sg.over_budget_bytes:
        out.print(
            f"  SGLang's token counts plus its {sg.page_size} padding row(s) per layer allocate "
            f"{b(sg.over_budget_bytes)} bytes ({render.mib(sg.over_budget_bytes)}) more than the "
            "budget; fit=exact trims tokens until the tensors fit."
        )
    else:
        out.print("  SGLang's token counts fit this budget.")


def _draft_budget(out: Console, sc: CliScenario, c: Comparison) -> None:
    from rich.table import Table

    t = Table(
        title="SGLang with the draft in the budget (PR #29622) vs without it (before)",
        title_justify="left",
    )
    t.add_column("")
    t.add_column("with draft terms", justify="right")
    t.add_column("without", justify="right")
    t.add_column("without - with", justify="right")
    t.add_row("cell size (bytes/token)", b(c.cfg.cell_size), b(c.bare_cell_size), "")
    wo = c.without
    if wo is None:
        out.print(t)
        out.print(f"  without draft terms: [red]{c.without_error}[/red]")
        return

    def row(label: str, a: int, b_: int) -> None:
        t.add_row(label, b(a), b(b_), f"{b_ - a:+,}")

    with_sizes = c.sglang.config
    for key, label in _TOKEN_ROWS:
        a, b_ = getattr(with_sizes, key), getattr(wo.config, key)
        if a is None and b_ is None:
            continue
        if key == "max_total_num_tokens" and with_sizes.full_max_total_num_tokens is not None:
            continue
        row(label, a or 0, b_ or 0)
    row("draft pool bytes", c.sglang.draft_bytes, wo.draft_pool_bytes)
    row("allocated bytes (with draft pool)", c.sglang.total_bytes, wo.allocated_bytes)
    row("over-budget bytes", c.sglang.over_budget_bytes, wo.over_budget_bytes)
    out.print(t)
    # max_total_num_tokens is the primary pool: the full pool, or an all-SWA model's SWA pool.
    with_tokens, without_tokens = with_sizes.max_total_num_tokens, wo.config.max_total_num_tokens
    pool_word = "full" if sc.sglang_scenario.model.full_attention_layer_ids else "SWA"
    out.print(
        f"  Without draft terms SGLang's {pool_word} pool would hold {b(without_tokens)} tokens "
        f"({without_tokens - with_tokens:+,}), and allocating the draft pool "
        f"({b(wo.draft_pool_bytes)} bytes) on top would overrun the budget by "
        f"{b(wo.over_budget_bytes)} bytes ({render.gib(wo.over_budget_bytes)})."
    )
    if c.cfg.kind == "default":
        out.print(
            "  [dim]This model uses SGLang's DefaultPoolConfigurator, which always scaled the cell "
            "by (1 + d/L); PR #29622 fixed the SWA configurators. The 'without' column is what "
            "leaving the draft out would cost.[/dim]"
        )
