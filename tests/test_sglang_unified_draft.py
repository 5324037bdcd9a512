"""A speculative draft in SGLang's unified memory: kvbudget against SGLang 0.5.23's own code.

Two differentials, seeded:

* The placement (:func:`kvbudget.sglang.fused_draft.place_fused_draft` against
  ``layout/fused_draft.py``'s ``place_fused_draft``, :mod:`sglang_oracle.fused_draft`): random draft
  profiles (full, window and state kinds, replicated or per-depth heads, runners, hosts, windows,
  backends, asymmetric rows, row sizes off the 16-byte granule, storage dtypes) must give SGLang's
  decline and note word for word, its regions (lanes, draft bytes, the host's fused entry from
  SGLang's ``MHASubPoolSpec`` / ``MambaSubPoolSpec``) and every runner's lane ranges.
* The unified Mamba pool with a draft (``plan_with_state`` against ``_handle_max_mamba_cache``,
  the configurator's ``_fused_draft_for_mamba_factory`` / ``fused_entry_bytes("full")``,
  ``init_unified_mamba_pools`` with the placement and ``UnifiedMambaPool``'s verify buffers): a
  unified state case of ``tests/test_sglang_state_unified.py`` with an EAGLE- or DFLASH-family
  draft (its layers, geometry, KV dtype, DCP, backends). kvbudget must give SGLang's
  ``max_mamba_cache_size``, fused entry, buffer bytes, sub-pool capacities, verify buffer bytes and
  refusal kind (a draft that cannot fuse: SGLang's message); its exact plan must fit the budget and
  allocate exactly its bytes. A DFLASH-family draft's decision is SGLang's whole: its backend
  (``resolve_draft_worker_attention_backend``) and its KV dtype (``configure_kv_cache_dtype``, fa4's
  model-dtype rows). SGLang's launch checks (``handle_unified_memory_pool``, run by
  :mod:`sglang_oracle.unified_launch`: the algorithm list, ``eagle_topk``, the EAGLE backend sets,
  DFLASH's and DSPARK's verify backends, the DCP gate; before them ``handle_page_major_kv_layout``'s
  backends) are held to their text. Where kvbudget's backends are unknown, the first of
  ``test_sglang_state_unified.STAND_INS`` SGLang admits stands for them. What kvbudget
  does not model is refused by name, and so is a DSPARK draft that cannot fuse (SGLang then boots
  its private draft pool beside the buffer, unpriced).
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
from collections import Counter
from typing import Any

import pytest
import torch

import test_sglang_state as S
import test_sglang_state_unified as U
from sglang_oracle import state as oracle_state
from sglang_oracle._case import HF_ABSENT, KV_CACHE_DTYPES
from sglang_oracle._fetch import sglang_root
from sglang_oracle._sandbox import HFConfig
from sglang_oracle.state import StateCase, StateOracle
from sglang_oracle.unified_launch import LaunchOracle
from sglang_oracle.unified_mamba import UnifiedMambaOracle

PLACEMENTS = int(os.environ.get("KVBUDGET_FUSED_PLACEMENT_CASES", "800"))
CASES = int(os.environ.get("KVBUDGET_UNIFIED_DRAFT_CASES", "800"))
GIB = 1 << 30
STORE = {1: torch.uint8, 2: torch.bfloat16, 4: torch.float32}
BACKENDS = ("triton", "fa3", "flashinfer", "trtllm_mha", "fa4", "torch_native")


@pytest.fixture(scope="module")
def oracles() -> tuple[StateOracle, UnifiedMambaOracle, LaunchOracle]:
    state = oracle_state.load(sglang_root())
    return state, UnifiedMambaOracle(state.b), LaunchOracle(state.b)


# --------------------------------------------------------------------------- placement


def _ids(r: random.Random, n: int) -> list[int]:
    return sorted(r.sample(range(max(n, 1) + 2), r.randint(1, max(n, 1))))


def placement_case(seed: int) -> dict[str, Any]:
    """Draft profile ``seed``: kinds in SGLang's order with their geometry, and the host context."""
    r = random.Random(f"placement {seed}")
    depths = r.choice((1, 1, 1, 2, 3, 4))
    dims = (64, 128, 256, 8, 72, 100, 192)
    kv = (r.choice((1, 2, 4, 8, 3)), r.choice(dims), 0)
    kv = (kv[0], kv[1], kv[1] if r.random() < 0.7 else r.choice(dims))
    kinds: list[tuple[str, list[int], Any, int | None]] = []
    if r.random() < 0.85:
        kinds.append(("full", _ids(r, depths if depths > 1 else r.randint(1, 4)), kv, None))
    if r.random() < 0.35:
        geo = kv if r.random() < 0.5 else (r.choice((1, 2, 4)), r.choice(dims), r.choice(dims))
        kinds.append(("window", _ids(r, depths if depths > 1 else r.randint(1, 3)), geo,
                      r.choice((None, 128, 512, 4096))))  # fmt: skip
    if r.random() < 0.35 or not kinds:
        conv = tuple((r.choice((1, 3, 8, 64, 1024)), r.choice((1, 3))) for _ in range(r.choice((1, 1, 3))))
        state = dict(conv_state_shapes=conv, conv_dtype=r.choice((torch.bfloat16, torch.float32)),
                     temporal_state_shape=(r.choice((1, 4, 16)), r.choice((8, 64, 128)), r.choice((1, 16, 128))),
                     temporal_dtype=r.choice((torch.float32, torch.bfloat16)))  # fmt: skip
        kinds.append(("state", list(range(depths)), state, None))
    hosts = [h for h in ("full", "swa", "mamba") if r.random() < 0.75]
    return dict(kinds=kinds, num_depths=depths, num_runners=r.choice((1, 1, 2, 3, depths, depths + 1)),
                hosts=hosts, target_window=r.choice((None, 127, 512, 8191)), asymmetric_rows_ok=r.random() < 0.5,
                draft_backends=r.sample(("triton", "fa3", "flashinfer", "triton"), r.randint(0, 3)),
                itemsize=r.choice((1, 2, 2, 4)), host_layers=r.randint(1, 48))  # fmt: skip


