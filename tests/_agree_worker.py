"""One rank of the ``agree()`` tests (tests/test_distributed.py): scenarios and the worker.

The test starts this file three times (``python _agree_worker.py RANK WORLD
INIT_FILE OUT_DIR``); each worker joins one gloo group through a ``file://``
rendezvous, runs every scenario below on that one group (one spawn for the
whole suite, to keep CI lean), and writes what it got as JSON: a dumped
:class:`AgreedPlan`, or the error it raised with the seconds it took to raise.
The fault scenarios run between two happy ones, so the last also shows that
a failed ``agree`` leaves the group usable.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

import kvbudget as kb
from kvbudget.ranks import pp_layer_ranges

GIB = 2**30
WORLD = 3
PG_TIMEOUT_S = 30  # a hung collective fails the worker after this long

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


def stage_model(stage: int) -> kb.ModelGeometry:
    """Pipeline stage ``stage`` of 3 (SGLang's split)."""
    start, end = pp_layer_ranges(62, WORLD)[stage]
    return model().replace(
        full_attention_layer_ids=[i for i in FULL if start <= i < end],
        swa_attention_layer_ids=[i for i in SWA if start <= i < end],
    )


def stage_configurator(stage: int, srv: kb.ServingConfig | None = None) -> kb.PoolConfiguratorBase:
    """Pipeline stage ``stage`` of 3, the draft on the last stage."""
    return kb.create_pool_configurator(
        stage_model(stage), srv or serving(), spec() if stage == WORLD - 1 else None
    )


class RaisingConfigurator(kb.HybridSWAPoolConfigurator):
    """A configurator whose own ``plan`` fails with a foreign error."""

    __slots__ = ()

    def plan(self, available_bytes: int, fit: Any = "exact") -> kb.PoolPlan:
        raise RuntimeError("the allocator probe failed")


# --------------------------------------------------------------------------- scenarios


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


def _run(call: Callable[[], Any]) -> dict[str, Any]:
    """``call()``'s dumped plan, or the error it raised and how long that took.

    Any error is recorded, not only kvbudget's, so that one broken scenario
    (a gloo error after a timeout, say) fails its own test, not the spawn.
    """
    t0 = time.perf_counter()
    try:
        return _dump(call())
    except Exception as e:  # noqa: BLE001
        cause = None if e.__cause__ is None else type(e.__cause__).__name__
        return {"type": type(e).__name__, "message": str(e), "cause": cause,
                "seconds": time.perf_counter() - t0}


def scenarios(rank: int) -> dict[str, Callable[[], Any]]:
    """Every scenario, by name, as this rank calls it (run in this order on every rank)."""
    from kvbudget.distributed import agree

    cfg = tp_configurator()
    stage = stage_configurator(rank)

    def tp_with(**kw: Any) -> kb.PoolConfiguratorBase:
        """The TP configurator, ``kw`` changed on rank 1 only."""
        if rank != 1:
            return cfg
        m = model().replace(**kw.get("model", {}))
        return kb.create_pool_configurator(m, serving().replace(**kw.get("serving", {})), spec())

    return {
        "bytes_sglang": lambda: agree(cfg, BYTES_SGLANG[rank]),
        "bytes_exact": lambda: agree(cfg, BYTES_EXACT_TIE[rank], fit="exact"),
        "tokens_sglang": lambda: agree(stage, TOKENS[rank], mode="tokens"),
        "tokens_exact": lambda: agree(stage, TOKENS[rank], mode="tokens", fit="exact"),
        # Faults: every rank must raise at once, naming the rank(s) and field(s).
        "tokens_fail": lambda: agree(stage, TOKENS_FAIL[rank], mode="tokens"),
        "other_model": lambda: agree(tp_with(model={"num_kv_heads": 8}), 30 * GIB),
        "mixed_page": lambda: agree(tp_with(serving={"page_size": 16}), 30 * GIB),
        "mixed_mode": lambda: agree(cfg, 30 * GIB, mode="tokens" if rank == 2 else "bytes"),
        "mixed_fit": lambda: agree(cfg, 30 * GIB, fit="exact" if rank == 0 else "sglang"),
        "mixed_spec": lambda: agree(
            kb.create_pool_configurator(model(), serving(), None) if rank == 2 else cfg, 30 * GIB
        ),
        "tokens_serving": lambda: agree(
            stage_configurator(rank, serving().replace(kv_cache_dtype="fp8_e4m3"))
            if rank == 0 else stage, TOKENS[rank], mode="tokens",
        ),
        "bad_input": lambda: agree(cfg, 1.5 if rank == 2 else 30 * GIB),  # type: ignore[arg-type]
        "raising_plan": lambda: agree(
            RaisingConfigurator(stage.model, stage.serving, stage.spec) if rank == 0 else stage,
            TOKENS[rank], mode="tokens", fit="exact",
        ),
        "after_faults": lambda: agree(cfg, BYTES_SGLANG[rank]),
    }


def worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    from kvbudget.distributed import agree

    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=PG_TIMEOUT_S),
    )
    out: dict[str, Any] = {}
    try:
        for name, call in scenarios(rank).items():
            out[name] = _run(call)
        sub = dist.new_group([1, 2])  # every rank must call new_group
        if rank in SUBGROUP:
            out["subgroup"] = _run(lambda: agree(tp_configurator(), SUBGROUP[rank], group=sub))
        dist.barrier()
    finally:  # what ran is written even if the group broke (the test reports the exit code)
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(out))
        dist.destroy_process_group()


if __name__ == "__main__":
    worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
