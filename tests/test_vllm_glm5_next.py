"""``kvbudget.vllm.glm5_next`` (``Glm5NextForConditionalGeneration``, ``Glm5NextForCausalLM``), held to
vLLM 0.33.0's own reading.

The configs are built by transformers 5.19.0's ``Glm5NextConfig`` / ``Glm5NextTextConfig`` (the classes vLLM
loads them with, and the census's) on seeded layer counts and kinds, heads, KDA geometry, kpool, index
heads, MLP kinds, activation and the keys released checkpoints carry that the classes do not write
(``mhc``, ``mla_use_nope``, ``indexer_rope_interleave``, ``topk_method``, ``scoring_func``: each sometimes
left out), under a seeded TP, block size, model dtype and state dtypes. The oracle
(``tests/vllm_oracle/_hf_tables_glm5_next.py``) loads each with transformers' class and builds vLLM's
``Glm5NextModel`` from the wheel, recording each layer's spec. Every layer's name, kind, heads, head sizes,
block size, ``tokens_per_state``, state shapes and dtypes are compared, and the KDA layers' FlashKDA
checkpoint alignment; a refusal on one side only is a mismatch. ``KVBUDGET_VLLM_GLM5_NEXT_CASES`` sets
the count.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError
from vllm_oracle._hf_lift import VllmLoadError
from vllm_differential import Case, compare_readings
from vllm_oracle._hf_tables_glm5_next import glm5_next_layers

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.glm5_next import (GLM5_NEXT, GLM5_NEXT_TEXT, glm5_next_kv_cache_layout, glm5_next_registered_layers,
                                     kda_prefill_checkpoint_alignment)  # fmt: skip
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_GLM5_NEXT_CASES", "200"))
#: The keys released checkpoints carry that transformers' class does not write (vLLM reads them).
EXTRA = {"mhc": True, "mla_use_nope": True, "indexer_rope_interleave": True, "topk_method": "noaux_tc",
         "scoring_func": "sigmoid"}  # fmt: skip
PLAIN = {"tp": 1, "block_size": 16, "kv_cache_dtype": "auto", "model_dtype": "bfloat16", "mamba_cache_dtype": "auto",
         "mamba_ssm_cache_dtype": "auto"}  # fmt: skip


def _text_kw(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 12)
    heads = rng.choice([8, 16, 32, 12])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "num_key_value_heads": heads,
                          "hidden_size": rng.choice([1024, 2048]), "linear_num_heads": rng.choice([8, 16, 12]),
                          "linear_head_dim": rng.choice([64, 128, 128]), "linear_conv_kernel_dim": rng.choice([3, 4]),
                          "index_kpool": (kpool := rng.choice([1, 2, 4, 16, 16, 16, 32])), "index_topk": kpool * 64,
                          "index_head_dim": rng.choice([64, 128, 128, 256]), "kv_lora_rank": rng.choice([256, 512]),
                          "hidden_act": "silu" if rng.random() < 0.95 else "gelu"}  # fmt: skip
    if rng.random() < 0.05:
        kw["linear_lower_bound"] = None
    if rng.random() < 0.05:
        kw["index_kpool_always_select_tail"] = False
    if rng.random() < 0.5:
        kw["layer_types"] = [rng.choice(["linear_attention", "indexed_attention", "full_attention"]) for _ in range(n)]
    if rng.random() < 0.3:
        kw["mlp_layer_types"] = [rng.choice(["dense", "sparse"]) for _ in range(rng.randint(0, n))]
    for key, value in EXTRA.items():
        if rng.random() < 0.97:
            kw[key] = value
    if rng.random() < 0.05:
        kw["mla_use_nope"] = False
    return kw


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    kw = _text_kw(rng)
    try:
        if rng.random() < 0.7:
            d, arch = T.Glm5NextConfig(text_config=kw).to_dict(), GLM5_NEXT
        else:
            d, arch = T.Glm5NextTextConfig(**kw).to_dict(), GLM5_NEXT_TEXT
    except (StrictDataclassClassValidationError, StrictDataclassFieldValidationError):
        d, arch = T.Glm5NextConfig().to_dict(), GLM5_NEXT
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 8, 3]), "block_size": rng.choice([16, 32, 64, 512, 512, 1024]),
              "kv_cache_dtype": rng.choice(["auto", "auto", "bfloat16", "fp8"]),
              "model_dtype": "float16" if rng.random() < 0.1 else "bfloat16",
              "mamba_cache_dtype": rng.choice(["auto", "auto", "float32"]),
              "mamba_ssm_cache_dtype": rng.choice(["auto", "auto", "float32", "bfloat16", "float16"])}  # fmt: skip
    return {**d, "architectures": [arch]}, engine


def _ours(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    """kvbudget's reading as records (``glm5_next_registered_layers``; the planning reader refuses all)."""
    try:
        layers = glm5_next_registered_layers(
            saved, vllm.EngineConfig(tp=e["tp"], block_size=e["block_size"]), kv_cache_dtype=e["kv_cache_dtype"],
            model_dtype=e["model_dtype"], mamba_cache_dtype=e["mamba_cache_dtype"],
            mamba_ssm_cache_dtype=e["mamba_ssm_cache_dtype"])  # fmt: skip
    except InvalidConfigError as err:
        return f"refused: {err}"
    text = saved.get("text_config") or saved
    align = kda_prefill_checkpoint_alignment({**{"linear_head_dim": 128, "linear_lower_bound": -5.0}, **{
        k: v for k, v in text.items() if k in ("linear_head_dim", "linear_lower_bound")}}, e["model_dtype"])  # fmt: skip
    out: list[dict[str, Any]] = []
    for x in layers:
        if x.kind == "mamba":
            out.append({"name": x.name, "kind": "mamba", "state_shapes": [list(s) for s in x.state_shapes],
                        "state_dtypes": list(x.state_dtypes), "mamba_type": x.mamba_type,
                        "checkpoint_alignment": align})  # fmt: skip
            continue
        dtype = {"mla_indexer": "uint8", "circular_buffer": "bfloat16"}.get(x.kind)
        rec = {"name": x.name, "kind": x.kind, "num_kv_heads": x.num_kv_heads, "head_size": x.head_size,
               "head_size_v": x.head_size_v, "dtype": dtype, "tokens_per_state": x.tokens_per_state,
               "dcp_sharded": x.kind != "circular_buffer", "block_size": x.block_size}  # fmt: skip
        if x.kind == "mla":
            rec["kv_cache_dtype"] = x.kv_cache_dtype
        out.append(rec)
    return out


