"""kvbudget inside an SGLang 0.5.23 launch: its pool configurators, backed by kvbudget.

Four entry points: :func:`from_server_args` (a launch line as kvbudget inputs,
:mod:`kvbudget.sglang.launch`), :func:`from_kvc` (the same inputs
from a running SGLang's ``KVCacheConfigurator``), :func:`install` (below) and,
for a model folder alone, :func:`kvbudget.sglang.resolve_sglang`.

:func:`install` replaces SGLang's ``create_memory_pool_configurator`` (module
``sglang.srt.model_executor.pool_configurator``, which SGLang's
``KVCacheConfigurator`` imports at each call) with a factory that reads the
same ``KVCacheConfigurator`` and runtime context SGLang's configurators read
(:func:`scenario_from_kvc`), plans with kvbudget, and returns SGLang's own
``MemoryPoolConfig``:

* ``fit="sglang"``: SGLang's numbers, exactly (``tests/test_sglang_install.py``
  holds the installed factory to SGLang's on the parity cases, and SGLang's own
  call site, ``KVCacheConfigurator.config_from_budget``, patched, to the
  unpatched one);
* ``fit="exact"``: the profiling path returns the exact plan's pools, whose
  tensors fit the budget (SGLang's coefficient model can over-commit by a few
  pages and padding rows); the constraint path (a token cap the caller chose)
  is SGLang's.

Hybrid-state models (Qwen3.5, Qwen3-Next, Nemotron-H, Kimi-Linear, ...) are
planned: SGLang takes their state pool out of the budget before it asks the
configurator, which sizes the KV pool over the stage's full-attention layers.
Models kvbudget does not plan (DeepSeek-V4's compressed pools, a state model's
pipeline stage without attention layers, DSA under HiSparse, the CP layer split
or beside a state pool, MiniMax sparse attention) keep SGLang's own
configurator; DSA models (DeepSeek-V3.2, GLM-5) are planned with their indexer. Nothing here imports SGLang (or torch) at import time.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from kvbudget._core import ModelGeometry, ServingConfig, SpeculativeConfig
from kvbudget.errors import InvalidConfigError
from kvbudget.sglang.configurators import Scenario, create_pool_configurator
from kvbudget.fields import canonical_name
from kvbudget.models.hf import ConfigError
from kvbudget.sglang.dsa import dsa_fields, dsa_raw_kv_layout
from kvbudget.sglang.launch import SGLangLaunch, SGLangWorker, from_server_args

__all__ = ["Runtime", "SGLangLaunch", "SGLangWorker", "declined", "from_kvc", "from_server_args", "install", "mm_reserve_bytes",
           "scenario_from_kvc"]  # fmt: skip

Fit = Literal["sglang", "exact"]
logger = logging.getLogger("kvbudget.sglang.install")


class Runtime:
    """SGLang's runtime context as the pool configurators read it: ``get_<bag>()``, ``envs``
    and the resolved attention backends (the real modules by default)."""

    def __init__(self, runtime_context: Any = None, environ: Any = None, overrides: Any = None) -> None:
        def load(name: str, given: Any) -> Any:
            return given if given is not None else importlib.import_module(f"sglang.srt.{name}")

        self.context = load("runtime_context", runtime_context)
        self.envs = load("environ", environ).envs
        self.overrides = load("arg_groups.overrides", overrides)

    def get(self, bag: str) -> Any:
        return getattr(self.context, f"get_{bag}")()

    def attention_backends(self, server_args: Any) -> tuple[Any, Any]:
        prefill, decode = self.overrides.attention_backends_of(self.overrides.resolved_view(server_args))
        return prefill, decode


class _Attributes(Mapping[str, Any]):
    """A config object read as a mapping (``get`` is ``getattr`` with a default)."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self._obj, key)
        except AttributeError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        raise TypeError("a config object's keys are not listed")

    def __len__(self) -> int:
        raise TypeError("a config object's keys are not counted")


