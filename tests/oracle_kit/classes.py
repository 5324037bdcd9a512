"""An engine's class hierarchy read from its verified wheel extraction, without importing it.

Which interfaces a model class implements (vLLM's ``SupportsEagle3``, ``SupportsReplaySSM``) or
which methods it defines or inherits (SGLang's ``set_eagle3_layers_to_capture``) decides
whether the engine starts at all, and the engine decides it with ``isinstance`` / ``hasattr``
on the built model. The oracles cannot build models, so :class:`Hierarchy` answers from the
source: a class's bases are resolved through its file's top-level classes and its imports
(``from .llama import LlamaForCausalLM``, absolute or relative, at any depth of the file, the
first import of a name winning, the CUDA branch of a platform switch taken first), followed
into the engine's other files. A base imported from outside the engine (``torch.nn.Module``,
``typing.Protocol``) ends the walk. A file the walk needs that the extraction does not hold
(it is not pinned) raises :class:`LookupError`: the answer is never guessed.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Hierarchy"]

_Class = tuple[str, str]  # (dotted module, class name)


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (breadth first), but the ``else`` branch of an ``if <platform>.is_rocm():`` switch
    before its body, so that the CUDA branch's imports come first (Inkling's package ``__init__``
    tests for ROCm first)."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Call) and ast.unparse(node.test.func).endswith(
                "is_rocm"):  # fmt: skip
            queue.extend([node.test, *node.orelse, *node.body])
        else:
            queue.extend(ast.iter_child_nodes(node))
        yield node


class Hierarchy:
    """The classes of one engine (``package``: ``"vllm"`` or ``"sglang"``) under ``root``."""

    def __init__(self, root: Path, package: str) -> None:
        self.root = root
        self.package = package

    @functools.cache  # noqa: B019 (one Hierarchy per extraction, kept for the process)
    def _module(self, dotted: str) -> tuple[dict[str, ast.ClassDef], dict[str, str]]:
        """``dotted``'s top-level classes, and where each imported name comes from
        (``module:name`` for ``from module import name``, ``module`` for a module alias)."""
        base = self.root / dotted.replace(".", "/")
        path = next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)
        if path is None:
            raise LookupError(f"{dotted}: not in the verified extraction under {self.root} (pin the file)")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = dotted if path.name == "__init__.py" else dotted.rpartition(".")[0]
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        imports: dict[str, str] = {}
        for node in _walk(tree):
            if isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                origin = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                source = ".".join(x for x in (origin, node.module or "") if x)
                for alias in node.names:
                    imports.setdefault(alias.asname or alias.name, f"{source}:{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    imports.setdefault(alias.asname or alias.name.partition(".")[0], alias.name)
        return classes, imports

    def _resolve(self, dotted: str, expr: ast.expr) -> _Class | None:
        """The engine class a base expression names, or None for one outside the engine."""
        classes, imports = self._module(dotted)
        if isinstance(expr, ast.Name):
            if expr.id in classes:
                return dotted, expr.id
            where = imports.get(expr.id)
            if where is None or ":" not in where:
                return None
            module, _, name = where.partition(":")
        elif isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            module, name = imports.get(expr.value.id, ""), expr.attr
            if ":" in module:  # ``from pkg import module`` then ``module.Class``
                module = module.replace(":", ".")
        else:
            return None
        if module != self.package and not module.startswith(self.package + "."):
            return None
        owner, _ = self._module(module)
        if name in owner:
            return module, name
        return self._resolve(module, ast.Name(id=name, ctx=ast.Load()))  # re-exported

    def lineage(self, dotted: str, cls: str) -> list[_Class]:
        """``cls`` and every engine class above it, depth first in base order, each once."""
        out: list[_Class] = []
        stack: list[_Class] = [(dotted, cls)]
        while stack:
            here = stack.pop()
            if here in out:
                continue
            classes, _ = self._module(here[0])
            if here[1] not in classes:
                found = self._resolve(here[0], ast.Name(id=here[1], ctx=ast.Load()))
                if found is None:
                    raise LookupError(f"{here[0]}: no class {here[1]!r}")
                here = found
                classes, _ = self._module(here[0])
            out.append(here)
            bases = [self._resolve(here[0], b) for b in classes[here[1]].bases]
            stack.extend(reversed([b for b in bases if b is not None]))
        return out

    def implements(self, dotted: str, cls: str, interface: str) -> bool:
        """Whether ``interface`` (a class name) is ``cls`` or one of the classes above it."""
        return any(name == interface for _, name in self.lineage(dotted, cls))

    def defines(self, dotted: str, cls: str, attribute: str) -> bool:
        """Whether ``cls`` or a class above it defines ``attribute`` (a method or a class-level
        assignment): what ``hasattr`` on an instance finds among the class attributes."""
        for module, name in self.lineage(dotted, cls):
            for item in self._module(module)[0][name].body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == attribute:
                    return True
                targets = item.targets if isinstance(item, ast.Assign) else (
                    [item.target] if isinstance(item, ast.AnnAssign) else [])  # fmt: skip
                if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
                    return True
        return False
