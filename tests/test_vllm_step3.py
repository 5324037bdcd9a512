"""vLLM mode's Step3 text model (:mod:`kvbudget.vllm.step3_text`), alone and inside Step3-VL and
Step-VL, against vLLM 0.33.0's own classes: the wrappers' ``init_vllm_registered_model`` call
(``models/step3_vl.py``, ``models/step_vl.py``) and ``Step3TextModel`` with its decoder layer,
attention and MoE block's TP check (``models/step3_text.py``), lifted by ``tests/vllm_oracle``, on
configs loaded by vLLM's own ``Step3VLConfig`` / ``Step3TextConfig`` (lifted from
``transformers_utils/configs/step3_vl.py``).

The cases per architecture: the text geometry seeded (layers, heads, head size, experts),
``moe_layers_enum`` as released configs save it (a comma-separated string) or not (null, a list,
the class's tuple default, a malformed string), a window with or without ``layer_types``,
``tie_word_embeddings`` on the text config, the wrapper's or neither, text ``architectures`` named or
not, keys left to the class's defaults; over TP, PP and ``--disable-sliding-window``. Judged by
``tests/test_vllm_state_models.py``'s ``_compare`` (the census's own reading). ``KVBUDGET_VLLM_STEP3_CASES``
sets the cases per architecture.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from test_vllm_state_models import _compare
from vllm_oracle._hf import vllm_config_class

from kvbudget import InvalidConfigError
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.step3_text import STEP3_TEXT, STEP3_VL, TEXT_DEFAULTS

N = int(os.environ.get("KVBUDGET_VLLM_STEP3_CASES", "100"))
_ARCHS = (*sorted(STEP3_VL), STEP3_TEXT)


def _text(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 64)
    text: dict[str, Any] = {
        "model_type": "step3_text", "architectures": [STEP3_TEXT], "num_hidden_layers": n,
        "num_attention_heads": rng.choice([6, 8, 16, 32, 64]), "head_dim": rng.choice([64, 128, 256]),
        "moe_num_experts": rng.choice([2, 4, 8, 48]), "hidden_size": rng.choice([1024, 4096]),
    }  # fmt: skip
    pick = rng.random()
    if pick < 0.7:  # as released: a comma-separated string
        text["moe_layers_enum"] = ",".join(str(i) for i in sorted(rng.sample(range(n + 2), k=rng.randint(1, n + 1))))
    elif pick < 0.8:
        text["moe_layers_enum"] = None  # every layer but the first
    elif pick < 0.88:
        text["moe_layers_enum"] = rng.choice([[1, 2], "", "1,,2", " 3 , 4 "])
    if rng.random() < 0.3:
        text["sliding_window"] = rng.choice([0, None, 512, 4096])
        if rng.random() < 0.5:
            text["layer_types"] = [rng.choice(["sliding_attention"] * 3 + ["full_attention"]) for _ in range(n)]
    if rng.random() < 0.5:
        text["tie_word_embeddings"] = rng.random() < 0.5
    if rng.random() < 0.1:  # none named: vLLM refuses it
        text["architectures"] = rng.choice([None, []])
        if rng.random() < 0.7:
            del text["architectures"]
    if rng.random() < 0.3:  # sparse: keys left to Step3TextConfig's defaults
        for key in rng.sample(sorted(set(text) - {"model_type", "architectures"}), k=rng.randint(1, 3)):
            text.pop(key)
        if "layer_types" in text and "num_hidden_layers" not in text:
            text.pop("layer_types")
    return text


def _case(rng: random.Random, arch: str) -> tuple[dict[str, Any], dict[str, Any]]:
    text = _text(rng)
    if arch == STEP3_TEXT:
        saved = {**text, "architectures": [STEP3_TEXT]}
    else:
        saved = {"model_type": "step3_vl", "architectures": [arch], "text_config": text}
        if rng.random() < 0.3:
            saved["tie_word_embeddings"] = rng.random() < 0.5  # with_hf_config copies it onto the text config
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 16]), "pp": rng.choice([1, 1, 1, 2, 3])}
    return saved, engine


def test_step3_models_read_as_vllm_builds_them() -> None:
    rng = random.Random("vllm-step3")
    cases = [_case(rng, arch) for arch in _ARCHS for _ in range(N)]
    counts, mismatches = _compare(rng, cases, no_window=0.2)
    print(f"\nvLLM Step3 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 2 // 3 and counts["attention layers"] > 4 * N, counts


def test_step3_text_defaults_are_vllms_class() -> None:
    defaults = vllm_config_class("step3_text")()
    assert {k: getattr(defaults, k) for k in TEXT_DEFAULTS} == TEXT_DEFAULTS
    assert defaults.architectures is None  # the class attribute is overwritten: vLLM is given none


def test_step3_vl_names_its_text_layers_under_language_model() -> None:
    text = {"architectures": [STEP3_TEXT], "num_hidden_layers": 2, "moe_layers_enum": "1"}
    saved = {"model_type": "step3_vl", "architectures": ["Step3VLForConditionalGeneration"], "text_config": text}
    layers = layers_from_hf_config(saved)
    assert [x.name for x in layers] == [f"language_model.layers.{i}.self_attn.attn" for i in range(2)]
    assert {(x.num_kv_heads, x.head_size) for x in layers} == {(1, 256)}


def test_a_step3_vl_text_config_without_architectures_is_refused_as_vllm_refuses_it() -> None:
    saved = {**vllm_config_class("step3_vl")().to_dict(), "architectures": ["StepVLForConditionalGeneration"]}
    with pytest.raises(InvalidConfigError, match="No model architectures are specified"):
        layers_from_hf_config(saved)


@pytest.mark.parametrize("text", [{"model_type": "llama"}, {"architectures": ["LlamaForCausalLM"]}])
def test_another_class_on_step3s_text_config_is_unchecked(text: dict[str, Any]) -> None:
    saved = {"model_type": "step3_vl", "architectures": ["Step3VLForConditionalGeneration"], "text_config": text}
    with pytest.raises(InvalidConfigError, match="has not checked"):
        layers_from_hf_config(saved)
