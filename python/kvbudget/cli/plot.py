"""``sweep --plot`` (pool tokens and bytes against the swept input) and ``compare --engines --plot``
(requests held against context length, per engine); matplotlib is imported here."""

from __future__ import annotations

import os
from typing import Any

from kvbudget.cli import render
from kvbudget.cli.files import OutputError, open_output, output_error
from kvbudget.cli.render import GIB
from kvbudget.cli.scenario import CliScenario


def _save(fig: Any, plt: Any, path: str) -> None:
    """Write ``fig`` at ``path`` (its suffix is the format; none is PNG) and close it.

    Raises:
        OutputError: ``path`` cannot be written.
    """
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    try:
        with open_output(path, "--plot", binary=True) as fh:
            fig.savefig(fh, format=fmt, dpi=120)
    except OutputError:
        raise
    except OSError as exc:  # a write, or the flush at close
        raise output_error("--plot", path, exc) from exc
    finally:
        plt.close(fig)


def plot_engines(rows: list[dict[str, Any]], sc: CliScenario, path: str) -> None:
    """``compare --engines``' rows as requests held against context length, one line per engine.

    Raises:
        OutputError: ``path`` cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [int(r["context_len"]) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 5.5))
    styles = {"sglang": ("o-", "tab:orange", "SGLang 0.5.23 (its pools, whole requests)"),
              "exact": ("s--", "tab:blue", "kvbudget exact plan (SGLang layout, fits)"),
              "vllm": ("^-", "tab:green", "vLLM 0.33.0 (its max concurrency estimate)")}  # fmt: skip
    for key, (style, color, label) in styles.items():
        if key in rows[0]:
            ax.plot(xs, [float(r[key]) for r in rows], style, color=color, label=label, markersize=5)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("context length, tokens")
    ax.set_ylabel("requests held at once")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize=9)
    model = sc.model_info.get("preset") or sc.model_label
    draft_name = sc.draft_info.get("preset") or sc.draft_info.get("spec", "none")
    fig.suptitle(f"kvbudget compare --engines: {model}, draft {draft_name}, budget {render.gib(sc.available or 0)}")
    fig.tight_layout()
    _save(fig, plt, path)


def plot(rows: list[dict[str, Any]], sc: CliScenario, vary: str, x_label: str, path: str) -> None:
    """Write the sweep's rows as a plot at ``path`` (its suffix is the format; none is PNG).

    Raises:
        OutputError: ``path`` cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def xval(r: dict[str, Any]) -> float:
        v = float(r["value"])
        return v / GIB if vary == "available" else v

    ok = [r for r in rows if not r["error"]]
    bad = [r for r in rows if r["error"]]
    xs = [xval(r) for r in ok]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True, height_ratios=[3, 2])
    full = [int(r["full_tokens"]) for r in ok]
    swa = [int(r["swa_tokens"]) for r in ok]
    draft = [int(r["draft_tokens"]) for r in ok]
    if any(full):
        label = "full pool (exact)"
        if any(draft) and draft == full:
            label = "full pool = draft pool (exact)"
        ax1.plot(xs, full, "o-", color="tab:blue", label=label, markersize=5)
    if any(swa):
        label = "SWA pool (exact)"
        if any(draft) and draft == swa and draft != full:
            label = "SWA pool = draft pool (exact)"
        ax1.plot(xs, swa, "s-", color="tab:orange", label=label, markersize=5)
    if any(draft) and draft != full and draft != swa:
        ax1.plot(xs, draft, "^-", color="tab:green", label="draft pool (exact)", markersize=5)
    ys_sg = [int(r["sglang_full_tokens"]) for r in ok]
    if any(ys_sg):
        ax1.plot(xs, ys_sg, "--", color="black", linewidth=1, label="SGLang max_total_num_tokens")
    for r in bad:
        ax1.axvline(xval(r), color="tab:red", alpha=0.25, linewidth=6)
        ax2.axvline(xval(r), color="tab:red", alpha=0.25, linewidth=6)
    if bad:
        ax1.plot([], [], color="tab:red", alpha=0.25, linewidth=6, label="planning error (no plan)")
    ax1.set_ylabel("tokens per pool")
    ax1.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax1.grid(True, alpha=0.3)
    ax1.legend(loc="best", fontsize=9)
    ax1.set_ylim(bottom=0)

    over = [int(r["sglang_over_budget_bytes"]) for r in ok]
    left = [int(r["leftover_bytes"]) for r in ok]
    top = max([*over, *left, 1])
    unit, div = ("MiB", float(1 << 20)) if top >= (1 << 20) else ("KiB", 1024.0)
    for values, style, color, label in ((over, "o-", "tab:red", "SGLang's plan: bytes over the budget"),
                                        (left, "s-", "tab:blue", "exact plan: budget left unused")):  # fmt: skip
        ax2.plot(xs, [v / div for v in values], style, color=color, markersize=5, label=label)
    ax2.set_ylabel(unit)
    ax2.set_ylim(0, top / div * 1.12)
    ax2.grid(True, alpha=0.3)
    ax2.legend(loc="best", fontsize=9)
    ax2.set_xlabel(x_label)
    if vary in ("tp", "page-size") and xs and min(xs) > 0:
        ax2.set_xscale("log", base=2)
        ax2.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    model = sc.model_info.get("preset") or sc.model_label
    draft_name = sc.draft_info.get("preset") or sc.draft_info.get("spec", "none")
    budget = "" if vary == "available" else f", budget {render.gib(sc.available or 0)}"
    fig.suptitle(
        f"kvbudget sweep: {model}, draft {draft_name}{budget}\n"
        f"pool tokens and bytes vs {x_label}"
    )
    ax1.set_title(render.serving_summary(sc.serving, skip=vary), fontsize=9)
    fig.tight_layout()
    _save(fig, plt, path)
