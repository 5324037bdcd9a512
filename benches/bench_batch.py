"""The batch API against per-row loops: ``plan_many`` vs the scalar API vs the oracle.

Run ``python benches/bench_batch.py`` for the numbers (one run, one process):

* varied columns (18 columns besides the budget: ratios, TP, page sizes, layer
  counts, dims, dtype, window, request-cap inputs, speculative algorithm and
  draft layers, all arrays), 1,000,000 rows: ``kvbudget.plan_many`` in ns/row
  with fresh outputs and with reused ones (``out=``), on one thread and on
  every core; against a Python loop over the pure-Python reference
  (``tests/reference.py``) and a Python loop over the scalar API
  (``ModelGeometry`` + ``ServingConfig`` + ``SpeculativeConfig`` +
  ``create_pool_configurator`` + ``calculate_pool_sizes`` per row). The loops
  run on the first 20,000 rows only and are scaled per row (the printout says
  so);
* one setup (only the budget varies), 1,000,000 budgets, under the same
  conditions as the varied rows (fresh and reused outputs, one thread and
  every core): ``plan_many`` with scalar config columns and
  ``calculate_pool_sizes_many``, and the ratio varied / budget-only measured
  in this run; against loops of ``calculate_pool_sizes`` on one configurator.

Each timing is the best of a few repeats. ``pytest benches --benchmark-enable``
gives pytest-benchmark's table on smaller batches; under plain ``pytest``
(``--benchmark-disable``) every benchmark runs once as a smoke test that the
batch rows equal the loops' rows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import reference  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget.batch import BATCH_FIELDS, STATUS_CODES  # noqa: E402

GIB = 1 << 30
DTYPES = BATCH_FIELDS["kv_cache_dtype"].choices  # batch code order
ALGORITHMS = BATCH_FIELDS["algorithm"].choices
ORACLE_STATUS = {"invalid_config": 1, "overflow": 2, "not_enough_memory": 3, "swa_pool_too_small": 4}
STATUS_OF_CODE = {code: status for status, code in STATUS_CODES.items()}

Row = tuple[int, int, int, int]


def varied_columns(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` rows, every listed column an array; mostly valid, mixed configurator kinds."""
    rng = np.random.default_rng(seed)
    n_f = rng.integers(1, 64, n)
    n_s = np.where(rng.random(n) < 0.5, 0, rng.integers(1, 48, n))
    return dict(
        available_bytes=rng.integers(1 * GIB, 80 * GIB, n),
        num_full_layers=n_f,
        num_swa_layers=n_s,
        num_kv_heads=rng.choice([1, 2, 4, 8, 16, 32], n),
        head_dim=rng.choice([64, 128, 256], n),
        sliding_window_size=rng.choice([-1, 128, 1024, 4096], n),
        kv_cache_dtype=rng.integers(0, 6, n).astype(np.uint8),  # no fp4: Default-only, would fail hybrid rows
        page_size=rng.choice([1, 16, 32, 64], n),
        tp_size=rng.choice([1, 2, 4, 8], n),
        swa_full_tokens_ratio=rng.uniform(0.05, 1.0, n),
        max_running_requests=rng.choice([-1, 64, 256], n),
        chunked_prefill_size=rng.choice([-1, 8192], n),
        disable_radix_cache=rng.random(n) < 0.25,
        algorithm=rng.choice([0, 1, 2, 3, 6], n).astype(np.uint8),
        draft_num_layers=rng.integers(0, 3, n),
        num_steps=rng.choice([-1, 3], n),
        eagle_topk=rng.choice([-1, 1, 4], n),
        num_draft_tokens=rng.choice([-1, 4, 8], n),
        dflash_draft_cell_size_per_token=rng.choice([-1, 4096], n),
    )


def _opt(v: int) -> Optional[int]:
    return None if v < 0 else v


def row_dicts(cols: dict[str, np.ndarray], n: int) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]]:
    """The first ``n`` rows as (model, serving, spec, available_bytes) keyword dicts of the scalar API."""
    lists = {k: v[:n].tolist() for k, v in cols.items()}
    out = []
    for i in range(n):
        c = {k: v[i] for k, v in lists.items()}
        nf, ns = c["num_full_layers"], c["num_swa_layers"]
        model = dict(
            full_attention_layer_ids=list(range(nf)), swa_attention_layer_ids=list(range(nf, nf + ns)),
            num_kv_heads=c["num_kv_heads"], head_dim=c["head_dim"],
            sliding_window_size=_opt(c["sliding_window_size"]),
        )
        serving = dict(
            kv_cache_dtype=DTYPES[c["kv_cache_dtype"]], page_size=c["page_size"], tp_size=c["tp_size"],
            swa_full_tokens_ratio=c["swa_full_tokens_ratio"],
            max_running_requests=_opt(c["max_running_requests"]),
            chunked_prefill_size=_opt(c["chunked_prefill_size"]),
            disable_radix_cache=c["disable_radix_cache"],
        )
        spec = dict(
            algorithm=ALGORITHMS[c["algorithm"]], draft_num_layers=c["draft_num_layers"],
            num_steps=_opt(c["num_steps"]), eagle_topk=_opt(c["eagle_topk"]),
            num_draft_tokens=_opt(c["num_draft_tokens"]),
            dflash_draft_cell_size_per_token=_opt(c["dflash_draft_cell_size_per_token"]),
        )
        out.append((model, serving, spec, c["available_bytes"]))
    return out


