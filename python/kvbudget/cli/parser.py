"""The ``kvbudget`` argument parser.

The serving flags (every ``ServingConfig`` field) and the speculative
``--num-steps``/``--eagle-topk``/``--num-draft-tokens`` are generated from the
field table (:data:`kvbudget.fields.SCENARIO_FIELDS`): flag ``--`` + the name
with ``-``, type, choices, default and help from its :class:`~kvbudget.fields.Field`.
A new ``ServingConfig`` field needs no edit here. :data:`ALIASES` keeps the
short spellings (``--tp``, ``--kv-dtype``, ``--ratio``, ...).

Every number is parsed by :mod:`kvbudget.cli.numbers`, bounded to signed 64
bits before it is computed. A bad command line raises :class:`ArgumentsError`
(a :class:`UsageError`), which ``kvbudget.cli.main`` prints as one line,
instead of argparse's usage-and-exit.
"""

from __future__ import annotations

import argparse
import difflib
import functools
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

import kvbudget
from kvbudget.cli.numbers import INT64_MAX, parse_bytes, parse_finite_float, parse_int, shown
from kvbudget.fields import FIELDS, SCENARIO_FIELDS, Field, canonical_name
from kvbudget.sglang.state_model import READ_FIELDS as STATE_READ_FIELDS
from kvbudget.vllm.settings import ENGINE_SETTINGS, Setting

__all__ = [
    "ALIASES",
    "ArgumentsError",
    "COMMANDS",
    "ENGINES",
    "MAX_SWEEP_STEPS",
    "SERVING_FIELDS",
    "SPEC_FIELDS",
    "UsageError",
    "VARY_CHOICES",
    "VARY_FIELDS",
    "VLLM_FLAGS",
    "build_parser",
    "close_command",
    "normalize_argv",
    "value_options",
    "parse_bytes",
    "serving_values",
    "spec_values",
    "vllm_flags",
]

_T = TypeVar("_T")

GIB: Final = 1 << 30
PROG: Final = "kvbudget"
COMMANDS: Final = ("plan", "compare", "sweep", "ratio", "models")
#: ``plan --engine`` / ``compare --engines`` choices.
ENGINES: Final = ("sglang", "vllm")
#: The most values ``sweep --steps`` makes (each is planned twice).
MAX_SWEEP_STEPS: Final = 10_000

# The embedded default: a deployment each engine plans as it would serve it. gpt-oss-120b with its
# EAGLE3 draft on one H200: SGLang 0.5.23 gives it separate full and SWA pools (HybridSWA), and
# vLLM 0.33.0 plans the same model, drafter and GPU (tests/test_sglang_launch.py holds the SGLang
# side to SGLang's own launch resolution and configurator).
DEFAULT_MODEL: Final = "gpt-oss-120b"
DEFAULT_DRAFT: Final = "gpt-oss-120b-eagle3"
DEFAULT_GPU: Final = "h200"
#: SGLang's speculative settings for that launch line: ``_handle_eagle_family`` takes 3 steps,
#: top-k 1 and 4 draft tokens when ``--speculative-num-steps`` is unset (vLLM drafts k = 3).
DEFAULT_SPEC: Final = {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}
#: The default's weights, GiB: gpt-oss-120b's checkpoint size in its model card (the preset
#: carries no weight bytes; the EAGLE3 draft's own weights are not counted).
DEFAULT_WEIGHTS_GIB: Final = 60.8
DEFAULT_WEIGHTS_SOURCE: Final = ("gpt-oss-120b's checkpoint size in OpenAI's gpt-oss model card, arXiv:2508.10925; "
                                 "the EAGLE3 draft's weights not counted")  # fmt: skip
#: ``--mem-fraction`` when not given. SGLang 0.5.23 picks its own ``--mem-fraction-static`` from
#: the GPU's memory at launch, which kvbudget does not restate: this is an assumption.
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
#: StateConfig's serving inputs as flags: every field the config reader does not fill
#: (kvbudget.sglang.state_model reads the state's shape, layers and dtypes from the config).
STATE_FIELDS: Final[tuple[Field, ...]] = tuple(
    f for f in FIELDS["StateConfig"] if f.name not in STATE_READ_FIELDS
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
    "mamba_radix_cache_strategy": ("auto", "auto, resolved as SGLang's launch resolves it for the model"),
}
#: Values a choice flag takes beyond its field's own: SGLang's ``auto``, which the command line
#: resolves as SGLang's launch does (kvbudget.sglang.resolve.state_radix_cache).
_CLI_CHOICES: Final[dict[str, tuple[str, ...]]] = {"mamba_radix_cache_strategy": ("auto",)}


class UsageError(Exception):
    """A bad command line value (exit status 2)."""


