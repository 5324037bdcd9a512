"""The command line the data generators share: write a generated file, or check it is current."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path


def write_or_check(out: Path, render: Callable[[], str], *, tool: str, doc: str, argv: list[str] | None) -> int:
    """``tool [--check]``: write ``render()`` to ``out``, or exit 1 when ``out`` differs from it."""
    ap = argparse.ArgumentParser(prog=tool, description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        same = out.exists() and out.read_text() == text
        print(f"{out.name} is " + ("current" if same else f"stale: run {tool}"))
        return 0 if same else 1
    out.write_text(text)
    print(out)
    return 0
