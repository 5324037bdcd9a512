"""tests/data/golden.json is what tests/data/make_golden.py builds now.

The generator runs every case through SGLang 0.5.23's code (the oracle), so a
golden file edited by hand, or left behind by a change to the cases, the
oracle or kvbudget's input resolution, fails here. Regenerate with
``python tests/data/make_golden.py``.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("kvbudget", reason="the generator resolves its cases with kvbudget's objects")

GENERATOR = Path(__file__).parent / "data" / "make_golden.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_golden", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_generator()


def entries(text: str) -> list[dict[str, Any]]:
    """The cases and exact plans of a golden document."""
    doc: dict[str, list[dict[str, Any]]] = json.loads(text)
    return doc["cases"] + doc["exact_plan"]


def test_golden_json_is_current(generator: ModuleType) -> None:
    want = generator.render(generator.build())
    have = generator.GOLDEN.read_text()
    if have != want:
        current = entries(have)
        stale = [c["name"] for c in entries(want) if c not in current]
        diff = "".join(difflib.unified_diff(have.splitlines(True), want.splitlines(True), n=1))
        pytest.fail(f"golden.json is stale (run python tests/data/make_golden.py); cases {stale}\n{diff[:4000]}")
