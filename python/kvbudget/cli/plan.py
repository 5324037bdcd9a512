"""``kvbudget plan``: the pools for a model, draft and budget (the default command).

The numbers are :func:`kvbudget.compare.compare_engines`'s: SGLang's token counts and
kvbudget's exact plan, and for the embedded default (no MODEL, no ``--engine``) vLLM
0.33.0's blocks for the same deployment beside them (:mod:`kvbudget.cli.engines`).
"""

from __future__ import annotations

import argparse
import json

from kvbudget.cli import engines, render
from kvbudget.cli.engines import EngineView
from kvbudget.cli.render import b
from kvbudget.cli.scenario import StateOnlyModel, build_scenario
from kvbudget.cli.vllm_inputs import refuse_vllm_flags
from kvbudget.compare import compare_engines


def run(args: argparse.Namespace) -> int:
    if args.engine == "vllm":
        from kvbudget.cli import plan_vllm

        return plan_vllm.run(args)
    try:
        sc = build_scenario(args)
    except StateOnlyModel as model:  # a pure state model: the state pool and SGLang's label
        from kvbudget.cli import plan_state_only

        return plan_state_only.run(args, model)
    both = args.engine is None and sc.is_default
    if both:
        v = engines.compare(args, sc, lenient=True)
    else:
        refuse_vllm_flags(args, "--engine vllm")
        kv_budget = sc.require_budget()
        available = kv_budget if sc.state is None else sc.available
        assert available is not None
        v = EngineView(compare_engines(sc.sglang_scenario, available, lengths=(), state=sc.state), None)
    c = v.comparison
    cfg, available = c.configurator, c.available
    assert c.sglang is not None  # compare_engines plans SGLang's token counts unless told not to
    plan, other = (c.exact, c.sglang) if args.fit == "exact" else (c.sglang, c.exact)
    sglang = c.sglang.config
    if args.json:
        doc = engines.to_json(v) if both else {}  # its configurator and budget are the plan's own
        more = {k: doc[k] for k in ("engines", "concurrency") if k in doc}
        render.emit_json(render.document("plan", sc, configurator=cfg.kind, cell_size=cfg.cell_size,
                                         sglang=render.sizes(sglang), plan=json.loads(plan.to_json()), **more))  # fmt: skip
        return 0
    out = render.console()
    title = f"kvbudget plan (fit={args.fit})"
    if both:
        engines.header(out, title, sc, v)
    else:
        render.header(out, title, sc, cfg)
    title = f"{'exact' if args.fit == 'exact' else 'SGLang'} plan: pools and tensors"
    out.print(render.pool_table(plan, title))
    over = plan.over_budget_bytes
    if sc.state_budget is not None:
        assert sc.available is not None
        render.state_lines(out, sc.state_budget, sc.available)
        unified = plan.pool("unified")
        if unified is not None and sc.state is not None:
            from kvbudget.sglang.state import unified_entries, unified_tri_entries

            tri = plan.config.swa_max_total_num_tokens is not None  # a hybrid-SWA state model: the tri-pool
            entries = (unified_tri_entries if tri else unified_entries)(cfg, sc.state)
            render.unified_lines(out, unified, sc.state_budget, entries)
    state = plan.pool("state")
    parts = "" if state is None else f" (state pool {b(state.nbytes)}, KV pools {b(plan.total_bytes - state.nbytes)})"
    if state is not None and plan.pool("unified") is not None:  # a draft's verify buffers beside the buffer
        parts = f" (unified buffer {b(plan.total_bytes - state.nbytes)}, verify buffers {b(state.nbytes)})"
    out.print(
        f"  available {b(available)}, planned {b(plan.total_bytes)}{parts}, "
        f"leftover {b(plan.leftover_bytes)}, over budget {b(over)} bytes"
        + ("  [red](exceeds the budget)[/red]" if over else "")
    )
    if plan.draft_bytes:
        out.print(
            f"  draft's share: {b(plan.draft_bytes)} bytes ({render.gib(plan.draft_bytes)}), "
            f"{render.percent(plan.draft_bytes, plan.total_bytes, 2)} of the plan"
        )
    elif state is not None and plan.pool("unified") is not None:
        out.print("  draft's share: in the unified buffer's full-side entries (no draft pool)")
    else:
        out.print("  draft's share: none (no draft pool)")
    out.print(f"  SGLang's numbers: {render.tokens_text(sglang)}")
    if args.fit == "exact":
        if other.pool("unified") is not None and sc.state is not None:
            verify = " and verify buffers" if other.pool("state") is not None else ""
            out.print(
                f"  SGLang's unified buffer{verify}: {b(other.total_bytes)} bytes, "
                + (f"[red]{b(other.over_budget_bytes)} over budget[/red]" if other.over_budget_bytes
                   else f"within budget (leftover {b(other.leftover_bytes)}); the exact buffer holds those bytes too")
            )  # fmt: skip
        elif other.over_budget_bytes:
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
    if both:
        engines.tables(out, v, over_budget=False)  # said above
    if sc.is_default:
        out.print(
            "  [dim]Plan your own: kvbudget plan MODEL --gpu h200 --mem-fraction 0.9 --weights-gib W "
            "(or --available 30GiB); --engine sglang|vllm picks one engine; kvbudget models lists "
            "presets; kvbudget compare MODEL --engines sglang vllm sets the engines side by side.[/dim]"
        )
    return 0
