"""vLLM mode's typed boundary (issue 26): layers converted once (``kvbudget.vllm.layers``),
engine settings read from the ``EngineConfig`` object, and a plan whose records are made on
first read. Each form is held to the JSON path (``_core._vllm_plan``, the oracle's form), which
the vLLM differentials hold to vLLM's own code."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest
import vllm_cases

from kvbudget import _core, vllm


def _json_path(layers: list[dict[str, Any]], available: Any, engine: dict[str, Any]) -> dict[str, Any]:
    """The JSON path, with every engine setting spelled out as the typed path reads them."""
    full = {s.name: getattr(vllm.EngineConfig(**engine), s.name) for s in vllm.settings.ENGINE_SETTINGS}
    request = {"layers": layers, "available": available, "engine": full}
    out: dict[str, Any] = json.loads(_core._vllm_plan(json.dumps(request)))
    return out


@pytest.mark.parametrize("seed", range(60))
def test_the_typed_path_is_the_json_path(seed: int) -> None:
    """Seeded deployments (errors included): plan_raw over LayerSpecs and over converted
    layers equals the JSON path, and plan() agrees with both."""
    layers, available, engine = vllm_cases.deployment(seed)
    want = _json_path(layers, available, engine)
    specs = [vllm.LayerSpec(**x) for x in layers]
    config = vllm.EngineConfig(**engine)
    assert vllm.plan_raw(specs, available, config) == want
    model = vllm.layers(specs)
    assert len(model) == len(specs) and vllm.layers(model) is model
    assert vllm.plan_raw(model, available, config) == want
    if not want["ok"]:
        with pytest.raises((vllm.VllmError, vllm.VllmStartupError)) as e:
            vllm.plan(model, available, config)
        assert str(e.value) == want["error"]
        return
    p = vllm.plan(model, available, config)
    assert (p.num_blocks, p.kv_cache_size_tokens, p.max_concurrency) == (
        want["num_blocks"], want["kv_cache_size_tokens"], want["max_concurrency"])  # fmt: skip
    assert [list(g.layers) for g in p.groups] == [g["layers"] for g in want["groups"]]
    assert [[list(t.layers) for t in w] for w in p.tensors] == [[t["layers"] for t in w] for w in want["tensors"]]


def _gemma_like() -> list[vllm.LayerSpec]:
    return [vllm.LayerSpec(f"model.layers.{i}.self_attn.attn", "full" if i % 6 == 5 else "sliding",
                           num_kv_heads=16, head_size=128, sliding_window=1024) for i in range(62)]  # fmt: skip


def test_a_plan_reads_its_records_on_first_use_and_is_a_plain_value() -> None:
    """The records are made once, on first read; equality, repr, pickling, copies and
    dataclasses.replace see every field; a plan built field by field equals it."""
    lazy = vllm.plan(_gemma_like(), 40 << 30)
    assert "groups" not in vars(lazy)
    eager = vllm.plan(_gemma_like(), 40 << 30)
    groups = eager.groups  # makes the records
    assert "groups" in vars(eager) and "_native" not in vars(eager) and eager.groups is groups
    assert lazy == eager and hash(lazy) == hash(eager)
    fields = {f.name: getattr(eager, f.name) for f in dataclasses.fields(vllm.VllmPlan)}
    assert vllm.VllmPlan(**fields) == lazy
    for again in (pickle.loads(pickle.dumps(vllm.plan(_gemma_like(), 40 << 30))),
                  copy.deepcopy(vllm.plan(_gemma_like(), 40 << 30))):  # fmt: skip
        assert again == eager and "_native" not in vars(again)
    assert dataclasses.replace(vllm.plan(_gemma_like(), 40 << 30), num_blocks=1).groups == groups
    assert "VllmGroup(" in repr(vllm.plan(_gemma_like(), 40 << 30))
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        _ = lazy.nonesuch


def test_conversion_errors_are_the_json_paths() -> None:
    """A layer or engine value the declaration refuses is an "Input" failure with the JSON
    path's message; an item that is no LayerSpec is a TypeError."""
    bad_layer = dataclasses.replace(_gemma_like()[0], num_kv_heads=-1)
    want = json.loads(_core._vllm_plan(json.dumps({"layers": [{"name": "x", "kind": "full", "num_kv_heads": -1,
                                                               "head_size": 128}], "available": 1 << 30})))  # fmt: skip
    got = vllm.plan_raw([bad_layer], 1 << 30)
    assert (got["ok"], got["error_type"], got["error"]) == (False, "Input", want["error"])
    with pytest.raises(vllm.VllmError, match="num_kv_heads") as e:
        vllm.layers([bad_layer])
    assert e.value.vllm_error_type == "Input"
    engine = vllm.EngineConfig(block_size=-16)
    want = json.loads(_core._vllm_plan(json.dumps({"layers": [], "available": 1, "engine": {"block_size": -16}})))
    got = vllm.plan_raw(_gemma_like(), 1 << 30, engine)
    assert (got["ok"], got["error_type"], got["error"]) == (False, "Input", want["error"])
    with pytest.raises(vllm.VllmError, match="block_size"):
        vllm.plan(_gemma_like(), 1 << 30, engine)
    with pytest.raises(TypeError, match="expected LayerSpec, got dict"):
        vllm.layers([{"name": "x"}])  # type: ignore[list-item]
