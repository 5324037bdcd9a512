"""``kvbudget plan`` for a hybrid-state model: the state pool comes out of the budget first.

Qwen3-Next-80B-A3B's published config (python/kvbudget/models/data/hybrid_state_models.json): SGLang
0.5.23 pools the KV of its 12 full-attention layers and keeps a gated-delta state in
the other 36. The command line must plan the KV pool over those 12 layers on the
budget :func:`kvbudget.sglang.state.state_budget` leaves (itself held to SGLang's
code by tests/test_sglang_state.py), and show the state pool; before this it
planned 48 KV layers on the whole budget.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_helpers import A40, GIB, run
from kvbudget import ServingConfig, SpeculativeConfig, create_pool_configurator
from kvbudget.models.hybrid_state import (UnknownHybridStateModelError, get_hybrid_state_model, hybrid_state_entries,
                                          list_hybrid_state_models)
from kvbudget.sglang import resolve_sglang
from kvbudget.sglang.state import kv_budget_bytes, state_budget
from kvbudget.sglang.state_model import state_from_hf_config


@pytest.fixture(scope="module")
def qwen3_next(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entries = hybrid_state_entries()
    cfg = dict(next(e for e in entries if e["name"] == "qwen3_next_80b_a3b_instruct")["config"])
    cfg.setdefault("torch_dtype", "bfloat16")
    d = tmp_path_factory.mktemp("qwen3-next")
    (d / "config.json").write_text(json.dumps(cfg))
    return d / "config.json"


@pytest.mark.parametrize("extra", [(), ("--tp", "4", "--mamba-radix-cache-strategy", "extra_buffer",
                                        "--max-running-requests", "64", "--mamba-ssm-dtype", "bfloat16")])
def test_plan_takes_the_state_pool_out_first(qwen3_next: Path, extra: tuple[str, ...]) -> None:
    r = run("plan", str(qwen3_next), "--available", "40GiB", "--json", *extra)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cfg = json.loads(qwen3_next.read_text())
    tp = 4 if extra else 1
    serving = ServingConfig(tp_size=tp, max_running_requests=64 if extra else None)
    # Unset, the strategy is SGLang's "auto", which its launch resolves to the extra buffer here.
    state = state_from_hf_config(cfg, tp_size=tp, mamba_ssm_dtype="bfloat16" if extra else None,
                                 mamba_radix_cache_strategy="extra_buffer")  # fmt: skip
    assert state is not None and state.num_state_layers == 36
    budget = state_budget(state, serving, SpeculativeConfig(), A40 / GIB)
    kv = kv_budget_bytes(budget)
    geometry = resolve_sglang(cfg).model_geometry()
    assert geometry.num_layers == 12
    tokens = create_pool_configurator(geometry, serving, SpeculativeConfig()).calculate_pool_sizes(kv, 1)
    assert doc["sglang"]["max_total_num_tokens"] == tokens.max_total_num_tokens
    assert doc["state"]["budget"]["max_mamba_cache_size"] == budget.max_mamba_cache_size
    assert doc["state"]["config"]["ssm_dtype"] == ("bfloat16" if extra else "float32")
    full = next(p for p in doc["plan"]["pools"] if p["name"] == "full")
    assert len(full["layer_ids"]) == 12
    # The exact plan holds the state pool of SGLang's slots beside the KV pools and fits the budget.
    state_pool = next(p for p in doc["plan"]["pools"] if p["name"] == "state")
    assert state_pool["tokens"] == budget.max_mamba_cache_size and doc["plan"]["total_bytes"] <= A40
    assert state_pool["nbytes"] == budget.state_bytes  # no speculation: SGLang's state bytes exactly


def test_an_unset_radix_cache_strategy_is_resolved_as_sglangs_launch_resolves_it(qwen3_next: Path) -> None:
    """SGLang's ``--mamba-radix-cache-strategy`` defaults to ``auto``: the command line resolves it
    as the launch does (``kvbudget.sglang.resolve.state_radix_cache``, held to SGLang's hook by
    tests/test_sglang_launch_resolution.py), with a note, and plans as the launch line with the
    same flags does: the extra buffer for Qwen3-Next, ``no_buffer`` with the overlap scheduler
    off, and a strategy given as given."""
    common = ("--available", "40GiB", "--json")
    for flags, strategy in (((), "extra_buffer"), (("--mamba-radix-cache-strategy", "auto"), "extra_buffer"),
                            (("--disable-overlap-schedule",), "no_buffer"),
                            (("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"), "no_buffer")):
        r = run("plan", str(qwen3_next), *flags, *common)
        assert r.returncode == 0, r.stderr
        mine = json.loads(r.stdout)
        assert mine["state"]["config"]["mamba_radix_cache_strategy"] == strategy, flags
        line = f"--model-path {qwen3_next.parent} --kv-cache-dtype bf16 " + " ".join(flags)
        r = run("plan", "--sglang", line, *common)
        assert r.returncode == 0, r.stderr
        launch = json.loads(r.stdout)
        assert mine["state"] == launch["state"] and mine["sglang"] == launch["sglang"], flags
        assert mine["plan"] == launch["plan"], flags
    r = run("plan", str(qwen3_next), "--available", "40GiB")
    assert "--mamba-radix-cache-strategy auto: extra_buffer, as SGLang's launch resolves it" in r.stdout
    # An LFM2 config (no extra buffer in SGLang 0.5.23): no_buffer, and the overlap scheduler off.
    r = run("plan", "lfm2-1.2b", *common)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["state"]["config"]["mamba_radix_cache_strategy"] == "no_buffer"
    assert doc["serving"]["disable_overlap_schedule"] is True


def test_plan_shows_the_state_pool(qwen3_next: Path) -> None:
    r = run("plan", str(qwen3_next), "--available", "40GiB")
    assert r.returncode == 0, r.stderr
    assert "state pool (SGLang's, sized first)" in r.stdout
    assert re.search(r"│ state +│ +[\d,]+ slots │", r.stdout) and "(state pool " in r.stdout


def test_a_state_pool_that_does_not_fit_is_an_error(qwen3_next: Path) -> None:
    r = run("plan", str(qwen3_next), "--available", "64MiB")
    assert r.returncode == 1
    assert "Not enough GPU memory for hybrid" in r.stderr


def test_a_draft_beside_a_state_pool_takes_sglangs_launch_values(qwen3_next: Path) -> None:
    """The state pool holds a row per draft token and request: ``--draft mtp:1`` alone takes the
    step flags and running-request cap SGLang's launch fills in (each with a note), and plans as
    the launch line with the same draft does (``plan --sglang``, itself held to SGLang's hooks by
    tests/test_sglang_launch_resolution.py)."""
    common = ("--available", "40GiB", "--json")
    r = run("plan", str(qwen3_next), "--draft", "mtp:1", *common)
    assert r.returncode == 0, r.stderr
    mine = json.loads(r.stdout)
    line = (f"--model-path {qwen3_next.parent} --speculative-algorithm NEXTN --speculative-draft-model-path "
            f"{qwen3_next.parent} --kv-cache-dtype bf16")  # fmt: skip
    r = run("plan", "--sglang", line, *common)
    assert r.returncode == 0, r.stderr
    launch = json.loads(r.stdout)
    assert launch["serving"]["max_running_requests"] == mine["serving"]["max_running_requests"] == 48
    spec = {k: mine["draft"]["speculative"][k] for k in ("num_steps", "eagle_topk", "num_draft_tokens")}
    assert spec == {k: launch["draft"]["speculative"][k] for k in spec} == {"num_steps": 3, "eagle_topk": 1,
                                                                           "num_draft_tokens": 4}  # fmt: skip
    assert mine["state"] == launch["state"] and mine["sglang"] == launch["sglang"] and mine["plan"] == launch["plan"]
    assert mine["state"]["budget"]["intermediate_bytes"] > 0
    r = run("plan", str(qwen3_next), "--draft", "mtp:1", "--available", "40GiB")
    assert r.returncode == 0 and "SGLang's launch picks for Qwen3NextForCausalLM" in r.stdout, r.stderr
    assert "--max-running-requests 48: what SGLang's launch sets" in r.stdout
    # Steps at top-k 1 take SGLang's steps + 1 draft tokens; steps without top-k is SGLang's failure.
    r = run("plan", str(qwen3_next), "--draft", "mtp:1", "--num-steps", "2", "--eagle-topk", "1", *common)
    assert r.returncode == 0 and json.loads(r.stdout)["draft"]["speculative"]["num_draft_tokens"] == 3, r.stderr
    r = run("plan", str(qwen3_next), "--draft", "mtp:1", "--num-steps", "2", "--available", "40GiB")
    assert r.returncode == 2 and "without --speculative-eagle-topk" in r.stderr, r.stderr
    # At top-k above 1 SGLang keeps the draft tokens given: none given is a usage error naming the flag.
    r = run("plan", str(qwen3_next), "--draft", "mtp:1", "--num-steps", "2", "--eagle-topk", "4",
            "--available", "40GiB")  # fmt: skip
    assert r.returncode == 2 and "give --num-draft-tokens" in r.stderr, r.stderr


def test_sweep_refuses_a_state_model(qwen3_next: Path) -> None:
    r = run("sweep", str(qwen3_next), "--available", "40GiB", "--vary", "tp", "--values", "1", "2")
    assert r.returncode == 2
    assert "recurrent state pool" in r.stderr


@pytest.mark.parametrize("name", [*(n for n in list_hybrid_state_models() if "sglang" in get_hybrid_state_model(n).engines),
                                  "tiiuae/Falcon-H1-7B-Instruct"])  # fmt: skip
def test_a_named_hybrid_state_model_plans_as_its_config(tmp_path: Path, name: str) -> None:
    """Each bundled model's name (or HF id) plans exactly as its config file does (Qwen3.5's
    ``linear_attention`` layer kinds included)."""
    m = get_hybrid_state_model(name)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(m.config))
    by_name, by_file = (run("plan", what, "--available", "40GiB", "--json") for what in (name, str(path)))
    assert by_name.returncode == 0 and by_file.returncode == 0, by_name.stderr + by_file.stderr
    a, b = json.loads(by_name.stdout), json.loads(by_file.stdout)
    assert a["sglang"] == b["sglang"] and a["state"] == b["state"] and a["plan"] == b["plan"]
    assert a["model"]["hf_id"] == m.hf_id and a["state"]["budget"]["max_mamba_cache_size"] > 0


@pytest.mark.parametrize("name", list_hybrid_state_models())
def test_a_named_hybrid_state_model_plans_in_vllm_mode(name: str) -> None:
    """``plan NAME --engine vllm``: each bundled model's layers as the library reads its config, and
    its state layers in vLLM's one pool (the bundled LFM2 once lacked keys vLLM's class reads)."""
    from kvbudget import vllm
    from kvbudget.vllm.models import layers_from_hf_config

    r = run("plan", name, "--engine", "vllm", "--available", "20GiB", "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    m = get_hybrid_state_model(name)
    layers = layers_from_hf_config(m.config, vllm.EngineConfig(max_model_len=8192))
    assert [x["name"] for x in doc["vllm_layers"]] == [x.name for x in layers]
    assert any(g["spec"] == "MambaSpec" for g in doc["vllm_plan"]["groups"]) and doc["vllm_plan"]["num_blocks"] > 0


@pytest.mark.parametrize("arch,kernel", [("BailingMoeV2_5ForCausalLM", None), ("BailingMoeV3ForCausalLM", 4)])
def test_the_bailing_hybrids_plan_as_their_launch_line(tmp_path: Path, arch: str, kernel: int | None) -> None:
    """Ling 2.5 (lightning: a conv state with no element) and Ling 3 (KDA) beside MLA: the command
    line plans a config as ``plan --sglang`` plans its launch line, the state first."""
    cfg = {"model_type": "bailing_hybrid", "architectures": [arch], "num_hidden_layers": 32, "num_attention_heads": 32,
           "hidden_size": 4096, "head_dim": 128, "layer_group_size": 8, "torch_dtype": "bfloat16",
           **({"short_conv_kernel_size": kernel} if kernel else {})}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    common = ("--available", "20GiB", "--json")
    mine = run("plan", str(tmp_path / "config.json"), "--tp-size", "4", *common)
    launch = run("plan", "--sglang", f"--model-path {tmp_path} --tp 4 --kv-cache-dtype bf16", *common)
    assert mine.returncode == 0 == launch.returncode, mine.stderr + launch.stderr
    a, b = json.loads(mine.stdout), json.loads(launch.stdout)
    assert a["state"] == b["state"] and a["sglang"] == b["sglang"] and a["plan"] == b["plan"]
    assert a["state"]["config"]["mixer"] == ("kda" if kernel else "mamba2")
    state = next(p for p in a["plan"]["pools"] if p["name"] == "state")
    conv = next(t for t in state["tensors"] if t["kind"] == "conv_state")
    rows = state["tokens"] + 1
    assert conv["shape"] == ([28, rows, 3 * 32 * 128 // 4 * 3] if kernel else [28, rows, 0, 0])
    full = next(p for p in a["plan"]["pools"] if p["name"] == "full")
    assert len(full["layer_ids"]) == 4


def test_vllm_alone_shows_no_sglang_state_note() -> None:
    """``plan --engine vllm`` prints vLLM's numbers only: SGLang's state-pool and launch notes are
    for SGLang's plan, which prints them."""
    args = ("plan", "qwen3-next-80b-a3b-instruct", "--tp-size", "4", "--available", "20GiB")
    vllm_only = run(*args, "--engine", "vllm", "--max-model-len", "8192")
    sglang = run(*args)
    assert vllm_only.returncode == 0 == sglang.returncode, vllm_only.stderr + sglang.stderr
    assert "keeps a gdn state" not in vllm_only.stdout and "keeps a gdn state" in sglang.stdout


