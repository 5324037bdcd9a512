"""Generator for tests/data/golden.json: python tests/data/make_golden.py (rewrites golden.json beside it).

Every expectation is computed by tests/reference.py; the REFERENCE-printed
numbers are re-checked by tests/test_reference_oracle.py.
"""
import json, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
import reference as R

GiB = 2**30
A40 = 40 * GiB
A30 = 30 * GiB
A16 = 16 * GiB

full27 = list(range(5, 62, 6))
G27 = dict(full_attention_layer_ids=full27,
           swa_attention_layer_ids=[i for i in range(62) if i not in full27],
           num_kv_heads=16, head_dim=128, sliding_window_size=1024)
GOSS = dict(full_attention_layer_ids=list(range(1, 36, 2)),
            swa_attention_layer_ids=list(range(0, 36, 2)),
            num_kv_heads=8, head_dim=64, sliding_window_size=127)
ALLSWA = dict(full_attention_layer_ids=[], swa_attention_layer_ids=list(range(24)),
              num_kv_heads=8, head_dim=128, sliding_window_size=4095)
LLAMA8 = dict(full_attention_layer_ids=list(range(32)), swa_attention_layer_ids=[],
              num_kv_heads=8, head_dim=128)
DSV3 = dict(full_attention_layer_ids=list(range(61)), swa_attention_layer_ids=[],
            num_kv_heads=128, head_dim=192, v_head_dim=128, kv_lora_rank=512, qk_rope_head_dim=64)
mimo_full = [0, 5, 11, 17, 23, 29, 35, 41, 47]
MIMO = dict(full_attention_layer_ids=mimo_full,
            swa_attention_layer_ids=[i for i in range(48) if i not in mimo_full],
            num_kv_heads=4, head_dim=192, v_head_dim=128, swa_num_kv_heads=8,
            swa_head_dim=192, swa_v_head_dim=128, sliding_window_size=127)
EAGLE3_1 = dict(algorithm="eagle3", draft_num_layers=1)


def ut_model(window):
    return dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1],
                num_kv_heads=1, head_dim=16, sliding_window_size=window)


def b(value, page_size=None):
    return dict(entry="bytes", value=value, page_size=page_size)


def t(value, page_size=None):
    return dict(entry="max_tokens", value=value, page_size=page_size)


