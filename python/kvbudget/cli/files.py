"""Files the command line reads and writes, with bounds.

:func:`read_config` reads a ``config.json`` (``--config``, ``MODEL`` given as
a path, ``--draft KIND:path``) with limits, so that no file makes the command
hang or crash: at most :data:`MAX_CONFIG_BYTES` are read (``/dev/zero`` stops
there), the bytes must be UTF-8, the text must hold at most
:data:`MAX_JSON_CONTAINERS` arrays and objects and :data:`MAX_JSON_VALUES`
values (counted before parsing, which bounds the parser's time and memory),
the JSON must be at most :data:`MAX_JSON_DEPTH` levels deep (checked on the
parsed document with an explicit stack; a document too deep for the parser
itself is refused as well), and integers must fit 64 bits. The dict it
returns goes to :mod:`kvbudget.models.hf`, which reads dicts as they are.

:func:`check_output` checks an output path (``sweep --out``, ``--plot``)
before any work starts; :func:`open_output` opens it without blocking on a
FIFO; :func:`output_error` words a failed write.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Final

from kvbudget.cli.numbers import INT64_MAX, INT64_MIN, shown
from kvbudget.cli.parser import UsageError
from kvbudget.models.config_io import MAX_CONFIG_BYTES, read_bounded

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_JSON_CONTAINERS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_VALUES",
    "OutputError",
    "check_output",
    "config_path",
    "open_output",
    "output_error",
    "read_config",
]

#: The deepest JSON nesting read (real configs nest 2 or 3 levels).
MAX_JSON_DEPTH: Final = 64
#: The most JSON arrays and objects, and values, in a config (real ones have tens and
#: hundreds): counted from the text (``[``/``{`` and ``,``, strings included: an upper
#: bound) before it is parsed, so that 16 MiB of ``[],[],...`` is refused at once.
MAX_JSON_CONTAINERS: Final = 100_000
MAX_JSON_VALUES: Final = 1_000_000


class OutputError(OSError):
    """An output file that cannot be written (exit status 1); the message names it."""


def config_path(name: str | os.PathLike[str]) -> Path:
    """The file a config argument names: the path, or ``config.json`` in that directory."""
    path = Path(name)
    return path / "config.json" if path.is_dir() else path


def read_config(name: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (or the one in a directory) as a dict, with limits.

    Raises:
        UsageError: (exit 2) over :data:`MAX_CONFIG_BYTES`, not UTF-8, too many
            arrays, objects or values, or nested deeper than :data:`MAX_JSON_DEPTH`.
        ConfigError: (exit 1, as :func:`kvbudget.models.hf.load_hf_config`) no such
            file, unreadable, not valid JSON, not a JSON object, or an integer
            beyond 64 bits (the key is named).
    """
    from kvbudget.models.hf import ConfigError

    try:
        path = config_path(name)
    except (OSError, ValueError) as exc:  # e.g. a name too long for a path
        raise ConfigError(f"{shown(str(name))}: cannot read: {exc}") from None
    data = read_bounded(path)
    if len(data) > MAX_CONFIG_BYTES:
        raise UsageError(
            f"config {path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; not a config.json"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"config {path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    containers = text.count("[") + text.count("{")
    if containers > MAX_JSON_CONTAINERS or text.count(",") >= MAX_JSON_VALUES:
        raise UsageError(
            f"config {path}: more than {MAX_JSON_CONTAINERS:,} JSON arrays and objects or "
            f"{MAX_JSON_VALUES:,} values; not a config.json"
        )
    try:
        doc = json.loads(text)
    except RecursionError:
        raise UsageError(
            f"config {path}: JSON nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    except ValueError:  # Python's limit on the digits of an integer (4300)
        raise ConfigError(f"{path}: not valid JSON: a number with thousands of digits") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    _check_tree(doc, path)
    return doc


def _check_tree(doc: dict[str, Any], path: Path) -> None:
    """Depth and integer bounds of a parsed document, walked with an explicit stack."""
    from kvbudget.models.hf import ConfigError

    stack: list[tuple[dict[str, Any] | list[Any], int, str]] = [(doc, 1, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_JSON_DEPTH:
            at = where if len(where) <= 60 else where[:60] + "..."
            raise UsageError(
                f"config {path}: JSON nested deeper than {MAX_JSON_DEPTH} levels (at {at})"
            )
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, _join(where, key)))
            elif isinstance(child, int) and not INT64_MIN <= child <= INT64_MAX:
                name = _join(where, key)
                digits = len(str(abs(child)))
                raise ConfigError(
                    f"{path}: key '{name}' ({digits}-digit integer) is beyond 2**63-1", name
                )


def _join(where: str, key: object) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


# --------------------------------------------------------------------------- outputs


def check_output(path: str | None, flag: str) -> None:
    """Check, before any work, that ``path`` can be written (created, or overwritten).

    Nothing is created. ``None`` and ``-`` (stdout) pass.

    Raises:
        UsageError: the directory is missing or not writable, the path is a
            directory, or an existing file is not writable.
    """
    if path is None or path == "-":
        return
    if not path.strip():
        raise UsageError(f"{flag}: an empty path")
    try:
        _check_writable(Path(path), path, flag)
    except (OSError, ValueError) as exc:  # e.g. a name too long for a path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{flag} {shown(path)}: {reason}") from None


def _check_writable(p: Path, path: str, flag: str) -> None:
    """check_output's checks (may raise OSError on a path the system refuses)."""
    parent = p.parent
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise UsageError(f"{flag} {path}: the directory {str(parent)!r} {what}")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise UsageError(f"{flag} {path}: the file is not writable")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot create files in {str(parent)!r}")


def open_output(path: str, flag: str, *, binary: bool = False) -> IO[Any]:
    """Open ``path`` for writing (created or truncated), as text (UTF-8) or binary.

    The open does not block: a FIFO that no process reads is refused instead of
    waiting for a reader forever.

    Raises:
        OutputError: the file cannot be opened; the message names it.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), 0o666)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OutputError(f"{flag} {path}: a FIFO that no process reads") from None
        raise output_error(flag, path, exc) from None
    try:
        if sys.platform != "win32":
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        if binary:
            return os.fdopen(fd, "wb")
        return os.fdopen(fd, "w", encoding="utf-8", newline="")
    except OSError as exc:
        os.close(fd)
        raise output_error(flag, path, exc) from None


def output_error(flag: str, path: str, exc: OSError) -> OutputError:
    """An :class:`OutputError` for a failed write of ``path`` (given as ``flag``)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"{flag} {path}: cannot write: {reason}")