def _state_bytes(g: dict[str, Any]) -> int:
    """One state layer of one slot (``DraftStateGeometry.layer_bytes``, in plain arithmetic), bytes."""
    conv = sum(a * b for a, b in g["conv_state_shapes"]) * g["conv_dtype"].itemsize
    t = g["temporal_state_shape"]
    return conv + t[0] * t[1] * t[2] * g["temporal_dtype"].itemsize


def run_placement(fused: Any, seed: int) -> tuple[str, list[str]]:
    from kvbudget.errors import InvalidConfigError
    from kvbudget.sglang.fused_draft import place_fused_draft

    c = placement_case(seed)
    store, layers = STORE[c["itemsize"]], c["host_layers"]
    full = next((g for k, _, g, _ in c["kinds"] if k == "full"), (2, 128, 128))
    state = next((g for k, _, g, _ in c["kinds"] if k == "state"), None)
    specs: dict[str, dict[str, Any]] = {"full": dict(layer_num=layers, head_num=full[0], head_dim=full[1],
                                                     v_head_dim=full[2], store_dtype=store)}  # fmt: skip
    host_bytes = {"full": (layers * full[0] * (full[1] + full[2]) * c["itemsize"], True)}
    if state is not None:
        specs["mamba"] = dict(layer_num=layers, **state)
        host_bytes["mamba"] = (layers * _state_bytes(state), False)
    theirs = fused.place(kinds=c["kinds"], num_depths=c["num_depths"], num_runners=c["num_runners"],
                         hosts=c["hosts"], target_window=c["target_window"],
                         asymmetric_rows_ok=c["asymmetric_rows_ok"], draft_backends=c["draft_backends"],
                         store_dtype=store, host_specs=specs)  # fmt: skip
    kinds = [(k, ids, _state_bytes(g) if k == "state" else g, w) for k, ids, g, w in c["kinds"]]
    if "error" in theirs:
        try:
            place_fused_draft(kinds, num_runners=c["num_runners"], num_depths=c["num_depths"], hosts=tuple(c["hosts"]),
                              target_window=c["target_window"], asymmetric_rows_ok=c["asymmetric_rows_ok"],
                              draft_backends=tuple(c["draft_backends"]), itemsize=c["itemsize"])  # fmt: skip
        except InvalidConfigError as e:
            return "asserted", [] if str(e) == theirs["error"] else [f"SGLang {theirs} vs kvbudget {e}"]
        return "asserted", [f"SGLang asserts {theirs['error']}; kvbudget placed"]
    ours = place_fused_draft(kinds, num_runners=c["num_runners"], num_depths=c["num_depths"], hosts=tuple(c["hosts"]),
                             target_window=c["target_window"], asymmetric_rows_ok=c["asymmetric_rows_ok"],
                             draft_backends=tuple(c["draft_backends"]), itemsize=c["itemsize"],
                             host_bytes=host_bytes)  # fmt: skip
    diffs = [] if dict(ours) == theirs else [f"SGLang {theirs} vs kvbudget {dict(ours)}"]
    if theirs["declined"]:
        return "declined: " + re.sub(r"\d+", "N", theirs["declined"]).split(":")[0].split(" (")[0][:60], diffs
    return f"placed in {'+'.join(theirs['regions'])}{' (folded)' if theirs['note'] else ''}", diffs


