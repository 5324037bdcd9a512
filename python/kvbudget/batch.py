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


def _int_col(v: IntLike) -> object:
    """None -> -1 (the batch sentinel for None); arrays -> contiguous int64."""
    if v is None:
        return -1
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    arr = np.asarray(v, dtype=object)
    if arr.ndim == 0:
        return _int_col(arr.item())
    return np.ascontiguousarray([-1 if x is None else x for x in arr.tolist()], dtype=np.int64)


def _required_int_col(name: str, v: IntLike) -> object:
    if v is None:
        raise TypeError(f"plan_many: {name} is required")
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return np.ascontiguousarray(v, dtype=np.int64)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return int(v)
    return np.ascontiguousarray(np.asarray(v), dtype=np.int64)


def _fast_int_col(v: IntLike) -> object:
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu":
        return np.ascontiguousarray(v, dtype=np.int64)
    return _int_col(v)


def _float_col(v: FloatLike) -> object:
    if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
        return float(v)
    return np.ascontiguousarray(np.asarray(v), dtype=np.float64)


def _bool_col(v: BoolLike) -> object:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    return np.ascontiguousarray(np.asarray(v), dtype=np.bool_)


def _code_col(v: StrLike, names: list[str], aliases: dict[str, str], default: str) -> object:
    def one(x: object) -> int:
        if x is None:
            x = default
        if not isinstance(x, str):
            return _BAD_CODE
        key = x.lower()
        key = aliases.get(key, key)
        return names.index(key) if key in names else _BAD_CODE

    if v is None or isinstance(v, str):
        return one(v)
    arr = np.asarray(v)
    if arr.ndim == 0:
        return one(arr.item())
    if arr.dtype.kind in "iu":  # already codes
        return np.ascontiguousarray(arr, dtype=np.uint8)
    return np.ascontiguousarray([one(x) for x in arr.tolist()], dtype=np.uint8)


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

    Arguments are the scalar API's (``ModelGeometry``, ``ServingConfig``,
    ``SpeculativeConfig``) with ``num_full_layers``/``num_swa_layers`` in place
    of layer id lists. Each is a scalar or a 1-D array; arrays must share one
    length. For optional integer arrays, a negative entry means ``None``;
    dtype, algorithm and mode columns take names (or their integer codes).
    The GIL is released for batches of 4096 rows or more; concurrent calls from
    several threads are safe.
    """
    columns = {
        "available_bytes": _required_int_col("available_bytes", available_bytes),
        "num_full_layers": _required_int_col("num_full_layers", num_full_layers),
        "num_swa_layers": _required_int_col("num_swa_layers", num_swa_layers),
        "num_kv_heads": _required_int_col("num_kv_heads", num_kv_heads),
        "head_dim": _required_int_col("head_dim", head_dim),
        "v_head_dim": _fast_int_col(v_head_dim),
        "swa_num_kv_heads": _fast_int_col(swa_num_kv_heads),
        "swa_head_dim": _fast_int_col(swa_head_dim),
        "swa_v_head_dim": _fast_int_col(swa_v_head_dim),
        "sliding_window_size": _fast_int_col(sliding_window_size),
        "kv_lora_rank": _fast_int_col(kv_lora_rank),
        "qk_rope_head_dim": _fast_int_col(qk_rope_head_dim),
        "kv_cache_dtype": _code_col(kv_cache_dtype, _DTYPES, _DTYPE_ALIASES, "bf16"),
        "page_size": _required_int_col("page_size", page_size),
        "tp_size": _required_int_col("tp_size", tp_size),
        "dcp_size": _required_int_col("dcp_size", dcp_size),
        "attn_dp_size": _required_int_col("attn_dp_size", attn_dp_size),
        "swa_full_tokens_ratio": _float_col(swa_full_tokens_ratio),
        "max_running_requests": _fast_int_col(max_running_requests),
        "chunked_prefill_size": _fast_int_col(chunked_prefill_size),
        "disable_radix_cache": _bool_col(disable_radix_cache),
        "disable_overlap_schedule": _bool_col(disable_overlap_schedule),
        "disaggregation_mode": _code_col(disaggregation_mode, _MODES, _MODE_ALIASES, "null"),
        "disaggregation_decode_extra_slots": _required_int_col(
            "disaggregation_decode_extra_slots", disaggregation_decode_extra_slots
        ),
        "swa_eviction_interval": _required_int_col("swa_eviction_interval", swa_eviction_interval),
        "disable_hybrid_swa_memory": _bool_col(disable_hybrid_swa_memory),
        "is_draft_worker": _bool_col(is_draft_worker),
        "algorithm": _code_col(algorithm, _ALGORITHMS, _ALGORITHM_ALIASES, "none"),
        "draft_num_layers": _required_int_col("draft_num_layers", draft_num_layers),
        "num_steps": _fast_int_col(num_steps),
        "eagle_topk": _fast_int_col(eagle_topk),
        "num_draft_tokens": _fast_int_col(num_draft_tokens),
        "banded_draft_layers": _required_int_col("banded_draft_layers", banded_draft_layers),
        "dflash_draft_cell_size_per_token": _fast_int_col(dflash_draft_cell_size_per_token),
    }
    return BatchResult(*_core._plan_many(columns))
