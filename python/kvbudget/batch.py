"""Batch planning for autoscalers: many scenarios in one call, numpy in and out.

Every input of the scalar API is a keyword whose value is a scalar (the same
for every row) or a 1-D array (one value per row). The keywords are the
scenario fields of :mod:`kvbudget.fields` that take batch columns: the
fields of ``ModelGeometry`` (with ``num_full_layers``/``num_swa_layers`` in
place of layer id lists, since sizing needs only counts), ``ServingConfig``
and ``SpeculativeConfig``.

Row ``i`` is the scalars with row ``i``'s array values applied; row for row
the results equal ``create_pool_configurator(...).calculate_pool_sizes(A)``
of the scalar API, errors included (as the row's ``status``, see
:data:`STATUS_CODES`). Scalars go through the scalar constructors' own checks
once; a scalar the scalar API rejects makes every row invalid.

Integer arrays are read in place when they are int64 or int32 (other integer
dtypes are converted): int32 cells halve the memory a large batch streams, so
keep small integers narrow.

Rows whose options are the common ones are solved many at once in vector
code, compiled for several instruction sets and chosen at run time
(:func:`simd_level` names the one in use; the ``KVBUDGET_SIMD`` environment
variable can cap it, e.g. ``avx2``). Every level gives the same results.

Encodings of array values: for an optional integer field, ``None`` (in a
list) or any negative number means ``None``; dtype, algorithm and mode
arrays hold names or their integer codes (the order of each field's
``choices``). A value of the wrong type (a bool or float for an int, a string
for a flag) raises ``TypeError``; an integer beyond 64 bits ``OverflowError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Optional, Union, overload

import numpy as np
import numpy.typing as npt

from kvbudget import _core
from kvbudget._core import StateConfig
from kvbudget.fields import FIELDS, SCENARIO_FIELDS, Field

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from kvbudget._columns import PlanManyColumns

__all__ = ["BATCH_FIELDS", "STATE_BATCH_FIELDS", "BatchResult", "STATUS_CODES", "StateBatchResult", "int_column",
           "plan_many", "simd_level"]  # fmt: skip

#: status value -> error code (0 is success).
STATUS_CODES: dict[int, str] = {
    0: "ok",
    1: "invalid_config",
    2: "overflow",
    3: "not_enough_memory",
    4: "swa_pool_too_small",
}

#: The keywords of :func:`plan_many` (besides ``available_bytes`` and ``out``), by name.
BATCH_FIELDS: dict[str, Field] = {name: f for name, f in SCENARIO_FIELDS.items() if f.batch}
#: The keywords :func:`plan_many` takes with ``state=``: ``StateConfig``'s batch fields, by name.
STATE_BATCH_FIELDS: dict[str, Field] = {f.name: f for f in FIELDS["StateConfig"] if f.batch}

_BAD_CODE = 255  # an unknown name or code: an invalid row, as the scalar API would raise
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

IntLike = Union[int, None, npt.ArrayLike]


class BatchResult(NamedTuple):
    """Per-row results. ``-1`` stands for ``None`` in the full and SWA columns of a
    successful row (the Default configurator sets only ``max_total_num_tokens``);
    failed rows hold 0 there and a nonzero ``status``."""

    max_total_num_tokens: npt.NDArray[np.int64]
    """``max_total_num_tokens`` per row, tokens."""
    full_max_total_num_tokens: npt.NDArray[np.int64]
    """Full-pool tokens per row (-1: None)."""
    swa_max_total_num_tokens: npt.NDArray[np.int64]
    """SWA-pool tokens per row (-1: None)."""
    status: npt.NDArray[np.uint8]
    """0 on success, else the error's status (:data:`STATUS_CODES`)."""

    @property
    def ok(self) -> npt.NDArray[np.bool_]:
        """True where the row planned."""
        return _ok(self.status)

    def error_codes(self) -> list[str]:
        """The status of every row as its error code string (``"ok"`` on success)."""
        return _error_codes(self.status)

    @classmethod
    def empty(cls, rows: int) -> BatchResult:
        """Output arrays for ``rows`` rows, to pass as ``out=`` and reuse across calls."""
        return cls(
            np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows, np.uint8)
        )


