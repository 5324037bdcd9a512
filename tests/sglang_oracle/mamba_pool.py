"""SGLang 0.5.23's state pool allocation (``MambaPool``), run from the verified wheel on torch's
meta device: the tensors SGLang allocates for a state budget's slots.

Lifted unchanged from ``mem_cache/memory_pool.py`` (:class:`~oracle_kit.lift.Source`):
``GB``, ``conv_window_dedup_enabled``, ``get_tensor_size_bytes`` and the class ``MambaPool`` with
the members ``__init__`` runs (its ``State`` / ``SpeculativeState`` dataclasses,
``conv_window_axis``, ``_detect_conv_window_axis``, ``_allocate_deduplicated_conv_window``, and
the fused-slot warmup, which returns at once off CUDA). The cache params are the state oracle's
(``configs/mamba_utils.py`` executed whole, through each config's ``mamba2_cache_params``).

Stubbed, strictly: the platform flags (CUDA: ``_is_npu``, ``_is_cpu``, ``_cpu_has_amx_support``
false), ``envs.SGLANG_DEBUG_MEMORY_POOL`` (false), ``TorchMemorySaverAdapter`` (a region that
does nothing), ``maybe_init_custom_mem_pool`` (no custom pool), the envelope layout's helpers
(poisoned: kvbudget plans the standard layout), and a silent logger. torch is real: every
``torch.zeros`` lands on ``device="meta"``, so the shapes and dtypes are SGLang's own.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from contextlib import nullcontext
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

import numpy
import torch

from ._plumbing import PREFIX, Builder, _EnvValue
from ._strict import Poison, StrictNamespace

_LOG = logging.getLogger(f"{PREFIX}.mamba_pool")
_MEMBERS = ("conv_window_axis", "_slot_siblings", "State", "SpeculativeState", "_detect_conv_window_axis",
            "_allocate_deduplicated_conv_window", "__init__", "_conv_fuse_ok", "_should_fuse_slot_ops",
            "_warmup_fused_copy_slot_kernel")  # fmt: skip
#: SGLang's attribute (or ``mamba_cache`` field) -> kvbudget's tensor kind.
KINDS = {"temporal": "temporal_state", "intermediate_ssm": "intermediate_ssm", "replayssm_d": "replay_d",
         "replayssm_k": "replay_k", "replayssm_g": "replay_g", "replayssm_rawv": "replay_raw_v",
         "replayssm_rawk": "replay_raw_k", "replayssm_beta": "replay_beta",
         "replayssm_spec_write_pos": "replay_write_pos", "replayssm_cache_base": "replay_cache_base",
         "replayssm_is_flush": "replay_is_flush"}  # fmt: skip


class _Saver:
    """``TorchMemorySaverAdapter.create(enable=...)``: its region does nothing."""

    def region(self, tag: str) -> Any:
        return nullcontext()


def _shape(t: torch.Tensor) -> tuple[tuple[int, ...], str]:
    return tuple(t.shape), str(t.dtype).removeprefix("torch.")


class MambaPoolOracle:
    """``MambaPool(...)`` on meta: :meth:`tensors` of one allocation."""

    def __init__(self, b: Builder) -> None:
        ns = b.namespace(
            "mem_cache.memory_pool", torch=torch, dataclass=dataclass, fields=fields, dataclasses=dataclasses,
            List=typing.List, Tuple=typing.Tuple, Optional=typing.Optional, nullcontext=nullcontext,
            cached_property=cached_property, _is_npu=False, _is_cpu=False, _cpu_has_amx_support=False,
            logger=_LOG, GPU_MEMORY_TYPE_KV_CACHE="kv_cache", np=numpy, Union=typing.Union,
            envs=StrictNamespace("envs", SGLANG_DEBUG_MEMORY_POOL=_EnvValue(False)),
            TorchMemorySaverAdapter=StrictNamespace("TorchMemorySaverAdapter", create=lambda enable: _Saver()),
            maybe_init_custom_mem_pool=lambda device: (False, None, None),
            mamba_entry_bytes=Poison("mamba_entry_bytes (envelope layout)"),
            build_mamba_entry_views=Poison("build_mamba_entry_views (envelope layout)"),
        )  # fmt: skip
        src = b.source("mem_cache/memory_pool.py")
        src.lift(ns, "GB", "conv_window_dedup_enabled", "get_tensor_size_bytes")
        self.cls = src.lift_class(ns, "MambaPool", _MEMBERS, bases=())

    def tensors(self, params: Any, *, size: int, spec_state_size: int, layers: int, draft_tokens: int | None,
                topk: int | None, replay: bool, replay_len: int) -> dict[str, list[tuple[tuple[int, ...], str]]]:  # fmt: skip
        """SGLang's tensors, by kvbudget's kind: ``conv_state`` and ``intermediate_conv_window``
        list one ``(shape, dtype)`` per conv shape (the physical windows), the others one each."""
        pool = self.cls(size=size, spec_state_size=spec_state_size, cache_params=params,
                        mamba_layer_ids=list(range(layers)), device="meta", speculative_num_draft_tokens=draft_tokens,
                        speculative_eagle_topk=topk, enable_linear_replayssm=False,
                        linear_replayssm_cache_len=replay_len, envelope_layout=False,
                        enable_linear_replayssm_spec=replay)  # fmt: skip
        cache = pool.mamba_cache
        out = {"conv_state": [_shape(t) for t in cache.conv]}
        if draft_tokens is not None:
            out["intermediate_conv_window"] = [_shape(t) for t in pool._intermediate_conv_window_phys]
        found = {**{f.name: getattr(cache, f.name) for f in fields(cache)},
                 **{k: getattr(pool, k) for k in ("replayssm_spec_write_pos", "replayssm_cache_base",
                                                  "replayssm_is_flush", "replayssm_write_pos")}}  # fmt: skip
        if found.pop("replayssm_write_pos") is not None:
            raise AssertionError("the decode ReplaySSM ring is not part of kvbudget's cases")
        for name, t in found.items():
            if name in KINDS and t is not None:
                out[KINDS[name]] = [_shape(t)]
        return out
