"""vLLM's inputs and the tensor kinds are declared once, in the core, and derived everywhere else.

The core declares every ``LayerSpec`` field and ``EngineConfig`` setting
(``rust/core/src/vllm/settings.rs``: name, type, default, unit, doc, flag) and
every tensor kind (``rust/core/src/plan/kinds.rs``). Here: the Python classes,
the CLI flags and ``LayerKV`` are what those tables say, and no module of
``python/kvbudget`` restates them (a field list, a defaults table, a flag, a doc
or a list of kinds written out by hand). The typing blocks under
``if TYPE_CHECKING:`` are generated (``tools/stubgen.py --check``, tests/test_fields.py).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from test_layers import _runtime_nodes  # every node but the generated typing under ``if TYPE_CHECKING:``

from kvbudget import _core, vllm
from kvbudget.cli.parser import VLLM_FLAGS, build_parser, vllm_flags
from kvbudget.vllm import settings

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "kvbudget"
TABLE = json.loads(_core._vllm_settings())["records"]
CLASSES = {"LayerSpec": (vllm.LayerSpec, "VllmLayer"), "EngineConfig": (vllm.EngineConfig, "VllmEngine")}


@pytest.mark.parametrize("cls_name", CLASSES)
def test_the_classes_are_the_cores_table(cls_name: str) -> None:
    cls, record = CLASSES[cls_name]
    rows = TABLE[record]["settings"]
    fields = dataclasses.fields(cls)
    assert [f.name for f in fields] == [r["name"] for r in rows]
    for f, r in zip(fields, rows):
        if r["required"]:
            assert f.default is dataclasses.MISSING, f.name
        else:
            assert json.loads(json.dumps(f.default)) == r["default"], f.name  # a tuple default is a JSON list
        assert " ".join(r["doc"].split()) in " ".join((cls.__doc__ or "").split())


def test_the_engine_defaults_are_the_cores_plan() -> None:
    """A plan with ``EngineConfig()`` is the core's plan of an empty engine dict (its own defaults)."""
    layers = [vllm.LayerSpec(f"l{i}", "full" if i % 2 else "sliding", num_kv_heads=8, head_size=128,
                             sliding_window=512) for i in range(6)]  # fmt: skip
    ours = vllm.plan_raw(layers, 4 << 30, vllm.EngineConfig())
    request = {"layers": [{"name": x.name, "kind": x.kind, "num_kv_heads": 8, "head_size": 128,
                           "sliding_window": 512} for x in layers], "available": 4 << 30, "engine": {}}  # fmt: skip
    assert ours == json.loads(_core._vllm_plan(json.dumps(request)))


def test_the_classes_are_frozen_value_types() -> None:
    e = vllm.EngineConfig(tp=2, max_model_len="auto", derived_max_model_len=4096)
    assert e == vllm.EngineConfig(tp=2, max_model_len="auto", derived_max_model_len=4096) != vllm.EngineConfig()
    assert hash(e) == hash(vllm.EngineConfig(tp=2, max_model_len="auto", derived_max_model_len=4096))
    assert repr(vllm.EngineConfig()).startswith("EngineConfig(block_size=16, max_model_len=131072, ")
    assert pickle.loads(pickle.dumps(e)) == e
    assert dataclasses.replace(e, tp=4).tp == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.tp = 3  # type: ignore[misc]
    layer = vllm.LayerSpec("a", "full", 8, 128)
    assert (layer.num_kv_heads, layer.kv_cache_dtype, layer.pp_stage) == (8, "auto", 0)
    with pytest.raises(TypeError):
        vllm.LayerSpec("a", "full", num_kv_heads=8)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        vllm.EngineConfig(bogus=1)  # type: ignore[call-arg]


def test_a_wrong_value_is_the_cores_error() -> None:
    layers = [vllm.LayerSpec("a", "full", num_kv_heads=8, head_size=128)]
    with pytest.raises(vllm.VllmError, match="engine block_size: expected a non-negative integer"):
        vllm.plan(layers, 1 << 30, vllm.EngineConfig(block_size="16"))  # type: ignore[arg-type]


