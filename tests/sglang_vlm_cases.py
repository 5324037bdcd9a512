"""The model-resolution differential's multimodal wrappers that SGLang 0.5.23 reads with its own
config classes, or reads a text config of elsewhere than ``text_config``
(``sglang_model_cases.FAMILIES``): Kimi-VL, dots.vlm1, InternVL, DeepSeek-VL2, and LLaVA-NeXT /
OneVision's flat files."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import transformers as T

if TYPE_CHECKING:
    from sglang_model_cases import Built

__all__ = ["deepseek_vl2", "dots_vlm", "internvl", "kimi_vl", "llava_flat"]


def kimi_vl(rng: random.Random) -> Built:
    """Kimi-VL: SGLang's own ``KimiVLConfig`` (transformers has none) around its DeepSeek-V2 MLA
    text config (SGLang's copy of ``DeepseekV2Config``)."""
    from sglang_model_cases import Built, _mla, _sglang_config_class

    # Released checkpoints are MoE (transformers' DeepseekV2Config, which vLLM loads it with, refuses
    # a null n_routed_experts).
    text = {**_mla(rng, rng.randint(1, 48)), "num_attention_heads": rng.choice([16, 32, 64]),
            "first_k_dense_replace": rng.choice([0, 1]), "n_routed_experts": rng.choice([8, 64]),
            "n_shared_experts": rng.choice([1, 2]), "num_experts_per_tok": rng.choice([2, 6])}  # fmt: skip
    return Built(_sglang_config_class("KimiVLConfig")(text_config=text), "KimiVLForConditionalGeneration")


def dots_vlm(rng: random.Random) -> Built:
    """dots.vlm1: SGLang's own ``DotsVLMConfig``, which builds its ``language_config`` (SGLang's copy
    of ``DeepseekV2Config``) from the file's own keys, as a checkpoint holds them."""
    from sglang_model_cases import Built, _mla, _sglang_config_class

    flat = {**_mla(rng, rng.randint(1, 61)), "num_attention_heads": rng.choice([16, 64, 128])}
    flat = {k: x for k, x in flat.items() if rng.random() < 0.8}  # a key left out: the text class's default
    return Built(_sglang_config_class("DotsVLMConfig")(**flat), "DotsVLMForCausalLM")


def internvl(rng: random.Random) -> Built:
    """InternVL 2.5 / 3 / 3.5 (``InternVLChatModel``): SGLang's own ``InternVLChatConfig`` around
    its ``llm_config``, built by the class that config's architecture names; saved whole, as the
    class's ``to_dict`` writes the nested configs (released checkpoints hold them so)."""
    from sglang_model_cases import Built, _sglang_config_class

    arch = rng.choice(["InternLM2ForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                       "LlamaForCausalLM"])  # fmt: skip
    heads = rng.choice([16, 28, 32, 40])
    llm: dict[str, Any] = {"architectures": [arch], "num_hidden_layers": rng.randint(1, 64), "num_attention_heads": heads,
                           "num_key_value_heads": rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0]),
                           "hidden_size": heads * rng.choice([64, 128])}  # fmt: skip
    if arch.startswith("Qwen3") and rng.random() < 0.5:
        llm["head_dim"] = rng.choice([64, 128, 256])
    saved = _sglang_config_class("InternVLChatConfig")(llm_config=llm).to_dict()
    return Built(None, "InternVLChatModel", saved)


def deepseek_vl2(rng: random.Random) -> Built:
    """DeepSeek-VL2: SGLang's own ``DeepseekVL2Config`` around its ``language_config`` (SGLang's
    copy of ``DeepseekV2Config``): MLA, or plain attention where ``use_mla`` is false (the Tiny)."""
    from sglang_model_cases import Built, _mla, _sglang_config_class

    text = {**_mla(rng, rng.randint(1, 30)), "num_attention_heads": rng.choice([10, 16, 32]),
            "hidden_size": rng.choice([1280, 2048, 2560])}  # fmt: skip
    if rng.random() < 0.3:
        text.update(use_mla=False, num_key_value_heads=text["num_attention_heads"])
    if rng.random() < 0.3:
        del text["v_head_dim"]  # the generic default: the config's own, else the head dim
    return Built(_sglang_config_class("DeepseekVL2Config")(language_config=text), "DeepseekVL2ForCausalLM")


def llava_flat(rng: random.Random) -> Built:
    """LLaVA-NeXT / OneVision (SGLang's ``Llava*ForCausalLM``): transformers' ``LlavaConfig`` with
    the language model's keys flat in the file, which SGLang reads as the text config (the nested
    default ``text_config`` unused); MHA checkpoints leave ``num_key_value_heads`` out."""
    from sglang_model_cases import Built

    heads = rng.choice([28, 32, 40, 64])
    flat: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 80), "num_attention_heads": heads,
                            "hidden_size": heads * 128, "num_key_value_heads": rng.choice([4, 8, heads]),
                            "vocab_size": rng.choice([32000, 151646])}  # fmt: skip
    if rng.random() < 0.3:
        del flat["num_key_value_heads"]
    arch = rng.choice(["LlavaLlamaForCausalLM", "LlavaMistralForCausalLM", "LlavaQwenForCausalLM",
                       "LlavaVidForCausalLM"])  # fmt: skip
    return Built(T.LlavaConfig(**flat), arch)
