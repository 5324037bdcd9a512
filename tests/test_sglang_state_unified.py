"""A hybrid-state model under SGLang's unified memory: kvbudget's plan against SGLang 0.5.23's own code.

With ``--enable-unified-memory`` SGLang keeps a hybrid model's full-attention KV cache and its
state slots in one byte buffer (``init_unified_mamba_pools``). :mod:`sglang_oracle.unified_mamba`
runs SGLang's ``config_from_budget`` floor and that factory up to its ``UnifiedKVPool`` (on torch's
meta device); :mod:`sglang_oracle.state` runs ``_handle_max_mamba_cache`` first, as SGLang does.
Each seeded case is a state case of ``tests/test_sglang_state.py`` made unified, with a draw of
the full-attention side (MHA or MLA, KV heads, head dims, KV dtype, page size, layers). kvbudget's
``plan_with_state(..., fit="sglang")`` must give SGLang's buffer (``total_bytes``), its state
slots, each sub-pool's capacity (``bytes // entry``: :func:`kvbudget.sglang.state.unified_entries`)
and the same refusal kind; the exact plan must fit the budget and hold at least SGLang's
bytes. Branch counts show every check was reached. A draft without layers is refused as SGLang
refuses it; ``tests/test_sglang_unified_draft.py`` holds the plans with a draft.

Without a draft a case also draws (from its own stream, so the rest of the case is unchanged)
``--dcp-size``, the attention backends and, under PD, the transfer backend's stand-ins: SGLang's
launch checks (``handle_page_major_kv_layout``, ``handle_unified_memory_pool``, run by
:mod:`sglang_oracle.unified_launch`) must refuse in the words and order kvbudget does. Where
kvbudget's backends are unknown it plans as on the first of :data:`STAND_INS` SGLang admits.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import test_sglang_state as S
from sglang_oracle import load as load_pool_oracle
from sglang_oracle import state as oracle_state
from sglang_oracle._case import HF_ABSENT, KV_CACHE_DTYPES
from sglang_oracle._sandbox import HFConfig
from sglang_oracle._fetch import sglang_root
from sglang_oracle.state import StateCase, StateOracle
from sglang_oracle.unified_launch import LaunchOracle
from sglang_oracle.unified_mamba import UnifiedMambaOracle

CASES = int(os.environ.get("KVBUDGET_UNIFIED_STATE_CASES", "10000"))
GIB = 1 << 30


@functools.cache
def _sandbox() -> Any:
    """The parity oracle's sandbox: SGLang's ``configure_kv_cache_dtype`` and ``ModelConfig``'s
    KV-head methods, lifted from the wheel."""
    return load_pool_oracle().sandbox


def _torch_dtype(name: str) -> Any:
    """The torch dtype SGLang's ``configure_kv_cache_dtype`` gives kvbudget's ``name`` (the parity
    oracle's translation of the name to SGLang's server argument and model dtype)."""
    server_arg, model_dtype = KV_CACHE_DTYPES[name]
    return _sandbox().configure_kv_cache_dtype(
        server_args_kv_cache_dtype=server_arg, model=None, model_dtype=model_dtype or torch.bfloat16,
        is_draft_worker=False, is_dflash=False, speculative_draft_attention_backend=None,
        speculative_draft_kv_cache_dtype=None)[1]  # fmt: skip


def _kv_heads(total: int, tp: int) -> int:
    """SGLang's ``ModelConfig.get_num_kv_heads(tp)`` (lifted) for ``total`` KV heads."""
    sb = _sandbox()
    hf = HFConfig("hf_config", HF_ABSENT, architectures=["LlamaForCausalLM"], model_type="llama",
                  num_key_value_heads=total)  # fmt: skip
    mc = sb.model_config_cls("model_config", hf_config=hf, hf_text_config=hf, is_draft_model=False,
                             attention_arch=sb.attention_arch.MHA)  # fmt: skip
    return int(mc.get_num_kv_heads(tp))


@pytest.fixture(scope="module")
def oracles() -> tuple[StateOracle, UnifiedMambaOracle, LaunchOracle]:
    state = oracle_state.load(sglang_root())
    return state, UnifiedMambaOracle(state.b), LaunchOracle(state.b)


#: The attention backends a case draws (those kvbudget names).
BACKENDS = ("triton", "fa3", "flashinfer", "trtllm_mha", "fa4", "torch_native", "aiter")
#: What kvbudget's unknown pair stands for: the first of these SGLang's launch checks admit.
STAND_INS = ("triton", "flashinfer", "trtllm_mla", "cutedsl_mla")


