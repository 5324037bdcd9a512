#!/usr/bin/env python3
"""Write the architectures vLLM 0.33.0 generates text with, and the class each is served by.

vLLM's ``ModelRegistry`` serves an architecture with the ``(module, class)`` its
``_TEXT_GENERATION_MODELS`` or ``_MULTIMODAL_MODELS`` table gives
(``vllm/model_executor/models/registry.py``); several names share one class
(``InternLM3ForCausalLM`` and ``TeleChat3ForCausalLM`` are vLLM's ``LlamaForCausalLM``,
``CohereForCausalLM`` and ``Cohere2ForCausalLM`` one ``commandr`` class). kvbudget's vLLM
mode reads a model by the class vLLM builds, so it needs the table:
``python/kvbudget/models/data/vllm_architectures.json``, read from the RECORD-checked
extraction (``tools/fetch_vllm.py``). Usage: ``python tools/gen_vllm_archs.py [--check]``.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "python" / "kvbudget" / "models" / "data" / "vllm_architectures.json"
TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")


def _root() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fetch_vllm import ensure_vllm

    root = ensure_vllm()
    assert isinstance(root, Path)
    return root


def registry(root: Path) -> dict[str, dict[str, list[str]]]:
    """Table name -> architecture -> [module, class], as the registry file writes them (literals)."""
    tree = ast.parse((root / "vllm/model_executor/models/registry.py").read_text(encoding="utf-8"))
    out: dict[str, dict[str, list[str]]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in TABLES and node.value is not None:
            out[target.id] = {arch: list(where) for arch, where in ast.literal_eval(node.value).items()}
    missing = set(TABLES) - set(out)
    if missing:
        raise SystemExit(f"gen_vllm_archs: registry.py has no literal {sorted(missing)}")
    return out


#: The forms of ``init_vllm_registered_model``'s arguments a wrapper entry may take (anything
#: else, and the wrapper is left out: kvbudget refuses it).
HF_CONFIG_FORMS = (None, "config.text_config", "config.get_text_config()", "config.thinker_config.text_config")
ARCHITECTURES_FORMS = (None, "config.text_config.architectures")


def init_of(tree: ast.Module, cls: str) -> ast.FunctionDef | None:
    """The ``__init__`` a class runs: its own, else that of its first base defined in the same file."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    while cls in classes and cls not in seen:
        seen.add(cls)
        node = classes[cls]
        init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None:
            return init
        cls = next((b.id for b in node.bases if isinstance(b, ast.Name) and b.id in classes), "")
    return None


_ARCHS = "config.text_config.architectures"
_TYPE = r"config\.text_config\.model_type == '(\w+)'"


def _text_rule(stmt: ast.stmt) -> tuple[str, dict[str, list[str]]] | None:
    """An ``if`` that names the text config's architectures by its model type, as
    ``("defaults", {type: archs})`` (only when it has none: LLaVA's Pixtral case) or
    ``("overrides", {type or "*": archs})`` (always: PaliGemma's Gemma / Gemma 2)."""
    def assigned(body: list[ast.stmt]) -> list[str] | None:
        if len(body) == 1 and isinstance(body[0], ast.Assign) and ast.unparse(body[0].targets) == _ARCHS:
            value = ast.literal_eval(body[0].value)
            return value if isinstance(value, list) else None
        return None

    if not isinstance(stmt, ast.If) or (archs := assigned(stmt.body)) is None:
        return None
    test = ast.unparse(stmt.test)
    if (m := re.fullmatch(f"{re.escape(_ARCHS)} is None and {_TYPE}", test)) and not stmt.orelse:
        return "defaults", {m.group(1): archs}
    if (m := re.fullmatch(_TYPE, test)) and (other := assigned(stmt.orelse)) is not None:
        return "overrides", {m.group(1): archs, "*": other}
    return None


def _assigned(init: ast.FunctionDef, name: str) -> list[ast.Assign | ast.AnnAssign]:
    return [a for a in ast.walk(init) if isinstance(a, (ast.Assign, ast.AnnAssign))
            and name in [ast.unparse(x) for x in (a.targets if isinstance(a, ast.Assign) else [a.target])]]


