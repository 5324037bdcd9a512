"""vLLM mode's Whisper (:mod:`kvbudget.vllm.whisper`) against vLLM 0.33.0's own classes
(``WhisperModel``, its encoder and decoder layers, ``WhisperAttention`` and ``CrossAttention``, lifted from
the pinned wheel by ``tests/vllm_oracle``), then planned by kvbudget and by vLLM's own planner (the
cross-attention layers as ``CrossAttentionSpec``, charged for the encoder budget).

The cases: transformers 5.19.0's ``WhisperConfig`` with its geometry seeded (``d_model``, the encoder's
and the decoder's heads and layers, some that do not divide), every key or sparse, over TP and PP.
``KVBUDGET_VLLM_WHISPER_CASES`` sets the cases.
"""

from __future__ import annotations

import os
import random
from typing import Any

import transformers as T
import vllm_oracle as vo
from test_vllm_state_models import _compare
from vllm_differential import Ours, compare

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.whisper import WHISPER, WHISPER_DEFAULTS

N = int(os.environ.get("KVBUDGET_VLLM_WHISPER_CASES", "60"))
GIB = 1 << 30


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    heads = rng.choice([4, 6, 8, 12, 16, 20, 8, 5 if rng.random() < 0.3 else 8])
    d_model = heads * rng.choice([32, 64, 64, 80]) + (3 if rng.random() < 0.1 else 0)
    kw = {"d_model": d_model, "decoder_attention_heads": heads, "decoder_layers": rng.choice([0, 1, 2, 4, 12, 32]),
          "encoder_attention_heads": heads if rng.random() < 0.85 else rng.choice([6, 3]), "encoder_layers": rng.choice([0, 2, 4, 32])}
    saved = {**T.WhisperConfig(**kw).to_dict(), "architectures": [WHISPER]}
    if rng.random() < 0.3:  # keys left to the class's defaults (all of its geometry, or a layer count)
        keys = sorted(WHISPER_DEFAULTS) if rng.random() < 0.3 else [rng.choice(["encoder_layers", "decoder_layers"])]
        for key in keys:
            saved.pop(key)
    return saved, {"tp": rng.choice([1, 1, 1, 2, 2, 4, 8, 3]), "pp": 2 if rng.random() < 0.15 else 1}


def test_whisper_reads_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-whisper")
    counts, mismatches = _compare(rng, [_case(rng) for _ in range(N)])
    print(f"\nvLLM Whisper reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 4 * N, counts


def test_whisper_is_planned_as_vllms_planner_plans_it() -> None:
    """The reader's layers through both planners: the decoder's self-attention and its
    cross-attention in two groups, the cross-attention charged for the encoder budget."""
    oracle = vo.load()
    rng = random.Random("vllm-whisper-plan")
    planned = 0
    for _ in range(12):
        saved, engine = _case(rng)
        engine = {"tp": 1, "pp": 1, "max_model_len": 448, "max_num_batched_tokens": rng.choice([2048, 8192])}
        try:
            layers = layers_from_hf_config(saved, vllm.EngineConfig(**engine))
        except InvalidConfigError:
            continue
        if not layers:
            continue
        dicts = [{k: v for k, v in vars(x).items() if v is not None} for x in layers]
        budget = rng.choice([GIB // 4, 8 * GIB])
        ours, theirs = Ours.plan(dicts, budget, engine), oracle.plan(dicts, budget, engine)
        assert not compare(ours, theirs), compare(ours, theirs)[:3]
        if theirs["ok"]:
            planned += 1
            assert [g["spec"] for g in theirs["groups"]] == ["FullAttentionSpec", "CrossAttentionSpec"]
            assert theirs["blocks_per_request"] == [448 // 16, engine["max_num_batched_tokens"] // 16]
    assert planned >= 4, planned


def test_the_defaults_are_transformers_whisper_configs() -> None:
    cfg = T.WhisperConfig()
    assert {k: getattr(cfg, k) for k in WHISPER_DEFAULTS} == WHISPER_DEFAULTS
