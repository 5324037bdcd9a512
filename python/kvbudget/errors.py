"""The kvbudget exception hierarchy.

Every error kvbudget raises derives from :class:`KVBudgetError`, itself a
:class:`ValueError`. Each class has a ``code`` attribute with a stable string:

- ``InvalidConfigError`` (``"invalid_config"``): an input is out of range,
  inconsistent, or missing for the configurator asked for.
  ``PlanOverflowError`` (``"overflow"``) is the subclass for values too large
  for 64-bit arithmetic.
- ``NotEnoughMemoryError`` (``"not_enough_memory"``): the budget gives no tokens.
- ``SWAPoolTooSmallError`` (``"swa_pool_too_small"``): the SWA pool cannot
  admit one request (``window + page_size >= swa tokens``).
- ``AllocationError`` (``"allocation_failed"``): allocating a plan failed part
  way; everything allocated so far was released. Also a :class:`MemoryError`.
- ``UnknownNameError`` (``"unknown_name"``): no model or GPU preset has this
  name (``UnknownPresetError``, ``UnknownGpuError``). Also a :class:`KeyError`.
"""

from __future__ import annotations

from typing import Any

from kvbudget._core import (
    InvalidConfigError,
    KVBudgetError,
    NotEnoughMemoryError,
    PlanOverflowError,
    SWAPoolTooSmallError,
)

__all__ = [
    "AllocationError",
    "InvalidConfigError",
    "KVBudgetError",
    "NotEnoughMemoryError",
    "PlanOverflowError",
    "SWAPoolTooSmallError",
    "UnknownNameError",
]


class AllocationError(KVBudgetError, MemoryError):
    """Allocating a plan failed part way; nothing allocated is left alive.

    Attributes name where it failed: ``pool`` and ``layer_id`` (``None`` for a
    pool-wide slab), ``kind`` (the tensor kind or ``"slab"``), ``requested_bytes``
    (the allocation that failed) and ``held_bytes`` (bytes already allocated and
    then released).
    """

    code = "allocation_failed"

    def __init__(
        self,
        message: str,
        *,
        pool: str,
        layer_id: int | None,
        kind: str,
        requested_bytes: int,
        held_bytes: int,
    ) -> None:
        super().__init__(message)
        self.pool = pool
        self.layer_id = layer_id
        self.kind = kind
        self.requested_bytes = requested_bytes
        self.held_bytes = held_bytes

    def __reduce__(self) -> tuple[object, ...]:
        """Pickles with its fields (BaseException would replay only the message)."""
        fields = {
            "pool": self.pool,
            "layer_id": self.layer_id,
            "kind": self.kind,
            "requested_bytes": self.requested_bytes,
            "held_bytes": self.held_bytes,
        }
        return (_rebuild_allocation_error, (str(self), fields))


def _rebuild_allocation_error(message: str, fields: dict[str, Any]) -> AllocationError:
    return AllocationError(message, **fields)


class UnknownNameError(KVBudgetError, KeyError):
    """No preset of this kind has the name; ``suggestions`` holds the closest names.

    A :class:`KeyError` too (presets are looked up by name), so ``except KeyError``
    keeps working.
    """

    code = "unknown_name"
    #: What kind of preset (``"model preset"``, ``"GPU preset"``).
    what: str = "preset"
    #: The function that lists every name.
    lister: str = ""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        self.name = name
        self.suggestions = suggestions
        self.message = f"unknown {self.what} {name!r}{hint} ({self.lister}() lists them all)"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        """Pickles as its name and suggestions."""
        return (type(self), (self.name, self.suggestions))


#: The optional dependencies and the extra that installs each.
_EXTRAS = {"torch": "torch", "matplotlib": "plot"}


def _missing_extra(what: str, e: ModuleNotFoundError) -> ModuleNotFoundError:
    """``e`` (an optional dependency that is not installed) with the install line that fixes it."""
    extra = _EXTRAS.get((e.name or "").partition(".")[0])
    if extra is None:
        return e
    return ModuleNotFoundError(
        f"{what} needs {e.name}, which is not installed: pip install 'kvbudget[{extra}]'", name=e.name
    )
