"""vLLM mode's PaddleOCR-VL (:mod:`kvbudget.vllm.merged_text_configs`) against vLLM 0.33.0's own
class: ``PaddleOCRVLForConditionalGeneration.__init__``'s merge of its text config into the
model's config (lifted from the pinned ``models/paddleocr_vl.py``), then vLLM's Ernie 4.5 class on
the merged config.

The cases: transformers 5.19.0's ``PaddleOCRVLConfig`` defaults with the text geometry seeded
(layers, heads, KV heads, head size, Llama's window keys), every key or sparse (keys left to
``PaddleOCRTextConfig``'s defaults, its ``model_type`` left out), outer keys that the merge
overrides; over TP, PP, ``--kv-cache-dtype`` and ``--disable-sliding-window``.
``KVBUDGET_VLLM_MERGED_CASES`` sets the number of cases.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import transformers as T
from test_vllm_thinkers import _ours, _theirs
from vllm_reading import judge

from kvbudget import InvalidConfigError
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_MERGED_CASES", "60"))
_ARCH = "PaddleOCRVLForConditionalGeneration"


def cases(n: int, seed: int = 0) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(config.json, engine settings), seeded."""
    rng = random.Random(f"vllm-merged:{seed}")
    base = T.PaddleOCRVLConfig().to_dict()
    for _ in range(n):
        saved = {**copy.deepcopy(base), "architectures": [_ARCH]}
        text = saved["text_config"]
        heads = rng.choice([8, 16, 32])
        layers = rng.randint(1, 40)
        text.update(num_hidden_layers=layers, num_attention_heads=heads,
                    num_key_value_heads=rng.choice([k for k in (1, 2, 4, 8, heads) if heads % k == 0]),
                    head_dim=rng.choice([64, 128, 256]), hidden_size=heads * rng.choice([64, 128]))  # fmt: skip
        if rng.random() < 0.2:
            text["sliding_window"] = rng.choice([None, 1024])
        if rng.random() < 0.2:
            text["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) for _ in range(layers)]
            text["sliding_window"] = rng.choice([256, 4096])
        if rng.random() < 0.4:  # sparse: keys left to PaddleOCRTextConfig's defaults
            for key in rng.sample(sorted(k for k in text if k != "layer_types"), k=rng.randint(1, 6)):
                text.pop(key)
            if "layer_types" in text and "num_hidden_layers" not in text:
                text.pop("layer_types")
        if rng.random() < 0.3:  # outer keys the merge overrides with the text config's
            saved.update(num_hidden_layers=rng.randint(1, 80), num_key_value_heads=rng.choice([1, 3]))
        engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
                  "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                  "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
        yield saved, engine


def test_paddleocr_vl_reads_as_vllm_merges_and_builds_it() -> None:
    counts, _, mismatches = judge((("PaddleOCRVLForConditionalGeneration", saved, engine) for saved, engine in cases(N)),
                                  lambda saved: T.PaddleOCRVLConfig.from_dict(copy.deepcopy(saved)), _ours, _theirs)
    print(f"\nvLLM merged text configs: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["planned"] > counts["compared"] // 3, counts


def test_paddleocr_vl_without_its_text_config_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="text_config"):
        layers_from_hf_config({"architectures": [_ARCH], "model_type": "paddleocr_vl"})
