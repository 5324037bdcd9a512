"""SGLang's hybrid-state (Mamba / GDN / KDA) budget: kvbudget against SGLang 0.5.23's own code.

:mod:`sglang_oracle.state` runs SGLang's state shapes (the configs'
``mamba2_cache_params`` and ``configs/mamba_utils.py``), ``_handle_max_mamba_cache``,
``_calculate_mamba_ratio`` and ``resolve_max_num_reqs``, lifted from the verified
wheel, on seeded random cases (``KVBUDGET_STATE_CASES``, default 10000) that
reach every branch; where SGLang builds the state pool, its ``MambaPool`` (lifted, on torch's
meta device: :mod:`sglang_oracle.mamba_pool`) against kvbudget's planned state pool, tensor by
tensor. kvbudget gets the same inputs through
:mod:`kvbudget.sglang.state` (imported inside the tests, so the oracle's
self-tests run without it): the state dims from ``mamba2_dims`` /
``full_rank_dims`` / ``kda_dims`` (the config's arguments, as that config's
``mamba2_cache_params`` passes them), the per-stage layer share from
:func:`kvbudget.ranks.pp_layer_ranges`, and the dtypes SGLang resolved. Every
value must be equal (``rest_gib`` as a float, exactly) and every refusal the
same kind at the same stage; the branch counts must show every branch was hit.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections import Counter
from typing import Any

import pytest

from sglang_oracle import state as oracle_state
from sglang_oracle._fetch import sglang_root
from sglang_oracle._strict import StubError
from sglang_oracle.state import StateCase, StateOracle

CASES = int(os.environ.get("KVBUDGET_STATE_CASES", "10000"))
GIB = 1 << 30
DTYPES = ("float32", "bfloat16", "float16")


@pytest.fixture(scope="module")
def sglang() -> StateOracle:
    return oracle_state.load(sglang_root())


# -- the case generator --------------------------------------------------------------------------
def _pick(r: random.Random, common: tuple[Any, ...], odd: tuple[Any, ...], p_odd: float = 0.04) -> Any:
    return r.choice(odd if r.random() < p_odd else common)


def _layer_ids(r: random.Random, n: int) -> list[int]:
    if r.random() < 0.01:
        return []
    if r.random() < 0.6:
        k = r.choice((2, 4, 4, 6, 8))  # every k-th layer is full attention
        return [i for i in range(n) if (i + 1) % k != 0] or [0]
    return sorted(r.sample(range(n), r.randint(1, n)))


def _model(r: random.Random, source: str, n: int) -> dict[str, Any]:
    heads = (1, 2, 4, 8, 16, 32, 64)
    if source == "gdn":
        kh = _pick(r, (2, 4, 8, 16, 16, 32), (1, 3, 5, 6, 12), 0.1)
        return dict(linear_num_key_heads=kh, linear_num_value_heads=kh * r.choice((1, 2, 4)),
                    linear_key_head_dim=_pick(r, (64, 128, 128, 256), (24, 96)),
                    linear_value_head_dim=_pick(r, (64, 128, 128, 256), (24, 96)),
                    linear_conv_kernel_dim=r.choice((2, 3, 4, 4, 4)), linear_layer_ids=_layer_ids(r, n),
                    mamba_ssm_dtype=r.choice((None, None) + DTYPES + ("fp8",)))  # fmt: skip
    if source == "nemotron_h":
        return dict(mamba_num_heads=_pick(r, (8, 16, 32, 64, 128), (12, 24, 40)), mamba_head_dim=r.choice((32, 64, 128)),
                    n_groups=_pick(r, (1, 2, 4, 8), (3, 5, 6, 12), 0.15), ssm_state_size=r.choice((64, 128, 256)),
                    conv_kernel=r.choice((4, 4, 3)), mamba_layer_ids=_layer_ids(r, n),
                    mamba_ssm_dtype=r.choice((None, None) + DTYPES + ("half",)))  # fmt: skip
    if source == "mamba2":
        nh, hd = _pick(r, (32, 64, 128), (24, 48)), r.choice((32, 64))
        return dict(num_heads=nh, head_dim=hd, intermediate_size=_pick(r, (nh * hd,), (nh * hd + 8, nh * hd * 2), 0.2),
                    n_groups=_pick(r, (1, 2, 8), (3, 6), 0.15), state_size=r.choice((64, 128)),
                    conv_kernel=4, num_hidden_layers=n)  # fmt: skip
    if source == "mamba1":
        return dict(intermediate_size=_pick(r, (1024, 2048, 4096, 8192), (1002, 1540)), state_size=r.choice((16, 16, 32)),
                    conv_kernel=r.choice((4, 4, 2)), num_hidden_layers=n)  # fmt: skip
    ids = _layer_ids(r, n)
    nh, hd = _pick(r, (8, 16, 32, 64), (6, 12, 20)), r.choice((64, 128, 128))
    if source == "lightning":  # Bailing's: use_kda off, the attention heads as the state heads
        return dict(use_kda=False, num_linear_key_value_heads=nh, head_dim=hd, linear_layer_ids=ids)
    if source == "kda":
        return dict(linear_attn_config={"num_heads": nh, "head_dim": hd,
                                        "short_conv_kernel_size": r.choice((4, 4, 3))}, linear_layer_ids=ids)
    return dict(num_heads=nh, head_dim=hd, num_k_heads=_pick(r, heads, (3, 5, 6, 12), 0.15),
                head_k_dim=r.choice((None, 32, 64, 128)), conv_kernel_size=r.choice((4, 2)), linear_layer_ids=ids)


def case(seed: int) -> StateCase:
    """The seeded case ``seed``."""
    r = random.Random(f"state {seed}")
    source = r.choice(("gdn", "gdn", "gdn", "nemotron_h", "nemotron_h", "mamba2", "mamba1", "kda", "kda", "kda_direct",
                       "lightning"))  # fmt: skip
    pp = r.choice((1, 1, 1, 2, 3, 4))
    n = r.randint(max(pp, 2), 96)
    hf = _model(r, source, n)
    spec = r.random() < 0.35
    dp = r.choice((1, 1, 1, 2, 3, 4, 8))
    mrr = None if r.random() < 0.3 else r.choice((r.randint(1, 16), r.randint(1, 1024), r.randint(1, 8) * dp))
    mmcs = None if r.random() < 0.65 else r.choice((r.randint(0, 16), r.randint(0, 4096), r.randint(0, dp)))
    rest = r.choice((10 ** r.uniform(-4, 2.5), r.uniform(-1, 4), r.uniform(1, 200), 80.0))
    return StateCase(
        source=source, hf=hf, num_hidden_layers=n, tp=r.choice((1, 1, 2, 4, 8)), pp=pp, attn_dp=dp,
        env_conv_dtype=r.choice(("bfloat16", "bfloat16", "float16", "float32", "fp8")),
        env_ssm_dtype=r.choice((None, None, None) + DTYPES + ("int4",)), skip_decode_lock=r.random() < 0.3,
        spec=spec, num_draft_tokens=(r.randint(1, 16) if r.random() < 0.95 else None) if spec else None,
        max_running_requests=mrr, max_mamba_cache_size=mmcs,
        mamba_full_memory_ratio=r.choice((0.9, r.uniform(0.05, 5.0), r.uniform(0.05, 1.0))),
        disable_radix_cache=r.random() < 0.3, disable_overlap_schedule=r.random() < 0.3,
        strategy=r.choice(("no_buffer", "extra_buffer", "extra_buffer_lazy")), replay=r.random() < 0.25,
        replay_len=r.choice((16, 16, r.randint(1, 64))),
        extra_bytes=0 if r.random() < 0.7 else r.randint(0, 1 << 24),
        fused_bytes=None if r.random() < 0.85 else r.randint(1 << 16, 1 << 28),
        disagg=r.choice(("null", "null", "null", "prefill", "prefill", "decode")), role_switch=r.random() < 0.3,
        unified_memory=r.random() < 0.2, rest_gib=rest,
        token_capacity=r.choice((r.randint(0, 64), int(10 ** r.uniform(0, 6.7)), r.randint(1, 1 << 21))),
        context_len=r.choice((2048, 8192, 32768, 131072, 262144, 1 << 20)),
        eagle_topk=r.choice((None, 1, 1, 2, 4)),
    )  # fmt: skip


# -- kvbudget's side -----------------------------------------------------------------------------
def _layers(c: StateCase) -> list[int]:
    h = c.hf
    ids = h.get("linear_layer_ids", h.get("mamba_layer_ids"))
    return list(range(c.num_hidden_layers)) if ids is None else list(ids)


def _dims(st: Any, c: StateCase) -> Any:
    """kvbudget's state dims, with the arguments ``c.source``'s ``mamba2_cache_params`` passes."""
    h, tp = c.hf, c.tp
    if c.source == "gdn":
        return st.mamba2_dims(tp_size=tp, intermediate_size=h["linear_value_head_dim"] * h["linear_num_value_heads"],
                              n_groups=h["linear_num_key_heads"], num_heads=h["linear_num_value_heads"],
                              head_dim=h["linear_value_head_dim"], state_size=h["linear_key_head_dim"],
                              conv_kernel=h["linear_conv_kernel_dim"])  # fmt: skip
    if c.source == "nemotron_h":
        return st.mamba2_dims(tp_size=tp, intermediate_size=h["mamba_num_heads"] * h["mamba_head_dim"],
                              n_groups=h["n_groups"], num_heads=h["mamba_num_heads"], head_dim=h["mamba_head_dim"],
                              state_size=h["ssm_state_size"], conv_kernel=h["conv_kernel"])  # fmt: skip
    if c.source == "mamba2":
        return st.mamba2_dims(tp_size=tp, intermediate_size=h["intermediate_size"], n_groups=h["n_groups"],
                              num_heads=h["num_heads"], head_dim=h["head_dim"], state_size=h["state_size"],
                              conv_kernel=h["conv_kernel"])  # fmt: skip
    if c.source == "mamba1":
        return st.full_rank_dims(tp_size=tp, intermediate_size=h["intermediate_size"], state_size=h["state_size"],
                                 conv_kernel=h["conv_kernel"])  # fmt: skip
    if c.source == "lightning":
        return st.mamba2_dims(tp_size=tp, intermediate_size=0, n_groups=0, num_heads=h["num_linear_key_value_heads"],
                              head_dim=h["head_dim"], state_size=h["head_dim"], conv_kernel=1)  # fmt: skip
    if c.source == "kda":
        a = h["linear_attn_config"]
        return st.kda_dims(tp_size=tp, num_heads=a["num_heads"], head_dim=a["head_dim"],
                           conv_kernel=a["short_conv_kernel_size"])  # fmt: skip
    return st.kda_dims(tp_size=tp, num_heads=h["num_heads"], head_dim=h["head_dim"], num_k_heads=h["num_k_heads"],
                       head_k_dim=h["head_k_dim"], conv_kernel=h["conv_kernel_size"])  # fmt: skip


def _stage_layers(c: StateCase, layers: list[int], r: random.Random) -> int | None:
    from kvbudget.ranks import pp_layer_ranges

    if c.pp == 1:
        return r.choice((None, len(layers)))
    return max(sum(1 for i in layers if a <= i < b) for a, b in pp_layer_ranges(c.num_hidden_layers, c.pp))


def kvbudget_run(c: StateCase, theirs: dict[str, Any]) -> dict[str, Any]:
    """kvbudget's outcome for ``c`` in the oracle's terms (dtypes: those SGLang resolved)."""
    import kvbudget
    from kvbudget.errors import InvalidConfigError
    import kvbudget.sglang.state as st
    from kvbudget.sglang.state import StateCacheTooSmallError

    out: dict[str, Any] = {"error": None, "error_stage": None}
    serving = kvbudget.ServingConfig(
        max_running_requests=c.max_running_requests, attn_dp_size=c.attn_dp,
        disable_radix_cache=c.disable_radix_cache, disable_overlap_schedule=c.disable_overlap_schedule,
        disaggregation_mode=c.disagg, enable_unified_memory=c.unified_memory)  # fmt: skip
    spec = kvbudget.SpeculativeConfig(algorithm="EAGLE" if c.spec else "none", num_draft_tokens=c.num_draft_tokens,
                                      eagle_topk=c.eagle_topk)  # fmt: skip
    out["max_num_reqs_plain"] = st.max_num_reqs(c.token_capacity, c.context_len, serving)  # no state: never refuses
    stage = "shape"
    try:
        dims = _dims(st, c)
        out["dims"] = dims
        shape = theirs["shape"] or {}
        layers = _layers(c)
        state = st.StateConfig(
            num_state_layers=len(layers), stage_state_layers=_stage_layers(c, layers, random.Random(repr(c))),
            conv_dtype=shape.get("conv_dtype", "bfloat16"), ssm_dtype=shape.get("ssm_dtype", "float32"),
            mixer=c.mixer, extra_bytes_per_req=c.extra_bytes, fused_state_entry_bytes=c.fused_bytes,
            max_mamba_cache_size=c.max_mamba_cache_size, mamba_full_memory_ratio=c.mamba_full_memory_ratio,
            mamba_radix_cache_strategy=c.strategy, mamba_skip_decode_lock=c.skip_decode_lock,
            enable_linear_replayssm_spec=c.replay, linear_replayssm_cache_len=c.replay_len,
            enable_pd_role_switch=c.role_switch, **dims,
        )  # fmt: skip
        try:
            out["mamba_ratio"] = st.mamba_ratio(state, serving)
        except InvalidConfigError:
            out["mamba_ratio"] = None
        stage = "budget"
        b = st.state_budget(state, serving, spec, c.rest_gib)
        out.update(max_mamba_cache_size=b.max_mamba_cache_size, rest_gib=b.rest_gib, per_req_bytes=b.per_req_bytes,
                   budget_ratio=b.mamba_ratio,
                   extra_per_slot=b.extra_per_slot, fixed_bytes=b.fixed_bytes,
                   intermediate_bytes=b.intermediate_bytes, state_bytes=b.state_bytes)  # fmt: skip
        stage = "resolve"
        out["max_num_reqs"] = st.max_num_reqs(c.token_capacity, c.context_len, serving, state=state,
                                              max_mamba_cache_size=b.max_mamba_cache_size)  # fmt: skip
        out["inputs"] = (state, serving, spec)
    except StateCacheTooSmallError as e:
        out.update(error=("state_too_small", str(e)), error_stage=stage)
    except InvalidConfigError as e:
        out.update(error=("invalid", str(e)), error_stage=stage)
    except Exception as e:  # noqa: BLE001 (any other exception is a mismatch, reported with the case)
        out.update(error=(f"unexpected {type(e).__name__}", str(e)), error_stage=stage)
    return out


def compare(c: StateCase, t: dict[str, Any], o: dict[str, Any]) -> list[str]:
    """The differences between SGLang's outcome ``t`` and kvbudget's ``o``."""
    diffs: list[str] = []
    t_err = (t["error"][0], t["error_stage"]) if t["error"] else None
    o_err = (o["error"][0], o["error_stage"]) if o["error"] else None
    if t_err != o_err:
        diffs.append(f"error: SGLang {t_err} {t['error_type']} {t['error'] and t['error'][1][:160]!r} "
                     f"vs kvbudget {o_err} {o['error'] and o['error'][1][:160]!r}")  # fmt: skip
    if "dims" in o and t["shape"] is not None:
        s, d = t["shape"], o["dims"]
        want = {"conv_elems": sum(math.prod(x) for x in s["conv"]), "ssm_heads": s["temporal"][0],
                "ssm_head_dim": s["temporal"][1], "ssm_state_dim": s["temporal"][2],
                "k_heads_per_tp": s["k_heads_per_tp"], "conv_kernel": s["conv_kernel"]}  # fmt: skip
        if dict(d) != want:
            diffs.append(f"dims: SGLang {want} vs kvbudget {dict(d)}")
    loc = t["locals"]
    pairs = [("max_num_reqs_plain", t["max_num_reqs_plain"], o.get("max_num_reqs_plain"))]
    if t["error"] is None or t["error_stage"] == "resolve":
        if t["mamba_ratio"] is not None or o.get("mamba_ratio") is not None:
            pairs.append(("mamba_ratio", t["mamba_ratio"], o.get("mamba_ratio")))
        pairs += [("max_mamba_cache_size", t["max_mamba_cache_size"], o.get("max_mamba_cache_size")),
                  ("rest_gib", t["rest_gib"], o.get("rest_gib")),
                  ("StateBudget.mamba_ratio", t["mamba_ratio"], o.get("budget_ratio")),
                  ("per_req_bytes (stage_per_req)", loc["stage_per_req"], o.get("per_req_bytes")),
                  ("extra_per_slot", loc["extra_per_slot"], o.get("extra_per_slot")),
                  ("fixed_bytes", loc["replayssm_fixed_bytes"], o.get("fixed_bytes")),
                  ("intermediate_bytes", loc.get("intermediate_size", 0), o.get("intermediate_bytes")),
                  ("state_bytes / 2**30", loc["mamba_state_memory"],
                   None if o.get("state_bytes") is None else o["state_bytes"] / GIB),
                  ("max_num_reqs", t["max_num_reqs"], o.get("max_num_reqs"))]  # fmt: skip
    for name, a, b in pairs:
        if a != b or type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int)):
            diffs.append(f"{name}: SGLang {a!r} vs kvbudget {b!r}")
    return diffs


def _sizes(x: list[tuple[tuple[int, ...], str]]) -> tuple[tuple[int, ...], int, str]:
    """Shapes of one kind as their shared leading dims (layers, rows), total elements and dtype."""
    lead = {s[:2] for s, _ in x}
    return (lead.pop() if len(lead) == 1 else (), sum(math.prod(s) for s, _ in x), ",".join(sorted({d for _, d in x})))


def pool_compare(sglang: StateOracle, c: StateCase, t: dict[str, Any], o: dict[str, Any]) -> tuple[str, list[str]]:
    """SGLang's ``MambaPool`` for the budget's slots (on meta) against kvbudget's state pool: every
    tensor kind, shape and dtype (KDA's conv states, three shapes in SGLang and one flat tensor in
    kvbudget, by their (layers, rows) and elements), and the per-request rows at least SGLang's ``max_num_reqs``. The
    caller's extra bytes are SGLang's caller's, not the pool's (left out). Returns the branch hit
    and the differences."""
    import kvbudget.sglang.state as st
    from kvbudget.errors import InvalidConfigError

    if t["error"] or o["error"] or c.fused_bytes is not None or t["params"] is None:
        return "", []
    state, serving, spec = o["inputs"]
    slots = t["max_mamba_cache_size"]
    try:
        ours_pool = st.state_pool(state, serving, spec, slots)
    except InvalidConfigError as e:
        ours_pool, refusal = None, str(e)
    ours = {x.kind: [(tuple(x.shape), x.dtype)] for x in ours_pool.tensors} if ours_pool else {}
    ours.pop("state_extra", None)
    # kvbudget's per-request buffers serve min(running per rank, slots // ratio) requests: the most
    # SGLang's max_num_reqs gives for these slots whatever the KV pool holds (checked below).
    mrr = c.max_running_requests
    requests = None if mrr is None else min(max(1, mrr // c.attn_dp), slots // t["mamba_ratio"])
    spec_on = c.spec and not sglang.pd_prefill_skips_for(c)
    replay = c.replay and c.mixer != "mamba2"
    try:
        theirs = sglang.pool.tensors(t["params"], size=slots, spec_state_size=requests or 0,
                                     layers=state.stage_state_layers, draft_tokens=c.num_draft_tokens if spec_on else None,
                                     topk=c.eagle_topk, replay=replay, replay_len=c.replay_len)  # fmt: skip
    except ValueError as e:  # MambaPool's ring checks
        ok = ours_pool is None and str(e) in refusal
        return "pool refused", [] if ok else [f"pool: SGLang ValueError {e} vs kvbudget {refusal if ours_pool is None else 'a pool'}"]
    if ours_pool is None:
        return "pool refused", [f"pool: kvbudget refused ({refusal}) where SGLang allocated {sorted(theirs)}"]
    diffs = []
    if set(theirs) != set(ours):
        diffs.append(f"pool kinds: SGLang {sorted(theirs)} vs kvbudget {sorted(ours)}")
    for kind in sorted(set(theirs) & set(ours)):
        a, b = theirs[kind], ours[kind]
        flat = kind in ("conv_state", "intermediate_conv_window") and c.mixer == "kda"  # KDA: q, k, v apart
        same = _sizes(a) == _sizes(b) if flat else a == b
        if not same:
            diffs.append(f"pool {kind}: SGLang {a} vs kvbudget {b}")
    if requests is not None and t["max_num_reqs"] > requests:
        diffs.append(f"pool: {requests} requests' buffers, below SGLang's max_num_reqs {t['max_num_reqs']}")
    dedup = "intermediate_conv_window" in theirs and len(theirs["intermediate_conv_window"][0][0]) == 4
    return f"pool {'spec ' if spec_on else ''}{'replay ' if replay else ''}{'dedup' if dedup else ''}".strip(), diffs


def branches(c: StateCase, t: dict[str, Any]) -> Counter[str]:
    """The branches SGLang took on case ``c`` (names for the counts)."""
    loc, hits = t["locals"], Counter[str]()
    hits[f"source {c.source}"] += 1
    hits[f"tp {c.tp}"] += 1
    hits[f"attn_dp {c.attn_dp}"] += 1
    if t["error"]:
        hits[f"error {t['error'][0]} at {t['error_stage']} ({t['error_type']})"] += 1
    if t["shape"] is None:
        return hits
    shape = t["shape"]
    hits[f"dtypes {shape['conv_dtype']}/{shape['ssm_dtype']}"] += 1
    n_groups = c.hf.get("n_groups", c.hf.get("linear_num_key_heads", c.hf.get("num_k_heads")))
    if isinstance(n_groups, int) and n_groups % c.tp:
        hits["non-divisible n_groups / k heads"] += 1
    if t["branch"]:
        hits[f"branch {t['branch']}"] += 1
    if c.max_mamba_cache_size is not None and c.max_mamba_cache_size // c.attn_dp == 0:
        hits["explicit size 0 after // attn_dp"] += 1
    if loc.get("replayssm_active"):
        hits[f"replayssm {c.mixer}"] += 1
    if loc.get("reserves_spec_state"):
        hits["spec state reserved"] += 1
    if c.spec and loc.get("reserves_spec_state") is False and c.disagg == "prefill":
        hits["PD prefill skips spec state"] += 1
    if loc.get("pp_layer_scale", 1.0) < 1.0:
        hits["pp share < 1"] += 1
    if c.fused_bytes is not None:
        hits["fused state entry"] += 1
    if loc.get("extra_per_slot"):
        hits["extra per slot"] += 1
    if loc.get("replayssm_fixed_bytes"):
        hits["replayssm fixed bytes"] += 1
    if t["mamba_ratio"] is not None:
        hits[f"ratio {t['mamba_ratio']}"] += 1
    if t["ratio_error"]:
        hits[f"ratio error {t['ratio_error']}"] += 1
    if t["max_num_reqs"] is not None:
        hits["resolved"] += 1
        if t["max_num_reqs"] < min(t["max_num_reqs_plain"], c.token_capacity // 2):
            hits["resolve capped by the state cache"] += 1
    return hits


#: Every branch the differential must reach (a count of 0 fails the test).
REQUIRED = (
    [f"source {s}" for s in oracle_state.SOURCES] + [f"branch {label}" for label in sorted(oracle_state.LABELS)]
    + [f"tp {t}" for t in (1, 2, 4, 8)] + [f"attn_dp {d}" for d in (1, 2, 4, 8)]
    + [f"replayssm {m}" for m in ("gdn", "kda")] + [f"ratio {k}" for k in (1, 3, 4, 5)]
    + ["non-divisible n_groups / k heads", "explicit size 0 after // attn_dp", "spec state reserved",
       "PD prefill skips spec state", "pp share < 1", "fused state entry", "extra per slot", "replayssm fixed bytes",
       "ratio error AssertionError", "resolved", "resolve capped by the state cache",
       "error state_too_small at budget (RuntimeError)", "error state_too_small at resolve (RuntimeError)",
       "error invalid at shape (AssertionError)", "error invalid at budget (AssertionError)",
       "error invalid at budget (TypeError)", "error invalid at resolve (AssertionError)"]
    + [f"dtypes {a}/{b}" for a in DTYPES for b in DTYPES]
    + ["pool", "pool spec", "pool spec dedup", "pool replay", "pool spec replay", "pool refused"]
)  # fmt: skip


# -- the oracle's self-tests (no kvbudget) --------------------------------------------------------
def _qwen3_next(**kw: Any) -> StateCase:
    hf = dict(linear_num_key_heads=16, linear_num_value_heads=32, linear_key_head_dim=128, linear_value_head_dim=128,
              linear_conv_kernel_dim=4, linear_layer_ids=[i for i in range(48) if (i + 1) % 4], mamba_ssm_dtype=None)
    return StateCase(**{"source": "gdn", "hf": hf, "num_hidden_layers": 48, **kw})  # fmt: skip


def test_the_oracle_on_a_qwen3_next_like_gdn(sglang: StateOracle) -> None:
    t = sglang.run(_qwen3_next(rest_gib=40.0, token_capacity=10**6, context_len=262144))
    s = t["shape"]
    # conv over cat(q, k, v): 2 * 16 * 128 + 32 * 128 channels, window K - 1; SSM (hv, v_dim, k_dim)
    assert s["conv"] == [(2 * 16 * 128 + 32 * 128, 3)] and s["temporal"] == (32, 128, 128) and len(s["layers"]) == 36
    assert (s["conv_dtype"], s["ssm_dtype"], s["k_heads_per_tp"]) == ("bfloat16", "float32", 16)
    per_layer = 8192 * 3 * 2 + 32 * 128 * 128 * 4
    assert t["per_req_bytes"] == 36 * per_layer and t["error"] is None
    k, budget = t["max_mamba_cache_size"], 40.0 * 0.9 / 1.9 * GIB
    assert t["branch"] == "mamba_pool.memory_budget" and (k + 1) * 36 * per_layer <= budget < (k + 2) * 36 * per_layer
    assert math.isclose(t["rest_gib"], 40.0 - (k + 1) * 36 * per_layer / GIB)
    assert t["mamba_ratio"] == 3 and t["max_num_reqs"] == min(2048, k // 3)
    half = sglang.run(_qwen3_next(tp=2, rest_gib=40.0))
    assert half["per_req_bytes"] * 2 == t["per_req_bytes"] and half["shape"]["k_heads_per_tp"] == 8
    bf16 = sglang.run(_qwen3_next(env_ssm_dtype="bfloat16"))
    assert bf16["shape"]["ssm_dtype"] == "bfloat16" and bf16["per_req_bytes"] < t["per_req_bytes"]
    staged = sglang.run(_qwen3_next(pp=4, rest_gib=40.0))  # 12 layers a stage, 9 of them GDN
    assert staged["locals"]["stage_per_req"] == int(36 * per_layer * (9 / 36))


def test_the_oracle_branches_and_refusals(sglang: StateOracle) -> None:
    tiny = sglang.run(_qwen3_next(rest_gib=0.01))
    assert tiny["error"][0] == "state_too_small" and "Not enough GPU memory" in tiny["error"][1]
    no_cap = sglang.run(_qwen3_next(spec=True, num_draft_tokens=4))
    assert (no_cap["error"][0], no_cap["error_type"], no_cap["error_stage"]) == ("invalid", "AssertionError", "budget")
    spec = sglang.run(_qwen3_next(spec=True, num_draft_tokens=4, max_running_requests=64, rest_gib=60.0))
    assert spec["branch"] == "mamba_pool.memory_budget_spec" and spec["locals"]["intermediate_size"] > 0
    pd = sglang.run(_qwen3_next(spec=True, num_draft_tokens=4, max_running_requests=64, rest_gib=60.0, disagg="prefill"))
    assert pd["locals"]["reserves_spec_state"] is False and pd["max_mamba_cache_size"] > spec["max_mamba_cache_size"]
    explicit = sglang.run(_qwen3_next(max_mamba_cache_size=7, attn_dp=8))
    assert explicit["branch"] == "mamba_pool.per_dp_shard" and explicit["error"][0] == "state_too_small"
    from_mrr = sglang.run(_qwen3_next(disable_radix_cache=True, max_running_requests=5, attn_dp=2))
    assert from_mrr["max_mamba_cache_size"] == 2 and from_mrr["mamba_ratio"] == 1
    replay = sglang.run(_qwen3_next(replay=True, max_running_requests=8))
    assert replay["locals"]["replayssm_fixed_bytes"] == replay["replay_ring_bytes"] * 9
    replay_no_cap = sglang.run(_qwen3_next(replay=True))
    assert (replay_no_cap["error"][0], replay_no_cap["error_type"]) == ("invalid", "TypeError")
    ratios = {(s, skip, d): sglang.run(_qwen3_next(strategy=s, skip_decode_lock=skip, disable_overlap_schedule=d))
              for s in ("no_buffer", "extra_buffer", "extra_buffer_lazy") for skip in (False, True) for d in (False, True)}
    got = {k: v["mamba_ratio"] for k, v in ratios.items()}
    assert got[("no_buffer", False, False)] == 3 and got[("extra_buffer", False, False)] == 5
    assert got[("extra_buffer", False, True)] == 4 and got[("extra_buffer_lazy", False, False)] == 4
    assert got[("extra_buffer_lazy", True, True)] is None  # lazy needs the overlap schedule: SGLang asserts
    assert ratios[("extra_buffer_lazy", True, True)]["error_stage"] == "resolve"
    small = sglang.run(_qwen3_next(token_capacity=1))
    assert small["error"][0] == "state_too_small" and small["error_stage"] == "resolve"
    assert small["max_num_reqs_plain"] == 0  # no state config: SGLang returns 0 and does not refuse


def test_the_oracle_shapes(sglang: StateOracle) -> None:
    m1 = sglang.run(StateCase("mamba1", dict(intermediate_size=4096, state_size=16, conv_kernel=4, num_hidden_layers=8),
                              8, tp=2))  # fmt: skip
    assert m1["shape"]["conv"] == [(2048, 3)] and m1["shape"]["temporal"] == (2048, 1, 16)
    bad = sglang.run(StateCase("mamba1", dict(intermediate_size=1004, state_size=16, conv_kernel=4,
                                              num_hidden_layers=8), 8, tp=8))  # fmt: skip
    assert (bad["error"][0], bad["error_stage"]) == ("invalid", "shape")
    kda = sglang.run(StateCase("kda", dict(linear_attn_config={"num_heads": 32, "head_dim": 128,
                                                               "short_conv_kernel_size": 4},
                                           linear_layer_ids=[0, 1, 2]), 4, tp=4))  # fmt: skip
    assert kda["shape"]["conv"] == [(3, 3 * 32 * 128 // 4)] and kda["shape"]["temporal"] == (8, 128, 128)
    nem = sglang.run(StateCase("nemotron_h", dict(mamba_num_heads=128, mamba_head_dim=64, n_groups=1, ssm_state_size=128,
                                                  conv_kernel=4, mamba_layer_ids=[0, 2], mamba_ssm_dtype="float16"),
                               4, tp=4))  # fmt: skip
    # n_groups 1 on 4 ranks is replicated to 4 groups: conv (128 * 64 + 2 * 4 * 128) / 4
    assert nem["shape"]["conv"] == [((128 * 64 + 2 * 4 * 128) // 4, 3)] and nem["shape"]["ssm_dtype"] == "float16"


def test_the_stubs_are_strict(sglang: StateOracle) -> None:
    with pytest.raises(StubError):
        sglang.run(StateCase("gdn", {"linear_num_key_heads": 4}, 4))  # a config attribute the case lacks
    with pytest.raises(StubError):
        StateOracle._getenv("SGLANG_SOMETHING_ELSE")


# -- the differential ----------------------------------------------------------------------------
def test_the_state_budget_is_sglangs(sglang: StateOracle) -> None:
    import kvbudget.sglang.state  # noqa: F401 (an ImportError fails the test: no skip)

    start = time.perf_counter()
    hits: Counter[str] = Counter()
    mismatches: list[str] = []
    for seed in range(CASES):
        c = case(seed)
        theirs = sglang.run(c)
        hits += branches(c, theirs)
        ours = kvbudget_run(c, theirs)
        diffs = compare(c, theirs, ours)
        hit, pool_diffs = pool_compare(sglang, c, theirs, ours)
        hits[hit or "pool not built"] += 1
        diffs += pool_diffs
        if diffs:
            mismatches.append(f"seed {seed}: {'; '.join(diffs)}\n    case {c}")
    elapsed = time.perf_counter() - start
    report = "\n".join(f"  {k}: {v}" for k, v in sorted(hits.items()))
    print(f"\n{CASES} state cases in {elapsed:.1f} s, branch counts:\n{report}")
    assert not mismatches, f"{len(mismatches)} of {CASES} differ:\n" + "\n".join(mismatches[:12])
    missing = [b for b in REQUIRED if hits[b] == 0]
    assert CASES < 2000 or not missing, f"branches never reached: {missing}\n{report}"
