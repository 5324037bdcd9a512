"""``kvbudget plan`` for a model without attention layers (SGLang's pure state models: Mamba-1,
Falcon-Mamba, Mamba-2): the state pool SGLang sizes first, and the label its empty KV pool
carries (:func:`kvbudget.sglang.state.plan_state_only`)."""

from __future__ import annotations

import argparse
import json

import kvbudget
from kvbudget.cli import render
from kvbudget.cli.parser import UsageError
from kvbudget.cli.render import b
from kvbudget.cli.scenario import StateOnlyModel
from kvbudget.cli.values import budget_of
from kvbudget.sglang.pure_state import zero_kv_tokens
from kvbudget.sglang.state import plan_state_only


def run(args: argparse.Namespace, model: StateOnlyModel) -> int:
    """Print (or ``--json``) the state-only plan of ``model`` on ``--available`` / ``--gpu``."""
    available, budget_label, _ = budget_of(args, False, model.notes)
    if available is None:
        raise UsageError("a budget is needed: --available BYTES or --gpu NAME (with --weights-gib)")
    spec = model.spec or kvbudget.SpeculativeConfig()
    label = zero_kv_tokens(model.config, context_len=model.serving.model_context_len)  # --model-context-len
    plan, budget = plan_state_only(model.state, model.serving, spec, available, label, args.fit)
    arch = (model.config.get("architectures") or ["?"])[0]
    if args.json:
        render.emit_json({"kvbudget_version": kvbudget.__version__, "command": "plan", "architecture": arch,
                          "available_bytes": available, "zero_kv_tokens": label,
                          "state_budget": budget.__dict__, "plan": json.loads(plan.to_json())})  # fmt: skip
        return 0
    out = render.console()
    out.print(f"[bold]kvbudget plan (fit={args.fit})[/bold]")
    out.print(f"  model:   {arch}: {model.state.num_state_layers} {model.state.mixer} state layers, no attention layer")
    out.print(f"  budget:  {budget_label}")
    out.print(f"  serving: {render.serving_summary(model.serving)}")
    for note in model.notes:
        out.print(f"  [yellow]note:[/yellow] {note}")
    out.print(render.pool_table(plan, "state pool: tensors"))
    render.state_lines(out, budget, available)
    out.print(f"  SGLang's KV pool: no layer, so no byte; its max_total_num_tokens {b(plan.config.max_total_num_tokens)} "
              f"is a label (the context length {b(label)}, floored to a page of {plan.page_size})")  # fmt: skip
    out.print(f"  available {b(available)}, planned {b(plan.total_bytes)}, leftover {b(plan.leftover_bytes)} "
              "(SGLang leaves the rest of the budget, meant for the KV pool, unused)")  # fmt: skip
    return 0
