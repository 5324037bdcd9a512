"""vLLM 0.33.0's KV budget from a worker's memory (REFERENCE section 4, VLLM.md)."""

from __future__ import annotations

import math

from kvbudget.budget import _bytes, _fraction

__all__ = ["vllm_available_bytes"]


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
