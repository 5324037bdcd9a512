"""The hybrid-state families of the model-resolution differential (``sglang_model_cases.FAMILIES``):
Qwen3-Next and Qwen3.5 (dense, MoE), Kimi-Linear, LFM2 (dense, MoE, VL), Nemotron-H, Falcon-H1, Granite-4.0-H, ZAYA1,
Inkling, the Bailing hybrids (Ling 2.5, Ling 3) and the
pure state models (Mamba-1, Falcon-Mamba, Mamba-2), built by transformers 5.19.0's classes (or as
their checkpoints hold them) with the keys released checkpoints carry. The shared builders
(``Built``, ``_gqa``, ``_text``, ``_multimodal``) are ``sglang_model_cases``', imported when a
builder runs (that module imports this one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import transformers as T

if TYPE_CHECKING:
    from sglang_model_cases import Built


def _gqa(rng: random.Random) -> dict[str, Any]:
    from sglang_model_cases import _gqa as gqa

    return gqa(rng)


def _text(cls: Any, arch: str, **kw: Any) -> Built:
    from sglang_model_cases import _text as text

    return text(cls, arch, **kw)


def _multimodal(cls: Any, arch: str, text: dict[str, Any]) -> Built:
    from sglang_model_cases import _multimodal as multimodal

    return multimodal(cls, arch, text)


def _built(config: Any, arch: str, extra: Any = None) -> Built:
    from sglang_model_cases import Built

    return Built(config, arch) if extra is None else Built(config, arch, extra)


def _qwen3_next(rng: random.Random) -> Built:
    kw = _gqa(rng)
    # Checkpoints carry the interval; transformers' classes drop it, so it goes in as the file's key.
    interval = {"full_attention_interval": rng.choice([2, 4, 8])} if rng.random() < 0.8 else {}
    if rng.random() < 0.5:
        return _built(T.Qwen3NextConfig(**kw), "Qwen3NextForCausalLM", interval)
    if rng.random() < 0.5:
        saved = T.Qwen3_5Config(text_config=kw).to_dict()
        saved["text_config"].update(interval)
        return _built(None, "Qwen3_5ForConditionalGeneration", saved)
    return _built(T.Qwen3_5TextConfig(**kw), "Qwen3_5ForCausalLM", interval)


def _qwen3_5_moe(rng: random.Random) -> Built:
    """Qwen3.5's MoE classes (Qwen3.5-122B-A10B, -397B-A17B): the causal LM or the multimodal
    model, the interval as checkpoints carry it."""
    kw = _gqa(rng)
    interval = {"full_attention_interval": rng.choice([2, 4, 8])} if rng.random() < 0.8 else {}
    if rng.random() < 0.5:
        saved = T.Qwen3_5MoeConfig(text_config=kw).to_dict()
        saved["text_config"].update(interval)
        return _built(None, "Qwen3_5MoeForConditionalGeneration", saved)
    return _built(T.Qwen3_5MoeTextConfig(**kw), "Qwen3_5MoeForCausalLM", interval)


def _kimi_linear(rng: random.Random) -> Built:
    n = rng.randint(2, 48)
    kw: dict[str, Any] = {"num_hidden_layers": n, "kv_lora_rank": rng.choice([256, 512]),
                          "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}  # fmt: skip
    if rng.random() < 0.8:  # 1-based layer numbers, as Kimi-Linear checkpoints give them
        kda = sorted(rng.sample(range(1, n + 1), rng.randint(0, n - 1)))
        kw["linear_attn_config"] = {"kda_layers": kda, "full_attn_layers": [i for i in range(1, n + 1) if i not in kda],
                                    "num_heads": 32, "head_dim": 128, "short_conv_kernel_size": 4}  # fmt: skip
    if rng.random() < 0.8:  # as Kimi-Linear's checkpoints give it (vLLM's MLA layers are NoPE-only)
        kw["mla_use_nope"] = True
    return _text(T.KimiLinearConfig, "KimiLinearForCausalLM", **kw)


#: Keys LFM2's released files carry that transformers' class does not write and vLLM's class reads
#: (LFM2-1.2B's values, the conv widths the hidden size: ``kvbudget.models.hybrid_state``'s entry).
_LFM2_FILE = {"block_ff_dim": 12288, "block_multiple_of": 256, "block_ffn_dim_multiplier": 1.0,
              "block_auto_adjust_ff_dim": True, "conv_bias": False}  # fmt: skip


def _lfm2(rng: random.Random) -> Built:
    kw = _gqa(rng)
    kw["layer_types"] = ["full_attention" if rng.random() < 0.4 else "conv" for _ in range(kw["num_hidden_layers"])]
    built = _text(T.Lfm2Config, "Lfm2ForCausalLM", **kw)
    if rng.random() < 0.7:  # the checkpoint's own keys
        hidden = kw["hidden_size"]
        built = built._replace(extra={**_LFM2_FILE, "block_dim": hidden, "conv_dim": hidden, "conv_dim_out": hidden})
    return built


def _nemotron_h(rng: random.Random) -> Built:
    """Nemotron-H as its checkpoints hold it (``hybrid_override_pattern``: ``M`` Mamba, ``*``
    attention, ``-`` MLP, ``E`` MoE), which SGLang's own config class loads. (Not re-saved by
    transformers 5.19.0's class: that saves no ``num_hidden_layers`` and names the kinds
    ``linear_attention`` / ``full_attention``, which SGLang's class does not read.)"""
    kw = {**_gqa(rng), "n_groups": rng.choice([1, 8]), "mamba_num_heads": 128, "mamba_head_dim": 64}
    n = kw["num_hidden_layers"]
    pattern = "".join(rng.choice("MM*-E") for _ in range(n))
    return _built(None, "NemotronHForCausalLM", {"model_type": "nemotron_h", **kw, "hybrid_override_pattern": pattern})


