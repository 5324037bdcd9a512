"""Where the KV budget ``A`` comes from (REFERENCE.md section 4): the engine-neutral formulas.

SGLang's and vLLM's formulas live with their engines
(:mod:`kvbudget.sglang.budget`, :mod:`kvbudget.vllm.budget`).
Each function turns an engine's memory measurements and knobs into the bytes
available for KV on one rank, as an integer (floored), to pass to
``configurator.plan(A)``. A result can be zero or negative when the knobs
leave nothing for KV; the planner then raises ``NotEnoughMemoryError``.

Defaults that are the engines' own: TensorRT-LLM ``KvCacheConfig.free_gpu_memory_fraction``
0.9 (TensorRT-LLM docs, "How to Change KV Cache Behavior" and the
``KvCacheConfig`` reference); LMDeploy ``cache_max_entry_count`` 0.8
(``TurbomindEngineConfig``/``PytorchEngineConfig`` in ``lmdeploy/messages.py``).

Only :func:`probe` touches torch, and imports it lazily.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Union

from kvbudget._moved import moved
from kvbudget.errors import InvalidConfigError

__all__ = [
    "PerRank",
    "LMDEPLOY_CACHE_MAX_ENTRY_COUNT",
    "TRTLLM_FREE_GPU_MEMORY_FRACTION",
    "fraction_of_free",
    "gpu_available_bytes",
    "lmdeploy_available_bytes",
    "min_across_ranks",
    "probe",
    "trtllm_available_bytes",
]
#: Engine formulas that moved to their engine's package (the old names work until kvbudget 0.3).
__getattr__ = moved(__name__, {"sglang_available_bytes": "kvbudget.sglang.budget",
                               "sglang_free_gib": "kvbudget.sglang.budget",
                               "vllm_available_bytes": "kvbudget.vllm.budget"})  # fmt: skip

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
        from kvbudget.errors import _missing_extra

        raise _missing_extra("kvbudget.budget.probe", e) from None

    if not torch.cuda.is_available():
        raise RuntimeError("kvbudget.budget.probe: no CUDA device is available to torch")
    free, total = torch.cuda.mem_get_info(device)
    return int(free), int(total)
