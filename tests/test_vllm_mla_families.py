"""``kvbudget.vllm.layers_from_hf_config`` on MiniCPM3, GLM-4.7-Flash (``Glm4MoeLiteForCausalLM``) and
LongCat-Flash (and its n-gram variant), held to vLLM 0.33.0's own classes (:mod:`kvbudget.vllm.mla_families`).

The configs are built by transformers 5.19.0's ``MiniCPM3Config``, ``Glm4MoeLiteConfig`` and
``LongcatFlashConfig`` (their defaults, then seeded layer counts, heads, latent and rope dims; GLM's
``first_k_dense_replace`` / ``moe_layer_freq`` and LongCat's
``mla_scale_q_lora`` / ``mla_scale_kv_lora``, which real checkpoints carry,
present or not; LongCat with ``index_topk``, which vLLM's DSA path refuses there; LongCat's layer count as ``num_layers`` or ``num_hidden_layers``; MiniCPM3 with a
``sliding_window`` or none), saved whole or sparse, each under a seeded TP, PP, model dtype and
``--disable-sliding-window``. The oracle (``tests/vllm_oracle``) builds the decoder with vLLM's own
``MiniCPM3Model`` (over ``MiniCPMModel`` / ``MiniCPMDecoderLayer``), ``Glm4MoeLiteModel`` and
``FlashModel`` / ``FlashNgramModel`` (DeepSeek-V2's ``DeepseekV2MLAAttention`` and vLLM's
``MLAAttention`` / ``Attention``); every layer's name, kind, stage, heads, head sizes and window are
compared, and a refusal on one side only is a mismatch. GLM's DSA indexer (``index_topk``), a config
without ``kv_lora_rank`` and drafters are refused by name (checked below, not differentially: the
oracle does not build the indexer's cache or GLM's MHA path).
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from test_vllm_state_models import _compare, _drop_defaults

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.mla_families import CLASS_DEFAULTS
from kvbudget.vllm.models import ARCHITECTURES, layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_MLA_FAMILY_CASES", "100"))


def _engine(rng: random.Random) -> dict[str, Any]:
    return {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}


def _minicpm3_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    heads = rng.choice([8, 12, 16, 40, 40])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(0, 40), "num_attention_heads": heads,
                          "num_key_value_heads": rng.choice([heads, 1, 4]), "hidden_size": heads * 64,
                          "qk_nope_head_dim": rng.choice([32, 64, 128]), "qk_rope_head_dim": rng.choice([16, 32, 64]),
                          "kv_lora_rank": rng.choice([256, 512]), "q_lora_rank": rng.choice([768, None])}  # fmt: skip
    d = T.MiniCPM3Config(**kw).to_dict()
    if rng.random() < 0.5:
        _drop_defaults(d, T.MiniCPM3Config)
    if rng.random() < 0.2:
        d["sliding_window"] = rng.choice([None, 0, 1024, 4096])
    return {**d, "architectures": ["MiniCPM3ForCausalLM"]}, _engine(rng)


def _glm_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(0, 48)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": rng.choice([20, 16, 32, 12]),
                          "kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([32, 64]),
                          "qk_nope_head_dim": rng.choice([128, 192]), "v_head_dim": rng.choice([128, 256])}  # fmt: skip
    d = T.Glm4MoeLiteConfig(**kw).to_dict()
    if rng.random() < 0.85:  # released GLM-4.7-Flash configs carry it
        d["first_k_dense_replace"] = rng.choice([0, 1, 1, 3, 60])
    if rng.random() < 0.2:
        d["moe_layer_freq"] = rng.choice([1, 2, 0])
    if rng.random() < 0.5:
        _drop_defaults(d, T.Glm4MoeLiteConfig)
    return {**d, "architectures": ["Glm4MoeLiteForCausalLM"]}, _engine(rng)


def _longcat_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    kw: dict[str, Any] = {"num_layers": rng.randint(0, 30), "num_attention_heads": rng.choice([64, 32, 16, 12]),
                          "kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([32, 64]),
                          "q_lora_rank": rng.choice([1536, 768])}  # fmt: skip
    d = T.LongcatFlashConfig(**kw).to_dict()
    if rng.random() < 0.5:
        _drop_defaults(d, T.LongcatFlashConfig)
    for flag in ("mla_scale_q_lora", "mla_scale_kv_lora"):
        if rng.random() < 0.9:  # released LongCat configs carry both
            d[flag] = rng.choice([True, True, False])
    if rng.random() < 0.3:  # the count as num_hidden_layers (its setter halves it), beside num_layers or not
        d["num_hidden_layers"] = rng.randint(0, 60)
        if rng.random() < 0.5:
            d.pop("num_layers", None)
    if rng.random() < 0.1:  # a DSA config: vLLM's indexer asserts on LongCat's two-integer layer names
        d["index_topk"] = 2048
    arch = rng.choice(["LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"])
    return {**d, "architectures": [arch]}, _engine(rng)


@pytest.mark.parametrize("build", [_minicpm3_case, _glm_case, _longcat_case], ids=["minicpm3", "glm4_moe_lite",
                                                                                   "longcat_flash"])  # fmt: skip
def test_mla_families_read_as_vllm_reads_them(build: Any) -> None:
    rng = random.Random(f"vllm-mla-{build.__name__}")
    counts, mismatches = _compare(rng, [build(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM {build.__name__[1:-5]} reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 5 and counts["attention layers"] > 5 * N, counts


def test_class_defaults_are_transformers() -> None:
    """The defaults the reader falls back on are transformers 5.19.0's."""
    for model_type, keys in CLASS_DEFAULTS.items():
        if not keys:  # remote code (Sarvam-MLA): no class of transformers' own (the oracles register stand-ins)
            assert model_type not in T.models.auto.configuration_auto.CONFIG_MAPPING_NAMES, model_type
            continue
        made = T.CONFIG_MAPPING[model_type]()
        assert {k: getattr(made, k) for k in keys} == dict(keys), model_type
    assert {"MiniCPM3ForCausalLM", "Glm4MoeLiteForCausalLM", "LongcatFlashForCausalLM",
            "LongcatFlashNgramForCausalLM", "SarvamMLAForCausalLM"} <= ARCHITECTURES  # fmt: skip