def test_the_bundled_hybrid_state_models_are_listed() -> None:
    r = run("models", "--json")
    assert r.returncode == 0, r.stderr
    rows = {h["name"]: h for h in json.loads(r.stdout)["hybrid_state_models"]}
    assert list(rows) == list_hybrid_state_models() and len(rows) == len(hybrid_state_entries())
    # Nemotron-Nano-9B-v2: 27 Mamba layers and 4 attention layers (of 56); Falcon-H1: both in all 44.
    assert (rows["nvidia-nemotron-nano-9b-v2"]["state_layers"], rows["nvidia-nemotron-nano-9b-v2"]["attention_layers"]) == (27, 4)
    assert (rows["falcon-h1-7b-instruct"]["state_layers"], rows["falcon-h1-7b-instruct"]["attention_layers"]) == (44, 44)
    assert rows["ai21-jamba-1.5-mini"]["engines"] == ["vllm"] and rows["ai21-jamba-1.5-mini"]["mixer"] == "mamba"
    r = run("plan", "ai21-jamba-1.5-mini", "--available", "40GiB")  # SGLang mode: SGLang's reason, and the way out
    assert r.returncode == 2 and "SGLang 0.5.23 does not serve it" in r.stderr and "--engine vllm" in r.stderr
    with pytest.raises(UnknownHybridStateModelError, match="qwen3-next-80b-a3b-instruct"):
        get_hybrid_state_model("qwen3-next-80b")


