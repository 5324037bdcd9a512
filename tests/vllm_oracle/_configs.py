"""Strict stand-ins for vLLM's config objects, carrying vLLM's own config methods.

The planner reads a handful of config fields and a few derived properties.
Each stand-in (:class:`~._strict.StrictConfig`) holds exactly the fields the
oracle sets; any other read fails loudly. The derived quantities are *lifted*
from vLLM's files, not restated:

* ``VllmConfig.max_concurrent_batches``, ``max_in_flight_tokens`` (the ``F``
  of VLLM.md section 5), ``num_speculative_tokens`` and
  ``num_prefill_lookahead_tokens`` from ``vllm/config/vllm.py``;
* ``CacheConfig.get_resolved_kv_cache_layout`` (with ``_layout_from_name``
  and ``_LAYOUT_COMPAT_ALIASES``) from ``vllm/config/cache.py``;
* ``SpeculativeConfig.use_eagle``, ``needs_eagle_block_drop``,
  ``use_eagle_block_drop``, ``use_dflash``, ``use_dspark`` and
  ``use_multi_module_mtp`` from ``vllm/config/speculative.py``.

What is *not* vLLM's: the choice of field values (:func:`make_vllm_config`
maps the oracle's engine settings to them) and ``device_config.device_type``
fixed to ``"cuda"`` (the oracle emulates a CUDA deployment; it only names the
pool "GPU" in the log line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._strict import StrictConfig


class ModelConfig(StrictConfig):
    pass


class SchedulerConfig(StrictConfig):
    pass


class ParallelConfig(StrictConfig):
    pass


class AttentionConfig(StrictConfig):
    pass


class DeviceConfig(StrictConfig):
    pass


class DraftModelConfig(StrictConfig):
    pass


class HFConfig(StrictConfig):
    """A draft model's HF config: ``getattr(cfg, name, default)`` on a field it
    lacks must see "not set", so missing names raise a plain AttributeError here
    only for the probes listed in ``_absent``."""

    def __getattr__(self, name: str) -> Any:
        if name in self.__dict__.get("_absent", ()):
            raise AttributeError(name)
        return super().__getattr__(name)


@dataclass(frozen=True)
class ConfigClasses:
    VllmConfig: type
    CacheConfig: type
    SpeculativeConfig: type


def build_config_classes(
    b: Any, *, layout_cls: type, cache_src: Any, lift_member: Callable[..., Any]
) -> ConfigClasses:
    """The config classes, with methods lifted from vLLM's config files."""
    vllm_src = b.source("config/vllm.py")
    vllm_ns = b.namespace("config.vllm")
    vllm_attrs = {
        name: lift_member(vllm_src, vllm_ns, "VllmConfig", name)
        for name in (
            "max_concurrent_batches",
            "max_in_flight_tokens",
            "num_speculative_tokens",
            "num_prefill_lookahead_tokens",
        )
    }
    vllm_cls = type("VllmConfig", (StrictConfig,), vllm_attrs)

    import functools

    # ``_layout_from_name`` is decorated ``@functools.cache`` in vLLM.
    cache_ns = b.namespace("config.cache", KVCacheLayout=layout_cls, cache=functools.cache)
    cache_src.lift(cache_ns, "_LAYOUT_COMPAT_ALIASES", "_layout_from_name")
    cache_cls = type(
        "CacheConfig",
        (StrictConfig,),
        {
            "get_resolved_kv_cache_layout": lift_member(
                cache_src, cache_ns, "CacheConfig", "get_resolved_kv_cache_layout"
            )
        },
    )

    spec_src = b.source("config/speculative.py")
    spec_ns = b.namespace("config.speculative")
    spec_attrs = {
        name: lift_member(spec_src, spec_ns, "SpeculativeConfig", name)
        for name in (
            "use_eagle",
            "needs_eagle_block_drop",
            "use_eagle_block_drop",
            "use_dflash",
            "use_dspark",
            "use_multi_module_mtp",
        )
    }
    spec_cls = type("SpeculativeConfig", (StrictConfig,), spec_attrs)
    return ConfigClasses(VllmConfig=vllm_cls, CacheConfig=cache_cls, SpeculativeConfig=spec_cls)


