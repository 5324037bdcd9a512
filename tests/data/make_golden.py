"""Generator of tests/data/golden.json: ``python tests/data/make_golden.py``.

Every expectation is SGLang 0.5.23's own answer, from its released
``pool_configurator.py`` run by the test oracle (:mod:`sglang_oracle`):

1. a case's kwargs build kvbudget's objects (``ModelGeometry(**model)``,
   ``ServingConfig(**serving)``, ``SpeculativeConfig(**spec)``);
2. every scenario field (``kvbudget.fields.SCENARIO_FIELDS``) is read back
   from them, resolved (defaults filled, aliases resolved, layer counts from
   the id lists), as the oracle case. The oracle puts full layers at ids
   ``0..n_f`` and SWA layers after them; only the counts enter the sizing;
3. each call runs SGLang's factory and entry point on that case.

The one rule that is kvbudget's, not SGLang's (docs/semantics.md,
"Arithmetic"): a quantity outside the signed 64-bit range is error
``overflow``. It is applied to what SGLang computed: a cell size or request
cap out of range means the configurator cannot be built (every call
``overflow``), a call's token count or byte count out of range makes that
call ``overflow``.

The exact_plan section's "bytes SGLang allocates" is computed here
(:func:`sglang_allocation`) from SGLang's sizes; tests/test_golden_current.py
checks that golden.json is what :func:`build` gives now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import kvbudget  # noqa: E402
import sglang_oracle  # noqa: E402
from kvbudget.fields import SCENARIO_FIELDS  # noqa: E402

GOLDEN = Path(__file__).with_name("golden.json")
Json = dict[str, Any]

GiB = 2**30
A40 = 40 * GiB
A30 = 30 * GiB
A16 = 16 * GiB
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

# --------------------------------------------------------------------------
# Models (ModelGeometry kwargs)
# --------------------------------------------------------------------------


def split(n: int, is_full: Any, **shape: Any) -> Json:
    """A model of ``n`` layers: ``is_full(i)`` picks the full-attention ones."""
    return dict(
        full_attention_layer_ids=[i for i in range(n) if is_full(i)],
        swa_attention_layer_ids=[i for i in range(n) if not is_full(i)],
        **shape,
    )


#: Gemma-3-27B-like (REFERENCE 5.1): 62 layers, full = {5, 11, ..., 59}.
G27 = split(62, lambda i: i % 6 == 5, num_kv_heads=16, head_dim=128, sliding_window_size=1024)
#: gpt-oss-120b-like (REFERENCE 5.2): 18 full + 18 SWA, alternating.
GOSS = split(36, lambda i: i % 2 == 1, num_kv_heads=8, head_dim=64, sliding_window_size=127)
#: All-SWA (REFERENCE 5.3).
ALLSWA = split(24, lambda i: False, num_kv_heads=8, head_dim=128, sliding_window_size=4095)
LLAMA8 = split(32, lambda i: True, num_kv_heads=8, head_dim=128)
DSV3 = split(61, lambda i: True, num_kv_heads=128, head_dim=192, v_head_dim=128,
             kv_lora_rank=512, qk_rope_head_dim=64)
#: DeepSeek-V3.2-like: DeepSeek-V3's latent plus a DSA index key of 128 dims per layer.
DSV32 = dict(DSV3, index_head_dim=128)
#: GLM-5-like DSA: 78 layers, 20 of them reusing their predecessor's top-k, keys pooled by 2.
GLM5 = split(78, lambda i: True, num_kv_heads=64, head_dim=256, v_head_dim=256, kv_lora_rank=512,
             qk_rope_head_dim=64, index_head_dim=128, index_kpool=2, index_shared_layers=20)
#: MiMo-V2-Flash-like: 9 full + 39 SWA, SWA layers with twice the heads.
MIMO = split(48, lambda i: i in (0, 5, 11, 17, 23, 29, 35, 41, 47), num_kv_heads=4, head_dim=192,
             v_head_dim=128, swa_num_kv_heads=8, swa_head_dim=192, swa_v_head_dim=128,
             sliding_window_size=127)
#: An MLA model with SWA layers of their own (smaller) latents.
MLA_SWA = split(40, lambda i: i % 4 == 3, num_kv_heads=64, head_dim=192, v_head_dim=128,
                kv_lora_rank=512, qk_rope_head_dim=64, swa_kv_lora_rank=256,
                swa_qk_rope_head_dim=32, sliding_window_size=511)


def ut_model(window: int) -> Json:
    """SGLang's request-cap unit tests: 1 full + 1 SWA layer."""
    return split(2, lambda i: i == 0, num_kv_heads=1, head_dim=16, sliding_window_size=window)


# --------------------------------------------------------------------------
# Serving and speculative kwargs
# --------------------------------------------------------------------------

EAGLE3_1 = dict(algorithm="eagle3", draft_num_layers=1)
#: REFERENCE 5.4's request-cap serving and EAGLE3 decode.
RC = dict(page_size=64, max_running_requests=64, chunked_prefill_size=8192,
          disable_radix_cache=True, swa_eviction_interval=128)
