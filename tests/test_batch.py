"""The batch API (``kvbudget.plan_many``, ``calculate_pool_sizes_many``).

INV-7 (REFERENCE section 6): batch equals scalar, row by row, errors included.
Every row of ``plan_many`` must equal what the scalar API gives for the same
inputs -- ``ModelGeometry`` + ``ServingConfig`` + ``SpeculativeConfig`` +
``create_pool_configurator(...).calculate_pool_sizes(A)`` -- with ``None``
written as ``-1`` and an error written as the status of the exception's
``code`` (whatever step of the scalar pipeline raised it: construction of a
config object, of the configurator, or the call).

Batch-only conventions the comparison follows (docs in kvbudget/batch.py):

* layer *counts* replace layer id lists: ``n`` full and ``m`` SWA layers are
  the scalar ids ``0..n-1`` and ``n..n+m-1``; a negative count is an
  ``invalid_config`` row (no id list has a negative length);
* a negative entry of an optional integer column means ``None``.

The property runs ``max(100, profile // 20)`` examples, where ``profile`` is
the active hypothesis profile's ``max_examples`` (tests/conftest.py: ``ci``
10,000 -> 500 examples, ``dev`` 200 -> 100): each example is a whole batch of
up to 200 rows, so this is far more scalar calls than the profile count.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

kvbudget = pytest.importorskip("kvbudget")
from kvbudget import (  # noqa: E402
    InvalidConfigError,
    KVBudgetError,
    ModelGeometry,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
    plan_many,
)
from kvbudget.batch import BatchResult  # noqa: E402

from batch_common import BASE, INVALID, STATUS_OF_CODE  # noqa: E402

I64_MIN, I64_MAX = -(2**63), 2**63 - 1

_PROFILE_EXAMPLES = settings().max_examples
BATCH_EXAMPLES = max(100, _PROFILE_EXAMPLES // 20)


# --------------------------------------------------------------------------
# Column value strategies: (valid values, extra invalid values). An example
# picks up to three columns that may draw invalid values; the others draw
# valid ones only, so that most rows get past validation to the arithmetic.
# --------------------------------------------------------------------------

AWKWARD_RATIOS = (
    0.8, 0.1, 0.3, 0.5, 1.0, 2.0, 1 / 3, 0.1 + 0.2, 0.999999, 1.0000000000000002, 0.9999999999999999,
    1e-9, 1e-300, 5e-324, 3.5, 1e6, 1e300, 1.7976931348623157e308, 0.8000000000000002,
)
BAD_RATIOS = (0.0, -0.0, -0.5, float("nan"), float("inf"), float("-inf"))
DTYPE_NAMES = (
    "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "auto", "nvfp4", "fp4_mx_block16",
    "bfloat16", "float16", "half", "float32", "float", "fp8", "float8_e4m3fn", "float8_e5m2",
    "BF16", "Fp8_E5M2", "MXFP8",
)
BAD_DTYPE_NAMES = ("bogus", "int8", "", "fp8-e4m3", "fp6", "fp4_e2m1", "fp4", "mxfp4")
ALGO_NAMES = ("none", "eagle", "eagle3", "nextn", "mtp", "standalone", "ngram", "dflash", "uno", "dspark",
              "frozen_kv_mtp", "EAGLE", "Mtp", "DFlash", "")
BAD_ALGO_NAMES = ("bogus", "eagle4", "medusa")
MODE_NAMES = ("null", "prefill", "decode", "none", "", "DECODE", "Prefill")
BAD_MODE_NAMES = ("bogus", "both")


def _i(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


def _opt(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


def _dim(common: tuple[int, ...]) -> st.SearchStrategy[int]:
    return st.one_of(
        st.sampled_from(common), st.sampled_from(common), st.sampled_from(common),
        _i(1, 1024), _i(2**20, 2**40),  # the last toward overflow
    )


BUDGETS = st.one_of(
    _i(10**8, 10**12),
    _i(10**8, 10**12),
    _i(-(2**40), 2**62),
    _i(-(10**6), 10**6),
    st.sampled_from((0, 1, -1, 2**62, 2**62 - 1, I64_MAX, I64_MIN)),
)

# name -> (kind, valid strategy, invalid strategy or None)
COLUMNS: dict[str, tuple[str, st.SearchStrategy[Any], Optional[st.SearchStrategy[Any]]]] = {
    "available_bytes": ("int", BUDGETS, None),
    "num_full_layers": ("int", st.one_of(_i(0, 8), _i(0, 48)), st.sampled_from((-1, -(2**40)))),
    "num_swa_layers": ("int", st.one_of(st.just(0), _i(0, 8), _i(0, 48)), st.just(-1)),
    "num_kv_heads": ("int", _dim((1, 2, 4, 8, 16, 32)), st.sampled_from((0, -1, -8))),
    "head_dim": ("int", _dim((64, 96, 128, 256)), st.sampled_from((0, -3))),
    "v_head_dim": ("opt", _opt(_dim((64, 128, 512))), st.just(0)),
    "swa_num_kv_heads": ("opt", _opt(_dim((1, 2, 4, 8))), st.just(0)),
    "swa_head_dim": ("opt", _opt(_dim((64, 128, 256))), st.just(0)),
    "swa_v_head_dim": ("opt", _opt(_dim((64, 128))), st.just(0)),
    "sliding_window_size": (
        "opt",
        st.one_of(st.none(), st.sampled_from((0, 128, 1024, 4096)), _i(0, 8192), _i(0, 2**20), st.just(2**62)),
        None,
    ),
    # MLA (kv_lora_rank given) needs qk_rope_head_dim and no SWA layers: only one example in
    # five may draw it (batch_cases), and qk_rope_head_dim is mostly given (harmless without MLA)
    "kv_lora_rank": ("opt", st.one_of(st.none(), st.just(512), _i(1, 1024)), st.just(0)),
    "qk_rope_head_dim": ("opt", st.one_of(st.none(), st.just(64), st.just(0), st.just(64)), None),
    "kv_cache_dtype": ("str", st.sampled_from(DTYPE_NAMES), st.sampled_from(BAD_DTYPE_NAMES)),
    "page_size": (
        "int",
        st.one_of(st.sampled_from((1, 1, 16, 64, 256)), _i(1, 4096), st.just(2**62)),
        st.sampled_from((0, -1)),
    ),
    "tp_size": ("int", st.one_of(st.sampled_from((1, 2, 4, 8)), _i(1, 64)), st.sampled_from((0, -4))),
    "dcp_size": ("int", st.sampled_from((1,) * 7 + (2,)), st.sampled_from((0, 3, -1))),
    "attn_dp_size": ("int", st.sampled_from((1, 2, 4)), st.sampled_from((0, -2))),
    "swa_full_tokens_ratio": (
        "float",
        st.one_of(st.sampled_from(AWKWARD_RATIOS), st.floats(1e-3, 4.0)),
        st.sampled_from(BAD_RATIOS),
    ),
    # chunk-cap inputs: given more often than not
    "max_running_requests": ("opt", st.one_of(st.none(), _i(1, 4096), _i(1, 256), st.just(2**62)), st.just(0)),
    "chunked_prefill_size": ("opt", st.one_of(st.none(), _i(1, 16384), st.sampled_from((2048, 8192))), st.just(0)),
    "disable_radix_cache": ("bool", st.booleans(), None),
    "disable_overlap_schedule": ("bool", st.booleans(), None),
    "disaggregation_mode": ("str", st.one_of(st.none(), st.sampled_from(MODE_NAMES)), st.sampled_from(BAD_MODE_NAMES)),
    "disaggregation_decode_extra_slots": ("int", st.one_of(st.just(0), _i(0, 1024)), st.just(-1)),
    "swa_eviction_interval": (
        "int",
        st.one_of(st.sampled_from((128, 1, 0, -5, I64_MIN, I64_MAX)), _i(I64_MIN, I64_MAX), _i(-4, 4096)),
        None,
    ),
    "disable_hybrid_swa_memory": ("bool", st.booleans(), None),
    "is_draft_worker": ("bool", st.booleans(), None),
    "algorithm": ("str", st.one_of(st.none(), st.sampled_from(ALGO_NAMES)), st.sampled_from(BAD_ALGO_NAMES)),
    "draft_num_layers": (
        "int",
        st.one_of(st.just(0), _i(0, 8), st.just(2**32 - 1)),
        st.sampled_from((-1, 2**32, 2**40)),
    ),
    "num_steps": ("opt", _opt(st.one_of(_i(0, 16), st.just(2**40))), None),
    "eagle_topk": ("opt", _opt(st.one_of(_i(0, 16), st.just(2**40))), None),
    "num_draft_tokens": ("opt", _opt(st.one_of(_i(0, 16), st.just(2**40))), None),
    # > draft_num_layers is invalid; it happens with the valid draws too when d is 0
    "banded_draft_layers": ("int", st.one_of(st.just(0), st.just(0), _i(0, 2)), st.sampled_from((-1, 9, 2**32))),
    "dflash_draft_cell_size_per_token": ("opt", _opt(st.one_of(_i(1, 2**20), st.just(2**40))), st.just(0)),
}

# Batch integer codes of the name columns (kvbudget.batch documents "names or
# their integer codes"; the order is each field's ``choices``, the Rust core's).
from kvbudget.batch import BATCH_FIELDS  # noqa: E402


def _encode_none(draw: Callable[[Any], Any], v: Optional[int]) -> int:
    """A batch optional-int value: None is any negative number (usually -1)."""
    if v is not None:
        return v
    return int(draw(st.sampled_from((-1, -1, -1, -2, I64_MIN))))


def _encode_scalar(draw: Callable[[Any], Any], kind: str, v: Any) -> Any:
    if kind == "int":
        return draw(st.sampled_from((int, np.int64)))(v)
    if kind == "opt":
        # A scalar is taken as the scalar API takes it: None is None (a negative scalar is
        # invalid, like ServingConfig(max_running_requests=-1)); only arrays use the sentinel.
        return v
    if kind == "float":
        return draw(st.sampled_from((float, np.float64)))(v)
    if kind == "bool":
        return draw(st.sampled_from((bool, np.bool_)))(v)
    return v  # str / None


#: Integer array dtypes besides int64: int32 is read in place, the others converted to it.
NARROW_INTS = (np.int32, np.int16, np.uint16, np.int8, np.uint8, np.uint32)


def _int_array(draw: Callable[[Any], Any], vals: list[int]) -> np.ndarray:
    """``vals`` as an int64 array, or in a narrower integer dtype that holds every value."""
    fits = [d for d in NARROW_INTS if all(np.iinfo(d).min <= v <= np.iinfo(d).max for v in vals)]
    return np.array(vals, dtype=draw(st.sampled_from([np.int64, *fits])))


def _encode_array(draw: Callable[[Any], Any], name: str, kind: str, vals: list[Any]) -> Any:
    as_list = draw(st.booleans())
    if kind == "int":
        return list(vals) if as_list else _int_array(draw, vals)
    if kind == "opt":
        if as_list:  # Python lists may hold None itself
            return [(None if draw(st.booleans()) else _encode_none(draw, None)) if v is None else v for v in vals]
        return _int_array(draw, [_encode_none(draw, v) for v in vals])
    if kind == "float":
        return list(vals) if as_list else np.array(vals, dtype=np.float64)
    if kind == "bool":
        return list(vals) if as_list else np.array(vals, dtype=np.bool_)
    # name columns: a list of names, an object array, or integer codes
    how = draw(st.sampled_from(("list", "object", "codes")))
    if how == "codes":
        table = BATCH_FIELDS[name].choices
        codes = []
        for v in vals:
            canon = _canonical_name(name, v)
            if canon is None:
                codes.append(int(draw(st.sampled_from((len(table), 200, 255)))))
            else:
                codes.append(table.index(canon))
        return np.array(codes, dtype=draw(st.sampled_from((np.uint8, np.int64))))
    if how == "object":
        return np.array(vals, dtype=object)
    return list(vals)


def _canonical_name(name: str, v: Optional[str]) -> Optional[str]:
    """The scalar API's canonical name for a name-column value, None if invalid."""
    try:
        if name == "kv_cache_dtype":
            return str(ServingConfig(kv_cache_dtype=v).kv_cache_dtype) if v is not None else "bf16"
        if name == "algorithm":
            return str(SpeculativeConfig(algorithm=v).algorithm)
        return str(ServingConfig(disaggregation_mode=v).disaggregation_mode)
    except KVBudgetError:
        return None


