"""The registry census: every text-generation architecture of SGLang 0.5.23 and vLLM 0.33.0,
resolved by the engine's own code and by kvbudget, one row each.

The architectures come from the pinned wheels: SGLang's model classes (the ``EntryClass``
lists of ``sglang/srt/models/*.py``, recorded by ``tools/gen_sglang_archs.py``) that generate
text (``...ForCausalLM``, ``...ForConditionalGeneration``, ``...LMHeadModel``, or listed by
vLLM's generation registries; its Transformers-backend classes are the fallback, not
architectures; draft heads are not targets), and vLLM's ``_TEXT_GENERATION_MODELS`` and
``_MULTIMODAL_MODELS`` (``model_executor/models/registry.py``, lifted).

Each architecture gets its configs, the same for both engines:

* the seeded variants the model-resolution differential's builders make for it
  (``tests/sglang_model_cases.py``: transformers 5.19.0's classes with the keys released
  checkpoints carry), or its fixed configs, else
* a remote-code checkpoint's seeded files (``tests/remote_code_cases.py``: InternLM2, Baichuan,
  Ling, ...), which both oracles load through a stand-in for the checkpoint's own config class
  (``tests/oracle_kit/remote_code.py``), else
* its transformers 5.19.0 config class's defaults (the model type transformers' auto
  mappings name for the architecture), else
* the defaults of the config class SGLang's model class for it names (``__init__(self,
  config: X)``: one of SGLang's own config classes, or transformers'), else
* the defaults of the config class vLLM's module serving it annotates its ``config`` with
  (transformers', or vLLM's own where the vLLM oracle lifts it: InternLM3, TeleChat3 and
  LLaMA are served by vLLM's Llama class, which reads a ``LlamaConfig``), else
* the defaults of SGLang's copy of its checkpoint's config class (:data:`_SGLANG_COPIES`:
  IQuest-Q1, MiniCPM-SALA, Ling 3, dots3, Cosmos 3, Muse Spark, dots.ocr, Kimi-VL), else
* none (a remote-code config no builder writes), and the row says so.

SGLang's side is its config loading and ``ModelConfig`` derivations
(``tests/sglang_oracle/model.py``) against :func:`kvbudget.sglang.model.resolve_sglang`;
vLLM's is its model classes built by ``tests/vllm_oracle`` (TP 1, PP 1, bfloat16, no drafter)
against :func:`kvbudget.vllm.models.layers_from_hf_config`. Each row lands in one
:class:`Verdict`: a failure if any of its configs is planned differently, else "equal" if any is
planned equal, else the refusal. ``python tests/census.py`` writes ``docs/census.md``; ``--check`` exits 1
when the committed table is stale (``tests/test_census.py`` does both checks in CI).
"""

from __future__ import annotations

import ast
import enum
import functools
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import transformers as T
import transformers.models.auto.modeling_auto as auto

sys.path.insert(0, str(Path(__file__).resolve().parent))

from oracle_kit.lift import Source  # noqa: E402
from oracle_kit.tools import load_tool  # noqa: E402
from oracle_kit.strict import StubError  # noqa: E402
from remote_code_cases import REMOTE_CODE  # noqa: E402
from sglang_model_cases import FAMILIES, cases  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "census.md"
#: Seeded variants per differential family searched for an architecture's config.
_PER_FAMILY = 12


class Verdict(enum.Enum):
    """Where an architecture lands. ``DIFFERENT`` and ``UNCHECKED_PLAN`` are failures."""

    EQUAL = "planned, equal"
    DIFFERENT = "planned, different"
    UNCHECKED_PLAN = "planned, engine not run"
    BOTH = "refused by both"
    KVBUDGET = "refused by kvbudget alone"
    NOT_RUN = "refused by kvbudget, engine not run"
    NO_CONFIG = "no config"

    @property
    def failure(self) -> bool:
        return self in (Verdict.DIFFERENT, Verdict.UNCHECKED_PLAN)


