"""Strict stand-ins: objects that fail loudly instead of inventing a value.

* :class:`StrictNamespace` holds exactly the attributes it was built with.
  Reading any other attribute raises :class:`StubError` (an AssertionError
  naming the object and the attribute), except the names listed in the
  instance's ``absent`` set, which raise a plain ``AttributeError`` so that
  ``getattr(cfg, name, default)`` / ``hasattr`` probes on a Hugging Face style
  config see "not set", as on a real ``PretrainedConfig``. Setting attributes
  after construction is refused too (SGLang's sizing never mutates its inputs).
* :class:`Poison` stands for an import-time name that sizing must never use
  (a DSV4 helper, a kernel, a pool class): calling it, reading its attributes,
  iterating it, comparing or truth-testing it raises :class:`StubError`.
* :func:`poison_class` makes a class that nothing is an instance of, for names
  SGLang only uses in ``isinstance`` checks (the hybrid-model config classes);
  instantiating it raises.
* :class:`StrictModule` is a module whose missing attributes raise
  :class:`StubError`, so ``from sglang.x import y`` of an unprovided ``y``
  fails loudly.

The oracle re-raises :class:`StubError` instead of reporting it as an SGLang
outcome, so a stub can never produce a number.
"""

from __future__ import annotations

import types
from typing import Any, Iterable, NoReturn


class StubError(AssertionError):
    """The sandbox was asked for something it deliberately does not provide."""


def _fail(owner: str, what: str) -> NoReturn:
    raise StubError(f"sglang_oracle: {owner}: {what} is not provided by the sandbox")


class StrictNamespace:
    """A read-only bag of attributes; any other attribute fails loudly."""

    __slots__ = ("__dict__", "_name", "_absent")

    def __init__(self, _name: str, _absent: Iterable[str] = (), **attrs: Any) -> None:
        object.__setattr__(self, "_name", _name)
        object.__setattr__(self, "_absent", frozenset(_absent))
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup failed.
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocol probes (copy, pickle, repr helpers)
        if name in self._absent:
            raise AttributeError(f"{self._name} has no attribute {name!r} (absent on purpose)")
        _fail(self._name, f"attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        _fail(self._name, f"setting attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        _fail(self._name, f"deleting attribute {name!r}")

    def __repr__(self) -> str:
        return f"<strict {self._name}>"


class Poison:
    """An import-time name that pool sizing must never touch."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _die(self, what: str) -> NoReturn:
        _fail(f"poison {self._name}", what)

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
    """A class used only in ``isinstance`` checks: never instantiated, so never matched."""

    def __init__(self: object, *args: Any, **kwargs: Any) -> None:
        _fail(f"poison class {name}", "instantiating it")

    return type(name, (), {"__init__": __init__, "__module__": "sglang_oracle.poison"})


class StrictModule(types.ModuleType):
    """A sandbox module: its missing attributes raise :class:`StubError`."""

    def __init__(self, name: str, attrs: dict[str, Any]) -> None:
        super().__init__(name)
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        _fail(f"module {self.__name__}", f"name {name!r}")
