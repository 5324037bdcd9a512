"""The judge of the vLLM model-reading differentials of multimodal wrappers: each seeded config
loaded by its config class, read by kvbudget and built by vLLM's own classes (``tests/vllm_oracle``),
the two layer lists compared (``tests/test_vllm_bare_text_models.py``, ``test_vllm_thinkers.py``,
``test_vllm_merged_text_configs.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Reading = list[dict[str, Any]] | str  # the layers, or "refused: <reason>"


def judge(cases: Iterable[tuple[str, dict[str, Any], dict[str, Any]]], load: Callable[[dict[str, Any]], Any],
          ours: Callable[[dict[str, Any], dict[str, Any]], Reading], theirs: Callable[[Any, dict[str, Any]], Reading],
          unchecked: Callable[[str, Reading], bool] = lambda arch, ours: False,
          ) -> tuple[dict[str, int], dict[str, int], list[str]]:  # fmt: skip
    """Each ``(architecture, config.json, engine)`` case loaded (``load``; a config its class refuses is
    "unloadable"), skipped where TP does not divide the text model's heads (vLLM's
    ``QKVParallelLinear`` asserts it; held in ``test_vllm_models``) or where kvbudget's refusal is one
    ``unchecked`` names, else judged: both refuse, or both read the same layers.

    Returns:
        The counts, the planned cases per architecture, the mismatches.
    """
    counts = {"unloadable": 0, "compared": 0, "refused": 0, "planned": 0, "layers": 0}
    planned_by: dict[str, int] = {}
    mismatches: list[str] = []
    for i, (arch, saved, engine) in enumerate(cases):
        try:
            loaded = load(saved)
        except Exception:  # noqa: BLE001 - the config class refuses the seeded text config
            counts["unloadable"] += 1
            continue
        counts["compared"] += 1
        if loaded.get_text_config().num_attention_heads % engine["tp"]:
            continue
        a, b = ours(saved, engine), theirs(loaded, engine)
        if isinstance(a, str) and unchecked(arch, a):
            counts["unchecked"] = counts.get("unchecked", 0) + 1
            continue
        if isinstance(a, str) or isinstance(b, str):
            if isinstance(a, str) != isinstance(b, str):
                mismatches.append(f"case {i} ({arch}, {engine}): kvbudget {str(a)[:200]} vs vLLM {str(b)[:200]}")
            counts["refused"] += 1
            continue
        counts["planned"] += 1
        counts["layers"] += len(b)
        planned_by[arch] = planned_by.get(arch, 0) + 1
        if a != b:
            diff = next((f"{x} vs {y}" for x, y in zip(a, b) if x != y), f"{len(a)} vs {len(b)} layers")
            mismatches.append(f"case {i} ({arch}, {engine}): {diff}")
    return counts, planned_by, mismatches
