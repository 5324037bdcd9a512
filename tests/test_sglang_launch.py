"""``from_server_args`` on real launch lines, against SGLang 0.5.23's own code.

Each line is parsed twice: by kvbudget and by the parser SGLang builds from its
field declarations (:mod:`sglang_oracle.launch`); every flag kvbudget reads must
have SGLang's value. The model folder is resolved by SGLang's own config loading
and ``ModelConfig`` (:mod:`sglang_oracle.model`), the line by SGLang's launch
resolution (:mod:`sglang_oracle.resolve`), and the pools by SGLang's own
configurator (:mod:`sglang_oracle`) on SGLang's resolved values: kvbudget's
configurator for the launch must give the same ``MemoryPoolConfig``.
``tests/test_sglang_launch_resolution.py`` runs the same comparison on
generated lines.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import transformers as T

import launch_cases
import sglang_oracle
from kvbudget.errors import InvalidConfigError
from kvbudget.sglang.install import from_server_args
from kvbudget.sglang.launch import FLAGS
from kvbudget.sglang.resolve import LaunchRefused
from sglang_oracle import draft as sglang_draft
from sglang_oracle import launch as sglang_launch
from sglang_oracle import resolve as sglang_resolve
from sglang_oracle import model as sglang_model
from sglang_oracle._fetch import sglang_root

GEMMA3_27B = launch_cases.GEMMA3_27B


def _folder(tmp: Path, name: str, config: Any, arch: str, **extra: Any) -> str:
    d = tmp / name
    d.mkdir()
    cfg = {**config.to_dict(), "architectures": [arch], **extra}
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def _eagle3(tmp: Path, name: str, hidden: int) -> str:
    return _folder(tmp, name, T.LlamaConfig(num_hidden_layers=1, hidden_size=hidden, num_attention_heads=32,
                                            num_key_value_heads=8, head_dim=128), "LlamaForCausalLMEagle3")


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("launch")
    gemma = _folder(tmp, "gemma-3-27b", T.Gemma3Config(text_config=GEMMA3_27B), "Gemma3ForConditionalGeneration")
    oss = _folder(tmp, "gpt-oss-120b", T.GptOssConfig(num_hidden_layers=36, num_attention_heads=64,
                                                      num_key_value_heads=8, head_dim=64, hidden_size=2880),
                  "GptOssForCausalLM")  # fmt: skip
    llama70 = _folder(tmp, "llama-70b", T.LlamaConfig(num_hidden_layers=80, hidden_size=8192, num_attention_heads=64,
                                                      num_key_value_heads=8), "LlamaForCausalLM")  # fmt: skip
    llama1 = _folder(tmp, "llama-1b", T.LlamaConfig(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32,
                                                    num_key_value_heads=8, head_dim=64), "LlamaForCausalLM")  # fmt: skip
    dsv3 = _folder(tmp, "deepseek-v3", T.DeepseekV3Config(), "DeepseekV3ForCausalLM", num_nextn_predict_layers=1)
    dsv32 = _folder(tmp, "deepseek-v3.2", T.DeepseekV32Config(), "DeepseekV32ForCausalLM", num_nextn_predict_layers=1)
    qwen = _folder(tmp, "qwen3-32b", T.Qwen3Config(num_hidden_layers=64, hidden_size=5120, num_attention_heads=64,
                                                   num_key_value_heads=8), "Qwen3ForCausalLM")  # fmt: skip
    spec = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    return {
        "gemma3-eagle3-tp2": f"--model-path {gemma} --tp 2 --page-size 1 --speculative-algorithm EAGLE3 "
                             f"--speculative-draft-model-path {_eagle3(tmp, 'gemma-eagle3', 5376)} {spec}",
        "gptoss-eagle3-fp8": f"--model {oss} --tp-size 4 --kv-cache-dtype fp8_e4m3 --page-size 64 "
                             f"--speculative-algorithm EAGLE3 --speculative-draft-model "
                             f"{_eagle3(tmp, 'oss-eagle3', 2880)} {spec} --mem-fraction-static 0.85",
        "llama70-standalone": f"--model-path {llama70} --tensor-parallel-size 8 --page-size 16 "
                              f"--speculative-algorithm STANDALONE --speculative-draft-model-path {llama1} {spec}",
        "dsv3-mtp-tp8": f"--model-path {dsv3} --tp 8 --page-size 64 --speculative-algorithm NEXTN {spec} "
                        "--host 0.0.0.0 --trust-remote-code",
        "dsv32-dsa-mtp-fp8-trtllm": f"--model-path {dsv32} --tp 8 --page-size 64 --kv-cache-dtype fp8_e4m3 "
                                    f"--dsa-prefill-backend flashmla_sparse --dsa-decode-backend trtllm "
                                    f"--speculative-algorithm NEXTN {spec}",
        "dsv32-dsa-pd-prefill-scaled": f"--model-path {dsv32} --tp 8 --page-size 64 --kv-cache-dtype fp8_e4m3 "
                                       "--dsa-prefill-backend flashmla_sparse --dsa-decode-backend trtllm "
                                       "--disaggregation-mode prefill",
        "qwen3-pd-decode": f"--model-path {qwen} --tp 4 --page-size 32 --disaggregation-mode decode "
                           "--max-running-requests 128 --disable-radix-cache --disaggregation-decode-extra-slots 8 "
                           "--kv-cache-dtype auto --chunked-prefill-size 8192",
    }


@pytest.fixture(scope="module")
def sglang_parse() -> Any:
    return sglang_launch.load(sglang_root())


@pytest.fixture(scope="module")
def resolve() -> Any:
    return sglang_model.load(sglang_root()).resolve


def test_every_flag_parses_as_sglang_parses_it(lines: dict[str, str], sglang_parse: Any) -> None:
    for name, line in lines.items():
        theirs = sglang_parse(shlex.split(line))
        ours = from_server_args(shlex.split(line))
        for f in FLAGS:
            assert ours.args[f.dest] == theirs[f.dest], (name, f.dest, ours.args[f.dest], theirs[f.dest])


def test_sglang_defaults_for_flags_a_line_leaves_out(sglang_parse: Any, lines: dict[str, str]) -> None:
    theirs = sglang_parse(["--model-path", "x"])
    assert {f.dest: f.default for f in FLAGS if f.dest != "model_path"} == {
        f.dest: theirs[f.dest] for f in FLAGS if f.dest != "model_path"}


@pytest.fixture(scope="module")
def sglang_pools() -> Any:
    """``pools(flags, budget) -> (SGLang's configurator class, MemoryPoolConfig) | its refusal``:
    SGLang's launch resolution, draft layers and configurator, as the generated differential runs them."""
    oracle, root = sglang_oracle.load(), sglang_root()
    resolve, models, draft_layers = sglang_resolve.load(root), sglang_model.load(root), sglang_draft.load(root)

    def pools(flags: list[str], budget: int) -> Any:
        theirs = launch_cases.sglang_side(resolve, models, flags)
        if theirs.refused is not None:
            return theirs.refused
        outcome = oracle.run(launch_cases.pool_case(theirs, draft_layers, flags), entry="bytes", amount=budget)
        return outcome.class_name, outcome.config

    return pools


def test_the_launch_plans_sglangs_pools(lines: dict[str, str], sglang_pools: Any) -> None:
    for name, line in lines.items():
        launch = from_server_args(shlex.split(line))
        for budget in (20 << 30, 60 << 30):
            cls, theirs = sglang_pools(shlex.split(line), budget)
            ours = launch.configurator().calculate_pool_sizes(budget)
            assert theirs == {k: getattr(ours, k) for k in theirs}, (name, budget)


def test_what_the_line_leaves_to_sglang_is_reported(lines: dict[str, str]) -> None:
    gemma = shlex.split(lines["gemma3-eagle3-tp2"])
    launch = from_server_args(gemma)
    assert [flag for flag, _ in launch.unresolved] == ["--mem-fraction-static"]
    assert launch.unknown_flags == ()
    bare = from_server_args([gemma[0], gemma[1]])
    assert [flag for flag, _ in bare.unresolved] == ["--page-size", "--mem-fraction-static"]
    dsv3 = from_server_args(shlex.split(lines["dsv3-mtp-tp8"]))
    assert dsv3.unknown_flags == ("--host", "0.0.0.0", "--trust-remote-code")
    # SGLang resolves NEXTN to EAGLE; the MTP layer comes from the target checkpoint.
    assert dsv3.scenario.spec.algorithm == "eagle" and dsv3.scenario.spec.draft_num_layers == 1
    # DSA: TRT-LLM decodes from the raw layout; a PD prefill worker with FlashMLA keeps the scaled one.
    raw = from_server_args(shlex.split(lines["dsv32-dsa-mtp-fp8-trtllm"]))
    scaled = from_server_args(shlex.split(lines["dsv32-dsa-pd-prefill-scaled"]))
    assert raw.scenario.serving.dsa_raw_kv_layout and not scaled.scenario.serving.dsa_raw_kv_layout
    assert raw.scenario.model.index_head_dim == 128
    bare = from_server_args(["--model-path", shlex.split(lines["dsv32-dsa-pd-prefill-scaled"])[1]])
    assert "--dsa-prefill-backend/--dsa-decode-backend" in [flag for flag, _ in bare.unresolved]


def test_sglang_budget_needs_the_fraction(lines: dict[str, str]) -> None:
    oss = from_server_args(shlex.split(lines["gptoss-eagle3-fp8"]))
    from kvbudget.sglang.budget import sglang_available_bytes

    assert oss.available_bytes(free_before=80 << 30, free_now=60 << 30) == sglang_available_bytes(
        80 << 30, 60 << 30, 0.85)
    with pytest.raises(InvalidConfigError, match="mem-fraction-static"):
        from_server_args(shlex.split(lines["gemma3-eagle3-tp2"])).available_bytes(free_before=1, free_now=1)


def test_bad_lines_are_refused() -> None:
    with pytest.raises(InvalidConfigError, match="model-path"):
        from_server_args(["--tp", "2"])
    with pytest.raises(InvalidConfigError, match="list"):
        from_server_args("--model-path x")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="could not be parsed"):
        from_server_args(["--model-path", "x", "--tp", "two"])


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return launch_cases.model_folders(tmp_path_factory.mktemp("issue-22"))


