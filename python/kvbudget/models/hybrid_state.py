"""Named hybrid-state models: released checkpoints' ``config.json`` values, with their sources.

The models people serve with a recurrent state beside the KV cache (Qwen3-Next,
Qwen3.5 dense and MoE, Nemotron-H and Nemotron 3, Falcon-H1, Kimi-Linear, LFM2; Jamba, which only vLLM
serves: :attr:`HybridStateModel.engines`) are planned from
their config: the layer kinds, the state shapes and the attention geometry are
read as SGLang 0.5.23's config classes read them
(:func:`kvbudget.sglang.resolve_sglang`,
:func:`kvbudget.sglang.state_from_hf_config`). The bundled
``data/hybrid_state_models.json`` holds, per checkpoint, the published keys those
readers use, its Hugging Face id and file, and a note on how the values were
checked; ``kvbudget plan NAME`` plans one as if its config were given.

``tests/test_sglang_model.py`` and ``tests/test_sglang_state_model.py`` hold every
entry to SGLang's own config code; in vLLM mode (``kvbudget plan NAME --engine vllm``,
:func:`kvbudget.vllm.layers_from_hf_config`) the same configs are read as vLLM's model classes
read them (tests/test_vllm_state_models.py).
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from kvbudget.errors import UnknownNameError

__all__ = ["HybridStateModel", "UnknownHybridStateModelError", "find_hybrid_state_model", "get_hybrid_state_model",
           "hybrid_state_entries", "list_hybrid_state_models"]  # fmt: skip


class UnknownHybridStateModelError(UnknownNameError):
    """No bundled hybrid-state model has this name; the message lists the closest names."""

    what = "hybrid-state model"
    lister = "list_hybrid_state_models"


@dataclass(frozen=True)
class HybridStateModel:
    """One released hybrid-state checkpoint's config values.

    Attributes:
        name: the model's name here: its Hugging Face id's last part, lower case
            (``"qwen3-next-80b-a3b-instruct"``).
        hf_id: the Hugging Face model id.
        source: where the values come from (``model_id`` and ``file``).
        note: how the values were checked against the published file.
        config: the published ``config.json`` keys the readers use (a private copy).
        engines: the engines that serve it (``"sglang"``, ``"vllm"``); SGLang mode refuses
            the others with SGLang's reason (Jamba: no SGLang class).
    """

    name: str
    hf_id: str
    source: dict[str, Any] = field(hash=False)
    note: str
    config: dict[str, Any] = field(hash=False, repr=False)
    engines: tuple[str, ...] = ("sglang", "vllm")


@functools.lru_cache(maxsize=1)
def hybrid_state_entries() -> tuple[dict[str, Any], ...]:
    """The bundled table's entries as stored (``name``, ``source``, ``note``, ``expect``,
    ``config``); callers get the parsed file, do not mutate it."""
    text = resources.files("kvbudget.models").joinpath("data/hybrid_state_models.json").read_text("utf-8")
    return tuple(json.loads(text)["entries"])


def _name(entry: dict[str, Any]) -> str:
    return str(entry["source"]["model_id"]).rsplit("/", 1)[-1].lower()


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, dict[str, Any]]:
    """Every accepted spelling (the name, the HF id, the table's own key), lower case -> entry."""
    out: dict[str, dict[str, Any]] = {}
    for e in hybrid_state_entries():
        for alias in (_name(e), str(e["source"]["model_id"]), str(e["name"])):
            out.setdefault(alias.lower(), e)
    return out


def list_hybrid_state_models() -> list[str]:
    """The bundled hybrid-state model names, in the table's order."""
    return [_name(e) for e in hybrid_state_entries()]


def find_hybrid_state_model(name: str) -> HybridStateModel | None:
    """The bundled model called ``name`` (its name, HF id or table key, any case), or None."""
    e = _index().get(name.strip().lower())
    if e is None:
        return None
    return HybridStateModel(name=_name(e), hf_id=str(e["source"]["model_id"]), source=dict(e["source"]),
                            note=str(e["note"]), config=json.loads(json.dumps(e["config"])),
                            engines=tuple(e.get("engines", ("sglang", "vllm"))))  # fmt: skip


def get_hybrid_state_model(name: str) -> HybridStateModel:
    """The bundled model called ``name``.

    Raises:
        UnknownHybridStateModelError: no such model (the message names the closest ones).
    """
    found = find_hybrid_state_model(name)
    if found is None:
        close = difflib.get_close_matches(name.strip().lower(), list_hybrid_state_models(), n=3, cutoff=0.5)
        raise UnknownHybridStateModelError(name, close)
    return found
