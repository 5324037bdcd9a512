"""Writes the parts of the type stubs that derive from the core's declarations.

``python/kvbudget/_core.pyi`` keeps hand-written stubs for the native classes
with behaviour (configurator, plan); the value types between its
``# BEGIN GENERATED`` and ``# END GENERATED`` markers, and all of
``python/kvbudget/_columns.pyi`` (``plan_many``'s keywords), are rendered here
from ``kvbudget._core.FIELDS``, docs and units included. Between the same
markers, the typing of ``kvbudget.vllm.LayerSpec`` / ``EngineConfig``
(``python/kvbudget/vllm/settings.py``, from the core's vLLM declaration) and of
``kvbudget.alloc.LayerKV``'s tensor attributes (``python/kvbudget/_alloc_layout.py``, from
``TENSOR_KINDS`` / ``TENSOR_KIND_DOCS``); at run time those classes are built from
the same tables, so the blocks only tell type checkers what is already there.

    python tools/stubgen.py          # rewrite the stubs
    python tools/stubgen.py --check  # exit 1 if they are stale (a test runs this)

Needs the built extension (``make develop``).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

import kvbudget
from kvbudget import _core
from kvbudget.fields import FIELDS, SCENARIO_FIELDS, Field
from kvbudget.vllm import settings as vllm_settings

ROOT = Path(__file__).resolve().parent.parent
CORE_PYI = ROOT / "python" / "kvbudget" / "_core.pyi"
COLUMNS_PYI = ROOT / "python" / "kvbudget" / "_columns.pyi"
VLLM_SETTINGS_PY = ROOT / "python" / "kvbudget" / "vllm" / "settings.py"
ALLOC_PY = ROOT / "python" / "kvbudget" / "_alloc_layout.py"
BEGIN, END = "# BEGIN GENERATED (tools/stubgen.py)", "# END GENERATED"

PY_TYPES = {
    "int": "int",
    "opt_int": "int | None",
    "float": "float",
    "bool": "bool",
    "name": "str",
    "opt_name": "str | None",
    "draft": "DraftGeometry | None",
}
COLUMN_TYPES = {
    "int64": "IntColumn",
    "float64": "FloatColumn",
    "bool": "BoolColumn",
    "uint8": "NameColumn",
}
# The native classes and the declared type whose fields they expose.
VALUE_CLASSES = [
    ("ModelGeometry", "AttentionShape"),
    ("DraftGeometry", "DraftGeometry"),
    ("SpeculativeConfig", "SpeculativeConfig"),
    ("ServingConfig", "ServingConfig"),
    ("MemoryPoolConfig", "MemoryPoolConfig"),
    ("StateConfig", "StateConfig"),
]
MODEL_IDS = ("full_attention_layer_ids", "swa_attention_layer_ids")
COUNTS = ("num_full_layers", "num_swa_layers")


def _doc(text: str, indent: str) -> list[str]:
    body = textwrap.fill(" ".join(text.split()), width=96 - len(indent), break_on_hyphens=False)
    lines = body.splitlines() or [""]
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}'] + [f"{indent}{ln}" for ln in lines[1:]] + [f'{indent}"""']


def _param(f: Field, with_default: bool) -> str:
    t = PY_TYPES[f.py]
    if f.py == "name":
        t = "str | None"  # None means the default
    return f"{f.name}: {t}" + (" = ..." if with_default else "")


