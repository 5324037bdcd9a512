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
KV pool counts, for the KV pool's budget. Its state-cache flags
(``--mamba-radix-cache-strategy`` and the rest) resolve as SGLang's
``handle_mamba_radix_cache`` resolves and checks them (lifted, with
``mamba_hook.py``'s validators), on :data:`STATE_LINES` more lines of it, and a
model without state refuses an explicit extra-buffer strategy as SGLang does.
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
from kvbudget.sglang.state import StateCacheTooSmallError, max_num_reqs, state_budget
from sglang_oracle import draft as sglang_draft
from sglang_oracle import model as sglang_model
from sglang_oracle import resolve as sglang_resolve
from sglang_oracle import state as sglang_state
from sglang_oracle._fetch import sglang_root

LINES = int(os.environ.get("KVBUDGET_LAUNCH_LINES", "300"))
#: Lines of the hybrid-state model besides (its state-cache flags and their resolution).
STATE_LINES = LINES // 3
BUDGETS = (20 << 30, 60 << 30)


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return L.model_folders(tmp_path_factory.mktemp("launch-lines"))


@pytest.fixture(scope="module")
def lines(folders: dict[str, str]) -> list[tuple[str, list[str]]]:
    return L.launch_lines(folders, LINES) + L.launch_lines(folders, STATE_LINES, seed=1, models=("qwen3-next-80b",))


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


#: ``resolve_max_num_reqs``' token capacity and context length in the state comparison (the oracle's).
CAPACITY, CONTEXT = sglang_state.StateCase.token_capacity, sglang_state.StateCase.context_len


def _state_case(values: dict[str, Any], config: dict[str, Any], rest_gib: float) -> Any:
    """SGLang's state cache for the line (the gated-delta-net config's ``mamba2_cache_params``
    and ``_handle_max_mamba_cache``, :mod:`sglang_oracle.state`) from SGLang's resolved values."""
    n, interval = config["num_hidden_layers"], config["full_attention_interval"]
    hf = {k: config[k] for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                 "linear_value_head_dim", "linear_conv_kernel_dim")}  # fmt: skip
    hf.update(linear_layer_ids=[i for i in range(n) if (i + 1) % interval], mamba_ssm_dtype=config.get("mamba_ssm_dtype"))
    ratio = values["mamba_full_memory_ratio"]
    return sglang_state.StateCase(
        source="gdn", hf=hf, num_hidden_layers=n, tp=values["tp_size"], attn_dp=values["attn_dp_size"],
        env_ssm_dtype=values["mamba_ssm_dtype"],
        spec=values["speculative_algorithm"] is not None, num_draft_tokens=values["speculative_num_draft_tokens"],
        max_running_requests=values["max_running_requests"], max_mamba_cache_size=values["max_mamba_cache_size"],
        # the field's declared fallback (Schedule.mamba_full_memory_ratio: resolvable, fallback=0.9)
        mamba_full_memory_ratio=0.9 if ratio is None else ratio, disable_radix_cache=values["disable_radix_cache"],
        disable_overlap_schedule=values["disable_overlap_schedule"], strategy=values["mamba_radix_cache_strategy"],
        replay=values["enable_linear_replayssm_spec"], replay_len=values["linear_replayssm_cache_len"],
        disagg=values["disaggregation_mode"], role_switch=values["enable_pd_role_switch"], rest_gib=rest_gib,
    )  # fmt: skip


def test_a_state_models_line_sizes_sglangs_state_pool(lines: list[tuple[str, list[str]]],
                                                      sglang: list[L.Sglang]) -> None:  # fmt: skip
    """The state pool of each hybrid-state line SGLang plans: ``from_server_args``'s state (its
    flags as kvbudget resolves them) against SGLang's ``_handle_max_mamba_cache`` on SGLang's
    resolved values, then ``resolve_max_num_reqs`` (its state cap): the slots, the GiB left for
    the KV pool, the running requests and the error kind."""
    oracle = sglang_state.load(sglang_root())
    compared, mismatches, kinds = 0, [], set()
    for (name, flags), theirs in zip(lines, sglang):
        if theirs.values is None or name != "qwen3-next-80b":
            continue
        launch = from_server_args(flags)
        assert launch.state is not None
        for rest in (0.05, 6.0, 30.0):
            want = oracle.run(_state_case(theirs.values, L.config_of(flags[1]), rest))
            sc = launch.scenario
            try:
                got = state_budget(launch.state, sc.serving, sc.spec, rest)
                reqs = max_num_reqs(CAPACITY, CONTEXT, sc.serving, launch.state, got.max_mamba_cache_size)
                ours: tuple[Any, ...] = (got.max_mamba_cache_size, got.rest_gib, reqs, None)
            except KVBudgetError as exc:
                ours = (None, None, None, "state" if isinstance(exc, StateCacheTooSmallError) else P.error_kind(exc))
            err = want["error"]
            kind = None if err is None else ("state" if err[0] == "state_too_small" else err[0])
            theirs_out = ((None, None, None, kind) if err else
                          (want["max_mamba_cache_size"], want["rest_gib"], want["max_num_reqs"], None))  # fmt: skip
            if ours != theirs_out:
                mismatches.append(f"{' '.join(flags[2:])} at {rest} GiB: SGLang {theirs_out} {err}, kvbudget {ours}")
            kinds.add(kind)
            compared += 1
    assert compared >= STATE_LINES, compared
    assert not mismatches, f"{len(mismatches)} of {compared}:\n" + "\n".join(mismatches[:10])
    assert None in kinds and "state" in kinds, kinds  # pools and SGLang's "not enough memory" both reached


def test_the_mamba_architecture_tables_are_sglangs() -> None:
    """kvbudget's restated ``_MAMBA_RADIX_CACHE_ARCHS`` / ``_MAMBA_EXTRA_BUFFER_ARCHS`` equal
    SGLang's (``arg_groups/overrides.py``, read with ``ast`` from the wheel)."""
    import ast

    from kvbudget.sglang import resolve

    tree = ast.parse((sglang_root() / "sglang/srt/arg_groups/overrides.py").read_text())
    tables = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("_MAMBA_RADIX_CACHE_ARCHS", "_MAMBA_EXTRA_BUFFER_ARCHS"):
                assert isinstance(node.value, ast.Call)  # frozenset({...})
                tables[name] = frozenset(ast.literal_eval(node.value.args[0]))
    assert tables["_MAMBA_RADIX_CACHE_ARCHS"] == resolve.MAMBA_RADIX_CACHE_ARCHS
    assert tables["_MAMBA_EXTRA_BUFFER_ARCHS"] == resolve.MAMBA_EXTRA_BUFFER_ARCHS