def _planned(saved: dict[str, Any], e: dict[str, Any]) -> str:
    """The census's side: the planning reader (``layers_from_hf_config``), which refuses every config."""
    try:
        layers_from_hf_config(saved, vllm.EngineConfig(tp=e["tp"], block_size=e["block_size"]),
                              kv_cache_dtype=e["kv_cache_dtype"], model_dtype=e["model_dtype"])  # fmt: skip
    except InvalidConfigError as err:
        return f"refused: {err}"
    raise AssertionError("the GLM-5-Next reader plans nothing yet")


def _theirs(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    cls = T.Glm5NextConfig if saved["architectures"][0] == GLM5_NEXT else T.Glm5NextTextConfig
    try:
        loaded = cls.from_dict(dict(saved))
        return glm5_next_layers(loaded, **e)
    except (StrictDataclassClassValidationError, StrictDataclassFieldValidationError, VllmLoadError) as err:
        return f"refused: {type(err).__name__}: {err}"


def _tally(counts: dict[str, int], records: list[dict[str, Any]]) -> None:
    for key, n in (("kda layers", sum(x["kind"] == "mamba" for x in records)),
                   ("mla layers", sum(x["kind"] == "mla" for x in records)),
                   ("flashkda", any(x.get("checkpoint_alignment") == 16 for x in records))):  # fmt: skip
        counts[key] = counts.get(key, 0) + n


def _compare(cases: list[Case]) -> tuple[dict[str, int], list[str]]:
    return compare_readings(cases, _ours, _theirs, _tally)


def _census() -> dict[str, Any]:
    return {**T.Glm5NextConfig().to_dict(), "architectures": [GLM5_NEXT]}


def test_glm5_next_read_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-glm5-next")
    counts, mismatches = _compare([(_census(), PLAIN)] + [_case(rng) for _ in range(N)])
    print(f"\nvLLM GLM-5-Next reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 4, counts
    assert counts["kda layers"] > N // 2 and counts["mla layers"] > N // 2 and counts["flashkda"] > N // 10, counts


def test_the_census_config_is_refused_as_vllm_refuses_it() -> None:
    """transformers' defaults carry no ``mhc``, which vLLM's decoder layer reads: both refuse, with vLLM's text."""
    with pytest.raises(InvalidConfigError, match="object has no attribute 'mhc'") as e:
        layers_from_hf_config(_census(), vllm.EngineConfig())
    assert e.value.key == "text_config.mhc"
    assert isinstance(_theirs(_census(), PLAIN), str) and "no attribute 'mhc'" in str(_theirs(_census(), PLAIN))


def _full(**kw: Any) -> dict[str, Any]:
    return {**T.Glm5NextConfig(text_config={"num_hidden_layers": 4, **EXTRA, **kw}).to_dict(),
            "architectures": [GLM5_NEXT]}  # fmt: skip


def test_layers_layout_and_the_planning_refusal() -> None:
    layers = glm5_next_registered_layers(_full(), vllm.EngineConfig(tp=2), kv_cache_dtype="auto", model_dtype="bfloat16")
    assert [x.kind for x in layers] == ["mamba"] * 3 + ["mla_indexer", "circular_buffer", "mla"]
    k, ring, mla = layers[3:]
    assert (k.name, k.head_size, k.tokens_per_state) == ("language_model.model.layers.3.self_attn.indexer.k_cache", 132, 16)
    assert (ring.num_kv_heads, ring.head_size, ring.head_size_v, ring.block_size) == (2, 128, 0, 16)
    assert (mla.name, mla.head_size) == ("language_model.model.layers.3.self_attn.attn", 512)
    assert layers[0].state_shapes == ((3, 12288), (32, 128, 128))
    assert glm5_next_kv_cache_layout(layers) == "BLHNC" and vllm.kv_cache_layout(layers) == "BLHNC"
    with pytest.raises(InvalidConfigError, match="KV-cache layout|does not satisfy"):
        vllm.kv_cache_layout(layers, "LBNHC")
    with pytest.raises(InvalidConfigError, match="has not modelled the KV block size"):
        layers_from_hf_config(_full(), vllm.EngineConfig())


@pytest.mark.parametrize("kw, engine, key", [
    ({"mla_use_nope": None}, {}, "text_config.mla_use_nope"),  # dropped below: vLLM's AttributeError
    ({}, {"pp": 2}, "pp"),  # the multimodal class has no SupportsPP
    ({}, {"speculative_method": "mtp", "num_speculative_tokens": 1}, "architectures"),
    ({}, {"block_size": 8}, "text_config.index_kpool"),  # the tail ring (16) does not divide the block
    ({"linear_num_heads": 6}, {"tp": 4}, "text_config.linear_num_heads"),
])  # fmt: skip
def test_glm5_next_refusals(kw: dict[str, Any], engine: dict[str, Any], key: str) -> None:
    cfg = _full(**{k: v for k, v in kw.items() if v is not None})
    for k in (k for k, v in kw.items() if v is None):
        del cfg["text_config"][k]
    with pytest.raises(InvalidConfigError) as e:
        glm5_next_registered_layers(cfg, vllm.EngineConfig(**engine), kv_cache_dtype="auto", model_dtype="bfloat16")
    assert e.value.key == key, e.value
