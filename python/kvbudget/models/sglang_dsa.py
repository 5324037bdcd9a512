"""The MLA latent and the DSA indexer of a model as SGLang 0.5.23 reads them.

SGLang's ``ModelConfig`` treats a fixed list of architectures as MLA (the
latent ``kv_lora_rank + qk_rope_head_dim`` per token per layer), and among
them treats a model as DSA (DeepSeek-V3.2's sparse attention) when its
architecture is in ``is_deepseek_dsa``'s list *and* its config carries
``index_topk``: every layer then also keeps an index key of ``index_head_dim``
elements (pooled by ``index_kpool``), except the layers that reuse the previous
layer's top-k (``dsa_layer_skips_topk``). This module holds those two lists
and that rule, written for kvbudget from SGLang's behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kvbudget.models.hf import ConfigError

__all__ = ["DSA_ARCHITECTURES", "DSA_KEYS", "MLA_ARCHITECTURES", "UNCHECKED_MLA_ARCHITECTURES", "dsa_fields",
           "dsa_raw_kv_layout"]

#: The config keys the DSA reading uses.
DSA_KEYS = ("index_topk", "index_head_dim", "index_kpool", "index_kpool_compress", "indexer_types", "cli_factor",
            "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset")  # fmt: skip

#: Architectures SGLang 0.5.23 serves with MLA (``_derive_model_shapes``' list) that
#: kvbudget resolves: the latent dims of the text config, one geometry for every layer.
MLA_ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN", "DeepseekV32ForCausalLM",
    "Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "KimiK25ForConditionalGeneration", "KimiLinearForCausalLM",
    "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle", "Eagle3DeepseekV2ForCausalLM",
})  # fmt: skip
#: SGLang's other MLA architectures: their layer counts, SWA latents or state pools differ
#: from the plain reading, and kvbudget has not checked them against SGLang.
UNCHECKED_MLA_ARCHITECTURES = frozenset({
    "Glm5NextForConditionalGeneration", "Glm5NextForConditionalGenerationNextN", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "DotsVLMForCausalLM",
    "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN", "GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN",
    "PixtralForConditionalGeneration",
})  # fmt: skip
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


def dsa_raw_kv_layout(prefill_backend: str | None, decode_backend: str | None, disaggregation_mode: str) -> bool:
    """Whether SGLang's DSA pool keeps the raw MLA layout (``calculate_mla_kv_cache_dim`` on
    CUDA): TRT-LLM on the local role's side (either side outside PD), or TileLang on both."""
    trtllm = {"decode": decode_backend == "trtllm", "prefill": prefill_backend == "trtllm"}.get(
        disaggregation_mode, "trtllm" in (prefill_backend, decode_backend))
    return trtllm or prefill_backend == decode_backend == "tilelang"
