"""Seeded random vLLM deployments for the vLLM-mode differential (tests/test_vllm_plan.py).

A deployment is ``(layers, available, engine)`` in the oracle's forms
(tests/vllm_oracle): per-layer dicts in registration order (the target, then
the drafter on the last PP stage), one budget for every worker or one per
worker, and engine settings. The draws cover dense and hybrid targets (sliding
and chunked layers, MLA), drafters of the target's geometry and of others
(EAGLE heads, draft models, a sliding drafter layer), PP up to 3 with
per-worker budgets, block sizes, dtypes, ``--max-model-len auto``, the block
override, ``kv_cache_memory_bytes``, the hybrid manager off, budgets too small
to start, Inkling's conv states (per-layer sliding layers of their own small block),
compressed caches (``tokens_per_state`` above 1) and Qwen4-Exp's QSA caches (a
compressed MLA key cache and a circular buffer beside a layer's attention).
"""

from __future__ import annotations

import random
from typing import Any

Deployment = tuple[list[dict[str, Any]], Any, dict[str, Any]]

GIB = 1 << 30
DIMS = (64, 80, 96, 128, 128, 256)
DTYPES = ("auto", "auto", "auto", "fp8", "fp8_e4m3", "fp8_e5m2")
MODEL_DTYPES = ("bfloat16", "bfloat16", "float16", "float32")


def _target(r: random.Random) -> list[dict[str, Any]]:
    n = r.choice((r.randint(1, 8), r.randint(1, 64), 62, 36, 48))
    shape = r.random()
    heads, dim = r.choice((1, 2, 4, 8, 16)), r.choice(DIMS)
    common: dict[str, Any] = {"num_kv_heads": heads, "head_size": dim, "kv_cache_dtype": r.choice(DTYPES),
                              "model_dtype": r.choice(MODEL_DTYPES)}  # fmt: skip
    if r.random() < 0.2:
        common["head_size_v"] = r.choice(DIMS)
    if shape < 0.15:  # MLA (DeepSeek-style): one latent head
        mla = {"kind": "mla", "num_kv_heads": 1, "head_size": r.choice((576, 512, 320)),
               "kv_cache_dtype": r.choice(("auto", "auto", "fp8", "fp8_ds_mla")), "model_dtype": "bfloat16"}  # fmt: skip
        layers = [dict(mla) for _ in range(n)]
        if r.random() < 0.3:  # MLA with sliding layers (the fallback, or an error)
            for i in range(0, n, r.choice((2, 3, 4))):
                layers[i] = {**common, "kind": "sliding", "sliding_window": r.choice((128, 512, 4096))}
    elif shape < 0.4:  # dense
        layers = [{**common, "kind": "full"} for _ in range(n)]
        if r.random() < 0.15:  # encoder-decoder (Whisper): each layer's cross-attention after it
            layers = [x for layer in layers for x in (layer, {**layer, "kind": "cross"})]
    else:  # hybrid: full every k-th layer, local elsewhere
        k = r.choice((2, 4, 6, 6, 5))
        local: dict[str, Any]
        if r.random() < 0.2:
            local = {"kind": "chunked", "attention_chunk_size": r.choice((2048, 8192))}
        else:
            local = {"kind": "sliding", "sliding_window": r.choice((128, 512, 1024, 4096))}
        layers = [{**common, "kind": "full"} if i % k == k - 1 else {**common, **local} for i in range(n)]
        if r.random() < 0.15:  # other geometry on the local layers (Gemma-4-like)
            other = {"num_kv_heads": r.choice((2, 4, 8)), "head_size": r.choice(DIMS)}
            layers = [x if x["kind"] == "full" else {**x, **other} for x in layers]
    for i, x in enumerate(layers):
        x["name"] = f"model.layers.{i}.self_attn.attn"
    if shape < 0.15 and all(x["kind"] == "mla" for x in layers) and r.random() < 0.5:
        # DeepSeek sparse attention: an indexer key cache (one head of uint8 rows, registered
        # before its layer's MLA) on the layers that keep one (every freq-th; freq 1: all)
        freq, width = r.choice((1, 1, 2, 4)), r.choice((132, 132, 66, 264))
        dsa: list[dict[str, Any]] = []
        for i, x in enumerate(layers):
            if i % freq == 0:
                dsa.append({"kind": "mla_indexer", "num_kv_heads": 1, "head_size": width,
                            "name": f"model.layers.{i}.self_attn.indexer.k_cache"})  # fmt: skip
            dsa.append(x)
        layers = dsa
    if 0.15 <= shape < 0.4 and all(x["kind"] == "full" for x in layers) and r.random() < 0.25:
        # MiniMax-M3's sparse layers: an indexer key cache of its own dtype and no TP-shard cap,
        # registered before the layer's attention, on every layer or on all but a few dense ones
        dense = r.choice((0, 0, 1, 3))
        out: list[dict[str, Any]] = []
        for i, x in enumerate(layers):
            if i >= dense:
                out.append({"kind": "key_indexer", "num_kv_heads": 1, "head_size": r.choice((128, 128, 64)),
                            "indexer_dtype": r.choice(("bfloat16", "bfloat16", "float8_e4m3fn")),
                            "name": f"model.layers.{i}.self_attn.attn.indexer"})  # fmt: skip
            out.append(x)
        layers = out
    return layers


