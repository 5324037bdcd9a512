"""Batch planning for autoscalers: many scenarios in one call, numpy in and out.

Every input of the scalar API is a column: a numpy array (one value per row)
or a scalar broadcast to every row. Layer *counts* replace layer id lists:
sizing needs only the counts. A bad row does not raise; its ``status`` is
nonzero (see :data:`STATUS_CODES`). Row for row, the results equal
``create_pool_configurator(...).calculate_pool_sizes(available_bytes)``.
"""

from __future__ import annotations

from typing import NamedTuple, Union

import numpy as np
import numpy.typing as npt

from kvbudget import _core

__all__ = ["BatchResult", "STATUS_CODES", "plan_many"]

#: status value -> error code (0 is success).
STATUS_CODES: dict[int, str] = {
    0: "ok",
    1: "invalid_config",
    2: "overflow",
    3: "not_enough_memory",
    4: "swa_pool_too_small",
}

_DTYPES = ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "fp4_e2m1"]
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                  "fp8": "fp8_e4m3", "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "fp4": "fp4_e2m1"}
_ALGORITHMS = ["none", "eagle", "eagle3", "nextn", "standalone", "ngram", "dflash"]
_ALGORITHM_ALIASES = {"mtp": "nextn", "": "none"}
_MODES = ["null", "prefill", "decode"]
_MODE_ALIASES = {"none": "null", "": "null"}
_BAD_CODE = 255  # an unknown name becomes an invalid row, as the scalar API would raise

IntLike = Union[int, None, npt.ArrayLike]
FloatLike = Union[float, npt.ArrayLike]
BoolLike = Union[bool, npt.ArrayLike]
StrLike = Union[str, None, npt.ArrayLike]


class BatchResult(NamedTuple):
    """Per-row results. ``-1`` stands for ``None`` in the full and SWA columns of a
    successful row (the Default configurator sets only ``max_total_num_tokens``);
    failed rows hold 0 there and a nonzero ``status``."""

    max_total_num_tokens: npt.NDArray[np.int64]
    full_max_total_num_tokens: npt.NDArray[np.int64]
    swa_max_total_num_tokens: npt.NDArray[np.int64]
    status: npt.NDArray[np.uint8]

    @property
    def ok(self) -> npt.NDArray[np.bool_]:
        """True where the row planned."""
        ok: npt.NDArray[np.bool_] = np.equal(self.status, 0)
        return ok

    def error_codes(self) -> list[str]:
        """The status of every row as its error code string (``"ok"`` on success)."""
        return [STATUS_CODES[int(s)] for s in self.status]


_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_i64(name: str, x: int) -> int:
    if not _I64_MIN <= x <= _I64_MAX:
        raise OverflowError(f"plan_many: {name} value {x} does not fit a signed 64-bit integer")
    return x


def int_column(name: str, v: object, *, optional: bool) -> object:
    """A scalar int, or a contiguous int64 array; ``None`` is -1 (the batch sentinel) when optional.

    Raises:
        TypeError: a bool, float, string or other non-integer value.
        OverflowError: a value outside the signed 64-bit range.
    """
    if v is None:
        if optional:
            return -1
        raise TypeError(f"plan_many: {name} is required")
    if _is_int(v):
        return _check_i64(name, int(v))  # type: ignore[call-overload]
    if isinstance(v, np.ndarray):
        if v.ndim != 1:
            raise TypeError(f"plan_many: {name} must be a scalar or a 1-D array, got {v.ndim}-D")
        if v.dtype.kind == "i":
            return np.ascontiguousarray(v, dtype=np.int64)
        if v.dtype.kind == "u":
            if v.size and int(v.max()) > _I64_MAX:
                raise OverflowError(f"plan_many: {name} has values above 2**63 - 1")
            return np.ascontiguousarray(v, dtype=np.int64)
        if v.dtype.kind != "O":
            raise TypeError(f"plan_many: {name} must hold integers, got dtype {v.dtype}")
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        out = np.empty(len(v), dtype=np.int64)
        for k, x in enumerate(v):
            if x is None and optional:
                out[k] = -1
            elif _is_int(x):
                out[k] = _check_i64(name, int(x))
            else:
                raise TypeError(f"plan_many: {name}[{k}] must be an int{' or None' if optional else ''}, got {x!r}")
        return out
    raise TypeError(f"plan_many: {name} must be an int or a 1-D array of ints, got {type(v).__name__}")


def _float_col(name: str, v: object) -> object:
    if isinstance(v, (float, np.floating)) or _is_int(v):
        return float(v)  # type: ignore[arg-type]
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "fiu":
        return np.ascontiguousarray(v, dtype=np.float64)
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (float, np.floating)) or _is_int(x) for x in v):
            return np.ascontiguousarray(v, dtype=np.float64)
    raise TypeError(f"plan_many: {name} must be a real number or a 1-D array of them, got {v!r:.80}")


def _bool_col(name: str, v: object) -> object:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind == "b":
        return np.ascontiguousarray(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, (bool, np.bool_)) for x in v):
        return np.ascontiguousarray(v, dtype=np.bool_)
    raise TypeError(f"plan_many: {name} must be a bool or a 1-D array of bools, got {v!r:.80}")


