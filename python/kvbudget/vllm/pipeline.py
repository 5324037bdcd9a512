"""vLLM 0.33.0's pipeline split: which layers each pipeline stage holds."""

from __future__ import annotations

__all__ = ["pp_stage_layers"]


def pp_stage_layers(num_layers: int, pp: int) -> list[tuple[int, int]]:
    """vLLM's ``get_pp_indices`` for every stage: ``(start, end)`` layer ids, the
    remainder given to the stages before the last (first the one before it)."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:r]) for r in range(pp)]
    return [(s, s + n) for s, n in zip(starts, sizes)]
