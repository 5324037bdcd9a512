"""SGLang 0.5.23's launch checks of ``--enable-unified-memory`` with a speculative draft, run from
the verified wheel: ``arg_groups/kv_cache_hook.py``'s ``handle_unified_memory_pool`` (the
algorithm list, ``--speculative-eagle-topk``, EAGLE's target and draft backend sets, DFLASH's and
DSPARK's ``_assert_spec_verify_backends``, then ``_validate_unified_memory_dcp`` under DCP) on a
server-args stand-in.

Lifted unchanged (:class:`~oracle_kit.lift.Source`): ``ServerArgs._unified_memory_pd_transfer_backends``
(``server_args.py``, called unbound: it reads nothing); from ``arg_groups/kv_cache_hook.py``
``_SPEC_VERIFY_AUDITED_BACKENDS``, ``_SPEC_MHA_AUDITED_BACKENDS``,
``_assert_spec_verify_backends``, ``handle_unified_memory_pool`` and
``_validate_unified_memory_dcp``; from
``arg_groups/model_override_base.py`` ``attention_backends_of``.

Stubbed, strictly: ``resolving_view`` / ``resolved_view`` (the stand-in itself: a
:class:`~._strict.StrictNamespace` of the flags the checks read, a colocated server without
two-batch overlap, LMCache, the external linker, host-pool retraction or HiCache, its cuda-graph
config unset), ``model_config_of`` (the target's config:
not hybrid-SWA), ``mambaish_config`` (the target is a hybrid-state model: a config),
``use_mla_backend`` (the case's answer); ``envs`` and the cuda-graph ``Backend`` are poisoned
(read only under PD, and with a cuda-graph config).
"""

from __future__ import annotations

import typing
from typing import Any

from ._plumbing import Builder
from ._strict import Poison, StrictNamespace, StubError

_HOOK = ("_SPEC_VERIFY_AUDITED_BACKENDS", "_SPEC_MHA_AUDITED_BACKENDS", "_assert_spec_verify_backends",
         "handle_unified_memory_pool", "_validate_unified_memory_dcp")  # fmt: skip


class LaunchOracle:
    """:meth:`check`: SGLang's ``handle_unified_memory_pool`` on one case."""

    def __init__(self, b: Builder) -> None:
        self._mla: bool | None = None
        base = b.namespace("arg_groups.model_override_base", Any=typing.Any)
        b.source("arg_groups/model_override_base.py").lift(base, "attention_backends_of")
        ns = b.namespace(
            "arg_groups.kv_cache_hook", frozenset=frozenset, Any=typing.Any, Optional=typing.Optional,
            resolving_view=lambda server_args: server_args, resolved_view=lambda server_args: server_args,
            attention_backends_of=base["attention_backends_of"], model_config_of=self._model_config,
            mambaish_config=lambda mc: StrictNamespace("the target's mambaish config"),
            use_mla_backend=self._use_mla, envs=Poison("envs (PD disaggregation only)"),
            Backend=Poison("cuda_graph_config.Backend (a cuda-graph config only)"),
        )  # fmt: skip
        b.source("arg_groups/kv_cache_hook.py").lift(ns, *_HOOK)
        self._check = ns["handle_unified_memory_pool"]
        server = b.namespace("server_args")
        self._pd_backends = b.source("server_args.py").lift_method(server, "ServerArgs",
                                                                    "_unified_memory_pd_transfer_backends")

    def _use_mla(self, server_args: Any) -> bool:
        if self._mla is None:
            raise StubError("sglang_oracle.unified_launch: use_mla_backend outside check()")
        return self._mla

    @staticmethod
    def _model_config(server_args: Any) -> Any:
        return StrictNamespace("the target's ModelConfig", is_hybrid_swa=False)

    def check(self, *, algorithm: str | None, eagle_topk: int | None, backends: tuple[str, str], dcp: int,
              mla: bool, disagg: str = "null", transfer_backend: str = "mooncake", pp: int = 1) -> str | None:  # fmt: skip
        """SGLang's refusal (its assertion's message), or ``None``. ``algorithm``: SGLang's resolved
        name (``EAGLE`` for NEXTN); ``backends``: the resolved (prefill, decode) pair; ``disagg``,
        ``transfer_backend``, ``pp``: ``--disaggregation-mode``, ``--disaggregation-transfer-backend``
        and the pipeline size (read under PD only)."""
        pd = {} if disagg == "null" else dict(
            disaggregation_transfer_backend=transfer_backend, pp_size=pp,
            _unified_memory_pd_transfer_backends=lambda: self._pd_backends(None))  # fmt: skip
        args = StrictNamespace(
            "server_args", **pd, enable_unified_memory=True, disaggregation_mode=disagg, speculative_algorithm=algorithm,
            speculative_eagle_topk=eagle_topk, speculative_draft_attention_backend=None, dcp_size=dcp,
            attention_backend=None, prefill_attention_backend=backends[0], decode_attention_backend=backends[1],
            enable_two_batch_overlap=False, enable_lmcache=False, enable_unified_cache_external_linker=False,
            disaggregation_decode_retraction_backup=None, enable_hierarchical_cache=False, cuda_graph_config=None,
        )  # fmt: skip
        self._mla = mla
        try:
            self._check(args)
        except StubError:
            raise
        except AssertionError as e:
            return str(e)
        finally:
            self._mla = None
        return None
