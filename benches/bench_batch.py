"""The batch API against per-row loops: ``plan_many`` vs the scalar API vs SGLang's own code.

Run ``python benches/bench_batch.py`` for the numbers (one run, one process):

* varied columns (18 columns besides the budget: ratios, TP, page sizes, layer
  counts, dims, dtype, window, request-cap inputs, speculative algorithm and
  draft layers, all arrays), 1,000,000 rows: ``kvbudget.plan_many`` in ns/row
  with fresh outputs and with reused ones (``out=``), on one thread and on
  every core, with int64 columns and with the same rows in int32 columns;
  and a floor, numpy reading those columns' bytes once; against a Python loop over SGLang 0.5.23's own
  ``pool_configurator.py`` (run by the test oracle, ``tests/sglang_oracle``:
  each row builds the oracle's mock inputs and runs SGLang's factory,
  constructor and ``calculate_pool_sizes``, so the SGLang loop times all of
  that; a server builds one configurator per start) and a Python loop over
  the scalar API (``ModelGeometry`` + ``ServingConfig`` +
  ``SpeculativeConfig`` + ``create_pool_configurator`` +
  ``calculate_pool_sizes`` per row). The loops run on the first 20,000 rows
  only and are scaled per row (the printout says so);
* one setup (only the budget varies), 1,000,000 budgets, under the same
  conditions as the varied rows (fresh and reused outputs, one thread and
  every core): ``plan_many`` with scalar config columns and
  ``calculate_pool_sizes_many``, and the ratio varied / budget-only measured
  in this run; against a loop of ``calculate_pool_sizes`` on one configurator
  and a loop of SGLang's code through the oracle (a fresh configurator per
  call, as above).

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

import parity_cases  # noqa: E402
import sglang_oracle  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget.batch import BATCH_FIELDS, STATUS_CODES, simd_level  # noqa: E402
from kvbudget.fields import SCENARIO_FIELDS  # noqa: E402

GIB = 1 << 30
DTYPES = BATCH_FIELDS["kv_cache_dtype"].choices  # batch code order
ALGORITHMS = BATCH_FIELDS["algorithm"].choices
STATUS_OF_CODE = {code: status for status, code in STATUS_CODES.items()}
#: The oracle's error kinds -> batch statuses.
SGLANG_STATUS = {"invalid": STATUS_OF_CODE["invalid_config"],
                 "not_enough_memory": STATUS_OF_CODE["not_enough_memory"],
                 "swa_too_small": STATUS_OF_CODE["swa_pool_too_small"]}
#: Every scenario field at its default (parity_cases' case form).
DEFAULTS = {name: f.default for name, f in SCENARIO_FIELDS.items()}

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


def narrowed(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same rows with every int64 column but the budgets as int32 (the values fit)."""
    out = {k: v.astype(np.int32) if v.dtype == np.int64 and k != "available_bytes" else v for k, v in cols.items()}
    assert all((out[k] == v).all() for k, v in cols.items())
    return out


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


SglangRow = tuple[dict[str, Any], int]


def sglang_rows(cols: dict[str, np.ndarray], n: int) -> list[SglangRow]:
    """The first ``n`` rows as (oracle case, available_bytes): codes decoded to names,
    a negative optional integer as None (the batch API's rule), dims resolved by kvbudget."""
    lists = {k: v[:n].tolist() for k, v in cols.items() if k != "available_bytes"}
    out = []
    for i in range(n):
        c = dict(DEFAULTS)
        for k, v in lists.items():
            f = SCENARIO_FIELDS[k]
            c[k] = BATCH_FIELDS[k].choices[v[i]] if f.py == "name" else (
                None if f.py == "opt_int" and v[i] < 0 else v[i])
        case = parity_cases.oracle_case(c)
        assert case is not None, f"row {i}: kvbudget refuses the model"
        out.append((case, int(cols["available_bytes"][i])))
    return out


def sglang_row(o: sglang_oracle.Outcome) -> Row:
    if o.error is not None:
        return (0, 0, 0, SGLANG_STATUS[o.error[0]])
    assert o.config is not None
    return (_none(o.config["max_total_num_tokens"]), _none(o.config["full_max_total_num_tokens"]),
            _none(o.config["swa_max_total_num_tokens"]), 0)


def sglang_loop(oracle: sglang_oracle.Oracle, rows: list[SglangRow]) -> list[Row]:
    """SGLang's code per row (mock inputs, factory, constructor, calculate_pool_sizes)."""
    return [sglang_row(oracle.run(case, entry="bytes", amount=a)) for case, a in rows]


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


