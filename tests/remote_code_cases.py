"""Configs of remote-code checkpoints: architectures that transformers 5.19.0 has no config class for
(InternLM2, Baichuan, Qwen-1, DeepSeek-MoE, Orion, MiniCPM, Solar, XVERSE-MoE, Grok-1, Ling /
Bailing MoE, EXAONE 3, Nemotron-NAS, IQuest-Coder-Loop, SDAR, xLLM / K2 Horizon, Sarvam); neither
engine ships one, but SGLang for EXAONE 3 (a copy) and xLLM / K2 Horizon (thin classes).

Both engines load them with ``--trust-remote-code``: the checkpoint's own ``configuration_*.py``,
named by the ``auto_map`` its ``config.json`` carries. That code is the checkpoint's, not the
engine's, and is not here. Each builder writes the file as ``save_pretrained`` leaves it (every key
its class sets, seeded where checkpoints vary) with its ``auto_map``; the oracles stand in for the
remote class with a ``PretrainedConfig`` subclass of that ``model_type``
(``oracle_kit.remote_code``), whose attributes are the file's keys: what the remote class's instance
holds for every key the file holds. The ``model_type`` is the one an engine names where one does
(SGLang's own classes for ``exaone``, ``xllm``, ``k2_horizon``), else the family's; neither engine's
reading of these depends on it beyond picking the class. What the engines then do with it (SGLang's
``ModelConfig``, vLLM's model classes) is their released code, run.

Not here: Ling 2.5 (``BailingMoeV2_5ForCausalLM``: lightning-attention state).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from sglang_model_cases import Built, _gqa

_Builder = Callable[[random.Random], Built]


def _auto_map(module: str, config: str, model: str) -> dict[str, str]:
    modeling = f"modeling_{module.removeprefix('configuration_')}"
    return {"AutoConfig": f"{module}.{config}", "AutoModelForCausalLM": f"{modeling}.{model}"}


def _file(rng: random.Random, arch: str, model_type: str, module: str, config: str, *, kv: bool = True,
          **keys: Any) -> Built:  # fmt: skip
    g = _gqa(rng)
    g.pop("head_dim", None)  # these classes size heads as hidden_size // num_attention_heads
    if not kv:
        del g["num_key_value_heads"]
    saved = {"model_type": model_type, **g, "intermediate_size": 4 * g["hidden_size"], "vocab_size": 32000,
             "max_position_embeddings": rng.choice([4096, 32768]), "torch_dtype": "bfloat16",
             "tie_word_embeddings": False, "rope_scaling": None, "auto_map": _auto_map(module, config, arch),
             **keys}  # fmt: skip
    return Built(None, arch, saved)


def _simple(arch: str, model_type: str, module: str, config: str, kv: bool = True, **keys: Any) -> _Builder:
    """A decoder whose attention is ``num_attention_heads`` queries over ``num_key_value_heads``
    (or, ``kv`` off, as many) heads of ``hidden_size // num_attention_heads``."""
    return lambda rng: _file(rng, arch, model_type, module, config, kv=kv, rms_norm_eps=1e-6, hidden_act="silu",
                             rope_theta=rng.choice([10000.0, 1e6]), **keys)  # fmt: skip


def _qwen(rng: random.Random) -> Built:
    """Qwen-1 (``QWenLMHeadModel``): multi-head attention, ``kv_channels`` per head."""
    built = _file(rng, "QWenLMHeadModel", "qwen", "configuration_qwen", "QWenConfig", kv=False,
                  layer_norm_epsilon=1e-6, rotary_emb_base=10000, seq_length=8192, use_flash_attn="auto")  # fmt: skip
    saved = dict(built.extra)
    saved["kv_channels"] = saved["hidden_size"] // saved["num_attention_heads"]
    return built._replace(extra=saved)


