"""SGLang 0.5.23's launch checks of ``--enable-unified-memory``, with a speculative draft or
without, run from the verified wheel in the order ``arg_groups/pipeline.py`` runs them:
``arg_groups/kv_cache_hook.py``'s ``handle_page_major_kv_layout`` (the unified pool implies the
page-major layout: its allow-list of attention backends by model) then
``handle_unified_memory_pool`` (the PD block, the algorithm list, ``--speculative-eagle-topk``,
EAGLE's target and draft backend sets, DFLASH's and DSPARK's ``_assert_spec_verify_backends``,
then ``_validate_unified_memory_dcp`` under DCP) on a server-args stand-in.

Lifted unchanged (:class:`~oracle_kit.lift.Source`): ``ServerArgs._unified_memory_pd_transfer_backends``
(``server_args.py``, called unbound: it reads nothing); from ``arg_groups/kv_cache_hook.py``
``_SPEC_VERIFY_AUDITED_BACKENDS``, ``_SPEC_MHA_AUDITED_BACKENDS``,
``_assert_spec_verify_backends``, ``handle_unified_memory_pool``,
``_validate_unified_memory_dcp``, ``ASYMMETRIC_KV_BACKENDS`` and ``handle_page_major_kv_layout``;
from ``arg_groups/model_override_base.py`` ``attention_backends_of``; ``ModelConfig.has_asymmetric_kv``
(``configs/model_config.py``, a property read off the case's head dims).

Stubbed, strictly: ``resolving_view`` / ``resolved_view`` (the stand-in itself: a
:class:`~._strict.StrictNamespace` of the flags the checks read, a colocated server without
two-batch overlap, LMCache, the external linker, host-pool retraction, HiCache, HiSparse or decode
KV offload, its cuda-graph config unset, the page-major layout declared, no linear-attention or
Mamba backend given), ``declare_resolution`` (asserts the page-major declaration the stand-in
already holds), ``model_config_of`` (the target's config: hybrid-SWA or not, its
``has_asymmetric_kv``), ``mambaish_config`` (a config: read only by EAGLE's check, whose targets
here are hybrid-state), ``use_mla_backend`` (the case's answer), ``envs`` (lazy compaction on:
``SGLANG_DISABLE_LAZY_COMPACTION`` unset); the cuda-graph ``Backend`` is poisoned (read only with
a cuda-graph config).
"""

from __future__ import annotations

import typing
from typing import Any

from ._plumbing import Builder
from ._strict import Poison, StrictNamespace, StubError

_HOOK = ("_SPEC_VERIFY_AUDITED_BACKENDS", "_SPEC_MHA_AUDITED_BACKENDS", "_assert_spec_verify_backends",
         "handle_unified_memory_pool", "_validate_unified_memory_dcp", "ASYMMETRIC_KV_BACKENDS",
         "handle_page_major_kv_layout")  # fmt: skip


