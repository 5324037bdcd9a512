"""A model that is both hybrid-state and hybrid-SWA (Inkling-class) under SGLang's unified memory:
kvbudget's tri-pool plan against SGLang 0.5.23's own ``init_unified_mamba_swa_pools``.

Each seeded case is a state case of ``tests/test_sglang_state.py`` made unified (no draft), with
a draw of the full-attention side (KV heads, head dims, KV dtype, page size, layers) and of the
sliding-window side (its layers, KV heads, head dims, window and the model's context length).
:mod:`sglang_oracle.state` runs ``_handle_max_mamba_cache``; :mod:`sglang_oracle.unified_mamba`
then runs ``config_from_budget``'s floor and the tri-pool factory up to its ``UnifiedKVPool`` (on
torch's meta device), and SGLang's launch checks (:mod:`sglang_oracle.unified_launch`) come first
as ``tests/test_sglang_state_unified.py`` runs them. kvbudget's ``plan_with_state(...,
fit="sglang")`` on a hybrid-SWA configurator must give SGLang's buffer (``total_bytes``), each
sub-pool's capacity (``bytes // entry``: :func:`kvbudget.sglang.state.unified_tri_entries`) and the
same refusal kind; the exact plan must fit the budget and hold at least SGLang's bytes. The
token labels are the hybrid-SWA configurator's (the parity tests hold them). Without the context
length kvbudget plans where the floor's bound settles it, and refuses by name where it does not.
"""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any

import test_sglang_state as S
from test_sglang_state_unified import (GIB, _available, _full_args, _kv_heads, _torch_dtype, exact_within,  # noqa: F401
                                       launch_outcome, oracles, planned, run_all)  # fmt: skip
from sglang_oracle.state import StateOracle
from sglang_oracle.unified_launch import LaunchOracle
from sglang_oracle.unified_mamba import UnifiedMambaOracle

CASES = int(os.environ.get("KVBUDGET_UNIFIED_TRI_CASES", "10000"))
Oracles = tuple[StateOracle, UnifiedMambaOracle, LaunchOracle]