def launch_draw(r: random.Random, c: StateCase, full: dict[str, Any]) -> tuple[StateCase, dict[str, Any]]:
    """The launch inputs of a case without a draft in ``full``: ``--dcp-size`` (2 on an even TP) and
    the attention backends (``None``: unknown)."""
    dcp = 2 if r.random() < 0.12 and c.tp % 2 == 0 else 1
    names = BACKENDS if r.random() < 0.2 else ("triton", "fa3", "flashinfer")  # most on the page-major lists
    return c, dict(full, dcp=dcp, backends=(r.choice(names), r.choice(names)) if r.random() < 0.3 else None)


def kv_dims(full: dict[str, Any]) -> tuple[int, int, int, int]:
    """The full side's ``head_dim``, ``v_head_dim``, ``swa_head_dim`` and ``swa_v_head_dim`` as
    SGLang's ``ModelConfig`` holds them (no SWA layer: its defaults, the K dim; MLA: unread)."""
    d = full.get("head_dim", 1)
    return d, full.get("v_head_dim") or d, d, d


def sglang_launch(check: Callable[[tuple[str, str]], str | None],
                  backends: tuple[str, str] | None) -> tuple[tuple[str, str] | None, str | None, bool]:  # fmt: skip
    """``(pair, refusal, varies)``: the backends SGLang's ``check`` runs on (kvbudget's, or for
    unknown ones the first of :data:`STAND_INS` it admits; ``None`` if none), its refusal there
    (the first stand-in's if none), and whether that refusal's words hang on the backends."""
    refusals = {x: check((x, x)) for x in STAND_INS} if backends is None else {}
    pair = backends or next(((x, x) for x, m in refusals.items() if m is None), None)
    refusal = check(pair) if pair else refusals[STAND_INS[0]]
    return pair, refusal, pair is None and len(set(refusals.values())) > 1


#: SGLang's launch checks without a draft, by a piece of their text.
LAUNCH = {"page-major backends": "--enable-page-major-kv-layout: the resolved attention backends",
          "dcp: MLA only": "supports MLA models only", "dcp: hybrid SWA": "does not support hybrid sliding-window",
          "dcp: backends": "for the full-attention layers; got"}  # fmt: skip


def launch_outcome(launch: LaunchOracle, ours: dict[str, Any], *, disagg: str, pp: int, dcp: int, mla: bool,
                   backends: tuple[str, str] | None, hybrid_swa: bool,
                   dims: tuple[int, int, int, int]) -> tuple[str, list[str]] | None:  # fmt: skip
    """``(branch, differences)`` where SGLang's launch checks refuse a case without a draft (kvbudget's
    plan or refusal ``ours``), else ``None`` (kvbudget must not refuse at launch: the caller goes on)."""
    err = ours["error"]

    def check(pair: tuple[str, str], tb: str) -> str | None:
        return launch.check(algorithm=None, eagle_topk=None, backends=pair, dcp=dcp, mla=mla, disagg=disagg,
                            transfer_backend=tb, pp=pp, hybrid_swa=hybrid_swa, kv_dims=dims)  # fmt: skip

    if disagg != "null" and dcp > 1:  # SGLang refuses whatever its transfer backend (kvbudget does not know it)
        pd = {tb: sglang_launch(functools.partial(check, tb=tb), backends)[1] for tb in ("mooncake", "nixl")}
        if len(set(pd.values())) == 1:  # refused before the PD block (the page-major layout's backends)
            refusal = pd["mooncake"]
        else:
            ok = all(pd.values()) and err and err[0] == "invalid" and "with PD disaggregation and decode" in err[1]
            return "launch: PD with DCP (any transfer backend)", [] if ok else [f"SGLang {pd} vs kvbudget {err}"]
    else:
        pair, refusal, varies = sglang_launch(functools.partial(check, tb="mooncake"), backends)
        if varies:  # SGLang refuses whatever it resolves, in words that depend on it: kvbudget refuses too
            return "launch: any backends", [] if err and err[0] == "invalid" else [f"kvbudget: {ours}"]
        if refusal is None:
            if err and any(m in err[1] for m in LAUNCH.values()):
                return "launch: admitted", [f"SGLang admits ({pair}), kvbudget: {err}"]
            return None
    assert refusal is not None
    what = next((k for k, m in LAUNCH.items() if m in refusal), "other")
    ok = err and err[0] == "invalid" and err[1] == refusal
    return f"launch: {what}", [] if ok else [f"SGLang {refusal!r} vs kvbudget {err}"]


