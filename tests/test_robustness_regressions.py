"""INV-8 regressions over the Python API: gaps the fuzzing found, now fixed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import kvbudget
from kvbudget import (
    InvalidConfigError,
    ModelGeometry,
    PoolPlan,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
)

from robustness_guard import UNSET, guarded


# ---------------------------------------------------------------------------
# Regressions: gaps the fuzzing found, now fixed


def _json_with(value: Any, **changes: Any) -> str:
    d = json.loads(value.to_json())
    d.get("shape", d).update(changes)  # a ModelGeometry's dims are in its "shape"
    return json.dumps(d)


def test_from_json_validates_speculative_config() -> None:
    bad = _json_with(SpeculativeConfig("eagle", 2), banded_draft_layers=5)
    try:
        spec = SpeculativeConfig._from_json(bad)
    except InvalidConfigError:
        return
    cfg = create_pool_configurator(ModelGeometry([0, 1, 2, 3], [], 8, 128), ServingConfig(), spec)
    guarded(cfg.plan, 1 << 30)
    pytest.fail(f"accepted {spec!r}, draft_terms={cfg.draft_terms}")


def test_from_json_validates_model_geometry() -> None:
    bad = _json_with(ModelGeometry([], [0, 1], 8, 128), swa_head_dim=0, swa_v_head_dim=0)
    try:
        model = ModelGeometry._from_json(bad)
    except InvalidConfigError:
        return
    cfg = create_pool_configurator(model, ServingConfig())
    guarded(cfg.calculate_pool_sizes, 1 << 30)
    pytest.fail(f"accepted {model!r}")


def test_plan_from_json_rejects_wrapping_shapes() -> None:
    cfg = create_pool_configurator(ModelGeometry([0], [], 1, 1), ServingConfig())
    d = json.loads(cfg.plan(1 << 20).to_json())
    tensors = d["pools"][0]["tensors"]
    tensors[0]["shape"], tensors[0]["nbytes"] = [2**63, 2**63, 4], 0
    end = 0
    for t in tensors:
        t["offset"] = (end + 255) // 256 * 256
        end = t["offset"] + t["nbytes"]
    d["pools"][0]["nbytes"] = d["total_bytes"] = end
    with pytest.raises(InvalidConfigError):
        PoolPlan.from_json(json.dumps(d))


_ABORT_SCRIPT = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    import kvbudget as kb
    try:
        kb.SpeculativeConfig("eagle", 2**32 - 1)
    except kb.InvalidConfigError:
        print("rejected")
    cfg = kb.create_pool_configurator(kb.ModelGeometry([0, 1, 2, 3], [], 8, 128), kb.ServingConfig(),
                                      kb.SpeculativeConfig("eagle", 2**20))
    try:
        plan = cfg.plan(1 << 55, sys.argv[1])
        print("typed", plan.pool("draft").num_layers)
    except kb.KVBudgetError as e:
        print("typed", e.code)
""")


@pytest.mark.parametrize("fit", ["exact", "sglang"])
def test_plan_with_billions_of_draft_layers_raises(fit: str) -> None:
    """Billions of draft layers are refused up front; the most allowed (2**20) plan in bounded memory."""
    r = subprocess.run([sys.executable, "-c", _ABORT_SCRIPT, fit], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "rejected" in r.stdout and "typed" in r.stdout, r.stderr[-500:]


def test_plan_many_nan_in_optional_column_is_typed() -> None:
    guarded(kvbudget.plan_many, 1 << 30, num_full_layers=4, num_kv_heads=8, head_dim=128, v_head_dim=[math.nan])


def test_plan_many_string_ratio_is_typed() -> None:
    guarded(kvbudget.plan_many, 1 << 30, num_full_layers=4, num_kv_heads=8, head_dim=128,
            swa_full_tokens_ratio=["x"])


@pytest.mark.parametrize("budget", [[1.5e9], [math.nan], np.array([2**64 - 1], dtype=np.uint64)])
def test_calculate_pool_sizes_many_rejects_non_int64_budgets(budget: Any) -> None:
    cfg = create_pool_configurator(ModelGeometry([0, 1], [], 8, 128), ServingConfig())
    with np.errstate(all="ignore"):
        res = guarded(cfg.calculate_pool_sizes_many, budget)
    assert res is UNSET or res.status[0] in (1, 2), res


@pytest.mark.filterwarnings("ignore:Casting complex values")
@pytest.mark.parametrize("column,value", [
    ("v_head_dim", "8"), ("sliding_window_size", b"8"), ("v_head_dim", False), ("eagle_topk", True), ("num_steps", 1j), ("max_running_requests", {"a": 1}),
    ("head_dim", "128"), ("num_kv_heads", 8 + 1j), ("available_bytes", "1073741824"),
])
def test_plan_many_wrong_types_raise_type_error(column: str, value: Any) -> None:
    kw: dict[str, Any] = dict(available_bytes=1 << 30, num_full_layers=4, num_kv_heads=8, head_dim=128)
    kw[column] = value
    budget = kw.pop("available_bytes")
    with pytest.raises((TypeError, InvalidConfigError)):
        kvbudget.plan_many(budget, **kw)
