"""The package's import graph: layers, no upward import, no circle (issue 23).

Every module of ``python/kvbudget`` belongs to one layer of :data:`LAYERS`
(docs/architecture.md draws them). A module imports only modules of its own
layer or lower ones, the two engines (``kvbudget.sglang``, ``kvbudget.vllm``)
never import each other, and no import chain comes back to where it started.
The imports are read from the source with ``ast``, function-level ones
included; only ``if TYPE_CHECKING:`` blocks are skipped (they never run).
A new module fails here until it is given a layer.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "kvbudget"

#: Lowest first: (name, module patterns).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("kvbudget._core", "kvbudget._moved", "kvbudget.errors", "kvbudget.types", "kvbudget.fields")),
    ("values", ("kvbudget.models.config_io", "kvbudget.models.hf", "kvbudget.models.hf_draft",
                "kvbudget.models.layer_kinds", "kvbudget.models.bailing_config", "kvbudget.models.dsa",
                "kvbudget.models.gpus", "kvbudget.models.weights",
                "kvbudget.models.hybrid_state", "kvbudget.models.bundled", "kvbudget.models.published",
                "kvbudget.budget")),
    ("planning", ("kvbudget.batch", "kvbudget._alloc_layout", "kvbudget.alloc")),
    ("engines", ("kvbudget.sglang", "kvbudget.sglang.*", "kvbudget.vllm", "kvbudget.vllm.*")),
    ("tools", ("kvbudget.workload", "kvbudget.distributed", "kvbudget.ranks", "kvbudget.models.presets",
               "kvbudget.models", "kvbudget.compare")),
    ("facade", ("kvbudget", "kvbudget._allocate", "kvbudget.scenario", "kvbudget.integrations", "kvbudget.integrations.*", "kvbudget.configurators",
                "kvbudget.vllm_models", "kvbudget.vllm_alloc", "kvbudget.models.sglang_*",
                "kvbudget.models.draft_layers", "kvbudget.cli", "kvbudget.cli.*")),
)  # fmt: skip
ENGINES = ("kvbudget.sglang", "kvbudget.vllm")


#: Compiled modules (no source to read): the Rust core's binding, at the bottom.
EXTENSIONS = ("kvbudget._core",)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {name: Path() for name in EXTENSIONS}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _runtime_nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            found.update(subs if subs else [base])
    return {m for m in found if m in modules and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set() if name in EXTENSIONS else _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> int:
    for i, (_, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return i
    raise AssertionError(f"{module} has no layer in tests/test_layers.py LAYERS")


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    for module in graph:
        _layer(module)


def test_no_import_runs_upward(graph: dict[str, set[str]]) -> None:
    upward = [f"{src} ({LAYERS[_layer(src)][0]}) imports {dst} ({LAYERS[_layer(dst)][0]})"
              for src, dsts in sorted(graph.items()) for dst in sorted(dsts) if _layer(dst) > _layer(src)]  # fmt: skip
    assert not upward, "\n".join(upward)


def test_the_engines_do_not_import_each_other(graph: dict[str, set[str]]) -> None:
    def engine(m: str) -> str | None:
        return next((e for e in ENGINES if m == e or m.startswith(e + ".")), None)

    crossing = [f"{s} imports {d}" for s, ds in graph.items() for d in ds if engine(s) and engine(d)
                and engine(s) != engine(d)]  # fmt: skip
    assert not crossing, "\n".join(crossing)


def test_no_import_circle(graph: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}
    path: list[str] = []
    circles: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circles.append(" -> ".join(path[path.index(d):] + [d]))
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not circles, "\n".join(circles)


def test_the_reader_sees_function_level_imports() -> None:
    """The graph is not blind to lazy imports (they are how most upward imports hid)."""
    tree = ast.parse("def f():\n    from kvbudget.alloc import allocate\nif TYPE_CHECKING:\n    import kvbudget.cli\n")
    names = {n.module for n in _runtime_nodes(tree) if isinstance(n, ast.ImportFrom)}
    assert names == {"kvbudget.alloc"}
    assert not [n for n in _runtime_nodes(tree) if isinstance(n, ast.Import)]