def test_placement_is_sglangs(oracles: tuple[StateOracle, UnifiedMambaOracle]) -> None:
    hits: Counter[str] = Counter()
    failures = []
    for seed in range(PLACEMENTS):
        branch, diffs = run_placement(oracles[1].fused, seed)
        hits[branch] += 1
        if diffs:
            failures.append(f"seed {seed}: {diffs[0]}")
    print(f"\nplacement cases: {dict(sorted(hits.items()))}")
    assert not failures, f"{len(failures)} of {PLACEMENTS} differ:\n" + "\n".join(failures[:10])
    needed = ("placed in full", "placed in mamba", "placed in full (folded)", "placed in full+swa", "asserted",
              "declined: a per-depth draft head", "declined: N draft runners exceed",
              "declined: the draft's K/V rows are asymmetric", "declined: the draft's K/V rows are N B",
              "declined: the draft's N sliding-window layer(s) cannot ride", "declined: the draft's N full-attention",
              "declined: the draft's N recurrent-state")  # fmt: skip
    missing = [b for b in needed if not any(h.startswith(b) for h in hits)]
    assert not missing, f"never reached: {missing}"


# --------------------------------------------------------------------------- the unified pool with a draft

ALGORITHMS = ("eagle",) * 6 + ("nextn",) * 5 + ("eagle3",) * 3 + ("dflash",) * 4 + ("dspark",) * 4 + (
    "standalone", "ngram", "frozen_kv_mtp", "uno")  # fmt: skip
#: A DFLASH-family draft's draws: the pairs its launch checks and its fa4 KV dtype rule read.
DFLASH_BACKENDS = ("fa4", "fa3", "triton", "flashinfer", "trtllm_mha")


