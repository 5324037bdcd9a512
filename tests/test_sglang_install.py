"""``kvbudget.integrations.sglang.install``: SGLang's factory, patched, gives SGLang's numbers.

The sandbox (:mod:`sglang_oracle`) executes SGLang 0.5.23's ``pool_configurator.py``
from the RECORD-checked wheel. Each case builds SGLang's ``KVCacheConfigurator``
stand-in and runtime context once, then runs it through SGLang's own
``create_memory_pool_configurator`` and through the factory :func:`install` puts
in its place (which reads the same objects back into a kvbudget scenario):
every ``MemoryPoolConfig`` field and the error kind must agree (``fit="sglang"``),
and with ``fit="exact"`` the pools are the exact plan's, which fit the budget.
"""

from __future__ import annotations

import dataclasses
import os
import random
import types
from typing import Any

import kvbudget
import parity_cases as P
import pytest
import sglang_oracle
from kvbudget.integrations.sglang import Runtime, install

CASES = int(os.environ.get("KVBUDGET_INSTALL_CASES", "2000"))


def _installed(oracle: sglang_oracle.Oracle, fit: str) -> sglang_oracle.Oracle:
    sb = oracle.sandbox
    pc = types.SimpleNamespace(
        create_memory_pool_configurator=sb.create_memory_pool_configurator,
        MemoryPoolConfig=sb.pool_configurator_ns["MemoryPoolConfig"],
    )
    m = sb.modules
    runtime = Runtime(m["sglang.srt.runtime_context"], m["sglang.srt.environ"], m["sglang.srt.arg_groups.overrides"])
    uninstall = install(fit, pool_configurator=pc, runtime=runtime)  # type: ignore[arg-type]
    patched = pc.create_memory_pool_configurator
    assert patched is not sb.create_memory_pool_configurator
    uninstall()
    assert pc.create_memory_pool_configurator is sb.create_memory_pool_configurator
    return sglang_oracle.Oracle(dataclasses.replace(sb, create_memory_pool_configurator=patched), oracle.root)


@pytest.fixture(scope="module")
def oracles() -> tuple[sglang_oracle.Oracle, sglang_oracle.Oracle]:
    sglang = sglang_oracle.load()
    return sglang, _installed(sglang, "sglang")


def _case(seed: int) -> tuple[dict[str, Any], str, int, dict[str, Any]] | None:
    """``(oracle case, entry point, amount, kvbudget case)`` of seed ``seed``."""
    r = random.Random(seed)
    case = P.random_case(r)
    c = P.oracle_case(case)
    if c is None:
        return None
    entry = r.choice(("bytes", "tokens"))
    return c, entry, P.amount(r, entry), case


def test_installed_factory_gives_sglangs_numbers(oracles: tuple[sglang_oracle.Oracle, ...]) -> None:
    sglang, ours = oracles
    compared, mismatches = 0, []
    for seed in range(CASES):
        case = _case(seed)
        if case is None:
            continue
        c, entry, amount, _ = case
        a = sglang.run(c, entry=entry, amount=amount)
        b = ours.run(c, entry=entry, amount=amount)
        kind = (a.error[0] if a.error else None, b.error[0] if b.error else None)
        if a.config != b.config or kind[0] != kind[1]:
            mismatches.append(f"seed {seed} {entry}: SGLang {a.config} {a.error} vs installed {b.config} {b.error}")
        compared += 1
    assert compared >= 1000
    assert not mismatches, f"{len(mismatches)} of {compared}:\n" + "\n".join(mismatches[:10])


def test_exact_fit_returns_the_exact_plans_pools(oracles: tuple[sglang_oracle.Oracle, ...]) -> None:
    sglang, _ = oracles
    exact = _installed(sglang, "exact")
    checked = 0
    for seed in range(300):
        case = _case(seed)
        if case is None or case[1] != "bytes":
            continue
        c, _, amount, original = case
        got = exact.run(c, entry="bytes", amount=amount)
        if got.config is None:
            continue
        sc = P.scenario_of(original)
        plan = kvbudget.create_pool_configurator(sc.model, sc.serving, sc.spec).plan(amount, fit="exact")
        assert got.config["max_total_num_tokens"] == plan.config.max_total_num_tokens
        assert plan.total_bytes <= amount
        checked += 1
    assert checked >= 50


def test_install_refuses_an_unknown_fit() -> None:
    with pytest.raises(kvbudget.InvalidConfigError, match="fit='best'"):
        install("best", pool_configurator=types.SimpleNamespace(), runtime=object())  # type: ignore[arg-type]


def test_the_module_does_not_import_sglang() -> None:
    import subprocess
    import sys

    code = "import sys, kvbudget.integrations.sglang; print(any(m.startswith(('sglang', 'torch')) for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
