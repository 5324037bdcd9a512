"""The model-reading oracle's multimodal wrappers: a class whose ``__init__`` builds its text model
with ``init_vllm_registered_model`` (LLaVA, Mistral 3, PaliGemma, Qwen2-VL, ...).

What is vLLM's, read from the pinned model file and executed: the one call in the class's
``__init__`` that builds its text model (``init_vllm_registered_model(...)``, or a class of the
same file on ``vllm_config.with_hf_config(...)``: Qwen3-VL's ``Qwen3LLMForCausalLM``, lifted
as the model tables say), evaluated on the loaded config; the ``__init__``'s statements that
set ``config.text_config.architectures`` or the call's ``architectures`` (run first, as
``__init__`` does); the whole
``init_vllm_registered_model`` (``models/utils.py``, lifted by :mod:`._hf`) and the two ``if``
statements of ``VllmConfig.with_hf_config`` that shape the text config (its architectures, its
``tie_word_embeddings``).

Restated (glue): which ``__init__`` runs (the class's own, else its first base's in the same
file, as Python's method resolution finds it); the rest of ``with_hf_config`` (a copy of the
``VllmConfig`` whose ``model_config.hf_config`` is the text config; its ``model_arch_config``
refresh owns no KV); ``ModelConfig.is_multimodal_model`` (the wrapper is in the registry's
``_MULTIMODAL_MODELS``); ``initialize_model`` (the registry's class for
``hf_config.architectures[0]``, entered as :data:`._hf_tables.ENTRY` says under the prefix
given). The vision / audio towers are not built: they own no KV cache in vLLM 0.33.0's
decoder groups (encoder caches are separate), so a wrapper's KV layers are its text model's.
"""

from __future__ import annotations

import ast
import builtins
import copy
import functools
from pathlib import Path
from typing import Any

from oracle_kit.lift import Source

from ._hf_lift import _FLAGS

__all__ = ["WrapperCall", "run_with_hf_config", "with_hf_config_code", "wrapper_call"]

_ARCHS = "config.text_config.architectures"


class WrapperCall:
    """One wrapper class's call that builds its text model (``init_vllm_registered_model(...)``,
    or a class of its file on ``vllm_config.with_hf_config(...)``) and the statements its
    ``__init__`` runs first to name the text architectures."""

    def __init__(self, src: Source, call: ast.Call, edits: list[ast.stmt], imported: dict[str, tuple[str, str]]) -> None:
        self.path = str(src.path)
        #: the model file the call is in (the base's, for a class inheriting its text model)
        self.module = str(src.rel).removeprefix("vllm/model_executor/models/").removesuffix(".py")
        self.builds = ast.unparse(call.func)
        #: name -> (module, class) of the classes the file imports from a model file (``from .x import C``)
        self.imported = imported
        self.call = compile(ast.Expression(call), self.path, "eval", flags=_FLAGS, dont_inherit=True)
        self.edits = compile(ast.Module(body=edits, type_ignores=[]), self.path, "exec", flags=_FLAGS,
                             dont_inherit=True)  # fmt: skip

    def build(self, scope: dict[str, Any]) -> Any:
        """Run the edits, then the call, in ``scope`` (``config``, ``vllm_config``, ``prefix``,
        ``maybe_prefix`` and what the call names), as ``__init__`` would."""
        exec(self.edits, {"__builtins__": builtins}, scope)  # noqa: S102 (the point)
        return eval(self.call, {"__builtins__": builtins}, scope)  # noqa: S307


