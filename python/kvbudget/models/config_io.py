"""Reading a config file with bounds: at most :data:`MAX_CONFIG_BYTES` + 1 bytes
(``/dev/zero`` stops there), opened without blocking (a FIFO without a writer
reads as empty), never a directory. :func:`kvbudget.models.hf.load_hf_config`
and the command line read configs through it."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Final

__all__ = ["MAX_CONFIG_BYTES", "read_bounded"]

#: The largest config.json read (real ones are a few KiB).
MAX_CONFIG_BYTES: Final = 16 << 20


def read_bounded(path: Path) -> bytes:
    """At most MAX_CONFIG_BYTES + 1 bytes of the file (a FIFO without a writer reads as empty)."""
    from kvbudget.models.hf import ConfigError

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
