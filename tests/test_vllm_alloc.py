"""``kvbudget.allocate`` on a vLLM plan, held to vLLM 0.33.0's own allocation.

* over seeded random deployments (tests/vllm_cases.py, and with state layers
  tests/vllm_state_cases.py: a state layer's view is its packed int8 page), every worker's views
  equal, layer by layer (name order, shape, strides, storage offset, dtype), the
  ones vLLM's worker makes with its real ``allocate_kv_cache`` /
  ``create_kv_cache_views`` (tests/vllm_oracle), on the meta device;
* on CPU the buffer is one zeroed allocation of ``allocated_bytes`` and a write
  through a layer's view lands at that layer's planned bytes;
* failures: an allocator that fails, a view torch refuses, a worker outside the
  plan, a plan whose views leave the buffer, ``strategy="per_layer"``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest
import torch
import vllm_cases
import vllm_oracle as vo
import vllm_state_cases

import kvbudget
from kvbudget import vllm
from kvbudget.vllm.alloc import VllmKV

N = int(os.environ.get("KVBUDGET_VLLM_ALLOC_CASES", "300"))


@pytest.fixture(scope="module")
def oracle() -> vo.VllmOracle:
    return vo.load()


def _specs(layers: list[dict[str, Any]]) -> list[vllm.LayerSpec]:
    return [vllm.LayerSpec(**x) for x in layers]


def _view(t: torch.Tensor) -> tuple[Any, ...]:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.dtype


@pytest.mark.parametrize(("cases", "n"), [(vllm_cases, N), (vllm_state_cases, N // 3)], ids=["attention", "state"])
def test_views_equal_vllms_allocate_kv_cache(oracle: vo.VllmOracle, cases: Any, n: int) -> None:
    compared = workers = 0
    for seed in range(n * 3):
        if compared >= n:
            break
        layers, available, engine = cases.deployment(seed)
        try:
            p = vllm.plan(_specs(layers), available, vllm.EngineConfig(**engine))
        except kvbudget.KVBudgetError:
            continue
        theirs = oracle.allocate(layers, available, engine)
        assert len(theirs) == len(p.allocated_bytes)
        for w, views in enumerate(theirs):
            ours = kvbudget.allocate(p, "meta", worker=w)
            assert isinstance(ours, VllmKV)
            assert list(ours) == list(views), f"seed {seed} worker {w}: layer order"
            for name, t in views.items():
                assert _view(ours[name]) == _view(t), f"seed {seed} worker {w} {name}"
            # vLLM's one buffer is every view's base, of the plan's size.
            sizes = {t.untyped_storage().nbytes() for t in views.values()}
            assert sizes == {ours.buffer.untyped_storage().nbytes()} == {p.allocated_bytes[w]}
            workers += 1
        compared += 1
    print(f"\nvLLM allocation: {compared} deployments, {workers} workers, every view equal")
    assert compared == n


def _small() -> vllm.VllmPlan:
    layers = [vllm.LayerSpec(f"l{i}", "full" if i % 2 else "sliding", num_kv_heads=2, head_size=8,
                             sliding_window=32) for i in range(4)]  # fmt: skip
    layers.append(vllm.LayerSpec("drafter", "full", num_kv_heads=1, head_size=16, is_draft=True))
    return vllm.plan(layers, 1 << 20, vllm.EngineConfig(max_model_len=256))


def test_cpu_buffer_is_one_zeroed_allocation_and_views_alias_it() -> None:
    p = _small()
    kv = kvbudget.allocate(p, "cpu")
    assert kv.nbytes == p.allocated_bytes[0] == kv.buffer.numel()
    assert int(kv.buffer.count_nonzero()) == 0 and kv.buffer.dtype == torch.int8
    for t in p.tensors[0]:
        for i, name in enumerate(t.layers):
            v = kv[name]
            assert str(v.dtype) == f"torch.{t.dtype}" and v.untyped_storage().data_ptr() == kv.buffer.data_ptr()
            h = v.shape[1] - 1
            v[3, h, 2, 0] = 1.0  # block 3, the last head, token 2, first element
            at = t.offset + i * t.layer_stride + 3 * t.strides[0] + h * t.strides[1] + 2 * t.strides[2]
            assert int(kv.buffer[at : at + v.element_size()].count_nonzero()) > 0
            v.zero_()
    assert int(kv.buffer.count_nonzero()) == 0
    kv.release()
    assert kv.nbytes == 0 and len(kv) == 0
    with pytest.raises(RuntimeError):
        kv.buffer  # noqa: B018


def test_an_allocator_failure_is_an_allocation_error_with_nothing_held() -> None:
    def failing(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, zero: bool) -> torch.Tensor:
        raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    p = _small()
    with pytest.raises(kvbudget.AllocationError) as info:
        kvbudget.allocate(p, "cpu", _allocator=failing)
    e = info.value
    assert (e.pool, e.kind, e.requested_bytes, e.held_bytes) == ("vllm", "buffer", p.allocated_bytes[0], 0)
    with pytest.raises(kvbudget.AllocationError):
        kvbudget.allocate(p, "cuda:9" if not torch.cuda.is_available() else "bogus")


def test_a_view_torch_refuses_releases_the_buffer() -> None:
    p = _small()
    t0 = p.tensors[0][0]
    odd = dataclasses.replace(t0, strides=(t0.strides[0], t0.strides[1], t0.strides[2] - 1, 1))  # not bf16-aligned
    bad = dataclasses.replace(p, tensors=((odd, *p.tensors[0][1:]),))
    made: list[torch.Tensor] = []

    def keep(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, zero: bool) -> torch.Tensor:
        made.append(torch.zeros(shape, dtype=dtype, device=device))
        return made[-1]

    import sys

    with pytest.raises(kvbudget.AllocationError) as info:
        kvbudget.allocate(bad, "cpu", _allocator=keep)
    assert info.value.kind == "view" and info.value.held_bytes == p.allocated_bytes[0]
    refs = sys.getrefcount(made[0])  # outside the assert: pytest's rewriting keeps temporaries
    assert refs == 2, "only `made` and getrefcount's argument may hold the buffer"


def test_plans_that_do_not_fit_their_buffer_and_bad_arguments_are_refused() -> None:
    p = _small()
    t0 = p.tensors[0][0]
    beyond = dataclasses.replace(p, tensors=((dataclasses.replace(t0, offset=t0.size), *p.tensors[0][1:]),))
    with pytest.raises(kvbudget.InvalidConfigError, match="reach byte"):
        kvbudget.allocate(beyond, "meta")
    with pytest.raises(kvbudget.InvalidConfigError, match="worker"):
        kvbudget.allocate(p, "meta", worker=1)
    with pytest.raises(kvbudget.InvalidConfigError, match="slab"):
        kvbudget.allocate(p, "meta", strategy="per_layer")
    with pytest.raises(TypeError):
        kvbudget.allocate(object(), "meta")  # type: ignore[call-overload]
