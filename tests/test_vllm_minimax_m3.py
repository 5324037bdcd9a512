"""``kvbudget.vllm.layers_from_hf_config`` on MiniMax-M3 (``MiniMaxM3SparseForConditionalGeneration``, and
``MiniMaxM3SparseForCausalLM`` on a ``minimax_m3_vl`` config that names it), held to vLLM 0.33.0's own
reading (:mod:`kvbudget.vllm.minimax_m3`); then its layers planned by kvbudget and by vLLM's own planner.

The configs are built by transformers' ``MiniMaxM3VLConfig`` (the class the census uses) on seeded layer
counts, heads, KV heads, head dims and expert counts, then mostly given what released checkpoints write
and that class drops or rewrites (``sparse_attention_config``: a seeded ``sparse_attention_freq``
pattern, index heads and dims, or a key missing; ``moe_layer_freq``; ``hidden_act`` ``swigluoai``), the
rest left as transformers saves them (vLLM refuses those: its MLP's activation check); saved whole or
with text keys dropped (vLLM's own class defaults then), under a seeded TP, PP, model dtype, KV dtype
and block size (16: "not set"; 128 and 256; 64, which the sparse backends refuse). The oracle
(``tests/vllm_oracle``) loads each with vLLM's own ``MiniMaxM3Config`` and builds vLLM's
``MiniMaxM3SparseForCausalLM`` / ``MiniMaxM3Model`` / ``MiniMaxM3DecoderLayer`` and both attention classes,
the MoE and MLP checks, ``MiniMaxM3Indexer`` and ``MiniMaxM3IndexerCache``, and the indexer builder's
startup asserts. Every layer's name, kind, stage, heads, head sizes, KV dtype, indexer dtype and block
size are compared: the block size against what vLLM's platform picks over the backends each stage's
built layers report (``Platform._preferred_block_size_for_backends``), or, for a block the user gave,
the kernel block its worker takes in it (``select_common_block_size``: its refusal is vLLM's), both
lifted. A refusal on one side only is a mismatch. ``KVBUDGET_VLLM_MINIMAX_M3_CASES`` sets the count.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from huggingface_hub.errors import StrictDataclassError
import vllm_oracle as vo
from vllm_differential import plan_both
from vllm_oracle._hf import VllmLoadError, vllm_config_class, vllm_layers, vllm_model_type
from vllm_oracle._hf_tables_minimax_m3 import FLASH_ATTN, platform_block_size, worker_block_size

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.minimax_m3 import MINIMAX_M3, MINIMAX_M3_BLOCK_SIZE, MINIMAX_M3_KV_CACHE_DTYPES, MINIMAX_M3_TEXT
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_MINIMAX_M3_CASES", "100"))
GIB = 1 << 30
_FIELDS = ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype", "indexer_dtype", "block_size",
           "is_draft", "pp_stage")  # fmt: skip
#: The text keys the cases may drop (vLLM's MiniMaxM3TextConfig then gives its own default).
_DROPPABLE = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
              "num_local_experts")  # fmt: skip


def _sparse_config(rng: random.Random, n: int) -> dict[str, Any] | None:
    """A released checkpoint's ``sparse_attention_config`` (seeded pattern and dims), or none."""
    if rng.random() < 0.1:
        return None  # vLLM's class default: layers 3..59 sparse
    freq = rng.choice([[0] * 3 + [1] * (n - 3), [rng.choice([0, 1, 1]) for _ in range(n)], [0] * n,
                       [1] * rng.randint(0, n + 2)])  # fmt: skip
    sparse: dict[str, Any] = {"use_sparse_attention": True, "sparse_index_dim": rng.choice([64, 128, 128]),
                              "sparse_num_index_heads": rng.choice([1, 2, 4, 4, 8]),
                              "sparse_topk_blocks": rng.choice([8, 16, 16, 32]), "sparse_block_size": 128,
                              "sparse_init_block": 0, "sparse_local_block": 1, "sparse_score_type": "max",
                              "sparse_attention_freq": freq}  # fmt: skip
    if rng.random() < 0.04:
        del sparse[rng.choice(["sparse_index_dim", "sparse_num_index_heads", "sparse_topk_blocks",
                               "sparse_block_size"])]  # fmt: skip
    if rng.random() < 0.05:
        del sparse["sparse_attention_freq"]  # no sparse layer
    return sparse


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(1, 24)
    odd = rng.random() < 0.05  # 12 heads, 3 KV heads: some TP sizes do not shard them (refused)
    heads = 12 if odd else rng.choice([8, 16, 32, 32, 64])
    text: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 64,
                            "num_key_value_heads": 3 if odd else rng.choice([1, 2, 4, 4, 8]), "head_dim": rng.choice([64, 128, 128]),
                            "num_local_experts": rng.choice([4, 32, 128])}  # fmt: skip
    d = T.MiniMaxM3VLConfig(text_config=text).to_dict()
    saved = d["text_config"]
    if rng.random() < 0.88:  # what a released checkpoint writes and transformers' class drops or rewrites
        saved.update(hidden_act="swigluoai", sparse_attention_config=_sparse_config(rng, n))
        if rng.random() < 0.7:
            dense = min(n, rng.choice([0, 1, 3]))
            saved["moe_layer_freq"] = ([0] * dense + [1] * (n - dense))[: n if rng.random() < 0.9 else n - 1]
        if rng.random() < 0.5:  # released configs carry neither of transformers' lists
            del saved["layer_types"], saved["mlp_layer_types"]
        if rng.random() < 0.2:
            saved["n_shared_experts"] = 0
    if rng.random() < 0.4:  # sparse: vLLM's own class defaults (not transformers') for what is absent
        for key in rng.sample(_DROPPABLE, rng.randint(1, 3)):
            saved.pop(key, None)
    if rng.random() < 0.02:
        saved["hidden_size"] = None  # the wrapper asserts it
    arch = MINIMAX_M3 if rng.random() < 0.85 else MINIMAX_M3_TEXT
    engine = {"tp": 3 if rng.random() < 0.05 else rng.choice([1, 1, 2, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
              "block_size": rng.choice([16, 16, 16, 16, 128, 256, 64]),
              "kv_cache_dtype": rng.choice([*MINIMAX_M3_KV_CACHE_DTYPES, "auto", "auto", "nvfp4"])}  # fmt: skip
    return {**d, "architectures": [arch]}, engine


def _ours(saved: dict[str, Any], engine: dict[str, Any], dtype: str) -> list[dict[str, Any]] | str:
    settings = dict(engine)
    kv = settings.pop("kv_cache_dtype")
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(**settings), kv_cache_dtype=kv, model_dtype=dtype)
    except InvalidConfigError as e:
        return f"refused: {e}"
    return [{"name": x.name, "kind": x.kind, "num_kv_heads": x.num_kv_heads, "head_size": x.head_size,
             "head_size_v": None if x.kind == "key_indexer" else x.head_size_v or x.head_size,
             "kv_cache_dtype": x.kv_cache_dtype if x.kind == "full" else None,
             "indexer_dtype": x.indexer_dtype if x.kind == "key_indexer" else None,
             "block_size": x.block_size or engine["block_size"], "is_draft": x.is_draft, "pp_stage": x.pp_stage}
            for x in layers]  # fmt: skip


def _theirs(saved: dict[str, Any], engine: dict[str, Any], dtype: str) -> list[dict[str, Any]] | str:
    try:
        loaded = vllm_config_class(vllm_model_type(saved)).from_dict(dict(saved))
    except StrictDataclassError as e:  # the config class's validators (transformers' layer_types check)
        return f"refused: {type(e).__name__}: {e}"
    try:
        layers = vllm_layers(loaded, tp=engine["tp"], pp=engine["pp"], model_dtype=dtype,
                             kv_cache_dtype=engine["kv_cache_dtype"])  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"
    blocks: dict[int, int] = {}
    for stage in range(engine["pp"]):  # each worker's block size, over the backends its layers report
        backends = [x.get("backend", FLASH_ATTN) for x in layers if x["pp_stage"] == stage]
        if not backends:
            continue
        if engine["block_size"] == 16:  # not given: the platform's choice
            blocks[stage] = platform_block_size(backends)
            continue
        try:  # given: kept, if the backends have a kernel block inside it
            worker_block_size(engine["block_size"], backends)
        except ValueError as e:
            return f"refused: {e}"
        blocks[stage] = engine["block_size"]
    return [{**{k: x.get(k) for k in _FIELDS}, "block_size": blocks[x["pp_stage"]]} for x in layers]


def _compare(rng: random.Random, cases: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[dict[str, int], list[str]]:
    counts = {"compared": 0, "refused": 0, "sparse models": 0, "attention layers": 0, "indexer layers": 0}
    mismatches: list[str] = []
    for i, (saved, engine) in enumerate(cases):
        dtype = rng.choice(["bfloat16", "float16"])
        ours, theirs = _ours(saved, engine, dtype), _theirs(saved, engine, dtype)
        counts["compared"] += 1
        if isinstance(ours, str) or isinstance(theirs, str):
            if isinstance(ours, str) != isinstance(theirs, str):
                mismatches.append(f"case {i} ({saved['architectures'][0]}, {engine}): kvbudget {str(ours)[:240]} "
                                  f"vs vLLM {str(theirs)[:240]}")  # fmt: skip
            counts["refused"] += 1
            continue
        indexers = sum(x["kind"] == "key_indexer" for x in theirs)
        counts["sparse models"] += indexers > 0
        counts["indexer layers"] += indexers
        counts["attention layers"] += len(theirs) - indexers
        if ours != theirs:
            diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)} layers")
            mismatches.append(f"case {i} ({saved['architectures'][0]}, {engine}): {diff}")
    return counts, mismatches


