"""The ``kvbudget`` command line.

Commands (``kvbudget COMMAND --help`` for every flag)::

    kvbudget                      # the embedded default in SGLang and vLLM (same as `kvbudget plan`)
    kvbudget plan [MODEL] [options] [--json]
    kvbudget compare [MODEL] [options] [--json]
    kvbudget sweep --vary ratio|available|tp|page-size --values ... [--out CSV] [--plot PNG]
    kvbudget ratio --context-lengths L ... [options] [--json]
    kvbudget models [--json]

MODEL is a preset name (``kvbudget models`` lists them; Hugging Face ids and
aliases are accepted) or a path to a ``config.json`` (also ``--config PATH``).
Without a MODEL the embedded default is planned: gpt-oss-120b with its EAGLE3
draft preset on one H200 (the GPU preset x an assumed mem-fraction 0.9 - the
checkpoint's published 60.8 GiB), which SGLang 0.5.23 plans with HybridSWA
pools; ``plan`` then shows SGLang's numbers, kvbudget's exact plan and vLLM
0.33.0's for the same deployment side by side (``--engine`` picks one). Any
flag given overrides that part of it. The serving flags are every
``ServingConfig`` field, generated from :data:`kvbudget.fields.SCENARIO_FIELDS`.

``plan --json`` prints one JSON document; its ``"plan"`` member is
``PoolPlan.to_json()`` as an object, so
``kvbudget.PoolPlan.from_json(json.dumps(doc["plan"]))`` rebuilds the plan.

Exit status: 0 on success, 1 on a planning error (``kvbudget.KVBudgetError``,
which includes a malformed ``config.json``), a missing optional dependency, a
file or stdout that cannot be written, or any other error; 2 on a usage error
(bad flag or value, unknown command, model or GPU name, a ``--config`` over
16 MiB, not UTF-8 or nested deeper than 64 levels, an output path that cannot
be written); 130 on Ctrl-C. Every error is one line on stderr,
``kvbudget: error: ...``, never a traceback; ``KVBUDGET_DEBUG=1`` prints the
traceback before that line (same exit status), and an unexpected exception
(a bug) says so. Numbers are bounded before they are computed (every count
fits a signed 64-bit integer), config files are read with limits, output
paths are checked before any work.

Modules: :mod:`~kvbudget.cli.parser` (the flags), :mod:`~kvbudget.cli.numbers`
(bounded number parsing), :mod:`~kvbudget.cli.files` (bounded config reads,
output paths), :mod:`~kvbudget.cli.scenario` (arguments -> what to plan),
:mod:`~kvbudget.cli.render` (console, tables, JSON), and one module per command
(``plan``, ``compare``, ``sweep`` with ``plot``, ``ratio``, ``models``), each
with ``run(args) -> int``, imported when its command runs. Only the console script imports this package; it
imports rich lazily (and matplotlib only for ``sweep --plot``), never torch.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Final

from kvbudget import KVBudgetError
from kvbudget.cli.files import OutputError
from kvbudget.cli.parser import (
    COMMANDS,
    PROG,
    ArgumentsError,
    UsageError,
    build_parser,
    close_command,
    normalize_argv,
    parse_bytes,
    value_options,
)
from kvbudget.cli.render import MissingDependency

__all__ = ["main", "parse_bytes"]

#: Errors a user's input or environment can cause; others are reported as likely bugs.
_EXPECTED = (OSError, ValueError, ArithmeticError, MemoryError, RecursionError, ImportError)
#: errno values of a failed write without a file name: stdout (a closed pipe, a full disk).
_WRITE_ERRNOS = frozenset(
    getattr(errno, name)
    for name in ("EPIPE", "ENOSPC", "EIO", "EDQUOT", "EFBIG")
    if hasattr(errno, name)
)


#: The longest error line printed (a message quoting a huge argument is cut).
_MAX_MESSAGE: Final = 2000


def _one_line(message: str) -> str:
    """``message`` on one line ("; " between its lines), at most about _MAX_MESSAGE long."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = "; ".join(lines) or "(no message)"
    if len(text) > _MAX_MESSAGE:
        text = f"{text[:_MAX_MESSAGE]}... ({len(text):,} characters)"
    return text


def _debug() -> bool:
    return os.environ.get("KVBUDGET_DEBUG", "").strip() not in ("", "0")