@dataclass(frozen=True)
class Row:
    """One architecture in one engine's registry."""

    engine: str
    table: str
    architecture: str
    config: str  # where the config came from: "differential", "transformers:<model_type>" or "none"
    verdict: Verdict
    detail: str  # kvbudget's reason, the engine's error kind, or the first difference


# --- the registries ------------------------------------------------------------------------


def sglang_architectures(generating: Collection[str]) -> list[str]:
    """SGLang 0.5.23's text-generating model classes: by name (``...ForCausalLM``,
    ``...ForConditionalGeneration``, ``...LMHeadModel``), or ``generating`` (the architectures vLLM's
    generation registries list: ChatGLM, MiniCPM-V, InternVL, ...)."""
    path = REPO / "python" / "kvbudget" / "models" / "data" / "sglang_architectures.json"
    names = json.loads(path.read_text(encoding="utf-8"))["architectures"]
    return [a for a in names if (a.endswith(("ForCausalLM", "ForConditionalGeneration", "LMHeadModel"))
                                 or a in generating) and not a.startswith("Transformers")]  # fmt: skip


@functools.cache
def _vllm_registry(root: Path) -> dict[str, dict[str, tuple[str, str]]]:
    """vLLM 0.33.0's text-generation and multimodal registries (lifted): table -> architecture ->
    the (module, class) serving it."""
    ns: dict[str, Any] = {"__name__": "census_vllm_registry"}
    tables = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")
    Source(root, "vllm/model_executor/models/registry.py").lift(ns, *tables)
    return {t.strip("_").lower().removesuffix("_models"): ns[t] for t in tables}


def vllm_architectures(root: Path) -> list[tuple[str, str]]:
    """(table, architecture) for vLLM 0.33.0's text-generation and multimodal registries."""
    return [(t, a) for t, table in _vllm_registry(root).items() for a in table]


# --- the configs of an architecture --------------------------------------------------------


