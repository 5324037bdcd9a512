"""The lifting machinery of the vLLM model-reading oracle (:mod:`._hf`): restated glue.

``_lift_class`` executes a skeleton of a vLLM class (its ``__init__``, whole or the statements
:func:`_picker` keeps, and named methods; other methods raise); :class:`_Module` stands in for
``nn.Module``; :func:`_inert` builds constructors owning no KV; :class:`_StateLayer` is a state
layer that only registers itself.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import contextlib
import copy
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oracle_kit.lift import Source, registered
from oracle_kit.strict import Poison, fail

_FLAGS = __future__.annotations.compiler_flag

class VllmLoadError(Exception):
    """vLLM's own code refused the configuration (its exception text is the message)."""


def _load_error(e: BaseException) -> VllmLoadError:
    last = traceback.extract_tb(e.__traceback__)[-1]
    where = f" [{Path(last.filename).name}:{last.lineno}: {last.line}]" if last.line else ""
    return VllmLoadError(f"{type(e).__name__}: {e}{where}")


@contextlib.contextmanager
def vllm_refusals(*oracle_gaps: type[BaseException], clear: dict[str, Any] | None = None) -> Iterator[None]:
    """Runs vLLM's model code: its exceptions come out as :class:`VllmLoadError`; the oracle's own pass
    through (a stub's ``StubError``, a ``VllmLoadError`` already made, ``oracle_gaps``); ``clear`` (the
    build in progress) is emptied after."""
    try:
        yield
    except VllmLoadError:
        raise
    except Exception as e:
        if type(e).__name__ == "StubError" or isinstance(e, oracle_gaps):
            raise
        raise _load_error(e) from e
    finally:
        if clear is not None:
            clear.clear()


class _Module:
    """``nn.Module`` stand-in: attributes are free to set; reading an unset one raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fail(f"{type(self).__name__} (module stand-in)", f"attribute {name!r}")

    def register_buffer(self, *args: Any, **kwargs: Any) -> None:
        pass


def _inert(name: str) -> Any:
    """A constructor owning no KV: what it returns raises on any use."""

    def build(*args: Any, **kwargs: Any) -> Poison:
        return Poison(f"{name}(...)")

    return build


class _Rope:
    """Restated: a rotary embedding without M-RoPE or a fused kernel (no attribute but its type)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class _StateLayer:
    """Restated: a state layer (``QwenGatedDeltaNetAttention``) registers itself under its
    prefix, as ``MambaBase`` layers do; its shapes are the model class's (:func:`_state`)."""

    def __init__(self, config: Any = None, vllm_config: Any = None, prefix: str = "", **kw: Any) -> None:
        context = vllm_config.compilation_config.static_forward_context
        if prefix in context:
            raise ValueError(f"Duplicate layer name: {prefix}")
        context[prefix] = self


def _unlifted(qualname: str) -> None:
    fail(qualname, "calling this (unlifted) method")


def _stores(stmt: ast.stmt) -> set[str]:
    """What ``stmt`` assigns (comprehension variables aside)."""
    local = {id(n) for c in ast.walk(stmt) if isinstance(c, ast.comprehension)
             for n in ast.walk(c.target)}  # fmt: skip
    return {ast.unparse(n) for n in ast.walk(stmt) if id(n) not in local
            and isinstance(n, (ast.Name, ast.Attribute, ast.Subscript))
            and isinstance(n.ctx, ast.Store)}  # fmt: skip


def _picker(fn: ast.FunctionDef, keep: set[str]) -> Any:
    """Statements of ``fn``'s body that assign only names in ``keep``, ``super().__init__(...)``,
    local functions named in ``keep``, ``if`` blocks whose ``"if <test>"`` is in ``keep``, asserts
    on the parameters and kept names, and ``if ...: raise`` guards on kept names (``self.<x>``
    included)."""
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}

    def pick(s: ast.stmt) -> bool:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            return ast.unparse(s.value.func) == "super().__init__"
        if isinstance(s, ast.FunctionDef):  # a local helper (a layer factory) that is kept
            return s.name in keep
        if isinstance(s, ast.If) and f"if {ast.unparse(s.test)}" in keep:  # a block kept by its test
            return True
        names = {n.id for n in ast.walk(getattr(s, "test", s)) if isinstance(n, ast.Name)}
        if isinstance(s, ast.Assert):
            return names <= params | keep
        if isinstance(s, ast.If) and not s.orelse and all(isinstance(b, ast.Raise) for b in s.body):
            # a guard on the parameters and kept names, and on ``self.<x>`` attributes that are kept
            selfs = {ast.unparse(n) for n in ast.walk(s.test) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == "self"}  # fmt: skip
            return names - {"self"} <= (keep | params) - {"self"} and selfs <= keep
        st = _stores(s)
        return bool(st) and st <= keep

    return pick