def _fail(message: str, status: int) -> int:
    """Print ``kvbudget: error: MESSAGE`` (one line) on stderr; return ``status``."""
    if _debug():
        if sys.exc_info()[0] is not None:
            traceback.print_exc()
    try:
        print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr itself is gone: the status still tells
        pass
    return status


def _quiet_stdout() -> None:
    """After stdout failed, point it at /dev/null so the exit-time flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (tests capture it)
        pass


def _unknown_command(argv: list[str]) -> str | None:
    """A message when ``argv[0]`` is neither a command nor a model but close to a command."""
    if not argv or argv[0] in COMMANDS or argv[0].startswith("-"):
        return None
    guess = close_command(argv[0])
    if guess is None:
        return None
    from kvbudget.cli.scenario import looks_like_path
    from kvbudget.models import get_preset

    from kvbudget.models import find_bundled_model

    if looks_like_path(argv[0]) or find_bundled_model(argv[0]) is not None:
        return None
    try:
        get_preset(argv[0])
    except KeyError:
        return (
            f"unknown command or model {argv[0]!r}; did you mean {guess}? "
            f"(commands: {', '.join(COMMANDS)}; `kvbudget models` lists the models)"
        )
    return None


def _unknown_name(exc: KeyError) -> str | None:
    """The message for an UnknownPresetError / UnknownGpuError (they carry suggestions)."""
    from kvbudget.models import UnknownGpuError, UnknownPresetError

    if not isinstance(exc, (UnknownPresetError, UnknownGpuError)):
        return None
    what = "model or draft preset" if isinstance(exc, UnknownPresetError) else "GPU"
    hint = (
        f"; did you mean {', '.join(repr(x) for x in exc.suggestions)}?" if exc.suggestions else ""
    )
    return f"unknown {what} {exc.name!r}{hint} (`kvbudget models` lists them all)"


def _run(argv: list[str]) -> int:
    typo = _unknown_command(argv)
    if typo is not None:
        return _fail(typo, 2)
    parser = build_parser()
    args_list = normalize_argv(argv, value_options(parser))
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse: --help/--version (0)
        return int(exc.code) if isinstance(exc.code, int) else 2
    except ArgumentsError as exc:
        name = exc.command or (args_list[0] if args_list[0] in COMMANDS else "")
        where = f"{name}: " if name else ""
        # "argument --x: ..." says what is wrong; the rest (unknown or missing flags) gets a hint
        more = f"{PROG} {name} --help" if name else f"{PROG} --help"
        hint = "" if str(exc).startswith("argument ") else f" (`{more}` lists the options)"
        return _fail(f"{where}{exc}{hint}", 2)
    command: str = args.command
    module = importlib.import_module(f"kvbudget.cli.{command}")
    run: Callable[[argparse.Namespace], int] = module.run
    try:
        status = run(args)
        sys.stdout.flush()  # a full disk or a closed pipe shows here, not at exit
        return status
    except UsageError as exc:
        return _fail(f"{command}: {exc}", 2)
    except KeyError as exc:
        message = _unknown_name(exc)
        if message is None:
            raise
        return _fail(message, 2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Every error ends as one ``kvbudget: error: ...`` line on stderr (exit 2 for
    usage errors, else 1); ``KVBUDGET_DEBUG=1`` prints the traceback first.
    """
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except KVBudgetError as exc:
        kind = getattr(exc, "vllm_error_type", None)
        if not str(exc) and kind:  # vLLM's bare assertion (e.g. MambaSpec's page check): name it
            return _fail(f"{type(exc).__name__}: vLLM 0.33.0 fails to start with a bare {kind} (no message)", 1)
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except MissingDependency as exc:
        return _fail(str(exc), 1)
    except OutputError as exc:
        return _fail(str(exc), 1)
    except OSError as exc:
        if exc.filename is None and exc.errno in _WRITE_ERRNOS:
            _quiet_stdout()
            reason = "broken pipe" if exc.errno == errno.EPIPE else exc.strerror
            return _fail(f"cannot write the output: {reason}", 1)
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except _EXPECTED as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except SystemExit:
        raise
    except BaseException as exc:  # a bug (or a core panic): say so, and how to see it
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (a bug: rerun with KVBUDGET_DEBUG=1 "
            "for the traceback and report it)",
            1,
        )
