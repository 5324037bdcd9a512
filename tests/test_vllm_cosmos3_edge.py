"""vLLM mode's Cosmos3 Edge (:mod:`kvbudget.vllm.cosmos3_edge`) against vLLM 0.33.0's own classes:
``Cosmos3EdgeForConditionalGeneration.__init__`` (``models/cosmos3_edge.py``, kept to its config and
the language model it builds), ``Cosmos3EdgeForCausalLM`` (its conversion to transformers'
``NemotronHConfig``), its attention and decoder layer, and Nemotron-H's model, lifted by
``tests/vllm_oracle``, on configs loaded by transformers 5.19.0's ``Cosmos3EdgeConfig``.

The cases: the class's defaults with the text geometry seeded (layers, heads, KV heads or null,
head size with M-RoPE sections to match, hidden size), a saved window (or 0, or null) or none,
keys left to the class; over TP, PP and ``--disable-sliding-window``. Judged by
``tests/test_vllm_state_models.py``'s ``_compare`` (the census's own reading).
``KVBUDGET_VLLM_COSMOS3_EDGE_CASES`` sets the cases.
"""

from __future__ import annotations

import copy
import functools
import os
import random
from typing import Any

import pytest
import transformers as T
from huggingface_hub.errors import StrictDataclassFieldValidationError
from test_vllm_state_models import _compare

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.cosmos3_edge import COSMOS3_EDGE, TEXT_DEFAULTS
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_COSMOS3_EDGE_CASES", "150"))


@functools.cache
def _saved() -> dict[str, Any]:
    return {**T.Cosmos3EdgeConfig().to_dict(), "architectures": [COSMOS3_EDGE]}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    saved = copy.deepcopy(_saved())
    text = saved["text_config"]
    heads = rng.choice([8, 16, 32, 24])  # every TP below divides them: the oracle leaves ModelConfig's check out
    text.update(num_hidden_layers=rng.randint(1, 40), num_attention_heads=heads,
                hidden_size=heads * rng.choice([64, 128]),
                num_key_value_heads=rng.choice([None, 1, 2, 4, 8, 3]))  # fmt: skip
    if text["num_key_value_heads"] and heads % text["num_key_value_heads"]:
        text["num_key_value_heads"] = 1
    text["head_dim"] = dim = rng.choice([64, 128, 256])
    third = dim // 6
    text["rope_parameters"]["mrope_section"] = [dim // 2 - 2 * third, third, third]
    if rng.random() < 0.4:
        text["sliding_window"] = rng.choice([None, 0, 512, 4096])
    if rng.random() < 0.2:  # sparse: keys left to the class
        text.pop(rng.choice(["num_key_value_heads", "num_hidden_layers"]))
    engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3, 4])}
    return saved, engine


def test_cosmos3_edge_reads_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-cosmos3-edge")
    counts, mismatches = _compare(rng, [_case(rng) for _ in range(N)], no_window=0.15)
    print(f"\nvLLM Cosmos3 Edge reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 4 * N, counts


def test_cosmos3_edge_defaults_are_transformers_class() -> None:
    fields = T.Cosmos3EdgeTextConfig.__dataclass_fields__
    got = {k: fields[k].default for k in TEXT_DEFAULTS if k != "rope_parameters"}
    rope = T.Cosmos3EdgeTextConfig().rope_parameters
    assert {**got, "rope_parameters": {k: rope[k] for k in ("rope_type", "mrope_section")}} == TEXT_DEFAULTS


def test_cosmos3_edge_names_its_attention_at_the_even_layers() -> None:
    layers = layers_from_hf_config(_saved(), vllm.EngineConfig(pp=2))
    assert [x.name for x in layers[:2]] == [f"language_model.model.layers.{j}.mixer.attn" for j in (0, 2)]
    assert len(layers) == 28 and {x.pp_stage for x in layers} == {0, 1}
    with pytest.raises(InvalidConfigError, match="must be divisible by tensor parallel size"):
        layers_from_hf_config(_saved(), vllm.EngineConfig(tp=3))
    null = {**_saved(), "text_config": {**_saved()["text_config"], "head_dim": None}}
    with pytest.raises(InvalidConfigError, match="head_dim"):  # as transformers' strict class refuses it
        layers_from_hf_config(null)
    with pytest.raises(StrictDataclassFieldValidationError, match="head_dim"):
        T.Cosmos3EdgeConfig.from_dict(null)
