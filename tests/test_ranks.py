"""plan_ranks: every rank of a TP x PP x attention-DP deployment, offline (no torch, no GPU)."""

from __future__ import annotations

import pickle

import pytest

import kvbudget as kb
from kvbudget.ranks import Parallelism, RankPlans, plan_ranks, pp_layer_ranges
from kvbudget.sglang.pipeline import stage_ranges
from sglang_oracle._fetch import sglang_root
from sglang_oracle.pipeline import PipelineOracle

GIB = 2**30
PAGE = 64

# Gemma-3-27B-like (REFERENCE 5, example 1): 62 layers, full every 6th from 5.
GEMMA_FULL = list(range(5, 62, 6))
GEMMA_SWA = [i for i in range(62) if i not in GEMMA_FULL]


def gemma() -> kb.ModelGeometry:
    return kb.ModelGeometry(GEMMA_FULL, GEMMA_SWA, 16, 128, sliding_window_size=1023)


def llama() -> kb.ModelGeometry:
    """Llama-3-8B-like: 32 full-attention layers, 8 KV heads, D 128."""
    return kb.ModelGeometry(list(range(32)), [], 8, 128)


def eagle3() -> kb.SpeculativeConfig:
    return kb.SpeculativeConfig("eagle3", 1)


def serving(**kw: object) -> kb.ServingConfig:
    return kb.ServingConfig(page_size=PAGE, **kw)  # type: ignore[arg-type]


def stage_cfg(
    model: kb.ModelGeometry,
    start: int,
    end: int,
    tp: int,
    spec: kb.SpeculativeConfig | None,
) -> kb.PoolConfiguratorBase:
    """The configurator a stage should get, built independently of plan_ranks."""
    full = [i for i in model.full_attention_layer_ids if start <= i < end]
    swa = [i for i in model.swa_attention_layer_ids if start <= i < end]
    geo = kb.ModelGeometry(full, swa, model.num_kv_heads, model.head_dim,
                           sliding_window_size=model.sliding_window_size)
    return kb.create_pool_configurator(geo, kb.ServingConfig(page_size=PAGE, tp_size=tp), spec)


def check_agreement(rp: RankPlans) -> None:
    """Every stage holds the MIN of the ranks' own counts, re-solved through the constraint path."""
    own = [r.max_total_num_tokens for r in rp.ranks]
    assert rp.max_total_num_tokens == min(own)
    assert rp.bottleneck_rank == own.index(min(own))  # lowest rank among ties
    for st in rp.stages:
        assert st.agreed_config.max_total_num_tokens == rp.max_total_num_tokens
        cfg = st.configurator()
        assert st.agreed_config == cfg.calculate_pool_sizes_from_max_tokens(rp.max_total_num_tokens)
        assert st.agreed_plan is not None and st.agreed_plan.config == st.agreed_config
    for r in rp.ranks:
        assert r.agreed_config == rp.stages[r.pp_stage].agreed_config
        if rp.fit == "exact":
            # The MIN of exact-fit counts fits every rank's own budget.
            assert r.agreed_leftover_bytes is not None and r.agreed_leftover_bytes >= 0


# --------------------------------------------------------------------------- layer split


def test_pp_split_follows_sglang_get_pp_indices() -> None:
    # SGLang's get_pp_indices: the LAST `remainder` stages get one extra layer.
    assert pp_layer_ranges(62, 2) == ((0, 31), (31, 62))
    assert pp_layer_ranges(62, 4) == ((0, 15), (15, 30), (30, 46), (46, 62))
    assert pp_layer_ranges(32, 3) == ((0, 10), (10, 21), (21, 32))
    assert pp_layer_ranges(5, 5) == tuple((i, i + 1) for i in range(5))
    assert pp_layer_ranges(62, 2, [40, 22]) == ((0, 40), (40, 62))


@pytest.fixture(scope="module")
def sglang_pp() -> PipelineOracle:
    """SGLang 0.5.23's ``get_pp_indices``, lifted from the verified wheel."""
    return PipelineOracle(sglang_root())


@pytest.mark.parametrize("n", [1, 2, 7, 31, 32, 61, 62, 80, 95])
@pytest.mark.parametrize("pp", [1, 2, 3, 4, 5, 7, 8])
def test_pp_split_matches_sglang_everywhere(sglang_pp: PipelineOracle, n: int, pp: int) -> None:
    if n < pp:  # SGLang leaves the first stages empty; a plan refuses it
        with pytest.raises(kb.InvalidConfigError):
            pp_layer_ranges(n, pp)
        assert stage_ranges(n, pp) == sglang_pp.stage_ranges(n, pp)
        return
    assert pp_layer_ranges(n, pp) == sglang_pp.stage_ranges(n, pp)


