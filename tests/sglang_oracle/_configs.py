"""SGLang's own config classes and its ``get_config`` parse, over the real transformers.

SGLang loads a checkpoint's ``config.json`` with ``HfModelConfigParser.parse``
(``utils/hf_transformers/config.py``): transformers' ``AutoConfig``, then, for a
``model_type`` in its ``_CONFIG_REGISTRY`` (``utils/hf_transformers/common.py``),
SGLang's own class from ``configs/<module>.py``, then its Gemma 4 flattening.
:class:`ConfigClasses` knows the registry's model types from the AST of
``common.py`` and ``configs/*.py``, and executes a config module whole (with
the real transformers; the SGLang names it imports that config loading never
reaches are :class:`~._strict.Poison`) the first time a case needs one of its
classes. At import SGLang registers every registry class with ``AutoConfig``;
here a class is registered when it is loaded, before the parse that needs it
(transformers keeps the classes it already has, as SGLang's loop does).
"""

from __future__ import annotations

import ast
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import AutoConfig, PretrainedConfig

from oracle_kit import remote_code
from oracle_kit.lift import Source
from ._plumbing import Builder
from ._strict import Poison, StubError, poison_class

#: Real modules the config files and the parse import (besides the sandbox's own).
REAL = frozenset({
    "transformers", "math", "copy", "json", "os", "re", "pathlib", "functools", "collections",
    "numpy", "warnings", "itertools", "typing_extensions", "types", "huggingface_hub",
})  # fmt: skip
_CONFIGS = "sglang.srt.configs"
#: Config modules whose other contents (image processors, tokenizers) import what the sandbox does
#: not load (torch, PIL, sentencepiece): their config classes are lifted alone, with the names
#: they use (transformers', typing's, ``copy``, ``os`` and SGLang's logger).
_LIFTED_ALONE = {
    "deepseekvl2": ("DeepseekVL2VisionEncoderConfig", "DeepseekVL2MlpProjectorConfig", "DeepseekV2Config",
                    "DeepseekVL2Config"),
    "internvl": ("InternLM2Config", "InternVisionConfig", "InternVLChatConfig"),
}
_LIFTED_NAMES = ("PretrainedConfig", "LlamaConfig", "Qwen2Config", "Qwen3Config", "Qwen3MoeConfig", "GptOssConfig")


def _lifted_namespace() -> dict[str, Any]:
    import copy
    import os
    import typing

    names: dict[str, Any] = {n: getattr(transformers, n) for n in _LIFTED_NAMES}
    names.update({n: getattr(typing, n) for n in ("Any", "Dict", "List", "Optional", "Tuple", "Union")})
    return {**names, "copy": copy, "os": os, "logger": logging.getLogger("sglang_oracle.configs")}
_PROCESSORS = "multimodal.customized_mm_processor_utils"


def _keep_class(processor: Any) -> Callable[[type], type]:
    """``register_customized_processor(processor)``: a class decorator returning the class."""
    return lambda cls: cls


def _literal_model_type(cls: ast.ClassDef) -> str | None:
    for item in cls.body:
        targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(
            item, ast.AnnAssign) else []  # fmt: skip
        if any(isinstance(t, ast.Name) and t.id == "model_type" for t in targets):
            value = getattr(item, "value", None)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    return None


