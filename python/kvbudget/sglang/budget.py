"""SGLang 0.5.23's KV budget from a worker's memory measurements (REFERENCE section 4).

:func:`sglang_available_bytes` is ``KVCacheConfigurator._profile_available_bytes``
in SGLang's order (float32 per-rank values MIN-reduced, GiB doubles, a floor);
``tests/test_sglang_budget.py`` holds it to SGLang's own code.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from kvbudget.budget import _GIB, PerRank, _bytes, _fraction
from kvbudget.errors import InvalidConfigError

__all__ = ["sglang_available_bytes", "sglang_free_gib", "sglang_rest_gib"]


def _float32(value: int) -> float:
    """``torch.tensor(value, dtype=torch.float32).item()``: the nearest float32."""
    return float(struct.unpack("<f", struct.pack("<f", float(value)))[0])


def sglang_free_gib(name: str, free: PerRank) -> float:
    """What SGLang 0.5.23's ``get_available_gpu_memory`` returns for these measurements, GiB.

    One rank (an int, or a sequence of one): ``free / 2**30``. Several ranks:
    each rank puts its free bytes in a float32 tensor, ``all_reduce(MIN)`` over
    the world group, then ``.item() / 2**30`` (``distributed=True``, as
    ``measure_pre_model_load_memory`` measures the baseline and
    ``_profile_available_bytes`` the memory after the weights load).

    Raises:
        InvalidConfigError: no rank, or a value that is not a non-negative int.
    """
    values = list(free) if isinstance(free, Sequence) and not isinstance(free, str) else [free]
    if not values:
        raise InvalidConfigError(f"{name}: expected at least one rank")
    for v in values:
        _bytes(name, v)
    if len(values) == 1:
        return values[0] / _GIB
    return min(_float32(v) for v in values) / _GIB


def sglang_available_bytes(
    free_before_load: PerRank,
    free_now: PerRank,
    mem_fraction_static: float,
    multimodal_reserve: int = 0,
) -> int:
    """SGLang 0.5.23's KV budget (``KVCacheConfigurator._profile_available_bytes``), in its order.

    ``rest = available - pre_model_load_memory * (1 - mem_fraction_static) - mm_reservation``
    in GiB as doubles, where ``pre_model_load_memory`` and ``available`` are
    :func:`sglang_free_gib` of the free bytes before the weights were loaded and
    after (target and draft weights loaded; the MIN across ranks), and
    ``mm_reservation`` is ``multimodal_reserve / 2**30`` (SGLang's
    ``mm_runtime_reservation_gb``); then ``floor(rest * 2**30)``. SGLang raises
    when ``rest <= 0``; here the zero or negative budget is returned (the
    planner then raises ``NotEnoughMemoryError``). A hybrid model's state pool
    comes out first: :func:`kvbudget.sglang.state.available_bytes`.
    ``tests/test_sglang_budget.py`` holds it to SGLang's own code.

    Args:
        free_before_load: free bytes before loading weights, one int or one per rank.
        free_now: free bytes now, weights loaded, one int or one per rank.
        mem_fraction_static: ``--mem-fraction-static``, in (0, 1].
        multimodal_reserve: bytes held back for a multimodal model's caches.

    Raises:
        InvalidConfigError: a negative byte count, no rank, or a fraction outside (0, 1].
    """
    return math.floor(sglang_rest_gib(free_before_load, free_now, mem_fraction_static, multimodal_reserve) * _GIB)


def sglang_rest_gib(
    free_before_load: PerRank,
    free_now: PerRank,
    mem_fraction_static: float,
    multimodal_reserve: int = 0,
) -> float:
    """``rest_memory`` of ``_profile_available_bytes``, GiB as a double: what
    :func:`sglang_available_bytes` floors, and what a hybrid model's state pool
    is taken out of first (:func:`kvbudget.sglang.state.available_bytes`).

    Raises:
        InvalidConfigError: as :func:`sglang_available_bytes`.
    """
    before = sglang_free_gib("free_before_load", free_before_load)
    now = sglang_free_gib("free_now", free_now)
    f = _fraction("mem_fraction_static", mem_fraction_static)
    reserve = _bytes("multimodal_reserve", multimodal_reserve) / _GIB
    return now - before * (1.0 - f) - reserve
