"""DeepSeek-V4 (``DeepseekV4ForCausalLM``) in vLLM mode: :func:`kvbudget.vllm.deepseek_v4.deepseek_v4_caches`
held to vLLM 0.33.0's own classes, and ``layers_from_hf_config`` refusing what kvbudget's planner does not model.

The configs are built by transformers 5.19.0's ``DeepseekV4Config`` (the class vLLM loads them with, and the
census's) on seeded layer counts and kinds (the two compressed kinds, sometimes an uncompressed one),
compress rates (sometimes one vLLM's compressor asserts against), heads, head dims, index head dims,
windows and activations, under a seeded TP, PP, block size (16: vLLM's choice), KV dtype and model dtype.
The oracle (``tests/vllm_oracle/_hf_tables_deepseek_v4.py``) builds vLLM's model, decoder layers,
FlashMLA attention, indexer, compressors and caches from the wheel, picks the block as vLLM's platform does
after the build, and records each cache's spec class, fields and ``page_size_bytes`` (vLLM's spec classes).
Every field is compared; a refusal on one side only is a mismatch.
``KVBUDGET_VLLM_DEEPSEEK_V4_CASES`` sets the count.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from vllm_oracle._hf_lift import VllmLoadError
from vllm_differential import compare_readings
from vllm_oracle._hf_tables_deepseek_v4 import deepseek_v4_layers

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.deepseek_v4 import DEEPSEEK_V4, DeepseekV4Cache, deepseek_v4_caches
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_DEEPSEEK_V4_CASES", "150"))
_CSA, _HCA = "compressed_sparse_attention", "heavily_compressed_attention"
PLAIN = {"tp": 1, "pp": 1, "block_size": 16, "kv_cache_dtype": "auto", "model_dtype": "bfloat16"}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(1, 12)
    kinds = [rng.choice([_CSA, _HCA, _HCA, "sliding_attention"] if rng.random() < 0.2 else [_CSA, _HCA])
             for _ in range(n)]  # fmt: skip
    rates = {_CSA: 4, _HCA: 128}
    if rng.random() < 0.1:
        rates[rng.choice([_CSA, _HCA])] = rng.choice([2, 8, 64])
    kw: dict[str, Any] = {
        "num_hidden_layers": n, "layer_types": kinds, "mlp_layer_types": ["moe"] * n, "compress_rates": rates,
        "num_attention_heads": rng.choice([64, 64, 64, 128, 16, 256]),
        "head_dim": rng.choice([512, 512, 512, 512, 128, 256]), "index_head_dim": rng.choice([128] * 6 + [64]), "sliding_window": rng.choice([128, 128, 64, 512]),
        "hidden_act": "gelu" if rng.random() < 0.05 else "silu"}  # fmt: skip
    try:
        d = T.DeepseekV4Config(**kw).to_dict()
    except Exception:  # noqa: BLE001 - transformers' own refusal: the class defaults instead
        d = T.DeepseekV4Config().to_dict()
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3]),
              "block_size": rng.choice([16, 16, 256, 512]),
              "kv_cache_dtype": rng.choice(["auto", "auto", "auto", "fp8", "fp8_e5m2", "bfloat16"]),
              "model_dtype": rng.choice(["bfloat16", "bfloat16", "float16"])}  # fmt: skip
    return {**d, "architectures": [DEEPSEEK_V4]}, engine


def _ours(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        caches = deepseek_v4_caches(saved, vllm.EngineConfig(tp=e["tp"], pp=e["pp"], block_size=e["block_size"]),
                                    kv_cache_dtype=e["kv_cache_dtype"], model_dtype=e["model_dtype"])  # fmt: skip
    except InvalidConfigError as err:
        return f"refused: {err}"
    return [_record(x) for x in caches]


def _record(x: DeepseekV4Cache) -> dict[str, Any]:
    """The fields the oracle records, by vLLM's names (the layer's and the spec's own)."""
    layer = ("name", "pp_stage", "block_size", "num_kv_heads", "head_size", "head_size_v", "tokens_per_state",
             "sliding_window")  # fmt: skip
    spec = ("spec", "dtype", "kv_quant_mode", "page_size_bytes", "alignment", "state_content_bytes", "model_version",
            "cache_dtype_str", "block_stride_alignment", "max_tp_shards", "page_size_padded")  # fmt: skip
    return {**{n: getattr(x.layer, n) for n in layer}, **{n: getattr(x, n) for n in spec}}


