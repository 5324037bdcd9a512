"""tests/data/golden.json through the Python API (the Rust core).

The same file is read by the cargo tests (rust/core/tests/golden.rs). Its
expectations are SGLang 0.5.23's (tests/data/make_golden.py runs them through
the oracle; tests/test_golden_current.py checks the file is current). A
case's kwargs are passed to kvbudget's constructors as they are, so a new
field needs no change here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

kvbudget = pytest.importorskip("kvbudget", reason="the kvbudget extension is not built (make develop)")

from kvbudget.fields import FIELDS  # noqa: E402

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden.json").read_text())
#: Every MemoryPoolConfig field, each compared by every successful call.
CONFIG_FIELDS = tuple(f.name for f in FIELDS["MemoryPoolConfig"])
ERROR_CODES = ("invalid_config", "overflow", "not_enough_memory", "swa_pool_too_small")


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
    assert cfg.kind == case["configurator"]
    assert cfg.cell_size == case["cell_size"]
    assert type(cfg.cell_size) is type(case["cell_size"])
    assert getattr(cfg, "swa_cap", None) == case.get("swa_cap")
    for call in case["calls"]:
        fn = cfg.calculate_pool_sizes if call["entry"] == "bytes" else cfg.calculate_pool_sizes_from_max_tokens
        try:
            out = fn(call["value"], call["page_size"])
        except Exception as exc:  # noqa: BLE001
            assert "error" in call, f"{call}: raised {error_code(exc)}"
            assert error_code(exc) == call["error"], call
            continue
        assert "expect" in call, f"{call}: expected error {call.get('error')}, got {out!r}"
        assert {f: getattr(out, f) for f in CONFIG_FIELDS} == call["expect"], call


@pytest.mark.parametrize("case", GOLDEN["exact_plan"], ids=lambda c: c["name"])
def test_golden_exact_plan(case: dict[str, Any]) -> None:
    plan = build(case).plan(case["available_bytes"], fit=case["fit"])
    assert {k: getattr(plan, k) for k in case["expect"]} == case["expect"]


def test_golden_is_well_formed() -> None:
    assert isinstance(GOLDEN["schema"], str)
    names = [c["name"] for c in GOLDEN["cases"] + GOLDEN["exact_plan"]]
    assert len(names) == len(set(names))
    kinds = {c["configurator"] for c in GOLDEN["cases"]}
    assert kinds == {"default", "hybrid_swa", "request_cap", None}
    seen_errors = set()
    for case in GOLDEN["cases"]:
        assert case["calls"] and case["source"]
        assert ("swa_cap" in case) == (case["configurator"] == "request_cap")
        for call in case["calls"]:
            assert call["entry"] in ("bytes", "max_tokens")
            assert ("expect" in call) != ("error" in call)
            if "expect" in call:
                assert tuple(call["expect"]) == CONFIG_FIELDS
            else:
                assert call["error"] in ERROR_CODES
                seen_errors.add(call["error"])
    assert seen_errors == set(ERROR_CODES)
    for plan in GOLDEN["exact_plan"]:
        assert set(plan["expect"]) == {"total_bytes", "over_budget_bytes", "padding_bytes"}
