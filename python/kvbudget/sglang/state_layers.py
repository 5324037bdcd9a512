"""The attention layers of the models SGLang 0.5.23 plans with a Mamba or linear-attention state
pool beside the KV pool (:data:`STATE_MODELS`, by the config class SGLang loads them with), as
:func:`kvbudget.sglang.model.resolve_sglang` counts them: the Qwen3-Next family's every
``full_attention_interval``-th layer, Kimi-Linear's layers outside its KDA ones, the Bailing
hybrids' (:func:`kvbudget.sglang.bailing.bailing_full_attention_ids`), the
Mamba-2-shaped families' from the layer kinds their state layers are read with
(:func:`kvbudget.sglang.state_model.attention_layer_ids`), none for the pure state models, and
every layer for Inkling (each attends, full or sliding-window, beside its conv state)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvbudget.models.config_io import ConfigError
from kvbudget.models.layer_kinds import is_kda_layer
from kvbudget.sglang.bailing import bailing_full_attention_ids
from kvbudget.sglang.state_model import attention_layer_ids

__all__ = ["STATE_MODELS", "mamba2_shaped_ids"]


def _interval_ids(text: Mapping[str, Any], n: int) -> list[int]:
    interval = text.get("full_attention_interval")
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
        raise ConfigError("config.json: SGLang 0.5.23's Qwen3-Next config class derives the layer kinds "
                          "from full_attention_interval, which this config lacks; SGLang cannot plan it",
                          "full_attention_interval")  # fmt: skip
    return [i for i in range(n) if (i + 1) % interval == 0]


def _kda_ids(text: Mapping[str, Any], n: int) -> list[int]:
    linear = text.get("linear_attn_config")
    kda = set(linear.get("kda_layers") or ()) if isinstance(linear, Mapping) else set()
    return [i for i in range(n) if not is_kda_layer(kda, i)]


def mamba2_shaped_ids(model_type: str) -> Callable[[Mapping[str, Any], int], list[int]]:
    """The Mamba-2-shaped families' layers, read with their state layers' kinds
    (:func:`kvbudget.sglang.state_model.attention_layer_ids`; LFM2-VL's from its text config)."""

    def ids(text: Mapping[str, Any], n: int) -> list[int]:
        wrapped = {"text_config": text} if model_type == "lfm2_vl" else text
        got = attention_layer_ids({**wrapped, "model_type": model_type})
        assert got is not None, model_type
        return got

    return ids


#: The full-attention layers of the models SGLang plans with a Mamba/linear-attention state pool
#: beside the KV pool, by the config class SGLang loads them with (its ``model_type``: the outer
#: one where that class reads the layers, LFM2-VL's, else the text config's).
STATE_MODELS: dict[str, Callable[[Mapping[str, Any], int], list[int]]] = {
    "qwen3_next": _interval_ids, "qwen3_5_text": _interval_ids, "qwen3_5_moe_text": _interval_ids,
    "kimi_linear": _kda_ids, "bailing_hybrid": lambda text, n: bailing_full_attention_ids(text),
    **{t: mamba2_shaped_ids(t) for t in ("lfm2", "lfm2_moe", "lfm2_vl", "nemotron_h", "nemotron_h_puzzle",
                                          "falcon_h1", "zaya")},
    # pure state models: every layer a state layer, no attention layer (full_attention_layer_ids == [])
    **dict.fromkeys(("mamba", "mamba2", "falcon_mamba"), lambda text, n: []),
    # Inkling: every layer attends (full, or sliding-window beside hybrid-SWA pools) and keeps a conv state
    **dict.fromkeys(("inkling_model", "inkling_mm_model"), lambda text, n: list(range(n))),
}  # fmt: skip