def _drafter(r: random.Random, target: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pick = r.random()
    full = next((x for x in target if x["kind"] in ("full", "mla")), target[0])
    if pick < 0.35:
        return []
    if pick < 0.6:  # an EAGLE head of the target's geometry, full attention (MLA for MLA)
        out = [{k: v for k, v in full.items() if k not in ("name", "sliding_window", "attention_chunk_size")}]
        if out[0]["kind"] != "mla":
            out[0]["kind"] = "full"
    elif pick < 0.75:  # an EAGLE head of another geometry
        out = [{**full, "kind": "full", "num_kv_heads": r.choice((2, 4, 8)), "head_size": r.choice(DIMS)}]
    elif pick < 0.85:  # a sliding drafter layer
        out = [{**full, "kind": "sliding", "sliding_window": r.choice((128, 1024))}]
    else:  # a draft model of a few layers, its own geometry
        geo = {"kind": "full", "num_kv_heads": r.choice((2, 8)), "head_size": r.choice(DIMS),
               "kv_cache_dtype": full.get("kv_cache_dtype", "auto") if full["kind"] != "mla" else "auto",
               "model_dtype": "bfloat16"}  # fmt: skip
        out = [dict(geo) for _ in range(r.choice((1, 2, 4, 16)))]
    for x in out:
        x.pop("name", None)
        if x["kind"] != "chunked":
            x.pop("attention_chunk_size", None)
        if x["kind"] != "sliding":
            x.pop("sliding_window", None)
        if x["kind"] != "mla" and full["kind"] == "mla":  # an MLA target's head of another kind
            x.update(num_kv_heads=r.choice((2, 8)), head_size=r.choice(DIMS), kv_cache_dtype="auto")
    for j, x in enumerate(out):
        x.update(name=f"drafter.layers.{j}.self_attn.attn", is_draft=True)
    return out


def assign_stages(layers: list[dict[str, Any]], drafter: list[dict[str, Any]], pp: int) -> None:
    """Splits the target's layers over ``pp`` stages as evenly as vLLM does (the first stages
    take one more); the drafter sits on the last."""
    base, extra = divmod(len(layers), pp)
    stages = [s for s in range(pp) for _ in range(base + (1 if s < extra else 0))]
    for x, s in zip(layers, stages):
        x["pp_stage"] = s
    for x in drafter:
        x["pp_stage"] = pp - 1


def budgets(r: random.Random, scale: int, pp: int, workers: int) -> Any:
    """Budgets around ``scale`` bytes: one for every worker, one per stage, or one per worker."""
    if r.random() < 0.5:
        return int(scale * r.uniform(0.5, 1.5))
    if r.random() < 0.5:
        return [int(scale * r.uniform(0.5, 1.5)) for _ in range(pp)]
    return [int(scale * r.uniform(0.5, 1.5)) for _ in range(workers)]


def deployment(seed: int) -> Deployment:
    """The deployment of ``seed``."""
    r = random.Random(seed)
    layers = _target(r)
    drafter = _drafter(r, layers)
    pp = r.choice((1, 1, 1, 2, 3)) if len(layers) >= 3 else 1
    tp = r.choice((1, 1, 1, 1, 2, 2, 4, 8))  # TP repeats a stage's plan per rank: the oracle's cost
    assign_stages(layers, drafter, pp)
    block = r.choice((16, 16, 16, 32, 64))
    engine: dict[str, Any] = {"block_size": block, "tp": tp, "pp": pp,
                              "max_num_batched_tokens": r.choice((2048, 8192, 8192, 16384)),
                              "async_scheduling": r.random() < 0.8, "use_v2_model_runner": r.random() < 0.8}  # fmt: skip
    m = r.random()
    if m < 0.15:
        engine.update(max_model_len="auto", derived_max_model_len=r.choice((32768, 131072, 262144)))
    else:
        engine["max_model_len"] = r.choice((2048, 8192, 32768, 131072, r.randint(1, 200_000)))
    if r.random() < 0.1:
        engine["num_gpu_blocks_override"] = r.choice((1, 64, 4096, r.randint(2, 100_000)))
    if r.random() < 0.15:
        engine["disable_hybrid_kv_cache_manager"] = True
    if drafter:
        method = r.choice(("eagle", "eagle3", "mtp", "draft_model"))
        engine.update(speculative_method=method, num_speculative_tokens=r.choice((1, 3, 4)))
        if method == "mtp":
            engine["num_nextn_predict_layers"] = r.choice((1, 1, 3))
    scale = r.choice((GIB // 64, GIB, 8 * GIB, 30 * GIB, 70 * GIB))
    available = budgets(r, scale, pp, pp * tp)
    if drafter and r.random() < 0.3:  # speculative_config.kv_cache_dtype (drawn last: the draws above stay)
        engine["draft_kv_cache_dtype"] = r.choice(("fp8", "auto", "bfloat16", "fp8_e5m2"))
    if r.random() < 0.1:  # --kv-cache-memory-bytes (0: measure); drawn last, the draws above stay
        engine["kv_cache_memory_bytes"] = r.choice((0, int(scale * r.uniform(0.5, 1.5))))
    if r.random() < 0.08 and all(x["kind"] in ("full", "sliding", "chunked") for x in layers):
        layers = _conv_states(r, layers)  # drawn last too
    attention = all(x["kind"] in ("full", "sliding", "chunked") for x in layers)
    dense = all(x["kind"] == "full" for x in layers)
    compressed = r.random() < (0.25 if any(x["kind"] in ("mla", "mla_indexer") for x in layers) else 0.03)
    if compressed:  # drawn last too, as are QSA's caches
        layers = _compressed(r, layers)
    elif attention and r.random() < (0.06 if dense else 0.015):
        layers, compressed = _qsa(r, layers, engine.get("num_speculative_tokens") or 0), True
    if compressed and r.random() < 0.2:
        engine["enable_prefix_caching"] = False  # vLLM then checks no prefix-cache alignment
    draw_layout(r, engine, 0.5 if compressed else 0.2)
    return layers + drafter, available, engine


def draw_layout(r: random.Random, engine: dict[str, Any], block_outer: float) -> None:
    """The resolved KV layout (drawn last: the draws before it stay): a block-outer one with
    probability ``block_outer`` (grouping case 3 where pages differ), another layer-outer one
    with 0.05 (which vLLM refuses for mixed pages in several groups), else the default."""
    x = r.random()
    if x < block_outer:
        engine["kv_cache_layout"] = r.choice(("BLHNC", "BLNHC", "BLNHC", "BHLNC"))
    elif x < block_outer + 0.05:
        engine["kv_cache_layout"] = r.choice(("LBHNC", "LHBNC"))


def _compressed(r: random.Random, layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Caches of several tokens per stored state (``tokens_per_state``: DeepSeek-V4's compressed
    latents, GLM-5-Next's kpool indexer keys) on the layers of one kind, every one or every other,
    whatever the kind (vLLM's ``AttentionSpec`` takes it on any); layers of their own small block
    (conv states) keep one token per state."""
    kind = r.choice(sorted({x["kind"] for x in layers if "block_size" not in x}))
    ratio, step = r.choice((2, 3, 4, 4, 8)), r.choice((1, 1, 2))
    chosen = [i for i, x in enumerate(layers) if x["kind"] == kind and "block_size" not in x][::step]
    return [{**x, "tokens_per_state": ratio} if i in chosen else x for i, x in enumerate(layers)]


def _qsa(r: random.Random, layers: list[dict[str, Any]], num_spec: int) -> list[dict[str, Any]]:
    """Qwen4-Exp's QSA caches (``qsa_cache.py``) beside a layer's attention (all before it or all
    after it): the raw keys' ring (``QSAKeyStateCache``: a circular buffer of one bf16 head, no V
    part, MRoPE positions packed after the key or not, ``block_size`` its capacity) and the
    compressed keys (``QSACompressedKeyCache``: one bf16 head, ``tokens_per_state`` the ratio, here
    an ``mla`` layer), on every full-attention layer or every layer. The ratio divides the block
    size, as QSA requires; its ring holds the ratio and the ``num_spec`` speculative tokens rounded
    up to whole groups, and other capacities (at least the ratio) are drawn too."""
    ratio, head = r.choice((2, 4, 4, 8)), r.choice((64, 128, 128))
    key = head + 12 if r.random() < 0.3 else head  # round_up(head, 4) + 3 int64 positions in bf16
    ring = r.choice((-(-(ratio + num_spec) // ratio) * ratio,) * 2 + (ratio, r.randint(ratio, 4 * ratio)))
    kinds = ("full",) if r.random() < 0.5 else ("full", "sliding", "chunked")
    after = r.random() < 0.5
    out: list[dict[str, Any]] = []
    for x in layers:
        caches: list[dict[str, Any]] = []
        if x["kind"] in kinds and x["name"].endswith("self_attn.attn"):
            prefix = x["name"].removesuffix("attn") + "indexer."
            common = {"num_kv_heads": 1, "kv_cache_dtype": "auto", "model_dtype": "bfloat16", "pp_stage": x["pp_stage"]}
            caches = [{**common, "name": prefix + "raw_key_cache", "kind": "circular_buffer", "head_size": key,
                       "head_size_v": 0, "block_size": ring},
                      {**common, "name": prefix + "compressed_key_cache", "kind": "mla", "head_size": head,
                       "tokens_per_state": ratio}]  # fmt: skip
        out.extend([x, *caches] if after else [*caches, x])
    return out


def _conv_states(r: random.Random, layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Inkling's short-convolution states: before each layer's attention, a sliding layer of the
    layer's KV heads, ``block_size = sliding_window =`` a small kernel, one power-of-two head (K, V
    and two hidden slices packed) and no V part, in the model dtype; a width for the local layers
    and one for the full. Their pages meet the attention's by scaling blocks (or by padding, a 3-token
    kernel's)."""
    kernel = r.choice((4, 4, 2, 3))
    width = {kind: r.choice((256, 1024, 2048)) for kind in ("full", "sliding", "chunked")}
    out: list[dict[str, Any]] = []
    for x in layers:
        out.append({"name": x["name"].replace("self_attn.attn", "conv_state"), "kind": "sliding",
                    "num_kv_heads": x["num_kv_heads"], "head_size": width[x["kind"]], "head_size_v": 0,
                    "sliding_window": kernel, "block_size": kernel, "kv_cache_dtype": "auto",
                    "model_dtype": x["model_dtype"], "pp_stage": x["pp_stage"]})  # fmt: skip
        out.append(x)
    return out
