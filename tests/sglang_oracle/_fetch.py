"""Access to ``tools/fetch_sglang.py`` (a script, not a package) from the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[2] / "tools" / "fetch_sglang.py"


def fetch_tool() -> ModuleType:
    """The ``tools/fetch_sglang.py`` module (imported once)."""
    name = "kvbudget_tools_fetch_sglang"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, TOOL)
        assert spec is not None and spec.loader is not None, TOOL
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def sglang_root(cache: Path | str | None = None) -> Path:
    """The verified extraction root (downloads the wheel when it is not cached)."""
    root = fetch_tool().ensure_sglang(cache)
    assert isinstance(root, Path)
    return root
