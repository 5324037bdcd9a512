"""vLLM mode's Cohere Compass (:mod:`kvbudget.vllm.cohere_compass`) against vLLM 0.33.0's own classes:
``CohereCompassForConditionalGeneration.__init__`` (``models/cohere_compass.py``, kept to its config
reads, the language model it builds on ``with_hf_config(config.text_config)`` and its deepstack
check on later pipeline ranks), ``CohereCompassForCausalLM`` and its text model, decoder layer and
attention, lifted by ``tests/vllm_oracle``, on configs loaded by transformers 5.19.0's
``CohereCompassConfig``.

The cases: the class's defaults with the text geometry seeded (layers, heads, KV heads, hidden
size), ``layer_types`` with sliding layers or none, a window or none (or 0), tied embeddings or not,
deepstack levels or none, keys left to the class; over TP, PP and ``--disable-sliding-window``.
Judged by ``tests/test_vllm_state_models.py``'s ``_compare`` (the census's own reading).
``KVBUDGET_VLLM_COHERE_COMPASS_CASES`` sets the cases.
"""

from __future__ import annotations

import copy
import functools
import os
import random
from typing import Any

import pytest
import transformers as T
from test_vllm_state_models import _compare

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.cohere_compass import COHERE_COMPASS, DEFAULTS
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_COHERE_COMPASS_CASES", "150"))


@functools.cache
def _saved() -> dict[str, Any]:
    return {**T.CohereCompassConfig().to_dict(), "architectures": [COHERE_COMPASS]}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    saved = copy.deepcopy(_saved())
    saved["tie_word_embeddings"] = rng.random() < 0.85
    text = saved["text_config"]
    n = rng.randint(1, 48)
    heads = rng.choice([8, 16, 32, 64, 24])  # every TP below divides them: the oracle leaves ModelConfig's check out
    text.update(num_hidden_layers=n, num_attention_heads=heads, hidden_size=heads * rng.choice([64, 128]),
                num_key_value_heads=rng.choice([k for k in (1, 2, 4, 8, 3, heads) if heads % k == 0]))  # fmt: skip
    text.pop("head_dim", None)
    pick = rng.random()
    if pick < 0.5:  # interleaved sliding layers
        text["layer_types"] = [rng.choice(["sliding_attention"] * 3 + ["full_attention"]) for _ in range(n)]
    elif pick < 0.6:
        text["layer_types"] = ["sliding_attention"] * n
    elif pick < 0.8:
        text.pop("layer_types")  # the class: every layer full
    else:
        text["layer_types"] = ["full_attention"] * n
    if rng.random() < 0.4:
        text["sliding_window"] = rng.choice([None, 0, 512, 8192])
    if rng.random() < 0.3:
        saved["vision_config"]["deepstack_visual_indexes"] = rng.choice([[], [4], [2, 4, 6, 8, 10]])
    if rng.random() < 0.25:  # sparse: keys left to the class
        for key in rng.sample(["num_key_value_heads", "sliding_window", "hidden_size"], k=rng.randint(1, 2)):
            text.pop(key, None)
        if rng.random() < 0.3:
            saved.pop("tie_word_embeddings")
    engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3, 4])}
    return saved, engine


def test_cohere_compass_reads_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-cohere-compass")
    counts, mismatches = _compare(rng, [_case(rng) for _ in range(N)], no_window=0.15)
    print(f"\nvLLM Cohere Compass reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 4 * N, counts


def test_cohere_compass_defaults_are_transformers_classes() -> None:
    c = T.CohereCompassConfig()
    text = T.CohereCompassTextConfig.__dataclass_fields__
    got = ({k: getattr(c, k) for k in DEFAULTS[0]}, {k: text[k].default for k in DEFAULTS[1]},
           {k: list(getattr(c.vision_config, k)) for k in DEFAULTS[2]})  # fmt: skip
    assert got == DEFAULTS


def test_cohere_compass_refuses_untied_embeddings_and_a_short_first_stage() -> None:
    saved = copy.deepcopy(_saved())
    with pytest.raises(InvalidConfigError, match="tie_word_embeddings"):  # the class's default: false
        layers_from_hf_config(saved)
    saved["tie_word_embeddings"] = True
    assert layers_from_hf_config(saved)[0].name == "language_model.model.layers.0.self_attn.attn"
    saved["text_config"]["num_hidden_layers"] = 4
    saved["text_config"]["layer_types"] = ["full_attention"] * 4
    with pytest.raises(InvalidConfigError, match="deepstack"):  # stage 1 starts at layer 2, before 3 levels
        layers_from_hf_config(saved, vllm.EngineConfig(pp=2))
    # ModelConfig.verify_with_parallel_config (which the oracle leaves out): TP divides the query heads
    with pytest.raises(InvalidConfigError, match="must be divisible by tensor parallel size"):
        layers_from_hf_config({**saved, "text_config": {**saved["text_config"], "num_attention_heads": 12,
                                                        "hidden_size": 1536}}, vllm.EngineConfig(tp=8))  # fmt: skip