def _none(x: Optional[int]) -> int:
    return -1 if x is None else x


def reference_loop(rows: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]]) -> list[Row]:
    out: list[Row] = []
    for model, serving, spec, a in rows:
        try:
            r = reference.create_pool_configurator(model, serving, spec).calculate_pool_sizes(a)
            out.append((r["max_total_num_tokens"], _none(r["full_max_total_num_tokens"]),
                        _none(r["swa_max_total_num_tokens"]), 0))
        except reference.OracleError as e:
            out.append((0, 0, 0, ORACLE_STATUS[e.kind]))
    return out


def scalar_api_loop(rows: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]]) -> list[Row]:
    mg, sc, spc, create = (kvbudget.ModelGeometry, kvbudget.ServingConfig, kvbudget.SpeculativeConfig,
                           kvbudget.create_pool_configurator)
    out: list[Row] = []
    for model, serving, spec, a in rows:
        try:
            r = create(mg(**model), sc(**serving), spc(**spec)).calculate_pool_sizes(a)
            out.append((r.max_total_num_tokens, _none(r.full_max_total_num_tokens),
                        _none(r.swa_max_total_num_tokens), 0))
        except kvbudget.KVBudgetError as e:
            out.append((0, 0, 0, STATUS_OF_CODE[e.code]))
    return out


def batch_rows(res: Any, n: Optional[int] = None) -> list[Row]:
    cols = [np.asarray(c)[:n].tolist() for c in res]
    return [tuple(x) for x in zip(*cols)]  # type: ignore[misc]


# One-setup scenario: REFERENCE example 1 (Gemma-3-27B-like hybrid, EAGLE3 draft; the ratio path).
FULL = [i for i in range(62) if i % 6 == 5]
SWA = [i for i in range(62) if i % 6 != 5]
MODEL = dict(full_attention_layer_ids=FULL, swa_attention_layer_ids=SWA, num_kv_heads=16, head_dim=128,
             sliding_window_size=1024)
SERVING: dict[str, Any] = dict(page_size=64)
SPEC = dict(algorithm="eagle3", draft_num_layers=1)
ONE_SETUP_KW = dict(num_full_layers=len(FULL), num_swa_layers=len(SWA), num_kv_heads=16, head_dim=128,
                    sliding_window_size=1024, page_size=64, algorithm="eagle3", draft_num_layers=1)


def one_setup_configurators() -> tuple[Any, Any]:
    rust = kvbudget.create_pool_configurator(
        kvbudget.ModelGeometry(**MODEL), kvbudget.ServingConfig(**SERVING), kvbudget.SpeculativeConfig(**SPEC)
    )
    return rust, reference.create_pool_configurator(MODEL, SERVING, SPEC)


