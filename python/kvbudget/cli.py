"""The ``kvbudget`` command line.

Commands (``kvbudget COMMAND --help`` for every flag)::

    kvbudget                      # plan the embedded default (same as `kvbudget plan`)
    kvbudget plan [MODEL] [options] [--json]
    kvbudget compare [MODEL] [options] [--json]
    kvbudget sweep --vary ratio|available|tp|page-size --values ... [--out CSV] [--plot PNG]
    kvbudget models [--json]

MODEL is a preset name (``kvbudget models`` lists them; Hugging Face ids and
aliases are accepted) or a path to a ``config.json`` (also ``--config PATH``).
Without a MODEL the embedded default is planned: Gemma-3-27B with a one-layer
EAGLE3 draft and a stated 40 GiB budget (REFERENCE section 5, example 1); any
flag given overrides that part of it.

``plan --json`` prints one JSON document; its ``"plan"`` member is
``PoolPlan.to_json()`` as an object, so
``kvbudget.PoolPlan.from_json(json.dumps(doc["plan"]))`` rebuilds the plan.

Exit status: 0 on success, 1 on a planning error (``kvbudget.KVBudgetError``,
which includes a malformed ``config.json``) or a missing optional dependency,
2 on a usage error (bad flag, unknown model or GPU name).

This module is imported only by the console script; it imports rich lazily
(and matplotlib only for ``sweep --plot``), never torch.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

import kvbudget
from kvbudget import (
    DraftGeometry,
    KVBudgetError,
    ModelGeometry,
    PoolPlan,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
)

if TYPE_CHECKING:
    from rich.console import Console

    from kvbudget.configurators import PoolConfiguratorBase
    from kvbudget.models import Preset

__all__ = ["main", "parse_bytes"]

GIB: Final = 1 << 30
PROG: Final = "kvbudget"

# The embedded default scenario: REFERENCE section 5, example 1.
DEFAULT_MODEL: Final = "gemma-3-27b"
DEFAULT_DRAFT: Final = "eagle3:1"
DEFAULT_AVAILABLE: Final = 40 * GIB
DEFAULT_MEM_FRACTION: Final = 0.9

COMMANDS: Final = ("plan", "compare", "sweep", "ratio", "models")

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
_BYTES_RE: Final = re.compile(
    r"^\s*([0-9][0-9_,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([0-9]+))?\s*([a-zA-Z]*)\s*$"
)

_ALGORITHMS: Final[dict[str, str]] = {
    "eagle": "eagle",
    "eagle3": "eagle3",
    "mtp": "nextn",
    "nextn": "nextn",
    "standalone": "standalone",
}
_KIND_ALGORITHM: Final[dict[str, str]] = {
    "eagle3": "eagle3",
    "mtp": "nextn",
    "standalone": "standalone",
}
_HF_DTYPES: Final[dict[str, str]] = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}


class UsageError(Exception):
    """A bad command line value found after parsing (exit status 2)."""


# --------------------------------------------------------------------------- parsing


def parse_bytes(text: str) -> int:
    """Parse a byte count: ``42949672960``, ``40GiB``, ``40GB``, ``1.5 TiB``, ``512MiB``.

    Decimal units (kB, MB, GB, TB) are powers of 1000, binary units (KiB, MiB,
    GiB, TiB) powers of 1024; no unit means bytes. Fractions are rounded down
    to a whole byte.

    Raises:
        ValueError: not a byte count, or an unknown unit.
    """
    m = _BYTES_RE.match(text)
    if m is None:
        raise ValueError(f"not a byte count: {text!r} (e.g. 42949672960, 40GiB, 40GB)")
    number, exp, unit = m.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"unknown unit {unit!r} in {text!r}; use B, kB, MB, GB, TB (powers of 1000) "
            "or KiB, MiB, GiB, TiB (powers of 1024)"
        )
    digits = number.replace("_", "").replace(",", "")
    if "." in digits or exp:
        from fractions import Fraction

        value = Fraction(digits) * (10 ** int(exp or 0)) * factor
        return int(value)
    return int(digits) * factor


def _bytes_arg(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def _nonneg_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {value}")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0.0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


# --------------------------------------------------------------------------- the scenario


@dataclass
class Scenario:
    """What to plan: the model, its draft, the serving config and the budget."""

    model_label: str
    model_info: dict[str, Any]
    model: ModelGeometry
    draft_label: str
    draft_info: dict[str, Any]
    spec: SpeculativeConfig | None
    serving_kwargs: dict[str, Any]
    available: int | None
    budget_label: str
    budget_info: dict[str, Any]
    is_default: bool = False
    notes: list[str] = field(default_factory=list)

    def serving(self, **overrides: Any) -> ServingConfig:
        """The ServingConfig, with keyword overrides (used by sweep)."""
        return ServingConfig(**{**self.serving_kwargs, **overrides})

    def configurator(self, **overrides: Any) -> PoolConfiguratorBase:
        """``create_pool_configurator`` for this scenario."""
        return create_pool_configurator(self.model, self.serving(**overrides), self.spec)

    def require_budget(self) -> int:
        if self.available is None:
            raise UsageError(
                "no budget: give --available BYTES (e.g. 40GiB) or "
                "--gpu NAME [--mem-fraction F] [--weights-gib W]"
            )
        return self.available

    def to_dict(self) -> dict[str, Any]:
        return {
            "default": self.is_default,
            "model": {**self.model_info, "geometry": json.loads(self.model.to_json())},
            "draft": {
                **self.draft_info,
                "speculative": json.loads(self.spec.to_json()) if self.spec is not None else None,
            },
            "serving": json.loads(self.serving().to_json()),
            "budget": {"available_bytes": self.available, **self.budget_info},
        }


def _hf_dtype(cfg: dict[str, Any]) -> str | None:
    for src in (cfg, cfg.get("text_config") or {}):
        if isinstance(src, dict):
            raw = src.get("torch_dtype") or src.get("dtype")
            if isinstance(raw, str) and raw.lower() in _HF_DTYPES:
                return _HF_DTYPES[raw.lower()]
    return None


def _load_model(
    args: argparse.Namespace,
) -> tuple[str, dict[str, Any], ModelGeometry, str | None, bool]:
    """(label, info, geometry, suggested kv dtype, is_default)."""
    from kvbudget.models import get_preset
    from kvbudget.models.hf import geometry_kwargs_from_hf_config, load_hf_config

    config_path: str | None = args.config
    name: str | None = args.model
    if config_path is not None and name is not None:
        raise UsageError(f"give a MODEL ({name!r}) or --config, not both")
    if config_path is None and name is not None and _looks_like_path(name):
        config_path = name
    if config_path is not None:
        cfg = load_hf_config(config_path)
        kwargs = geometry_kwargs_from_hf_config(cfg)
        model = ModelGeometry(**kwargs)
        label = f"config {config_path}"
        arch = cfg.get("architectures") or []
        if isinstance(arch, list) and arch:
            label += f" ({arch[0]})"
        info = {"preset": None, "config": str(config_path), "hf_id": None, "display_name": None}
        return label, info, model, _hf_dtype(cfg), False
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
    }
    return label, info, preset.model_geometry(), preset.kv_cache_dtype, is_default


def _looks_like_path(name: str) -> bool:
    p = Path(name)
    return name.endswith(".json") or (p.exists() and (p.is_file() or (p / "config.json").is_file()))


def _draft_from_preset(preset: Preset) -> DraftGeometry:
    """A DraftGeometry for any preset used as a standalone draft."""
    if preset.draft_kwargs is not None:
        return DraftGeometry(**preset.draft_kwargs)
    kw = preset.model_kwargs
    if kw.get("kv_lora_rank") is not None:
        raise UsageError(f"preset {preset.name!r} is MLA, which a DraftGeometry cannot describe")
    n_swa = len(kw["swa_attention_layer_ids"])
    if n_swa and (
        (kw["swa_num_kv_heads"], kw["swa_head_dim"], kw["swa_v_head_dim"])
        != (kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"])
    ):
        raise UsageError(
            f"preset {preset.name!r} has SWA layers of another head geometry; "
            "a DraftGeometry has one geometry"
        )
    return DraftGeometry(
        num_layers=len(kw["full_attention_layer_ids"]) + n_swa,
        num_kv_heads=kw["num_kv_heads"],
        head_dim=kw["head_dim"],
        v_head_dim=kw["v_head_dim"],
        capacity="full",
    )


def _draft(
    text: str | None,
    model: ModelGeometry,
    model_info: dict[str, Any],
    args: argparse.Namespace,
    notes: list[str],
) -> tuple[str, dict[str, Any], SpeculativeConfig | None]:
    """Parse --draft: NAME | eagle3:N | eagle:N | mtp:N | standalone:NAME | KIND:config.json | none."""
    from kvbudget.models import get_preset
    from kvbudget.models.hf import draft_kwargs_from_hf_config

    extra: dict[str, Any] = {
        "num_steps": args.num_steps,
        "eagle_topk": args.eagle_topk,
        "num_draft_tokens": args.num_draft_tokens,
    }
    if text is None or text.strip().lower() in ("", "none"):
        if any(v is not None for v in extra.values()):
            return (
                "none",
                {"spec": "none"},
                SpeculativeConfig(algorithm="none", **extra),
            )
        return "none", {"spec": "none"}, None
    text = text.strip()
    kind, sep, value = text.partition(":")
    if sep and kind.lower() in _ALGORITHMS:
        algorithm = _ALGORITHMS[kind.lower()]
        value = value.strip()
        if not value:
            raise UsageError(
                f"--draft {text!r}: give a layer count, a preset or a config after ':'"
            )
        if value.isdigit():
            layers = int(value)
            if algorithm == "standalone":
                raise UsageError(
                    f"--draft {text!r}: a standalone draft is a model; "
                    "give standalone:PRESET or standalone:path/to/config.json"
                )
            label = f"{kind.upper()} draft, {layers} layer{'s' if layers != 1 else ''} at the target's full-layer geometry"
            info = {"spec": text, "preset": None, "config": None}
            return (
                label,
                info,
                SpeculativeConfig(algorithm=algorithm, draft_num_layers=layers, **extra),
            )
        if _looks_like_path(value):
            target_kwargs = json.loads(model.to_json())
            hf_kind = {
                "eagle": "eagle",
                "eagle3": "eagle3",
                "nextn": "mtp",
                "standalone": "standalone",
            }[algorithm]
            dkw = draft_kwargs_from_hf_config(value, target_kwargs, kind=hf_kind)  # type: ignore[arg-type]
            geom = DraftGeometry(**dkw)
            label = f"{kind.upper()} draft from {value}, {geom.num_layers} layers"
            info = {"spec": text, "preset": None, "config": value}
            return (
                label,
                info,
                SpeculativeConfig(
                    algorithm=algorithm, draft_num_layers=geom.num_layers, draft=geom, **extra
                ),
            )
        preset = get_preset(value)
        if algorithm == "standalone":
            geom = _draft_from_preset(preset)
        else:
            if preset.role != "draft" or _KIND_ALGORITHM.get(preset.draft_kind or "") != algorithm:
                raise UsageError(
                    f"--draft {text!r}: preset {preset.name!r} is not a {kind} draft "
                    f"(it is a {preset.draft_kind or preset.role}); try --draft {preset.name}"
                )
            geom = _draft_from_preset(preset)
        return _preset_draft_result(preset, text, algorithm, geom, model_info, notes, extra)
    preset = get_preset(text)
    if preset.role != "draft" or preset.draft_kind is None:
        raise UsageError(
            f"--draft {text!r} is a target model; use --draft standalone:{preset.name} to run "
            "it as a standalone draft"
        )
    algorithm = _KIND_ALGORITHM[preset.draft_kind]
    geom_or_none: DraftGeometry | None = (
        DraftGeometry(**preset.draft_kwargs) if preset.draft_kwargs is not None else None
    )
    return _preset_draft_result(preset, text, algorithm, geom_or_none, model_info, notes, extra)


def _preset_draft_result(
    preset: Preset,
    text: str,
    algorithm: str,
    geom: DraftGeometry | None,
    model_info: dict[str, Any],
    notes: list[str],
    extra: dict[str, Any],
) -> tuple[str, dict[str, Any], SpeculativeConfig]:
    layers = geom.num_layers if geom is not None else int(preset.draft_num_layers or 1)
    kind = {"eagle3": "EAGLE3", "nextn": "MTP", "standalone": "standalone", "eagle": "EAGLE"}[
        algorithm
    ]
    label = (
        f"{preset.display_name} [{preset.name}]: {kind}, {layers} layer{'s' if layers != 1 else ''}"
    )
    if geom is None:
        label += " at the target's geometry"
    target = model_info.get("preset")
    if target is not None and preset.targets and target not in preset.targets:
        notes.append(
            f"draft {preset.name!r} is listed for {', '.join(preset.targets)}, not for {target!r}"
        )
    info = {"spec": text, "preset": preset.name, "hf_id": preset.hf_id, "source": preset.source}
    return (
        label,
        info,
        SpeculativeConfig(algorithm=algorithm, draft_num_layers=layers, draft=geom, **extra),
    )


def _budget(
    args: argparse.Namespace, is_default: bool, notes: list[str]
) -> tuple[int | None, str, dict[str, Any]]:
    from kvbudget.models import get_gpu

    if args.available is not None:
        if args.mem_fraction is not None or args.weights_gib is not None:
            raise UsageError("--mem-fraction and --weights-gib go with --gpu, not with --available")
        return (
            args.available,
            f"{_b(args.available)} bytes = {_gib(args.available)} (--available)",
            {"source": "available"},
        )
    if args.gpu is not None:
        gpu = get_gpu(args.gpu)
        fraction = DEFAULT_MEM_FRACTION if args.mem_fraction is None else args.mem_fraction
        weights = 0 if args.weights_gib is None else int(args.weights_gib * GIB)
        if args.weights_gib is None:
            notes.append("no --weights-gib: the budget assumes no weights on this GPU")
        usable = int(gpu.memory_bytes * fraction)
        available = usable - weights
        label = (
            f"{_b(available)} bytes = {_gib(available)}: {gpu.model} {gpu.stated_memory_gb} GB "
            f"({_b(gpu.memory_bytes)} B, vendor-stated) x mem-fraction {fraction:g} "
            f"- weights {args.weights_gib or 0:g} GiB"
        )
        info = {
            "source": "gpu",
            "gpu": gpu.name,
            "gpu_memory_bytes": gpu.memory_bytes,
            "gpu_bytes_basis": gpu.bytes_basis,
            "mem_fraction": fraction,
            "weights_bytes": weights,
        }
        if available <= 0:
            raise _PlanningError(
                f"no KV budget on {gpu.name}: {_b(gpu.memory_bytes)} x {fraction:g} = {_b(usable)} bytes "
                f"does not cover {_b(weights)} bytes of weights"
            )
        return available, label, info
    if args.mem_fraction is not None or args.weights_gib is not None:
        raise UsageError("--mem-fraction and --weights-gib need --gpu NAME")
    if is_default:
        return (
            DEFAULT_AVAILABLE,
            (
                f"{_b(DEFAULT_AVAILABLE)} bytes = {_gib(DEFAULT_AVAILABLE)} "
                "(embedded default, REFERENCE section 5 example 1)"
            ),
            {"source": "default"},
        )
    return None, "none given", {"source": None}


class _PlanningError(KVBudgetError):
    """A planning error raised by the command line itself (exit status 1)."""


def build_scenario(args: argparse.Namespace) -> Scenario:
    """Turn parsed arguments into a Scenario (may raise UsageError, KeyError, KVBudgetError)."""
    notes: list[str] = []
    label, info, model, preset_dtype, is_default = _load_model(args)
    draft_text = args.draft
    if draft_text is None and is_default:
        draft_text = DEFAULT_DRAFT
    draft_label, draft_info, spec = _draft(draft_text, model, info, args, notes)
    kv_dtype = args.kv_dtype or preset_dtype
    if kv_dtype is None:
        kv_dtype = "bf16"
        notes.append("the model's dtype is unknown: kv_cache_dtype bf16 (set --kv-dtype)")
    serving_kwargs: dict[str, Any] = {
        "kv_cache_dtype": kv_dtype,
        "page_size": args.page_size,
        "tp_size": args.tp,
        "dcp_size": args.dcp,
        "attn_dp_size": args.attn_dp,
        "swa_full_tokens_ratio": args.ratio,
        "max_running_requests": args.max_running_requests,
        "chunked_prefill_size": args.chunked_prefill_size,
        "disable_radix_cache": args.disable_radix_cache,
        "disable_overlap_schedule": args.disable_overlap_schedule,
        "disaggregation_mode": args.disaggregation_mode,
        "disaggregation_decode_extra_slots": args.decode_extra_slots,
        "swa_eviction_interval": args.swa_eviction_interval,
        "disable_hybrid_swa_memory": args.disable_hybrid_swa_memory,
    }
    ServingConfig(**serving_kwargs)  # validate now, with the library's message
    available, budget_label, budget_info = _budget(args, is_default, notes)
    return Scenario(
        model_label=label,
        model_info=info,
        model=model,
        draft_label=draft_label,
        draft_info=draft_info,
        spec=spec,
        serving_kwargs=serving_kwargs,
        available=available,
        budget_label=budget_label,
        budget_info=budget_info,
        is_default=is_default,
        notes=notes,
    )


# --------------------------------------------------------------------------- formatting


def _b(n: int | float) -> str:
    return f"{n:,}" if isinstance(n, int) else f"{n:,.1f}"


def _gib(n: int) -> str:
    return f"{n / GIB:,.2f} GiB"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.2f} MiB"


def _console(stderr: bool = False, min_width: int = 120) -> Console:
    """A rich console; when not writing to a terminal, at least ``min_width`` columns wide."""
    from rich.console import Console

    width = None
    if not (sys.stderr if stderr else sys.stdout).isatty():
        width = max(min_width, int(os.environ.get("COLUMNS", "0") or 0))
    return Console(stderr=stderr, width=width, highlight=False, soft_wrap=True)


def _serving_summary(s: ServingConfig, skip: str = "") -> str:
    parts = [f"kv dtype {s.kv_cache_dtype}"]
    if skip != "page-size":
        parts.append(f"page {s.page_size}")
    if skip != "tp":
        parts.append(f"TP {s.tp_size}")
    if s.dcp_size != 1:
        parts.append(f"DCP {s.dcp_size}")
    if s.attn_dp_size != 1:
        parts.append(f"attn-DP {s.attn_dp_size}")
    if skip != "ratio":
        parts.append(f"ratio {s.swa_full_tokens_ratio:g}")
    if s.max_running_requests is not None:
        parts.append(f"max running {s.max_running_requests}")
    if s.chunked_prefill_size is not None:
        parts.append(f"chunk {s.chunked_prefill_size}")
    if s.disable_radix_cache:
        parts.append("radix cache off")
    if s.disable_overlap_schedule:
        parts.append("overlap off")
    if s.disaggregation_mode != "null":
        parts.append(f"PD {s.disaggregation_mode}")
    if s.disable_hybrid_swa_memory:
        parts.append("hybrid SWA memory off")
    return ", ".join(parts)


def _header(console: Console, title: str, sc: Scenario, cfg: PoolConfiguratorBase) -> None:
    from rich.markup import escape

    console.print(
        f"[bold]{escape(title)}[/bold]" + (" (embedded default)" if sc.is_default else "")
    )
    console.print(f"  model:   {escape(sc.model_label)}")
    console.print(f"  draft:   {escape(sc.draft_label)}")
    console.print(f"  budget:  {escape(sc.budget_label)}")
    console.print(f"  serving: {escape(_serving_summary(cfg.serving))}")
    kind = type(cfg).__name__
    console.print(f"  SGLang:  {kind}, cell size {_b(cfg.cell_size)} bytes per token")
    for note in sc.notes:
        console.print(f"  [yellow]note:[/yellow] {escape(note)}")


def _pool_table(plan: PoolPlan, title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_footer=True)
    total = plan.total_bytes
    table.add_column("pool", footer="total")
    table.add_column("tokens", justify="right")
    table.add_column("rows", justify="right")
    table.add_column("layers", justify="right")
    table.add_column("dtype")
    table.add_column("bytes", justify="right", footer=_b(total))
    table.add_column("GiB", justify="right", footer=f"{total / GIB:,.3f}")
    table.add_column("padding", justify="right", footer=_b(plan.padding_bytes))
    table.add_column("share", justify="right", footer="100.0%" if total else "-")
    for pool in plan.pools:
        share = f"{100 * pool.nbytes / total:.1f}%" if total else "-"
        table.add_row(
            pool.name,
            _b(pool.tokens),
            _b(pool.rows),
            str(pool.num_layers),
            pool.kv_cache_dtype,
            _b(pool.nbytes),
            f"{pool.nbytes / GIB:,.3f}",
            _b(pool.padding_bytes),
            share,
        )
    return table


def _sglang_tokens(cfg: PoolConfiguratorBase, available: int) -> dict[str, int | None]:
    c = cfg.calculate_pool_sizes(available)
    return {
        "max_total_num_tokens": c.max_total_num_tokens,
        "full_max_total_num_tokens": c.full_max_total_num_tokens,
        "swa_max_total_num_tokens": c.swa_max_total_num_tokens,
    }


def _tokens_text(t: dict[str, int | None]) -> str:
    full, swa = t["full_max_total_num_tokens"], t["swa_max_total_num_tokens"]
    if full is None and swa is None:
        return f"{_b(t['max_total_num_tokens'] or 0)} tokens"
    return f"full {_b(full or 0)}, swa {_b(swa or 0)} tokens"


# --------------------------------------------------------------------------- commands


def cmd_plan(args: argparse.Namespace) -> int:
    sc = build_scenario(args)
    available = sc.require_budget()
    cfg = sc.configurator()
    plan = cfg.plan(available, fit=args.fit)
    sglang = _sglang_tokens(cfg, available)
    other = cfg.plan(available, fit="sglang" if args.fit == "exact" else "exact")
    if args.json:
        doc = {
            "kvbudget_version": kvbudget.__version__,
            "command": "plan",
            **sc.to_dict(),
            "configurator": cfg.kind,
            "cell_size": cfg.cell_size,
            "sglang": sglang,
            "plan": json.loads(plan.to_json()),
        }
        _emit_json(doc)
        return 0
    console = _console()
    _header(console, f"kvbudget plan (fit={args.fit})", sc, cfg)
    console.print(
        _pool_table(plan, f"{'exact' if args.fit == 'exact' else 'SGLang'} plan: pools and tensors")
    )
    over = plan.over_budget_bytes
    console.print(
        f"  available {_b(available)}, planned {_b(plan.total_bytes)}, "
        f"leftover {_b(plan.leftover_bytes)}, over budget {_b(over)} bytes"
        + ("  [red](exceeds the budget)[/red]" if over else "")
    )
    if plan.draft_bytes:
        console.print(
            f"  draft's share: {_b(plan.draft_bytes)} bytes ({_gib(plan.draft_bytes)}), "
            f"{100 * plan.draft_bytes / plan.total_bytes:.2f}% of the plan"
        )
    else:
        console.print("  draft's share: none (no draft pool)")
    console.print(f"  SGLang's numbers: {_tokens_text(sglang)}")
    if args.fit == "exact":
        if other.over_budget_bytes:
            console.print(
                f"  SGLang allocates those tokens plus {plan.page_size} padding row(s) per layer: "
                f"{_b(other.total_bytes)} bytes, [red]{_b(other.over_budget_bytes)} over budget[/red]; "
                "the exact plan fits."
            )
        else:
            console.print(
                f"  SGLang's allocation: {_b(other.total_bytes)} bytes, within budget "
                f"(leftover {_b(other.leftover_bytes)})."
            )
    if sc.is_default:
        console.print(
            "  [dim]Plan your own: kvbudget plan MODEL --gpu h100 --mem-fraction 0.9 --weights-gib W "
            "(or --available 30GiB); kvbudget models lists presets; kvbudget compare shows "
            "what the draft budget changed.[/dim]"
        )
    return 0


def _no_draft_spec(spec: SpeculativeConfig | None) -> SpeculativeConfig | None:
    """The same speculation with its draft layers left out of the budget (before PR #29622)."""
    if spec is None:
        return None
    return SpeculativeConfig(
        algorithm=spec.algorithm,
        draft_num_layers=0,
        num_steps=spec.num_steps,
        eagle_topk=spec.eagle_topk,
        num_draft_tokens=spec.num_draft_tokens,
    )


def _compare_data(sc: Scenario, available: int) -> dict[str, Any]:
    cfg = sc.configurator()
    exact = cfg.plan(available, fit="exact")
    sglang_plan = cfg.plan(available, fit="sglang")
    data: dict[str, Any] = {
        "configurator": cfg.kind,
        "cell_size": cfg.cell_size,
        "available_bytes": available,
        "fit": {"exact": json.loads(exact.to_json()), "sglang": json.loads(sglang_plan.to_json())},
    }
    has_draft = sc.spec is not None and sc.spec.draft_num_layers > 0 and exact.draft_bytes > 0
    if not has_draft:
        data["draft_budget"] = None
        return data
    with_draft = _sglang_tokens(cfg, available)
    nd_cfg = create_pool_configurator(sc.model, sc.serving(), _no_draft_spec(sc.spec))
    without: dict[str, Any] = {"cell_size": nd_cfg.cell_size}
    try:
        nd_tokens = _sglang_tokens(nd_cfg, available)
        primary = nd_tokens["full_max_total_num_tokens"] or nd_tokens["max_total_num_tokens"] or 0
        if not sc.model.full_attention_layer_ids:
            primary = nd_tokens["swa_max_total_num_tokens"] or primary
        target_only = nd_cfg.plan(available, fit="sglang")
        allocated = cfg.bytes_for_tokens(int(primary))
        without.update(
            tokens=nd_tokens,
            target_pool_bytes=target_only.total_bytes,
            allocated_bytes=allocated,
            draft_pool_bytes=allocated - target_only.total_bytes,
            over_budget_bytes=max(0, allocated - available),
            error=None,
        )
    except KVBudgetError as exc:
        without.update(tokens=None, allocated_bytes=None, over_budget_bytes=None, error=str(exc))
    data["draft_budget"] = {
        "with_draft": {
            "cell_size": cfg.cell_size,
            "tokens": with_draft,
            "allocated_bytes": sglang_plan.total_bytes,
            "draft_pool_bytes": sglang_plan.draft_bytes,
            "over_budget_bytes": sglang_plan.over_budget_bytes,
        },
        "without_draft": without,
        "sglang_always_counted_draft": cfg.kind == "default",
    }
    return data


def cmd_compare(args: argparse.Namespace) -> int:
    from rich.table import Table

    sc = build_scenario(args)
    available = sc.require_budget()
    data = _compare_data(sc, available)
    if args.json:
        _emit_json(
            {"kvbudget_version": kvbudget.__version__, "command": "compare", **sc.to_dict(), **data}
        )
        return 0
    cfg = sc.configurator()
    console = _console()
    _header(console, "kvbudget compare", sc, cfg)
    ex, sg = (PoolPlan.from_json(json.dumps(data["fit"][k])) for k in ("exact", "sglang"))

    t = Table(title="fit=exact vs fit=sglang (same budget)", title_justify="left")
    t.add_column("")
    t.add_column("exact", justify="right")
    t.add_column("sglang", justify="right")
    t.add_column("sglang - exact", justify="right")

    def row(label: str, a: int, b: int) -> None:
        t.add_row(label, _b(a), _b(b), f"{b - a:+,}")

    for pool in sg.pools:
        p_ex = ex.pool(pool.name)
        row(f"{pool.name} tokens", p_ex.tokens if p_ex is not None else 0, pool.tokens)
    row("total bytes", ex.total_bytes, sg.total_bytes)
    row("padding bytes", ex.padding_bytes, sg.padding_bytes)
    row("leftover bytes", ex.leftover_bytes, sg.leftover_bytes)
    row("over-budget bytes", ex.over_budget_bytes, sg.over_budget_bytes)
    console.print(t)
    if sg.over_budget_bytes:
        console.print(
            f"  SGLang's token counts plus its {sg.page_size} padding row(s) per layer allocate "
            f"{_b(sg.over_budget_bytes)} bytes ({_mib(sg.over_budget_bytes)}) more than the budget; "
            "fit=exact trims tokens until the tensors fit."
        )
    else:
        console.print("  SGLang's token counts fit this budget.")

    db = data["draft_budget"]
    if db is None:
        console.print("  No draft pool: nothing to compare for the draft budget (give --draft).")
        return 0
    w, wo = db["with_draft"], db["without_draft"]
    t2 = Table(
        title="SGLang with the draft in the budget (PR #29622) vs without it (before)",
        title_justify="left",
    )
    t2.add_column("")
    t2.add_column("with draft terms", justify="right")
    t2.add_column("without", justify="right")
    t2.add_column("without - with", justify="right")
    t2.add_row("cell size (bytes/token)", _b(w["cell_size"]), _b(wo["cell_size"]), "")
    if wo.get("error"):
        console.print(t2)
        console.print(f"  without draft terms: [red]{wo['error']}[/red]")
        return 0
    for key, label in (
        ("full_max_total_num_tokens", "full tokens"),
        ("swa_max_total_num_tokens", "swa tokens"),
        ("max_total_num_tokens", "max_total_num_tokens"),
    ):
        a, b = w["tokens"][key], wo["tokens"][key]
        if a is None and b is None:
            continue
        if key == "max_total_num_tokens" and w["tokens"]["full_max_total_num_tokens"] is not None:
            continue
        t2.add_row(label, _b(a or 0), _b(b or 0), f"{(b or 0) - (a or 0):+,}")
    t2.add_row(
        "draft pool bytes",
        _b(w["draft_pool_bytes"]),
        _b(wo["draft_pool_bytes"]),
        f"{wo['draft_pool_bytes'] - w['draft_pool_bytes']:+,}",
    )
    t2.add_row(
        "allocated bytes (with draft pool)",
        _b(w["allocated_bytes"]),
        _b(wo["allocated_bytes"]),
        f"{wo['allocated_bytes'] - w['allocated_bytes']:+,}",
    )
    t2.add_row(
        "over-budget bytes",
        _b(w["over_budget_bytes"]),
        _b(wo["over_budget_bytes"]),
        f"{wo['over_budget_bytes'] - w['over_budget_bytes']:+,}",
    )
    console.print(t2)
    key = (
        "full_max_total_num_tokens"
        if sc.model.full_attention_layer_ids
        else "swa_max_total_num_tokens"
    )
    a_tok = w["tokens"][key] or w["tokens"]["max_total_num_tokens"]
    b_tok = wo["tokens"][key] or wo["tokens"]["max_total_num_tokens"]
    pool_word = "full" if sc.model.full_attention_layer_ids else "SWA"
    console.print(
        f"  Without draft terms SGLang's {pool_word} pool would hold {_b(b_tok)} tokens "
        f"({b_tok - a_tok:+,}), and allocating the draft pool ({_b(wo['draft_pool_bytes'])} bytes) "
        f"on top would overrun the budget by {_b(wo['over_budget_bytes'])} bytes "
        f"({_gib(wo['over_budget_bytes'])})."
    )
    if db["sglang_always_counted_draft"]:
        console.print(
            "  [dim]This model uses SGLang's DefaultPoolConfigurator, which always scaled the cell by "
            "(1 + d/L); PR #29622 fixed the SWA configurators. The 'without' column is what "
            "leaving the draft out would cost.[/dim]"
        )
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from kvbudget.models import GpuSpec, get_gpu, get_preset, list_gpus, list_presets

    presets = [get_preset(n) for n in list_presets()]
    gpus: list[GpuSpec] = [get_gpu(n) for n in list_gpus()]
    if args.json:
        _emit_json(
            {
                "presets": [
                    {
                        "name": p.name,
                        "display_name": p.display_name,
                        "role": p.role,
                        "draft_kind": p.draft_kind,
                        "targets": list(p.targets),
                        "hf_id": p.hf_id,
                        "kv_cache_dtype": p.kv_cache_dtype,
                        "full_layers": len(p.model_kwargs["full_attention_layer_ids"]),
                        "swa_layers": len(p.model_kwargs["swa_attention_layer_ids"]),
                        "draft_num_layers": p.draft_num_layers,
                        "source": p.source,
                    }
                    for p in presets
                ],
                "gpus": [
                    {
                        "name": g.name,
                        "vendor": g.vendor,
                        "model": g.model,
                        "memory_type": g.memory_type,
                        "stated_memory_gb": g.stated_memory_gb,
                        "memory_bytes": g.memory_bytes,
                        "bytes_basis": g.bytes_basis,
                        "source": g.source,
                    }
                    for g in gpus
                ],
            }
        )
        return 0

    tables: list[Any] = []
    for role in ("target", "draft"):
        if role == "target":
            headers = ["name", "hf_id", "layers full+swa", "kv heads x dim"]
        else:
            headers = ["name", "hf_id", "kind", "layers", "for"]
        rows: list[list[str]] = []
        for p in presets:
            if p.role != role:
                continue
            kw = p.model_kwargs
            src = p.source.split(";")[0].strip()
            if role == "target":
                mla = kw.get("kv_lora_rank")
                heads = (
                    f"MLA {mla}+{kw['qk_rope_head_dim']}"
                    if mla
                    else f"{kw['num_kv_heads']} x {kw['head_dim']}"
                )
                layers = (
                    f"{len(kw['full_attention_layer_ids'])}+{len(kw['swa_attention_layer_ids'])}"
                )
                rows.append([p.name, p.hf_id or "-", layers, heads, src])
            else:
                rows.append(
                    [
                        p.name,
                        p.hf_id or "-",
                        p.draft_kind or "-",
                        str(p.draft_num_layers),
                        ", ".join(p.targets) or "-",
                        src,
                    ]
                )
        tables.append(_fixed_table(f"{role} presets", headers, rows, "source (first; --json: all)"))
    g_rows = [
        [
            g.name,
            f"{g.vendor} {g.model}",
            f"{g.stated_memory_gb} GB {g.memory_type}",
            _b(g.memory_bytes),
            g.source,
        ]
        for g in gpus
    ]
    tables.append(
        _fixed_table(
            "GPUs (vendor-stated memory)", ["name", "model", "memory", "bytes"], g_rows, "source"
        )
    )
    console = _console(min_width=max(w for _, w in tables))
    for table, _ in tables:
        console.print(table)
    console.print(
        "  Drafts: --draft NAME (a draft preset), eagle3:N / mtp:N (N layers at the target's "
        "geometry), standalone:NAME (any preset as a standalone draft)."
    )
    return 0


def _fixed_table(
    title: str, headers: list[str], rows: list[list[str]], last: str
) -> tuple[Any, int]:
    """(table, the width it needs): columns keep their width; the last (long text) one is cut."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    used = 1
    for i, h in enumerate(headers):
        w = max([len(h), *(len(r[i]) for r in rows)])
        used += w + 3
        t.add_column(h, no_wrap=True, min_width=w)
    t.add_column(last, no_wrap=True, overflow="ellipsis", max_width=_SOURCE_WIDTH)
    for r in rows:
        t.add_row(*r)
    return t, used + _SOURCE_WIDTH + 3


_SOURCE_WIDTH: Final = 56


# --------------------------------------------------------------------------- sweep

VARY_CHOICES: Final = ("ratio", "available", "tp", "page-size")
_VARY_LABEL: Final[dict[str, str]] = {
    "ratio": "swa_full_tokens_ratio",
    "available": "available KV budget (GiB)",
    "tp": "tensor-parallel size (attention TP)",
    "page-size": "page size (tokens)",
}

CSV_COLUMNS: Final = (
    "vary",
    "value",
    "available_bytes",
    "tp_size",
    "page_size",
    "swa_full_tokens_ratio",
    "configurator",
    "cell_size",
    "sglang_full_tokens",
    "sglang_swa_tokens",
    "sglang_total_bytes",
    "sglang_over_budget_bytes",
    "full_tokens",
    "swa_tokens",
    "draft_tokens",
    "total_bytes",
    "leftover_bytes",
    "padding_bytes",
    "draft_bytes",
    "error",
)


def _sweep_values(args: argparse.Namespace) -> list[float | int]:
    vary: str = args.vary
    integer = vary in ("tp", "page-size", "available")
    values: list[float | int] = []
    if args.values is not None:
        if args.start is not None or args.stop is not None or args.steps is not None:
            raise UsageError("give --values or --start/--stop/--steps, not both")
        items = [v for raw in args.values for v in raw.replace(",", " ").split()]
        for item in items:
            try:
                if vary == "available":
                    values.append(parse_bytes(item))
                elif integer:
                    values.append(int(item))
                else:
                    values.append(float(item))
            except ValueError as exc:
                raise UsageError(
                    f"--values: {exc}" if vary == "available" else f"--values: bad {vary} {item!r}"
                ) from None
    else:
        if args.start is None or args.stop is None:
            raise UsageError("sweep needs --values V1 V2 ... or --start A --stop B [--steps N]")
        steps = 10 if args.steps is None else args.steps
        try:
            lo, hi = (
                parse_bytes(x) if vary == "available" else float(x) for x in (args.start, args.stop)
            )
        except ValueError as exc:
            raise UsageError(f"--start/--stop: {exc}") from None
        raw_vals = [lo + (hi - lo) * i / (steps - 1) for i in range(steps)] if steps > 1 else [lo]
        for v in raw_vals:
            values.append(int(round(v)) if integer else round(v, 12))
        values = list(dict.fromkeys(values))
    if not values:
        raise UsageError("sweep: no values")
    return values


def _sweep_row(sc: Scenario, vary: str, value: float | int) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    available = sc.available
    if vary == "ratio":
        overrides["swa_full_tokens_ratio"] = float(value)
    elif vary == "tp":
        overrides["tp_size"] = int(value)
    elif vary == "page-size":
        overrides["page_size"] = int(value)
    else:
        available = int(value)
    serving_kwargs = {**sc.serving_kwargs, **overrides}
    row: dict[str, Any] = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        vary=vary,
        value=value,
        available_bytes=available,
        tp_size=serving_kwargs["tp_size"],
        page_size=serving_kwargs["page_size"],
        swa_full_tokens_ratio=serving_kwargs["swa_full_tokens_ratio"],
    )
    try:
        cfg = sc.configurator(**overrides)
        assert available is not None
        row.update(configurator=cfg.kind, cell_size=cfg.cell_size)
        t = _sglang_tokens(cfg, available)
        sg = cfg.plan(available, fit="sglang")
        ex = cfg.plan(available, fit="exact")
        full = ex.pool("full")
        swa = ex.pool("swa")
        draft = ex.pool("draft")
        row.update(
            sglang_full_tokens=t["full_max_total_num_tokens"]
            if t["full_max_total_num_tokens"] is not None
            else t["max_total_num_tokens"],
            sglang_swa_tokens=t["swa_max_total_num_tokens"]
            if t["swa_max_total_num_tokens"] is not None
            else 0,
            sglang_total_bytes=sg.total_bytes,
            sglang_over_budget_bytes=sg.over_budget_bytes,
            full_tokens=full.tokens if full is not None else 0,
            swa_tokens=swa.tokens if swa is not None else 0,
            draft_tokens=draft.tokens if draft is not None else 0,
            total_bytes=ex.total_bytes,
            leftover_bytes=ex.leftover_bytes,
            padding_bytes=ex.padding_bytes,
            draft_bytes=ex.draft_bytes,
        )
    except KVBudgetError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def _progress(values: Sequence[float | int], enabled: bool) -> Iterator[tuple[int, float | int]]:
    if not enabled:
        yield from enumerate(values)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_console(stderr=True),
        transient=False,
    ) as progress:
        task = progress.add_task("sweep", total=len(values))
        for i, v in enumerate(values):
            yield i, v
            progress.advance(task)


def _write_csv(rows: list[dict[str, Any]], out: IO[str]) -> None:
    writer = csv.DictWriter(out, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise _MissingDependency(
            "--plot needs matplotlib, which is not installed: pip install 'kvbudget[plot]' "
            "(or pip install matplotlib)"
        ) from None


class _MissingDependency(Exception):
    """An optional dependency is missing (exit status 1)."""


def _plot(rows: list[dict[str, Any]], sc: Scenario, vary: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def xval(r: dict[str, Any]) -> float:
        v = float(r["value"])
        return v / GIB if vary == "available" else v

    ok = [r for r in rows if not r["error"]]
    bad = [r for r in rows if r["error"]]
    xs = [xval(r) for r in ok]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True, height_ratios=[3, 2])
    full = [int(r["full_tokens"]) for r in ok]
    swa = [int(r["swa_tokens"]) for r in ok]
    draft = [int(r["draft_tokens"]) for r in ok]
    if any(full):
        label = "full pool (exact)"
        if any(draft) and draft == full:
            label = "full pool = draft pool (exact)"
        ax1.plot(xs, full, "o-", color="tab:blue", label=label, markersize=5)
    if any(swa):
        label = "SWA pool (exact)"
        if any(draft) and draft == swa and draft != full:
            label = "SWA pool = draft pool (exact)"
        ax1.plot(xs, swa, "s-", color="tab:orange", label=label, markersize=5)
    if any(draft) and draft != full and draft != swa:
        ax1.plot(xs, draft, "^-", color="tab:green", label="draft pool (exact)", markersize=5)
    ys_sg = [int(r["sglang_full_tokens"]) for r in ok]
    if any(ys_sg):
        ax1.plot(xs, ys_sg, "--", color="black", linewidth=1, label="SGLang max_total_num_tokens")
    for r in bad:
        ax1.axvline(xval(r), color="tab:red", alpha=0.25, linewidth=6)
        ax2.axvline(xval(r), color="tab:red", alpha=0.25, linewidth=6)
    if bad:
        ax1.plot([], [], color="tab:red", alpha=0.25, linewidth=6, label="planning error (no plan)")
    ax1.set_ylabel("tokens per pool")
    ax1.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax1.grid(True, alpha=0.3)
    ax1.legend(loc="best", fontsize=9)
    ax1.set_ylim(bottom=0)

    over = [int(r["sglang_over_budget_bytes"]) for r in ok]
    left = [int(r["leftover_bytes"]) for r in ok]
    top = max([*over, *left, 1])
    unit, div = ("MiB", float(1 << 20)) if top >= (1 << 20) else ("KiB", 1024.0)
    ax2.plot(
        xs,
        [v / div for v in over],
        "o-",
        color="tab:red",
        markersize=5,
        label="SGLang's plan: bytes over the budget",
    )
    ax2.plot(
        xs,
        [v / div for v in left],
        "s-",
        color="tab:blue",
        markersize=5,
        label="exact plan: budget left unused",
    )
    ax2.set_ylabel(unit)
    ax2.set_ylim(0, top / div * 1.12)
    ax2.grid(True, alpha=0.3)
    ax2.legend(loc="best", fontsize=9)
    ax2.set_xlabel(_VARY_LABEL[vary])
    if vary in ("tp", "page-size") and xs and min(xs) > 0:
        ax2.set_xscale("log", base=2)
        ax2.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    model = sc.model_info.get("preset") or sc.model_label
    draft_name = sc.draft_info.get("preset") or sc.draft_info.get("spec", "none")
    budget = "" if vary == "available" else f", budget {_gib(sc.available or 0)}"
    fig.suptitle(
        f"kvbudget sweep: {model}, draft {draft_name}{budget}\n"
        f"pool tokens and bytes vs {_VARY_LABEL[vary]}"
    )
    ax1.set_title(_serving_summary(sc.serving(), skip=vary), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cmd_sweep(args: argparse.Namespace) -> int:
    vary: str = args.vary
    if vary == "available" and args.available is not None:
        raise UsageError("--vary available sets the budget; drop --available")
    values = _sweep_values(args)
    if args.plot is not None:
        _check_matplotlib()
    if vary == "available":
        args.available = values[0] if isinstance(values[0], int) else int(values[0])
    sc = build_scenario(args)
    sc.require_budget()
    rows: list[dict[str, Any]] = []
    show_progress = not args.no_progress
    for _, v in _progress(values, show_progress):
        rows.append(_sweep_row(sc, vary, v))
    if args.out == "-":
        _write_csv(rows, sys.stdout)
    else:
        if args.out is not None:
            with open(args.out, "w", newline="", encoding="utf-8") as fh:
                _write_csv(rows, fh)
        _sweep_table(rows, sc, vary)
    if args.plot is not None:
        _plot(rows, sc, vary, args.plot)
    err = sys.stderr
    if args.out not in (None, "-"):
        print(f"wrote {len(rows)} rows to {args.out}", file=err)
    if args.plot is not None:
        print(f"wrote plot to {args.plot}", file=err)
    failed = sum(1 for r in rows if r["error"])
    if failed:
        print(
            f"{failed} of {len(rows)} values gave a planning error (see the error column)", file=err
        )
    return 1 if failed == len(rows) else 0


def _sweep_table(rows: list[dict[str, Any]], sc: Scenario, vary: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    console.print(
        f"[bold]kvbudget sweep over {vary}[/bold]: {escape(sc.model_label)}; draft: {escape(sc.draft_label)}"
    )
    if vary != "available":
        console.print(f"  budget: {escape(sc.budget_label)}")
    t = Table(title_justify="left")
    t.add_column(vary, justify="right")
    for col in ("full", "swa", "draft", "SGLang full", "total bytes", "leftover", "SGLang over"):
        t.add_column(col, justify="right", no_wrap=True)
    errors: list[str] = []
    for r in rows:
        v = r["value"]
        label = (
            _gib(int(v)) if vary == "available" else f"{v:g}" if isinstance(v, float) else str(v)
        )
        if r["error"]:
            t.add_row(label, "[red]error[/red]", "", "", "", "", "", "")
            errors.append(f"  {vary} {label}: [red]{escape(str(r['error']))}[/red]")
            continue
        t.add_row(
            label,
            _b(r["full_tokens"]),
            _b(r["swa_tokens"]),
            _b(r["draft_tokens"]),
            _b(r["sglang_full_tokens"]),
            _b(r["total_bytes"]),
            _b(r["leftover_bytes"]),
            _b(r["sglang_over_budget_bytes"]),
        )
    console.print(t)
    for line in errors:
        console.print(line)


# --------------------------------------------------------------------------- main


def _emit_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _add_scenario_args(p: argparse.ArgumentParser, *, budget: bool = True) -> None:
    g = p.add_argument_group("model and draft")
    g.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help=f"a preset name or HF id (kvbudget models lists them) or a config.json path; "
        f"default: {DEFAULT_MODEL} with --draft {DEFAULT_DRAFT} and --available 40GiB",
    )
    g.add_argument(
        "--config",
        metavar="PATH",
        help="a Hugging Face config.json (or its directory) instead of MODEL",
    )
    g.add_argument(
        "--draft",
        metavar="SPEC",
        help="a draft preset NAME | eagle3:N | eagle:N | mtp:N (N layers at the target's full geometry) | "
        "standalone:NAME (any preset) | KIND:path/config.json | none",
    )
    g.add_argument(
        "--num-steps",
        type=_positive_int,
        help="speculative num_steps (ChunkCap decode reservation)",
    )
    g.add_argument("--eagle-topk", type=_positive_int, help="speculative eagle_topk")
    g.add_argument("--num-draft-tokens", type=_positive_int, help="speculative num_draft_tokens")

    b = p.add_argument_group("budget (per GPU / rank)")
    src = b.add_mutually_exclusive_group()
    src.add_argument(
        "--available",
        type=_bytes_arg,
        metavar="BYTES",
        help="KV bytes available on this rank: 42949672960, 40GiB, 40GB, 512MiB ..."
        + ("" if budget else " (not with --vary available)"),
    )
    src.add_argument("--gpu", metavar="NAME", help="a GPU preset (kvbudget models lists them)")
    b.add_argument(
        "--mem-fraction",
        type=_fraction,
        metavar="F",
        help=f"with --gpu: SGLang's mem_fraction_static (default {DEFAULT_MEM_FRACTION})",
    )
    b.add_argument(
        "--weights-gib",
        type=_nonneg_float,
        metavar="W",
        help="with --gpu: GiB of weights (target and draft) on each GPU; budget = memory x F - W",
    )

    s = p.add_argument_group("serving (SGLang server args)")
    s.add_argument(
        "--tp",
        type=_positive_int,
        default=1,
        metavar="N",
        help="attention tensor-parallel size (default 1)",
    )
    s.add_argument(
        "--dcp",
        type=_positive_int,
        default=1,
        metavar="N",
        help="decode context-parallel size (default 1)",
    )
    s.add_argument(
        "--attn-dp",
        type=_positive_int,
        default=1,
        metavar="N",
        help="attention data-parallel size (default 1)",
    )
    s.add_argument(
        "--kv-dtype",
        metavar="D",
        help="kv_cache_dtype: bf16, fp16, fp32, fp8_e4m3, fp8_e5m2, mxfp8, fp4_e2m1 (default: the model's)",
    )
    s.add_argument(
        "--page-size",
        type=_positive_int,
        default=1,
        metavar="P",
        help="page size in tokens (default 1)",
    )
    s.add_argument(
        "--ratio", type=float, default=0.8, metavar="R", help="swa_full_tokens_ratio (default 0.8)"
    )
    s.add_argument("--max-running-requests", type=_positive_int, metavar="N")
    s.add_argument("--chunked-prefill-size", type=_positive_int, metavar="N")
    s.add_argument("--disable-radix-cache", action="store_true")
    s.add_argument("--disable-overlap-schedule", action="store_true")
    s.add_argument("--disaggregation-mode", choices=("null", "prefill", "decode"), default="null")
    s.add_argument(
        "--decode-extra-slots",
        type=_nonneg_int,
        default=0,
        metavar="N",
        help="disaggregation_decode_extra_slots (PD decode)",
    )
    s.add_argument("--swa-eviction-interval", type=_positive_int, default=128, metavar="E")
    s.add_argument(
        "--disable-hybrid-swa-memory",
        action="store_true",
        help="plan SWA layers as full layers (SGLang's choice for Gemma 2/3)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``kvbudget`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Plan LLM KV-cache pools exactly: SGLang's numbers plus an exact plan that fits. "
        "With no command, `kvbudget ...` is `kvbudget plan ...`.",
        epilog="exit status: 0 ok, 1 planning error, 2 usage error",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kvbudget.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "plan",
        help="plan the pools for a model, draft and budget (the default command)",
        description="Plan the KV pools. Without MODEL: the embedded default "
        f"({DEFAULT_MODEL}, --draft {DEFAULT_DRAFT}, 40 GiB). --json prints a document whose "
        "'plan' member round-trips: PoolPlan.from_json(json.dumps(doc['plan'])).",
    )
    _add_scenario_args(p)
    p.add_argument(
        "--fit",
        choices=("exact", "sglang"),
        default="exact",
        help="exact: the largest plan whose tensors fit; sglang: SGLang's token counts (default exact)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_plan)

    c = sub.add_parser(
        "compare",
        help="fit=exact vs fit=sglang, and with vs without the draft in the budget",
        description="Compare fit=exact with fit=sglang, and SGLang with the draft layers in "
        "its budget (PR #29622) with SGLang without them (before).",
    )
    _add_scenario_args(c)
    c.add_argument("--json", action="store_true", help="print JSON instead of tables")
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser(
        "sweep",
        help="vary one input, tabulate, write CSV and a plot",
        description="Plan once per value of one input. Values: --values V1 V2 ... (or "
        "comma-separated) or --start A --stop B --steps N (evenly spaced, inclusive). Put MODEL "
        "before --values. Values that fail to plan are kept as rows with an error.",
    )
    s.add_argument("--vary", required=True, choices=VARY_CHOICES)
    s.add_argument(
        "--values", nargs="+", metavar="V", help="values (byte counts with units for available)"
    )
    s.add_argument("--start", metavar="A")
    s.add_argument("--stop", metavar="B")
    s.add_argument("--steps", type=_positive_int, metavar="N", help="number of values (default 10)")
    s.add_argument(
        "--out", metavar="CSV", help="write the rows as CSV ('-' for stdout instead of the table)"
    )
    s.add_argument("--plot", metavar="PNG", help="write a plot (needs matplotlib)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_scenario_args(s, budget=False)
    s.set_defaults(func=cmd_sweep)

    r = sub.add_parser(
        "ratio",
        help="the SWA ratio at which the full and SWA pools run out together for a workload",
        description="Suggest swa_full_tokens_ratio for a workload of context lengths: the ratio "
        "that admits the most concurrent requests (never fewer than --ratio, the baseline) "
        "without breaking the SWA admission floor.",
    )
    r.add_argument("--context-lengths", nargs="+", required=True, metavar="L",
                   help="context lengths of the workload's requests, tokens (space or comma separated)")
    r.add_argument("--weights", nargs="+", metavar="W", help="relative weight of each length")
    _add_scenario_args(r)
    r.add_argument("--json", action="store_true", help="print JSON instead of a table")
    r.set_defaults(func=cmd_ratio)

    m = sub.add_parser("models", help="list model presets (targets and drafts) and GPUs")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_models)
    return parser


def _context_lengths(values: Sequence[str]) -> list[int]:
    out: list[int] = []
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if not part:
                continue
            try:
                n = int(part)
            except ValueError:
                raise UsageError(f"--context-lengths: not an integer: {part!r}") from None
            if n < 1:
                raise UsageError(f"--context-lengths: must be >= 1, got {n}")
            out.append(n)
    if not out:
        raise UsageError("--context-lengths: give at least one length")
    return out


def cmd_ratio(args: argparse.Namespace) -> int:
    """``kvbudget ratio``: the SWA ratio at which the full and SWA pools run out together."""
    from rich.table import Table

    from kvbudget.workload import suggest_swa_ratio

    sc = build_scenario(args)
    available = sc.require_budget()
    cfg = sc.configurator()
    lengths = _context_lengths(args.context_lengths)
    weights = None if args.weights is None else [float(w) for w in args.weights]
    r = suggest_swa_ratio(cfg, lengths, available, weights=weights)
    if args.json:
        doc = {
            "kvbudget_version": kvbudget.__version__,
            "command": "ratio",
            **sc.to_dict(),
            "context_lengths": lengths,
            "weights": weights,
            "ratio": r.ratio,
            "concurrency": r.concurrency,
            "baseline_ratio": r.baseline_ratio,
            "baseline_concurrency": r.baseline_concurrency,
            "full_tokens_per_request": r.full_tokens_per_request,
            "swa_tokens_per_request": r.swa_tokens_per_request,
            "idle_full_bytes": r.idle_full_bytes,
            "idle_swa_bytes": r.idle_swa_bytes,
            "baseline_idle_full_bytes": r.baseline_idle_full_bytes,
            "baseline_idle_swa_bytes": r.baseline_idle_swa_bytes,
            "full_tokens": r.config.full_max_total_num_tokens,
            "swa_tokens": r.config.swa_max_total_num_tokens,
        }
        _emit_json(doc)
        return 0
    console = _console()
    _header(console, "kvbudget ratio", sc, cfg)
    console.print(
        f"  workload: {len(lengths)} context length(s); an average request holds "
        f"{r.full_tokens_per_request:,.0f} full and {r.swa_tokens_per_request:,.0f} SWA tokens"
    )
    t = Table(title="swa_full_tokens_ratio: suggested vs baseline (SGLang's sizing)", title_justify="left")
    t.add_column("")
    t.add_column("suggested", justify="right")
    t.add_column("baseline", justify="right")
    base = r.baseline_config
    t.add_row("ratio", f"{r.ratio:.4f}", f"{r.baseline_ratio:.4f}")
    t.add_row("concurrent requests", f"{r.concurrency:,}", f"{r.baseline_concurrency:,}")
    t.add_row("full tokens", _b(r.config.full_max_total_num_tokens or 0),
              _b(base.full_max_total_num_tokens or 0) if base else "-")
    t.add_row("SWA tokens", _b(r.config.swa_max_total_num_tokens or 0),
              _b(base.swa_max_total_num_tokens or 0) if base else "-")
    t.add_row("idle full-pool bytes", _b(r.idle_full_bytes), _b(r.baseline_idle_full_bytes))
    t.add_row("idle SWA-pool bytes", _b(r.idle_swa_bytes), _b(r.baseline_idle_swa_bytes))
    console.print(t)
    if cfg.serving.chunked_prefill_size is None:
        console.print(
            "  note: no --chunked-prefill-size, so a request prefills at once and holds its whole "
            "context in the SWA pool; SGLang usually chunks (e.g. --chunked-prefill-size 8192)."
        )
    gain = "inf" if r.baseline_concurrency == 0 else f"{r.concurrency / r.baseline_concurrency:.2f}x"
    console.print(f"  use --swa-full-tokens-ratio {r.ratio:.4f}: {gain} the baseline's concurrency")
    return 0


def _normalize_argv(argv: list[str]) -> list[str]:
    """``kvbudget`` alone, or ``kvbudget MODEL ...``, means ``kvbudget plan ...``."""
    if not argv:
        return ["plan"]
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    return ["plan", *argv]


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args_list = _normalize_argv(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else 2
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except UsageError as exc:
        sub = getattr(args, "command", None)
        return _fail(f"{sub}: {exc}" if sub else str(exc), 2)
    except KeyError as exc:  # UnknownPresetError / UnknownGpuError carry suggestions
        from kvbudget.models import UnknownGpuError, UnknownPresetError

        if isinstance(exc, (UnknownPresetError, UnknownGpuError)):
            what = "model or draft preset" if isinstance(exc, UnknownPresetError) else "GPU"
            hint = (
                f"; did you mean {', '.join(repr(x) for x in exc.suggestions)}?"
                if exc.suggestions
                else ""
            )
            return _fail(f"unknown {what} {exc.name!r}{hint} (`kvbudget models` lists them all)", 2)
        raise
    except KVBudgetError as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except _MissingDependency as exc:
        return _fail(str(exc), 1)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
