"""``install()`` and ``from_kvc`` on hybrid-state models: planned, with SGLang's numbers.

SGLang 0.5.23 takes a hybrid-state model's state pool out of the budget in
``_profile_available_bytes``, before it calls the pool configurator; its
``DefaultPoolConfigurator`` then sizes the KV pool over the full-attention layers
of the worker's pipeline stage (``mambaish_config(model_config).full_attention_layer_ids``
between ``start_layer`` and ``end_layer``), and a stage without one gets its
zero-KV token count. The state budget itself is ``tests/test_sglang_state.py``'s.

Each case here is a parity case without sliding-window layers or a DSA indexer,
made a gated-delta-net model (SGLang's ``hybrid_gdn_config`` matches the oracle's
``Qwen3NextConfig`` stand-in, :class:`sglang_oracle._helpers.GatedDeltaHFConfig`):
state layers interleaved at random, on one stage of SGLang's pipeline split. The
sandbox's own ``create_memory_pool_configurator`` and the one :func:`install` puts
in its place must give the same ``MemoryPoolConfig`` and error kind, and the
installed factory must have planned every stage that holds an attention layer
itself (its configurator answering every solve), handing only the others to SGLang.
"""

from __future__ import annotations

import logging
import os
import random
from typing import Any

from kvbudget.models.hybrid_state import hybrid_state_entries
import kvbudget
import parity_cases as P
import pytest
import sglang_oracle
from kvbudget.sglang.install import from_kvc
from kvbudget.sglang.pipeline import stage_ranges
from kvbudget.sglang.state import StateCacheTooSmallError, StateConfig, available_bytes
from kvbudget.sglang.state_model import state_from_hf_config
from test_sglang_from_kvc import _runtime, running
from test_sglang_install import _installed

CASES = int(os.environ.get("KVBUDGET_INSTALL_STATE_CASES", "6000"))


@pytest.fixture(scope="module")
def oracles() -> tuple[sglang_oracle.Oracle, sglang_oracle.Oracle]:
    sglang = sglang_oracle.load()
    return sglang, _installed(sglang, "sglang")


def _state_case(seed: int) -> tuple[dict[str, Any], str, int, int] | None:
    """``(oracle case, entry point, amount, attention layers on the stage)`` of seed ``seed``."""
    r = random.Random(f"state {seed}")
    case = P.random_case(r)
    if case["num_swa_layers"] or case["index_head_dim"] is not None:
        return None
    c = P.oracle_case(case)
    if c is None:
        return None
    n_full = c["num_full_layers"]
    total = n_full + r.randint(1, 3 * n_full + 2)
    state = sorted(r.sample(range(total), total - n_full))
    pp = r.choice((1, 1, 2, 3, 4, 8)) if total >= 8 else 1
    start, end = r.choice(stage_ranges(total, pp))
    c.update(state_layer_ids=state, stage=(start, end, pp))
    entry = r.choice(("bytes", "tokens"))
    on_stage = sum(start <= i < end and i not in set(state) for i in range(total))
    return c, entry, P.amount(r, entry), on_stage


def test_installed_factory_plans_state_models_with_sglangs_numbers(
    oracles: tuple[sglang_oracle.Oracle, ...], caplog: pytest.LogCaptureFixture
) -> None:
    sglang, ours = oracles
    caplog.set_level(logging.WARNING, "kvbudget.sglang.install")
    mismatches: list[str] = []
    planned = handed = pipelined = errors = drafted = mla = 0
    for seed in range(CASES):
        got = _state_case(seed)
        if got is None:
            continue
        c, entry, amount, on_stage = got
        a = sglang.run(c, entry=entry, amount=amount)
        caplog.clear()
        b = ours.run(c, entry=entry, amount=amount)
        assert a.class_name == "DefaultPoolConfigurator", (seed, a.class_name)
        if a.config != b.config or (a.error and a.error[0]) != (b.error and b.error[0]):
            mismatches.append(f"seed {seed} {entry} {amount}: SGLang {a.config} {a.error} vs installed {b.config} {b.error}")
        # kvbudget's configurator exactly where the stage holds attention, SGLang's elsewhere.
        assert b.class_name == ("_Configurator" if on_stage else "DefaultPoolConfigurator"), (seed, b.class_name)
        # ... which answered itself wherever SGLang's pool holds a token (kvbudget refuses an
        # empty pool, where SGLang returns 0 and its call site raises: handed to SGLang, logged).
        tokens = (a.config or {}).get("max_total_num_tokens") or 0
        assert tokens <= 0 or "handed to SGLang" not in caplog.text, (seed, caplog.text)
        planned += on_stage > 0
        handed += on_stage == 0
        pipelined += c["stage"][2] > 1 and on_stage > 0
        errors += a.error is not None
        drafted += c["algorithm"] != "none" and c["draft_num_layers"] > 0 and on_stage > 0
        mla += c["kv_lora_rank"] is not None and on_stage > 0
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:10])
    # Every branch reached: pipeline stages, a stage without attention, SGLang's errors, drafts, MLA.
    assert planned >= CASES // 8 and handed >= 1 and pipelined >= CASES // 20, (planned, handed, pipelined)
    assert errors >= 1 and drafted >= 10 and mla >= 10, (errors, drafted, mla)


