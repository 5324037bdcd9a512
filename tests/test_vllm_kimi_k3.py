"""``kvbudget.vllm.layers_from_hf_config`` on Kimi-K3 (``KimiK3ForConditionalGeneration``), held to
vLLM 0.33.0's own reading (:mod:`kvbudget.vllm.kimi_k3`).

The configs are built by vLLM's own ``KimiK3Config`` (lifted from the wheel) around the seeded
Kimi-Linear text configs of ``tests/test_vllm_state_models.py`` (KDA layer sets, heads, MLA dims,
NoPE or not, with or without ``linear_attn_config``), a few with no text config (``KimiLinearConfig``'s
defaults, which vLLM refuses), each under a seeded TP and PP. The oracle (``tests/vllm_oracle``) builds
the registry's ``KimiLinearForCausalLM`` model under ``language_model.model`` on the text config and takes
the state shapes and dtypes from the wrapper class's own classmethods (lifted). Every layer's name,
kind, stage, heads, head size, state shapes and dtypes are compared; a refusal on one side only is
a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

from test_vllm_state_models import _compare, _kimi_linear_case
from vllm_oracle._hf import vllm_config_class

from kvbudget.vllm.kimi_k3 import KIMI_K3

N = int(os.environ.get("KVBUDGET_VLLM_KIMI_K3_CASES", "80"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    cls = vllm_config_class("kimi_k3")
    text, engine = _kimi_linear_case(rng)
    if rng.random() < 0.05:
        return {**cls().to_dict(), "architectures": [KIMI_K3]}, engine
    text.pop("architectures")
    return {**cls(text_config=text).to_dict(), "architectures": [KIMI_K3]}, engine


def test_kimi_k3_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-kimi-k3")
    default = ({**vllm_config_class("kimi_k3")().to_dict(), "architectures": [KIMI_K3]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_case(rng) for _ in range(N)])
    print(f"\nvLLM Kimi-K3 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > 3 * N, counts
    assert counts["attention layers"] > 3 * N, counts
