"""Differential test: the Rust core (through the Python API) against the oracle.

One generator (``gen_case``) draws a whole scenario: model geometry, serving
config, speculative config and a few calls to either entry point. It is written
against a tiny ``Source`` interface so that the same generator runs

* under hypothesis (``test_differential_hypothesis``: shrinks a mismatch to a
  minimal input), and
* from a seeded ``random.Random`` (``test_differential_sweep``: counts every
  mismatch over the whole run and asserts the count is 0).

Both run ``max_examples`` of the active hypothesis profile (tests/conftest.py:
``ci`` = 10,000, ``dev`` = 200).

A scenario's outcome is, per call, either the three token counts or the error
kind raised anywhere in the pipeline (building the config objects, building the
configurator, or the call); the cell size, configurator kind and SWA cap are
compared too when both sides built the configurator. Generated integers stay
inside the signed 64-bit range, so a TypeError/OverflowError from the API is
always a mismatch.
"""

from __future__ import annotations

import math
import os
import random
import struct
from typing import Any, Callable, Optional, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference as R

try:
    import kvbudget
except ImportError:  # the oracle-only tests below still run
    kvbudget = None

needs_api = pytest.mark.skipif(kvbudget is None, reason="the kvbudget extension is not built (make develop)")

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
FIELDS = ("max_total_num_tokens", "full_max_total_num_tokens", "swa_max_total_num_tokens")
KIND_OF_CLASS = {
    "DefaultPoolConfigurator": "default",
    "HybridSWAPoolConfigurator": "hybrid_swa",
    "SWAChunkCapPoolConfigurator": "chunk_cap",
}

AWKWARD_RATIOS = (
    0.8, 0.1, 0.2, 0.3, 0.7, 0.9, 0.5, 1.0, 2.0, 1 / 3, 2 / 3, 0.1 + 0.2, 0.05, 0.15, 0.01, 0.999999,
    1.0000000000000002, 0.9999999999999999, 1e-3, 1e-9, 1e-300, 5e-324, 2.2250738585072014e-308, 3.5,
    10.0, 1e6, 1e15, 1e300, 1.7976931348623157e308, 0.8000000000000002, 0.7999999999999999,
)
BAD_RATIOS = (0.0, -0.0, -0.5, float("nan"), float("inf"), float("-inf"))
DTYPES = ("bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "fp4_e2m1")
DTYPE_ALIASES = ("bfloat16", "float16", "half", "float32", "float", "fp8", "BF16", "FP8_E4M3")
ALGOS = ("none", "eagle", "eagle3", "nextn", "mtp", "standalone", "ngram", "dflash")
ALGO_VARIANTS = ("EAGLE", "Eagle3", "MTP", "NEXTN", "DFlash")


# --------------------------------------------------------------------------
# Sources of randomness
# --------------------------------------------------------------------------


class Source:
    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, seq: Sequence[Any]) -> Any:
        raise NotImplementedError

    def ratio(self) -> float:
        raise NotImplementedError

    #: set per scenario: only a "bad" scenario draws invalid values
    bad = False

    def chance(self, percent: int) -> bool:
        return self.int(0, 99) < percent

    def invalid(self, percent: int) -> bool:
        """In a bad scenario, True with ``percent`` percent chance; never otherwise."""
        return self.bad and self.chance(percent)


class HypothesisSource(Source):
    _ratio = st.one_of(
        st.sampled_from(AWKWARD_RATIOS),
        st.floats(min_value=1e-3, max_value=4.0),
        st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False),
    )

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw

    def int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(seq))

    def ratio(self) -> float:
        return self.draw(self._ratio)

    def chance(self, percent: int) -> bool:
        # 0, hypothesis' shrink target, means "no": shrinking heads for plain, valid inputs
        return self.int(0, 99) >= 100 - percent


