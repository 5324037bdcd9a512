"""Bounded number parsing for the command line.

Every count the core takes is a signed 64-bit integer, so every number the
command line reads is checked against ``[-2**63, 2**63-1]`` *before* anything
big is computed: ``--available 1e9999999999`` is refused from its exponent,
never by evaluating ``10**9999999999``; a 5000-digit ``--tp`` is refused from
its length. The parsers raise :class:`ValueError` with a message fit to follow
``argument --flag:`` (argparse's prefix).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_NUMBER_CHARS",
    "parse_bytes",
    "parse_finite_float",
    "parse_int",
    "shown",
]

INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)
#: The longest number text read (an int64 needs 19 digits; separators, units and
#: spaces leave plenty of room). Longer texts are refused before any parsing.
MAX_NUMBER_CHARS: Final = 100

_UNITS: Final[dict[str, int]] = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
# sign, integer part (digits and separators, checked below), fraction, exponent, unit
_BYTES_RE: Final = re.compile(
    r"\s*(?P<sign>[+-]?)\s*(?P<int>[0-9][0-9_,]*)?(?:\.(?P<frac>[0-9]*))?"
    r"(?:[eE](?P<exp>[+-]?[0-9]+))?\s*(?P<unit>[a-zA-Z]*)\s*"
)
_COMMA_GROUPS: Final = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_UNDERSCORE_GROUPS: Final = re.compile(r"[0-9]+(?:_[0-9]+)*")
_INT_RE: Final = re.compile(r"\s*[+-]?[0-9]+(?:_[0-9]+)*\s*")


def shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut to about ``limit`` characters for an error message."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


def _check_length(text: str, what: str) -> None:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"not {what}: {shown(text)} is longer than {MAX_NUMBER_CHARS} characters")


def parse_bytes(text: str) -> int:
    """Parse a byte count: ``42949672960``, ``40GiB``, ``40GB``, ``1.5 TiB``, ``1,000GiB``.

    Decimal units (kB, MB, GB, TB) are powers of 1000, binary units (KiB, MiB,
    GiB, TiB) powers of 1024; no unit means bytes. Fractions are rounded down
    to a whole byte. Thousands separators must form well-made groups
    (``1,000,000`` or ``1_000_000``; not ``1,,,0`` or ``10,00``). The result is
    at most ``2**63-1``; that is checked from the digits and the exponent
    before the value is computed.

    Raises:
        ValueError: not a byte count, an unknown unit, malformed separators, a
            negative count, or a count beyond ``2**63-1``.
    """
    _check_length(text, "a byte count")
    m = _BYTES_RE.fullmatch(text)
    if m is None or (m["int"] is None and not m["frac"]):
        raise ValueError(f"not a byte count: {shown(text)} (e.g. 42949672960, 40GiB, 40GB)")
    unit = m["unit"]
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown unit {unit!r} in {shown(text)}; use B, kB, MB, GB, TB (powers of 1000) "
            "or KiB, MiB, GiB, TiB (powers of 1024)"
        )
    whole = m["int"] or ""
    if "," in whole or "_" in whole:
        if not (_COMMA_GROUPS.fullmatch(whole) or _UNDERSCORE_GROUPS.fullmatch(whole)):
            raise ValueError(
                f"malformed thousands separators in {shown(text)}: use groups of three digits "
                "(1,000 or 1_000)"
            )
        whole = whole.replace(",", "").replace("_", "")
    frac = m["frac"] or ""
    exp = int(m["exp"] or 0)  # at most MAX_NUMBER_CHARS digits: cheap
    digits = whole + frac
    significant = digits.lstrip("0")
    if not significant:
        return 0  # zero, whatever the sign or exponent
    if m["sign"] == "-":
        raise ValueError(f"a byte count cannot be negative: {shown(text.strip())}")
    # The value lies in [10**top, 10**(top+1)) before the unit.
    top = len(whole) - (len(digits) - len(significant)) - 1 + exp
    if top >= 19:  # 10**19 > 2**63-1, and every unit is >= 1
        raise _beyond(text, unit)
    if top < -14:  # < 10**-13 before a unit of at most 2**40 < 10**13: under one byte
        return 0
    value = Fraction(int(digits), 10 ** len(frac)) * factor
    value *= Fraction(10) ** exp
    result = math.floor(value)
    if result > INT64_MAX:
        raise _beyond(text, unit)
    return result


def _beyond(text: str, unit: str) -> ValueError:
    what = text.strip() if len(text.strip()) <= 40 else shown(text.strip())
    if unit:
        return ValueError(f"{what} is beyond 2**63-1 = {INT64_MAX:,} bytes")
    return ValueError(f"{what} bytes is beyond 2**63-1 = {INT64_MAX:,}")


def parse_int(text: str, minimum: int | None = INT64_MIN, maximum: int = INT64_MAX) -> int:
    """Parse an integer within ``[minimum, maximum]`` (within int64 by default).

    ASCII digits only, with an optional sign and ``_`` between digits (Python's
    spelling); the length is checked before the digits are converted.

    Raises:
        ValueError: not an integer, or out of range (the message says which).
    """
    _check_length(text, "an integer")
    if not _INT_RE.fullmatch(text):
        raise ValueError(f"expected an integer, got {shown(text)}")
    value = int(text)
    low = INT64_MIN if minimum is None else minimum
    if value > maximum:
        limit = "2**63-1" if maximum == INT64_MAX else f"{maximum:,}"
        raise ValueError(f"expected an integer <= {limit}, got {shown(text.strip())}")
    if value < low:
        limit = "-2**63" if low == INT64_MIN else str(low)
        raise ValueError(f"expected an integer >= {limit}, got {value}")
    return value


def parse_finite_float(text: str) -> float:
    """Parse a finite float (``nan``, ``inf`` and overflowing values such as ``1e400`` refused).

    Raises:
        ValueError: not a number, or not finite.
    """
    _check_length(text, "a number")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number, got {shown(text)}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {shown(text.strip())}")
    return value
