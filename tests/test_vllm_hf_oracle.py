"""Self-test of ``vllm_oracle._hf`` (vLLM 0.33.0's per-layer KV specs from HF configs) against
facts read off vLLM's source (each check fails if the lifted code or the glue drifts)."""

from __future__ import annotations

import time

import pytest
import transformers
from vllm_oracle._hf import VllmLoadError, vllm_layers  # missing, it fails these tests (no skip)


def _kinds(layers: list[dict]) -> list[str]:
    return [layer["kind"] for layer in layers]


def test_deepseek_v3_is_mla() -> None:
    layers = vllm_layers(transformers.DeepseekV3Config(), tp=8)
    assert len(layers) == 61
    assert {(x["kind"], x["num_kv_heads"], x["head_size"], x["head_size_v"]) for x in layers} == {
        ("mla", 1, 576, 0)}
    assert layers[60]["name"] == "model.layers.60.self_attn.attn"


def test_gpt_oss_even_layers_slide_and_kv_floor_div() -> None:
    cfg = transformers.GptOssConfig()
    layers = vllm_layers(cfg, tp=4)
    assert [x["sliding_window"] for x in layers[:4]] == [128, None, 128, None]
    assert _kinds(layers[:2]) == ["sliding", "full"]
    assert {x["num_kv_heads"] for x in layers} == {cfg.num_key_value_heads // 4}
    assert layers[0]["name"] == "model.layers.0.attn.attn"
    with pytest.raises(VllmLoadError):  # kv // tp == 0 heads: vLLM's own assert divides by it
        vllm_layers(cfg, tp=16)


def test_gemma3_layer_types_and_window() -> None:
    cfg = transformers.Gemma3TextConfig()
    layers = vllm_layers(cfg)
    assert _kinds(layers) == [
        "sliding" if t == "sliding_attention" else "full" for t in cfg.layer_types]
    assert _kinds(layers[:6]) == ["sliding"] * 5 + ["full"]
    assert {x["sliding_window"] for x in layers if x["kind"] == "sliding"} == {cfg.sliding_window}
    mm = vllm_layers(transformers.Gemma3Config())
    assert mm[0]["name"] == "language_model.model.layers.0.self_attn.attn"
    assert _kinds(mm) == _kinds(layers)


def test_cohere2_window_plus_one() -> None:
    cfg = transformers.Cohere2Config()
    windows = {x["sliding_window"] for x in vllm_layers(cfg) if x["kind"] == "sliding"}
    assert windows == {cfg.sliding_window + 1}


def test_mistral_default_slides_everywhere() -> None:
    layers = vllm_layers(transformers.MistralConfig())
    assert {(x["kind"], x["sliding_window"]) for x in layers} == {("sliding", 4096)}
    off = vllm_layers(transformers.MistralConfig(), disable_sliding_window=True)
    assert set(_kinds(off)) == {"full"}


def test_qwen2_mixed_layer_types_fail_to_load() -> None:
    cfg = transformers.Qwen2Config(use_sliding_window=True, max_window_layers=4)
    with pytest.raises(VllmLoadError, match="max_window_layers"):
        vllm_layers(cfg)
    all_sliding = transformers.Qwen2Config(use_sliding_window=True, max_window_layers=0)
    assert set(_kinds(vllm_layers(all_sliding))) == {"sliding"}


def test_llama4_chunked_and_nope_layers() -> None:
    cfg = transformers.Llama4TextConfig()
    layers = vllm_layers(cfg)
    nope = [i for i, r in enumerate(cfg.no_rope_layers) if r == 0]
    assert [i for i, x in enumerate(layers) if x["kind"] == "full"] == nope
    assert {x["attention_chunk_size"] for x in layers if x["kind"] == "chunked"} == {
        cfg.attention_chunk_size}


def test_pp_split_62_over_4() -> None:
    layers = vllm_layers(transformers.LlamaConfig(num_hidden_layers=62), pp=4)
    stages = {}
    for i, x in enumerate(layers):
        assert x["name"] == f"model.layers.{i}.self_attn.attn"
        stages.setdefault(x["pp_stage"], []).append(i)
    assert [(v[0], v[-1] + 1) for v in stages.values()] == [(0, 15), (15, 31), (31, 47), (47, 62)]


def test_eagle3_drafter_appended() -> None:
    draft = transformers.LlamaConfig(num_hidden_layers=1, num_key_value_heads=8,
                                     architectures=["LlamaForCausalLM"])
    layers = vllm_layers(transformers.LlamaConfig(), tp=8, method="eagle3", draft_config=draft)
    assert len(layers) == 33 and not any(x["is_draft"] for x in layers[:32])
    last = layers[-1]
    assert (last["name"], last["is_draft"], last["num_kv_heads"]) == (
        "model.layers.32.self_attn.attn", True, 1)


def test_deepseek_mtp_drafter() -> None:
    cfg = transformers.DeepseekV3Config(architectures=["DeepseekV3ForCausalLM"])
    layers = vllm_layers(cfg, method="mtp")
    assert [x["name"] for x in layers if x["is_draft"]] == ["model.layers.61.self_attn.attn"]
    assert layers[-1]["kind"] == "mla" and layers[-1]["head_size"] == 576


def test_unsupported_architecture_and_fast() -> None:
    with pytest.raises(VllmLoadError, match="not supported"):
        vllm_layers(transformers.LlamaConfig(architectures=["NoSuchForCausalLM"]))
    cfg = transformers.LlamaConfig()
    vllm_layers(cfg)
    start = time.perf_counter()
    vllm_layers(cfg)
    assert time.perf_counter() - start < 0.05
