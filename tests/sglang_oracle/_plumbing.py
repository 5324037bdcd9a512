"""Sandbox plumbing: the module table, the import hook, the context getters, ``envs``.

Every namespace the sandbox executes SGLang code in gets ``__builtins__`` whose
``__import__`` is :meth:`Builder.importer`: ``sglang.*`` imports are answered
from :attr:`Builder.modules` (an unknown module raises
:class:`~._strict.StubError`), and only a few real modules (torch, logging,
dataclasses, ...) are let through. Nothing is added to ``sys.modules``.
"""

from __future__ import annotations

import ast
import builtins
import logging
from pathlib import Path
from typing import Any, Callable

from oracle_kit.lift import Source
from ._strict import Poison, StrictModule, StrictNamespace, StubError

PREFIX = "sglang_oracle.sandbox"
REAL_MODULES = frozenset(
    {"__future__", "abc", "bisect", "dataclasses", "enum", "logging", "torch", "typing"}
)
#: The runtime-context bags SGLang reads through ``get_<bag>()``.
BAGS = ("parallel", "schedule", "spec", "memory", "disagg", "model", "exec", "platform")

# SGLang logs through ``logging.getLogger(__name__)``; keep the sandbox's loggers silent.
_LOG = logging.getLogger(PREFIX)
_LOG.propagate = False
_LOG.setLevel(logging.CRITICAL + 1)


class Active:
    """The per-call context the stubbed getters read (set by ``Oracle.run``)."""

    def __init__(self) -> None:
        self.ctx: StrictNamespace | None = None
        self.picked: str | None = None

    def require(self) -> Any:
        if self.ctx is None:
            raise StubError("sglang_oracle: a runtime-context getter was called outside Oracle.run")
        return self.ctx


class _EnvValue:
    __slots__ = ("_value",)

    def __init__(self, value: object) -> None:
        self._value = value

    def get(self) -> object:
        return self._value


class Envs:
    """``sglang.srt.environ.envs``: only the variables the active case defines."""

    def __init__(self, active: Active) -> None:
        self._active = active

    def __getattr__(self, name: str) -> _EnvValue:
        if name.startswith("__"):
            raise AttributeError(name)
        values: dict[str, object] = self._active.require().envs
        if name not in values:
            raise StubError(f"sglang_oracle: envs.{name} is not provided by the sandbox")
        return _EnvValue(values[name])


def pick(namespace: dict[str, Any], names: str) -> dict[str, Any]:
    """``{name: namespace[name]}`` for the whitespace-separated ``names``."""
    return {n: namespace[n] for n in names.split()}


class Builder:
    """Holds the module table and makes namespaces whose imports it answers."""

    def __init__(self, root: Path, real: frozenset[str] = frozenset()) -> None:
        self.root = root
        self.real = REAL_MODULES | real
        self.active = Active()
        self.modules: dict[str, StrictModule] = {}
        self.builtins = dict(builtins.__dict__)
        self.builtins["__import__"] = self.importer
        self.getters: dict[str, Callable[[], Any]] = {b: self._getter(b) for b in BAGS}

    def importer(
        self,
        name: str,
        globals: Any = None,
        locals: Any = None,
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        if level != 0:
            raise StubError(f"sglang_oracle: relative import of {name!r} (level {level})")
        if name == "sglang" or name.startswith("sglang."):
            module = self.modules.get(name)
            if module is None:
                raise StubError(f"sglang_oracle: module {name} is not provided by the sandbox")
            if not fromlist:
                raise StubError(f"sglang_oracle: plain `import {name}` is not supported")
            return module
        if name.partition(".")[0] not in self.real:
            raise StubError(f"sglang_oracle: import of {name!r} is not allowed in the sandbox")
        return builtins.__import__(name, globals, locals, fromlist, level)

    def source(self, rel: str) -> Source:
        """The extracted ``sglang/srt/<rel>``."""
        return Source(self.root, f"sglang/srt/{rel}")

    def namespace(self, module: str, **names: Any) -> dict[str, Any]:
        """Fresh module globals for SGLang code, with the sandbox's import hook."""
        ns: dict[str, Any] = {"__builtins__": self.builtins, "__name__": f"{PREFIX}.{module}"}
        ns.update(names)
        return ns

    def provide(
        self, module: str, names: dict[str, Any], *, poison_rest_of: Source | None = None
    ) -> None:
        """Adds ``names`` to the sandbox module ``sglang.srt.<module>``. With
        ``poison_rest_of``, every other name that file's top-level imports take
        from this module becomes a :class:`~._strict.Poison`."""
        full = f"sglang.srt.{module}"
        old = self.modules.get(full)
        attrs = {k: v for k, v in vars(old).items() if not k.startswith("__")} if old else {}
        attrs.update(names)
        if poison_rest_of is not None:
            for node in poison_rest_of.tree.body:
                if isinstance(node, ast.ImportFrom) and node.module == full:
                    for alias in node.names:
                        attrs.setdefault(alias.name, Poison(f"{full}.{alias.name}"))
        self.modules[full] = StrictModule(full, attrs)

    def execute(self, module: str, **names: Any) -> dict[str, Any]:
        """Executes ``sglang/srt/<module as a path>.py`` whole in a fresh namespace (``names``
        added first) and provides its public names as the sandbox module ``module``."""
        ns = self.namespace(module, **names)
        self.source(module.replace(".", "/") + ".py").exec_module(ns)
        self.provide(module, {k: v for k, v in ns.items() if not k.startswith("__")})
        return ns

    def _getter(self, bag: str) -> Callable[[], Any]:
        active = self.active

        def get() -> Any:
            return getattr(active.require(), bag)

        get.__name__ = f"get_{bag}"
        return get
