"""SGLang 0.5.23's fused-draft placement (``mem_cache/layout/fused_draft.py``), run from the verified
wheel: where a speculative draft's layers ride inside the target's unified sub-pools.

Lifted unchanged (:class:`~oracle_kit.lift.Source`), in file order: the layer kinds and their
nouns, the regions (``DenseDraftRegion``, ``DraftStateRegion``), the geometries, ``DraftLayerSet``,
``DraftKVProfile``, ``PlacementContext``, the host-kind registry (``HostKind``, ``DenseHostKind``,
``WindowHostKind``, ``StateHostKind``, ``register_host_kind``, ``host_for``, the three hosts
registered as SGLang registers them), ``RunnerLanes``, ``FusedDraftPlacement``,
``FusedDraftDecision``, ``_runner_layer_counts``, ``_kv_rows_declined``, ``_fold_refused`` and
``place_fused_draft``. Its two imports from ``layout/token_major.py`` (``ROW_ALIGN_BYTES``,
``DensePart``) are the ones :mod:`.unified_mamba` lifts. Nothing is stubbed: the code reads only
its arguments.

:meth:`FusedDraftOracle.place` answers in the form of kvbudget's
``kvbudget.sglang.fused_draft.place_fused_draft``: ``declined``, ``note``, ``regions`` (host ->
``lane_num``, ``entry_bytes`` and the host's fused ``entry``, from SGLang's sub-pool specs with the
region: :mod:`.unified_mamba`'s lifted ``MHASubPoolSpec`` / ``MambaSubPoolSpec``) and ``runners``.
"""

from __future__ import annotations

import math
import typing
from typing import Any

import msgspec
import torch

from ._plumbing import Builder
from ._strict import Poison, StrictNamespace, StubError

_LIFTED = ("LAYER_FULL", "LAYER_WINDOW", "LAYER_STATE", "_LAYER_KIND_NOUN", "DenseDraftRegion", "DraftKVGeometry",
           "DraftStateGeometry", "DraftStateRegion", "DraftRegion", "DraftLayerSet", "DraftKVProfile",
           "PlacementContext", "HostKind", "DenseHostKind", "HOST_KINDS", "host_for", "register_host_kind",
           "FULL_HOST", "WINDOW_RAIL_BACKENDS", "WindowHostKind", "SWA_HOST", "StateHostKind", "MAMBA_HOST",
           "RunnerLanes", "FusedDraftPlacement", "FusedDraftDecision", "_runner_layer_counts",
           "_kv_rows_declined", "_fold_refused", "place_fused_draft")  # fmt: skip

#: kvbudget's kind names -> SGLang's layer kinds.
KINDS = {"full": "full", "window": "window", "state": "state"}


def lift(b: Builder, token_major: dict[str, Any]) -> dict[str, Any]:
    """``layout/fused_draft.py``'s definitions (see the module doc), in a namespace of their own."""
    ns = b.namespace("mem_cache.layout.fused_draft", math=math, msgspec=msgspec, torch=torch, Any=typing.Any,
                     Dict=typing.Dict, List=typing.List, Mapping=typing.Mapping, Optional=typing.Optional,
                     Sequence=typing.Sequence, Tuple=typing.Tuple, Union=typing.Union,
                     ROW_ALIGN_BYTES=token_major["ROW_ALIGN_BYTES"], DensePart=token_major["DensePart"])  # fmt: skip
    b.source("mem_cache/layout/fused_draft.py").lift(ns, *_LIFTED)
    return ns


