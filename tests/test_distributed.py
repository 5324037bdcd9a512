"""agree(): three gloo processes on CPU agree on one plan and name the rank that limits it.

The test starts this file three times as a worker (``python test_distributed.py
--worker RANK WORLD INIT_FILE OUT_DIR``); each worker joins a gloo group through
a ``file://`` rendezvous, runs every scenario below, and writes what it got as
JSON. The parent compares the ranks with each other and with plans computed
here, in one process, for the smallest budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvbudget as kb
from kvbudget.ranks import Parallelism, plan_ranks, pp_layer_ranges

GIB = 2**30
WORLD = 3

# Gemma-3-27B-like hybrid (REFERENCE 5, example 1).
FULL = list(range(5, 62, 6))
SWA = [i for i in range(62) if i not in FULL]

# Scenario budgets, indexed by rank.
BYTES_SGLANG = [40 * GIB, 30 * GIB + 12_345, 35 * GIB]  # rank 1 is short
BYTES_EXACT_TIE = [25 * GIB, 20 * GIB, 20 * GIB]  # ranks 1 and 2 tie: 1 is named
TOKENS = [40 * GIB, 40 * GIB, 40 * GIB]  # PP 3: the last stage carries the draft
TOKENS_FAIL = [40 * GIB, 1_000, 40 * GIB]  # rank 1 cannot hold one page
SUBGROUP = {1: 18 * GIB, 2: 17 * GIB}  # group [1, 2]: global rank 2 is group rank 1


def model() -> kb.ModelGeometry:
    return kb.ModelGeometry(FULL, SWA, 16, 128, sliding_window_size=1023)


def spec() -> kb.SpeculativeConfig:
    return kb.SpeculativeConfig("eagle3", 1)


def serving() -> kb.ServingConfig:
    return kb.ServingConfig(page_size=64)


def tp_configurator() -> kb.PoolConfiguratorBase:
    return kb.create_pool_configurator(model(), serving(), spec())


def stage_configurator(stage: int) -> kb.PoolConfiguratorBase:
    """Pipeline stage ``stage`` of 3 (SGLang's split), the draft on the last stage."""
    start, end = pp_layer_ranges(62, WORLD)[stage]
    geo = kb.ModelGeometry(
        [i for i in FULL if start <= i < end],
        [i for i in SWA if start <= i < end],
        16,
        128,
        sliding_window_size=1023,
    )
    return kb.create_pool_configurator(geo, serving(), spec() if stage == WORLD - 1 else None)


# --------------------------------------------------------------------------- worker


def _dump(agreed: Any) -> dict[str, Any]:
    return {
        "config": agreed.config.to_json(),
        "plan": None if agreed.plan is None else agreed.plan.to_json(),
        "limiting_rank": agreed.limiting_rank,
        "per_rank": list(agreed.per_rank),
        "reason": agreed.reason,
        "mode": agreed.mode,
        "fit": agreed.fit,
    }


def _worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    import datetime

    import torch.distributed as dist

    from kvbudget.distributed import agree

    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    out: dict[str, Any] = {}
    try:
        cfg = tp_configurator()
        out["bytes_sglang"] = _dump(agree(cfg, BYTES_SGLANG[rank]))
        out["bytes_exact"] = _dump(agree(cfg, BYTES_EXACT_TIE[rank], fit="exact"))

        stage = stage_configurator(rank)
        out["tokens_sglang"] = _dump(agree(stage, TOKENS[rank], mode="tokens"))
        out["tokens_exact"] = _dump(agree(stage, TOKENS[rank], mode="tokens", fit="exact"))
        try:
            agree(stage, TOKENS_FAIL[rank], mode="tokens")
            out["tokens_fail"] = None
        except kb.KVBudgetError as e:
            out["tokens_fail"] = {"type": type(e).__name__, "message": str(e)}

        sub = dist.new_group([1, 2])  # every rank must call new_group
        if rank in SUBGROUP:
            out["subgroup"] = _dump(agree(cfg, SUBGROUP[rank], group=sub))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))


# --------------------------------------------------------------------------- the test


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    tmp = tmp_path_factory.mktemp("agree")
    init_file = tmp / "rendezvous"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(r), str(WORLD), str(init_file), str(tmp)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        for r in range(WORLD)
    ]
    logs = []
    for p in procs:
        try:
            stdout, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        logs.append(stdout.decode(errors="replace"))
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} failed:\n{logs[r]}"
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(WORLD)]


def _same_on_every_rank(results: list[dict[str, Any]], key: str) -> dict[str, Any]:
    first: dict[str, Any] = results[0][key]
    for r in range(1, WORLD):
        assert results[r][key] == first, f"rank {r} disagrees with rank 0 on {key}"
    return first


@pytest.mark.torch
def test_bytes_mode_every_rank_plans_the_smallest_budget(results: list[dict[str, Any]]) -> None:
    got = _same_on_every_rank(results, "bytes_sglang")
    smallest = min(BYTES_SGLANG)
    expected = tp_configurator().plan(smallest, "sglang")
    assert got["plan"] == expected.to_json()
    assert got["config"] == expected.config.to_json()
    assert got["config"] == tp_configurator().calculate_pool_sizes(smallest).to_json()
    assert got["limiting_rank"] == 1
    assert got["per_rank"] == BYTES_SGLANG
    assert got["reason"].startswith(
        f"rank 1 has the least available KV memory: {smallest:,} bytes"
    )
    assert f"{max(BYTES_SGLANG) - smallest:,} bytes" in got["reason"]
    assert "less than the most (rank 0)" in got["reason"]