def _dsa(kvc: Any) -> dict[str, int]:
    """The DSA indexer of the model, as ``DefaultPoolConfigurator`` reads ``hf_config``."""
    hf, info = kvc.model_config.hf_config, kvc.layer_info
    archs = getattr(hf, "architectures", None) or [None]
    return dsa_fields(str(archs[0]), _Attributes(hf), range(info.start_layer, info.end_layer))


def _dsa_raw_layout(rt: Runtime, mode: str) -> bool:
    kernel = rt.get("exec").kernel
    return dsa_raw_kv_layout(kernel.dsa_prefill_backend, kernel.dsa_decode_backend, mode)


def _stage_attention_layers(kvc: Any) -> list[int]:
    """A hybrid-state model's full-attention layers on this worker's pipeline stage, the
    layers ``DefaultPoolConfigurator`` counts (``mambaish_config(kvc.model_config)``, the
    value ``kvc.mambaish_config`` holds)."""
    info = kvc.layer_info
    return [i for i in kvc.mambaish_config.full_attention_layer_ids if info.start_layer <= i < info.end_layer]


def _model(kvc: Any) -> ModelGeometry:
    mc, info = kvc.model_config, kvc.layer_info
    if kvc.is_hybrid_swa:
        full, swa = list(info.full_attention_layer_ids), list(info.swa_attention_layer_ids)
    elif kvc.mambaish_config is not None:  # the state layers hold no KV (their pool is sized before)
        full, swa = _stage_attention_layers(kvc), []
    else:  # one pool over the effective layers, priced at the full geometry
        full, swa = list(range(info.num_effective_layers)), []
    text = mc.hf_text_config
    swa_heads = text.swa_num_key_value_heads if hasattr(text, "swa_num_key_value_heads") else None
    shape: dict[str, Any] = {"num_kv_heads": mc.get_total_num_kv_heads(), "head_dim": mc.head_dim,
                             "v_head_dim": mc.v_head_dim}  # fmt: skip
    if kvc.use_mla_backend:
        shape.update(kv_lora_rank=mc.kv_lora_rank, qk_rope_head_dim=mc.qk_rope_head_dim, **_dsa(kvc))
        if swa:
            shape.update(swa_kv_lora_rank=mc.swa_kv_lora_rank, swa_qk_rope_head_dim=mc.swa_qk_rope_head_dim)
    if swa:
        shape.update(sliding_window_size=kvc.sliding_window_size, swa_num_kv_heads=swa_heads,
                     swa_head_dim=mc.swa_head_dim, swa_v_head_dim=mc.swa_v_head_dim)  # fmt: skip
    return ModelGeometry(full, swa, **shape)


def _kv_cache_dtype(kvc: Any) -> str:
    try:
        return canonical_name("kv_cache_dtype", kvc.kv_cache_dtype_str)
    except (InvalidConfigError, TypeError):  # None or a name kvbudget has no dtype for
        return "auto"


#: The KV dtypes whose pools depend on the attention backends (the FP4 recipes' scale buffers).
_BACKEND_PRICED = frozenset({"nvfp4"})


def _backends(kvc: Any, rt: Runtime) -> tuple[str | None, str | None]:
    """The ``(prefill, decode)`` attention backends, for a KV dtype they price; None otherwise
    (kvbudget reads them only to price the FP4 recipes, so a backend it has no name
    for, such as ``dsa``, does not matter to any other dtype)."""
    if _kv_cache_dtype(kvc) not in _BACKEND_PRICED:
        return None, None
    prefill, decode = rt.attention_backends(kvc.server_args)
    return prefill, decode


def _unpriced_backends(kvc: Any, rt: Runtime) -> str | None:
    """Why kvbudget cannot price the FP4 recipe with these backends (None: it can)."""
    for side, name in zip(("prefill", "decode"), _backends(kvc, rt)):
        if name is not None:
            try:
                canonical_name(f"{side}_attention_backend", name)
            except InvalidConfigError:
                return f"the {side} attention backend {name!r} of an FP4 KV cache, which kvbudget does not price"
    return None


