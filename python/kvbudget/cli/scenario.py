"""From parsed arguments to what to plan: the model, the ``--draft``, the serving flags, the budget.

:func:`build_scenario` returns a :class:`CliScenario`: a :class:`kvbudget.Scenario`
plus what only the command line shows (labels, where each part came from, the
budget, notes).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import kvbudget
from kvbudget.sglang.draft_layers import DraftLayers, sglang_draft_layers
from kvbudget import (
    DraftGeometry,
    InvalidConfigError,
    KVBudgetError,
    ModelGeometry,
    ServingConfig,
    SpeculativeConfig,
)
from kvbudget.cli import render
from kvbudget.cli.files import read_config
from kvbudget.cli.numbers import INT64_MAX
from kvbudget.cli.parser import (
    DEFAULT_DRAFT,
    DEFAULT_MODEL,
    DEFAULT_SPEC,
    UsageError,
    serving_values,
    spec_values,
)
from kvbudget.cli.scenario_state import StateOnlyModel, _hybrid_state, _NoAttention, _SGLangModel, _state_only
from kvbudget.cli.values import CliScenario, VllmOnly, _PlanningError, budget_of

if TYPE_CHECKING:
    from kvbudget.sglang.configurators import PoolConfiguratorBase
    from kvbudget.models import Preset

__all__ = ["CliScenario", "StateOnlyModel", "budget_of", "build_scenario"]

# --draft KIND: -> SpeculativeConfig algorithm
_ALGORITHMS: Final[dict[str, str]] = {
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "nextn",
    "nextn": "nextn",
    "standalone": "standalone",
}
# a draft preset's kind -> its algorithm
_KIND_ALGORITHM: Final[dict[str, str]] = {
    "eagle3": "eagle3",
    "mtp": "nextn",
    "standalone": "standalone",
}
# algorithm -> draft_kwargs_from_hf_config's kind, and the label's name
_HF_KIND: Final[dict[str, str]] = {
    "eagle": "eagle",
    "eagle3": "eagle3",
    "nextn": "mtp",
    "standalone": "standalone",
}
_KIND_LABEL: Final[dict[str, str]] = {
    "eagle3": "EAGLE3",
    "nextn": "MTP",
    "standalone": "standalone",
    "eagle": "EAGLE",
}
_HF_DTYPES: Final[dict[str, str]] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}


# --------------------------------------------------------------------------- the model


def looks_like_path(name: str) -> bool:
    """Whether a MODEL (or ``--draft KIND:VALUE``) names a config file rather than a preset."""
    if name.endswith(".json"):
        return True
    p = Path(name)
    try:
        return p.exists() and (p.is_file() or (p / "config.json").is_file())
    except (OSError, ValueError):  # a name too long for a path, say: not a path
        return False


def _hf_dtype(cfg: dict[str, Any]) -> str | None:
    for src in (cfg, cfg.get("text_config") or {}):
        if isinstance(src, dict):
            raw = src.get("torch_dtype") or src.get("dtype")
            if isinstance(raw, str) and raw.lower() in _HF_DTYPES:
                return _HF_DTYPES[raw.lower()]
    return None




def _config_geometry(cfg: dict[str, Any]) -> ModelGeometry:
    """A config's attention geometry: a model SGLang keeps a recurrent state for, as SGLang resolves
    its KV layers (its layer kinds name state layers the generic reader does not know); else the
    generic reading. A model SGLang cannot serve by its architecture or model type (no model class:
    Jamba; pools kvbudget does not model) is SGLang's refusal, not the generic reading of its
    layers (which would take Jamba's Mamba layers for attention)."""
    from kvbudget.models.hf import ConfigError, geometry_kwargs_from_hf_config
    from kvbudget.sglang.model import resolve_sglang, sglang_text_layout
    from kvbudget.sglang.state_model import STATE_MODEL_TYPES

    text = cfg.get("text_config")
    types = {cfg.get("model_type"), text.get("model_type") if isinstance(text, dict) else None}
    archs = cfg.get("architectures")
    if not types & set(STATE_MODEL_TYPES) and isinstance(archs, list) and archs:
        try:
            resolve_sglang(cfg)
        except ConfigError as exc:
            if exc.key in ("architectures", "model_type"):  # refused by name: SGLang's class, or its pools
                raise
    if types & set(STATE_MODEL_TYPES):
        resolved = resolve_sglang(cfg)
        if resolved.state_pool and not resolved.num_attention_layers:
            raise _NoAttention(cfg)
        geometry: ModelGeometry = resolved.model_geometry()
        return geometry
    return ModelGeometry(**geometry_kwargs_from_hf_config(sglang_text_layout(cfg)))


def _load_model(
    args: argparse.Namespace, *, vllm_only: bool = False
) -> tuple[str, dict[str, Any], ModelGeometry | str, str | None, bool, _SGLangModel | None]:
    """(label, info, geometry, suggested kv dtype, is_default, what SGLang reads of the model).

    ``vllm_only``: a config SGLang's reading refuses gives that refusal in place of the geometry
    (vLLM's reader takes the config itself)."""
    from kvbudget.models import get_preset
    from kvbudget.models.hf import ConfigError
    from kvbudget.models import find_bundled_model

    config_path: str | None = args.config
    name: str | None = args.model
    if config_path is not None and name is not None:
        raise UsageError(f"give a MODEL ({name!r}) or --config, not both")
    if config_path is None and name is not None and looks_like_path(name):
        config_path = name
    hybrid = find_bundled_model(name) if config_path is None and name is not None else None
    if config_path is not None or hybrid is not None:
        # read_config is bounded: size, UTF-8, nesting, 64-bit integers
        cfg = hybrid.config if hybrid is not None else read_config(str(config_path))
        model: ModelGeometry | str
        try:
            model = _config_geometry(cfg)
        except (ConfigError, _NoAttention) as exc:
            if not vllm_only and hybrid is not None and "sglang" not in hybrid.engines:
                raise UsageError(f"{hybrid.name}: SGLang 0.5.23 does not serve it ({exc}); kvbudget's vLLM mode "
                                 "plans it (plan --engine vllm, compare --engines sglang vllm)") from None  # fmt: skip
            if not vllm_only:
                raise
            model = str(exc) if isinstance(exc, ConfigError) else "a model without attention layers"
        label = f"config {config_path}" if hybrid is None else f"{hybrid.hf_id} [{hybrid.name}, bundled config values]"
        arch = cfg.get("architectures") or []
        if isinstance(arch, list) and arch and hybrid is None:
            label += f" ({arch[0]})"
        info: dict[str, Any] = {
            "preset": None, "config": None if config_path is None else str(config_path),
            "hf_id": None if hybrid is None else hybrid.hf_id, "display_name": None,
            "architectures": list(arch) if isinstance(arch, list) else [],
        }  # fmt: skip
        if hybrid is not None:
            info.update(bundled_model=hybrid.name, source=hybrid.source)
        text = cfg.get("text_config")
        sglang = (info["architectures"], text if isinstance(text, dict) else cfg, cfg)
        return label, info, model, _hf_dtype(cfg), False, sglang
    is_default = name is None
    preset = get_preset(DEFAULT_MODEL if name is None else name)
    label = f"{preset.display_name} [{preset.name}"
    label += f", {preset.hf_id}]" if preset.hf_id else "]"
    info = {
        "preset": preset.name,
        "config": None,
        "hf_id": preset.hf_id,
        "display_name": preset.display_name,
        "role": preset.role,
        "source": preset.source,
        "architectures": list(preset.architectures),
    }
    text = preset.sglang_text_config()
    sglang = (list(preset.architectures), text, {"architectures": list(preset.architectures), **text})
    return label, info, preset.model_geometry(), preset.kv_cache_dtype, is_default, sglang


def _sglang_pools(
    model: _SGLangModel | None, scenario: kvbudget.Scenario, notes: list[str]
) -> tuple[dict[str, Any] | None, str | None]:
    """SGLang 0.5.23's pool choice for the model (kvbudget.sglang.hybrid), and the what-if (kept
    out of ``notes``) when kvbudget's configurator for the geometry as given is another family:
    its numbers are then a what-if for SGLang."""
    from kvbudget.sglang.hybrid import sglang_hybrid_swa

    if model is None or not model[0]:
        return None, None
    archs, text, _ = model
    disable = scenario.serving.disable_hybrid_swa_memory
    try:
        got = sglang_hybrid_swa(archs, text, disable_hybrid_swa_memory=disable)
    except ValueError as exc:
        notes.append(f"SGLang 0.5.23 would not load this model: {exc}")
        return {"architectures": archs, "hybrid_swa": None, "reason": str(exc)}, None
    if got.unplannable:  # a hybrid model without a sliding layer: SGLang's configurator refuses it
        notes.append(f"{got.unplannable}: SGLang would not start it "
                     "(--disable-hybrid-swa-memory plans one Default pool)")  # fmt: skip
        return {"architectures": archs, "hybrid_swa": True, "reason": got.reason}, None
    ours = scenario.configurator().kind != "default"
    what_if = None
    if got.hybrid_swa != ours:
        layers = scenario.model.num_full_layers + scenario.model.num_swa_layers
        what_if = (
            f"SGLang 0.5.23 plans {archs[0]} with "
            + ("one DefaultPoolConfigurator pool over all " f"{layers} layers"
               if not got.hybrid_swa else "separate full and SWA pools")
            + "; the numbers here are for kvbudget's geometry as given, a what-if for SGLang"
            + ("" if got.hybrid_swa else
               " (--disable-hybrid-swa-memory plans one Default pool over this geometry's layers)")
        )  # fmt: skip
    return {"architectures": archs, "hybrid_swa": got.hybrid_swa, "reason": got.reason}, what_if


# --------------------------------------------------------------------------- the draft

DraftResult = tuple[str, dict[str, Any], SpeculativeConfig | None]


def _model_as_draft(preset: Preset) -> DraftGeometry:
    """Any preset as a standalone draft (``DraftGeometry.from_model``, the one rule)."""
    try:
        geom: DraftGeometry = preset.as_draft_geometry()
    except InvalidConfigError as exc:
        raise UsageError(f"preset {preset.name!r} cannot be a standalone draft: {exc}") from None
    return geom


def _preset_draft(preset: Preset) -> DraftGeometry | None:
    """A draft preset's own geometry (None for an MLA draft: it takes the target's)."""
    return preset.draft_geometry() if preset.draft_kwargs is not None else None


#: An EAGLE head's config as SGLang's rule sees it: never hybrid SWA.
_NOT_HYBRID = ModelGeometry([0], [], 1, 1)


def _config_as_draft_model(cfg: dict[str, Any], hf_kind: str) -> ModelGeometry | None:
    """A draft checkpoint as SGLang's rule reads it: a standalone model's own geometry, an
    EAGLE head's (never hybrid); None for an MTP head (the target's config)."""
    if hf_kind == "eagle":
        return _NOT_HYBRID
    if hf_kind != "standalone":
        return None
    from kvbudget.models.hf import geometry_kwargs_from_hf_config

    return ModelGeometry(**geometry_kwargs_from_hf_config(cfg))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _draft_layers(algorithm: str, layers: int, model: ModelGeometry | None,
                  draft_model: ModelGeometry | None) -> DraftLayers:  # fmt: skip
    """SGLang's draft-layer classes (:func:`sglang_draft_layers`); for a target only vLLM reads
    (``model`` None), the layer count alone (vLLM's reader reads the drafter itself)."""
    if model is None:
        return {"draft_num_layers": layers, "draft_swa_num_layers": 0, "banded_draft_layers": 0}
    return sglang_draft_layers(algorithm, layers, target=model, draft_model=draft_model)


def _draft(
    text: str | None,
    model: ModelGeometry | None,
    model_info: dict[str, Any],
    extra: dict[str, Any],
    notes: list[str],
) -> DraftResult:
    """Parse --draft: NAME | eagle3:N | eagle:N | mtp:N | standalone:NAME | KIND:config.json | none.

    ``extra``: the speculative flags (num_steps, eagle_topk, num_draft_tokens).
    """
    from kvbudget.models import get_preset
    from kvbudget.models.hf import GEOMETRY_KEYS
    from kvbudget.models.hf_draft import draft_kwargs_from_hf_config

    if text is None or text.strip().lower() in ("", "none"):
        if any(v is not None for v in extra.values()):
            return "none", {"spec": "none"}, SpeculativeConfig(algorithm="none", **extra)
        return "none", {"spec": "none"}, None
    text = text.strip()
    kind, sep, value = text.partition(":")
    if not (sep and kind.lower() in _ALGORITHMS):
        preset = get_preset(text)
        if preset.role != "draft" or preset.draft_kind is None:
            raise UsageError(
                f"--draft {text!r} is a target model; use --draft standalone:{preset.name} to run "
                "it as a standalone draft"
            )
        algorithm = _KIND_ALGORITHM[preset.draft_kind]
        geom = _preset_draft(preset)
        return _preset_result(preset, text, algorithm, geom, model, model_info, notes, extra)
    algorithm = _ALGORITHMS[kind.lower()]
    value = value.strip()
    if not value:
        raise UsageError(f"--draft {text!r}: give a layer count, a preset or a config after ':'")
    info: dict[str, Any] = {"spec": text, "preset": None, "config": None}
    if value.isascii() and value.isdigit():
        digits = value.lstrip("0") or "0"
        if len(digits) > 19 or int(digits) > INT64_MAX:  # length first: no huge int
            raise UsageError(f"--draft {text[:60]!r}: the layer count is beyond 2**63-1")
        layers = int(digits)
        if algorithm == "standalone":
            raise UsageError(
                f"--draft {text!r}: a standalone draft is a model; "
                "give standalone:PRESET or standalone:path/to/config.json"
            )
        label = (
            f"{kind.upper()} draft, {_plural(layers, 'layer')} at the target's full-layer geometry"
        )
        # An MTP head without a checkpoint of its own: SGLang reads the target's config.
        counts = _draft_layers(algorithm, layers, model, None if algorithm == "nextn" else _NOT_HYBRID)
        spec = SpeculativeConfig(algorithm=algorithm, **counts, **extra)
        return label, info, spec
    if looks_like_path(value):
        hf_kind: Any = _HF_KIND[algorithm]
        cfg = read_config(value)  # bounded: size, UTF-8, nesting, 64-bit integers
        if model is None:  # vLLM's reader reads the drafter's config itself
            key = "num_nextn_predict_layers" if algorithm == "nextn" else "num_hidden_layers"
            n = cfg.get(key)
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                raise UsageError(f"--draft {text!r}: the config gives no positive {key}")
            spec = SpeculativeConfig(algorithm=algorithm, **_draft_layers(algorithm, n, None, None), **extra)
            return f"{kind.upper()} draft from {value}, {_plural(n, 'layer')}", {**info, "config": value}, spec
        target_kwargs = {key: getattr(model, key) for key in GEOMETRY_KEYS}
        geom = DraftGeometry(**draft_kwargs_from_hf_config(cfg, target_kwargs, kind=hf_kind))
        label = f"{kind.upper()} draft from {value}, {geom.num_layers} layers"
        counts = _draft_layers(algorithm, geom.num_layers, model, _config_as_draft_model(cfg, hf_kind))
        spec = SpeculativeConfig(algorithm=algorithm, **counts, draft=geom, **extra)
        return label, {**info, "config": value}, spec
    preset = get_preset(value)
    if algorithm == "standalone":
        geom_or_none: DraftGeometry | None = _model_as_draft(preset)
    else:
        if preset.role != "draft" or _KIND_ALGORITHM.get(preset.draft_kind or "") != algorithm:
            raise UsageError(
                f"--draft {text!r}: preset {preset.name!r} is not a {kind} draft "
                f"(it is a {preset.draft_kind or preset.role}); try --draft {preset.name}"
            )
        geom_or_none = _preset_draft(preset)
    return _preset_result(preset, text, algorithm, geom_or_none, model, model_info, notes, extra)


def _preset_result(
    preset: Preset,
    text: str,
    algorithm: str,
    geom: DraftGeometry | None,
    model: ModelGeometry | None,
    model_info: dict[str, Any],
    notes: list[str],
    extra: dict[str, Any],
) -> tuple[str, dict[str, Any], SpeculativeConfig]:
    layers = geom.num_layers if geom is not None else int(preset.draft_num_layers or 1)
    # SGLang's draft-layer classes: a standalone draft is its own checkpoint; an MTP head
    # reads the target's config; an EAGLE head is never hybrid.
    own: ModelGeometry | None = None  # an MTP head reads the target's config
    if algorithm == "standalone":
        own = preset.model_geometry()
    elif algorithm != "nextn":
        own = _NOT_HYBRID
    counts = _draft_layers(algorithm, layers, model, own)
    label = f"{preset.display_name} [{preset.name}]: {_KIND_LABEL[algorithm]}, "
    label += _plural(layers, "layer")
    if geom is None:
        label += " at the target's geometry"
    target = model_info.get("preset")
    if target is not None and preset.targets and target not in preset.targets:
        notes.append(
            f"draft {preset.name!r} is listed for {', '.join(preset.targets)}, not for {target!r}"
        )
    info = {"spec": text, "preset": preset.name, "hf_id": preset.hf_id, "source": preset.source}
    spec = SpeculativeConfig(algorithm=algorithm, **counts, draft=geom, **extra)
    return label, info, spec


# --------------------------------------------------------------------------- the budget


# --------------------------------------------------------------------------- the scenario


def build_scenario(args: argparse.Namespace, *, vllm_only: bool = False) -> CliScenario:
    """Turn parsed arguments into a CliScenario (may raise UsageError, KeyError, KVBudgetError).

    ``vllm_only`` (``plan --engine vllm``): a config SGLang's reading refuses gives a CliScenario
    without a :class:`kvbudget.Scenario` (:class:`~kvbudget.cli.values.VllmOnly`), for vLLM's
    reader to take the config itself."""
    if getattr(args, "sglang", None) is not None:
        from kvbudget.cli.launch import launch_scenario

        return launch_scenario(args)
    notes: list[str] = []
    try:
        label, info, model, preset_dtype, is_default, sglang_model = _load_model(args, vllm_only=vllm_only)
    except _NoAttention as e:
        raise _state_only(args, e.config) from None
    draft_text, extra = args.draft, spec_values(args)
    steps = draft_text is None and is_default and all(v is None for v in extra.values())
    if draft_text is None and is_default:  # the default's draft, with SGLang's steps for it
        draft_text = DEFAULT_DRAFT
    if steps:
        extra = dict(DEFAULT_SPEC)
    draft_label, draft_info, spec = _draft(draft_text, None if isinstance(model, str) else model, info, extra, notes)
    if steps:
        draft_label += (f", {extra['num_steps']} steps, top-k {extra['eagle_topk']}, {extra['num_draft_tokens']} "
                        "draft tokens (SGLang's own for this launch line)")  # fmt: skip
    values = serving_values(args)
    if values["kv_cache_dtype"] is None:
        values["kv_cache_dtype"] = preset_dtype
    if values["kv_cache_dtype"] is None:
        values["kv_cache_dtype"] = "bf16"
        notes.append("the model's dtype is unknown: kv_cache_dtype bf16 (set --kv-dtype)")
    if isinstance(model, str):  # only vLLM's reader takes this config
        notes.append(f"kvbudget's SGLang-mode reading refuses this config ({model}); vLLM's reader takes it")
        available, budget_label, budget_info = budget_of(args, is_default, notes)
        parts = VllmOnly(ServingConfig(**values), spec or SpeculativeConfig(), model)
        return CliScenario(scenario=None, model_label=label, model_info=info, draft_label=draft_label,
                           draft_info=draft_info, available=available, budget_label=budget_label,
                           budget_info=budget_info, notes=notes, vllm_only=parts)  # fmt: skip
    scenario = kvbudget.Scenario(model, ServingConfig(**values), spec)
    sglang_notes: list[str] = []
    scenario, state = _hybrid_state(sglang_model, scenario, args, sglang_notes)
    sglang_pools, what_if = _sglang_pools(sglang_model, scenario, notes)
    available, budget_label, budget_info = budget_of(args, is_default, notes)
    return CliScenario(
        scenario=scenario,
        model_label=label,
        model_info=info,
        draft_label=draft_label,
        draft_info=draft_info,
        available=available,
        budget_label=budget_label,
        budget_info=budget_info,
        is_default=is_default,
        notes=notes,
        sglang_notes=sglang_notes,
        sglang_pools=sglang_pools,
        what_if=what_if,
        state=state,
    )
