"""The stand-in for a checkpoint's own config class (``--trust-remote-code``).

A remote-code checkpoint (InternLM2, Baichuan, ...) names its config class in ``config.json``'s
``auto_map``; both engines load it with that class, from the checkpoint's ``configuration_*.py``,
which is not here. :func:`register` registers, for such a file whose ``model_type`` transformers
5.19.0 does not know, a ``PretrainedConfig`` subclass of that type with transformers' ``AutoConfig``:
loading the file then gives an instance whose attributes are the file's keys, which is what the
remote class's instance holds for every key the file holds (``save_pretrained`` writes them all).
Its defaults for keys the file leaves out, its ``attribute_map`` and any derived attribute are not
known, so ``tests/remote_code_cases.py`` writes every key the engines read. A file without
``auto_map`` is left alone: transformers refuses its unknown type, as the engines do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import transformers
from transformers import AutoConfig, PretrainedConfig

__all__ = ["register", "stand_in"]


#: model type -> the stand-in registered for it.
_STANDS_IN: dict[str, type[PretrainedConfig]] = {}


def register(saved: Mapping[str, Any]) -> type[PretrainedConfig] | None:
    """The stand-in registered for ``saved``'s ``model_type`` when the file names remote config code
    (``auto_map["AutoConfig"]``) and transformers has no class of its own for the type; else None."""
    model_type, auto_map = saved.get("model_type"), saved.get("auto_map")
    if not isinstance(model_type, str) or not isinstance(auto_map, Mapping) or "AutoConfig" not in auto_map:
        return None
    if model_type in transformers.CONFIG_MAPPING:  # transformers' own class, an engine's, or ours
        known = transformers.CONFIG_MAPPING[model_type]
        return known if known is _STANDS_IN.get(model_type) else None
    cls = type(f"RemoteCodeConfig_{model_type.replace('-', '_')}", (PretrainedConfig,), {"model_type": model_type})
    AutoConfig.register(model_type, cls)
    _STANDS_IN[model_type] = cls
    return cls


def stand_in(model_type: str) -> type[PretrainedConfig] | None:
    """The stand-in :func:`register` registered for ``model_type``, if any."""
    return _STANDS_IN.get(model_type)