def one_setup() -> tuple[Any, dict[str, Any]]:
    """kvbudget's configurator and the oracle case for the one-setup scenario."""
    rust = kvbudget.create_pool_configurator(
        kvbudget.ModelGeometry(**MODEL), kvbudget.ServingConfig(**SERVING), kvbudget.SpeculativeConfig(**SPEC)
    )
    case = parity_cases.oracle_case({**DEFAULTS, **ONE_SETUP_KW})
    assert case is not None
    return rust, case


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


def test_bench_plan_many_varied_int32(benchmark: Any) -> None:
    cols = varied_columns(SMOKE_ROWS)
    res = benchmark(lambda: kvbudget.plan_many(**narrowed(cols)))
    for got, want in zip(res, kvbudget.plan_many(**cols)):
        np.testing.assert_array_equal(got, want)


def test_bench_scalar_api_loop(benchmark: Any) -> None:
    cols = varied_columns(LOOP_ROWS)
    rows = row_dicts(cols, LOOP_ROWS)
    got = benchmark(lambda: scalar_api_loop(rows))
    assert got == batch_rows(kvbudget.plan_many(**cols))


def test_bench_sglang_loop(benchmark: Any) -> None:
    cols = varied_columns(LOOP_ROWS)
    oracle, rows = sglang_oracle.load(), sglang_rows(cols, LOOP_ROWS)
    got = benchmark(lambda: sglang_loop(oracle, rows))
    assert got == batch_rows(kvbudget.plan_many(**cols))


