"""The INV-8 guard shared by the robustness tests: only typed errors may come out of kvbudget."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from kvbudget import KVBudgetError

ALLOWED = (KVBudgetError, TypeError, OverflowError)


class _Unset:
    pass


UNSET: Any = _Unset()


def guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Calls fn; an allowed error gives UNSET, anything else fails the test."""
    try:
        return fn(*args, **kwargs)
    except ALLOWED as e:
        if isinstance(e, KVBudgetError):
            assert isinstance(e.code, str) and e.code, f"{type(e).__name__} without a code"
            assert str(e), f"{type(e).__name__} without a message"
        return UNSET
    except BaseException as e:  # noqa: BLE001 - PanicException is a BaseException
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        name = getattr(fn, "__qualname__", repr(fn))
        pytest.fail(
            f"{name}(*{args!r:.300}, **{kwargs!r:.600}) raised {type(e).__module__}.{type(e).__name__}: {e}"
        )