@pytest.mark.parametrize("split", [[40, 22], [1, 61], [31, 31], [0, 62], [62, 0], [20, 20, 22], [10, 60], [30, 30]])
def test_explicit_split_matches_sglang(sglang_pp: PipelineOracle, split: list[int]) -> None:
    theirs = sglang_pp.stage_ranges(62, len(split), split)
    if isinstance(theirs, str):
        with pytest.raises(kb.InvalidConfigError):
            stage_ranges(62, len(split), split)
        with pytest.raises(kb.InvalidConfigError):
            pp_layer_ranges(62, len(split), split)
        return
    assert stage_ranges(62, len(split), split) == theirs
    if 0 in split:  # SGLang loads an empty stage; a plan refuses it
        with pytest.raises(kb.InvalidConfigError):
            pp_layer_ranges(62, len(split), split)
    else:
        assert pp_layer_ranges(62, len(split), split) == theirs


@pytest.mark.parametrize(
    "split, pp, n",
    [([30, 30], 2, 62), ([31, 31, 0], 3, 62), ([62], 2, 62), ([-1, 63], 2, 62)],
)
def test_bad_split_raises(split: list[int], pp: int, n: int) -> None:
    with pytest.raises(kb.InvalidConfigError):
        pp_layer_ranges(n, pp, split)


def test_parallelism_rank_order_is_pp_major() -> None:
    par = Parallelism(tp=4, pp=2, attn_dp=2)
    assert par.world_size == 16 and par.ranks_per_stage == 8
    # rank = pp_stage * (tp * attn_dp) + attn_dp_rank * tp + tp_rank
    assert par.coords(13) == (1, 1, 1)
    assert par.rank(1, 1, 1) == 13
    assert [par.rank(*par.coords(r)) for r in range(16)] == list(range(16))
    assert Parallelism(pp=2, pp_layer_split=[40, 22]).pp_layer_split == (40, 22)
    with pytest.raises(kb.InvalidConfigError):
        Parallelism(tp=0)
    with pytest.raises(kb.InvalidConfigError):
        Parallelism(pp=2, pp_layer_split=[62])
    with pytest.raises(kb.InvalidConfigError):
        par.coords(16)


# --------------------------------------------------------------------------- Gemma-3 hybrid


def test_gemma_tp8_pp2_even_split_draft_is_the_bottleneck() -> None:
    par = Parallelism(tp=8, pp=2)
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=[40 * GIB] * 16, parallel=par)

    s0, s1 = rp.stages
    assert s0.layer_range == (0, 31) and s1.layer_range == (31, 62)
    assert s0.model.full_attention_layer_ids == [5, 11, 17, 23, 29]
    assert s1.model.full_attention_layer_ids == [35, 41, 47, 53, 59]
    assert s0.model.swa_attention_layer_ids == [i for i in range(31) if i not in GEMMA_FULL]
    assert s1.model.swa_attention_layer_ids == [i for i in range(31, 62) if i not in GEMMA_FULL]
    assert s0.ranks == tuple(range(8)) and s1.ranks == tuple(range(8, 16))
    assert s0.serving.tp_size == 8 and s1.serving.tp_size == 8
    assert s0.configurator_kind == s1.configurator_kind == "hybrid_swa"

    # The draft runs on the last stage only.
    assert s0.spec is None and not s0.has_draft
    assert s1.spec is not None and s1.spec.algorithm == "eagle3" and s1.has_draft
    for r in rp.ranks:
        assert r.has_draft == (r.pp_stage == 1)
        assert (r.plan.pool("draft") is not None) == (r.pp_stage == 1)
        assert r.agreed_plan is not None
        assert (r.agreed_plan.pool("draft") is not None) == (r.pp_stage == 1)

    # Each rank's own count is the exact fit of its stage's configurator (TP 8: 2 heads per rank).
    c0 = stage_cfg(gemma(), 0, 31, 8, None)
    c1 = stage_cfg(gemma(), 31, 62, 8, eagle3())
    assert s0.cell_size == pytest.approx(1024 * 5 + 0.8 * 1024 * 26)
    assert s1.cell_size == pytest.approx(1024 * (5 + 1) + 0.8 * 1024 * 26)
    t0 = c0.plan(40 * GIB).config.max_total_num_tokens
    t1 = c1.plan(40 * GIB).config.max_total_num_tokens
    assert [r.max_total_num_tokens for r in rp.ranks] == [t0] * 8 + [t1] * 8
    assert t1 < t0
    check_agreement(rp)
    assert rp.max_total_num_tokens == t1

    # Equal budgets: the draft on the last stage makes rank 8 the bottleneck.
    assert rp.bottleneck_rank == 8
    assert rp.draft_is_bottleneck
    assert rp.tokens_without_draft == t0  # stage 0 would limit without the draft
    assert "rank 8 " in rp.reason and "pipeline stage 1" in rp.reason
    assert "42,949,672,960 bytes" in rp.reason
    assert "27,443.2 bytes per token" in rp.reason
    assert "EAGLE3" in rp.reason and "makes it the bottleneck" in rp.reason
    assert f"{t1:,} tokens" in rp.reason


