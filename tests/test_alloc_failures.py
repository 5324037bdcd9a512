"""allocate's failure paths: release on error and interrupt, unknown devices, the cached layout,
and the GPU check's dry run (REFERENCE.md section 3)."""

from __future__ import annotations

import gc
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget import AllocationError, KVBudgetError  # noqa: E402
from kvbudget.alloc import LayerKV, Strategy, allocate  # noqa: E402

from alloc_cases import gemma3_27b, gemma3_six_layers, small_state_plan, small_vllm_plan  # noqa: E402

pytestmark = pytest.mark.torch

# --------------------------------------------------------------------------- failure path


class FailAt:
    """An allocator that fails at the n-th call (1-based) and tracks what it made."""

    def __init__(self, n: int, exc: type[Exception] = torch.OutOfMemoryError) -> None:
        self.n = n
        self.calls = 0
        self.exc = exc
        self.refs: list[StorageWeakRef] = []
        self.made_bytes = 0

    def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any, zero: bool) -> Any:
        self.calls += 1
        if self.calls == self.n:
            raise self.exc(f"injected failure at call {self.n}")
        t = torch.zeros(shape, dtype=dtype, device=device)
        self.refs.append(StorageWeakRef(t.untyped_storage()))
        self.made_bytes += t.untyped_storage().nbytes()
        return t


