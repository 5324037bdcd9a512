"""``kvbudget.vllm.layers_from_hf_config`` on MiniCPM-V 4.6 and 4.7, held to vLLM 0.33.0's own
reading: ``MiniCPMV4_6ForConditionalGeneration`` / ``MiniCPMV4_7ForConditionalGeneration`` build
``Qwen3_5ForCausalLM`` on their own config's ``hf_text_config`` (:mod:`kvbudget.vllm.gdn_wrappers`).

The configs are built by transformers 5.19.0's ``MiniCPMV4_6Config`` / ``MiniCPMV4_7Config`` around
the seeded Qwen3.5 text configs of ``tests/test_vllm_state_models.py`` (dense or MoE text type; layer
counts, intervals, heads, gated-delta-net dims; saved whole or sparse; with a ``mamba_ssm_dtype``
that no hook reads here, or without ``layer_types``), a few with no text config (Qwen3.5's
defaults) or a text type vLLM's decoder refuses, each under a seeded TP and PP. The oracle
(``tests/vllm_oracle``) builds vLLM's ``Qwen3_5Model`` under ``language_model.model`` on the loaded
config and takes the state shapes and dtypes from the wrapper class's own classmethods (lifted from
``models/minicpmv4_6.py``). Every layer's name, kind, stage, heads, head size, state shapes and dtypes
are compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

import transformers as T
from test_vllm_state_models import _compare, _drop_defaults, _text_kw

N = int(os.environ.get("KVBUDGET_VLLM_MINICPMV_CASES", "80"))
_CLASSES = [(T.MiniCPMV4_6Config, "MiniCPMV4_6ForConditionalGeneration"),
            (T.MiniCPMV4_7Config, "MiniCPMV4_7ForConditionalGeneration")]  # fmt: skip
_TEXT = {"qwen3_5_text": T.Qwen3_5TextConfig, "qwen3_5_moe_text": T.Qwen3_5MoeTextConfig}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    cls, arch = rng.choice(_CLASSES)
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    r = rng.random()
    if r < 0.05:  # no text config: Qwen3_5TextConfig's defaults
        d = cls().to_dict()
        d.pop("text_config", None)
        return {**d, "architectures": [arch]}, engine
    model_type = "qwen3_next" if r < 0.1 else rng.choice(list(_TEXT))  # Qwen3-Next's: vLLM's decoder refuses
    d = cls(text_config={"model_type": model_type, **_text_kw(rng)}).to_dict()
    text = d["text_config"]
    if rng.random() < 0.5 and model_type in _TEXT:  # sparse, as released configs are
        _drop_defaults(text, _TEXT[model_type])
    if rng.random() < 0.4:
        text["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
    if rng.random() < 0.4:
        text.pop("layer_types", None)  # the interval gives them
    return {**d, "architectures": [arch]}, engine


def test_minicpmv_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-minicpmv")
    defaults = [({**cls().to_dict(), "architectures": [arch]}, {"tp": 1, "pp": 1}) for cls, arch in _CLASSES]
    counts, mismatches = _compare(rng, defaults + [_case(rng) for _ in range(N)])
    print(f"\nvLLM MiniCPM-V 4.6 / 4.7 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > 5 * N, counts
