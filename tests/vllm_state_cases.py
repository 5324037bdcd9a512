"""Seeded random hybrid-state vLLM deployments (tests/test_vllm_state.py): models whose layers
mix attention with recurrent state, in the oracle's forms (tests/vllm_oracle).

A state layer's shapes are drawn as vLLM's ``MambaStateShapeCalculator`` builds them for the
families served today (per TP rank; the conv state keeps ``k - 1 + s`` rows, ``s`` the
speculative tokens):

* gated delta net (Qwen3-Next, Qwen3.5): conv ``(k-1+s, (2*nk*dk + nv*dv)/tp)``, SSM
  ``(nv/tp, dv, dk)``; Qwen's FlashInfer prefill or not;
* Mamba-2 (Nemotron-H, Falcon-H1, Granite-4.0-H): conv ``(k-1+s, (I + 2*G*ds)/tp)``, SSM
  ``(H/tp, hd, ds)``;
* KDA (Kimi-Linear, GLM-5-Next on FlashKDA): conv ``(k-1+s, 3*H*hd/tp)``, recurrent
  ``(H/tp, hd, hd)`` in float32;
* short conv (LFM2): ``(L-1+s, D/tp)``; Mamba-1 (Jamba): ``(k-1, I/tp)``, ``(I/tp, ds)``;
  linear attention (MiniMax): ``(H/tp, hd, hd)``.

Attention every ``k``-th layer (full, sometimes sliding or MLA), sometimes a second state
layout (a TP-replicated short conv) or none at all (a pure state model); drafters (an MTP or
EAGLE head, a state drafter layer beside attention: a larger drafter state trips the padded
page's assertion, which a pure state model with the hybrid manager off reaches in an order
not modelled); prefix caching on or off, ReplaySSM, kernel and attention
block sizes, PP, TP, ``--max-model-len auto``, the block override, the hybrid manager off,
``kv_cache_memory_bytes`` and budgets too small to start; sometimes Qwen4-Exp's QSA caches (a
ring and compressed keys) beside the attention layers, under a block-outer layout or not.
"""

from __future__ import annotations

import random
from typing import Any

from vllm_cases import GIB, Deployment, _qsa, assign_stages, budgets, draw_layout

STATE_DTYPES = ("bfloat16", "bfloat16", "float32", "float16")


