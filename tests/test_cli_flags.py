"""CLI flags from the field table, ``--draft`` specs and the ``--gpu`` budget, parsed in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import kvbudget
from kvbudget import PoolPlan, ServingConfig
from kvbudget.models import get_gpu

from cli_helpers import GIB, run
from hf_configs import LLAMA_2_LAYERS


# --------------------------------------------------------------------------- flags from the field table


def _scenario(*argv: str) -> kvbudget.Scenario:
    from kvbudget.cli.parser import build_parser
    from kvbudget.cli.scenario import build_scenario

    return build_scenario(build_parser().parse_args(["plan", *argv])).scenario


def test_every_serving_field_is_a_flag() -> None:
    from kvbudget.cli.parser import SERVING_FIELDS, build_parser
    from kvbudget.fields import FIELDS

    assert [f.name for f in SERVING_FIELDS] == [f.name for f in FIELDS["ServingConfig"]]
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in ("plan", "compare", "sweep", "ratio"):
        flags = sub[command]._option_string_actions
        for f in SERVING_FIELDS:
            flag = "--" + f.name.replace("_", "-")
            assert flags[flag].dest == f.name, (command, flag)
            assert f.doc.replace("`", "").rstrip(".") in (flags[flag].help or "")
        for name in ("num_steps", "eagle_topk", "num_draft_tokens"):
            assert flags["--" + name.replace("_", "-")].dest == name


def test_generated_flags_reach_the_serving_config() -> None:
    sc = _scenario(
        "llama-3.1-8b",
        "--kv-cache-dtype", "fp8",
        "--page-size", "16",
        "--tp-size", "4",
        "--dcp-size", "2",
        "--attn-dp-size", "2",
        "--swa-full-tokens-ratio", "0.5",
        "--max-running-requests", "32",
        "--chunked-prefill-size", "4096",
        "--disable-radix-cache",
        "--disable-overlap-schedule",
        "--disaggregation-mode", "decode",
        "--disaggregation-decode-extra-slots", "3",
        "--swa-eviction-interval", "64",
        "--disable-hybrid-swa-memory",
        "--is-draft-worker",
        "--available", "40GiB",
    )
    assert sc.serving == ServingConfig(
        kv_cache_dtype="fp8_e4m3",
        page_size=16,
        tp_size=4,
        dcp_size=2,
        attn_dp_size=2,
        swa_full_tokens_ratio=0.5,
        max_running_requests=32,
        chunked_prefill_size=4096,
        disable_radix_cache=True,
        disable_overlap_schedule=True,
        disaggregation_mode="decode",
        disaggregation_decode_extra_slots=3,
        swa_eviction_interval=64,
        disable_hybrid_swa_memory=True,
        is_draft_worker=True,
    )
    # Nothing given: the library's defaults, the preset's dtype.
    assert _scenario("llama-3.1-8b", "--available", "1GiB").serving == ServingConfig(kv_cache_dtype="bf16")


def test_short_spellings_are_aliases() -> None:
    short = _scenario(
        "--tp", "2", "--dcp", "2", "--attn-dp", "2", "--kv-dtype", "fp8_e5m2", "--ratio", "0.3",
        "--decode-extra-slots", "5",
    )
    long = _scenario(
        "--tp-size", "2", "--dcp-size", "2", "--attn-dp-size", "2", "--kv-cache-dtype", "fp8_e5m2",
        "--swa-full-tokens-ratio", "0.3", "--disaggregation-decode-extra-slots", "5",
    )
    assert short == long
    assert (short.serving.tp_size, short.serving.swa_full_tokens_ratio) == (2, 0.3)
    spec = _scenario("--num-steps", "3", "--eagle-topk", "1", "--num-draft-tokens", "4").spec
    assert (spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == (3, 1, 4)


@pytest.mark.parametrize("args", [["--kv-dtype", "nope"], ["--disaggregation-mode", "both"], ["--page-size", "0"]])
def test_bad_field_values_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    assert main(["plan", *args]) == 2
    assert "error" in capsys.readouterr().err


def test_ratio_suggestion_is_a_flag() -> None:
    """The flag `kvbudget ratio` tells the user to pass exists."""
    r = run("ratio", "--context-lengths", "100000", "--available", "30GiB", "--json")
    assert r.returncode == 0, r.stderr
    ratio = json.loads(r.stdout)["ratio"]
    assert _scenario("--swa-full-tokens-ratio", str(ratio)).serving.swa_full_tokens_ratio == ratio


def test_cli_package_imports_no_rich() -> None:
    code = (
        "import sys; from kvbudget.cli.parser import build_parser; build_parser(); "
        "import kvbudget.cli.scenario, kvbudget.cli.render; "
        "print(sorted(m for m in ('rich', 'torch', 'matplotlib') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# --------------------------------------------------------------------------- drafts


def test_all_swa_model_as_a_standalone_draft_plans() -> None:
    """Mistral v0.1 (every layer slides) as its own standalone draft: the SWA rule, not "full"."""
    r = run("plan", "mistral-7b-v0.1", "--draft", "standalone:mistral-7b-v0.1", "--available", "40GiB", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    draft = doc["draft"]["speculative"]["draft"]
    assert (draft["num_layers"], draft["capacity"]) == (32, "swa")
    plan = PoolPlan.from_json(json.dumps(doc["plan"]))
    pool = plan.pool("draft")
    swa = plan.pool("swa")
    assert pool is not None and swa is not None and pool.tokens == swa.tokens


def test_kind_and_preset_of_an_mla_draft() -> None:
    """mtp:deepseek-v3-mtp is the same draft as --draft deepseek-v3-mtp (the target's MLA geometry)."""
    a = _scenario("deepseek-v3", "--draft", "mtp:deepseek-v3-mtp", "--available", "40GiB")
    b = _scenario("deepseek-v3", "--draft", "deepseek-v3-mtp", "--available", "40GiB")
    assert a == b
    assert (a.spec.algorithm, a.spec.draft_num_layers, a.spec.draft) == ("nextn", 1, None)


def test_standalone_mla_preset_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from kvbudget.cli import main

    assert main(["plan", "llama-3.1-8b", "--draft", "standalone:deepseek-v3", "--available", "40GiB"]) == 2
    assert "MLA" in capsys.readouterr().err


def test_draft_from_config_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_2_LAYERS))
    sc = _scenario("llama-3.1-8b", "--draft", f"standalone:{path}", "--available", "40GiB")
    assert sc.spec.draft == kvbudget.DraftGeometry(2, 8, 128, capacity="full")
    assert sc.spec.draft_num_layers == 2 and sc.spec.algorithm == "standalone"


# --------------------------------------------------------------------------- the budget


def test_gpu_budget_is_the_library_function() -> None:
    from kvbudget.budget import gpu_available_bytes

    sc_args = ["llama-3.1-8b", "--gpu", "h200", "--mem-fraction", "0.85", "--weights-gib", "20.5"]
    from kvbudget.cli.parser import build_parser
    from kvbudget.cli.scenario import build_scenario

    sc = build_scenario(build_parser().parse_args(["plan", *sc_args]))
    assert sc.available == gpu_available_bytes(get_gpu("h200").memory_bytes, 0.85, int(20.5 * GIB))
    assert sc.budget_info["weights_bytes"] == int(20.5 * GIB)
