"""INV-1 against the released code: kvbudget's SGLang-compatible configurators
give SGLang 0.5.23's own numbers and errors.

SGLang's ``pool_configurator.py`` runs from the verified PyPI wheel
(:mod:`sglang_oracle`); kvbudget runs on the same random scenarios
(:mod:`parity_cases`), through both entry points. Compared, per case and
entry point: the class the factory picks, ``cell_size`` with ``==`` and its
type (int or float), the request cap, every ``MemoryPoolConfig`` field, and
the error kind (SGLang's ``RuntimeError`` "Not enough memory" / "leaves no
room" is ``NotEnoughMemoryError``, its admission-floor ``ValueError`` is
``SWAPoolTooSmallError``, anything else it raises is ``InvalidConfigError``)
and where it is raised (building the configurator, or solving).

``KVBUDGET_PARITY_CASES`` sets the number of cases (20,000 by default, the CI
run's; the long run used 200,000) and ``KVBUDGET_PARITY_SEED`` the first
seed; case ``i`` is ``random.Random(seed + i)``, so a reported mismatch is
reproduced by its seed alone.
"""

from __future__ import annotations

import os
import random
from collections import Counter
import kvbudget
import parity_cases as P
import pytest
import sglang_oracle

CASES = int(os.environ.get("KVBUDGET_PARITY_CASES", "20000"))
SEED = int(os.environ.get("KVBUDGET_PARITY_SEED", "0"))


@pytest.fixture(scope="module")
def oracle() -> sglang_oracle.Oracle:
    return sglang_oracle.load()


def run_case(oracle: sglang_oracle.Oracle, seed: int) -> tuple[list[str], Counter[str]]:
    """Case ``seed`` through both entry points: its mismatches, and what SGLang did."""
    r = random.Random(seed)
    c = P.random_case(r)
    oc = P.oracle_case(c)
    seen: Counter[str] = Counter()
    if oc is None:
        return [f"seed {seed}: kvbudget refuses the model {c}"], seen
    out = []
    for entry in ("bytes", "tokens"):
        amount = P.amount(r, entry)
        o = oracle.run(oc, entry=entry, amount=amount)
        k = P.kvbudget_answer(c, entry, amount)
        seen[f"{o.class_name}/{entry}/{o.error[0] if o.error else 'ok'}"] += 1
        diffs = P.differences(o, k)
        if diffs:
            out.append(f"seed {seed} {entry}={amount}: {'; '.join(diffs)}\n  case {c}")
    return out, seen


def test_version_is_the_oracles(oracle: sglang_oracle.Oracle) -> None:
    assert kvbudget.SGLANG_VERSION == "0.5.23"
    assert oracle.root.name == kvbudget.SGLANG_VERSION


def test_differential_against_sglang(oracle: sglang_oracle.Oracle) -> None:
    mismatches: list[str] = []
    seen: Counter[str] = Counter()
    for i in range(CASES):
        m, s = run_case(oracle, SEED + i)
        mismatches += m
        seen += s
    assert not mismatches, f"{len(mismatches)} of {CASES} cases disagree:\n" + "\n".join(mismatches[:20])
    # The cases reach every configurator, success and each error kind.
    for want in (
        "DefaultPoolConfigurator/bytes/ok",
        "HybridSWAPoolConfigurator/bytes/ok",
        "SWARequestCapPoolConfigurator/bytes/ok",
        "SWARequestCapPoolConfigurator/bytes/not_enough_memory",
        "HybridSWAPoolConfigurator/bytes/swa_too_small",
        "DefaultPoolConfigurator/tokens/not_enough_memory",
    ):
        assert seen[want] > 0, (want, seen)


@pytest.mark.parametrize("feature", sorted(P.FEATURES))
def test_cases_cover(feature: str) -> None:
    """Within the CI run's cases, each listed feature occurs at least 20 times."""
    count = 0
    for i in range(min(CASES, 20000)):
        c = P.random_case(random.Random(SEED + i))
        count += P.has_feature(c, feature)
        if count >= 20:
            return
    pytest.fail(f"{feature}: {count} cases")