#: The launch lines issue 22 found planned differently from SGLang: (model, flags, what SGLang does).
ISSUE_22 = {
    "pd-decode-turns-radix-off": ("gpt-oss-120b", "--tp 1 --page-size 1 --disaggregation-mode decode "
                                  "--max-running-requests 128"),
    "pd-decode-reserves-extra-slots": ("gpt-oss-120b", "--tp 1 --page-size 1 --disaggregation-mode decode "
                                       "--max-running-requests 32"),
    "nextn-without-a-draft-path-prices-no-draft-layer": ("qwen3-next-80b", "--tp 4 --speculative-algorithm NEXTN "
                                                         "--speculative-num-steps 3 --speculative-eagle-topk 1 "
                                                         "--speculative-num-draft-tokens 4"),
    "eagle-without-a-draft-path-takes-the-mtp-layer": ("deepseek-v3", "--tp 8 --page-size 64 "
                                                       "--speculative-algorithm EAGLE"),
}  # fmt: skip


@pytest.mark.parametrize("name", ISSUE_22)
def test_the_lines_issue_22_found_plan_sglangs_pools(name: str, folders: dict[str, str], sglang_pools: Any) -> None:
    model, line = ISSUE_22[name]
    flags = ["--model-path", folders[model], *shlex.split(line)]
    launch = from_server_args(flags)
    cls, theirs = sglang_pools(flags, 24 << 30)
    ours = launch.configurator()
    assert type(ours).__name__ == cls
    assert {k: getattr(ours.calculate_pool_sizes(24 << 30), k) for k in theirs} == theirs
    v, spec = launch.resolved, launch.scenario.spec
    if name == "pd-decode-turns-radix-off":
        assert v["disable_radix_cache"] and cls == "SWARequestCapPoolConfigurator"
    elif name == "pd-decode-reserves-extra-slots":
        assert v["disaggregation_decode_extra_slots"] == 64  # 2 x 32 running requests on one DP rank
    elif name == "nextn-without-a-draft-path-prices-no-draft-layer":
        assert spec.algorithm == "eagle" and spec.draft_num_layers == 0
    else:
        assert v["speculative_draft_model_path"] == folders[model] and spec.draft_num_layers == 1


