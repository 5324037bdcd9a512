"""allocate() on CPU against one raw torch allocation of the same total bytes.

Run with ``pytest benches/bench_alloc.py --benchmark-enable`` (``make bench``).
Both strategies and both raw baselines are measured in one run (these machines
are noisy, so only ratios are reported); the ratios are printed at the end of
the module. Under the default ``--benchmark-disable`` each body runs once, as a
smoke test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from kvbudget import ModelGeometry, ServingConfig, SpeculativeConfig, create_pool_configurator  # noqa: E402
from kvbudget.alloc import allocate  # noqa: E402

BUDGET = 64 << 20  # small enough for CPU zeroing to stay quick


def _plan() -> Any:
    """gpt-oss-120b-like (18 full + 18 SWA, 8 heads, D 64, bf16) + EAGLE3, p 64."""
    model = ModelGeometry(
        full_attention_layer_ids=list(range(1, 36, 2)),
        swa_attention_layer_ids=list(range(0, 36, 2)),
        num_kv_heads=8,
        head_dim=64,
        sliding_window_size=127,
    )
    cfg = create_pool_configurator(
        model,
        ServingConfig(kv_cache_dtype="bf16", page_size=64),
        SpeculativeConfig(algorithm="eagle3", draft_num_layers=1),
    )
    return cfg.plan(BUDGET)


PLAN = _plan()
TOTAL = PLAN.total_bytes
_MEDIANS: dict[str, float] = {}


def _record(name: str, benchmark: Any) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(benchmark, "enabled", True):
        _MEDIANS[name] = float(stats.stats.median)


@pytest.fixture(scope="module", autouse=True)
def _print_ratios(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    pairs = [
        ("slab / empty", "slab_empty", "raw_empty"),
        ("per_layer / empty", "per_layer_empty", "raw_empty"),
        ("slab / zeros", "slab_zeros", "raw_zeros"),
        ("per_layer / zeros", "per_layer_zeros", "raw_zeros"),
    ]
    lines = [
        f"  {label:<18} {_MEDIANS[a] / _MEDIANS[b]:8.2f}x  ({_MEDIANS[a] * 1e6:,.1f} us vs {_MEDIANS[b] * 1e6:,.1f} us)"
        for label, a, b in pairs
        if a in _MEDIANS and b in _MEDIANS and _MEDIANS[b] > 0
    ]
    if lines:
        plugins = request.config.pluginmanager
        reporter = plugins.getplugin("terminalreporter")
        capture = plugins.getplugin("capturemanager")
        header = (
            f"allocate() vs one raw torch allocation of {TOTAL:,} bytes on CPU "
            f"({len(PLAN.tensors)} tensors in {len(PLAN.pools)} pools), median ratios:"
        )
        if reporter is None or capture is None:  # pragma: no cover
            print(header, *lines, sep="\n")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(header)
            for line in lines:
                reporter.write_line(line)


@pytest.mark.benchmark(group="alloc-empty")
def test_raw_empty(benchmark: Any) -> None:
    t = benchmark(lambda: torch.empty(TOTAL, dtype=torch.uint8))
    assert t.numel() == TOTAL
    _record("raw_empty", benchmark)


@pytest.mark.benchmark(group="alloc-zeros")
def test_raw_zeros(benchmark: Any) -> None:
    t = benchmark(lambda: torch.zeros(TOTAL, dtype=torch.uint8))
    assert t.numel() == TOTAL
    _record("raw_zeros", benchmark)


@pytest.mark.parametrize("zero", [False, True], ids=["empty", "zeros"])
@pytest.mark.parametrize("strategy", ["slab", "per_layer"])
def test_allocate(benchmark: Any, strategy: str, zero: bool) -> None:
    benchmark.group = "alloc-zeros" if zero else "alloc-empty"
    pools = benchmark(lambda: allocate(PLAN, device="cpu", strategy=strategy, zero=zero))  # type: ignore[arg-type]
    assert pools.nbytes == TOTAL
    _record(f"{strategy}_{'zeros' if zero else 'empty'}", benchmark)