def budgets(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(1 * GIB, 80 * GIB, n)


# --------------------------------------------------------------------------
# pytest-benchmark (smoke tests under --benchmark-disable)
# --------------------------------------------------------------------------

SMOKE_ROWS = 20_000
LOOP_ROWS = 500


def test_bench_plan_many_varied(benchmark: Any) -> None:
    cols = varied_columns(SMOKE_ROWS)
    res = benchmark(lambda: kvbudget.plan_many(**cols))
    assert batch_rows(res, LOOP_ROWS) == scalar_api_loop(row_dicts(cols, LOOP_ROWS))


def test_bench_scalar_api_loop(benchmark: Any) -> None:
    cols = varied_columns(LOOP_ROWS)
    rows = row_dicts(cols, LOOP_ROWS)
    got = benchmark(lambda: scalar_api_loop(rows))
    assert got == batch_rows(kvbudget.plan_many(**cols))


def test_bench_reference_loop(benchmark: Any) -> None:
    cols = varied_columns(LOOP_ROWS)
    rows = row_dicts(cols, LOOP_ROWS)
    got = benchmark(lambda: reference_loop(rows))
    assert got == batch_rows(kvbudget.plan_many(**cols))


def test_bench_calculate_pool_sizes_many(benchmark: Any) -> None:
    cfg, ref = one_setup_configurators()
    a = budgets(SMOKE_ROWS)
    res = benchmark(lambda: cfg.calculate_pool_sizes_many(a))
    assert res.status.tolist() == [0] * SMOKE_ROWS
    for i in range(0, SMOKE_ROWS, SMOKE_ROWS // 50):
        assert res.full_max_total_num_tokens[i] == ref.calculate_pool_sizes(int(a[i]))["full_max_total_num_tokens"]


def test_bench_plan_many_one_setup(benchmark: Any) -> None:
    cfg, _ = one_setup_configurators()
    a = budgets(SMOKE_ROWS)
    res = benchmark(lambda: kvbudget.plan_many(a, **ONE_SETUP_KW))
    for x, y in zip(res, cfg.calculate_pool_sizes_many(a)):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------
# python benches/bench_batch.py
# --------------------------------------------------------------------------


def best(fn: Callable[[], Any], repeats: int) -> float:
    """Best wall seconds of ``repeats`` calls."""
    t = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        t = min(t, time.perf_counter() - t0)
    return t


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="batch rows (default 1,000,000)")
    ap.add_argument("--sample", type=int, default=20_000, help="rows the per-row loops run (default 20,000)")
    ap.add_argument("--repeats", type=int, default=5, help="best of this many timings (default 5)")
    args = ap.parse_args(argv)
    n, m, k = args.rows, min(args.sample, args.rows), args.repeats

    print(f"kvbudget {kvbudget.__version__}; numpy {np.__version__}; Python {sys.version.split()[0]}")
    print(f"best of {k}; loops run on a {m:,}-row sample and are scaled per row\n")

    cols = varied_columns(n)
    res = kvbudget.plan_many(**cols)
    mix = {STATUS_CODES[int(s)]: int(c) for s, c in zip(*np.unique(res.status, return_counts=True))}
    print(f"varied columns ({len(cols) - 1} besides the budget), {n:,} rows: status mix {mix}")
    cfg, ref = one_setup_configurators()
    a = budgets(n)
    out = kvbudget.BatchResult.empty(n)

    # The varied and the budget-only paths under the same four conditions, interleaved.
    rows = []
    for label, extra in (("fresh outputs, 1 thread", dict(threads=1)),
                         ("out=, 1 thread", dict(threads=1, out=out)),
                         ("fresh outputs, all cores", {}),
                         ("out=, all cores", dict(out=out))):
        tv = best(lambda: kvbudget.plan_many(**cols, **extra), k) / n
        tb = best(lambda: kvbudget.plan_many(a, **ONE_SETUP_KW, **extra), k) / n
        rows.append((label, tv, tb))
    print(f"  {'':28s} {'varied':>10s} {'budget-only':>12s} {'ratio':>7s}")
    for label, tv, tb in rows:
        print(f"  {label:28s} {tv * 1e9:7.1f} ns {tb * 1e9:9.1f} ns {tv / tb:7.2f}x")

    t_batch = rows[0][1]
    sample = row_dicts(cols, m)
    want = batch_rows(res, m)
    assert scalar_api_loop(sample) == want and reference_loop(sample) == want, "loops disagree with plan_many"
    t_scalar = best(lambda: scalar_api_loop(sample), min(k, 3)) / m
    t_ref = best(lambda: reference_loop(sample), min(k, 3)) / m
    print(f"  scalar-API loop   ({m:,}-row sample) {t_scalar * 1e9:10.1f} ns/row  -> plan_many (1 thread) is "
          f"{t_scalar / t_batch:,.0f}x faster")
    print(f"  reference loop    ({m:,}-row sample) {t_ref * 1e9:10.1f} ns/row  -> plan_many (1 thread) is "
          f"{t_ref / t_batch:,.0f}x faster")

    a_list = a[:m].tolist()
    t_many = best(lambda: cfg.calculate_pool_sizes_many(a, threads=1), k) / n
    t_s1 = best(lambda: [cfg.calculate_pool_sizes(x) for x in a_list], min(k, 3)) / m
    t_r1 = best(lambda: [ref.calculate_pool_sizes(x) for x in a_list], min(k, 3)) / m
    print(f"\none setup (REFERENCE example 1, budgets vary), {n:,} rows:")
    print(f"  calculate_pool_sizes_many (1 thread) {t_many * 1e9:8.1f} ns/row")
    print(f"  calculate_pool_sizes loop (sample)   {t_s1 * 1e9:8.1f} ns/row  -> "
          f"calculate_pool_sizes_many is {t_s1 / t_many:,.0f}x faster")
    print(f"  reference loop            (sample)   {t_r1 * 1e9:8.1f} ns/row  -> "
          f"calculate_pool_sizes_many is {t_r1 / t_many:,.0f}x faster")


if __name__ == "__main__":
    main()
