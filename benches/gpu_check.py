#!/usr/bin/env python3
"""Device check: exact plans allocate exactly what they plan on a real CUDA device.

Run on any CUDA machine (finishes well under 3 minutes):

    python benches/gpu_check.py --out gpu_check.json

For each of three real models (Gemma-3-27B + EAGLE3, gpt-oss-120b + EAGLE3 at
TP 1, Llama-3.1-8B + a Llama-3.2-1B standalone draft) it

1. plans at ``--fraction`` (0.9) of free device memory (``kvbudget.budget``);
2. allocates with both strategies and checks the tensor storage held
   (``KVPools.nbytes``) and the allocator's ``requested_bytes`` delta equal
   ``plan.total_bytes`` exactly, and reports ``torch.cuda.memory_allocated``'s
   delta with the caching allocator's rounding (512-byte blocks, and large
   blocks it does not split) separately;
3. times ``allocate()`` against one raw ``torch.empty``/``torch.zeros`` of
   ``total_bytes``, cold (after ``empty_cache``) and warm (cached), as ratios;
4. plans 10% over free memory and checks that allocating raises
   ``AllocationError`` and leaves ``memory_allocated`` at its baseline.

Results go to ``--out`` as JSON. Without CUDA it prints a message, writes
``{"cuda": false, ...}`` and exits 0. ``--dry-run`` runs the same logic on
meta tensors with a simulated device (free 130 GiB of 141 GiB) and a simulated
out-of-memory, to check the script itself without a GPU. Exit status: 0 when
every check passed (or there is no CUDA), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import kvbudget
from kvbudget import (
    DraftGeometry,
    ModelGeometry,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
)
from kvbudget.budget import fraction_of_free, probe

GIB = 1 << 30
BLOCK = 512  # the CUDA caching allocator rounds every block up to this
LARGE_SLACK = 2 << 20  # an unsplit large block can exceed its rounded size by < 2 MiB
DEADLINE_S = 150.0  # stop the optional timing repetitions past this


def _configurators() -> list[tuple[str, Any]]:
    """The three models, SGLang's conventions (window = HF sliding_window - 1)."""
    gemma_full = list(range(5, 62, 6))
    gemma = ModelGeometry(
        full_attention_layer_ids=gemma_full,
        swa_attention_layer_ids=[i for i in range(62) if i not in gemma_full],
        num_kv_heads=16,
        head_dim=128,
        sliding_window_size=1023,
    )
    gpt_oss = ModelGeometry(
        full_attention_layer_ids=list(range(1, 36, 2)),
        swa_attention_layer_ids=list(range(0, 36, 2)),
        num_kv_heads=8,
        head_dim=64,
        sliding_window_size=127,
    )
    llama = ModelGeometry(
        full_attention_layer_ids=list(range(32)),
        swa_attention_layer_ids=[],
        num_kv_heads=8,
        head_dim=128,
    )
    eagle3 = SpeculativeConfig(algorithm="eagle3", draft_num_layers=1)
    return [
        (
            "Gemma-3-27B + EAGLE3 (bf16, p64, TP1)",
            create_pool_configurator(gemma, ServingConfig(kv_cache_dtype="bf16", page_size=64), eagle3),
        ),
        (
            "gpt-oss-120b + EAGLE3 (bf16, p64, TP1)",
            create_pool_configurator(gpt_oss, ServingConfig(kv_cache_dtype="bf16", page_size=64), eagle3),
        ),
        (
            "Llama-3.1-8B + Llama-3.2-1B standalone (bf16, p16, TP1)",
            create_pool_configurator(
                llama,
                ServingConfig(kv_cache_dtype="bf16", page_size=16),
                SpeculativeConfig(algorithm="standalone", draft=DraftGeometry(16, 8, 64)),
            ),
        ),
    ]


