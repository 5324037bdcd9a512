"""Which pools SGLang 0.5.23 gives a model (kvbudget.sglang.hybrid), against SGLang's code.

SGLang's own decision (``tests/sglang_oracle/hybrid.py``: ``is_hybrid_swa_model``,
``get_hybrid_layer_ids``, ``ModelConfig._derive_hybrid_model`` and the model
overrides, lifted from the verified wheel) and kvbudget's statement of it run
side by side on seeded random text configs for every architecture SGLang's rule
names (read from its code, so a new one joins the test) and for common
architectures it does not name. Compared: hybrid or not, the full and SWA layer
ids, or that both refuse the config.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from kvbudget.sglang.hybrid import HYBRID_SWA_ARCHITECTURES, SGLangHybrid, sglang_hybrid_swa
from sglang_oracle import hybrid as oracle_hybrid
from sglang_oracle._fetch import sglang_root

CASES_PER_ARCH = 200
#: Architectures SGLang's rule does not name: one pool whatever their layers.
PLAIN = (
    "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Phi3ForCausalLM",
    "Cohere2ForCausalLM", "Llama4ForCausalLM", "DeepseekV3ForCausalLM", "Qwen3NextForCausalLM",
    "Olmo3ForCausalLM",
)  # fmt: skip


@pytest.fixture(scope="module")
def oracle() -> oracle_hybrid.HybridOracle:
    return oracle_hybrid.load(sglang_root())


def _text_config(rng: random.Random, arch: str) -> dict[str, Any]:
    n = rng.randint(1, 12)
    cfg: dict[str, Any] = {"num_hidden_layers": n}
    kinds = ("sliding_attention", "full_attention", "linear_attention")
    if rng.random() < 0.8:
        length = rng.choice((n, n, n, n + 2, max(0, n - 1)))
        cfg["layer_types"] = [rng.choice(kinds[: 2 if rng.random() < 0.8 else 3]) for _ in range(length)]
    if rng.random() < 0.5:
        cfg["sliding_window"] = rng.choice((0, 128, 4096))
    if rng.random() < 0.15:
        cfg["is_hybrid_swa"] = rng.random() < 0.7
    if rng.random() < 0.4:
        cfg["hybrid_layer_pattern"] = [rng.randint(0, 1) for _ in range(rng.choice((n, n, n - 1)))]
    if rng.random() < 0.3:
        cfg["local_layer_ids"] = [rng.randrange(n + (rng.random() < 0.1)) for _ in range(rng.randint(0, n))]
    if rng.random() < 0.3:
        depth = rng.randint(1, 4)
        cfg["num_nextn_predict_layers"] = depth
        cfg["mtp_local_layer_ids"] = rng.sample(range(depth), rng.randint(0, depth))
    if arch.startswith("Exaone") or rng.random() < 0.3:  # Exaone's config class always has it
        cfg["sliding_window_pattern"] = rng.choice((None, 6))
    return cfg


def _ours(archs: list[str], cfg: dict[str, Any], disable: bool) -> tuple[Any, ...]:
    try:
        got = sglang_hybrid_swa(archs, cfg, disable_hybrid_swa_memory=disable)
    except ValueError:
        return ("error",)
    assert isinstance(got, SGLangHybrid) and got.reason
    assert got.configurator == ("hybrid_swa" if got.hybrid_swa else "default")
    return ("ok", got.hybrid_swa, got.full_attention_layer_ids, got.swa_attention_layer_ids)


def test_every_architecture_sglang_names_is_decided_as_sglang_decides(
    oracle: oracle_hybrid.HybridOracle,
) -> None:
    decide = oracle.decide
    archs = sorted(oracle.architectures | HYBRID_SWA_ARCHITECTURES | set(PLAIN))
    assert oracle.architectures - set(PLAIN) >= HYBRID_SWA_ARCHITECTURES  # SGLang names each of ours
    rng = random.Random(20261201)
    outcomes: Counter[tuple[str, str]] = Counter()
    mismatches = []
    for arch in archs:
        for _ in range(CASES_PER_ARCH):
            cfg = _text_config(rng, arch)
            names = rng.choice(([arch], [arch], [arch, rng.choice(PLAIN)], [rng.choice(PLAIN), arch]))
            disable = rng.random() < 0.15
            want = decide(names, cfg, disable)
            theirs = want[:1] if want[0] == "error" else want
            ours = _ours(names, cfg, disable)
            if ours != theirs:
                mismatches.append((names, cfg, disable, want, ours))
            if names[0] == arch:
                outcomes[(arch, "error" if ours[0] == "error" else ("hybrid" if ours[1] else "one pool"))] += 1
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:3]}" + str(
        Counter((m[0][0], m[3][:2], m[4][:2]) for m in mismatches).most_common(12))
    # Not vacuous: every listed architecture reached its hybrid pools, every plain one its one pool.
    for arch in HYBRID_SWA_ARCHITECTURES - {"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN",
                                            "DeepseekV4ForCausalLMDSpark"}:
        assert outcomes[(arch, "hybrid")] > 0, arch
    for arch in PLAIN + ("Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"):
        assert outcomes[(arch, "one pool")] > 0, arch
    assert sum(n for (_, kind), n in outcomes.items() if kind == "error") > 50


@pytest.mark.parametrize(
    ("archs", "cfg", "hybrid", "why"),
    [
        (["Gemma3ForConditionalGeneration"], {"num_hidden_layers": 62}, False, "not on SGLang's hybrid-SWA list"),
        (["Cohere2ForCausalLM"], {"num_hidden_layers": 32}, False, "one Default pool"),
        (["GptOssForCausalLM"], {"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2},
         True, "GptOssForCausalLM is on SGLang's hybrid-SWA list"),
        (["Llama4ForConditionalGeneration"], {"num_hidden_layers": 8}, True, "Llama4ForConditionalGeneration"),
        (["Llama4ForCausalLM"], {"num_hidden_layers": 8}, False, "not on SGLang's hybrid-SWA list"),
    ],
)
def test_worked_decisions(archs: list[str], cfg: dict[str, Any], hybrid: bool, why: str) -> None:
    got = sglang_hybrid_swa(archs, cfg)
    assert got.hybrid_swa is hybrid and why in got.reason
    if archs == ["Llama4ForConditionalGeneration"]:
        assert got.full_attention_layer_ids == (3, 7) and got.swa_attention_layer_ids == (0, 1, 2, 4, 5, 6)


def test_refusals_say_why() -> None:
    with pytest.raises(ValueError, match="hybrid_layer_pattern"):
        sglang_hybrid_swa(["MiMoV2FlashForCausalLM"], {"num_hidden_layers": 48})
    with pytest.raises(ValueError, match="DeepSeek-V4"):
        sglang_hybrid_swa(["DeepseekV4ForCausalLM"], {"num_hidden_layers": 4})
    off = sglang_hybrid_swa(["GptOssForCausalLM"], {"num_hidden_layers": 2, "layer_types": []},
                            disable_hybrid_swa_memory=True)
    assert not off.hybrid_swa and "--disable-hybrid-swa-memory" in off.reason


# --------------------------------------------------------------------------- presets and the CLI


def test_every_preset_names_its_architecture_and_sglang_agrees_on_its_pools(
    oracle: oracle_hybrid.HybridOracle,
) -> None:
    from kvbudget.models import get_preset, list_presets

    decide = oracle.decide
    hybrid = []
    for name in list_presets("target"):
        p = get_preset(name)
        assert p.architectures, name
        got = p.sglang_hybrid()
        text = p.sglang_text_config()
        assert decide(list(p.architectures), text, False) == (
            "ok", got.hybrid_swa, got.full_attention_layer_ids, got.swa_attention_layer_ids), name
        if got.hybrid_swa:  # SGLang's layer ids are the preset's
            g = p.model_geometry()
            assert got.full_attention_layer_ids == tuple(g.full_attention_layer_ids), name
            assert got.swa_attention_layer_ids == tuple(g.swa_attention_layer_ids), name
            hybrid.append(name)
    assert hybrid == ["mimo-v2-flash", "gpt-oss-20b", "gpt-oss-120b", "llama-4-scout"]
    for name in list_presets("draft"):
        assert get_preset(name).architectures, name


def test_the_default_run_says_which_pools_sglang_picks_and_why(tmp_path: Any) -> None:
    import json
    import subprocess
    import sys

    from hf_configs import LLAMA_2_LAYERS

    def run(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "kvbudget.cli", *args], capture_output=True, text=True,
                           timeout=120, env={"COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        return r.stdout

    default = run()  # gpt-oss-120b: SGLang's own HybridSWA pools, no what-if
    assert "SGLang 0.5.23 pools: GptOssForCausalLM is on SGLang's hybrid-SWA list" in default
    assert "what-if" not in default
    out = run("plan", "gemma-3-27b", "--draft", "eagle3:1", "--available", "40GiB")
    assert "SGLang 0.5.23 pools: Gemma3ForConditionalGeneration is not on SGLang's hybrid-SWA list" in out
    assert "plans Gemma3ForConditionalGeneration with one DefaultPoolConfigurator pool over all 62" in out
    assert "--disable-hybrid-swa-memory plans one Default pool" in out
    off_gemma = json.loads(run("plan", "gemma-3-27b", "--available", "40GiB", "--disable-hybrid-swa-memory", "--json"))
    assert off_gemma["configurator"] == "default" and off_gemma["sglang_pools"]["hybrid_swa"] is False
    gpt = run("plan", "gpt-oss-120b", "--available", "40GiB")
    assert "SGLang 0.5.23 pools: GptOssForCausalLM is on SGLang's hybrid-SWA list" in gpt
    assert "what-if" not in gpt
    off = json.loads(run("plan", "gpt-oss-120b", "--available", "40GiB", "--disable-hybrid-swa-memory", "--json"))
    assert off["sglang_pools"]["hybrid_swa"] is False
    assert "--disable-hybrid-swa-memory" in off["sglang_pools"]["reason"]
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_2_LAYERS))
    from_file = json.loads(run("plan", str(config), "--available", "1GiB", "--json"))["sglang_pools"]
    assert from_file["architectures"] == ["LlamaForCausalLM"] and from_file["hybrid_swa"] is False
