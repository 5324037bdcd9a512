"""The refusals the vLLM readers share: vLLM's own failure on a config (:func:`refused`), a
sub-config that must be an object (:func:`section`), a ``text_config`` key that must be a positive
integer (:func:`text_int`), and the KV heads one rank holds after the GQA asserts of vLLM's
attention classes (:func:`gqa_per_rank`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.hf import ConfigError

__all__ = ["gqa_per_rank", "refused", "section", "split_unevenly", "text_int", "text_kv_per_rank"]


def refused(what: str, key: str, label: str = "config.json") -> ConfigError:
    """vLLM's failure on the config (``what``: its exception and message), blamed on ``key``."""
    return ConfigError(f"{label}: vLLM 0.33.0 refuses it: {what}", key)


def section(cfg: Mapping[str, Any], key: str, label: str = "config.json") -> Mapping[str, Any]:
    """``cfg[key]``, a sub-config (absent or None: ``{}``, the class defaults).

    Raises:
        ConfigError: it is not an object.
    """
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{label}: key '{key}' must be an object", key)
    return value


def text_int(text: Mapping[str, Any], key: str, label: str) -> int:
    """``text[key]`` (a ``text_config`` with its class defaults filled in): a positive integer.

    Raises:
        ConfigError: it is not one.
    """
    value = text[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label}: key 'text_config.{key}' must be a positive integer, not {value!r}",
                          f"text_config.{key}")  # fmt: skip
    return value


def split_unevenly(n: int, tp: int) -> bool:
    """Whether ``n`` heads and ``tp`` ranks fail to divide one another (vLLM's GQA assert: ``tp``
    divides ``n``, or ``n`` divides ``tp`` and the heads are replicated)."""
    return bool(n % tp if n >= tp else tp % n)


def gqa_per_rank(heads: int, kv: int, tp: int, kv_key: str, where: str = "") -> int:
    """``max(1, kv // tp)`` KV heads on one rank, after the asserts of a GQA attention class (Beam's,
    Step-3.5's): ``tp`` divides the heads, the KV heads and ``tp`` divide one another, and the heads
    per rank are a multiple of the KV heads per rank (``kv_key`` names the KV count; ``where``
    follows the first message, e.g. ``" (layer 3)"``).

    Raises:
        ConfigError: vLLM's assertion.
    """
    if heads % tp or split_unevenly(kv, tp):
        raise refused(f"AssertionError: {heads} attention heads and {kv} KV heads over tp={tp}{where}",
                      "num_attention_heads")  # fmt: skip
    per_rank = max(1, kv // tp)
    if (heads // tp) % per_rank:
        raise refused(f"num_heads ({heads // tp}) is not divisible by num_kv_heads ({per_rank})", kv_key)
    return per_rank


def text_kv_per_rank(heads: int, kv: int, tp: int, label: str) -> int:
    """``max(1, kv // tp)`` KV heads of a text config on one rank, after the asserts of the attention
    a multimodal class builds (Cohere Compass's, Cosmos3-Edge's Nemotron-H): the KV heads and ``tp``
    divide one another, and the heads per rank are a multiple of the KV heads per rank.

    Raises:
        ConfigError: vLLM's assertion.
    """
    if split_unevenly(kv, tp):
        raise refused(f"AssertionError: the {kv} KV heads and tp={tp} do not divide one another",
                      "text_config.num_key_value_heads", label)  # fmt: skip
    per_rank = max(1, kv // tp)
    if (heads // tp) % per_rank:
        raise refused(f"AssertionError: num_heads ({heads // tp}) is not divisible by num_kv_heads ({per_rank})",
                      "text_config.num_key_value_heads", label)  # fmt: skip
    return per_rank
