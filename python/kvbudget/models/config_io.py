"""Config files: reading one with bounds (at most :data:`MAX_CONFIG_BYTES` + 1
bytes, ``/dev/zero`` stops there; opened without blocking, so a FIFO without a
writer reads as empty; never a directory), :func:`load_hf_config`, the error
every config reader raises (:class:`ConfigError`), and the parts of a config
that every reader takes (:func:`text_part`, :func:`config_dtype`).
:mod:`kvbudget.models.hf` re-exports the public names; the command line reads
config files through :func:`read_bounded` too."""

from __future__ import annotations

import importlib
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

__all__ = [
    "MAX_CONFIG_BYTES",
    "ConfigError",
    "PathOrDict",
    "config_dtype",
    "load_hf_config",
    "read_bounded",
    "text_part",
]

#: The largest config.json read (real ones are a few KiB).
MAX_CONFIG_BYTES: Final = 16 << 20


def _find_error_base() -> type[ValueError]:
    """Return ``kvbudget.InvalidConfigError`` if it can be found, else ``ValueError``.

    Looked up without importing ``kvbudget`` anew, so that this module can be
    imported while ``kvbudget/__init__.py`` is still running.
    """
    for mod_name in ("kvbudget._core", "kvbudget"):
        mod = sys.modules.get(mod_name)
        if mod is None and mod_name == "kvbudget._core":
            try:
                mod = importlib.import_module(mod_name)
            except ImportError:
                mod = None
        cls = getattr(mod, "InvalidConfigError", None) if mod is not None else None
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                # Check that the class can be subclassed before using it.
                type("_Probe", (cls,), {})
            except TypeError:
                continue
            return cls  # type: ignore[return-value]
    return ValueError


if TYPE_CHECKING:
    _ErrorBase = ValueError
else:
    _ErrorBase = _find_error_base()


class ConfigError(_ErrorBase):
    """A config.json that kvbudget cannot turn into a geometry.

    ``key`` names the offending key (dotted for nested keys such as
    ``text_config.num_attention_heads``) when one is to blame; ``code`` is
    ``"invalid_config"``, the code of ``kvbudget.InvalidConfigError``.
    """

    code: str = "invalid_config"
    # Shown and pickled under its public home (``kvbudget.models.hf`` re-exports it).
    __module__ = "kvbudget.models.hf"

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.code = "invalid_config"


PathOrDict = Mapping[str, Any] | str | os.PathLike[str]


def text_part(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A config's ``text_config`` when it has one (a multimodal model), else the config."""
    text = cfg.get("text_config")
    return text if isinstance(text, Mapping) else cfg


def config_dtype(cfg: Mapping[str, Any]) -> Any:
    """The checkpoint's dtype as the config names it (``torch_dtype``, then ``dtype``; the
    config's own, then its text config's), or None."""
    t = text_part(cfg)
    return cfg.get("torch_dtype") or cfg.get("dtype") or t.get("torch_dtype") or t.get("dtype")


def load_hf_config(path_or_dict: PathOrDict) -> dict[str, Any]:
    """Return a config as a dict.

    ``path_or_dict`` is a mapping (returned as a shallow copy), a path to a
    ``config.json`` file, or a directory that contains ``config.json``.

    Raises:
        ConfigError: the file is missing, unreadable, over 16 MiB, not UTF-8, not
            JSON (or nested too deep), or not a JSON object.
    """
    if isinstance(path_or_dict, Mapping):
        return dict(path_or_dict)
    if not isinstance(path_or_dict, (str, os.PathLike)):
        raise ConfigError(
            "expected a dict, a path to config.json or a directory holding it, "
            f"got {type(path_or_dict).__name__}"
        )
    path = Path(path_or_dict)
    if path.is_dir():
        path = path / "config.json"
    raw = read_bounded(path)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES >> 20} MiB; not a config.json")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (offset {exc.start})") from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deep") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from exc
    except ValueError:  # Python's limit on the digits of an integer
        raise ConfigError(f"{path}: not valid JSON: a number with thousands of digits") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_bounded(path: Path) -> bytes:
    """At most MAX_CONFIG_BYTES + 1 bytes of the file (a FIFO without a writer reads as empty)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)  # non-blocking: opening a FIFO must not wait for a writer
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{path}: is a directory")
        if sys.platform != "win32":
            import fcntl

            # Reads block again (a pipe's data may come later); only the open was non-blocking.
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        chunks: list[bytes] = []
        left = MAX_CONFIG_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