def _default() -> dict[str, Any]:
    return {**T.MiniMaxM3VLConfig().to_dict(), "architectures": [MINIMAX_M3]}


def test_minimax_m3_read_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-minimax-m3")
    plain = {"tp": 1, "pp": 1, "block_size": 16, "kv_cache_dtype": "auto"}
    checkpoint = _default()
    checkpoint["text_config"]["hidden_act"] = "swigluoai"  # as the released config.json declares it
    cases = [(_default(), plain), (checkpoint, plain), (checkpoint, {**plain, "tp": 4, "pp": 2})]
    counts, mismatches = _compare(rng, cases + [_case(rng) for _ in range(N)])
    print(f"\nvLLM MiniMax-M3 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 2 // 3, counts  # about half: each refusal is drawn
    assert counts["sparse models"] > N // 5 and counts["indexer layers"] > 2 * N, counts


def test_minimax_m3_layers_are_planned_as_vllms_planner_plans_them() -> None:
    """The reader's layers through both planners: the dense and sparse layers' full-attention pages
    and the indexer's key pages, in 128-token blocks (or the user's) or a multiple of them."""
    oracle = vo.load()
    rng = random.Random("vllm-minimax-m3-plan")
    planned = 0
    for _ in range(80):
        saved, engine = _case(rng)
        kv = engine.pop("kv_cache_dtype")
        try:
            layers = layers_from_hf_config(saved, vllm.EngineConfig(**engine), kv_cache_dtype=kv)
        except InvalidConfigError:
            continue
        if not any(x.kind == "key_indexer" for x in layers):
            continue
        theirs = plan_both(oracle, layers, rng.choice([GIB, 20 * GIB, 60 * GIB]), engine)
        if theirs is not None and theirs["ok"]:
            planned += 1
            block = MINIMAX_M3_BLOCK_SIZE if engine["block_size"] == 16 else engine["block_size"]
            indexed = [g for g in theirs["groups"] if any(n.endswith(".index_cache") for n in g["layers"])]
            # a group of the (smaller) indexer pages takes a multiple, vLLM's page unification
            assert indexed and all(g["block_size"] % block == 0 for g in indexed), theirs["groups"]
    assert planned >= 10, planned


def _config(n: int = 5, **sparse: Any) -> dict[str, Any]:
    """A 5-layer checkpoint: layers 3 and 4 sparse (the released pattern), ``sparse`` over its keys."""
    d = {**T.MiniMaxM3VLConfig(text_config={"num_hidden_layers": n}).to_dict(), "architectures": [MINIMAX_M3]}
    d["text_config"].update(hidden_act="swigluoai", moe_layer_freq=[0] * 3 + [1] * (n - 3),
                            sparse_attention_config={"sparse_index_dim": 128, "sparse_num_index_heads": 4,
                                                     "sparse_topk_blocks": 16, "sparse_block_size": 128,
                                                     "sparse_attention_freq": [0] * 3 + [1] * (n - 3), **sparse})
    return d


def test_minimax_m3_indexer_caches_come_before_their_sparse_layers() -> None:
    layers = layers_from_hf_config(_config(), vllm.EngineConfig(tp=2))
    assert [x.kind for x in layers] == ["full"] * 3 + ["key_indexer", "full"] * 2
    assert layers[3].name == "language_model.model.layers.3.self_attn.attn.index_cache"
    assert layers[4].name == "language_model.model.layers.3.self_attn.attn"
    assert (layers[3].num_kv_heads, layers[3].head_size, layers[3].indexer_dtype) == (1, 128, "bfloat16")
    assert (layers[4].num_kv_heads, layers[4].head_size) == (2, 128)
    assert {x.block_size for x in layers} == {MINIMAX_M3_BLOCK_SIZE}
    text = layers_from_hf_config({**_config(), "architectures": [MINIMAX_M3_TEXT]}, vllm.EngineConfig())
    assert text[0].name == "model.layers.0.self_attn.attn"
    # a block the user gave that holds 128-token kernel blocks is vLLM's block: the layers keep the engine's
    assert {x.block_size for x in layers_from_hf_config(_config(), vllm.EngineConfig(block_size=256))} == {None}
    # no sparse layer: plain attention at the engine's block size, whatever the KV dtype
    dense = layers_from_hf_config(_config(sparse_attention_freq=[0] * 5), vllm.EngineConfig(), kv_cache_dtype="fp8_e5m2")
    assert {(x.kind, x.block_size) for x in dense} == {("full", None)}


@pytest.mark.parametrize("kw, key", [
    ({"kv_cache_dtype": "nvfp4"}, "kv_cache_dtype"),  # only Blackwell's MSA stores it, repacked
    ({"kv_cache_dtype": "fp8_e5m2"}, "kv_cache_dtype"),  # not checked
    ({"engine": vllm.EngineConfig(block_size=64)}, "block_size"),  # the sparse backends take 128 only
    ({"engine": vllm.EngineConfig(dcp=2)}, "dcp"),  # not checked
    ({"engine": vllm.EngineConfig(speculative_method="mtp")}, "architectures"),  # MiniMax-M3's MTP: not checked
    ({"engine": vllm.EngineConfig(tp=8), "index_heads": 3}, "text_config.sparse_attention_config."
                                                            "sparse_num_index_heads"),  # the builder's assert
])  # fmt: skip
def test_minimax_m3_refuses_what_the_gpu_decides_or_kvbudget_has_not_checked(kw: dict[str, Any], key: str) -> None:
    engine = kw.pop("engine", vllm.EngineConfig())
    cfg = _config(sparse_num_index_heads=kw.pop("index_heads", 4))
    with pytest.raises(InvalidConfigError) as e:
        layers_from_hf_config(cfg, engine, **kw)
    assert e.value.key == key, e.value
