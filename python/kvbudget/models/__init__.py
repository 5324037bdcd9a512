"""Real models and GPUs: Hugging Face config parsing and named presets.

* :mod:`kvbudget.models.hf`: ``config.json`` -> ``ModelGeometry`` /
  ``DraftGeometry`` keyword arguments.
* :mod:`kvbudget.models.presets`: every model of the bundled model table.
* :mod:`kvbudget.models.gpus`: vendor-stated GPU memory.
* :mod:`kvbudget.models.sglang_hybrid`: whether SGLang gives a model separate
  full and SWA pools (its architecture list), and why.

Nothing here imports torch.
"""

from __future__ import annotations

from kvbudget.models.gpus import GpuSpec, UnknownGpuError, get_gpu, list_gpus
from kvbudget.models.hf import (
    ConfigError,
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

__all__ = [
    "ConfigError",
    "GpuSpec",
    "Preset",
    "SGLangHybrid",
    "UnknownGpuError",
    "UnknownPresetError",
    "draft_kwargs_from_hf_config",
    "drafts_for",
    "geometry_kwargs_from_hf_config",
    "get_gpu",
    "get_preset",
    "list_gpus",
    "list_presets",
    "load_hf_config",
    "sglang_hybrid_swa",
]
