"""``kvbudget.vllm.layers_from_hf_config`` on Step-3.5 (``Step3p5ForCausalLM``), held to vLLM 0.33.0's
own reading (:mod:`kvbudget.vllm.step3p5`).

The configs are the model-resolution differential's Step-3.5 builder's (``tests/sglang_model_cases.py``:
transformers 5.19.0's ``Step3p7TextConfig`` re-saved, or as Step-3.5-Flash's checkpoint holds them, with
MTP-padded per-layer lists, ``num_attention_groups``, ``attention_other_setting``'s sliding heads,
per-layer ``rope_theta`` / ``partial_rotary_factors`` and ``moe_layers_enum``), saved whole or sparse,
with seeded variations of the MoE keys vLLM reads (router bias, FP32 gate, expert normalisation,
SwiGLU limits, expert count), each under a seeded TP and PP, a third with ``--disable-sliding-window``.
The oracle (``tests/vllm_oracle``) builds vLLM's ``Step3p5ForCausalLM`` (its per-rank MoE assert), model,
decoder layers (their MoE blocks' checks) and attention. Every layer's name, kind, stage, heads, head
size and window are compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

import transformers as T
from sglang_model_cases import FAMILIES
from test_vllm_state_models import _compare, _ours

N = int(os.environ.get("KVBUDGET_VLLM_STEP3P5_CASES", "100"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    d = FAMILIES["step3p5"](rng).saved(rng.random() < 0.5)
    if rng.random() < 0.7:  # the MoE keys vLLM's block reads (the released checkpoint's)
        d.update(use_moe_router_bias=True, need_fp32_gate=True, norm_expert_weight=True)
        if rng.random() < 0.1:
            d[rng.choice(["use_moe_router_bias", "need_fp32_gate"])] = False
        if rng.random() < 0.1:
            del d[rng.choice(["use_moe_router_bias", "need_fp32_gate", "norm_expert_weight"])]
    if rng.random() < 0.15 and isinstance(d.get("swiglu_limits"), list) and len(d["swiglu_limits"]) > 4:
        d["swiglu_limits"] = [*d["swiglu_limits"][:3], rng.choice([7.0, 7, 5.0]), *d["swiglu_limits"][4:]]
    if rng.random() < 0.25:  # the sliding layers' own head count (vLLM's TP asserts read it)
        d["num_sliding_attention_heads"] = rng.choice([12, 24, 40, 96])
    if rng.random() < 0.1 and isinstance(d.get("partial_rotary_factors"), list):
        d["partial_rotary_factors"] = [0.25, *d["partial_rotary_factors"][1:]]  # vLLM asserts 1 or 0.5
    if rng.random() < 0.1:
        d["moe_num_experts" if "moe_num_experts" in d else "n_routed_experts"] = rng.choice([2, 4])
    return d, {"tp": rng.choice([1, 1, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}


def _loads(d: dict[str, Any]) -> bool:
    """Whether transformers' class loads the config (vLLM fails before any model code otherwise)."""
    try:
        T.Step3p7TextConfig.from_dict(dict(d))
    except Exception:  # noqa: BLE001 - any load failure (strict validation included)
        return False
    return True


def test_step3p5_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-step3p5")
    cases = [_case(rng) for _ in range(N)]
    unloadable = [(d, e) for d, e in cases if not _loads(d)]  # refused by the config class: kvbudget too
    assert all(isinstance(_ours(d, e, "bfloat16"), str) for d, e in unloadable), "kvbudget planned an unloadable config"
    counts, mismatches = _compare(rng, [c for c in cases if _loads(c[0])], no_window=0.3)
    counts["unloadable"] = len(unloadable)
    print(f"\nvLLM Step-3.5 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 5 and counts["attention layers"] > 5 * N, counts