def test_the_embedded_default_is_what_sglang_plans(folders: dict[str, str], sglang_pools: Any) -> None:
    """``kvbudget`` with no arguments (issue 23): gpt-oss-120b with an EAGLE3 draft on one H200 is
    planned as SGLang 0.5.23 plans its launch line. SGLang's own resolution and factory pick
    HybridSWAPoolConfigurator and size the pools as the default says, at the default's budget,
    with the speculative settings and page the default plans with."""
    from cli_helpers import run

    r = run("plan", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    flags = ["--model-path", folders["gpt-oss-120b"], "--speculative-algorithm", "EAGLE3",
             "--speculative-draft-model-path", folders["eagle3-2880"]]  # fmt: skip
    cls, theirs = sglang_pools(flags, doc["budget"]["available_bytes"])
    assert cls == "HybridSWAPoolConfigurator" and doc["configurator"] == "hybrid_swa"
    assert theirs == {k: doc["sglang"][k] for k in theirs}
    launch = from_server_args(flags)
    spec, want = launch.scenario.spec, doc["draft"]["speculative"]
    assert (spec.num_steps, spec.eagle_topk, spec.num_draft_tokens) == (want["num_steps"], want["eagle_topk"],
                                                                       want["num_draft_tokens"])  # fmt: skip
    assert launch.resolved["page_size"] == doc["serving"]["page_size"] == 1
    assert spec.draft_num_layers == want["draft_num_layers"] == 1


def test_a_line_sglang_refuses_is_refused_with_its_reason(folders: dict[str, str], sglang_pools: Any) -> None:
    flags = ["--model-path", folders["llama-3.1-70b"], "--speculative-algorithm", "EAGLE3",
             "--speculative-draft-model-path", folders["eagle3-8192"], "--speculative-num-draft-tokens", "4"]
    assert sglang_pools(flags, 24 << 30).startswith("AssertionError")
    with pytest.raises(LaunchRefused, match=r"SGLang 0\.5\.23 refuses this launch .*need --speculative-num-steps"):
        from_server_args(flags)