def scenario_from_kvc(kvc: Any, runtime: Runtime | None = None) -> Scenario:
    """The kvbudget scenario of an SGLang 0.5.23 ``KVCacheConfigurator`` and its runtime context."""
    rt = runtime or Runtime()
    par, sched, spec = rt.get("parallel"), rt.get("schedule"), rt.get("spec")
    mem, disagg = rt.get("memory"), rt.get("disagg")
    prefill, decode = _backends(kvc, rt)
    serving = ServingConfig(
        kv_cache_dtype=_kv_cache_dtype(kvc),
        model_dtype=canonical_name("model_dtype", str(kvc.model_dtype).removeprefix("torch.")),
        page_size=kvc.page_size, tp_size=par.attn_tp_size, dcp_size=par.attn_dcp_size,
        attn_dp_size=kvc.attn_dp_size, swa_full_tokens_ratio=sched.swa_full_tokens_ratio,
        max_running_requests=sched.max_running_requests, chunked_prefill_size=sched.chunked_prefill_size,
        disable_overlap_schedule=sched.disable_overlap_schedule, disable_radix_cache=mem.disable_radix_cache,
        enable_unified_memory=mem.enable_unified_memory, disaggregation_mode=disagg.disaggregation_mode,
        # SGLang leaves it None outside PD decode and reads None as 0 (``KVCacheConfigurator``).
        disaggregation_decode_extra_slots=disagg.disaggregation_decode_extra_slots or 0,
        swa_eviction_interval=rt.envs.SGLANG_SWA_EVICTION_INTERVAL.get(),
        is_draft_worker=kvc.is_draft_worker, is_sm100=rt.get("platform").is_sm100,
        prefill_attention_backend=prefill, decode_attention_backend=decode,
        dsa_raw_kv_layout=bool(kvc.use_mla_backend and _dsa(kvc)) and _dsa_raw_layout(rt, disagg.disaggregation_mode),
    )  # fmt: skip
    aux, algo = kvc.spec_aux_config, kvc.spec_algorithm
    name = "none" if algo.is_none() else algo.name.lower()
    dflash = algo.is_dflash_family()
    layers = int((aux.dflash_draft_num_layers if dflash else aux.eagle_draft_num_layers) or 0)
    # The draft's sliding-window layers: the first draft layers named in the text config's
    # mtp_local_layer_ids (a banded draft), else eagle_draft_swa_num_layers.
    text = kvc.model_config.hf_text_config
    local = getattr(text, "mtp_local_layer_ids", None) if not dflash else None
    banded = sum(i in set(local) for i in range(layers)) if local is not None else 0
    swa_layers = 0 if local is not None or dflash else int(aux.eagle_draft_swa_num_layers or 0)
    speculative = SpeculativeConfig(
        algorithm=name, draft_num_layers=layers, num_steps=spec.speculative_num_steps,
        eagle_topk=spec.speculative_eagle_topk, num_draft_tokens=spec.speculative_num_draft_tokens,
        max_num_draft_tokens=spec.max_speculative_num_draft_tokens, draft_swa_num_layers=swa_layers,
        banded_draft_layers=banded, dflash_draft_cell_size_per_token=kvc.dflash_draft_cell_size_per_token,
        fused_full_entry_bytes=kvc.fused_entry_bytes("full"), fused_swa_entry_bytes=kvc.fused_entry_bytes("swa"),
    )  # fmt: skip
    return Scenario(_model(kvc), serving, speculative)


def mm_reserve_bytes(kvc: Any, runtime: Runtime | None = None) -> int:
    """The bytes SGLang 0.5.23 holds back from the KV budget for a multimodal model
    (``mm_runtime_reservation_gb``): ``SGLANG_VLM_CACHE_SIZE_MB``, plus
    ``SGLANG_MM_FEATURE_CACHE_MB`` with the ``cuda_ipc`` / ``cuda_vmm`` feature
    transport, in MiB; 0 for a text model."""
    if not kvc.model_config.is_multimodal:
        return 0
    rt = runtime or Runtime()
    mb = int(rt.envs.SGLANG_VLM_CACHE_SIZE_MB.get())
    if rt.get("mm").mm_feature_transport in ("cuda_ipc", "cuda_vmm"):
        mb += int(rt.envs.SGLANG_MM_FEATURE_CACHE_MB.get())
    return mb << 20


