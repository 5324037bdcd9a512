"""SGLang 0.5.23's unified memory pool of a hybrid-state model (``--enable-unified-memory``), run
from the verified wheel on torch's meta device: the byte budget ``config_from_budget`` floors, and
``init_unified_mamba_pools`` (or, for a model that is also hybrid-SWA, the tri-pool's
``init_unified_mamba_swa_pools``) up to the request pool it builds over its ``UnifiedKVPool`` (the
buffer's bytes, its sub-pools' entries and slots, and SGLang's checks on them, in its order).

Lifted unchanged (:class:`~oracle_kit.lift.Source`): ``mem_cache/layout/token_major.py``'s
constants, entry layouts and view builders;
from ``mem_cache/unified_memory_pool.py`` ``GB``, ``_prod``, ``_check_row_alignment``,
``_store_dtype_for``, the sub-pool specs (``SubPoolSpec``, ``MHASubPoolSpec``, ``MLASubPoolSpec``,
``MambaSubPoolSpec``), ``_assert_physical_id_bound``, ``_reserved_floor_bytes``, ``UnifiedKVPool``,
``_check_bs1_feasibility_floor``, ``init_unified_mamba_pools`` and ``init_unified_mamba_swa_pools``; from
``mem_cache/kv_cache_configurator.py`` ``KVCacheConfigurator.config_from_budget``; from ``model_executor/pool_configurator.py``
``MemoryPoolConfig``.

A draft's placement and regions are SGLang's own (:mod:`.fused_draft` lifts
``layout/fused_draft.py``; :attr:`UnifiedMambaOracle.decision` runs the configurator's decision),
and with speculative draft tokens ``UnifiedMambaPool`` (lifted) allocates the verify buffers beside
the buffer, on torch's meta device, with the arguments SGLang's factory hands the request pool.

Stubbed, strictly: the configurator ``config_from_budget`` asks for (its token count is the
caller's: the Default configurator's numbers are the parity tests'), ``_apply_token_constraints``
(no token cap, as a plan without ``--max-total-tokens``), the VMM owner (poisoned: no post-capture
backing), ``envs.SGLANG_DEBUG_POISON_POOL`` (false), ``TorchMemorySaverAdapter`` (a region that
does nothing), ``MambaPool`` (``UnifiedMambaPool``'s base: only its ``State`` / ``SpeculativeState``
records), the tri-pool's ``UnifiedSWAKVPool`` (its views over the buffer: a ``Poison``, never
read before the request pool), and ``UnifiedHybridReqToTokenPool``, which records the buffer and
the arguments it is handed and stops the factory there. torch is real: the buffer is a ``torch.empty`` on
``device="meta"`` and every view SGLang builds over it is torch's own.
"""

from __future__ import annotations

import traceback
import typing
from abc import ABC, abstractmethod
from contextlib import nullcontext
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import msgspec
import torch

from . import fused_draft
from ._plumbing import Builder, _EnvValue
from ._strict import Poison, StrictNamespace, StubError

_LIFTED = ("GB", "_prod", "_check_row_alignment", "_store_dtype_for", "SubPoolSpec", "MHASubPoolSpec",
           "MLASubPoolSpec", "MambaSubPoolSpec", "_assert_physical_id_bound", "_reserved_floor_bytes",
           "UnifiedKVPool", "UnifiedMambaPool", "_check_bs1_feasibility_floor", "init_unified_mamba_pools",
           "init_unified_mamba_swa_pools")  # fmt: skip
_TOKEN_MAJOR = ("ENTRY_ALIGN_BYTES", "ROW_ALIGN_BYTES", "_prod", "_contiguous_strides", "align_entry_bytes",
                "align_part_offset", "DensePart", "DenseEntryLayout", "build_dense_views", "mamba_entry_bytes",
                "build_mamba_entry_views")  # fmt: skip


class _Saver:
    """``TorchMemorySaverAdapter.create(enable=...)``: its region does nothing."""

    def region(self, tag: str) -> Any:
        return nullcontext()


