"""The sandbox: vLLM 0.33.0's KV-cache planning modules executed against stand-in imports.

:func:`build` reads the verified files (``tools/fetch_vllm.py``) and

* **executes whole**, in this order, as sandbox modules:
  ``vllm/utils/math_utils.py``, ``vllm/utils/mem_constants.py``,
  ``vllm/v1/kv_cache_layout.py``, ``vllm/v1/kv_cache_spec_registry.py``,
  ``vllm/v1/kv_cache_interface.py``, ``vllm/v1/core/kv_cache_config_builder.py``
  and ``vllm/v1/core/kv_cache_planning.py``;
* **lifts** (with :mod:`ast`, from the real text) the definitions they import
  from files too entangled to execute whole: ``format_gib``
  (``utils/mem_utils.py``), ``STR_DTYPE_TO_TORCH_DTYPE`` / ``get_dtype_size``
  / ``get_kv_cache_torch_dtype`` (``utils/torch_utils.py``), ``MultipleOf``
  (``v1/attention/backend.py``), ``register_all_kvcache_specs``
  (``v1/core/single_type_kv_cache_manager.py``, the engine's spec-type
  table), ``get_kv_cache_dtype_handler`` and its (empty) handler table
  (``config/cache.py``), ``get_hisparse_kv_cache_groups``
  (``v1/hisparse/layout.py``), the capacity helpers of
  ``v1/core/kv_cache_utils.py`` (``_kv_cache_device_name``,
  ``get_max_concurrency_for_kv_cache_config``,
  ``generate_scheduler_kv_cache_config``, ``get_kv_cache_capacity``,
  ``update_kv_cache_capacity``, and the scheduler's ``resolve_kv_cache_block_sizes`` with
  ``resolve_dcp_kv_block_size`` and ``partial_hash_hits_enabled``), and
  ``Platform.get_kv_cache_config_builder_cls``
  / ``Platform.register_custom_kv_cache_specs`` (``platforms/interface.py``),
  and the worker's ``allocate_kv_cache`` (``v1/worker/utils.py``, with a CUDA
  ``current_platform`` whose only member is ``is_rocm``) and its
  ``determine_available_memory`` (``v1/worker/gpu_worker.py``; :mod:`._worker`);
  the config methods are lifted in :mod:`._configs`;
* **stubs**, strictly (:mod:`._strict`): ``vllm.logger.init_logger`` returns a
  recording logger; ``vllm.config`` provides the strict config stand-ins of
  :mod:`._configs`; ``resolve_obj_by_qualname`` resolves only the default
  builder's qualified name (to the class the executed planning module
  defined); ``current_platform`` carries only the two lifted ``Platform``
  classmethods (the base-class behaviour, i.e. CUDA, which does not override
  them); the SingleTypeKVCacheManager classes are sentinels (the registry only
  stores them); the HiSparse placement helpers are :class:`Poison`;
  ``MambaAttentionBackendEnum`` is an ``Enum`` of the registry's members, and the
  state layers' code (the Mamba config step, the platform's hybrid block-size
  alignment, the layer classes' spec methods) is :mod:`._mamba`'s.

The import hook answers ``vllm`` / ``vllm.*`` only from the sandbox's module
table (an unknown module or name raises :class:`~._strict.StubError`) and lets
through only a few real standard modules and torch. Nothing is added to
``sys.modules`` except, while a file executes, its own namespace under a
``vllm_oracle.sandbox.*`` name (dataclasses resolve string annotations there).
"""

from __future__ import annotations

import builtins
import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oracle_kit.lift import Source
from ._strict import Poison, RecordingLogger, StrictModule, StubError, sentinel_class

PREFIX = "vllm_oracle.sandbox"
REAL_MODULES = frozenset(
    {
        "__future__", "abc", "bisect", "collections", "copy", "dataclasses", "enum",
        "fractions", "functools", "math", "typing", "torch",
    }
)  # fmt: skip
DEFAULT_BUILDER = "vllm.v1.core.kv_cache_planning.DefaultKVCacheConfigBuilder"


