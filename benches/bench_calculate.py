"""One ``calculate_pool_sizes`` call: kvbudget's Rust path vs SGLang 0.5.23's own code.

SGLang's side is its released ``pool_configurator.py`` run by the test oracle
(``tests/sglang_oracle``). SGLang has no configurator object that outlives a
call here: each ``oracle.run`` builds the mock inputs, runs SGLang's factory
and constructor, then ``calculate_pool_sizes``, so its time covers all of
that (kvbudget's side reuses one configurator).

Run ``python benches/bench_calculate.py`` for the ratio (both measured in the
same process, interleaved), or ``pytest benches --benchmark-enable`` for
pytest-benchmark's table. Under plain ``pytest`` (``--benchmark-disable``) the
benchmarks run once as smoke tests that both paths agree.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import parity_cases  # noqa: E402
import sglang_oracle  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget.fields import SCENARIO_FIELDS  # noqa: E402

GIB = 1 << 30
# REFERENCE example 1 at p 64: Gemma-3-27B-like hybrid with an EAGLE3 draft (the ratio path).
SCENARIO: dict[str, Any] = {
    **{name: f.default for name, f in SCENARIO_FIELDS.items()},
    **dict(num_full_layers=10, num_swa_layers=52, num_kv_heads=16, head_dim=128, sliding_window_size=1024,
           page_size=64, algorithm="eagle3", draft_num_layers=1),
}
AVAILABLE = 40 * GIB


def rust_call() -> Callable[[], Any]:
    sc = parity_cases.scenario_of(SCENARIO)
    cfg = kvbudget.create_pool_configurator(sc.model, sc.serving, sc.spec)
    return lambda: cfg.calculate_pool_sizes(AVAILABLE)


def sglang_call() -> Callable[[], sglang_oracle.Outcome]:
    oracle, case = sglang_oracle.load(), parity_cases.oracle_case(SCENARIO)
    assert case is not None
    return lambda: oracle.run(case, entry="bytes", amount=AVAILABLE)


def test_bench_rust_calculate_pool_sizes(benchmark: Any) -> None:
    got = benchmark(rust_call())
    want = sglang_call()().config
    assert want is not None and got.full_max_total_num_tokens == want["full_max_total_num_tokens"]


def test_bench_sglang_calculate_pool_sizes(benchmark: Any) -> None:
    got = benchmark(sglang_call()).config
    assert got is not None and got["full_max_total_num_tokens"] == rust_call()().full_max_total_num_tokens


def ratio(rounds: int = 7, number: int = 2_000) -> tuple[float, float]:
    """Best-of-``rounds`` seconds per call for (rust, sglang), interleaved in one run."""
    r, s = rust_call(), sglang_call()
    best_r = best_s = float("inf")
    for _ in range(rounds):
        best_r = min(best_r, timeit.timeit(r, number=number) / number)
        best_s = min(best_s, timeit.timeit(s, number=number) / number)
    return best_r, best_s


if __name__ == "__main__":
    r, s = ratio()
    print(f"kvbudget (Rust via PyO3)           : {r * 1e9:10.0f} ns/call")
    print(f"SGLang 0.5.23 (tests/sglang_oracle): {s * 1e9:10.0f} ns/call"
          " (mock inputs + factory + constructor + calculate_pool_sizes)")
    print(f"ratio (SGLang / kvbudget): {s / r:.0f}x")
