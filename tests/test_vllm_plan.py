"""kvbudget's vLLM mode (``kvbudget.vllm``) held to vLLM 0.33.0's released planning code.

* the worked cases of VLLM.md section 9 (tests/data/vllm_golden.json) reproduce
  through ``kvbudget.vllm``, checked by the same checker the oracle's tests use;
* a differential over ``KVBUDGET_VLLM_CASES`` seeded random deployments
  (tests/vllm_cases.py; 5,000 by default) compares every field of the plan,
  the warnings and log, and the error type, text and estimated length, with
  what tests/vllm_oracle (vLLM's own code) gives; another over
  ``KVBUDGET_VLLM_PACKED_CASES`` (1,000) under block-outer layouts;
* the typed API: defaults from the core, errors in kvbudget's hierarchy.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import pytest
import vllm_differential
from test_vllm_oracle import CASES, check_case
from vllm_differential import Ours

import kvbudget
from kvbudget import vllm

N = int(os.environ.get("KVBUDGET_VLLM_CASES", "5000"))


@pytest.mark.parametrize("case_id", list(CASES))
def test_golden_case(case_id: str) -> None:
    check_case(Ours(), CASES[case_id])  # type: ignore[arg-type]


def test_differential_against_vllm() -> None:
    """Seeds split over the cores (each worker process loads its own oracle)."""
    outcomes = vllm_differential.run("vllm_cases", N, "vLLM differential")
    # The draws reach plans and vLLM's startup failure alike.
    assert outcomes.get("ok", 0) > N // 3 and outcomes.get("ValueError", 0) > N // 50, outcomes


N_PACKED = int(os.environ.get("KVBUDGET_VLLM_PACKED_CASES", "1000"))


def test_block_outer_differential_against_vllm() -> None:
    """Block-outer layouts (tests/vllm_packed_cases.py): grouping case 3, its placement, and
    vLLM's layout refusals, every field compared."""
    import vllm_packed_cases

    outcomes = vllm_differential.run("vllm_packed_cases", N_PACKED, "vLLM block-outer differential")
    # The draws reach packed plans (several uniform-type groups), state buckets among them.
    packed = mamba = 0
    for seed in range(N_PACKED):
        layers, available, engine = vllm_packed_cases.deployment(seed)
        p = Ours.plan(layers, available, engine)
        if p["ok"] and len(p["groups"]) > 1 and all(g["spec"] == "UniformTypeKVCacheSpecs" for g in p["groups"]):
            packed += 1
            mamba += any(x["kind"] == "mamba" for x in layers)
    assert packed > N_PACKED // 20 and mamba > N_PACKED // 200 and outcomes.get("ok", 0) > N_PACKED // 3, (packed, mamba, outcomes)


def test_engine_defaults_are_the_cores() -> None:
    e = vllm.EngineConfig()
    assert (e.block_size, e.max_model_len, e.max_num_batched_tokens, e.async_scheduling) == (16, 131072, 8192, True)
    assert vllm.VLLM_VERSION == "0.33.0"


def test_plan_is_typed_and_its_views_fit() -> None:
    layers = [vllm.LayerSpec(f"model.layers.{i}.self_attn.attn", "full" if i % 6 == 5 else "sliding",
                             num_kv_heads=16, head_size=128, sliding_window=1024) for i in range(62)]  # fmt: skip
    p = vllm.plan(layers, 40 << 30)
    assert (p.num_blocks, p.bytes_per_block, p.kv_cache_size_tokens) == (32768, (1310720,), 291658)
    assert p.warnings == ("Add 8 padding layers, may waste at most 15.38% KV cache memory",)
    assert [len(g.layers) for g in p.groups] == [9, 9, 9, 9, 8, 8, 10]
    for t in p.tensors[0]:
        assert t.offset + (len(t.layers) - 1) * t.layer_stride + p.num_blocks * t.block_stride <= t.size
    assert p.allocated_bytes == (p.num_blocks * p.bytes_per_block[0],)


def test_a_startup_failure_is_not_enough_memory_with_vllms_estimate() -> None:
    layers = [vllm.LayerSpec(f"l{i}", "full", num_kv_heads=8, head_size=128) for i in range(32)]
    with pytest.raises(kvbudget.NotEnoughMemoryError) as info:
        vllm.plan(layers, 8 << 30)
    err = info.value
    assert isinstance(err, vllm.VllmStartupError)
    assert err.vllm_message.startswith("To serve at least one request with the model's max seq len (131072)")
    assert err.estimated_max_model_len == 65520  # VLLM.md s9: the null block costs 16 tokens of M
    ok = vllm.plan(layers, 8 << 30, vllm.EngineConfig(max_model_len="auto", derived_max_model_len=131072))
    assert ok.max_model_len == 65520


