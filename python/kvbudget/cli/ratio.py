"""``kvbudget ratio``: the SWA ratio at which the full and SWA pools run out together."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Final

from kvbudget.cli import render
from kvbudget.cli.numbers import parse_finite_float, parse_int, shown
from kvbudget.cli.parser import UsageError
from kvbudget.cli.render import b
from kvbudget.cli.scenario import build_scenario


_INTEGER: Final = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*")


def _parts(values: Sequence[str]) -> Iterator[str]:
    """The non-empty items of values given space or comma separated."""
    for v in values:
        yield from (part.strip() for part in str(v).split(",") if part.strip())


def context_lengths(values: Sequence[str]) -> list[int]:
    """``--context-lengths``: integers >= 1, space or comma separated."""
    out: list[int] = []
    for part in _parts(values):
        if not _INTEGER.fullmatch(part):
            raise UsageError(f"--context-lengths: not an integer: {shown(part)}")
        try:
            out.append(parse_int(part, 1))
        except ValueError as exc:
            raise UsageError(f"--context-lengths: {exc}") from None
    if not out:
        raise UsageError("--context-lengths: give at least one length")
    return out


def weights(values: Sequence[str] | None) -> list[float] | None:
    """``--weights``: finite numbers >= 0, space or comma separated (None when not given)."""
    if values is None:
        return None
    out: list[float] = []
    for part in _parts(values):
        try:
            w = parse_finite_float(part)
        except ValueError as exc:
            raise UsageError(f"--weights: {exc}") from None
        if w < 0:
            raise UsageError(f"--weights: must be >= 0, got {shown(part)}")
        out.append(w)
    if not out:
        raise UsageError("--weights: give at least one weight")
    return out


def run(args: argparse.Namespace) -> int:
    from kvbudget.workload import suggest_swa_ratio

    sc = build_scenario(args)
    available = sc.require_budget()
    cfg = sc.configurator()
    lengths = context_lengths(args.context_lengths)
    weight_list = weights(args.weights)
    r = suggest_swa_ratio(cfg, lengths, available, weights=weight_list)
    if args.json:
        # Every number of the suggestion, as the library returns it (pool sizes flattened).
        numbers = {
            k: v for k, v in dataclasses.asdict(r).items() if k not in ("config", "baseline_config")
        }
        render.emit_json(
            render.document(
                "ratio",
                sc,
                context_lengths=lengths,
                weights=weight_list,
                **numbers,
                full_tokens=r.config.full_max_total_num_tokens,
                swa_tokens=r.config.swa_max_total_num_tokens,
            )
        )
        return 0
    from rich.table import Table

    out = render.console()
    render.header(out, "kvbudget ratio", sc, cfg)
    out.print(
        f"  workload: {len(lengths)} context length(s); an average request holds "
        f"{r.full_tokens_per_request:,.0f} full and {r.swa_tokens_per_request:,.0f} SWA tokens"
    )
    t = Table(
        title="swa_full_tokens_ratio: suggested vs baseline (SGLang's sizing)", title_justify="left"
    )
    t.add_column("")
    t.add_column("suggested", justify="right")
    t.add_column("baseline", justify="right")
    base = r.baseline_config
    t.add_row("ratio", f"{r.ratio:.4f}", f"{r.baseline_ratio:.4f}")
    t.add_row("concurrent requests", f"{r.concurrency:,}", f"{r.baseline_concurrency:,}")
    t.add_row(
        "full tokens",
        b(r.config.full_max_total_num_tokens or 0),
        b(base.full_max_total_num_tokens or 0) if base else "-",
    )
    t.add_row(
        "SWA tokens",
        b(r.config.swa_max_total_num_tokens or 0),
        b(base.swa_max_total_num_tokens or 0) if base else "-",
    )
    t.add_row("idle full-pool bytes", b(r.idle_full_bytes), b(r.baseline_idle_full_bytes))
    t.add_row("idle SWA-pool bytes", b(r.idle_swa_bytes), b(r.baseline_idle_swa_bytes))
    out.print(t)
    if cfg.serving.chunked_prefill_size is None:
        out.print(
            "  note: no --chunked-prefill-size, so a request prefills at once and holds its whole "
            "context in the SWA pool; SGLang usually chunks (e.g. --chunked-prefill-size 8192)."
        )
    gain = "inf" if r.gain == float("inf") else f"{r.gain:.2f}x"
    out.print(f"  use --swa-full-tokens-ratio {r.ratio:.4f}: {gain} the baseline's concurrency")
    return 0
