"""The ``kvbudget`` command line, run as a subprocess (``python -m kvbudget.cli`` and the script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from kvbudget import PoolPlan, ServingConfig, SpeculativeConfig, create_pool_configurator
from kvbudget.cli import parse_bytes
from kvbudget.models import get_gpu, get_preset, list_gpus, list_presets

from cli_helpers import A40, DEFAULT_A, ENV, GIB, REF1, default_cfg, gemma_eagle3_cfg, run

SCRIPT = shutil.which("kvbudget") or (
    str(Path(sys.executable).with_name("kvbudget"))
    if Path(sys.executable).with_name("kvbudget").exists()
    else None
)


# ----------------------------------------------------------------------------- default


def test_no_arguments_plans_the_default() -> None:
    """gpt-oss-120b with its EAGLE3 draft on one H200: SGLang's numbers, the exact plan and vLLM's,
    side by side, with no what-if (issue 23)."""
    r = run()
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "embedded default" in out
    assert "gpt-oss-120b" in out and "gpt-oss-120b-eagle3" in out and "EAGLE3" in out
    assert "61,616,497,101" in out  # the budget it used: H200 141 GB x 0.9 - 60.8 GiB
    assert "H200 SXM 141 GB" in out and "assumed" in out and "model card" in out  # where each number comes from
    assert "HybridSWAPoolConfigurator" in out  # SGLang's own choice for this deployment
    assert "full 900,783, swa 720,626" in out  # SGLang's numbers
    # the exact plan trims one page so that the tensors fit
    assert "900,782" in out and "720,625" in out
    assert "draft's share" in out
    assert "vLLM 0.33.0" in out and "103,497 blocks" in out  # vLLM's numbers beside them
    assert "requests held at once" in out
    assert "what-if" not in out


def test_reference_example_1_plans_sglangs_numbers() -> None:
    """REFERENCE section 5 example 1 (the embedded default before issue 23)."""
    r = run("plan", *REF1)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "42,949,672,960" in out  # the budget it used
    assert "full 99,674, swa 79,739" in out  # SGLang's numbers at p 1
    assert "99,673" in out and "79,738" in out  # the exact plan trims one page so that the tensors fit
    assert "draft's share" in out


@pytest.mark.skipif(SCRIPT is None, reason="the kvbudget console script is not installed")
def test_console_script_no_arguments() -> None:
    assert SCRIPT is not None
    r = subprocess.run([SCRIPT], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "gpt-oss-120b" in r.stdout and "full 900,783, swa 720,626" in r.stdout and "vLLM 0.33.0" in r.stdout


@pytest.mark.skipif(SCRIPT is None, reason="the kvbudget console script is not installed")
def test_console_script_errors_and_models() -> None:
    assert SCRIPT is not None
    r = subprocess.run([SCRIPT, "models"], capture_output=True, text=True, env=ENV, timeout=120)
    assert r.returncode == 0 and "gemma-3-27b" in r.stdout
    r = subprocess.run(
        [SCRIPT, "plan", "--nope"], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert r.returncode == 2


def test_plan_with_no_model_is_the_default_and_takes_overrides() -> None:
    r = run("plan", "--page-size", "64")
    assert r.returncode == 0, r.stderr
    assert "embedded default" in r.stdout
    assert "full 900,736, swa 720,576" in r.stdout  # the default at p 64
    assert "1,105,459 over budget" in r.stdout  # SGLang's allocation exceeds A by its padding rows
    assert "vLLM 0.33.0" in r.stdout
    r = run("plan", "--page-size", "64", "--engine", "sglang")  # one engine
    assert r.returncode == 0 and "full 900,736, swa 720,576" in r.stdout and "vLLM" not in r.stdout
    r = run("plan", *REF1[:3], "--page-size", "64", "--available", "40GiB")
    assert "full 99,648, swa 79,680" in r.stdout  # REFERENCE example 1 at p 64
    assert "5,242,880 over budget" in r.stdout  # SGLang's allocation exceeds A by 5 MiB


def test_the_defaults_budget_takes_its_flags() -> None:
    """The default's GPU, memory fraction and weights each give way to their flag."""
    doc = json.loads(run("plan", "--mem-fraction", "0.85", "--weights-gib", "62", "--json").stdout)
    assert doc["budget"]["available_bytes"] == int(141e9 * 0.85) - 62 * GIB
    assert doc["budget"]["sources"]["mem_fraction"] == "--mem-fraction"
    doc = json.loads(run("plan", "--gpu", "b200", "--json").stdout)
    gpu = get_gpu("b200")
    assert doc["budget"]["available_bytes"] == int(gpu.memory_bytes * 0.9) - int(60.8 * GIB)
    assert doc["budget"]["weights_bytes"] == int(60.8 * GIB)  # the model's, on any GPU
    doc = json.loads(run("plan", "--available", "40GiB", "--json").stdout)
    assert doc["budget"]["available_bytes"] == A40
    assert doc["engines"]["vllm"]["vllm_available_bytes"] == A40