class _Reached(Exception):
    """The factory built its buffer and asked for the request pool over it."""

    def __init__(self, buffer: Any, kwargs: dict[str, Any]) -> None:
        super().__init__("UnifiedHybridReqToTokenPool")
        self.buffer, self.kwargs = buffer, kwargs


def _request_pool(*, unified_buffer: Any, **kwargs: Any) -> Any:
    raise _Reached(unified_buffer, kwargs)


class _Record:
    """``MambaPool.State`` / ``SpeculativeState``: the tensors it is built with."""

    def __init__(self, **tensors: Any) -> None:
        vars(self).update(tensors)


class _MambaPool:
    """``MambaPool``, ``UnifiedMambaPool``'s base: only the records its ``__init__`` builds."""

    State = _Record
    SpeculativeState = _Record


class _Configurator:
    """``create_memory_pool_configurator(kvc)``: its ``calculate_pool_sizes`` gives SGLang's
    ``MemoryPoolConfig`` of the caller's count."""

    def __init__(self, config: type, tokens: int) -> None:
        self.config, self.tokens = config, tokens

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> Any:
        return self.config(max_total_num_tokens=self.tokens)


class UnifiedMambaOracle:
    """:meth:`run`: SGLang's unified buffer for one case, or its refusal."""

    def __init__(self, b: Builder) -> None:
        self.b = b
        tm = b.namespace("mem_cache.layout.token_major", msgspec=msgspec, torch=torch, List=typing.List,
                         Optional=typing.Optional, Sequence=typing.Sequence, Tuple=typing.Tuple)  # fmt: skip
        b.source("mem_cache/layout/token_major.py").lift(tm, *_TOKEN_MAJOR)
        b.provide("mem_cache.allocator.unified_mamba",
                  {"UnifiedMambaTokenToKVPoolAllocator": Poison("UnifiedMambaTokenToKVPoolAllocator")})  # fmt: skip
        b.provide("mem_cache.allocator.unified_hybrid_swa",
                  {"UnifiedMambaSWATokenToKVPoolAllocator": Poison("UnifiedMambaSWATokenToKVPoolAllocator")})  # fmt: skip
        fd = fused_draft.lift(b, tm)
        draft = {n: fd[n] for n in ("DraftRegion", "DenseDraftRegion", "DraftStateRegion", "FusedDraftPlacement")}
        ns = b.namespace(
            "mem_cache.unified_memory_pool", torch=torch, dataclass=dataclass, ABC=ABC, abstractmethod=abstractmethod,
            ClassVar=typing.ClassVar, Dict=typing.Dict, List=typing.List, Optional=typing.Optional,
            Tuple=typing.Tuple, logger=StrictNamespace("logger", info=lambda *a, **k: None),
            GPU_MEMORY_TYPE_KV_CACHE="kv_cache", KvVmmBufferOwner=Poison("KvVmmBufferOwner (post-capture backing)"),
            KvBufferDesc=Poison("KvBufferDesc"), MambaPool=_MambaPool,
            envs=StrictNamespace("envs", SGLANG_DEBUG_POISON_POOL=_EnvValue(False)),
            TorchMemorySaverAdapter=StrictNamespace("TorchMemorySaverAdapter", create=lambda enable: _Saver()),
            UnifiedHybridReqToTokenPool=_request_pool,
            UnifiedSWAKVPool=lambda **kw: Poison("UnifiedSWAKVPool (the tri-pool's KV views)"),
            **draft, **{k: tm[k] for k in ("ROW_ALIGN_BYTES", "DenseEntryLayout", "DensePart", "align_entry_bytes",
                                           "align_part_offset", "build_dense_views", "build_mamba_entry_views")},
        )  # fmt: skip
        b.source("mem_cache/unified_memory_pool.py").lift(ns, *_LIFTED)
        self.factory = ns["init_unified_mamba_pools"]
        self.tri_factory = ns["init_unified_mamba_swa_pools"]
        self.verify_pool = ns["UnifiedMambaPool"]
        self.fused = fused_draft.FusedDraftOracle(fd, ns)
        self.decision = fused_draft.DecisionOracle(b, fd, ns)
        self._configurator: _Configurator | None = None
        kvc = b.namespace("mem_cache.kv_cache_configurator", get_memory=b.getters["memory"],
                          get_schedule=b.getters["schedule"])  # fmt: skip
        pc = b.namespace("model_executor.pool_configurator", dataclass=dataclass, Optional=typing.Optional)
        b.source("model_executor/pool_configurator.py").lift(pc, "MemoryPoolConfig")
        self.memory_pool_config = pc["MemoryPoolConfig"]
        b.provide("model_executor.pool_configurator", {"create_memory_pool_configurator": self._create})
        self.config_from_budget = b.source("mem_cache/kv_cache_configurator.py").lift_method(
            kvc, "KVCacheConfigurator", "config_from_budget")

    def _create(self, kvc: Any) -> _Configurator:
        if self._configurator is None:
            raise StubError("sglang_oracle.unified_mamba: create_memory_pool_configurator outside run()")
        return self._configurator

    def run(self, *, budget_bytes: int, tokens: int, page_size: int, kv_dtype: torch.dtype, full: dict[str, Any],
            params: Any, mamba_layers: list[int], full_layers: list[int], max_mamba_cache_size: int,
            fused: Any = None, draft_tokens: int | None = None, max_num_reqs: int = 1) -> dict[str, Any]:  # fmt: skip
        """SGLang's outcome: ``unified_total_bytes`` (``config_from_budget``'s floor of
        ``budget_bytes``), then ``total_bytes`` and ``max_slots`` (by sub-pool) of the buffer, or
        ``error`` ``(kind, message)``. ``full``: ``head_num``, ``head_dim``, ``v_head_dim`` (MHA) or
        ``kv_lora_rank`` and ``qk_rope_head_dim`` (MLA). ``fused``: the draft's placement; with
        ``draft_tokens`` also ``verify``, the bytes of the verify buffers ``UnifiedMambaPool``
        allocates for ``max_num_reqs`` requests (by kind)."""

        def build(config: Any) -> None:
            mla = "kv_lora_rank" in full
            self.factory(
                device="meta", kv_cache_dtype=kv_dtype, page_size=page_size, start_layer=0,
                end_layer=max([*mamba_layers, *full_layers, 0]) + 1, is_draft_worker=False, use_mla_backend=mla,
                head_num=full.get("head_num", 0), head_dim=full.get("head_dim", 0), v_head_dim=full.get("v_head_dim"),
                kv_lora_rank=full.get("kv_lora_rank"), qk_rope_head_dim=full.get("qk_rope_head_dim"),
                mamba_layer_ids=mamba_layers, full_attention_layer_ids=full_layers, mamba2_cache_params=params,
                model_context_len=4096, extra_max_context_len=4, max_total_num_tokens=tokens,
                max_mamba_cache_size=max_mamba_cache_size, max_num_reqs=max_num_reqs, enable_memory_saver=False,
                enable_mamba_extra_buffer=False, enable_mamba_extra_buffer_lazy=False, fused_draft=fused,
                speculative_num_draft_tokens=draft_tokens, disable_overlap_schedule=False, need_sort=False,
                unified_total_bytes=config.unified_total_bytes,
            )  # fmt: skip

        def reached(r: _Reached, out: dict[str, Any]) -> None:
            if draft_tokens is not None:  # UnifiedHybridReqToTokenPool._init_mamba_pool's pool
                k = r.kwargs
                pool = self.verify_pool(unified_buffer=r.buffer, sub_pool_name=k["mamba_sub_pool_name"],
                                        spec_state_size=k["mamba_spec_state_size"],
                                        mamba_layer_ids=k["mamba_layer_ids"], enable_memory_saver=False,
                                        speculative_num_draft_tokens=k["speculative_num_draft_tokens"])  # fmt: skip
                cache = pool.mamba_cache
                conv = sum(t.nbytes for t in cache.intermediate_conv_window)
                out["verify"] = {"intermediate_ssm": cache.intermediate_ssm.nbytes, "intermediate_conv_window": conv}

        return self._outcome(budget_bytes, tokens, page_size, build, reached)

    def run_tri(self, *, budget_bytes: int, tokens: tuple[int, int], page_size: int, kv_dtype: torch.dtype,
                full: dict[str, Any], swa: dict[str, Any], params: Any, layers: dict[str, list[int]],
                max_mamba_cache_size: int, sliding_window_size: int | None,
                model_context_len: int) -> dict[str, Any]:  # fmt: skip
        """SGLang's tri-pool outcome (``init_unified_mamba_swa_pools``), as :meth:`run` gives the
        two-pool one. ``tokens``: the full and SWA labels; ``full`` and ``swa``: each side's
        ``head_num``, ``head_dim`` and ``v_head_dim``; ``layers``: the stage's ``mamba``, ``full``
        and ``swa`` layer ids."""

        def build(config: Any) -> None:
            ids = [*layers["mamba"], *layers["full"], *layers["swa"], 0]
            self.tri_factory(
                device="meta", kv_cache_dtype=kv_dtype, head_num=full["head_num"], head_dim=full["head_dim"],
                v_head_dim=full["v_head_dim"], swa_head_num=swa["head_num"], swa_head_dim=swa["head_dim"],
                swa_v_head_dim=swa["v_head_dim"], page_size=page_size, start_layer=0, end_layer=max(ids) + 1,
                swa_attention_layer_ids=layers["swa"], full_attention_layer_ids=layers["full"],
                mamba_layer_ids=layers["mamba"], mamba2_cache_params=params, full_max_total_num_tokens=tokens[0],
                swa_max_total_num_tokens=tokens[1], max_mamba_cache_size=max_mamba_cache_size,
                model_context_len=model_context_len, extra_max_context_len=4, max_num_reqs=1,
                enable_memory_saver=False, enable_mamba_extra_buffer=False, enable_mamba_extra_buffer_lazy=False,
                disable_overlap_schedule=False, need_sort=False, unified_total_bytes=config.unified_total_bytes,
                sliding_window_size=sliding_window_size, fused_draft=None,
            )  # fmt: skip

        return self._outcome(budget_bytes, tokens[0], page_size, build, lambda r, out: None)

    def _outcome(self, budget_bytes: int, tokens: int, page_size: int, build: Callable[[Any], None],
                 reached: Callable[[_Reached, dict[str, Any]], None]) -> dict[str, Any]:  # fmt: skip
        """``config_from_budget`` on ``budget_bytes`` (the configurator's count ``tokens``), then
        ``build`` the factory on its config up to the request pool (``reached`` adds to the outcome
        there), or SGLang's refusal."""
        self._configurator = _Configurator(self.memory_pool_config, tokens)
        self.b.active.ctx = StrictNamespace(
            "runtime context", memory=StrictNamespace("get_memory()", enable_unified_memory=True),
            schedule=StrictNamespace("get_schedule()", page_size=page_size))  # fmt: skip
        kvc = StrictNamespace("KVCacheConfigurator", _apply_token_constraints=lambda t: t)
        out: dict[str, Any] = {"error": None}
        try:
            config = self.config_from_budget(kvc, budget_bytes)
            out["unified_total_bytes"] = config.unified_total_bytes
            build(config)
            raise StubError("the unified factory returned without building its request pool")
        except _Reached as r:
            out["total_bytes"] = r.buffer.total_bytes
            out["max_slots"] = dict(r.buffer._max_slots)
            reached(r, out)
        except StubError:
            raise
        except (RuntimeError, AssertionError, ValueError) as e:
            frames = traceback.extract_tb(e.__traceback__)
            own = bool(frames) and frames[-1].filename.startswith(str(self.b.root)) and (
                (frames[-1].line or "").lstrip().startswith("raise"))
            # SGLang's own RuntimeErrors say the memory is short; torch's (a view SGLang asks for) refuse a layout.
            out["error"] = ("memory" if own and isinstance(e, RuntimeError) else "invalid", str(e))
        finally:
            self.b.active.ctx = None
            self._configurator = None
        return out
