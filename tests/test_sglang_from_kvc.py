"""``kvbudget.sglang.install.from_kvc``: a running SGLang's KVCacheConfigurator as kvbudget inputs.

The objects are the SGLang oracle's strict stand-ins (:mod:`sglang_oracle`: the
``KVCacheConfigurator`` and runtime context SGLang's own configurators read,
any other read failing loudly), with ``get_schedule().mem_fraction_static`` set
as SGLang's resolved schedule bag carries it. On the parity cases the worker's
configurator gives the pools SGLang's own configurator gives for the same
objects, and the worker carries the page size, fraction, cap and reserve the
runtime holds.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import Any

import kvbudget
import parity_cases as P
import pytest
import sglang_oracle
from kvbudget.sglang.install import Runtime, SGLangWorker, declined, from_kvc, scenario_from_kvc
from kvbudget.sglang.budget import sglang_available_bytes as sglang_budget
from sglang_oracle._case import build_inputs, resolve_case
from sglang_oracle._strict import StrictNamespace, StubError

CASES = int(os.environ.get("KVBUDGET_INSTALL_CASES", "2000")) // 4


def _runtime(sb: Any) -> Runtime:
    m = sb.modules
    return Runtime(m["sglang.srt.runtime_context"], m["sglang.srt.environ"], m["sglang.srt.arg_groups.overrides"])


@pytest.fixture(scope="module")
def oracle() -> sglang_oracle.Oracle:
    return sglang_oracle.load()


@contextlib.contextmanager
def running(oracle: sglang_oracle.Oracle, case: dict[str, Any], fraction: float | None) -> Iterator[Any]:
    """The case's ``kvc``, with its runtime context active (``get_schedule()`` carrying
    ``mem_fraction_static`` unless ``fraction`` is None)."""
    sb = oracle.sandbox
    kvc, ctx = build_inputs(sb, resolve_case(case))
    if fraction is not None:
        bags = dict(vars(ctx))
        bags["schedule"] = StrictNamespace("get_schedule()", **vars(ctx.schedule), mem_fraction_static=fraction)
        ctx = StrictNamespace("runtime context", **bags)
    sb.active.ctx = ctx
    try:
        yield kvc
    finally:
        sb.active.ctx = None


def _pools(worker: SGLangWorker, budget: int) -> tuple[dict[str, int | None] | None, str | None]:
    try:
        got = worker.configurator().calculate_pool_sizes(budget)
    except kvbudget.KVBudgetError as e:
        return None, P.error_kind(e)
    return {k: getattr(got, k) for k in P.CONFIG_KEYS}, None


def test_the_workers_configurator_gives_sglangs_pools(oracle: sglang_oracle.Oracle) -> None:
    runtime = _runtime(oracle.sandbox)
    compared, mismatches = 0, []
    for seed in range(CASES):
        r = random.Random(f"from_kvc {seed}")
        case = P.oracle_case(P.random_case(r))
        if case is None:
            continue
        budget, fraction = P.amount(r, "bytes"), round(r.uniform(0.5, 0.95), 3)
        theirs = oracle.run(case, entry="bytes", amount=budget)
        with running(oracle, case, fraction) as kvc:
            try:
                worker = from_kvc(kvc, runtime)
            except kvbudget.KVBudgetError as e:  # kvbudget refuses the scenario: SGLang must refuse too
                worker, ours, kind = None, None, P.error_kind(e)
            else:
                assert worker.scenario == scenario_from_kvc(kvc, runtime)
        if worker is not None:
            assert (worker.page_size, worker.mem_fraction_static, worker.max_total_tokens) == (
                case["page_size"], fraction, None)
            assert (worker.mm_reserve, worker.is_draft_worker) == (0, bool(case.get("is_draft_worker")))
            assert worker.kvbudget_plans
            ours, kind = _pools(worker, budget)
        if ours != theirs.config or kind != (theirs.error[0] if theirs.error else None):
            mismatches.append(f"seed {seed}: SGLang {theirs.config} {theirs.error} vs from_kvc {ours} {kind}")
        compared += 1
    assert compared >= CASES // 2
    assert not mismatches, f"{len(mismatches)} of {compared}:\n" + "\n".join(mismatches[:10])


def test_the_worker_budget_uses_the_runtimes_fraction(oracle: sglang_oracle.Oracle) -> None:
    case = P.oracle_case(P.random_case(random.Random(3)))
    assert case is not None
    with running(oracle, case, 0.83) as kvc:
        worker = from_kvc(kvc, _runtime(oracle.sandbox))
    before, now = [80 << 30, 79 << 30], [50 << 30, 52 << 30]
    assert worker.available_bytes(free_before=before, free_now=now) == sglang_budget(before, now, 0.83)
    with running(oracle, case, None) as kvc:
        # The oracle's schedule bag has no mem_fraction_static: a strict stand-in says so loudly.
        with pytest.raises(StubError, match="mem_fraction_static"):
            from_kvc(kvc, _runtime(oracle.sandbox))


def test_a_runtime_without_the_fraction_gives_no_budget(oracle: sglang_oracle.Oracle) -> None:
    case = P.oracle_case(P.random_case(random.Random(3)))
    assert case is not None
    with running(oracle, case, 0.9) as kvc:
        worker = from_kvc(kvc, _runtime(oracle.sandbox))
    unset = SGLangWorker(worker.scenario, worker.page_size, None, None, 0, False, None)
    with pytest.raises(kvbudget.InvalidConfigError, match="mem_fraction_static"):
        unset.available_bytes(free_before=1 << 30, free_now=1 << 30)


class _Bags(Runtime):
    """A runtime context holding only the schedule bag (what from_kvc reads of a declined worker)."""

    def __init__(self) -> None:
        pass

    def get(self, bag: str) -> Any:
        assert bag == "schedule", bag
        return StrictNamespace("get_schedule()", page_size=64, mem_fraction_static=0.9, max_total_tokens=None)


def test_a_worker_kvbudget_declines_is_not_planned() -> None:
    """A hybrid-state model's pipeline stage without an attention layer (Qwen3-Next, its one
    full-attention layer on another stage): no scenario, and a configurator that names the
    reason instead of a made-up token count."""
    hf = StrictNamespace("hf_config", architectures=["Qwen3NextForCausalLM"])
    kvc = StrictNamespace("kvc", model_config=StrictNamespace("model_config", hf_config=hf, is_multimodal=False),
                          mambaish_config=StrictNamespace("mambaish", full_attention_layer_ids=[3]),
                          layer_info=StrictNamespace("layer_info", start_layer=0, end_layer=2),
                          is_hybrid_swa=False, is_draft_worker=False)  # fmt: skip
    worker = from_kvc(kvc, _Bags())
    assert worker.scenario is None and not worker.kvbudget_plans and worker.state_pool
    assert worker.declined is not None and "no attention layer on this pipeline stage" in worker.declined
    with pytest.raises(kvbudget.InvalidConfigError, match="does not plan this worker's pools: no attention"):
        worker.configurator()
    with pytest.raises(kvbudget.InvalidConfigError, match="state pool leaves"):
        worker.available_bytes(free_before=80 << 30, free_now=60 << 30)


def test_a_backend_kvbudget_has_no_name_for_plans_every_dtype_it_does_not_price(oracle: sglang_oracle.Oracle) -> None:
    """SGLang's ``dsa`` backend (DeepSeek-V3.2) reaches only the FP4 recipes' pricing: with any
    other dtype the worker is planned, with SGLang's pools; with NVFP4 it is declined."""
    runtime = _runtime(oracle.sandbox)
    checked = 0
    for seed in range(200):
        r = random.Random(f"dsa backend {seed}")
        case = P.oracle_case(P.random_case(r))
        if case is None or case["kv_cache_dtype"] == "nvfp4":
            continue
        case = {**case, "prefill_attention_backend": "dsa", "decode_attention_backend": "dsa"}
        budget = P.amount(r, "bytes")
        theirs = oracle.run(case, entry="bytes", amount=budget)
        with running(oracle, case, 0.9) as kvc:
            worker = from_kvc(kvc, runtime)
        assert worker.kvbudget_plans
        assert _pools(worker, budget) == (theirs.config, theirs.error[0] if theirs.error else None)
        checked += 1
    assert checked >= 100
    with running(oracle, {**case, "kv_cache_dtype": "nvfp4"}, 0.9) as kvc:
        assert "'dsa'" in (declined(kvc, runtime) or "")