CASES = [
    # ---- REFERENCE section 5 -------------------------------------------------
    dict(name="ref5_ex1_gemma3_27b_eagle3_p1", source="REFERENCE 5 example 1 (p 1)",
         model=G27, serving=dict(page_size=1), spec=EAGLE3_1, calls=[b(A40)]),
    dict(name="ref5_ex1_gemma3_27b_eagle3_p64", source="REFERENCE 5 example 1 (p 64)",
         model=G27, serving=dict(page_size=64), spec=EAGLE3_1, calls=[b(A40)]),
    dict(name="ref5_ex1_gemma3_27b_before_29622_spec_none", source="REFERENCE 5 example 1 (before #29622)",
         model=G27, serving=dict(page_size=1), spec=dict(algorithm="none"), calls=[b(A40)]),
    dict(name="ref5_ex1_gemma3_27b_before_29622_eagle3_d0", source="REFERENCE 5 example 1 (before #29622)",
         model=G27, serving=dict(page_size=1), spec=dict(algorithm="eagle3", draft_num_layers=0),
         calls=[b(A40)]),
    dict(name="ref5_ex2_gpt_oss_120b_fp8_tp4", source="REFERENCE 5 example 2 (TP 4)",
         model=GOSS, serving=dict(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=4), spec=EAGLE3_1,
         calls=[b(A30)]),
    dict(name="ref5_ex2_gpt_oss_120b_fp8_tp16", source="REFERENCE 5 example 2 (TP 16)",
         model=GOSS, serving=dict(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=16), spec=EAGLE3_1,
         calls=[b(A30)]),
    dict(name="ref5_ex2_gpt_oss_120b_mxfp8_tp4", source="REFERENCE 5 example 2 (mxfp8, TP 4)",
         model=GOSS, serving=dict(kv_cache_dtype="mxfp8", page_size=64, tp_size=4), spec=EAGLE3_1,
         calls=[b(A30)]),
    dict(name="ref5_ex3_all_swa_eagle", source="REFERENCE 5 example 3",
         model=ALLSWA, serving=dict(page_size=1), spec=dict(algorithm="eagle", draft_num_layers=1),
         calls=[b(A16), t(167772), t(1000, 64)]),
    dict(name="ref5_ex4_chunk_cap_overlap_on", source="REFERENCE 5 example 4",
         model=GOSS,
         serving=dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                      disable_radix_cache=True, swa_eviction_interval=128),
         spec=dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4),
         calls=[b(A40), t(1_000_000), t(50_000)]),
    dict(name="ref5_ex4_chunk_cap_pd_decode", source="REFERENCE 5 example 4 (PD decode, 8 extra slots)",
         model=GOSS,
         serving=dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                      disable_radix_cache=True, swa_eviction_interval=128,
                      disaggregation_mode="decode", disaggregation_decode_extra_slots=8),
         spec=dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4),
         calls=[b(A40), t(1_000_000)]),
    dict(name="ref5_ex4_chunk_cap_overlap_off", source="REFERENCE 5 example 4 (overlap off)",
         model=GOSS,
         serving=dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
                      disable_radix_cache=True, swa_eviction_interval=128, disable_overlap_schedule=True),
         spec=dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4),
         calls=[b(A40), t(1_000_000)]),
    dict(name="ref5_ex5_admission_floor", source="REFERENCE 5 example 5",
         model=G27, serving=dict(page_size=64, swa_full_tokens_ratio=0.1), spec=EAGLE3_1,
         calls=[t(10_000), t(12_000), b(A40)]),
    # ---- SGLang's own ChunkCap unit tests (REFERENCE 2.4) --------------------
    dict(name="sglang_ut_chunk_cap_spec_v1_p4", source="REFERENCE 2.4 / SGLang unit test (cap 104)",
         model=ut_model(8),
         serving=dict(page_size=4, max_running_requests=2, chunked_prefill_size=4, disable_radix_cache=True,
                      swa_eviction_interval=4, disable_overlap_schedule=True),
         spec=dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5),
         calls=[t(10_000), t(50), b(2**20)]),
    dict(name="sglang_ut_chunk_cap_spec_v2_p1", source="REFERENCE 2.4 / SGLang unit test (cap 91)",
         model=ut_model(8),
         serving=dict(page_size=1, max_running_requests=2, chunked_prefill_size=4, disable_radix_cache=True,
                      swa_eviction_interval=4),
         spec=dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5),
         calls=[t(10_000), t(50), b(2**20)]),
    dict(name="sglang_ut_chunk_cap_pd_decode", source="REFERENCE 2.4 / SGLang unit test (cap 100)",
         model=ut_model(4),
         serving=dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disable_radix_cache=True,
                      swa_eviction_interval=4, disaggregation_mode="decode"),
         spec=None, calls=[t(10_000), t(50), b(2**20)]),
    dict(name="sglang_ut_chunk_cap_pd_decode_extra_slots", source="REFERENCE 2.4 / SGLang unit test (cap 110)",
         model=ut_model(4),
         serving=dict(page_size=1, max_running_requests=10, chunked_prefill_size=4, disable_radix_cache=True,
                      swa_eviction_interval=4, disaggregation_mode="decode",
                      disaggregation_decode_extra_slots=2),
         spec=None, calls=[t(10_000), t(50), b(2**20)]),
    dict(name="sglang_ut_chunk_cap_pd_prefill_overlap_p4", source="REFERENCE 2.4 / SGLang unit test (cap 76)",
         model=ut_model(8),
         serving=dict(page_size=4, max_running_requests=2, chunked_prefill_size=16, disable_radix_cache=True,
                      swa_eviction_interval=4, disaggregation_mode="prefill"),
         spec=None, calls=[t(10_000), t(50), b(2**20)]),
    # ---- extra coverage (expectations from the oracle only) -----------------
    dict(name="default_llama31_8b_eagle3", source="oracle",
         model=LLAMA8, serving=dict(), spec=EAGLE3_1, calls=[b(A40), b(A40, 16), t(12345, 16), b(-1), b(0), b(2**63 - 1), t(-(2**63)), t(2**63 - 1, 3)]),
    dict(name="default_llama31_8b_tp16_dcp2", source="oracle",
         model=LLAMA8, serving=dict(tp_size=16, dcp_size=2, page_size=64), spec=None, calls=[b(A40)]),
    dict(name="default_llama31_8b_fp4_tp2", source="oracle",
         model=LLAMA8, serving=dict(kv_cache_dtype="fp4_e2m1", tp_size=2), spec=None, calls=[b(A40)]),
    dict(name="default_llama31_8b_mxfp8_standalone", source="oracle",
         model=LLAMA8, serving=dict(kv_cache_dtype="mxfp8"),
         spec=dict(algorithm="standalone", draft_num_layers=16), calls=[b(A40)]),
    dict(name="default_llama31_8b_dflash_cell", source="oracle",
         model=LLAMA8, serving=dict(tp_size=2, dcp_size=2),
         spec=dict(algorithm="dflash", draft_num_layers=5, dflash_draft_cell_size_per_token=40960),
         calls=[b(A40)]),
    dict(name="default_llama31_8b_dflash_scaled", source="oracle",
         model=LLAMA8, serving=dict(tp_size=2, dcp_size=2),
         spec=dict(algorithm="dflash", draft_num_layers=5), calls=[b(A40)]),
    dict(name="default_llama31_8b_draft_worker", source="oracle",
         model=LLAMA8, serving=dict(is_draft_worker=True), spec=EAGLE3_1, calls=[b(A40)]),
    dict(name="default_deepseek_v3_mla_fp8_mtp", source="oracle",
         model=DSV3, serving=dict(kv_cache_dtype="fp8_e4m3", tp_size=8, page_size=64),
         spec=dict(algorithm="mtp", draft_num_layers=1), calls=[b(A40)]),
    dict(name="default_deepseek_v3_mla_fp4", source="oracle",
         model=DSV3, serving=dict(kv_cache_dtype="fp4_e2m1", page_size=64), spec=None, calls=[b(A40)]),
    dict(name="default_gemma3_27b_hybrid_disabled", source="oracle",
         model=G27, serving=dict(disable_hybrid_swa_memory=True), spec=EAGLE3_1, calls=[b(A40)]),
    dict(name="hybrid_mimo_v2_flash_banded_mtp", source="oracle",
         model=MIMO, serving=dict(tp_size=2, page_size=16, swa_full_tokens_ratio=0.3),
         spec=dict(algorithm="nextn", draft_num_layers=3, banded_draft_layers=2), calls=[b(A40), t(300000)]),
    dict(name="hybrid_gemma3_27b_dflash_cell", source="oracle",
         model=G27, serving=dict(tp_size=2, dcp_size=2, swa_full_tokens_ratio=0.7),
         spec=dict(algorithm="dflash", draft_num_layers=1, dflash_draft_cell_size_per_token=8192),
         calls=[b(A40)]),
    dict(name="hybrid_gemma3_27b_negative_budget", source="oracle",
         model=G27, serving=dict(), spec=None, calls=[b(-A40), t(-5), t(0)]),
    dict(name="hybrid_no_window_negative_budget", source="oracle",
         model={**G27, "sliding_window_size": None}, serving=dict(), spec=None,
         calls=[b(-A40), t(0), t(7, 4)]),
    dict(name="chunk_cap_no_room_for_full_pool", source="oracle",
         model=GOSS,
         serving=dict(page_size=64, max_running_requests=4096, chunked_prefill_size=8192,
                      disable_radix_cache=True),
         spec=None, calls=[b(GiB), t(0)]),
    dict(name="hybrid_float_floor_division_is_fmod_based", source="oracle (A // C != floor(A / C))",
         model=dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1, 2, 3], num_kv_heads=1, head_dim=64),
         serving=dict(swa_full_tokens_ratio=0.9), spec=None,
         calls=[b(2801313311672095367), b(2**63 - 1), b(2**62, 64)]),
    dict(name="default_eagle_scaling_truncates_a_double", source="oracle (int(18 * (1 + 2/3)) == 29)",
         model=dict(full_attention_layer_ids=[0, 1, 2], swa_attention_layer_ids=[], num_kv_heads=1, head_dim=1,
                    v_head_dim=2),
         serving=dict(), spec=dict(algorithm="eagle", draft_num_layers=2), calls=[b(29 * 1000 + 28), b(30000)]),
    dict(name="invalid_fp4_with_swa_layers", source="oracle",
         model=G27, serving=dict(kv_cache_dtype="fp4_e2m1"), spec=None, calls=[b(A40)]),
    dict(name="overflow_huge_heads", source="oracle",
         model=dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[], num_kv_heads=2**31,
                    head_dim=2**31), serving=dict(), spec=None, calls=[b(A40)]),
]

