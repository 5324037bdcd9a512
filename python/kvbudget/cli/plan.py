"""``kvbudget plan``: the pools for a model, draft and budget (the default command)."""

from __future__ import annotations

import argparse
import json

from kvbudget.cli import render
from kvbudget.cli.render import b
from kvbudget.cli.scenario import build_scenario
from kvbudget.cli.vllm_inputs import refuse_vllm_flags


def run(args: argparse.Namespace) -> int:
    if args.engine == "vllm":
        from kvbudget.cli import plan_vllm

        return plan_vllm.run(args)
    refuse_vllm_flags(args, "--engine vllm")
    sc = build_scenario(args)
    available = sc.require_budget()
    cfg = sc.configurator()
    plan = cfg.plan(available, fit=args.fit)
    sglang = cfg.calculate_pool_sizes(available)
    other = cfg.plan(available, fit="sglang" if args.fit == "exact" else "exact")
    if args.json:
        render.emit_json(
            render.document(
                "plan",
                sc,
                configurator=cfg.kind,
                cell_size=cfg.cell_size,
                sglang=render.sizes(sglang),
                plan=json.loads(plan.to_json()),
            )
        )
        return 0
    out = render.console()
    render.header(out, f"kvbudget plan (fit={args.fit})", sc, cfg)
    title = f"{'exact' if args.fit == 'exact' else 'SGLang'} plan: pools and tensors"
    out.print(render.pool_table(plan, title))
    over = plan.over_budget_bytes
    out.print(
        f"  available {b(available)}, planned {b(plan.total_bytes)}, "
        f"leftover {b(plan.leftover_bytes)}, over budget {b(over)} bytes"
        + ("  [red](exceeds the budget)[/red]" if over else "")
    )
    if plan.draft_bytes:
        out.print(
            f"  draft's share: {b(plan.draft_bytes)} bytes ({render.gib(plan.draft_bytes)}), "
            f"{render.percent(plan.draft_bytes, plan.total_bytes, 2)} of the plan"
        )
    else:
        out.print("  draft's share: none (no draft pool)")
    out.print(f"  SGLang's numbers: {render.tokens_text(sglang)}")
    if args.fit == "exact":
        if other.over_budget_bytes:
            out.print(
                f"  SGLang allocates those tokens plus {plan.page_size} padding row(s) per layer: "
                f"{b(other.total_bytes)} bytes, [red]{b(other.over_budget_bytes)} over "
                "budget[/red]; the exact plan fits."
            )
        else:
            out.print(
                f"  SGLang's allocation: {b(other.total_bytes)} bytes, within budget "
                f"(leftover {b(other.leftover_bytes)})."
            )
    if sc.is_default:
        out.print(
            "  [dim]Plan your own: kvbudget plan MODEL --gpu h100 --mem-fraction 0.9 "
            "--weights-gib W (or --available 30GiB); kvbudget models lists presets; "
            "kvbudget compare shows what the draft budget changed.[/dim]"
        )
    return 0
