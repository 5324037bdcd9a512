"""One ``calculate_pool_sizes`` call: kvbudget's Rust path vs the pure-Python oracle.

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

import reference  # noqa: E402

import kvbudget  # noqa: E402

GIB = 1 << 30
# REFERENCE example 1: Gemma-3-27B-like hybrid with an EAGLE3 draft (the ratio path).
FULL = [i for i in range(62) if i % 6 == 5]
SWA = [i for i in range(62) if i % 6 != 5]
MODEL = dict(full_attention_layer_ids=FULL, swa_attention_layer_ids=SWA, num_kv_heads=16, head_dim=128,
             sliding_window_size=1024)
SERVING: dict[str, Any] = dict(page_size=64)
SPEC = dict(algorithm="eagle3", draft_num_layers=1)
AVAILABLE = 40 * GIB


def rust_call() -> Callable[[], Any]:
    cfg = kvbudget.create_pool_configurator(
        kvbudget.ModelGeometry(**MODEL), kvbudget.ServingConfig(**SERVING), kvbudget.SpeculativeConfig(**SPEC)
    )
    return lambda: cfg.calculate_pool_sizes(AVAILABLE)


def python_call() -> Callable[[], Any]:
    cfg = reference.create_pool_configurator(MODEL, SERVING, SPEC)
    return lambda: cfg.calculate_pool_sizes(AVAILABLE)


def test_bench_rust_calculate_pool_sizes(benchmark: Any) -> None:
    got = benchmark(rust_call())
    assert got.full_max_total_num_tokens == 99_648


def test_bench_reference_calculate_pool_sizes(benchmark: Any) -> None:
    got = benchmark(python_call())
    assert got["full_max_total_num_tokens"] == 99_648


def ratio(rounds: int = 7, number: int = 20_000) -> tuple[float, float]:
    """Best-of-``rounds`` seconds per call for (rust, python), interleaved in one run."""
    r, p = rust_call(), python_call()
    best_r = best_p = float("inf")
    for _ in range(rounds):
        best_r = min(best_r, timeit.timeit(r, number=number) / number)
        best_p = min(best_p, timeit.timeit(p, number=number) / number)
    return best_r, best_p


if __name__ == "__main__":
    r, p = ratio()
    print(f"kvbudget (Rust via PyO3): {r * 1e9:8.0f} ns/call")
    print(f"tests/reference.py     : {p * 1e9:8.0f} ns/call")
    print(f"ratio (reference / kvbudget): {p / r:.2f}x")
