"""What a hostile user broke (issue 13), each fixed and held here: no panic
reaching Python, plans from JSON held to the whole contract, given pool sizes
page-aligned and of the configurator's shape, one rule for types, bounded
plans, the error family, and optional dependencies that name their extra."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import kvbudget
import numpy as np
import pytest
from kvbudget import (
    InvalidConfigError,
    KVBudgetError,
    MemoryPoolConfig,
    ModelGeometry,
    PlanOverflowError,
    PoolPlan,
    ServingConfig,
    SpeculativeConfig,
)
from kvbudget import workload as W

GIB = 1 << 30
HYBRID = ModelGeometry([0, 6], [1, 2, 3, 4, 5, 7], 8, 128, sliding_window_size=1023)


def hybrid_cfg(**serving: Any) -> kvbudget.PoolConfiguratorBase:
    return kvbudget.create_pool_configurator(HYBRID, ServingConfig(page_size=16, **serving),
                                             SpeculativeConfig("eagle3", 1))


# --------------------------------------------------------------------------- no panic


def test_suggest_swa_ratio_with_a_huge_swa_geometry_is_a_typed_error() -> None:
    huge = ModelGeometry([0], list(range(1, 1 << 10)), 1 << 20, 1 << 20, sliding_window_size=1 << 40)
    cfg = kvbudget.create_pool_configurator(huge, ServingConfig())
    with pytest.raises(KVBudgetError):  # not a PanicException (a BaseException)
        W.suggest_swa_ratio(cfg, [1 << 40, 7], 1 << 62)


def test_from_json_with_huge_padding_is_refused_not_a_panic() -> None:
    doc = json.loads(hybrid_cfg().plan(8 * GIB).to_json())
    for pool in doc["pools"]:
        pool["padding_bytes"] = 2**64 - 1
    plan = PoolPlan.from_json(json.dumps(doc), check=False) if _takes_check() else None
    if plan is not None:
        assert plan.padding_bytes == 2**64 - 1  # saturates, never overflows
    with pytest.raises(InvalidConfigError):
        PoolPlan.from_json(json.dumps(doc))


def _takes_check() -> bool:
    import inspect

    try:
        return "check" in inspect.signature(PoolPlan.from_json).parameters
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------- plans from JSON


def _break(doc: dict[str, Any], how: str) -> None:
    pools = doc["pools"]
    if how == "exact_over_budget":
        doc["available_bytes"] = doc["total_bytes"] - 1
    elif how == "config_disagrees":
        doc["config"]["max_total_num_tokens"] += doc["page_size"]
    elif how == "pool_twice":
        pools.append(pools[0])
    elif how == "layer_without_tensors":
        pools[0]["layer_ids"].append(10_000)
    elif how == "duplicate_tensor":
        pools[0]["tensors"].append(dict(pools[0]["tensors"][-1]))
    elif how == "wrong_dtype":
        t = pools[0]["tensors"][0]
        assert t["kind"] == "k" and t["dtype"] == "bfloat16"
        t["dtype"] = "uint8"
        t["nbytes"] //= 2
    else:  # pragma: no cover
        raise AssertionError(how)


@pytest.mark.parametrize(
    "how",
    ["exact_over_budget", "config_disagrees", "pool_twice", "layer_without_tensors",
     "duplicate_tensor", "wrong_dtype"],
)
def test_from_json_holds_the_whole_contract(how: str) -> None:
    plan = hybrid_cfg().plan(8 * GIB)
    assert PoolPlan.from_json(plan.to_json()) == plan
    doc = json.loads(plan.to_json())
    _break(doc, how)
    with pytest.raises(InvalidConfigError, match="plan"):
        PoolPlan.from_json(json.dumps(doc))


# --------------------------------------------------------------------------- given pool sizes


def test_plan_for_config_needs_aligned_sizes_of_the_configurators_shape() -> None:
    cfg = hybrid_cfg()
    good = cfg.calculate_pool_sizes(8 * GIB)
    assert cfg.plan_for_config(good).config == good
    full, swa = good.full_max_total_num_tokens, good.swa_max_total_num_tokens
    assert full is not None and swa is not None
    for bad in (
        MemoryPoolConfig(full + 1, full + 1, swa),  # not page-aligned
        MemoryPoolConfig(full, full, swa - 1),
        MemoryPoolConfig(0, 0, swa),  # no full pool on a hybrid model
        MemoryPoolConfig(full, None, None),  # Default's shape
        MemoryPoolConfig(full, full - 16, swa),  # full pool is not max_total
    ):
        with pytest.raises(InvalidConfigError, match="plan_for_config"):
            cfg.plan_for_config(bad)
    # RequestCap's constraint path clamps the SWA pool to the cap asked for (SGLang's rule):
    # an unaligned count within a page above the full pool is its own output, nothing else is.
    cap = kvbudget.create_pool_configurator(
        ModelGeometry(list(range(1, 36, 2)), list(range(0, 36, 2)), 8, 64, sliding_window_size=127),
        ServingConfig(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                      disable_radix_cache=True),
        kvbudget.SpeculativeConfig("eagle3", 1, 3, 1, 4),
    )
    clamped = cap.calculate_pool_sizes_from_max_tokens(30_001)
    assert clamped.swa_max_total_num_tokens == 30_001
    assert cap.plan_for_config(clamped).pool("swa").tokens == 30_001
    for swa in (30_001 + 64, 29_951):
        with pytest.raises(InvalidConfigError, match="multiple of page_size"):
            cap.plan_for_config(MemoryPoolConfig(29_952, 29_952, swa))
    default = kvbudget.create_pool_configurator(ModelGeometry([0, 1], [], 8, 128), ServingConfig())
    with pytest.raises(InvalidConfigError, match="shape"):
        default.plan_for_config(MemoryPoolConfig(1024, 1024, 512))


# --------------------------------------------------------------------------- types and limits


def test_byte_counts_beyond_64_bits_are_plan_overflow_errors() -> None:
    cfg = hybrid_cfg()
    with pytest.raises(PlanOverflowError):
        cfg.bytes_for_tokens(2**62)
    with pytest.raises(PlanOverflowError):
        W.min_budget(cfg, 2**40, 2**40)


@pytest.mark.parametrize(
    ("lengths", "weights", "error"),
    [
        (["100"], None, TypeError),
        ([100.7], None, TypeError),
        ([True], None, TypeError),
        ([100, 200], [1e308, 1e308], InvalidConfigError),  # the sum is inf
        ([100], [float("nan")], InvalidConfigError),
        ([100], ["1"], TypeError),
    ],
)
def test_workload_numbers_must_be_numbers(lengths: list[Any], weights: Any, error: type) -> None:
    with pytest.raises(error):
        W.suggest_swa_ratio(hybrid_cfg(), lengths, 8 * GIB, weights=weights)
    assert W.suggest_swa_ratio(hybrid_cfg(), [np.int64(100)], 8 * GIB).ratio > 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: ServingConfig(page_size=True),
        lambda: ModelGeometry([0], [], True, 128),
        lambda: kvbudget.plan_many(available_bytes=GIB, num_full_layers=2, num_kv_heads=8, head_dim=True),
        lambda: kvbudget.plan_many(available_bytes=np.array([True]), num_full_layers=2, num_kv_heads=8,
                                   head_dim=128),
    ],
)
def test_bools_are_not_integers_anywhere(call: Callable[[], Any]) -> None:
    with pytest.raises(TypeError):
        call()


def test_masked_arrays_and_negative_scalars_are_refused() -> None:
    with pytest.raises(TypeError, match="masked"):
        kvbudget.plan_many(available_bytes=np.ma.masked_array([GIB], mask=[1]), num_full_layers=2,
                           num_kv_heads=8, head_dim=128)
    # A negative scalar is checked as the scalar constructor checks it (not "None"):
    # every row is invalid_config, as ServingConfig(max_running_requests=-1) raises.
    with pytest.raises(InvalidConfigError):
        ServingConfig(max_running_requests=-1)
    r = kvbudget.plan_many(available_bytes=[GIB, GIB], num_full_layers=2, num_kv_heads=8,
                           head_dim=128, max_running_requests=-1)
    assert [kvbudget.batch.STATUS_CODES[int(s)] for s in r.status] == ["invalid_config"] * 2


def test_a_plan_holds_at_most_max_plan_layers() -> None:
    assert kvbudget.MAX_PLAN_LAYERS == 1 << 16
    big = ModelGeometry(list(range(kvbudget.MAX_PLAN_LAYERS)), [], 1, 1)
    cfg = kvbudget.create_pool_configurator(big, ServingConfig(), SpeculativeConfig("eagle", 1))
    assert cfg.calculate_pool_sizes(GIB).max_total_num_tokens > 0  # SGLang's sizing has no cap
    with pytest.raises(InvalidConfigError, match="at most 65536 target and draft layers"):
        cfg.plan(GIB)


# --------------------------------------------------------------------------- errors and extras


@pytest.mark.parametrize(
    "lookup",
    [lambda: kvbudget.models.get_preset("gema-3-27b"), lambda: kvbudget.models.get_gpu("h2000")],
)
def test_unknown_names_are_kvbudget_errors_and_key_errors(lookup: Callable[[], Any]) -> None:
    import kvbudget.models  # noqa: F401

    with pytest.raises(KeyError) as info:
        lookup()
    e = info.value
    assert isinstance(e, KVBudgetError) and e.code == "unknown_name" and e.suggestions
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and str(back) == str(e)


def test_optional_dependencies_name_their_extra() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import kvbudget\n"
        "try:\n    kvbudget.allocate\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install 'kvbudget[torch]'" in out.stdout, out


def test_agree_without_torch_names_the_extra() -> None:
    """``agree()`` on a plain install (issue 26): the extra that brings torch, not a bare import error;
    a bad argument still raises its own error first."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import kvbudget\n"
        "from _agree_worker import tp_configurator\n"
        "c = tp_configurator()\n"
        "for budget in (1 << 34, 'x'):\n"
        "    try:\n        kvbudget.agree(c, budget)\n"
        "    except Exception as e:\n        print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith("ModuleNotFoundError kvbudget.agree needs torch") and "kvbudget[torch]" in lines[0]
    assert lines[1] == "InvalidConfigError available_bytes must be an int, got str", lines[1]
