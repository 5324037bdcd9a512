"""Old import paths kept for one release: a module ``__getattr__`` that forwards to the new home.

A module that moved leaves a stub at its old path whose ``__getattr__`` is
:func:`moved`: reading a name from it warns with a :class:`DeprecationWarning`
naming the new path, and returns the new module's object. The stubs go in
kvbudget 0.3.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved"]


def moved(old: str, new: str | Mapping[str, str]) -> Callable[[str], Any]:
    """``__getattr__`` for the stub at ``old``: every name from module ``new``, or each name of
    the mapping from its own module."""

    def __getattr__(name: str) -> Any:
        home = new if isinstance(new, str) else new.get(name)
        if home is None or name.startswith("__"):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        try:
            value = getattr(importlib.import_module(home), name)
        except AttributeError:
            raise AttributeError(f"module {old!r} has no attribute {name!r}") from None
        warnings.warn(f"{old}.{name} moved to {home}.{name}; the old path goes in kvbudget 0.3",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        return value

    return __getattr__