def test_bench_calculate_pool_sizes_many(benchmark: Any) -> None:
    (cfg, case), oracle = one_setup(), sglang_oracle.load()
    a = budgets(SMOKE_ROWS)
    res = benchmark(lambda: cfg.calculate_pool_sizes_many(a))
    assert res.status.tolist() == [0] * SMOKE_ROWS
    for i in range(0, SMOKE_ROWS, SMOKE_ROWS // 50):
        got = oracle.run(case, entry="bytes", amount=int(a[i])).config
        assert got is not None and res.full_max_total_num_tokens[i] == got["full_max_total_num_tokens"]


def test_bench_plan_many_one_setup(benchmark: Any) -> None:
    cfg, _ = one_setup()
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

    print(f"kvbudget {kvbudget.__version__}; numpy {np.__version__}; Python {sys.version.split()[0]}; "
          f"fast path on {simd_level()} (KVBUDGET_SIMD caps it)")
    print(f"best of {k}; loops run on a {m:,}-row sample and are scaled per row\n")

    cols = varied_columns(n)
    res = kvbudget.plan_many(**cols)
    mix = {STATUS_CODES[int(s)]: int(c) for s, c in zip(*np.unique(res.status, return_counts=True))}
    print(f"varied columns ({len(cols) - 1} besides the budget), {n:,} rows: status mix {mix}")
    cfg, case = one_setup()
    oracle = sglang_oracle.load()
    a = budgets(n)
    out = kvbudget.BatchResult.empty(n)

    # The varied rows (int64 columns, and the same rows with int32 integer columns)
    # and the budget-only path under the same four conditions, interleaved.
    thin = narrowed(cols)
    rows = []
    for label, extra in (("fresh outputs, 1 thread", dict(threads=1)),
                         ("out=, 1 thread", dict(threads=1, out=out)),
                         ("fresh outputs, all cores", {}),
                         ("out=, all cores", dict(out=out))):
        tv = best(lambda: kvbudget.plan_many(**cols, **extra), k) / n
        t32 = best(lambda: kvbudget.plan_many(**thin, **extra), k) / n
        tb = best(lambda: kvbudget.plan_many(a, **ONE_SETUP_KW, **extra), k) / n
        rows.append((label, tv, t32, tb))
    print(f"  {'':28s} {'varied':>10s} {'int32':>10s} {'budget-only':>12s} {'ratio':>7s} {'int32':>7s}")
    for label, tv, t32, tb in rows:
        print(f"  {label:28s} {tv * 1e9:7.1f} ns {t32 * 1e9:7.1f} ns {tb * 1e9:9.1f} ns "
              f"{tv / tb:7.2f}x {t32 / tb:6.2f}x")
    # A floor: only reading the varied rows' input bytes once (numpy's vectorised max of
    # each column's bytes), against the budget-only path (out=, 1 thread).
    tb = rows[1][3]
    for label, c in (("int64", cols), ("int32", thin)):
        size = sum(v.nbytes for v in c.values()) / n
        tr = best(lambda: [np.max(v.view(np.uint8)) for v in c.values()], k) / n
        print(f"  reading the inputs only ({label} columns, {size:.0f} B/row) {tr * 1e9:5.1f} ns/row = "
              f"{tr / tb:.2f}x the budget-only path (out=, 1 thread)")

    t_batch = rows[0][1]
    sample, sglang_sample = row_dicts(cols, m), sglang_rows(cols, m)
    want = batch_rows(res, m)
    assert scalar_api_loop(sample) == want, "the scalar-API loop disagrees with plan_many"
    assert sglang_loop(oracle, sglang_sample) == want, "SGLang disagrees with plan_many"
    t_scalar = best(lambda: scalar_api_loop(sample), min(k, 3)) / m
    t_sglang = best(lambda: sglang_loop(oracle, sglang_sample), min(k, 3)) / m
    print(f"  scalar-API loop    ({m:,}-row sample) {t_scalar * 1e9:10.1f} ns/row  -> plan_many (1 thread) is "
          f"{t_scalar / t_batch:,.0f}x faster")
    print(f"  SGLang 0.5.23 loop ({m:,}-row sample) {t_sglang * 1e9:10.1f} ns/row  -> plan_many (1 thread) is "
          f"{t_sglang / t_batch:,.0f}x faster")
    print("    (SGLang's pool_configurator.py through tests/sglang_oracle: each row builds the mock inputs,")
    print("     runs the factory and the constructor, then calculate_pool_sizes)")

    a_list = a[:m].tolist()
    t_many = best(lambda: cfg.calculate_pool_sizes_many(a, threads=1), k) / n
    t_s1 = best(lambda: [cfg.calculate_pool_sizes(x) for x in a_list], min(k, 3)) / m
    t_sglang1 = best(lambda: [oracle.run(case, entry="bytes", amount=x) for x in a_list], min(k, 3)) / m
    print(f"\none setup (REFERENCE example 1, budgets vary), {n:,} rows:")
    print(f"  calculate_pool_sizes_many (1 thread) {t_many * 1e9:8.1f} ns/row")
    print(f"  calculate_pool_sizes loop (sample)   {t_s1 * 1e9:8.1f} ns/row  -> "
          f"calculate_pool_sizes_many is {t_s1 / t_many:,.0f}x faster")
    print(f"  SGLang 0.5.23 loop        (sample)   {t_sglang1 * 1e9:8.1f} ns/row  -> "
          f"calculate_pool_sizes_many is {t_sglang1 / t_many:,.0f}x faster")
    print("    (a fresh SGLang configurator per call: mock inputs, factory, constructor, calculate_pool_sizes)")
    small_batches(k)


def small_batches(repeats: int) -> None:
    """The fixed cost of a call: ``plan_many`` on 1, 8 and 64 varied rows, through the
    Python API and through the binding alone (``_core._plan_many`` on prepared columns),
    against one row of the scalar API (configurator + ``calculate_pool_sizes``) measured in
    this run. The core's own share of a 1-row call is counted by ``benches/callgrind.sh``
    (mode ``single``: instructions and nanoseconds per call)."""
    from kvbudget.batch import _column

    calls = 2_000
    rows1 = row_dicts(varied_columns(1), 1)
    t_scalar = best(lambda: scalar_api_loop(rows1 * calls), repeats) / calls
    print(f"\nsmall batches, varied columns; one scalar-API row (ModelGeometry + ServingConfig + "
          f"SpeculativeConfig + configurator + calculate_pool_sizes): {t_scalar * 1e6:.2f} us")
    print(f"  {'rows':>6s} {'plan_many':>12s} {'binding alone':>14s} {'plan_many / scalar row':>24s}")
    for n in (1, 8, 64):
        cols = varied_columns(n)
        avail = cols.pop("available_bytes")
        prepared = {k: _column(BATCH_FIELDS[k], v) for k, v in cols.items()}
        t_api = best(lambda: [kvbudget.plan_many(avail, **cols) for _ in range(calls)], repeats) / calls
        t_core = best(lambda: [kvbudget._core._plan_many(avail, {}, prepared, None, None) for _ in range(calls)],
                      repeats) / calls  # fmt: skip
        print(f"  {n:6d} {t_api * 1e6:9.2f} us {t_core * 1e6:11.2f} us {t_api / t_scalar:23.2f}x")


if __name__ == "__main__":
    main()
