"""SGLang's call site of the pool configurators: ``KVCacheConfigurator.config_from_budget``.

SGLang 0.5.23 turns a profiled byte budget into a ``MemoryPoolConfig`` in
``KVCacheConfigurator.config_from_budget`` (``mem_cache/kv_cache_configurator.py``):
it imports ``create_memory_pool_configurator`` from
``sglang.srt.model_executor.pool_configurator`` at each call, runs
``calculate_pool_sizes``, floors the unified pool's byte total, applies
``_apply_token_constraints`` (the user's ``--max-total-tokens`` and the PP MIN
sync) and the optional ``cap_tokens`` clamp, and re-derives the pools from the
token count when a constraint lowered it.

Both methods are lifted unchanged (:meth:`~oracle_kit.lift.Source.lift_method`)
and attached to the ``KVCacheConfigurator`` stand-in class the case builder
instantiates (:func:`kvc_class`), so ``kvc.config_from_budget(budget)`` is SGLang's
own code. Its function-level import is answered by the sandbox's module table,
where :func:`provide_pool_configurator` registers the executed
``pool_configurator.py``'s factory: patching that module (as
``kvbudget.sglang.install.install`` patches SGLang's) changes what the call
site builds, exactly as in SGLang.

Globals the two methods read: ``get_schedule`` / ``get_memory`` /
``get_parallel`` (the active case's bags) and the real ``logging`` (the
over-cap warning). ``torch`` is a :class:`~._strict.Poison`: it is only used for
the PP all-reduce, and the cases have ``pp_size = 1``.
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from typing import Any

from ._plumbing import Builder, pick
from ._strict import Poison, StrictNamespace

#: The ``KVCacheConfigurator`` methods lifted onto the stand-in class.
METHODS = ("config_from_budget", "_apply_token_constraints")


def kvc_class(b: Builder) -> type:
    """The ``KVCacheConfigurator`` stand-in class: a :class:`StrictNamespace` carrying
    SGLang's own :data:`METHODS`."""
    g = b.getters
    ns = b.namespace(
        "mem_cache.kv_cache_configurator", Optional=typing.Optional, logging=logging,
        get_schedule=g["schedule"], get_memory=g["memory"], get_parallel=g["parallel"],
        torch=Poison("kv_cache_configurator.torch (the PP sync; pp_size is 1)"),
    )  # fmt: skip
    src = b.source("mem_cache/kv_cache_configurator.py")
    methods = {m: src.lift_method(ns, "KVCacheConfigurator", m) for m in METHODS}
    return type("KVCacheConfigurator", (StrictNamespace,), {"__slots__": (), **methods})


def provide_pool_configurator(b: Builder, pc: dict[str, Any]) -> None:
    """Registers the executed ``pool_configurator.py`` (its factory and
    ``MemoryPoolConfig``) as the sandbox module the call site imports."""
    b.provide("model_executor.pool_configurator", pick(pc, "create_memory_pool_configurator MemoryPoolConfig"))


def pool_config_fields(config: Any) -> dict[str, Any]:
    """Every field of a ``MemoryPoolConfig`` (a dataclass), by name."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
