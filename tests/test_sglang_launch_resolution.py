"""Generated launch lines through SGLang 0.5.23's own launch resolution and configurator, and
through ``from_server_args`` and ``install()`` (issue 22).

Each line (:mod:`launch_cases`: the presets, a hybrid-state model, EAGLE3 /
EAGLE / NEXTN / STANDALONE drafts, PD modes, request caps, page sizes, backends,
and lines SGLang refuses) is parsed by SGLang's parser and resolved by SGLang's
hooks, executed from the wheel on a Hopper stand-in (:mod:`sglang_oracle.resolve`);
the model folder by SGLang's ``ModelConfig`` (:mod:`sglang_oracle.model`), in
draft mode for the draft (:mod:`sglang_oracle.draft`).
kvbudget must refuse exactly the lines SGLang refuses, resolve every flag it
reads to SGLang's value, and plan the pools SGLang's configurator
(:mod:`sglang_oracle`) plans from SGLang's resolved values. With ``install()``
active, SGLang's own sizing call must raise only where it raises without it,
and give the same config.

A hybrid-state model's KV pool is compared on the full-attention layers SGLang's
KV pool counts, for the KV pool's budget (its state pool has its own issue).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import types
from typing import Any

import pytest

import launch_cases as L
import parity_cases as P
import sglang_oracle
from kvbudget.errors import KVBudgetError
from kvbudget.sglang.install import Runtime, from_server_args, install
from kvbudget.sglang.launch import FLAGS
from kvbudget.sglang.resolve import LaunchRefused
from sglang_oracle import draft as sglang_draft
from sglang_oracle import model as sglang_model
from sglang_oracle import resolve as sglang_resolve
from sglang_oracle._fetch import sglang_root

LINES = int(os.environ.get("KVBUDGET_LAUNCH_LINES", "300"))
BUDGETS = (20 << 30, 60 << 30)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return L.model_folders(tmp_path_factory.mktemp("launch-lines"))


@pytest.fixture(scope="module")
def lines(folders: dict[str, str]) -> list[tuple[str, list[str]]]:
    return L.launch_lines(folders, LINES)


@pytest.fixture(scope="module")
def sglang(lines: list[tuple[str, list[str]]]) -> list[L.Sglang]:
    root = sglang_root()
    resolve, models = sglang_resolve.load(root), sglang_model.load(root)
    return [L.sglang_side(resolve, models, flags) for _, flags in lines]


@pytest.fixture(scope="module")
def cases(lines: list[tuple[str, list[str]]], sglang: list[L.Sglang]) -> list[dict[str, Any] | None]:
    """The pool oracle's case of each plannable line, from SGLang's resolution and draft layers."""
    draft_layers = sglang_draft.load(sglang_root())
    return [None if theirs.refused else L.pool_case(theirs, draft_layers, flags)
            for (_, flags), theirs in zip(lines, sglang)]  # fmt: skip


def _ours(flags: list[str]) -> Any:
    try:
        return from_server_args(flags)
    except LaunchRefused as exc:
        return exc


def test_kvbudget_refuses_the_lines_sglang_refuses(lines: list[tuple[str, list[str]]], sglang: list[L.Sglang]) -> None:
    refused = 0
    mismatches = []
    for (name, flags), theirs in zip(lines, sglang):
        ours = _ours(flags)
        if isinstance(ours, LaunchRefused) != (theirs.refused is not None):
            mismatches.append(f"{name} {' '.join(flags[2:])}: SGLang {theirs.refused!r}, kvbudget {ours!r:.200}")
        refused += theirs.refused is not None
    assert not mismatches, f"{len(mismatches)} of {len(lines)}:\n" + "\n".join(mismatches[:10])
    assert 0 < refused < len(lines) // 2  # the generator reaches SGLang's refusals, and mostly plannable lines


def test_every_flag_resolves_to_sglangs_value(lines: list[tuple[str, list[str]]], sglang: list[L.Sglang]) -> None:
    mismatches = []
    for (name, flags), theirs in zip(lines, sglang):
        if theirs.values is None:
            continue
        ours = from_server_args(flags)
        for f in FLAGS:
            if ours.resolved[f.dest] != theirs.values[f.dest]:
                mismatches.append(f"{name} {' '.join(flags[2:])}: {f.dest} SGLang {theirs.values[f.dest]!r}, "
                                  f"kvbudget {ours.resolved[f.dest]!r}")  # fmt: skip
    assert not mismatches, f"{len(mismatches)}:\n" + "\n".join(mismatches[:10])


def test_the_launch_plans_sglangs_pools(lines: list[tuple[str, list[str]]], cases: list[Any]) -> None:
    oracle = sglang_oracle.load()
    compared, planned, mismatches = 0, 0, []
    for (name, flags), case in zip(lines, cases):
        if case is None:
            continue
        launch = from_server_args(flags)
        for budget in BUDGETS:
            outcome = oracle.run(case, entry="bytes", amount=budget)
            theirs = (outcome.config, outcome.error[0] if outcome.error else None)
            try:
                got = launch.configurator().calculate_pool_sizes(budget)
                ours: Any = ({k: getattr(got, k) for k in P.CONFIG_KEYS}, None)
            except KVBudgetError as exc:  # SGLang's configurator must fail the same way
                ours = (None, P.error_kind(exc))
            planned += ours[0] is not None
            if ours != theirs:
                mismatches.append(f"{name} {' '.join(flags[2:])} at {budget >> 30} GiB: SGLang {outcome.config} "
                                  f"{outcome.error}, kvbudget {ours}")  # fmt: skip
            compared += 1
    assert compared >= LINES
    assert not mismatches, f"{len(mismatches)} of {compared}:\n" + "\n".join(mismatches[:10])
    assert planned >= compared * 3 // 4  # mostly pools, not errors


def _installed(oracle: sglang_oracle.Oracle) -> sglang_oracle.Oracle:
    sb = oracle.sandbox
    m = sb.modules
    pc = types.SimpleNamespace(create_memory_pool_configurator=sb.create_memory_pool_configurator,
                               MemoryPoolConfig=sb.pool_configurator_ns["MemoryPoolConfig"])  # fmt: skip
    runtime = Runtime(m["sglang.srt.runtime_context"], m["sglang.srt.environ"], m["sglang.srt.arg_groups.overrides"])
    install("sglang", pool_configurator=pc, runtime=runtime)
    return sglang_oracle.Oracle(dataclasses.replace(sb, create_memory_pool_configurator=pc.create_memory_pool_configurator),
                                oracle.root)  # fmt: skip


def test_install_never_raises_where_sglang_does_not(lines: list[tuple[str, list[str]]], cases: list[Any],
                                                    caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    plain = sglang_oracle.load()
    patched = _installed(plain)
    compared, mismatches = 0, []
    caplog.set_level(logging.INFO, "kvbudget.sglang.install")
    for (name, flags), case in zip(lines, cases):
        if case is None:
            continue
        for budget in (*BUDGETS, 1 << 20):  # 1 MiB: SGLang itself runs out of memory
            want, got = plain.config_from_budget(case, budget), patched.config_from_budget(case, budget)
            if (got.error is not None and want.error is None) or got.config != want.config:
                mismatches.append(f"{name} {' '.join(flags[2:])} at {budget}: SGLang {want.config} {want.error}, "
                                  f"installed {got.config} {got.error}")  # fmt: skip
            compared += 1
    assert compared >= LINES
    assert not mismatches, f"{len(mismatches)} of {compared}:\n" + "\n".join(mismatches[:10])
    # kvbudget planned every worker itself; SGLang answered only what kvbudget could not (1 MiB).
    handed = [r.getMessage() for r in caplog.records]
    assert not [m for m in handed if "own pool configurator" in m]
    assert all("calculate_pool_sizes(1048576," in m for m in handed), handed[:3]


def test_the_executed_overrides_are_every_one_for_the_tested_architectures(folders: dict[str, str]) -> None:
    archs = [L.config_of(folders[name])["architectures"][0] for name in L.MODELS]
    assert sglang_resolve.registering_modules(sglang_root(), archs) == set(sglang_resolve.OVERRIDE_MODULES)