EXACT_PLAN = [
    dict(name="ref3_gemma3_27b_eagle3_p64_sglang_fit", source="REFERENCE 3 / 5 example 1 (p 64)",
         model=G27, serving=dict(page_size=64), spec=EAGLE3_1, available_bytes=A40, fit="sglang"),
]

SCHEMA = (
    "Golden vectors shared by cargo tests and pytest. Top level: {schema, cases, exact_plan}. "
    "cases[i] = {name, source, model: ModelGeometry kwargs, serving: ServingConfig kwargs, "
    "spec: SpeculativeConfig kwargs or null (no speculation), configurator: 'default'|'hybrid_swa'|'chunk_cap' "
    "(what create_pool_configurator returns), optional cell_size (int, or float where the ratio enters), "
    "optional swa_cap (int tokens, chunk_cap only), calls: [{entry: 'bytes' (calculate_pool_sizes) | "
    "'max_tokens' (calculate_pool_sizes_from_max_tokens), value: int, page_size: int or null (null = the "
    "serving page size), and exactly one of expect: {max_total_num_tokens, full_max_total_num_tokens, "
    "swa_max_total_num_tokens} (null where SGLang leaves it None) or error: 'invalid_config'|'overflow'|"
    "'not_enough_memory'|'swa_pool_too_small'}]}. A case whose configurator cannot be built has "
    "configurator null and every call carries that error. exact_plan[i] = {name, source, model, serving, spec, "
    "available_bytes, fit: 'sglang', expect: {total_bytes, over_budget_bytes, padding_bytes}}: the bytes "
    "SGLang allocates for the plan it makes (per layer K [tokens+p, H_rank, Dk] and V [tokens+p, H_rank, Dv]; "
    "draft pool = d layers at the target's full geometry with full-pool capacity). Every expectation comes "
    "from tests/reference.py; tests/test_reference_oracle.py re-checks the REFERENCE-printed numbers."
)


