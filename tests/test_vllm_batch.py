"""``kvbudget.vllm.plan_many``: every row is ``kvbudget.vllm.plan``'s answer for that row's
budget and ``max_model_len`` (which the vLLM differentials hold to vLLM's own code), failures
included, by status."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import vllm_cases

from kvbudget import vllm
from kvbudget.errors import InvalidConfigError

CODES = vllm.VLLM_STATUS_CODES


def _one(model: vllm.Layers, budget: int, engine: vllm.EngineConfig) -> tuple[Any, ...]:
    """``plan``'s row: (num_blocks, max_model_len, max_concurrency, tokens, status)."""
    try:
        p = vllm.plan(model, budget, engine)
    except vllm.VllmStartupError:
        return (0, 0, 0.0, 0, CODES["startup"])
    except vllm.VllmError as e:
        return (0, 0, 0.0, 0, CODES["input" if e.vllm_error_type == "Input" else "refused"])
    return (p.num_blocks, p.max_model_len, p.max_concurrency, p.kv_cache_size_tokens, CODES["ok"])


def _rows(res: vllm.VllmBatchResult) -> list[tuple[Any, ...]]:
    return [(int(a), int(b), float(c), int(d), int(s)) for a, b, c, d, s in zip(*res)]


@pytest.mark.parametrize("seed", range(40))
def test_rows_are_plans(seed: int) -> None:
    """Seeded deployments, each over 24 budgets (tiny to huge) and runs of lengths."""
    layers, _, engine = vllm_cases.deployment(seed)
    r = random.Random(seed)
    try:
        model = vllm.layers([vllm.LayerSpec(**x) for x in layers])
    except vllm.VllmError:
        return  # a layer refused before any row: plan_many raises as layers() does
    config = vllm.EngineConfig(**engine)
    budgets = [r.choice((0, 1 << 20, 1 << 28, 1 << 30, 8 << 30, 40 << 30, 1 << 40)) + r.randrange(1 << 20)
               for _ in range(24)]  # fmt: skip
    lengths = sorted(r.choice((1, 2048, 32768, 131072, 1 << 20)) for _ in range(24))
    for kw in ({}, {"max_model_len": lengths}):
        got = _rows(vllm.plan_many(model, np.array(budgets), config, **kw))
        want = [_one(model, b, config if not kw else vllm.EngineConfig(**{**engine, "max_model_len": m}))
                for b, m in zip(budgets, lengths)]  # fmt: skip
        assert got == want


def test_auto_fit_rows_and_scalars() -> None:
    """``"auto"`` lengths fit per row; a scalar budget or length is one row or every row."""
    spec = [vllm.LayerSpec(f"model.layers.{i}.self_attn.attn", "full", num_kv_heads=8, head_size=128)
            for i in range(8)]  # fmt: skip
    model = vllm.layers(spec)
    auto = vllm.EngineConfig(max_model_len="auto", derived_max_model_len=1 << 20)
    budgets = [1 << 16, 1 << 20, 1 << 26, 1 << 30, 1 << 34]
    got = _rows(vllm.plan_many(model, budgets, auto))
    assert got == [_one(model, b, auto) for b in budgets]
    assert {s for *_, s in got} == {CODES["ok"], CODES["startup"]}
    assert _rows(vllm.plan_many(spec, 1 << 30)) == [_one(model, 1 << 30, vllm.EngineConfig())]
    assert _rows(vllm.plan_many(model, budgets, max_model_len=4096)) == [
        _one(model, b, vllm.EngineConfig(max_model_len=4096)) for b in budgets]  # fmt: skip


def test_refusals() -> None:
    """An engine the declaration refuses is an input failure of every row; mismatched columns
    and negative lengths are errors of the call."""
    model = vllm.layers([vllm.LayerSpec("a", "full", num_kv_heads=8, head_size=128)])
    res = vllm.plan_many(model, [1 << 30, 1 << 31], vllm.EngineConfig(block_size=-1))
    assert res.status.tolist() == [CODES["input"]] * 2 and res.num_blocks.tolist() == [0, 0]
    with pytest.raises(InvalidConfigError, match="different lengths"):
        vllm.plan_many(model, [1 << 30, 1 << 31], max_model_len=[1024])
    with pytest.raises(InvalidConfigError, match="max_model_len must be >= 0"):
        vllm.plan_many(model, [1 << 30], max_model_len=[-1])
    with pytest.raises(TypeError):
        vllm.plan_many(model, [1.5])


def test_a_compressed_cache_vllm_refuses_after_the_capacity_step() -> None:
    """QSA's caches with 3 tokens per state, which the scheduler block size (16) does not align
    with: vLLM refuses each row that gets past its capacity step (a row without memory is still a
    startup failure); without prefix caching those rows plan."""
    spec = [x for i in range(2) for x in (
        vllm.LayerSpec(f"model.layers.{i}.self_attn.attn", "full", num_kv_heads=1, head_size=64),
        vllm.LayerSpec(f"model.layers.{i}.self_attn.indexer.raw_key_cache", "circular_buffer", num_kv_heads=1,
                       head_size=128, head_size_v=0, block_size=8),
        vllm.LayerSpec(f"model.layers.{i}.self_attn.indexer.compressed_key_cache", "mla", num_kv_heads=1,
                       head_size=512, tokens_per_state=3))]  # fmt: skip
    model = vllm.layers(spec)
    budgets = [1 << 16, 1 << 30, 1 << 34]
    for config in (vllm.EngineConfig(), vllm.EngineConfig(enable_prefix_caching=False)):
        got = _rows(vllm.plan_many(model, budgets, config, max_model_len=[8192] * 3))
        want = [_one(model, b, replace(config, max_model_len=8192)) for b in budgets]
        assert got == want
        past = CODES["refused" if config.enable_prefix_caching else "ok"]
        assert [s for *_, s in got] == [CODES["startup"], past, past]
