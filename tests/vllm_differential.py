"""The vLLM-mode differential: seeded deployments planned by vLLM 0.33.0's own code
(tests/vllm_oracle) and by ``kvbudget.vllm``, every field of the result compared.

:func:`run` takes the name of a case module (one with ``deployment(seed) -> (layers,
available, engine)``: ``vllm_cases``, ``vllm_state_cases``) and splits the seeds over the
cores, each worker process loading its own oracle.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import vllm_oracle as vo

from kvbudget import vllm


class Ours:
    """``kvbudget.vllm`` behind the oracle's ``plan(layers, available, engine)`` interface."""

    @staticmethod
    def plan(layers: Sequence[dict[str, Any]], available: Any, engine: dict[str, Any] | None = None) -> dict[str, Any]:
        specs = [vllm.LayerSpec(**x) for x in layers]
        return vllm.plan_raw(specs, available, vllm.EngineConfig(**(engine or {})))


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """The keys whose values differ, each with both values."""
    theirs = json.loads(json.dumps(theirs))  # the oracle's tuples as the JSON lists ours are
    if theirs.get("error_type") == "StopIteration":  # vLLM crashes; kvbudget refuses, naming it
        refused = ours.get("error_type") == "Input" and "StopIteration" in ours.get("error", "")
        return [] if refused else [f"vLLM fails with StopIteration; kvbudget: {ours!r}"[:300]]
    keys = sorted(set(ours) | set(theirs))
    return [f"{k}: kvbudget {ours.get(k)!r} vs vLLM {theirs.get(k)!r}" for k in keys if ours.get(k) != theirs.get(k)]


def plan_both(oracle: vo.VllmOracle, layers: Sequence[vllm.LayerSpec], available: Any,
              engine: dict[str, Any]) -> dict[str, Any] | None:  # fmt: skip
    """A model's layers (kvbudget's reading) planned by vLLM's planner and by kvbudget, asserted
    equal; vLLM's result, or None for a pipeline stage without layers (vLLM divides by zero where
    kvbudget refuses, which this asserts)."""
    dicts = [{k: v for k, v in vars(x).items() if v is not None} for x in layers]
    ours = Ours.plan(dicts, available, engine)
    try:
        theirs: dict[str, Any] = oracle.plan(dicts, available, engine)
    except ZeroDivisionError:
        assert not ours["ok"] and "no KV-cache layers" in ours["error"], ours
        return None
    assert not compare(ours, theirs), compare(ours, theirs)[:3]
    return theirs


_ORACLE: vo.VllmOracle | None = None


def _chunk(job: tuple[str, range]) -> tuple[list[str], dict[str, int], float, float]:
    """Mismatches, outcome counts and seconds spent (vLLM's code, kvbudget) over the seeds."""
    global _ORACLE
    if _ORACLE is None:  # one oracle per worker process
        _ORACLE = vo.load()
    deployment = importlib.import_module(job[0]).deployment
    mismatches: list[str] = []
    outcomes: dict[str, int] = {}
    spent = [0.0, 0.0]
    for seed in job[1]:
        layers, available, engine = deployment(seed)
        t0 = time.perf_counter()
        theirs = _ORACLE.plan(layers, available, engine)
        t1 = time.perf_counter()
        ours = Ours.plan(layers, available, engine)
        spent[0] += t1 - t0
        spent[1] += time.perf_counter() - t1
        key = "ok" if theirs["ok"] else theirs["error_type"]
        outcomes[key] = outcomes.get(key, 0) + 1
        diff = compare(ours, theirs)
        if diff:
            mismatches.append(f"seed {seed}: " + "; ".join(d[:300] for d in diff[:4]))
    return mismatches, outcomes, spent[0], spent[1]


def run(cases: str, n: int, label: str) -> dict[str, int]:
    """Plans seeds ``0..n`` of module ``cases`` both ways; asserts no field differs and returns
    the outcome counts (``ok`` or vLLM's exception type)."""
    workers = max(1, min(os.cpu_count() or 1, 4))
    bounds = [n * i // workers for i in range(workers + 1)]
    jobs = [(cases, range(a, b)) for a, b in zip(bounds, bounds[1:])]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        results = list(pool.map(_chunk, jobs))
    mismatches = [m for r in results for m in r[0]]
    outcomes: dict[str, int] = {}
    for r in results:
        for k, v in r[1].items():
            outcomes[k] = outcomes.get(k, 0) + v
    t_vllm, t_ours = sum(r[2] for r in results), sum(r[3] for r in results)
    print(f"\n{label}: {n} deployments, outcomes {outcomes}, {len(mismatches)} mismatches "
          f"(vLLM's code {t_vllm:.1f} s, kvbudget {t_ours:.1f} s, over {workers} processes)")  # fmt: skip
    assert sum(outcomes.values()) == n
    assert not mismatches, f"{len(mismatches)} of {n} deployments differ:\n" + "\n".join(mismatches[:15])
    return outcomes


Reading = list[dict[str, Any]] | str  # a reader's records, or its refusal's text
Case = tuple[dict[str, Any], dict[str, Any]]  # a saved config and its engine


def compare_readings(cases: Sequence[Case], ours: Callable[[dict[str, Any], dict[str, Any]], Reading],
                     theirs: Callable[[dict[str, Any], dict[str, Any]], Reading],
                     tally: Callable[[dict[str, int], list[dict[str, Any]]], None],
                     known_gap: Callable[[Reading, Reading], str | None] = lambda a, b: None,
                     ) -> tuple[dict[str, int], list[str]]:  # fmt: skip
    """A model reader's seeded differential: each case read by kvbudget (``ours``) and by vLLM's own
    classes (``theirs``). A refusal must meet a refusal; two readings must be equal, record by record.
    ``tally(counts, records)`` counts what vLLM's reading holds; ``known_gap(ours, theirs)`` names a
    case kvbudget refuses for a documented planning gap (then counted under that name, not compared).
    Returns the counts (``compared``, ``refused`` and the tallies) and the mismatches."""
    counts: dict[str, int] = {"compared": 0, "refused": 0}
    mismatches: list[str] = []
    for i, (saved, e) in enumerate(cases):
        a, b = ours(saved, e), theirs(saved, e)
        counts["compared"] += 1
        where = f"case {i} ({saved.get('architectures', ['?'])[0]}, {e})"
        gap = known_gap(a, b)
        if gap is not None:
            counts[gap] = counts.get(gap, 0) + 1
            continue
        if isinstance(a, str) or isinstance(b, str):
            if isinstance(a, str) != isinstance(b, str):
                mismatches.append(f"{where}: kvbudget {str(a)[:300]} vs vLLM {str(b)[:300]}")
            counts["refused"] += 1
            continue
        tally(counts, b)
        if a != b:
            diff = next((f"{x} vs {y}" for x, y in zip(a, b) if x != y), f"{len(a)} vs {len(b)} records")
            mismatches.append(f"{where}: {diff}")
    return counts, mismatches

