"""Helpers shared by the CLI tests: run the command line, a Gemma-3-27B + EAGLE3 configurator
(REFERENCE section 5, example 1: :data:`REF1`), the embedded default's configurator and budget."""

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

#: REFERENCE section 5, example 1 on the command line (the embedded default before issue 23).
REF1 = ("gemma-3-27b", "--draft", "eagle3:1", "--available", "40GiB")
#: The same deployment as vLLM 0.33.0 starts it: an EAGLE (1) head. vLLM refuses an EAGLE3 head that
#: reads aux hidden states on Gemma 3 (its class is not ``SupportsEagle3``); the plan is the same.
REF1_VLLM = ("gemma-3-27b", "--draft", "eagle:1", "--available", "40GiB")
#: The embedded default's SGLang budget: the H200 preset x mem-fraction 0.9 - 60.8 GiB of weights.
DEFAULT_A = int(141e9 * 0.9) - int(60.8 * GIB)  # 61,616,497,101 bytes


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


def default_cfg(page_size: int = 1) -> kvbudget.PoolConfiguratorBase:
    """The embedded default's configurator: gpt-oss-120b with its EAGLE3 draft preset, SGLang's
    3 steps, top-k 1 and 4 draft tokens, bf16, TP 1."""
    spec = SpeculativeConfig(algorithm="eagle3", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4,
                             draft=get_preset("gpt-oss-120b-eagle3").draft_geometry())  # fmt: skip
    serving = ServingConfig(kv_cache_dtype="bf16", page_size=page_size)
    return create_pool_configurator(get_preset("gpt-oss-120b").model_geometry(), serving, spec)
