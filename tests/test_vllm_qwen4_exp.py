"""``kvbudget.vllm.layers_from_hf_config`` on Qwen4-Exp (``Qwen4ExpForCausalLM``,
``Qwen4ExpForConditionalGeneration``), held to vLLM 0.33.0's own reading (:mod:`kvbudget.vllm.qwen4_exp`).

The configs are built by transformers 5.19.0's ``Qwen4ExpTextConfig`` / ``Qwen4ExpConfig`` (the classes vLLM
loads them with, and the census's) on seeded layer counts and kinds, heads, KV heads, head dims, gated delta
net geometry, ``hc_count``, PLE layers, QSA fields (ratio, index head dim, M-RoPE sections) and expert
counts, sometimes broken after saving (a PLE on an attention layer, a missing QSA field), under a seeded TP,
PP, block size, model dtype, KV dtype and DCP. The oracle (``tests/vllm_oracle/_hf_tables_qwen4_exp.py``)
loads each with transformers' class and builds vLLM's ``Qwen4ExpModel`` / decoder layers / QSA attention,
indexer, side caches and PLE layers from the wheel, after the config hook, and records each layer's spec.
Every layer's name, kind, stage, heads, head sizes, block size, ``tokens_per_state``, state shapes and
dtypes, ``mamba_type`` and ``tp_replicated`` are compared; a refusal on one side only is a mismatch.
``KVBUDGET_VLLM_QWEN4_EXP_CASES`` sets the count.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from huggingface_hub.errors import StrictDataclassClassValidationError
from vllm_oracle._hf_lift import VllmLoadError
from vllm_differential import Case, Reading, compare_readings
from vllm_oracle._hf_tables_qwen4_exp import qwen4_exp_layers

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.qwen4_exp import QWEN4_EXP, QWEN4_EXP_TEXT, qwen4_exp_kv_cache_layout

N = int(os.environ.get("KVBUDGET_VLLM_QWEN4_EXP_CASES", "200"))


def _text_kw(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 16)
    heads = rng.choice([8, 16, 16, 32, 12])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": rng.choice([1024, 2048]),
                          "num_key_value_heads": rng.choice([1, 2, 2, 4, 3]), "head_dim": rng.choice([128, 256]),
                          "linear_num_key_heads": rng.choice([8, 16]), "linear_num_value_heads": rng.choice([16, 32]),
                          "hc_count": rng.choice([2, 4, 4]), "num_experts": rng.choice([4, 64, 512])}  # fmt: skip
    if rng.random() < 0.4:
        kw["layer_types"] = [rng.choice(["linear_attention", "indexed_attention", "full_attention"]) for _ in range(n)]
    kinds = kw.get("layer_types") or ["linear_attention" if (i + 1) % 4 else "indexed_attention" for i in range(n)]
    if rng.random() < 0.5:
        linear = [i + 1 for i, k in enumerate(kinds) if k == "linear_attention"]
        kw.update(ple_layer_ids=rng.sample(linear, min(len(linear), rng.randint(0, 3))), eos_token_id=1)
        kw["ple_conv_kernel_size"], kw["ngram_size"] = rng.choice([2, 4]), rng.choice([2, 3])
    if rng.random() < 0.6:
        dim = rng.choice([64, 128])
        kw.update(indexer_n_heads=rng.choice([4, 8]), indexer_kv_heads=1, indexer_head_dim=dim,
                  indexer_compress_ratio=(ratio := rng.choice([2, 4, 4, 8, 32])), indexer_budget=ratio * 64,
                  rope_parameters={"rope_theta": 1e7, "rope_type": "default", "partial_rotary_factor": 0.25})
        if kw["head_dim"] * 0.25 > dim:
            kw["head_dim"] = 128
        if rng.random() < 0.3:
            kw["rope_parameters"] = {**kw["rope_parameters"], "mrope_section": [11, 11, 10], "mrope_interleaved": True}
    return kw


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    kw = _text_kw(rng)
    try:
        if rng.random() < 0.75:
            d, arch = T.Qwen4ExpTextConfig(**kw).to_dict(), QWEN4_EXP_TEXT
        else:
            vision = {"deepstack_visual_indexes": [0, 1, 2][: rng.randint(0, 3)]} if rng.random() < 0.8 else {}
            d, arch = T.Qwen4ExpConfig(text_config=kw, vision_config=vision).to_dict(), QWEN4_EXP
    except StrictDataclassClassValidationError:
        d, arch = T.Qwen4ExpTextConfig().to_dict(), QWEN4_EXP_TEXT
    text = d.get("text_config", d)
    if rng.random() < 0.04 and text.get("ple_layer_ids"):  # transformers refuses it on load
        text["ple_layer_ids"] = [i + 1 for i, k in enumerate(text["layer_types"]) if k != "linear_attention"][:1] or [0]
    if rng.random() < 0.04 and text.get("indexer_n_heads"):
        text["indexer_budget"] = None
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 1, 2, 3]),
              "block_size": rng.choice([16, 16, 32, 64]), "dcp": 2 if rng.random() < 0.03 else 1,
              "kv_cache_dtype": rng.choice(["auto", "auto", "bfloat16", "fp8", "fp8_e5m2"]),
              "model_dtype": "float16" if rng.random() < 0.1 else "bfloat16"}  # fmt: skip
    return {**d, "architectures": [arch]}, engine


def _ours(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(tp=e["tp"], pp=e["pp"], block_size=e["block_size"],
                                                                dcp=e["dcp"]),
                                       kv_cache_dtype=e["kv_cache_dtype"], model_dtype=e["model_dtype"])  # fmt: skip
    except InvalidConfigError as err:
        return f"refused: {err}"
    out = []
    for x in layers:
        if x.kind == "mamba":
            out.append({"name": x.name, "pp_stage": x.pp_stage, "kind": "mamba",
                        "state_shapes": [list(s) for s in x.state_shapes], "state_dtypes": list(x.state_dtypes),
                        "mamba_type": x.mamba_type, "tp_replicated": x.tp_replicated})  # fmt: skip
            continue
        qsa = x.kind != "full" or ".indexer." in x.name
        out.append({"name": x.name, "pp_stage": x.pp_stage, "kind": x.kind, "num_kv_heads": x.num_kv_heads,
                    "head_size": x.head_size, "head_size_v": None if x.kind == "mla" else x.head_size_v,
                    "kv_cache_dtype": None if qsa else x.kv_cache_dtype, "tokens_per_state": x.tokens_per_state,
                    "block_size": x.block_size})  # fmt: skip
    return out


def _theirs(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    arch = saved["architectures"][0]
    cls = T.Qwen4ExpConfig if arch == QWEN4_EXP else T.Qwen4ExpTextConfig
    try:
        loaded = cls.from_dict(dict(saved))
        layers = qwen4_exp_layers(loaded, tp=e["tp"], pp=e["pp"], model_dtype=e["model_dtype"],
                                  kv_cache_dtype=e["kv_cache_dtype"], block_size=e["block_size"], dcp=e["dcp"])
    except (StrictDataclassClassValidationError, VllmLoadError) as err:
        return f"refused: {type(err).__name__}: {err}"
    if len({x["pp_stage"] for x in layers if x["name"].endswith("raw_key_cache")} | set()) not in (0, e["pp"]):
        return "refused: AssertionError: Workers disagree on supported KV cache layouts"
    out = []
    for x in layers:
        x = dict(x)
        x.pop("checkpoint_alignment", None)
        if x["kind"] != "mamba":  # the main QSA cache's storage: its kv_quant_mode stand-in is the dtype string
            x["kv_cache_dtype"] = None if x["name"].endswith("_cache") else x["kv_cache_dtype"]
            assert x.pop("dtype") in (None, "bfloat16", "uint8"), x
        out.append(x)
    return out


def _ple_gap(ours: Reading, theirs: Reading) -> str | None:
    """kvbudget's planning gap, not a reading: vLLM sizes the block from a PLE page no layer holds."""
    if isinstance(ours, str) and "PLE state page" in ours and isinstance(theirs, list):
        assert not any(x["name"].endswith(".ple") for x in theirs), theirs  # vLLM registers no PLE layer either
        return "refused: PLE page"
    return None


