"""One ``calculate_pool_sizes`` call: kvbudget against SGLang 0.5.23's own code, in one run.

Both sides call ``calculate_pool_sizes(available_bytes, page_size)`` on a configurator built
once, as a server does: kvbudget's is ``create_pool_configurator(...)`` (a
``HybridSWAPoolConfigurator``), SGLang's is built by its own factory from its released
``pool_configurator.py`` (``tests/sglang_oracle``: ``Oracle.configurator``, with the case's
runtime context active while it is timed). The case is REFERENCE example 1 at page size 64:
a Gemma-3-27B-like hybrid (10 full + 52 window-1024 layers) with an EAGLE3 draft, 40 GiB.

Each round times a statement (``timeit``, no lambda around the call, so that both sides pay
the same interpreter cost: one attribute lookup and one call) for kvbudget's configurator,
for the native type it subclasses (``kvbudget._core.PoolConfigurator``, the floor a Python
class can reach), and for SGLang's, interleaved; the report gives the median of the rounds
and the ratio of the medians. Run ``python benches/bench_calculate.py [ROUNDS]``, or
``pytest benches --benchmark-enable`` for pytest-benchmark's table; under plain ``pytest``
the benchmarks run once as smoke tests that both sides agree.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import timeit
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import parity_cases  # noqa: E402
import sglang_oracle  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget import _core  # noqa: E402
from kvbudget.fields import SCENARIO_FIELDS  # noqa: E402

GIB = 1 << 30
# REFERENCE example 1 at p 64: Gemma-3-27B-like hybrid with an EAGLE3 draft (the ratio path).
SCENARIO: dict[str, Any] = {
    **{name: f.default for name, f in SCENARIO_FIELDS.items()},
    **dict(num_full_layers=10, num_swa_layers=52, num_kv_heads=16, head_dim=128, sliding_window_size=1024,
           page_size=64, algorithm="eagle3", draft_num_layers=1),
}
AVAILABLE = 40 * GIB
PAGE = SCENARIO["page_size"]


def ours() -> kvbudget.PoolConfiguratorBase:
    sc = parity_cases.scenario_of(SCENARIO)
    return kvbudget.create_pool_configurator(sc.model, sc.serving, sc.spec)


@contextlib.contextmanager
def theirs() -> Iterator[Any]:
    """SGLang's configurator for the case, built once by its factory (context active)."""
    case = parity_cases.oracle_case(SCENARIO)
    assert case is not None
    with sglang_oracle.load().configurator(case) as cfg:
        yield cfg


def test_bench_rust_calculate_pool_sizes(benchmark: Any) -> None:
    cfg = ours()
    got = benchmark(cfg.calculate_pool_sizes, AVAILABLE, PAGE)
    with theirs() as sg:
        assert got.full_max_total_num_tokens == sg.calculate_pool_sizes(AVAILABLE, PAGE).full_max_total_num_tokens


def test_bench_sglang_calculate_pool_sizes(benchmark: Any) -> None:
    with theirs() as sg:
        got = benchmark(sg.calculate_pool_sizes, AVAILABLE, PAGE)
    assert got.full_max_total_num_tokens == ours().calculate_pool_sizes(AVAILABLE, PAGE).full_max_total_num_tokens


def ratio(rounds: int = 15, number: int = 100_000) -> dict[str, float]:
    """Median seconds per call of each side over ``rounds`` interleaved rounds (SGLang's
    rounds run ``number // 10`` calls: it is slower)."""
    cfg = ours()
    sc = parity_cases.scenario_of(SCENARIO)
    native = _core.PoolConfigurator(sc.model, sc.serving, sc.spec, None)
    times: dict[str, list[float]] = {"kvbudget": [], "native": [], "sglang": []}
    stmt = "c.calculate_pool_sizes(a, p)"
    with theirs() as sg:
        want = sg.calculate_pool_sizes(AVAILABLE, PAGE)
        for c in (cfg, native):
            got = c.calculate_pool_sizes(AVAILABLE, PAGE)
            assert (got.full_max_total_num_tokens, got.swa_max_total_num_tokens) == (
                want.full_max_total_num_tokens, want.swa_max_total_num_tokens)  # fmt: skip
        for _ in range(rounds):
            for name, c, n in (("kvbudget", cfg, number), ("native", native, number), ("sglang", sg, number // 10)):
                t = timeit.timeit(stmt, globals={"c": c, "a": AVAILABLE, "p": PAGE}, number=n)
                times[name].append(t / n)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(rounds: int) -> None:
    m = ratio(rounds)
    print(f"calculate_pool_sizes, Gemma-3-27B-like hybrid + EAGLE3, 40 GiB: median of {rounds} interleaved rounds")
    print(f"  SGLang 0.5.23's own code (its factory's configurator): {m['sglang'] * 1e9:8.0f} ns/call")
    print(f"  kvbudget HybridSWAPoolConfigurator:                     {m['kvbudget'] * 1e9:8.0f} ns/call"
          f"  ({m['sglang'] / m['kvbudget']:.1f}x)")
    print(f"  kvbudget._core.PoolConfigurator (the native type):      {m['native'] * 1e9:8.0f} ns/call"
          f"  ({m['sglang'] / m['native']:.1f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
