"""The draft layers SGLang 0.5.23 prices in an EAGLE-family target pool, run from the wheel.

``spec_aux_hidden_state._resolve_eagle_aux_hidden_state`` (lifted, with
``SpecAuxHiddenStateConfig``) decides ``eagle_draft_num_layers`` and
``eagle_draft_swa_num_layers`` from two ``ModelConfig``\\ s: the target's, and
the draft's in draft mode (``ModelConfig.from_server_args(...,
is_draft_model=True)`` on the draft path, the target's own path when the launch
resolved none). Each is built as :mod:`.model` builds one (SGLang's config
loading, and ``ModelConfig``'s own methods lifted from ``configs/model_config.py``
in ``__init__``'s order), with ``_config_draft_model`` (lifted) first in draft
mode, as ``__init__`` runs it. ``get_spec()`` carries the launch's resolved
draft path; ``disable_hybrid_swa_memory`` is the resolved launch's, as
``ModelConfig.from_server_args`` reads it.
"""

from __future__ import annotations

import copy
import logging
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ._configs import REAL, ConfigClasses, parser
from ._plumbing import Builder, pick
from ._strict import Poison, StrictNamespace
from .model import _model_config_methods

__all__ = ["load"]


def load(root: Path) -> Callable[[Mapping[str, Any], str], dict[str, int]]:
    """``draft_layers(resolved_values, target_path) -> {"draft_num_layers", "draft_swa_num_layers"}``."""
    b = Builder(root, real=REAL)
    classes = ConfigClasses(b)
    load_config, get_hf_text_config = parser(b, classes)
    model_config = _model_config_methods(b)
    src = b.source("configs/model_config.py")
    ns = b.namespace("configs.model_config", logger=logging.getLogger("sglang_oracle.draft"), copy=copy,
                     get_hf_text_config=get_hf_text_config, **pick(vars(typing), "Any Optional"))  # fmt: skip
    src.lift(ns, "MIMO_V2_MODEL_ARCHS")
    config_draft_model = src.lift_method(ns, "ModelConfig", "_config_draft_model")

    def build(path: str, v: Mapping[str, Any], draft: bool) -> Any:
        mc = model_config()
        hf = load_config(Path(path))
        mc.hf_config, mc.hf_text_config = hf, get_hf_text_config(hf)
        mc.is_draft_model, mc.speculative_algorithm = draft, v["speculative_algorithm"]
        if draft:
            config_draft_model(mc)
        mc.disable_hybrid_swa_memory = v["disable_hybrid_swa_memory"]
        mc.attention_chunk_size = getattr(mc.hf_text_config, "attention_chunk_size", None)
        mc.sliding_window_size = mc._get_sliding_window_size()
        mc._derive_model_shapes()
        mc._derive_hybrid_model()
        mc.num_nextn_predict_layers = getattr(mc.hf_text_config, "num_nextn_predict_layers", None)
        return mc

    aux = b.namespace("model_executor.model_runner_components.spec_aux_hidden_state", msgspec=msgspec,
                      is_deepseek_v4=Poison("is_deepseek_v4"), get_exec=Poison("get_exec"),
                      logger=logging.getLogger("sglang_oracle.draft"), **pick(vars(typing), "Any Optional"))  # fmt: skip
    source = b.source("model_executor/model_runner_components/spec_aux_hidden_state.py")
    holder: dict[str, Any] = {}

    class ModelConfig:
        @staticmethod
        def from_server_args(server_args: Any, *, model_path: str | None, model_revision: Any,
                             is_draft_model: bool) -> Any:  # fmt: skip
            assert is_draft_model
            v = holder["values"]
            return build(model_path or v["model_path"], v, True)

    aux["ModelConfig"] = ModelConfig
    aux["get_spec"] = lambda: holder["spec"]
    source.lift(aux, "SpecAuxHiddenStateConfig", "_resolve_eagle_aux_hidden_state")
    spec_algorithm = _algorithms(root)

    def draft_layers(v: Mapping[str, Any], target: str) -> dict[str, int]:
        algo = spec_algorithm.from_string(v["speculative_algorithm"])
        holder["values"] = v
        holder["spec"] = StrictNamespace("get_spec()", speculative_draft_model_path=v["speculative_draft_model_path"],
                                         speculative_draft_model_revision=v["speculative_draft_model_revision"])
        config = aux["SpecAuxHiddenStateConfig"]()
        aux["_resolve_eagle_aux_hidden_state"](config=config, server_args=None, model_config=build(target, v, False),
                                              spec_algorithm=algo, is_draft_worker=False)  # fmt: skip
        return {"draft_num_layers": int(config.eagle_draft_num_layers or 0),
                "draft_swa_num_layers": int(config.eagle_draft_swa_num_layers or 0)}  # fmt: skip

    return draft_layers


def _algorithms(root: Path) -> Any:
    """SGLang's ``SpeculativeAlgorithm`` (lifted from ``spec_info.py``, :mod:`._helpers`)."""
    from ._helpers import _speculative

    return _speculative(Builder(root))
