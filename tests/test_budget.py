"""Available KV bytes under each engine's convention (REFERENCE.md section 4)."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvbudget import InvalidConfigError
from kvbudget.budget import (
    LMDEPLOY_CACHE_MAX_ENTRY_COUNT,
    TRTLLM_FREE_GPU_MEMORY_FRACTION,
    fraction_of_free,
    gpu_available_bytes,
    lmdeploy_available_bytes,
    min_across_ranks,
    probe,
    trtllm_available_bytes,
)
from kvbudget.sglang.budget import sglang_available_bytes
from kvbudget.vllm.budget import vllm_available_bytes

GIB = 1 << 30
FEW = settings(max_examples=min(1000, settings.default.max_examples))


def sglang_reference(free_before_load: int, free_now: int, f: float, reserve: int) -> int:
    """SGLang 0.5.23's arithmetic on one rank: GiB doubles (the multimodal reserve too),
    ``rest * (1 << 30)``, then floor (tests/test_sglang_budget.py runs SGLang's own code)."""
    total_gpu_memory = free_before_load / (1 << 30)
    available_gpu_memory = free_now / (1 << 30)
    rest_memory = available_gpu_memory - total_gpu_memory * (1 - f) - reserve / (1 << 30)
    return int(math.floor(rest_memory * (1 << 30)))


def test_sglang_worked_numbers() -> None:
    # 80 GiB free before load, 50 GiB after, 0.9 static: 50 - 8 = 42 GiB.
    assert sglang_available_bytes(80 * GIB, 50 * GIB, 0.9) == 42 * GIB
    assert sglang_available_bytes(80 * GIB, 50 * GIB, 0.9, multimodal_reserve=GIB) == 41 * GIB
    assert sglang_available_bytes(80 * GIB, 50 * GIB, 1.0) == 50 * GIB
    # Knobs that leave nothing for KV give a negative budget, not an error.
    assert sglang_available_bytes(80 * GIB, 10 * GIB, 0.8) == -6 * GIB


@FEW
@given(
    st.integers(0, 1 << 48),
    st.integers(0, 1 << 48),
    st.floats(min_value=1e-6, max_value=1.0),
    st.integers(0, 1 << 40),
)
def test_sglang_matches_its_float_arithmetic(before: int, now: int, f: float, reserve: int) -> None:
    got = sglang_available_bytes(before, now, f, reserve)
    assert isinstance(got, int)
    assert got == sglang_reference(before, now, f, reserve)
    # And lies within a few ulps of the exact rational answer.
    exact = now - before * (1 - f) - reserve
    assert abs(got - exact) <= 1 + 4 * sys.float_info.epsilon * (before + now)


def test_vllm_components_add() -> None:
    total = 80 * GIB
    assert vllm_available_bytes(total, 0.9, 20 * GIB) == 52 * GIB
    split = vllm_available_bytes(
        total,
        0.9,
        weights_bytes=16 * GIB,
        peak_activation_bytes=2 * GIB,
        non_torch_bytes=GIB,
        cuda_graph_bytes=GIB,
    )
    assert split == 52 * GIB
    assert vllm_available_bytes(total, 0.9, 10 * GIB, weights_bytes=10 * GIB) == 52 * GIB
    assert vllm_available_bytes(1001, 0.5) == 501  # rounded up, as vLLM's request_memory does


@FEW
@given(st.integers(0, 1 << 50), st.floats(min_value=1e-9, max_value=1.0))
def test_fraction_of_free_is_floor_and_bounded(free: int, f: float) -> None:
    a = fraction_of_free(free, f)
    assert isinstance(a, int)
    assert a == math.floor(free * f)
    assert 0 <= a <= free


def test_gpu_available_bytes_worked_numbers() -> None:
    # An H100's 80 GiB at 0.9 with 16 GiB of weights: 72 - 16 = 56 GiB.
    assert gpu_available_bytes(80 * GIB, 0.9, 16 * GIB) == 56 * GIB
    assert gpu_available_bytes(80 * GIB, 0.9) == 72 * GIB
    assert gpu_available_bytes(1001, 0.5) == 500  # floored
    # Weights that do not fit leave a negative budget, not an error.
    assert gpu_available_bytes(48 * 10**9, 0.9, 60 * GIB) == 43_200_000_000 - 60 * GIB
    from kvbudget.models import get_gpu

    h100 = get_gpu("h100").memory_bytes
    assert gpu_available_bytes(h100, 0.9, 16 * GIB) == int(h100 * 0.9) - 16 * GIB


@FEW
@given(st.integers(0, 1 << 44), st.floats(min_value=1e-6, max_value=1.0), st.integers(0, 1 << 44))
def test_gpu_available_bytes_is_sglang_on_an_empty_device(memory: int, f: float, weights: int) -> None:
    got = gpu_available_bytes(memory, f, weights)
    assert got == math.floor(memory * f) - weights
    if weights <= memory:  # free before load = memory, free after = memory - weights
        assert abs(got - sglang_available_bytes(memory, memory - weights, f)) <= 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((-1, 0.9), "memory_bytes"),
        ((GIB, 0.9, -1), "weights_bytes"),
        ((GIB, 1.5), "mem_fraction"),
        ((GIB, 0.0), "mem_fraction"),
        ((1.5, 0.9), "memory_bytes"),
    ],
)
def test_gpu_available_bytes_rejects_bad_inputs(args: tuple[Any, ...], needle: str) -> None:
    with pytest.raises(InvalidConfigError, match=needle):
        gpu_available_bytes(*args)


