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


def judge_families(cases: Iterable[tuple[str, dict[str, Any], dict[str, Any]]], families: Iterable[str],
                   ours: Callable[[dict[str, Any], dict[str, Any]], Reading],
                   theirs: Callable[[dict[str, Any], dict[str, Any]], Reading],
                   tally: Callable[[str, dict[str, Any], list[dict[str, Any]], dict[str, int]], None] | None = None,
                   ) -> tuple[dict[str, dict[str, int]], list[str]]:  # fmt: skip
    """Each ``(family, config.json, settings)`` case read by kvbudget and by vLLM: both refuse, for
    the same kind of failure (the name before the first colon of vLLM's reason, found in
    kvbudget's), or both read the same layers. ``tally(family, config, vLLM's layers, counts)``
    adds a family's own counts of a planned case.

    Returns:
        Per family: configs compared, refused by both, layers compared; and the mismatches.
    """
    counts: dict[str, dict[str, int]] = {f: {"compared": 0, "refused": 0, "layers": 0} for f in families}
    mismatches: list[str] = []
    for i, (family, saved, settings) in enumerate(cases):
        a, b = ours(saved, settings), theirs(saved, settings)
        c = counts[family]
        c["compared"] += 1
        if isinstance(a, str) or isinstance(b, str):
            kind = str(b).removeprefix("refused: ").split(":")[0]
            if isinstance(a, str) != isinstance(b, str) or kind not in str(a):
                mismatches.append(f"case {i} ({family}, {settings}): kvbudget {str(a)[:300]} vs vLLM {str(b)[:300]}")
            c["refused"] += 1
            continue
        c["layers"] += len(b)
        if tally is not None:
            tally(family, saved, b, c)
        if a != b:
            diff = next((f"{x} vs {y}" for x, y in zip(a, b) if x != y), f"{len(a)} vs {len(b)} layers")
            mismatches.append(f"case {i} ({family}, {settings}): {diff}")
    return counts, mismatches


def assert_families_agree(label: str, counts: dict[str, dict[str, int]], mismatches: list[str]) -> None:
    """No mismatch, and each family planned on most of its configs and refused on some (so neither
    side's refusals pass unseen); prints the counts under ``label``."""
    print(f"\n{label}: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} configs differ:\n" + "\n".join(mismatches[:12])
    for family, c in counts.items():
        assert 0 < c["refused"] < c["compared"] * 3 // 5 and c["layers"] > 0, (family, c)
