"""``kvbudget compare --engines sglang vllm`` and the embedded default: one deployment in each
engine's own terms.

Side by side, for the same model, drafter and GPU: SGLang 0.5.23's pools (its
token counts, as it allocates them), kvbudget's exact plan (the largest
SGLang-layout plan that fits), and vLLM 0.33.0's blocks; the requests each
admits at every ``--context-lengths`` value; and the bytes each leaves unused,
spends on padding, or allocates over its budget. Every number is
:func:`kvbudget.compare.compare_engines`'s; this module reads the command line
into its inputs (:func:`compare`) and renders what it returns.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvbudget import KVBudgetError, PoolPlan, vllm
from kvbudget.cli import render
from kvbudget.cli.parser import ENGINES, UsageError
from kvbudget.cli.plan_vllm import plan_json
from kvbudget.cli.ratio import context_lengths
from kvbudget.cli.render import b
from kvbudget.cli.scenario import CliScenario
from kvbudget.cli.vllm_inputs import VllmInputs, vllm_inputs
from kvbudget.compare import DEFAULT_LENGTHS, EngineComparison, VllmDeployment, compare_engines

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["EngineView", "compare", "header", "run", "tables", "to_json"]


@dataclass(frozen=True)
class EngineView:
    """What ``compare --engines`` (and the embedded default) shows: the library's comparison and
    the command line's reading of vLLM's side."""

    comparison: EngineComparison
    vllm_inputs: VllmInputs | None
    vllm_unread: str | None = None
    """Why kvbudget's vLLM mode could not read the deployment (the embedded default with a flag it
    does not map); the comparison then leaves vLLM out."""

    @property
    def vllm_refusal(self) -> str | None:
        """Why vLLM is not in the comparison although asked for (None when it is, or not asked)."""
        return self.vllm_unread or self.comparison.vllm_refusal


def compare(args: argparse.Namespace, sc: CliScenario, engines: tuple[str, ...] = ENGINES,
            *, lenient: bool = False) -> EngineView:  # fmt: skip
    """The comparison for parsed arguments; ``lenient``: a deployment kvbudget's vLLM mode does not
    read leaves vLLM out (with the reason) instead of failing."""
    lengths = context_lengths(args.context_lengths) if getattr(args, "context_lengths", None) else DEFAULT_LENGTHS
    available = sc.require_budget()
    vi: VllmInputs | None = None
    unread: str | None = None
    if "vllm" in engines:
        try:
            vi = vllm_inputs(args, sc)
        except (UsageError, KVBudgetError) as exc:
            if not lenient:
                raise
            unread = str(exc)
    deployment = None if vi is None else VllmDeployment(vi.layers, vi.engine, vi.available)
    sb = sc.state_budget  # SGLang's state pool caps its running requests
    cap = sb.max_mamba_cache_size // sb.mamba_ratio if sb is not None and sb.mamba_ratio else None
    if sc.state is not None:  # the plans hold the state pool: the whole budget
        assert sc.available is not None
        available = sc.available
    c = compare_engines(sc.sglang_scenario, available, hybrid_swa=sc.sglang_hybrid_swa, vllm_deployment=deployment,
                        sglang="sglang" in engines, lengths=lengths, max_running_requests=cap,
                        state=sc.state)  # fmt: skip
    return EngineView(c, vi, unread)


def _plan_doc(p: PoolPlan) -> dict[str, Any]:
    return {"pools": {x.name: x.tokens for x in p.pools}, "allocated_bytes": p.total_bytes,
            "padding_bytes": p.padding_bytes, "leftover_bytes": p.leftover_bytes,
            "over_budget_bytes": p.over_budget_bytes}  # fmt: skip


def to_json(v: EngineView) -> dict[str, Any]:
    """The comparison's JSON members: ``engines`` (each engine's pools or blocks), SGLang's budget
    and configurator, and the requests held at each context length."""
    c = v.comparison
    doc: dict[str, Any] = {"engines": {"exact": _plan_doc(c.exact)}, "available_bytes": c.available,
                           "sglang_configurator": c.kind, "concurrency": list(c.rows)}  # fmt: skip
    if c.sglang is not None:
        doc["engines"]["sglang"] = _plan_doc(c.sglang)
    if (v.vllm_inputs is not None and c.vllm_plan is not None) or v.vllm_refusal is not None:
        doc["engines"]["vllm"] = _vllm_doc(v.vllm_inputs, c.vllm_plan, v.vllm_refusal)
    return doc


def _vllm_doc(vi: VllmInputs | None, p: vllm.VllmPlan | None, refusal: str | None) -> dict[str, Any]:
    """vLLM's member of ``engines``: its plan and inputs, or why it is not there."""
    if vi is not None and p is not None:
        return {**plan_json(vi, p), "padding_bytes_per_request": p.padding_bytes_per_request}
    return {"engine": "vllm", "vllm_version": vllm.VLLM_VERSION, "error": refusal}