def _ceil(n: int, m: int) -> int:
    return -(-n // m) * m


class Device:
    """The real CUDA device, or a simulated one on meta tensors (``--dry-run``)."""

    def __init__(self, dry_run: bool, torch: Any, fake_free: int, fake_total: int) -> None:
        self.dry = dry_run
        self.torch = torch
        self.name = "meta (simulated)" if dry_run else "cuda"
        self.fake_free = fake_free
        self.fake_total = fake_total
        self._live: list[tuple[Any, int]] = []  # (StorageWeakRef, bytes) made by the fake allocator
        self.requested_stat = True

    def sync(self) -> None:
        if not self.dry:
            self.torch.cuda.synchronize()

    def empty_cache(self) -> None:
        if not self.dry:
            self.torch.cuda.empty_cache()

    def mem_info(self) -> tuple[int, int]:
        if self.dry:
            return self.fake_free - self.live_bytes(), self.fake_total
        return probe()

    def live_bytes(self) -> int:
        self._live = [(r, n) for r, n in self._live if not r.expired()]
        return sum(n for _, n in self._live)

    def allocated(self) -> int:
        """``memory_allocated`` (real) or live simulated bytes."""
        if self.dry:
            return self.live_bytes()
        return int(self.torch.cuda.memory_allocated())

    def requested(self) -> int | None:
        """The allocator's unrounded ``requested_bytes`` (None where torch lacks the stat)."""
        if self.dry:
            return self.live_bytes()
        value = self.torch.cuda.memory_stats().get("requested_bytes.all.current")
        if value is None:
            self.requested_stat = False
            return None
        return int(value)

    def allocator(self) -> Callable[..., Any] | None:
        """None on CUDA (kvbudget's own); on meta, one that runs out at ``fake_free``."""
        if not self.dry:
            return None
        torch = self.torch
        from torch.multiprocessing.reductions import StorageWeakRef

        def fake(shape: tuple[int, ...], dtype: Any, device: Any, zero: bool) -> Any:
            n = 1
            for d in shape:
                n *= d
            n *= torch.empty((), dtype=dtype).element_size()
            if self.live_bytes() + n > self.fake_free:
                raise torch.OutOfMemoryError(f"simulated: {n} bytes do not fit")
            t = torch.empty(shape, dtype=dtype, device="meta")
            self._live.append((StorageWeakRef(t.untyped_storage()), n))
            return t

        return fake

    @property
    def target(self) -> str:
        return "meta" if self.dry else "cuda"


def _timed(dev: Device, fn: Callable[[], Any]) -> tuple[float, Any]:
    dev.sync()
    t0 = time.perf_counter()
    out = fn()
    dev.sync()
    return time.perf_counter() - t0, out


def _check_strategy(
    dev: Device, plan: Any, strategy: str, reps: int, started: float
) -> dict[str, Any]:
    torch = dev.torch
    # A slab per pool holds total_bytes (tensors + 256-byte alignment gaps);
    # one tensor per K/V holds exactly the tensor bytes.
    total = plan.total_bytes if strategy == "slab" else plan.tensor_bytes
    sizes = [p.nbytes for p in plan.pools] if strategy == "slab" else [t.nbytes for t in plan.tensors]
    alloc = dev.allocator()
    res: dict[str, Any] = {"allocations": len(sizes)}

    dev.empty_cache()
    dev.sync()
    base_alloc, base_req = dev.allocated(), dev.requested()
    t_cold, pools = _timed(
        dev, lambda: kvbudget.allocate(plan, dev.target, strategy, zero=True, _allocator=alloc)
    )
    alloc_delta = dev.allocated() - base_alloc
    req_now = dev.requested()
    req_delta = None if req_now is None or base_req is None else req_now - base_req
    res["storage_bytes"] = pools.nbytes
    res["tensor_bytes"] = sum(t.numel() * t.element_size() for rec in pools for t in rec.tensors().values())
    pools.release()
    del pools
    dev.sync()
    res["allocated_after_release"] = dev.allocated() - base_alloc

    rounded = sum(_ceil(n, BLOCK) for n in sizes)
    res.update(
        requested_delta=req_delta,
        allocated_delta=alloc_delta,
        expected_512_rounded=rounded,
        rounding_bytes=alloc_delta - total,
        unsplit_block_bytes=alloc_delta - rounded,
    )
    checks = {
        "storage_exact": res["storage_bytes"] == total and res["tensor_bytes"] == plan.tensor_bytes,
        "released": res["allocated_after_release"] == 0,
        "allocated_bounded": 0 <= alloc_delta - rounded < LARGE_SLACK * len(sizes) or dev.dry,
    }
    if req_delta is not None:
        checks["requested_exact"] = req_delta == total
    if dev.dry:
        checks["allocated_exact"] = alloc_delta == total
    res["checks"] = checks
    res["ok"] = all(checks.values())

    # Timing: allocate() against one raw allocation of total_bytes, cold and warm.
    def run(zero: bool) -> Any:
        return kvbudget.allocate(plan, dev.target, strategy, zero=zero, _allocator=alloc)

    def raw(zero: bool) -> Any:
        make = torch.zeros if zero else torch.empty
        if dev.dry:
            return make(total, dtype=torch.uint8, device="meta")
        return make(total, dtype=torch.uint8, device="cuda")

    timing: dict[str, Any] = {"allocate_cold_s": t_cold}
    dev.empty_cache()
    t_raw_cold, x = _timed(dev, lambda: raw(True))
    del x
    timing["raw_zeros_cold_s"] = t_raw_cold
    timing["ratio_cold_zeroed"] = t_cold / t_raw_cold if t_raw_cold > 0 else None
    for zero in (False, True):
        tag = "zeros" if zero else "empty"
        if time.perf_counter() - started > DEADLINE_S:
            timing[f"skipped_{tag}"] = "deadline"
            continue
        dev.empty_cache()
        a_times: list[float] = []
        for _ in range(reps + 1):  # the first warms the cache
            t, p = _timed(dev, lambda: run(zero))
            p.release()
            del p
            a_times.append(t)
        dev.empty_cache()
        r_times: list[float] = []
        for _ in range(reps + 1):
            t, x = _timed(dev, lambda: raw(zero))
            del x
            r_times.append(t)
        dev.empty_cache()
        a_med, r_med = statistics.median(a_times[1:]), statistics.median(r_times[1:])
        timing[f"allocate_warm_{tag}_s"] = a_med
        timing[f"raw_{tag}_warm_s"] = r_med
        timing[f"ratio_warm_{tag}"] = a_med / r_med if r_med > 0 else None
    res["timing"] = timing
    return res


def _check_failure(dev: Device, cfg: Any, free: int, strategy: str) -> dict[str, Any]:
    """A plan 10% over free memory must raise AllocationError and leave nothing allocated."""
    over = cfg.plan(free + free // 10)
    dev.empty_cache()
    dev.sync()
    base = dev.allocated()
    res: dict[str, Any] = {"strategy": strategy, "plan_total_bytes": over.total_bytes, "raised": False}
    try:
        pools = kvbudget.allocate(over, dev.target, strategy, zero=False, _allocator=dev.allocator())
    except kvbudget.AllocationError as err:
        dev.sync()
        res.update(
            raised=True,
            pool=err.pool,
            layer_id=err.layer_id,
            kind=err.kind,
            requested_bytes=err.requested_bytes,
            held_bytes=err.held_bytes,
            cause=type(err.__cause__).__name__,
            allocated_delta_while_error_alive=dev.allocated() - base,
        )
    else:
        pools.release()
        del pools
    dev.sync()
    res["allocated_delta_after"] = dev.allocated() - base
    dev.empty_cache()
    res["ok"] = (
        res["raised"]
        and res.get("allocated_delta_while_error_alive") == 0
        and res["allocated_delta_after"] == 0
    )
    return res


def check_model(dev: Device, name: str, cfg: Any, fraction: float, reps: int, started: float) -> dict[str, Any]:
    dev.empty_cache()
    free, total_mem = dev.mem_info()
    available = fraction_of_free(free, fraction)
    plan = cfg.plan(available)
    out: dict[str, Any] = {
        "model": name,
        "free_bytes": free,
        "device_total_bytes": total_mem,
        "available_bytes": available,
        "total_bytes": plan.total_bytes,
        "leftover_bytes": plan.leftover_bytes,
        "padding_bytes": plan.padding_bytes,
        "draft_bytes": plan.draft_bytes,
        "tokens": {p.name: p.tokens for p in plan.pools},
        "strategies": {},
    }
    for strategy in ("slab", "per_layer"):
        out["strategies"][strategy] = _check_strategy(dev, plan, strategy, reps, started)
    fails = [_check_failure(dev, cfg, free, s) for s in ("slab", "per_layer")]
    out["failure"] = {"ok": all(f["ok"] for f in fails), "raised": all(f["raised"] for f in fails), "runs": fails}
    out["ok"] = out["failure"]["ok"] and all(s["ok"] for s in out["strategies"].values())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu_check.json", help="where to write the JSON results")
    parser.add_argument("--fraction", type=float, default=0.9, help="fraction of free memory to plan")
    parser.add_argument("--reps", type=int, default=5, help="warm timing repetitions")
    parser.add_argument("--dry-run", action="store_true", help="meta tensors, simulated device")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out_path = Path(args.out)

    import torch

    report: dict[str, Any] = {
        "kvbudget": kvbudget.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "mode": "dry-run" if args.dry_run else "cuda",
        "fraction": args.fraction,
    }
    cuda = bool(torch.cuda.is_available())
    report["cuda"] = cuda
    if not cuda and not args.dry_run:
        print("gpu_check: no CUDA device available to torch; nothing to check (use --dry-run to test the script).")
        report.update(ok=True, skipped="no CUDA")
        out_path.write_text(json.dumps(report, indent=2))
        return 0
    if not args.dry_run:
        report["device_name"] = torch.cuda.get_device_name()
    dev = Device(args.dry_run, torch, fake_free=130 * GIB, fake_total=141 * GIB)

    models: list[dict[str, Any]] = []
    for name, cfg in _configurators():
        try:
            models.append(check_model(dev, name, cfg, args.fraction, args.reps, started))
        except Exception as exc:  # one model's failure must not lose the others' results
            models.append({"model": name, "ok": False, "error": repr(exc), "traceback": traceback.format_exc()})
            dev.empty_cache()
        out_path.write_text(json.dumps({**report, "models": models, "ok": False, "partial": True}, indent=2))
    report["models"] = models
    report["requested_bytes_stat"] = dev.requested_stat
    report["elapsed_s"] = time.perf_counter() - started
    report["ok"] = all(m["ok"] for m in models)
    out_path.write_text(json.dumps(report, indent=2))

    for m in models:
        if "error" in m:
            print(f"FAIL {m['model']}: {m['error']}")
            continue
        line = [f"{'ok  ' if m['ok'] else 'FAIL'} {m['model']}: total {m['total_bytes']:,} B of {m['available_bytes']:,}"]
        for s, r in m["strategies"].items():
            t = r["timing"]
            line.append(
                f"  {s}: storage {r['storage_bytes']:,} requested_delta {r['requested_delta']} "
                f"allocated_delta-total {r['rounding_bytes']:,} (512-rounding {r['expected_512_rounded'] - m['total_bytes']:,}) "
                f"ratio cold {t.get('ratio_cold_zeroed')} warm empty {t.get('ratio_warm_empty')} "
                f"warm zeros {t.get('ratio_warm_zeros')} checks {r['checks']}"
            )
        f = m["failure"]["runs"]
        line.append("  failure: " + "; ".join(
            f"{r['strategy']} raised={r['raised']} at {r.get('pool')}/{r.get('layer_id')} "
            f"held {r.get('held_bytes')} delta {r['allocated_delta_after']}" for r in f))
        print("\n".join(line))
    print(f"gpu_check: {'PASS' if report['ok'] else 'FAIL'} in {report['elapsed_s']:.1f}s -> {out_path}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
