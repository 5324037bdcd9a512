"""vLLM mode's DeepSeek sparse attention (:mod:`kvbudget.vllm.dsa`: DeepSeek-V3.2, GLM-5, HunYuan-V4) against
vLLM 0.33.0's own classes: ``DeepseekV32Model`` / ``DeepseekV32Attention`` / ``DeepseekV32Indexer``
(``vllm/models/deepseek_v32``, NVIDIA branch), ``HYV4Model`` / ``HYV4MLAAttention`` (``vllm/models/hy_v4``)
and ``DeepseekV32IndexerCache`` (``deepseek_v2.py``),
lifted from the pinned wheel by ``tests/vllm_oracle``; then the layers read planned by kvbudget and by
vLLM's own planner (the indexer's ``MLAAttentionSpec`` with ``cache_role=INDEXER``). The MTP drafter
(``DeepseekV32MTP``'s ``DeepseekV32MultiTokenPredictor``, ``nvidia/mtp.py``, on the draft config
``SpeculativeConfig.hf_config_override`` gives) likewise, layer by layer and through both planners.

The cases: the model-resolution differential's seeded DSA configs (transformers 5.19.0's
``DeepseekV32Config`` / ``GlmMoeDsaConfig`` / ``HYV4Config``, IndexCache keys: ``index_topk_freq``,
``index_skip_topk_offset``, ``index_topk_pattern``), some with yarn RoPE, an explicit null or zero
``index_topk_freq``, or keys left to the class; over TP and PP. ``KVBUDGET_VLLM_DSA_CASES`` sets the
cases per architecture. The MTP cases are DeepSeek-V3.2 and GLM-5 configs of the same draw with a
checkpoint's ``num_nextn_predict_layers`` (1-3; a few 0, null or left to the class), a seeded
``num_speculative_tokens`` (some not a multiple of it: vLLM's refusal), drafter and target KV dtypes
of the three planned, over TP and PP; ``KVBUDGET_VLLM_DSA_MTP_CASES`` sets them per architecture.
"""

from __future__ import annotations

import os
import random
from dataclasses import replace
from typing import Any

import pytest
import vllm_oracle as vo
from sglang_model_cases import FAMILIES
from test_vllm_state_models import _compare
from vllm_differential import Ours, compare, plan_both

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.dsa import DSA_BLOCK_SIZE, DSA_KV_CACHE_DTYPES
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_DSA_CASES", "50"))
M = int(os.environ.get("KVBUDGET_VLLM_DSA_MTP_CASES", "50"))
_ARCHS = {"DeepseekV32ForCausalLM": "deepseek_v32", "GlmMoeDsaForCausalLM": "glm_moe_dsa", "HYV4ForCausalLM": "hy_v4"}
GIB = 1 << 30


def _case(rng: random.Random, arch: str) -> tuple[dict[str, Any], dict[str, Any]]:
    saved = FAMILIES[_ARCHS[arch]](rng).saved(rng.random() < 0.3)
    saved["architectures"] = [arch]
    pick = rng.random()
    if pick < 0.15:  # yarn RoPE: vLLM renames it deepseek_yarn and reads its factor
        rope: dict[str, Any] = {"rope_type": "yarn", "rope_theta": 10000.0, "mscale_all_dim": rng.choice([0, 1.0]),
                                "factor": rng.choice([1.0, 4.0, 40.0])}  # transformers requires the factor
        if rng.random() < 0.2:
            rope["attention_factor"] = 1.0
        saved["rope_parameters"] = rope
        if rng.random() < 0.4:  # as released configs write it (DeepSeek-V3.2): the legacy key, its "type"
            del saved["rope_parameters"]
            saved["rope_scaling"] = {("type" if k == "rope_type" else k): x for k, x in rope.items() if k != "rope_theta"}
    elif pick < 0.2:
        saved["index_topk_freq"] = rng.choice([None, 0, -2])
    elif pick < 0.25:
        saved["index_topk_pattern"] = rng.choice(["", "SSF", "F" * 3 + "S" * 5])
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    return saved, engine