def _config_is_hf_config(init: ast.FunctionDef) -> bool:
    """``config`` is the model's ``hf_config`` (``vllm_config.model_config.hf_config``, or through
    ``model_config = vllm_config.model_config``), assigned once; or ``config`` is never assigned
    (the thinker wrappers name their configs otherwise: :func:`_rooted`)."""
    values = {ast.unparse(a.targets[0] if isinstance(a, ast.Assign) else a.target): ast.unparse(a.value)
              for a in ast.walk(init) if isinstance(a, (ast.Assign, ast.AnnAssign)) and a.value is not None
              and len(getattr(a, "targets", [None])) == 1}  # fmt: skip
    assigned = _assigned(init, "config")
    config = values.get("config")
    return not assigned or (len(assigned) == 1 and (config == "vllm_config.model_config.hf_config" or (
        config == "model_config.hf_config" and values.get("model_config") == "vllm_config.model_config")))


def _rooted(init: ast.FunctionDef, expr: str | None) -> str | None:
    """``expr`` with a leading local assigned once from an attribute of the model's ``hf_config``
    written out as ``config.<attribute>`` (Qwen2.5-Omni's ``thinker_config =
    vllm_config.model_config.hf_config.thinker_config``, so ``thinker_config.text_config`` is
    ``config.thinker_config.text_config``); other expressions as they are."""
    if expr is None:
        return None
    head, dot, rest = expr.partition(".")
    if head == "config" or not dot:
        return expr
    assigned = _assigned(init, head)
    if len(assigned) != 1 or assigned[0].value is None:
        return expr
    m = re.fullmatch(r"vllm_config\.model_config\.hf_config\.(\w+)", ast.unparse(assigned[0].value))
    return f"config.{m.group(1)}.{rest}" if m else expr


def _by_model_type(stmt: ast.stmt) -> dict[str, list[str] | None] | None:
    """``if config.model_type in (A, B): architectures = [X] elif ...: ... else: architectures = None``
    -> ``{A: [X], B: [X], ..., "*": None}`` (GLM-4.1V / 4.5V's text class by the outer type)."""
    out: dict[str, list[str] | None] = {}
    node: ast.stmt | None = stmt
    while isinstance(node, ast.If):
        body = node.body
        if len(body) != 1 or not isinstance(body[0], ast.Assign) or ast.unparse(body[0].targets) != "architectures":
            return None
        test = ast.unparse(node.test)
        m = re.fullmatch(r"config\.model_type (==|in) (.+)", test)
        if m is None:
            return None
        types = ast.literal_eval(m.group(2))
        for mt in [types] if m.group(1) == "==" else types:
            out[mt] = ast.literal_eval(body[0].value)
        node = node.orelse[0] if len(node.orelse) == 1 else None
        if node is not None and not isinstance(node, ast.If):
            if not isinstance(node, ast.Assign) or ast.unparse(node.targets) != "architectures":
                return None
            out["*"] = ast.literal_eval(node.value)
            node = None
    return out or None


def _served_base(node: ast.ClassDef, served: dict[str, str], imported: dict[str, str] | None) -> str | None:
    """The architecture a class of a wrapper's file is read as when the wrapper builds it without
    naming architectures (Granite 4 Vision's ``Granite4VisionLLMForCausalLM``, a
    ``GraniteForCausalLM``): its base imported from the module vLLM's registry serves the
    architecture of the base's own name from."""
    for b in node.bases:
        name = ast.unparse(b)
        if name in served and (imported or {}).get(name) == served[name]:
            return name
    return None


def _text_model(init: ast.FunctionDef, classes: dict[str, ast.ClassDef], served: dict[str, str],
                imported: dict[str, str] | None = None) -> ast.Call | None:  # fmt: skip
    """The one call that builds the wrapper's text model: ``init_vllm_registered_model(...)``, or a
    class built on ``vllm_config.with_hf_config(...)`` that is (Qwen3-ASR's ``Qwen3ForCausalLM``,
    imported from the module the registry serves it from: ``imported``, name -> ``module:class``)
    or, in the same file, subclasses (Qwen3-VL's ``Qwen3LLMForCausalLM``) the class vLLM's
    registry serves the ``architectures`` it names with (``served``: architecture -> ``module:class``)."""
    ivrm = [c for c in ast.walk(init) if isinstance(c, ast.Call) and ast.unparse(c.func) == "init_vllm_registered_model"]
    direct = []
    for c in ast.walk(init):
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and (c.func.id in classes or c.func.id in (imported or {})):
            kw = {k.arg: k.value for k in c.keywords}
            inner = kw.get("vllm_config")
            if isinstance(inner, ast.Call) and ast.unparse(inner.func) == "vllm_config.with_hf_config":
                archs = {k.arg: k.value for k in inner.keywords}.get("architectures")
                named = ast.literal_eval(archs) if archs is not None else None
                if named is None and c.func.id in classes and _served_base(classes[c.func.id], served, imported):
                    direct.append(c)  # no architectures named: the class is its served base (Granite 4 Vision)
                    continue
                if not (isinstance(named, list) and named and named[0] in served):
                    continue
                if c.func.id in classes:
                    bases = {ast.unparse(b) for b in classes[c.func.id].bases}
                    if served[named[0]].partition(":")[2] in bases:
                        direct.append(c)
                elif (imported or {})[c.func.id] == served[named[0]]:
                    direct.append(c)
    calls = ivrm + direct
    return calls[0] if len(calls) == 1 else None