def test_the_cli_flags_are_the_declared_ones() -> None:
    declared = {s.name: s.flag for s in settings.ENGINE_SETTINGS if s.flag is not None}
    assert {k: v for k, v in VLLM_FLAGS.items() if k != "gpu_memory_utilization"} == declared
    parser = build_parser()
    plan = next(a for a in parser._subparsers._group_actions[0].choices.values() if a.prog.endswith(" plan"))  # type: ignore[union-attr]
    group = next(g for g in plan._action_groups if (g.title or "").startswith("vLLM engine"))
    assert [a.option_strings[0] for a in group._group_actions] == [*declared.values(), "--gpu-memory-utilization"]
    argv: list[str] = []
    want: dict[str, Any] = {}
    for s in settings.ENGINE_SETTINGS:
        if s.flag is None:
            continue
        if s.py == "bool":
            argv.append(s.flag)
            want[s.name] = not s.default
        elif s.py == "choice":  # the last choice (not the default)
            argv += [s.flag, s.choices[-1]]
            want[s.name] = s.choices[-1]
        else:
            argv += [s.flag, "7"]
            want[s.name] = 7
    args = parser.parse_args(["plan", *argv])
    assert vllm_flags(args) == want
    assert vllm_flags(parser.parse_args(["plan"])) == {}
    vllm.EngineConfig(**want)  # every flag is a setting


def test_layer_kv_is_the_cores_tensor_kinds() -> None:
    torch = pytest.importorskip("torch")
    from kvbudget.alloc import LayerKV

    assert LayerKV.__match_args__ == ("pool", "layer_id", *_core.TENSOR_KINDS)
    assert set(_core.TENSOR_KIND_DOCS) == set(_core.TENSOR_KINDS)
    for kind in _core.TENSOR_KINDS:
        attr = getattr(LayerKV, kind)
        assert " ".join(_core.TENSOR_KIND_DOCS[kind].split()) in (attr.__doc__ or "")
    rec = LayerKV("full", 3, torch.zeros(1), index_k=torch.ones(2))
    assert set(rec.tensors()) == {"k", "index_k"} and rec.v is None
    with pytest.raises(TypeError, match="unexpected tensor kind 'kk'"):
        LayerKV("full", 0, kk=torch.zeros(1))
    with pytest.raises(TypeError, match="repeated"):
        LayerKV("full", 0, torch.zeros(1), k=torch.zeros(1))


# ----------------------------------------------------------------------------- no restatement


def _restatements(tree: ast.Module, names: set[str], texts: set[str]) -> list[str]:
    """Where ``tree`` writes out three or more of ``names`` together (a class body's fields,
    a dict's keys, a tuple, list or set of strings), or one of ``texts`` (a flag, a doc)."""
    found = []
    for node in _runtime_nodes(tree):
        listed: list[str] = []
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
                    stmt.targets[0] if isinstance(stmt, ast.Assign) else None)  # fmt: skip
                if isinstance(target, ast.Name):
                    listed.append(target.id)
        elif isinstance(node, ast.Dict):
            listed = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            listed = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in texts:
            found.append(f"line {node.lineno}: {node.value[:60]!r}")
        hits = sorted(set(listed) & names)
        if len(hits) >= 3:
            found.append(f"line {getattr(node, 'lineno', '?')}: {', '.join(hits)}")
    return found


def test_no_module_restates_the_vllm_settings_or_the_tensor_kinds() -> None:
    engine = {s.name for s in settings.ENGINE_SETTINGS}
    layer = {s.name for s in settings.LAYER_FIELDS}
    kinds = set(_core.TENSOR_KINDS)
    texts = {s.flag for s in settings.ENGINE_SETTINGS if s.flag} | {
        " ".join(s.doc.split()) for s in (*settings.ENGINE_SETTINGS, *settings.LAYER_FIELDS)
    } | {" ".join(d.split()) for d in _core.TENSOR_KIND_DOCS.values()}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for names in (engine, layer, kinds):
            found += [f"{path.relative_to(PACKAGE)} {w}" for w in _restatements(tree, names, texts)]
    assert not found, "restated outside the core's declaration:\n" + "\n".join(sorted(set(found)))


def test_the_scan_sees_a_restatement() -> None:
    src = ('class EngineConfig:\n    block_size: int = 16\n    tp: int = 1\n    pp: int = 1\n'
           'FLAG = "--block-size"\nKINDS = ("k", "v", "kv")\n')  # fmt: skip
    engine = {s.name for s in settings.ENGINE_SETTINGS}
    assert len(_restatements(ast.parse(src), engine, {"--block-size"})) == 2
    assert _restatements(ast.parse(src), set(_core.TENSOR_KINDS), set()) == ["line 6: k, kv, v"]


def test_a_declared_setting_is_a_cli_flag_end_to_end() -> None:
    """``--kv-cache-memory-bytes`` is only declared in the core and read by its planner; the CLI
    flag, the keyword and the plan follow (30 GiB of 2 MiB blocks, whatever --available says)."""
    from cli_helpers import run

    r = run("plan", "llama-3.1-8b", "--engine", "vllm", "--available", "1GiB", "--kv-cache-memory-bytes", "30GiB",
            "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["vllm_plan"]["num_blocks"] == 30 * 512
