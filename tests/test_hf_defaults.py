"""``data/hf_defaults.json`` is what ``tools/gen_hf_defaults.py`` derives from the pinned classes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "gen_hf_defaults.py"


def test_committed_defaults_are_current() -> None:
    spec = importlib.util.spec_from_file_location("kvbudget_tools_gen_hf_defaults", TOOL)
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    assert tool.OUT.read_text() == tool.render(tool.generate()), "run tools/gen_hf_defaults.py"