def _memory_table(v: EngineView) -> Any:
    from rich.table import Table

    c = v.comparison
    t = Table(title="memory: what each engine allocates from its budget on this GPU", title_justify="left")
    for name in ("engine", "holds", "budget", "allocated bytes", "unused", "padding", "over budget"):
        t.add_column(name, justify="left" if name in ("engine", "holds") else "right")

    def add(label: str, p: PoolPlan) -> None:
        t.add_row(label, render.holds(p), b(c.available), b(p.total_bytes), b(max(0, p.leftover_bytes)),
                  b(p.padding_bytes), b(p.over_budget_bytes))  # fmt: skip

    if c.sglang is not None:
        add("SGLang 0.5.23", c.sglang)
    add("kvbudget exact", c.exact)
    vi, vp = v.vllm_inputs, c.vllm_plan
    if vi is not None and vp is not None:
        pad = vp.padding_bytes_per_request
        t.add_row(f"vLLM {vllm.VLLM_VERSION}", f"{b(vp.num_blocks)} blocks of {b(vp.bytes_per_block[0])} bytes, "
                  f"{len(vp.groups)} groups", b(vi.available), b(vp.allocated_bytes[0]),
                  b(vi.available - vp.allocated_bytes[0]), f"{render.percent(pad, vp.per_request_bytes[0], 2)} "
                  "of a request", "0")  # fmt: skip
    return t