class ArgumentsError(UsageError):
    """argparse found a bad command line (exit status 2); ``command`` is the subcommand or ''."""

    def __init__(self, message: str, command: str) -> None:
        super().__init__(message)
        self.command = command


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are raised (one line, printed by ``main``), not printed
    with the usage and exited; the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        command = self.prog[len(PROG) :].strip()
        raise ArgumentsError(message, command)


# --------------------------------------------------------------------------- value types


def _arg_type(parse: Callable[[str], _T]) -> Callable[[str], _T]:
    """``parse`` as an argparse type: its ValueError becomes argparse's message."""

    def convert(text: str) -> _T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


_bytes_arg = _arg_type(parse_bytes)


def _int_at_least(minimum: int | None, maximum: int = INT64_MAX) -> Callable[[str], int]:
    """An argparse type: an integer in ``[minimum, maximum]`` (int64 when not given)."""

    def parse(text: str) -> int:
        return parse_int(text, minimum, maximum)

    return _arg_type(parse)


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


@_arg_type
def _fraction(text: str) -> float:
    value = parse_finite_float(text)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"expected a fraction in (0, 1], got {value}")
    return value


@_arg_type
def _finite_float(text: str) -> float:
    return parse_finite_float(text)


@_arg_type
def _weights_gib(text: str) -> float:
    """GiB of weights: a finite number >= 0 whose bytes fit 64 bits."""
    value = parse_finite_float(text)
    if not value >= 0.0:
        raise ValueError(f"expected a number >= 0, got {shown(text.strip())}")
    if value * GIB > INT64_MAX:
        raise ValueError(f"{text.strip()} GiB is beyond 2**63-1 bytes")
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
    "ratio": (_finite_float, "R"),
}


@functools.cache
def _sglang_names() -> dict[str, tuple[str, ...]]:
    """SGLang's launch-flag names for kvbudget's fields (its declaration in
    :data:`kvbudget.sglang.launch.FLAGS`), accepted as aliases."""
    from kvbudget.sglang.launch import FLAGS

    field = {"speculative_num_steps": "num_steps", "speculative_eagle_topk": "eagle_topk",
             "speculative_num_draft_tokens": "num_draft_tokens"}  # fmt: skip
    return {field.get(f.dest, f.dest): f.names for f in FLAGS}


def _add_field_argument(group: Any, field: Field) -> None:
    """One flag for one field: ``--`` + the name with ``-``, its aliases and SGLang's names."""
    flags = [f"--{field.name.replace('_', '-')}", *ALIASES.get(field.name, ())]
    flags += [n for n in _sglang_names().get(field.name, ()) if n not in flags]
    default, shown = _CLI_DEFAULTS.get(field.name, (field.default, str(field.default)))
    doc = field.doc.replace("`", "").replace("%", "%%").rstrip(".")
    kw: dict[str, Any] = {"dest": field.name, "default": default}
    if field.kind == "flag":
        kw["action"] = argparse.BooleanOptionalAction if default else "store_true"
        kw["help"] = doc
    elif field.kind in ("choice", "opt_choice"):
        choices = (*_CLI_CHOICES.get(field.name, ()), *field.choices)
        kw.update(type=_choice(field), choices=choices, metavar="NAME")
        kw["help"] = f"{doc}: {', '.join(choices)} (default: {shown})"
    elif field.kind in _KIND_TYPES:
        kw["type"], kw["metavar"] = _KIND_TYPES[field.kind]
        kw["help"] = doc + ("" if default is None else f" (default: {shown})")
    else:
        raise TypeError(f"no command line flag for field {field.name!r} of kind {field.kind!r}")
    group.add_argument(*flags, **kw)


def serving_values(args: argparse.Namespace) -> dict[str, Any]:
    """``ServingConfig`` keyword arguments from the generated flags (kv_cache_dtype may be None)."""
    return {f.name: getattr(args, f.name) for f in SERVING_FIELDS}


def state_values(args: argparse.Namespace) -> dict[str, Any]:
    """``StateConfig`` serving keyword arguments from the generated flags (absent: the defaults;
    ``mamba_radix_cache_strategy`` may be ``"auto"``, for the caller to resolve)."""
    return {f.name: getattr(args, f.name, f.default) for f in STATE_FIELDS}