def _tally(counts: dict[str, int], records: list[dict[str, Any]]) -> None:
    for key, hit in (("qsa layers", lambda x: x["kind"] == "circular_buffer"), ("ple layers", lambda x: x["name"].endswith(".ple")),
                     ("gdn layers", lambda x: x["name"].endswith(".linear_attn"))):  # fmt: skip
        counts[key] = counts.get(key, 0) + sum(map(hit, records))


def _compare(cases: list[Case]) -> tuple[dict[str, int], list[str]]:
    return compare_readings(cases, _ours, _theirs, _tally, _ple_gap)


def test_qwen4_exp_read_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-qwen4-exp")
    plain = {"tp": 1, "pp": 1, "block_size": 16, "dcp": 1, "kv_cache_dtype": "auto", "model_dtype": "bfloat16"}
    census = [({**T.Qwen4ExpTextConfig().to_dict(), "architectures": [QWEN4_EXP_TEXT]}, plain),
              ({**T.Qwen4ExpConfig().to_dict(), "architectures": [QWEN4_EXP]}, plain)]
    counts, mismatches = _compare(census + [_case(rng) for _ in range(N)])
    print(f"\nvLLM Qwen4-Exp reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 4, counts
    assert counts["qsa layers"] > N // 4 and counts["ple layers"] > N // 10 and counts["gdn layers"] > N, counts


def test_the_census_configs() -> None:
    """transformers' defaults: the text model is read (40 layers: 30 gated delta nets, 10 full attention
    layers, no QSA or PLE); the multimodal class is refused as vLLM refuses it."""
    layers = layers_from_hf_config({**T.Qwen4ExpTextConfig().to_dict(), "architectures": [QWEN4_EXP_TEXT]},
                                   vllm.EngineConfig())  # fmt: skip
    assert [x.kind for x in layers].count("mamba") == 30 and [x.kind for x in layers].count("full") == 10
    assert qwen4_exp_kv_cache_layout(layers) == "LBNHC"
    with pytest.raises(InvalidConfigError, match="deepstack_visual_indexes") as e:
        layers_from_hf_config({**T.Qwen4ExpConfig().to_dict(), "architectures": [QWEN4_EXP]}, vllm.EngineConfig())
    assert e.value.key == "vision_config.deepstack_visual_indexes"


def _qsa(**kw: Any) -> dict[str, Any]:
    text = {"num_hidden_layers": 4, "indexer_n_heads": 8, "indexer_kv_heads": 1, "indexer_head_dim": 128,
            "indexer_budget": 2048, "indexer_compress_ratio": 4, "ple_layer_ids": [1], "eos_token_id": 1,
            "rope_parameters": {"rope_theta": 1e7, "rope_type": "default", "partial_rotary_factor": 0.25}, **kw}
    return {**T.Qwen4ExpTextConfig(**text).to_dict(), "architectures": [QWEN4_EXP_TEXT]}


def test_qsa_caches_ple_and_layout() -> None:
    layers = layers_from_hf_config(_qsa(), vllm.EngineConfig(tp=2))
    assert [x.name for x in layers[:2]] == ["model.layers.0.ple", "model.layers.0.linear_attn"]
    ple = layers[0]
    assert (ple.state_shapes, ple.tp_replicated, ple.mamba_type, ple.prefill_checkpoint) == (
        ((9, 8192),), True, "short_conv", "ple_short_conv")  # (4 - 1) * 3 rows of 2048 * 4
    ring, compressed, attn = layers[4:7]
    assert ring.name == "model.layers.3.self_attn.indexer.raw_key_cache"
    assert (ring.kind, ring.num_kv_heads, ring.head_size, ring.head_size_v, ring.block_size) == (
        "circular_buffer", 1, 128, 0, 4)
    assert (compressed.kind, compressed.head_size, compressed.tokens_per_state, compressed.block_size) == (
        "mla", 128, 4, None)
    assert (attn.name, attn.kind, attn.num_kv_heads, attn.head_size) == ("model.layers.3.self_attn.attn", "full", 1, 256)
    assert qwen4_exp_kv_cache_layout(layers) == "BLNHC"


@pytest.mark.parametrize("kw, key", [
    ({"model_dtype": "float16"}, "dtype"),  # QSA needs bf16
    ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),
    ({"engine": vllm.EngineConfig(block_size=16), "cfg": _qsa(indexer_compress_ratio=32, indexer_budget=2048)},
     "indexer_compress_ratio"),  # the block size the layers are built under
    ({"engine": vllm.EngineConfig(pp=2)}, "ple_layer_ids"),  # PLE needs PP=1
    ({"engine": vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1)}, "architectures"),
    ({"engine": vllm.EngineConfig(dcp=2)}, "dcp"),
    ({"engine": vllm.EngineConfig(block_size=8)}, "block_size"),  # the aligned block the ring must divide
])  # fmt: skip
def test_qwen4_exp_refusals(kw: dict[str, Any], key: str) -> None:
    cfg, engine = kw.pop("cfg", _qsa()), kw.pop("engine", vllm.EngineConfig())
    with pytest.raises(InvalidConfigError) as e:
        layers_from_hf_config(cfg, engine, **kw)
    assert e.value.key == key, e.value