def _falcon_h1(rng: random.Random) -> Built:
    return _text(T.FalconH1Config, "FalconH1ForCausalLM", **_gqa(rng))


def _pure_ssm(cls: Any, arch: str) -> Callable[[random.Random], Built]:
    """A pure state model (Mamba-1, Falcon-Mamba, Mamba-2): no attention layer; some files carry
    stray attention keys (``head_dim``, KV heads), which SGLang's ``ModelConfig`` still reads."""

    def build(rng: random.Random) -> Built:
        kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 64), "hidden_size": rng.choice([768, 2048, 4096])}
        if cls is T.Mamba2Config:  # its class checks hidden_size * expand == num_heads * head_dim
            kw["head_dim"] = rng.choice([64, 128])
            kw["num_heads"] = kw["hidden_size"] * 2 // kw["head_dim"]
        elif rng.random() < 0.3:
            kw["head_dim"] = rng.choice([64, 128])
        extra = {rng.choice(["num_key_value_heads", "num_kv_heads", "n_head_kv"]): rng.choice([1, 8])} \
            if rng.random() < 0.2 else {}
        built = cls(**kw)
        return _built(built, arch, extra)

    return build


def _granite_hybrid(rng: random.Random) -> Built:
    kw = _gqa(rng)
    names = rng.choice([("mamba", "attention"), ("linear_attention", "full_attention")])
    kw["layer_types"] = [names[rng.random() < 0.2] for _ in range(kw["num_hidden_layers"])]
    return _text(T.GraniteMoeHybridConfig, "GraniteMoeHybridForCausalLM", **kw)


def _lfm2_moe(rng: random.Random) -> Built:
    kw = _gqa(rng)
    n = kw["num_hidden_layers"]
    kw.update(num_dense_layers=min(2, n), layer_types=["full_attention" if rng.random() < 0.4 else "conv"
                                                       for _ in range(n)])  # fmt: skip
    return _text(T.Lfm2MoeConfig, "Lfm2MoeForCausalLM", **kw)


def _lfm2_vl(rng: random.Random) -> Built:
    """LFM2-VL: an LFM2 or LFM2-MoE text config in transformers' wrapper; some files without the
    text ``layer_types`` (LFM2: its class derives them from ``full_attn_idxs``; LFM2-MoE: SGLang's
    LFM2-VL class enumerates the null list and fails)."""
    built = _multimodal(T.Lfm2VlConfig, "Lfm2VlForConditionalGeneration",
                        (_lfm2 if rng.random() < 0.7 else _lfm2_moe)(rng).config.to_dict())  # fmt: skip
    if rng.random() < 0.7:
        return built
    saved = built.saved(False)
    n = saved["text_config"]["num_hidden_layers"]
    saved["text_config"].update(layer_types=None, full_attn_idxs=sorted(rng.sample(range(n), rng.randint(0, n))))
    return _built(None, built.arch, saved)


def _inkling(rng: random.Random) -> Built:
    """Inkling, as its checkpoint holds it (``inkling_mm_model`` around an ``inkling_model`` text
    config, which SGLang loads with its own classes; sometimes the text config alone, which SGLang's
    model class fails on): ``local_layer_ids`` the sliding-window layers (some or none), the SWA
    heads and head dim given or left to the class (the full side's), the sconv kernel, keys left out
    to the class defaults. (Written as a file: executing SGLang's module here would register its
    classes with ``AutoConfig`` a second time.)"""
    g = _gqa(rng)
    n = g["num_hidden_layers"]
    text: dict[str, Any] = {
        "model_type": "inkling_model", **g, "local_layer_ids": sorted(rng.sample(range(n), rng.randint(0, n))),
        "sliding_window_size": rng.choice([512, 1024, 4096]), "sconv_kernel_size": rng.choice([2, 4, 4]),
        "use_sconv": True, "num_nextn_predict_layers": rng.choice([0, 1, 8]), "vocab_size": 201024,
        "swa_num_key_value_heads": rng.choice([None, 1, 2, 4, 8]), "swa_head_dim": rng.choice([None, 64, 128]),
        "n_shared_experts": rng.choice([1, 2]), "shared_expert_sink": True,  # the served checkpoint's router
    }  # fmt: skip
    for key in ("head_dim", "swa_num_key_value_heads", "swa_head_dim", "sliding_window_size", "sconv_kernel_size",
                "hidden_size", "num_key_value_heads"):
        if rng.random() < 0.15:
            text.pop(key, None)  # the class default
    if rng.random() < 0.1:
        return _built(None, "InklingForConditionalGeneration", text)
    return _built(None, "InklingForConditionalGeneration", {"model_type": "inkling_mm_model", "text_config": text})