@st.composite
def batch_cases(draw: Callable[[Any], Any]) -> tuple[int, dict[str, Any], dict[str, list[Any]]]:
    """(rows, plan_many keyword arguments, logical per-row values of every column)."""
    n = draw(st.integers(1, 200))
    may_be_bad = draw(st.sets(st.sampled_from(sorted(COLUMNS)), max_size=3))
    mla = draw(st.integers(0, 4)) == 4  # else kv_lora_rank is None: MLA rows are mostly invalid ones
    kwargs: dict[str, Any] = {}
    logical: dict[str, list[Any]] = {}
    for name, (kind, valid, invalid) in COLUMNS.items():
        elem = valid if mla or name != "kv_lora_rank" else st.none()
        if invalid is not None and name in may_be_bad:
            elem = st.one_of(valid, valid, invalid)
        if draw(st.booleans()):
            vals = draw(st.lists(elem, min_size=n, max_size=n))
            kwargs[name] = _encode_array(draw, name, kind, vals)
        else:
            v = draw(elem)
            vals = [v] * n
            kwargs[name] = _encode_scalar(draw, kind, v)
        logical[name] = vals
    if not any(isinstance(v, (list, np.ndarray)) for v in kwargs.values()):
        n = 1  # scalars only: one row
        logical = {k: v[:1] for k, v in logical.items()}
    return n, kwargs, logical