def census_ours(saved: dict[str, Any], e: dict[str, Any]) -> list[Any] | str:
    """kvbudget's public reading (``layers_from_hf_config``), as the census runs it: refused by name."""
    try:
        return layers_from_hf_config(saved, vllm.EngineConfig(tp=e["tp"], pp=e["pp"], block_size=e["block_size"]),
                                     kv_cache_dtype=e["kv_cache_dtype"], model_dtype=e["model_dtype"])  # fmt: skip
    except InvalidConfigError as err:
        return f"refused: {err}"


def _theirs(saved: dict[str, Any], e: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        loaded = T.DeepseekV4Config.from_dict(dict(saved))
        return deepseek_v4_layers(loaded, tp=e["tp"], pp=e["pp"], model_dtype=e["model_dtype"],
                                  kv_cache_dtype=e["kv_cache_dtype"],
                                  block_size=None if e["block_size"] == 16 else e["block_size"])  # fmt: skip
    except VllmLoadError as err:
        return f"refused: {type(err).__name__}: {err}"


def _tally(counts: dict[str, int], records: list[dict[str, Any]]) -> None:
    counts["caches"] = counts.get("caches", 0) + len(records)


def test_deepseek_v4_read_as_vllm_builds_it() -> None:
    rng = random.Random("vllm-deepseek-v4")
    cases = [({**T.DeepseekV4Config().to_dict(), "architectures": [DEEPSEEK_V4]}, PLAIN)]
    cases += [_case(rng) for _ in range(N)]
    counts, mismatches = compare_readings(cases, _ours, _theirs, _tally)
    print(f"\nvLLM DeepSeek-V4 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:8])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 4, counts


def test_the_census_config() -> None:
    """transformers' defaults: vLLM accepts them (169 caches, 256-token blocks, fp8_ds_mla); kvbudget reads
    them the same, then refuses by name."""
    cfg = {**T.DeepseekV4Config().to_dict(), "architectures": [DEEPSEEK_V4]}
    caches = deepseek_v4_caches(cfg, vllm.EngineConfig())
    assert len(caches) == 169 and sum(x.spec == "SlidingWindowMLASpec" for x in caches) == 106
    by_name = {x.name: x for x in caches}
    assert [x.name for x in caches[9:14]] == [f"model.layers.3.attn{s}" for s in (
        ".indexer.k_cache", ".indexer.compressor.state_cache", ".swa_cache", "", ".compressor.state_cache")]
    pages = {s: by_name[f"model.layers.3.attn{s}"].page_size_bytes for s in (
        ".indexer.k_cache", ".indexer.compressor.state_cache", ".swa_cache", "", ".compressor.state_cache")}
    assert pages == {".indexer.k_cache": 8640, ".indexer.compressor.state_cache": 8640, ".swa_cache": 37440,
                     "": 37440, ".compressor.state_cache": 32832}  # fmt: skip
    assert (by_name["model.layers.0.attn"].page_size_bytes, by_name["model.layers.0.attn"].layer.block_size) == (1728, 256)
    with pytest.raises(InvalidConfigError, match="has not modelled vLLM 0.33.0's DeepSeek-V4 KV caches") as e:
        layers_from_hf_config(cfg, vllm.EngineConfig())
    assert e.value.key == "architectures"


@pytest.mark.parametrize("change, engine, match", [
    ({}, {"kv_cache_dtype": "bfloat16"}, "only supports fp8 kv-cache, got bfloat16"),
    ({"num_attention_heads": 256}, {}, "does not support 256 heads"),
    ({"head_dim": 256}, {}, "Unsupported head_dim for fused quant\\+cache: 256"),
    ({}, {"speculative_method": "mtp"}, "has not checked vLLM 0.33.0's drafters"),
    ({}, {"block_size": 64}, "outside multiples of 256"),
])  # fmt: skip
def test_refusals(change: dict[str, Any], engine: dict[str, Any], match: str) -> None:
    cfg = {**T.DeepseekV4Config().to_dict(), **change, "architectures": [DEEPSEEK_V4]}
    kv = engine.pop("kv_cache_dtype", "auto")
    with pytest.raises(InvalidConfigError, match=match):
        layers_from_hf_config(cfg, vllm.EngineConfig(**engine), kv_cache_dtype=kv)