def _zaya(rng: random.Random) -> Built:
    """ZAYA1, which SGLang loads with its own ``ZayaConfig``: as transformers' class saves it (no
    ``num_query_groups``: SGLang's default 2 must equal the KV heads), as the released Megatron-style
    file holds it (``zaya_layers`` alternating attention and MoE, per-layer head lists, ``kv_channels``),
    or left to SGLang's class defaults. (Not built with SGLang's class here: executing its module
    again would register a second ``ZayaConfig`` with ``AutoConfig``, which the oracle's
    ``mambaish_config`` would not recognise.)"""
    heads, kv = rng.choice([8, 16]), rng.choice([1, 2, 2, 4])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 40), "num_attention_heads": heads,
                          "num_key_value_heads": kv, "head_dim": rng.choice([64, 128]),
                          "hidden_size": rng.choice([1024, 2048]), "cca_time0": rng.choice([1, 2, 3])}  # fmt: skip
    if rng.random() < 0.4:
        return _text(T.ZayaConfig, "ZayaForCausalLM", **kw)
    if rng.random() < 0.1:  # SGLang's class defaults: 80 layers, 8 heads, 2 KV heads of 128
        return _built(None, "ZayaForCausalLM", {"model_type": "zaya"})
    pairs = rng.randint(1, 40)
    released: dict[str, Any] = {**kw, "model_type": "zaya", "zaya_layers": ["a", 16] * pairs + ["a"] * rng.randint(0, 1)}
    if rng.random() < 0.1:  # attention at odd layers too: the KV pool holds them, the model builds none
        released["zaya_layers"] = ["a"] * len(released["zaya_layers"])
    if rng.random() < 0.6:
        released.update(cca_num_q_heads=[heads, 0] * pairs, num_query_groups_list=[kv, 0] * pairs)
    else:
        released["num_query_groups"] = rng.choice([kv, kv, kv, 2])
    if rng.random() < 0.4:
        released.update(head_dim=None, kv_channels=rng.choice([64, 128]))
    return _built(None, "ZayaForCausalLM", released)


def _bailing_hybrid(rng: random.Random) -> Built:
    """Ling 2.5 (lightning attention) and Ling 3 (KDA: ``short_conv_kernel_size`` set), which
    SGLang loads with its own ``BailingHybridConfig``: MLA full-attention layers every
    ``layer_group_size``-th layer, or where a per-layer list holds no ``1``; some keys left to the
    class defaults, a null ``head_dim`` (derived), and V3's NoPE MLA. (Written as a file, as
    checkpoints hold it.)"""
    n = rng.randint(1, 40)
    heads = rng.choice([16, 32, 64])
    d: dict[str, Any] = {
        "model_type": "bailing_hybrid", "num_hidden_layers": n, "num_attention_heads": heads,
        "num_key_value_heads": rng.choice([4, heads]), "hidden_size": rng.choice([2048, 4096, 8192]),
        "head_dim": rng.choice([128, 128, 64, None]), "kv_lora_rank": rng.choice([256, 512]),
        "qk_rope_head_dim": rng.choice([32, 64]), "qk_nope_head_dim": rng.choice([64, 128]),
        "v_head_dim": rng.choice([64, 128]), "layer_group_size": rng.choice([2, 4, 8, 8, n + 1]),
    }  # fmt: skip
    if rng.random() < 0.3:  # a per-layer schedule (1: linear attention); rarely of the wrong length
        d["layer_group_size"] = [int(rng.random() < 0.75) for _ in range(n + (rng.random() < 0.05))]
    if rng.random() < 0.5:
        d["short_conv_kernel_size"] = rng.choice([4, 4, 3])
    if rng.random() < 0.5:
        d["use_mla_nope"] = rng.random() < 0.7
    for key in ("head_dim", "num_hidden_layers", "num_attention_heads", "kv_lora_rank", "v_head_dim",
                "qk_rope_head_dim", "layer_group_size"):
        if rng.random() < 0.1:
            d.pop(key)  # the class default
    return _built(None, rng.choice(["BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM"]), d)
