"""``kvbudget sweep``: plan once per value of one input; a table, CSV rows and a plot."""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import IO, Any, Final

from kvbudget import KVBudgetError
from kvbudget.cli import render
from kvbudget.cli.files import OutputError, check_output, open_output, output_error
from kvbudget.cli.numbers import INT64_MAX, INT64_MIN, parse_finite_float, parse_int
from kvbudget.cli.parser import MAX_SWEEP_STEPS, VARY_FIELDS, UsageError, parse_bytes
from kvbudget.cli.render import MissingDependency, b
from kvbudget.cli.scenario import CliScenario, build_scenario
from kvbudget.fields import SCENARIO_FIELDS

_VARY_LABEL: Final[dict[str, str]] = {
    "ratio": "swa_full_tokens_ratio",
    "available": "available KV budget (GiB)",
    "tp": "tensor-parallel size (attention TP)",
    "page-size": "page size (tokens)",
}

CSV_COLUMNS: Final = (
    "vary",
    "value",
    "available_bytes",
    "tp_size",
    "page_size",
    "swa_full_tokens_ratio",
    "configurator",
    "cell_size",
    "sglang_full_tokens",
    "sglang_swa_tokens",
    "sglang_total_bytes",
    "sglang_over_budget_bytes",
    "full_tokens",
    "swa_tokens",
    "draft_tokens",
    "total_bytes",
    "leftover_bytes",
    "padding_bytes",
    "draft_bytes",
    "error",
)


def _is_int(vary: str) -> bool:
    name = VARY_FIELDS[vary]
    return name is None or SCENARIO_FIELDS[name].py == "int"


def _value(vary: str, item: str) -> float | int:
    """One swept value, bounded: a byte count, an int64, or a finite float.

    Raises:
        ValueError: not such a value (the message says why).
    """
    if vary == "available":
        return parse_bytes(item)
    if _is_int(vary):
        return parse_int(item)
    return parse_finite_float(item)


def sweep_values(args: argparse.Namespace) -> list[float | int]:
    """The swept values: ``--values`` (at most MAX_SWEEP_STEPS) or ``--start/--stop/--steps``.

    Raises:
        UsageError: a bad, non-finite or out-of-range value (each is bounded to 64 bits).
    """
    vary: str = args.vary
    integer = _is_int(vary)
    values: list[float | int] = []
    if args.values is not None:
        if args.start is not None or args.stop is not None or args.steps is not None:
            raise UsageError("give --values or --start/--stop/--steps, not both")
        items = [v for raw in args.values for v in raw.replace(",", " ").split()]
        if len(items) > MAX_SWEEP_STEPS:
            raise UsageError(f"--values: {len(items):,} values; at most {MAX_SWEEP_STEPS:,}")
        for item in items:
            try:
                values.append(_value(vary, item))
            except ValueError as exc:
                raise UsageError(f"--values: bad {vary} value: {exc}") from None
    else:
        if args.start is None or args.stop is None:
            raise UsageError("sweep needs --values V1 V2 ... or --start A --stop B [--steps N]")
        steps = 10 if args.steps is None else args.steps
        try:
            lo, hi = (
                parse_bytes(x) if vary == "available" else parse_finite_float(x)
                for x in (args.start, args.stop)
            )
        except ValueError as exc:
            raise UsageError(f"--start/--stop: {exc}") from None
        if integer and not (INT64_MIN <= min(lo, hi) and max(lo, hi) < 2.0**63):
            raise UsageError(f"--start/--stop: {vary} values must be within 64-bit integers")
        if integer:  # evenly spaced, exactly: no float rounding at 64-bit magnitudes
            flo, fhi = Fraction(lo), Fraction(hi)
            exact = [flo + (fhi - flo) * i / (steps - 1) for i in range(1, steps)]
            values.extend(min(round(v), INT64_MAX) for v in [flo, *exact])
        else:
            raw = [lo + (hi - lo) * i / (steps - 1) for i in range(steps)] if steps > 1 else [lo]
            values.extend(round(v, 12) for v in raw)
        values = list(dict.fromkeys(values))
    if not values:
        raise UsageError("sweep: no values")
    return values


