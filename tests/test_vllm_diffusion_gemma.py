"""vLLM mode's DiffusionGemma (:mod:`kvbudget.vllm.diffusion_gemma`) against vLLM 0.33.0's own
classes: ``DiffusionGemmaForConditionalGeneration.__init__`` (``models/diffusion_gemma.py``, kept to
its config reads, its forced ``attention_k_eq_v`` and the ``Gemma4Model`` it builds) and Gemma 4's
decoder, lifted by ``tests/vllm_oracle``, on configs loaded by transformers 5.19.0's
``DiffusionGemmaConfig``.

The cases: the model-resolution differential's seeded DiffusionGemma configs (layer types,
windows, bidirectional attention, global head size and KV heads), saved whole or sparse, some with a
saved ``per_layer_config``, ``attention_k_eq_v: false``, KV sharing or a text ``model_type`` of
Gemma 4's (the config class loads the text config with its own class all the same); over TP, PP and
``--disable-sliding-window``. Judged by ``tests/test_vllm_state_models.py``'s ``_compare`` (the
census's own reading). ``KVBUDGET_VLLM_DIFFUSION_GEMMA_CASES`` sets the cases.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from sglang_model_cases import FAMILIES
from test_vllm_state_models import _compare

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_DIFFUSION_GEMMA_CASES", "150"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    built = FAMILIES["diffusion_gemma"](rng)
    saved = built.saved(rng.random() < 0.3)
    text = saved["text_config"]
    pick = rng.random()
    if pick < 0.3:
        text.pop("per_layer_config", None)  # the class computes it from the popped global keys
        if rng.random() < 0.5:
            text["num_global_key_value_heads"] = rng.choice([1, 2, 4])
        if rng.random() < 0.5:
            text["global_head_dim"] = rng.choice([256, 512])
    elif pick < 0.4:
        text["attention_k_eq_v"] = False  # not an attribute of the class: the override stays ungated
        text.pop("per_layer_config", None)
        text["num_global_key_value_heads"] = rng.choice([1, 2])
    elif pick < 0.5 and text.get("num_hidden_layers", 0) > 2:
        text["num_kv_shared_layers"] = rng.randint(1, text["num_hidden_layers"] - 1)
    elif pick < 0.55:
        text["model_type"] = "gemma4_text"
    engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 1, 2])}
    return saved, engine


def test_diffusion_gemma_reads_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-diffusion-gemma")
    counts, mismatches = _compare(rng, [_case(rng) for _ in range(N)], no_window=0.1)
    print(f"\nvLLM DiffusionGemma reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 4 * N, counts


def test_diffusion_gemma_refuses_pipeline_stages_and_names_gemma_4s_layers() -> None:
    saved = {**T.DiffusionGemmaConfig().to_dict(), "architectures": ["DiffusionGemmaForBlockDiffusion"]}
    layers = layers_from_hf_config(saved)
    assert layers[0].name == "model.layers.0.self_attn.attn" and layers[-1].kind == "full"
    with pytest.raises(InvalidConfigError, match="does not implement SupportsPP"):
        layers_from_hf_config(saved, vllm.EngineConfig(pp=2))