class LaunchOracle:
    """:meth:`check`: SGLang's ``handle_page_major_kv_layout`` then ``handle_unified_memory_pool``
    on one case."""

    def __init__(self, b: Builder) -> None:
        self._mla: bool | None = None
        self._model: Any = None
        base = b.namespace("arg_groups.model_override_base", Any=typing.Any)
        b.source("arg_groups/model_override_base.py").lift(base, "attention_backends_of")
        ns = b.namespace(
            "arg_groups.kv_cache_hook", frozenset=frozenset, Any=typing.Any, Optional=typing.Optional,
            resolving_view=lambda server_args: server_args, resolved_view=lambda server_args: server_args,
            attention_backends_of=base["attention_backends_of"], model_config_of=self._model_config,
            mambaish_config=lambda mc: StrictNamespace("the target's mambaish config"),
            use_mla_backend=self._use_mla, declare_resolution=self._declare,
            envs=StrictNamespace("envs", SGLANG_DISABLE_LAZY_COMPACTION=StrictNamespace(
                "envs.SGLANG_DISABLE_LAZY_COMPACTION", get=lambda: False)),
            Backend=Poison("cuda_graph_config.Backend (a cuda-graph config only)"),
        )  # fmt: skip
        b.source("arg_groups/kv_cache_hook.py").lift(ns, *_HOOK)
        self._hooks = (ns["handle_page_major_kv_layout"], ns["handle_unified_memory_pool"])
        self._asymmetric = b.source("configs/model_config.py").lift_member(
            b.namespace("configs.model_config"), "ModelConfig", "has_asymmetric_kv").fget
        server = b.namespace("server_args")
        self._pd_backends = b.source("server_args.py").lift_method(server, "ServerArgs",
                                                                    "_unified_memory_pd_transfer_backends")

    def _use_mla(self, server_args: Any) -> bool:
        if self._mla is None:
            raise StubError("sglang_oracle.unified_launch: use_mla_backend outside check()")
        return self._mla

    def _model_config(self, server_args: Any) -> Any:
        if self._model is None:
            raise StubError("sglang_oracle.unified_launch: model_config_of outside check()")
        return self._model

    @staticmethod
    def _declare(server_args: Any, source: str, **fields: Any) -> None:
        if (source, fields) != ("_handle_page_major_kv_layout", {"enable_page_major_kv_layout": True}):
            raise StubError(f"sglang_oracle.unified_launch: declare_resolution{(source, fields)}")

    def check(self, *, algorithm: str | None, eagle_topk: int | None, backends: tuple[str, str], dcp: int,
              mla: bool, disagg: str = "null", transfer_backend: str = "mooncake", pp: int = 1,
              hybrid_swa: bool = False, kv_dims: tuple[int, int, int, int]) -> str | None:  # fmt: skip
        """SGLang's refusal (its assertion's message), or ``None``. ``algorithm``: SGLang's resolved
        name (``EAGLE`` for NEXTN); ``backends``: the resolved (prefill, decode) pair; ``disagg``,
        ``transfer_backend``, ``pp``: ``--disaggregation-mode``, ``--disaggregation-transfer-backend``
        and the pipeline size (read under PD only); ``hybrid_swa``: ``ModelConfig.is_hybrid_swa``;
        ``kv_dims``: the target's ``head_dim``, ``v_head_dim``, ``swa_head_dim``, ``swa_v_head_dim``
        as its ``ModelConfig`` resolves them."""
        pd = {} if disagg == "null" else dict(
            disaggregation_transfer_backend=transfer_backend, pp_size=pp, enable_hisparse=False,
            disaggregation_decode_enable_offload_kvcache=False,
            _unified_memory_pd_transfer_backends=lambda: self._pd_backends(None))  # fmt: skip
        args = StrictNamespace(
            "server_args", **pd, enable_unified_memory=True, disaggregation_mode=disagg, speculative_algorithm=algorithm,
            speculative_eagle_topk=eagle_topk, speculative_draft_attention_backend=None, dcp_size=dcp,
            attention_backend=None, prefill_attention_backend=backends[0], decode_attention_backend=backends[1],
            enable_two_batch_overlap=False, enable_lmcache=False, enable_unified_cache_external_linker=False,
            disaggregation_decode_retraction_backup=None, enable_hierarchical_cache=False, cuda_graph_config=None,
            enable_page_major_kv_layout=True, linear_attn_backend=None, linear_attn_decode_backend=None,
            linear_attn_prefill_backend=None, mamba_backend=None,
        )  # fmt: skip
        dims = dict(zip(("head_dim", "v_head_dim", "swa_head_dim", "swa_v_head_dim"), kv_dims))
        asymmetric = self._asymmetric(StrictNamespace("the target's ModelConfig (head dims)", **dims))
        self._mla = mla
        self._model = StrictNamespace("the target's ModelConfig", is_hybrid_swa=hybrid_swa,
                                      has_asymmetric_kv=asymmetric)  # fmt: skip
        try:
            for hook in self._hooks:
                hook(args)
        except StubError:
            raise
        except AssertionError as e:
            return str(e)
        finally:
            self._mla = self._model = None
        return None
