"""Strict stand-ins both engine oracles use: objects that fail loudly instead of inventing a value.

* :class:`Poison` stands for an import-time name the planning path must never use
  (a kernel, a pool class): calling it, reading its attributes, iterating,
  comparing or truth-testing it raises :class:`StubError`.
* :func:`poison_class` makes a class nothing is an instance of, for names the
  engine only uses in ``isinstance`` checks or only stores; instantiating it raises.
* :class:`StrictModule` is a sandbox module whose missing attributes raise, so
  ``from engine.x import y`` of an unprovided ``y`` fails loudly.

The oracles re-raise :class:`StubError` (an ``AssertionError``) instead of
reporting it as the engine's outcome, so a stub can never produce a number.
"""

from __future__ import annotations

import types
from typing import Any, NoReturn


class StubError(AssertionError):
    """The sandbox was asked for something it deliberately does not provide."""


def fail(owner: str, what: str) -> NoReturn:
    raise StubError(f"oracle sandbox: {owner}: {what} is not provided by the sandbox")


class Poison:
    """An import-time name the planning path must never touch."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _die(self, what: str) -> NoReturn:
        fail(f"poison {self._name}", what)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        self._die(f"attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._die(f"setting {name!r}")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._die("calling it")

    def __bool__(self) -> bool:
        self._die("truth-testing it")

    def __iter__(self) -> NoReturn:
        self._die("iterating it")

    def __len__(self) -> int:
        self._die("len()")

    def __eq__(self, other: object) -> bool:
        self._die("comparing it")

    def __hash__(self) -> int:
        self._die("hashing it")

    def __getitem__(self, key: object) -> NoReturn:
        self._die("indexing it")

    def __repr__(self) -> str:
        return f"<poison {self._name}>"


def poison_class(name: str) -> type:
    """A class only used in ``isinstance`` checks or stored: never instantiated, so never matched."""

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        fail(f"poison class {name}", "instantiating it")

    return type(name, (), {"__init__": __init__, "__module__": "oracle_kit.poison"})


class StrictModule(types.ModuleType):
    """A sandbox module: its missing attributes raise :class:`StubError`."""

    def __init__(self, name: str, attrs: dict[str, Any]) -> None:
        super().__init__(name)
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fail(f"module {self.__name__}", f"name {name!r}")