def _lift_class(src: Source, ns: dict[str, Any], name: str, methods: tuple[str, ...] = (),
                keep: set[str] | None = None) -> type:
    """Executes a skeleton of class ``name`` into ``ns``: ``__init__`` (whole, or what
    :func:`_picker` keeps of it) and ``methods``; the class-level constants and names; other
    methods raise when called. Bases that are lifted classes stay, the rest become
    :class:`_Module`; class decorators are dropped."""
    node = next((n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:
        raise LookupError(f"{src.rel}: no class {name}")
    body: list[ast.stmt] = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            decos = {ast.unparse(d) for d in item.decorator_list}
            if item.name in ("__init__", *methods):
                if decos - {"property", "classmethod", "staticmethod"}:
                    raise LookupError(f"{src.rel}: {name}.{item.name} has other decorators")
                fn = copy.copy(item)
                if keep is not None and item.name == "__init__":
                    fn.body = [s for s in item.body if _picker(item, keep)(s)]
                body.append(fn)
            else:
                code = f"def {item.name}(self, *a, **k):\n    _unlifted('{name}.{item.name}')"
                stub = ast.parse(code).body[0]
                prop = [ast.Name("property", ast.Load())]
                stub.decorator_list = prop if "property" in decos else []
                body.append(ast.copy_location(stub, item))
        elif isinstance(item, (ast.Assign, ast.AnnAssign)) and item.value is not None:
            v = item.value
            if isinstance(v, ast.Constant) or (isinstance(v, ast.Name) and v.id in ns):
                body.append(item)
    bases = [b.id for b in node.bases if isinstance(b, ast.Name)
             and isinstance(ns.get(b.id), type) and issubclass(ns[b.id], _Module)]  # fmt: skip
    base_nodes = [ast.Name(b, ast.Load()) for b in bases or ["_Module"]]
    cls_node = ast.ClassDef(name=name, bases=base_nodes, keywords=[], body=body or [ast.Pass()],
                            decorator_list=[])  # fmt: skip
    module = ast.Module(body=[ast.copy_location(cls_node, node)], type_ignores=[])
    code = compile(ast.fix_missing_locations(module), str(src.path), "exec", flags=_FLAGS,
                   dont_inherit=True)  # fmt: skip
    with registered(ns):
        exec(code, ns)  # noqa: S102 (the point)
    return ns[name]  # type: ignore[no-any-return]


def _lift_stmts(src: Source, cls: str, fn: str, pick: Any) -> Any:
    """The code of the top-level statements of ``cls.fn`` that ``pick`` selects."""
    c = next(n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    f = next(m for m in c.body if isinstance(m, ast.FunctionDef) and m.name == fn)
    body = [s for s in f.body if pick(s)]
    assert body, f"{src.rel}: {cls}.{fn}: no statement picked"
    module = ast.Module(body=body, type_ignores=[])
    return compile(module, str(src.path), "exec", flags=_FLAGS, dont_inherit=True)


def _lift_nested(src: Source, cls: str, fn: str, pick: Any) -> Any:
    """The code of the statements anywhere inside ``cls.fn`` that ``pick`` selects (source order;
    each picked statement whole, with the blocks it holds)."""
    c = next(n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    f = next(m for m in c.body if isinstance(m, ast.FunctionDef) and m.name == fn)
    body = sorted((s for s in ast.walk(f) if isinstance(s, ast.stmt) and s is not f and pick(s)),
                  key=lambda s: s.lineno)  # fmt: skip
    assert body, f"{src.rel}: {cls}.{fn}: no statement picked"
    return compile(ast.Module(body=body, type_ignores=[]), str(src.path), "exec", flags=_FLAGS, dont_inherit=True)


def _run(code: Any, **scope: Any) -> dict[str, Any]:
    exec(code, {"__builtins__": builtins}, scope)  # noqa: S102 (the point)
    return scope