def test_dsa_models_read_as_vllm_builds_them() -> None:
    rng = random.Random("vllm-dsa")
    cases = [_case(rng, arch) for arch in _ARCHS for _ in range(N)]
    counts, mismatches = _compare(rng, cases)
    print(f"\nvLLM DSA reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 4 * N, counts


def test_dsa_layers_are_planned_as_vllms_planner_plans_them() -> None:
    """The reader's layers through both planners: one uniform-type group of every latent and
    indexer page, 64-token blocks."""
    oracle = vo.load()
    rng = random.Random("vllm-dsa-plan")
    planned = 0
    for arch in _ARCHS:
        for _ in range(6):
            saved, engine = _case(rng, arch)
            engine["tp"] = 1
            try:
                layers = layers_from_hf_config(saved, vllm.EngineConfig(**engine))
            except InvalidConfigError:
                continue
            theirs = plan_both(oracle, layers, rng.choice([GIB, 20 * GIB, 60 * GIB]), engine)
            if theirs is not None and theirs["ok"]:
                planned += 1
                assert [g["spec"] for g in theirs["groups"]] == ["UniformTypeKVCacheSpecs"], theirs["groups"]
                assert theirs["cache_block_size"] == DSA_BLOCK_SIZE
    assert planned >= 4, planned


def _v32(**kw: Any) -> dict[str, Any]:
    import transformers as T

    return {**T.DeepseekV32Config(num_hidden_layers=4, **kw).to_dict(), "architectures": ["DeepseekV32ForCausalLM"]}


_MTP = vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1)
_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 1,
          "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}  # fmt: skip


def test_dsa_indexer_layers_and_their_rows() -> None:
    layers = layers_from_hf_config(_v32(), vllm.EngineConfig())
    assert [x.kind for x in layers] == ["mla_indexer", "mla"] * 4
    assert layers[0].name == "model.layers.0.self_attn.indexer.k_cache"
    assert layers[1].name == "model.layers.0.self_attn.attn"
    assert {x.head_size for x in layers} == {128 + 4, 512 + 64}  # fp8 keys + one fp32 scale; the latent
    assert {x.block_size for x in layers} == {DSA_BLOCK_SIZE}
    # IndexCache: every other layer from layer 1 on shares the top-k of the layer before
    skipped = layers_from_hf_config(_v32(index_topk_freq=2), vllm.EngineConfig())
    assert [x.name.split(".")[2] for x in skipped if x.kind == "mla_indexer"] == ["0", "1", "3"]


@pytest.mark.parametrize("kw, key", [
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),  # the sparse MLA backend (per GPU) rewrites it
    ({"engine": vllm.EngineConfig(block_size=32)}, "block_size"),  # the indexer backend takes 64 only
    ({"engine": _MTP, "draft_kv_cache_dtype": "fp8"}, "draft_kv_cache_dtype"),  # the drafter's: the same rule
    ({"engine": replace(_MTP, draft_kv_cache_dtype="fp8")}, "draft_kv_cache_dtype"),  # what the planner applies
    ({"engine": replace(_MTP, num_speculative_tokens=3), "nextn": 2}, "num_speculative_tokens"),  # vLLM's check
    ({"engine": replace(_MTP, speculative_method="eagle3"), "draft": _LLAMA}, "architectures"),  # EAGLE: not checked
    ({"engine": _MTP, "model_type": "deepseek_v3"}, "model_type"),  # vLLM builds DeepSeekMTP (deepseek_v2's layers)
])  # fmt: skip
def test_dsa_refuses_what_the_gpu_decides_or_kvbudget_has_not_checked(kw: dict[str, Any], key: str) -> None:
    kw = dict(kw)
    engine = kw.pop("engine", vllm.EngineConfig())
    cfg = {**_v32(), "num_nextn_predict_layers": kw.pop("nextn", 1), "model_type": kw.pop("model_type", "deepseek_v32")}
    with pytest.raises(InvalidConfigError) as e:
        layers_from_hf_config(cfg, engine, **kw)
    assert e.value.key == key, e.value