def changed_fields(args: argparse.Namespace) -> list[str]:
    """The serving and speculative fields whose flags carry a value other than their default."""
    return [f.name for f in (*SERVING_FIELDS, *SPEC_FIELDS)
            if getattr(args, f.name) != _CLI_DEFAULTS.get(f.name, (f.default,))[0]]  # fmt: skip


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
        f"default: {DEFAULT_MODEL} with --draft {DEFAULT_DRAFT} on --gpu {DEFAULT_GPU} "
        f"(--weights-gib {DEFAULT_WEIGHTS_GIB:g})",
    )
    g.add_argument(
        "--config",
        metavar="PATH",
        help="a Hugging Face config.json (or its directory) instead of MODEL",
    )
    g.add_argument(
        "--sglang",
        metavar="FLAGS",
        help='an SGLang launch line, quoted ("--model-path /models/x --tp 2 ..."): its model folder '
        "as SGLang resolves it, its draft and serving flags, instead of MODEL, --draft and the "
        "serving flags",
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
        "--mem-fraction-static",
        dest="mem_fraction",
        type=_fraction,
        metavar="F",
        help=f"with --gpu (or the embedded default): SGLang's mem_fraction_static (default "
        f"{DEFAULT_MEM_FRACTION}, assumed: SGLang picks its own at launch)",
    )
    b.add_argument(
        "--weights-gib",
        type=_weights_gib,
        metavar="W",
        help="with --gpu (or the embedded default): GiB of weights (target and draft) on each GPU; "
        "budget = memory x F - W",
    )

    s = p.add_argument_group("serving (SGLang server args; every ServingConfig field)")
    for f in SERVING_FIELDS:
        _add_field_argument(s, f)
    h = p.add_argument_group("hybrid state (SGLang's Mamba / linear-attention state cache, for models with "
                             "state layers; every StateConfig serving field)")  # fmt: skip
    for f in STATE_FIELDS:
        _add_field_argument(h, f)
    dtypes = next(f for f in FIELDS["StateConfig"] if f.name == "ssm_dtype").choices
    h.add_argument("--mamba-ssm-dtype", choices=dtypes, metavar="NAME",
                   help="the SSM state's dtype (SGLang's --mamba-ssm-dtype; default: the config's "
                   "mamba_ssm_dtype, else float32)")  # fmt: skip
    h.add_argument("--mamba-conv-dtype", choices=dtypes, metavar="NAME",
                   help="the conv state's dtype (SGLANG_MAMBA_CONV_DTYPE; default bfloat16)")