def _code_col(name: str, v: object, names: list[str], aliases: dict[str, str], default: str) -> object:
    """Names (or integer codes) to uint8 codes; an unknown name or code is an invalid row."""

    def one(x: object) -> int:
        if x is None:
            x = default
        if _is_int(x):
            return int(x) if 0 <= int(x) < len(names) else _BAD_CODE  # type: ignore[call-overload]
        if not isinstance(x, str):
            raise TypeError(f"plan_many: {name} must be a name or a code, got {x!r:.80}")
        key = aliases.get(x.lower(), x.lower())
        return names.index(key) if key in names else _BAD_CODE

    if v is None or isinstance(v, str) or _is_int(v):
        return one(v)
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "iu":
        # Integer codes, vectorized; an out-of-range code is an invalid row.
        ok = (v >= 0) & (v < len(names))
        return np.ascontiguousarray(np.where(ok, v, _BAD_CODE), dtype=np.uint8)
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "US":
        # Names, vectorized: each distinct name is looked up once.
        uniq, inverse = np.unique(v.astype(str), return_inverse=True)
        codes = np.asarray([one(str(u)) for u in uniq.tolist()], dtype=np.uint8)
        return np.ascontiguousarray(codes[inverse.reshape(-1)], dtype=np.uint8)
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind == "O":
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return np.ascontiguousarray([one(x) for x in v], dtype=np.uint8)
    raise TypeError(f"plan_many: {name} must be a name, a code or a 1-D array of them, got {v!r:.80}")


def plan_many(
    available_bytes: IntLike,
    *,
    num_full_layers: IntLike,
    num_swa_layers: IntLike = 0,
    num_kv_heads: IntLike,
    head_dim: IntLike,
    v_head_dim: IntLike = None,
    swa_num_kv_heads: IntLike = None,
    swa_head_dim: IntLike = None,
    swa_v_head_dim: IntLike = None,
    sliding_window_size: IntLike = None,
    kv_lora_rank: IntLike = None,
    qk_rope_head_dim: IntLike = None,
    kv_cache_dtype: StrLike = "bf16",
    page_size: IntLike = 1,
    tp_size: IntLike = 1,
    dcp_size: IntLike = 1,
    attn_dp_size: IntLike = 1,
    swa_full_tokens_ratio: FloatLike = 0.8,
    max_running_requests: IntLike = None,
    chunked_prefill_size: IntLike = None,
    disable_radix_cache: BoolLike = False,
    disable_overlap_schedule: BoolLike = False,
    disaggregation_mode: StrLike = "null",
    disaggregation_decode_extra_slots: IntLike = 0,
    swa_eviction_interval: IntLike = 128,
    disable_hybrid_swa_memory: BoolLike = False,
    is_draft_worker: BoolLike = False,
    algorithm: StrLike = "none",
    draft_num_layers: IntLike = 0,
    num_steps: IntLike = None,
    eagle_topk: IntLike = None,
    num_draft_tokens: IntLike = None,
    banded_draft_layers: IntLike = 0,
    dflash_draft_cell_size_per_token: IntLike = None,
) -> BatchResult:
    """Plans every row from bytes, as SGLang's factory-chosen configurator would.

    Raises TypeError for a value of the wrong type (a bool, float or string
    where an int is expected) and OverflowError beyond 64 bits; a value of the
    right type that the scalar API would reject is an invalid row instead.

    Arguments are the scalar API's (``ModelGeometry``, ``ServingConfig``,
    ``SpeculativeConfig``) with ``num_full_layers``/``num_swa_layers`` in place
    of layer id lists. Each is a scalar or a 1-D array; arrays must share one
    length. For optional integer arrays, a negative entry means ``None``;
    dtype, algorithm and mode columns take names (or their integer codes).
    The GIL is released for batches of 4096 rows or more; concurrent calls from
    several threads are safe.
    """
    req = {
        "available_bytes": available_bytes,
        "num_full_layers": num_full_layers,
        "num_swa_layers": num_swa_layers,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "page_size": page_size,
        "tp_size": tp_size,
        "dcp_size": dcp_size,
        "attn_dp_size": attn_dp_size,
        "disaggregation_decode_extra_slots": disaggregation_decode_extra_slots,
        "swa_eviction_interval": swa_eviction_interval,
        "draft_num_layers": draft_num_layers,
        "banded_draft_layers": banded_draft_layers,
    }
    opt = {
        "v_head_dim": v_head_dim,
        "swa_num_kv_heads": swa_num_kv_heads,
        "swa_head_dim": swa_head_dim,
        "swa_v_head_dim": swa_v_head_dim,
        "sliding_window_size": sliding_window_size,
        "kv_lora_rank": kv_lora_rank,
        "qk_rope_head_dim": qk_rope_head_dim,
        "max_running_requests": max_running_requests,
        "chunked_prefill_size": chunked_prefill_size,
        "num_steps": num_steps,
        "eagle_topk": eagle_topk,
        "num_draft_tokens": num_draft_tokens,
        "dflash_draft_cell_size_per_token": dflash_draft_cell_size_per_token,
    }
    columns: dict[str, object] = {k: int_column(k, v, optional=False) for k, v in req.items()}
    columns.update({k: int_column(k, v, optional=True) for k, v in opt.items()})
    columns.update(
        {
            "kv_cache_dtype": _code_col("kv_cache_dtype", kv_cache_dtype, _DTYPES, _DTYPE_ALIASES, "bf16"),
            "swa_full_tokens_ratio": _float_col("swa_full_tokens_ratio", swa_full_tokens_ratio),
            "disable_radix_cache": _bool_col("disable_radix_cache", disable_radix_cache),
            "disable_overlap_schedule": _bool_col("disable_overlap_schedule", disable_overlap_schedule),
            "disaggregation_mode": _code_col("disaggregation_mode", disaggregation_mode, _MODES, _MODE_ALIASES, "null"),
            "disable_hybrid_swa_memory": _bool_col("disable_hybrid_swa_memory", disable_hybrid_swa_memory),
            "is_draft_worker": _bool_col("is_draft_worker", is_draft_worker),
            "algorithm": _code_col("algorithm", algorithm, _ALGORITHMS, _ALGORITHM_ALIASES, "none"),
        }
    )
    return BatchResult(*_core._plan_many(columns))
