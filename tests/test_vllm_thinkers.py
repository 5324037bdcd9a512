"""vLLM mode's thinker wrappers (:mod:`kvbudget.vllm.thinkers`: Qwen2.5-Omni, Qwen3-Omni,
Qwen3-ASR) against vLLM 0.33.0's own classes: the wrapper's call that builds the thinker's text
model (read from the pinned model file and executed by ``tests/vllm_oracle``), around seeded
text configs loaded by the config class vLLM loads the model with (transformers' for the Omni
models, vLLM's own ``Qwen3ASRConfig``, lifted from the wheel, for Qwen3-ASR).

The cases per wrapper: the text geometry seeded (layers, heads, KV heads, head size; Qwen2.5-Omni's
sliding-window keys and explicit ``layer_types``), every key or sparse (keys left to the text
class's defaults, the text ``model_type`` left out), Qwen3-ASR in transformers' layout (a
top-level ``text_config``) and vLLM's (``thinker_config``); over TP, PP, ``--kv-cache-dtype`` and
``--disable-sliding-window``. ``KVBUDGET_VLLM_THINKER_CASES`` sets the cases per wrapper.
"""

from __future__ import annotations

import copy
import functools
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import transformers as T
from test_vllm_models import _FIELDS
from vllm_oracle._hf import VllmLoadError, vllm_config_class, vllm_layers
from vllm_reading import judge

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_THINKER_CASES", "40"))
FIELDS = (*_FIELDS, "kv_cache_dtype")
_ARCHS = {"Qwen2_5OmniForConditionalGeneration": "qwen2_5_omni", "Qwen3OmniMoeForConditionalGeneration":
          "qwen3_omni_moe", "Qwen3ASRForConditionalGeneration": "qwen3_asr"}  # fmt: skip


@functools.cache
def _defaults(model_type: str) -> dict[str, Any]:
    """The wrapper's config file as its config class saves its defaults (transformers 5.19.0's
    class; for Qwen3-ASR that class's layout: a top-level ``text_config``)."""
    return T.CONFIG_MAPPING[model_type]().to_dict()  # type: ignore[no-any-return]