def case(seed: int) -> tuple[S.StateCase, dict[str, Any], dict[str, Any]]:
    """State case ``seed`` made unified, its full side and its sliding-window side."""
    r = random.Random(f"unified tri {seed}")
    c = S.case(seed)
    rest = r.choice((c.rest_gib, 10 ** r.uniform(-3.5, -1), r.uniform(60, 260)))  # small buffers; 2^31 slots
    c = dataclasses.replace(c, unified_memory=True, spec=False, num_draft_tokens=None, fused_bytes=None, rest_gib=rest)
    d = S._pick(r, (64, 128, 128, 256), (72, 40, 20, 3))
    full = {"layers": r.choice((1, 2, 4, 8, 0)) if r.random() < 0.1 else r.randint(1, 12),
            "dtype": r.choice(("bf16", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp32")),
            "page": r.choice((1, 1, 16, 64, 256)), "num_kv_heads": S._pick(r, (1, 2, 4, 8, 16), (3, 5)),
            "head_dim": d, "v_head_dim": r.choice((d, d, S._pick(r, (64, 128), (12, 5))))}  # fmt: skip
    shape = r.random()
    if shape < 0.05:  # a 32-byte full entry on a large buffer: 2^31 physical ids
        full.update(layers=1, num_kv_heads=1, head_dim=16, v_head_dim=16, dtype="fp8_e4m3", page=1)
        c = dataclasses.replace(c, rest_gib=r.uniform(80, 260))
    elif shape < 0.15:  # a wide full entry on a small buffer: one full slot past the sink, or none
        full.update(layers=r.randint(32, 128), dtype=r.choice(("fp32", "bf16")), page=r.choice((1, 1, 16)),
                    num_kv_heads=r.choice((8, 16, 32, 64)), head_dim=256, v_head_dim=256)  # fmt: skip
        c = dataclasses.replace(c, rest_gib=10 ** r.uniform(-4, -1.5))
    sd = r.choice((None, None, S._pick(r, (64, 128, 256), (20, 3))))
    tiny_swa = 0.1 < shape < 0.15  # beside it, a narrow SWA side with a short window
    swa = {"layers": r.randint(1, 48), "num_kv_heads": r.choice((None, S._pick(r, (1, 2, 4, 8), (3,)))),
           "head_dim": sd, "v_head_dim": r.choice((None, sd)) if sd else None,
           "window": r.choice((None, 127, 511, 1023, 4095, r.randint(1, 8192))),
           "context": r.choice((4096, 32768, 131072, 262144, r.randint(1, 2048))),
           "given": r.random() < 0.8}  # kvbudget told the context length  # fmt: skip
    if tiny_swa:
        swa.update(layers=1, num_kv_heads=1, head_dim=16, v_head_dim=16, window=r.randint(1, 16))
    return c, full, swa


def _model(full: dict[str, Any], swa: dict[str, Any]) -> Any:
    import kvbudget

    nf = full["layers"]
    return kvbudget.ModelGeometry(
        full_attention_layer_ids=list(range(nf)), swa_attention_layer_ids=list(range(nf, nf + swa["layers"])),
        num_kv_heads=full["num_kv_heads"], head_dim=full["head_dim"], v_head_dim=full["v_head_dim"],
        swa_num_kv_heads=swa["num_kv_heads"], swa_head_dim=swa["head_dim"], swa_v_head_dim=swa["v_head_dim"],
        sliding_window_size=swa["window"])  # fmt: skip


def kvbudget_side(c: S.StateCase, full: dict[str, Any], swa: dict[str, Any], o: dict[str, Any],
                  fit: str) -> dict[str, Any]:  # fmt: skip
    """kvbudget's tri-pool plan of ``c`` (its state as ``test_sglang_state`` builds it)."""
    from kvbudget.sglang.state import unified_tri_entries

    state, serving, spec = o["inputs"]
    got = planned(c, lambda: (_model(full, swa), serving.replace(
        tp_size=c.tp, kv_cache_dtype=full["dtype"], page_size=full["page"],
        model_context_len=swa["context"] if swa["given"] else None)), spec, state, fit)  # fmt: skip
    if isinstance(got, dict):
        return got
    cfg, plan, budget, pool = got
    e_f, e_s, e_m = unified_tri_entries(cfg, state)
    c_ = plan.config
    return {"error": None, "plan": plan, "total_bytes": pool.nbytes, "slots": budget.max_mamba_cache_size,
            "labels": (c_.full_max_total_num_tokens, c_.swa_max_total_num_tokens),
            "max_slots": {"mamba": pool.nbytes // e_m, "swa": pool.nbytes // e_s, "full": pool.nbytes // e_f}}  # fmt: skip


def _swa_args(full: dict[str, Any], swa: dict[str, Any], tp: int) -> dict[str, Any]:
    """SGLang's SWA head geometry: ``get_swa_num_kv_heads`` (the full KV heads without its own)
    and the SWA dims (``ModelConfig``'s defaults: the full side's)."""
    d = swa["head_dim"] or full["head_dim"]
    return {"head_num": _kv_heads(swa["num_kv_heads"] or full["num_kv_heads"], tp), "head_dim": d,
            "v_head_dim": swa["v_head_dim"] or (d if swa["head_dim"] else full["v_head_dim"])}  # fmt: skip


def run_case(oracles: Oracles, seed: int) -> tuple[str, list[str]]:
    """``(branch, differences)`` of seed ``seed``."""
    sglang, unified, launch = oracles
    c, full, swa = case(seed)
    c = dataclasses.replace(c, rest_gib=_available(c) / GIB)
    t = sglang.run(c)
    o = S.kvbudget_run(c, t)
    if t["error"] or o["error"]:  # the state budget's outcome is test_sglang_state's
        return "state refused", S.compare(c, t, o)
    ours = kvbudget_side(c, full, swa, o, "sglang")
    s_args = _swa_args(full, swa, c.tp)
    dims = (full["head_dim"], full["v_head_dim"], s_args["head_dim"], s_args["v_head_dim"])
    out = launch_outcome(launch, ours, disagg=c.disagg, pp=1, dcp=1, mla=False, backends=None, hybrid_swa=True,
                         dims=dims)  # fmt: skip
    if out is not None:
        return out
    err = ours["error"]
    budget = int(t["rest_gib"] * GIB)  # SGLang's _profile_available_bytes: int(rest_memory * (1 << 30))
    if budget <= 0:  # it raises "Loaded weights leave no GPU memory" before any pool is sized
        ok = err and err[0] == "memory" and "no bytes" in err[1]
        return "no KV budget", [] if ok else [f"kvbudget: {ours}"]
    # The hybrid-SWA configurator's refusal (no token fits; the request cap leaves the full pool none): the
    # parity tests hold it; SGLang's MemoryPoolConfig then raises its own "Not enough memory".
    none_fits = err is not None and any(m in err[1] for m in ("max_total_num_tokens would be", "leaves no room"))
    if full["layers"] == 0 and not none_fits:  # an all-SWA stage: the factory's assertion
        return "refused no full layer", [] if err and err[0] == "invalid" else [f"kvbudget: {ours}"]
    labels = (0, 0) if none_fits else ours.get("labels", (1, 1))
    theirs = unified.run_tri(
        budget_bytes=budget, tokens=labels, page_size=full["page"], kv_dtype=_torch_dtype(full["dtype"]),
        full=_full_args(full, c.tp), swa=s_args, params=t["params"], max_mamba_cache_size=t["max_mamba_cache_size"],
        layers={"mamba": list(range(o["inputs"][0].stage_state_layers or len(S._layers(c)))),
                "full": list(range(full["layers"])), "swa": list(range(full["layers"], full["layers"] + swa["layers"]))},
        sliding_window_size=swa["window"], model_context_len=swa["context"])  # fmt: skip
    if err and "without model_context_len" in err[1]:  # kvbudget's own: the floor hangs on the context
        return "refused: no context", [] if not swa["given"] else [f"SGLang {theirs} vs kvbudget {err}"]
    t_err, o_err = theirs["error"] and theirs["error"][0], err and err[0]
    if t_err or o_err:
        what = next((k for k, m in _CHECKS.items() if m in str(theirs["error"] or err)), "other")
        return f"error {t_err} ({what})", [] if t_err == o_err else [f"SGLang {theirs['error']} vs kvbudget {err}"]
    diffs = [f"{k}: SGLang {a} vs kvbudget {b}" for k, a, b in (
        ("total_bytes", theirs["total_bytes"], ours["total_bytes"]),
        ("max_slots (bytes // entry, by sub-pool)", theirs["max_slots"], ours["max_slots"])) if a != b]  # fmt: skip
    return exact_within(kvbudget_side(c, full, swa, o, "exact"), ours["total_bytes"], _available(c), diffs)


#: SGLang's checks on the tri-pool, by a piece of their messages.
_CHECKS = {"bs=1 floor": "bs=1 floor", "no slot past the sink": "leaves no room for real data",
           "no token": "Not enough memory", "row alignment": "per-rank KV row", "int32 ids": "int32 bound",
           "misaligned entry": "misaligned mamba spec", "torch view": "divisible",
           "zero state layers": "zero state layers"}  # fmt: skip
#: Every outcome the differential must reach.
#: (A sub-pool with no slot past the slot-0 sink, which the buffer's sub-pool checks share with the
#: two-pool buffer, is reached by ``tests/test_sglang_state_unified.py``: here a page of full tokens
#: must fit the configurator yet leave the buffer less than one more entry, which draws seldom give.)
REQUIRED = ("buffer", "refused no full layer", "refused: no context", "error memory (bs=1 floor)",
            "error memory (no token)", "error invalid (row alignment)", "error invalid (int32 ids)",
            "error invalid (zero state layers)")


def test_unified_tri_pool_is_sglangs(oracles: Oracles) -> None:  # noqa: F811
    run_all(lambda seed: run_case(oracles, seed), CASES, REQUIRED, "unified tri-pool cases")
