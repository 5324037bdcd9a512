"""vLLM 0.33.0's Whisper (``WhisperForConditionalGeneration``, ``model_executor/models/whisper.py``): an
encoder-decoder model whose decoder layers each hold a self-attention and a cross-attention cache.

vLLM builds ``WhisperModel`` at the top level with an empty prefix, so its encoder and decoder sit at
``.encoder`` and ``.decoder``; ``WhisperDecoder`` builds each layer with ``make_layers`` and its lambda
appends ``.layers`` to the prefix it is given. Each decoder layer ``i`` registers, in order:

* ``.decoder.layers.<i>.layers.self_attn.attn``: an ``Attention`` (full attention: a Whisper config
  has no window);
* ``.decoder.layers.<i>.layers.encoder_attn.attn``: a ``CrossAttention``, whose
  ``CrossAttentionSpec`` the planner charges for the scheduler's encoder budget (the ``cross`` kind).

Both take ``decoder_attention_heads`` over ``d_model``: ``max(1, heads // tp)`` KV heads per rank of
``d_model // heads`` elements. ``WhisperAttention`` asserts TP divides the heads and raises where
``head_dim * heads != d_model``; the encoder's layers (built first, no KV cache of their own) make
the same checks over ``encoder_attention_heads``. The class does not implement ``SupportsPP``.

Not read: a config with a ``sliding_window`` (refused as unchecked) and drafters. Held to vLLM's
classes by ``tests/test_vllm_whisper.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["WHISPER", "WHISPER_DEFAULTS", "whisper_layers"]

#: The architecture read here.
WHISPER: Final = "WhisperForConditionalGeneration"
#: transformers 5.19.0's ``WhisperConfig`` defaults of the fields read here.
WHISPER_DEFAULTS: Final[Mapping[str, int]] = {
    "d_model": 384, "encoder_attention_heads": 6, "decoder_attention_heads": 6, "encoder_layers": 4,
    "decoder_layers": 4}  # fmt: skip


def _int(cfg: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    v = cfg.get(key, WHISPER_DEFAULTS[key])
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"config.json: key {key!r} must be an integer >= {minimum}, got {v!r}", key)
    return v


def _heads(heads: int, d_model: int, tp: int, key: str) -> tuple[int, int]:
    """``WhisperAttention``'s checks: ``(KV heads per rank, head dim)``."""
    if heads % tp:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AssertionError: WhisperAttention asserts tp ({tp}) "
                          f"divides {key} ({heads})", key)  # fmt: skip
    dim = d_model // heads
    if dim * heads != d_model:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: ValueError: embed_dim must be divisible by num_heads "
                          f"(got `embed_dim`: {d_model} and `num_heads`: {heads}).", key)  # fmt: skip
    return max(1, heads // tp), dim


def whisper_layers(cfg: Mapping[str, Any], engine: EngineConfig, kv_cache_dtype: str,
                   model_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The KV-cache layers vLLM 0.33.0 registers for a Whisper config (see the module docstring).

    Raises:
        ConfigError: what vLLM refuses (its assertions), a window or a drafter (not checked).
    """
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {WHISPER}",
                          "architectures")  # fmt: skip
    if cfg.get("sliding_window") is not None:
        raise ConfigError("config.json: kvbudget has not checked vLLM 0.33.0's Whisper with a sliding_window",
                          "sliding_window")  # fmt: skip
    d_model = _int(cfg, "d_model")
    if _int(cfg, "encoder_layers", minimum=0):  # WhisperEncoder's layers, built before the decoder's
        _heads(_int(cfg, "encoder_attention_heads"), d_model, engine.tp, "encoder_attention_heads")
    out: list[LayerSpec] = []
    for i in range(_int(cfg, "decoder_layers", minimum=0)):
        heads, dim = _heads(_int(cfg, "decoder_attention_heads"), d_model, engine.tp, "decoder_attention_heads")
        self_attn = LayerSpec(f".decoder.layers.{i}.layers.self_attn.attn", "full", heads, dim, head_size_v=dim,
                              kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype)  # fmt: skip
        out += [self_attn, replace(self_attn, name=f".decoder.layers.{i}.layers.encoder_attn.attn", kind="cross")]
    return out