@_arg_type
def _max_model_len(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else parse_int(text, 1, INT64_MAX)


#: The ``--engine vllm`` flags by setting name: every vLLM engine setting the core
#: declares with a flag (:data:`kvbudget.vllm.settings.ENGINE_SETTINGS`), then the budget's.
VLLM_FLAGS: Final[dict[str, str]] = {
    **{s.name: s.flag for s in ENGINE_SETTINGS if s.flag is not None},
    "gpu_memory_utilization": "--gpu-memory-utilization",
}
# Settings whose CLI default is not the library's: how help shows it.
_VLLM_CLI_DEFAULTS: Final[dict[str, str]] = {
    "max_model_len": "the model's max_position_embeddings",
    "num_speculative_tokens": "--num-steps, else 1",
}
# A vLLM flag's value lands in args under this prefix, only when given.
_VLLM_DEST: Final = "vllm_"


def _vllm_flag(s: Setting) -> dict[str, Any]:
    """``add_argument``'s keywords for the setting ``s``, from its type, default and unit."""
    if s.py == "bool":
        return {"action": "store_const", "const": not s.default,
                "help": f"{s.name}={not s.default}: {' '.join(s.doc.split())}"}  # fmt: skip
    default = _VLLM_CLI_DEFAULTS.get(s.name, None if s.default is None else str(s.default))
    doc = " ".join(s.doc.split())
    help_text = doc if default is None else f"{doc.rstrip('.')} (default: {default})."
    if s.py == "model_len":
        return {"type": _max_model_len, "metavar": "N|auto", "help": help_text}
    if s.py == "choice":
        return {"choices": s.choices, "help": help_text}
    parse, metavar = (_bytes_arg, "BYTES") if s.unit == "bytes" else (_positive_int, "N")
    return {"type": parse, "metavar": metavar, "help": help_text}


def _add_vllm_args(p: argparse.ArgumentParser) -> None:
    """vLLM 0.33.0's engine flags (``--engine vllm``, ``compare --engines ... vllm``): one per
    :data:`VLLM_FLAGS`, read back by :func:`vllm_flags`."""
    v = p.add_argument_group("vLLM engine (vLLM 0.33.0's flags; --tp, --dcp and --kv-dtype are shared)")
    for s in ENGINE_SETTINGS:
        if s.flag is not None:
            kw = _vllm_flag(s)
            kw["help"] = kw["help"].replace("%", "%%")
            v.add_argument(s.flag, dest=_VLLM_DEST + s.name, default=argparse.SUPPRESS, **kw)
    v.add_argument(VLLM_FLAGS["gpu_memory_utilization"], dest=_VLLM_DEST + "gpu_memory_utilization",
                   default=argparse.SUPPRESS, type=_fraction, metavar="F",
                   help="with --gpu: vLLM's fraction of the device (default 0.92)")  # fmt: skip


def vllm_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The vLLM flags given on the command line, by setting name (and ``gpu_memory_utilization``)."""
    given = vars(args)
    return {k: given[_VLLM_DEST + k] for k in VLLM_FLAGS if _VLLM_DEST + k in given}


def _add_command(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A command's parser; no abbreviated flags (``--model`` is not ``--model-dtype``)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, allow_abbrev=False, **kwargs)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``kvbudget`` argument parser; ``args.command`` names the command's module."""
    parser = _Parser(
        prog=PROG,
        description="Plan LLM KV-cache pools exactly: SGLang's numbers plus an exact plan that "
        "fits. With no command, `kvbudget ...` is `kvbudget plan ...`.",
        epilog="exit status: 0 ok, 1 planning error, 2 usage error",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {kvbudget.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = _add_command(
        sub,
        "plan",
        help="plan the pools for a model, draft and budget (the default command)",
        description="Plan the KV pools. Without MODEL: the embedded default "
        f"({DEFAULT_MODEL}, --draft {DEFAULT_DRAFT}, one {DEFAULT_GPU.upper()}), in SGLang 0.5.23 and "
        "vLLM 0.33.0 side by side unless --engine picks one. --json prints a document whose "
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
    p.add_argument("--engine", choices=ENGINES,
                   help="sglang: SGLang's pools and kvbudget's exact plan; vllm: vLLM 0.33.0's blocks "
                   "(default sglang; both side by side for the embedded default)")  # fmt: skip
    _add_vllm_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    c = _add_command(
        sub,
        "compare",
        help="fit=exact vs fit=sglang, and with vs without the draft in the budget",
        description="Compare fit=exact with fit=sglang, and SGLang with the draft layers in "
        "its budget (PR #29622) with SGLang without them (before).",
    )
    _add_scenario_args(c)
    c.add_argument("--engines", nargs="+", choices=ENGINES, metavar="ENGINE",
                   help="compare engines side by side (sglang vllm): pools or blocks, concurrency "
                   "at --context-lengths, waste, against kvbudget's exact plan")  # fmt: skip
    c.add_argument("--context-lengths", nargs="+", metavar="L",
                   help="with --engines: context lengths, tokens (default 4096 8192 16384 32768 65536 131072)")  # fmt: skip
    c.add_argument("--plot", metavar="PNG", help="with --engines: concurrency vs context length (needs matplotlib)")
    _add_vllm_args(c)
    c.add_argument("--json", action="store_true", help="print JSON instead of tables")

    s = _add_command(
        sub,
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
    s.add_argument(
        "--steps",
        type=_int_at_least(1, MAX_SWEEP_STEPS),
        metavar="N",
        help=f"number of values (default 10, at most {MAX_SWEEP_STEPS:,})",
    )
    s.add_argument(
        "--out", metavar="CSV", help="write the rows as CSV ('-' for stdout instead of the table)"
    )
    s.add_argument("--plot", metavar="PNG", help="write a plot (needs matplotlib)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    _add_scenario_args(s, budget=False)

    r = _add_command(
        sub,
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


def value_options(parser: argparse.ArgumentParser) -> frozenset[str]:
    """The option strings (all commands) that take exactly one value, such as ``--available``."""
    parsers = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            parsers.extend(action.choices.values())
    return frozenset(
        option
        for p in parsers
        for action in p._actions
        if action.nargs is None
        for option in action.option_strings
    )


def _looks_negative(token: str) -> bool:
    return len(token) > 1 and token[0] == "-" and token[1] in "0123456789."


def normalize_argv(
    argv: list[str], options: frozenset[str] | None = None
) -> list[str]:
    """``kvbudget`` alone, or ``kvbudget MODEL ...``, means ``kvbudget plan ...``.

    With ``options`` (:func:`value_options`), a value that starts like a negative number
    (``--available -5GiB``) is joined to its flag (``--available=-5GiB``): argparse would take
    it for an option and say "expected one argument" instead of what is wrong with it.
    """
    if not argv:
        return ["plan"]
    if not (argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version")):
        argv = ["plan", *argv]
    if options is None:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            out.extend(argv[i:])
            break
        if token in options and i + 1 < len(argv) and _looks_negative(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def close_command(name: str) -> str | None:
    """The command ``name`` is probably a typo of (``plna`` -> ``plan``), or None."""
    if name in COMMANDS or name.startswith("-"):
        return None
    close = difflib.get_close_matches(name.lower(), COMMANDS, n=1, cutoff=0.6)
    return close[0] if close else None
