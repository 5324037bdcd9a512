"""The batch API under threads, its input coercion (INV-8), reused output buffers, keywords,
and its instruction sets."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

kvbudget = pytest.importorskip("kvbudget")
from kvbudget import (  # noqa: E402
    InvalidConfigError,
    ModelGeometry,
    ServingConfig,
    create_pool_configurator,
    plan_many,
)
from kvbudget.batch import BatchResult  # noqa: E402

from batch_common import BASE, INVALID  # noqa: E402


# --------------------------------------------------------------------------
# Threads: the GIL is released for >= 4096 rows; concurrent calls must not
# interfere. No timing assertion: this checks results only.
# --------------------------------------------------------------------------

THREAD_ROWS = 120_000


def _varied_columns(seed: int, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    nf = rng.integers(0, 16, n)
    return dict(
        available_bytes=rng.integers(-(10**9), 10**12, n),
        num_full_layers=nf,
        num_swa_layers=np.where(rng.random(n) < 0.5, 0, rng.integers(0, 40, n)),
        num_kv_heads=rng.choice([0, 1, 2, 4, 8, 16], n),
        head_dim=rng.choice([64, 128, 256], n),
        sliding_window_size=rng.choice([-1, 128, 4096], n),
        kv_cache_dtype=rng.integers(0, 7, n).astype(np.uint8),
        page_size=rng.choice([1, 16, 64], n),
        tp_size=rng.choice([1, 2, 4, 8], n),
        swa_full_tokens_ratio=rng.uniform(0.05, 2.0, n),
        max_running_requests=rng.choice([-1, 64, 256], n),
        chunked_prefill_size=rng.choice([-1, 8192], n),
        disable_radix_cache=rng.random(n) < 0.5,
        algorithm=rng.integers(0, 7, n).astype(np.uint8),
        draft_num_layers=rng.integers(0, 3, n),
        num_steps=rng.choice([-1, 3], n),
        eagle_topk=rng.choice([-1, 1, 4], n),
        num_draft_tokens=rng.choice([-1, 4, 8], n),
        dflash_draft_cell_size_per_token=rng.choice([-1, 4096], n),
    )


def test_threads_get_serial_results() -> None:
    inputs = [_varied_columns(seed, THREAD_ROWS + seed) for seed in range(4)]
    serial = [plan_many(**kw) for kw in inputs]
    # the mix includes every status, so the comparison covers error rows too
    assert set(np.unique(np.concatenate([r.status for r in serial])).tolist()) >= {0, 1, 3}
    barrier = threading.Barrier(4)
    results: list[Any] = [None] * 4

    def work(k: int) -> None:
        barrier.wait()
        try:
            results[k] = plan_many(**inputs[k])
        except BaseException as e:  # noqa: BLE001 - reported below
            results[k] = e

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert isinstance(results[k], BatchResult), results[k]
        for got, want in zip(results[k], serial[k]):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("pinned", [False, True], ids=["fast path", "general path"])
def test_int32_columns_plan_as_int64_ones(pinned: bool) -> None:
    """Every integer column as int32 (read in place) or int16 (converted) gives the int64 rows,
    on the fast path and, with a pinned option as a column, on the general one, across threads."""
    wide = _varied_columns(7, THREAD_ROWS)
    if pinned:
        wide["dcp_size"] = np.random.default_rng(8).choice([1, 2], THREAD_ROWS)
    ints = [k for k, v in wide.items() if k != "available_bytes" and v.dtype == np.int64]
    want = plan_many(**wide, threads=1)
    assert set(np.unique(want.status).tolist()) >= {0, 1, 3}
    for dtype in (np.int32, np.int16):
        thin = {k: v.astype(dtype) if k in ints else v for k, v in wide.items()}
        for threads in (1, 2):
            for got, exp in zip(plan_many(**thin, threads=threads), want):
                np.testing.assert_array_equal(got, exp)


def test_threads_calculate_pool_sizes_many_shared_configurator() -> None:
    """One configurator, four threads, calculate_pool_sizes_many at once."""
    cfg = create_pool_configurator(
        ModelGeometry(list(range(0, 48, 6)), [i for i in range(48) if i % 6], 8, 128, sliding_window_size=4096),
        ServingConfig(page_size=64, swa_full_tokens_ratio=0.3),
    )
    budgets = [np.random.default_rng(k).integers(-(10**9), 10**12, THREAD_ROWS) for k in range(4)]
    serial = [cfg.calculate_pool_sizes_many(b) for b in budgets]
    barrier = threading.Barrier(4)
    results: list[Any] = [None] * 4

    def work(k: int) -> None:
        barrier.wait()
        results[k] = cfg.calculate_pool_sizes_many(budgets[k])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for got, want in zip(results[k], serial[k]):
            np.testing.assert_array_equal(got, want)


def test_gil_threshold_rows_agree() -> None:
    """Just below and at the GIL-release threshold (4096 rows) give the same rows."""
    kw = _varied_columns(7, 4096)
    full = plan_many(**kw)
    head = plan_many(**{k: v[:4095] for k, v in kw.items()})
    for a, b in zip(full, head):
        np.testing.assert_array_equal(a[:4095], b)


# --------------------------------------------------------------------------
# Input coercion: a value the scalar API rejects must not silently become a
# different, valid value (INV-8): batch.py type- and range-checks every column
# before casting.
# --------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["kv_cache_dtype", "algorithm", "disaggregation_mode"])
def test_out_of_range_integer_codes_are_invalid(column: str) -> None:
    res = plan_many(10**10, **{column: np.array([256, -255], dtype=np.int64)}, **BASE)
    assert res.status.tolist() == [INVALID, INVALID]


def test_non_integer_floats_in_int_columns_are_rejected() -> None:
    try:
        res = plan_many(10**10, num_full_layers=np.array([32.9, 32.0]), num_kv_heads=8, head_dim=128)
    except (InvalidConfigError, TypeError):
        return  # rejecting the call is fine
    assert res.status[0] == INVALID  # so is an invalid row


def test_uint64_beyond_i64_is_not_none() -> None:
    # Like the scalar API (OverflowError for 2**63), the batch refuses the column outright:
    # it must never read 2**63 as a negative number, i.e. as None.
    with pytest.raises(OverflowError):
        ServingConfig(max_running_requests=2**63)
    with pytest.raises(OverflowError):
        plan_many(
            10**10, max_running_requests=np.array([2**63, 16], dtype=np.uint64), chunked_prefill_size=8192,
            disable_radix_cache=True, num_swa_layers=4, sliding_window_size=128, **BASE,
        )


# --------------------------------------------------------------------------
# Threads, reused outputs, keywords
# --------------------------------------------------------------------------


def test_threads_do_not_change_results() -> None:
    """Rows are independent: one thread, two threads and the default give the same arrays."""
    kw = _varied_columns(11, 200_000)  # above kvbudget_core's PARALLEL_ROWS (65,536)
    one = plan_many(**kw, threads=1)
    for threads in (2, 3, None):
        for a, b in zip(plan_many(**kw, threads=threads), one):
            np.testing.assert_array_equal(a, b)
    cfg = create_pool_configurator(
        ModelGeometry(list(range(0, 48, 6)), [i for i in range(48) if i % 6], 8, 128, sliding_window_size=4096),
        ServingConfig(page_size=64, swa_full_tokens_ratio=0.3),
    )
    budgets = kw["available_bytes"]
    serial = cfg.calculate_pool_sizes_many(budgets, threads=1)
    for a, b in zip(cfg.calculate_pool_sizes_many(budgets, threads=2), serial):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(InvalidConfigError, match="threads must be >= 1"):
        plan_many(**kw, threads=0)


def test_out_buffers_are_filled_and_returned() -> None:
    kw = _varied_columns(5, 5000)
    fresh = plan_many(**kw)
    out = BatchResult.empty(5000)
    got = plan_many(**kw, out=out)
    for a, b, c in zip(got, out, fresh):
        assert a is b  # written in place
        np.testing.assert_array_equal(a, c)
    with pytest.raises(InvalidConfigError, match="rows"):
        plan_many(**kw, out=BatchResult.empty(4999))
    with pytest.raises(TypeError):
        plan_many(**kw, out=(np.zeros(5000, np.int32),) * 4)  # type: ignore[arg-type]
    cfg = create_pool_configurator(ModelGeometry(list(range(4)), [], 8, 128), ServingConfig())
    small = BatchResult.empty(3)
    assert cfg.calculate_pool_sizes_many([10**9, 1, 10**10], out=small).max_total_num_tokens is small[0]


def test_keywords_come_from_the_field_table() -> None:
    from kvbudget.batch import BATCH_FIELDS

    with pytest.raises(TypeError, match="unexpected keyword argument 'pagesize'"):
        plan_many(10**10, pagesize=64, **BASE)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing required keyword arguments: head_dim"):
        plan_many(10**10, num_full_layers=4, num_kv_heads=8)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'draft'"):
        plan_many(10**10, draft=None, **BASE)  # type: ignore[call-arg]
    assert set(BATCH_FIELDS) == {n for n, f in kvbudget.fields.SCENARIO_FIELDS.items() if f.batch}


def test_bad_scalar_makes_every_row_invalid_as_the_scalar_api_raises() -> None:
    """A scalar is checked once, as its constructor checks it: rejected there, every row is invalid."""
    with pytest.raises(InvalidConfigError):
        ServingConfig(page_size=0)
    res = plan_many(np.array([10**10, 10**11]), page_size=0, **BASE)
    assert res.error_codes() == ["invalid_config"] * 2
    with pytest.raises(InvalidConfigError):
        ServingConfig(max_running_requests=-1)  # a negative scalar is not None
    res = plan_many(np.array([10**10]), max_running_requests=-1, **BASE)
    assert res.error_codes() == ["invalid_config"]
    with pytest.raises(TypeError):
        plan_many(10**10, page_size=True, **BASE)  # a bool is not an int, as in the scalar API


# --------------------------------------------------------------------------
# Instruction sets: the fast path is compiled per level and picked at run
# time; KVBUDGET_SIMD caps it. Every level the CPU runs gives the same rows.
# --------------------------------------------------------------------------

_LEVEL_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from test_batch_threads import _varied_columns
from kvbudget.batch import plan_many, simd_level
r = plan_many(**_varied_columns(11, 50_000))
np.savez(sys.argv[2], level=simd_level(), **{k: getattr(r, k) for k in r._fields})
"""


def test_every_simd_level_gives_the_same_rows(tmp_path: Path) -> None:
    from kvbudget.batch import simd_level

    best = simd_level()
    x86 = ["avx512", "avx2", "sse4.2", "sse2"]
    assert best in x86 + ["baseline", "scalar"]
    levels = x86[x86.index(best):] if best in x86 else [best]
    rows = {}
    for level in levels:
        out = tmp_path / f"{level}.npz"
        env = {**os.environ, "KVBUDGET_SIMD": level}
        here = str(Path(__file__).resolve().parent)
        subprocess.run([sys.executable, "-c", _LEVEL_SCRIPT, here, str(out)], env=env, check=True)
        got = np.load(out)
        assert str(got["level"]) == level
        rows[level] = got
    want = plan_many(**_varied_columns(11, 50_000))
    assert set(np.unique(want.status).tolist()) >= {0, 1, 3}
    for level, got in rows.items():
        for field in want._fields:
            np.testing.assert_array_equal(got[field], getattr(want, field), err_msg=f"{level}: {field}")
