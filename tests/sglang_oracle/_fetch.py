"""Access to ``tools/fetch_sglang.py`` (a script, not a package) from the tests."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from oracle_kit.tools import load_tool


def fetch_tool() -> ModuleType:
    """The ``tools/fetch_sglang.py`` module (imported once)."""
    return load_tool("fetch_sglang")


def sglang_root(cache: Path | str | None = None) -> Path:
    """The verified extraction root (downloads the wheel when it is not cached)."""
    root = fetch_tool().ensure_sglang(cache)
    assert isinstance(root, Path)
    return root