def _bailing(arch: str, model_type: str = "bailing_moe") -> _Builder:
    """Ling / Bailing MoE (v1 and 2.0): ``head_dim`` given, partial rotary, MoE keys, and the
    2.0 checkpoints' ``num_nextn_predict_layers`` (their MTP layer, served as a draft)."""

    def build(rng: random.Random) -> Built:
        n = rng.randint(1, 48)
        extra = {"head_dim": rng.choice([64, 128]), "num_hidden_layers": n, "first_k_dense_replace": rng.randint(0, 1),
                 "num_experts": rng.choice([64, 256]), "num_experts_per_tok": 8, "num_shared_experts": 1,
                 "moe_intermediate_size": 512, "norm_topk_prob": True, "use_qkv_bias": False, "use_bias": False,
                 "partial_rotary_factor": rng.choice([0.5, 1.0]), "num_nextn_predict_layers": rng.choice([0, 1]),
                 "rms_norm_eps": 1e-6, "hidden_act": "silu", "rope_theta": 600000.0, "embedding_dropout": 0.0,
                 "use_qk_norm": rng.random() < 0.5, "use_rmsnorm": True}  # fmt: skip
        return _file(rng, arch, model_type, f"configuration_{model_type}", "BailingMoeConfig", **extra)

    return build


def _exaone(rng: random.Random) -> Built:
    """EXAONE 3 / 3.5 (``ExaoneForCausalLM``): ``num_layers``, which its class maps
    ``num_hidden_layers`` to (SGLang registers its own ``ExaoneConfig`` for the type)."""
    built = _file(rng, "ExaoneForCausalLM", "exaone", "configuration_exaone", "ExaoneConfig",
                  activation_function="silu", layer_norm_epsilon=1e-5, rope_theta=1e6)  # fmt: skip
    saved = dict(built.extra)
    saved["num_layers"] = saved.pop("num_hidden_layers")
    return built._replace(extra=saved)


def _decilm(rng: random.Random) -> Built:
    """Nemotron-NAS (``DeciLMForCausalLM``: Llama-3.1/3.3-Nemotron Super and Ultra): per layer a
    ``block_configs`` entry whose attention is a no-op or ``n_heads_in_group`` query heads per KV
    head; one group size for every attention layer, or (sometimes) several (variable GQA)."""
    built = _file(rng, "DeciLMForCausalLM", "nemotron-nas", "configuration_decilm", "DeciLMConfig", kv=False,
                  rms_norm_eps=1e-5, hidden_act="silu", rope_theta=500000.0)  # fmt: skip
    saved = dict(built.extra)
    heads, n = saved["num_attention_heads"], saved["num_hidden_layers"]
    groups = [g for g in (1, 2, 4, 8, 16) if heads % g == 0]
    sizes = rng.sample(groups, 2) if rng.random() < 0.2 and len(groups) > 1 else [rng.choice(groups)]
    saved["block_configs"] = [
        {"attention": {"no_op": no_op, "replace_with_linear": False,
                       "n_heads_in_group": None if no_op else rng.choice(sizes),
                       "sparsify": None, "window_length": None, "num_sink_tokens": None, "unshifted_sink": False,
                       "use_prefill_window_in_sink_attention": False},
         "ffn": {"no_op": False, "replace_with_linear": False, "ffn_mult": 1.3, "sparsify": None}}
        for no_op in (rng.random() < 0.2 for _ in range(n))]  # fmt: skip
    return built._replace(extra=saved)


def _loop_coder(rng: random.Random) -> Built:
    """IQuest-Coder's loop variant: ``loop_num`` passes over the decoder layers (SGLang's
    ``ModelConfig`` counts ``num_hidden_layers * loop_num`` attention layers)."""
    return _simple("IQuestLoopCoderForCausalLM", "iquestloopcoder", "configuration_iquestloopcoder",
                   "IQuestLoopCoderConfig", loop_num=rng.choice([1, 2, 3]))(rng)  # fmt: skip


def _qwen3_like(arch: str, model_type: str, module: str, config: str, **keys: Any) -> _Builder:
    """A Qwen3-style decoder (``head_dim`` given, QK norm)."""

    def build(rng: random.Random) -> Built:
        built = _simple(arch, model_type, module, config, **keys)(rng)
        return built._replace(extra={**built.extra, "head_dim": rng.choice([64, 128])})

    return build


def _step1(rng: random.Random) -> Built:
    """Step1 (``Step1ForCausalLM``: Step-Audio-EditX's 3B decoder, ``model_type`` ``step1``): ALiBi
    attention whose KV heads are ``num_attention_groups`` (4 in the released file), the context
    ``max_seq_len``; some files name the KV heads ``num_key_value_heads`` instead, or neither."""
    built = _file(rng, "Step1ForCausalLM", "step1", "configuration_step1", "Step1Config", rms_norm_eps=1e-5,
                  max_seq_len=32768)  # fmt: skip
    saved = dict(built.extra)
    del saved["max_position_embeddings"]
    kv = saved.pop("num_key_value_heads")
    key = rng.choices(["num_attention_groups", "num_key_value_heads", None], [6, 2, 1])[0]
    if key is not None:
        saved[key] = kv
    return built._replace(extra=saved)


