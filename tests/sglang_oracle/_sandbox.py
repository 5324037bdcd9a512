"""The sandbox: SGLang's sizing modules executed against stand-in imports.

:func:`build` reads the verified files (see ``tools/fetch_sglang.py``) and

* **executes whole** ``model_executor/pool_configurator.py``,
  ``mem_cache/allocation_sizing.py`` and
  ``layers/quantization/fp4_kv_cache_quant_method.py`` (this module);
* **lifts** (:mod:`._helpers`) the helpers they import from files too
  entangled to execute whole: ``utils/common.py`` (``ceil_div``,
  ``ceil_align``, ``spec_decode_alloc_len_per_request``,
  ``is_float4_e2m1fn_x2``, ``is_hip``, ``is_npu``), ``configs/model_config.py``
  (``AttentionArch``, ``is_deepseek_dsa``, ``is_deepseek_v4``,
  ``is_minimax_sparse`` and the methods ``ModelConfig.get_total_num_kv_heads``
  / ``get_num_kv_heads`` / ``get_swa_num_kv_heads``), ``runtime_context.py``
  (``max_speculative_num_draft_tokens``), ``speculative/spec_info.py`` +
  ``spec_registry.py`` (``SpeculativeAlgorithm`` with its real
  ``from_string`` and NEXTN alias), ``speculative/dflash_utils.py``,
  ``mem_cache/kv_cache_dtype.py`` (``configure_kv_cache_dtype``),
  ``mem_cache/kv_cache_configurator.py`` (``calculate_mla_kv_cache_dim``, and
  the call site ``KVCacheConfigurator.config_from_budget`` with
  ``_apply_token_constraints``: :mod:`._callsite`),
  ``mem_cache/page_interleave.py`` (``compute_page_shard_scratch_bytes`` and
  the shard-group helpers it calls), ``configs/hybrid_arch.py``
  (``mambaish_config`` and the predicates it calls), ``layers/cp/utils.py``
  (the DSA layer-split helpers) and ``layers/attention/qsa/config.py``
  (``parse_qsa_profile``);
* **stubs** the rest, strictly (:mod:`._strict`, :mod:`._plumbing`): the
  runtime-context getters return the per-case bags of the active context;
  ``envs`` answers only the variables the case sets; every other name these
  files import at import time is a :class:`~._strict.Poison`, and a
  function-level import of a module the sandbox lacks raises.

Stubs that stand for a runtime fact rather than a missing feature:

* ``is_cuda() -> True`` (inside the lifted ``is_float4_e2m1fn_x2``): SGLang
  sizes FP4 pools on CUDA only; the oracle emulates a CUDA deployment whatever
  machine it runs on (a CPU-only torch would otherwise turn FP4 sizing off).
* ``current_platform.is_cpu() -> False`` (for ``configure_kv_cache_dtype``).
* ``get_hf_text_config(cfg) -> cfg``: what the real helper returns for a
  text-only config (the only kind the oracle builds).
* ``resolved_view(server_args)`` / ``attention_backends_of(view)``: the case's
  resolved ``(prefill, decode)`` attention backends.
* ``is_hip()`` / ``is_npu()`` are the real ones (False with a CUDA or CPU
  torch; on a ROCm torch the HIP fp8 dtype is a Poison, so it fails loudly).

The configurator classes' ``__init__`` are wrapped to note which class the
factory built before its constructor runs (so an error raised in a
constructor still names its class); behaviour is unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from ._callsite import kvc_class, provide_pool_configurator
from ._helpers import lift_helpers
from ._plumbing import Active, Builder, Envs, pick
from ._strict import Poison, StrictNamespace


class HFConfig(StrictNamespace):
    """A text-only Hugging Face config: ``get_text_config()`` is itself, as in transformers."""

    __slots__ = ()

    def get_text_config(self, *args: object, **kwargs: object) -> HFConfig:
        return self


@dataclass(frozen=True)
class Sandbox:
    """What the oracle calls: the factory and the input helpers, all SGLang's own."""

    active: Active
    create_memory_pool_configurator: Callable[[Any], Any]
    speculative_algorithm: Any  # the lifted SpeculativeAlgorithm enum
    attention_arch: Any  # the lifted AttentionArch enum
    configure_kv_cache_dtype: Callable[..., tuple[str | None, torch.dtype]]
    mambaish_config: Callable[[Any], Any]
    model_config_cls: type  # StrictNamespace with the lifted ModelConfig methods
    pool_configurator_ns: dict[str, Any]
    modules: dict[str, Any]  # the sandbox's ``sglang.srt.*`` modules, by full name
    kvc_cls: type  # StrictNamespace with the lifted call site (``._callsite``)


def _stub_modules(b: Builder) -> None:
    active = b.active
    b.provide("environ", {"envs": Envs(active)})
    b.provide(
        "arg_groups.overrides",
        {
            "resolving_view": Poison("overrides.resolving_view"),
            "resolved_view": lambda server_args: active.require().resolved_view,
            "attention_backends_of": lambda view: view.attention_backends,
        },
    )


def _exec_whole(b: Builder, rel: str, module: str, exports: str) -> dict[str, Any]:
    src = b.source(rel)
    ns = b.namespace(module)
    src.exec_module(ns)
    b.provide(module, pick(ns, exports))
    return ns


def _record_picks(active: Active, pc: dict[str, Any]) -> None:
    base = pc["MemoryPoolConfigurator"]
    for value in list(pc.values()):
        if isinstance(value, type) and issubclass(value, base) and "__init__" in vars(value):
            original = vars(value)["__init__"]

            @functools.wraps(original)
            def __init__(self: Any, kvc: Any, _original: Any = original) -> None:
                if active.picked is None:
                    active.picked = type(self).__name__
                _original(self, kvc)

            value.__init__ = __init__  # type: ignore[misc]


def build(root: Path) -> Sandbox:
    """The sandbox over the verified extraction at ``root``."""
    b = Builder(root)
    helpers = lift_helpers(b)
    _stub_modules(b)

    fp4 = "layers/quantization/fp4_kv_cache_quant_method.py"
    b.provide("layers.quantization.kvfp4_tensor", {}, poison_rest_of=b.source(fp4))
    _exec_whole(
        b, fp4, "layers.quantization.fp4_kv_cache_quant_method",
        "get_kv_cache_quant_method resolve_kv_cache_quant",
    )  # fmt: skip
    _exec_whole(
        b, "mem_cache/allocation_sizing.py", "mem_cache.allocation_sizing",
        "get_alloc_len_per_decode",
    )  # fmt: skip

    pc_src = b.source("model_executor/pool_configurator.py")
    for module in (
        "arg_groups.overrides",
        "configs.model_config",
        "mem_cache.deepseek_v4_memory_pool",
        "mem_cache.memory_pool",
    ):
        b.provide(module, {}, poison_rest_of=pc_src)
    pc = b.namespace("model_executor.pool_configurator")
    pc_src.exec_module(pc)
    _record_picks(b.active, pc)
    provide_pool_configurator(b, pc)
    return Sandbox(
        active=b.active,
        create_memory_pool_configurator=pc["create_memory_pool_configurator"],
        speculative_algorithm=helpers.speculative_algorithm,
        attention_arch=helpers.attention_arch,
        configure_kv_cache_dtype=helpers.configure_kv_cache_dtype,
        mambaish_config=helpers.mambaish_config,
        model_config_cls=helpers.model_config_cls,
        pool_configurator_ns=pc,
        modules=b.modules,
        kvc_cls=kvc_class(b),
    )
