"""The ``kvbudget`` command line."""

from __future__ import annotations

import sys

from kvbudget import ModelGeometry, ServingConfig, SpeculativeConfig, create_pool_configurator

GIB = 1 << 30


def main(argv: list[str] | None = None) -> int:
    """Plans REFERENCE example 2 (gpt-oss-120b-like, TP 4, fp8, EAGLE3, 30 GiB) and prints it."""
    _ = sys.argv[1:] if argv is None else argv
    model = ModelGeometry(
        full_attention_layer_ids=list(range(1, 36, 2)),
        swa_attention_layer_ids=list(range(0, 36, 2)),
        num_kv_heads=8,
        head_dim=64,
        sliding_window_size=127,
    )
    serving = ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64, tp_size=4)
    spec = SpeculativeConfig(algorithm="eagle3", draft_num_layers=1)
    cfg = create_pool_configurator(model, serving, spec)
    available = 30 * GIB
    for fit in ("sglang", "exact"):
        plan = cfg.plan(available, fit=fit)
        print(f"{type(cfg).__name__} fit={fit}: {plan!r}")
        for pool in plan.pools:
            print(f"  {pool.name:5s} tokens={pool.tokens:>10,d} layers={pool.num_layers:>3d} bytes={pool.nbytes:>15,d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
