"""One vLLM 0.33.0 plan through ``kvbudget.vllm`` against vLLM's own planning code, one run.

The deployment is VLLM.md's case (a) with EAGLE3: 62 layers (10 full + 52
window-1024, 16x128 bf16) plus one full-attention drafter layer, 40 GiB, the
default engine. ``kvbudget.vllm.plan`` (Python: the typed inputs, the JSON
bridge, the Rust planner, the typed result) is timed against the same
computation through vLLM's released code (``tests/vllm_oracle``: vLLM's
``get_global_kv_cache_groups``, ``get_kv_cache_configs``,
``generate_scheduler_kv_cache_config`` and ``update_kv_cache_capacity`` on
vLLM's own spec classes), both in this process, best of a few repeats. The
two plans are checked equal first. ``kvbudget.vllm.plan_many`` (one model, 100,000
budgets; then the same with three runs of ``max_model_len``) is timed per row, its first
rows checked against ``plan`` first. Run ``python benches/bench_vllm.py``; the
ratio is the figure (wall times vary on a shared machine, the ratio less).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import vllm_oracle  # noqa: E402

from kvbudget import vllm  # noqa: E402


def _layers() -> list[dict[str, Any]]:
    layers: list[dict[str, Any]] = []
    for i in range(62):
        layer: dict[str, Any] = {"name": f"model.layers.{i}.self_attn.attn", "num_kv_heads": 16, "head_size": 128}
        if i % 6 == 5:
            layer["kind"] = "full"
        else:
            layer.update(kind="sliding", sliding_window=1024)
        layers.append(layer)
    layers.append({"name": "drafter.layers.0.self_attn.attn", "kind": "full", "num_kv_heads": 16,
                   "head_size": 128, "is_draft": True})  # fmt: skip
    return layers


def _best(f: Callable[[], Any], repeats: int, inner: int) -> float:
    """Seconds per call, the best of ``repeats`` runs of ``inner`` calls."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            f()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    raw = _layers()
    engine = {"speculative_method": "eagle3", "num_speculative_tokens": 3}
    budget = 40 << 30
    oracle = vllm_oracle.load()
    specs = [vllm.LayerSpec(**x) for x in raw]
    config = vllm.EngineConfig(**engine)
    theirs = json.loads(json.dumps(oracle.plan(raw, budget, engine)))  # its tuples as JSON lists
    ours = vllm.plan_raw(specs, budget, config)
    if ours != theirs:
        print("the plans differ:", {k for k in ours if ours[k] != theirs.get(k)})
        return 1
    p = vllm.plan(specs, budget, config)
    model = vllm.layers(specs)  # converted once, as a re-planning caller keeps it
    if vllm.plan(model, budget, config) != p:
        print("the plan of the converted layers differs")
        return 1
    t_vllm = _best(lambda: oracle.plan(raw, budget, engine), args.repeats, 5)
    t_model = _best(lambda: vllm.plan(model, budget, config), args.repeats, 2000)
    t_specs = _best(lambda: vllm.plan(specs, budget, config), args.repeats, 200)
    t_typed = _best(lambda: vllm.plan([vllm.LayerSpec(**x) for x in raw], budget, vllm.EngineConfig(**engine)),
                    args.repeats, 200)  # fmt: skip
    t_read = _best(lambda: vllm.plan(model, budget, config).groups, args.repeats, 200)
    print(f"vLLM 0.33.0 plan, 62 layers + EAGLE3 drafter, 40 GiB: {p.num_blocks} blocks, "
          f"{len(p.groups)} groups, log N {p.kv_cache_size_tokens}")  # fmt: skip
    print(f"  vLLM's own code (tests/vllm_oracle):               {t_vllm * 1e6:9.1f} us/plan")
    print(f"  kvbudget.vllm.plan, layers converted once:         {t_model * 1e6:9.1f} us/plan  ({t_vllm / t_model:.1f}x)")
    print(f"    the same, then its records read (.groups):       {t_read * 1e6:9.1f} us/plan  ({t_vllm / t_read:.1f}x)")
    print(f"  kvbudget.vllm.plan, LayerSpec list each call:      {t_specs * 1e6:9.1f} us/plan  ({t_vllm / t_specs:.1f}x)")
    print(f"  kvbudget.vllm.plan, LayerSpecs built each call:    {t_typed * 1e6:9.1f} us/plan  ({t_vllm / t_typed:.1f}x)")
    import numpy as np

    rows = 100_000
    budgets = np.random.default_rng(0).integers(20 << 30, 80 << 30, rows)
    lengths = np.repeat(np.array([8192, 32768, 131072], dtype=np.int64), -(-rows // 3))[:rows]
    batch = vllm.plan_many(model, budgets[:50], config)
    if [int(x) for x in batch.num_blocks] != [vllm.plan(model, int(b), config).num_blocks for b in budgets[:50]]:
        print("the batch rows differ from plan()")
        return 1
    t_batch = _best(lambda: vllm.plan_many(model, budgets, config), args.repeats, 1) / rows
    t_runs = _best(lambda: vllm.plan_many(model, budgets, config, max_model_len=lengths), args.repeats, 1) / rows
    print(f"  kvbudget.vllm.plan_many, {rows:,} budgets:            {t_batch * 1e6:9.3f} us/row   ({t_vllm / t_batch:,.0f}x)")
    print(f"    the same, max_model_len in 3 runs:                {t_runs * 1e6:9.3f} us/row   ({t_vllm / t_runs:,.0f}x)")
    return 0


def test_bench_vllm_smoke() -> None:
    """Under pytest: the two plans agree and the benchmark runs (one repeat; no timing assertion)."""
    assert main(["--repeats", "1"]) == 0


if __name__ == "__main__":
    sys.exit(main())
