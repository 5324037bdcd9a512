"""SGLang 0.5.23's recurrent state for a checkpoint's ``config.json``, run from the verified wheel.

What SGLang derives, from a config folder, up to the state pool's inputs:

1. ``get_config``: ``HfModelConfigParser.parse`` (:func:`._configs.parser`) over the real
   transformers 5.19.0, with SGLang's own config classes (``configs/<module>.py``, executed
   whole by :class:`._configs.ConfigClasses`), the raw state-spaces Mamba path included.
   ``configs/lfm2*.py`` and ``configs/zaya.py`` put their classes in transformers'
   ``CONFIG_MAPPING`` at import; here they are in it for the parse only (:meth:`StateModelOracle._mapping`), so no other
   oracle in the process sees this one's classes.
2. ``configs/hybrid_arch.py`` lifted unchanged: ``mamba2_config``, ``hybrid_gdn_config``,
   ``hybrid_kda_config`` (``kimi_linear_config``, ``glm5_next_config``),
   ``hybrid_lightning_config``, ``mambaish_config``, over those classes;
   ``linear_attn_registry_result`` is ``get_linear_attn_config`` over the registry
   ``configs/linear_attn_model_registry.py`` defines (lifted), filled by executing the
   config modules that register a spec at import (``configs/gigachat35.py``).
3. The state: the chosen config's own ``mamba2_cache_params`` property (its module's code,
   executed), ``configs/mamba_utils.py`` (``Mamba2StateShape``, ``KimiLinearStateShape``,
   ``mamba2_state_dtype``, ``mamba_cache_per_req``, executed whole).
4. The pipeline share: ``_handle_max_mamba_cache``'s ``max_stage_mamba_layers`` expression
   (``mem_cache/kv_cache_configurator.py``), restated over ``get_pp_indices`` lifted from
   ``distributed/utils.py``, on ``ModelConfig.num_hidden_layers`` =
   ``get_hf_text_config(hf_config).num_hidden_layers``.

Stubbed (strict): ``get_parallel()`` (``attn_tp_size``, ``tp_size``,
``enable_cp_tp_group_sharing=False``; ``linear_attn_tp_size`` is lifted from
``runtime_context.py`` over it), ``get_exec()`` (``comm.enable_scattered_sconv=False``, the
default Inkling's conv state reads), ``envs`` (``SGLANG_MAMBA_CONV_DTYPE``,
``SGLANG_MAMBA_SSM_DTYPE``), ``is_cpu() = False``; the pipeline split is
:class:`.pipeline.PipelineOracle`'s (the case's split as ``SGLANG_PP_LAYER_PARTITION``). A :class:`~._strict.StubError`, ``NameError`` or ``ImportError`` is the
oracle's fault and propagates; any other exception is SGLang's (or transformers') refusal of
the config, reported as ``{"error": "Type: message"}``.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import tempfile
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import transformers

from ._configs import REAL, ConfigClasses, parser
from .pipeline import PipelineOracle
from ._plumbing import Builder, Envs, pick
from ._strict import StrictNamespace, StubError, poison_class

_TYPING = pick(vars(typing), "Any Callable Dict Iterable List Optional Set Tuple Union")
#: The model types whose SGLang class ``configs/lfm2*.py``, ``configs/zaya.py`` and
#: ``configs/inkling.py`` put in ``CONFIG_MAPPING._extra_content`` (Inkling's over transformers' own).
_MAPPED = ("lfm2", "lfm2_moe", "lfm2_vl", "zaya", "inkling_model", "inkling_audio_model", "inkling_vision_model",
           "inkling_mm_model")  # fmt: skip
_FAULTS = (StubError, NameError, ImportError)
_LOG = logging.getLogger("sglang_oracle.sandbox.state_model")
_LOG.propagate = False


class StateModelOracle:
    """``state(config, ...)``: what SGLang 0.5.23 builds its state pool from."""

    def __init__(self, root: Path) -> None:
        self.root = root
        b = self.b = Builder(root, real=REAL)
        g = b.getters
        du = b.namespace("distributed.utils")
        b.source("distributed/utils.py").lift(du, "ensure_divisibility", "divide")
        self.pipeline = PipelineOracle(root)
        b.provide("distributed.utils", pick(du, "divide ensure_divisibility"))
        b.provide("environ", {"envs": Envs(b.active)})
        rc = b.namespace("runtime_context", get_parallel=g["parallel"])
        b.source("runtime_context.py").lift(rc, "linear_attn_parallel_group", "linear_attn_tp_size")
        b.provide("runtime_context", {"get_parallel": g["parallel"], "get_exec": g["exec"],
                                      "linear_attn_tp_size": rc["linear_attn_tp_size"]})  # fmt: skip
        # The linear-attention registry, as configs/linear_attn_model_registry.py defines it:
        # a config module that registers a spec at import (configs/gigachat35.py) fills it.
        reg = self.registry = b.namespace("configs.linear_attn_model_registry", _LINEAR_ATTN_MODEL_REGISTRY=[],
                                          dataclass=dataclass, field=field, logger=_LOG, **_TYPING)  # fmt: skip
        b.source("configs/linear_attn_model_registry.py").lift(
            reg, "LinearAttnModelSpec", "register_linear_attn_model", "get_linear_attn_config")
        b.provide("configs.linear_attn_model_registry", pick(reg, "LinearAttnModelSpec register_linear_attn_model"))
        self.classes = classes = ConfigClasses(b)
        saved = self._saved_mapping()
        try:
            self.load_config, self.get_hf_text_config = parser(b, classes)
            self.hybrid = self._hybrid_arch(classes)
            self.registered = self._registered()
        finally:
            self.mine = {k: transformers.CONFIG_MAPPING._extra_content.get(k) for k in _MAPPED}
            self._restore(saved)

    # -- set-up --------------------------------------------------------------------------------
    @staticmethod
    def _saved_mapping() -> dict[str, Any]:
        extra = transformers.CONFIG_MAPPING._extra_content
        return {k: extra[k] for k in _MAPPED if k in extra}

    @staticmethod
    def _restore(saved: Mapping[str, Any]) -> None:
        extra = transformers.CONFIG_MAPPING._extra_content
        for k in _MAPPED:
            if k in saved:
                extra[k] = saved[k]
            else:
                extra.pop(k, None)

    @contextlib.contextmanager
    def _mapping(self) -> Iterator[None]:
        """SGLang's ``CONFIG_MAPPING`` overrides (this oracle's classes) for one parse."""
        saved = self._saved_mapping()
        extra = transformers.CONFIG_MAPPING._extra_content
        extra.update({k: v for k, v in self.mine.items() if v is not None})
        try:
            yield
        finally:
            self._restore(saved)

    def _hybrid_arch(self, classes: ConfigClasses) -> dict[str, Any]:
        b, src = self.b, self.b.source("configs/hybrid_arch.py")
        ns = b.namespace("configs.hybrid_arch", get_hf_text_config=self.get_hf_text_config)
        self.arch_classes: dict[str, Any] = {}
        for node in src.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == "sglang.srt.configs":
                for a in node.names:
                    try:
                        ns[a.name] = self.arch_classes[a.name] = classes.cls(a.name)
                    except _FAULTS:
                        # A config module the oracle cannot execute (it imports what config
                        # loading never provides): never matched, and reported as such.
                        ns[a.name] = poison_class(a.name)
        src.lift(ns, *(
            "_get_linear_attn_registry_result qwen3_next_config hybrid_lightning_config hybrid_gdn_config "
            "mamba2_config kimi_linear_config glm5_next_config hybrid_kda_config mambaish_config"
        ).split())  # fmt: skip
        return ns

    def _registered(self) -> list[str]:
        """Executes the config modules that call ``register_linear_attn_model`` at import (found
        by AST), as SGLang's ``configs/__init__.py`` imports them; their config class names."""
        for path in sorted((self.root / "sglang/srt/configs").glob("*.py")):
            calls = [n.value for n in self.b.source(f"configs/{path.name}").tree.body
                     if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]  # fmt: skip
            if any(getattr(c.func, "id", None) == "register_linear_attn_model" for c in calls):
                self.classes.module(path.stem)
        return [spec.config_class.__name__ for spec in self.registry["_LINEAR_ATTN_MODEL_REGISTRY"]]

    def stateful_model_types(self) -> dict[str, str]:
        """``model_type -> class name`` of every SGLang config class ``mambaish_config`` can
        answer for: the classes ``hybrid_arch.py`` imports and the registered ones, their
        subclasses in ``configs/*.py``, wrappers whose ``text_config`` / ``llm_config`` is one
        (``sub_configs`` or an assignment in ``__init__``), and the model types ``hybrid_arch.py``
        compares ``model_type`` with, all found by AST."""
        seeds = set(self.arch_classes) | set(self.registered)
        classes: dict[str, tuple[str, ast.ClassDef]] = {}
        for path in sorted((self.root / "sglang/srt/configs").glob("*.py")):
            for node in self.b.source(f"configs/{path.name}").tree.body:
                if isinstance(node, ast.ClassDef):
                    classes.setdefault(node.name, (path.stem, node))
        stateful = set(seeds)
        while True:
            more = {name for name, (_, node) in classes.items() if name not in stateful and (
                any(isinstance(b, ast.Name) and b.id in stateful for b in node.bases)
                or _text_classes(node) & stateful)}  # fmt: skip
            if not more:
                break
            stateful |= more
        out: dict[str, str] = {}
        # ... and the model types hybrid_arch.py compares model_type with (glm5_next_config).
        for cmp in ast.walk(self.b.source("configs/hybrid_arch.py").tree):
            if isinstance(cmp, ast.Compare) and "model_type" in ast.unparse(cmp.left):
                for c in cmp.comparators:
                    if isinstance(c, ast.Constant) and isinstance(c.value, str):
                        out[c.value] = f"model_type == {c.value!r}"
        for name in sorted(stateful):
            module, node = classes[name]
            try:
                mt = self.classes.module(module)[name].model_type
            except _FAULTS:
                mt = next((i.value.value for i in node.body if isinstance(i, (ast.Assign, ast.AnnAssign))
                           and isinstance(i.value, ast.Constant) and any(
                               isinstance(t, ast.Name) and t.id == "model_type"
                               for t in (i.targets if isinstance(i, ast.Assign) else [i.target]))), None)  # fmt: skip
            assert isinstance(mt, str), f"configs/{module}.py: {name} has no model_type"
            out[mt] = name
        return out

    # -- stubs -----------------------------------------------------------------------------------
    def _ctx(self, attn_tp: int, tp: int, conv: str | None, ssm: str | None) -> StrictNamespace:
        return StrictNamespace(
            "runtime context",
            envs={"SGLANG_MAMBA_CONV_DTYPE": "bfloat16" if conv is None else conv, "SGLANG_MAMBA_SSM_DTYPE": ssm},
            parallel=StrictNamespace("get_parallel()", attn_tp_size=attn_tp, tp_size=tp,
                                     enable_cp_tp_group_sharing=False),
            # Inkling's conv state: --enable-scattered-sconv off (its default)
            exec=StrictNamespace("get_exec()", comm=StrictNamespace("comm", enable_scattered_sconv=False)),
        )  # fmt: skip

    # -- one config ------------------------------------------------------------------------------
    def parse(self, config: Mapping[str, Any]) -> Any:
        """``get_config`` on a folder holding ``config`` as its ``config.json``."""
        with tempfile.TemporaryDirectory(prefix="kvbudget-sglang-state-") as d:
            (Path(d) / "config.json").write_text(json.dumps(dict(config)))
            with self._mapping():
                return self.load_config(Path(d))

    def mixer(self, hf: Any) -> tuple[str | None, Any]:
        """``(which, config)``: the first of ``mambaish_config``'s pickers that answers."""
        h = self.hybrid
        registered = self.registry["get_linear_attn_config"](hf)
        mc = StrictNamespace("ModelConfig", hf_config=hf, is_draft_model=False,
                             linear_attn_registry_result=registered)  # fmt: skip
        for name, pick_ in (("mamba2", "mamba2_config"), ("gdn", "hybrid_gdn_config"), ("kda", "hybrid_kda_config"),
                            ("lightning", "hybrid_lightning_config")):  # fmt: skip
            found = h[pick_](mc)
            if found:
                return name, found
        if registered:
            return "registry", registered[1]
        assert h["mambaish_config"](mc) is None
        return None, None

    def state(
        self,
        config: Mapping[str, Any],
        *,
        attn_tp: int = 1,
        tp: int | None = None,
        pp: int = 1,
        conv_dtype: str | None = None,
        ssm_dtype: str | None = None,
        pp_split: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        """SGLang's answer: ``{"mixer": None}`` (no state pool); ``{"mixer", "unread": True}``
        for registry models (not built here); else ``mixer``, ``conv`` (shapes),
        ``temporal``, ``k_heads_per_tp``, ``layers``, ``conv_dtype``, ``ssm_dtype``,
        ``per_req`` (``mamba_cache_per_req``), ``num_hidden_layers`` and ``stage_layers``;
        or ``{"error": ...}`` where SGLang (or transformers under it) refuses the config."""
        active = self.b.active
        active.ctx = self._ctx(attn_tp, attn_tp if tp is None else tp, conv_dtype, ssm_dtype)
        try:
            try:
                hf = self.parse(config)
                which, cfg = self.mixer(hf)
                if which is None:
                    return {"mixer": None}
                if which == "registry":
                    return {"mixer": which, "unread": True}
                params = cfg.mamba2_cache_params
                if params is None:
                    return {"mixer": which, "params": None}
                n = self.get_hf_text_config(hf).num_hidden_layers
                layers = list(params.layers)
                s = params.shape
                return {
                    "mixer": which, "conv": [tuple(int(x) for x in c) for c in s.conv],
                    # Inkling's conv-only shape has no key heads (None)
                    "temporal": tuple(int(x) for x in s.temporal),
                    "k_heads_per_tp": int(s.num_k_heads_per_tp) if hasattr(s, "num_k_heads_per_tp") else None,
                    "layers": layers, "conv_dtype": str(params.dtype.conv).removeprefix("torch."),
                    "ssm_dtype": str(params.dtype.temporal).removeprefix("torch."),
                    "per_req": int(params.mamba_cache_per_req), "num_hidden_layers": n,
                    "stage_layers": self._stage_layers(layers, n, pp, pp_split),
                }  # fmt: skip
            except _FAULTS:
                raise
            except Exception as e:  # noqa: BLE001 - SGLang's (or transformers') refusal
                return {"error": f"{type(e).__name__}: {e}"}
        finally:
            active.ctx = None

    def _stage_layers(self, layers: list[int], n: int, pp: int, split: Sequence[int] | None) -> int:
        """``max_stage_mamba_layers`` of ``_handle_max_mamba_cache`` (its expression, over the
        lifted ``get_pp_indices``, :class:`.pipeline.PipelineOracle`)."""
        if pp > 1 and layers:
            stages = self.pipeline.stage_ranges(n, pp, split)
            if isinstance(stages, str):  # get_pp_indices refused the split
                raise ValueError(stages.removeprefix("error: "))
            return max(sum(1 for i in layers if start <= i < end) for start, end in stages)
        return len(layers)


def _text_classes(node: ast.ClassDef) -> set[str]:
    """Class names a config class uses for its ``text_config`` / ``llm_config``."""
    keys = {"text_config", "llm_config"}
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            for k, v in zip(sub.keys, sub.values):
                if isinstance(k, ast.Constant) and k.value in keys and isinstance(v, ast.Name):
                    out.add(v.id)
        elif isinstance(sub, ast.Assign) and any(  # self.text_config = X(...), text_config = X(...)
                (t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)) in keys
                for t in sub.targets):  # fmt: skip
            for call in ast.walk(sub.value):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                    out.add(call.func.id)
    return out


_LOADED: dict[Path, StateModelOracle] = {}


def load(root: Path) -> StateModelOracle:
    """The oracle over the verified extraction at ``root`` (built once per root)."""
    if root not in _LOADED:
        _LOADED[root] = StateModelOracle(root)
    return _LOADED[root]
