"""``kvbudget compare --engines sglang vllm``: one deployment in each engine's own terms.

Side by side, for the same model, drafter and per-GPU KV budget: SGLang 0.5.23's
pools (its token counts, as it allocates them), kvbudget's exact plan (the
largest SGLang-layout plan that fits), and vLLM 0.33.0's blocks; the requests
each admits at every ``--context-lengths`` value; and the bytes each leaves
unused, spends on padding, or allocates over the budget. Every number comes
from the library (:mod:`kvbudget.workload` for SGLang's concurrency,
:func:`kvbudget.vllm.plan` re-planned at each length for vLLM's).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kvbudget
from kvbudget import PoolPlan, vllm
from kvbudget.cli import render
from kvbudget.cli.plan_vllm import plan_json
from kvbudget.cli.ratio import context_lengths
from kvbudget.cli.render import b
from kvbudget.cli.scenario import CliScenario
from kvbudget.cli.vllm_inputs import VllmInputs, vllm_inputs
from kvbudget.workload import concurrency

if TYPE_CHECKING:
    from rich.console import Console

    from kvbudget.sglang.configurators import PoolConfiguratorBase

DEFAULT_LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)


@dataclass(frozen=True)
class EngineComparison:
    """What ``compare --engines`` reports."""

    lengths: list[int]
    sglang_kind: str
    """SGLang's configurator (``"default"``, ``"hybrid_swa"``, ...)."""
    sglang: PoolPlan | None
    exact: PoolPlan
    sglang_available: int
    vllm_inputs: VllmInputs | None
    vllm_plan: vllm.VllmPlan | None
    rows: list[dict[str, Any]]
    """Per context length: ``sglang``, ``exact`` (requests held) and ``vllm`` (vLLM's float)."""


def _vllm_concurrency(vi: VllmInputs, length: int) -> float:
    """vLLM's max concurrency with ``--max-model-len length`` (0 when one request does not fit)."""
    try:
        return vi.plan(max_model_len=length).max_concurrency
    except vllm.VllmStartupError:
        return 0.0


def _sglang_configurator(sc: CliScenario) -> PoolConfiguratorBase:
    """SGLang's configurator as SGLang 0.5.23 chooses it: one Default pool over every layer
    when it does not give the model separate SWA pools (``sc.sglang_pools``)."""
    cfg = sc.configurator()
    if sc.sglang_pools is not None and sc.sglang_pools["hybrid_swa"] is False and cfg.kind != "default":
        s = sc.scenario
        sc.use_sglang_choice()
        return kvbudget.Scenario(s.model, s.serving.replace(disable_hybrid_swa_memory=True), s.spec).configurator()
    return cfg


def compare_engines(args: argparse.Namespace, sc: CliScenario) -> EngineComparison:
    engines = set(args.engines)
    lengths = context_lengths(args.context_lengths) if args.context_lengths else list(DEFAULT_LENGTHS)
    available = sc.require_budget()
    cfg = _sglang_configurator(sc)
    exact = cfg.plan(available, fit="exact")
    sglang = cfg.plan(available, fit="sglang") if "sglang" in engines else None
    vi = vllm_inputs(args, sc) if "vllm" in engines else None
    vplan = vi.plan() if vi is not None else None
    rows = []
    for n in lengths:
        row: dict[str, Any] = {"context_len": n, "exact": concurrency(cfg, exact, n)}
        if sglang is not None:
            row["sglang"] = concurrency(cfg, sglang, n)
        if vi is not None:
            row["vllm"] = _vllm_concurrency(vi, n)
        rows.append(row)
    return EngineComparison(lengths, cfg.kind, sglang, exact, available, vi, vplan, rows)


def _plan_doc(p: PoolPlan) -> dict[str, Any]:
    return {"pools": {x.name: x.tokens for x in p.pools}, "allocated_bytes": p.total_bytes,
            "padding_bytes": p.padding_bytes, "leftover_bytes": p.leftover_bytes,
            "over_budget_bytes": p.over_budget_bytes}  # fmt: skip