def _value_class(cls_name: str, owner: str) -> list[str]:
    fields = FIELDS[owner]
    cls = getattr(_core, cls_name)
    out = ["@final", f"class {cls_name}:"]
    out += _doc(cls.__doc__ or "", "    ")
    ctor = [f for f in fields if not (cls_name == "ModelGeometry" and f.name in COUNTS)]
    lead = [f"{n}: list[int]" for n in MODEL_IDS] if cls_name == "ModelGeometry" else []
    params = lead + [_param(f, not f.required) for f in ctor if f.required] + [
        _param(f, True) for f in ctor if not f.required
    ]
    out.append("    def __new__(cls, " + ", ".join(params) + ") -> Self: ...")
    changes = [f"{n}: list[int] = ..." for n in (MODEL_IDS if cls_name == "ModelGeometry" else ())]
    changes += [_param(f, True) for f in ctor]
    out.append("    def replace(self, *, " + ", ".join(changes) + ") -> Self:")
    out += _doc("A copy with the given fields changed (the others keep their values), re-checked.", "        ")
    if cls_name in ("DraftGeometry", "MemoryPoolConfig"):
        out.append("    def __hash__(self) -> int: ...")
    # The declared fields are read-only attributes (``Final``: a type checker refuses assignment,
    # as the runtime does), each with its declared doc as the attribute's docstring.
    if cls_name == "ModelGeometry":
        for n in MODEL_IDS:
            out.append(f"    {n}: Final[list[int]]")
            out += _doc(f"Global layer ids of the {'full-attention' if n.startswith('full') else 'sliding-window'} layers.", "    ")
    for f in fields:
        # Resolved values: a defaulted dim is never None once built.
        t = "int" if f.kind == "derived" else PY_TYPES[f.py]
        out.append(f"    {f.name}: Final[{t}]")
        out += _doc(f.doc, "    ")
    if cls_name == "ModelGeometry":
        out += ["    @classmethod", "    def from_hf_config(cls, path_or_dict: object, engine: str = \"sglang\") -> Self:"]
        out += _doc("A geometry from a Hugging Face config.json (a dict, a file, or a model directory). "
                    "engine=\"sglang\" (default): the pools SGLang 0.5.23 builds for it "
                    "(kvbudget.sglang.resolve_sglang); engine=\"hf\": the model's own layer kinds "
                    "(kvbudget.models.geometry_kwargs_from_hf_config), a what-if for SGLang.", "        ")
        out += ["    @property", "    def is_mla(self) -> bool:"] + _doc("True for an MLA model (kv_lora_rank given).", "        ")
        out += ["    @property", "    def num_layers(self) -> int:"] + _doc("Every attention layer, n_f + n_s.", "        ")
    if cls_name == "DraftGeometry":
        out += [
            "    @staticmethod",
            "    def from_model(model: ModelGeometry, num_layers: int | None = None, "
            "kv_cache_dtype: str | None = None) -> DraftGeometry:",
        ]
        out += _doc(
            "The one rule for using a whole model as a (standalone) draft: its full layers' heads and dims "
            "(its SWA layers must match them), or an all-SWA model's SWA geometry with capacity 'swa'; "
            "MLA models are refused. num_layers defaults to every attention layer.",
            "        ",
        )
    out += serde_methods(cls_name) + [""]
    return out


def serde_methods(cls_name: str) -> list[str]:
    """``to_json`` and the pickle pair of a native value class, documented with its name (the
    hand-written classes below the generated block use the same four lines)."""
    return [
        "    def to_json(self) -> str:",
        f'        """This {cls_name} as JSON; pickle carries it through ``_from_json``."""',
        "    @classmethod",
        "    def _from_json(cls, s: str) -> Self: ...",
        "    def __reduce__(self) -> tuple[object, tuple[str]]: ...",
    ]


def core_section() -> str:
    lines = [BEGIN, ""]
    for cls_name, owner in VALUE_CLASSES:
        lines += _value_class(cls_name, owner)
    lines.append(END)
    return "\n".join(lines)


