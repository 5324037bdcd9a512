"""Type aliases shared across kvbudget's Python API."""

from __future__ import annotations

from typing import Literal

__all__ = ["Fit", "PoolName"]

#: How a plan's token counts are chosen: ``"exact"`` (the largest page-aligned
#: count whose tensors fit the budget) or ``"sglang"`` (SGLang's counts).
Fit = Literal["exact", "sglang"]

#: A plan's pools.
PoolName = Literal["full", "swa", "draft"]