class Builder:
    """The module table, the import hook and the namespaces vLLM code runs in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.modules: dict[str, StrictModule] = {}
        self.log: list[tuple[str, str]] = []
        self.builtins = dict(builtins.__dict__)
        self.builtins["__import__"] = self.importer

    def importer(
        self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level != 0:
            raise StubError(f"vllm_oracle: relative import of {name!r} (level {level})")
        if name == "vllm" or name.startswith("vllm."):
            module = self.modules.get(name)
            if module is None:
                raise StubError(f"vllm_oracle: module {name} is not provided by the sandbox")
            if not fromlist:
                raise StubError(f"vllm_oracle: plain `import {name}` is not supported")
            return module
        if name.partition(".")[0] not in REAL_MODULES:
            raise StubError(f"vllm_oracle: import of {name!r} is not allowed in the sandbox")
        return builtins.__import__(name, globals, locals, fromlist, level)

    def source(self, rel: str) -> Source:
        """The extracted ``vllm/<rel>``."""
        return Source(self.root, f"vllm/{rel}")

    def namespace(self, module: str, **names: Any) -> dict[str, Any]:
        ns: dict[str, Any] = {"__builtins__": self.builtins, "__name__": f"{PREFIX}.{module}"}
        ns.update(names)
        return ns

    def provide(self, module: str, names: dict[str, Any]) -> None:
        """Adds ``names`` to the sandbox module ``module`` (a full ``vllm.*`` name)."""
        old = self.modules.get(module)
        attrs = {k: v for k, v in vars(old).items() if not k.startswith("__")} if old else {}
        attrs.update(names)
        self.modules[module] = StrictModule(module, attrs)

    def exec_whole(self, rel: str) -> dict[str, Any]:
        """Executes ``vllm/<rel>`` whole and provides every public name it defines."""
        module = "vllm." + rel.removesuffix(".py").replace("/", ".")
        ns = self.namespace(module)
        self.source(rel).exec_module(ns)
        self.provide(module, {k: v for k, v in ns.items() if not k.startswith("__")})
        return ns

    def lift(self, rel: str, names: str, **env: Any) -> dict[str, Any]:
        """Lifts the top-level ``names`` of ``vllm/<rel>`` into a fresh namespace with ``env``."""
        module = "vllm." + rel.removesuffix(".py").replace("/", ".")
        ns = self.namespace(module, **env)
        self.source(rel).lift(ns, *names.split())
        return ns


def lift_member(src: Source, namespace: dict[str, Any], cls: str, name: str) -> Any:
    """``cls.name`` of ``src`` as a class attribute (see :meth:`Source.lift_member`)."""
    return src.lift_member(namespace, cls, name)


@dataclass(frozen=True)
class Sandbox:
    """What the oracle calls: vLLM's own namespaces and functions."""

    builder: Builder
    planning: dict[str, Any]  # kv_cache_planning.py, executed whole
    interface: dict[str, Any]  # kv_cache_interface.py, executed whole
    utils: dict[str, Any]  # the lifted kv_cache_utils.py capacity helpers
    register_all_kvcache_specs: Callable[[Any], None]
    get_kv_cache_torch_dtype: Callable[..., Any]
    configs: Any  # the config stand-in classes (._configs.ConfigClasses)
    allocate_kv_cache: Callable[..., Any]  # v1/worker/utils.py, lifted
    available_memory: Callable[[Any, int], int]  # v1/worker/gpu_worker.py, lifted (._worker)
    state: Any  # the state layers' code (._mamba.StateCode)

    @property
    def log(self) -> list[tuple[str, str]]:
        return self.builder.log


