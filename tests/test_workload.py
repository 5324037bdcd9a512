"""Workload queries and the workload-aware SWA ratio (issue: autoscaler planning)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget import workload

GIB = 1 << 30
_PROFILE = settings.default.max_examples


def gpt_oss(page: int = 64, ratio: float = 0.8, chunk: int | None = 8192) -> kvbudget.PoolConfiguratorBase:
    m = kvbudget.ModelGeometry(list(range(1, 36, 2)), list(range(0, 36, 2)), 8, 64, sliding_window_size=127)
    s = kvbudget.ServingConfig(page_size=page, swa_full_tokens_ratio=ratio, chunked_prefill_size=chunk)
    return kvbudget.create_pool_configurator(m, s, kvbudget.SpeculativeConfig("eagle3", 1))


def gemma3(page: int = 64, ratio: float = 0.8) -> kvbudget.PoolConfiguratorBase:
    full = [i for i in range(62) if i % 6 == 5]
    m = kvbudget.ModelGeometry(full, [i for i in range(62) if i % 6 != 5], 16, 128, sliding_window_size=1024)
    s = kvbudget.ServingConfig(page_size=page, swa_full_tokens_ratio=ratio, chunked_prefill_size=8192)
    return kvbudget.create_pool_configurator(m, s, kvbudget.SpeculativeConfig("eagle3", 1))


def footprint(cfg: kvbudget.PoolConfiguratorBase, length: int) -> tuple[int, int]:
    """Independent restatement of the documented footprint."""
    p = cfg.serving.page_size
    up = lambda x: -(-x // p) * p  # noqa: E731
    w = cfg.model.sliding_window_size
    chunk = cfg.serving.chunked_prefill_size or length
    return up(length), min(up(length), up(w + chunk + p))


WORKLOADS = {
    "all_short": [256, 512, 700, 1000],
    "all_long": [64_000, 100_000, 128_000],
    "mixed": [300, 2_000, 8_000, 32_000, 128_000],
}


@pytest.mark.parametrize("make", [gpt_oss, gemma3])
@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("budget_gib", [8, 30, 80])
def test_suggested_ratio_admits_at_least_the_default(make, name: str, budget_gib: int) -> None:
    cfg = make()
    lens = WORKLOADS[name]
    r = workload.suggest_swa_ratio(cfg, lens, budget_gib * GIB)
    assert r.baseline_ratio == 0.8
    assert r.concurrency >= r.baseline_concurrency
    # Never breaks the admission floor: SGLang's sizing at that ratio plans.
    tuned = type(cfg)(cfg.model, kvbudget.ServingConfig(
        page_size=cfg.serving.page_size, swa_full_tokens_ratio=r.ratio,
        chunked_prefill_size=cfg.serving.chunked_prefill_size), cfg.spec)
    c = tuned.calculate_pool_sizes(budget_gib * GIB)
    assert c == r.config
    assert c.swa_max_total_num_tokens > cfg.model.sliding_window_size + cfg.serving.page_size
    # The concurrency it reports is what the pools hold for the average request.
    f = sum(footprint(cfg, x)[0] for x in lens) / len(lens)
    s = sum(footprint(cfg, x)[1] for x in lens) / len(lens)
    assert r.full_tokens_per_request == pytest.approx(f)
    assert r.swa_tokens_per_request == pytest.approx(s)
    assert r.concurrency == math.floor(min(c.full_max_total_num_tokens / f, c.swa_max_total_num_tokens / s))


def test_long_workloads_want_a_small_ratio_and_short_ones_a_large_one() -> None:
    cfg = gpt_oss()
    short = workload.suggest_swa_ratio(cfg, WORKLOADS["all_short"], 30 * GIB)
    long = workload.suggest_swa_ratio(cfg, WORKLOADS["all_long"], 30 * GIB)
    assert long.ratio < 0.8 < short.ratio
    assert long.concurrency > long.baseline_concurrency
    # The default ratio leaves most of the SWA pool idle on long requests.
    assert long.baseline_idle_swa_bytes > long.idle_swa_bytes


@settings(max_examples=max(50, _PROFILE // 50), deadline=None)
@given(
    lens=st.lists(st.integers(1, 200_000), min_size=1, max_size=6),
    budget=st.integers(2 * GIB, 120 * GIB),
    page=st.sampled_from([1, 16, 64]),
)
def test_suggested_ratio_property(lens: list[int], budget: int, page: int) -> None:
    cfg = gpt_oss(page=page)
    try:
        r = workload.suggest_swa_ratio(cfg, lens, budget)
    except kvbudget.SWAPoolTooSmallError:
        return
    assert r.concurrency >= r.baseline_concurrency
    assert r.config.swa_max_total_num_tokens > 127 + page


def test_suggest_needs_a_ratio_configurator() -> None:
    m = kvbudget.ModelGeometry(list(range(32)), [], 8, 128)
    cfg = kvbudget.create_pool_configurator(m, kvbudget.ServingConfig())
    with pytest.raises(kvbudget.InvalidConfigError, match="HybridSWAPoolConfigurator"):
        workload.suggest_swa_ratio(cfg, [1000], GIB)
    with pytest.raises(kvbudget.InvalidConfigError, match="empty"):
        workload.suggest_swa_ratio(gpt_oss(), [], GIB)
    with pytest.raises(kvbudget.InvalidConfigError, match="weights"):
        workload.suggest_swa_ratio(gpt_oss(), [1000, 2000], GIB, weights=[1.0])


@pytest.mark.parametrize("length", [1, 100, 127, 5_000, 100_000])
def test_concurrency_is_the_tighter_pool(length: int) -> None:
    cfg = gpt_oss()
    plan = cfg.plan(30 * GIB)
    f, s = footprint(cfg, length)
    expect = min(plan.config.full_max_total_num_tokens // f, plan.config.swa_max_total_num_tokens // s)
    assert workload.concurrency(cfg, plan, length) == expect
    assert workload.concurrency(cfg, plan.config, length) == expect


@pytest.mark.parametrize("requests", [1, 8, 64, 512])
def test_max_context_len_is_the_boundary(requests: int) -> None:
    cfg = gemma3()
    plan = cfg.plan(40 * GIB)
    longest = workload.max_context_len(cfg, plan, requests)
    assert longest is not None and longest > 0
    assert workload.concurrency(cfg, plan, longest) >= requests
    assert workload.concurrency(cfg, plan, longest + 1) < requests


def test_max_context_len_unbounded_for_all_swa() -> None:
    m = kvbudget.ModelGeometry([], list(range(24)), 8, 128, sliding_window_size=4095)
    cfg = kvbudget.create_pool_configurator(m, kvbudget.ServingConfig(chunked_prefill_size=2048))
    plan = cfg.plan(16 * GIB)
    assert workload.max_context_len(cfg, plan, 4) is None


@pytest.mark.parametrize(("requests", "length"), [(1, 1000), (32, 20_000), (200, 4096)])
def test_min_budget_is_the_smallest(requests: int, length: int) -> None:
    cfg = gpt_oss()
    mb = workload.min_budget(cfg, requests, length)
    assert mb.plan.total_bytes <= mb.available_bytes
    assert workload.concurrency(cfg, mb.plan, length) >= requests
    smaller = mb.available_bytes - 1
    try:
        plan = cfg.plan(smaller)
    except (kvbudget.NotEnoughMemoryError, kvbudget.SWAPoolTooSmallError):
        return
    assert workload.concurrency(cfg, plan, length) < requests


def test_min_budget_chunk_cap_capped() -> None:
    m = kvbudget.ModelGeometry(list(range(1, 36, 2)), list(range(0, 36, 2)), 8, 64, sliding_window_size=127)
    s = kvbudget.ServingConfig(page_size=64, max_running_requests=4, chunked_prefill_size=8192,
                               disable_radix_cache=True)
    cfg = kvbudget.create_pool_configurator(m, s)
    assert isinstance(cfg, kvbudget.SWARequestCapPoolConfigurator)
    with pytest.raises(kvbudget.NotEnoughMemoryError, match="capped"):
        workload.min_budget(cfg, 1000, 100_000)


def test_bytes_for_tokens_rounds_up_to_a_page() -> None:
    cfg = gpt_oss(page=64)
    assert workload.bytes_for_tokens(cfg, 1) == workload.bytes_for_tokens(cfg, 64)
    assert workload.bytes_for_tokens(cfg, 65) > workload.bytes_for_tokens(cfg, 64)
    plan = cfg.plan(10 * GIB)
    assert workload.bytes_for_tokens(cfg, plan.config.full_max_total_num_tokens) == plan.total_bytes


# --------------------------------------------------------------------------- without draft terms


def _preset_cfg(name: str, page: int = 1) -> kvbudget.PoolConfiguratorBase:
    from kvbudget.models import get_preset

    return kvbudget.Scenario(
        get_preset(name).model_geometry(),
        kvbudget.ServingConfig(page_size=page),
        kvbudget.SpeculativeConfig("eagle3", 1),
    ).configurator()


def test_without_draft_terms_reference_example_1() -> None:
    """REFERENCE section 5, example 1: Gemma-3-27B + 1-layer EAGLE3 at 40 GiB."""
    cfg = _preset_cfg("gemma-3-27b")
    a = 40 * GIB
    w = workload.without_draft_terms(cfg, a)
    assert w.config.full_max_total_num_tokens == w.config.max_total_num_tokens == 101_606
    assert w.cell_size == pytest.approx(422_707.2)
    assert cfg.calculate_pool_sizes(a).full_max_total_num_tokens == 99_674  # with the draft terms
    assert w.allocated_bytes == cfg.bytes_for_tokens(101_606)
    assert w.over_budget_bytes == w.allocated_bytes - a
    assert 0.77 < w.over_budget_bytes / GIB < 0.78


@pytest.mark.parametrize("name", ["gemma-3-27b", "gpt-oss-120b", "mistral-7b-v0.1", "llama-3.1-8b"])
@pytest.mark.parametrize("page", [1, 64])
def test_without_draft_terms_adds_up(name: str, page: int) -> None:
    cfg = _preset_cfg(name, page)
    a = 20 * GIB
    bare = workload.without_draft_configurator(cfg)
    assert type(bare) is type(cfg)
    assert (bare.model, bare.serving) == (cfg.model, cfg.serving)
    assert (bare.spec.algorithm, bare.spec.draft_num_layers, bare.spec.draft) == ("eagle3", 0, None)
    assert bare.draft_terms == (0, 0, 0, 0)
    w = workload.without_draft_terms(cfg, a)
    assert w.config == bare.calculate_pool_sizes(a)
    assert w.cell_size == bare.cell_size
    target = bare.plan(a, fit="sglang")
    assert target.draft_bytes == 0 and w.target_pool_bytes == target.total_bytes
    # The same token counts with the draft pool: what SGLang allocated before PR #29622.
    with_draft = cfg.plan_for_config(w.config, a)
    assert w.allocated_bytes == with_draft.total_bytes
    assert w.draft_pool_bytes == with_draft.draft_bytes > 0
    assert w.over_budget_bytes == max(0, w.allocated_bytes - a)
    # Leaving the draft out never gives fewer tokens.
    assert w.config.max_total_num_tokens >= cfg.calculate_pool_sizes(a).max_total_num_tokens
