"""REFERENCE.md's printed numbers against SGLang 0.5.23's own code, and golden.json.

The numbers below are copied from REFERENCE.md (``../shared/REFERENCE.md``;
section and example named next to each): section 5's worked examples and the
request caps of SGLang's unit tests (section 2.4). Each is checked against
the oracle (:mod:`sglang_oracle`: SGLang's released ``pool_configurator.py``),
on cases written in the oracle's own terms, so no kvbudget code is involved;
and tests/data/golden.json must carry them. Where 0.5.23 computes something
other than what REFERENCE prints, the test asserts SGLang's answer and names
the section 2.7 item (or the earlier misprint) that changes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import pytest
import sglang_oracle

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden.json").read_text())
CASES = {c["name"]: c for c in GOLDEN["cases"]}
PLANS = {p["name"]: p for p in GOLDEN["exact_plan"]}

GiB = 2**30
A40 = 40 * GiB
Case = dict[str, Any]

#: The serving inputs every oracle case needs, at SGLang's defaults.
BASE: Case = dict(kv_cache_dtype="bf16", model_dtype="bf16", page_size=1, swa_full_tokens_ratio=0.8,
                  swa_eviction_interval=128)


def geometry(n_f: int, n_s: int, heads: int, dim: int, window: Optional[int] = None) -> Case:
    """An MHA model whose V dim is its K dim and whose SWA layers share the full geometry."""
    return dict(num_full_layers=n_f, num_swa_layers=n_s, num_kv_heads=heads, head_dim=dim, v_head_dim=dim,
                swa_num_kv_heads=heads, swa_head_dim=dim, swa_v_head_dim=dim, sliding_window_size=window)


GEMMA3_27B = geometry(10, 52, 16, 128, window=1024)  # REFERENCE 5.1
GPT_OSS_120B = geometry(18, 18, 8, 64, window=127)  # REFERENCE 5.2
EAGLE3_1 = dict(algorithm="eagle3", draft_num_layers=1)
#: REFERENCE 5.4's request-cap serving and EAGLE3 decode.
REQUEST_CAP = dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192, disable_radix_cache=True)
REQUEST_CAP_SPEC = dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4)


@pytest.fixture(scope="module")
def oracle() -> sglang_oracle.Oracle:
    return sglang_oracle.load()


def sglang(oracle: sglang_oracle.Oracle, *parts: Case, entry: str = "bytes", amount: int = A40,
           page_size: Optional[int] = None) -> sglang_oracle.Outcome:
    """SGLang on the case made of ``BASE`` and ``parts`` (later keys win)."""
    case: Case = dict(BASE)
    for part in parts:
        case.update(part)
    return oracle.run(case, entry=entry, amount=amount, page_size=page_size)


def sizes(o: sglang_oracle.Outcome) -> tuple[Any, Any, Any]:
    """``(max_total, full, swa)`` of a successful outcome."""
    assert o.error is None and o.config is not None, o.error
    c = o.config
    return c["max_total_num_tokens"], c["full_max_total_num_tokens"], c["swa_max_total_num_tokens"]


def error_kind(o: sglang_oracle.Outcome) -> Optional[str]:
    return o.error[0] if o.error else None


# --------------------------------------------------------------------------
# REFERENCE section 5, from SGLang's code
# --------------------------------------------------------------------------


def test_example1_gemma3_27b_eagle3(oracle: sglang_oracle.Oracle) -> None:
    o = sglang(oracle, GEMMA3_27B, EAGLE3_1)
    assert o.class_name == "HybridSWAPoolConfigurator"
    # 5.1: C = 430,899.2, full 99,674, swa 79,739. 2.7 reorders the ratio term
    # to r * (S * n_s); the cell keeps its printed value here.
    assert o.cell_size == 430_899.2
    assert sizes(o) == (99_674, 99_674, 79_739)
    # p 64, as the serving page size and as the argument: full 99,648, swa 79,680
    assert sizes(sglang(oracle, GEMMA3_27B, EAGLE3_1, dict(page_size=64))) == (99_648, 99_648, 79_680)
    assert sizes(sglang(oracle, GEMMA3_27B, EAGLE3_1, page_size=64)) == (99_648, 99_648, 79_680)


@pytest.mark.parametrize("spec", [dict(algorithm="none"), dict(algorithm="none", draft_num_layers=1),
                                  dict(algorithm="eagle3", draft_num_layers=0),
                                  dict(algorithm="ngram", draft_num_layers=1)])
def test_example1_without_draft_terms(oracle: sglang_oracle.Oracle, spec: Case) -> None:
    # 5.1 "before #29622": C = 422,707.2, full 101,606 (what SGLang still
    # gives when no draft layers are counted).
    o = sglang(oracle, GEMMA3_27B, spec)
    assert o.cell_size == 422_707.2
    assert sizes(o)[:2] == (101_606, 101_606)


def test_example1_before_29622_draft_overran_budget(oracle: sglang_oracle.Oracle) -> None:
    # 5.1: the plan made without the draft term, plus the draft pool SGLang
    # then allocated on top (1 layer at the full pool's size), overran A by 0.775 GiB.
    _, full, swa = sizes(sglang(oracle, GEMMA3_27B))
    per_layer = 16 * (128 + 128) * 2  # F = S = 8192
    assert per_layer == 8192
    target = (full * 10 + swa * 52) * per_layer
    draft = full * 1 * per_layer
    assert round((target + draft - A40) / GiB, 3) == 0.775


@pytest.mark.parametrize(
    "tp,dtype,per_layer,full,swa",
    [(4, "fp8_e4m3", 256, 3_767_296, 3_013_824),
     (16, "fp8_e4m3", 128, 7_534_656, 6_027_712),
     (4, "mxfp8", 264, 3_653_120, 2_922_496)],
)
def test_example2_gpt_oss_120b(oracle: sglang_oracle.Oracle, tp: int, dtype: str, per_layer: int, full: int,
                               swa: int) -> None:
    o = sglang(oracle, GPT_OSS_120B, EAGLE3_1, dict(kv_cache_dtype=dtype, page_size=64, tp_size=tp),
               amount=30 * GiB)
    # 5.2 prints F = S = per_layer; SGLang's cell is F * (n_f + d) + r * (S * n_s)
    # (2.7's float order).
    assert o.cell_size == per_layer * (18 + 1) + 0.8 * (per_layer * 18)
    if (tp, dtype) == (4, "fp8_e4m3"):
        assert o.cell_size == 8_550.4
    assert sizes(o) == (full, full, swa)


def test_example3_all_swa(oracle: sglang_oracle.Oracle) -> None:
    o = sglang(oracle, geometry(0, 24, 8, 128), dict(algorithm="eagle", draft_num_layers=1), amount=16 * GiB)
    assert o.class_name == "HybridSWAPoolConfigurator"
    assert o.cell_size == 102_400 and isinstance(o.cell_size, int)
    assert sizes(o) == (167_772, 0, 167_772)


@pytest.mark.parametrize(
    "extra,cap,swa,full",
    [({}, 61_952, 61_952, 1_045_056),
     (dict(disaggregation_mode="decode", disaggregation_decode_extra_slots=8), 47_032, 47_040, 1_059_200),
     (dict(disable_overlap_schedule=True), 57_344, 57_344, 1_049_408)],
)
def test_example4_request_cap(oracle: sglang_oracle.Oracle, extra: Case, cap: int, swa: int, full: int) -> None:
    o = sglang(oracle, GPT_OSS_120B, REQUEST_CAP, REQUEST_CAP_SPEC, extra)
    # 2.7: SWAChunkCapPoolConfigurator is now SWARequestCapPoolConfigurator.
    assert o.class_name == "SWARequestCapPoolConfigurator"
    assert o.swa_cap == cap
    assert sizes(o) == (full, full, swa)


def test_example5_admission_floor(oracle: sglang_oracle.Oracle) -> None:
    case = (GEMMA3_27B, EAGLE3_1, dict(page_size=64, swa_full_tokens_ratio=0.1))
    # From 10,000 tokens: full 9,984, swa 960 <= 1,024 + 64, so it raises.
    o = sglang(oracle, *case, entry="tokens", amount=10_000)
    assert error_kind(o) == "swa_too_small"
    assert o.error is not None and all(n in o.error[2] for n in ("960", "1024", "64"))
    # From 12,000 it passes.
    _, full, swa = sizes(sglang(oracle, *case, entry="tokens", amount=12_000))
    assert full == 11_968 and swa > 1_024 + 64


def test_admission_floor_comes_before_not_enough_memory(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.3: the floor is checked before "not enough memory".
    assert error_kind(sglang(oracle, GEMMA3_27B, amount=-1)) == "swa_too_small"
    no_window = dict(GEMMA3_27B, sliding_window_size=None)
    assert error_kind(sglang(oracle, no_window, amount=-1)) == "not_enough_memory"


# --------------------------------------------------------------------------
# SGLang's request-cap unit tests (REFERENCE 2.4)
# --------------------------------------------------------------------------

UT_SPEC = dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5)
SGLANG_UT = [
    # window 8, E = 4, spec v1, p 4, 2 requests, steps 3, topk 2, 5 draft tokens, chunk 4
    (8, dict(page_size=4, max_running_requests=2, chunked_prefill_size=4, disable_overlap_schedule=True),
     UT_SPEC, 104),
    # the same with overlap and p 1
    (8, dict(page_size=1, max_running_requests=2, chunked_prefill_size=4), UT_SPEC, 91),
    # PD decode, window 4, 10 requests, p 1, no spec
    (4, dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disaggregation_mode="decode"),
     {}, 100),
    # ... with 2 extra slots
    (4, dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disaggregation_mode="decode",
             disaggregation_decode_extra_slots=2), {}, 110),
    # PD prefill, overlap, p 4, chunk 16, 2 requests, no spec
    (8, dict(page_size=4, max_running_requests=2, chunked_prefill_size=16, disaggregation_mode="prefill"),
     {}, 76),
]


@pytest.mark.parametrize("window,serving,spec,cap", SGLANG_UT)
def test_sglang_request_cap_unit_tests(oracle: sglang_oracle.Oracle, window: int, serving: Case, spec: Case,
                                       cap: int) -> None:
    case = (geometry(1, 1, 1, 16, window), dict(disable_radix_cache=True, swa_eviction_interval=4), serving, spec)
    p = serving["page_size"]
    for T in (10_000, 50, cap, cap + 1):
        o = sglang(oracle, *case, entry="tokens", amount=T)
        assert o.class_name == "SWARequestCapPoolConfigurator"
        assert o.swa_cap == cap
        # REFERENCE 2.4: full = T // p * p, swa = min(ceil_p(cap), T)
        assert sizes(o)[1:] == (T // p * p, min(-(-cap // p) * p, T))


# --------------------------------------------------------------------------
# Formulas REFERENCE prints that 0.5.23 changed (section 2.7)
# --------------------------------------------------------------------------


def test_default_eagle_draft_term(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.2 prints C = int(C * (1 + d / L)): int(18 * (1 + 2/3)) = 29 in
    # CPython doubles. 2.7 "Default, EAGLE/STANDALONE: C = C + int(C * d / L)": 30.
    assert int(18 * (1 + 2 / 3)) == 29
    model = dict(geometry(3, 0, 1, 1), v_head_dim=2, swa_v_head_dim=2)
    o = sglang(oracle, model, dict(algorithm="eagle", draft_num_layers=2))
    assert o.cell_size == 18 + int(18 * 2 / 3) == 30
    assert CASES["default_eagle_draft_term_is_int_of_c_d_over_l"]["cell_size"] == 30


def test_request_cap_in_pd_decode_without_chunk(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.4 requires chunked_prefill_size; 2.7 "It applies in PD decode
    # without a chunked_prefill_size": 5.4's PD-decode cap, 47,032, without one.
    pd = dict(REQUEST_CAP, chunked_prefill_size=None, disaggregation_mode="decode",
              disaggregation_decode_extra_slots=8)
    o = sglang(oracle, GPT_OSS_120B, pd, REQUEST_CAP_SPEC)
    assert (o.class_name, o.swa_cap) == ("SWARequestCapPoolConfigurator", 47_032)
    prefill = dict(pd, disaggregation_mode="prefill")
    assert sglang(oracle, GPT_OSS_120B, prefill, REQUEST_CAP_SPEC).class_name == "HybridSWAPoolConfigurator"


def test_request_cap_requests_per_dp_rank_at_least_one(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.4 prints N = max_running_requests // attn_dp_size (0 here);
    # 2.7: N = max(1, ...). 5.4's per-request tokens: W + E*k + p + 2 * max(steps*topk, k).
    per_request = 127 + 128 * 4 + 64 + 2 * max(3 * 1, 4)
    o = sglang(oracle, GPT_OSS_120B, REQUEST_CAP, REQUEST_CAP_SPEC, dict(max_running_requests=4, attn_dp_size=8))
    assert o.swa_cap == per_request * 1 + 2 * 8192 + 64


def test_request_cap_full_cell_counts_dflash(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.4: "SGLang omits d_c here, an open bug, #32508"; 2.7: fixed,
    # C_full = F * n_f + d_c, full = ((A - swa * S * n_s) // C_full) // p * p.
    d_c = 4096
    spec = dict(REQUEST_CAP_SPEC, algorithm="dflash", dflash_draft_cell_size_per_token=d_c)
    o = sglang(oracle, GPT_OSS_120B, REQUEST_CAP, spec)
    assert o.swa_cap is not None
    F = S = 8 * (64 + 64) * 2
    swa = -(-o.swa_cap // 64) * 64
    assert sizes(o)[1] == (A40 - swa * S * 18) // (F * 18 + d_c) // 64 * 64


def test_spec_v2_paged_tree_decode_allocation(oracle: sglang_oracle.Oracle) -> None:
    # REFERENCE 2.4 prints ceil((2 * (p' - 1) + steps) / p') pages per topk branch
    # (3 here); SGLang's get_alloc_len_per_decode takes the floor,
    # ((p' - 1) + steps + p' - 1) // p' (2 here) (docs/semantics.md).
    p, steps, topk, k = 4, 3, 2, 5
    assert math.ceil((2 * (p - 1) + steps) / p) == 3
    pages = ((p - 1) + steps + p - 1) // p
    decode_alloc = 2 * max(pages * p * topk, k)
    o = sglang(oracle, geometry(1, 1, 1, 16, 8), dict(disable_radix_cache=True, swa_eviction_interval=4),
               dict(page_size=p, max_running_requests=2, chunked_prefill_size=4), UT_SPEC)
    assert o.swa_cap == (8 + 4 * k + p + decode_alloc) * 2 + 2 * 4 + p


# --------------------------------------------------------------------------
# CPython arithmetic SGLang relies on (REFERENCE 2.6)
# --------------------------------------------------------------------------


def test_float_floor_division_is_not_floor_of_quotient() -> None:
    # A // C (fmod based) differs from floor(A / C) here; SGLang uses the former.
    case = CASES["hybrid_float_floor_division_is_fmod_based"]
    C, call = case["cell_size"], case["calls"][0]
    A = call["value"]
    assert A // C != math.floor(A / C)
    assert call["expect"]["max_total_num_tokens"] == int(A // C)


def test_negative_budgets_floor_toward_minus_infinity(oracle: sglang_oracle.Oracle) -> None:
    model = geometry(1, 0, 1, 1)
    assert sglang(oracle, model, dict(page_size=4), amount=16 * 5 + 3).cell_size == 4
    assert error_kind(sglang(oracle, model, dict(page_size=4), amount=-1)) == "not_enough_memory"
    assert sizes(sglang(oracle, model, dict(page_size=4), amount=16 * 5 + 3))[0] == 20


# --------------------------------------------------------------------------
# golden.json carries the REFERENCE numbers
# --------------------------------------------------------------------------


def full_swa(full: int, swa: int) -> Case:
    return dict(max_total_num_tokens=full, full_max_total_num_tokens=full, swa_max_total_num_tokens=swa)


# name -> (cell_size or None, swa_cap or None, {call index: expected sizes or error})
REFERENCE_NUMBERS: dict[str, tuple[Any, Optional[int], dict[int, Any]]] = {
    "ref5_ex1_gemma3_27b_eagle3_p1": (430899.2, None, {0: full_swa(99674, 79739)}),
    "ref5_ex1_gemma3_27b_eagle3_p64": (430899.2, None, {0: full_swa(99648, 79680)}),
    "ref5_ex1_gemma3_27b_before_29622_spec_none": (422707.2, None, {0: dict(max_total_num_tokens=101606)}),
    "ref5_ex1_gemma3_27b_before_29622_eagle3_d0": (422707.2, None, {0: dict(max_total_num_tokens=101606)}),
    "ref5_ex2_gpt_oss_120b_fp8_tp4": (8550.4, None, {0: full_swa(3767296, 3013824)}),
    "ref5_ex2_gpt_oss_120b_fp8_tp16": (None, None, {0: full_swa(7534656, 6027712)}),
    "ref5_ex2_gpt_oss_120b_mxfp8_tp4": (None, None, {0: full_swa(3653120, 2922496)}),
    "ref5_ex3_all_swa_eagle": (102400, None, {0: dict(full_swa(167772, 167772), full_max_total_num_tokens=0)}),
    "ref5_ex4_request_cap_overlap_on": (None, 61952, {0: full_swa(1045056, 61952)}),
    "ref5_ex4_request_cap_pd_decode": (None, 47032, {0: full_swa(1059200, 47040)}),
    "ref5_ex4_request_cap_overlap_off": (None, 57344, {0: full_swa(1049408, 57344)}),
    "ref5_ex5_admission_floor": (None, None, {0: "swa_pool_too_small", 1: dict(full_max_total_num_tokens=11968)}),
    "sglang_ut_request_cap_spec_v1_p4": (None, 104, {}),
    "sglang_ut_request_cap_spec_v2_p1": (None, 91, {}),
    "sglang_ut_request_cap_pd_decode": (None, 100, {}),
    "sglang_ut_request_cap_pd_decode_extra_slots": (None, 110, {}),
    "sglang_ut_request_cap_pd_prefill_overlap_p4": (None, 76, {}),
}


@pytest.mark.parametrize("name", sorted(REFERENCE_NUMBERS))
def test_golden_carries_reference_numbers(name: str) -> None:
    assert name in CASES, f"golden.json lacks the REFERENCE case {name}"
    case = CASES[name]
    cell, cap, calls = REFERENCE_NUMBERS[name]
    if cell is not None:
        assert case["cell_size"] == cell and type(case["cell_size"]) is type(cell)
    if cap is not None:
        assert case["swa_cap"] == cap
    for i, want in calls.items():
        got = case["calls"][i]
        if isinstance(want, str):
            assert got.get("error") == want
        else:
            assert {k: got["expect"][k] for k in want} == want, (name, i)


def test_golden_request_cap_max_token_calls_are_capped() -> None:
    # REFERENCE 2.4, from max tokens: swa = min(ceil_p(cap), T).
    checked = 0
    for name, (_, cap, _) in REFERENCE_NUMBERS.items():
        case = CASES[name]
        if cap is None:
            continue
        for call in case["calls"]:
            if call["entry"] == "max_tokens":
                p = call["page_size"] or case["serving"]["page_size"]
                assert call["expect"]["swa_max_total_num_tokens"] == min(-(-cap // p) * p, call["value"])
                checked += 1
    assert checked >= 8


def test_golden_has_reference_exact_plan() -> None:
    # REFERENCE 3 / 5.1 (p 64): padding rows cost 33,030,144 bytes and SGLang's
    # allocation exceeds A by 5,242,880 bytes.
    plan = PLANS["ref3_gemma3_27b_eagle3_p64_sglang_fit"]
    assert plan["fit"] == "sglang" and plan["available_bytes"] == A40
    assert plan["expect"] == dict(total_bytes=A40 + 5_242_880, over_budget_bytes=5_242_880,
                                  padding_bytes=33_030_144)