def _ok(status: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    ok: npt.NDArray[np.bool_] = np.equal(status, 0)
    return ok


def _error_codes(status: npt.NDArray[np.uint8]) -> list[str]:
    return [STATUS_CODES[int(s)] for s in status]


class StateBatchResult(NamedTuple):
    """:func:`plan_many`'s rows with ``state=``: :class:`BatchResult`'s four arrays and
    SGLang's state slots per row."""

    max_total_num_tokens: npt.NDArray[np.int64]
    """``max_total_num_tokens`` per row, on the KV budget the state pool leaves, tokens."""
    full_max_total_num_tokens: npt.NDArray[np.int64]
    """Full-pool tokens per row (-1: None)."""
    swa_max_total_num_tokens: npt.NDArray[np.int64]
    """SWA-pool tokens per row (-1: None)."""
    status: npt.NDArray[np.uint8]
    """0 on success, else the error's status (:data:`STATUS_CODES`)."""
    max_mamba_cache_size: npt.NDArray[np.int64]
    """SGLang's state slots per row (``max_mamba_cache_size`` per attention-DP rank; -1 where
    the row failed)."""

    @property
    def ok(self) -> npt.NDArray[np.bool_]:
        """True where the row planned."""
        return _ok(self.status)

    def error_codes(self) -> list[str]:
        """The status of every row as its error code string (``"ok"`` on success)."""
        return _error_codes(self.status)


def out_arrays(out: Union[BatchResult, StateBatchResult, None]) -> Optional[tuple[Any, Any, Any, Any]]:
    """The four arrays the core writes of an ``out=`` result (the state slots are always fresh)."""
    return None if out is None else (out[0], out[1], out[2], out[3])


def _is_int(x: object) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _check_i64(name: str, x: int) -> int:
    if not _I64_MIN <= x <= _I64_MAX:
        raise OverflowError(f"plan_many: {name} value {x} does not fit a signed 64-bit integer")
    return x


def _plain_array(name: str, v: np.ndarray) -> np.ndarray:
    if isinstance(v, np.ma.MaskedArray):
        raise TypeError(f"plan_many: {name} is a masked array; fill it first (e.g. .filled(-1) for None)")
    if v.ndim != 1:
        raise TypeError(f"plan_many: {name} must be a scalar or a 1-D array, got {v.ndim}-D")
    return v


def int_column(name: str, v: object, *, optional: bool) -> npt.NDArray[np.int64]:
    """A contiguous int64 array from an array or a list of ints; ``None`` is -1 when optional.

    Raises:
        TypeError: a bool, float, string or other non-integer value.
        OverflowError: a value outside the signed 64-bit range.
    """
    if isinstance(v, np.ndarray):
        _plain_array(name, v)
        if v.dtype.kind == "i":
            return np.ascontiguousarray(v, dtype=np.int64)
        if v.dtype.kind == "u":
            if v.size and int(v.max()) > _I64_MAX:
                raise OverflowError(f"plan_many: {name} has values above 2**63 - 1")
            return np.ascontiguousarray(v, dtype=np.int64)
        if v.dtype.kind != "O":
            raise TypeError(f"plan_many: {name} must hold integers, got dtype {v.dtype}")
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"plan_many: {name} must be an int or a 1-D array of ints, got {type(v).__name__}")
    out = np.empty(len(v), dtype=np.int64)
    for k, x in enumerate(v):
        if x is None and optional:
            out[k] = -1
        elif _is_int(x):
            out[k] = _check_i64(name, int(x))
        else:
            raise TypeError(f"plan_many: {name}[{k}] must be an int{' or None' if optional else ''}, got {x!r}")
    return out