def build(root: Path) -> Sandbox:
    """The sandbox over the verified extraction at ``root``."""
    from ._configs import build_config_classes
    from ._mamba import StateCode, backend_enum
    from ._worker import build_available_memory

    b = Builder(root)
    b.provide("vllm.logger", {"init_logger": lambda name: RecordingLogger(name, b.log)})
    b.exec_whole("utils/math_utils.py")
    consts = b.exec_whole("utils/mem_constants.py")
    fmt = b.lift("utils/mem_utils.py", "format_gib", GiB_bytes=consts["GiB_bytes"])
    b.provide("vllm.utils.mem_utils", {"format_gib": fmt["format_gib"]})
    import torch

    tu = b.lift(
        "utils/torch_utils.py", "STR_DTYPE_TO_TORCH_DTYPE get_dtype_size get_kv_cache_torch_dtype",
        torch=torch,
    )  # fmt: skip
    b.provide(
        "vllm.utils.torch_utils", {k: tu[k] for k in ("get_dtype_size", "STR_DTYPE_TO_TORCH_DTYPE")}
    )
    from dataclasses import dataclass as _dc

    be = b.lift("v1/attention/backend.py", "MultipleOf", dataclass=_dc)
    b.provide("vllm.v1.attention.backend", {"MultipleOf": be["MultipleOf"]})
    mamba_enum = backend_enum(b)
    b.provide("vllm.v1.attention.backends.registry", {"MambaAttentionBackendEnum": mamba_enum})
    layout = b.exec_whole("v1/kv_cache_layout.py")
    b.exec_whole("v1/kv_cache_spec_registry.py")
    cache_src = b.source("config/cache.py")
    cache_ns = b.lift("config/cache.py", "_KV_CACHE_DTYPE_HANDLERS get_kv_cache_dtype_handler")
    b.provide(
        "vllm.config.cache", {"get_kv_cache_dtype_handler": cache_ns["get_kv_cache_dtype_handler"]}
    )
    iface = b.exec_whole("v1/kv_cache_interface.py")

    stm_src = b.source("v1/core/single_type_kv_cache_manager.py")
    managers = {
        n: sentinel_class(n)
        for n in [
            "FullAttentionManager",
            "HiSparseSourceManager",
            "HiSparseHotManager",
            "HiSparseResidentManager",
            "SlidingWindowManager",
            "CircularBufferManager",
            "MambaManager",
            "ChunkedLocalAttentionManager",
            "CrossAttentionManager",
            "RSWAManager",
            "SinkFullAttentionManager",
        ]
    }
    stm = b.namespace("v1.core.single_type_kv_cache_manager", **managers)
    stm.update({k: v for k, v in iface.items() if not k.startswith("__")})
    stm_src.lift(stm, "register_all_kvcache_specs")
    b.provide(
        "vllm.v1.core.single_type_kv_cache_manager",
        {"register_all_kvcache_specs": stm["register_all_kvcache_specs"]},
    )

    plat_src = b.source("platforms/interface.py")
    plat_ns = b.namespace("platforms.interface")
    platform_cls = type(
        "Platform",
        (),
        {
            m: lift_member(plat_src, plat_ns, "Platform", m)
            for m in ("get_kv_cache_config_builder_cls", "register_custom_kv_cache_specs")
        },
    )
    b.provide("vllm.platforms", {"current_platform": platform_cls()})

    resolved: dict[str, Any] = {}

    def resolve_obj_by_qualname(qualname: str) -> Any:
        if qualname not in resolved:
            raise StubError(f"vllm_oracle: resolve_obj_by_qualname({qualname!r}) is not provided")
        return resolved[qualname]

    b.provide("vllm.utils.import_utils", {"resolve_obj_by_qualname": resolve_obj_by_qualname})
    b.exec_whole("v1/core/kv_cache_config_builder.py")

    utils_env = {k: v for k, v in iface.items() if not k.startswith("__")}
    utils_env["cdiv"] = b.modules["vllm.utils.math_utils"].cdiv
    utils_env["copy"] = copy
    utils_env["math"] = math
    utils_env["logger"] = RecordingLogger("vllm.v1.core.kv_cache_utils", b.log)
    utils = b.lift(
        "v1/core/kv_cache_utils.py",
        "_kv_cache_device_name get_max_concurrency_for_kv_cache_config "
        "generate_scheduler_kv_cache_config get_kv_cache_capacity update_kv_cache_capacity "
        "resolve_dcp_kv_block_size partial_hash_hits_enabled resolve_kv_cache_block_sizes",
        **utils_env,
    )
    b.provide(
        "vllm.v1.core.kv_cache_utils", {"_kv_cache_device_name": utils["_kv_cache_device_name"]}
    )
    hs = b.lift("v1/hisparse/layout.py", "get_hisparse_kv_cache_groups")
    b.provide(
        "vllm.v1.hisparse.layout",
        {
            "get_hisparse_kv_cache_groups": hs["get_hisparse_kv_cache_groups"],
            "get_hisparse_host_pool_bytes": Poison("hisparse.get_hisparse_host_pool_bytes"),
            "get_hisparse_kv_cache_config": Poison("hisparse.get_hisparse_kv_cache_config"),
        },
    )
    configs = build_config_classes(
        b, layout_cls=layout["KVCacheLayout"], cache_src=cache_src, lift_member=lift_member
    )
    b.provide(
        "vllm.config",
        {"VllmConfig": configs.VllmConfig, "SpeculativeConfig": configs.SpeculativeConfig},
    )
    planning = b.exec_whole("v1/core/kv_cache_planning.py")
    resolved[DEFAULT_BUILDER] = planning["DefaultKVCacheConfigBuilder"]
    # The worker's allocation: a CUDA platform (``is_rocm()`` False, so the ROCm
    # workspace warm-up is never reached and is poisoned).
    worker_env = {k: v for k, v in iface.items() if not k.startswith("__")}
    worker_env.update(
        torch=torch,
        KVCacheLayout=layout["KVCacheLayout"],
        current_platform=StrictModule("current_platform", {"is_rocm": lambda: False}),
        warmup_rocm_skinny_gemm_workspaces=Poison("warmup_rocm_skinny_gemm_workspaces"),
    )
    alloc = b.lift("v1/worker/utils.py", "allocate_kv_cache", **worker_env)
    state = StateCode(b, iface, tu, be["MultipleOf"], mamba_enum)
    return Sandbox(
        state=state,
        builder=b,
        planning=planning,
        interface=iface,
        utils=utils,
        register_all_kvcache_specs=stm["register_all_kvcache_specs"],
        get_kv_cache_torch_dtype=tu["get_kv_cache_torch_dtype"],
        configs=configs,
        allocate_kv_cache=alloc["allocate_kv_cache"],
        available_memory=build_available_memory(b, fmt["format_gib"]),
    )