RC_NO_CHUNK = {k: v for k, v in RC.items() if k != "chunked_prefill_size"}
RC_SPEC = dict(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4)
#: The SGLang unit tests' request-cap serving (window 8 or 4, E = 4).
UT = dict(disable_radix_cache=True, swa_eviction_interval=4)
UT_SPEC = dict(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=2, num_draft_tokens=5)
NVFP4 = dict(kv_cache_dtype="nvfp4", prefill_attention_backend="flashinfer",
             decode_attention_backend="trtllm_mha")


def b(value: int, page_size: Optional[int] = None) -> Json:
    """A ``calculate_pool_sizes`` call."""
    return dict(entry="bytes", value=value, page_size=page_size)


def t(value: int, page_size: Optional[int] = None) -> Json:
    """A ``calculate_pool_sizes_from_max_tokens`` call."""
    return dict(entry="max_tokens", value=value, page_size=page_size)


def case(name: str, source: str, model: Json, serving: Optional[Json] = None,
         spec: Optional[Json] = None, calls: Optional[list[Json]] = None) -> Json:
    return dict(name=name, source=source, model=model, serving=serving or {}, spec=spec,
                calls=calls or [b(A40)])


ORACLE = "oracle"
UT_CAP = "REFERENCE 2.4 / SGLang unit test (cap {})"