def test_default_does_not_import_matplotlib() -> None:
    """Only sweep --plot needs matplotlib (torch: tests/test_import.py, which also runs the default)."""
    code = (
        "import sys, contextlib, io\n"
        "from kvbudget.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main([])\n"
        "assert rc == 0, rc\n"
        "assert 'matplotlib' not in sys.modules\n"
        "print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_import_kvbudget_does_not_import_rich_or_the_cli() -> None:
    code = "import sys, kvbudget; print(sorted(m for m in ('rich', 'torch', 'kvbudget.cli') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- plan --json


def test_plan_json_round_trips_into_the_api_plan() -> None:
    r = run("plan", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    plan = PoolPlan.from_json(json.dumps(doc["plan"]))
    expected = default_cfg().plan(DEFAULT_A, fit="exact")
    assert plan == expected
    assert plan.total_bytes <= DEFAULT_A
    assert doc["default"] is True
    assert doc["model"]["preset"] == "gpt-oss-120b"
    assert doc["draft"]["spec"] == "gpt-oss-120b-eagle3"
    assert doc["budget"]["available_bytes"] == DEFAULT_A
    assert doc["configurator"] == "hybrid_swa"
    assert doc["sglang"]["full_max_total_num_tokens"] == 900_783
    assert doc["sglang"]["swa_max_total_num_tokens"] == 720_626
    assert doc["cell_size"] == pytest.approx(68_403.2)
    # both engines side by side, coherent with the plan
    engines = doc["engines"]
    assert engines["exact"]["pools"] == {p.name: p.tokens for p in plan.pools}
    assert engines["sglang"]["pools"]["full"] == 900_783
    assert engines["vllm"]["vllm_plan"]["num_blocks"] == 103_497
    assert [r["context_len"] for r in doc["concurrency"]] == [4096, 8192, 16384, 32768, 65536, 131072]
    assert doc["concurrency"][-1]["vllm"] == engines["vllm"]["vllm_plan"]["max_concurrency"]
    r = run("plan", *REF1, "--json")
    doc = json.loads(r.stdout)
    assert PoolPlan.from_json(json.dumps(doc["plan"])) == gemma_eagle3_cfg().plan(A40, fit="exact")
    assert doc["default"] is False and "engines" not in doc
    assert doc["sglang"]["full_max_total_num_tokens"] == 99_674
    assert doc["sglang"]["swa_max_total_num_tokens"] == 79_739
    assert doc["cell_size"] == pytest.approx(430_899.2)


@pytest.mark.parametrize("fit", ["exact", "sglang"])
def test_plan_json_gpt_oss_tp4_fp8(fit: Literal["exact", "sglang"]) -> None:
    """REFERENCE example 2 with the gpt-oss-120b preset and its EAGLE3 draft preset."""
    r = run(
        "plan",
        "gpt-oss-120b",
        "--draft",
        "gpt-oss-120b-eagle3",
        "--tp",
        "4",
        "--kv-dtype",
        "fp8_e4m3",
        "--page-size",
        "64",
        "--available",
        "30GiB",
        "--fit",
        fit,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    plan = PoolPlan.from_json(json.dumps(doc["plan"]))
    preset = get_preset("gpt-oss-120b")
    draft = get_preset("gpt-oss-120b-eagle3")
    cfg = create_pool_configurator(
        preset.model_geometry(),
        ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=4),
        SpeculativeConfig(algorithm="eagle3", draft_num_layers=1, draft=draft.draft_geometry()),
    )
    assert plan == cfg.plan(30 * GIB, fit=fit)
    assert doc["sglang"]["full_max_total_num_tokens"] == 3_767_296
    assert doc["sglang"]["swa_max_total_num_tokens"] == 3_013_824


def test_plan_gpu_budget() -> None:
    r = run(
        "plan",
        "llama-3.1-8b",
        "--draft",
        "llama-3.1-8b-eagle3",
        "--gpu",
        "h100",
        "--mem-fraction",
        "0.9",
        "--weights-gib",
        "16",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    expected = int(get_gpu("h100").memory_bytes * 0.9) - 16 * GIB
    assert doc["budget"]["available_bytes"] == expected
    assert doc["budget"]["gpu"] == "h100-sxm-80gb"
    plan = PoolPlan.from_json(json.dumps(doc["plan"]))
    assert plan.available_bytes == expected
    assert plan.total_bytes <= expected
    assert plan.pool("draft") is not None


def test_plan_table_for_several_presets_and_drafts() -> None:
    cases = [
        ["llama-3.1-8b", "--draft", "standalone:llama-3.2-1b", "--tp", "2"],
        ["deepseek-v3", "--draft", "deepseek-v3-mtp", "--tp", "8"],
        ["mimo-v2-flash", "--draft", "mimo-v2-flash-mtp", "--page-size", "64"],
        ["mistral-7b-v0.1", "--draft", "eagle3:1"],
        ["qwen3-8b", "--draft", "mtp:2", "--kv-dtype", "fp8"],
        [
            "gpt-oss-120b",
            "--max-running-requests",
            "64",
            "--chunked-prefill-size",
            "8192",
            "--disable-radix-cache",
            "--draft",
            "eagle3:1",
            "--num-steps",
            "3",
            "--eagle-topk",
            "1",
            "--num-draft-tokens",
            "4",
            "--page-size",
            "64",
        ],
    ]
    for args in cases:
        r = run("plan", *args, "--available", "40GiB")
        assert r.returncode == 0, (args, r.stderr)
        assert "pool" in r.stdout and "total" in r.stdout and "draft's share" in r.stdout


def test_plan_accepts_a_config_json(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "torch_dtype": "bfloat16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for args in (["--config", str(path)], [str(path)], [str(tmp_path)]):
        r = run("plan", *args, "--available", "10GiB", "--json")
        assert r.returncode == 0, (args, r.stderr)
        doc = json.loads(r.stdout)
        plan = PoolPlan.from_json(json.dumps(doc["plan"]))
        assert [p.num_layers for p in plan.pools] == [32]
        assert doc["model"]["config"] is not None


# ----------------------------------------------------------------------------- compare, models


def test_compare_shows_both_fits_and_the_draft_budget() -> None:
    r = run("compare", *REF1)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "fit=exact vs fit=sglang" in out
    assert "PR #29622" in out
    assert "101,606" in out  # SGLang's full tokens without the draft terms (REFERENCE example 1)
    assert "99,674" in out
    assert "overrun the budget" in out


def test_compare_json() -> None:
    r = run("compare", *REF1, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cfg = gemma_eagle3_cfg()
    assert PoolPlan.from_json(json.dumps(doc["fit"]["exact"])) == cfg.plan(A40, fit="exact")
    assert PoolPlan.from_json(json.dumps(doc["fit"]["sglang"])) == cfg.plan(A40, fit="sglang")
    db = doc["draft_budget"]
    assert db["with_draft"]["tokens"]["full_max_total_num_tokens"] == 99_674
    assert db["without_draft"]["tokens"]["full_max_total_num_tokens"] == 101_606
    assert db["without_draft"]["cell_size"] == pytest.approx(422_707.2)
    over = db["without_draft"]["over_budget_bytes"]
    assert over == cfg.bytes_for_tokens(101_606) - A40
    assert 0.77 < over / GIB < 0.78  # "the draft pool overran the budget by 0.775 GiB"


def test_compare_without_a_draft() -> None:
    r = run("compare", "llama-3.1-8b", "--available", "20GiB")
    assert r.returncode == 0, r.stderr
    assert "No draft pool" in r.stdout


def test_models_lists_presets_and_gpus() -> None:
    r = run("models")
    assert r.returncode == 0, r.stderr
    for name in (
        "gemma-3-27b",
        "gpt-oss-120b-eagle3",
        "deepseek-v3-mtp",
        "h100-sxm-80gb",
        "mi300x",
    ):
        assert name in r.stdout
    assert "google/gemma-3-27b-it" in r.stdout
    r = run("models", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [p["name"] for p in doc["presets"]] == list_presets()
    assert [g["name"] for g in doc["gpus"]] == list_gpus()
    assert all(p["source"] for p in doc["presets"])
    assert {p["role"] for p in doc["presets"]} == {"target", "draft"}


# ----------------------------------------------------------------------------- errors


def test_unknown_model_suggests_close_names() -> None:
    r = run("plan", "gemma-3-72b", "--available", "40GiB")
    assert r.returncode == 2
    assert "unknown" in r.stderr and "gemma-3-27b" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_gpu_suggests_close_names() -> None:
    r = run("plan", "gemma-3-27b", "--gpu", "h1000", "--weights-gib", "50")
    assert r.returncode == 2
    assert "h100-sxm-80gb" in r.stderr


def test_unknown_draft_suggests_close_names() -> None:
    r = run("plan", "gpt-oss-120b", "--draft", "gpt-oss-120b-eagle", "--available", "40GiB")
    assert r.returncode == 2
    assert "gpt-oss-120b-eagle3" in r.stderr


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (
            {"model_type": "custom", "num_attention_heads": 32, "hidden_size": 4096},
            "num_hidden_layers",
        ),
        (
            {
                "model_type": "llama",
                "num_hidden_layers": "x",
                "num_attention_heads": 32,
                "hidden_size": 4096,
            },
            "num_hidden_layers",
        ),
        (
            {"model_type": "custom", "num_hidden_layers": 32, "hidden_size": 4096},
            "num_attention_heads",
        ),
    ],
)
def test_malformed_config_names_the_key(
    tmp_path: Path, config: dict[str, object], key: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    r = run("plan", "--config", str(path), "--available", "10GiB")
    assert r.returncode == 1, r.stderr
    assert key in r.stderr
    assert "Traceback" not in r.stderr


def test_config_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    r = run("plan", "--config", str(path), "--available", "10GiB")
    assert r.returncode == 1
    assert "not valid JSON" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--bogus"],
        ["plan", "--available", "40XB"],
        ["plan", "--tp", "0"],
        ["plan", "--fit", "loose"],
        ["plan", "--gpu", "h100", "--available", "40GiB"],
        ["plan", "llama-3.1-8b"],  # a named model needs a budget
        ["plan", "llama-3.1-8b", "--mem-fraction", "0.9"],  # without --gpu
        ["plan", "--draft", "eagle3:"],
        ["plan", "--draft", "llama-3.1-8b"],  # a target is no draft preset
        ["sweep", "--values", "1", "2"],  # no --vary
        ["sweep", "--vary", "ratio"],  # no values
        ["sweep", "--vary", "available", "--available", "1GiB", "--values", "2GiB"],
        ["nonsense-command-or-model"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    r = run(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "error" in r.stderr
    assert "Traceback" not in r.stderr


def test_not_enough_memory_exits_1() -> None:
    r = run("plan", "llama-3.1-8b", "--available", "1KiB")
    assert r.returncode == 1
    assert "NotEnoughMemoryError" in r.stderr


def test_swa_pool_too_small_exits_1() -> None:
    r = run("plan", *REF1[:3], "--available", "100MiB")
    assert r.returncode == 1
    assert "SWAPoolTooSmallError" in r.stderr


def test_gpu_without_room_for_weights_exits_1() -> None:
    r = run("plan", "gemma-3-27b", "--gpu", "l40s", "--weights-gib", "60")
    assert r.returncode == 1
    assert "weights" in r.stderr


def test_help_exits_0() -> None:
    for args in (["--help"], ["plan", "--help"], ["sweep", "--help"], ["--version"]):
        r = run(*args)
        assert r.returncode == 0, args


def test_parse_bytes() -> None:
    assert parse_bytes("42949672960") == A40
    assert parse_bytes("40GiB") == A40
    assert parse_bytes("40 gib") == A40
    assert parse_bytes("40GB") == 40 * 10**9
    assert parse_bytes("1.5TiB") == 3 * (1 << 39)
    assert parse_bytes("512MiB") == 512 << 20
    assert parse_bytes("1,000") == 1000
    for bad in ("", "GiB", "40XB", "-1GiB", "1.2.3GB"):
        with pytest.raises(ValueError):
            parse_bytes(bad)