def test_compare_shows_the_state_pool_it_plans_beside() -> None:
    """``kvbudget compare`` on a state model: the state pool SGLang sizes first, the same as ``plan``'s."""
    plan = json.loads(run("plan", "qwen3-next-80b-a3b-instruct", "--available", "40GiB", "--json").stdout)
    r = run("compare", "qwen3-next-80b-a3b-instruct", "--available", "40GiB")
    assert r.returncode == 0, r.stderr
    slots = plan["state"]["budget"]["max_mamba_cache_size"]
    assert f"state pool (SGLang's, sized first): {slots:,} slots + 1 padding" in r.stdout


def test_compare_caps_the_requests_sglang_holds_by_its_state_pool() -> None:
    """SGLang runs no more requests than its state pool holds (slots over slots per request):
    Qwen3-Next at TP 4 with 28 GiB keeps 736 slots, 5 per request (the extra buffer SGLang's
    launch resolves ``auto`` to), so 147 requests at 4,096 and 8,192 tokens although its KV pool
    would hold 314 and 157; longer contexts are capped by the KV pool (78 at 16,384). With
    ``no_buffer`` (3 per request) the cap is 245."""
    rows = {}
    for flags, cap in (((), 736 // 5), (("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule"),
                                         736 // 3)):  # fmt: skip
        doc = json.loads(run("compare", "qwen3-next-80b-a3b-instruct", "--engines", "sglang", "--tp", "4",
                             "--available", "28GiB", "--json", *flags).stdout)  # fmt: skip
        rows = {r["context_len"]: r for r in doc["concurrency"]}
        assert doc["state"]["budget"]["max_mamba_cache_size"] == 736
        assert rows[4096]["sglang"] == rows[4096]["exact"] == cap
    assert rows[8192]["sglang"] == 157  # below the no_buffer cap: the KV pool's count
    assert rows[16384]["sglang"] == 78


def test_plan_shows_the_unified_buffer_as_the_readme_does() -> None:
    """``--enable-unified-memory``: one buffer of the KV tokens and the state slots, the README's
    two lines word for word (each side's reach; SGLang's buffer one state slot under the budget)."""
    r = run("plan", "qwen3-next-80b-a3b-instruct", "--tp-size", "4", "--available", "28GiB", "--enable-unified-memory")
    assert r.returncode == 0, r.stderr
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    lines = [x for x in r.stdout.splitlines() if "unified buffer" in x]
    assert len(lines) == 2 and all(x in readme for x in lines), lines
    assert re.search(r"│ unified │ +1,289,685 │", r.stdout), r.stdout


def test_plan_shows_a_fused_draft_as_the_readme_does() -> None:
    """A linear MTP draft under ``--enable-unified-memory``: its rows ride in the buffer's full-side
    entries and the verify buffers sit beside it (the README's lines word for word)."""
    r = run("plan", "qwen3-next-80b-a3b-instruct", "--tp-size", "4", "--available", "28GiB", "--enable-unified-memory",
            "--draft", "mtp:1", "--num-steps", "3", "--eagle-topk", "1", "--num-draft-tokens", "4",
            "--max-running-requests", "64")  # fmt: skip
    assert r.returncode == 0, r.stderr
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    lines = [x for x in r.stdout.splitlines() if x.startswith(("  unified buffer (", "  SGLang's unified buffer and"))]
    assert len(lines) == 2 and all(x in readme for x in lines), lines
    assert "full tokens take 13,312 bytes each" in lines[0]
    assert re.search(r"│ state +│ 64 requests │ +65 │", r.stdout), r.stdout


def test_an_inkling_unified_plan_takes_sglangs_context_length(tmp_path: Path) -> None:
    """Inkling under ``--enable-unified-memory``: SGLang's tri-pool, whose bs=1 floor charges
    ``min(context, window + page)`` SWA tokens. With a window above the config's context the
    window bound does not settle the floor: the CLI takes SGLang's context length of the config
    (``get_context_length``, as a launch line does), which the explicit flag reproduces, and a
    different context plans differently."""
    text = {"model_type": "inkling_model", "num_hidden_layers": 8, "hidden_size": 2048, "num_attention_heads": 16,
            "num_key_value_heads": 4, "head_dim": 128, "local_layer_ids": [0, 1, 2, 4, 5, 6],
            "sliding_window_size": 300_000, "max_position_embeddings": 4096, "sconv_kernel_size": 4,
            "n_shared_experts": 1, "shared_expert_sink": True}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "inkling_mm_model", "torch_dtype": "bfloat16",
                                                      "architectures": ["InklingForConditionalGeneration"],
                                                      "text_config": text}))  # fmt: skip
    base = ("plan", str(tmp_path), "--engine", "sglang", "--available", "3GiB", "--enable-unified-memory", "--json")
    runs = [run(*base), run(*base, "--model-context-len", "4096"), run(*base, "--model-context-len", "1000000")]
    assert all(r.returncode == 0 for r in runs[:2]), runs[0].stderr
    derived, given = (json.loads(r.stdout)["plan"] for r in runs[:2])
    assert derived == given and [p["name"] for p in derived["pools"]] == ["unified"]
    # a context above the window + page: the floor's term is the window's 300,001 tokens, which 3 GiB cannot hold
    assert runs[2].returncode != 0 and "bs=1 floor" in runs[2].stderr