class RandomSource(Source):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, seq: Sequence[Any]) -> Any:
        return self.rng.choice(seq)

    def ratio(self) -> float:
        k = self.rng.randrange(4)
        if k == 0:
            return self.rng.choice(AWKWARD_RATIOS)
        if k == 1:
            return self.rng.uniform(1e-3, 4.0)
        if k == 2:
            return 10.0 ** self.rng.uniform(-300, 300)
        while True:  # any positive finite double, by bit pattern
            x = struct.unpack("<d", struct.pack("<Q", self.rng.getrandbits(63)))[0]
            if math.isfinite(x) and x > 0:
                return x


# --------------------------------------------------------------------------
# The generator
# --------------------------------------------------------------------------


def _dim(src: Source, common: Sequence[int]) -> int:
    if src.invalid(10):
        return src.choice((0, -1))
    k = src.int(0, 99)
    if k < 70:
        return src.choice(common)
    if k < 97:
        return src.int(1, 1024)
    return src.int(2**20, 2**40)  # drives the checked arithmetic toward overflow


def _layer_ids(src: Source, n_f: int, n_s: int) -> tuple[list[int], list[int]]:
    total = n_f + n_s
    ids = list(range(total))
    # a deterministic shuffle driven by the source
    for i in range(total - 1, 0, -1):
        j = src.int(0, i)
        ids[i], ids[j] = ids[j], ids[i]
    full, swa = sorted(ids[:n_f]), sorted(ids[n_f:])
    k = src.int(0, 99) if src.invalid(30) else 99
    if k < 30 and full:
        full.append(full[0])  # duplicate
    elif k < 60 and full and swa:
        swa.append(full[0])  # in both lists
    elif k < 100 and src.bad:
        (full if full else swa).append(-1)  # negative id
    elif src.chance(3):
        full = [i + 1000 for i in full]  # sparse ids are fine
    return full, swa


def gen_model(src: Source) -> dict[str, Any]:
    layout = "empty" if src.invalid(10) else src.choice(("hybrid", "hybrid", "hybrid", "all_swa", "full", "mla"))
    if layout == "hybrid":
        n_f, n_s = src.int(1, 8), src.int(1, 40)
    elif layout == "all_swa":
        n_f, n_s = 0, src.int(1, 40)
    elif layout == "empty":
        n_f, n_s = 0, 0
    else:
        n_f, n_s = src.int(1, 64), 0
    full, swa = _layer_ids(src, n_f, n_s)
    m: dict[str, Any] = dict(
        full_attention_layer_ids=full,
        swa_attention_layer_ids=swa,
        num_kv_heads=_dim(src, (1, 2, 4, 8, 16, 32, 64, 128)),
        head_dim=_dim(src, (64, 80, 96, 128, 192, 256)),
    )
    if src.chance(30):
        m["v_head_dim"] = _dim(src, (64, 128, 256, 512))
    if src.chance(25):
        m["swa_num_kv_heads"] = _dim(src, (1, 2, 4, 8, 16))
    if src.chance(20):
        m["swa_head_dim"] = _dim(src, (64, 128, 192, 256))
    if src.chance(20):
        m["swa_v_head_dim"] = _dim(src, (64, 128, 256))
    k = src.int(0, 99)
    if src.invalid(10):
        m["sliding_window_size"] = -1
    elif k < 20:
        m["sliding_window_size"] = None
    elif k < 70:
        m["sliding_window_size"] = src.choice((127, 511, 1023, 1024, 4095, 4096, 8, 4, 0, 1))
    elif k < 97:
        m["sliding_window_size"] = src.int(0, 2**20)
    else:
        m["sliding_window_size"] = src.int(2**40, I64_MAX)
    if layout != "mla" and src.chance(3):
        m["qk_rope_head_dim"] = -1 if src.invalid(30) else 64  # unused without kv_lora_rank
    if layout == "mla" or src.invalid(20):
        m["kv_lora_rank"] = -1 if src.invalid(10) else src.choice((512, 256, 1, 2, 16, src.int(1, 4096)))
        m["qk_rope_head_dim"] = (src.choice((None, -1)) if src.invalid(10)
                                 else src.choice((64, 0, 32, src.int(0, 256))))
    return m


