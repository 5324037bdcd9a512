"""vLLM mode's Idefics3, SmolVLM and Aria (:mod:`kvbudget.vllm.bare_text_models`) against vLLM
0.33.0's own classes: ``Idefics3Model`` (lifted from the pinned ``models/idefics3.py``) building
vLLM's ``LlamaModel`` on ``with_hf_config(config.text_config)``; Aria's ``AriaTextModel``
(``models/aria.py``: ``LlamaModel`` over its MoE decoder layer).

The cases per wrapper: transformers 5.19.0's class defaults with the text config's geometry
seeded (layers, heads, KV heads, head size, Llama's ``layer_types`` and window), or a seeded
config of another text family (Mistral, Qwen2, Qwen3: vLLM builds ``LlamaModel`` on it all the
same), with and without its ``architectures``, every key or sparse; over TP, PP,
``--kv-cache-dtype`` and ``--disable-sliding-window``. ``KVBUDGET_VLLM_BARE_CASES`` sets the
cases per wrapper.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import transformers as T
from sglang_model_cases import FAMILIES
from test_vllm_thinkers import FIELDS, _ours, _theirs
from test_vllm_wrappers import _varied
from vllm_reading import judge

from kvbudget import InvalidConfigError
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_BARE_CASES", "40"))
_ARCHS = {"Idefics3ForConditionalGeneration": "idefics3", "SmolVLMForConditionalGeneration": "smolvlm",
          "AriaForConditionalGeneration": "aria"}


def cases(per_wrapper: int, seed: int = 0) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(wrapper, config.json, engine settings), seeded per wrapper."""
    for arch, model_type in _ARCHS.items():
        rng = random.Random(f"vllm-bare:{seed}:{arch}")
        base = T.CONFIG_MAPPING[model_type]().to_dict()
        for _ in range(per_wrapper):
            saved = {**copy.deepcopy(base), "architectures": [arch]}
            if rng.random() < 0.6:
                text = _varied(rng, saved["text_config"])
                if rng.random() < 0.3:  # Llama's per-layer windows
                    text["layer_types"] = [rng.choice(["sliding_attention", "full_attention"])
                                           for _ in range(text["num_hidden_layers"])]  # fmt: skip
                    text["sliding_window"] = rng.choice([256, 4096])
            else:
                text = FAMILIES[rng.choice(["llama", "mistral", "qwen2", "qwen3"])](rng).saved(rng.random() < 0.3)
            if rng.random() < 0.5:
                text.pop("architectures", None)
            if rng.random() < 0.3:  # sparse: keys left to the text class's defaults (its model_type kept)
                keys = sorted(set(text) - {"model_type", "layer_types"})
                for key in rng.sample(keys, k=min(len(keys), rng.randint(1, 5))):
                    text.pop(key)
                if "layer_types" in text and "num_hidden_layers" not in text:
                    text.pop("layer_types")
            saved["text_config"] = text
            engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
                      "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                      "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
            yield arch, saved, engine


def test_bare_text_models_read_as_vllm_builds_them() -> None:
    counts, _, mismatches = judge(
        cases(N), lambda saved: T.CONFIG_MAPPING[saved["model_type"]].from_dict(copy.deepcopy(saved)), _ours, _theirs,
        # a Qwen text config in Idefics3 / SmolVLM
        unchecked=lambda arch, ours: "has not checked" in ours and "model_type" in ours)  # fmt: skip
    print(f"\nvLLM bare text models: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["planned"] > counts["compared"] // 3, counts


def test_idefics3_names_its_layers_under_model_text_model() -> None:
    saved = {**T.Idefics3Config().to_dict(), "architectures": ["Idefics3ForConditionalGeneration"]}
    layers = layers_from_hf_config(saved)
    assert layers[0].name == "model.text_model.layers.0.self_attn.attn" and len(layers) == 32
    assert set(FIELDS) >= {"name"}


def test_granite_4_vision_refuses_a_text_config_without_granites_keys_as_vllm_does() -> None:
    saved = {**T.Granite4VisionConfig().to_dict(), "architectures": ["Granite4VisionForConditionalGeneration"]}
    with pytest.raises(InvalidConfigError, match="residual_multiplier"):  # its default text config is Llama's
        layers_from_hf_config(saved)
    theirs = _theirs(T.Granite4VisionConfig.from_dict(copy.deepcopy(saved)),
                     {"tp": 1, "pp": 1, "kv_cache_dtype": "auto", "disable_sliding_window": False})  # fmt: skip
    assert isinstance(theirs, str) and "residual_multiplier" in theirs
    granite = {**saved, "text_config": {**saved["text_config"], "model_type": "granite"}}
    assert [x.name for x in layers_from_hf_config(granite)][:1] == ["language_model.model.layers.0.self_attn.attn"]


def test_the_text_classes_without_a_window_attribute_are_transformers() -> None:
    from kvbudget.vllm.bare_text_models import NO_WINDOW_ATTRIBUTE

    for model_type in ("llama", "mistral", "aria_text", "paddleocr_vl_text", "qwen2"):
        assert (not hasattr(T.CONFIG_MAPPING[model_type](), "sliding_window")) == (model_type in NO_WINDOW_ATTRIBUTE)
