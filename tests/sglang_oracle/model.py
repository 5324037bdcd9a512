"""SGLang 0.5.23's model resolution, run from the verified wheel extraction.

What SGLang derives from a checkpoint folder, up to the inputs its pool
configurator reads (``kvc.model_config``, ``kvc.is_hybrid_swa``, the layer ids,
``kvc.sliding_window_size``):

1. ``get_config``: ``HfModelConfigParser.parse`` (:mod:`._configs`) over the
   real transformers, with SGLang's own config classes where it has them.
2. ``ModelConfig``: its methods ``_derive_model_shapes``, ``_init_mla_scaling``,
   ``get_total_num_kv_heads``, ``get_swa_num_kv_heads``, ``get_num_kv_heads``,
   ``_get_sliding_window_size``, ``_derive_hybrid_model`` and
   ``_detect_attention_sinks``, lifted from ``configs/model_config.py`` and run,
   in ``__init__``'s order, on a stand-in holding ``hf_config`` and
   ``hf_text_config = get_hf_text_config(hf_config)``;
   ``disable_hybrid_swa_memory`` is the flag or what the model overrides of
   ``architectures[0]`` set (:func:`.hybrid.overrides`).
3. The window: ``resolve_sliding_window_size`` (``load_model_utils.py``) on a
   model stand-in that has ``get_attention_sliding_window_size`` exactly when
   the SGLang class serving the architectures (``ModelRegistry.resolve_model_cls``:
   the first with a models file's ``EntryClass``, else the Transformers backend;
   bases followed through the pinned model files) defines it;
   that method is lifted and run with ``self.config = hf_config``. Read only
   for a hybrid-SWA model: the configurators consume the window only there, and
   a non-hybrid model's class may delegate to submodules the oracle does not
   build.

``resolve(config_dict, disable_hybrid_swa_memory)`` returns the fields
(:data:`FIELDS`) or ``("error", exception type name)`` when SGLang fails.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import tempfile
import typing
from collections.abc import Callable, Mapping
from enum import IntEnum, auto
from pathlib import Path
from typing import Any, NamedTuple

from ._configs import REAL, ConfigClasses, parser
from oracle_kit.lift import Source
from ._plumbing import Builder, pick
from ._strict import Poison, StrictNamespace, StubError, poison_class
from .hybrid import overrides

_TYPING = pick(vars(typing), "Any Callable Dict Iterable List Optional Set Tuple Union")

#: What the resolution yields, per model (the inputs the pool configurators read).
FIELDS = (
    "hybrid_swa", "full_attention_layer_ids", "swa_attention_layer_ids", "num_attention_layers",
    "num_kv_heads", "swa_num_kv_heads", "head_dim", "v_head_dim", "swa_head_dim", "swa_v_head_dim",
    "mla", "kv_lora_rank", "qk_rope_head_dim", "sliding_window_size", "state_pool",
    "index_head_dim", "index_kpool", "index_shared_layers",
)  # fmt: skip
class ModelOracle(NamedTuple):
    resolve: Callable[[Mapping[str, Any], bool], dict[str, Any] | tuple[str, str]]


def _model_config_methods(b: Builder) -> type:
    src = b.source("configs/model_config.py")
    ns = b.namespace("configs.model_config", **_TYPING, IntEnum=IntEnum, auto=auto, math=math,
                     PretrainedConfig=Any, logger=logging.getLogger("sglang_oracle.model_config"))  # fmt: skip
    b.provide("configs.dots3", {"Dots3Config": poison_class("Dots3Config")})
    src.lift(ns, *(
        "AttentionArch PURE_MAMBA1_ARCHITECTURES PURE_SSM_ARCHITECTURES MIMO_V2_MODEL_ARCHS SWA_SINK_ARCHS "
        "_hf_arch _hf_attr is_deepseek_dsa get_dsa_index_head_dim get_dsa_index_kpool dsa_layer_skips_topk "
        "is_deepseek_v4 is_qwen4_exp resolve_spec_hidden_size yarn_get_mscale "
        "compute_mla_mscale_scaling is_hybrid_swa_model get_hybrid_layer_ids"
    ).split())  # fmt: skip
    methods = {m: src.lift_method(ns, "ModelConfig", m) for m in (
        "_derive_model_shapes", "_init_mla_scaling", "get_total_num_kv_heads", "get_num_kv_heads",
        "get_swa_num_kv_heads", "_get_sliding_window_size", "_derive_hybrid_model", "_detect_attention_sinks",
    )}  # fmt: skip
    methods["AttentionArch"] = ns["AttentionArch"]
    methods.update(pick(ns, "is_deepseek_dsa get_dsa_index_kpool dsa_layer_skips_topk"))
    for name in ("is_deepseek_dsa", "get_dsa_index_kpool", "dsa_layer_skips_topk"):
        methods[name] = staticmethod(methods[name])
    return type("ModelConfig", (), methods)


class _Models:
    """The SGLang model class of an architecture, and its window method if it has one."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        models = sorted((b.root / "sglang/srt/models").glob("*.py"))
        self.sources = {p.stem: b.source(f"models/{p.name}") for p in models}
        # The registry (models/registry.py) serves each module's EntryClass by class name.
        self.entry: dict[str, str] = {}
        for mod, src in self.sources.items():
            node = next((n for n in src.tree.body if isinstance(n, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EntryClass" for t in n.targets)), None)  # fmt: skip
            if node is None:
                continue  # a file of base classes only
            elts = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            self.entry.update({e.id: mod for e in elts if isinstance(e, ast.Name)})

    def _find(self, mod: str, cls: str) -> tuple[str, str] | None:
        """``(models file, class)`` defining the window method for ``cls``, bases followed."""
        src = self.sources[mod]
        node = src._top_level(cls)
        assert isinstance(node, ast.ClassDef)
        if any(isinstance(i, ast.FunctionDef) and i.name == "get_attention_sliding_window_size"
               for i in node.body):  # fmt: skip
            return mod, cls
        for base in node.bases:
            if not isinstance(base, ast.Name):
                continue
            if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in src.tree.body):
                found = self._find(mod, base.id)
            else:
                found = self._imported(src, base.id)
            if found is not None:
                return found
        return None

    def _imported(self, src: Source, name: str) -> tuple[str, str] | None:
        for node in src.tree.body:
            if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
                module = node.module or ""
                if module.startswith("sglang.srt.models."):
                    other = module.rsplit(".", 1)[1]
                    return self._find(other, name)
                return None  # torch / layer bases define no window method
        return None

    def served(self, archs: list[str]) -> str:
        """The class ``ModelRegistry.resolve_model_cls`` serves ``archs`` with: the first one SGLang
        has a class for, else its Transformers backend (``_normalize_archs`` appends it)."""
        return next((a for a in archs if a in self.entry), "TransformersForCausalLM")

    def model(self, archs: list[str], hf_config: Any) -> Any:
        """The model stand-in ``resolve_sliding_window_size`` reads."""
        arch = self.served(archs)
        found = self._find(self.entry[arch], arch)
        if found is None:
            return StrictNamespace("model", ("get_attention_sliding_window_size",))
        mod, cls = found
        src = self.sources[mod]
        ns = self.b.namespace(f"models.{mod}", **_TYPING, PretrainedConfig=Any)
        for helper in ("get_attention_sliding_window_size", "_get_attention_sliding_window_size"):
            try:
                src.lift(ns, helper)
            except LookupError:
                pass
        method = src.lift_method(ns, cls, "get_attention_sliding_window_size")
        # The attributes the class's __init__ sets from the config and the method reads: `config`,
        # and `text_config` where __init__ assigns `self.text_config = config.text_config`
        # (DiffusionGemma's), read from the source rather than assumed.
        attrs: dict[str, Any] = {"config": hf_config}
        if self._sets_text_config(src, cls):
            attrs["text_config"] = hf_config.text_config
        model = StrictNamespace("model", **attrs)
        return StrictNamespace("model", get_attention_sliding_window_size=lambda: method(model))

    @staticmethod
    def _sets_text_config(src: Source, cls: str) -> bool:
        node = src._top_level(cls)
        init = next((i for i in getattr(node, "body", ()) if isinstance(i, ast.FunctionDef) and i.name == "__init__"),
                    None)  # fmt: skip
        return init is not None and any(
            isinstance(st, ast.Assign) and len(st.targets) == 1 and ast.unparse(st.targets[0]) == "self.text_config"
            and ast.unparse(st.value) == "config.text_config" for st in ast.walk(init))  # fmt: skip


def _mambaish(b: Builder, classes: ConfigClasses, get_hf_text_config: Any) -> Callable[[Any], Any]:
    """``mambaish_config`` (``configs/hybrid_arch.py``) over SGLang's own config classes.

    ``linear_attn_registry_result`` is ``get_linear_attn_config`` (lifted) over an
    empty registry: only ``configs/gigachat35.py`` registers a spec, at import.
    """
    src = b.source("configs/hybrid_arch.py")
    ns = b.namespace("configs.hybrid_arch", get_hf_text_config=get_hf_text_config)
    for node in src.tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "sglang.srt.configs":
            for a in node.names:
                try:
                    ns[a.name] = classes.cls(a.name)
                except Exception:  # noqa: BLE001 - a module the oracle cannot execute
                    ns[a.name] = poison_class(a.name)  # never matched: no case builds one
    src.lift(ns, *(
        "_get_linear_attn_registry_result qwen3_next_config hybrid_lightning_config "
        "hybrid_gdn_config mamba2_config kimi_linear_config glm5_next_config "
        "hybrid_kda_config mambaish_config"
    ).split())  # fmt: skip
    reg = b.namespace("configs.linear_attn_model_registry", _LINEAR_ATTN_MODEL_REGISTRY=[], **_TYPING)
    b.source("configs/linear_attn_model_registry.py").lift(reg, "get_linear_attn_config")
    registry_result = reg["get_linear_attn_config"]

    def mambaish(mc: Any) -> Any:
        mc.linear_attn_registry_result = registry_result(mc.hf_config)
        return ns["mambaish_config"](mc)

    return mambaish


def _transformers_backend(b: Builder) -> Callable[[Any], None]:
    """What ``models/transformers.py`` checks before serving an architecture SGLang has no
    class for: the transformers class must support custom attention backends."""
    import transformers

    src = b.source("models/transformers.py")
    ns = b.namespace("models.transformers", transformers=transformers, PretrainedConfig=Any,
                     get_class_from_dynamic_module=Poison("get_class_from_dynamic_module"),
                     logger=logging.getLogger("sglang_oracle.transformers"))  # fmt: skip
    src.lift(ns, "_resolve_attention_backend_model_cls")

    def check(config: Any) -> None:
        model_cls = ns["_resolve_attention_backend_model_cls"](config)
        if model_cls is not None and not getattr(model_cls, "_supports_attention_backend", True):
            raise ValueError(f"Model {model_cls} does not support custom attention backends")

    return check


def load(root: Path) -> ModelOracle:
    """SGLang's model resolution as ``resolve(config_dict, disable_flag)``."""
    b = Builder(root, real=REAL)
    # Inkling's mamba2_cache_params (which mambaish_config tests for None) reads both; its
    # attention TP and --enable-scattered-sconv change the shapes only, set below
    b.provide("runtime_context", {"get_parallel": b.getters["parallel"], "get_exec": b.getters["exec"]})
    ctx = StrictNamespace("runtime context", parallel=StrictNamespace("get_parallel()", attn_tp_size=1),
                          exec=StrictNamespace("get_exec()", comm=StrictNamespace("comm", enable_scattered_sconv=False)))
    classes = ConfigClasses(b)
    load_config, get_hf_text_config = parser(b, classes)
    model_config = _model_config_methods(b)
    off_by_override, _ = overrides(root)
    models = _Models(b)
    mambaish = _mambaish(b, classes, get_hf_text_config)
    backend = _transformers_backend(b)
    lmu = b.namespace("model_executor.load_model_utils", logger=logging.getLogger("sglang_oracle.lmu"))
    b.source("model_executor/model_runner_components/load_model_utils.py").lift(
        lmu, "resolve_sliding_window_size")

    def resolve(config: Mapping[str, Any], disable: bool) -> dict[str, Any] | tuple[str, str]:
        b.active.ctx = ctx
        try:
            with tempfile.TemporaryDirectory(prefix="kvbudget-sglang-model-") as d:
                (Path(d) / "config.json").write_text(json.dumps(dict(config)))
                hf = load_config(Path(d))
            mc = model_config()
            mc.hf_config, mc.hf_text_config = hf, get_hf_text_config(hf)
            mc.is_draft_model = False
            archs = list(hf.architectures or ())
            if not any(a in models.entry for a in archs):
                backend(hf)  # SGLang's ModelRegistry falls back to its Transformers backend
            mc.disable_hybrid_swa_memory = disable or off_by_override(archs, hf)
            mc.attention_chunk_size = getattr(mc.hf_text_config, "attention_chunk_size", None)
            mc.sliding_window_size = mc._get_sliding_window_size()
            mc._derive_model_shapes()
            mc._derive_hybrid_model()
            mla = mc.attention_arch == mc.AttentionArch.MLA
            state = mambaish(mc)
            if state is not None:  # the Default pool counts the full-attention layers only
                mc.num_attention_layers = len(list(state.full_attention_layer_ids))
            window = None
            if mc.is_hybrid_swa:
                window = lmu["resolve_sliding_window_size"](models.model(archs, hf), mc)
            out = {
                "hybrid_swa": bool(mc.is_hybrid_swa),
                "full_attention_layer_ids": _ids(mc.full_attention_layer_ids),
                "swa_attention_layer_ids": _ids(mc.swa_attention_layer_ids),
                "num_attention_layers": mc.num_attention_layers,
                "num_kv_heads": mc.get_total_num_kv_heads(),
                "swa_num_kv_heads": mc.get_swa_num_kv_heads(1),
                "mla": mla,
                "kv_lora_rank": mc.kv_lora_rank if mla else None,
                "qk_rope_head_dim": mc.qk_rope_head_dim if mla else None,
                "sliding_window_size": window,
                "state_pool": state is not None,
                # The DSA indexer: ModelConfig's index_head_dim; the pool configurator's
                # index_kpool and shared-top-k layers (read from hf_config).
                "index_head_dim": getattr(mc, "index_head_dim", None) if mla else None,
                "index_kpool": 1, "index_shared_layers": 0,
            }
            if mc.is_deepseek_dsa(hf):
                out["index_kpool"] = mc.get_dsa_index_kpool(hf)
                out["index_shared_layers"] = sum(
                    mc.dsa_layer_skips_topk(hf, i) for i in range(mc.num_attention_layers))
            # MLA caches the latent: of the head dims only V's reaches the configurators.
            dims = ("head_dim", "v_head_dim", "swa_head_dim", "swa_v_head_dim")
            out.update({k: None if mla and k != "v_head_dim" else getattr(mc, k) for k in dims})
            return out
        except (StubError, NameError):  # the oracle's own gap, not SGLang's outcome
            raise
        except Exception as exc:  # noqa: BLE001 - SGLang's own failure is an outcome
            return ("error", f"{type(exc).__name__}: {exc}")
        finally:
            b.active.ctx = None

    return ModelOracle(resolve)


def _ids(ids: Any) -> tuple[int, ...] | None:
    return None if ids is None else tuple(int(i) for i in ids)


__all__ = ["FIELDS", "ModelOracle", "Poison", "load"]
