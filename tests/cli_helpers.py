"""Helpers shared by the CLI tests: run the command line, a Gemma-3-27B + EAGLE3 configurator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import kvbudget
from kvbudget import ServingConfig, SpeculativeConfig, create_pool_configurator
from kvbudget.models import get_preset

GIB = 1 << 30
A40 = 40 * GIB  # REFERENCE section 5: 42,949,672,960 bytes

ENV = {**os.environ, "COLUMNS": "160", "NO_COLOR": "1"}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kvbudget.cli", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=120,
    )


def gemma_eagle3_cfg(page_size: int = 1, **serving: object) -> kvbudget.PoolConfiguratorBase:
    serving_cfg = ServingConfig(kv_cache_dtype="bf16", page_size=page_size, **serving)  # type: ignore[arg-type]
    spec = SpeculativeConfig(algorithm="eagle3", draft_num_layers=1)
    return create_pool_configurator(get_preset("gemma-3-27b").model_geometry(), serving_cfg, spec)
