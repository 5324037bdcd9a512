"""The MLA latent and the DSA indexer of a model as SGLang 0.5.23 reads them.

SGLang's ``ModelConfig`` treats a fixed list of architectures as MLA (the
latent ``kv_lora_rank + qk_rope_head_dim`` per token per layer), and among
them treats a model as DSA (DeepSeek-V3.2's sparse attention) when its
architecture is in ``is_deepseek_dsa``'s list *and* its config carries
``index_topk``: every layer then also keeps an index key of ``index_head_dim``
elements (pooled by ``index_kpool``), except the layers that reuse the previous
layer's top-k (``dsa_layer_skips_topk``). This module holds the MLA lists and
the DSA pool's layout rule; the indexer's reading from a config (used by both
engines' readers) is :mod:`kvbudget.models.dsa`, re-exported here.
"""

from __future__ import annotations

from kvbudget.models.dsa import DSA_ARCHITECTURES, DSA_KEYS, dsa_fields

__all__ = ["DSA_ARCHITECTURES", "DSA_KEYS", "MLA_ARCHITECTURES", "MLA_DEFAULT_V_HEAD_DIM", "MLA_IF_USE_MLA",
           "UNCHECKED_MLA_ARCHITECTURES", "dsa_fields", "dsa_raw_kv_layout"]


#: Architectures SGLang 0.5.23 serves with MLA (``_derive_model_shapes``' list) that
#: kvbudget resolves: the latent dims of the text config, one geometry for every layer (LongCat-Flash
#: and HunYuan-V4 read as SGLang's own config classes read them, :mod:`kvbudget.sglang.mla_configs`).
MLA_ARCHITECTURES = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV3ForCausalLMNextN", "DeepseekV32ForCausalLM",
    "Glm4MoeLiteForCausalLM", "Glm4MoeLiteForCausalLMNextN", "GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN",
    "KimiK25ForConditionalGeneration", "KimiLinearForCausalLM",
    "MistralLarge3ForCausalLM", "MistralLarge3ForCausalLMEagle", "Eagle3DeepseekV2ForCausalLM",
    "MiniCPM3ForCausalLM", "HYV4ForCausalLM", "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM",
    "LongcatFlashForCausalLMNextN", "SarvamMLAForCausalLM", "KimiVLForConditionalGeneration", "DotsVLMForCausalLM",
    "DeepseekVL2ForCausalLM",
})  # fmt: skip
#: Of :data:`MLA_ARCHITECTURES`, those whose ``_derive_model_shapes`` branch leaves ``v_head_dim``
#: at its generic default (the config's nonzero ``v_head_dim``, else the head dim).
MLA_DEFAULT_V_HEAD_DIM = frozenset({"MiniCPM3ForCausalLM", "DeepseekVL2ForCausalLM"})
#: Of :data:`MLA_ARCHITECTURES`, those SGLang serves with MLA only where the text config's
#: ``use_mla`` (default true) says so; else as a plain attention model (DeepSeek-VL2-Tiny).
MLA_IF_USE_MLA = frozenset({"DeepseekVL2ForCausalLM"})
#: SGLang's other MLA architectures: their layer counts, SWA latents or state pools differ
#: from the plain reading, and kvbudget has not checked them against SGLang.
#: Some are MLA only on a condition SGLang reads (Pixtral and the Bailing NextN draft: by keys of
#: the config); kvbudget refuses them whole, but reads Bailing V2.5 and V3 where their config is a
#: ``bailing_hybrid`` one (:mod:`kvbudget.sglang.bailing`). ``tests/test_sglang_model.py``
#: holds this set and :data:`MLA_ARCHITECTURES` to the branches of the wheel's ``_derive_model_shapes``.
UNCHECKED_MLA_ARCHITECTURES = frozenset({
    "Glm5NextForConditionalGeneration", "Glm5NextForConditionalGenerationNextN", "Dots3NoteForCausalLM",
    "Dots3NoteForCausalLMNextN", "GigaChat35ForCausalLM", "GigaChat35ForCausalLMNextN",
    "PixtralForConditionalGeneration", "KimiK3LinearForCausalLM",
    "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeForCausalLMNextN",
    "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
})  # fmt: skip


def dsa_raw_kv_layout(prefill_backend: str | None, decode_backend: str | None, disaggregation_mode: str) -> bool:
    """Whether SGLang's DSA pool keeps the raw MLA layout (``calculate_mla_kv_cache_dim`` on
    CUDA): TRT-LLM on the local role's side (either side outside PD), or TileLang on both."""
    trtllm = {"decode": decode_backend == "trtllm", "prefill": prefill_backend == "trtllm"}.get(
        disaggregation_mode, "trtllm" in (prefill_backend, decode_backend))
    return trtllm or prefill_backend == decode_backend == "tilelang"