def _text(rng: random.Random, base: dict[str, Any], model_type: str) -> dict[str, Any]:
    heads = rng.choice([4, 8, 16, 28, 32, 64])
    n = rng.randint(1, 40)
    text = {**base, "num_hidden_layers": n, "num_attention_heads": heads,
            "hidden_size": heads * rng.choice([64, 128]),
            "num_key_value_heads": rng.choice([k for k in (1, 2, 4, 7, 8, heads) if heads % k == 0])}  # fmt: skip
    if rng.random() < 0.5:
        text["head_dim"] = rng.choice([64, 80, 128, 256])
    if model_type == "qwen2_5_omni" and rng.random() < 0.5:  # Qwen2's window keys (vLLM's Qwen2 reads them)
        text.update(use_sliding_window=rng.random() < 0.7, sliding_window=rng.choice([None, 512, 4096]),
                    max_window_layers=rng.randint(0, n))  # fmt: skip
        text.pop("layer_types", None)  # the class derives them, unless given
        if rng.random() < 0.3:
            text["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) for _ in range(n)]
    elif rng.random() < 0.2:
        text["sliding_window"] = rng.choice([None, 1024])
    if model_type == "qwen3_asr" and rng.random() < 0.3:  # layer_types all full (a window unchecked)
        text["layer_types"] = [rng.choice(["full_attention"] * 5 + ["sliding_attention"]) for _ in range(n)]
    if rng.random() < 0.4:  # sparse: keys left to the text class's defaults
        for key in rng.sample(sorted(text), k=rng.randint(1, len(text))):
            if key not in ("layer_types",):
                text.pop(key)
    if "layer_types" in text and len(text["layer_types"]) != text.get("num_hidden_layers", -1):
        text.pop("layer_types")  # the class checks their count against the layers
    return text


def cases(per_wrapper: int, seed: int = 0) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(wrapper, config.json, engine settings), seeded per wrapper."""
    for arch, model_type in _ARCHS.items():
        rng = random.Random(f"vllm-thinker:{seed}:{arch}")
        for _ in range(per_wrapper):
            saved = copy.deepcopy(_defaults(model_type))
            saved["architectures"] = [arch]
            if model_type == "qwen3_asr":
                text = _text(rng, saved.pop("text_config"), model_type)
                if rng.random() < 0.5:  # vLLM's own layout
                    saved["thinker_config"] = {"text_config": text}
                else:
                    saved["text_config"] = text
            else:
                saved["thinker_config"]["text_config"] = _text(rng, saved["thinker_config"]["text_config"], model_type)
            engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
                      "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                      "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
            yield arch, saved, engine


def _load(saved: dict[str, Any]) -> Any:
    return vllm_config_class(saved["model_type"]).from_dict(copy.deepcopy(saved))


def _ours(saved: dict[str, Any], s: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(tp=s["tp"], pp=s["pp"]),
                                       kv_cache_dtype=s["kv_cache_dtype"],
                                       disable_sliding_window=s["disable_sliding_window"])  # fmt: skip
    except InvalidConfigError as e:
        return f"refused: {e}"
    return [{k: getattr(x, k) for k in FIELDS} for x in layers]


def _theirs(loaded: Any, s: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        layers = vllm_layers(loaded, tp=s["tp"], pp=s["pp"], kv_cache_dtype=s["kv_cache_dtype"],
                             disable_sliding_window=s["disable_sliding_window"])  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"
    return [{k: x[k] for k in FIELDS} for x in layers]


def test_thinkers_read_as_vllm_builds_their_text_models() -> None:
    counts, planned_by, mismatches = judge(
        cases(N), _load, _ours, _theirs,
        # a Qwen3-ASR text window (thinkers.py)
        unchecked=lambda arch, ours: "has not checked" in ours and arch.startswith("Qwen3ASR"))  # fmt: skip
    print(f"\nvLLM thinkers: {counts}, planned per wrapper {planned_by}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert len(planned_by) == len(_ARCHS) and counts["planned"] > counts["compared"] // 3, (counts, planned_by)


def test_a_thinker_layer_name_is_under_language_model() -> None:
    saved = {**_defaults("qwen2_5_omni"), "architectures": ["Qwen2_5OmniForConditionalGeneration"]}
    layers = layers_from_hf_config(saved)
    assert layers[0].name == "language_model.model.layers.0.self_attn.attn" and len(layers) == 28


def test_qwen3_asr_takes_vllms_own_text_defaults() -> None:
    """vLLM's Qwen3ASRConfig moves transformers' top-level text_config into its thinker, whose
    Qwen3ASRTextConfig gives 32 KV heads of 128 unless the file says otherwise."""
    saved = {"model_type": "qwen3_asr", "architectures": ["Qwen3ASRForConditionalGeneration"],
             "text_config": {"model_type": "qwen3", "num_hidden_layers": 2}}  # fmt: skip
    layers = layers_from_hf_config(saved)
    assert [(x.num_kv_heads, x.head_size) for x in layers] == [(32, 128)] * 2
    assert [{k: getattr(x, k) for k in FIELDS} for x in layers] == _theirs(_load(saved), {
        "tp": 1, "pp": 1, "kv_cache_dtype": "auto", "disable_sliding_window": False})


def test_a_thinker_without_its_text_config_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="thinker_config.text_config"):
        layers_from_hf_config({"architectures": ["Qwen2_5OmniForConditionalGeneration"], "model_type": "qwen2_5_omni",
                               "thinker_config": {}})  # fmt: skip


def test_qwen2_5_omnis_window_default_is_its_text_classs() -> None:
    from kvbudget.vllm.thinkers import QWEN2_5_OMNI_WINDOW

    assert T.Qwen2_5OmniTextConfig(use_sliding_window=True).sliding_window == QWEN2_5_OMNI_WINDOW