def _init(tree: ast.Module, cls: str) -> ast.FunctionDef | None:
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    while cls in classes and cls not in seen:
        seen.add(cls)
        init = next((f for f in classes[cls].body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None:
            return init
        cls = next((b.id for b in classes[cls].bases if isinstance(b, ast.Name) and b.id in classes), "")
    return None


def _inherited(tree: ast.Module, cls: str, imported: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """Restated: the ``(module, class)`` a class of ``tree`` inherits its text model from: its first
    base, imported from another model file, where the class's own ``__init__`` is absent or calls
    ``super().__init__(vllm_config=vllm_config, prefix=prefix)`` and builds no text model nor
    assigns a language model or a text config (GLM-OCR's rebuilds its vision tower; QianfanOCR's
    renames vision-config fields: no KV)."""
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None or not node.bases or not isinstance(node.bases[0], ast.Name):
        return None
    base = imported.get(node.bases[0].id)
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if base is None or init is None:
        return base
    calls = {ast.unparse(c.func): ast.unparse(c) for c in ast.walk(init) if isinstance(c, ast.Call)}
    stores = {ast.unparse(n) for n in ast.walk(init) if isinstance(n, (ast.Attribute, ast.Name))
              and isinstance(n.ctx, ast.Store)}  # fmt: skip
    builds = {"init_vllm_registered_model", "vllm_config.with_hf_config"} & set(calls)
    if calls.get("super().__init__") != "super().__init__(vllm_config=vllm_config, prefix=prefix)" or builds or any(
            t.startswith(("self.language_model", "self.model", "config.text_config", "text_config")) for t in stores):
        return None
    return base


@functools.cache
def wrapper_call(root: Path, module: str, cls: str) -> WrapperCall | None:
    """The wrapper call of ``module.cls`` (a pinned model file), or None when the class makes no
    single such call (or its file is not pinned)."""
    path = root / "vllm/model_executor/models" / f"{module}.py"
    if not path.is_file():
        return None
    src = Source(root, f"vllm/model_executor/models/{module}.py")
    classes = {n.name for n in src.tree.body if isinstance(n, ast.ClassDef)}
    models = "vllm.model_executor.models."
    imported = {a.asname or a.name: (n.module.removeprefix(models), a.name) for n in src.tree.body
                if isinstance(n, ast.ImportFrom) and n.module and (n.level == 1 or (
                    n.level == 0 and n.module.startswith(models))) for a in n.names}  # fmt: skip
    base = _inherited(src.tree, cls, imported)
    if base is not None:  # its text model is the base's, built by the base's __init__ (its super() call)
        return wrapper_call(root, *base)
    init = _init(src.tree, cls)
    if init is None:
        return None
    def text_model_class(c: ast.Call) -> bool:  # a class on with_hf_config(..., architectures=...), or of
        # this file on with_hf_config(<a text config>) (Granite 4 Vision's Granite4VisionLLMForCausalLM)
        return ast.unparse(c.func) in classes | set(imported) and any(
            isinstance(k.value, ast.Call) and ast.unparse(k.value.func) == "vllm_config.with_hf_config"
            and (any(kk.arg == "architectures" for kk in k.value.keywords) or (
                ast.unparse(c.func) in classes and bool(k.value.args)
                and ast.unparse(k.value.args[0]).endswith("text_config"))) for k in c.keywords)  # fmt: skip

    calls = [c for c in ast.walk(init) if isinstance(c, ast.Call) and (
        ast.unparse(c.func) == "init_vllm_registered_model" or text_model_class(c))]  # fmt: skip
    if len(calls) != 1:
        return None

    def sets_archs(stmt: ast.stmt) -> bool:  # the text config's architectures, or the call's local
        return any(isinstance(a, ast.Assign) and {_ARCHS, "architectures"} & set(map(ast.unparse, a.targets))
                   for a in ast.walk(stmt))  # fmt: skip

    # the locals the call reads that __init__ takes from the model's hf_config (the thinkers'
    # `thinker_config = vllm_config.model_config.hf_config.thinker_config`)
    reads = {n.id for n in ast.walk(calls[0]) if isinstance(n, ast.Name)}
    def names_config(stmt: ast.stmt) -> bool:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else stmt.targets[0] if isinstance(
            stmt, ast.Assign) and len(stmt.targets) == 1 else None  # fmt: skip
        named = (isinstance(target, ast.Name) and target.id in reads - {"config", "vllm_config", "prefix"}) or (
            target is not None and ast.unparse(target) == "self.config" and "self" in reads)  # dots.ocr's self.config
        return named and ast.unparse(stmt.value).startswith("vllm_config.model_config.hf_config")  # type: ignore[union-attr]

    edits = [s for s in init.body if names_config(s) or sets_archs(s)]
    return WrapperCall(src, calls[0], edits, imported)


def with_hf_config_code(src: Source) -> Any:
    """``VllmConfig.with_hf_config``'s statements that shape the text config, compiled: its
    ``if architectures is not None:`` (which names the architectures) and its tie-embeddings
    ``if`` (a multimodal model's ``tie_word_embeddings`` onto the text config). Run with
    ``hf_config``, ``architectures`` and ``model_config`` (the wrapper's)."""
    c = next(n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == "VllmConfig")
    f = next(m for m in c.body if isinstance(m, ast.FunctionDef) and m.name == "with_hf_config")
    picked = [s for s in f.body if isinstance(s, ast.If) and (
        ast.unparse(s.test) == "architectures is not None" or "tie_word_embeddings" in ast.unparse(s.test))]  # fmt: skip
    assert len(picked) == 2, f"{src.rel}: VllmConfig.with_hf_config: its text-config statements moved"
    return compile(ast.Module(body=picked, type_ignores=[]), str(src.path), "exec", flags=_FLAGS, dont_inherit=True)


def run_with_hf_config(code: Any, hf_config: Any, architectures: list[str] | None, model_config: Any) -> Any:
    """The text config ``with_hf_config`` hands the text model: ``code`` run on the inputs."""
    scope = {"hf_config": hf_config, "architectures": architectures, "copy": copy, "model_config": model_config}
    exec(code, {"__builtins__": builtins}, scope)  # noqa: S102 (the point)
    return scope["hf_config"]
