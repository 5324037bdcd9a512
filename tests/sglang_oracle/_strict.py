"""The SGLang oracle's strict stand-ins (the shared ones come from :mod:`oracle_kit.strict`).

* :class:`StrictNamespace` holds exactly the attributes it was built with.
  Reading any other attribute raises :class:`StubError` (an AssertionError
  naming the object and the attribute), except the names listed in the
  instance's ``absent`` set, which raise a plain ``AttributeError`` so that
  ``getattr(cfg, name, default)`` / ``hasattr`` probes on a Hugging Face style
  config see "not set", as on a real ``PretrainedConfig``. Setting attributes
  after construction is refused too (SGLang's sizing never mutates its inputs).
* :class:`Poison`, :func:`poison_class`, :class:`StrictModule` and :class:`StubError`:
  :mod:`oracle_kit.strict`.

The oracle re-raises :class:`StubError` instead of reporting it as an SGLang
outcome, so a stub can never produce a number.
"""

from __future__ import annotations

from typing import Any, Iterable

from oracle_kit.strict import Poison, StrictModule, StubError, fail, poison_class

__all__ = ["Poison", "StrictModule", "StrictNamespace", "StubError", "poison_class"]

_fail = fail


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