def _wrapper(init: ast.FunctionDef, classes: dict[str, ast.ClassDef], served: dict[str, str],
             imported: dict[str, str] | None = None) -> dict[str, Any] | None:  # fmt: skip
    """What a wrapper's ``__init__`` hands the text model it builds (:func:`_text_model`), when its
    ``config`` is the model's ``hf_config`` and it edits the text config only by the rules of
    :func:`_text_rule` (and names ``architectures`` only by :func:`_by_model_type`)."""
    call = _text_model(init, classes, served, imported)
    rules = [r for r in map(_text_rule, init.body) if r is not None]
    edits = [a for a in ast.walk(init) if isinstance(a, (ast.Assign, ast.AugAssign))
             and any(ast.unparse(x).startswith(("config.text_config.", "text_config."))
                     for x in (a.targets if isinstance(a, ast.Assign) else [a.target]))]
    if call is None or not _config_is_hf_config(init) or len(edits) != sum(len(r[1]) for r in rules):
        return None
    kw = {k.arg: k.value for k in call.keywords}
    builds = None
    if ast.unparse(call.func) != "init_vllm_registered_model":  # built directly: with_hf_config's arguments are the wrapper's
        builds = ast.unparse(call.func)
        with_hf = kw["vllm_config"]
        assert isinstance(with_hf, ast.Call)
        kw = {**{k.arg: k.value for k in with_hf.keywords}, "prefix": kw.get("prefix")}
        if with_hf.args:
            kw["hf_config"] = with_hf.args[0]
    hf = _rooted(init, ast.unparse(kw["hf_config"])) if "hf_config" in kw else None
    if hf == "self.config" and [ast.unparse(a.value) for a in _assigned(init, "self.config") if a.value is not None] \
            == ["vllm_config.model_config.hf_config"]:  # fmt: skip
        hf = None  # the model's whole hf_config, as init_vllm_registered_model takes it when given none (dots.ocr)
    archs_node = kw.get("architectures")
    archs: Any = None
    if isinstance(archs_node, ast.Name) and archs_node.id == "architectures":
        tables = [(s, d) for s in init.body if (d := _by_model_type(s)) is not None]
        assigned = [a for a in ast.walk(init) if isinstance(a, ast.Assign) and ast.unparse(a.targets) == "architectures"]
        if len(tables) != 1 or sum(a in assigned for a in ast.walk(tables[0][0])) != len(assigned):
            return None  # `architectures` is named by one table statement, and nowhere else
        archs = {"by_model_type": tables[0][1]}
    elif archs_node is None and builds in classes:  # with_hf_config names none: the built class's served base
        archs = [_served_base(classes[builds], served, imported)]
    elif archs_node is not None:
        try:
            archs = ast.literal_eval(archs_node)
        except ValueError:
            archs = ast.unparse(archs_node)
    prefix = kw.get("prefix")
    if (hf not in HF_CONFIG_FORMS or not (isinstance(archs, (list, dict)) or archs in ARCHITECTURES_FORMS)
            or not isinstance(prefix, ast.Call) or ast.unparse(prefix.func) != "maybe_prefix"
            or ast.unparse(prefix.args[0]) != "prefix" or not isinstance(prefix.args[1], ast.Constant)):  # fmt: skip
        return None
    return {"hf_config": hf, "architectures": archs, "prefix": prefix.args[1].value,
            **({"builds": builds} if builds else {}), **{f"text_{kind}": table for kind, table in rules}}


#: What an inheriting class's own ``__init__`` may not do (:func:`inherited_base`): build or name
#: a text model, or edit the text config.
_TEXT_CALLS = ("init_vllm_registered_model", "vllm_config.with_hf_config")
_TEXT_TARGETS = ("self.language_model", "self.model", "config.text_config", "text_config")