def case(seed: int) -> tuple[StateCase, dict[str, Any], dict[str, Any]]:
    """Unified case ``seed`` with a draft: the state case, the full side, the draft."""
    r = random.Random(f"unified draft {seed}")
    c, full = U.case(seed)
    c = dataclasses.replace(c, spec=True, num_draft_tokens=r.randint(1, 8), fused_bytes=None,
                            eagle_topk=r.choice((None, 1, 1, 1, 1, 1, 1, 1, 2, 4)),
                            max_running_requests=c.max_running_requests or r.randint(1, 64))  # fmt: skip
    if r.random() < 0.5:  # a GPU's worth: most cases then reach the buffer
        c = dataclasses.replace(c, rest_gib=r.uniform(2, 60))
    if full["layers"] == 0 and r.random() < 0.7:
        full["layers"] = r.randint(1, 12)
    draft: dict[str, Any] = {"algorithm": r.choice(ALGORITHMS), "layers": r.choice((1, 1, 1, 2, 3, 0)),
                             "geometry": None, "dcp": 2 if r.random() < 0.03 else 1,
                             "backends": None if r.random() < 0.75 else (r.choice(BACKENDS), r.choice(BACKENDS)),
                             }  # fmt: skip
    if draft["algorithm"] in ("dflash", "dspark") and r.random() < 0.5:
        draft["backends"] = (r.choice(DFLASH_BACKENDS), r.choice(DFLASH_BACKENDS))
    if r.random() < 0.4:
        h = S._pick(r, (1, 2, 4, 8), (3, 5))
        d = S._pick(r, (64, 128, 256), (72, 40, 20))
        v = d if r.random() < 0.8 else r.choice((64, 128))
        dtype = None if r.random() < 0.9 else r.choice(("bf16", "fp8_e4m3"))
        draft["geometry"] = dict(num_kv_heads=h, head_dim=d, v_head_dim=v, kv_cache_dtype=dtype)
    if draft["dcp"] > 1:
        c = dataclasses.replace(c, tp=2)
    if c.disagg != "null" and r.random() < 0.9:  # SGLang refuses every draft under PD: colocate most
        c = dataclasses.replace(c, disagg="null")
    return c, full, draft


def _mc(sb: Any, name: str, heads: int, arch: Any, **attrs: Any) -> Any:
    """A model config carrying SGLang's lifted ``get_num_kv_heads`` over ``heads`` KV heads."""
    hf = HFConfig(f"{name}.hf_config", HF_ABSENT | {"mtp_local_layer_ids"}, architectures=["Qwen3NextForCausalLM"],
                  model_type="qwen3_next", num_key_value_heads=heads)  # fmt: skip
    return sb.model_config_cls(name, hf_config=hf, hf_text_config=hf, is_draft_model=name.startswith("draft"),
                               attention_arch=arch, **attrs)  # fmt: skip