def from_kvc(kvc: Any, runtime: Runtime | None = None) -> SGLangWorker:
    """A running SGLang 0.5.23 worker's ``KVCacheConfigurator`` and runtime context, as
    kvbudget inputs: the scenario (:func:`scenario_from_kvc`) and the budget's
    inputs SGLang holds (``get_schedule()``'s page size, ``mem_fraction_static``
    and ``max_total_tokens``, the multimodal reserve, :func:`mm_reserve_bytes`).

    The free-memory measurements are not on these objects (SGLang passes them
    to ``configure``): give them to :meth:`SGLangWorker.available_bytes`.
    A worker kvbudget does not plan (:func:`declined`) carries no scenario, and
    its :meth:`~SGLangWorker.configurator` raises with the reason.
    """
    rt = runtime or Runtime()
    sched = rt.get("schedule")
    fraction = getattr(sched, "mem_fraction_static", None)
    cap = getattr(sched, "max_total_tokens", None)
    reason = declined(kvc, rt)
    return SGLangWorker(
        scenario=None if reason is not None else scenario_from_kvc(kvc, rt), page_size=int(sched.page_size),
        mem_fraction_static=None if fraction is None else float(fraction),
        max_total_tokens=None if cap is None else int(cap), mm_reserve=mm_reserve_bytes(kvc, rt),
        is_draft_worker=bool(kvc.is_draft_worker), declined=reason, state_pool=kvc.mambaish_config is not None,
    )  # fmt: skip


class _Configurator:
    """An SGLang ``MemoryPoolConfigurator`` whose numbers come from kvbudget; where
    kvbudget cannot answer, SGLang's own configurator (``fallback()``) does."""

    def __init__(self, cfg: Any, config_cls: type, fit: Fit, fallback: Callable[[], Any]) -> None:
        self._cfg, self._config_cls, self._fit = cfg, config_cls, fit
        self._cell_size = cfg.cell_size
        self._fallback, self._sglang_cfg = fallback, None

    def _sglang(self, ours: Any) -> Any:
        return self._config_cls(
            max_total_num_tokens=ours.max_total_num_tokens, full_max_total_num_tokens=ours.full_max_total_num_tokens,
            swa_max_total_num_tokens=ours.swa_max_total_num_tokens,
            unified_memory_pool_bytes=ours.unified_memory_pool_bytes,
        )  # fmt: skip

    def _solve(self, solve: Callable[[], Any], method: str, *args: int) -> Any:
        try:
            return self._sglang(solve())
        except Exception as exc:  # noqa: BLE001 - SGLang answers whatever kvbudget could not
            logger.warning("kvbudget: %s(%s) handed to SGLang's configurator: %s: %s", method,
                           ", ".join(map(str, args)), type(exc).__name__, exc)  # fmt: skip
        if self._sglang_cfg is None:
            self._sglang_cfg = self._fallback()
        return getattr(self._sglang_cfg, method)(*args)

    def calculate_pool_sizes(self, available_bytes: int, page_size: int) -> Any:
        if self._fit == "exact":
            solve = lambda: self._cfg.plan(available_bytes, fit="exact").config  # noqa: E731
        else:
            solve = lambda: self._cfg.calculate_pool_sizes(available_bytes, page_size)  # noqa: E731
        return self._solve(solve, "calculate_pool_sizes", available_bytes, page_size)

    def calculate_pool_sizes_from_max_tokens(self, max_total_num_tokens: int, page_size: int) -> Any:
        return self._solve(lambda: self._cfg.calculate_pool_sizes_from_max_tokens(max_total_num_tokens, page_size),
                           "calculate_pool_sizes_from_max_tokens", max_total_num_tokens, page_size)  # fmt: skip

    def finalize_with_max_running_requests(self, config: Any) -> Any:
        return config


