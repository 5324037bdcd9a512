"""The ``kvbudget`` argument parser.

The serving flags (every ``ServingConfig`` field) and the speculative
``--num-steps``/``--eagle-topk``/``--num-draft-tokens`` are generated from the
field table (:data:`kvbudget.fields.SCENARIO_FIELDS`): flag ``--`` + the name
with ``-``, type, choices, default and help from its :class:`~kvbudget.fields.Field`.
A new ``ServingConfig`` field needs no edit here. :data:`ALIASES` keeps the
short spellings (``--tp``, ``--kv-dtype``, ``--ratio``, ...).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any, Final

import kvbudget
from kvbudget.fields import SCENARIO_FIELDS, Field, canonical_name

__all__ = [
    "ALIASES",
    "COMMANDS",
    "SERVING_FIELDS",
    "SPEC_FIELDS",
    "UsageError",
    "VARY_CHOICES",
    "VARY_FIELDS",
    "build_parser",
    "normalize_argv",
    "parse_bytes",
    "serving_values",
    "spec_values",
]

GIB: Final = 1 << 30
PROG: Final = "kvbudget"
COMMANDS: Final = ("plan", "compare", "sweep", "ratio", "models")

# The embedded default scenario: REFERENCE section 5, example 1.
DEFAULT_MODEL: Final = "gemma-3-27b"
DEFAULT_DRAFT: Final = "eagle3:1"
DEFAULT_AVAILABLE: Final = 40 * GIB
DEFAULT_MEM_FRACTION: Final = 0.9

#: ``sweep --vary`` -> the scenario field it sets (None: the budget).
VARY_FIELDS: Final[dict[str, str | None]] = {
    "ratio": "swa_full_tokens_ratio",
    "available": None,
    "tp": "tp_size",
    "page-size": "page_size",
}
VARY_CHOICES: Final = tuple(VARY_FIELDS)

#: Every ServingConfig field is a serving flag.
SERVING_FIELDS: Final[tuple[Field, ...]] = tuple(
    f for f in SCENARIO_FIELDS.values() if f.owner == "ServingConfig"
)
#: The speculative fields given as flags (the rest come with --draft).
SPEC_FIELDS: Final[tuple[Field, ...]] = tuple(
    SCENARIO_FIELDS[n] for n in ("num_steps", "eagle_topk", "num_draft_tokens")
)
#: Short spellings kept next to the generated ``--field-name`` flags.
ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "tp_size": ("--tp",),
    "dcp_size": ("--dcp",),
    "attn_dp_size": ("--attn-dp",),
    "kv_cache_dtype": ("--kv-dtype",),
    "swa_full_tokens_ratio": ("--ratio",),
    "disaggregation_decode_extra_slots": ("--decode-extra-slots",),
}
# Fields whose CLI default is not the library's: (default, how help shows it).
_CLI_DEFAULTS: Final[dict[str, tuple[Any, str]]] = {
    "kv_cache_dtype": (None, "the model's dtype, else bf16"),
}

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


class UsageError(Exception):
    """A bad command line value found after parsing (exit status 2)."""


# --------------------------------------------------------------------------- value types


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


def _int_at_least(minimum: int | None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


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


def _choice(field: Field) -> Callable[[str], str]:
    """The canonical name of a choice (aliases such as ``fp8`` included), parsed by the core."""

    def parse(text: str) -> str:
        try:
            return canonical_name(field.name, text)
        except kvbudget.KVBudgetError:
            return text  # argparse reports it against the choices

    return parse


# --------------------------------------------------------------------------- flags from fields

# The core's kinds -> (argparse type, metavar).
_KIND_TYPES: Final[dict[str, tuple[Callable[[str], Any], str]]] = {
    "positive": (_positive_int, "N"),
    "opt_positive": (_positive_int, "N"),
    "count": (_nonneg_int, "N"),
    "opt_count": (_nonneg_int, "N"),
    "signed": (_int_at_least(None), "N"),
    "ratio": (float, "R"),
}


def _add_field_argument(group: Any, field: Field) -> None:
    """One flag for one field: ``--`` + the name with ``-`` (and its aliases)."""
    flags = [f"--{field.name.replace('_', '-')}", *ALIASES.get(field.name, ())]
    default, shown = _CLI_DEFAULTS.get(field.name, (field.default, str(field.default)))
    doc = field.doc.replace("`", "").replace("%", "%%").rstrip(".")
    kw: dict[str, Any] = {"dest": field.name, "default": default}
    if field.kind == "flag":
        kw["action"] = argparse.BooleanOptionalAction if default else "store_true"
        kw["help"] = doc
    elif field.kind in ("choice", "opt_choice"):
        kw.update(type=_choice(field), choices=field.choices, metavar="NAME")
        kw["help"] = f"{doc}: {', '.join(field.choices)} (default: {shown})"
    elif field.kind in _KIND_TYPES:
        kw["type"], kw["metavar"] = _KIND_TYPES[field.kind]
        kw["help"] = doc + ("" if default is None else f" (default: {shown})")
    else:
        raise TypeError(f"no command line flag for field {field.name!r} of kind {field.kind!r}")
    group.add_argument(*flags, **kw)


def serving_values(args: argparse.Namespace) -> dict[str, Any]:
    """``ServingConfig`` keyword arguments from the generated flags (kv_cache_dtype may be None)."""
    return {f.name: getattr(args, f.name) for f in SERVING_FIELDS}


def spec_values(args: argparse.Namespace) -> dict[str, Any]:
    """``SpeculativeConfig`` keyword arguments from the speculative flags."""
    return {f.name: getattr(args, f.name) for f in SPEC_FIELDS}


# --------------------------------------------------------------------------- the parser


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
        help="a draft preset NAME | eagle3:N | eagle:N | mtp:N (N layers at the target's full "
        "geometry) | standalone:NAME (any preset) | KIND:path/config.json | none",
    )
    for f in SPEC_FIELDS:
        _add_field_argument(g, f)

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

    s = p.add_argument_group("serving (SGLang server args; every ServingConfig field)")
    for f in SERVING_FIELDS:
        _add_field_argument(s, f)


def _add_command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser; no abbreviated flags (``--model`` is not ``--model-dtype``)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, allow_abbrev=False, **kwargs)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``kvbudget`` argument parser; ``args.command`` names the command's module."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Plan LLM KV-cache pools exactly: SGLang's numbers plus an exact plan that "
        "fits. With no command, `kvbudget ...` is `kvbudget plan ...`.",
        epilog="exit status: 0 ok, 1 planning error, 2 usage error",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kvbudget.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _add_command(sub, 
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
        help="exact: the largest plan whose tensors fit; sglang: SGLang's token counts "
        "(default exact)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    c = _add_command(sub, 
        "compare",
        help="fit=exact vs fit=sglang, and with vs without the draft in the budget",
        description="Compare fit=exact with fit=sglang, and SGLang with the draft layers in "
        "its budget (PR #29622) with SGLang without them (before).",
    )
    _add_scenario_args(c)
    c.add_argument("--json", action="store_true", help="print JSON instead of tables")

    s = _add_command(sub, 
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

    r = _add_command(sub, 
        "ratio",
        help="the SWA ratio at which the full and SWA pools run out together for a workload",
        description="Suggest swa_full_tokens_ratio for a workload of context lengths: the ratio "
        "that admits the most concurrent requests (never fewer than --ratio, the baseline) "
        "without breaking the SWA admission floor.",
    )
    r.add_argument(
        "--context-lengths",
        nargs="+",
        required=True,
        metavar="L",
        help="context lengths of the workload's requests, tokens (space or comma separated)",
    )
    r.add_argument("--weights", nargs="+", metavar="W", help="relative weight of each length")
    _add_scenario_args(r)
    r.add_argument("--json", action="store_true", help="print JSON instead of a table")

    m = _add_command(sub, "models", help="list model presets (targets and drafts) and GPUs")
    m.add_argument("--json", action="store_true")
    return parser


def normalize_argv(argv: list[str]) -> list[str]:
    """``kvbudget`` alone, or ``kvbudget MODEL ...``, means ``kvbudget plan ...``."""
    if not argv:
        return ["plan"]
    if argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    return ["plan", *argv]