def _drawn(families: dict[str, Callable[[random.Random], Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per architecture, :data:`_PER_FAMILY` seeded files from each of ``families``' builders."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, build in families.items():
        rng = random.Random(f"census:{name}")
        for _ in range(_PER_FAMILY):
            built = build(rng)
            out.setdefault(built.arch, []).append(built.saved(False))
    return out


@functools.cache
def _generated() -> dict[str, tuple[dict[str, Any], ...]]:
    """Per architecture, the seeded variants the differential's builders make (with the keys
    released checkpoints carry that the class defaults lack, such as Qwen3-Next's
    ``full_attention_interval``), else its fixed configs."""
    out = _drawn(FAMILIES)
    for _, cfg in cases(0, sparse=False):
        out.setdefault(cfg["architectures"][0], [cfg])
    return {arch: tuple(cfgs) for arch, cfgs in out.items()}


@functools.cache
def _remote_code() -> dict[str, tuple[dict[str, Any], ...]]:
    """Per architecture, seeded files of remote-code checkpoints (``tests/remote_code_cases.py``),
    which the oracles load through a stand-in for the checkpoint's own config class."""
    return {arch: tuple(cfgs) for arch, cfgs in _drawn(REMOTE_CODE).items()}


@functools.cache
def _model_types() -> dict[str, tuple[str, ...]]:
    """Architecture -> the model types transformers' auto mappings name it for."""
    found: dict[str, set[str]] = {}
    for name in dir(auto):
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES"):
            for model_type, classes in getattr(auto, name).items():
                for cls in classes if isinstance(classes, (tuple, list)) else (classes,):
                    found.setdefault(cls, set()).add(model_type)
    return {a: tuple(sorted(t)) for a, t in found.items()}


def _model_type(arch: str) -> str | None:
    """The model type transformers' auto mappings name ``arch`` for (else its name case-folded:
    vLLM's and SGLang's ``PhiMoEForCausalLM`` is transformers' ``PhimoeForCausalLM``, whose
    ``phimoe`` type the released checkpoints carry)."""
    folded = {a.lower(): t for a, t in _model_types().items()}
    types = _model_types().get(arch, ()) or folded.get(arch.lower(), ())
    if len(types) > 1 and arch.endswith("ForCausalLM"):  # a text-only class reads the text config
        types = tuple(t for t in types if t.endswith("_text")) or types
    if len(types) > 1:  # a type its class owns (gpt2, not gpt-sw3, which borrows GPT2Config)
        types = tuple(t for t in types if T.CONFIG_MAPPING[t].model_type == t) or types
    return types[0] if types else None


@functools.cache
def _sglang_classes() -> tuple[Any, Any]:
    from sglang_oracle._configs import REAL, ConfigClasses
    from sglang_oracle._fetch import sglang_root
    from sglang_oracle._plumbing import Builder
    from sglang_oracle.model import _Models

    b = Builder(sglang_root(), real=REAL)
    return ConfigClasses(b), _Models(b)


def _annotated_class(arch: str) -> tuple[str, Any] | None:
    """The config class SGLang's model class for ``arch`` names in its ``__init__(self, config: X)``
    (its own, else that of its first base defined in the same file: ``ChatGLMModel`` is a
    ``ChatGLMForCausalLM``): SGLang's own (its config registry) or transformers'."""
    classes, models = _sglang_classes()
    module = models.entry.get(arch)
    init = load_tool("gen_vllm_archs").init_of(models.sources[module].tree, arch) if module else None
    ann = next((ast.unparse(a.annotation) for a in init.args.args if a.arg == "config" and a.annotation), None) if init else None
    if ann is None or ann == "PretrainedConfig":
        return None
    if ann in set(classes._registry_class_names()):
        try:
            return f"sglang:{ann}", classes.cls(ann)
        except Exception:  # noqa: BLE001 - a config module the oracle cannot execute
            return None
    cls = getattr(T, ann, None)
    return (f"transformers:{ann}", cls) if isinstance(cls, type) and issubclass(cls, T.PretrainedConfig) else None


#: Architecture -> the class in SGLang's ``configs/`` that copies its checkpoint's remote config class
#: (registered for the checkpoint's model type; its model class's ``__init__`` names no class).
_SGLANG_COPIES = {"IQuestQ1ForCausalLM": "IQuestQ1Config", "MiniCPMSALAForCausalLM": "MiniCPMHybridConfig",
                  "BailingMoeV3ForCausalLM": "BailingHybridConfig", "Dots3NoteForCausalLM": "Dots3Config",
                  "Cosmos3ForConditionalGeneration": "Cosmos3Config",
                  "MuseSparkForConditionalGeneration": "MuseSparkConfig", "DotsOCRForCausalLM": "DotsOCRConfig",
                  "KimiVLForConditionalGeneration": "KimiVLConfig"}


def _sglang_copy(arch: str) -> tuple[str, Any] | None:
    """SGLang's copy of ``arch``'s checkpoint config class (:data:`_SGLANG_COPIES`), if it has one."""
    name = _SGLANG_COPIES.get(arch)
    return (f"sglang:{name}", _sglang_classes()[0].cls(name)) if name else None


def _transformers_config(model_type: str) -> Any:
    """transformers' own config class for ``model_type``: the oracles register engines' classes over
    some of its types (SGLang's ``InklingMMConfig`` for ``inkling_mm_model``), which the auto mapping
    then returns instead."""
    name = T.models.auto.configuration_auto.CONFIG_MAPPING_NAMES.get(model_type)
    own = getattr(T, name, None) if name else None
    return own if isinstance(own, type) and issubclass(own, T.PretrainedConfig) else T.CONFIG_MAPPING[model_type]


def _optional_stripped(annotation: ast.expr) -> str:
    """``X`` of an annotation ``X`` or ``X | None``."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [a for a in (annotation.left, annotation.right) if not (isinstance(a, ast.Constant) and a.value is None)]
        if len(sides) == 1:
            return ast.unparse(sides[0])
    return ast.unparse(annotation)


def _vllm_annotated_class(arch: str) -> tuple[str, Any] | None:
    """The config class vLLM's module serving ``arch`` annotates its ``config`` with (``config: X``,
    a parameter or an assignment; one class, not ``PretrainedConfig``): transformers', or vLLM's own
    where the vLLM oracle lifts it (:func:`vllm_oracle._hf.vllm_config_class`)."""
    from vllm_oracle._fetch import vllm_root
    from vllm_oracle._hf import vllm_config_class

    where = next((t[arch] for t in _vllm_registry(vllm_root()).values() if arch in t), None)
    rel = f"vllm/model_executor/models/{where[0]}.py" if where else ""
    if not rel or not (vllm_root() / rel).is_file():  # a module the vLLM oracle does not extract
        return None
    tree = Source(vllm_root(), rel).tree
    named = {_optional_stripped(n.annotation) for n in ast.walk(tree)
             if (isinstance(n, ast.arg) and n.arg == "config" and n.annotation is not None)
             or (isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "config")}  # fmt: skip
    named -= {"PretrainedConfig", "PreTrainedConfig"}
    if len(named) != 1:
        return None
    (name,) = named
    cls = getattr(T, name, None)
    if isinstance(cls, type) and issubclass(cls, T.PretrainedConfig):
        return f"transformers:{name} (vLLM's {where[0]}.py)", cls
    model_type = _vllm_registered_types().get(name)
    try:
        return (f"vllm:{name}", vllm_config_class(model_type)) if model_type else None
    except LookupError:  # a class of vLLM's the oracle does not lift
        return None


@functools.cache
def _vllm_registered_types() -> dict[str, str]:
    """vLLM's own config class name -> the model type its ``_CONFIG_REGISTRY`` registers it for
    (``transformers_utils/config.py``; the first, for a class registered twice)."""
    from vllm_oracle._fetch import vllm_root

    tree = Source(vllm_root(), "vllm/transformers_utils/config.py").tree
    call = next(n.value for n in tree.body if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "_CONFIG_REGISTRY")
    assert isinstance(call, ast.Call)
    found: dict[str, str] = {}
    for kw in call.keywords:
        if kw.arg is not None and isinstance(kw.value, ast.Constant):
            found.setdefault(kw.value.value, kw.arg)
    return found


def census_configs(arch: str) -> tuple[str, tuple[dict[str, Any], ...]]:
    """(where they came from, the config dicts) for ``arch``; none when no class builds one."""
    if arch in _generated():
        return f"differential ({len(_generated()[arch])})", _generated()[arch]
    if arch in _remote_code():
        return f"remote code ({len(_remote_code()[arch])})", _remote_code()[arch]
    model_type = _model_type(arch)
    if model_type is not None and model_type in T.CONFIG_MAPPING:
        return f"transformers:{model_type}", ({**_transformers_config(model_type)().to_dict(), "architectures": [arch]},)
    annotated = _annotated_class(arch) or _vllm_annotated_class(arch) or _sglang_copy(arch)
    if annotated is None:
        return "none", ()
    try:
        return annotated[0], ({**annotated[1]().to_dict(), "architectures": [arch]},)
    except Exception:  # noqa: BLE001 - its defaults do not build outside SGLang (multimodal helpers)
        return f"{annotated[0]} (defaults do not build)", ()


# --- the two engines -----------------------------------------------------------------------


def _first_line(outcome: Any, limit: int = 140) -> str:
    text = str(outcome[1] if isinstance(outcome, tuple) else outcome)  # SGLang-side refusals: ("error", why)
    line = text.splitlines()[0] if text else ""
    line = line.removeprefix("refused: ").removeprefix("config.json: ")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _judge(ours: Any, theirs: Any, refused: Callable[[Any], bool], diff: Callable[[Any, Any], str]) -> tuple[Verdict, str]:
    if theirs is None:  # the oracle does not build this architecture
        return (Verdict.NOT_RUN, _first_line(ours)) if refused(ours) else (Verdict.UNCHECKED_PLAN, "")
    if refused(ours) and refused(theirs):
        return Verdict.BOTH, _first_line(ours)
    if refused(ours):
        return Verdict.KVBUDGET, _first_line(ours)
    if refused(theirs):
        return Verdict.DIFFERENT, f"the engine refuses it: {_first_line(theirs)}"
    first = diff(ours, theirs)
    return (Verdict.DIFFERENT, first) if first else (Verdict.EQUAL, "")


def sglang_rows() -> Iterator[Row]:
    """SGLang's registry, resolved by SGLang's ``ModelConfig`` and by kvbudget."""
    from sglang_oracle._fetch import sglang_root
    from sglang_oracle.model import load
    from test_sglang_model import _differs, _ours

    oracle = load(sglang_root())

    def theirs(cfg: dict[str, Any]) -> Any:
        try:
            out = oracle.resolve(cfg, False)
        except (StubError, NameError):  # the oracle's own gap: SGLang's outcome unknown
            return None
        return f"{out[1]}" if isinstance(out, tuple) else out

    from vllm_oracle._fetch import vllm_root

    for arch in sglang_architectures({a for _, a in vllm_architectures(vllm_root())}):
        yield _row("sglang", "models", arch, lambda cfg: (_ours(cfg), theirs(cfg)),
                   lambda x: isinstance(x, (str, tuple)), lambda a, b: "; ".join(_differs(a, b))[:140])  # fmt: skip


def vllm_rows() -> Iterator[Row]:
    """vLLM's registries, built by vLLM's model classes and read by kvbudget."""
    from test_vllm_state_models import _ours, _theirs
    from vllm_oracle._fetch import vllm_root

    engine = {"tp": 1, "pp": 1}

    def theirs(cfg: dict[str, Any]) -> Any:
        try:
            return _theirs(cfg, engine, "bfloat16")
        except LookupError:  # the oracle has no entry point for this class
            return None
        except (StubError, NameError):
            return None
        except Exception as exc:  # noqa: BLE001 - loading the config itself failed in vLLM's hands
            return f"refused: {type(exc).__name__}: {exc}"

    def diff(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> str:
        return next((f"{x} vs {y}" for x, y in zip(a, b) if x != y), "" if len(a) == len(b) else
                    f"{len(a)} vs {len(b)} layers")[:140]  # fmt: skip

    import test_vllm_deepseek_v4 as deepseek_v4
    import test_vllm_glm5_next as glm5_next
    import test_vllm_qwen4_exp as qwen4_exp

    # Readers held by an oracle of their own (their records' fields), the same engine: (ours, theirs, engine).
    plain = {**engine, "block_size": 16, "dcp": 1, "kv_cache_dtype": "auto", "model_dtype": "bfloat16"}
    own = {a: (qwen4_exp._ours, qwen4_exp._theirs, plain) for a in (qwen4_exp.QWEN4_EXP, qwen4_exp.QWEN4_EXP_TEXT)}
    own.update({a: (glm5_next._planned, glm5_next._theirs, glm5_next.PLAIN)
                for a in (glm5_next.GLM5_NEXT, glm5_next.GLM5_NEXT_TEXT)})  # fmt: skip
    own[deepseek_v4.DEEPSEEK_V4] = (deepseek_v4.census_ours, deepseek_v4._theirs, plain)  # read, then refused

    def run(arch: str) -> Callable[[dict[str, Any]], tuple[Any, Any]]:
        if arch in own:
            mine, engine_s, e = own[arch]
            return lambda cfg: (mine(cfg, e), engine_s(cfg, e))
        return lambda cfg: (_ours(cfg, engine, "bfloat16"), theirs(cfg))

    for table, arch in vllm_architectures(vllm_root()):
        yield _row("vllm", table, arch, run(arch), lambda x: isinstance(x, str), diff)


def _row(engine: str, table: str, arch: str, run: Callable[[dict[str, Any]], tuple[Any, Any]],
         refused: Callable[[Any], bool], diff: Callable[[Any, Any], str]) -> Row:  # fmt: skip
    source, cfgs = census_configs(arch)
    if not cfgs:
        return Row(engine, table, arch, source, Verdict.NO_CONFIG, "no config class: not in transformers 5.19.0, "
                   "and neither engine's model class names one")  # fmt: skip
    judged = [_judge(*run(cfg), refused, diff) for cfg in cfgs]
    verdict, detail = min(judged, key=lambda j: _RANK.index(j[0]))
    return Row(engine, table, arch, source, verdict, detail)


#: Of an architecture's configs, the verdict that stands: any failure, else any equal plan, ...
_RANK = (Verdict.DIFFERENT, Verdict.UNCHECKED_PLAN, Verdict.EQUAL, Verdict.KVBUDGET, Verdict.NOT_RUN, Verdict.BOTH)


@functools.cache
def census() -> tuple[Row, ...]:
    """Every row, SGLang's then vLLM's, in registry order."""
    return (*sglang_rows(), *vllm_rows())


# --- the table -----------------------------------------------------------------------------


def counts(rows: Sequence[Row], engine: str) -> Counter[Verdict]:
    return Counter(r.verdict for r in rows if r.engine == engine)


def summary(rows: Sequence[Row]) -> str:
    """The README's sentence on coverage (``tests/test_census.py`` keeps it current)."""
    parts = []
    for engine, title in (("sglang", "SGLang 0.5.23"), ("vllm", "vLLM 0.33.0")):
        c = counts(rows, engine)
        refused = c[Verdict.KVBUDGET] + c[Verdict.NOT_RUN]
        parts.append(f"{title}: {c[Verdict.EQUAL]} of {sum(c.values())} architectures planned and equal to the "
                     f"engine's own reading, {c[Verdict.BOTH]} refused by both, {refused} refused by kvbudget "
                     f"alone, {c[Verdict.NO_CONFIG]} without a config to build")  # fmt: skip
    return "; ".join(parts) + "."


def render(rows: Sequence[Row]) -> str:
    """``docs/census.md``."""
    out = ["# Registry census", "",
           "Generated by `python tests/census.py` (checked by `tests/test_census.py` on every CI run): every",
           "text-generation architecture in SGLang 0.5.23's and vLLM 0.33.0's registries, with its configs",
           "(the model-resolution differential's seeded variants, else a remote-code checkpoint's seeded files",
           "(`tests/remote_code_cases.py`, loaded through a stand-in for the checkpoint's own config class),",
           "else its transformers 5.19.0 class defaults, else those of the config class SGLang's model class",
           "names, else the one vLLM's module serving it annotates its config with), resolved by the engine's own code",
           "from the pinned wheels and by kvbudget. A row is a failure if any of its configs is planned",
           "differently; \"equal\" if any is planned equal; else the refusal.",
           "\"engine not run\": the oracle does not build that class yet, so only kvbudget's side is known.",
           ""]  # fmt: skip
    names = {"sglang": "SGLang 0.5.23", "vllm": "vLLM 0.33.0"}
    out += ["| verdict | " + " | ".join(names.values()) + " |", "|---|" + "---:|" * len(names)]
    for v in Verdict:
        out.append(f"| {v.value} | " + " | ".join(str(counts(rows, e)[v]) for e in names) + " |")
    out.append("| **architectures** | " + " | ".join(str(sum(counts(rows, e).values())) for e in names) + " |")
    for engine, title in names.items():
        out += ["", f"## {title}", "", "| architecture | registry | config | verdict | detail |", "|---|---|---|---|---|"]
        for r in rows:
            if r.engine == engine:
                detail = r.detail.replace("|", "\\|").replace("\n", " ")
                out.append(f"| {r.architecture} | {r.table} | {r.config} | {r.verdict.value} | {detail} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = render(census())
    if "--check" in args:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(REPO)} is stale: run python tests/census.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
