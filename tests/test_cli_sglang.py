"""``kvbudget plan --sglang "<launch_server flags>"``: the launch's plan, from the command line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from cli_helpers import run
from kvbudget import PoolPlan
from kvbudget.sglang.install import from_server_args

GPT_OSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 8,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "hidden_size": 2880,
           "sliding_window": 128, "torch_dtype": "bfloat16",
           "layer_types": ["sliding_attention", "full_attention"] * 4}  # fmt: skip


@pytest.fixture()
def line(tmp_path: Path) -> str:
    (tmp_path / "config.json").write_text(json.dumps(GPT_OSS))
    return f"--model-path {tmp_path} --tp 2 --page-size 64 --kv-cache-dtype fp8_e4m3 --host 0.0.0.0"


def test_plan_is_the_launchs_exact_plan(line: str) -> None:
    r = run("plan", "--sglang", line, "--available", "20GiB", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    got = PoolPlan.from_json(json.dumps(doc["plan"]))
    want = from_server_args(shlex.split(line)).configurator().plan(20 << 30, fit="exact")
    assert got == want
    assert doc["sglang_pools"]["hybrid_swa"] is True
    text = run("plan", "--sglang", line, "--available", "20GiB").stdout
    assert "--mem-fraction-static is left to SGLang" in text and "--host 0.0.0.0" in text


def test_sglang_excludes_the_model_and_serving_flags(line: str) -> None:
    r = run("plan", "--sglang", line, "--page-size", "16", "--available", "20GiB")
    assert r.returncode == 2 and "not with --page-size" in r.stderr
    r = run("plan", "gemma-3-27b", "--sglang", line, "--available", "20GiB")
    assert r.returncode == 2 and "not with MODEL" in r.stderr


def test_a_launch_without_model_path_is_one_error_line() -> None:
    r = run("plan", "--sglang", "--tp 2", "--available", "20GiB")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "model-path" in r.stderr


def test_sglang_flag_names_are_aliases() -> None:
    ours = run("plan", "gemma-3-27b", "--draft", "eagle3:1", "--tp", "2", "--num-steps", "3",
               "--gpu", "h100-sxm-80gb", "--mem-fraction", "0.85", "--weights-gib", "30", "--json")
    theirs = run("plan", "gemma-3-27b", "--draft", "eagle3:1", "--tensor-parallel-size", "2",
                 "--speculative-num-steps", "3", "--gpu", "h100-sxm-80gb", "--mem-fraction-static", "0.85",
                 "--weights-gib", "30", "--json")
    assert ours.returncode == theirs.returncode == 0, theirs.stderr
    assert json.loads(ours.stdout)["plan"] == json.loads(theirs.stdout)["plan"]
