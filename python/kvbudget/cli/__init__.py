"""The ``kvbudget`` command line.

Commands (``kvbudget COMMAND --help`` for every flag)::

    kvbudget                      # plan the embedded default (same as `kvbudget plan`)
    kvbudget plan [MODEL] [options] [--json]
    kvbudget compare [MODEL] [options] [--json]
    kvbudget sweep --vary ratio|available|tp|page-size --values ... [--out CSV] [--plot PNG]
    kvbudget ratio --context-lengths L ... [options] [--json]
    kvbudget models [--json]

MODEL is a preset name (``kvbudget models`` lists them; Hugging Face ids and
aliases are accepted) or a path to a ``config.json`` (also ``--config PATH``).
Without a MODEL the embedded default is planned: Gemma-3-27B with a one-layer
EAGLE3 draft and a stated 40 GiB budget (REFERENCE section 5, example 1); any
flag given overrides that part of it. The serving flags are every
``ServingConfig`` field, generated from :data:`kvbudget.fields.SCENARIO_FIELDS`.

``plan --json`` prints one JSON document; its ``"plan"`` member is
``PoolPlan.to_json()`` as an object, so
``kvbudget.PoolPlan.from_json(json.dumps(doc["plan"]))`` rebuilds the plan.

Exit status: 0 on success, 1 on a planning error (``kvbudget.KVBudgetError``,
which includes a malformed ``config.json``) or a missing optional dependency,
2 on a usage error (bad flag, unknown model or GPU name).

Modules: :mod:`~kvbudget.cli.parser` (the flags), :mod:`~kvbudget.cli.scenario`
(arguments -> what to plan), :mod:`~kvbudget.cli.render` (console, tables,
JSON), and one module per command (``plan``, ``compare``, ``sweep`` with
``plot``, ``ratio``, ``models``), each with ``run(args) -> int``, imported
when its command runs. Only the console script imports this package; it
imports rich lazily (and matplotlib only for ``sweep --plot``), never torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from kvbudget import KVBudgetError
from kvbudget.cli.parser import PROG, UsageError, build_parser, normalize_argv, parse_bytes
from kvbudget.cli.render import MissingDependency

__all__ = ["main", "parse_bytes"]


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args_list = normalize_argv(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else 2
    command: str = args.command
    module = importlib.import_module(f"kvbudget.cli.{command}")
    run: Callable[[argparse.Namespace], int] = module.run
    try:
        return run(args)
    except UsageError as exc:
        return _fail(f"{command}: {exc}", 2)
    except KeyError as exc:  # UnknownPresetError / UnknownGpuError carry suggestions
        from kvbudget.models import UnknownGpuError, UnknownPresetError

        if isinstance(exc, (UnknownPresetError, UnknownGpuError)):
            what = "model or draft preset" if isinstance(exc, UnknownPresetError) else "GPU"
            hint = (
                f"; did you mean {', '.join(repr(x) for x in exc.suggestions)}?"
                if exc.suggestions
                else ""
            )
            return _fail(f"unknown {what} {exc.name!r}{hint} (`kvbudget models` lists them all)", 2)
        raise
    except KVBudgetError as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except MissingDependency as exc:
        return _fail(str(exc), 1)
    except BrokenPipeError:
        return 0