class ConfigClasses:
    """SGLang's ``_CONFIG_REGISTRY``: model types from the AST, classes loaded on demand."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        self._modules: dict[str, dict[str, Any]] = {}
        self.common = b.source("utils/hf_transformers/common.py")
        # Class name -> configs module: the package's re-exports, and common.py's own imports.
        self._where = {
            a.asname or a.name: (node.module or "").rsplit(".", 1)[1]
            for src in (b.source("configs/__init__.py"), self.common)
            for node in src.tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_CONFIGS + ".")
            for a in node.names
        }
        self.types: dict[str, Callable[[], type]] = {}
        for name in self._registry_class_names():
            self.types[self._model_type(name)] = functools.partial(self.cls, name)
        self._aliases: dict[str, type] | None = None
        for key in self._alias_keys():
            self.types[key] = functools.partial(self._alias, key)

    # -- the registry's keys, read from the code ------------------------------------
    def _registry_class_names(self) -> list[str]:
        node = self.common._top_level("_CONFIG_REGISTRY")
        comp = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        assert isinstance(comp, ast.DictComp), "common.py: _CONFIG_REGISTRY is no longer a dict comprehension"
        (gen,) = comp.generators
        assert isinstance(gen.iter, ast.List)
        return [e.id for e in gen.iter.elts if isinstance(e, ast.Name)]

    def _alias_keys(self) -> list[str]:
        keys: list[str] = []
        for node in self.common.tree.body:
            if not isinstance(node, ast.Try):
                continue
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign):
                    for t in sub.targets:
                        if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                and t.value.id == "_CONFIG_REGISTRY" and isinstance(t.slice, ast.Constant)):
                            keys.append(t.slice.value)
                elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and (
                    isinstance(sub.func.value, ast.Name) and sub.func.value.id == "_CONFIG_REGISTRY"
                    and sub.func.attr == "update"
                ):
                    keys.extend(self._v41_types())
        return keys

    def _v41_types(self) -> list[str]:
        src = self.b.source("configs/deepseek_v41.py")
        names = src._top_level("DEEPSEEK_V41_CONFIG_CLASSES")
        assert isinstance(names, ast.Assign) and isinstance(names.value, (ast.Tuple, ast.List))
        return [self._model_type(e.id, "deepseek_v41") for e in names.value.elts if isinstance(e, ast.Name)]

    def _model_type(self, name: str, module: str | None = None) -> str:
        module = module or self._where[name]
        src = self.b.source(f"configs/{module}.py")
        node = src._top_level(name)
        assert isinstance(node, ast.ClassDef), f"configs/{module}.py: {name} is not a class"
        mt = _literal_model_type(node)
        if mt is None:
            raise StubError(f"sglang_oracle: configs/{module}.py: {name} has no literal model_type")
        return mt

    # -- loading -------------------------------------------------------------------
    def module(self, module: str) -> dict[str, Any]:
        """``configs/<module>.py`` executed whole (its config-module imports loaded first)."""
        if module in self._modules:
            return self._modules[module]
        b, src = self.b, self.b.source(f"configs/{module}.py")
        if module in _LIFTED_ALONE:  # its config classes alone (see _LIFTED_ALONE)
            ns = b.namespace(f"configs.{module}", **_lifted_namespace())
            src.lift(ns, *_LIFTED_ALONE[module])
            self._modules[module] = ns
            return ns
        for node in ast.walk(src.tree):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sglang.")):
                continue
            full = node.module or ""
            rel = full.removeprefix("sglang.srt.")
            # Config classes (and the cache-shape helpers) are executed; other helpers a config
            # module imports (update_config, load_config, ...) are never reached loading one.
            sub = full.rsplit(".", 1)[1]
            if full.startswith(_CONFIGS + ".") and full.count(".") == 3 and (
                    sub == "mamba_utils" or any(a.name.endswith("Config") for a in node.names)):  # fmt: skip
                ns = self.module(full.rsplit(".", 1)[1])
                b.provide(rel, {a.name: ns[a.name] for a in node.names})
            elif rel == "utils":
                # is_cpu() -> False: the oracle resolves for a CUDA deployment.
                b.provide(rel, {a.name: (lambda: False) if a.name == "is_cpu" else Poison(f"{full}.{a.name}")
                                for a in node.names})
            elif rel == _PROCESSORS:
                # register_customized_processor(cls) maps a config class's model_type to a
                # multimodal processor (MuseGlimmer, Dots3, ...) and returns the class unchanged;
                # config loading never reads that map (and the file is not pinned): the class as is.
                b.provide(rel, {a.name: _keep_class if a.name == "register_customized_processor"
                                else Poison(f"{full}.{a.name}") for a in node.names})  # fmt: skip
            else:
                have = set(vars(b.modules[full])) if full in b.modules else set()
                b.provide(rel, {a.name: Poison(f"{full}.{a.name}") for a in node.names if a.name not in have})
        ns = b.namespace(f"configs.{module}")
        self._modules[module] = ns
        src.exec_module(ns)
        return ns

    def cls(self, name: str) -> type:
        found = self.module(self._where[name])[name]
        assert isinstance(found, type)
        return found

    def _alias(self, key: str) -> type:
        if self._aliases is None:
            # The try blocks of common.py that add aliases, executed as written.
            v41 = self.module("deepseek_v41")["DEEPSEEK_V41_CONFIG_CLASSES"]  # common.py imports it
            ns = self.b.namespace("utils.hf_transformers.common_aliases", _CONFIG_REGISTRY={},
                                  DEEPSEEK_V41_CONFIG_CLASSES=v41)  # fmt: skip
            tries = [n for n in self.common.tree.body if isinstance(n, ast.Try)
                     and "_CONFIG_REGISTRY" in ast.unparse(n)]  # fmt: skip
            self.common._run(tries, ns)
            self._aliases = ns["_CONFIG_REGISTRY"]
        return self._aliases[key]

    def registry(self) -> Registry:
        return Registry(self)


class Registry(dict):  # type: ignore[type-arg]
    """``_CONFIG_REGISTRY`` as the parse reads it: ``in`` from the AST, values loaded on use."""

    def __init__(self, classes: ConfigClasses) -> None:
        super().__init__()
        self._classes = classes

    def __contains__(self, key: object) -> bool:
        return key in self._classes.types

    def __getitem__(self, key: str) -> type:
        return register(self._classes.types[key]())


def register(cls: type) -> type:
    """SGLang's import-time ``AutoConfig.register(name, cls)``, its errors handled as SGLang does."""
    try:
        AutoConfig.register(cls.model_type, cls)  # type: ignore[attr-defined]
    except ValueError as e:
        err = str(e).lower()
        if "already registered" not in err and "already used" not in err:
            raise
    return cls


