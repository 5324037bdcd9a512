"""Every value type pickles (all protocols) and round-trips equal; so do copy and deepcopy.

Values pickle through ``__reduce__`` -> ``(cls._from_json, (json,))`` (``PoolPlan``:
``PoolPlan.from_json``, which re-checks the plan). The exception classes keep
their type, message and ``.code``; ``AllocationError`` keeps its fields. The
configurators pickle as their inputs and are rebuilt (re-validated).
"""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget import (
    AllocationError,
    DraftGeometry,
    InvalidConfigError,
    KVBudgetError,
    MemoryPoolConfig,
    ModelGeometry,
    NotEnoughMemoryError,
    PlanOverflowError,
    PoolPlan,
    PoolSpec,
    ServingConfig,
    SpeculativeConfig,
    SWAPoolTooSmallError,
    TensorSpec,
    create_pool_configurator,
)

PROTOCOLS = list(range(pickle.HIGHEST_PROTOCOL + 1))
N = max(25, settings.default.max_examples // 20)


def roundtrips(value: Any) -> None:
    """pickle (every protocol), copy and deepcopy give an equal value of the same type."""
    for proto in PROTOCOLS:
        back = pickle.loads(pickle.dumps(value, protocol=proto))
        assert type(back) is type(value)
        assert back == value, f"protocol {proto}: {back!r} != {value!r}"
        assert repr(back) == repr(value)
    for other in (copy.copy(value), copy.deepcopy(value), copy.deepcopy([value, value])[1]):
        assert type(other) is type(value) and other == value


def _models() -> list[ModelGeometry]:
    return [
        ModelGeometry(list(range(32)), [], 8, 128),
        ModelGeometry([1, 3, 5], [0, 2, 4, 6], 8, 64, v_head_dim=96, swa_num_kv_heads=4, swa_head_dim=128,
                      swa_v_head_dim=32, sliding_window_size=4095),
        ModelGeometry([], [2**63 - 1, 0], 1, 1, sliding_window_size=0),
        ModelGeometry(list(range(61)), [], 1, 512, kv_lora_rank=512, qk_rope_head_dim=64),
        ModelGeometry([0], [], 1, 1, kv_lora_rank=1, qk_rope_head_dim=0),
    ]


def _specs() -> list[SpeculativeConfig]:
    return [
        SpeculativeConfig(),
        SpeculativeConfig("eagle", 1, num_steps=3, eagle_topk=1, num_draft_tokens=4),
        SpeculativeConfig("mtp", 2, banded_draft_layers=1),
        SpeculativeConfig("dflash", 1, dflash_draft_cell_size_per_token=2**62),
        SpeculativeConfig("standalone", draft=DraftGeometry(4, 2, 128, 64, kv_cache_dtype="fp8", capacity="swa")),
        SpeculativeConfig("ngram", 2**20, num_steps=2**63 - 1),
    ]


def _servings() -> list[ServingConfig]:
    return [
        ServingConfig(),
        ServingConfig("fp8_e5m2", 64, 8, 2, 4, 0.1, 256, 8192, True, True, "decode", 8, -3, True, True),
        ServingConfig("mxfp8", page_size=2**63 - 1, swa_full_tokens_ratio=5e-324),
        ServingConfig("fp4_mx_block16", swa_full_tokens_ratio=1.7976931348623157e308, swa_eviction_interval=-(2**63)),
    ]


def _plans() -> list[PoolPlan]:
    hybrid = ModelGeometry([1, 3], [0, 2, 4], 8, 128, sliding_window_size=127)
    mla = ModelGeometry(list(range(4)), [], 1, 512, kv_lora_rank=512, qk_rope_head_dim=64)
    cases = [
        (hybrid, ServingConfig(page_size=16), SpeculativeConfig("eagle", 1)),
        (hybrid, ServingConfig("mxfp8", page_size=64, max_running_requests=8, chunked_prefill_size=512,
                               disable_radix_cache=True), None),
        (mla, ServingConfig("fp4_mx_block16"), SpeculativeConfig("dflash", 1, dflash_draft_cell_size_per_token=300)),
        (ModelGeometry([], [0, 1], 2, 64), ServingConfig("fp8"),
         SpeculativeConfig("eagle3", draft=DraftGeometry(1, 2, 64, capacity="swa"))),
    ]
    plans = []
    for model, serving, spec in cases:
        cfg = create_pool_configurator(model, serving, spec)
        plans += [cfg.plan(1 << 32, "exact"), cfg.plan(1 << 32, "sglang")]
    return plans


@pytest.mark.parametrize("value", _models(), ids=repr)
def test_model_geometry(value: ModelGeometry) -> None:
    roundtrips(value)


@pytest.mark.parametrize("value", [s.draft for s in _specs() if s.draft] + [DraftGeometry(2**20, 1, 1)], ids=repr)
def test_draft_geometry(value: DraftGeometry) -> None:
    roundtrips(value)


@pytest.mark.parametrize("value", _specs(), ids=repr)
def test_speculative_config(value: SpeculativeConfig) -> None:
    roundtrips(value)


@pytest.mark.parametrize("value", _servings(), ids=repr)
def test_serving_config(value: ServingConfig) -> None:
    roundtrips(value)


@pytest.mark.parametrize("value", [
    MemoryPoolConfig(1), MemoryPoolConfig(2**63 - 1, 0, 2**63 - 1), MemoryPoolConfig(-(2**63), None, -1),
], ids=repr)
def test_memory_pool_config(value: MemoryPoolConfig) -> None:
    roundtrips(value)
    assert hash(pickle.loads(pickle.dumps(value))) == hash(value)


def test_plans_pools_and_tensors() -> None:
    for plan in _plans():
        roundtrips(plan)
        back = pickle.loads(pickle.dumps(plan))
        assert back.total_bytes == plan.total_bytes and back.config == plan.config
        assert back.pools == plan.pools and back.tensors == plan.tensors
        for pool in plan.pools:
            assert isinstance(pool, PoolSpec)
            roundtrips(pool)
        for t in plan.tensors[:8] + plan.tensors[-8:]:
            assert isinstance(t, TensorSpec)
            roundtrips(t)


# Awkward ratios; the test below covers doubles whose shortest repr once parsed back 1 ulp off.
ROUNDTRIP_RATIOS = [5e-324, 1e-300, 0.1, 0.25, 1 / 3, 0.5, 2 / 3, 0.8, 0.9, 1.0, 1.5, 1e300, 1.7976931348623157e308]


@settings(max_examples=N)
@given(
    ratio=st.sampled_from(ROUNDTRIP_RATIOS),
    page=st.integers(1, 2**63 - 1),
    evict=st.integers(-(2**63), 2**63 - 1),
    mrr=st.none() | st.integers(1, 2**63 - 1),
)
def test_serving_config_floats_and_ints_roundtrip_exactly(ratio: float, page: int, evict: int, mrr: Any) -> None:
    value = ServingConfig(page_size=page, swa_full_tokens_ratio=ratio, swa_eviction_interval=evict,
                          max_running_requests=mrr)
    roundtrips(value)
    back = pickle.loads(pickle.dumps(value))
    assert math.copysign(1.0, back.swa_full_tokens_ratio) == 1.0
    assert back.swa_full_tokens_ratio.hex() == ratio.hex()


@pytest.mark.parametrize("ratio", [0.21789650518671366, 108.83405665963559, 1.0434314963254715e-05,
                                   3.351557984748167e-112])
def test_serving_config_ratio_roundtrips_bit_exactly(ratio: float) -> None:
    value = ServingConfig(swa_full_tokens_ratio=ratio)
    assert pickle.loads(pickle.dumps(value)).swa_full_tokens_ratio.hex() == ratio.hex()


@settings(max_examples=N)
@given(
    ids=st.lists(st.integers(0, 2**63 - 1), unique=True, min_size=1, max_size=40),
    split=st.integers(0, 40),
    dims=st.lists(st.integers(1, 2**63 - 1), min_size=6, max_size=6),
    window=st.none() | st.integers(0, 2**63 - 1),
)
def test_model_geometry_roundtrips(ids: list[int], split: int, dims: list[int], window: Any) -> None:
    value = ModelGeometry(ids[:split], ids[split:], *dims, sliding_window_size=window)
    roundtrips(value)


def test_unpickling_malformed_json_is_a_typed_error() -> None:
    for cls in (ModelGeometry, DraftGeometry, SpeculativeConfig, ServingConfig, MemoryPoolConfig, PoolSpec,
                TensorSpec):
        for bad in ("", "{", "[]", "null", '{"x": 1}'):
            with pytest.raises(InvalidConfigError):
                cls._from_json(bad)
    for bad in ("", "{", "[]"):
        with pytest.raises(InvalidConfigError):
            PoolPlan.from_json(bad)


def test_unpickling_an_inconsistent_plan_is_a_typed_error() -> None:
    plan = _plans()[0]
    text = plan.to_json()
    tampered = text.replace(f'"total_bytes":{plan.total_bytes}', f'"total_bytes":{plan.total_bytes + 1}')
    assert tampered != text
    with pytest.raises(InvalidConfigError):
        PoolPlan.from_json(tampered)


# ---------------------------------------------------------------------------
# Exceptions

EXCEPTIONS = [
    (KVBudgetError, "error"),
    (InvalidConfigError, "invalid_config"),
    (PlanOverflowError, "overflow"),
    (NotEnoughMemoryError, "not_enough_memory"),
    (SWAPoolTooSmallError, "swa_pool_too_small"),
]


@pytest.mark.parametrize("cls,code", EXCEPTIONS, ids=lambda v: getattr(v, "__name__", v))
def test_exception_classes_pickle_with_code(cls: type[KVBudgetError], code: str) -> None:
    e = cls("some message")
    for proto in PROTOCOLS:
        back = pickle.loads(pickle.dumps(e, protocol=proto))
        assert type(back) is cls
        assert back.args == ("some message",) and str(back) == "some message"
        assert back.code == code
        assert isinstance(back, ValueError)
    for back in (copy.copy(e), copy.deepcopy(e)):
        assert type(back) is cls and back.code == code and back.args == e.args


def _raised() -> list[KVBudgetError]:
    model = ModelGeometry([0, 1], [2, 3], 8, 128, sliding_window_size=10**6)
    cfg = create_pool_configurator(model, ServingConfig(page_size=64, swa_full_tokens_ratio=0.1))
    errors: list[KVBudgetError] = []
    for call in (
        lambda: ServingConfig(page_size=0),
        lambda: create_pool_configurator(ModelGeometry([0], [], 8, 128), ServingConfig()).calculate_pool_sizes(-1),
        lambda: cfg.calculate_pool_sizes_from_max_tokens(10_000),
        lambda: create_pool_configurator(ModelGeometry([0], [], 2**62, 2**62), ServingConfig()),
    ):
        with pytest.raises(KVBudgetError) as info:
            call()
        errors.append(info.value)
    return errors


def test_raised_exceptions_pickle_with_code() -> None:
    errors = _raised()
    assert [e.code for e in errors] == ["invalid_config", "not_enough_memory", "swa_pool_too_small", "overflow"]
    for e in errors:
        for proto in PROTOCOLS:
            back = pickle.loads(pickle.dumps(e, protocol=proto))
            assert type(back) is type(e) and back.code == e.code and str(back) == str(e)
        assert copy.deepcopy(e).code == e.code


def test_hf_config_error_pickles() -> None:
    from kvbudget.models.hf import ConfigError

    with pytest.raises(ConfigError) as info:
        ModelGeometry.from_hf_config({"num_hidden_layers": 0})
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is ConfigError and back.code == "invalid_config" and str(back) == str(info.value)
    assert getattr(back, "key", None) == getattr(info.value, "key", None)


def test_allocation_error_pickles() -> None:
    e = AllocationError("out of memory", pool="full", layer_id=3, kind="k", requested_bytes=1 << 30, held_bytes=5)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is AllocationError and back.code == "allocation_failed"
    assert (back.pool, back.layer_id, back.kind, back.requested_bytes, back.held_bytes) == ("full", 3, "k", 1 << 30, 5)
    assert copy.deepcopy(e).held_bytes == 5


# ---------------------------------------------------------------------------
# Configurators


@pytest.mark.parametrize("kind", ["default", "hybrid_swa", "request_cap", "factory"])
def test_configurators_pickle(kind: str) -> None:
    model = ModelGeometry([1, 3], [0, 2], 8, 128, sliding_window_size=127)
    serving = ServingConfig(max_running_requests=8, chunked_prefill_size=512, disable_radix_cache=True)
    spec = SpeculativeConfig("eagle", 1, num_draft_tokens=4)
    classes = {"default": kvbudget.DefaultPoolConfigurator, "hybrid_swa": kvbudget.HybridSWAPoolConfigurator,
               "request_cap": kvbudget.SWARequestCapPoolConfigurator}
    cfg = classes[kind](model, serving, spec) if kind in classes else create_pool_configurator(model, serving, spec)
    back = pickle.loads(pickle.dumps(cfg))
    assert type(back) is type(cfg)
    assert (back.model, back.serving, back.spec) == (model, serving, spec)
    assert back.calculate_pool_sizes(1 << 34) == cfg.calculate_pool_sizes(1 << 34)
    assert copy.deepcopy(cfg).plan(1 << 34) == cfg.plan(1 << 34)
