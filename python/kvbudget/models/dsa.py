"""A model's DSA indexer (DeepSeek-V3.2's sparse attention), read from its config.

SGLang 0.5.23 treats a model as DSA when its architecture is in
``is_deepseek_dsa``'s list *and* its config carries ``index_topk``: every layer
then also keeps an index key of ``index_head_dim`` elements (pooled by
``index_kpool``), except the layers that reuse the previous layer's top-k
(``dsa_layer_skips_topk``). This is the reading; what SGLang's pools make of it
is :mod:`kvbudget.sglang.dsa`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kvbudget.models.config_io import ConfigError

__all__ = ["DSA_ARCHITECTURES", "DSA_KEYS", "dsa_fields"]

#: The config keys the DSA reading uses.
DSA_KEYS = ("index_topk", "index_head_dim", "index_kpool", "index_kpool_compress", "indexer_types", "cli_factor",
            "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset")  # fmt: skip


#: ``is_deepseek_dsa``'s architectures (DSA also needs ``index_topk`` in the config).
DSA_ARCHITECTURES = frozenset({
    "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM",
    "HYV4ForCausalLMNextN",
})  # fmt: skip


def _positive(text: Mapping[str, Any], key: str, default: int) -> int:
    value = text.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"config.json: '{key}' must be a positive integer (SGLang asserts it), "
                          f"got {value!r}", key)  # fmt: skip
    return value


def _skips_topk(text: Mapping[str, Any], layer: int) -> bool:
    """Whether DSA layer ``layer`` reuses the previous layer's top-k indices (SGLang's rule:
    ``indexer_types``, else LongCat's ``cli_factor``, else ``index_topk_pattern``, else
    ``index_topk_freq`` with ``index_skip_topk_offset``)."""
    kinds = text.get("indexer_types")
    if kinds is not None:
        return 0 <= layer < len(kinds) and kinds[layer] == "shared"
    factor = _positive(text, "cli_factor", 1)
    if factor > 1:
        return layer % factor != 0
    pattern = text.get("index_topk_pattern")
    if pattern is not None:
        return layer < len(pattern) and pattern[layer] == "S"
    freq = _positive(text, "index_topk_freq", 1)
    offset = text.get("index_skip_topk_offset")
    if offset is not None:
        return max(layer - _positive(text, "index_skip_topk_offset", 1) + 1, 0) % freq != 0
    return max(layer - 1, 0) % freq != 0


def dsa_fields(arch: str, text: Mapping[str, Any], layers: Iterable[int]) -> dict[str, int]:
    """``ModelGeometry`` keywords of the DSA indexer (``index_head_dim``, ``index_kpool``,
    ``index_shared_layers``), or ``{}`` for a model SGLang does not treat as DSA. ``text`` is
    the text config with its class defaults (SGLang reads ``deepseek_v32`` with DeepSeek-V3's
    class, which has no ``index_topk`` default); ``layers`` are the global ids of the layers
    planned (a pipeline stage's)."""
    if arch not in DSA_ARCHITECTURES or text.get("index_topk") is None:
        return {}
    if text.get("index_kpool_compress"):
        raise ConfigError("config.json: index_kpool_compress keeps per-request index tails beside the "
                          "DSA pool; kvbudget does not model them", "index_kpool_compress")  # fmt: skip
    dim = text.get("index_head_dim")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ConfigError("config.json: a DSA model (index_topk given) needs a positive 'index_head_dim', "
                          f"got {dim!r}", "index_head_dim")  # fmt: skip
    shared = sum(_skips_topk(text, i) for i in layers)
    return {"index_head_dim": dim, "index_kpool": _positive(text, "index_kpool", 1), "index_shared_layers": shared}
