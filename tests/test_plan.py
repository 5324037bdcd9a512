"""The exact plan's API: plan_for_config, fits, JSON, alignment (REFERENCE section 3)."""

from __future__ import annotations

import json

import pytest

import kvbudget

GIB = 1 << 30


def chunk_cap() -> kvbudget.PoolConfiguratorBase:
    m = kvbudget.ModelGeometry(list(range(1, 36, 2)), list(range(0, 36, 2)), 8, 64, sliding_window_size=127)
    s = kvbudget.ServingConfig(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                               disable_radix_cache=True)
    return kvbudget.create_pool_configurator(m, s, kvbudget.SpeculativeConfig("eagle3", 1, 3, 1, 4))


def test_plan_for_config_reproduces_the_constraint_path_exactly() -> None:
    cfg = chunk_cap()
    # A token count below the SWA cap: SGLang clamps the SWA pool to it.
    config = cfg.calculate_pool_sizes_from_max_tokens(30_000)
    assert config.swa_max_total_num_tokens == 30_000 < cfg.swa_cap
    plan = cfg.plan_for_config(config)
    assert plan.fit == "given"
    assert plan.config == config
    assert plan.pool("swa").tokens == 30_000
    assert plan.pool("full").tokens == plan.pool("draft").tokens == config.full_max_total_num_tokens
    assert plan.available_bytes == plan.total_bytes and plan.leftover_bytes == 0
    with_budget = cfg.plan_for_config(config, 40 * GIB)
    assert with_budget.leftover_bytes == 40 * GIB - plan.total_bytes


def test_plan_rejects_given_fit() -> None:
    with pytest.raises(kvbudget.InvalidConfigError, match="given"):
        chunk_cap().plan(GIB, fit="given")  # type: ignore[arg-type]
    with pytest.raises(kvbudget.InvalidConfigError, match="fit"):
        chunk_cap().plan(GIB, fit="best")  # type: ignore[arg-type]


def test_tensor_offsets_are_aligned_and_counted() -> None:
    # mxfp8 scale tensors have odd sizes: the next tensor starts at the next 256-byte boundary.
    m = kvbudget.ModelGeometry([1, 3], [0, 2], 8, 64, sliding_window_size=127)
    cfg = kvbudget.create_pool_configurator(m, kvbudget.ServingConfig(kv_cache_dtype="mxfp8", tp_size=8))
    plan = cfg.plan(GIB)
    align = kvbudget._core.TENSOR_ALIGNMENT
    assert align == 256
    assert plan.alignment_bytes > 0
    assert plan.tensor_bytes + plan.alignment_bytes == plan.total_bytes <= GIB
    for pool in plan.pools:
        end = 0
        for t in pool.tensors:
            assert t.offset % align == 0 and t.offset == -(-end // align) * align
            end = t.offset + t.nbytes
        assert end == pool.nbytes


def test_json_round_trip_and_tamper_detection() -> None:
    plan = chunk_cap().plan(40 * GIB)
    again = kvbudget.PoolPlan.from_json(plan.to_json())
    assert again == plan
    doc = json.loads(plan.to_json())
    doc["total_bytes"] += 1
    with pytest.raises(kvbudget.InvalidConfigError, match="total_bytes"):
        kvbudget.PoolPlan.from_json(json.dumps(doc))
    doc = json.loads(plan.to_json())
    doc["pools"][0]["tensors"][1]["offset"] += 256
    with pytest.raises(kvbudget.InvalidConfigError, match="offset"):
        kvbudget.PoolPlan.from_json(json.dumps(doc))
    with pytest.raises(kvbudget.InvalidConfigError, match="malformed"):
        kvbudget.PoolPlan.from_json("{")


def test_sglang_fit_over_commit_example_1() -> None:
    full = [i for i in range(62) if i % 6 == 5]
    m = kvbudget.ModelGeometry(full, [i for i in range(62) if i % 6 != 5], 16, 128, sliding_window_size=1024)
    cfg = kvbudget.create_pool_configurator(m, kvbudget.ServingConfig(page_size=64),
                                            kvbudget.SpeculativeConfig("eagle3", 1))
    sg = cfg.plan(40 * GIB, fit="sglang")
    assert (sg.over_budget_bytes, sg.padding_bytes) == (5_242_880, 33_030_144)
    ex = cfg.plan(40 * GIB)
    assert ex.over_budget_bytes == 0 and ex.total_bytes <= 40 * GIB
    # One page fewer than SGLang: 99,584 full tokens.
    assert ex.config.full_max_total_num_tokens == 99_584
    assert cfg.bytes_for_tokens(99_584 + 64) > 40 * GIB
