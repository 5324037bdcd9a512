"""Executing SGLang source read from the verified wheel extraction.

Two ways, both compiling the real text (with its real file name and line
numbers, so tracebacks point into the extracted file):

* :meth:`Source.exec_module` runs a whole module's source in a namespace the
  sandbox controls (its ``__builtins__`` carry the sandbox's ``__import__``,
  so every ``from sglang... import`` it makes, at import time or inside a
  function, is answered by the sandbox);
* :meth:`Source.lift` finds top-level definitions (``def``, ``class`` or an
  assignment) by name with :mod:`ast`, compiles just those nodes and executes
  them into a namespace, and :meth:`Source.lift_method` does the same for one
  method of a class (returning the plain function, to attach to a stand-in).

Lifted nodes are compiled with ``from __future__ import annotations`` so that
annotations naming types the sandbox does not provide stay unevaluated
strings; default values and decorators are evaluated as in SGLang.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

_FLAGS = __future__.annotations.compiler_flag


class _ModuleView:
    """Stands in ``sys.modules`` for a namespace while its code runs (dataclasses
    resolve string annotations through ``sys.modules[cls.__module__].__dict__``)."""


@contextlib.contextmanager
def _registered(namespace: dict[str, Any]) -> Iterator[None]:
    name = namespace["__name__"]
    assert not name.startswith("sglang."), name  # never shadow a real sglang module
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
    """One extracted SGLang file (``rel`` is its path in the wheel)."""

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
            elif isinstance(node, ast.AnnAssign):
                if isinstance(node.target, ast.Name) and node.target.id == name:
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
        with _registered(namespace):
            exec(code, namespace, namespace if local is None else local)

    def lift(self, namespace: dict[str, Any], *names: str) -> None:
        """Executes the top-level definitions ``names`` (in order) into ``namespace``."""
        self._run([self._top_level(n) for n in names], namespace)

    def lift_method(self, namespace: dict[str, Any], cls: str, method: str) -> Callable[..., Any]:
        """The function object of ``cls.method``, with ``namespace`` as its globals."""
        node = self._top_level(cls)
        assert isinstance(node, ast.ClassDef), f"{self.rel}: {cls} is not a class"
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == method:
                if item.decorator_list:
                    raise LookupError(f"{self.rel}: {cls}.{method} is decorated; lift it by hand")
                # The def binds into a scratch dict; the function's globals are ``namespace``.
                scratch: dict[str, Any] = {}
                self._run([item], namespace, scratch)
                fn = scratch[method]
                assert callable(fn)
                fn.__qualname__ = f"{cls}.{method}"
                return fn  # type: ignore[no-any-return]
        raise LookupError(f"{self.rel}: class {cls} has no method {method!r}")

    def exec_module(self, namespace: dict[str, Any]) -> None:
        """Executes the whole file in ``namespace`` (as its module globals)."""
        code = compile(self.text, str(self.path), "exec", dont_inherit=True)
        with _registered(namespace):
            exec(code, namespace)
