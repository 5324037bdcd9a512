"""``from_server_args`` on real launch lines, against SGLang 0.5.23's own code.

Each line is parsed twice: by kvbudget and by the parser SGLang builds from its
field declarations (:mod:`sglang_oracle.launch`); every flag kvbudget reads must
have SGLang's value. The model folder is resolved by SGLang's own config loading
and ``ModelConfig`` (:mod:`sglang_oracle.model`), and the pools by SGLang's own
configurator (:mod:`sglang_oracle`) on SGLang's parsed values: kvbudget's
configurator for the launch must give the same ``MemoryPoolConfig``. The lines
give the flags SGLang resolves at launch (page size, speculative steps), so the
comparison is exact; the launch-time resolution itself is reported, not run.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import transformers as T

import sglang_oracle
from kvbudget.errors import InvalidConfigError
from kvbudget.integrations.sglang import from_server_args
from kvbudget.integrations.sglang_launch import FLAGS
from sglang_oracle import launch as sglang_launch
from sglang_oracle import model as sglang_model
from sglang_oracle._fetch import sglang_root

GEMMA3_27B = dict(hidden_size=5376, num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=16,
                  head_dim=128, sliding_window=1024)  # fmt: skip


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


def _case(args: dict[str, Any], m: dict[str, Any], launch: Any) -> dict[str, Any]:
    """The pool oracle's case from SGLang's parsed values and SGLang's model resolution."""
    full = len(m["full_attention_layer_ids"] or ()) if m["hybrid_swa"] else m["num_attention_layers"]
    swa = len(m["swa_attention_layer_ids"] or ()) if m["hybrid_swa"] else 0
    dims = ("head_dim", "v_head_dim", "swa_head_dim", "swa_v_head_dim")
    spec = launch.scenario.spec  # the draft's layer count comes from its checkpoint, read by SGLang's rule
    kv = args["kv_cache_dtype"]
    case = {
        "num_full_layers": full, "num_swa_layers": swa, "num_kv_heads": m["num_kv_heads"],
        "swa_num_kv_heads": m["swa_num_kv_heads"], **{k: m[k] or 128 for k in dims},
        "sliding_window_size": m["sliding_window_size"], "kv_lora_rank": m["kv_lora_rank"],
        "qk_rope_head_dim": m["qk_rope_head_dim"], "kv_cache_dtype": "bf16" if kv == "bfloat16" else kv,
        "model_dtype": launch.scenario.serving.model_dtype, "page_size": args["page_size"],
        "swa_full_tokens_ratio": 0.8 if args["swa_full_tokens_ratio"] is None else args["swa_full_tokens_ratio"],
        "swa_eviction_interval": launch.scenario.serving.swa_eviction_interval, "tp_size": args["tp_size"],
        "max_running_requests": args["max_running_requests"], "chunked_prefill_size": args["chunked_prefill_size"],
        "disable_radix_cache": args["disable_radix_cache"], "disaggregation_mode": args["disaggregation_mode"],
        "disaggregation_decode_extra_slots": args["disaggregation_decode_extra_slots"] or 0,
        "algorithm": (args["speculative_algorithm"] or "none").lower(), "draft_num_layers": spec.draft_num_layers,
        "num_steps": args["speculative_num_steps"], "eagle_topk": args["speculative_eagle_topk"],
        "num_draft_tokens": args["speculative_num_draft_tokens"],
    }  # fmt: skip
    if m["mla"]:
        case.update(swa_kv_lora_rank=m["kv_lora_rank"], swa_qk_rope_head_dim=m["qk_rope_head_dim"])
    if m["index_head_dim"] is not None:  # DSA: the indexer, and the backends as launched
        case.update(index_head_dim=m["index_head_dim"], index_kpool=m["index_kpool"],
                    index_shared_layers=m["index_shared_layers"],
                    dsa_backends=(args["dsa_prefill_backend"], args["dsa_decode_backend"]))  # fmt: skip
    return case


def test_the_launch_plans_sglangs_pools(lines: dict[str, str], sglang_parse: Any, resolve: Any) -> None:
    oracle = sglang_oracle.load()
    for name, line in lines.items():
        args = sglang_parse(shlex.split(line))
        model = resolve(json.loads((Path(args["model_path"]) / "config.json").read_text()), False)
        assert isinstance(model, dict), (name, model)
        launch = from_server_args(shlex.split(line))
        for budget in (20 << 30, 60 << 30):
            theirs = oracle.run(_case(args, model, launch), entry="bytes", amount=budget)
            ours = launch.configurator().calculate_pool_sizes(budget)
            assert theirs.config == {k: getattr(ours, k) for k in theirs.config}, (name, budget)


def test_what_the_line_leaves_to_sglang_is_reported(lines: dict[str, str]) -> None:
    gemma = shlex.split(lines["gemma3-eagle3-tp2"])
    launch = from_server_args(gemma)
    assert [flag for flag, _ in launch.unresolved] == ["--mem-fraction-static"]
    assert launch.unknown_flags == ()
    bare = from_server_args([gemma[0], gemma[1]])
    assert [flag for flag, _ in bare.unresolved] == ["--page-size", "--mem-fraction-static"]
    dsv3 = from_server_args(shlex.split(lines["dsv3-mtp-tp8"]))
    assert dsv3.unknown_flags == ("--host", "0.0.0.0", "--trust-remote-code")
    assert dsv3.scenario.spec.algorithm == "nextn" and dsv3.scenario.spec.draft_num_layers == 1
    # DSA: TRT-LLM decodes from the raw layout; a PD prefill worker with FlashMLA keeps the scaled one.
    raw = from_server_args(shlex.split(lines["dsv32-dsa-mtp-fp8-trtllm"]))
    scaled = from_server_args(shlex.split(lines["dsv32-dsa-pd-prefill-scaled"]))
    assert raw.scenario.serving.dsa_raw_kv_layout and not scaled.scenario.serving.dsa_raw_kv_layout
    assert raw.scenario.model.index_head_dim == 128
    bare = from_server_args(["--model-path", shlex.split(lines["dsv32-dsa-pd-prefill-scaled"])[1]])
    assert "--dsa-prefill-backend/--dsa-decode-backend" in [flag for flag, _ in bare.unresolved]


def test_sglang_budget_needs_the_fraction(lines: dict[str, str]) -> None:
    oss = from_server_args(shlex.split(lines["gptoss-eagle3-fp8"]))
    from kvbudget.budget import sglang_available_bytes

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
