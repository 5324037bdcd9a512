"""Inkling (model types ``inkling_model`` and ``inkling_mm_model``, the latter's ``text_config``)
as SGLang 0.5.23 reads it (``configs/inkling.py``, which registers its classes over transformers'
own for both types).

Every Inkling layer has attention, full or sliding-window (``local_layer_ids``: SGLang's
``ModelConfig`` splits the layers by them), and a short-convolution ("sconv") state per request
that ``configs/hybrid_arch.py``'s ``mamba2_config`` plans as a Mamba state pool beside the KV
pools. :func:`inkling_config` gives the text config as ``InklingModelConfig.__init__`` leaves it,
with its defaults: ``head_dim`` (``hidden_size // num_attention_heads`` where None), ``v_head_dim``
and the SWA heads and dims (the full side's); SGLang's ``ModelConfig`` reads the pools' geometry
from it. :func:`inkling_state` gives its ``mamba2_cache_params``: over every layer, six conv windows of
``sconv_kernel_size - 1`` rows, two of the rank's full-attention KV width (``max(1, kv // tp) *
head_dim``), two of the SWA one and two of ``hidden_size`` (``--enable-scattered-sconv``, which
would shard those over TP, is off by default and not modelled), and no temporal state, in
bfloat16 whatever ``--mamba-ssm-dtype`` or ``SGLANG_MAMBA_CONV_DTYPE`` say (its
``InklingStateDType``). Its conv windows are never deduplicated (``disable_conv_window_dedup``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.config_io import ConfigError
from kvbudget.sglang.state import StateDims

__all__ = ["INKLING_STATE_DTYPE", "INKLING_TYPES", "inkling_config", "inkling_state"]

#: The model types SGLang 0.5.23 loads with its Inkling classes (the outer one wraps the text one).
INKLING_TYPES = ("inkling_model", "inkling_mm_model")
#: ``InklingStateDType``: the conv and temporal dtypes, fixed.
INKLING_STATE_DTYPE = "bfloat16"
#: ``InklingModelConfig.__init__``'s defaults of the keys read here (an absent key takes one).
_DEFAULTS = {"hidden_size": 1536, "num_hidden_layers": 16, "num_attention_heads": 12, "num_key_value_heads": 4,
             "sliding_window_size": 512, "sconv_kernel_size": 4}  # fmt: skip
#: What ``__init__`` derives from another key when a key is None (absent or null), in its order.
_DERIVED = (("v_head_dim", "head_dim"), ("swa_num_attention_heads", "num_attention_heads"),
            ("swa_num_key_value_heads", "num_key_value_heads"), ("swa_head_dim", "head_dim"),
            ("swa_v_head_dim", "swa_head_dim"))  # fmt: skip


def _text_of(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The text config (``inkling_mm_model``'s ``text_config``, which its class builds with the
    text class's defaults where absent) and its key prefix."""
    if config.get("model_type") != "inkling_mm_model":
        return config, ""
    text = config.get("text_config")
    if text is None:
        return {}, "text_config."
    if not isinstance(text, Mapping):
        raise ConfigError(f"config.json: text_config must be an object, got {type(text).__name__}", "text_config")
    return text, "text_config."


def inkling_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with its text config as ``InklingModelConfig.__init__`` leaves it: the class's
    defaults where a key is absent, then ``head_dim`` (``hidden_size // num_attention_heads``),
    ``v_head_dim`` and the SWA heads and dims derived where None (see the module doc)."""
    text, label = _text_of(config)
    t: dict[str, Any] = {**_DEFAULTS, **text}
    hidden, heads = t["hidden_size"], t["num_attention_heads"]
    if t.get("head_dim") is None and all(isinstance(x, int) and not isinstance(x, bool) for x in (hidden, heads)):
        t["head_dim"] = hidden // heads if heads else None
    for key, source in _DERIVED:
        if t.get(key) is None:
            t[key] = t.get(source)
    return {**config, "text_config": t} if label else t


def _int(text: Mapping[str, Any], key: str, label: str) -> int:
    v = text.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"config.json: {label}{key} must be a positive int, got {v!r}", f"{label}{key}")
    return v


def inkling_state(config: Mapping[str, Any], tp: int) -> tuple[StateDims, list[int], int]:
    """``(dims, state layers, num_hidden_layers)`` of Inkling's sconv state on one of ``tp``
    attention ranks (see the module doc): one layer's conv elements with ``sconv_kernel_size``
    as the conv kernel and no temporal state, over every layer.

    Raises:
        ConfigError: a dim that is not a positive int.
    """
    text, label = _text_of(inkling_config(config))
    kv, swa_kv = _int(text, "num_key_value_heads", label), _int(text, "swa_num_key_value_heads", label)
    kernel = _int(text, "sconv_kernel_size", label)
    width = (max(1, kv // tp) * _int(text, "head_dim", label) + max(1, swa_kv // tp) * _int(text, "swa_head_dim", label)
             + _int(text, "hidden_size", label))  # fmt: skip
    n = _int(text, "num_hidden_layers", label)
    dims = StateDims(conv_elems=2 * (kernel - 1) * width, ssm_heads=1, ssm_head_dim=1, ssm_state_dim=0,
                     k_heads_per_tp=1, conv_kernel=kernel)  # fmt: skip
    return dims, list(range(n)), n
