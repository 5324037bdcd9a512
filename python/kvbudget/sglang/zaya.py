"""ZAYA1 (model type ``zaya``) as SGLang 0.5.23 reads it.

SGLang registers its own ``ZayaConfig`` (``configs/zaya.py``) over transformers' class for the
model type, and ``configs/hybrid_arch.py``'s ``mamba2_config`` plans it with a state pool: the
CCA attention layers keep both a KV entry per token and a conv state per request.

* :func:`zaya_config`: what ``ZayaConfig.__init__`` derives, with its defaults:
  ``num_hidden_layers`` is ``len(zaya_layers)`` when that list is given (80 without either),
  ``num_attention_heads`` and ``num_query_groups`` the first nonzero entry of
  ``cca_num_q_heads`` / ``num_query_groups_list`` when given (8 and 2 without), ``head_dim``
  128, or ``kv_channels`` when the config gives it null; the class asserts a head dim and
  ``num_query_groups == num_key_value_heads`` (2).
* :func:`zaya_attention_ids`: ``full_attention_layer_ids`` (its ``linear_layer_ids`` too): the
  ``"a"`` entries of ``zaya_layers``, else every even layer. The model class
  (``models/zaya.py``'s ``_layer_class``) builds its attention at every even layer whatever the
  list says; an even layer the pools do not hold fails on its first forward
  (``HybridLinearKVPool`` raises ValueError), so such a config is refused.
* :func:`zaya_state`: ``mamba2_cache_params``: two conv states per layer, the CCA q/k padding
  ``((num_attention_heads + num_key_value_heads) * head_dim / tp, cca_time0 + cca_time1 - 2)``
  and the previous hidden state ``(hidden_size, 1)``, no SSM state (``temporal=(1, 1, 0)``),
  over the global TP group (``get_parallel().tp_size``). The model class asserts that the
  attention TP group is that group (no attention DP) and that TP divides both head counts.
  The two windows differ: SGLang's deduplicated speculative conv window (``MambaPool``, one
  window axis for every conv shape) fails on them unless both are 1, so the state's
  ``conv_kernel`` is left unknown then (the exact plan lays the conv states out flat, the same
  bytes, and refuses that layout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.config_io import ConfigError

__all__ = ["zaya_attention_ids", "zaya_config", "zaya_state"]

#: ``ZayaConfig.__init__``'s defaults of the keys read here.
_DEFAULTS = {"num_hidden_layers": 80, "num_attention_heads": 8, "num_query_groups": 2, "num_key_value_heads": 2,
             "head_dim": 128, "hidden_size": 2048, "cca_time0": 2, "cca_time1": 2}  # fmt: skip


def _fail(key: str, why: str) -> ConfigError:
    return ConfigError(f"config.json: {key} {why}; SGLang 0.5.23's ZayaConfig fails on it", key)


def _int(cfg: Mapping[str, Any], key: str, value: Any = ...) -> int:
    v = cfg.get(key, _DEFAULTS.get(key)) if value is ... else value
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"config.json: {key} must be a positive int, got {v!r}", key)
    return v


def _first(cfg: Mapping[str, Any], list_key: str, key: str) -> int:
    """The first nonzero entry of ``list_key`` when the config gives a non-empty one, else ``key``."""
    given = cfg.get(list_key)
    if given:
        if not isinstance(given, list):
            raise _fail(list_key, f"must be a list, got {given!r}")
        return _int(cfg, list_key, next((v for v in given if v), cfg.get(key, _DEFAULTS[key])))
    return _int(cfg, key)


def zaya_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with the keys SGLang's ``ZayaConfig`` derives set as it sets them.

    Raises:
        ConfigError: where the class asserts or fails (no head dim, ``num_query_groups`` other
            than ``num_key_value_heads``, a ``zaya_layers`` that is not a list).
    """
    out = dict(cfg)
    layers = cfg.get("zaya_layers")
    if layers and not isinstance(layers, list):
        raise _fail("zaya_layers", f"must be a list, got {layers!r}")
    out["num_hidden_layers"] = len(layers) if layers else _int(cfg, "num_hidden_layers")
    out["num_attention_heads"] = _first(cfg, "cca_num_q_heads", "num_attention_heads")
    groups = _first(cfg, "num_query_groups_list", "num_query_groups")
    head_dim = cfg.get("head_dim", _DEFAULTS["head_dim"])
    if head_dim is None and cfg.get("kv_channels") is not None:
        head_dim = cfg["kv_channels"]
    if head_dim is None:
        raise _fail("head_dim", "is null and kv_channels gives none (it asserts a head dim)")
    out["head_dim"] = _int(cfg, "head_dim", head_dim)
    out["num_key_value_heads"] = _int(cfg, "num_key_value_heads")
    if groups != out["num_key_value_heads"]:
        raise _fail("num_query_groups", f"({groups}) differs from num_key_value_heads "
                    f"({out['num_key_value_heads']}), which it asserts equal")  # fmt: skip
    out["num_query_groups"] = groups
    return out


def zaya_attention_ids(cfg: Mapping[str, Any]) -> list[int]:
    """``ZayaConfig.full_attention_layer_ids`` of a :func:`zaya_config` reading.

    Raises:
        ConfigError: an even layer (where the model class builds attention) is not among them,
            or the query heads are not a multiple of the KV heads (the model class asserts it).
    """
    n, layers = cfg["num_hidden_layers"], cfg.get("zaya_layers")
    if cfg["num_attention_heads"] % cfg["num_query_groups"]:
        raise ConfigError(f"config.json: num_attention_heads ({cfg['num_attention_heads']}) must be a multiple of "
                          f"num_query_groups ({cfg['num_query_groups']}); SGLang 0.5.23's ZAYA1 model (CCA) asserts "
                          "it", "num_attention_heads")  # fmt: skip
    ids = [i for i, t in enumerate(layers) if t == "a"] if layers else list(range(0, n, 2))
    missing = sorted(set(range(0, n, 2)) - set(ids))
    if missing:
        raise ConfigError(f"config.json: zaya_layers puts no attention ('a') at layer {missing[0]}; SGLang "
                          "0.5.23's ZAYA1 model builds attention at every even layer, whose KV and conv state "
                          "the pools then lack (HybridLinearKVPool raises ValueError on the first forward)",
                          "zaya_layers")  # fmt: skip
    return ids


def zaya_state(cfg: Mapping[str, Any], tp: int, attn_tp: int) -> tuple[int, int]:
    """``(conv elements of one layer on one rank, cca padding)`` of a :func:`zaya_config` reading
    on ``tp`` ranks (the global TP group; ``attn_tp``: the attention TP group).

    Raises:
        ConfigError: where SGLang asserts (attention DP, TP not dividing the head counts).
    """
    heads, groups = cfg["num_attention_heads"], cfg["num_query_groups"]
    if attn_tp != tp:
        raise ConfigError(f"SGLang 0.5.23's ZAYA1 model asserts the attention TP group ({attn_tp}) equals the "
                          f"global TP group ({tp}): attention DP is not supported for ZAYA1",
                          "attn_dp_size")  # fmt: skip
    for what, n in (("num_attention_heads", heads), ("num_query_groups", groups)):
        if n % tp:
            raise ConfigError(f"config.json: {what} ({n}) must be divisible by tp_size ({tp}); SGLang 0.5.23's "
                              "ZAYA1 model asserts it (head-parallel CCA)", what)  # fmt: skip
    padding = _int(cfg, "cca_time0") - 1 + _int(cfg, "cca_time1") - 1
    return (heads + groups) * cfg["head_dim"] // tp * padding + _int(cfg, "hidden_size"), padding