# --------------------------------------------------------------------------
# The scalar side
# --------------------------------------------------------------------------

Outcome = tuple[int, int, int, int]  # (max_total, full or -1, swa or -1, status)


def _none(x: Optional[int]) -> int:
    return -1 if x is None else int(x)


def scalar_outcome(row: dict[str, Any]) -> Outcome:
    """The scalar API on one row: its three token counts, or the error's status."""
    try:
        n_f, n_s = row["num_full_layers"], row["num_swa_layers"]
        if n_f < 0 or n_s < 0:
            return (0, 0, 0, INVALID)
        model = ModelGeometry(
            list(range(n_f)),
            list(range(n_f, n_f + n_s)),
            row["num_kv_heads"],
            row["head_dim"],
            v_head_dim=row["v_head_dim"],
            swa_num_kv_heads=row["swa_num_kv_heads"],
            swa_head_dim=row["swa_head_dim"],
            swa_v_head_dim=row["swa_v_head_dim"],
            sliding_window_size=row["sliding_window_size"],
            kv_lora_rank=row["kv_lora_rank"],
            qk_rope_head_dim=row["qk_rope_head_dim"],
        )
        serving = ServingConfig(
            kv_cache_dtype=row["kv_cache_dtype"],
            page_size=row["page_size"],
            tp_size=row["tp_size"],
            dcp_size=row["dcp_size"],
            attn_dp_size=row["attn_dp_size"],
            swa_full_tokens_ratio=row["swa_full_tokens_ratio"],
            max_running_requests=row["max_running_requests"],
            chunked_prefill_size=row["chunked_prefill_size"],
            disable_radix_cache=row["disable_radix_cache"],
            disable_overlap_schedule=row["disable_overlap_schedule"],
            disaggregation_mode=row["disaggregation_mode"],
            disaggregation_decode_extra_slots=row["disaggregation_decode_extra_slots"],
            swa_eviction_interval=row["swa_eviction_interval"],
            disable_hybrid_swa_memory=row["disable_hybrid_swa_memory"],
            is_draft_worker=row["is_draft_worker"],
        )
        spec = SpeculativeConfig(
            algorithm=row["algorithm"],
            draft_num_layers=row["draft_num_layers"],
            num_steps=row["num_steps"],
            eagle_topk=row["eagle_topk"],
            num_draft_tokens=row["num_draft_tokens"],
            banded_draft_layers=row["banded_draft_layers"],
            dflash_draft_cell_size_per_token=row["dflash_draft_cell_size_per_token"],
        )
        r = create_pool_configurator(model, serving, spec).calculate_pool_sizes(row["available_bytes"])
    except KVBudgetError as e:
        return (0, 0, 0, STATUS_OF_CODE[e.code])
    return (int(r.max_total_num_tokens), _none(r.full_max_total_num_tokens), _none(r.swa_max_total_num_tokens), 0)


