"""The vLLM model-reading oracle (:mod:`._hf`) on hybrid-state models: a state layer's shapes and
dtypes (the model class's own classmethods, lifted) and ``--use-replayssm``'s startup checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._hf_lift import _load_error
from ._hf_tables import STATE_CLASSES
from ._interfaces import supports
from ._strict import StrictConfig

__all__ = ["replayssm_startup", "state_of"]


def state_of(env: Any, arch: str, mc: Any, tp: int, spec: Any, model_dtype: str,
           replay: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """A state layer's ``state_shapes`` / ``state_dtypes``: the model class's
    ``get_mamba_state_shape_from_config`` / ``get_mamba_state_dtype_from_config`` (lifted), after
    Qwen3.5's config hook (its ``mamba_ssm_dtype``); the model dtype is an input (restated)."""
    file, cls_name = STATE_CLASSES.get(arch, env.registry[arch])
    if file not in env.models:  # e.g. a multimodal wrapper of a state model: its class is not lifted
        raise LookupError(f"vllm_oracle._hf: the state shapes of {arch} ({file}) are not covered")
    cls = env.models[file][cls_name]
    cache = StrictConfig(mamba_cache_dtype="auto", mamba_ssm_cache_dtype="auto", use_replayssm=replay["use_replayssm"],
                         replayssm_buffer_len=replay["replayssm_buffer_len"])  # fmt: skip
    model = StrictConfig(hf_config=mc.hf_config, hf_text_config=mc.hf_text_config, dtype=env.dtypes[model_dtype])
    config = env.vllm_config_cls(model_config=model, cache_config=cache, speculative_config=spec,
                                 diffusion_config=None, parallel_config=StrictConfig(tensor_parallel_size=tp),
                                 mamba_config=StrictConfig(backend=replay["backend"]))  # fmt: skip
    hook = env.hooks.get(arch, env.hooks.get(file))  # by architecture name (MODELS_CONFIG_MAP), else file
    if hook is not None:  # the architecture's config hook, run when VllmConfig is built
        hook(config)
    shapes = cls.get_mamba_state_shape_from_config(config)
    dtypes = cls.get_mamba_state_dtype_from_config(config)
    return {"state_shapes": [list(x) for x in shapes], "state_dtypes": [str(d).removeprefix("torch.") for d in dtypes]}


def replayssm_startup(env: Any, root: Path, arch: str, spec: Any, pp: int, replay: dict[str, Any], prefix_caching: bool,
                       v2: bool) -> None:  # fmt: skip
    """``VllmConfig.validate_mamba_cached_kernel`` (lifted) on the engine settings, after
    ``MambaModelConfig`` set the cache mode from prefix caching (restated: ``align`` with it);
    the architecture's ``SupportsReplaySSM`` read from the wheel's class hierarchy; no KV
    connector, no stochastic rounding. Its ValueError is vLLM's refusal."""
    cache = StrictConfig(use_replayssm=True, replayssm_buffer_len=replay["replayssm_buffer_len"],
                         mamba_cache_mode="align" if prefix_caching else "none", use_kda_recoverssm=False)  # fmt: skip
    config = env.vllm_config_cls(
        cache_config=cache, speculative_config=spec, diffusion_config=None, use_v2_model_runner=v2,
        model_config=StrictConfig(architecture=arch, supports_replayssm=supports(root, env.registry, arch,
                                                                                 "SupportsReplaySSM")),
        mamba_config=StrictConfig(backend=replay["backend"], enable_stochastic_rounding=False),
        parallel_config=StrictConfig(pipeline_parallel_size=pp), kv_transfer_config=None)  # fmt: skip
    try:
        config.validate_mamba_cached_kernel()
    except ValueError as e:
        raise _load_error(e) from e