def _sarvam_mla(rng: random.Random) -> Built:
    """Sarvam's MLA MoE (``SarvamMLAForCausalLM``): DeepSeek-style latent attention keys."""
    built = _simple("SarvamMLAForCausalLM", "sarvam_mla", "configuration_sarvam_mla", "SarvamMLAConfig",
                    num_experts=128, num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=1024)(rng)
    mla = {"kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([32, 64]),
           "qk_nope_head_dim": rng.choice([64, 128]), "v_head_dim": rng.choice([64, 128]), "q_lora_rank": None}
    return built._replace(extra={**built.extra, **mla})


REMOTE_CODE: dict[str, _Builder] = {
    "internlm2": _simple("InternLM2ForCausalLM", "internlm2", "configuration_internlm2", "InternLM2Config", bias=False),
    "baichuan": _simple("BaichuanForCausalLM", "baichuan", "configuration_baichuan", "BaichuanConfig", kv=False,
                        model_max_length=4096),
    "qwen": _qwen,
    "deepseek": _simple("DeepseekForCausalLM", "deepseek", "configuration_deepseek", "DeepseekConfig",
                        first_k_dense_replace=1, moe_layer_freq=1, n_routed_experts=64, n_shared_experts=2,
                        num_experts_per_tok=6, moe_intermediate_size=1408, norm_topk_prob=False),
    "orion": _simple("OrionForCausalLM", "orion", "configuration_orion", "OrionConfig"),
    "minicpm": _simple("MiniCPMForCausalLM", "minicpm", "configuration_minicpm", "MiniCPMConfig",
                       scale_emb=12, dim_model_base=256, scale_depth=1.4),
    "solar": _simple("SolarForCausalLM", "solar", "configuration_solar", "SolarConfig",
                     bskcn_1=[12, 20, 32, 44], bskcn_2=[20, 32], bskcn_3=[16, 24, 36, 48], bskcn_4=[28, 40],
                     bskcn_tv=[0.9, 0.8]),
    "xverse_moe": _simple("XverseMoeForCausalLM", "xverse", "configuration_xverse", "XverseConfig",
                          num_experts=64, moe_top_k=6, num_shared_experts=2),
    "grok1": _simple("Grok1ForCausalLM", "grok-1", "configuration_grok1", "Grok1Config", num_local_experts=8,
                     num_experts_per_tok=2, embedding_multiplier_scale=78.38, output_multiplier_scale=0.577),
    "grok1_model": _simple("Grok1ModelForCausalLM", "grok-1", "configuration_grok1", "Grok1Config",
                           num_local_experts=8, num_experts_per_tok=2),
    "bailing_v1": _bailing("BailingMoeForCausalLM"),
    "bailing_v1_upper": _bailing("BailingMoEForCausalLM"),
    "bailing_v2": _bailing("BailingMoeV2ForCausalLM"),
    "exaone": _exaone,
    "decilm": _decilm,
    "iquest_loopcoder": _loop_coder,
    "sdar": _qwen3_like("SDARForCausalLM", "sdar", "configuration_sdar", "SDARConfig"),
    "sdar_moe": _qwen3_like("SDARMoeForCausalLM", "sdar_moe", "configuration_sdar_moe", "SDARMoeConfig",
                            num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=True),
    # SGLang loads these two with its own thin classes (configs/k2_horizon.py), the file's keys as attributes
    "xllm": _simple("XllmForCausalLM", "xllm", "configuration_xllm", "XllmConfig", num_values=0),
    "k2_horizon": _simple("K2HorizonForCausalLM", "k2_horizon", "configuration_k2_horizon", "K2HorizonConfig",
                          num_values=4, num_values_per_tok=2, apply_attn_gate=True),
    "sarvam_mla": _sarvam_mla,
    "sarvam_moe": _bailing("SarvamMoEForCausalLM", "sarvam_moe"),  # SGLang's class is its Bailing MoE one
    "step1": _step1,
}
#: The families only vLLM 0.33.0 serves (SGLang 0.5.23's registry has none of their architectures).
VLLM_ONLY: frozenset[str] = frozenset({"step1"})
