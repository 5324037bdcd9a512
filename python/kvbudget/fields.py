"""The field table: every input of kvbudget, as the Rust core declares it.

Each value type's fields (name, kind, Python type, default, doc, and whether
``plan_many`` takes it as a column) come from one declaration in the core
(``rust/core/src/fields.rs``). The constructors, getters, reprs and
``replace`` of the value types, the keywords of :func:`kvbudget.plan_many`,
:meth:`kvbudget.Scenario.replace` and the type stubs all derive from it.
"""

from __future__ import annotations

from typing import NamedTuple, Union

from kvbudget import _core

__all__ = ["Field", "FIELDS", "SCENARIO_FIELDS", "canonical_name", "scenario_field"]

#: The value types a :class:`kvbudget.Scenario` is made of, in order.
SCENARIO_OWNERS = ("AttentionShape", "ServingConfig", "SpeculativeConfig")


class Field(NamedTuple):
    """One declared field."""

    name: str
    """The keyword (and JSON key, and batch column) name."""
    owner: str
    """The declared type: ``AttentionShape`` (``ModelGeometry``'s fields), ``ServingConfig``, ..."""
    kind: str
    """The core's kind: ``count``, ``positive``, ``opt_count``, ``opt_positive``, ``signed``,
    ``ratio``, ``flag``, ``choice``, ``opt_choice``, ``draft``."""
    py: str
    """The Python type: ``int``, ``opt_int``, ``float``, ``bool``, ``name``, ``opt_name``, ``draft``."""
    batch: bool
    """``plan_many`` takes it as a column."""
    cell_dtype: str
    """The numpy dtype of its batch column (``int64``, ``float64``, ``bool``, ``uint8``)."""
    choices: tuple[str, ...]
    """Canonical names of a choice field, in batch-code order (empty otherwise)."""
    required: bool
    """The constructor needs it."""
    doc: str
    """What it is, units included."""
    default: Union[int, float, bool, str, None]
    """The default value."""


#: Every declared type's fields, in declaration order.
FIELDS: dict[str, tuple[Field, ...]] = {
    owner: tuple(Field(**row) for row in rows) for owner, rows in _core.FIELDS.items()
}

#: The fields of a scenario (model shape, serving, speculative), by name.
SCENARIO_FIELDS: dict[str, Field] = {f.name: f for owner in SCENARIO_OWNERS for f in FIELDS[owner]}


def scenario_field(name: str) -> Field:
    """The scenario field called ``name``.

    Raises:
        KeyError: no scenario field has that name.
    """
    return SCENARIO_FIELDS[name]


def canonical_name(field: str, name: str) -> str:
    """The canonical spelling of ``name`` for the choice field ``field``.

    Parsed by the core, aliases included: ``canonical_name("kv_cache_dtype", "fp8")``
    is ``"fp8_e4m3"``, ``canonical_name("algorithm", "MTP")`` is ``"nextn"``.

    Raises:
        InvalidConfigError: an unknown name, or a field that is not a choice.
    """
    return _core._canonical_name(field, name)