def inherited_base(tree: ast.Module, cls: str) -> tuple[str, str] | None:
    """``(module, class)`` of the base a class takes its text model from: its first base, imported
    from another model file, where the class has no ``__init__`` of its own (GraniteSpeechPlus)
    or one that calls ``super().__init__(vllm_config=vllm_config, prefix=prefix)`` and otherwise
    builds no text model and edits no text config (GLM-OCR rebuilds its vision tower; QianfanOCR
    renames vision-config fields); None otherwise."""
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None or not node.bases or not isinstance(node.bases[0], ast.Name):
        return None
    models = "vllm.model_executor.models."
    imported = {a.asname or a.name: (n.module.removeprefix(models), a.name) for n in tree.body
                if isinstance(n, ast.ImportFrom) and n.module and (n.level == 1 or (
                    n.level == 0 and n.module.startswith(models))) for a in n.names}  # fmt: skip
    base = imported.get(node.bases[0].id)
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if base is None or init is None:
        return base
    calls = [ast.unparse(c) for c in ast.walk(init) if isinstance(c, ast.Call)]
    targets = [ast.unparse(t) for a in ast.walk(init) if isinstance(a, (ast.Assign, ast.AugAssign, ast.AnnAssign))
               for t in (a.targets if isinstance(a, ast.Assign) else [a.target])]  # fmt: skip
    if ("super().__init__(vllm_config=vllm_config, prefix=prefix)" not in calls
            or any(c.startswith(_TEXT_CALLS) for c in calls) or any(t.startswith(_TEXT_TARGETS) for t in targets)):
        return None
    return base


def wrappers(root: Path, tables: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, Any]]:
    """Architecture -> how its class builds its text model (:func:`_wrapper`): the ``hf_config``
    and ``architectures`` it passes (as written), the prefix it names, and the class it builds
    where it builds one directly; a class that inherits its text model from a wrapper of another
    file (:func:`inherited_base`) takes that wrapper's entry, ``inherits`` naming it."""
    out: dict[str, dict[str, Any]] = {}
    trees: dict[str, ast.Module | None] = {}
    served = {arch: f"{module}:{cls}" for table in TABLES for arch, (module, cls) in tables[table].items()}

    def entry(module: str, cls: str, depth: int = 0) -> dict[str, Any] | None:
        if module not in trees:
            path = root / "vllm/model_executor/models" / f"{module}.py"
            trees[module] = ast.parse(path.read_text(encoding="utf-8")) if path.is_file() else None
        tree = trees[module]
        if tree is None or depth > 3:
            return None
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        init = init_of(tree, cls)
        imported = {a.asname or a.name: f"{(n.module or '').removeprefix('vllm.model_executor.models.')}:{a.name}"
                    for n in tree.body if isinstance(n, ast.ImportFrom) and n.level <= 1 for a in n.names}  # fmt: skip
        found = None if init is None else _wrapper(init, classes, served, imported)
        if found is None and (base := inherited_base(tree, cls)) is not None:
            inner = entry(*base, depth + 1)
            found = None if inner is None else {**inner, "inherits": inner.get("inherits", f"{base[0]}:{base[1]}")}
        return found

    for table in TABLES:
        for arch, (module, cls) in tables[table].items():
            found = entry(module, cls)
            if found is not None:
                out[arch] = found
    return dict(sorted(out.items()))


def render(tables: dict[str, dict[str, list[str]]], wrapped: dict[str, dict[str, Any]]) -> str:
    """JSON, one architecture a line."""
    lines = ['{"generated_by": "tools/gen_vllm_archs.py", "vllm": "0.33.0", "tables": {']
    for t in TABLES:
        rows = [f"  {json.dumps(a)}: {json.dumps(w)}" for a, w in sorted(tables[t].items())]
        lines += [f" {json.dumps(t)}: {{", ",\n".join(rows), " },"]
    lines[-1] = " }},"
    rows = [f" {json.dumps(a)}: {json.dumps(w, sort_keys=True)}" for a, w in wrapped.items()]
    lines += ['"wrappers": {', ",\n".join(rows), "}}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    def build() -> str:
        root = _root()
        tables = registry(root)
        return render(tables, wrappers(root, tables))

    return write_or_check(OUT, build, tool="tools/gen_vllm_archs.py", doc=__doc__ or "", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