def _refused(cfg: dict[str, Any], **engine: Any) -> str:
    with pytest.raises(InvalidConfigError) as e:
        layers_from_hf_config(cfg, vllm.EngineConfig(**engine))
    return str(e.value)


def test_what_kvbudget_does_not_read_is_refused_by_name() -> None:
    glm = {**T.Glm4MoeLiteConfig(num_hidden_layers=2).to_dict(), "first_k_dense_replace": 1,
           "architectures": ["Glm4MoeLiteForCausalLM"]}  # fmt: skip
    assert len(layers_from_hf_config(glm, vllm.EngineConfig())) == 2
    assert "DSA indexer" in _refused({**glm, "index_topk": 2048})
    assert "without kv_lora_rank" in _refused({**glm, "kv_lora_rank": None})
    assert "drafters" in _refused(glm, speculative_method="mtp", num_speculative_tokens=1)
    longcat = {**T.LongcatFlashConfig(num_layers=2).to_dict(), "mla_scale_q_lora": True, "mla_scale_kv_lora": True,
               "architectures": ["LongcatFlashNgramForCausalLM"]}  # fmt: skip
    assert [x.name for x in layers_from_hf_config(longcat, vllm.EngineConfig())][:2] == [
        "model.layers.0.self_attn.0.attn", "model.layers.0.self_attn.1.attn"]
    assert "V2 model runner" in _refused(longcat, use_v2_model_runner=False)
    assert "should only contain one integer" in _refused({**longcat, "index_topk": 2048})  # vLLM's, not kvbudget's