def gen_serving(src: Source, model: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = {}
    k = src.int(0, 99)
    s["kv_cache_dtype"] = (src.choice(("int4", "fp8_e4m3fnuz", "")) if src.invalid(10)
                           else src.choice(DTYPES) if k < 85 else src.choice(DTYPE_ALIASES))
    k = src.int(0, 99)
    s["page_size"] = (src.choice((0, -16)) if src.invalid(10)
                      else src.choice((1, 16, 64)) if k < 70 else src.int(1, 512))
    k = src.int(0, 99)
    tp = 0 if src.invalid(5) else src.choice((1, 2, 4, 8, 16, 32, 64)) if k < 80 else src.int(1, 300)
    s["tp_size"] = tp
    k = src.int(0, 99)
    if src.invalid(10):
        dcp = src.int(0, 9)  # often not a divisor
    elif k < 60 or tp <= 0:
        dcp = 1
    else:
        dcp = src.choice([d for d in range(1, min(tp, 64) + 1) if tp % d == 0])
    s["dcp_size"] = dcp
    s["attn_dp_size"] = 0 if src.invalid(5) else src.choice((1, 1, 1, 2, 4, 8, 3))
    k = src.int(0, 99)
    if src.invalid(10):
        s["swa_full_tokens_ratio"] = src.choice(BAD_RATIOS)
    elif k < 35:
        pass  # default 0.8
    else:
        s["swa_full_tokens_ratio"] = src.ratio()
    chunky = src.chance(55)
    if chunky or src.chance(20):
        s["max_running_requests"] = (0 if src.invalid(10) else src.choice((1, 2, 8, 64, 256, 1024))
                                     if src.chance(80) else src.int(1, 10**5))
    if chunky or src.chance(20):
        s["chunked_prefill_size"] = (0 if src.invalid(10) else src.choice((4, 16, 512, 2048, 8192, 16384))
                                     if src.chance(80) else src.int(1, 10**6))
    s["disable_radix_cache"] = chunky or src.chance(20)
    s["disable_overlap_schedule"] = src.chance(40)
    s["disaggregation_mode"] = ("both" if src.invalid(5)
                                else src.choice(("null", "null", "prefill", "decode", "decode")))
    s["disaggregation_decode_extra_slots"] = (-1 if src.invalid(5) else src.choice((0, 0, 2, 8))
                                              if src.chance(90) else src.int(0, 1000))
    k = src.int(0, 99)
    if k >= 50:
        s["swa_eviction_interval"] = src.choice((128, 4, 1, 0, -5, 64)) if k < 90 else src.int(-(2**20), 2**20)
    s["disable_hybrid_swa_memory"] = src.chance(5)
    s["is_draft_worker"] = src.chance(5)
    return s


def gen_spec(src: Source) -> Optional[dict[str, Any]]:
    if src.chance(15):
        return None
    k = src.int(0, 99)
    algo = "medusa" if src.invalid(5) else src.choice(ALGOS) if k < 90 else src.choice(ALGO_VARIANTS)
    d = (src.choice((-1, 2**32, 2**40)) if src.invalid(5) else src.choice((0, 1, 1, 1, 2, 3, 4))
         if src.chance(97) else src.int(5, 64))
    spec: dict[str, Any] = dict(algorithm=algo, draft_num_layers=d)
    if src.chance(20) and d > 0:
        spec["banded_draft_layers"] = src.int(0, d + (1 if src.invalid(30) else 0))
    for key, common in (("num_steps", (1, 2, 3, 4, 5)), ("eagle_topk", (1, 1, 2, 4, 8)),
                        ("num_draft_tokens", (1, 4, 5, 8, 16))):
        k = src.int(0, 99)
        if k < 30:
            continue
        spec[key] = -1 if src.invalid(5) else src.choice(common) if k < 85 else 0 if k < 92 \
            else src.int(0, 4096)
    if algo.lower() == "dflash" or src.chance(5):
        k = src.int(0, 99)
        if src.invalid(10):
            spec["dflash_draft_cell_size_per_token"] = 0
        elif k >= 30:
            spec["dflash_draft_cell_size_per_token"] = (src.choice((4096, 8192, 65536)) if k < 80
                                                        else src.int(1, 2**30))
    return spec


def gen_value(src: Source) -> int:
    k = src.int(0, 99)
    if k < 10:
        return src.int(-(10**6), 0)
    if k < 15:
        return src.int(-(2**62), 2**62)
    if k < 40:
        return src.int(1, 10**7)
    if k < 80:
        return src.int(10**8, 2**40)
    if k < 95:
        return src.int(2**40, 2**62)
    return src.choice((0, 1, -1, I64_MAX, I64_MIN, 2**62, -(2**62)))


def gen_case(src: Source) -> dict[str, Any]:
    src.bad = src.chance(15)
    model = gen_model(src)
    serving = gen_serving(src, model)
    spec = gen_spec(src)
    calls = []
    for _ in range(src.int(1, 4)):
        entry = src.choice(("bytes", "max_tokens"))
        k = src.int(0, 99)
        page = (src.choice((0, -1)) if src.invalid(5) else None if k < 50 else src.choice((1, 16, 64))
                if k < 80 else src.int(1, 512))
        calls.append((entry, gen_value(src), page))
    return dict(model=model, serving=serving, spec=spec, calls=calls)


# --------------------------------------------------------------------------
# Running both sides
# --------------------------------------------------------------------------


def run_oracle(case: dict[str, Any]) -> dict[str, Any]:
    try:
        cfg = R.create_pool_configurator(case["model"], case["serving"], case["spec"])
    except R.OracleError as e:
        return {"built": None, "calls": [("error", e.kind)] * len(case["calls"])}
    built = {"kind": cfg.kind, "cell_size": cfg.cell_size,
             "swa_cap": cfg.swa_cap if cfg.kind == "chunk_cap" else None}
    calls = []
    for entry, value, page in case["calls"]:
        try:
            fn = cfg.calculate_pool_sizes if entry == "bytes" else cfg.calculate_pool_sizes_from_max_tokens
            out = fn(value, page)
            calls.append(("ok", tuple(out[f] for f in FIELDS)))
        except R.OracleError as e:
            calls.append(("error", e.kind))
    return {"built": built, "calls": calls}


def _api_error(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, kvbudget.KVBudgetError):
        return ("error", str(exc.code))
    return ("error", f"python:{type(exc).__name__}: {exc}")


def run_api(case: dict[str, Any]) -> dict[str, Any]:
    try:
        model = kvbudget.ModelGeometry(**case["model"])
        serving = kvbudget.ServingConfig(**case["serving"])
        spec = kvbudget.SpeculativeConfig(**case["spec"]) if case["spec"] is not None else None
        cfg = kvbudget.create_pool_configurator(model, serving, spec)
        kind = KIND_OF_CLASS.get(type(cfg).__name__, type(cfg).__name__)
        built = {"kind": kind, "cell_size": cfg.cell_size,
                 "swa_cap": cfg.swa_cap if kind == "chunk_cap" else None}
    except Exception as exc:  # noqa: BLE001 - compared by kind
        return {"built": None, "calls": [_api_error(exc)] * len(case["calls"])}
    calls = []
    for entry, value, page in case["calls"]:
        try:
            fn = cfg.calculate_pool_sizes if entry == "bytes" else cfg.calculate_pool_sizes_from_max_tokens
            out = fn(value, page)
            calls.append(("ok", tuple(getattr(out, f) for f in FIELDS)))
        except Exception as exc:  # noqa: BLE001
            calls.append(_api_error(exc))
    return {"built": built, "calls": calls}


def _same_cell(want: Any, got: Any) -> bool:
    """Same value and same type: a double where the ratio enters, else an int."""
    if isinstance(want, float):
        return isinstance(got, float) and (want == got or (math.isnan(want) and math.isnan(got)))
    return isinstance(got, int) and not isinstance(got, bool) and want == got


def compare(case: dict[str, Any]) -> Optional[str]:
    """None when both sides agree, else a description of the disagreement."""
    want = run_oracle(case)
    got = run_api(case)
    problems = []
    for i, (w, g) in enumerate(zip(want["calls"], got["calls"])):
        if w != g:
            problems.append(f"call {i} {case['calls'][i]}: oracle {w} != api {g}")
    if want["built"] is not None and got["built"] is not None:
        wb, gb = want["built"], got["built"]
        if wb["kind"] != gb["kind"]:
            problems.append(f"configurator: oracle {wb['kind']} != api {gb['kind']}")
        elif not _same_cell(wb["cell_size"], gb["cell_size"]):
            problems.append(f"cell_size: oracle {wb['cell_size']!r} != api {gb['cell_size']!r}")
        elif wb["swa_cap"] != gb["swa_cap"]:
            problems.append(f"swa_cap: oracle {wb['swa_cap']} != api {gb['swa_cap']}")
    # (one side raising while building and the other raising the same kind in
    # every call is agreement: the error kinds are compared per call above)
    if problems:
        return f"case={case!r}\n  " + "\n  ".join(problems)
    return None


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


@st.composite
def cases(draw: Callable[[Any], Any]) -> dict[str, Any]:
    return gen_case(HypothesisSource(draw))


@needs_api
@given(case=cases())
def test_differential_hypothesis(case: dict[str, Any]) -> None:
    problem = compare(case)
    assert problem is None, problem


@needs_api
def test_differential_sweep() -> None:
    n = settings().max_examples
    seed = int(os.environ.get("KVBUDGET_DIFF_SEED", "20260629"))
    rng = random.Random(seed)
    src = RandomSource(rng)
    mismatches: list[str] = []
    outcomes: dict[str, int] = {}
    for _ in range(n):
        case = gen_case(src)
        problem = compare(case)
        if problem is not None:
            mismatches.append(problem)
        for status, detail in run_oracle(case)["calls"]:
            key = status if status == "ok" else str(detail)
            outcomes[key] = outcomes.get(key, 0) + 1
    # the generator must reach every outcome, or the sweep proves little
    for key in ("ok",) + R.KINDS:
        assert outcomes.get(key, 0) > 0, f"no call ended in {key!r}: {outcomes}"
    assert len(mismatches) == 0, (
        f"{len(mismatches)} of {n} cases disagree (seed {seed}); first ones:\n" + "\n".join(mismatches[:5])
    )


def test_generator_reaches_every_configurator_and_outcome() -> None:
    """The generator (oracle only) builds every configurator and ends calls in every outcome."""
    src = RandomSource(random.Random(1))
    kinds: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    for _ in range(3000):
        result = run_oracle(gen_case(src))
        if result["built"] is not None:
            kinds[result["built"]["kind"]] = kinds.get(result["built"]["kind"], 0) + 1
        for status, detail in result["calls"]:
            key = status if status == "ok" else str(detail)
            outcomes[key] = outcomes.get(key, 0) + 1
    assert set(kinds) == {"default", "hybrid_swa", "chunk_cap"}, kinds
    assert set(outcomes) == {"ok", *R.KINDS}, outcomes
    # most scenarios must be valid, or the comparison mostly checks error paths
    assert outcomes["ok"] > sum(outcomes.values()) // 3, outcomes
