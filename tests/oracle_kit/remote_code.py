"""The stand-in for a checkpoint's own config class (``--trust-remote-code``).

A remote-code checkpoint (InternLM2, Baichuan, ...) names its config class in ``config.json``'s
``auto_map``; both engines load it with that class, from the checkpoint's ``configuration_*.py``,
which is not here. :func:`register` registers, for such a file whose ``model_type`` transformers
5.19.0 does not know, a ``PretrainedConfig`` subclass of that type with transformers'
``AutoConfig``: loading the file then gives an instance whose attributes are the file's keys, which
is what the remote class's instance holds for every key the file holds (``save_pretrained`` writes
them all). Its defaults for keys the file leaves out, its ``attribute_map`` and any derived
attribute are not known, so ``tests/remote_code_cases.py`` writes every key the engines read; where
the class turns a list of nested dicts into objects the engines read by attribute (DeciLM's
``block_configs``), the stand-in does too. A file without ``auto_map`` is left alone: transformers
refuses its unknown type, as the engines do.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import transformers
from transformers import AutoConfig, PretrainedConfig

__all__ = ["register", "stand_in"]


#: model type -> the stand-in registered for it.
_STANDS_IN: dict[str, type[PretrainedConfig]] = {}
#: Model type -> the key whose list entries its checkpoint's class turns into objects read by
#: attribute (DeciLM's ``block_configs``: ``block.attention.no_op``); the stand-in does the same.
_OBJECT_LISTS = {"nemotron-nas": "block_configs"}


def _objects(value: Any) -> Any:
    return SimpleNamespace(**{k: _objects(v) for k, v in value.items()}) if isinstance(value, Mapping) else value


def _mappings(value: Any) -> Any:
    return {k: _mappings(v) for k, v in vars(value).items()} if isinstance(value, SimpleNamespace) else value


def _class_body(model_type: str) -> dict[str, Any]:
    key = _OBJECT_LISTS.get(model_type)

    def __init__(self: PretrainedConfig, **kwargs: Any) -> None:  # noqa: N807
        entries = kwargs.pop(key, None) if key else None
        PretrainedConfig.__init__(self, **kwargs)
        for name, value in kwargs.items():  # the remote class sets each argument: `self.rope_scaling = ...`
            if name not in self.__dict__:  # goes through transformers 5.19.0's setter, into rope_parameters
                setattr(self, name, value)
        if key:
            setattr(self, key, None if entries is None else [_objects(e) for e in entries])

    def to_dict(self: PretrainedConfig) -> dict[str, Any]:
        out = PretrainedConfig.to_dict(self)
        if out.get(key) is not None:
            out[key] = [_mappings(e) for e in out[key]]
        return out

    body: dict[str, Any] = {"model_type": model_type, "__init__": __init__}
    return {**body, "to_dict": to_dict} if key else body


def register(saved: Mapping[str, Any]) -> type[PretrainedConfig] | None:
    """The stand-in registered for ``saved``'s ``model_type`` when the file names remote config code
    (``auto_map["AutoConfig"]``) and transformers has no class of its own for the type; else None."""
    model_type, auto_map = saved.get("model_type"), saved.get("auto_map")
    if not isinstance(model_type, str) or not isinstance(auto_map, Mapping) or "AutoConfig" not in auto_map:
        return None
    if model_type in transformers.CONFIG_MAPPING:  # transformers' own class, an engine's, or ours
        known = transformers.CONFIG_MAPPING[model_type]
        return known if known is _STANDS_IN.get(model_type) else None
    cls = type(f"RemoteCodeConfig_{model_type.replace('-', '_')}", (PretrainedConfig,), _class_body(model_type))
    AutoConfig.register(model_type, cls)
    _STANDS_IN[model_type] = cls
    return cls


def stand_in(model_type: str) -> type[PretrainedConfig] | None:
    """The stand-in :func:`register` registered for ``model_type``, if any."""
    return _STANDS_IN.get(model_type)
