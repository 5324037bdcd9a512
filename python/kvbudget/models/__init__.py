"""Real models and GPUs: Hugging Face config parsing and named presets.

* :mod:`kvbudget.models.hf`: ``config.json`` -> ``ModelGeometry`` /
  ``DraftGeometry`` keyword arguments.
* :mod:`kvbudget.models.presets`: every model of the bundled model table.
* :mod:`kvbudget.models.gpus`: vendor-stated GPU memory.
* :mod:`kvbudget.models.sglang_hybrid`: whether SGLang gives a model separate
  full and SWA pools (its architecture list), and why.
* :mod:`kvbudget.models.sglang_model`: the geometry SGLang's pool configurators
  are given for a model (:func:`resolve_sglang`).
* :mod:`kvbudget.models.weights`: a checkpoint's weight bytes
  (:func:`weight_bytes`: exact from its safetensors index or headers, else an
  estimate from the config's parameter count).

Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from kvbudget.models.gpus import GpuSpec, UnknownGpuError, get_gpu, list_gpus
from kvbudget.models.hf import (
    ConfigError,
    PathOrDict,
    draft_kwargs_from_hf_config,
    geometry_kwargs_from_hf_config,
    load_hf_config,
)
from kvbudget.models.presets import (
    Preset,
    UnknownPresetError,
    drafts_for,
    get_preset,
    list_presets,
)
from kvbudget.models.sglang_hybrid import SGLangHybrid, sglang_hybrid_swa
from kvbudget.models.sglang_model import SGLangModel, resolve_sglang
from kvbudget.models.weights import WeightEstimate, weight_bytes



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
        return resolve_sglang(path_or_dict).geometry_kwargs()
    if engine == "hf":
        return geometry_kwargs_from_hf_config(path_or_dict)
    raise ConfigError(f"engine={engine!r}: expected 'sglang' or 'hf'")


__all__ = [
    "ConfigError",
    "GpuSpec",
    "Preset",
    "SGLangHybrid",
    "SGLangModel",
    "UnknownGpuError",
    "UnknownPresetError",
    "WeightEstimate",
    "draft_kwargs_from_hf_config",
    "drafts_for",
    "geometry_kwargs_for",
    "geometry_kwargs_from_hf_config",
    "get_gpu",
    "get_preset",
    "list_gpus",
    "list_presets",
    "load_hf_config",
    "resolve_sglang",
    "sglang_hybrid_swa",
    "weight_bytes",
]