def batch_rows(res: BatchResult) -> list[Outcome]:
    cols = [c.tolist() for c in res]
    return [tuple(x) for x in zip(*cols)]  # type: ignore[misc]


def _check_result_arrays(res: BatchResult, n: int) -> None:
    assert isinstance(res, BatchResult)
    for arr, dt in zip(res, (np.int64, np.int64, np.int64, np.uint8)):
        assert isinstance(arr, np.ndarray) and arr.dtype == dt and arr.shape == (n,)


# --------------------------------------------------------------------------
# INV-7
# --------------------------------------------------------------------------


@settings(max_examples=BATCH_EXAMPLES, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch_cases())
def test_inv7_plan_many_equals_scalar(case: tuple[int, dict[str, Any], dict[str, list[Any]]]) -> None:
    n, kwargs, logical = case
    res = plan_many(**kwargs)
    _check_result_arrays(res, n)
    got = batch_rows(res)
    cache: dict[tuple[Any, ...], Outcome] = {}
    names = list(logical)
    for i in range(n):
        row = {k: logical[k][i] for k in names}
        key = tuple(repr(row[k]) for k in names)  # repr: NaN and -0.0 hash apart
        want = cache.get(key)
        if want is None:
            want = cache[key] = scalar_outcome(row)
        assert got[i] == want, f"row {i}: batch {got[i]} != scalar {want}; row inputs {row}"


SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any], Optional[dict[str, Any]]]] = {
    "default": (dict(full_attention_layer_ids=list(range(32)), swa_attention_layer_ids=[], num_kv_heads=8,
                     head_dim=128), dict(page_size=16, tp_size=2), None),
    "default_eagle": (dict(full_attention_layer_ids=list(range(32)), swa_attention_layer_ids=[], num_kv_heads=8,
                           head_dim=128), {}, dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=1,
                                               num_draft_tokens=4)),
    "mla": (dict(full_attention_layer_ids=list(range(61)), swa_attention_layer_ids=[], num_kv_heads=1, head_dim=576,
                 kv_lora_rank=512, qk_rope_head_dim=64), dict(kv_cache_dtype="fp8_e4m3", page_size=64), None),
    "hybrid": (dict(full_attention_layer_ids=list(range(0, 48, 6)), swa_attention_layer_ids=[
        i for i in range(48) if i % 6], num_kv_heads=8, head_dim=128, sliding_window_size=4096),
        dict(page_size=64, swa_full_tokens_ratio=0.3), None),
    "all_swa": (dict(full_attention_layer_ids=[], swa_attention_layer_ids=list(range(24)), num_kv_heads=4,
                     head_dim=64, sliding_window_size=128), {}, None),
    "request_cap": (dict(full_attention_layer_ids=[0, 5], swa_attention_layer_ids=[1, 2, 3, 4], num_kv_heads=8,
                       head_dim=128, sliding_window_size=1024),
                  dict(max_running_requests=64, chunked_prefill_size=8192, disable_radix_cache=True, page_size=32),
                  dict(algorithm="dflash", draft_num_layers=2, dflash_draft_cell_size_per_token=4096,
                       num_draft_tokens=8)),
}


@settings(max_examples=BATCH_EXAMPLES)
@given(
    scenario=st.sampled_from(sorted(SCENARIOS)),
    budgets=st.lists(BUDGETS, min_size=0, max_size=300),
    as_list=st.booleans(),
)
def test_calculate_pool_sizes_many_equals_per_budget(scenario: str, budgets: list[int], as_list: bool) -> None:
    m, s, spec = SCENARIOS[scenario]
    cfg = create_pool_configurator(
        ModelGeometry(**m), ServingConfig(**s), SpeculativeConfig(**spec) if spec is not None else None
    )
    res = cfg.calculate_pool_sizes_many(budgets if as_list else np.array(budgets, dtype=np.int64))
    _check_result_arrays(res, len(budgets))
    got = batch_rows(res)
    for a, g in zip(budgets, got):
        try:
            r = cfg.calculate_pool_sizes(a)
            want = (r.max_total_num_tokens, _none(r.full_max_total_num_tokens), _none(r.swa_max_total_num_tokens), 0)
        except KVBudgetError as e:
            want = (0, 0, 0, STATUS_OF_CODE[e.code])
        assert g == want, f"budget {a}"


