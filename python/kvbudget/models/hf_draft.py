"""Read a speculative-decoding draft's Hugging Face ``config.json`` into
``kvbudget.DraftGeometry`` keyword arguments (EAGLE/EAGLE3 heads, MTP modules,
standalone small models). The target side is :mod:`kvbudget.models.hf`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.hf import (
    _MIMO_V2_TYPES,
    DRAFT_KEYS,
    declared_defaults,
    ConfigError,
    DraftKind,
    PathOrDict,
    _heads_and_dims,
    _target_kwargs,
    _View,
    load_hf_config,
)

__all__ = ["draft_kwargs_from_hf_config"]


def _is_eagle(v: _View) -> bool:
    archs = " ".join(v.architectures).lower()
    return (
        "eagle" in archs
        or "eagle" in v.model_type.lower()
        or "draft_vocab_size" in v.cfg
        or "eagle_config" in v.cfg
    )


def _is_mimo_v2(v: _View) -> bool:
    return v.model_type in _MIMO_V2_TYPES or (
        "hybrid_layer_pattern" in v.cfg and "swa_num_key_value_heads" in v.cfg
    )


def _standalone_draft(v: _View, num_layers: int | None) -> dict[str, Any]:
    """A standalone draft: the model's own geometry through ``DraftGeometry.from_model``.

    ``from_model`` is the one rule for a model used as a draft (shared with the
    presets and the CLI); its InvalidConfigError becomes a ConfigError naming
    the key to blame.
    """
    from kvbudget._core import DraftGeometry, InvalidConfigError, ModelGeometry

    t = _target_kwargs(v, include_kv_shared_layers=False)
    try:
        geom = DraftGeometry.from_model(ModelGeometry(**t), num_layers=num_layers)
    except InvalidConfigError as exc:
        if t["kv_lora_rank"] is not None:
            key = v.name("kv_lora_rank")
            what = f"key '{key}' makes the standalone draft MLA"
        elif t["swa_attention_layer_ids"] and t["full_attention_layer_ids"]:
            keys = ("swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim")
            key = v.name(next((k for k in keys if v.has(k)), keys[0]))
            what = "standalone draft with SWA layers of a different head geometry"
        else:
            key, what = None, "standalone draft"
        raise ConfigError(f"{v.label}: {what}: {exc}", key) from None
    return {k: getattr(geom, k) for k in DRAFT_KEYS}


def draft_kwargs_from_hf_config(
    path_or_dict: PathOrDict,
    target_kwargs: Mapping[str, Any] | None = None,
    *,
    kind: DraftKind = "auto",
    num_layers: int | None = None,
) -> dict[str, Any]:
    """Return the ``kvbudget.DraftGeometry`` keyword arguments for a draft model.

    Args:
        path_or_dict: the draft's config (EAGLE/EAGLE3 head, standalone model),
            or for MTP the target's own config (MTP modules live in the target
            checkpoint). Dict, path to ``config.json`` or its directory.
        target_kwargs: the target's ``ModelGeometry`` kwargs, if known: then
            ``capacity`` is explicit, ``"full"`` for a target with full layers
            and ``"swa"`` for an all-SWA target (SGLang's rule). Without it,
            ``capacity`` is None, which lets ``DraftGeometry`` apply that rule.
        kind: ``"auto"`` (default) detects the draft kind: EAGLE heads by an
            ``*Eagle*`` architecture, ``draft_vocab_size`` or ``eagle_config``;
            MTP by ``num_nextn_predict_layers > 0`` or a MiMo-V2 config;
            anything else is a standalone model. ``"eagle3"`` is an alias of
            ``"eagle"`` and ``"nextn"`` of ``"mtp"``.
        num_layers: draft KV layers, overriding the config (needed for
            MiMo-V2-Flash, whose config does not state its 3 MTP layers).

    Draft geometry by kind:
        * eagle: ``num_hidden_layers`` Llama decoder layers, always full
          attention (a ``sliding_window`` copied from the target is ignored).
        * mtp: ``num_nextn_predict_layers`` layers with the target's full-layer
          geometry, except MiMo-V2, whose MTP layers are SWA layers built from
          the ``swa_*`` keys (``capacity="swa"``).
        * standalone: the model as a draft, by ``DraftGeometry.from_model``
          (the rule the presets and the CLI use too): every KV layer at its
          full-layer geometry (its SWA layers must match it), capacity from
          ``target_kwargs`` as above; an all-SWA model at its SWA geometry with
          ``capacity="swa"``. An MLA model is refused.

    Returns:
        A dict with exactly the keys of :data:`DRAFT_KEYS`
        (``kv_cache_dtype`` is None: the target's dtype; ``capacity`` is
        ``"swa"`` for SWA-geometry drafts such as MiMo-V2 MTP, else see
        ``target_kwargs``).

    Raises:
        ConfigError: a key is missing or wrong; or the draft is MLA (DeepSeek
            MTP), which ``DraftGeometry`` cannot describe: give no draft
            geometry then, so the draft takes the target's MLA geometry; or a
            standalone draft's SWA layers differ from its full layers.
    """
    cfg = load_hf_config(path_or_dict)
    v = _View(cfg)
    if kind == "auto":
        if _is_eagle(v):
            kind = "eagle"
        elif (v.opt_int("num_nextn_predict_layers", 0) or 0) > 0 or _is_mimo_v2(v):
            kind = "mtp"
        else:
            kind = "standalone"
    if kind == "eagle3":
        kind = "eagle"
    if kind == "nextn":
        kind = "mtp"
    if kind not in ("eagle", "mtp", "standalone"):
        raise ConfigError(f"unknown draft kind {kind!r}; expected eagle, mtp or standalone")
    if num_layers is not None and (
        isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1
    ):
        raise ConfigError(f"num_layers must be an integer >= 1, got {num_layers!r}")

    # None leaves the choice to DraftGeometry (SGLang's rule: the full pool's
    # token count, or the SWA pool's for an all-SWA target).
    capacity: str | None = None
    if target_kwargs is not None:
        capacity = "full" if target_kwargs.get("full_attention_layer_ids") else "swa"

    out: dict[str, Any] = declared_defaults(DRAFT_KEYS, "DraftGeometry")
    if kind == "eagle":
        kv, head_dim, v_head_dim = _heads_and_dims(v)
        layers = num_layers if num_layers is not None else v.req_int("num_hidden_layers")
        out.update(num_layers=layers, num_kv_heads=kv, head_dim=head_dim, v_head_dim=v_head_dim)
    elif kind == "mtp":
        if v.raw("kv_lora_rank") is not None:
            raise ConfigError(
                f"{v.label}: key '{v.name('kv_lora_rank')}' makes the MTP draft MLA, which "
                "DraftGeometry cannot describe; pass no draft geometry (the draft then takes "
                "the target's MLA geometry) and set the speculative draft_num_layers to "
                f"'{v.name('num_nextn_predict_layers')}'",
                v.name("kv_lora_rank"),
            )
        mtp_layers = num_layers if num_layers is not None else v.opt_int("num_nextn_predict_layers")
        if mtp_layers is None:
            raise ConfigError(
                f"{v.label}: missing key '{v.name('num_nextn_predict_layers')}' "
                "(the MTP depth); pass num_layers= explicitly",
                v.name("num_nextn_predict_layers"),
            )
        layers = mtp_layers
        kv, head_dim, v_head_dim = _heads_and_dims(v)
        if _is_mimo_v2(v):
            # SGLang's MiMoV2MTPLayer builds its attention from the swa_* keys.
            kv = v.opt_int("swa_num_key_value_heads") or kv
            swa_hd = v.opt_int("swa_head_dim")
            head_dim = swa_hd or head_dim
            v_head_dim = v.opt_int("swa_v_head_dim") or (v_head_dim if swa_hd is None else None)
            capacity = "swa"
        out.update(num_layers=layers, num_kv_heads=kv, head_dim=head_dim, v_head_dim=v_head_dim)
    else:
        standalone = _standalone_draft(v, num_layers)
        out.update(standalone)
        # The rule's own capacity ("swa" for an all-SWA draft) wins; else the target's.
        capacity = standalone["capacity"] or capacity
    out["capacity"] = capacity
    return out
