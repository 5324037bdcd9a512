"""Access to ``tools/fetch_vllm.py`` (a script, not a package) from the tests."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from oracle_kit.tools import load_tool


def fetch_tool() -> ModuleType:
    """The ``tools/fetch_vllm.py`` module (imported once)."""
    return load_tool("fetch_vllm")


def vllm_root(cache: Path | str | None = None) -> Path:
    """The verified extraction root (downloads the wheel when it is not cached;
    raises ``VllmFetchError`` when it can be neither found nor downloaded)."""
    root = fetch_tool().ensure_vllm(cache)
    assert isinstance(root, Path)
    return root