def parser(b: Builder, classes: ConfigClasses) -> tuple[Callable[[Path], Any], Callable[[Any], Any]]:
    """``HfModelConfigParser.parse`` over a checkpoint folder (no remote code), and
    ``get_hf_text_config``."""
    common, config = classes.common, b.source("utils/hf_transformers/config.py")
    patches = b.namespace("utils.hf_transformers_patches")
    b.source("utils/hf_transformers_patches.py").lift(patches, "normalize_rope_scaling_compat")
    cns = b.namespace("utils.hf_transformers.common", torch=torch, PretrainedConfig=PretrainedConfig,
                      normalize_rope_scaling_compat=patches["normalize_rope_scaling_compat"])
    common.lift(cns, "_patch_text_config", "get_hf_text_config", "_is_deepseek_ocr_model", "_is_deepseek_ocr2_model",
                "_override_v_head_dim_if_zero")  # fmt: skip
    mamba = {n: classes.cls(n) for n in ("FalconMambaConfig", "MambaConfig", "Mamba2Config")}
    b.provide("configs.mamba", {k: mamba[k] for k in ("FalconMambaConfig", "MambaConfig")})
    b.provide("configs.mamba2", {"Mamba2Config": mamba["Mamba2Config"]})
    ns = b.namespace(
        "utils.hf_transformers.config", PretrainedConfig=PretrainedConfig, AutoConfig=AutoConfig,
        Optional=Any, Dict=dict, Tuple=tuple, copy=__import__("copy"), Path=Path,
        _CONFIG_REGISTRY=classes.registry(), DeepseekV41Config=poison_class("DeepseekV41Config"),
        DeepseekVLV2Config=Poison("DeepseekVLV2Config"),
        **{k: cns[k] for k in ("get_hf_text_config", "_is_deepseek_ocr_model", "_is_deepseek_ocr2_model",
                               "_override_v_head_dim_if_zero")},
    )  # fmt: skip
    config.lift(ns, "_set_architectures", "_apply_deepseek_ocr_overrides", "_GEMMA4_MODEL_TYPES",
                "_GEMMA4_FLATTENED_PER_LAYER_ATTRS", "_gemma4_attention_shapes",
                "_apply_gemma4_attention_overrides", "_LONGCAT_ARCHS", "_try_load_longcat_config",
                "_try_load_raw_mamba_config")  # fmt: skip
    parse = config.lift_method(ns, "HfModelConfigParser", "parse")

    def load(folder: Path) -> Any:
        raw = PretrainedConfig.get_config_dict(str(folder))[0]
        mt = raw.get("model_type")
        if mt in classes.types and mt not in transformers.CONFIG_MAPPING:
            register(classes.types[mt]())  # what SGLang registered at import
        elif mt not in classes.types:
            remote_code.register(raw)  # the checkpoint's own class (--trust-remote-code), stood in
        return parse(None, str(folder), trust_remote_code=False, revision=None)

    return load, cns["get_hf_text_config"]


logging.getLogger("transformers").setLevel(logging.ERROR)