def sweep_row(sc: CliScenario, vary: str, value: float | int) -> dict[str, Any]:
    """One CSV row: the scenario with ``vary`` set to ``value``, planned both ways."""
    name = VARY_FIELDS[vary]
    serving = sc.serving
    row: dict[str, Any] = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        vary=vary,
        value=value,
        available_bytes=sc.available if name is not None else int(value),
        tp_size=serving.tp_size,
        page_size=serving.page_size,
        swa_full_tokens_ratio=serving.swa_full_tokens_ratio,
    )
    if name is not None:
        row[name] = int(value) if _is_int(vary) else float(value)
    available: int = row["available_bytes"]
    try:
        scenario = sc.sglang_scenario if name is None else sc.sglang_scenario.replace(**{name: row[name]})
        cfg = scenario.configurator()
        row.update(configurator=cfg.kind, cell_size=cfg.cell_size)
        sg = cfg.plan(available, fit="sglang")
        ex = cfg.plan(available, fit="exact")
        t = sg.config
        full, swa, draft = ex.pool("full"), ex.pool("swa"), ex.pool("draft")
        row.update(
            sglang_full_tokens=t.full_max_total_num_tokens
            if t.full_max_total_num_tokens is not None
            else t.max_total_num_tokens,
            sglang_swa_tokens=t.swa_max_total_num_tokens or 0,
            sglang_total_bytes=sg.total_bytes,
            sglang_over_budget_bytes=sg.over_budget_bytes,
            full_tokens=full.tokens if full is not None else 0,
            swa_tokens=swa.tokens if swa is not None else 0,
            draft_tokens=draft.tokens if draft is not None else 0,
            total_bytes=ex.total_bytes,
            leftover_bytes=ex.leftover_bytes,
            padding_bytes=ex.padding_bytes,
            draft_bytes=ex.draft_bytes,
        )
    except KVBudgetError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def _progress(values: Sequence[float | int], enabled: bool) -> Iterator[float | int]:
    if not enabled:
        yield from values
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=render.console(stderr=True),
        transient=False,
    ) as progress:
        task = progress.add_task("sweep", total=len(values))
        for v in values:
            yield v
            progress.advance(task)


def write_csv(rows: list[dict[str, Any]], out: IO[str]) -> None:
    writer = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)


def _check_matplotlib(path: str) -> None:
    """matplotlib is installed and writes ``path``'s format (its suffix; none is PNG)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingDependency(
            "--plot needs matplotlib, which is not installed: pip install 'kvbudget[plot]' "
            "(or pip install matplotlib)"
        ) from None
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise UsageError(
            f"--plot {path}: matplotlib cannot write .{suffix} files; use one of "
            + ", ".join(f".{f}" for f in sorted(formats))
        )


def _check_outputs(args: argparse.Namespace) -> None:
    """--out and --plot can be written (checked before any planning)."""
    check_output(args.out, "--out")
    check_output(args.plot, "--plot")
    if args.out not in (None, "-") and args.plot is not None:
        if os.path.abspath(args.out) == os.path.abspath(args.plot):
            raise UsageError(f"--out and --plot name the same file: {args.out}")
    if args.plot is not None:
        _check_matplotlib(args.plot)


def _write_csv_file(rows: list[dict[str, Any]], path: str) -> None:
    try:
        with open_output(path, "--out") as fh:
            write_csv(rows, fh)
    except OutputError:
        raise
    except OSError as exc:  # a write, or the flush at close
        raise output_error("--out", path, exc) from exc


def run(args: argparse.Namespace) -> int:
    vary: str = args.vary
    if vary == "available" and args.available is not None:
        raise UsageError("--vary available sets the budget; drop --available")
    values = sweep_values(args)
    _check_outputs(args)
    if vary == "available":
        args.available = int(values[0])
    sc = build_scenario(args)
    if sc.state is not None:
        raise UsageError("sweep does not vary a model with a recurrent state pool yet (SGLang resizes the "
                         "state with every row's TP and budget); run kvbudget plan per value")  # fmt: skip
    sc.require_budget()
    rows = [sweep_row(sc, vary, v) for v in _progress(values, not args.no_progress)]
    if args.out == "-":
        write_csv(rows, sys.stdout)
    else:
        if args.out is not None:
            _write_csv_file(rows, args.out)
        _table(rows, sc, vary)
    if args.plot is not None:
        from kvbudget.cli.plot import plot

        plot(rows, sc, vary, _VARY_LABEL[vary], args.plot)
    err = sys.stderr
    if args.out not in (None, "-"):
        print(f"wrote {len(rows)} rows to {args.out}", file=err)
    if args.plot is not None:
        print(f"wrote plot to {args.plot}", file=err)
    failed = sum(1 for r in rows if r["error"])
    if failed:
        print(
            f"{failed} of {len(rows)} values gave a planning error (see the error column)", file=err
        )
    return 1 if failed == len(rows) else 0


def _table(rows: list[dict[str, Any]], sc: CliScenario, vary: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = render.console()
    out.print(
        f"[bold]kvbudget sweep over {vary}[/bold]: {escape(sc.model_label)}; "
        f"draft: {escape(sc.draft_label)}"
    )
    if vary != "available":
        out.print(f"  budget: {escape(sc.budget_label)}")
    t = Table(title_justify="left")
    t.add_column(vary, justify="right")
    for col in ("full", "swa", "draft", "SGLang full", "total bytes", "leftover", "SGLang over"):
        t.add_column(col, justify="right", no_wrap=True)
    errors: list[str] = []
    for r in rows:
        v = r["value"]
        if vary == "available":
            label = render.gib(int(v))
        else:
            label = f"{v:g}" if isinstance(v, float) else str(v)
        if r["error"]:
            t.add_row(label, "[red]error[/red]", "", "", "", "", "", "")
            errors.append(f"  {vary} {label}: [red]{escape(str(r['error']))}[/red]")
            continue
        t.add_row(
            label,
            b(r["full_tokens"]),
            b(r["swa_tokens"]),
            b(r["draft_tokens"]),
            b(r["sglang_full_tokens"]),
            b(r["total_bytes"]),
            b(r["leftover_bytes"]),
            b(r["sglang_over_budget_bytes"]),
        )
    out.print(t)
    for line in errors:
        out.print(line)