def _concurrency_table(rows: Sequence[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title="requests held at once, by context length", title_justify="left")
    t.add_column("context tokens", justify="right")
    cols = [k for k in ("sglang", "exact", "vllm") if k in rows[0]]
    names = {"sglang": "SGLang (its pools)", "exact": "kvbudget exact", "vllm": "vLLM (its estimate)"}
    for k in cols:
        t.add_column(names[k], justify="right")
    for r in rows:
        t.add_row(b(r["context_len"]), *(f"{r[k]:,.2f}" if k == "vllm" else b(r[k]) for k in cols))
    return t


def header(out: Console, title: str, sc: CliScenario, v: EngineView) -> None:
    """The deployment: the scenario and SGLang's side (:func:`kvbudget.cli.render.header`), then vLLM's."""
    from rich.markup import escape

    vi = v.vllm_inputs
    asked = vi is not None or v.vllm_unread is not None
    render.header(out, title, sc, v.comparison.configurator, budget="SGLang budget" if asked else "budget")
    if vi is not None:
        out.print(f"  vLLM {vllm.VLLM_VERSION}: {escape(vi.settings())}; {vi.layer_counts()}")
        out.print(f"  vLLM budget:  {escape(vi.budget_label)} per worker")
        for note in vi.notes:
            out.print(f"  [yellow]note:[/yellow] {escape(note)}")
    if v.vllm_refusal is not None:
        what = "not read by kvbudget's vLLM mode" if v.vllm_unread is not None else "would not start"
        out.print(f"  [yellow]vLLM {vllm.VLLM_VERSION} {what}:[/yellow] {escape(v.vllm_refusal)}")


def tables(out: Console, v: EngineView, over_budget: bool = True) -> None:
    """The engines side by side: memory, requests held at each length, and vLLM's own lines
    (``over_budget``: and what SGLang's token counts allocate over the budget)."""
    from rich.markup import escape

    c = v.comparison
    out.print(f"  SGLang 0.5.23's configurator: {type(c.configurator).__name__}, as SGLang's own factory picks it "
              "(kvbudget's exact plan uses the same layout)")  # fmt: skip
    out.print(_memory_table(v))
    if c.rows:
        out.print(_concurrency_table(c.rows))
    vp = c.vllm_plan
    if vp is not None:
        e = vp.max_model_len
        out.print(f"  vLLM at --max-model-len {b(e)} logs 'GPU KV cache size: {b(vp.kv_cache_size_tokens)} tokens' "
                  f"(max concurrency {vp.max_concurrency:.2f} x {b(e)}); its per-request charge counts the "
                  "tokens in flight (max-num-batched-tokens for each batch in flight) in every window layer")  # fmt: skip
        for w in vp.warnings:
            out.print(f"  [yellow]vLLM warns:[/yellow] {escape(w)}")
    if over_budget and c.sglang is not None and c.sglang.over_budget_bytes:
        out.print(f"  SGLang's token counts allocate {b(c.sglang.over_budget_bytes)} bytes over the budget "
                  "(its padding rows); the exact plan fits")  # fmt: skip


def run(args: argparse.Namespace, sc: CliScenario) -> int:
    from kvbudget.cli.files import check_output

    if args.plot:
        check_output(args.plot, "--plot")
    if sc.vllm_only is not None:
        rows = _vllm_alone(args, sc)
    else:
        v = compare(args, sc, tuple(args.engines))
        rows = list(v.comparison.rows)
        if args.json:
            render.emit_json(render.document("compare", sc, **to_json(v)))
        else:
            out = render.console()
            header(out, "kvbudget compare --engines", sc, v)
            tables(out, v)
    if args.plot and rows:
        from kvbudget.cli.plot import plot_engines

        plot_engines(rows, sc, args.plot)
    elif args.plot:  # vLLM alone, and it would not start: no row to draw
        print(f"kvbudget: --plot: nothing to plot, {args.plot} not written", file=sys.stderr)
    return 0


def _vllm_alone(args: argparse.Namespace, sc: CliScenario) -> list[dict[str, Any]]:
    """``compare --engines sglang vllm`` on a config only vLLM's reader takes: SGLang's refusal in
    place of its pools and of the exact plan (which follows SGLang's layout), then vLLM's blocks and
    the requests they hold at each length; the rows it printed."""
    from rich.markup import escape

    from kvbudget.cli.plan_vllm import group_table, summary
    from kvbudget.cli.plan_vllm import header as vllm_header

    assert sc.vllm_only is not None
    refusal = sc.vllm_only.sglang_refusal
    lengths = context_lengths(args.context_lengths) if args.context_lengths else DEFAULT_LENGTHS
    vi = vllm_inputs(args, sc)
    deployment = VllmDeployment(vi.layers, vi.engine, vi.available)
    p, error = deployment.plan_or_refusal()
    rows = [] if p is None else [{"context_len": n, "vllm": deployment.concurrency(n)} for n in lengths]
    if args.json:
        engines = {"sglang": {"engine": "sglang", "error": refusal}, "vllm": _vllm_doc(vi, p, error)}
        render.emit_json(render.document("compare", sc, engines=engines, available_bytes=vi.available,
                                         sglang_configurator=None, concurrency=rows))  # fmt: skip
        return rows
    out = render.console()
    vllm_header(out, "kvbudget compare --engines", sc, vi)
    out.print("  [yellow]only vLLM is shown:[/yellow] SGLang mode refuses this config (the note above says why), "
              "and kvbudget's exact plan follows SGLang's layout")  # fmt: skip
    if p is None:
        out.print(f"  [yellow]vLLM {vllm.VLLM_VERSION} would not start:[/yellow] {escape(str(error))}")
        return rows
    out.print(group_table(p, {x.name for x in vi.layers if x.is_draft}))
    summary(out, vi, p)
    if rows:
        out.print(_concurrency_table(rows))
    return rows
