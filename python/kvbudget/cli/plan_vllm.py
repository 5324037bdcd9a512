"""``kvbudget plan --engine vllm``: vLLM 0.33.0's blocks, groups and concurrency for a deployment."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from kvbudget import vllm
from kvbudget.cli import render
from kvbudget.cli.render import b
from kvbudget.cli.scenario import CliScenario, build_scenario
from kvbudget.cli.vllm_inputs import VllmInputs, vllm_inputs

if TYPE_CHECKING:
    from rich.console import Console


def plan_json(vi: VllmInputs, p: vllm.VllmPlan) -> dict[str, Any]:
    """The plan and its inputs as JSON members."""
    return {
        "engine": "vllm",
        "vllm_version": vllm.VLLM_VERSION,
        "vllm_engine": dataclasses.asdict(vi.engine),
        "vllm_available_bytes": vi.available,
        "vllm_layers": [dataclasses.asdict(x) for x in vi.layers],
        "vllm_plan": dataclasses.asdict(p),
    }


def header(out: Console, title: str, sc: CliScenario, vi: VllmInputs) -> None:
    from rich.markup import escape

    drafters = sum(x.is_draft for x in vi.layers)
    out.print(f"[bold]{escape(title)}[/bold]" + (" (embedded default)" if sc.is_default else ""))
    out.print(f"  model:   {escape(sc.model_label)}, {vi.layer_counts().partition(', ')[0]}")
    out.print(f"  draft:   {escape(sc.draft_label)}" + (f", {drafters} drafter layer(s)" if drafters else ""))
    out.print(f"  budget:  {escape(vi.budget_label)} per worker")
    out.print(f"  vLLM {vllm.VLLM_VERSION}: {escape(vi.settings())}")
    for note in (*sc.notes, *vi.notes):
        out.print(f"  [yellow]note:[/yellow] {escape(note)}")


def group_table(p: vllm.VllmPlan, drafters: set[str]) -> Any:
    from rich.table import Table

    t = Table(title="KV-cache groups (worker 0): one block holds a page of every group", title_justify="left")
    for name, right in (("group", False), ("spec", False), ("layers", True), ("drafter", True),
                        ("block", True), ("page bytes", True), ("blocks / request", True),
                        ("unused bytes / block", True)):  # fmt: skip
        t.add_column(name, justify="right" if right else "left")
    for i, (g, need) in enumerate(zip(p.worker_groups[0], p.blocks_per_request)):
        unused = g.unused_bytes_per_block or 0
        pad = f"{b(unused)}" + (f" ({g.padding_layers} padding layers)" if g.padding_layers else "")
        t.add_row(str(i), g.spec.removesuffix("Spec"), str(len(g.layers)), str(sum(x in drafters for x in g.layers)),
                  str(g.block_size), b(g.layer_pages_bytes), b(need), pad)  # fmt: skip
    return t


def summary(out: Console, vi: VllmInputs, p: vllm.VllmPlan) -> None:
    alloc, budget = p.allocated_bytes[0], vi.available
    pad, need = p.padding_bytes_per_request, p.per_request_bytes[0]
    out.print(f"  {b(p.num_blocks)} blocks x {b(p.bytes_per_block[0])} bytes = {b(alloc)} bytes "
              f"({render.gib(alloc)}) of {b(budget)}; {b(budget - alloc)} left (under one block)")  # fmt: skip
    cross = any(g.spec == "CrossAttentionSpec" for g in p.groups)
    counting = "the in-flight tokens in window layers" + (
        "; cross-attention layers for the encoder's budget, max_num_batched_tokens tokens" if cross else "")
    out.print(f"  one request of {b(p.max_model_len)} tokens is charged {b(sum(p.blocks_per_request))} blocks "
              f"({b(need)} bytes, counting {counting})")  # fmt: skip
    if pad:
        out.print(f"  padding: {b(pad)} of those bytes ({render.percent(pad, need, 2)}) are padding layers' "
                  "pages, which hold no KV")  # fmt: skip
    out.print(f"  max concurrency {p.max_concurrency:.2f}; vLLM logs 'GPU KV cache size: "
              f"{b(p.kv_cache_size_tokens)} tokens', which is concurrency x max_model_len, not the pool's "
              "capacity")  # fmt: skip
    if p.mamba is not None:
        m = p.mamba
        padded = (f"; the state page padded to {b(m.mamba_page_size_padded)} bytes" if m.mamba_page_size_padded
                  else "")  # fmt: skip
        out.print(f"  state layers: Mamba cache mode {m.mamba_cache_mode}, attention block {b(m.block_size)} "
                  f"tokens (raised until a page holds a state), state block {b(m.mamba_block_size)} tokens{padded}")  # fmt: skip
    for w in p.warnings:
        out.print(f"  [yellow]vLLM warns:[/yellow] {w}")


def run(args: argparse.Namespace) -> int:
    sc = build_scenario(args, vllm_only=True)
    vi = vllm_inputs(args, sc)
    p = vi.plan()
    if args.json:
        render.emit_json(render.document("plan", sc, **plan_json(vi, p)))
        return 0
    out = render.console()
    header(out, "kvbudget plan --engine vllm", sc, vi)
    out.print(group_table(p, {x.name for x in vi.layers if x.is_draft}))
    summary(out, vi, p)
    return 0