CASES: list[Json] = [
    # ---- REFERENCE section 5 ------------------------------------------------
    case("ref5_ex1_gemma3_27b_eagle3_p1", "REFERENCE 5 example 1 (p 1)",
         G27, dict(page_size=1), EAGLE3_1),
    case("ref5_ex1_gemma3_27b_eagle3_p64", "REFERENCE 5 example 1 (p 64)",
         G27, dict(page_size=64), EAGLE3_1),
    case("ref5_ex1_gemma3_27b_before_29622_spec_none", "REFERENCE 5 example 1 (before #29622)",
         G27, dict(page_size=1), dict(algorithm="none")),
    case("ref5_ex1_gemma3_27b_before_29622_eagle3_d0", "REFERENCE 5 example 1 (before #29622)",
         G27, dict(page_size=1), dict(algorithm="eagle3", draft_num_layers=0)),
    case("ref5_ex2_gpt_oss_120b_fp8_tp4", "REFERENCE 5 example 2 (TP 4)",
         GOSS, dict(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=4), EAGLE3_1, [b(A30)]),
    case("ref5_ex2_gpt_oss_120b_fp8_tp16", "REFERENCE 5 example 2 (TP 16)",
         GOSS, dict(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=16), EAGLE3_1, [b(A30)]),
    case("ref5_ex2_gpt_oss_120b_mxfp8_tp4", "REFERENCE 5 example 2 (mxfp8, TP 4)",
         GOSS, dict(kv_cache_dtype="mxfp8", page_size=64, tp_size=4), EAGLE3_1, [b(A30)]),
    case("ref5_ex3_all_swa_eagle", "REFERENCE 5 example 3",
         ALLSWA, dict(page_size=1), dict(algorithm="eagle", draft_num_layers=1),
         [b(A16), t(167772), t(1000, 64)]),
    case("ref5_ex4_request_cap_overlap_on", "REFERENCE 5 example 4",
         GOSS, RC, RC_SPEC, [b(A40), t(1_000_000), t(50_000)]),
    case("ref5_ex4_request_cap_pd_decode", "REFERENCE 5 example 4 (PD decode, 8 extra slots)",
         GOSS, dict(RC, disaggregation_mode="decode", disaggregation_decode_extra_slots=8), RC_SPEC,
         [b(A40), t(1_000_000)]),
    case("ref5_ex4_request_cap_overlap_off", "REFERENCE 5 example 4 (overlap off)",
         GOSS, dict(RC, disable_overlap_schedule=True), RC_SPEC, [b(A40), t(1_000_000)]),
    case("ref5_ex5_admission_floor", "REFERENCE 5 example 5",
         G27, dict(page_size=64, swa_full_tokens_ratio=0.1), EAGLE3_1, [t(10_000), t(12_000), b(A40)]),
    # ---- SGLang's own request-cap unit tests (REFERENCE 2.4) ---------------
    case("sglang_ut_request_cap_spec_v1_p4", UT_CAP.format(104), ut_model(8),
         dict(UT, page_size=4, max_running_requests=2, chunked_prefill_size=4,
              disable_overlap_schedule=True),
         UT_SPEC, [t(10_000), t(50), b(2**20)]),
    case("sglang_ut_request_cap_spec_v2_p1", UT_CAP.format(91), ut_model(8),
         dict(UT, page_size=1, max_running_requests=2, chunked_prefill_size=4),
         UT_SPEC, [t(10_000), t(50), b(2**20)]),
    case("sglang_ut_request_cap_pd_decode", UT_CAP.format(100), ut_model(4),
         dict(UT, page_size=1, max_running_requests=10, chunked_prefill_size=4,
              disaggregation_mode="decode"),
         None, [t(10_000), t(50), b(2**20)]),
    case("sglang_ut_request_cap_pd_decode_extra_slots", UT_CAP.format(110), ut_model(4),
         dict(UT, page_size=1, max_running_requests=10, chunked_prefill_size=4,
              disaggregation_mode="decode", disaggregation_decode_extra_slots=2),
         None, [t(10_000), t(50), b(2**20)]),
    case("sglang_ut_request_cap_pd_prefill_overlap_p4", UT_CAP.format(76), ut_model(8),
         dict(UT, page_size=4, max_running_requests=2, chunked_prefill_size=16,
              disaggregation_mode="prefill"),
         None, [t(10_000), t(50), b(2**20)]),
    # ---- Default ------------------------------------------------------------
    case("default_llama31_8b_eagle3", ORACLE, LLAMA8, {}, EAGLE3_1,
         [b(A40), b(A40, 16), t(12345, 16), b(-1), b(0), b(I64_MAX), t(I64_MIN), t(I64_MAX, 3)]),
    case("default_llama31_8b_tp16_dcp2", ORACLE, LLAMA8, dict(tp_size=16, dcp_size=2, page_size=64)),
    case("default_llama31_8b_nvfp4_tp2", "oracle (was fp4_e2m1; 2.7: FP4 recipes)",
         LLAMA8, dict(NVFP4, tp_size=2)),
    case("default_llama31_8b_nvfp4_sm100", "oracle (NVFP4: linear and native scale layouts)",
         LLAMA8, dict(NVFP4, is_sm100=True), None, [b(A40), t(100_000)]),
    case("default_llama31_8b_nvfp4_sm120", "oracle (NVFP4 on SM120: the linear scale layout only)",
         LLAMA8, dict(NVFP4, is_sm100=False), None, [b(A40), t(100_000)]),
    case("default_llama31_8b_nvfp4_trtllm_sm120", "oracle (NVFP4, TRT-LLM prefill and decode, SM120)",
         LLAMA8, dict(NVFP4, prefill_attention_backend="trtllm_mha", is_sm100=False)),
    case("default_llama31_8b_fp4_mx_block16", "oracle (FP4 MX block-16 recipe)",
         LLAMA8, dict(kv_cache_dtype="fp4_mx_block16", prefill_attention_backend="triton",
                      decode_attention_backend="triton"), None, [b(A40), t(100_000)]),
    case("default_llama31_8b_mxfp8_standalone", ORACLE, LLAMA8, dict(kv_cache_dtype="mxfp8"),
         dict(algorithm="standalone", draft_num_layers=16)),
    case("default_llama31_8b_auto_fp16", "oracle (kv_cache_dtype auto stores the model dtype)",
         LLAMA8, dict(kv_cache_dtype="auto", model_dtype="fp16"), EAGLE3_1, [b(A40), t(100_000)]),
    case("default_llama31_8b_dflash_cell", ORACLE, LLAMA8, dict(tp_size=2, dcp_size=2),
         dict(algorithm="dflash", draft_num_layers=5, dflash_draft_cell_size_per_token=40960)),
    case("default_llama31_8b_dflash_scaled", ORACLE, LLAMA8, dict(tp_size=2, dcp_size=2),
         dict(algorithm="dflash", draft_num_layers=5)),
    case("default_llama31_8b_dflash_cell_zero", "oracle (a zero DFLASH draft cell means none)",
         LLAMA8, dict(tp_size=2, dcp_size=2),
         dict(algorithm="dflash", draft_num_layers=5, dflash_draft_cell_size_per_token=0)),
    case("default_llama31_8b_dspark_cell", ORACLE, LLAMA8, {},
         dict(algorithm="dspark", draft_num_layers=2, dflash_draft_cell_size_per_token=16384)),
    case("default_llama31_8b_dspark_scaled", ORACLE, LLAMA8, dict(page_size=16),
         dict(algorithm="dspark", draft_num_layers=2), [b(A40), t(50_000)]),
    case("default_llama31_8b_frozen_kv_mtp", ORACLE, LLAMA8, {},
         dict(algorithm="frozen_kv_mtp", draft_num_layers=2)),
    case("default_llama31_8b_eagle3_fused_full_entry", "oracle (a fused entry replaces the cell)",
         LLAMA8, {}, dict(EAGLE3_1, fused_full_entry_bytes=136192), [b(A40), t(12345)]),
    case("default_llama31_8b_draft_worker", ORACLE, LLAMA8, dict(is_draft_worker=True), EAGLE3_1),
    case("default_llama31_8b_target_tp4_dcp2", "oracle (the target's heads: H // (tp // dcp))",
         LLAMA8, dict(tp_size=4, dcp_size=2), EAGLE3_1),
    case("default_llama31_8b_draft_worker_tp4_dcp2", "oracle (2.7: a draft worker's heads ignore DCP)",
         LLAMA8, dict(tp_size=4, dcp_size=2, is_draft_worker=True), EAGLE3_1, [b(A40), t(100_000)]),
    case("default_deepseek_v3_mla_fp8_mtp", ORACLE, DSV3,
         dict(kv_cache_dtype="fp8_e4m3", tp_size=8, page_size=64), dict(algorithm="mtp", draft_num_layers=1)),
    case("default_deepseek_v32_dsa_fp8_scaled_mtp", "oracle (DSA: scaled FP8 latent plus the indexer; MTP)",
         DSV32, dict(kv_cache_dtype="fp8_e4m3", tp_size=8, page_size=64), dict(algorithm="mtp", draft_num_layers=1),
         [b(A40), t(1_000_000)]),
    case("default_deepseek_v32_dsa_raw_layout_dcp2", "oracle (DSA: TRT-LLM's raw layout; indexer replicated under DCP)",
         DSV32, dict(kv_cache_dtype="fp8_e4m3", tp_size=8, dcp_size=2, page_size=64, dsa_raw_kv_layout=True),
         dict(algorithm="eagle", draft_num_layers=1), [b(A40), t(1_000_000)]),
    case("default_deepseek_v32_dsa_draft_worker", "oracle (DSA draft worker: every layer's indexer, no DCP scale)",
         DSV32, dict(tp_size=8, dcp_size=2, page_size=64, is_draft_worker=True), dict(algorithm="mtp", draft_num_layers=1)),
    case("default_glm5_dsa_shared_topk_kpool2", "oracle (DSA: shared top-k layers keep no index keys; kpool 2)",
         GLM5, dict(kv_cache_dtype="fp8_e4m3", page_size=128), dict(algorithm="mtp", draft_num_layers=1),
         [b(A40), t(1_000_000)]),
    case("default_deepseek_v3_mla_fp4_mx_block16", "oracle (was fp4_e2m1; 2.7: FP4 recipes)",
         DSV3, dict(kv_cache_dtype="fp4_mx_block16", page_size=64)),
    case("default_gemma3_27b_hybrid_disabled", ORACLE, G27, dict(disable_hybrid_swa_memory=True), EAGLE3_1),
    case("default_mla_swa_hybrid_disabled", "oracle (an MLA hybrid with hybrid memory off)",
         MLA_SWA, dict(disable_hybrid_swa_memory=True, page_size=64),
         dict(algorithm="nextn", draft_num_layers=1)),
    case("default_eagle_draft_term_is_int_of_c_d_over_l",
         "oracle (2.7: C + int(C * d / L) = 18 + 12 = 30, was int(18 * (1 + 2/3)) = 29)",
         dict(full_attention_layer_ids=[0, 1, 2], swa_attention_layer_ids=[], num_kv_heads=1, head_dim=1,
              v_head_dim=2),
         {}, dict(algorithm="eagle", draft_num_layers=2), [b(29 * 1000 + 28), b(30000)]),
    # ---- HybridSWA ----------------------------------------------------------
    case("hybrid_mimo_v2_flash_banded_mtp", ORACLE, MIMO,
         dict(tp_size=2, page_size=16, swa_full_tokens_ratio=0.3),
         dict(algorithm="nextn", draft_num_layers=3, banded_draft_layers=2), [b(A40), t(300000)]),
    case("hybrid_gemma3_27b_eagle3_draft_swa_layers", "oracle (2.7: d_s draft layers at SWA geometry)",
         G27, dict(page_size=1), dict(algorithm="eagle3", draft_num_layers=3, draft_swa_num_layers=2),
         [b(A40), b(A40, 64), t(150_000)]),
    case("hybrid_gemma3_27b_dflash_cell", ORACLE, G27, dict(tp_size=2, dcp_size=2, swa_full_tokens_ratio=0.7),
         dict(algorithm="dflash", draft_num_layers=1, dflash_draft_cell_size_per_token=8192)),
    case("hybrid_gemma3_27b_dflash_cell_zero", "oracle (a zero DFLASH draft cell means none)",
         G27, dict(tp_size=2, dcp_size=2),
         dict(algorithm="dflash", draft_num_layers=1, dflash_draft_cell_size_per_token=0)),
    case("hybrid_gemma3_27b_dspark_cell", ORACLE, G27, dict(page_size=16),
         dict(algorithm="dspark", draft_num_layers=1, dflash_draft_cell_size_per_token=8192),
         [b(A40), t(100_000)]),
    case("hybrid_gemma3_27b_frozen_kv_mtp", ORACLE, G27, dict(page_size=16),
         dict(algorithm="frozen_kv_mtp", draft_num_layers=1), [b(A40), t(100_000)]),
    case("hybrid_gemma3_27b_auto_fp32", "oracle (kv_cache_dtype auto stores the model dtype)",
         G27, dict(kv_cache_dtype="auto", model_dtype="fp32"), EAGLE3_1, [b(A40), t(50_000)]),
    case("hybrid_gemma3_27b_nvfp4_priced_at_element_size",
         "oracle (2.7: the SWA configurators price fp4 at 1 byte and do not refuse it)",
         G27, NVFP4, None, [b(A40), t(100_000)]),
    case("hybrid_gemma3_27b_eagle3_fused_entries", "oracle (fused entries replace both cells)",
         G27, dict(page_size=1), dict(EAGLE3_1, fused_full_entry_bytes=90624, fused_swa_entry_bytes=428032),
         [b(A40), t(100_000)]),
    case("hybrid_gemma3_27b_eagle3_fused_full_entry", "oracle (a fused full entry; the draft terms become 0)",
         G27, dict(page_size=1), dict(EAGLE3_1, fused_full_entry_bytes=90624)),
    case("hybrid_gemma3_27b_unified_no_draft", "oracle (unified memory: bisection, pool bytes)",
         G27, dict(page_size=64, enable_unified_memory=True), None, [b(A40), t(100_000)]),
    case("hybrid_gemma3_27b_unified_eagle3", "oracle (unified memory with a private draft pool)",
         G27, dict(page_size=64, enable_unified_memory=True), EAGLE3_1, [b(A40), b(A40, 1), t(100_000)]),
    case("hybrid_gemma3_27b_unified_skips_admission_floor",
         "oracle (unified memory skips REFERENCE 5.5's admission floor)",
         G27, dict(page_size=64, swa_full_tokens_ratio=0.1, enable_unified_memory=True), EAGLE3_1,
         [t(10_000), b(A40)]),
    case("hybrid_mla_swa_latents_fp8_nextn", "oracle (2.7: MLA hybrid SWA with its own SWA latents)",
         MLA_SWA, dict(kv_cache_dtype="fp8_e4m3", page_size=64), dict(algorithm="nextn", draft_num_layers=1),
         [b(A40), t(200_000)]),
    case("hybrid_mla_swa_default_swa_latents",
         "oracle (MLA hybrid SWA; kvbudget defaults the SWA latents to the full ones)",
         {k: v for k, v in MLA_SWA.items() if k not in ("swa_kv_lora_rank", "swa_qk_rope_head_dim")},
         dict(page_size=64), None, [b(A40), t(200_000)]),
    case("hybrid_gpt_oss_pd_prefill_no_chunk", "oracle (no chunk outside PD decode: no request cap)",
         GOSS, dict(RC_NO_CHUNK, disaggregation_mode="prefill"), RC_SPEC, [b(A40), t(1_000_000)]),
    case("hybrid_gemma3_27b_negative_budget", ORACLE, G27, {}, None, [b(-A40), t(-5), t(0)]),
    case("hybrid_no_window_negative_budget", ORACLE, {**G27, "sliding_window_size": None}, {}, None,
         [b(-A40), t(0), t(7, 4)]),
    case("hybrid_float_floor_division_is_fmod_based", "oracle (A // C != floor(A / C))",
         dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[1, 2, 3], num_kv_heads=1, head_dim=64),
         dict(swa_full_tokens_ratio=0.9), None,
         [b(2801313311672095367), b(I64_MAX), b(2**62, 64)]),
    # ---- all-SWA ------------------------------------------------------------
    case("all_swa_eagle_draft_swa_layers", "oracle (2.7: all-SWA cell S*n_s + F*d_f + S*d_s)",
         ALLSWA, dict(page_size=16), dict(algorithm="eagle", draft_num_layers=3, draft_swa_num_layers=1),
         [b(A16), t(100_000)]),
    case("all_swa_unified_eagle", "oracle (unified memory on an all-SWA model: the cell path)",
         ALLSWA, dict(page_size=16, enable_unified_memory=True), dict(algorithm="eagle", draft_num_layers=1),
         [b(A16), t(100_000)]),
    # ---- request cap --------------------------------------------------------
    case("request_cap_gpt_oss_eagle3_draft_swa_layers", "oracle (2.7: d_s in the cap's fixed SWA bytes)",
         GOSS, RC, dict(RC_SPEC, draft_num_layers=2, draft_swa_num_layers=1), [b(A40), t(1_000_000)]),
    case("request_cap_mimo_v2_flash_banded_nextn", "oracle (banded draft depths, mtp_local_layer_ids)",
         MIMO, dict(tp_size=2, page_size=16, max_running_requests=32, chunked_prefill_size=4096,
                    disable_radix_cache=True),
         dict(algorithm="nextn", draft_num_layers=3, banded_draft_layers=2, num_steps=3, eagle_topk=1,
              num_draft_tokens=4),
         [b(A40), t(500_000)]),
    case("request_cap_gpt_oss_dflash_cell", "oracle (2.7: the full cell includes d_c, #32508 fixed)",
         GOSS, RC, dict(algorithm="dflash", draft_num_layers=1, dflash_draft_cell_size_per_token=4096,
                        num_steps=3, eagle_topk=1, num_draft_tokens=4)),
    case("request_cap_gpt_oss_unified_eagle3", "oracle (unified memory with a draft: the bisection)",
         GOSS, dict(RC, enable_unified_memory=True), RC_SPEC, [b(A40), b(2 * GiB), t(1_000_000)]),
    case("request_cap_gpt_oss_unified_no_draft", "oracle (unified memory without a draft: the cell path)",
         GOSS, dict(RC, enable_unified_memory=True), None, [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_fused_entries", "oracle (fused entries in the request cap)",
         GOSS, RC, dict(RC_SPEC, fused_full_entry_bytes=39040, fused_swa_entry_bytes=36864), [b(A40)]),
    case("request_cap_gpt_oss_adaptive_draft_tokens_v2",
         "oracle (2.7: spec v2 reads max_speculative_num_draft_tokens)",
         GOSS, RC, dict(RC_SPEC, max_num_draft_tokens=16), [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_adaptive_draft_tokens_v1", "oracle (spec v1 reads num_draft_tokens only)",
         GOSS, dict(RC, disable_overlap_schedule=True), dict(RC_SPEC, max_num_draft_tokens=16),
         [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_uno_spec_v2", "oracle (2.7: UNO allocates tokens + 1)",
         GOSS, RC, dict(algorithm="uno", num_steps=3, eagle_topk=1, num_draft_tokens=4),
         [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_ngram_spec_v2", "oracle (NGRAM has no draft KV)",
         GOSS, dict(RC, page_size=16), dict(algorithm="ngram", num_steps=3, eagle_topk=4, num_draft_tokens=8),
         [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_mxfp8", ORACLE, GOSS, dict(RC, kv_cache_dtype="mxfp8"), RC_SPEC,
         [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_pd_decode_no_chunk",
         "oracle (2.7: the request cap applies in PD decode without a chunk size)",
         GOSS, dict(RC_NO_CHUNK, disaggregation_mode="decode", disaggregation_decode_extra_slots=8),
         RC_SPEC, [b(A40), t(1_000_000)]),
    case("request_cap_gpt_oss_dp_over_requests", "oracle (2.7: N = max(1, requests // attn_dp))",
         GOSS, dict(RC, max_running_requests=4, attn_dp_size=8), RC_SPEC, [b(A40), t(1_000_000)]),
    case("request_cap_mla_swa_latents", "oracle (MLA hybrid SWA with a request cap)",
         MLA_SWA, dict(RC, page_size=64), dict(RC_SPEC, algorithm="nextn"), [b(A40), t(200_000)]),
    case("request_cap_no_room_for_full_pool", ORACLE, GOSS,
         dict(page_size=64, max_running_requests=4096, chunked_prefill_size=8192, disable_radix_cache=True),
         None, [b(GiB), t(0)]),
    # ---- errors -------------------------------------------------------------
    case("invalid_page_size_argument_zero_default", "oracle (SGLang divides by the page size)",
         LLAMA8, {}, None, [b(A40, 0), t(100, 0)]),
    case("invalid_page_size_argument_zero_hybrid", "oracle (SGLang divides by the page size)",
         G27, {}, None, [b(A40, 0), t(100_000, 0)]),
    case("overflow_huge_heads", "oracle (cell size 2**64: beyond kvbudget's 64-bit range)",
         dict(full_attention_layer_ids=[0], swa_attention_layer_ids=[], num_kv_heads=2**31, head_dim=2**31)),
]

#: Cases for the exact plan (REFERENCE 3): what SGLang allocates for its own plan.
EXACT_PLANS: list[Json] = [
    dict(name="ref3_gemma3_27b_eagle3_p64_sglang_fit", source="REFERENCE 3 / 5 example 1 (p 64)",
         model=G27, serving=dict(page_size=64), spec=EAGLE3_1, available_bytes=A40, fit="sglang"),
    dict(name="default_llama31_8b_eagle3_p16_sglang_fit", source="oracle sizes",
         model=LLAMA8, serving=dict(page_size=16), spec=EAGLE3_1, available_bytes=A40, fit="sglang"),
    dict(name="all_swa_eagle_p64_sglang_fit", source="oracle sizes (REFERENCE 5 example 3, p 64)",
         model=ALLSWA, serving=dict(page_size=64), spec=dict(algorithm="eagle", draft_num_layers=1),
         available_bytes=A16, fit="sglang"),
    dict(name="gpt_oss_fp8_tp4_eagle3_sglang_fit", source="oracle sizes (REFERENCE 5 example 2)",
         model=GOSS, serving=dict(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=4), spec=EAGLE3_1,
         available_bytes=A30, fit="sglang"),
]

SCHEMA = (
    "Golden vectors shared by cargo tests and pytest. Top level: {schema, cases, exact_plan}. "
    "cases[i] = {name, source, model: ModelGeometry kwargs (the two layer id lists and the shape fields), "
    "serving: ServingConfig kwargs, spec: SpeculativeConfig kwargs or null (no speculation), "
    "configurator: 'default'|'hybrid_swa'|'request_cap' (what create_pool_configurator returns) or null "
    "(it cannot be built: every call carries that error), cell_size (int, or float where the ratio "
    "enters), swa_cap (int tokens, request_cap only), calls: [{entry: 'bytes' (calculate_pool_sizes) | "
    "'max_tokens' (calculate_pool_sizes_from_max_tokens), value: int, page_size: int or null (null = the "
    "serving page size), and exactly one of expect: {max_total_num_tokens, full_max_total_num_tokens, "
    "swa_max_total_num_tokens, unified_memory_pool_bytes} (null where SGLang leaves it None) or error: "
    "'invalid_config'|'overflow'|'not_enough_memory'|'swa_pool_too_small'}]}. exact_plan[i] = {name, "
    "source, model, serving, spec, available_bytes, fit: 'sglang', expect: {total_bytes, "
    "over_budget_bytes, padding_bytes}}: the bytes SGLang allocates for the plan it makes (per layer K "
    "[tokens+p, H_rank, Dk] and V [tokens+p, H_rank, Dv]; draft pool = d layers at the target's full "
    "geometry with full-pool capacity, SWA capacity for an all-SWA target). Every expectation is SGLang "
    "0.5.23's (its pool_configurator.py run by tests/sglang_oracle), except 'overflow': a quantity "
    "SGLang computes outside the signed 64-bit range. Generated by tests/data/make_golden.py."
)

# --------------------------------------------------------------------------
# kvbudget's objects -> the oracle case
# --------------------------------------------------------------------------

#: Scenario fields SGLang's sizing never reads (the exact plan's draft geometry).
PLAN_ONLY = frozenset({"draft"})
KINDS = {
    "DefaultPoolConfigurator": "default",
    "HybridSWAPoolConfigurator": "hybrid_swa",
    "SWARequestCapPoolConfigurator": "request_cap",
}
#: The oracle's error kinds -> kvbudget's error codes.
ERROR_CODES = {
    "not_enough_memory": "not_enough_memory",
    "swa_too_small": "swa_pool_too_small",
    "invalid": "invalid_config",
}
ORACLE_ENTRY = {"bytes": "bytes", "max_tokens": "tokens"}


def kvbudget_objects(c: Mapping[str, Any]) -> dict[str, Any]:
    """The case's kvbudget objects, keyed by the field table's owner names."""
    return {
        "AttentionShape": kvbudget.ModelGeometry(**c["model"]),
        "ServingConfig": kvbudget.ServingConfig(**c["serving"]),
        "SpeculativeConfig": kvbudget.SpeculativeConfig(**(c["spec"] or {})),
    }


def oracle_case(objects: Mapping[str, Any]) -> Json:
    """Every scenario field SGLang reads, resolved, from kvbudget's objects."""
    return {
        name: getattr(objects[f.owner], name)
        for name, f in SCENARIO_FIELDS.items()
        if name not in PLAN_ONLY
    }


# --------------------------------------------------------------------------
# The oracle's outcome -> golden entries
# --------------------------------------------------------------------------


def out_of_range(x: object) -> bool:
    return isinstance(x, int) and not I64_MIN <= x <= I64_MAX


def call_result(o: sglang_oracle.Outcome) -> Json:
    """``{"expect": config}`` or ``{"error": code}`` of one solve."""
    if o.error is not None:
        return {"error": ERROR_CODES[o.error[0]]}
    assert o.config is not None
    if any(out_of_range(v) for v in o.config.values()):
        return {"error": "overflow"}
    return {"expect": dict(o.config)}


def unbuilt(calls: list[Json], code: str) -> list[Json]:
    """The calls of a case whose configurator cannot be built: each carries ``code``."""
    return [{**call, "error": code} for call in calls]


def golden_case(oracle: sglang_oracle.Oracle, c: Json) -> Json:
    """One case with its expectations, every call run through SGLang."""
    oc = oracle_case(kvbudget_objects(c))
    runs = [
        oracle.run(oc, entry=ORACLE_ENTRY[call["entry"]], amount=call["value"], page_size=call["page_size"])
        for call in c["calls"]
    ]
    built = {(o.stage, o.class_name, repr(o.cell_size), o.swa_cap) for o in runs}
    assert len(built) == 1, f"{c['name']}: the factory's outcome differs between calls: {built}"
    first = runs[0]
    out = {k: c[k] for k in ("name", "source", "model", "serving", "spec")}
    if first.stage == "init":
        assert first.error is not None
        return {**out, "configurator": None, "calls": unbuilt(c["calls"], ERROR_CODES[first.error[0]])}
    if out_of_range(first.cell_size) or out_of_range(first.swa_cap):
        return {**out, "configurator": None, "calls": unbuilt(c["calls"], "overflow")}
    assert first.class_name is not None
    out["configurator"] = KINDS[first.class_name]
    out["cell_size"] = first.cell_size
    if first.swa_cap is not None:
        out["swa_cap"] = first.swa_cap
    out["calls"] = [{**call, **call_result(o)} for call, o in zip(c["calls"], runs)]
    return out


# --------------------------------------------------------------------------
# REFERENCE 3: the bytes SGLang allocates for the plan it makes
# --------------------------------------------------------------------------

ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1}
#: Algorithms whose draft pool SGLang allocates at the target's full geometry.
FULL_GEOMETRY_DRAFTS = ("eagle", "eagle3", "nextn", "standalone")


def sglang_allocation(objects: Mapping[str, Any], kind: str, sizes: Mapping[str, Any],
                      available_bytes: int) -> Json:
    """Bytes SGLang allocates for the pools it planned (``sizes``, at the serving page size p).

    Per layer, K ``[tokens + p, H_rank, Dk]`` and V ``[tokens + p, H_rank, Dv]``:
    Default pools every layer with ``H_rank = max(1, H // (tp // dcp))``; the
    SWA configurators pool the full layers at the full-pool size and the SWA
    layers at the SWA-pool size, ``H_rank = max(1, H // tp)``. The draft pool
    is ``d`` layers at the target's full geometry (``max(1, H // tp)`` heads)
    with the full pool's capacity (the SWA pool's for an all-SWA target).
    Plain dtypes and MHA/GQA only: FP4 and mxfp8 scale tensors, MLA latents,
    SWA-geometry or fused drafts and unified memory are not modelled.
    """
    model, serving, spec = (objects[k] for k in ("AttentionShape", "ServingConfig", "SpeculativeConfig"))
    dtype = serving.model_dtype if serving.kv_cache_dtype == "auto" else serving.kv_cache_dtype
    if (dtype not in ELEMENT_BYTES or model.is_mla or serving.enable_unified_memory
            or spec.algorithm not in ("none", *FULL_GEOMETRY_DRAFTS)
            or spec.banded_draft_layers or spec.draft_swa_num_layers
            or spec.fused_full_entry_bytes is not None or spec.fused_swa_entry_bytes is not None):
        raise NotImplementedError("only plain-dtype MHA/GQA layouts with a full-geometry draft are modelled")
    elem, p, tp = ELEMENT_BYTES[dtype], serving.page_size, serving.tp_size

    def per_token(heads: int, dk: int, dv: int) -> int:
        return heads * (dk + dv) * elem

    full = per_token(max(1, model.num_kv_heads // tp), model.head_dim, model.v_head_dim)
    if kind == "default":
        heads = max(1, model.num_kv_heads // (tp // serving.dcp_size))
        tokens = sizes["max_total_num_tokens"]
        pools = [(model.num_layers, tokens, per_token(heads, model.head_dim, model.v_head_dim))]
        draft_tokens = tokens
    else:
        swa = per_token(max(1, model.swa_num_kv_heads // tp), model.swa_head_dim, model.swa_v_head_dim)
        pools = [(model.num_full_layers, sizes["full_max_total_num_tokens"], full),
                 (model.num_swa_layers, sizes["swa_max_total_num_tokens"], swa)]
        # an all-SWA target's draft pool has the SWA pool's capacity
        draft_tokens = sizes["full_max_total_num_tokens"] or sizes["swa_max_total_num_tokens"]
    if spec.algorithm in FULL_GEOMETRY_DRAFTS and not serving.is_draft_worker and spec.draft_num_layers:
        pools.append((spec.draft_num_layers, draft_tokens, full))
    pools = [(layers, tokens, per) for layers, tokens, per in pools if layers > 0]
    total = sum(layers * (tokens + p) * per for layers, tokens, per in pools)
    padding = sum(layers * p * per for layers, _, per in pools)
    return {"total_bytes": total, "over_budget_bytes": max(0, total - available_bytes),
            "padding_bytes": padding}


def golden_plan(oracle: sglang_oracle.Oracle, plan: Json) -> Json:
    objects = kvbudget_objects(plan)
    o = oracle.run(oracle_case(objects), entry="bytes", amount=plan["available_bytes"])
    assert o.config is not None and o.class_name is not None, f"{plan['name']}: SGLang refuses it: {o.error}"
    kind = KINDS[o.class_name]
    return {**plan, "expect": sglang_allocation(objects, kind, o.config, plan["available_bytes"])}


# --------------------------------------------------------------------------
# The document
# --------------------------------------------------------------------------


def build(oracle: Optional[sglang_oracle.Oracle] = None) -> Json:
    """golden.json's content, every expectation from SGLang's code."""
    oracle = oracle or sglang_oracle.load()
    names = [c["name"] for c in CASES + EXACT_PLANS]
    assert len(names) == len(set(names)), "duplicate golden case names"
    return {
        "schema": SCHEMA,
        "cases": [golden_case(oracle, c) for c in CASES],
        "exact_plan": [golden_plan(oracle, p) for p in EXACT_PLANS],
    }


def render(doc: Json) -> str:
    """The file's text."""
    return json.dumps(doc, indent=1) + "\n"


def main() -> None:
    doc = build()
    GOLDEN.write_text(render(doc))
    for c in doc["cases"]:
        print(c["name"], c["configurator"], c.get("cell_size"), c.get("swa_cap"),
              [x.get("expect") or x.get("error") for x in c["calls"]])
    for p in doc["exact_plan"]:
        print(p["name"], p["expect"])


if __name__ == "__main__":
    main()
