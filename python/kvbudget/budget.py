"""Where the KV budget ``A`` comes from, engine by engine (REFERENCE.md section 4).

Each function turns an engine's memory measurements and knobs into the bytes
available for KV on one rank, as an integer (floored), to pass to
``configurator.plan(A)``. A result can be zero or negative when the knobs
leave nothing for KV; the planner then raises ``NotEnoughMemoryError``.

Defaults that are the engines' own: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``
0.9 (TensorRT-LLM docs, "How to Change KV Cache Behavior" and the
``KvCacheConfig`` reference); LMDeploy ``cache_max_entry_count`` 0.8
(``TurbomindEngineConfig``/``PytorchEngineConfig`` in ``lmdeploy/messages.py``).
vLLM's ``gpu_memory_utilization`` default has changed across releases (0.9,
then 0.92), so :func:`vllm_available_bytes` takes it without a default.

Only :func:`probe` touches torch, and imports it lazily.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Union

from kvbudget.errors import InvalidConfigError

__all__ = [
    "PerRank",
    "sglang_free_gib",
    "LMDEPLOY_CACHE_MAX_ENTRY_COUNT",
    "TRTLLM_FREE_GPU_MEMORY_FRACTION",
    "fraction_of_free",
    "gpu_available_bytes",
    "lmdeploy_available_bytes",
    "min_across_ranks",
    "probe",
    "sglang_available_bytes",
    "trtllm_available_bytes",
    "vllm_available_bytes",
]

TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
"""TensorRT-LLM's default ``KvCacheConfig.free_gpu_memory_fraction``."""

LMDEPLOY_CACHE_MAX_ENTRY_COUNT = 0.8
"""LMDeploy's default ``cache_max_entry_count`` (a fraction of free memory)."""

_GIB = 1 << 30