def test_an_exact_install_of_a_unified_state_worker_gives_sglangs_labels(
    oracles: tuple[sglang_oracle.Oracle, ...], caplog: pytest.LogCaptureFixture
) -> None:
    """``install(fit="exact")`` on a hybrid-state worker under ``--enable-unified-memory``: its one
    buffer is sized from the byte budget, so the installed configurator answers with SGLang's token
    labels itself (an exact plan of the attention layers alone is not a pool SGLang builds)."""
    sglang, _ = oracles
    exact = _installed(sglang, "exact")
    caplog.set_level(logging.WARNING, "kvbudget.sglang.install")
    seen = 0
    for seed in range(CASES):
        got = _state_case(seed)
        if got is None or not got[0]["enable_unified_memory"] or got[0]["is_draft_worker"] or not got[3]:
            continue  # a draft worker keeps its own pools (its exact fit is kvbudget's)
        c, entry, amount, _ = got
        a = sglang.run(c, entry=entry, amount=amount)
        caplog.clear()
        b = exact.run(c, entry=entry, amount=amount)
        assert b.class_name == "_Configurator" and (a.config, a.error and a.error[0]) == (b.config, b.error and b.error[0])
        assert (a.config or {}).get("max_total_num_tokens", 0) <= 0 or "handed to SGLang" not in caplog.text, seed
        seen += 1
        if seen == 40:
            break
    assert seen == 40, seen


def _gdn_state() -> StateConfig:
    """Qwen3-Next-80B-A3B's state on one rank, from its published config (the bundled table)."""
    entries = hybrid_state_entries()
    state = state_from_hf_config(next(e for e in entries if e["name"] == "qwen3_next_80b_a3b_instruct")["config"])
    assert state is not None
    return state


def _worker_case() -> dict[str, Any]:
    for seed in range(CASES):
        got = _state_case(seed)
        if got is not None and got[3] > 0 and got[0]["algorithm"] == "none" and not got[0]["max_running_requests"]:
            return got[0]  # the state slots sized from the budget, not from a request cap
    raise AssertionError("no state case without a draft and a request cap")


def test_from_kvc_reads_a_state_model_and_its_budget_needs_the_state(oracles: tuple[sglang_oracle.Oracle, ...]) -> None:
    sglang, _ = oracles
    case = _worker_case()
    with running(sglang, case, 0.85) as kvc:
        worker = from_kvc(kvc, _runtime(sglang.sandbox))
    assert worker.kvbudget_plans and worker.state_pool and worker.scenario is not None
    before, now = [80 << 30, 80 << 30], [30 << 30, 31 << 30]
    with pytest.raises(kvbudget.InvalidConfigError, match="state pool leaves"):
        worker.available_bytes(free_before=before, free_now=now)
    state = _gdn_state()
    sc = worker.scenario
    want = available_bytes(before, now, 0.85, state, sc.serving, sc.spec)[0]
    assert worker.available_bytes(free_before=before, free_now=now, state=state) == want
    # The state pool comes out of the same budget: less is left than without it.
    assert want < kvbudget.sglang.budget.sglang_available_bytes(before, now, 0.85)
    # 10 MiB past SGLang's slack (15% of 80 GiB): less than one state slot.
    with pytest.raises(StateCacheTooSmallError):
        worker.available_bytes(free_before=before, free_now=[(12 << 30) + (10 << 20)] * 2, state=state)


def test_a_state_for_a_model_without_one_is_refused(oracles: tuple[sglang_oracle.Oracle, ...]) -> None:
    sglang, _ = oracles
    case = P.oracle_case(P.random_case(random.Random(3)))
    assert case is not None
    with running(sglang, case, 0.9) as kvc:
        worker = from_kvc(kvc, _runtime(sglang.sandbox))
    assert not worker.state_pool
    with pytest.raises(kvbudget.InvalidConfigError, match="no state pool"):
        worker.available_bytes(free_before=1 << 34, free_now=1 << 33, state=_gdn_state())