def test_auto_fitting_not_one_token_is_a_startup_failure() -> None:
    """vLLM's "Cannot auto-fit max_model_len" is the same startup memory failure (issue 25)."""
    layers = [vllm.LayerSpec(f"l{i}", "full", num_kv_heads=8, head_size=128) for i in range(32)]
    auto = vllm.EngineConfig(max_model_len="auto", derived_max_model_len=131072)
    budget = next(b for b in range(1 << 20, 1 << 30, 1 << 20)  # the smallest budget vLLM gets past the block check
                  if vllm.plan_raw(layers, b, auto).get("error", "").startswith("Cannot auto-fit"))  # fmt: skip
    with pytest.raises(kvbudget.NotEnoughMemoryError) as info:
        vllm.plan(layers, budget, auto)
    assert isinstance(info.value, vllm.VllmStartupError)
    assert info.value.vllm_message.startswith("Cannot auto-fit max_model_len: not enough GPU memory")


def test_refusals_are_invalid_config() -> None:
    bad = [vllm.LayerSpec("a", "sliding", num_kv_heads=8, head_size=128, sliding_window=128)]
    with pytest.raises(kvbudget.InvalidConfigError):
        vllm.plan(bad, 1 << 30, vllm.EngineConfig(dcp=2))  # vLLM asserts DCP = 1 for sliding windows
    with pytest.raises(kvbudget.InvalidConfigError, match="auto"):
        vllm.plan(bad, 1 << 30, vllm.EngineConfig(max_model_len="auto"))
    with pytest.raises(TypeError):
        vllm.plan([{"name": "a"}], 1 << 30)  # type: ignore[list-item]


def _hostile(seed: int) -> dict[str, Any]:
    """A request of out-of-range, zero, huge and missing values."""
    r = random.Random(seed)
    ints = (0, 1, 3, 16, 1 << 24, (1 << 24) + 1, 1 << 40, (1 << 64) - 1)
    layers = []
    for i in range(r.choice((0, 1, 2, 5))):
        layer: dict[str, Any] = {"name": r.choice((f"l{i}", "l0")), "kind": r.choice(("full", "sliding", "chunked", "mla")),
                                 "num_kv_heads": r.choice(ints), "head_size": r.choice(ints)}  # fmt: skip
        for k in ("head_size_v", "sliding_window", "attention_chunk_size", "block_size", "pp_stage"):
            if r.random() < 0.4:
                layer[k] = r.choice(ints[:5])
        if r.random() < 0.3:  # a state layer: shapes of hostile sizes, dtypes of any count
            layer["kind"] = "mamba"
            layer["state_shapes"] = [[r.choice(ints) for _ in range(r.choice((0, 1, 3, 9)))]
                                     for _ in range(r.choice((0, 1, 2, 9)))]  # fmt: skip
            layer["state_dtypes"] = [r.choice(("float32", "bfloat16", "int8", "")) for _ in range(r.choice((0, 1, 2)))]
        layers.append(layer)
    engine = {k: r.choice(ints) for k in ("block_size", "max_num_batched_tokens", "tp", "pp", "dcp",
                                          "num_gpu_blocks_override", "attention_kernel_block_size",
                                          "num_speculative_tokens") if r.random() < 0.3}  # fmt: skip
    available = r.choice((0, -1, 1, 1 << 40, (1 << 63) - 1, -(1 << 63), [1, 2], [1 << 62] * 3))
    return {"layers": layers, "available": available, "engine": engine}


def test_hostile_requests_are_errors_never_panics() -> None:
    """Zero, huge and out-of-range sizes give a result or an error, never a Rust panic."""
    from kvbudget import _core

    outcomes: dict[str, int] = {}
    for seed in range(3000):
        out = json.loads(_core._vllm_plan(json.dumps(_hostile(seed))))
        key = "ok" if out["ok"] else out["error_type"]
        outcomes[key] = outcomes.get(key, 0) + 1
    assert outcomes.get("Input", 0) > 1000 and sum(outcomes.values()) == 3000, outcomes