def _bytes(name: str, value: int) -> int:
    """Validates a byte count: an ``int`` (not bool), ``>= 0``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{name}: expected an int number of bytes, got {value!r}")
    if value < 0:
        raise InvalidConfigError(f"{name}: bytes must be >= 0, got {value}")
    return value


def _fraction(name: str, value: float) -> float:
    """Validates a fraction in ``(0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidConfigError(f"{name}: expected a number in (0, 1], got {value!r}")
    f = float(value)
    if not (0.0 < f <= 1.0):  # also rejects NaN
        raise InvalidConfigError(f"{name}: expected a fraction in (0, 1], got {value!r}")
    return f


#: Free bytes as one measurement (one rank) or one value per rank.
PerRank = Union[int, Sequence[int]]


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
    planner then raises ``NotEnoughMemoryError``). The Mamba state pool's share
    is not modelled (give kvbudget the KV pool's budget).
    ``tests/test_sglang_budget.py`` holds it to SGLang's own code.

    Args:
        free_before_load: free bytes before loading weights, one int or one per rank.
        free_now: free bytes now, weights loaded, one int or one per rank.
        mem_fraction_static: ``--mem-fraction-static``, in (0, 1].
        multimodal_reserve: bytes held back for a multimodal model's caches.

    Raises:
        InvalidConfigError: a negative byte count, no rank, or a fraction outside (0, 1].
    """
    before = sglang_free_gib("free_before_load", free_before_load)
    now = sglang_free_gib("free_now", free_now)
    f = _fraction("mem_fraction_static", mem_fraction_static)
    reserve = _bytes("multimodal_reserve", multimodal_reserve) / _GIB
    rest_gib = now - before * (1.0 - f) - reserve
    return math.floor(rest_gib * _GIB)


def vllm_available_bytes(
    total: int,
    gpu_memory_utilization: float,
    non_kv_bytes: int = 0,
    *,
    weights_bytes: int = 0,
    peak_activation_bytes: int = 0,
    non_torch_bytes: int = 0,
    cuda_graph_bytes: int = 0,
) -> int:
    """vLLM: ``A = ceil(total * gpu_memory_utilization) - non-KV memory``.

    vLLM 0.33.0's worker (``request_memory``, then ``determine_available_memory``)
    requests ``ceil(total * gpu_memory_utilization)`` bytes of the device and gives KV what is left
    after the model's weights, peak activations seen while profiling, non-torch
    memory (NCCL, CUDA context) and the CUDA graph estimate. Pass the non-KV
    total as ``non_kv_bytes``, or its components by keyword, or both (they add).

    Args:
        total: the device's total bytes.
        gpu_memory_utilization: ``--gpu-memory-utilization``, in (0, 1].
        non_kv_bytes: every non-KV byte, already summed.
        weights_bytes: model weights (target and draft).
        peak_activation_bytes: peak torch activation memory while profiling.
        non_torch_bytes: memory outside torch's allocator.
        cuda_graph_bytes: the CUDA graph memory estimate.

    Raises:
        InvalidConfigError: a negative byte count or a fraction outside (0, 1].
    """
    tot = _bytes("total", total)
    f = _fraction("gpu_memory_utilization", gpu_memory_utilization)
    used = (
        _bytes("non_kv_bytes", non_kv_bytes)
        + _bytes("weights_bytes", weights_bytes)
        + _bytes("peak_activation_bytes", peak_activation_bytes)
        + _bytes("non_torch_bytes", non_torch_bytes)
        + _bytes("cuda_graph_bytes", cuda_graph_bytes)
    )
    return math.ceil(tot * f) - used


def gpu_available_bytes(memory_bytes: int, mem_fraction: float, weights_bytes: int = 0) -> int:
    """A budget from a GPU's size alone: ``floor(memory_bytes * mem_fraction) - weights_bytes``.

    The estimate ``kvbudget plan --gpu NAME --mem-fraction F --weights-gib W``
    plans with: the device's memory (e.g. a :class:`kvbudget.models.GpuSpec`'s
    vendor-stated ``memory_bytes``) times SGLang's ``mem_fraction_static``, less
    the weights (target and draft) on this GPU. It is
    :func:`sglang_available_bytes` for an empty device (free before load =
    ``memory_bytes``, free after = ``memory_bytes - weights_bytes``) computed in
    one float product instead of SGLang's GiB doubles, so it can differ from a
    measured budget by a byte; it ignores the CUDA context, activations and
    graphs, which a measurement would see.

    Args:
        memory_bytes: the device's memory, bytes.
        mem_fraction: SGLang's ``--mem-fraction-static``, in (0, 1].
        weights_bytes: bytes of weights loaded on this GPU.

    Returns:
        The bytes available for KV, zero or negative when the weights do not fit
        in ``memory_bytes * mem_fraction``.

    Raises:
        InvalidConfigError: a negative byte count or a fraction outside (0, 1].
    """
    memory = _bytes("memory_bytes", memory_bytes)
    f = _fraction("mem_fraction", mem_fraction)
    weights = _bytes("weights_bytes", weights_bytes)
    return math.floor(memory * f) - weights


def fraction_of_free(free_bytes: int, fraction: float) -> int:
    """TensorRT-LLM and LMDeploy: ``A = floor(free_bytes * fraction)``.

    Both engines measure free device memory after loading weights and running a
    profiling forward pass, and give KV a fraction of it: TensorRT-LLM's
    ``free_gpu_memory_fraction`` (default 0.9) and LMDeploy's
    ``cache_max_entry_count`` (default 0.8). See :func:`trtllm_available_bytes`
    and :func:`lmdeploy_available_bytes` for the defaults.

    Raises:
        InvalidConfigError: negative bytes or a fraction outside (0, 1].
    """
    free = _bytes("free_bytes", free_bytes)
    f = _fraction("fraction", fraction)
    return math.floor(free * f)


def trtllm_available_bytes(
    free_bytes: int, free_gpu_memory_fraction: float = TRTLLM_FREE_GPU_MEMORY_FRACTION
) -> int:
    """TensorRT-LLM: ``floor(free_bytes * free_gpu_memory_fraction)``, default fraction 0.9."""
    return fraction_of_free(free_bytes, free_gpu_memory_fraction)


def lmdeploy_available_bytes(
    free_bytes: int, cache_max_entry_count: float = LMDEPLOY_CACHE_MAX_ENTRY_COUNT
) -> int:
    """LMDeploy: ``floor(free_bytes * cache_max_entry_count)``, default 0.8.

    LMDeploy reads ``cache_max_entry_count`` values above 1 as a block count,
    not a fraction; this function takes the fraction form only.
    """
    return fraction_of_free(free_bytes, cache_max_entry_count)


def min_across_ranks(per_rank_bytes: Sequence[int]) -> tuple[int, int]:
    """The budget every rank can honour: ``(min bytes, the rank that limits it)``.

    SGLang MIN-reduces free memory across ranks (and the token count under
    pipeline parallelism) so that all ranks plan the same pools. The lowest
    rank wins a tie.

    Raises:
        InvalidConfigError: no ranks given.
    """
    if len(per_rank_bytes) == 0:
        raise InvalidConfigError("per_rank_bytes: expected at least one rank")
    rank = min(range(len(per_rank_bytes)), key=lambda i: per_rank_bytes[i])
    return per_rank_bytes[rank], rank


def probe(device: int | str | None = None) -> tuple[int, int]:
    """``(free, total)`` bytes of a CUDA device, from ``torch.cuda.mem_get_info``.

    Args:
        device: a CUDA device index or ``"cuda:N"``; ``None`` is the current device.

    Raises:
        RuntimeError: torch sees no CUDA device.
        ModuleNotFoundError: torch is not installed (the message names the extra).
    """
    try:
        import torch
    except ModuleNotFoundError as e:
        from kvbudget import _missing_extra

        raise _missing_extra("kvbudget.budget.probe", e) from None

    if not torch.cuda.is_available():
        raise RuntimeError("kvbudget.budget.probe: no CUDA device is available to torch")
    free, total = torch.cuda.mem_get_info(device)
    return int(free), int(total)
