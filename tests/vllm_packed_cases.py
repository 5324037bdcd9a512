"""Block-outer deployments for the vLLM differential (grouping case 3, block-outer packing):
the draws of ``vllm_cases`` (even seeds) and ``vllm_state_cases`` (odd seeds), from seeds of
their own, under a block-outer layout (``BLHNC``, ``BLNHC`` or ``BHLNC``, as vLLM resolves where
a backend declares only those: QSA's state caches, the kpool tail, DeepSeek-V4's indexer)."""

from __future__ import annotations

import random

import vllm_cases
import vllm_state_cases
from vllm_cases import Deployment

#: Where the seeds start in the base modules (clear of the seeds their own runs draw).
OFFSET = 1_000_000


def deployment(seed: int) -> Deployment:
    """The block-outer deployment of ``seed``."""
    base = vllm_state_cases if seed % 2 else vllm_cases
    layers, available, engine = base.deployment(OFFSET + seed // 2)
    engine["kv_cache_layout"] = random.Random(seed).choice(("BLHNC", "BLNHC", "BHLNC"))
    return layers, available, engine