def _state(r: random.Random, family: str, tp: int, spec: int) -> dict[str, Any]:
    """One state layer of ``family`` on one of ``tp`` ranks, ``spec`` speculative tokens."""
    k, conv, ssm = r.choice((4, 4, 3)), r.choice(STATE_DTYPES[:2]), r.choice(STATE_DTYPES)
    if family == "gdn":
        nk, nv, d = r.choice((8, 16)), r.choice((16, 32, 48, 64)), r.choice((64, 128, 128))
        shapes = [[k - 1 + spec, (2 * nk * d + nv * d) // tp], [max(1, nv // tp), d, d]]
        extra = {"mamba_type": "gdn_attn", "prefill_checkpoint": r.choice(("flashinfer_gdn", "flashinfer_gdn", "none"))}
    elif family == "mamba2":
        h, hd, ds, g = r.choice((48, 64, 80, 128)), 64, r.choice((64, 128)), r.choice((1, 8))
        shapes = [[k - 1 + spec, (h * hd + 2 * g * ds) // tp], [max(1, h // tp), hd, ds]]
        extra = {"mamba_type": "mamba2", "prefill_checkpoint": "mamba2"}
    elif family == "kda":
        h, hd = r.choice((16, 32)), 128
        shapes, ssm = [[k - 1 + spec, 3 * h * hd // tp], [max(1, h // tp), hd, hd]], "float32"
        # Kimi-Linear's KDA exports nothing; GLM-5-Next's on FlashKDA one block at alignment 16.
        extra = {"mamba_type": "gdn_attn", "prefill_checkpoint": r.choice(("none", "flashkda"))}
    elif family == "short_conv":
        dim = r.choice((1024, 2048, 1536)) // tp
        out: dict[str, Any] = {"state_shapes": [[2 + spec, dim]], "state_dtypes": [conv], "mamba_type": "short_conv"}
        if spec and r.random() < 0.5:  # LFM2's model class sizes the block without the drafter's rows
            out["config_state_shapes"] = [[2, dim]]
        return out
    elif family == "mamba1":
        i, ds = r.choice((4096, 8192)), 16
        shapes = [[k - 1, i // tp], [i // tp, ds]]
        extra = {"mamba_type": "mamba1"}
    else:  # linear attention
        h, hd = r.choice((32, 64)), r.choice((64, 128))
        return {"state_shapes": [[max(1, h // tp), hd, hd]], "state_dtypes": ["float32"], "mamba_type": "linear"}
    return {"state_shapes": shapes, "state_dtypes": [conv, ssm], **extra}


def _model(r: random.Random, tp: int, spec: int) -> list[dict[str, Any]]:
    n = r.choice((r.randint(2, 12), 24, 36, 48, 52, 64))
    family = r.choice(("gdn", "gdn", "mamba2", "mamba2", "kda", "short_conv", "mamba1", "linear"))
    state = _state(r, family, tp, spec)
    second = {**_state(r, "short_conv", tp, spec), "tp_replicated": True} if r.random() < 0.1 else None
    every = r.choice((2, 4, 4, 6, 8, 10**6))  # 10**6: a pure state model
    heads, dim = r.choice((1, 1, 2, 4, 8)), r.choice((64, 128, 256, 256))
    attention: dict[str, Any] = {"kind": "full", "num_kv_heads": heads, "head_size": dim,
                                 "kv_cache_dtype": r.choice(("auto", "auto", "auto", "fp8")),
                                 "model_dtype": r.choice(("bfloat16", "bfloat16", "float16"))}  # fmt: skip
    a = r.random()
    if a < 0.08:
        attention = {"kind": "mla", "num_kv_heads": 1, "head_size": 576, "kv_cache_dtype": r.choice(("auto", "fp8"))}
    layers = []
    for i in range(n):
        if i % every == every - 1:
            x = dict(attention)
            if a > 0.92 and i % (2 * every) == every - 1:
                x.update(kind="sliding", sliding_window=r.choice((512, 4096)))
            x["name"] = f"model.layers.{i}.self_attn.attn"
        else:
            x = {"name": f"model.layers.{i}.linear_attn", "kind": "mamba", "num_kv_heads": 0, "head_size": 0,
                 **(second if second is not None and i % 3 == 2 else state)}  # fmt: skip
        layers.append(x)
    return layers


def _drafter(r: random.Random, layers: list[dict[str, Any]], tp: int, spec: int) -> list[dict[str, Any]]:
    full = next((x for x in layers if x["kind"] != "mamba"), None)
    pick = r.random()
    if pick < 0.5:
        return []
    if pick < 0.8 and full is not None:  # an MTP / EAGLE head of the target's attention geometry
        out = [{k: v for k, v in full.items() if k not in ("name", "sliding_window")}]
        out[0]["kind"] = "mla" if full["kind"] == "mla" else "full"
    elif pick < 0.92:  # an EAGLE head of another geometry
        out = [{"kind": "full", "num_kv_heads": r.choice((2, 4, 8)), "head_size": r.choice((64, 128))}]
    elif full is not None:  # a drafter with a state layer (beside attention: see the module doc)
        out = [{"kind": "mamba", "num_kv_heads": 0, "head_size": 0, **_state(r, "gdn", tp, spec)}]
    else:
        return []
    for j, x in enumerate(out):
        x.update(name=f"drafter.layers.{j}.layer", is_draft=True)
    return out


def deployment(seed: int) -> Deployment:
    """The hybrid-state deployment of ``seed``."""
    r = random.Random(seed)
    tp = r.choice((1, 1, 2, 4, 4, 8))
    method = r.choice((None, None, "mtp", "eagle", "eagle3"))
    spec = r.choice((1, 2, 3)) if method else 0
    layers = _model(r, tp, spec)
    drafter = _drafter(r, layers, tp, spec) if method else []
    if method and not drafter:
        method = spec = None  # type: ignore[assignment]
    pp = r.choice((1, 1, 1, 2)) if len(layers) >= 4 else 1
    assign_stages(layers, drafter, pp)
    engine: dict[str, Any] = {"block_size": r.choice((16, 16, 16, 32, 64, 128)), "tp": tp, "pp": pp,
                              "max_num_batched_tokens": r.choice((2048, 8192, 16384)),
                              "async_scheduling": r.random() < 0.8, "use_v2_model_runner": r.random() < 0.8,
                              "enable_prefix_caching": r.random() < 0.8,
                              "attention_kernel_block_size": r.choice((16, 16, 16, 32, 64))}  # fmt: skip
    if r.random() < 0.15:
        engine.update(max_model_len="auto", derived_max_model_len=r.choice((32768, 262144, 1048576)))
    else:
        engine["max_model_len"] = r.choice((4096, 32768, 131072, 262144, r.randint(1, 300_000)))
    if method:
        engine.update(speculative_method=method, num_speculative_tokens=spec)
        if method == "mtp":
            engine["num_nextn_predict_layers"] = 1
    if r.random() < 0.1:
        engine["use_replayssm"] = True
    if r.random() < 0.05:
        engine["num_gpu_blocks_override"] = r.choice((1, 64, r.randint(2, 50_000)))
    if r.random() < 0.05:
        engine["disable_hybrid_kv_cache_manager"] = True
    scale = r.choice((GIB // 64, GIB // 4, GIB, 8 * GIB, 30 * GIB, 70 * GIB))
    available = budgets(r, scale, pp, pp * tp)
    if r.random() < 0.05:
        engine["kv_cache_memory_bytes"] = r.choice((0, int(scale * r.uniform(0.5, 1.5))))
    qsa = r.random() < 0.1 and any(x["kind"] == "full" for x in layers)
    if qsa:  # Qwen4-Exp's QSA caches (a ring and compressed keys) beside the states (drawn last)
        layers = _qsa(r, layers, spec or 0)
    draw_layout(r, engine, 0.5 if qsa else 0.2)
    return layers + drafter, available, engine
