"""Executing an engine's source read from its verified wheel extraction (SGLang, vLLM).

Two ways, both compiling the real text with its real file name and line
numbers, so tracebacks point into the extracted file:

* :meth:`Source.exec_module` runs a whole module's source in a namespace the
  sandbox controls (its ``__builtins__`` carry the sandbox's ``__import__``,
  so every engine import it makes, at import time or inside a
  function, is answered by the sandbox);
* :meth:`Source.lift` finds top-level definitions (``def``, ``class`` or an
  assignment) by name with :mod:`ast`, compiles just those nodes and executes
  them into a namespace; :meth:`Source.lift_member` does the same for one
  method of a class (a bare ``@property`` / ``@classmethod`` /
  ``@staticmethod`` is re-applied; any other decorator is refused), and
  :meth:`Source.lift_method` for an undecorated one (the plain function, to
  attach to a stand-in), :meth:`Source.lift_class` for a class holding only some
  of its methods (over stand-in bases), :meth:`Source.lift_statements` for the
  statements of a method that set one attribute, and
  :meth:`Source.lift_class_values` for a class's plain class-level assignments.

Lifted nodes are compiled with ``from __future__ import annotations`` so that
annotations naming types the sandbox does not provide stay unevaluated
strings; default values and decorators are evaluated as in the engine.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import copy
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

_FLAGS = __future__.annotations.compiler_flag
#: Module-name prefixes of the engines whose code the oracles execute.
ENGINES = ("sglang.", "vllm.")
_DECORATORS: dict[str, Any] = {
    "property": property,
    "classmethod": classmethod,
    "staticmethod": staticmethod,
}


class _ModuleView:
    """Stands in ``sys.modules`` for a namespace while its code runs (dataclasses
    resolve string annotations through ``sys.modules[cls.__module__].__dict__``)."""


@contextlib.contextmanager
def registered(namespace: dict[str, Any]) -> Iterator[None]:
    name = namespace["__name__"]
    assert not name.startswith(ENGINES), name  # never shadow a real engine module
    view = _ModuleView()
    view.__dict__ = namespace
    previous = sys.modules.get(name)
    sys.modules[name] = view  # type: ignore[assignment]
    try:
        yield
    finally:
        if previous is None:
            del sys.modules[name]
        else:
            sys.modules[name] = previous


class Source:
    """One extracted engine file (``rel`` is its path in the wheel)."""

    def __init__(self, root: Path, rel: str) -> None:
        self.rel = rel
        self.path = root / rel
        self.text = self.path.read_text(encoding="utf-8")
        self._tree: ast.Module | None = None

    @property
    def tree(self) -> ast.Module:
        if self._tree is None:
            self._tree = ast.parse(self.text, filename=str(self.path))
        return self._tree

    def _top_level(self, name: str) -> ast.stmt:
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name == name:
                    return node
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    return node
            elif (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == name
            ):
                return node
        raise LookupError(f"{self.rel}: no top-level definition named {name!r}")

    def _run(
        self,
        nodes: Sequence[ast.stmt],
        namespace: dict[str, Any],
        local: dict[str, Any] | None = None,
    ) -> None:
        module = ast.Module(body=list(nodes), type_ignores=[])
        code = compile(module, str(self.path), "exec", flags=_FLAGS, dont_inherit=True)
        with registered(namespace):
            exec(code, namespace, namespace if local is None else local)  # noqa: S102 (the point)

    def lift(self, namespace: dict[str, Any], *names: str) -> None:
        """Executes the top-level definitions ``names`` (in order) into ``namespace``."""
        self._run([self._top_level(n) for n in names], namespace)

    def lift_member(self, namespace: dict[str, Any], cls: str, name: str, drop: Sequence[str] = ()) -> Any:
        """``cls.name`` as a class attribute (a property, classmethod, staticmethod or
        plain function) with ``namespace`` as its globals. ``drop``: decorators (called by
        these names, e.g. pydantic's ``model_validator``) removed, leaving the function they
        register."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"

        def dropped(d: ast.expr) -> bool:
            f = d.func if isinstance(d, ast.Call) else d
            return isinstance(f, ast.Name) and f.id in drop

        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == name:
                decos = [d for d in item.decorator_list if not dropped(d)]
                wrap = None
                if decos:
                    d = decos[0]
                    if len(decos) > 1 or not (isinstance(d, ast.Name) and d.id in _DECORATORS):
                        raise LookupError(f"{self.rel}: {cls}.{name} has other decorators")
                    wrap = _DECORATORS[d.id]
                bare = copy.copy(item)  # the same def, without its (checked) decorator
                bare.decorator_list = []
                scratch: dict[str, Any] = {}
                self._run([bare], namespace, scratch)
                fn = scratch[name]
                fn.__qualname__ = f"{cls}.{name}"
                return wrap(fn) if wrap is not None else fn
        raise LookupError(f"{self.rel}: class {cls} has no method {name!r}")

    def lift_class(self, namespace: dict[str, Any], cls: str, members: Sequence[str], bases: Sequence[str]) -> type:
        """A class named ``cls`` holding only the ``members`` of the engine's ``cls``: methods
        (their decorators as written), nested classes and class-level assignments, by name, in
        the order given, derived from ``bases`` (names in ``namespace``, standing in for the
        engine's bases). Compiled as a class body, so zero-argument ``super()`` resolves to the
        next base, as in the engine."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"

        def name_of(item: ast.stmt) -> str | None:
            if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
                return item.name
            target = item.targets[0] if isinstance(item, ast.Assign) and len(item.targets) == 1 else (
                item.target if isinstance(item, ast.AnnAssign) else None)
            return target.id if isinstance(target, ast.Name) else None

        found = {name: i for i in node.body if (name := name_of(i)) in members}
        missing = [m for m in members if m not in found]
        if missing:
            raise LookupError(f"{self.rel}: class {cls} has no member {missing}")
        body: list[ast.stmt] = [found[m] for m in members]
        new = ast.ClassDef(name=cls, bases=[ast.Name(id=b, ctx=ast.Load()) for b in bases], keywords=[],
                           body=body, decorator_list=[], type_params=[])  # fmt: skip
        ast.copy_location(new, node)
        ast.fix_missing_locations(new)
        scratch: dict[str, Any] = {}
        self._run([new], namespace, scratch)
        out = scratch[cls]
        assert isinstance(out, type)
        return out

    def lift_statements(self, namespace: dict[str, Any], cls: str, method: str, assigns: str) -> Callable[..., Any]:
        """The top-level statements of ``cls.method`` that assign ``self.<assigns>`` (at any
        depth, e.g. an ``if`` setting it), in order, as a function of the method's arguments."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"
        fn = next(i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == method)

        def targets(n: ast.AST) -> list[ast.expr]:
            if isinstance(n, ast.Assign):
                return n.targets
            return [n.target] if isinstance(n, ast.AnnAssign) else []

        def sets(stmt: ast.stmt) -> bool:
            return any(isinstance(t, ast.Attribute) and t.attr == assigns and isinstance(t.value, ast.Name)
                       and t.value.id == "self" for n in ast.walk(stmt) for t in targets(n))  # fmt: skip

        picked = [s for s in fn.body if sets(s)]
        if not picked:
            raise LookupError(f"{self.rel}: {cls}.{method} never sets self.{assigns}")
        wrapper = ast.FunctionDef(name=f"_{method}_{assigns}", args=fn.args, body=picked, decorator_list=[],
                                  returns=None, type_params=[])  # fmt: skip
        ast.copy_location(wrapper, picked[0])
        ast.fix_missing_locations(wrapper)
        scratch: dict[str, Any] = {}
        self._run([wrapper], namespace, scratch)
        out = scratch[wrapper.name]
        assert callable(out)
        return out  # type: ignore[no-any-return]

    def lift_class_values(self, namespace: dict[str, Any], cls: str, *names: str) -> dict[str, Any]:
        """The class-body assignments ``cls.<name>`` (e.g. ``quant_block_size = 128``),
        evaluated with ``namespace`` as their globals, by name."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"
        found: dict[str, ast.stmt] = {}
        for item in node.body:
            target = item.targets[0] if isinstance(item, ast.Assign) and len(item.targets) == 1 else (
                item.target if isinstance(item, ast.AnnAssign) and item.value is not None else None)
            if isinstance(target, ast.Name) and target.id in names:
                found[target.id] = item
        missing = [n for n in names if n not in found]
        if missing:
            raise LookupError(f"{self.rel}: class {cls} assigns no {missing}")
        scratch: dict[str, Any] = {}
        self._run([found[n] for n in names], namespace, scratch)
        return {n: scratch[n] for n in names}

    def lift_method(self, namespace: dict[str, Any], cls: str, method: str) -> Callable[..., Any]:
        """The function object of the undecorated ``cls.method``, ``namespace`` its globals."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"
        if any(isinstance(i, ast.FunctionDef) and i.name == method and i.decorator_list for i in node.body):
            raise LookupError(f"{self.rel}: {cls}.{method} is decorated; lift it by hand")
        fn = self.lift_member(namespace, cls, method)
        assert callable(fn)
        return fn  # type: ignore[no-any-return]

    def exec_module(self, namespace: dict[str, Any]) -> None:
        """Executes the whole file in ``namespace`` (as its module globals)."""
        code = compile(self.text, str(self.path), "exec", dont_inherit=True)
        with registered(namespace):
            exec(code, namespace)  # noqa: S102 (the point)