class FusedDraftOracle:
    """:meth:`place`: SGLang's ``place_fused_draft`` on one draft profile."""

    def __init__(self, fd: dict[str, Any], pool: dict[str, Any]) -> None:
        self.fd, self.pool = fd, pool

    def place(self, *, kinds: list[tuple[str, list[int], Any, int | None]], num_depths: int, num_runners: int,
              hosts: list[str], target_window: int | None, asymmetric_rows_ok: bool, draft_backends: list[str],
              store_dtype: torch.dtype, host_specs: dict[str, dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
        """``kinds``: ``(kind, ids, geometry, window)``, geometry ``(heads, head_dim, v_head_dim)`` or a
        state's ``dict(conv_state_shapes=..., conv_dtype=..., temporal_state_shape=..., temporal_dtype=...)``.
        ``host_specs``: per host the keyword arguments of its SGLang sub-pool spec (``MHASubPoolSpec``
        for ``full`` / ``swa``, ``MambaSubPoolSpec`` for ``mamba``), without ``draft_region``. An
        assertion SGLang raises is returned as ``{"error": message}``."""
        fd = self.fd
        sets = {}
        for kind, ids, geometry, window in kinds:
            if kind == "state":
                geo = fd["DraftStateGeometry"](**geometry)
            else:
                h, d, v = geometry
                geo = fd["DraftKVGeometry"](head_num=h, head_dim=d, v_head_dim=v)
            sets[KINDS[kind]] = fd["DraftLayerSet"](layer_ids=tuple(ids), geometry=geo, window=window)
        profile = fd["DraftKVProfile"](num_layers=max([len(i) for _, i, _, _ in kinds] + [1]), num_depths=num_depths,
                                       kinds=sets)  # fmt: skip
        ctx = fd["PlacementContext"](host_names=tuple(hosts), target_window=target_window,
                                     asymmetric_rows_ok=asymmetric_rows_ok,
                                     draft_backends=tuple(draft_backends))  # fmt: skip
        try:
            decision = fd["place_fused_draft"](profile=profile, num_runners=num_runners, ctx=ctx,
                                               store_dtype=store_dtype, kv_dtype=None)  # fmt: skip
        except AssertionError as e:  # SGLang's assertions on the placement
            return {"error": str(e)}
        out: dict[str, Any] = {"declined": decision.declined, "note": decision.note, "regions": {}, "runners": []}
        placement = decision.placement
        if placement is None:
            return out
        for host in placement.hosts():
            region = placement.region(host)
            one = {"lane_num": region.lane_num, "entry_bytes": region.entry_bytes()}
            if host in host_specs:
                cls = self.pool["MambaSubPoolSpec" if host == "mamba" else "MHASubPoolSpec"]
                grow = "up" if host != "full" else "down"
                spec = cls(name=host, grow_direction=grow, draft_region=region, **host_specs[host])
                one["entry"] = spec.entry_bytes()
            out["regions"][host] = one
        out["runners"] = [{h: (s, c) for h, (s, c) in r.ranges.items()} for r in placement.runners]
        return out


#: ``KVCacheConfigurator``'s methods that decide and price the fused draft, lifted onto a stand-in.
_KVC_MEMBERS = ("_unified_host_names", "_fused_draft_decision", "_draft_attention_backends",
                "_draft_backends_carry_v_head_dim", "fused_entry_bytes", "_mamba_host_spec", "_swa_host_spec",
                "_full_host_spec",
                "_fused_draft_for_mamba_factory", "_fused_draft_for_pool_factory")  # fmt: skip
_HOOK = ("_SPEC_VERIFY_AUDITED_BACKENDS", "_SPEC_MHA_AUDITED_BACKENDS", "TRANSLATED_MHA_RAILS",
         "ASYMMETRIC_KV_BACKENDS")


class _Log:
    """``logger``: its calls do nothing (the decision's boot-log lines)."""

    def info(self, *a: Any, **k: Any) -> None:
        pass

    warning = info


class DecisionOracle:
    """:meth:`decide`: SGLang's ``KVCacheConfigurator`` on a target of a unified Mamba pool with an
    EAGLE- or DFLASH-family draft: ``_fused_draft_for_mamba_factory`` (``_fused_draft_decision`` and
    its refusal of a draft that cannot fuse) and ``fused_entry_bytes("full")``, lifted from
    ``mem_cache/kv_cache_configurator.py`` onto a stand-in holding only those methods; the backend
    sets from ``arg_groups/kv_cache_hook.py``; ``draft_kv_profile`` and its helpers from
    ``layout/fused_draft.py``; for a DFLASH-family draft ``resolve_draft_worker_attention_backend``
    (``speculative/draft_worker_common.py``, over ``arg_groups/choices.py``'s
    ``DRAFT_ATTENTION_BACKEND_CHOICES``) and ``configure_kv_cache_dtype`` /
    ``allow_target_draft_different_cache_dtype`` (``mem_cache/kv_cache_dtype.py``). Stubbed: the
    runtime-context getters (the case's values, strict), ``attention_backends()`` (the case's pair),
    ``mambaish_config`` (the draft is an MTP head of the state trunk: the trunk's config class,
    without ``mtp_local_layer_ids``), ``get_platform()`` (CUDA: not XPU), ``logger``, and the
    stand-in's ``draft_attn_tp_size`` (the attention TP: no attention DP or prefill CP, where
    ``resolve_draft_parallel_layout`` gives ``attn_tp_size``)."""

    def __init__(self, b: Builder, fd: dict[str, Any], pool: dict[str, Any]) -> None:
        self.b = b
        b.source("mem_cache/layout/fused_draft.py").lift(fd, "draft_swa_layer_ids", "draft_state_layer_ids",
                                                         "draft_kv_profile")  # fmt: skip
        hook = b.namespace("arg_groups.kv_cache_hook", frozenset=frozenset)
        b.source("arg_groups/kv_cache_hook.py").lift(hook, *_HOOK)
        self.hook = {k: hook[k] for k in _HOOK}
        b.provide("arg_groups.kv_cache_hook", {"ASYMMETRIC_KV_BACKENDS": hook["ASYMMETRIC_KV_BACKENDS"]})
        self._reached = False
        placed = {k: v for k, v in fd.items() if not k.startswith("__")}
        placed["place_fused_draft"] = self._placing(fd["place_fused_draft"])
        b.provide("mem_cache.layout.fused_draft", placed)
        self._dflash_family(b)
        b.provide("mem_cache.unified_memory_pool",
                  {k: pool[k] for k in ("_store_dtype_for", "MHASubPoolSpec", "MLASubPoolSpec", "MambaSubPoolSpec")})
        b.provide("configs.hybrid_arch", {"mambaish_config": self._mambaish})
        self._backends: tuple[str, ...] | None = None
        self.ns = b.namespace("mem_cache.kv_cache_configurator", torch=torch, Optional=typing.Optional,
                              TRANSLATED_MHA_RAILS=hook["TRANSLATED_MHA_RAILS"], attention_backends=self._attention,
                              get_spec=b.getters["spec"], get_parallel=b.getters["parallel"],
                              get_memory=b.getters["memory"], get_disagg=b.getters["disagg"],
                              get_model=b.getters["model"], logger=_Log())  # fmt: skip
        self.kvc = b.source("mem_cache/kv_cache_configurator.py").lift_class(self.ns, "KVCacheConfigurator",
                                                                              _KVC_MEMBERS, ())  # fmt: skip

    def _placing(self, place: Any) -> Any:
        """``place_fused_draft``, noting that the decision reached it."""

        def placing(**kwargs: Any) -> Any:
            self._reached = True
            return place(**kwargs)

        return placing

    def _dflash_family(self, b: Builder) -> None:
        """What a DFLASH-family decision imports: the draft worker's backend
        (``resolve_draft_worker_attention_backend``, over ``DRAFT_ATTENTION_BACKEND_CHOICES``; CUDA,
        not XPU) and the draft's KV dtype (``configure_kv_cache_dtype``,
        ``allow_target_draft_different_cache_dtype``; CUDA, not HIP)."""
        choices = b.namespace("arg_groups.choices")
        b.source("arg_groups/choices.py").lift(choices, "DRAFT_ATTENTION_BACKEND_CHOICES")
        worker = b.namespace("speculative.draft_worker_common", torch=torch, Optional=typing.Optional,
                             get_spec=b.getters["spec"], attention_backends=self._attention, logger=_Log(),
                             get_platform=lambda: StrictNamespace("get_platform()", is_xpu=False),
                             DRAFT_ATTENTION_BACKEND_CHOICES=choices["DRAFT_ATTENTION_BACKEND_CHOICES"])  # fmt: skip
        b.source("speculative/draft_worker_common.py").lift(worker, "resolve_draft_worker_attention_backend")
        b.provide("speculative.draft_worker_common",
                  {"resolve_draft_worker_attention_backend": worker["resolve_draft_worker_attention_backend"]})
        dtype = b.namespace("mem_cache.kv_cache_dtype", torch=torch, Optional=typing.Optional, _is_hip=False,
                            fp8_dtype=Poison("fp8_kernel.fp8_dtype (HIP)"), logger=_Log(),
                            current_platform=StrictNamespace("current_platform", is_cpu=lambda: False))  # fmt: skip
        names = ("TORCH_DTYPE_TO_KV_CACHE_STR", "allow_target_draft_different_cache_dtype", "configure_kv_cache_dtype")
        b.source("mem_cache/kv_cache_dtype.py").lift(dtype, *names)
        b.provide("mem_cache.kv_cache_dtype", {n: dtype[n] for n in names[1:]})

    def _attention(self) -> tuple[str, ...]:
        if self._backends is None:
            raise StubError("sglang_oracle.fused_draft: attention_backends() outside decide()")
        return self._backends

    @staticmethod
    def _mambaish(mc: Any) -> Any:
        return StrictNamespace("the draft's mambaish config (the trunk's class)")

    def decide(self, *, attention_arch: Any, spec_algorithm: Any, target_mc: Any, draft_mc: Any, draft_layers: int,
               kv_dtype: torch.dtype, tp: int, dcp: int, backends: tuple[str, ...], full_layers: list[int],
               num_layers: int, use_mla: bool, server_kv: str, draft_kv: str | None) -> dict[str, Any]:  # fmt: skip
        """``placement`` (SGLang's ``FusedDraftPlacement``; ``None`` for a DSPARK draft that cannot
        fuse, ``declined`` then its reason) and ``entry`` (``fused_entry_bytes("full")``), or ``error``
        ``("invalid", message)``; ``reached``: whether the decision got to ``place_fused_draft``.
        ``target_mc`` / ``draft_mc``: model configs carrying SGLang's ``get_num_kv_heads``
        (``draft_mc`` also ``attention_arch`` and ``dtype``); ``backends``: the (prefill, decode)
        pair; ``server_kv`` / ``draft_kv``: ``--kv-cache-dtype`` and
        ``--speculative-draft-kv-cache-dtype``."""
        self.ns["AttentionArch"] = attention_arch  # the module's import (configs/model_config.py's enum)
        kvc = self.kvc.__new__(self.kvc)
        vars(kvc).update(
            is_hybrid_swa=False, is_draft_worker=False, spec_algorithm=spec_algorithm, kv_cache_dtype=kv_dtype,
            use_mla_backend=use_mla, draft_attn_tp_size=tp, layer_info=StrictNamespace("layer_info", start_layer=0,
                                                                                        end_layer=num_layers),
            mambaish_config=StrictNamespace("mambaish_config", full_attention_layer_ids=full_layers),
            spec_aux_config=StrictNamespace("spec_aux_config", draft_kv_num_layers=draft_layers,
                                            draft_model_config=draft_mc),
            model_config=target_mc,
        )  # fmt: skip
        self._backends = backends
        self.b.active.ctx = StrictNamespace(
            "runtime context",
            memory=StrictNamespace("get_memory()", enable_unified_memory=True, enable_hierarchical_cache=False),
            spec=StrictNamespace("get_spec()", speculative_draft_attention_backend=None, speculative_num_steps=1,
                                 speculative_draft_kv_cache_dtype=draft_kv),
            parallel=StrictNamespace("get_parallel()", attn_dcp_size=dcp, attn_tp_size=tp),
            disagg=StrictNamespace("get_disagg()", disaggregation_decode_retraction_backup=None),
            model=StrictNamespace("get_model()", kv_cache_dtype=server_kv),
        )  # fmt: skip
        self._reached = False
        try:
            placement = kvc._fused_draft_for_mamba_factory()
            declined = None if placement is not None else kvc._fused_draft_decision().declined
            return {"error": None, "placement": placement, "entry": kvc.fused_entry_bytes("full"),
                    "declined": declined, "reached": self._reached}  # fmt: skip
        except StubError:
            raise
        except (AssertionError, ValueError) as e:
            return {"error": ("invalid", str(e)), "reached": self._reached}
        finally:
            self.b.active.ctx = None
            self._backends = None