def columns_stub() -> str:
    lines = [
        '"""The keywords of ``kvbudget.plan_many``: generated by tools/stubgen.py from the core\'s',
        'field declaration (``rust/core/src/fields.rs``); do not edit."""',
        "",
        "from typing import TypedDict, Union",
        "",
        "import numpy.typing as npt",
        "from typing_extensions import Required",
        "",
        "IntColumn = Union[int, None, npt.ArrayLike]",
        '"""An int (``None`` for an optional field), or one per row (``None`` or negative: ``None``)."""',
        "FloatColumn = Union[float, npt.ArrayLike]",
        "BoolColumn = Union[bool, npt.ArrayLike]",
        "NameColumn = Union[str, int, None, npt.ArrayLike]",
        '"""A name (or its integer code), or one per row."""',
        "",
        "class PlanManyColumns(TypedDict, total=False):",
    ]
    for f in SCENARIO_FIELDS.values():
        if not f.batch:
            continue
        t = COLUMN_TYPES[f.cell_dtype]
        lines.append(f"    {f.name}: {'Required[' + t + ']' if f.required else t}")
        default = "" if f.required else f" Default: {f.default!r}."
        lines += _doc(f"{f.doc}{default}", "    ")
    for f in FIELDS["StateConfig"]:  # with state=: they replace the state's own values
        if f.batch:
            lines.append(f"    {f.name}: {COLUMN_TYPES[f.cell_dtype]}")
            lines += _doc(f"With ``state=``: {f.doc}", "    ")
    return "\n".join(lines) + "\n"


def render_core(current: str) -> str:
    head, sep, rest = current.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{CORE_PYI}: missing the {BEGIN!r} / {END!r} markers")
    return head + core_section() + tail


def splice(path: Path, current: str, body: list[str]) -> str:
    """``current`` with the lines between its markers replaced by ``body``, indented as the markers are."""
    head, sep, rest = current.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{path}: missing the {BEGIN!r} / {END!r} markers")
    indent = head[head.rfind("\n") + 1 :]
    return head + BEGIN + "\n" + "".join(f"{indent}{ln}\n" if ln else "\n" for ln in body) + indent + END + tail


def _literal(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def vllm_section() -> list[str]:
    """``LayerKind``, ``LayerSpec`` and ``EngineConfig`` as dataclasses, from the core's table."""
    kinds = next(s for s in vllm_settings.LAYER_FIELDS if s.py == "choice")
    out = [f"LayerKind: TypeAlias = {vllm_settings.annotation(kinds)}"]
    for cls, table in (("LayerSpec", vllm_settings.LAYER_FIELDS), ("EngineConfig", vllm_settings.ENGINE_SETTINGS)):
        out += ["", "@dataclass(frozen=True)", f"class {cls}:"]
        out += _doc(vllm_settings.DOCS[cls], "    ") + [""]
        for st in table:
            t = "LayerKind" if st is kinds else vllm_settings.annotation(st)
            out.append(f"    {st.name}: {t}" + ("" if st.required else f" = {_literal(st.default)}"))
            out += _doc(vllm_settings.describe(st), "    ")
    return out


def layer_kv_section() -> list[str]:
    """``LayerKV``'s ``__match_args__`` and one read-only attribute per core tensor kind (typed by
    ``_TensorField``'s ``__get__``; the docs are the runtime attributes', from ``TENSOR_KIND_DOCS``)."""
    kinds = _core.TENSOR_KINDS
    names = ", ".join(json.dumps(n) for n in ("pool", "layer_id", *kinds))
    # "\0" joins what a line break must not split (an assignment's "=" from its operand).
    lines = (f"__match_args__\0=\0({names})",
             f"({', '.join(kinds)})\0=\0((_TensorField(\"\",\0\"\"),)\0*\0{len(kinds)})")  # fmt: skip
    return [w.replace("\0", " ") for line in lines
            for w in textwrap.wrap(line, width=88, subsequent_indent="    ", break_on_hyphens=False)]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the stubs are stale")
    args = ap.parse_args(argv)
    want = {
        CORE_PYI: render_core(CORE_PYI.read_text()),
        COLUMNS_PYI: columns_stub(),
        VLLM_SETTINGS_PY: splice(VLLM_SETTINGS_PY, VLLM_SETTINGS_PY.read_text(), vllm_section()),
        ALLOC_PY: splice(ALLOC_PY, ALLOC_PY.read_text(), layer_kv_section()),
    }
    stale = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run: python tools/stubgen.py)", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(want[p])
        print(f"wrote {p.relative_to(ROOT)}")
    _ = kvbudget.__version__
    return 0


if __name__ == "__main__":
    sys.exit(main())