def build():
    cases = []
    for c in CASES:
        out = {k: c[k] for k in ("name", "source", "model", "serving", "spec")}
        try:
            cfg = R.create_pool_configurator(c["model"], c["serving"], c["spec"])
            out["configurator"] = cfg.kind
            out["cell_size"] = cfg.cell_size
            if cfg.kind == "chunk_cap":
                out["swa_cap"] = cfg.swa_cap
        except R.OracleError as e:
            out["configurator"] = None
        calls = []
        for call in c["calls"]:
            res = R.run_call(c["model"], c["serving"], c["spec"], call["entry"], call["value"], call["page_size"])
            calls.append({**call, **res})
        out["calls"] = calls
        cases.append(out)
    plans = []
    for p in EXACT_PLAN:
        res = R.sglang_allocation_bytes(p["model"], p["serving"], p["spec"], p["available_bytes"])
        plans.append({**p, "expect": {k: res[k] for k in ("total_bytes", "over_budget_bytes", "padding_bytes")}})
    return {"schema": SCHEMA, "cases": cases, "exact_plan": plans}


if __name__ == "__main__":
    doc = build()
    with open(__import__("pathlib").Path(__file__).with_name("golden.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for c in doc["cases"]:
        print(c["name"], c["configurator"], c.get("cell_size"), c.get("swa_cap"),
              [x.get("expect") or x.get("error") for x in c["calls"]])
    print(doc["exact_plan"])
