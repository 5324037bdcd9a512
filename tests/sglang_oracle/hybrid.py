"""SGLang 0.5.23's own hybrid-SWA decision, run from the verified wheel extraction.

Lifted from ``configs/model_config.py``: ``MIMO_V2_MODEL_ARCHS``,
``SWA_SINK_ARCHS``, ``is_hybrid_swa_model``, ``get_hybrid_layer_ids`` and the
methods ``ModelConfig._derive_hybrid_model`` and ``_detect_attention_sinks``,
run on a stand-in ``self``; the model overrides that turn hybrid SWA memory off
(``arg_groups/model_overrides/{gemma2_gemma3,exaone,olmo2}.py``) are executed
whole, their ``_register_for`` recording each provider by architecture, and
applied for ``architectures[0]`` as ``handle_model_specific_adjustments`` does.
A config is an attribute view of a mapping: an attribute it lacks raises
``AttributeError`` (as an undefined attribute of a ``PretrainedConfig`` would).
"""

from __future__ import annotations

import ast
import builtins
import logging
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from oracle_kit.lift import Source
from ._plumbing import pick
from ._strict import Poison, StrictNamespace

_TYPING = pick(vars(typing), "Any Callable Dict Iterable List Optional Set Tuple Union")
_OVERRIDES = ("gemma2_gemma3", "exaone", "olmo2")

Outcome = tuple[Any, ...]
"""``("ok", hybrid, full_ids, swa_ids)`` or ``("error", exception type name)``."""


class HybridOracle(NamedTuple):
    """SGLang's decision, and every architecture its rule names (read from its code)."""

    decide: Callable[[list[str], Mapping[str, Any], bool], Outcome]
    architectures: frozenset[str]


class Attrs:
    """An HF config as SGLang reads it: attributes from a mapping, missing ones raise."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.__dict__.update(cfg)


class _Self:
    """The ``ModelConfig`` stand-in: the attributes ``_derive_hybrid_model`` reads."""

    def __init__(self, hf_config: Attrs, text: Attrs, disable: bool) -> None:
        self.hf_config, self.hf_text_config, self.disable_hybrid_swa_memory = hf_config, text, disable


def overrides(root: Path) -> tuple[Callable[[list[str], Any], bool], frozenset[str]]:
    """``(off, architectures)``: ``off(architectures, hf_config)`` says whether the model
    overrides of ``architectures[0]`` turn hybrid SWA memory off (as
    ``handle_model_specific_adjustments`` applies them); the architectures they cover."""
    logging.getLogger("kvbudget_oracle").setLevel(logging.ERROR)  # the overrides' warnings
    providers: dict[str, Callable[..., dict[str, Any]]] = {}

    def register_for(*archs: str) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
        def add(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
            providers.update(dict.fromkeys(archs, fn))
            return fn

        return add

    def importer(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        stubs = {
            "sglang.srt.arg_groups.model_override_base": StrictNamespace(
                "model_override_base", _register_for=register_for, resolving_view=lambda args: args),
            "sglang.srt.runtime_context": StrictNamespace(
                "runtime_context", get_platform=Poison("runtime_context.get_platform")),
        }  # fmt: skip
        if name in stubs:
            return stubs[name]
        if name in ("logging", "typing"):
            return __import__(name, globals_, locals_, fromlist, level)
        raise ImportError(f"the hybrid oracle does not provide {name!r}")

    for mod in _OVERRIDES:
        override = Source(root, f"sglang/srt/arg_groups/model_overrides/{mod}.py")
        override.exec_module({
            "__name__": f"kvbudget_oracle.overrides.{mod}",
            "__builtins__": {**vars(builtins), "__import__": importer},
        })  # fmt: skip

    def off(archs: list[str], hf_config: Any) -> bool:
        fn = providers.get(archs[0]) if archs else None
        # attention_backend set: the providers' platform branches are not reached.
        args = StrictNamespace("server_args", attention_backend="fa3")
        return bool(fn(args, hf_config).get("disable_hybrid_swa_memory")) if fn else False

    return off, frozenset(providers)


def load(root: Path) -> HybridOracle:
    """SGLang's decision as ``decide(architectures, text_config, disable_flag) -> Outcome``."""
    src = Source(root, "sglang/srt/configs/model_config.py")
    ns: dict[str, Any] = {
        "__name__": "kvbudget_oracle.model_config", **_TYPING, "PretrainedConfig": object,
        "logger": logging.getLogger("kvbudget_oracle.model_config"),
    }  # fmt: skip
    src.lift(ns, "MIMO_V2_MODEL_ARCHS", "SWA_SINK_ARCHS", "is_hybrid_swa_model", "get_hybrid_layer_ids")
    methods = {m: src.lift_method(ns, "ModelConfig", m) for m in ("_derive_hybrid_model", "_detect_attention_sinks")}
    model_config = type("ModelConfig", (_Self,), methods)

    off_by_override, overridden = overrides(root)

    def decide(archs: list[str], text_config: Mapping[str, Any], disable: bool) -> Outcome:
        hf_config = Attrs({**text_config, "architectures": list(archs)})
        text = Attrs(text_config)
        try:
            mc = model_config(hf_config, text, disable or off_by_override(archs, hf_config))
            mc._derive_hybrid_model()
        except Exception as exc:  # noqa: BLE001 - SGLang's own failure is an outcome
            return ("error", type(exc).__name__)
        if not mc.is_hybrid_swa:
            return ("ok", False, None, None)
        if mc.is_deepseek_v4_arch:
            return ("error", "DeepSeekV4")
        full, swa = mc.full_attention_layer_ids, mc.swa_attention_layer_ids
        if full is None or swa is None:
            return ("error", "NoLayerIds")
        return ("ok", True, tuple(full), tuple(swa))

    # Every architecture SGLang's rule names, read from its code (the test covers each).
    named = set(ns["SWA_SINK_ARCHS"]) | set(ns["MIMO_V2_MODEL_ARCHS"]) | set(overridden)
    for fn_name in ("is_hybrid_swa_model", "get_hybrid_layer_ids"):
        named |= set(_arch_strings(src, fn_name))
    return HybridOracle(decide, frozenset(named))


def _arch_strings(src: Source, function: str) -> list[str]:
    """The string constants in a top-level function that are architecture names."""
    node = src._top_level(function)
    return [
        n.value for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value[:1].isupper()
        and n.value.isidentifier() and not n.value.startswith(("Hybrid", "Inkling local"))
    ]  # fmt: skip
