"""SGLang's KV byte budget, MIN across ranks: kvbudget against SGLang 0.5.23's own code.

:mod:`sglang_oracle.budget` runs SGLang's ``_profile_available_bytes`` (and the
``get_available_gpu_memory`` it and the baseline measurement call, lifted from
the wheel) on emulated ranks, one thread each, whose ``all_reduce(MIN)`` is a
real collective over their tensors. kvbudget gets the same per-rank free bytes
(:meth:`SGLangLaunch.available_bytes`, :meth:`SGLangWorker.available_bytes`,
:func:`kvbudget.sglang.budget.sglang_available_bytes`) and the multimodal reserve read from the same runtime
context (:func:`mm_reserve_bytes`); the budgets must be equal, byte for byte,
and where SGLang refuses ("no GPU memory for the KV cache") kvbudget's must be
zero or negative.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from kvbudget.errors import InvalidConfigError
from kvbudget.sglang.install import Runtime, from_server_args, mm_reserve_bytes
from kvbudget.sglang.budget import sglang_available_bytes as sglang_budget
from kvbudget.sglang.launch import SGLangLaunch
from sglang_oracle import budget as oracle_budget
from sglang_oracle._fetch import sglang_root
from sglang_oracle._strict import Poison, StrictNamespace

CASES = int(os.environ.get("KVBUDGET_BUDGET_CASES", "300"))
GIB = 1 << 30
TRANSPORTS = (None, "cuda_ipc", "cuda_vmm", "shm")


@pytest.fixture(scope="module")
def sglang() -> Any:
    return oracle_budget.load(sglang_root())


@pytest.fixture(scope="module")
def launch(tmp_path_factory: pytest.TempPathFactory) -> SGLangLaunch:
    d = tmp_path_factory.mktemp("llama")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512,
           "num_attention_heads": 8, "num_key_value_heads": 2, "torch_dtype": "bfloat16"}  # fmt: skip
    (d / "config.json").write_text(json.dumps(cfg))
    return from_server_args(["--model-path", str(d), "--page-size", "16", "--mem-fraction-static", "0.88"])


def _case(r: random.Random) -> oracle_budget.Budget:
    n = r.choice((1, 1, 2, 2, 4, 8))
    before = [int(r.uniform(8, 141) * GIB) + r.randrange(1 << 20) for _ in range(n)]
    share = r.uniform(0.05, 1.1)  # the weights, as a share of the free memory (some leave no room)
    now = [max(0, b - int(b * share * r.uniform(0.97, 1.03))) for b in before]
    fraction = r.choice((round(r.uniform(0.3, 0.97), 3), r.uniform(0.01, 1.0), 0.88, 1.0))
    return oracle_budget.Budget(before, now, fraction, is_multimodal=r.random() < 0.3,
                                mm_feature_transport=r.choice(TRANSPORTS), vlm_cache_mb=r.choice((0, 100, 2048)),
                                mm_feature_cache_mb=r.randrange(0, 4096))  # fmt: skip


def _mm_reserve(case: oracle_budget.Budget) -> int:
    """kvbudget's reading of the case's runtime context (the same values the oracle gives SGLang)."""
    env = StrictNamespace("envs", SGLANG_VLM_CACHE_SIZE_MB=StrictNamespace("env", get=lambda: case.vlm_cache_mb),
                          SGLANG_MM_FEATURE_CACHE_MB=StrictNamespace("env", get=lambda: case.mm_feature_cache_mb))
    mm = StrictNamespace("get_mm()", mm_feature_transport=case.mm_feature_transport)
    runtime = Runtime(StrictNamespace("runtime_context", get_mm=lambda: mm), StrictNamespace("environ", envs=env),
                      Poison("overrides"))  # fmt: skip
    kvc = StrictNamespace("KVCacheConfigurator", model_config=StrictNamespace("ModelConfig",
                                                                              is_multimodal=case.is_multimodal))
    return mm_reserve_bytes(kvc, runtime)


def test_the_budget_is_sglangs_on_every_rank(sglang: Any, launch: SGLangLaunch) -> None:
    refused = multi = reserved = float32_matters = 0
    mismatches = []
    for seed in range(CASES):
        case = _case(random.Random(f"budget {seed}"))
        theirs, errors = sglang(case)
        reserve = _mm_reserve(case)
        at = dataclasses.replace(launch, args={**launch.args, "mem_fraction_static": case.mem_fraction_static})
        ours = at.available_bytes(free_before=case.free_before, free_now=case.free_now, mm_reserve=reserve)
        assert ours == sglang_budget(case.free_before, case.free_now, case.mem_fraction_static, reserve)
        if any(errors):
            assert all(errors) and "leave no GPU memory" in str(errors[0]), errors
            refused += 1
            if ours > 0:
                mismatches.append(f"seed {seed}: SGLang refuses ({errors[0]}), kvbudget budgets {ours}")
            continue
        assert len(set(theirs)) == 1, theirs  # every rank plans the same budget
        if ours != theirs[0]:
            mismatches.append(f"seed {seed}: SGLang {theirs[0]} vs kvbudget {ours} ({case})")
        n = len(case.free_before)
        multi += n > 1
        reserved += reserve > 0
        # The MIN is of float32 values (SGLang's all_reduce tensor): the exact integer MIN is not it.
        exact_min = sglang_budget(min(case.free_before), min(case.free_now), case.mem_fraction_static, reserve)
        float32_matters += n > 1 and exact_min != theirs[0]
    assert not mismatches, f"{len(mismatches)} of {CASES}:\n" + "\n".join(mismatches[:10])
    assert refused >= 1 and reserved >= 1 and multi >= CASES // 4 and float32_matters >= CASES // 10


def test_one_rank_is_not_rounded(sglang: Any) -> None:
    case = oracle_budget.Budget([80 * GIB + 12345], [50 * GIB + 777], 0.9)
    (theirs,), _ = sglang(case)
    assert sglang_budget(80 * GIB + 12345, 50 * GIB + 777, 0.9) == theirs
    assert sglang_budget([80 * GIB + 12345], [50 * GIB + 777], 0.9) == theirs


def test_per_rank_values_are_checked(launch: SGLangLaunch) -> None:
    with pytest.raises(InvalidConfigError, match="at least one rank"):
        launch.available_bytes(free_before=[], free_now=[1])
    with pytest.raises(InvalidConfigError, match="free_now"):
        launch.available_bytes(free_before=[GIB, GIB], free_now=[GIB, -1])
    with pytest.raises(InvalidConfigError, match="free_before"):
        launch.available_bytes(free_before=[GIB, 1.5], free_now=GIB)  # type: ignore[list-item]


def test_the_worked_number(tmp_path: Path) -> None:
    # 80 GiB free before load on both ranks, 50 and 49 GiB after: MIN 49 - 80 * 0.12 = 39.4 GiB.
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
                                                      "hidden_size": 256, "num_attention_heads": 4}))
    launch = from_server_args(["--model-path", str(tmp_path), "--mem-fraction-static", "0.88"])
    got = launch.available_bytes(free_before=[80 * GIB, 80 * GIB], free_now=[50 * GIB, 49 * GIB])
    assert abs(got - int(39.4 * GIB)) <= 1
