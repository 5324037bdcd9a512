"""agree(): three gloo processes on CPU agree on one plan, name the rank that limits it,
and refuse, on every rank at once, ranks that plan different things or fail first.

The fixture starts tests/_agree_worker.py three times; the workers join one
gloo group through a ``file://`` rendezvous, run every scenario there on that
group, and write what they got as JSON. The tests compare the ranks with each
other and with plans computed here, in one process. The whole spawn is bounded
(``SPAWN_TIMEOUT_S``) and so is every collective (the group's timeout), so a
hang fails the tests instead of blocking CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import kvbudget as kb
from _agree_worker import (
    BYTES_EXACT_TIE,
    BYTES_SGLANG,
    GIB,
    PG_TIMEOUT_S,
    SUBGROUP,
    TOKENS,
    WORLD,
    model,
    serving,
    spec,
    stage_configurator,
    tp_configurator,
)
from kvbudget.ranks import Parallelism, plan_ranks

WORKER = Path(__file__).with_name("_agree_worker.py")
SPAWN_TIMEOUT_S = 90  # the three workers together: torch import, rendezvous, every scenario


@pytest.fixture(scope="module")
def spawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the three workers: every rank's exit code, log and results (``None`` if none)."""
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    tmp = tmp_path_factory.mktemp("agree")
    init_file = tmp / "rendezvous"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    logs = [tmp / f"rank{r}.log" for r in range(WORLD)]
    procs = []
    for r in range(WORLD):
        with logs[r].open("wb") as log:  # a file, not a pipe: a chatty rank cannot block
            procs.append(subprocess.Popen(
                [sys.executable, str(WORKER), str(r), str(WORLD), str(init_file), str(tmp)],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            ))
    deadline = time.monotonic() + SPAWN_TIMEOUT_S
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    files = [tmp / f"rank{r}.json" for r in range(WORLD)]
    return {
        "returncodes": [p.returncode for p in procs],
        "logs": [log.read_text(errors="replace") for log in logs],
        "results": [json.loads(f.read_text()) if f.exists() else None for f in files],
    }


@pytest.fixture(scope="module")
def results(spawn: dict[str, Any]) -> list[dict[str, Any]]:
    for r, got in enumerate(spawn["results"]):
        if got is None:
            pytest.fail(f"rank {r} wrote no results:\n{spawn['logs'][r]}")
    return list(spawn["results"])


@pytest.mark.torch
def test_every_worker_exits_cleanly(spawn: dict[str, Any]) -> None:
    """No rank crashed or hung (a hang is killed after SPAWN_TIMEOUT_S: a negative code)."""
    for r, code in enumerate(spawn["returncodes"]):
        assert code == 0, f"rank {r} exited with {code}:\n{spawn['logs'][r]}"


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


# Each fault: (scenario, class every rank raises, text every rank's message holds,
# the rank that failed before the collective and the cause it chains there, if one did).
FAULTS = [
    # rank 1 cannot hold one page; a hybrid model hits the SWA admission floor
    # before "not enough memory" (REFERENCE 2.3)
    ("tokens_fail", "SWAPoolTooSmallError",
     "rank 1 cannot size its KV pools from its own budget: SWAPoolTooSmallError: ",
     1, "SWAPoolTooSmallError"),
    ("other_model", "InvalidConfigError", "ranks 0, 2 plan model.num_kv_heads 16, rank 1 plans 8",
     None, None),
    ("mixed_page", "InvalidConfigError", "ranks 0, 2 plan page_size 64, rank 1 plans 16",
     None, None),
    ("mixed_mode", "InvalidConfigError", 'ranks 0, 1 plan mode "bytes", rank 2 plans "tokens"',
     None, None),
    ("mixed_fit", "InvalidConfigError", 'rank 0 plans fit "exact", ranks 1, 2 plan "sglang"',
     None, None),
    ("mixed_spec", "InvalidConfigError",
     'ranks 0, 1 plan spec.algorithm "eagle3", rank 2 plans "none"', None, None),
    ("tokens_serving", "InvalidConfigError",
     'rank 0 plans serving.kv_cache_dtype "fp8_e4m3", ranks 1, 2 plan "bf16"', None, None),
    ("bad_input", "InvalidConfigError",
     "rank 2 failed before agreeing: InvalidConfigError: available_bytes must be an int",
     2, "InvalidConfigError"),
    # a foreign error (the configurator's own plan raising RuntimeError)
    ("raising_plan", "KVBudgetError",
     "rank 0 cannot size its KV pools from its own budget: RuntimeError: the allocator probe",
     0, "RuntimeError"),
]


