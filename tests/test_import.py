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


# Everything but allocation plans without torch: each of these, run in a fresh
# interpreter, must leave torch unimported.
TORCH_FREE = {
    "import kvbudget": "import kvbudget",
    "planning": (
        "import kvbudget as k\n"
        "m = k.ModelGeometry([1], [0], 8, 64, sliding_window_size=127)\n"
        "c = k.create_pool_configurator(m, k.ServingConfig(page_size=64))\n"
        "c.plan(1 << 30)\n"
        "k.Scenario(m).replace(page_size=16).configurator().calculate_pool_sizes(1 << 30)\n"
    ),
    "budget": "import kvbudget.budget",
    "batch": "import kvbudget; kvbudget.plan_many(1 << 30, num_full_layers=4, num_kv_heads=8, head_dim=128)",
    "ranks": "import kvbudget.ranks",
    "distributed": "import kvbudget.distributed",
    "workload": "import kvbudget.workload",
    "cli": (
        "import contextlib, io\n"
        "from kvbudget.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main([]) == 0\n"
    ),
    "models": "import kvbudget.models; kvbudget.models.get_preset('gemma-3-27b').model_geometry()",
    "vllm": (
        "from kvbudget import vllm\n"
        "from kvbudget.models import get_preset\n"
        "from kvbudget.vllm.models import layers_from_hf_config\n"
        "vllm.plan(layers_from_hf_config(get_preset('gemma-3-27b').hf_config()), 40 << 30)\n"
    ),
    "cli --engine vllm": (
        "import contextlib, io\n"
        "from kvbudget.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert main(['compare', '--engines', 'sglang', 'vllm']) == 0\n"
    ),
}


@pytest.mark.parametrize("what", sorted(TORCH_FREE))
def test_torch_is_not_imported(what: str) -> None:
    assert "torch" not in _modules_after(TORCH_FREE[what])


def test_allocate_is_lazy_attribute() -> None:
    import kvbudget

    assert "allocate" in kvbudget.__all__
    with pytest.raises(AttributeError):
        kvbudget.no_such_name  # noqa: B018