def test_calculate_pool_sizes_many_equals_plan_many_one_setup() -> None:
    """calculate_pool_sizes_many and plan_many with only the budget varying agree (both one-setup paths)."""
    budgets = np.array([-(2**40), -1, 0, 1, 10**6, 10**9, 10**10, 10**12, 2**62, I64_MAX, I64_MIN], dtype=np.int64)
    cfg = create_pool_configurator(
        ModelGeometry(list(range(0, 48, 6)), [i for i in range(48) if i % 6], 8, 128, sliding_window_size=4096),
        ServingConfig(page_size=64, swa_full_tokens_ratio=0.3),
    )
    a = cfg.calculate_pool_sizes_many(budgets)
    b = plan_many(budgets, num_full_layers=8, num_swa_layers=40, num_kv_heads=8, head_dim=128,
                  sliding_window_size=4096, page_size=64, swa_full_tokens_ratio=0.3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


# --------------------------------------------------------------------------
# Shapes: lengths, empty batches, scalars only
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(available_bytes=np.arange(3, dtype=np.int64) * 10**9, num_full_layers=np.array([1, 2]), num_kv_heads=8,
             head_dim=128),
        dict(available_bytes=np.arange(3, dtype=np.int64) * 10**9, num_full_layers=32, num_kv_heads=8, head_dim=128,
             page_size=np.array([1])),  # no broadcasting of length-1 arrays
        dict(available_bytes=10**10, num_full_layers=np.array([1, 2, 3]), num_kv_heads=[8, 8], head_dim=128),
        dict(available_bytes=10**10, swa_full_tokens_ratio=np.array([0.5, 0.8]), algorithm=["eagle"] * 3, **BASE),
        dict(available_bytes=10**10, max_running_requests=[None, 4], kv_cache_dtype=np.zeros(3, np.uint8), **BASE),
        dict(available_bytes=np.zeros(0, np.int64), is_draft_worker=np.array([True]), **BASE),
    ],
)
def test_mismatched_lengths_raise(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidConfigError, match="different lengths"):
        plan_many(**kwargs)


def test_calculate_pool_sizes_many_rejects_two_dimensional() -> None:
    cfg = create_pool_configurator(ModelGeometry(list(range(4)), [], 8, 128), ServingConfig())
    with pytest.raises((InvalidConfigError, TypeError, ValueError)):
        cfg.calculate_pool_sizes_many(np.zeros((2, 2), np.int64))


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(available_bytes=np.zeros(0, np.int64), **BASE),
        dict(available_bytes=[], **BASE),
        dict(available_bytes=10**10, num_full_layers=np.zeros(0, np.int64), num_kv_heads=8, head_dim=128),
        dict(available_bytes=np.zeros(0, np.int64), kv_cache_dtype=[], algorithm=np.array([], dtype=object),
             swa_full_tokens_ratio=np.zeros(0), is_draft_worker=[], max_running_requests=[], **BASE),
    ],
)
def test_empty_batch_gives_empty_arrays(kwargs: dict[str, Any]) -> None:
    """Zero rows are fine: four empty arrays of the right dtypes, no error."""
    res = plan_many(**kwargs)
    _check_result_arrays(res, 0)
    assert res.error_codes() == []


def test_calculate_pool_sizes_many_empty() -> None:
    cfg = create_pool_configurator(ModelGeometry(list(range(4)), [], 8, 128), ServingConfig())
    for empty in (np.zeros(0, np.int64), []):
        _check_result_arrays(cfg.calculate_pool_sizes_many(empty), 0)


def test_all_scalars_is_one_row() -> None:
    res = plan_many(10**10, **BASE)
    _check_result_arrays(res, 1)
    r = create_pool_configurator(ModelGeometry(list(range(32)), [], 8, 128), ServingConfig()).calculate_pool_sizes(
        10**10)
    assert batch_rows(res) == [(r.max_total_num_tokens, -1, -1, 0)]


def test_status_helpers() -> None:
    res = plan_many(np.array([10**10, -1, 10**10], np.int64), page_size=[1, 1, 0], **BASE)
    assert res.ok.tolist() == [True, False, False]
    assert res.error_codes() == ["ok", "not_enough_memory", "invalid_config"]