@pytest.mark.parametrize(("key", "cls", "text", "failed", "cause"), FAULTS,
                         ids=[f[0] for f in FAULTS])
@pytest.mark.torch
def test_faults_raise_on_every_rank_at_once(
    results: list[dict[str, Any]], key: str, cls: str, text: str,
    failed: int | None, cause: str | None,
) -> None:
    got = results[0][key]
    for r in range(WORLD):  # the same class and message on every rank
        assert (results[r][key]["type"], results[r][key]["message"]) == (cls, got["message"]), r
    assert text in got["message"]
    for r in range(WORLD):
        # At once, not after the group's timeout: a failed rank still joins.
        assert results[r][key]["seconds"] < PG_TIMEOUT_S / 3, (r, results[r][key])
        assert results[r][key]["cause"] == (cause if r == failed else None)
    if key == "tokens_fail":
        assert "admission floor" in got["message"]  # rank 1's own message, on every rank


@pytest.mark.torch
def test_the_group_still_agrees_after_the_faults(results: list[dict[str, Any]]) -> None:
    assert _same_on_every_rank(results, "after_faults") == results[0]["bytes_sglang"]


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
    with pytest.raises(kb.InvalidConfigError, match="configurator must be"):
        agree(object(), GIB)  # type: ignore[arg-type]


def _rows(*calls: tuple[kb.PoolConfiguratorBase, str, str]) -> list[list[int]]:
    """The rows ranks making these ``(configurator, mode, fit)`` calls would send."""
    from kvbudget.distributed import _prepare

    rows = []
    for cfg, mode, fit in calls:
        local = _prepare(cfg, 40 * GIB, mode, fit)
        rows.append(local.row(len(local.detail())))
    return rows


def test_fingerprint_rule_per_mode() -> None:
    """Which differences each mode refuses, checked on the rows alone (no processes)."""
    from kvbudget.distributed import _ROW, _clause, _mismatches

    stages = [stage_configurator(r) for r in range(WORLD)]
    assert _mismatches(_rows(*[(c, "tokens", "sglang") for c in stages]))[0] == []
    # The same stages in "bytes" mode: other layers and another spec.
    fields = [f for f, _ in _mismatches(_rows(*[(c, "bytes", "sglang") for c in stages]))[0]]
    assert fields == ["layers", "spec"]
    # In "tokens" mode the drafting stages must carry the same draft.
    eagle = kb.SpeculativeConfig("eagle", 2)
    other = kb.create_pool_configurator(stages[1].model, serving(), eagle)
    got = _mismatches(_rows((stages[0], "tokens", "sglang"), (other, "tokens", "sglang"),
                            (stages[2], "tokens", "sglang")))[0]
    assert got == [("spec", [1, 2])]
    # A rank whose inputs are invalid has no fingerprint: it is a failure, not a mismatch.
    cfg = tp_configurator()
    assert _mismatches(_rows((cfg, "bytes", "sglang"), (cfg, "bytes", "best")))[0] == []
    # One fixed-size row, whatever the model.
    small = kb.create_pool_configurator(kb.ModelGeometry([0], [], 1, 64), serving())
    assert {len(r) for r in _rows((cfg, "bytes", "exact"), (small, "tokens", "sglang"))} == {_ROW}
    assert _clause("page_size", {2: "32", 0: "64", 1: "16"}) == (
        "rank 0 plans page_size 64, rank 1 plans 16, rank 2 plans 32"
    )


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
