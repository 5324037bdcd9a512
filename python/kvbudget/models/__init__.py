"""Real models and GPUs: Hugging Face config parsing and named presets.

* :mod:`kvbudget.models.hf`: ``config.json`` -> ``ModelGeometry`` /
  ``DraftGeometry`` keyword arguments.
* :mod:`kvbudget.models.presets`: every model of the bundled model table.
* :mod:`kvbudget.models.hybrid_state`: released hybrid-state checkpoints' config
  values (Qwen3-Next, Qwen3.5, Nemotron-H, Falcon-H1, Kimi-Linear, LFM2, Jamba), by name.
* :mod:`kvbudget.models.published`: released attention checkpoints' config files
  (DeepSeek-V3.2, GLM-5, Kimi-K2.5, Gemma 4, Llama 4 Maverick, Qwen3-235B), by name;
  :func:`find_bundled_model` looks a name up in both tables.
* :mod:`kvbudget.models.gpus`: vendor-stated GPU memory.
* :mod:`kvbudget.sglang.hybrid`: whether SGLang gives a model separate
  full and SWA pools (its architecture list), and why.
* :mod:`kvbudget.sglang.model`: the geometry SGLang's pool configurators
  are given for a model (:func:`resolve_sglang`).
* :mod:`kvbudget.models.weights`: a checkpoint's weight bytes
  (:func:`weight_bytes`: exact from its safetensors index or headers, else an
  estimate from the config's parameter count).

SGLang's reading of a model (``resolve_sglang``, ``sglang_hybrid_swa``) is
:mod:`kvbudget.sglang`. Nothing here imports torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvbudget._moved import moved
from kvbudget.models.gpus import GpuSpec, UnknownGpuError, get_gpu, list_gpus
from kvbudget.models.hf import ConfigError, PathOrDict, geometry_kwargs_from_hf_config, load_hf_config
from kvbudget.models.hf_draft import draft_kwargs_from_hf_config
from kvbudget.models.hybrid_state import (HybridStateModel, UnknownHybridStateModelError, get_hybrid_state_model,
                                          list_hybrid_state_models)
from kvbudget.models.presets import Preset, UnknownPresetError, drafts_for, get_preset, list_presets
from kvbudget.models.published import (PublishedModel, UnknownPublishedModelError, get_published_model,
                                       list_published_models)
from kvbudget.models.weights import WeightEstimate, weight_bytes

if TYPE_CHECKING:
    from kvbudget.sglang.hybrid import SGLangHybrid, sglang_hybrid_swa
    from kvbudget.sglang.model import SGLangModel, resolve_sglang

#: SGLang's model resolution moved to :mod:`kvbudget.sglang` (these names work until kvbudget 0.3).
__getattr__ = moved(__name__, {"SGLangHybrid": "kvbudget.sglang.hybrid", "sglang_hybrid_swa": "kvbudget.sglang.hybrid",
                               "SGLangModel": "kvbudget.sglang.model", "resolve_sglang": "kvbudget.sglang.model"})


def find_bundled_model(name: str) -> HybridStateModel | None:
    """The bundled released config called ``name`` (its name or HF id, any case): a hybrid-state
    model's, else a published model's; None when neither table has it."""
    from kvbudget.models.hybrid_state import find_hybrid_state_model
    from kvbudget.models.published import find_published_model

    return find_hybrid_state_model(name) or find_published_model(name)


def geometry_kwargs_for(path_or_dict: PathOrDict, engine: str = "sglang") -> dict[str, Any]:
    """``kvbudget.ModelGeometry`` keyword arguments for a HF config, read as ``engine`` does.

    ``"sglang"``: the pools SGLang 0.5.23 builds (:func:`resolve_sglang`; a model
    SGLang plans with one Default pool is that many full-attention layers).
    ``"hf"``: the config's own layer kinds (:func:`geometry_kwargs_from_hf_config`),
    which is what SGLang plans only with hybrid SWA memory forced on, a what-if.

    Raises:
        ConfigError: the config cannot be read so, or ``engine`` is neither.
    """
    if engine == "sglang":
        from kvbudget.sglang.model import resolve_sglang

        return resolve_sglang(path_or_dict).geometry_kwargs()
    if engine == "hf":
        return geometry_kwargs_from_hf_config(path_or_dict)
    raise ConfigError(f"engine={engine!r}: expected 'sglang' or 'hf'")


__all__ = [
    "ConfigError",
    "GpuSpec",
    "HybridStateModel",
    "Preset",
    "PublishedModel",
    "UnknownGpuError",
    "UnknownHybridStateModelError",
    "UnknownPresetError",
    "UnknownPublishedModelError",
    "WeightEstimate",
    "draft_kwargs_from_hf_config",
    "drafts_for",
    "find_bundled_model",
    "geometry_kwargs_for",
    "geometry_kwargs_from_hf_config",
    "get_gpu",
    "get_hybrid_state_model",
    "get_preset",
    "get_published_model",
    "list_gpus",
    "list_hybrid_state_models",
    "list_presets",
    "list_published_models",
    "load_hf_config",
    "weight_bytes",
]
