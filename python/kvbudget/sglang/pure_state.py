"""SGLang 0.5.23's pure state models: a state pool, and a KV pool without layers.

Mamba-1, Falcon-Mamba and Mamba-2 (``configs/model_config.py``'s ``PURE_SSM_ARCHITECTURES``,
:data:`kvbudget.sglang.model.PURE_SSM_ARCHITECTURES`) have no attention layer. SGLang still
runs its budget the hybrid way: the state pool first (``_handle_max_mamba_cache``, the same
budget as Qwen3-Next's), then a ``DefaultPoolConfigurator`` over the stage's attention layers,
none, whose cell size is 0 bytes per token. Its ``calculate_pool_sizes`` then answers
``_zero_kv_max_tokens`` whatever the budget: ``--max-total-tokens``, else the model's context
length (``ModelConfig.context_len``), floored to a page. The same holds for a pipeline stage of
a hybrid model that holds no attention layer, except that SGLang answers ``int64`` max there when
another stage has attention layers.

* :func:`context_length`: ``get_context_length``, the context length SGLang derives from a
  config (``--context-length`` replaces it).
* :func:`zero_kv_tokens`: ``_zero_kv_max_tokens`` of a model without attention layers.
* :func:`kvbudget.sglang.state.plan_state_only`: the plan (the state pool alone, and that label).

``tests/test_sglang_pure_state.py`` holds these to SGLang's code from the wheel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.config_io import ConfigError

__all__ = ["CONTEXT_LENGTH_KEYS", "context_length", "zero_kv_tokens"]

#: The keys ``get_context_length`` reads, in its order (``utils/hf_transformers/common.py``).
CONTEXT_LENGTH_KEYS: tuple[str, ...] = (
    "max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings",
)  # fmt: skip
#: ``get_context_length``'s answer for a config without any of :data:`CONTEXT_LENGTH_KEYS`, tokens.
DEFAULT_CONTEXT_LENGTH = 2048


def context_length(text_config: Mapping[str, Any]) -> int:
    """SGLang's ``get_context_length(hf_text_config)``, tokens: the first of
    :data:`CONTEXT_LENGTH_KEYS` the config sets, times the ``rope_scaling`` ``factor`` (1 with
    ``original_max_position_embeddings`` or ``rope_type`` ``"llama3"``), truncated; else 2048.

    Raises:
        ConfigError: a context key or scaling factor that is not a number.
    """
    scaling = text_config.get("rope_scaling")
    factor: Any = 1
    if scaling:
        if not isinstance(scaling, Mapping):
            raise ConfigError("config.json: rope_scaling is not an object, which SGLang's get_context_length "
                              "reads with .get", "rope_scaling")  # fmt: skip
        factor = scaling.get("factor", 1)
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        value = text_config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ConfigError(f"config.json: {key} {value!r} (rope factor {factor!r}) is not a number", key)
        return int(factor * value)
    return DEFAULT_CONTEXT_LENGTH


def zero_kv_tokens(text_config: Mapping[str, Any], *, context_len: int | None = None,
                   max_total_tokens: int | None = None) -> int:  # fmt: skip
    """``DefaultPoolConfigurator._zero_kv_max_tokens`` of a model without attention layers, tokens
    (before the page floor :func:`~kvbudget.sglang.state.plan_state_only` applies):
    ``max_total_tokens`` (``--max-total-tokens``) when set and nonzero, else ``context_len``
    (``--context-length``), else :func:`context_length` of the config.

    Raises:
        ConfigError: as :func:`context_length`.
        ValueError: a negative count.
    """
    for name, value in (("max_total_tokens", max_total_tokens), ("context_len", context_len)):
        if value is not None and value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if max_total_tokens:  # SGLang's `max_total_tokens or context_len`
        return max_total_tokens
    return context_len if context_len is not None else context_length(text_config)
