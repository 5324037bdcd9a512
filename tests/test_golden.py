"""tests/data/golden.json through the Python API (the Rust core).

The same file is read by the cargo tests; tests/test_reference_oracle.py checks
that every expectation in it is the oracle's and that it carries the numbers
printed in REFERENCE.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

kvbudget = pytest.importorskip("kvbudget", reason="the kvbudget extension is not built (make develop)")

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden.json").read_text())

KIND_OF_CLASS = {
    "DefaultPoolConfigurator": "default",
    "HybridSWAPoolConfigurator": "hybrid_swa",
    "SWAChunkCapPoolConfigurator": "chunk_cap",
}
FIELDS = ("max_total_num_tokens", "full_max_total_num_tokens", "swa_max_total_num_tokens")


def build(case: dict[str, Any]) -> Any:
    model = kvbudget.ModelGeometry(**case["model"])
    serving = kvbudget.ServingConfig(**case["serving"])
    spec = kvbudget.SpeculativeConfig(**case["spec"]) if case["spec"] is not None else None
    return kvbudget.create_pool_configurator(model, serving, spec)


def error_code(exc: BaseException) -> str:
    if isinstance(exc, kvbudget.KVBudgetError):
        return str(exc.code)
    return f"{type(exc).__module__}.{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: c["name"])
def test_golden_case(case: dict[str, Any]) -> None:
    try:
        cfg = build(case)
    except Exception as exc:  # noqa: BLE001 - any failure is compared by code
        assert case["configurator"] is None, f"building failed: {error_code(exc)}"
        for call in case["calls"]:
            assert error_code(exc) == call["error"]
        return
    assert case["configurator"] is not None, "the configurator was built but golden expects an error"
    assert KIND_OF_CLASS.get(type(cfg).__name__) == case["configurator"]
    if "cell_size" in case:
        assert cfg.cell_size == case["cell_size"]
    if "swa_cap" in case:
        assert cfg.swa_cap == case["swa_cap"]
    for call in case["calls"]:
        fn = cfg.calculate_pool_sizes if call["entry"] == "bytes" else cfg.calculate_pool_sizes_from_max_tokens
        try:
            out = fn(call["value"], call["page_size"])
        except Exception as exc:  # noqa: BLE001
            assert "error" in call, f"{call}: raised {error_code(exc)}"
            assert error_code(exc) == call["error"], call
            continue
        assert "expect" in call, f"{call}: expected error {call.get('error')}, got {out!r}"
        got = {f: getattr(out, f) for f in FIELDS}
        assert got == call["expect"], call


@pytest.mark.parametrize("case", GOLDEN["exact_plan"], ids=lambda c: c["name"])
def test_golden_exact_plan(case: dict[str, Any]) -> None:
    cfg = build(case)
    if not hasattr(cfg, "plan"):
        pytest.skip("the configurator has no plan() method yet (the lead is adding it)")
    plan = cfg.plan(case["available_bytes"], fit=case["fit"])
    got = {k: getattr(plan, k) for k in case["expect"]}
    assert got == case["expect"]


def test_golden_is_well_formed() -> None:
    assert isinstance(GOLDEN["schema"], str)
    names = [c["name"] for c in GOLDEN["cases"]]
    assert len(names) == len(set(names))
    for case in GOLDEN["cases"]:
        assert case["calls"]
        for call in case["calls"]:
            assert call["entry"] in ("bytes", "max_tokens")
            assert ("expect" in call) != ("error" in call)