def case(seed: int) -> tuple[StateCase, dict[str, Any]]:
    """State case ``seed`` made unified (a draft on 5%), and its full-attention side."""
    r = random.Random(f"unified {seed}")
    c = S.case(seed)
    spec = r.random() < 0.05
    rest = r.choice((c.rest_gib, 10 ** r.uniform(-3.5, -1), r.uniform(60, 260)))  # small buffers; 2^31 full slots
    c = dataclasses.replace(c, unified_memory=True, spec=spec, num_draft_tokens=r.randint(1, 8) if spec else None,
                            fused_bytes=None, rest_gib=rest)  # fmt: skip
    odd = r.random() < 0.15  # a Mamba-1 state with odd conv rows: SGLang's entry and view checks
    if odd:
        n = r.randint(1, 4)
        hf = dict(intermediate_size=c.tp * r.choice((501, 77, 1001)), state_size=r.choice((16, 3)), conv_kernel=2,
                  num_hidden_layers=n)  # fmt: skip
        c = dataclasses.replace(c, source="mamba1", hf=hf, pp=1, num_hidden_layers=n,
                                env_conv_dtype=r.choice(("bfloat16", "float32")),
                                env_ssm_dtype=r.choice(("float32", "bfloat16")))  # fmt: skip
    n_state = len(S._layers(c))
    full: dict[str, Any] = {"layers": r.choice((max(c.num_hidden_layers - n_state, 0), r.randint(0, 4))),
                            "dtype": r.choice(("bf16", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32")),
                            "page": r.choice((1, 1, 16, 64, 256)), "dcp": 1}  # fmt: skip
    if odd:  # a wide full entry on a small buffer (one full slot past the sink) or an fp32 view
        full.update(layers=r.randint(1, 128), dtype=r.choice(("fp32", "fp32", "bf16")), page=r.choice((1, 1, 16)))
        c = dataclasses.replace(c, rest_gib=r.choice((10 ** r.uniform(-4, -1.5), c.rest_gib)))
    if r.random() < 0.2:
        full.update(kv_lora_rank=r.choice((512, 256, 72, 1)), qk_rope_head_dim=r.choice((64, 32, 64, 3)))
    else:
        d = S._pick(r, (64, 128, 128, 256), (72, 40, 20, 3))
        full.update(num_kv_heads=S._pick(r, (1, 2, 4, 8, 16, 32), (3, 5, 12)), head_dim=d,
                    v_head_dim=r.choice((d, d, 128, S._pick(r, (64,), (12, 5)))))  # fmt: skip
    if r.random() < 0.03:
        full["dtype"] = r.choice(("fp4_mx_block16", "mxfp8"))
    if not spec:
        c, full = launch_draw(random.Random(f"unified launch {seed}"), c, full)
    return c, full


def _available(c: StateCase) -> int:
    return max(int(c.rest_gib * GIB), 1)


def full_side_model(full: dict[str, Any]) -> Any:
    """The ``ModelGeometry`` of a case's full side ``full`` (its layers, heads and dims; MLA's latent)."""
    import kvbudget

    mla = {k: full[k] for k in ("kv_lora_rank", "qk_rope_head_dim") if k in full}
    return kvbudget.ModelGeometry(
        full_attention_layer_ids=list(range(full["layers"])), swa_attention_layer_ids=[],
        num_kv_heads=full.get("num_kv_heads", 1), head_dim=full.get("head_dim", full.get("kv_lora_rank")),
        v_head_dim=full.get("v_head_dim"), **mla)  # fmt: skip


def kvbudget_side(c: StateCase, full: dict[str, Any], o: dict[str, Any], fit: str) -> dict[str, Any]:
    """kvbudget's plan of ``c`` (its state as ``test_sglang_state`` builds it) on the full side ``full``."""
    from kvbudget.sglang.state import unified_entries

    state, serving, spec = o["inputs"]
    b = full.get("backends")
    got = planned(c, lambda: (full_side_model(full), serving.replace(
        tp_size=c.tp, kv_cache_dtype=full["dtype"], page_size=full["page"], dcp_size=full["dcp"],
        prefill_attention_backend=b and b[0], decode_attention_backend=b and b[1])), spec, state, fit)  # fmt: skip
    if isinstance(got, dict):
        return got
    cfg, plan, budget, pool = got
    e_f, e_m = unified_entries(cfg, state)
    return {"error": None, "plan": plan, "total_bytes": pool.nbytes, "slots": budget.max_mamba_cache_size,
            "tokens": pool.tokens, "max_slots": {"mamba": pool.nbytes // e_m, "full": pool.nbytes // e_f}}  # fmt: skip


def planned(c: StateCase, build: Callable[[], tuple[Any, Any]], spec: Any, state: Any,
            fit: str) -> tuple[Any, ...] | dict[str, Any]:  # fmt: skip
    """kvbudget's ``plan_with_state`` of a unified case on the ``(model, serving)`` that ``build``
    gives: ``(configurator, plan, budget, its one unified pool)``, or ``{"error": (kind, message)}``."""
    import kvbudget
    from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError
    from kvbudget.sglang.state import plan_with_state

    try:
        model, serving = build()
        cfg = kvbudget.create_pool_configurator(model, serving, spec)
        plan, budget = plan_with_state(cfg, _available(c), state, fit=fit)  # type: ignore[arg-type]
    except NotEnoughMemoryError as e:
        return {"error": ("memory", str(e))}
    except InvalidConfigError as e:
        return {"error": ("invalid", str(e))}
    pool = plan.pool("unified")
    assert pool is not None and [p.name for p in plan.pools] == ["unified"], plan.pools
    return cfg, plan, budget, pool


def _full_args(full: dict[str, Any], tp: int) -> dict[str, Any]:
    if "kv_lora_rank" in full:
        return {k: full[k] for k in ("kv_lora_rank", "qk_rope_head_dim")}
    return {"head_num": _kv_heads(full["num_kv_heads"], tp), "head_dim": full["head_dim"], "v_head_dim": full["v_head_dim"]}


def run_case(oracles: tuple[StateOracle, UnifiedMambaOracle, LaunchOracle], seed: int) -> tuple[str, list[str]]:
    """``(branch, differences)`` of seed ``seed``."""
    sglang, unified, launch = oracles
    c, full = case(seed)
    c = dataclasses.replace(c, rest_gib=_available(c) / GIB)
    t = sglang.run(c)
    o = S.kvbudget_run(c, t)
    if t["error"] or o["error"]:  # the state budget's outcome is test_sglang_state's
        return "state refused", S.compare(c, t, o)
    ours = kvbudget_side(c, full, o, "sglang")
    if full["dtype"] == "fp4_mx_block16" or full["layers"] == 0:  # SGLang's launch check; its layer_num assert
        ok = ours["error"] and ours["error"][0] == "invalid"
        return f"refused {full['dtype'] if full['layers'] else 'no full layer'}", [] if ok else [f"kvbudget: {ours}"]
    if not c.spec:  # SGLang's launch checks, before its pools (a draft's: test_sglang_unified_draft); kvbudget
        # has no pipeline size (SGLang refuses PD with several stages whatever the transfer backend): one stage
        out = launch_outcome(launch, ours, disagg=c.disagg, pp=1, dcp=full["dcp"], mla="kv_lora_rank" in full,
                             backends=full["backends"], hybrid_swa=False, dims=kv_dims(full))  # fmt: skip
        if out is not None:
            return out
    if full["dtype"] == "mxfp8":  # kvbudget's own refusal, after SGLang's launch refusals of a draft (PD, topk)
        pd, topk = c.spec and c.disagg != "null", c.spec and c.eagle_topk not in (None, 1)
        want = "with PD disaggregation" if pd else "linear draft chain only" if topk else "mxfp8"
        ok = ours["error"] and want in ours["error"][1]
        return "refused mxfp8", [] if ok else [f"kvbudget: {ours}"]
    if c.spec:  # an EAGLE algorithm without draft layers: SGLang refuses it (test_sglang_unified_draft plans drafts)
        msg = ours["error"] and ours["error"][1]
        known = ("cannot fuse (fusion does not apply to it)", "linear draft chain only",
                 "max_total_num_tokens would be", "no bytes of the", "with PD disaggregation and a speculative")
        ok = bool(msg) and any(m in msg for m in known)
        return "draft refused", [] if ok else [f"kvbudget: {ours}"]
    budget = int(t["rest_gib"] * GIB)  # SGLang's _profile_available_bytes: int(rest_memory * (1 << 30))
    if budget <= 0:  # it raises "Loaded weights leave no GPU memory" before any pool is sized
        ok = ours["error"] and ours["error"][0] == "memory" and "no bytes" in ours["error"][1]
        return "no KV budget", [] if ok else [f"kvbudget: {ours}"]
    stage = o["inputs"][0].stage_state_layers
    # The Default configurator's count (a label; the parity tests hold it): 0 where kvbudget says none fits,
    # so that SGLang's MemoryPoolConfig raises its own "Not enough memory".
    none_fits = ours["error"] is not None and "max_total_num_tokens would be" in ours["error"][1]
    theirs = unified.run(budget_bytes=budget, tokens=0 if none_fits else ours.get("tokens", 1), page_size=full["page"],
                         kv_dtype=_torch_dtype(full["dtype"]), full=_full_args(full, c.tp), params=t["params"],
                         mamba_layers=list(range(stage)), full_layers=list(range(full["layers"])),
                         max_mamba_cache_size=t["max_mamba_cache_size"])  # fmt: skip
    t_err, o_err = theirs["error"] and theirs["error"][0], ours["error"] and ours["error"][0]
    if t_err or o_err:
        same = t_err == o_err
        what = next((k for k, m in _CHECKS.items() if m in str(theirs["error"])), "other")
        return f"error {t_err} ({what})", [] if same else [f"SGLang {theirs['error']} vs kvbudget {ours['error']}"]
    diffs = [f"{k}: SGLang {a} vs kvbudget {b}" for k, a, b in (
        ("total_bytes", theirs["total_bytes"], ours["total_bytes"]),
        ("max_mamba_cache_size", t["max_mamba_cache_size"], ours["slots"]),
        ("max_slots (bytes // entry, by sub-pool)", theirs["max_slots"], ours["max_slots"]),
        ("unified_total_bytes + slots * entry", theirs["total_bytes"] - theirs["unified_total_bytes"],
         ours["total_bytes"] - (budget - budget % 4096))) if a != b]  # fmt: skip
    # The exact plan fits, and holds SGLang's bytes where those fit (SGLang prices a pipeline stage's state
    # slot as int(per_req * share), which can be below the slot it lays out: its buffer may then overshoot).
    return exact_within(kvbudget_side(c, full, o, "exact"), ours["total_bytes"], _available(c), diffs)


def exact_within(exact: dict[str, Any], sglang_bytes: int, available: int, diffs: list[str]) -> tuple[str, list[str]]:
    """``(branch, differences)`` of a buffer SGLang and kvbudget agree on: ``diffs`` and, where the
    exact plan ``exact`` plans, its bytes outside ``[SGLang's (or the budget's last 4,096-byte
    step), available]``; its checker runs."""
    if exact["error"] is None:
        p = exact["plan"]
        if p.total_bytes > available or p.total_bytes < min(sglang_bytes, available - 4095):
            diffs.append(f"exact plan {p.total_bytes} bytes: not within [SGLang's {sglang_bytes}, {available}]")
        p.check()
    return "buffer" if sglang_bytes <= available else "buffer (SGLang's over budget)", diffs


#: SGLang's checks on the buffer, by a piece of their messages.
_CHECKS = {"bs=1 floor": "bs=1 floor", "no slot past the sink": "leaves no room for real data",
           "no token": "Not enough memory", "layer_num": "layer_num must be positive",
           "row alignment": "per-rank KV row", "misaligned entry": "misaligned mamba spec",
           "int32 ids": "int32 bound", "torch view": "divisible", "MLA dims": "MLA-hybrid-Mamba"}  # fmt: skip
#: Every outcome the differential must reach.
REQUIRED = ("buffer", "draft refused", "refused mxfp8", "refused fp4_mx_block16", "refused no full layer",
            "no KV budget", "error memory (bs=1 floor)", "error memory (no slot past the sink)",
            "error memory (no token)", "error invalid (row alignment)", "error invalid (misaligned entry)",
            "error invalid (torch view)", "error invalid (int32 ids)", "error invalid (layer_num)",
            "launch: page-major backends", "launch: dcp: MLA only", "launch: dcp: backends",
            "launch: PD with DCP (any transfer backend)")  # fmt: skip


def run_all(run: Callable[[int], tuple[str, list[str]]], cases: int, required: Sequence[str], label: str) -> None:
    """Seeds ``0..cases`` through ``run`` (each gives its branch and its differences): none differs,
    and every ``required`` branch is reached."""
    hits: Counter[str] = Counter()
    failures: list[str] = []
    for seed in range(cases):
        branch, diffs = run(seed)
        hits[branch] += 1
        if diffs:
            failures.append(f"seed {seed}: {'; '.join(diffs)}")
    print(f"\n{label}: {dict(sorted(hits.items()))}")
    assert not failures, f"{len(failures)} of {cases} differ:\n" + "\n".join(failures[:15])
    missing = [b for b in required if not hits[b]]
    assert not missing, f"never reached: {missing} ({dict(hits)})"


def test_unified_state_buffer_is_sglangs(oracles: tuple[StateOracle, UnifiedMambaOracle, LaunchOracle]) -> None:
    run_all(lambda seed: run_case(oracles, seed), CASES, REQUIRED, "unified state cases")