def test_qwen4_exp_plans_as_vllm_plans_it() -> None:
    """The reading planned by vLLM's planner (tests/vllm_oracle, with the PLE layer's own
    ``get_kv_cache_spec``) and by kvbudget, every field equal (``plan_both``), under the layout
    the reader resolves, prefix caching on and off: the census configs and seeded ones, QSA's
    caches beside the state layers among them."""
    import vllm_oracle as vo
    from vllm_differential import plan_both

    oracle, rng = vo.load(), random.Random("vllm-qwen4-exp-plan")
    census = [({**T.Qwen4ExpTextConfig().to_dict(), "architectures": [QWEN4_EXP_TEXT]},
               {"tp": 1, "pp": 1, "block_size": 16, "dcp": 1, "kv_cache_dtype": "auto", "model_dtype": "bfloat16"})]
    counts = {"planned": 0, "vLLM refuses": 0, "QSA beside state": 0, "reader refuses": 0, "ple": 0, "qsa": 0}
    for saved, e in census + [_case(rng) for _ in range(N // 2)]:
        if isinstance(_ours(saved, e), str):
            counts["reader refuses"] += 1
            continue
        layers = layers_from_hf_config(saved, vllm.EngineConfig(tp=e["tp"], pp=e["pp"], block_size=e["block_size"],
                                                                dcp=e["dcp"]),
                                       kv_cache_dtype=e["kv_cache_dtype"], model_dtype=e["model_dtype"])  # fmt: skip
        engine = {"tp": e["tp"], "pp": e["pp"], "block_size": e["block_size"], "dcp": e["dcp"],
                  "max_model_len": rng.choice([4096, 32768, 262144]), "enable_prefix_caching": rng.random() < 0.7,
                  "kv_cache_layout": qwen4_exp_kv_cache_layout(layers)}  # fmt: skip
        available = rng.choice([1 << 30, 8 << 30, 40 << 30])
        theirs = plan_both(oracle, layers, available, engine)
        counts["QSA beside state"] += any(x.kind == "circular_buffer" for x in layers) and any(
            x.kind == "mamba" for x in layers)  # fmt: skip
        counts["planned" if theirs and theirs["ok"] else "vLLM refuses"] += 1
        counts["ple"] += any(x.prefill_checkpoint == "ple_short_conv" for x in layers)
        counts["qsa"] += any(x.kind == "circular_buffer" for x in layers)
    print(f"\nQwen4-Exp through both planners: {counts}")
    assert counts["planned"] > N // 10 and counts["ple"] > N // 50 and counts["QSA beside state"] > N // 50, counts


def test_the_qsa_layouts_are_the_backends_own() -> None:
    """``QSA_KV_CACHE_LAYOUTS`` is ``QSAStateBackend.supported_kv_cache_layouts()`` (the wheel's
    ``common/qsa_cache.py``, executed over the wheel's ``KVCacheLayout``)."""
    from oracle_kit.lift import Source
    from vllm_oracle._fetch import vllm_root

    from kvbudget.vllm.qwen4_exp import QSA_KV_CACHE_LAYOUTS

    import enum

    ns: dict[str, Any] = {"__name__": "test_qsa_layouts", "Enum": enum.Enum}
    Source(vllm_root(), "vllm/v1/kv_cache_layout.py").lift(ns, "KVCacheLayout")
    declared = Source(vllm_root(), "vllm/models/qwen4_exp/common/qsa_cache.py").lift_member(
        ns, "QSAStateBackend", "supported_kv_cache_layouts")  # fmt: skip
    assert tuple(x.name for x in declared.__func__(type)) == QSA_KV_CACHE_LAYOUTS


def test_plan_resolves_qsas_block_outer_layout(tmp_path: Any) -> None:
    """``plan CONFIG --engine vllm`` on QSA layers without state layers: planned under the layout vLLM
    resolves (block-outer packing), noted; a requested layout outside QSA's set refused as vLLM does."""
    import json

    from cli_helpers import run

    from kvbudget.vllm import kv_cache_layout

    kinds = ["indexed_attention"] * 4
    cfg = _qsa(layer_types=kinds, ple_layer_ids=[])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    args = ("plan", str(path), "--engine", "vllm", "--available", "8GiB", "--max-model-len", "4096", "--json")
    doc = json.loads(run(*args).stdout)
    layers = layers_from_hf_config(cfg, vllm.EngineConfig())
    assert kv_cache_layout(layers) == "BLNHC" and doc["vllm_engine"]["kv_cache_layout"] == "BLNHC", doc["vllm_engine"]
    want = vllm.plan(layers, 8 << 30, vllm.EngineConfig(max_model_len=4096, kv_cache_layout="BLNHC"))
    assert doc["vllm_plan"]["num_blocks"] == want.num_blocks and len(want.groups) > 1
    r = run(*args[:-1], "--kv-cache-layout", "LBNHC")
    assert r.returncode != 0 and "VLLM_KV_CACHE_LAYOUT=LBNHC does not satisfy every supported set" in r.stderr, r
