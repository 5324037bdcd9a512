"""INV-8 over the Python API: bad input gives a typed error, never a panic or a wrong number.

Hypothesis drives the value constructors, the configurators and the batch API
with edge integers (0, 1, 2**63 - 1, 2**63, -2**63, 2**64, huge negatives),
NaN and infinities, negative values, layer id lists of 10**5 ids, duplicate
ids, and wrong types (str where an int goes, float where an int goes, None
where a value is required, bools). The only exceptions allowed out of
kvbudget are ``kvbudget.KVBudgetError`` subclasses, ``TypeError`` and
``OverflowError``. ``pyo3_runtime.PanicException`` derives from
``BaseException``, so every call is guarded with ``except BaseException``.
A successful ``plan(fit="exact")`` is never over budget.

Gaps found by fuzzing are pinned as regression tests in test_robustness_regressions.py.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget import (
    DraftGeometry,
    InvalidConfigError,
    KVBudgetError,
    ModelGeometry,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
)

from robustness_guard import UNSET, guarded

# profile // 10: "ci" 1,000 examples per property, "dev" 50.
N = max(25, settings.default.max_examples // 10)
PROPERTY = settings(max_examples=N, suppress_health_check=list(HealthCheck))

# Above this many layers (target plus draft) the exact plan materialises one
# entry per layer and exhausts memory instead of raising (see
# test_plan_with_billions_of_draft_layers_raises in test_robustness_regressions.py),
# so the properties do not call plan()/bytes_for_tokens() there.
PLAN_LAYER_LIMIT = 1 << 17


# ---------------------------------------------------------------------------
# Strategies

EDGE_INTS = [
    0, 1, 2, 3, -1, -2, 63, 64, 2**31, 2**32 - 1, 2**32, 2**53, 2**53 + 1,
    2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, -(10**30), 10**30,
]
EDGE_FLOATS = [
    math.nan, math.inf, -math.inf, 0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e-300,
    1e300, 1.7976931348623157e308, -1.0, 1e-9, 0.1, 0.5, 0.8, 1.0, 2.0, 9.3e18,
]
WRONG_TYPES = ["8", "", "nan", None, 1.5, math.nan, math.inf, b"1", [1], (1,), {"a": 1}, 1j]

edge_int = st.sampled_from(EDGE_INTS) | st.integers(-(2**70), 2**70)
wrong_type = st.sampled_from(WRONG_TYPES)


def int_arg(*realistic: int) -> st.SearchStrategy[Any]:
    """Mostly a realistic value, often an edge, sometimes a wrong type or a bool."""
    return st.one_of(
        st.sampled_from(realistic), st.sampled_from(realistic), st.sampled_from(realistic),
        edge_int, wrong_type, st.booleans(),
    )


def opt_int_arg(*realistic: int) -> st.SearchStrategy[Any]:
    return st.none() | int_arg(*realistic)


float_arg = st.one_of(
    st.sampled_from([0.8, 0.5, 0.1, 1.0]),
    st.sampled_from(EDGE_FLOATS),
    st.floats(),
    edge_int,
    st.sampled_from(["0.8", None, True]),
)

bool_arg = st.booleans() | st.booleans() | st.booleans() | st.sampled_from([0, 1, None, "yes", 1.0])

DTYPES = ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "fp4_mx_block16", "bfloat16", "half",
          "float", "fp8", "FP8_E4M3", "fp4", "int8", "", " bf16"]
ALGORITHMS = ["none", "eagle", "eagle3", "nextn", "mtp", "standalone", "ngram", "dflash", "EAGLE", "",
              "medusa"]
MODES = ["null", "prefill", "decode", "none", "Decode", "", "both"]


def name_arg(names: list[str]) -> st.SearchStrategy[Any]:
    return st.sampled_from(names) | st.sampled_from(names) | st.sampled_from([None, 1, 1.5, b"bf16", ["bf16"]])


HUGE = list(range(100_000))


@st.composite
def layer_ids(draw: st.DrawFn) -> tuple[Any, Any]:
    kind = draw(st.integers(0, 11))
    if kind <= 6:  # a realistic split of 0..n, shuffled or interleaved
        nf, ns = draw(st.integers(0, 48)), draw(st.integers(0, 48))
        ids = list(range(nf + ns))
        if ids and draw(st.booleans()):
            ids = draw(st.permutations(ids))
        return ids[:nf], ids[nf:]
    if kind == 7:  # duplicates likely, inside a list or across both
        small = st.lists(st.integers(0, 40), max_size=12)
        return draw(small), draw(small)
    if kind == 8:  # 10**5 ids
        return draw(st.sampled_from([
            (HUGE, []), ([], HUGE), (HUGE[:60_000], HUGE[60_000:]), (HUGE + [7], []),
            (HUGE, [99_999]), (HUGE[::2], HUGE[1::2]),
        ]))
    if kind == 9:  # out-of-range ids
        edge_ids = st.lists(st.sampled_from([-1, 2**63 - 1, 2**63, -(2**63), 2**64, 10**30, 0]), max_size=4)
        return draw(edge_ids), draw(edge_ids)
    if kind == 10:  # ids near the top of the range
        n = draw(st.integers(1, 8))
        return [2**63 - 1 - i for i in range(n)], [2**62 + i for i in range(draw(st.integers(0, 4)))]
    wrong = st.sampled_from(["0,1", None, 5, [1.5], [None], ["0"], [True, False], {1, 2}, b"\x00"])
    return draw(wrong | st.just([0, 1])), draw(wrong | st.just([]))


@st.composite
def geometry_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    full, swa = draw(layer_ids())
    kw: dict[str, Any] = {
        "full_attention_layer_ids": full,
        "swa_attention_layer_ids": swa,
        "num_kv_heads": draw(int_arg(1, 2, 8, 16, 64)),
        "head_dim": draw(int_arg(64, 128, 256)),
    }
    for key, vals in [
        ("v_head_dim", (64, 128)),
        ("swa_num_kv_heads", (1, 4, 8)),
        ("swa_head_dim", (64, 128)),
        ("swa_v_head_dim", (64, 128)),
        ("sliding_window_size", (0, 127, 4095)),
    ]:
        if draw(st.booleans()):
            kw[key] = draw(opt_int_arg(*vals))
    if draw(st.integers(0, 6)) == 0:
        kw["kv_lora_rank"] = draw(opt_int_arg(512, 1))
        kw["qk_rope_head_dim"] = draw(opt_int_arg(64, 0))
    return kw


@st.composite
def serving_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    options: list[tuple[str, st.SearchStrategy[Any]]] = [
        ("kv_cache_dtype", name_arg(DTYPES)),
        ("page_size", int_arg(1, 16, 64)),
        ("tp_size", int_arg(1, 2, 8)),
        ("dcp_size", int_arg(1, 2)),
        ("attn_dp_size", int_arg(1, 2, 8)),
        ("swa_full_tokens_ratio", float_arg),
        ("max_running_requests", opt_int_arg(1, 64, 256)),
        ("chunked_prefill_size", opt_int_arg(512, 8192)),
        ("disable_radix_cache", bool_arg),
        ("disable_overlap_schedule", bool_arg),
        ("disaggregation_mode", name_arg(MODES)),
        ("disaggregation_decode_extra_slots", int_arg(0, 2, 8)),
        ("swa_eviction_interval", int_arg(128, 0, 4, -5)),
        ("disable_hybrid_swa_memory", bool_arg),
        ("is_draft_worker", bool_arg),
    ]
    for key, strategy in options:
        if draw(st.integers(0, 2)) == 0:
            kw[key] = draw(strategy)
    return kw


@st.composite
def spec_kwargs(draw: st.DrawFn) -> Optional[dict[str, Any]]:
    if draw(st.integers(0, 3)) == 0:
        return None
    kw: dict[str, Any] = {"algorithm": draw(name_arg(ALGORITHMS))}
    for key, strategy in [
        ("draft_num_layers", int_arg(0, 1, 2, 4)),
        ("num_steps", opt_int_arg(0, 1, 3)),
        ("eagle_topk", opt_int_arg(0, 1, 4)),
        ("num_draft_tokens", opt_int_arg(0, 4, 8)),
        ("banded_draft_layers", int_arg(0, 1)),
        ("dflash_draft_cell_size_per_token", opt_int_arg(1, 4096)),
    ]:
        if draw(st.booleans()):
            kw[key] = draw(strategy)
    if draw(st.integers(0, 4)) == 0:
        kw["draft"] = {
            "num_layers": draw(int_arg(1, 2)),
            "num_kv_heads": draw(int_arg(1, 8)),
            "head_dim": draw(int_arg(64, 128)),
            "v_head_dim": draw(opt_int_arg(64)),
            "kv_cache_dtype": draw(st.none() | name_arg(DTYPES)),
            "capacity": draw(st.none() | st.sampled_from(["full", "swa", "FULL", "both", 1])),
        }
    return kw


budget_arg = st.one_of(
    st.integers(1 << 20, 1 << 40), st.integers(1 << 20, 1 << 40), st.integers(-(1 << 20), 1 << 20),
    edge_int, st.sampled_from([1.5e9, math.nan, None, "1e9"]),
)
tokens_arg = st.integers(-(1 << 10), 1 << 24) | edge_int | st.sampled_from([1.5, None, "10"])
page_arg = st.none() | st.none() | int_arg(1, 16, 64)
fit_arg = st.sampled_from(["exact", "exact", "sglang", "EXACT", "Sglang", "bogus", "", None, 1])
FACTORIES: list[Callable[..., Any]] = [
    create_pool_configurator, create_pool_configurator,
    kvbudget.DefaultPoolConfigurator, kvbudget.HybridSWAPoolConfigurator, kvbudget.SWARequestCapPoolConfigurator,
]


def plan_layers(cfg: Any) -> int:
    spec = cfg.spec
    draft = spec.draft.num_layers if spec.draft is not None else 0
    return int(cfg.model.num_layers) + max(int(spec.draft_num_layers), draft)


def build(geom: dict[str, Any], serving: dict[str, Any], spec: Optional[dict[str, Any]],
          factory: Callable[..., Any]) -> Any:
    """Builds values and a configurator through the public API; UNSET where an input is rejected."""
    model = guarded(ModelGeometry, **geom)
    sv = guarded(ServingConfig, **serving)
    sp: Any = None
    if spec is not None:
        spec = dict(spec)
        if "draft" in spec:
            draft = guarded(DraftGeometry, **spec["draft"])
            spec["draft"] = None if draft is UNSET else draft
        sp = guarded(SpeculativeConfig, **spec)
    for v in (model, sv, sp):
        if v is not UNSET and v is not None:
            guarded(repr, v)
            guarded(v.to_json)
    if UNSET in (model, sv, sp):
        return UNSET
    return guarded(factory, model, sv, sp)


def check_exact_plan(plan: Any, budget: int) -> None:
    assert plan.fit == "exact"
    assert plan.available_bytes == budget
    assert plan.total_bytes <= budget, f"exact plan over budget: {plan.total_bytes} > {budget}"
    assert plan.leftover_bytes >= 0 and plan.over_budget_bytes == 0
    assert plan.total_bytes == sum(p.nbytes for p in plan.pools)
    assert plan.tensor_bytes + plan.alignment_bytes == plan.total_bytes
    assert plan.config.max_total_num_tokens > 0
    for pool in plan.pools:
        assert pool.tokens % plan.page_size == 0
        assert pool.rows == pool.tokens + plan.page_size


def exercise(cfg: Any, budget: Any, tokens: Any, page: Any, fit: Any) -> None:
    for attr in ("cell_size", "draft_terms", "model", "serving", "spec", "kind"):
        guarded(getattr, cfg, attr)
    guarded(repr, cfg)
    sizes = guarded(cfg.calculate_pool_sizes, budget, page)
    if sizes is not UNSET:
        p = page if page is not None else cfg.serving.page_size
        assert sizes.max_total_num_tokens > 0
        assert sizes.max_total_num_tokens % p == 0
    guarded(cfg.calculate_pool_sizes_from_max_tokens, tokens, page)
    if plan_layers(cfg) > PLAN_LAYER_LIMIT:
        return
    plan = guarded(cfg.plan, budget, fit)
    if plan is not UNSET and plan.fit == "exact":
        check_exact_plan(plan, budget)
    guarded(cfg.bytes_for_tokens, tokens)


# ---------------------------------------------------------------------------
# Properties


@PROPERTY
@given(geometry_kwargs(), serving_kwargs(), spec_kwargs(), st.sampled_from(FACTORIES),
       budget_arg, tokens_arg, page_arg, fit_arg)
def test_scalar_api_raises_only_typed_errors(
    geom: dict[str, Any], serving: dict[str, Any], spec: Optional[dict[str, Any]],
    factory: Callable[..., Any], budget: Any, tokens: Any, page: Any, fit: Any,
) -> None:
    cfg = build(geom, serving, spec, factory)
    if cfg is not UNSET:
        exercise(cfg, budget, tokens, page, fit)


# Mostly valid inputs, so that plans are made: the exact plan is never over budget.
_valid_ids = st.tuples(st.integers(0, 64), st.integers(0, 64)).filter(lambda t: sum(t) > 0)


@PROPERTY
@given(
    ids=_valid_ids,
    heads=st.sampled_from([1, 2, 4, 8, 16, 64]),
    dims=st.tuples(st.sampled_from([64, 96, 128, 192, 256]), st.none() | st.sampled_from([64, 128, 512])),
    window=st.none() | st.sampled_from([0, 127, 1023, 4095]),
    mla=st.none() | st.tuples(st.sampled_from([1, 512]), st.sampled_from([0, 64])),
    dtype=st.sampled_from(DTYPES[:7]),
    page=st.sampled_from([1, 1, 3, 16, 64, 256]),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    ratio=st.sampled_from([0.8, 0.5, 0.1, 1.0, 1e-9, 5.0]) | st.floats(1e-6, 10.0),
    chunk=st.none() | st.tuples(st.integers(1, 512), st.sampled_from([512, 8192])),
    algorithm=st.sampled_from(["none", "eagle", "eagle3", "nextn", "standalone", "ngram", "dflash"]),
    d=st.integers(0, 4),
    dflash=st.none() | st.sampled_from([1, 4096, 2**20]),
    draft=st.none() | st.tuples(st.integers(1, 3), st.sampled_from([1, 8]), st.sampled_from([64, 128]),
                                st.sampled_from([None, "fp8", "bf16"]), st.sampled_from([None, "full", "swa"])),
    hybrid_off=st.booleans(),
    budget=st.integers(-(1 << 20), 1 << 44) | st.sampled_from([0, 1, 2**63 - 1, -(2**63)]),
)
def test_exact_plan_is_never_over_budget(
    ids: tuple[int, int], heads: int, dims: tuple[int, Optional[int]], window: Optional[int],
    mla: Optional[tuple[int, int]], dtype: str, page: int, tp: int, ratio: float,
    chunk: Optional[tuple[int, int]], algorithm: str, d: int, dflash: Optional[int], draft: Any,
    hybrid_off: bool, budget: int,
) -> None:
    nf, ns = ids
    if mla is not None:
        nf, ns = nf + ns, 0
    geom = dict(
        full_attention_layer_ids=list(range(1, 2 * nf, 2)), swa_attention_layer_ids=list(range(0, 2 * ns, 2)),
        num_kv_heads=heads, head_dim=dims[0], v_head_dim=dims[1], sliding_window_size=window,
        kv_lora_rank=mla[0] if mla else None, qk_rope_head_dim=mla[1] if mla else None,
    )
    serving = dict(
        kv_cache_dtype=dtype, page_size=page, tp_size=tp, swa_full_tokens_ratio=ratio,
        max_running_requests=chunk[0] if chunk else None, chunked_prefill_size=chunk[1] if chunk else None,
        disable_radix_cache=chunk is not None, disable_hybrid_swa_memory=hybrid_off,
    )
    spec: dict[str, Any] = dict(algorithm=algorithm, draft_num_layers=d, dflash_draft_cell_size_per_token=dflash)
    if draft is not None:
        spec["draft"] = dict(zip(["num_layers", "num_kv_heads", "head_dim", "kv_cache_dtype", "capacity"], draft))
        spec["draft_num_layers"] = 0
    cfg = build(geom, serving, spec, create_pool_configurator)
    if cfg is UNSET:
        return
    plan = guarded(cfg.plan, budget, "exact")
    if plan is not UNSET:
        check_exact_plan(plan, budget)
        # One more page does not fit (INV-2).
        more = guarded(cfg.bytes_for_tokens, plan.config.max_total_num_tokens + page)
        assert more is UNSET or more > budget
    sg = guarded(cfg.plan, budget, "sglang")
    sizes = guarded(cfg.calculate_pool_sizes, budget)
    if sg is not UNSET:
        assert sizes is not UNSET and sg.config == sizes


int_col = st.one_of(
    edge_int, st.integers(-4, 300), st.none(),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=4).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.sampled_from([0, 1, 8, 128, -1, 2**63 - 1, -(2**63)]), min_size=1, max_size=4),
)  # wrong scalar types in batch columns: see test_plan_many_wrong_types_raise_type_error


@PROPERTY
@given(
    cols=st.dictionaries(
        st.sampled_from([
            "num_swa_layers", "v_head_dim", "swa_num_kv_heads", "sliding_window_size", "kv_lora_rank",
            "qk_rope_head_dim", "page_size", "tp_size", "dcp_size", "attn_dp_size", "max_running_requests",
            "chunked_prefill_size", "disaggregation_decode_extra_slots", "swa_eviction_interval",
            "draft_num_layers", "num_steps", "eagle_topk", "num_draft_tokens", "banded_draft_layers",
            "dflash_draft_cell_size_per_token",
        ]),
        int_col, max_size=6,
    ),
    names=st.fixed_dictionaries({}, optional={
        "kv_cache_dtype": name_arg(DTYPES), "algorithm": name_arg(ALGORITHMS),
        "disaggregation_mode": name_arg(MODES), "swa_full_tokens_ratio": st.sampled_from(EDGE_FLOATS),
        "disable_radix_cache": st.booleans(), "is_draft_worker": st.booleans(),
    }),
    budget=int_col,
    nf=st.sampled_from([1, 4, 61, 0, -1, 2**63 - 1, 2**64, None, "4"]),
)
def test_plan_many_raises_only_typed_errors(cols: dict[str, Any], names: dict[str, Any], budget: Any, nf: Any) -> None:
    kw = dict(cols, **names)
    res = guarded(kvbudget.plan_many, budget, num_full_layers=nf, num_kv_heads=8, head_dim=128, **kw)
    if res is not UNSET:
        n = len(res.status)
        assert all(len(a) == n for a in res)
        assert set(res.status.tolist()) <= {0, 1, 2, 3, 4}
        ok = res.status == 0
        assert (res.max_total_num_tokens[ok] > 0).all()


@PROPERTY
@given(st.lists(st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, 1, -1]), max_size=8))
def test_calculate_pool_sizes_many_matches_scalar(budgets: list[int]) -> None:
    cfg = create_pool_configurator(
        ModelGeometry([1, 3], [0, 2], 8, 128, sliding_window_size=127), ServingConfig(page_size=16)
    )
    res = cfg.calculate_pool_sizes_many(np.array(budgets, dtype=np.int64))
    codes = {"invalid_config": 1, "overflow": 2, "not_enough_memory": 3, "swa_pool_too_small": 4}
    for i, b in enumerate(budgets):
        want = guarded(cfg.calculate_pool_sizes, b)
        if want is UNSET:
            try:
                cfg.calculate_pool_sizes(b)
            except KVBudgetError as e:
                assert res.status[i] == codes[e.code]
        else:
            assert res.status[i] == 0 and res.max_total_num_tokens[i] == want.max_total_num_tokens


# ---------------------------------------------------------------------------
# Deterministic edges


@pytest.mark.parametrize("value", [2**63, 2**64, -(2**63) - 1, 10**30])
def test_out_of_range_ints_raise_overflow_error(value: int) -> None:
    model = ModelGeometry([0, 1], [], 8, 128)
    cfg = create_pool_configurator(model, ServingConfig())
    for call in (
        lambda: ServingConfig(page_size=value),
        lambda: ModelGeometry([0], [], value, 128),
        lambda: ModelGeometry([value], [], 8, 128),
        lambda: SpeculativeConfig("eagle", value),
        lambda: cfg.calculate_pool_sizes(value),
        lambda: cfg.calculate_pool_sizes_from_max_tokens(value),
        lambda: cfg.plan(value),
        lambda: cfg.bytes_for_tokens(value),
    ):
        with pytest.raises((OverflowError, InvalidConfigError)):
            call()


@pytest.mark.parametrize("ratio", [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0])
def test_bad_ratios_are_invalid(ratio: float) -> None:
    with pytest.raises(InvalidConfigError):
        ServingConfig(swa_full_tokens_ratio=ratio)


@pytest.mark.parametrize("ratio", [5e-324, 1e-300, 1e300, 1.7976931348623157e308])
def test_extreme_ratios_give_typed_errors_or_valid_plans(ratio: float) -> None:
    model = ModelGeometry([1, 3], [0, 2], 8, 128, sliding_window_size=127)
    cfg = create_pool_configurator(model, ServingConfig(swa_full_tokens_ratio=ratio))
    for budget in (0, 1 << 30, 1 << 40, 2**63 - 1, -(2**63)):
        exercise(cfg, budget, 1 << 20, None, "exact")
        exercise(cfg, budget, 2**63 - 1, 3, "sglang")


def test_huge_layer_lists_size_and_plan_exactly_up_to_the_cap() -> None:
    """100,000 layers size as SGLang sizes them; an exact plan lists tensors, so it is capped."""
    model = ModelGeometry(HUGE[::2], HUGE[1::2], 8, 128, sliding_window_size=4095)
    cfg = create_pool_configurator(model, ServingConfig(page_size=64))
    assert cfg.calculate_pool_sizes(1 << 44).max_total_num_tokens > 0
    with pytest.raises(InvalidConfigError, match="at most 65536"):
        cfg.plan(1 << 44)
    cap = kvbudget.MAX_PLAN_LAYERS
    at_cap = ModelGeometry(HUGE[: cap : 2], HUGE[1 : cap : 2], 8, 128, sliding_window_size=4095)
    plan = create_pool_configurator(at_cap, ServingConfig(page_size=64)).plan(1 << 44)
    check_exact_plan(plan, 1 << 44)
    assert plan.pool("full").num_layers == plan.pool("swa").num_layers == cap // 2
    with pytest.raises(InvalidConfigError):
        ModelGeometry(HUGE + [0], [], 8, 128)
    with pytest.raises(InvalidConfigError):
        ModelGeometry(HUGE, [HUGE[-1]], 8, 128)


@pytest.mark.parametrize("value", [None, "8", 8.0, 8.5, math.nan, [8], b"8"])
def test_wrong_types_raise_type_error(value: Any) -> None:
    with pytest.raises(TypeError):
        ModelGeometry([0], [], value, 128)
    with pytest.raises(TypeError):
        ServingConfig(tp_size=value)
    cfg = create_pool_configurator(ModelGeometry([0], [], 8, 128), ServingConfig())
    with pytest.raises(TypeError):
        cfg.calculate_pool_sizes(value)
    with pytest.raises(TypeError):
        cfg.plan(value)
