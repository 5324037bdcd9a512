"""The oracle (tests/reference.py) against REFERENCE.md and SGLang's own numbers.

These tests need no Rust extension. The expected numbers below are copied from
REFERENCE.md (section and example named next to each); the oracle must compute
them, and tests/data/golden.json must carry them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import reference as R

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden.json").read_text())
CASES = {c["name"]: c for c in GOLDEN["cases"]}
PLANS = {p["name"]: p for p in GOLDEN["exact_plan"]}

GiB = 2**30
A40 = 40 * GiB

_full27 = list(range(5, 62, 6))
GEMMA3_27B = dict(
    full_attention_layer_ids=_full27,
    swa_attention_layer_ids=[i for i in range(62) if i not in _full27],
    num_kv_heads=16,
    head_dim=128,
    sliding_window_size=1024,
)
GPT_OSS_120B = dict(
    full_attention_layer_ids=list(range(1, 36, 2)),
    swa_attention_layer_ids=list(range(0, 36, 2)),
    num_kv_heads=8,
    head_dim=64,
    sliding_window_size=127,
)
EAGLE3_1 = dict(algorithm="eagle3", draft_num_layers=1)


def sizes(full: int, swa: int) -> dict[str, int]:
    return {"max_total_num_tokens": full, "full_max_total_num_tokens": full,
            "swa_max_total_num_tokens": swa}


# name -> (cell_size or None, swa_cap or None, {call index: expected sizes or error})
# Every number here is printed in REFERENCE.md.
REFERENCE_NUMBERS = {
    # 5.1: C = 430,899.2, full 99,674, swa 79,739
    "ref5_ex1_gemma3_27b_eagle3_p1": (430899.2, None, {0: sizes(99674, 79739)}),
    # 5.1: p 64: full 99,648, swa 79,680
    "ref5_ex1_gemma3_27b_eagle3_p64": (430899.2, None, {0: sizes(99648, 79680)}),
    # 5.1: before #29622: C = 422,707.2, full 101,606
    "ref5_ex1_gemma3_27b_before_29622_spec_none": (422707.2, None, {0: {"max_total_num_tokens": 101606,
                                                                         "full_max_total_num_tokens": 101606}}),
    "ref5_ex1_gemma3_27b_before_29622_eagle3_d0": (422707.2, None, {0: {"max_total_num_tokens": 101606,
                                                                         "full_max_total_num_tokens": 101606}}),
    # 5.2: TP 4: C = 8,550.4, full 3,767,296, swa 3,013,824
    "ref5_ex2_gpt_oss_120b_fp8_tp4": (8550.4, None, {0: sizes(3767296, 3013824)}),
    # 5.2: TP 16: full 7,534,656, swa 6,027,712
    "ref5_ex2_gpt_oss_120b_fp8_tp16": (None, None, {0: sizes(7534656, 6027712)}),
    # 5.2: mxfp8 TP 4: full 3,653,120, swa 2,922,496
    "ref5_ex2_gpt_oss_120b_mxfp8_tp4": (None, None, {0: sizes(3653120, 2922496)}),
    # 5.3: C = 102,400, swa 167,772, full 0
    "ref5_ex3_all_swa_eagle": (102400, None, {0: {"max_total_num_tokens": 167772,
                                                  "full_max_total_num_tokens": 0,
                                                  "swa_max_total_num_tokens": 167772}}),
    # 5.4: cap 61,952, full 1,045,056
    "ref5_ex4_chunk_cap_overlap_on": (None, 61952, {0: sizes(1045056, 61952)}),
    # 5.4: PD decode with 8 extra slots: cap 47,032, swa 47,040, full 1,059,200
    "ref5_ex4_chunk_cap_pd_decode": (None, 47032, {0: sizes(1059200, 47040)}),
    # 5.4: overlap off: cap 57,344, full 1,049,408
    "ref5_ex4_chunk_cap_overlap_off": (None, 57344, {0: sizes(1049408, 57344)}),
    # 5.5: from max tokens 10,000: full 9,984, swa 960 <= 1,024 + 64 raises; 12,000 passes
    "ref5_ex5_admission_floor": (None, None, {0: "swa_pool_too_small"}),
    # 2.4: SGLang's unit tests
    "sglang_ut_chunk_cap_spec_v1_p4": (None, 104, {}),
    "sglang_ut_chunk_cap_spec_v2_p1": (None, 91, {}),
    "sglang_ut_chunk_cap_pd_decode": (None, 100, {}),
    "sglang_ut_chunk_cap_pd_decode_extra_slots": (None, 110, {}),
    "sglang_ut_chunk_cap_pd_prefill_overlap_p4": (None, 76, {}),
}


def _call(cfg: R._Base, call: dict) -> dict:
    if call["entry"] == "bytes":
        return cfg.calculate_pool_sizes(call["value"], call["page_size"])
    return cfg.calculate_pool_sizes_from_max_tokens(call["value"], call["page_size"])


# --------------------------------------------------------------------------
# REFERENCE section 5, computed directly by the oracle
# --------------------------------------------------------------------------


def test_example1_gemma3_27b_eagle3() -> None:
    cfg = R.create_pool_configurator(GEMMA3_27B, dict(page_size=1), EAGLE3_1)
    assert cfg.kind == "hybrid_swa"
    assert (cfg._F, cfg._S) == (8192, 8192)
    assert cfg.cell_size == 430899.2
    assert cfg.calculate_pool_sizes(A40) == sizes(99674, 79739)
    # p 64 (as the serving page size, and as an argument)
    cfg64 = R.create_pool_configurator(GEMMA3_27B, dict(page_size=64), EAGLE3_1)
    assert cfg64.calculate_pool_sizes(A40) == sizes(99648, 79680)
    assert cfg.calculate_pool_sizes(A40, 64) == sizes(99648, 79680)


@pytest.mark.parametrize("spec", [None, dict(algorithm="none", draft_num_layers=1),
                                  dict(algorithm="eagle3", draft_num_layers=0),
                                  dict(algorithm="ngram", draft_num_layers=1)])
def test_example1_before_29622(spec: dict | None) -> None:
    cfg = R.create_pool_configurator(GEMMA3_27B, dict(page_size=1), spec)
    assert cfg.cell_size == 422707.2
    out = cfg.calculate_pool_sizes(A40)
    assert out["full_max_total_num_tokens"] == out["max_total_num_tokens"] == 101606


def test_example1_before_29622_draft_overran_budget() -> None:
    # "the draft pool overran the budget by 0.775 GiB": the plan made without
    # the draft term, plus the draft pool SGLang then allocated on top.
    out = R.create_pool_configurator(GEMMA3_27B, dict(page_size=1), None).calculate_pool_sizes(A40)
    per_layer = 8192
    target = (out["full_max_total_num_tokens"] * 10 + out["swa_max_total_num_tokens"] * 52) * per_layer
    draft = out["full_max_total_num_tokens"] * 1 * per_layer
    assert round((target + draft - A40) / GiB, 3) == 0.775


def test_example1_p64_sglang_allocation_over_commit() -> None:
    # REFERENCE 3 / 5.1: padding rows cost 33,030,144 bytes and the allocation
    # exceeds A by 5,242,880 bytes.
    res = R.sglang_allocation_bytes(GEMMA3_27B, dict(page_size=64), EAGLE3_1, A40)
    assert res["padding_bytes"] == 33_030_144
    assert res["over_budget_bytes"] == 5_242_880
    assert res["total_bytes"] == A40 + 5_242_880


@pytest.mark.parametrize(
    "tp,dtype,per_layer,full,swa",
    [(4, "fp8_e4m3", 256, 3_767_296, 3_013_824),
     (16, "fp8_e4m3", 128, 7_534_656, 6_027_712),
     (4, "mxfp8", 264, 3_653_120, 2_922_496)],
)
def test_example2_gpt_oss_120b(tp: int, dtype: str, per_layer: int, full: int, swa: int) -> None:
    cfg = R.create_pool_configurator(GPT_OSS_120B, dict(kv_cache_dtype=dtype, page_size=64, tp_size=tp),
                                     EAGLE3_1)
    assert (cfg._F, cfg._S) == (per_layer, per_layer)
    if tp == 4 and dtype == "fp8_e4m3":
        assert cfg.cell_size == 8550.4
    assert cfg.calculate_pool_sizes(30 * GiB) == sizes(full, swa)


def test_example3_all_swa() -> None:
    model = dict(swa_attention_layer_ids=list(range(24)), num_kv_heads=8, head_dim=128)
    cfg = R.create_pool_configurator(model, dict(page_size=1), dict(algorithm="eagle", draft_num_layers=1))
    assert cfg.kind == "hybrid_swa"
    assert cfg.cell_size == 102_400 and isinstance(cfg.cell_size, int)
    assert cfg.calculate_pool_sizes(16 * GiB) == {"max_total_num_tokens": 167_772,
                                                  "full_max_total_num_tokens": 0,
                                                  "swa_max_total_num_tokens": 167_772}


CHUNK_SERVING = dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                     disable_radix_cache=True, swa_eviction_interval=128)
CHUNK_SPEC = dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4)


@pytest.mark.parametrize(
    "extra,cap,swa,full",
    [({}, 61_952, 61_952, 1_045_056),
     (dict(disaggregation_mode="decode", disaggregation_decode_extra_slots=8), 47_032, 47_040, 1_059_200),
     (dict(disable_overlap_schedule=True), 57_344, 57_344, 1_049_408)],
)
def test_example4_chunk_cap(extra: dict, cap: int, swa: int, full: int) -> None:
    model = {**GPT_OSS_120B}
    serving = {**CHUNK_SERVING, **extra}
    assert R.configurator_kind(model, serving, CHUNK_SPEC) == "chunk_cap"
    cfg = R.create_pool_configurator(model, serving, CHUNK_SPEC)
    assert cfg.swa_cap == cap
    assert cfg.calculate_pool_sizes(A40) == sizes(full, swa)


def test_example5_admission_floor() -> None:
    cfg = R.create_pool_configurator(GEMMA3_27B, dict(page_size=64, swa_full_tokens_ratio=0.1), EAGLE3_1)
    with pytest.raises(R.OracleSWAPoolTooSmall) as err:
        cfg.calculate_pool_sizes_from_max_tokens(10_000)
    assert "960" in str(err.value) and "1024" in str(err.value) and "64" in str(err.value)
    assert err.value.kind == "swa_pool_too_small"
    out = cfg.calculate_pool_sizes_from_max_tokens(12_000)
    assert out["full_max_total_num_tokens"] == 11_968
    assert out["swa_max_total_num_tokens"] > 1_024 + 64


def test_admission_floor_comes_before_not_enough_memory() -> None:
    cfg = R.create_pool_configurator(GEMMA3_27B, dict(page_size=1), None)
    with pytest.raises(R.OracleSWAPoolTooSmall):
        cfg.calculate_pool_sizes(-1)
    no_window = R.create_pool_configurator({**GEMMA3_27B, "sliding_window_size": None}, dict(page_size=1), None)
    with pytest.raises(R.OracleNotEnoughMemory):
        no_window.calculate_pool_sizes(-1)


# --------------------------------------------------------------------------
# SGLang's ChunkCap unit tests (REFERENCE 2.4)
# --------------------------------------------------------------------------


def _ut_model(window: int) -> dict:
    return dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1], num_kv_heads=1, head_dim=16,
                sliding_window_size=window)


SGLANG_UT = [
    # window 8, E = 4, spec v1, p 4, 2 requests, steps 3, topk 2, 5 draft tokens, chunk 4
    (8, dict(page_size=4, max_running_requests=2, chunked_prefill_size=4, disable_overlap_schedule=True),
     dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5), 104),
    # the same with overlap and p 1
    (8, dict(page_size=1, max_running_requests=2, chunked_prefill_size=4),
     dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5), 91),
    # PD decode, window 4, 10 requests, p 1, no spec
    (4, dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disaggregation_mode="decode"),
     None, 100),
    # ... with 2 extra slots
    (4, dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disaggregation_mode="decode",
             disaggregation_decode_extra_slots=2), None, 110),
    # PD prefill, overlap, p 4, chunk 16, 2 requests, no spec
    (8, dict(page_size=4, max_running_requests=2, chunked_prefill_size=16, disaggregation_mode="prefill"),
     None, 76),
]


@pytest.mark.parametrize("window,serving,spec,cap", SGLANG_UT)
def test_sglang_chunk_cap_unit_tests(window: int, serving: dict, spec: dict | None, cap: int) -> None:
    serving = {**serving, "disable_radix_cache": True, "swa_eviction_interval": 4}
    cfg = R.create_pool_configurator(_ut_model(window), serving, spec)
    assert cfg.kind == "chunk_cap"
    assert cfg.swa_cap == cap
    p = serving["page_size"]
    ceil_cap = -(-cap // p) * p
    for T in (10_000, 50, cap, cap + 1):
        out = cfg.calculate_pool_sizes_from_max_tokens(T)
        assert out["swa_max_total_num_tokens"] == min(ceil_cap, T)
        assert out["full_max_total_num_tokens"] == T // p * p


# --------------------------------------------------------------------------
# golden.json: carries the REFERENCE numbers, and every entry is the oracle's
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFERENCE_NUMBERS))
def test_golden_carries_reference_numbers(name: str) -> None:
    assert name in CASES, f"golden.json lacks the REFERENCE case {name}"
    case = CASES[name]
    cell, cap, calls = REFERENCE_NUMBERS[name]
    if cell is not None:
        assert case["cell_size"] == cell
    if cap is not None:
        assert case["swa_cap"] == cap
    for i, want in calls.items():
        got = case["calls"][i]
        if isinstance(want, str):
            assert got.get("error") == want
        else:
            for key, value in want.items():
                assert got["expect"][key] == value, (name, i, key)


def test_golden_chunk_cap_max_token_calls_are_capped() -> None:
    for name, (_, cap, _) in REFERENCE_NUMBERS.items():
        case = CASES[name]
        if case["configurator"] != "chunk_cap":
            continue
        p = case["serving"]["page_size"]
        assert case["swa_cap"] == cap
        max_token_calls = [c for c in case["calls"] if c["entry"] == "max_tokens"]
        assert max_token_calls, name
        for call in max_token_calls:
            pp = call["page_size"] or p
            assert call["expect"]["swa_max_total_num_tokens"] == min(-(-cap // pp) * pp, call["value"])


def test_golden_has_reference_exact_plan() -> None:
    plan = PLANS["ref3_gemma3_27b_eagle3_p64_sglang_fit"]
    assert plan["fit"] == "sglang"
    assert plan["expect"]["over_budget_bytes"] == 5_242_880
    assert plan["expect"]["padding_bytes"] == 33_030_144


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_case_is_the_oracles(name: str) -> None:
    case = CASES[name]
    try:
        cfg = R.create_pool_configurator(case["model"], case["serving"], case["spec"])
    except R.OracleError as e:
        assert case["configurator"] is None
        for call in case["calls"]:
            assert call["error"] == e.kind
        return
    assert case["configurator"] == cfg.kind
    assert R.configurator_kind(case["model"], case["serving"], case["spec"]) == cfg.kind
    assert case["cell_size"] == cfg.cell_size
    assert type(case["cell_size"]) is type(cfg.cell_size)
    if cfg.kind == "chunk_cap":
        assert case["swa_cap"] == cfg.swa_cap
    for call in case["calls"]:
        try:
            got = {"expect": _call(cfg, call)}
        except R.OracleError as e:
            got = {"error": e.kind}
        want = {k: call[k] for k in ("expect", "error") if k in call}
        assert got == want, (name, call)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_golden_exact_plan_is_the_oracles(name: str) -> None:
    plan = PLANS[name]
    res = R.sglang_allocation_bytes(plan["model"], plan["serving"], plan["spec"], plan["available_bytes"])
    assert {k: res[k] for k in plan["expect"]} == plan["expect"]


# --------------------------------------------------------------------------
# The oracle's arithmetic is CPython's, including its corners
# --------------------------------------------------------------------------


def test_float_floor_division_is_not_floor_of_quotient() -> None:
    # A // C (fmod based) differs from floor(A / C) here; SGLang uses the former.
    case = CASES["hybrid_float_floor_division_is_fmod_based"]
    cfg = R.create_pool_configurator(case["model"], case["serving"], case["spec"])
    A = case["calls"][0]["value"]
    assert A // cfg.cell_size != math.floor(A / cfg.cell_size)
    assert cfg.calculate_pool_sizes(A)["max_total_num_tokens"] == int(A // cfg.cell_size)


def test_negative_budgets_floor_toward_minus_infinity() -> None:
    model = dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1)
    cfg = R.DefaultPoolConfigurator(model, dict(page_size=4))
    assert cfg.cell_size == 4
    with pytest.raises(R.OracleNotEnoughMemory):
        cfg.calculate_pool_sizes(-1)
    assert cfg.calculate_pool_sizes(16 * 5 + 3)["max_total_num_tokens"] == 20


def test_overflow_is_reported() -> None:
    huge = dict(full_attention_layer_ids=[0], num_kv_heads=2**31, head_dim=2**31)
    with pytest.raises(R.OracleOverflow):
        R.create_pool_configurator(huge, {}, None)
    # int(full * r) beyond 2**63 - 1
    model = dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1], num_kv_heads=1, head_dim=1)
    cfg = R.create_pool_configurator(model, dict(swa_full_tokens_ratio=4.0), None)
    with pytest.raises(R.OracleOverflow):
        cfg.calculate_pool_sizes_from_max_tokens(2**62)


@pytest.mark.parametrize(
    "model,serving,spec,kind",
    [
        (dict(full_attention_layer_ids=[0, 0], num_kv_heads=1, head_dim=1), {}, None, "invalid_config"),
        (dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), {}, None,
         "invalid_config"),
        (dict(num_kv_heads=1, head_dim=1), {}, None, "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=0, head_dim=1), {}, None, "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1, kv_lora_rank=4), {}, None,
         "invalid_config"),
        (dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1], num_kv_heads=1, head_dim=1,
              kv_lora_rank=4, qk_rope_head_dim=0), {}, None, "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), dict(tp_size=4, dcp_size=3), None,
         "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), dict(swa_full_tokens_ratio=0.0), None,
         "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), dict(kv_cache_dtype="int4"), None,
         "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), {},
         dict(algorithm="eagle", draft_num_layers=1, banded_draft_layers=2), "invalid_config"),
        (dict(full_attention_layer_ids=[0], num_kv_heads=1, head_dim=1), {},
         dict(algorithm="medusa"), "invalid_config"),
    ],
)
def test_invalid_configs(model: dict, serving: dict, spec: dict | None, kind: str) -> None:
    with pytest.raises(R.OracleError) as err:
        R.create_pool_configurator(model, serving, spec).calculate_pool_sizes(A40)
    assert err.value.kind == kind


def test_aliases() -> None:
    model = dict(full_attention_layer_ids=[0, 1], num_kv_heads=2, head_dim=8)
    base = R.create_pool_configurator(model, dict(kv_cache_dtype="fp8_e4m3"),
                                      dict(algorithm="nextn", draft_num_layers=1)).cell_size
    alias = R.create_pool_configurator(model, dict(kv_cache_dtype="FP8"),
                                       dict(algorithm="MTP", draft_num_layers=1)).cell_size
    assert base == alias == int(2 * 16 * 2 * (1 + 1 / 2))


def test_default_draft_scaling_is_float_truncation() -> None:
    # C = int(C * (1 + d / L)) in doubles: 18 * (1 + 2/3) is 29.999..., so 29, not 30.
    model = dict(full_attention_layer_ids=[0, 1, 2], num_kv_heads=1, head_dim=1, v_head_dim=2)
    cfg = R.DefaultPoolConfigurator(model, {}, dict(algorithm="eagle", draft_num_layers=2))
    assert cfg.cell_size == int(18 * (1 + 2 / 3)) == 29
    assert 18 * (3 + 2) // 3 == 30
    assert R.DefaultPoolConfigurator(model, dict(is_draft_worker=True),
                                     dict(algorithm="eagle", draft_num_layers=2)).cell_size == 18
    assert CASES["default_eagle_scaling_truncates_a_double"]["cell_size"] == 29


def test_decode_alloc_spec_v2_paged_tree() -> None:
    # SGLang get_alloc_len_per_decode (page > 1, topk > 1):
    # pages = ((p - 1) + steps + p - 1) // p; alloc = max(pages * p * topk, k); v2 doubles it.
    serving = R.normalize_serving(dict(page_size=4))
    spec = R.normalize_spec(dict(algorithm="eagle", num_steps=3, eagle_topk=2, num_draft_tokens=5))
    assert R.decode_alloc(serving, spec) == 2 * max(((4 - 1) + 3 + 4 - 1) // 4 * 4 * 2, 5) == 32
    ngram = R.normalize_spec(dict(algorithm="ngram", num_steps=3, eagle_topk=2, num_draft_tokens=5))
    assert R.decode_alloc(serving, ngram) == 2 * max(3 * 2, 5)
