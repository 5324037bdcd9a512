"""Named presets for real models: target geometries and their speculative drafts.

Every entry of the bundled ``data/models.json`` (a verbatim copy of the
project's researched model table; each entry keeps its ``source``) is a
preset. ``get_preset("gemma-3-27b").model_kwargs`` are the keyword arguments of
``kvbudget.ModelGeometry``; a draft preset's ``draft_kwargs`` are those of
``kvbudget.DraftGeometry``.

Geometry conventions (the same as :mod:`kvbudget.models.hf`):

* ``sliding_window_size`` is SGLang's exclusive window: HF ``sliding_window``
  minus 1, except MiMo-V2 (SGLang uses its ``sliding_window_size`` key as is)
  and Llama 4 chunked attention (window = ``attention_chunk_size``).
* Gemma 3n's KV-shared layers allocate no cache and are left out of the layer
  ids (``kv_cache_layers_full`` / ``kv_cache_layers_swa`` in the table).
* MLA models (DeepSeek-V3) carry ``kv_lora_rank`` and ``qk_rope_head_dim``.
  ``DraftGeometry`` cannot describe an MLA draft, so the DeepSeek-V3 MTP
  preset has ``draft_kwargs=None``: plan it with no draft geometry (the draft
  takes the target's MLA geometry) and ``draft_num_layers`` layers.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import json
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, Literal

from kvbudget.errors import UnknownNameError

if TYPE_CHECKING:
    from kvbudget.sglang.hybrid import SGLangHybrid

__all__ = [
    "Preset",
    "UnknownPresetError",
    "get_preset",
    "list_presets",
    "drafts_for",
]

Role = Literal["target", "draft"]
DraftKindName = Literal["eagle3", "mtp", "standalone"]

_ROLE_KIND: Final[dict[str, DraftKindName]] = {
    "draft-eagle3": "eagle3",
    "draft-mtp": "mtp",
    "draft-standalone": "standalone",
}


class UnknownPresetError(UnknownNameError):
    """No model preset has this name; the message lists the closest names."""

    what = "model preset"
    lister = "list_presets"


@dataclass(frozen=True)
class Preset:
    """One model (target or draft) with its KV geometry and provenance.

    Attributes:
        name: the preset name (lower case), e.g. ``"gemma-3-27b"``.
        display_name: the model table's own name, e.g. ``"Gemma-3-27B (text)"``.
        hf_id: the Hugging Face repo id as the table gives it (may hold a
            ``(-it)`` variant marker), or None for template-only drafts.
        role: ``"target"`` or ``"draft"``.
        draft_kind: ``"eagle3"``, ``"mtp"`` or ``"standalone"`` for drafts.
        target: the draft's (first) target preset name; None for targets.
        targets: every target preset the draft is listed for.
        source: where the numbers come from (the table's ``source``).
        model_kwargs: ``kvbudget.ModelGeometry`` keyword arguments for this
            model's own KV layers (also given for drafts: their layers as a model).
        draft_kwargs: ``kvbudget.DraftGeometry`` keyword arguments (drafts
            only): ``DraftGeometry.from_model`` of ``model_kwargs``, the one
            rule for a model used as a draft; None for MLA drafts, which
            DraftGeometry cannot describe.
        draft_num_layers: the draft's KV layers (SpeculativeConfig's
            ``draft_num_layers``); None for targets.
        notes: the table's notes.
        kv_cache_dtype: suggested kv_cache_dtype (the model dtype, which is
            SGLang's ``auto``), or None where the config's dtype is unknown.
        kv_cache_dtype_note: why that dtype.
        hf_sliding_window: the HF (inclusive) ``sliding_window``, if any.
        aliases: other names ``get_preset`` accepts.
        architectures: the checkpoint's HF ``architectures`` (what SGLang reads
            to choose its pools; see :meth:`sglang_hybrid`).
        entry: the full table entry (extra keys documented in models.md).
    """

    name: str
    display_name: str
    hf_id: str | None
    role: Role
    draft_kind: DraftKindName | None
    target: str | None
    targets: tuple[str, ...]
    source: str
    model_kwargs: dict[str, Any] = field(hash=False)
    draft_kwargs: dict[str, Any] | None = field(hash=False)
    draft_num_layers: int | None
    notes: str
    kv_cache_dtype: str | None
    kv_cache_dtype_note: str
    hf_sliding_window: int | None
    aliases: tuple[str, ...]
    architectures: tuple[str, ...]
    entry: dict[str, Any] = field(hash=False, repr=False, compare=False)

    def sglang_text_config(self) -> dict[str, Any]:
        """The HF text-config keys SGLang's pool choice reads, rebuilt from the table:
        ``num_hidden_layers``, ``layer_types`` (from the layer ids), ``sliding_window``, and
        MiMo-V2's ``hybrid_layer_pattern``."""
        e = self.entry
        n = e["num_layers"]
        swa = set(e["swa_layer_ids"])
        cfg: dict[str, Any] = {
            "num_hidden_layers": n,
            "layer_types": ["sliding_attention" if i in swa else "full_attention" for i in range(n)],
            "sliding_window": e["sliding_window"],
        }
        if "hybrid_layer_pattern" in e.get("layer_type_convention", ""):
            cfg["hybrid_layer_pattern"] = [int(i in swa) for i in range(n)]
        return cfg

    def hf_config(self) -> dict[str, Any]:
        """The model's HF config as far as the table gives it (flattened: no ``text_config``):
        :meth:`sglang_text_config` plus ``architectures``, the heads, dims and hidden size,
        ``dtype``, ``max_position_embeddings``, Llama 4's ``attention_chunk_size`` / ``no_rope_layers`` (0 on its global
        layers), MLA's latent keys and the MTP layer count. What
        :func:`kvbudget.vllm.models.layers_from_hf_config` reads for a preset."""
        e = self.entry
        cfg: dict[str, Any] = {"architectures": list(self.architectures), **self.sglang_text_config(),
                               "num_attention_heads": e["num_attention_heads"],
                               "num_key_value_heads": e["num_kv_heads"], "head_dim": e["head_dim"],
                               "hidden_size": e["hidden_size"], "dtype": e.get("dtype"),
                               "max_position_embeddings": e.get("max_position_embeddings")}  # fmt: skip
        if not e["swa_layer_ids"]:
            del cfg["layer_types"]
        if e.get("attention_chunk_size"):
            full = set(e["full_layer_ids"])
            cfg.update(attention_chunk_size=e["attention_chunk_size"],
                       no_rope_layers=[int(i not in full) for i in range(e["num_layers"])])  # fmt: skip
            del cfg["layer_types"]
        if e.get("mla"):
            cfg.update({k: e["mla"][k] for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")})
        if e.get("mtp_layers"):
            cfg["num_nextn_predict_layers"] = e["mtp_layers"]
        return cfg

    def sglang_hybrid(self, disable_hybrid_swa_memory: bool = False) -> SGLangHybrid:
        """Whether SGLang 0.5.23 gives this model separate full and SWA pools, and why
        (:func:`kvbudget.sglang.hybrid.sglang_hybrid_swa` on :attr:`architectures`)."""
        from kvbudget.sglang.hybrid import sglang_hybrid_swa

        return sglang_hybrid_swa(
            self.architectures, self.sglang_text_config(),
            disable_hybrid_swa_memory=disable_hybrid_swa_memory,
        )  # fmt: skip

    def model_geometry(self) -> Any:
        """Build ``kvbudget.ModelGeometry(**self.model_kwargs)``."""
        cls = getattr(importlib.import_module("kvbudget"), "ModelGeometry")
        return cls(**self.model_kwargs)

    def as_draft_geometry(self, num_layers: int | None = None) -> Any:
        """This model used as a (standalone) draft: ``kvbudget.DraftGeometry.from_model``.

        The one rule for a model as a draft, for any preset (target or draft):
        its full layers' geometry (its SWA layers must match it) with SGLang's
        capacity rule, or an all-SWA model's SWA geometry with capacity
        ``"swa"``. A draft preset's :meth:`draft_geometry` is this.

        Raises:
            kvbudget.InvalidConfigError: an MLA model, or SWA layers whose
                heads or dims differ from the full layers'.
        """
        cls = getattr(importlib.import_module("kvbudget"), "DraftGeometry")
        return cls.from_model(self.model_geometry(), num_layers)

    def draft_geometry(self) -> Any:
        """Build ``kvbudget.DraftGeometry(**self.draft_kwargs)``.

        Raises:
            ValueError: the preset is a target, or an MLA draft (no draft_kwargs).
        """
        if self.draft_kwargs is None:
            raise ValueError(
                f"preset {self.name!r} has no DraftGeometry "
                + (
                    "(it is a target)"
                    if self.role == "target"
                    else "(MLA draft: plan it with no draft geometry and "
                    f"draft_num_layers={self.draft_num_layers})"
                )
            )
        cls = getattr(importlib.import_module("kvbudget"), "DraftGeometry")
        return cls(**self.draft_kwargs)


def _norm(name: str) -> str:
    return " ".join(name.strip().lower().split())


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files("kvbudget.models").joinpath("data/models.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _sglang_window(entry: dict[str, Any]) -> int | None:
    """SGLang's sliding_window_size for an entry with SWA layers."""
    if not entry["swa_layer_ids"]:
        return None
    chunk = entry.get("attention_chunk_size")
    if chunk is not None:  # Llama 4 chunked attention: model_runner uses it as is
        return int(chunk)
    w = entry["sliding_window"]
    if w is None:
        raise ValueError(f"{entry['name']}: SWA layers without a window")
    if str(entry["layer_type_convention"]).startswith(("hybrid_layer_pattern", "weights under")):
        # MiMo-V2: SGLang has no get_attention_sliding_window_size for it and
        # passes the config's sliding_window_size (== sliding_window) unchanged.
        return int(w)
    return int(w) - 1


def _model_kwargs(entry: dict[str, Any]) -> dict[str, Any]:
    owning = entry.get("kv_owning_layer_ids")
    keep = set(owning) if owning is not None else None
    full = [i for i in entry["full_layer_ids"] if keep is None or i in keep]
    swa = [i for i in entry["swa_layer_ids"] if keep is None or i in keep]
    from kvbudget.models.hf import GEOMETRY_KEYS, declared_defaults

    # Every geometry key at its ModelGeometry default unless the entry gives it.
    kw: dict[str, Any] = declared_defaults(GEOMETRY_KEYS, "AttentionShape")
    kw.update(
        full_attention_layer_ids=full,
        swa_attention_layer_ids=swa,
        num_kv_heads=entry["num_kv_heads"],
        head_dim=entry["head_dim"],
        v_head_dim=entry["v_head_dim"],
    )
    if swa:
        kw["swa_num_kv_heads"] = entry["swa_num_kv_heads"]
        kw["swa_head_dim"] = entry["swa_head_dim"]
        kw["swa_v_head_dim"] = entry["swa_v_head_dim"]
        kw["sliding_window_size"] = _sglang_window(entry)
    mla = entry.get("mla")
    if mla:
        kw["kv_lora_rank"] = mla["kv_lora_rank"]
        kw["qk_rope_head_dim"] = mla["qk_rope_head_dim"]
    return kw


def _draft_kwargs(model_kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """A draft preset's ``DraftGeometry`` kwargs: its own layers as a model, by the one rule.

    ``DraftGeometry.from_model`` decides (full layers' geometry with SGLang's
    capacity rule; an all-SWA draft such as MiMo-V2's MTP layers at its SWA
    geometry with capacity ``"swa"``); MLA drafts give None.
    """
    if model_kwargs["kv_lora_rank"] is not None:
        return None
    from kvbudget._core import DraftGeometry, ModelGeometry

    geom = DraftGeometry.from_model(ModelGeometry(**model_kwargs))
    from kvbudget.models.hf import DRAFT_KEYS

    return {key: getattr(geom, key) for key in DRAFT_KEYS}


@functools.lru_cache(maxsize=1)
def _index() -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(preset name -> preset row, normalized alias -> preset name)."""
    data = _data()
    entries = {m["name"]: m for m in data["models"]}
    rows: dict[str, dict[str, Any]] = {}
    aliases: dict[str, str] = {}
    for row in data["presets"]:
        name = row["preset"]
        rows[name] = {**row, "_entry": entries[row["entry"]]}
        for a in [name, row["entry"], *row["aliases"]]:
            aliases.setdefault(_norm(a), name)
    return rows, aliases


def _build(row: dict[str, Any]) -> Preset:
    entry: dict[str, Any] = json.loads(json.dumps(row["_entry"]))  # a private deep copy
    is_draft = entry["role"] != "target"
    targets = tuple(row["targets"])
    model_kwargs = _model_kwargs(entry)
    return Preset(
        name=row["preset"],
        display_name=entry["name"],
        hf_id=entry["hf_id"],
        role="draft" if is_draft else "target",
        draft_kind=_ROLE_KIND[entry["role"]] if is_draft else None,
        target=targets[0] if targets else None,
        targets=targets,
        source=entry["source"],
        model_kwargs=model_kwargs,
        draft_kwargs=_draft_kwargs(model_kwargs) if is_draft else None,
        draft_num_layers=(entry["kv_cache_layers_full"] + entry["kv_cache_layers_swa"])
        if is_draft
        else None,
        notes=entry["notes"],
        kv_cache_dtype=row["suggested_kv_cache_dtype"],
        kv_cache_dtype_note=row["kv_cache_dtype_note"],
        hf_sliding_window=entry["sliding_window"],
        aliases=tuple(row["aliases"]),
        architectures=tuple(row["architectures"]),
        entry=entry,
    )


def list_presets(role: Role | None = None) -> list[str]:
    """Preset names, targets first, in the table's order.

    Args:
        role: ``"target"`` or ``"draft"`` to list only those.
    """
    if role not in (None, "target", "draft"):
        raise ValueError(f"role must be 'target', 'draft' or None, got {role!r}")
    rows, _ = _index()
    return [
        n
        for n, r in rows.items()
        if role is None or (r["_entry"]["role"] == "target") == (role == "target")
    ]


def get_preset(name: str) -> Preset:
    """The preset called ``name`` (case-insensitive; aliases and HF ids accepted).

    Raises:
        UnknownPresetError: (a KeyError) no such preset; the message suggests
            the closest names.
    """
    if not isinstance(name, str):
        raise TypeError(f"preset name must be a str, got {type(name).__name__}")
    rows, aliases = _index()
    key = aliases.get(_norm(name))
    if key is None:
        pool = sorted(set(rows) | set(aliases))
        close = difflib.get_close_matches(_norm(name), pool, n=3, cutoff=0.5)
        suggestions = list(dict.fromkeys(aliases.get(c, c) for c in close))
        raise UnknownPresetError(name, suggestions)
    return _build(rows[key])


def drafts_for(target: str) -> list[str]:
    """Names of the draft presets listed for a target preset."""
    t = get_preset(target)
    rows, _ = _index()
    return [n for n, r in rows.items() if t.name in r["targets"]]
