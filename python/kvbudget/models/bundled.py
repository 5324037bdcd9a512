"""Bundled published ``config.json`` files: released checkpoints' config values with their sources.

A bundled table (a JSON file under ``kvbudget/models/data``) holds, per checkpoint, its Hugging
Face id and file, where the values were copied from and how they were checked (``note``), the
engines that serve it, and the config values themselves. ``kvbudget plan NAME`` plans one as if
its ``config.json`` were given; the engines' readers read the config as their model classes do.

Two tables use this: :mod:`kvbudget.models.hybrid_state` (models with a recurrent state beside
the KV cache) and :mod:`kvbudget.models.published` (attention models: MLA, DSA, hybrid-SWA and
plain ones). :class:`BundledTable` is the lookup both share.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from collections.abc import Callable
from typing import Any

from kvbudget.errors import UnknownNameError

__all__ = ["BundledConfig", "BundledTable", "table_functions"]

#: The engines a bundled model is served by unless its entry says otherwise.
BOTH_ENGINES: tuple[str, ...] = ("sglang", "vllm")


@dataclass(frozen=True)
class BundledConfig:
    """One released checkpoint's config values.

    Attributes:
        name: the model's name here: its Hugging Face id's last part, lower case
            (``"qwen3-next-80b-a3b-instruct"``).
        hf_id: the Hugging Face model id.
        source: where the values come from (``model_id``, ``file``, and ``copy`` where they were
            taken from a public copy of the file).
        note: how the values were checked against the published file.
        config: the published ``config.json`` values (a private copy).
        engines: the engines that serve it (``"sglang"``, ``"vllm"``); SGLang mode refuses
            the others with SGLang's reason (Jamba: no SGLang class).
    """

    name: str
    hf_id: str
    source: dict[str, Any] = field(hash=False)
    note: str
    config: dict[str, Any] = field(hash=False, repr=False)
    engines: tuple[str, ...] = BOTH_ENGINES


def _name(entry: dict[str, Any]) -> str:
    return str(entry["source"]["model_id"]).rsplit("/", 1)[-1].lower()


class BundledTable:
    """The lookup of one bundled table: ``filename`` under ``kvbudget/models/data``, its unknown
    names raised as ``error`` (an :class:`~kvbudget.errors.UnknownNameError`)."""

    def __init__(self, filename: str, error: type[UnknownNameError]) -> None:
        self._filename = filename
        self._error = error

    @functools.cached_property
    def _entries(self) -> tuple[dict[str, Any], ...]:
        text = resources.files("kvbudget.models").joinpath(f"data/{self._filename}").read_text("utf-8")
        return tuple(json.loads(text)["entries"])

    def entries(self) -> tuple[dict[str, Any], ...]:
        """The table's entries as stored (``name``, ``source``, ``note``, ``config``, ``engines``
        where not both, ...); callers get the parsed file, do not mutate it."""
        return self._entries

    @functools.cached_property
    def _index(self) -> dict[str, dict[str, Any]]:
        """Every accepted spelling (the name, the HF id, the table's own key), lower case -> entry."""
        out: dict[str, dict[str, Any]] = {}
        for e in self._entries:
            for alias in (_name(e), str(e["source"]["model_id"]), str(e["name"])):
                out.setdefault(alias.lower(), e)
        return out

    def names(self) -> list[str]:
        """The bundled model names, in the table's order."""
        return [_name(e) for e in self._entries]

    def find(self, name: str) -> BundledConfig | None:
        """The bundled model called ``name`` (its name, HF id or table key, any case), or None."""
        e = self._index.get(name.strip().lower())
        if e is None:
            return None
        return BundledConfig(name=_name(e), hf_id=str(e["source"]["model_id"]), source=dict(e["source"]),
                             note=str(e["note"]), config=json.loads(json.dumps(e["config"])),
                             engines=tuple(e.get("engines", BOTH_ENGINES)))  # fmt: skip

    def get(self, name: str) -> BundledConfig:
        """The bundled model called ``name``.

        Raises:
            UnknownNameError: the table's own kind of it (``UnknownHybridStateModelError``,
                ``UnknownPublishedModelError``), naming the closest names.
        """
        found = self.find(name)
        if found is None:
            close = difflib.get_close_matches(name.strip().lower(), self.names(), n=3, cutoff=0.5)
            raise self._error(name, close)
        return found


def table_functions(filename: str, error: type[UnknownNameError]) -> tuple[
        Callable[[], tuple[dict[str, Any], ...]], Callable[[], list[str]],
        Callable[[str], BundledConfig | None], Callable[[str], BundledConfig]]:  # fmt: skip
    """A bundled table's public functions, in this order: its entries as stored, its names, a
    name's model or None, a name's model or ``error`` (:class:`BundledTable`)."""
    table = BundledTable(filename, error)
    return table.entries, table.names, table.find, table.get