@pytest.mark.torch
def test_bytes_mode_exact_fit_and_ties(results: list[dict[str, Any]]) -> None:
    got = _same_on_every_rank(results, "bytes_exact")
    expected = tp_configurator().plan(20 * GIB, "exact")
    assert got["plan"] == expected.to_json()
    assert expected.total_bytes <= 20 * GIB
    assert got["limiting_rank"] == 1  # the lowest of the tied ranks 1 and 2
    assert got["per_rank"] == BYTES_EXACT_TIE


@pytest.mark.parametrize("fit", ["sglang", "exact"])
@pytest.mark.torch
def test_tokens_mode_pipeline_stages_agree_on_the_min(
    results: list[dict[str, Any]], fit: str
) -> None:
    key = f"tokens_{fit}"
    # Each stage solves its own count; the MIN is re-solved per stage, so every
    # rank has the same max_total_num_tokens over its own layers.
    own = []
    for r in range(WORLD):
        cfg = stage_configurator(r)
        if fit == "exact":
            own.append(cfg.plan(TOKENS[r], "exact").config.max_total_num_tokens)
        else:
            own.append(cfg.calculate_pool_sizes(TOKENS[r]).max_total_num_tokens)
    tokens = min(own)
    lim = own.index(tokens)
    assert lim == WORLD - 1  # equal budgets: the draft on the last stage limits
    for r in range(WORLD):
        got = results[r][key]
        assert got["per_rank"] == own
        assert got["limiting_rank"] == lim
        cfg = stage_configurator(r)
        expected = cfg.calculate_pool_sizes_from_max_tokens(tokens)
        assert got["config"] == expected.to_json()
        assert kb.MemoryPoolConfig._from_json(got["config"]).max_total_num_tokens == tokens
        assert got["plan"] is not None
        plan = kb.PoolPlan.from_json(got["plan"])
        assert plan.config == expected
        assert (plan.pool("draft") is not None) == (r == WORLD - 1)
        assert got["reason"].startswith(f"rank {lim} holds the fewest KV tokens: {tokens:,}")
    # The same deployment planned offline agrees with the three live ranks.
    rp = plan_ranks(model(), serving(), spec(), budgets=TOKENS,
                    parallel=Parallelism(pp=WORLD), fit=fit)  # type: ignore[arg-type]
    assert rp.max_total_num_tokens == tokens and rp.bottleneck_rank == lim
    for r in range(WORLD):
        assert results[r][key]["config"] == rp.stages[r].agreed_config.to_json()


@pytest.mark.torch
def test_tokens_mode_failure_raises_on_every_rank(results: list[dict[str, Any]]) -> None:
    for r in range(WORLD):
        fail = results[r]["tokens_fail"]
        assert fail is not None, f"rank {r} did not raise"
        # Every rank raises the same class, naming rank 1. A hybrid model hits
        # the SWA admission floor before "not enough memory" (REFERENCE 2.3).
        assert fail["type"] == "SWAPoolTooSmallError"
        assert fail["message"].startswith("rank 1 cannot size its KV pools")
    # Rank 1 carries its own solver's message; the others point to it.
    assert "admission floor" in results[1]["tokens_fail"]["message"]
    assert "see that rank's error" in results[0]["tokens_fail"]["message"]


@pytest.mark.torch
def test_subgroup_reports_group_ranks(results: list[dict[str, Any]]) -> None:
    assert "subgroup" not in results[0]
    got = [results[r]["subgroup"] for r in (1, 2)]
    assert got[0] == got[1]
    assert got[0]["per_rank"] == [SUBGROUP[1], SUBGROUP[2]]
    assert got[0]["limiting_rank"] == 1
    assert got[0]["plan"] == tp_configurator().plan(SUBGROUP[2], "sglang").to_json()


def test_agree_validates_before_the_collective() -> None:
    from kvbudget.distributed import agree

    cfg = tp_configurator()
    with pytest.raises(kb.InvalidConfigError, match="mode"):
        agree(cfg, GIB, mode="pages")  # type: ignore[arg-type]
    with pytest.raises(kb.InvalidConfigError, match="fit"):
        agree(cfg, GIB, fit="best")  # type: ignore[arg-type]
    with pytest.raises(kb.InvalidConfigError, match="available_bytes"):
        agree(cfg, 1.5)  # type: ignore[arg-type]


def test_agree_needs_an_initialized_group() -> None:
    pytest.importorskip("torch")
    import torch.distributed as dist

    from kvbudget.distributed import agree

    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(kb.InvalidConfigError, match="not initialized"):
        agree(tp_configurator(), GIB)


def test_agreed_plan_is_frozen_and_pickles() -> None:
    import dataclasses
    import pickle

    from kvbudget.distributed import AgreedPlan

    plan = tp_configurator().plan(20 * GIB, "sglang")
    a = AgreedPlan(
        config=plan.config,
        plan=plan,
        mode="bytes",
        fit="sglang",
        limiting_rank=1,
        per_rank=(30 * GIB, 20 * GIB),
        available_bytes=30 * GIB,
        reason="r",
    )
    assert a.agreed_value == 20 * GIB and a.world_size == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.limiting_rank = 0  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(a))
    assert back.config == a.config and back.per_rank == a.per_rank
    assert back.plan is not None and back.plan.to_json() == plan.to_json()




if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "--worker":
    _worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