def test_gemma_short_rank_on_first_stage_is_the_bottleneck() -> None:
    budgets = [40 * GIB] * 16
    budgets[5] = 30 * GIB
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=budgets,
                    parallel=Parallelism(tp=8, pp=2))
    check_agreement(rp)
    assert rp.bottleneck_rank == 5
    assert rp.bottleneck.available_bytes == 30 * GIB
    assert not rp.draft_is_bottleneck
    c0 = stage_cfg(gemma(), 0, 31, 8, None)
    assert rp.max_total_num_tokens == c0.plan(30 * GIB).config.max_total_num_tokens
    assert "rank 5 " in rp.reason and "32,212,254,720 bytes" in rp.reason
    assert "26,419.2 bytes per token" in rp.reason
    assert "does not limit the deployment" in rp.reason


def test_gemma_short_rank_on_last_stage_is_limited_by_its_budget() -> None:
    budgets = [40 * GIB] * 16
    budgets[13] = 20 * GIB
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=budgets,
                    parallel=Parallelism(tp=8, pp=2))
    check_agreement(rp)
    assert rp.bottleneck_rank == 13
    assert rp.bottleneck.has_draft
    # Without the draft rank 13 would still limit: its budget, not the draft, decides.
    assert not rp.draft_is_bottleneck
    assert rp.tokens_without_draft is not None
    assert rp.tokens_without_draft > rp.max_total_num_tokens
    assert "rank 13 " in rp.reason and "would be the bottleneck without it too" in rp.reason


def test_ties_name_the_lowest_rank() -> None:
    budgets = [40 * GIB] * 16
    budgets[3] = budgets[6] = 30 * GIB
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=budgets,
                    parallel=Parallelism(tp=8, pp=2))
    assert rp.bottleneck_rank == 3


def test_gemma_uneven_split_moves_the_bottleneck_to_the_bigger_stage() -> None:
    par = Parallelism(tp=8, pp=2, pp_layer_split=[40, 22])
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=[40 * GIB] * 16, parallel=par)
    s0, s1 = rp.stages
    assert s0.layer_range == (0, 40) and s1.layer_range == (40, 62)
    assert s0.model.full_attention_layer_ids == [5, 11, 17, 23, 29, 35]
    assert s1.model.full_attention_layer_ids == [41, 47, 53, 59]
    assert len(s0.model.swa_attention_layer_ids) == 34
    assert len(s1.model.swa_attention_layer_ids) == 18
    assert s1.has_draft and not s0.has_draft
    check_agreement(rp)
    assert rp.bottleneck_rank == 0
    assert not rp.draft_is_bottleneck
    assert "rank 0 " in rp.reason and "layers [0, 40)" in rp.reason


def test_hybrid_stage_without_swa_layers_uses_default() -> None:
    # Layers 0-3 SWA, 4-7 full: stage 0 is all-SWA, stage 1 has no SWA layer.
    model = kb.ModelGeometry([4, 5, 6, 7], [0, 1, 2, 3], 8, 128, sliding_window_size=127)
    rp = plan_ranks(model, serving(), eagle3(), budgets=[4 * GIB] * 4,
                    parallel=Parallelism(tp=2, pp=2))
    s0, s1 = rp.stages
    assert s0.configurator_kind == "hybrid_swa" and s0.model.full_attention_layer_ids == []
    assert s1.configurator_kind == "default" and s1.model.swa_attention_layer_ids == []
    check_agreement(rp)


# --------------------------------------------------------------------------- Llama full attention


def test_llama_tp8_pp2_even_split() -> None:
    rp = plan_ranks(llama(), serving(), eagle3(), budgets=[20 * GIB] * 16,
                    parallel=Parallelism(tp=8, pp=2))
    s0, s1 = rp.stages
    assert s0.model.full_attention_layer_ids == list(range(16))
    assert s1.model.full_attention_layer_ids == list(range(16, 32))
    assert s0.configurator_kind == s1.configurator_kind == "default"
    # SGLang's Default scales the cell by (1 + d / L) for the draft: 16 * 512 * (1 + 1/16).
    assert s0.cell_size == 16 * 512 and s1.cell_size == 17 * 512
    assert s0.spec is None and s1.has_draft
    check_agreement(rp)
    assert rp.bottleneck_rank == 8 and rp.draft_is_bottleneck