#: Engine settings the oracle accepts, with their defaults (vLLM's CLI defaults
#: where one exists; ``max_model_len`` "auto" means ``--max-model-len auto``).
ENGINE_DEFAULTS: dict[str, Any] = {
    "block_size": 16,
    "max_model_len": 131072,
    "max_num_batched_tokens": 8192,
    "async_scheduling": True,
    "use_v2_model_runner": True,
    "tp": 1,
    "pp": 1,
    "dcp": 1,
    "num_gpu_blocks_override": None,
    "kv_cache_memory_bytes": None,
    "disable_hybrid_kv_cache_manager": False,
    "kv_cache_layout": "LBNHC",
    "speculative_method": None,
    "num_speculative_tokens": None,
    "num_nextn_predict_layers": None,
    "derived_max_model_len": None,
    "draft_kv_cache_dtype": None,
    "enable_prefix_caching": True,
    "use_replayssm": False,
    "attention_kernel_block_size": 16,
}


def make_vllm_config(classes: ConfigClasses, engine: dict[str, Any], model: dict[str, Any] | None = None) -> Any:
    """A fresh config stand-in for one plan call (vLLM mutates it while planning).

    ``max_model_len="auto"`` sets ``original_max_model_len = -1`` and starts
    ``max_model_len`` at ``derived_max_model_len`` (the model's own limit; the
    engine's ``max_model_len`` otherwise), as vLLM's ModelConfig does. ``model``:
    the model-config fields the state layers' steps read (:func:`._mamba.model_fields`),
    its ``cache_dtype`` the cache config's.
    """
    model = dict(model or {})
    cache_dtype = model.pop("cache_dtype", "auto")
    unknown = set(engine) - set(ENGINE_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown engine settings: {sorted(unknown)}")
    e = {**ENGINE_DEFAULTS, **engine}
    if e["max_model_len"] == "auto":
        derived = e["derived_max_model_len"]
        if derived is None:
            raise ValueError("max_model_len='auto' needs derived_max_model_len")
        original, current = -1, int(derived)
    else:
        original = current = int(e["max_model_len"])
    spec: Any = None
    if e["speculative_method"] is not None:
        n_nextn = e["num_nextn_predict_layers"]
        hf = HFConfig(
            _absent=() if n_nextn is not None else ("num_nextn_predict_layers",),
            **({"num_nextn_predict_layers": n_nextn} if n_nextn is not None else {}),
        )
        spec = classes.SpeculativeConfig(
            method=e["speculative_method"],
            num_speculative_tokens=e["num_speculative_tokens"],
            disable_eagle_block_drop=False,
            draft_model_config=DraftModelConfig(hf_config=hf),
        )
    return classes.VllmConfig(
        model_config=ModelConfig(
            max_model_len=current,
            original_max_model_len=original,
            supports_kv_cache_grouping=False,
            **model,
        ),
        cache_config=classes.CacheConfig(
            block_size=e["block_size"],
            num_gpu_blocks_override=e["num_gpu_blocks_override"],
            kv_cache_memory_bytes=e["kv_cache_memory_bytes"],
            kv_cache_layout=e["kv_cache_layout"],
            prefix_cache_retention_interval=0,  # CacheConfig default
            mamba_cache_mode="none",  # CacheConfig default; MambaModelConfig resolves it
            enable_prefix_caching=e["enable_prefix_caching"],
            mamba_block_size=None,
            mamba_page_size_padded=None,
            use_replayssm=e["use_replayssm"],
            cache_dtype=cache_dtype,
            prefix_match_unit=None,
            num_gpu_blocks=None,
            kv_cache_size_tokens=None,
            kv_cache_max_concurrency=None,
        ),
        scheduler_config=SchedulerConfig(
            disable_hybrid_kv_cache_manager=e["disable_hybrid_kv_cache_manager"],
            async_scheduling=e["async_scheduling"],
            max_num_batched_tokens=e["max_num_batched_tokens"],
            # SchedulerConfig.__post_init__: the encoder's token budget is the batch's
            max_num_encoder_input_tokens=e["max_num_batched_tokens"],
            enable_chunked_prefill=True,
        ),
        parallel_config=ParallelConfig(
            pipeline_parallel_size=e["pp"],
            tensor_parallel_size=e["tp"],
            decode_context_parallel_size=e["dcp"],
        ),
        attention_config=AttentionConfig(hisparse_config=None),
        device_config=DeviceConfig(device_type="cuda"),
        speculative_config=spec,
        kv_transfer_config=None,  # no KV connector
        diffusion_config=None,
        use_v2_model_runner=e["use_v2_model_runner"],
    )
