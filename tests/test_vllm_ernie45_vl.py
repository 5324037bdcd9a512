"""vLLM mode's ERNIE-4.5-VL (:mod:`kvbudget.vllm.ernie45_vl`) against vLLM 0.33.0's own classes:
``Ernie4_5_VLMoeForConditionalGeneration.__init__`` (``models/ernie45_vl.py``, kept to its config
reads and the modules it builds) and ``Ernie4_5_VisionTransformer.__init__`` (kept to its config reads
and its hidden-size assert), lifted by ``tests/vllm_oracle``, on configs loaded by transformers
5.19.0's ``Ernie4_5_VLMoeConfig``.

The cases: the class's defaults, with the vision keys its class lacks (``embed_dim``,
``mlp_ratio``) and the model's resampler keys (``pixel_hidden_size``, ``hidden_size``,
``spatial_conv_size``, ``temporal_conv_size``) each saved or not, ``embed_dim`` equal to the vision
``hidden_size`` or not, the text heads seeded; over TP and PP. Every config vLLM refuses is refused
(judged by ``tests/test_vllm_state_models.py``'s ``_compare``, the census's reading); a config that
reaches the text model is refused by kvbudget as unchecked and is the oracle's gap (``StubError``).
``KVBUDGET_VLLM_ERNIE45_VL_CASES`` sets the cases.
"""

from __future__ import annotations

import copy
import functools
import os
import random
import re
from typing import Any

import pytest
import transformers as T
from test_vllm_state_models import _compare, _ours, _theirs
from vllm_oracle import StubError

from kvbudget.vllm import ernie45_vl

N = int(os.environ.get("KVBUDGET_VLLM_ERNIE45_VL_CASES", "100"))


@functools.cache
def _saved() -> dict[str, Any]:
    return {**T.Ernie4_5_VLMoeConfig().to_dict(), "architectures": [ernie45_vl.ERNIE45_VL]}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    saved = copy.deepcopy(_saved())
    vision = saved["vision_config"]
    if rng.random() < 0.7:
        vision["embed_dim"] = rng.choice([vision["hidden_size"]] * 4 + [1024])
    if rng.random() < 0.7:
        vision["mlp_ratio"] = 4
    if rng.random() < 0.2:
        vision["hidden_size"] = vision.get("embed_dim", 1024)
    for key, value in (("pixel_hidden_size", 1280), ("hidden_size", 2560), ("spatial_conv_size", 2),
                       ("temporal_conv_size", 2)):  # fmt: skip
        if rng.random() < 0.75:
            saved[key] = value
    saved["text_config"]["num_attention_heads"] = rng.choice([20, 16, 32])
    return saved, {"tp": rng.choice([1, 1, 2, 4]), "pp": rng.choice([1, 1, 2])}


def _why(refusal: str) -> str:
    """The failure's kind: the attribute an AttributeError names, else the exception type."""
    found = re.search(r"no attribute '(\w+)'", refusal)
    return found.group(1) if found else "AssertionError" if "AssertionError" in refusal else refusal


def test_ernie45_vl_is_refused_as_vllm_refuses_it() -> None:
    rng = random.Random("vllm-ernie45-vl")
    judged, unchecked = [], 0
    for saved, engine in (_case(rng) for _ in range(N)):
        ours = _ours(saved, engine, "bfloat16")
        assert isinstance(ours, str), ours
        if "has not checked" in ours:  # past the vision tower: vLLM builds the text model
            with pytest.raises(StubError, match="Ernie4_5_VLMoeForCausalLM"):
                _theirs(saved, engine, "bfloat16")
            unchecked += 1
        elif "Total number of attention heads" not in ours:  # ModelConfig's check: the oracle leaves it out
            judged.append((saved, engine))
            assert _why(ours) == _why(str(_theirs(saved, engine, "bfloat16"))), (ours, engine)
    counts, mismatches = _compare(rng, judged)
    print(f"\nvLLM ERNIE-4.5-VL reading: {counts}, {unchecked} unchecked, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["refused"] == counts["compared"] > N // 2 and unchecked > N // 10, (counts, unchecked)


def test_ernie45_vl_class_keys_are_transformers() -> None:
    c = T.Ernie4_5_VLMoeConfig()
    reads = ("patch_size", "spatial_merge_size", "in_channels", "hidden_size", "embed_dim", "depth", "num_heads",
             "mlp_ratio")  # fmt: skip
    assert {k for k in reads if hasattr(c.vision_config, k)} == ernie45_vl.VISION_CLASS_KEYS
    outer = ("pixel_hidden_size", "hidden_size", "spatial_conv_size", "temporal_conv_size")
    assert {k for k in outer if hasattr(c, k)} == ernie45_vl.OUTER_CLASS_KEYS
    assert (c.vision_config.hidden_size, c.text_config.num_attention_heads) == (
        ernie45_vl.VISION_HIDDEN_SIZE, ernie45_vl.TEXT_HEADS)