def test_engine_defaults() -> None:
    assert TRTLLM_FREE_GPU_MEMORY_FRACTION == 0.9
    assert LMDEPLOY_CACHE_MAX_ENTRY_COUNT == 0.8
    assert trtllm_available_bytes(100 * GIB) == 90 * GIB
    assert lmdeploy_available_bytes(100 * GIB) == 80 * GIB
    assert trtllm_available_bytes(100 * GIB, 0.5) == 50 * GIB
    assert lmdeploy_available_bytes(10, 0.25) == 2


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.0000001, 2, float("nan"), float("inf"), True, "0.9", None])
def test_fractions_outside_unit_interval_are_rejected(fraction: Any) -> None:
    with pytest.raises(InvalidConfigError, match="fraction|utilization|count|static"):
        fraction_of_free(GIB, fraction)
    with pytest.raises(InvalidConfigError):
        sglang_available_bytes(GIB, GIB, fraction)
    with pytest.raises(InvalidConfigError):
        vllm_available_bytes(GIB, fraction)
    with pytest.raises(InvalidConfigError):
        lmdeploy_available_bytes(GIB, fraction)


@pytest.mark.parametrize("bad", [-1, 1.5, "1", None, True])
def test_bad_byte_counts_are_rejected(bad: Any) -> None:
    with pytest.raises(InvalidConfigError):
        fraction_of_free(bad, 0.5)
    with pytest.raises(InvalidConfigError):
        sglang_available_bytes(bad, GIB, 0.9)
    with pytest.raises(InvalidConfigError):
        sglang_available_bytes(GIB, bad, 0.9)
    with pytest.raises(InvalidConfigError):
        sglang_available_bytes(GIB, GIB, 0.9, multimodal_reserve=bad)
    with pytest.raises(InvalidConfigError):
        vllm_available_bytes(bad, 0.9)
    with pytest.raises(InvalidConfigError):
        vllm_available_bytes(GIB, 0.9, bad)
    with pytest.raises(InvalidConfigError):
        vllm_available_bytes(GIB, 0.9, cuda_graph_bytes=bad)


def test_invalid_config_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        fraction_of_free(-5, 0.5)


def test_min_across_ranks_names_the_limiting_rank() -> None:
    assert min_across_ranks([5, 3, 7, 3]) == (3, 1)
    assert min_across_ranks([9]) == (9, 0)
    with pytest.raises(InvalidConfigError):
        min_across_ranks([])


def test_probe_reads_mem_get_info(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    seen: list[Any] = []

    def fake(device: Any = None) -> tuple[int, int]:
        seen.append(device)
        return (7 * GIB, 8 * GIB)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", fake)
    assert probe() == (7 * GIB, 8 * GIB)
    assert probe(1) == (7 * GIB, 8 * GIB)
    assert seen == [None, 1]


def test_probe_without_cuda_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA"):
        probe()