def to_json(c: EngineComparison) -> dict[str, Any]:
    doc: dict[str, Any] = {"engines": {"exact": _plan_doc(c.exact)}, "available_bytes": c.sglang_available,
                           "sglang_configurator": c.sglang_kind,
                           "concurrency": c.rows}  # fmt: skip
    if c.sglang is not None:
        doc["engines"]["sglang"] = _plan_doc(c.sglang)
    if c.vllm_inputs is not None and c.vllm_plan is not None:
        doc["engines"]["vllm"] = {**plan_json(c.vllm_inputs, c.vllm_plan),
                                  "padding_bytes_per_request": c.vllm_plan.padding_bytes_per_request}  # fmt: skip
    return doc


def _memory_table(c: EngineComparison) -> Any:
    from rich.table import Table

    t = Table(title="memory: what each engine allocates from the same per-GPU budget", title_justify="left")
    for name in ("engine", "holds", "allocated bytes", "unused", "padding", "over budget"):
        t.add_column(name, justify="left" if name in ("engine", "holds") else "right")

    def pools(p: PoolPlan) -> str:
        return ", ".join(f"{x.name} {b(x.tokens)}" for x in p.pools) + " tokens"

    def add(label: str, p: PoolPlan) -> None:
        t.add_row(label, pools(p), b(p.total_bytes), b(max(0, p.leftover_bytes)), b(p.padding_bytes),
                  b(p.over_budget_bytes))  # fmt: skip

    if c.sglang is not None:
        add("SGLang 0.5.23", c.sglang)
    add("kvbudget exact", c.exact)
    vi, vp = c.vllm_inputs, c.vllm_plan
    if vi is not None and vp is not None:
        pad = vp.padding_bytes_per_request
        t.add_row(f"vLLM {vllm.VLLM_VERSION}", f"{b(vp.num_blocks)} blocks of {b(vp.bytes_per_block[0])} bytes, "
                  f"{len(vp.groups)} groups", b(vp.allocated_bytes[0]), b(vi.available - vp.allocated_bytes[0]),
                  f"{render.percent(pad, vp.per_request_bytes[0], 2)} of a request", "0")  # fmt: skip
    return t


def _concurrency_table(c: EngineComparison) -> Any:
    from rich.table import Table

    t = Table(title="requests held at once, by context length", title_justify="left")
    t.add_column("context tokens", justify="right")
    cols = [k for k in ("sglang", "exact", "vllm") if k in c.rows[0]]
    names = {"sglang": "SGLang (its pools)", "exact": "kvbudget exact", "vllm": "vLLM (its estimate)"}
    for k in cols:
        t.add_column(names[k], justify="right")
    for r in c.rows:
        t.add_row(b(r["context_len"]), *(f"{r[k]:,.2f}" if k == "vllm" else b(r[k]) for k in cols))
    return t


def run(args: argparse.Namespace, sc: CliScenario) -> int:
    from kvbudget.cli.files import check_output

    if args.plot:
        check_output(args.plot, "--plot")
    c = compare_engines(args, sc)
    if args.json:
        render.emit_json(render.document("compare", sc, **to_json(c)))
    else:
        _print(render.console(), sc, c)
    if args.plot:
        from kvbudget.cli.plot import plot_engines

        plot_engines(c.rows, sc, args.plot)
    return 0


def _print(out: Console, sc: CliScenario, c: EngineComparison) -> None:
    from rich.markup import escape

    from kvbudget.cli.plan_vllm import header

    if c.vllm_inputs is not None:
        header(out, "kvbudget compare --engines", sc, c.vllm_inputs)
    else:
        render.header(out, "kvbudget compare --engines", sc, sc.configurator())
    out.print(f"  SGLang 0.5.23's configurator: {c.sglang_kind} (kvbudget's exact plan uses the same layout)")
    out.print(_memory_table(c))
    out.print(_concurrency_table(c))
    vp = c.vllm_plan
    if vp is not None:
        e = vp.max_model_len
        out.print(f"  vLLM at --max-model-len {b(e)} logs 'GPU KV cache size: {b(vp.kv_cache_size_tokens)} tokens' "
                  f"(max concurrency {vp.max_concurrency:.2f} x {b(e)}); its per-request charge counts the "
                  "tokens in flight (max-num-batched-tokens for each batch in flight) in every window layer")  # fmt: skip
        for w in vp.warnings:
            out.print(f"  [yellow]vLLM warns:[/yellow] {escape(w)}")
    if c.sglang is not None and c.sglang.over_budget_bytes:
        out.print(f"  SGLang's token counts allocate {b(c.sglang.over_budget_bytes)} bytes over the budget "
                  "(its padding rows); the exact plan fits")  # fmt: skip