def _int_cells(name: str, v: object, *, optional: bool) -> Union[npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """An integer field's column: an int32 array as it is (the kernel reads int32 cells in
    place, half the memory of int64), narrower integers as int32, anything else by
    :func:`int_column`."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.dtype.itemsize <= 4 and v.dtype != np.uint32:
        return np.ascontiguousarray(_plain_array(name, v), dtype=np.int32)
    return int_column(name, v, optional=optional)


def _float_column(name: str, v: object) -> npt.NDArray[np.float64]:
    if isinstance(v, np.ndarray) and _plain_array(name, v).dtype.kind in "fiu":
        return np.ascontiguousarray(v, dtype=np.float64)
    if isinstance(v, (list, tuple)) and all(isinstance(x, (float, np.floating)) or _is_int(x) for x in v):
        return np.ascontiguousarray(v, dtype=np.float64)
    raise TypeError(f"plan_many: {name} must be a real number or a 1-D array of them, got {v!r:.80}")


def _bool_column(name: str, v: object) -> npt.NDArray[np.bool_]:
    if isinstance(v, np.ndarray) and _plain_array(name, v).dtype.kind == "b":
        return np.ascontiguousarray(v)
    if isinstance(v, (list, tuple)) and all(isinstance(x, (bool, np.bool_)) for x in v):
        return np.ascontiguousarray(v, dtype=np.bool_)
    raise TypeError(f"plan_many: {name} must be a bool or a 1-D array of bools, got {v!r:.80}")


def _code_column(f: Field, v: object) -> npt.NDArray[np.uint8]:
    """Names (parsed by the core, aliases included) or integer codes to uint8 codes."""
    n = len(f.choices)
    if isinstance(v, np.ndarray):
        _plain_array(f.name, v)
        if v.dtype == np.uint8:
            return np.ascontiguousarray(v)  # the core checks each code
        if v.dtype.kind in "iu":
            ok = (v >= 0) & (v < n)
            return np.ascontiguousarray(np.where(ok, v, _BAD_CODE), dtype=np.uint8)
        if v.dtype.kind not in "USO":
            raise TypeError(f"plan_many: {f.name} must hold names or integer codes, got dtype {v.dtype}")
        v = v.astype(object).tolist()
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"plan_many: {f.name} must be a name, a code or a 1-D array of them, got {v!r:.80}")
    names: list[str] = []
    for x in v:
        if x is None:
            names.append(str(f.default))
        elif _is_int(x):
            names.append(f.choices[int(x)] if 0 <= int(x) < n else "")
        elif isinstance(x, str):
            names.append(x)
        else:
            raise TypeError(f"plan_many: {f.name} must hold names or codes, got {x!r:.80}")
    if not names:
        return np.zeros(0, np.uint8)
    uniq, inverse = np.unique(np.asarray(names, dtype=object).astype(str), return_inverse=True)
    codes = np.asarray(_core._choice_codes(f.name, [str(u) for u in uniq.tolist()]), dtype=np.uint8)
    # an out-of-range integer code became "", which no name parses to: an invalid row
    return np.ascontiguousarray(codes[inverse.reshape(-1)], dtype=np.uint8)


#: The array dtypes the core reads in place for each declared cell dtype (an int64 field also
#: takes int32 cells).
_IN_PLACE: dict[str, tuple[np.dtype[Any], ...]] = {
    d: (np.dtype(d), *((np.dtype(np.int32),) if d == "int64" else ()))
    for d in {f.cell_dtype for f in BATCH_FIELDS.values()}
}


def _column(f: Field, v: object) -> np.ndarray:
    """The batch column of field ``f``, in its ``cell_dtype``."""
    if (type(v) is np.ndarray and v.ndim == 1 and v.dtype in _IN_PLACE[f.cell_dtype]
            and v.flags.c_contiguous):  # fmt: skip
        return v  # what the conversions below return for it: the array itself
    if f.cell_dtype == "int64":
        return _int_cells(f.name, v, optional=f.py == "opt_int")
    if f.cell_dtype == "float64":
        return _float_column(f.name, v)
    if f.cell_dtype == "bool":
        return _bool_column(f.name, v)
    return _code_column(f, v)


def _scalar(f: Field, v: object) -> object:
    """A scalar as the scalar constructors take it (an integer code of a choice becomes its name)."""
    if isinstance(v, np.ndarray):  # 0-D
        v = v.item()
    if f.choices and _is_int(v):
        code = int(v)  # type: ignore[call-overload]
        return f.choices[code] if 0 <= code < len(f.choices) else f"<code {code}>"
    if _is_int(v):
        return _check_i64(f.name, int(v))  # type: ignore[call-overload]
    return v


#: The batch fields ``plan_many`` requires.
_REQUIRED = tuple(name for name, f in BATCH_FIELDS.items() if f.required)


def _is_array(v: object) -> bool:
    return isinstance(v, (list, tuple)) or (isinstance(v, np.ndarray) and v.ndim != 0)


def simd_level() -> str:
    """The instruction set :func:`plan_many`'s fast path runs on in this process.

    ``"avx512"``, ``"avx2"``, ``"sse4.2"`` or ``"sse2"`` on x86: the CPU's best, or
    the lower level the ``KVBUDGET_SIMD`` environment variable names (read once, at
    the first batch call). Elsewhere ``"baseline"`` (the target's own vector unit,
    e.g. NEON) or ``"scalar"``. Results do not depend on it.
    """
    return _core.simd_level()


@overload
def plan_many(
    available_bytes: IntLike, *, out: Optional[BatchResult] = None, threads: Optional[int] = None,
    state: None = None, **columns: Unpack[PlanManyColumns],
) -> BatchResult: ...
@overload
def plan_many(
    available_bytes: IntLike, *, out: Union[BatchResult, StateBatchResult, None] = None,
    threads: Optional[int] = None, state: StateConfig, **columns: Unpack[PlanManyColumns],
) -> StateBatchResult: ...
def plan_many(
    available_bytes: IntLike,
    *,
    out: Union[BatchResult, StateBatchResult, None] = None,
    threads: Optional[int] = None,
    state: Optional[StateConfig] = None,
    **columns: Unpack[PlanManyColumns],
) -> Union[BatchResult, StateBatchResult]:
    """Plans every row from bytes, as SGLang's factory-chosen configurator would.

    Args:
        available_bytes: bytes available for KV on the rank, a scalar or one per row.
        out: output arrays to write into (:meth:`BatchResult.empty`), reused across
            calls; fresh arrays by default.
        threads: at most this many threads (the rows are independent, so the
            result does not depend on it); ``None``: one per available core for
            batches of 65,536 rows or more.
        state: a hybrid-state model's state (:class:`kvbudget.sglang.state.StateConfig`; the
            scenario columns then describe its attention layers): every row takes SGLang's
            state slots out of its budget first and sizes the KV pool on the rest, as
            :func:`kvbudget.sglang.state.calculate_pool_sizes_with_state` does, and the
            result is a :class:`StateBatchResult`, whose ``max_mamba_cache_size`` holds the
            slots (fresh each call; ``out=`` gives the other four arrays). The fields of
            :data:`STATE_BATCH_FIELDS` (``ssm_heads``, ``num_state_layers``, ...) may then vary
            too. These rows are planned on the calling thread, off the vector path.
        **columns: the scenario fields of :data:`BATCH_FIELDS` (``num_kv_heads`` and
            ``head_dim`` are required), each a scalar or a 1-D array; arrays must
            share one length. Integer fields' int64 and int32 arrays are read in
            place (int32: half the memory traffic).

    Returns:
        :class:`BatchResult` (``out`` itself when given).

    Raises:
        TypeError: an unknown or missing keyword, or a value of the wrong type.
        OverflowError: an integer beyond 64 bits.
        InvalidConfigError: arrays of different lengths, or ``out`` of the wrong shape.

    The GIL is released for batches of ``kvbudget._core.DETACH_ROWS`` (4096) rows or
    more; the input arrays are borrowed, not copied, so do not write to them from
    another thread during the call. Concurrent calls are safe.
    """
    scalars: dict[str, object] = {}
    arrays: dict[str, np.ndarray] = {}
    state_scalars: dict[str, object] = {}
    state_arrays: dict[str, np.ndarray] = {}
    given: dict[str, Any] = columns  # type: ignore[assignment]  # a fresh dict of keywords
    for name, v in given.items():
        f = BATCH_FIELDS.get(name)
        tv = type(v)
        if f is not None and (tv is float or tv is str or tv is bool or v is None):
            scalars[name] = v  # as _scalar leaves it: the core checks it
            continue
        if f is not None and tv is int and not f.choices:
            scalars[name] = _check_i64(name, v)
            continue
        into = (scalars, arrays)
        if f is None and name in STATE_BATCH_FIELDS:
            if state is None:
                raise TypeError(f"plan_many(): {name} is a StateConfig field; it goes with state=")
            f, into = STATE_BATCH_FIELDS[name], (state_scalars, state_arrays)
        if f is None:
            raise TypeError(f"plan_many() got an unexpected keyword argument {name!r}")
        if _is_array(v):
            into[1][name] = _column(f, v)
        else:
            into[0][name] = _scalar(f, v)
    missing = [name for name in _REQUIRED if name not in given]
    if missing:
        raise TypeError(f"plan_many() missing required keyword arguments: {', '.join(missing)}")
    budgets: Union[int, npt.NDArray[np.int64]]
    if type(available_bytes) is int:
        budgets = _check_i64("available_bytes", available_bytes)
    elif _is_array(available_bytes):
        budgets = int_column("available_bytes", available_bytes, optional=False)
    elif isinstance(available_bytes, (int, np.integer)) and not isinstance(available_bytes, (bool, np.bool_)):
        budgets = _check_i64("available_bytes", int(available_bytes))
    else:
        raise TypeError(f"plan_many: available_bytes must be an int or a 1-D array of ints, got {available_bytes!r:.80}")
    out4 = None if out is None else out_arrays(out)
    if state is None:
        return BatchResult._make(_core._plan_many(budgets, scalars, arrays, out4, threads))
    if not isinstance(state, StateConfig):
        raise TypeError(f"plan_many: state must be a StateConfig, got {type(state).__name__}")
    arrays4, slots = _core._plan_many_state(budgets, scalars, arrays, state, state_scalars, state_arrays, out4)
    return StateBatchResult(*arrays4, slots)