def test_llama_uneven_split_first_stage_limits() -> None:
    # 17 layers on stage 0 cost more per token than 15 + the 1-layer draft on stage 1.
    rp = plan_ranks(llama(), serving(), eagle3(), budgets=[20 * GIB] * 16,
                    parallel=Parallelism(tp=8, pp=2, pp_layer_split=[17, 15]))
    assert rp.stages[0].model.full_attention_layer_ids == list(range(17))
    assert rp.stages[1].model.full_attention_layer_ids == list(range(17, 32))
    check_agreement(rp)
    assert rp.bottleneck_rank == 0 and not rp.draft_is_bottleneck
    assert "8,704 bytes per token" in rp.reason


def test_llama_attn_dp_and_sglang_fit() -> None:
    par = Parallelism(tp=2, pp=2, attn_dp=2)
    budgets = [10 * GIB, 10 * GIB, 9 * GIB, 10 * GIB, 10 * GIB, 10 * GIB, 10 * GIB, 10 * GIB]
    rp = plan_ranks(llama(), serving(), eagle3(), budgets=budgets, parallel=par, fit="sglang")
    assert rp.stages[0].serving.attn_dp_size == 2 and rp.stages[0].serving.tp_size == 2
    c0 = stage_cfg(llama(), 0, 16, 2, None)
    own = [r.max_total_num_tokens for r in rp.ranks]
    assert own[2] == c0.calculate_pool_sizes(9 * GIB).max_total_num_tokens
    check_agreement(rp)
    assert rp.bottleneck_rank == 2
    assert (rp.bottleneck.pp_stage, rp.bottleneck.attn_dp_rank, rp.bottleneck.tp_rank) == (0, 1, 0)
    assert "attn-DP rank 1, TP rank 0" in rp.reason


def test_no_spec_and_single_stage() -> None:
    rp = plan_ranks(llama(), serving(), budgets=8 * GIB, parallel=Parallelism(tp=4))
    check_agreement(rp)
    assert rp.tokens_without_draft is None and not rp.draft_is_bottleneck
    assert rp.bottleneck_rank == 0 and len(rp.ranks) == 4
    # One stage: the agreed count is the plan at the smallest budget.
    single = kb.create_pool_configurator(llama(), kb.ServingConfig(page_size=PAGE, tp_size=4))
    assert rp.max_total_num_tokens == single.plan(8 * GIB).config.max_total_num_tokens


# --------------------------------------------------------------------------- errors and plumbing


def test_errors_name_the_rank_or_stage() -> None:
    par = Parallelism(tp=2, pp=2)
    with pytest.raises(kb.InvalidConfigError, match="needs 4"):
        plan_ranks(llama(), serving(), budgets=[GIB] * 3, parallel=par)
    with pytest.raises(kb.InvalidConfigError):
        plan_ranks(llama(), serving(), budgets=[GIB, GIB, 1.5, GIB], parallel=par)  # type: ignore[list-item]
    with pytest.raises(kb.NotEnoughMemoryError, match="rank 3"):
        plan_ranks(llama(), serving(), budgets=[GIB, GIB, GIB, 1000], parallel=par)
    with pytest.raises(kb.InvalidConfigError, match="stage 1"):
        plan_ranks(llama(), serving(), budgets=GIB, parallel=par, num_hidden_layers=64)
    with pytest.raises(kb.InvalidConfigError, match="tp_size"):
        plan_ranks(llama(), kb.ServingConfig(tp_size=4), budgets=GIB, parallel=par)
    with pytest.raises(kb.InvalidConfigError):
        plan_ranks(llama(), serving(), budgets=GIB, parallel=par, fit="best")  # type: ignore[arg-type]


def test_rank_plans_pickle() -> None:
    rp = plan_ranks(gemma(), serving(), eagle3(), budgets=40 * GIB,
                    parallel=Parallelism(tp=8, pp=2))
    back = pickle.loads(pickle.dumps(rp))
    assert back.max_total_num_tokens == rp.max_total_num_tokens
    assert back.reason == rp.reason
    assert back.agreed_configs == rp.agreed_configs
    a, b = back.stages[1].agreed_plan, rp.stages[1].agreed_plan
    assert a is not None and b is not None and a.to_json() == b.to_json()


def test_plan_ranks_takes_a_scenario() -> None:
    """A Scenario is the unit plan_ranks plans from too; the same as its three parts."""
    sc = kb.Scenario(
        kb.ModelGeometry(list(range(0, 48, 6)), [i for i in range(48) if i % 6], 8, 128, sliding_window_size=4095),
        kb.ServingConfig(page_size=64),
        kb.SpeculativeConfig("eagle3", 1),
    )
    par = Parallelism(tp=2, pp=2)
    a = plan_ranks(sc, budgets=40 << 30, parallel=par)
    b = plan_ranks(sc.model, sc.serving, sc.spec, budgets=40 << 30, parallel=par)
    assert a.agreed_configs == b.agreed_configs
    with pytest.raises(kb.InvalidConfigError, match="not both"):
        plan_ranks(sc, sc.serving, budgets=40 << 30)
