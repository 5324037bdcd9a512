"""``kvbudget plan --engine vllm`` and ``kvbudget compare --engines sglang vllm``.

The numbers asserted are VLLM.md section 9's, which its authors produced by
running vLLM 0.33.0's own planner: case (a) + a one-layer drafter is REFERENCE section 5's
example 1 (Gemma-3-27B, 40 GiB), with the EAGLE head vLLM starts on Gemma 3 (``REF1_VLLM``:
vLLM refuses ``REF1``'s EAGLE3 head, which reads aux hidden states), case (b)
is gpt-oss-120b at TP 4 with an fp8 cache and 30 GiB. The README's ``compare``
output is its command's output.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import REF1, REF1_VLLM, run

from kvbudget import vllm
from kvbudget.compare import VllmDeployment
from kvbudget.vllm.budget import vllm_available_bytes
from kvbudget.models import get_preset
from kvbudget.vllm.models import layers_from_hf_config

README = Path(__file__).resolve().parent.parent / "README.md"


def _json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_plan_engine_vllm_is_vllms_plan_of_case_a() -> None:
    doc = _json("plan", *REF1_VLLM, "--engine", "vllm")
    p = doc["vllm_plan"]
    assert (p["num_blocks"], p["kv_cache_size_tokens"], p["bytes_per_block"]) == (29789, 286316, [1441792])
    assert p["warnings"] == ["Add 3 padding layers, may waste at most 5.77% KV cache memory"]
    # The document's layers are the library's reading of the preset, and its plan the library's.
    engine = vllm.EngineConfig(speculative_method="eagle", num_speculative_tokens=1, derived_max_model_len=131072)
    layers = layers_from_hf_config(get_preset("gemma-3-27b").hf_config(), engine,
                                   draft={"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
                                          "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                                          "hidden_size": 5376})  # fmt: skip
    assert doc["vllm_layers"] == [json.loads(json.dumps(x.__dict__)) for x in layers]
    assert p["num_blocks"] == vllm.plan(layers, 40 << 30, engine).num_blocks


def test_plan_engine_vllm_gpt_oss_tp4_fp8_is_vllm_md_case_b() -> None:
    doc = _json("plan", "gpt-oss-120b", "--engine", "vllm", "--tp", "4", "--kv-dtype", "fp8_e4m3",
                "--available", "30GiB", "--max-model-len", "131072")  # fmt: skip
    p = doc["vllm_plan"]
    assert (p["num_blocks"], p["kv_cache_size_tokens"], p["bytes_per_block"]) == (436906, 6207712, [73728] * 4)
    assert {x["num_kv_heads"] for x in doc["vllm_layers"]} == {2}


def test_plan_engine_vllm_table_and_errors() -> None:
    r = run("plan", *REF1_VLLM, "--engine", "vllm", "--block-size", "32")
    assert r.returncode == 0, r.stderr
    assert "vLLM 0.33.0: block 32" in r.stdout and "GPU KV cache size" in r.stdout
    r = run("plan", *REF1, "--engine", "vllm")  # EAGLE3 on Gemma 3: vLLM does not start
    assert r.returncode == 1 and "Model does not support EAGLE3 interface" in r.stderr, r.stderr
    r = run("plan", *REF1, "--block-size", "32")
    assert r.returncode == 2 and "--block-size: vLLM's, which need --engine vllm" in r.stderr
    r = run("plan", "--engine", "sglang", "--block-size", "32")  # the default with one engine
    assert r.returncode == 2 and "--block-size: vLLM's, which need --engine vllm" in r.stderr
    r = run("plan", "--block-size", "32")  # the default plans vLLM beside SGLang
    assert r.returncode == 0 and "vLLM 0.33.0: block 32" in r.stdout
    r = run("plan", "--engine", "vllm", "--draft", "standalone:qwen3-0.6b")
    assert r.returncode == 2 and "draft_model" in r.stderr
    r = run("plan", "llama-3.1-8b", "--engine", "vllm", "--available", "1GiB", "--max-model-len", "1000000")
    assert r.returncode == 1 and "To serve at least one request with the model's max seq len (1000000)" in r.stderr
    r = run("plan", "gemma-3n-e2b", "--engine", "vllm", "--available", "1GiB")
    assert r.returncode == 1 and "Gemma3nForConditionalGeneration" in r.stderr


def test_plan_engine_vllm_gpu_budget_is_vllms_request() -> None:
    doc = _json("plan", "llama-3.1-8b", "--engine", "vllm", "--gpu", "h100", "--weights-gib", "16")
    total = doc["budget"]["gpu_memory_bytes"]
    assert doc["vllm_available_bytes"] == vllm_available_bytes(total, 0.92, weights_bytes=16 << 30)
    r = run("plan", *REF1_VLLM, "--engine", "vllm", "--gpu-memory-utilization", "0.9")
    assert r.returncode == 2 and "--gpu" in r.stderr
    doc = _json("plan", "--gpu-memory-utilization", "0.9")  # the default's budget is a GPU's
    assert doc["engines"]["vllm"]["vllm_available_bytes"] == vllm_available_bytes(141_000_000_000, 0.9,
                                                                                  weights_bytes=int(60.8 * (1 << 30)))


def test_compare_engines_json_and_plot(tmp_path: Path) -> None:
    png = tmp_path / "c.png"
    doc = _json("compare", *REF1_VLLM, "--engines", "sglang", "vllm", "--context-lengths", "8192,131072",
                "--plot", str(png))  # fmt: skip
    assert doc["sglang_configurator"] == "default"  # SGLang 0.5.23's own choice for Gemma 3 (not hybrid)
    rows = {r["context_len"]: r for r in doc["concurrency"]}
    assert rows[131072]["vllm"] == doc["engines"]["vllm"]["vllm_plan"]["max_concurrency"]
    assert rows[8192]["vllm"] == pytest.approx(9.68, abs=0.005)  # VLLM.md: (a) + EAGLE3, conc @8192
    sg = doc["engines"]["sglang"]
    assert sg["over_budget_bytes"] > 0 and doc["engines"]["exact"]["over_budget_bytes"] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = run("compare", "--context-lengths", "8192")
    assert r.returncode == 2 and "--engines" in r.stderr


def test_readme_compare_output_is_the_commands() -> None:
    text = README.read_text()
    m = re.search(r"```console\n\$ kvbudget (compare [^\n]*--engines sglang vllm[^\n]*)\n(.*?)```", text, flags=re.S)
    assert m is not None, "README lacks the compare --engines output"
    r = run(*shlex.split(m.group(1)))
    assert r.returncode == 0, r.stderr
    assert [line.rstrip() for line in m.group(2).splitlines()] == [line.rstrip() for line in r.stdout.splitlines()]


def test_plan_engine_vllm_plans_a_bundled_gated_delta_net_model() -> None:
    """Qwen3-Next at TP 4 with 20 GiB: vLLM's whole budget (no state pool first), its 36 state
    layers beside the 12 attention layers in one block pool (tests/test_vllm_state.py's numbers)."""
    args = ("plan", "qwen3-next-80b-a3b-instruct", "--engine", "vllm", "--tp", "4", "--available", "20GiB",
            "--max-model-len", "32768")  # fmt: skip
    doc = _json(*args)
    p = doc["vllm_plan"]
    assert doc["vllm_available_bytes"] == 20 << 30
    assert (p["num_blocks"], p["kv_cache_size_tokens"], p["blocks_per_request"]) == (5461, 1597732, [3, 3, 3, 103])
    assert p["mamba"] == {"mamba_cache_mode": "align", "block_size": 320, "mamba_block_size": 320,
                          "mamba_page_size_padded": 327680}  # fmt: skip
    text = run(*args).stdout
    assert "12 attention layers and 36 state layers as vLLM reads them" in text
    assert "attention block 320 tokens" in text


def test_plan_engine_vllm_reads_a_qwen3_5_mtp_drafter_from_its_own_key() -> None:
    """``--draft mtp:2`` on Qwen3.5: two predictor layers (vLLM's ``Qwen3_5MultiTokenPredictor``
    counts ``mtp_num_hidden_layers``, not ``num_nextn_predict_layers``), the state's two
    speculative rows, and the drafter config's multi-module count left unset (vLLM's 1)."""
    doc = _json("plan", "qwen3.5-9b", "--engine", "vllm", "--available", "20GiB", "--max-model-len", "32768",
                "--draft", "mtp:2", "--num-speculative-tokens", "2")  # fmt: skip
    drafter = [x["name"] for x in doc["vllm_layers"] if x["is_draft"]]
    assert drafter == ["mtp.layers.0.self_attn.attn", "mtp.layers.1.self_attn.attn"], drafter
    conv = next(x for x in doc["vllm_layers"] if x["kind"] == "mamba")["state_shapes"][0]
    assert conv[0] == 3 + 2, conv  # conv kernel 4, and 2 speculative tokens
    assert doc["vllm_engine"]["num_nextn_predict_layers"] is None


def test_plan_engine_vllm_charges_whispers_cross_attention_for_the_encoder_budget(tmp_path: Path) -> None:
    """An encoder-decoder config: the library's layers and plan, the cross-attention group charged
    for ``--max-num-batched-tokens`` encoder tokens, and the note that says so."""
    import transformers as T

    cfg = {**T.WhisperConfig(decoder_layers=2, encoder_layers=2).to_dict(),
           "architectures": ["WhisperForConditionalGeneration"]}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = ("plan", str(path), "--engine", "vllm", "--available", "1GiB", "--max-model-len", "448",
            "--max-num-batched-tokens", "4096")  # fmt: skip
    doc = _json(*args)
    layers = layers_from_hf_config(cfg, vllm.EngineConfig())
    assert doc["vllm_layers"] == [json.loads(json.dumps(x.__dict__)) for x in layers]
    assert [g["spec"] for g in doc["vllm_plan"]["groups"]] == ["FullAttentionSpec", "CrossAttentionSpec"]
    assert doc["vllm_plan"]["blocks_per_request"] == [28, 256]
    assert "cross-attention layers for the encoder's budget" in run(*args).stdout


def _planned_config(tmp_path: Path, cfg: dict[str, Any], *extra: str, engine: vllm.EngineConfig | None = None,
                    read: dict[str, Any] | None = None) -> tuple[tuple[str, ...], dict[str, Any], list[vllm.LayerSpec]]:  # fmt: skip
    """``plan CONFIG --engine vllm`` on ``cfg`` written to a file (2 GiB, 4,096 tokens, ``extra``): the
    arguments, the JSON document and the library's layers (of ``read``, default ``cfg``, under
    ``engine``), which the document's must be."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = ("plan", str(path), "--engine", "vllm", "--available", "2GiB", "--max-model-len", "4096", *extra)
    doc = _json(*args)
    layers = layers_from_hf_config(read or cfg, engine or vllm.EngineConfig())
    assert doc["vllm_layers"] == [json.loads(json.dumps(x.__dict__)) for x in layers]
    return args, doc, layers


def test_plan_engine_vllm_plans_a_dsa_model_in_64_token_blocks(tmp_path: Path) -> None:
    """DeepSeek-V3.2: the library's layers (an indexer key cache before each latent cache) in one
    uniform-type group of 64-token blocks, and the note that says why the block is not 16."""
    import transformers as T

    cfg = {**T.DeepseekV32Config(num_hidden_layers=3).to_dict(), "architectures": ["DeepseekV32ForCausalLM"]}
    args, doc, _ = _planned_config(tmp_path, cfg)
    assert [g["spec"] for g in doc["vllm_plan"]["groups"]] == ["UniformTypeKVCacheSpecs"]
    assert doc["vllm_plan"]["cache_block_size"] == 64
    assert "take 64-token blocks, not block 16" in run(*args).stdout


def test_plan_engine_vllm_plans_a_minimax_m3_model_in_128_token_blocks(tmp_path: Path) -> None:
    """MiniMax-M3 (layers 3 and 4 sparse, as released): the library's layers (an indexer key cache
    before each sparse layer's K/V cache) in 128-token blocks, and the note that says why the block
    is not 16."""
    import transformers as T

    cfg = {**T.MiniMaxM3VLConfig(text_config={"num_hidden_layers": 5}).to_dict(),
           "architectures": ["MiniMaxM3SparseForConditionalGeneration"]}  # fmt: skip
    cfg["text_config"]["hidden_act"] = "swigluoai"  # as the released config.json declares it
    args, doc, layers = _planned_config(tmp_path, cfg)
    assert [x.kind for x in layers].count("key_indexer") == 2
    assert doc["vllm_plan"]["cache_block_size"] == 128
    assert "take 128-token blocks, not block 16 (a MiniMax-M3 model" in run(*args).stdout


def test_plan_engine_vllm_plans_a_dsa_models_mtp_drafter(tmp_path: Path) -> None:
    """DeepSeek-V3.2 with ``--draft nextn:2``: the config's MTP layers set to two, each an indexer
    key cache and a latent cache after the target's (``DeepseekV32MTP``), in the one 64-token group;
    the document's layers and plan are the library's."""
    import transformers as T

    cfg = {**T.DeepseekV32Config(num_hidden_layers=3).to_dict(), "architectures": ["DeepseekV32ForCausalLM"],
           "num_nextn_predict_layers": 1}  # fmt: skip
    engine = vllm.EngineConfig(max_model_len=4096, derived_max_model_len=cfg["max_position_embeddings"],
                               speculative_method="mtp", num_speculative_tokens=2, num_nextn_predict_layers=2)
    _, doc, layers = _planned_config(tmp_path, cfg, "--draft", "nextn:2", "--num-steps", "2", engine=engine,
                                     read={**cfg, "num_nextn_predict_layers": 2})  # fmt: skip
    assert [(x["name"], x["kind"]) for x in doc["vllm_layers"] if x["is_draft"]] == [
        (f"model.layers.{i}.self_attn.{n}", k) for i in (3, 4) for n, k in (("indexer.k_cache", "mla_indexer"),
                                                                             ("attn", "mla"))]  # fmt: skip
    assert [g["spec"] for g in doc["vllm_plan"]["groups"]] == ["UniformTypeKVCacheSpecs"]
    assert doc["vllm_plan"]["num_blocks"] == vllm.plan(layers, 2 << 30, engine).num_blocks


def test_plan_engine_vllm_takes_configs_only_vllms_reader_reads(tmp_path: Path) -> None:
    """Configs kvbudget's SGLang-mode reading refuses go to vLLM's reader alone under ``--engine
    vllm``: transformers' default Qwen3-Next (no ``full_attention_interval``), with an MTP drafter,
    and a pure Mamba2 model (no attention layer). The document's layers and plan are the library's,
    the note names SGLang's refusal, and SGLang mode still refuses the config."""
    import transformers as T

    q3n = {**T.Qwen3NextConfig(num_hidden_layers=8).to_dict(), "architectures": ["Qwen3NextForCausalLM"]}
    q3n.pop("full_attention_interval", None)
    engine = vllm.EngineConfig(max_model_len=4096, derived_max_model_len=q3n["max_position_embeddings"],
                               speculative_method="mtp", num_speculative_tokens=1, num_nextn_predict_layers=1)
    args, doc, layers = _planned_config(tmp_path, q3n, "--draft", "mtp:1", engine=engine)
    assert [x.kind for x in layers].count("mamba") == 6 and sum(x.is_draft for x in layers) == 1
    assert doc["vllm_plan"]["num_blocks"] == vllm.plan(layers, 2 << 30, engine).num_blocks
    assert doc["model"]["geometry"] is None and "full_attention_interval" in doc["model"]["sglang_refusal"]
    assert "kvbudget's SGLang-mode reading refuses this config" in run(*args).stdout
    r = run("plan", args[1], "--engine", "sglang", "--available", "2GiB")
    assert r.returncode == 1 and "full_attention_interval" in r.stderr, r.stderr

    mamba = {**T.Mamba2Config(num_hidden_layers=4).to_dict(), "architectures": ["Mamba2ForCausalLM"]}
    _, doc, layers = _planned_config(tmp_path, mamba)
    assert {x.kind for x in layers} == {"mamba"} and len(layers) == 4
    assert doc["vllm_plan"]["num_blocks"] == vllm.plan(layers, 2 << 30, vllm.EngineConfig(max_model_len=4096)).num_blocks
    assert doc["model"]["sglang_refusal"] == "a model without attention layers"


def test_a_dsa_config_in_sglang_mode_asks_for_its_page(tmp_path: Path) -> None:
    """SGLang's launch sets a DSA model's 64-token page (``model_overrides``): at the flag path's default
    page of 1 the core's refusal names ``--page-size 64`` (it named no way out), and with it SGLang
    mode plans the config."""
    import transformers as T

    cfg = {**T.DeepseekV32Config(num_hidden_layers=3).to_dict(), "architectures": ["DeepseekV32ForCausalLM"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run("plan", str(path), "--available", "2GiB")
    assert r.returncode == 1 and "its launch sets --page-size 64" in r.stderr, r.stderr
    assert run("plan", str(path), "--available", "2GiB", "--page-size", "64").returncode == 0


def test_compare_engines_on_a_config_only_vllms_reader_reads(tmp_path: Path) -> None:
    """``compare --engines sglang vllm`` on a bundled Jamba (SGLang has no Jamba class): SGLang's
    refusal, by its reason, in place of SGLang's pools and the exact plan, and vLLM's blocks and
    concurrency, the library's; ``--engines sglang`` alone still fails on that refusal."""
    png = tmp_path / "j.png"
    args = ("jamba-v0.1", "--available", "8GiB", "--max-model-len", "8192", "--context-lengths", "4096,8192")
    doc = _json("compare", *args, "--engines", "sglang", "vllm", "--plot", str(png))
    refusal = doc["engines"]["sglang"]["error"]
    assert "Jamba" in refusal and doc["model"]["sglang_refusal"] == refusal and "exact" not in doc["engines"]
    engine = vllm.EngineConfig(**doc["engines"]["vllm"]["vllm_engine"])
    layers = [vllm.LayerSpec(**x) for x in doc["engines"]["vllm"]["vllm_layers"]]
    assert [x.kind for x in layers].count("mamba") == 28
    deployment = VllmDeployment(layers, engine, 8 << 30)
    assert doc["engines"]["vllm"]["vllm_plan"]["num_blocks"] == deployment.plan().num_blocks
    assert [(r["context_len"], r["vllm"]) for r in doc["concurrency"]] == [
        (n, deployment.concurrency(n)) for n in (4096, 8192)]  # fmt: skip
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = run("compare", *args, "--engines", "sglang", "vllm").stdout
    assert "only vLLM is shown: SGLang mode refuses this config" in text and "requests held at once" in text
    small = ("compare", "jamba-v0.1", "--available", "64MiB", "--max-model-len", "8192", "--engines", "sglang", "vllm")
    doc = _json(*small)
    assert "estimated maximum model length is 2880" in doc["engines"]["vllm"]["error"] and doc["concurrency"] == []
    r = run(*small, "--plot", str(tmp_path / "none.png"))
    assert r.returncode == 0 and "nothing to plot" in r.stderr and not (tmp_path / "none.png").exists()
    r = run("compare", *args, "--engines", "sglang")
    assert r.returncode == 2 and "Jamba" in r.stderr and "compare --engines sglang vllm" in r.stderr, r.stderr
