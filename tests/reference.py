"""Pure-Python oracle for REFERENCE.md section 2 (SGLang-compatible pool sizing).

This module is the test oracle for the Rust core. It deliberately imports
nothing from kvbudget and computes with plain Python numbers in the same
order SGLang does (``python/sglang/srt/model_executor/pool_configurator.py``):

* the cell size is an IEEE-754 double whenever the SWA ratio enters,
* ``A // C`` with a float ``C`` is CPython float floor division (fmod based),
* ``int(x)`` truncates a double toward zero,
* integer ``//`` floors toward minus infinity.

The numeric and validation choices that REFERENCE leaves open follow
``docs/semantics.md``. On top of SGLang, every integer the Rust core holds in
a 64-bit register is range-checked here: a value outside the signed 64-bit
range raises :class:`OracleOverflow` (error kind ``"overflow"``), as the core's
checked arithmetic does.

Inputs are plain dicts (or any mapping) whose keys are the keyword names of
``kvbudget.ModelGeometry``, ``kvbudget.ServingConfig`` and
``kvbudget.SpeculativeConfig``. Outputs are dicts with the keys
``max_total_num_tokens``, ``full_max_total_num_tokens`` and
``swa_max_total_num_tokens`` (the last two are ``None`` for the Default
configurator, as in SGLang).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
#: Upper bound for the non-negative byte and token quantities built from products
#: and sums of the inputs (cell sizes, SWA cap, fixed SWA bytes). The contract is
#: the signed 64-bit range; a core that holds these in u64 would need 2**64 - 1.
UNSIGNED_MAX = I64_MAX

KINDS = ("invalid_config", "overflow", "not_enough_memory", "swa_pool_too_small")


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


class OracleError(Exception):
    """Base class; ``kind`` is the error code the Python API must report."""

    kind = "oracle_error"


class OracleInvalidConfig(OracleError):
    kind = "invalid_config"


class OracleOverflow(OracleError):
    """A 64-bit quantity does not fit (the core raises InvalidConfigError, code overflow)."""

    kind = "overflow"


class OracleNotEnoughMemory(OracleError):
    kind = "not_enough_memory"


class OracleSWAPoolTooSmall(OracleError):
    kind = "swa_pool_too_small"


def _ck(x: int, what: str = "value") -> int:
    """Range-check an integer the core would hold in 64 bits."""
    if not (I64_MIN <= x <= I64_MAX):
        raise OracleOverflow(f"{what} = {x} does not fit in 64 bits")
    return x


def _to_int(x: float, what: str = "value") -> int:
    """``int(x)`` of a double, range-checked (inf/NaN/out of range -> overflow)."""
    if math.isnan(x) or math.isinf(x):
        raise OracleOverflow(f"{what} = {x} is not a finite number")
    return _ck(int(x), what)


def _ck_unsigned(x: int, what: str) -> int:
    if x > UNSIGNED_MAX or x < I64_MIN:
        raise OracleOverflow(f"{what} = {x} does not fit in 64 bits")
    return x


def _add(a: int, b: int, what: str = "sum") -> int:
    return _ck_unsigned(a + b, what)


def _mul(a: int, b: int, what: str = "product") -> int:
    return _ck_unsigned(a * b, what)


def _align_down(x: int, p: int) -> int:
    """``x // p * p`` (floor toward minus infinity, as Python does)."""
    return _ck(x // p * p, "page-aligned count")


def _ceil_align(x: int, p: int) -> int:
    """SGLang's ``ceil_align(x, p)`` = ``ceil(x / p) * p`` (exact integers)."""
    return _ck_unsigned(-(-x // p) * p, "page-aligned cap")


# --------------------------------------------------------------------------
# Input normalisation and validation (docs/semantics.md)
# --------------------------------------------------------------------------

DTYPE_BYTES = {
    "bf16": 2,
    "fp16": 2,
    "fp32": 4,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "mxfp8": 1,
    "fp4_e2m1": 1,  # one byte per packed pair (Default configurator only)
}
DTYPE_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "fp8": "fp8_e4m3",
}
ALGORITHMS = ("none", "eagle", "eagle3", "nextn", "standalone", "ngram", "dflash")
ALGORITHM_ALIASES = {"mtp": "nextn"}
EAGLE_FAMILY = ("eagle", "eagle3", "nextn")
DISAGG_MODES = ("null", "prefill", "decode")

MODEL_DEFAULTS: dict[str, Any] = dict(
    full_attention_layer_ids=(),
    swa_attention_layer_ids=(),
    num_kv_heads=None,
    head_dim=None,
    v_head_dim=None,
    swa_num_kv_heads=None,
    swa_head_dim=None,
    swa_v_head_dim=None,
    sliding_window_size=None,
    kv_lora_rank=None,
    qk_rope_head_dim=None,
)
SPEC_DEFAULTS: dict[str, Any] = dict(
    algorithm="none",
    draft_num_layers=0,
    num_steps=None,
    eagle_topk=None,
    num_draft_tokens=None,
    banded_draft_layers=0,
    dflash_draft_cell_size_per_token=None,
)
SERVING_DEFAULTS: dict[str, Any] = dict(
    kv_cache_dtype="bf16",
    page_size=1,
    tp_size=1,
    dcp_size=1,
    attn_dp_size=1,
    swa_full_tokens_ratio=0.8,
    max_running_requests=None,
    chunked_prefill_size=None,
    disable_radix_cache=False,
    disable_overlap_schedule=False,
    disaggregation_mode="null",
    disaggregation_decode_extra_slots=0,
    swa_eviction_interval=128,
    disable_hybrid_swa_memory=False,
    is_draft_worker=False,
)


def _fill(kind: str, given: Optional[Mapping[str, Any]], defaults: dict[str, Any]) -> dict[str, Any]:
    given = dict(given or {})
    unknown = set(given) - set(defaults)
    if unknown:
        raise OracleInvalidConfig(f"{kind}: unknown fields {sorted(unknown)}")
    out = dict(defaults)
    out.update(given)
    return out


def _is_int(x: Any) -> bool:
    return isinstance(x, int)  # bool included, as Python (and PyO3) treat it


def _req_int(d: dict[str, Any], key: str, lo: int, optional: bool = False) -> None:
    v = d[key]
    if v is None:
        if optional:
            return
        raise OracleInvalidConfig(f"{key} is required")
    if not _is_int(v):
        raise OracleInvalidConfig(f"{key} must be an int, got {v!r}")
    if v < lo:
        raise OracleInvalidConfig(f"{key} must be >= {lo}, got {v}")
    _ck(v, key)


#: docs/semantics.md "Limits": layers of a model, and draft layers, at most 2**20.
MAX_LAYERS = 2**20


def normalize_model(model: Mapping[str, Any]) -> dict[str, Any]:
    """Validate a ModelGeometry dict and fill its defaults."""
    m = _fill("ModelGeometry", model, MODEL_DEFAULTS)
    for key in ("full_attention_layer_ids", "swa_attention_layer_ids"):
        ids = list(m[key] or ())
        for i in ids:
            if not _is_int(i) or i < 0:
                raise OracleInvalidConfig(f"{key}: layer ids must be non-negative ints, got {i!r}")
            _ck(i, key)
        if len(set(ids)) != len(ids):
            raise OracleInvalidConfig(f"{key}: duplicate layer ids")
        m[key] = ids
    if set(m["full_attention_layer_ids"]) & set(m["swa_attention_layer_ids"]):
        raise OracleInvalidConfig("a layer id is in both full and SWA lists")
    if not m["full_attention_layer_ids"] and not m["swa_attention_layer_ids"]:
        raise OracleInvalidConfig("the model has no attention layers")
    _req_int(m, "num_kv_heads", 1)
    _req_int(m, "head_dim", 1)
    for key in ("v_head_dim", "swa_num_kv_heads", "swa_head_dim", "swa_v_head_dim"):
        _req_int(m, key, 1, optional=True)
    _req_int(m, "sliding_window_size", 0, optional=True)
    if m["v_head_dim"] is None:
        m["v_head_dim"] = m["head_dim"]
    if m["swa_num_kv_heads"] is None:
        m["swa_num_kv_heads"] = m["num_kv_heads"]
    if m["swa_v_head_dim"] is None:
        m["swa_v_head_dim"] = m["swa_head_dim"] if m["swa_head_dim"] is not None else m["v_head_dim"]
    if m["swa_head_dim"] is None:
        m["swa_head_dim"] = m["head_dim"]
    m["is_mla"] = m["kv_lora_rank"] is not None
    # a given qk_rope_head_dim must be >= 0 even without kv_lora_rank (then it is unused)
    _req_int(m, "qk_rope_head_dim", 0, optional=not m["is_mla"])
    if m["is_mla"]:
        _req_int(m, "kv_lora_rank", 1)
        if m["swa_attention_layer_ids"]:
            raise OracleInvalidConfig("MLA models cannot have SWA layers")
    m["n_f"] = len(m["full_attention_layer_ids"])
    m["n_s"] = len(m["swa_attention_layer_ids"])
    if m["n_f"] + m["n_s"] > MAX_LAYERS:
        raise OracleInvalidConfig(f"at most {MAX_LAYERS} layers in total")
    return m


def normalize_spec(spec: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Validate a SpeculativeConfig dict (None = no speculation) and fill defaults."""
    s = _fill("SpeculativeConfig", spec, SPEC_DEFAULTS)
    algo = s["algorithm"]
    if algo is None:
        algo = "none"
    if not isinstance(algo, str):
        raise OracleInvalidConfig(f"algorithm must be a string, got {algo!r}")
    algo = algo.lower()
    algo = ALGORITHM_ALIASES.get(algo, algo)
    if algo not in ALGORITHMS:
        raise OracleInvalidConfig(f"unknown speculative algorithm {s['algorithm']!r}")
    s["algorithm"] = algo
    _req_int(s, "draft_num_layers", 0)
    _req_int(s, "banded_draft_layers", 0)
    # docs/semantics.md "Limits": at most MAX_LAYERS (2**20)
    for key in ("draft_num_layers", "banded_draft_layers"):
        if s[key] > MAX_LAYERS:
            raise OracleInvalidConfig(f"{key} must be <= {MAX_LAYERS}, got {s[key]}")
    if s["banded_draft_layers"] > s["draft_num_layers"]:
        raise OracleInvalidConfig("banded_draft_layers > draft_num_layers")
    for key in ("num_steps", "eagle_topk", "num_draft_tokens"):
        _req_int(s, key, 0, optional=True)
    _req_int(s, "dflash_draft_cell_size_per_token", 1, optional=True)
    return s


def normalize_serving(serving: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """Validate a ServingConfig dict and fill defaults."""
    c = _fill("ServingConfig", serving, SERVING_DEFAULTS)
    dt = c["kv_cache_dtype"]
    if not isinstance(dt, str):
        raise OracleInvalidConfig(f"kv_cache_dtype must be a string, got {dt!r}")
    dt = dt.lower()
    dt = DTYPE_ALIASES.get(dt, dt)
    if dt not in DTYPE_BYTES:
        raise OracleInvalidConfig(f"unknown kv_cache_dtype {c['kv_cache_dtype']!r}")
    c["kv_cache_dtype"] = dt
    for key in ("page_size", "tp_size", "dcp_size", "attn_dp_size"):
        _req_int(c, key, 1)
    if c["tp_size"] % c["dcp_size"] != 0:
        raise OracleInvalidConfig("tp_size must be a multiple of dcp_size")
    r = c["swa_full_tokens_ratio"]
    if not isinstance(r, (int, float)):
        raise OracleInvalidConfig(f"swa_full_tokens_ratio must be a number, got {r!r}")
    r = float(r)
    if not math.isfinite(r) or r <= 0.0:
        raise OracleInvalidConfig(f"swa_full_tokens_ratio must be finite and > 0, got {r!r}")
    c["swa_full_tokens_ratio"] = r
    _req_int(c, "max_running_requests", 1, optional=True)
    _req_int(c, "chunked_prefill_size", 1, optional=True)
    mode = c["disaggregation_mode"]
    if mode is None:
        mode = "null"
    if not isinstance(mode, str) or mode.lower() not in DISAGG_MODES:
        raise OracleInvalidConfig(f"unknown disaggregation_mode {c['disaggregation_mode']!r}")
    c["disaggregation_mode"] = mode.lower()
    _req_int(c, "disaggregation_decode_extra_slots", 0)
    _req_int(c, "swa_eviction_interval", I64_MIN)
    for key in ("disable_radix_cache", "disable_overlap_schedule", "disable_hybrid_swa_memory", "is_draft_worker"):
        c[key] = bool(c[key])
    return c


def _page_arg(page_size: Optional[int], serving: dict[str, Any]) -> int:
    if page_size is None:
        return serving["page_size"]
    if not _is_int(page_size) or page_size < 1:
        raise OracleInvalidConfig(f"page_size must be >= 1, got {page_size!r}")
    _ck(page_size, "page_size")
    return page_size


def _check_i64_arg(x: int, what: str) -> int:
    if not _is_int(x):
        raise OracleInvalidConfig(f"{what} must be an int, got {x!r}")
    return _ck(x, what)


def _result(max_total: int, full: Optional[int], swa: Optional[int]) -> dict[str, Optional[int]]:
    # SGLang's MemoryPoolConfig.__post_init__: max_total <= 0 is "not enough memory".
    if max_total <= 0:
        raise OracleNotEnoughMemory(
            f"Not enough memory: max_total_num_tokens = {max_total}"
        )
    return {
        "max_total_num_tokens": max_total,
        "full_max_total_num_tokens": full,
        "swa_max_total_num_tokens": swa,
    }


# --------------------------------------------------------------------------
# Shared geometry helpers (REFERENCE 2.1)
# --------------------------------------------------------------------------


def _draft_terms(spec: dict[str, Any], serving: dict[str, Any]) -> tuple[int, int, int]:
    """(d_f, d_sf, d_c) for the SWA configurators (REFERENCE 2.3)."""
    d_f = d_sf = d_c = 0
    algo = spec["algorithm"]
    if (algo in EAGLE_FAMILY or algo == "standalone") and not serving["is_draft_worker"]:
        d = spec["draft_num_layers"]
        if d > 0:
            d_sf = spec["banded_draft_layers"]
            d_f = d - d_sf
    if algo == "dflash" and not serving["is_draft_worker"]:
        cell = spec["dflash_draft_cell_size_per_token"]
        if cell is not None and cell > 0:
            d_c = _mul(cell, serving["dcp_size"], "dflash draft cell")
    return d_f, d_sf, d_c


def _swa_per_layer_bytes(model: dict[str, Any], serving: dict[str, Any]) -> tuple[int, int]:
    """(F, S): bytes per token per full / SWA layer on one rank (dcp = 1)."""
    b = DTYPE_BYTES[serving["kv_cache_dtype"]]
    tp = serving["tp_size"]
    h_f = max(1, model["num_kv_heads"] // tp)
    h_s = max(1, model["swa_num_kv_heads"] // tp)
    f_elems = _mul(h_f, _add(model["head_dim"], model["v_head_dim"]), "full elements")
    s_elems = _mul(h_s, _add(model["swa_head_dim"], model["swa_v_head_dim"]), "swa elements")
    F = _mul(f_elems, b, "full bytes per layer")
    S = _mul(s_elems, b, "swa bytes per layer")
    if serving["kv_cache_dtype"] == "mxfp8":
        F = _add(F, f_elems // 32, "full bytes per layer")
        S = _add(S, s_elems // 32, "swa bytes per layer")
    return F, S


# --------------------------------------------------------------------------
# Configurators
# --------------------------------------------------------------------------


class _Base:
    kind = "base"

    def __init__(self, model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                 spec: Optional[Mapping[str, Any]] = None) -> None:
        self.model = normalize_model(model)
        self.serving = normalize_serving(serving)
        self.spec = normalize_spec(spec)

    @property
    def cell_size(self) -> Any:
        """Bytes per token of max_total_num_tokens: a float where the ratio enters, else an int."""
        return self._cell_size

    def calculate_pool_sizes(self, available_bytes: int, page_size: Optional[int] = None) -> dict:
        raise NotImplementedError

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int,
                                             page_size: Optional[int] = None) -> dict:
        raise NotImplementedError


class DefaultPoolConfigurator(_Base):
    """REFERENCE 2.2: one pool, ``T = A // C`` (integers)."""

    kind = "default"

    def __init__(self, model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                 spec: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(model, serving, spec)
        m, c, s = self.model, self.serving, self.spec
        b = DTYPE_BYTES[c["kv_cache_dtype"]]
        dt = c["kv_cache_dtype"]
        L = m["n_f"] + m["n_s"]
        if m["is_mla"]:
            dim = _add(m["kv_lora_rank"], m["qk_rope_head_dim"], "MLA dim")
            C = _mul(_mul(dim, L), b, "cell size")
            if dt == "fp4_e2m1":
                C = _add(C // 2, _mul(_mul(dim // 16, L), b), "cell size")
        else:
            n = max(1, m["num_kv_heads"] // (c["tp_size"] // c["dcp_size"]))
            dk, dv = m["head_dim"], m["v_head_dim"]
            elems = _mul(n, _add(dk, dv))
            C = _mul(_mul(elems, L), b, "cell size")
            if dt == "fp4_e2m1":
                scale = _mul(_mul(_mul(_mul(n, dk), L), 2), b) // 16
                work = _mul(_mul(_mul(n, dk), 2), b)
                C = _add(_add(C // 2, scale), work, "cell size")
            elif dt == "mxfp8":
                C = _add(C, _mul(elems, L) // 32, "cell size")
        algo = s["algorithm"]
        d = s["draft_num_layers"]
        if (algo in EAGLE_FAMILY or algo == "standalone") and not c["is_draft_worker"]:
            if d > 0 and L > 0:
                C = _to_int(C * (1 + d / L), "cell size")
        if algo == "dflash" and not c["is_draft_worker"]:
            if d > 0 and L > 0:
                cell = s["dflash_draft_cell_size_per_token"]
                if C <= 0:
                    # SGLang's scale_kv_cell_size_per_token_for_dflash raises here.
                    raise OracleInvalidConfig("target cell size must be positive for DFLASH")
                if cell is not None:
                    C = _add(C, _mul(cell, c["dcp_size"]), "cell size")
                else:
                    dd = _mul(d, c["dcp_size"])
                    C = _ck((_mul(C, _add(L, dd), "cell size") + L - 1) // L, "cell size")
        if C <= 0:
            # SGLang falls back to the context length here (a quantity kvbudget
            # does not model); the oracle treats a zero cell as a bad config.
            raise OracleInvalidConfig("cell size is zero")
        self._cell_size = C

    def calculate_pool_sizes(self, available_bytes: int, page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        A = _check_i64_arg(available_bytes, "available_bytes")
        T = _ck(A // self._cell_size, "max_total_num_tokens")
        T = _align_down(T, p)
        return _result(T, None, None)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int,
                                             page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        T = _check_i64_arg(max_total_num_tokens, "max_total_num_tokens")
        return _result(_align_down(T, p), None, None)


class HybridSWAPoolConfigurator(_Base):
    """REFERENCE 2.3: full + SWA pools split by the ratio (or all-SWA)."""

    kind = "hybrid_swa"

    def __init__(self, model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                 spec: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(model, serving, spec)
        m, c, s = self.model, self.serving, self.spec
        if m["n_s"] == 0:
            raise OracleInvalidConfig("hybrid SWA configurators need at least one SWA layer")
        if m["is_mla"]:
            raise OracleInvalidConfig("hybrid SWA configurators do not support MLA")
        if c["kv_cache_dtype"] == "fp4_e2m1":
            raise OracleInvalidConfig("fp4_e2m1 is supported by the Default configurator only")
        self._F, self._S = _swa_per_layer_bytes(m, c)
        self._d_f, self._d_sf, self._d_c = _draft_terms(s, c)
        self._n_f, self._n_s = m["n_f"], m["n_s"]
        self._r = c["swa_full_tokens_ratio"]
        self._W = m["sliding_window_size"]
        F, S, n_f, n_s, d_f, d_sf, d_c, r = (
            self._F, self._S, self._n_f, self._n_s, self._d_f, self._d_sf, self._d_c, self._r)
        if n_f == 0:
            C = _add(_add(_add(_mul(S, n_s), _mul(F, d_f)), _mul(S, d_sf)), d_c, "cell size")
        else:
            int_part = _add(_mul(F, n_f + d_f), _mul(S, d_sf), "cell size")
            # Python: F*(n_f+d_f) + S*d_sf + r*S*n_s + d_c, left to right.
            C = int_part + r * S * n_s + d_c
        self._cell_size = C

    def _solve(self, T: int, p: int) -> dict:
        if self._n_f == 0:
            swa = _align_down(T, p)
            return _result(swa, 0, swa)
        full = _align_down(T, p)
        swa = _align_down(_to_int(full * self._r, "int(full * ratio)"), p)
        W = self._W
        # an exact comparison (no 64-bit intermediate): W + page_size >= swa
        if W is not None and W + self.serving["page_size"] >= swa:
            raise OracleSWAPoolTooSmall(
                f"SWA pool ({swa} tokens) cannot hold even one request: the prefill "
                f"admission floor is sliding_window_size ({W}) + page_size "
                f"({self.serving['page_size']}). Increase swa_full_tokens_ratio or the budget."
            )
        return _result(full, full, swa)

    def calculate_pool_sizes(self, available_bytes: int, page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        A = _check_i64_arg(available_bytes, "available_bytes")
        q = A // self._cell_size
        T = _to_int(q, "max_total_num_tokens") if isinstance(q, float) else _ck(q)
        return self._solve(T, p)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int,
                                             page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        T = _check_i64_arg(max_total_num_tokens, "max_total_num_tokens")
        return self._solve(T, p)


def decode_alloc(serving: dict[str, Any], spec: dict[str, Any]) -> int:
    """Per-request decode allocation of the ChunkCap SWA cap (REFERENCE 2.4)."""
    p = serving["page_size"]
    if spec["algorithm"] == "none":
        return p
    k = spec["num_draft_tokens"] or 1
    steps = spec["num_steps"] or 1
    topk = spec["eagle_topk"] or 1
    if serving["disable_overlap_schedule"]:
        # spec v1 (SGLang's spec_decode_alloc_len_per_request)
        if p > 1 and topk > 1:
            return max(_mul(_ceil_align(_add(steps, p), p), topk), _ceil_align(k, p))
        if p > 1:
            return max(_mul(_ceil_align(steps, p), topk), _ceil_align(k, p))
        return max(_mul(steps, topk), k)
    # spec v2: 2 * get_alloc_len_per_decode, allocator page p' = p * dcp
    pp = _mul(p, serving["dcp_size"], "alloc page size")
    if pp == 1 or topk == 1 or spec["algorithm"] == "ngram":
        return _mul(2, max(_mul(steps, topk), k), "decode alloc")
    # SGLang allocation_sizing.get_alloc_len_per_decode:
    #   num_new_pages_per_topk = ((p' - 1) + steps + p' - 1) // p'
    # i.e. floor((2 * (p' - 1) + steps) / p') == ceil((p' - 1 + steps) / p').
    pages = _add(_add(pp - 1, steps), pp - 1) // pp
    return _mul(2, max(_mul(_mul(pages, pp), topk), k), "decode alloc")


def chunk_cap_applies(model: dict[str, Any], serving: dict[str, Any]) -> bool:
    return (
        serving["max_running_requests"] is not None
        and serving["disable_radix_cache"]
        and serving["chunked_prefill_size"] is not None
        and model["sliding_window_size"] is not None
        and model["n_f"] > 0
    )


class SWAChunkCapPoolConfigurator(HybridSWAPoolConfigurator):
    """REFERENCE 2.4: the SWA pool is sized from a per-request cap."""

    kind = "chunk_cap"

    def __init__(self, model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                 spec: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(model, serving, spec)
        m, c, s = self.model, self.serving, self.spec
        if not chunk_cap_applies(m, c):
            raise OracleInvalidConfig(
                "SWAChunkCapPoolConfigurator needs max_running_requests, "
                "disable_radix_cache, chunked_prefill_size, sliding_window_size "
                "and at least one full layer"
            )
        p = c["page_size"]
        W = m["sliding_window_size"]
        k = s["num_draft_tokens"] or 1
        E = max(1, c["swa_eviction_interval"])
        trailing = _add(_add(W, _mul(E, k, "eviction tail")), p, "trailing tokens")
        per_request = _add(trailing, decode_alloc(c, s), "per-request SWA tokens")
        N = c["max_running_requests"] // c["attn_dp_size"]
        if c["disaggregation_mode"] == "decode":
            cap = _add(_mul(per_request, N),
                       _mul(_add(W, p), c["disaggregation_decode_extra_slots"]), "swa cap")
        else:
            chunks = 1 if c["disable_overlap_schedule"] else 2
            cap = _add(_add(_mul(per_request, N), _mul(chunks, c["chunked_prefill_size"])), p,
                       "swa cap")
        self._swa_cap = cap
        self._full_cell = _add(_add(_mul(self._F, self._n_f + self._d_f), _mul(self._S, self._d_sf)),
                               self._d_c, "full cell size")

    @property
    def swa_cap(self) -> int:
        return self._swa_cap

    @property
    def full_cell_size(self) -> int:
        return self._full_cell

    def calculate_pool_sizes(self, available_bytes: int, page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        A = _check_i64_arg(available_bytes, "available_bytes")
        swa = _ceil_align(self._swa_cap, p)
        fixed = _mul(_mul(swa, self._S), self._n_s, "fixed SWA bytes")
        # A - fixed is exact; the token count it yields must fit in 64 bits
        full = _align_down(_ck((A - fixed) // self._full_cell, "full tokens"), p)
        if full <= 0:
            raise OracleNotEnoughMemory(
                f"SWA pool cap ({swa} tokens) leaves no room for the full KV pool"
            )
        return _result(full, full, swa)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int,
                                             page_size: Optional[int] = None) -> dict:
        p = _page_arg(page_size, self.serving)
        T = _check_i64_arg(max_total_num_tokens, "max_total_num_tokens")
        swa = _ceil_align(self._swa_cap, p)
        full = _align_down(T, p)
        return _result(full, full, min(swa, T))


# --------------------------------------------------------------------------
# Factory (REFERENCE 2.5)
# --------------------------------------------------------------------------


def configurator_kind(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                      spec: Optional[Mapping[str, Any]] = None) -> str:
    """"default" | "hybrid_swa" | "chunk_cap", as create_pool_configurator chooses."""
    m = normalize_model(model)
    c = normalize_serving(serving)
    normalize_spec(spec)
    if m["n_s"] > 0 and not c["disable_hybrid_swa_memory"]:
        return "chunk_cap" if chunk_cap_applies(m, c) else "hybrid_swa"
    return "default"


CONFIGURATORS = {
    "default": DefaultPoolConfigurator,
    "hybrid_swa": HybridSWAPoolConfigurator,
    "chunk_cap": SWAChunkCapPoolConfigurator,
}


def create_pool_configurator(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]] = None,
                             spec: Optional[Mapping[str, Any]] = None) -> _Base:
    return CONFIGURATORS[configurator_kind(model, serving, spec)](model, serving, spec)


def calculate_pool_sizes(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]],
                         spec: Optional[Mapping[str, Any]], available_bytes: int,
                         page_size: Optional[int] = None) -> dict:
    return create_pool_configurator(model, serving, spec).calculate_pool_sizes(available_bytes, page_size)


def calculate_pool_sizes_from_max_tokens(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]],
                                         spec: Optional[Mapping[str, Any]], max_total_num_tokens: int,
                                         page_size: Optional[int] = None) -> dict:
    return create_pool_configurator(model, serving, spec).calculate_pool_sizes_from_max_tokens(
        max_total_num_tokens, page_size)


def run_call(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]],
             spec: Optional[Mapping[str, Any]], entry: str, value: int,
             page_size: Optional[int] = None) -> dict:
    """One golden-style call: ``{"expect": {...}}`` or ``{"error": kind}``."""
    try:
        cfg = create_pool_configurator(model, serving, spec)
        if entry == "bytes":
            out = cfg.calculate_pool_sizes(value, page_size)
        elif entry == "max_tokens":
            out = cfg.calculate_pool_sizes_from_max_tokens(value, page_size)
        else:
            raise ValueError(f"unknown entry {entry!r}")
    except OracleError as e:
        return {"error": e.kind}
    return {"expect": out}


# --------------------------------------------------------------------------
# REFERENCE section 3: the allocation SGLang makes for its own plan
# --------------------------------------------------------------------------


def sglang_allocation_bytes(model: Mapping[str, Any], serving: Optional[Mapping[str, Any]],
                            spec: Optional[Mapping[str, Any]], available_bytes: int) -> dict:
    """Bytes SGLang allocates for the pools it planned with ``calculate_pool_sizes``.

    Layout (REFERENCE 3): per layer K ``[tokens + p, H_rank, Dk]`` and V
    ``[tokens + p, H_rank, Dv]``; the draft pool is d layers at the target's
    full geometry with full-pool capacity (SWA capacity for an all-SWA target).
    Only plain dtypes (no fp4/mxfp8 scale tensors) and non-MLA models.
    """
    cfg = create_pool_configurator(model, serving, spec)
    m, c, s = cfg.model, cfg.serving, cfg.spec
    if c["kv_cache_dtype"] in ("fp4_e2m1", "mxfp8") or m["is_mla"]:
        raise NotImplementedError("only plain-dtype MHA/GQA layouts are modelled")
    sizes = cfg.calculate_pool_sizes(available_bytes)
    p = c["page_size"]
    b = DTYPE_BYTES[c["kv_cache_dtype"]]
    tp = c["tp_size"]
    if cfg.kind == "default":
        dcp = c["dcp_size"]
        h = max(1, m["num_kv_heads"] // (tp // dcp))
        F = h * (m["head_dim"] + m["v_head_dim"]) * b
        pools = [(m["n_f"] + m["n_s"], sizes["max_total_num_tokens"], F)]
        full_tokens = sizes["max_total_num_tokens"]
    else:
        h_f = max(1, m["num_kv_heads"] // tp)
        h_s = max(1, m["swa_num_kv_heads"] // tp)
        F = h_f * (m["head_dim"] + m["v_head_dim"]) * b
        S = h_s * (m["swa_head_dim"] + m["swa_v_head_dim"]) * b
        pools = [(m["n_f"], sizes["full_max_total_num_tokens"], F),
                 (m["n_s"], sizes["swa_max_total_num_tokens"], S)]
        full_tokens = (sizes["full_max_total_num_tokens"] if m["n_f"] > 0
                       else sizes["swa_max_total_num_tokens"])
    algo = s["algorithm"]
    d = s["draft_num_layers"]
    if (algo in EAGLE_FAMILY or algo == "standalone") and not c["is_draft_worker"] and d > 0:
        h = max(1, m["num_kv_heads"] // tp)
        pools.append((d, full_tokens, h * (m["head_dim"] + m["v_head_dim"]) * b))
    total = sum(layers * (tokens + p) * per for layers, tokens, per in pools if layers > 0)
    padding = sum(layers * p * per for layers, tokens, per in pools if layers > 0)
    return {
        "sizes": sizes,
        "total_bytes": total,
        "padding_bytes": padding,
        "over_budget_bytes": max(0, total - available_bytes),
    }
