"""Importing kvbudget is cheap: no torch, numpy, rich or matplotlib (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize("heavy", ["torch", "numpy", "rich", "matplotlib"])
def test_import_kvbudget_does_not_import_heavy_modules(heavy: str) -> None:
    mods = _modules_after("import kvbudget")
    assert heavy not in mods


def test_planning_does_not_import_torch() -> None:
    code = (
        "import kvbudget as k\n"
        "m = k.ModelGeometry([1], [0], 8, 64, sliding_window_size=127)\n"
        "c = k.create_pool_configurator(m, k.ServingConfig(page_size=64))\n"
        "c.plan(1 << 30)\n"
    )
    assert "torch" not in _modules_after(code)


def test_allocate_is_lazy_attribute() -> None:
    import kvbudget

    assert "allocate" in kvbudget.__all__
    with pytest.raises(AttributeError):
        kvbudget.no_such_name  # noqa: B018