def declined(kvc: Any, runtime: Runtime | None = None) -> str | None:
    """Why kvbudget does not plan this worker's pools, or None when it does.

    A hybrid-state model (``mambaish_config``) is planned: SGLang takes its state pool
    out of the budget before it calls the pool configurator, which then sizes the KV
    pool over the stage's full-attention layers. Declined (SGLang's own configurator
    keeps them): a pipeline stage of such a model without an attention layer, the
    architectures kvbudget has not checked, an indexer it does not model, DSA beside
    a state pool, under HiSparse, the external cache linker or the CP layer split,
    and an FP4 KV cache on an attention backend kvbudget does not price."""
    from kvbudget.sglang.model import UNMODELLED_ARCHITECTURES

    rt = runtime or Runtime()
    archs = set(getattr(kvc.model_config.hf_config, "architectures", None) or ())
    if archs & UNMODELLED_ARCHITECTURES:
        return f"{', '.join(sorted(archs & UNMODELLED_ARCHITECTURES))}: pools kvbudget does not model"
    state = kvc.mambaish_config is not None and not kvc.is_hybrid_swa
    if state and not _stage_attention_layers(kvc):
        return ("no attention layer on this pipeline stage (a pure state model, or a hybrid-state model's stage): "
                "SGLang's KV pool holds no layer and its zero-KV token count is a label, as in plan_state_only")
    try:
        dsa = bool(kvc.use_mla_backend and _dsa(kvc))
    except ConfigError as exc:  # an indexer kvbudget does not model (index_kpool_compress)
        return f"the DSA indexer: {exc}"
    if dsa and state:
        return "a DSA indexer beside a state pool (its layers are the state model's), which kvbudget does not model"
    if dsa:
        mem, par = rt.get("memory"), rt.get("parallel")
        for on, what in ((kvc.server_args.enable_hisparse, "HiSparse"),
                         (mem.enable_unified_cache_external_linker, "the external cache linker"),
                         (par.enable_dsa_cache_layer_split, "the DSA cache layer split")):  # fmt: skip
            if on:
                return f"DSA under {what}, which kvbudget does not model"
    return _unpriced_backends(kvc, rt)


def install(fit: Fit = "sglang", *, pool_configurator: Any = None, runtime: Runtime | None = None) -> Callable[[], None]:
    """Replace SGLang's ``create_memory_pool_configurator`` with kvbudget's; returns the undo.

    Args:
        fit: ``"sglang"`` (SGLang's own numbers) or ``"exact"`` (the exact plan's pools).
        pool_configurator: the module to patch (default: SGLang's, imported now).
        runtime: SGLang's runtime context (default: the real modules).
    """
    if fit not in ("sglang", "exact"):
        raise InvalidConfigError(f"fit={fit!r}: expected 'sglang' or 'exact'")
    module: Any = pool_configurator or importlib.import_module("sglang.srt.model_executor.pool_configurator")
    original = module.create_memory_pool_configurator
    config_cls = module.MemoryPoolConfig
    rt = runtime or Runtime()

    def create_memory_pool_configurator(kvc: Any) -> Any:
        # Safe by construction: any input kvbudget declines or cannot read or plan is
        # SGLang's own configurator's, which then answers (or raises) as without kvbudget.
        try:
            reason = declined(kvc, rt)
            if reason is None:
                sc = scenario_from_kvc(kvc, rt)
                cfg = create_pool_configurator(sc.model, sc.serving, sc.spec)
        except Exception as exc:  # noqa: BLE001
            reason = f"kvbudget could not plan it: {type(exc).__name__}: {exc}"
        if reason is not None:
            logger.info("kvbudget: SGLang's own pool configurator plans this worker (%s)", reason)
            return original(kvc)
        # Under unified memory a hybrid-state worker's buffer is sized from its byte budget
        # (init_unified_mamba_pools): the tokens are SGLang's labels, with no padding rows for an
        # exact fit to take back, and its Default configurator alone plans no pools SGLang builds.
        serving = sc.serving
        unified_state = kvc.mambaish_config is not None and serving.enable_unified_memory and not serving.is_draft_worker
        return _Configurator(cfg, config_cls, "sglang" if unified_state else fit, lambda: original(kvc))

    module.create_memory_pool_configurator = create_memory_pool_configurator

    def uninstall() -> None:
        module.create_memory_pool_configurator = original

    return uninstall