def test_hy_v4_indexers_sit_on_its_full_indexer_layers_only() -> None:
    """transformers' ``HYV4Config`` defaults: every layer sparse, an indexer on layer 0 and every
    fourth from layer 1 (the others share its top-k); without a sparse layer kind, DeepSeek's dense
    MLA at the engine's block size."""
    import transformers as T

    saved = {**T.HYV4Config(num_hidden_layers=6).to_dict(), "architectures": ["HYV4ForCausalLM"]}
    layers = layers_from_hf_config(saved, vllm.EngineConfig())
    assert [x.name.split(".")[2] for x in layers if x.kind == "mla_indexer"] == ["0", "1", "5"]
    dense = layers_from_hf_config({**saved, "layer_types": ["full_attention"] * 6}, vllm.EngineConfig(),
                                  kv_cache_dtype="fp8")  # fmt: skip
    assert {(x.kind, x.block_size) for x in dense} == {("mla", None)}
    with pytest.raises(InvalidConfigError, match="HYV4MTP") as e:  # its MTP drafter: not read
        layers_from_hf_config({**saved, "num_nextn_predict_layers": 1}, _MTP)
    assert e.value.key == "architectures"


_MTP_ARCHS = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM")


def _mtp_case(rng: random.Random, arch: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A DSA case of :func:`_case` with the MTP drafter: the checkpoint's ``num_nextn_predict_layers``
    (transformers' classes have none: a few left out, null or 0, all refused), ``num_speculative_tokens``,
    and a drafter / target KV dtype of the three planned."""
    saved, engine = _case(rng, arch)
    pick = rng.random()
    if pick < 0.9:
        saved["num_nextn_predict_layers"] = rng.choice([1, 1, 2, 3])
    elif pick < 0.95:
        saved["num_nextn_predict_layers"] = rng.choice([0, None])
    engine.update(speculative_method="mtp", num_speculative_tokens=rng.choice([1, 1, 2, 3, 4, 6]))
    if rng.random() < 0.4:
        engine["draft_kv_cache_dtype"] = rng.choice(DSA_KV_CACHE_DTYPES)
    if rng.random() < 0.3:
        engine["kv_cache_dtype"] = rng.choice(DSA_KV_CACHE_DTYPES)
    return saved, engine


def _drafter_dtypes(saved: dict[str, Any], engine: dict[str, Any]) -> set[tuple[Any, ...]]:
    """kvbudget's drafter layers of a case (none if refused) as (kind, KV dtype, block size): the
    oracle records no MLA dtype; kvbudget's must be the drafter's."""
    settings = dict(engine)
    kv = settings.pop("kv_cache_dtype", "auto")
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(**settings), kv_cache_dtype=kv)
    except InvalidConfigError:
        return set()
    return {(x.kind, x.kv_cache_dtype, x.block_size) for x in layers if x.is_draft}


def test_dsa_mtp_drafters_read_as_vllm_builds_them() -> None:
    """Every layer (name, kind, heads, rows, stage, ``is_draft``) of target and drafter equals the
    oracle's, refusals alike; the drafter's layers carry its KV dtype and 64-token blocks."""
    rng = random.Random("vllm-dsa-mtp")
    cases = [_mtp_case(rng, arch) for arch in _MTP_ARCHS for _ in range(M)]
    counts, mismatches = _compare(rng, cases)
    print(f"\nvLLM DSA MTP reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["drafter layers"] > 2 * M, counts
    for saved, engine in cases:
        dtype = engine.get("draft_kv_cache_dtype") or engine.get("kv_cache_dtype", "auto")
        assert _drafter_dtypes(saved, engine) <= {(k, dtype, DSA_BLOCK_SIZE) for k in ("mla", "mla_indexer")}


def test_dsa_mtp_drafters_are_planned_as_vllms_planner_plans_them() -> None:
    """Target and drafter layers (their KV dtypes apart or not) through both planners: one
    uniform-type group of every page, 64-token blocks; ``num_nextn_predict_layers`` given to both."""
    oracle = vo.load()
    rng = random.Random("vllm-dsa-mtp-plan")
    planned = drafted = 0
    for arch in _MTP_ARCHS:
        for _ in range(8):
            saved, engine = _mtp_case(rng, arch)
            engine["tp"] = 1
            kv = engine.pop("kv_cache_dtype", "auto")
            if isinstance(saved.get("num_nextn_predict_layers"), int):
                engine["num_nextn_predict_layers"] = saved["num_nextn_predict_layers"]
            try:
                layers = layers_from_hf_config(saved, vllm.EngineConfig(**engine), kv_cache_dtype=kv)
            except InvalidConfigError:
                continue
            theirs = plan_both(oracle, layers, rng.choice([GIB, 20 * GIB, 60 * GIB]), engine)
            if theirs is not None and theirs["ok"]:
                planned += 1
                drafted += any(x.is_draft for x in layers)
                assert [g["spec"] for g in theirs["groups"]] == ["UniformTypeKVCacheSpecs"], theirs["groups"]
                assert theirs["cache_block_size"] == DSA_BLOCK_SIZE
    assert planned >= 6 and drafted == planned, (planned, drafted)


def test_dsa_mtp_layers_follow_the_target_and_keep_their_indexers() -> None:
    """DeepSeek-V3.2 with two MTP layers on two stages: the drafter's indexer and latent caches at
    ``model.layers.<n + j>`` on the last stage, an indexer on each even where the IndexCache rule
    skips it (layer 4 with ``index_topk_freq`` 2), and vLLM's ``plan`` of it end to end."""
    cfg = {**_v32(index_topk_freq=2), "num_nextn_predict_layers": 2}
    engine = vllm.EngineConfig(pp=2, speculative_method="mtp", num_speculative_tokens=4, num_nextn_predict_layers=2,
                               draft_kv_cache_dtype="fp8_ds_mla")  # fmt: skip
    layers = layers_from_hf_config(cfg, engine)
    drafter = [(x.name, x.kind, x.pp_stage, x.kv_cache_dtype) for x in layers if x.is_draft]
    assert drafter == [(f"model.layers.{i}.self_attn.{n}", k, 1, "fp8_ds_mla") for i in (4, 5)
                       for n, k in (("indexer.k_cache", "mla_indexer"), ("attn", "mla"))]  # fmt: skip
    assert [x.name.split(".")[2] for x in layers if x.kind == "mla_indexer" and not x.is_draft] == ["0", "1", "3"]
    plan = vllm.plan(layers, 8 * GIB, engine)
    # a page per layer in each 64-token block: bf16 latents (1152 bytes a token), indexer keys (132),
    # the drafter's fp8_ds_mla latents (656); stage 1 holds the drafter, so fewer blocks fit it
    assert plan.bytes_per_block == (64 * (2 * 1152 + 2 * 132), 64 * (2 * 1152 + 132 + 2 * (656 + 132)))
    assert plan.num_blocks == 8 * GIB // plan.bytes_per_block[1]
    dicts = [{k: v for k, v in vars(x).items() if v is not None} for x in layers]
    settings = {"pp": 2, "speculative_method": "mtp", "num_speculative_tokens": 4, "num_nextn_predict_layers": 2,
                "draft_kv_cache_dtype": "fp8_ds_mla"}  # fmt: skip
    theirs = vo.load().plan(dicts, 8 * GIB, settings)
    assert not compare(Ours.plan(dicts, 8 * GIB, settings), theirs) and theirs["num_blocks"] == plan.num_blocks