def kvbudget_side(c: StateCase, full: dict[str, Any], draft: dict[str, Any], o: dict[str, Any],
                  fit: str) -> dict[str, Any]:  # fmt: skip
    """kvbudget's plan of ``c`` with ``draft`` on the full side ``full``, in the oracle's terms."""
    import kvbudget
    from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError
    from kvbudget.sglang.state import plan_with_state, unified_entries

    state, serving, spec = o["inputs"]
    try:
        model = U.full_side_model(full)
        b = draft["backends"]
        serving = serving.replace(tp_size=c.tp, dcp_size=draft["dcp"], kv_cache_dtype=full["dtype"],
                                  page_size=full["page"], prefill_attention_backend=b and b[0],
                                  decode_attention_backend=b and b[1], model_dtype=_model_dtype(full)[0])  # fmt: skip
        g = draft["geometry"]
        geometry = None if g is None or not draft["layers"] else kvbudget.DraftGeometry(num_layers=draft["layers"], **g)
        spec = spec.replace(algorithm=draft["algorithm"], draft_num_layers=0 if geometry else draft["layers"],
                            draft=geometry)  # fmt: skip
        cfg = kvbudget.create_pool_configurator(model, serving, spec)
        plan, budget = plan_with_state(cfg, U._available(c), state, fit=fit)  # type: ignore[arg-type]
    except NotEnoughMemoryError as e:
        return {"error": ("memory", str(e))}
    except InvalidConfigError as e:
        return {"error": ("invalid", str(e))}
    pool, side = plan.pool("unified"), plan.pool("state")
    assert pool is not None and side is not None and [p.name for p in plan.pools] == ["unified", "state"], plan.pools
    e_f, e_m = unified_entries(cfg, state)
    verify = {t.kind: t.nbytes for t in side.tensors}
    return {"error": None, "plan": plan, "total_bytes": pool.nbytes, "slots": budget.max_mamba_cache_size,
            "tokens": pool.tokens, "entry": e_f, "requests": side.tokens, "verify": verify,
            "max_slots": {"mamba": pool.nbytes // e_m, "full": pool.nbytes // e_f}}  # fmt: skip


def _model_dtype(full: dict[str, Any]) -> tuple[str, torch.dtype]:
    """The model dtype of the case, kvbudget's name and torch's: the one the parity oracle gives SGLang
    for the KV dtype (``fp16`` / ``fp32`` KV are SGLang's ``auto`` on such a model), else bf16."""
    dtype = KV_CACHE_DTYPES[full["dtype"]][1] or torch.bfloat16
    return {torch.float16: "fp16", torch.float32: "fp32"}.get(dtype, "bf16"), dtype


#: SGLang's launch checks (``handle_unified_memory_pool``, run by :mod:`sglang_oracle.unified_launch`),
#: by a piece of their text.
LAUNCH = {"algorithm": "only supports --speculative-algorithm DSPARK, DFLASH, EAGLE and EAGLE3",
          "eagle_topk": "supports a linear draft chain only", "target backends": "requires the target on the",
          "draft backends": "a fused draft is MHA-shaped",
          "verify backends": "requires spec-verify-audited attention backends",
          "dcp": "with decode context parallelism (--dcp-size > 1)",
          "page-major backends": "--enable-page-major-kv-layout: the resolved"}  # fmt: skip
#: What kvbudget's unknown pair stands for under PD (SGLang refuses a draft there first).
UNKNOWN = (U.STAND_INS[0], U.STAND_INS[0])


def run_case(oracles: tuple[StateOracle, UnifiedMambaOracle, LaunchOracle], seed: int) -> tuple[str, list[str]]:
    sglang, unified, launch = oracles
    sb = U._sandbox()
    c, full, draft = case(seed)
    c = dataclasses.replace(c, rest_gib=U._available(c) / GIB)
    t = sglang.run(c)
    o = S.kvbudget_run(c, t)
    if t["error"] or o["error"]:
        return "state refused", S.compare(c, t, o)
    ours = kvbudget_side(c, full, draft, o, "sglang")
    err = ours["error"]
    if full["dtype"] == "fp4_mx_block16" or full["layers"] == 0 or full["dtype"] == "mxfp8":
        return "refused (full side)", [] if err and err[0] == "invalid" else [f"kvbudget: {ours}"]
    state = o["inputs"][0]
    if not (state.stage_state_layers if state.stage_state_layers is not None else state.num_state_layers):
        # SGLang asserts "layer_num must be positive" (or refuses the draft first): invalid either way
        return "refused (no state layer)", [] if err and err[0] == "invalid" else [f"kvbudget: {ours}"]
    algo = sb.speculative_algorithm.from_string(draft["algorithm"].upper())  # NEXTN resolves to EAGLE
    family = f" {algo.name}" if algo.is_dflash_family() else ""
    mla, g, b = "kv_lora_rank" in full, draft["geometry"], draft["backends"]
    def check(pair: tuple[str, str]) -> str | None:
        return launch.check(algorithm=algo.name, eagle_topk=c.eagle_topk, backends=pair, dcp=draft["dcp"], mla=mla,
                            kv_dims=U.kv_dims(full))  # fmt: skip

    if c.disagg != "null":  # SGLang refuses whatever its transfer backend (kvbudget does not know it)
        pd = {tb: launch.check(algorithm=algo.name, eagle_topk=c.eagle_topk, backends=b or UNKNOWN, dcp=draft["dcp"],
                               mla=mla, disagg=c.disagg, transfer_backend=tb, pp=c.pp, kv_dims=U.kv_dims(full))
              for tb in ("mooncake", "nixl")}
        if len(set(pd.values())) == 1:  # refused before the PD block (the page-major layout's backends)
            pair, refusal = b or UNKNOWN, pd["mooncake"]
        else:
            ok = all(pd.values()) and err and err[0] == "invalid" and "with PD disaggregation" in err[1]
            return "launch: PD (any transfer backend)", [] if ok else [f"SGLang {pd} vs kvbudget {err}"]  # fmt: skip
    else:
        pair, refusal, varies = U.sglang_launch(check, b)
        if varies:  # SGLang refuses whatever it resolves, in words that depend on it: kvbudget refuses too
            return "launch: any backends", [] if err and err[0] == "invalid" else [f"kvbudget: {ours}"]
    if refusal is not None:
        what = next(k for k, m in LAUNCH.items() if m in refusal)
        ok = err and err[0] == "invalid" and err[1] == refusal
        return f"launch: {what}{family if what == 'verify backends' else ''}", [] if ok else [
            f"SGLang {refusal!r} vs kvbudget {err}"]  # fmt: skip
    if mla and g and draft["layers"] and b is None:  # kvbudget's stand-in for a launch check
        ok = err and "of an MLA target without" in err[1]
        return "kvbudget: MLA target, backends unknown", [] if ok else [f"kvbudget: {err}"]
    budget = int(t["rest_gib"] * GIB)
    if budget <= 0:
        return "no KV budget", [] if err and err[0] == "memory" else [f"kvbudget: {ours}"]
    arch = sb.attention_arch
    target_mc = _mc(sb, "model_config", full.get("num_kv_heads", 1), arch.MLA if mla else arch.MHA,
                    is_multi_layer_eagle=False, sliding_window_size=None, head_dim=full.get("head_dim"),
                    v_head_dim=full.get("v_head_dim"), kv_lora_rank=full.get("kv_lora_rank"),
                    qk_rope_head_dim=full.get("qk_rope_head_dim"))  # fmt: skip
    dg = g or {"num_kv_heads": full.get("num_kv_heads", 1), "head_dim": full.get("head_dim"),
               "v_head_dim": full.get("v_head_dim")}  # fmt: skip
    draft_mc = _mc(sb, "draft_model_config", dg["num_kv_heads"], arch.MLA if mla and g is None else arch.MHA,
                   head_dim=dg["head_dim"], v_head_dim=dg["v_head_dim"], num_nextn_predict_layers=1,
                   is_hybrid_swa=False, is_deepseek_v4_arch=False, sliding_window_size=None,
                   dtype=_model_dtype(full)[1])  # fmt: skip
    stage = o["inputs"][0].stage_state_layers
    none_fits = err is not None and "max_total_num_tokens would be" in err[1]

    def decide(pair: tuple[str, str]) -> dict[str, Any]:
        return unified.decision.decide(
            attention_arch=arch, spec_algorithm=algo, target_mc=target_mc, draft_mc=draft_mc,
            draft_layers=draft["layers"], kv_dtype=U._torch_dtype(full["dtype"]), tp=c.tp, dcp=draft["dcp"],
            backends=pair, full_layers=list(range(full["layers"])), num_layers=max(full["layers"], stage) + 1,
            use_mla=mla, server_kv=KV_CACHE_DTYPES[full["dtype"]][0], draft_kv=g and g["kv_cache_dtype"])  # fmt: skip

    decided = decide(pair)
    # kvbudget's own refusals where SGLang's answer hangs on the backends it resolves: a DSPARK draft runs on
    # the prefill backend (its KV dtype rule reads fa4), and asymmetric rows fuse on some backends only.
    if algo.is_dspark() and b is None and _outcome(decide(("fa4", "fa4"))) != _outcome(decided):
        ok = err and "without prefill_attention_backend" in err[1]
        return "kvbudget: DSPARK draft KV dtype, backend unknown", [] if ok else [f"kvbudget: {err}"]
    if dg["head_dim"] != dg["v_head_dim"] and b is None and decided["reached"]:
        ok = err and "asymmetric draft K/V rows" in err[1]
        return "kvbudget: asymmetric rows, backends unknown", [] if ok else [f"kvbudget: {err}"]
    if decided["error"]:  # SGLang's configurator runs first: its own "no token" may come before the refusal
        ok = err is not None and (err == decided["error"] or (none_fits and err[0] == "memory"))
        return f"declined{family}", [] if ok else [f"SGLang {decided['error']} vs kvbudget {err}"]
    if decided["placement"] is None:  # DSPARK boots on a private draft pool nothing prices: kvbudget refuses
        want = f"DSPARK draft that cannot fuse ({decided['declined'] or 'fusion does not apply to it'})"
        ok = err is not None and (want in err[1] or (none_fits and err[0] == "memory"))
        return "kvbudget: DSPARK declined", [] if ok else [f"SGLang declines {decided['declined']!r}; kvbudget {err}"]
    theirs = unified.run(budget_bytes=budget, tokens=0 if none_fits else ours.get("tokens", 1), page_size=full["page"],
                         kv_dtype=U._torch_dtype(full["dtype"]), full=U._full_args(full, c.tp), params=t["params"],
                         mamba_layers=list(range(stage)), full_layers=list(range(full["layers"])),
                         max_mamba_cache_size=t["max_mamba_cache_size"], fused=decided["placement"],
                         draft_tokens=c.num_draft_tokens, max_num_reqs=ours.get("requests", 1))  # fmt: skip
    t_err, o_err = theirs["error"] and theirs["error"][0], err and err[0]
    if t_err or o_err:
        what = next((k for k, m in U._CHECKS.items() if m in str(theirs["error"])), "other")
        return f"error {t_err} ({what})", [] if t_err == o_err else [f"SGLang {theirs['error']} vs kvbudget {err}"]
    diffs = [f"{k}: SGLang {a} vs kvbudget {b}" for k, a, b in (
        ("fused entry", decided["entry"], ours["entry"]),
        ("total_bytes", theirs["total_bytes"], ours["total_bytes"]),
        ("max_mamba_cache_size", t["max_mamba_cache_size"], ours["slots"]),
        ("max_slots", theirs["max_slots"], ours["max_slots"]),
        ("verify buffers", theirs["verify"], ours["verify"])) if a != b]  # fmt: skip
    exact, available = kvbudget_side(c, full, draft, o, "exact"), U._available(c)
    if exact["error"] is None:
        import kvbudget

        p = exact["plan"]
        if p.total_bytes > available:
            diffs.append(f"exact plan {p.total_bytes} bytes above {available}")
        p.check()
        pools = kvbudget.allocate(p, device="meta")
        if pools.nbytes != p.total_bytes:
            diffs.append(f"allocation {pools.nbytes} != plan {p.total_bytes}")
    region = decided["placement"].region("full")
    own = region is not None and region.resolved_kv_dtype() != U._torch_dtype(full["dtype"])
    own_dtype = " (draft KV in its own dtype)" if own else ""
    return f"buffer{family}{own_dtype}", diffs


def _outcome(decided: dict[str, Any]) -> tuple[Any, ...]:
    """What a decision answers kvbudget: its refusal, its fused entry, its decline."""
    return decided["error"], decided.get("entry"), decided.get("declined")


REQUIRED = ("buffer", "buffer DFLASH", "buffer DSPARK", "declined", "declined DFLASH", "launch: algorithm",
            "launch: eagle_topk", "launch: target backends", "launch: verify backends DFLASH",
            "launch: verify backends DSPARK", "launch: PD (any transfer backend)",
            "kvbudget: asymmetric rows, backends unknown",
            "kvbudget: DSPARK declined")  # fmt: skip


def test_unified_draft_plan_is_sglangs(oracles: tuple[StateOracle, UnifiedMambaOracle, LaunchOracle]) -> None:
    U.run_all(lambda seed: run_case(oracles, seed), CASES, REQUIRED, "unified draft cases")