@pytest.mark.parametrize("strategy", ["slab", "per_layer"])
@pytest.mark.parametrize("exc", [torch.OutOfMemoryError, RuntimeError, ValueError])
def test_failure_part_way_releases_everything(strategy: str, exc: type[Exception]) -> None:
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    n_allocs = len(plan.pools) if strategy == "slab" else len(plan.tensors)
    for n in sorted({1, 2, n_allocs // 2, n_allocs}):
        fail = FailAt(n, exc)
        with pytest.raises(AllocationError) as info:
            allocate(plan, device="cpu", strategy=strategy, _allocator=fail)  # type: ignore[arg-type]
        err = info.value
        # Held while the exception (and its traceback frames) is alive, without gc.
        assert len(fail.refs) == n - 1
        assert all(r.expired() for r in fail.refs), "a tensor outlived the failed allocation"
        assert isinstance(err, MemoryError) and isinstance(err, KVBudgetError)
        assert err.code == "allocation_failed"
        assert isinstance(err.__cause__, exc)
        assert err.held_bytes == fail.made_bytes
        if strategy == "slab":
            pool = plan.pools[n - 1]
            assert (err.pool, err.layer_id, err.kind) == (pool.name, None, "slab")
            assert err.requested_bytes == pool.nbytes
            assert err.held_bytes == sum(p.nbytes for p in plan.pools[: n - 1])
        else:
            spec = plan.tensors[n - 1]
            assert (err.pool, err.layer_id, err.kind) == (spec.pool, spec.layer_id, spec.kind)
            assert err.requested_bytes == spec.nbytes
            assert err.held_bytes == sum(t.nbytes for t in plan.tensors[: n - 1])
            assert f"layer {spec.layer_id}" in str(err)
        assert repr(err.pool) in str(err) and str(err.requested_bytes) in str(err)
        del info, err
    gc.collect()


def test_failure_after_success_of_other_pools_keeps_nothing_via_views() -> None:
    """Slab views handed to records must not keep a slab alive after a later pool fails."""
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    fail = FailAt(3)  # full and swa slabs succeed, the draft slab fails
    with pytest.raises(AllocationError) as info:
        allocate(plan, device="cpu", strategy="slab", _allocator=fail)  # type: ignore[arg-type]
    assert info.value.pool == "draft"
    assert len(fail.refs) == 2 and all(r.expired() for r in fail.refs)


# --------------------------------------------------------------------------- gpu_check dry run


def _load_gpu_check() -> Any:
    path = Path(__file__).resolve().parent.parent / "benches" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("kvbudget_gpu_check", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_dry_run(tmp_path: Path) -> None:
    mod = _load_gpu_check()
    out = tmp_path / "gpu_check.json"
    rc = mod.main(["--dry-run", "--out", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0, report
    assert report["ok"] is True and report["mode"] == "dry-run"
    assert len(report["models"]) == 3
    for m in report["models"]:
        for s in ("slab", "per_layer"):
            r = m["strategies"][s]
            assert r["storage_bytes"] == m["total_bytes"] and r["ok"]
        assert m["failure"]["raised"] and m["failure"]["ok"]


def test_gpu_check_without_cuda_exits_zero(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present")
    mod = _load_gpu_check()
    out = tmp_path / "x.json"
    assert mod.main(["--out", str(out)]) == 0
    assert json.loads(out.read_text())["cuda"] is False


def test_layerkv_is_frozen() -> None:
    rec = LayerKV("full", 0, k=torch.zeros(1))
    with pytest.raises(AttributeError):
        rec.k = None  # type: ignore[misc]


class InterruptAt(FailAt):
    """FailAt raising KeyboardInterrupt (a BaseException, not an Exception)."""

    def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any, zero: bool) -> Any:
        if self.calls + 1 == self.n:
            self.calls += 1
            raise KeyboardInterrupt(f"interrupted at call {self.n}")
        return super().__call__(shape, dtype, device, zero)


@pytest.mark.parametrize("strategy", ["slab", "per_layer"])
def test_keyboard_interrupt_mid_allocation_releases_everything(strategy: str) -> None:
    """The interrupt leaves as it is (not wrapped), and no tensor outlives it, traceback kept."""
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    n = len(plan.pools) if strategy == "slab" else len(plan.tensors) // 2
    fail = InterruptAt(n)
    with pytest.raises(KeyboardInterrupt) as info:
        allocate(plan, device="cpu", strategy=strategy, _allocator=fail)  # type: ignore[arg-type]
    assert info.value.__traceback__ is not None  # the frames are still referenced...
    assert len(fail.refs) == n - 1 and all(r.expired() for r in fail.refs)  # ...but hold no tensor


@pytest.mark.parametrize("strategy", ["slab", "per_layer"])
@pytest.mark.parametrize("device", ["bogus", "cuda:99", "cpu:x"])
def test_unknown_device_is_an_allocation_error_naming_it(strategy: str, device: str) -> None:
    if device.startswith("cuda") and torch.cuda.device_count() > 99:
        pytest.skip("a machine with 100 GPUs")
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    with pytest.raises(AllocationError) as info:
        allocate(plan, device=device, strategy=strategy)
    err = info.value
    assert device in str(err) and err.held_bytes == 0
    first = plan.pools[0] if strategy == "slab" else plan.tensors[0]
    assert err.pool == (first.name if strategy == "slab" else first.pool)
    assert err.requested_bytes == first.nbytes


def test_layout_is_derived_once_per_plan_and_records_have_slots() -> None:
    from kvbudget import _alloc_layout

    plan = gemma3_27b(16, window=8).plan(48 << 20)
    assert _alloc_layout.layout_of(plan) is _alloc_layout.layout_of(plan)
    again = kvbudget.PoolPlan.from_json(plan.to_json())  # an equal plan, another object: its own walk
    assert _alloc_layout.layout_of(again) is not _alloc_layout.layout_of(plan)
    pools = allocate(plan, device="meta")
    rec = next(iter(pools))
    assert not hasattr(rec, "__dict__")
    with pytest.raises(AttributeError):
        del rec.k


class _InterruptAtLine:
    """A trace function raising KeyboardInterrupt at the ``n``-th line event inside kvbudget's
    allocation code (``_allocate.py``, ``alloc.py``, ``vllm/alloc.py``, ``_alloc_layout.py``): an
    interrupt at any point, not only at an allocator call."""

    FILES = ("_allocate.py", "alloc.py", "_alloc_layout.py")

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if Path(frame.f_code.co_filename).name not in self.FILES or "kvbudget" not in frame.f_code.co_filename:
            return None
        if event == "line":
            self.seen += 1
            if self.seen == self.n:
                raise KeyboardInterrupt(f"interrupted at line event {self.n}")
        return self


#: The plans interrupted, each with the strategy it is allocated with (``kvbudget.allocate``).
_INTERRUPTED: dict[str, tuple[Callable[[], Any], Strategy]] = {
    "slab": (lambda: gemma3_six_layers(16).plan(8 << 20), "slab"),
    "per_layer": (lambda: gemma3_six_layers(16).plan(8 << 20), "per_layer"),
    "state-slab": (small_state_plan, "slab"),
    "state-per_layer": (small_state_plan, "per_layer"),
    "vllm": (small_vllm_plan, "slab"),
}


def _interrupted(n: int, case: str) -> tuple[BaseException | None, FailAt, int]:
    """``kvbudget.allocate`` interrupted at its ``n``-th line event: (the exception, held; the
    allocator; events)."""
    make, strategy = _INTERRUPTED[case]
    plan = make()
    # Allocated once on meta first: the modules are imported and the layout derived and cached (a
    # line event inside the cache's `with lock:` exit is no point a signal can land on: CPython
    # runs signal handlers after calls and backward jumps only), so every run has the same events.
    kvbudget.allocate(plan, device="meta", strategy=strategy)
    made, trace = FailAt(0), _InterruptAtLine(n)
    sys.settrace(trace)
    try:
        pools = kvbudget.allocate(plan, device="cpu", strategy=strategy, zero=False, _allocator=made)
    except KeyboardInterrupt as e:
        return e, made, trace.seen
    finally:
        sys.settrace(None)
    del pools
    return None, made, trace.seen


@pytest.mark.parametrize("case", list(_INTERRUPTED))
def test_an_interrupt_at_any_line_leaves_no_tensor_alive(case: str) -> None:
    """Issue 26: wherever a KeyboardInterrupt lands inside ``kvbudget.allocate`` (every line
    event: the dispatch, the layer-record list, a state pool's record, ``VllmKV``'s construction),
    no tensor it made is alive while the exception is held, and the exception leaves as it is.
    The run without an interrupt counts the events."""
    _, made, total = _interrupted(0, case)
    assert total > 20 and made.refs
    alive = []
    for n in range(1, total + 1):
        exc, made, _ = _interrupted(n, case)
        assert exc is not None and str(exc) == f"interrupted at line event {n}"
        assert exc.__traceback__ is not None  # the frames are still referenced...
        if any(not r.expired() for r in made.refs):  # ...but hold no tensor
            alive.append(n)
        del exc
    assert not alive, f"tensors alive after an interrupt at line events {alive} of {total}"
