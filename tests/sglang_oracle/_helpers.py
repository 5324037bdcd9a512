"""The helpers lifted out of SGLang files too entangled to execute whole.

One function per file: it lifts the named definitions (see
:meth:`~._lift.Source.lift`) into a namespace holding exactly what they
reference, and registers the results as sandbox modules for the code that
imports them. Names a lifted definition references but planning never
reaches are :class:`~._strict.Poison`; classes only used in ``isinstance``
checks are :func:`~._strict.poison_class` (nothing is an instance, so the
check is False, which is the "feature off" answer).
"""

from __future__ import annotations

import ast
import functools
import logging
import typing
from dataclasses import dataclass
from enum import Enum, IntEnum, auto
from typing import Any, Callable

import torch

from ._plumbing import PREFIX, Builder, pick
from ._strict import Poison, StrictNamespace, poison_class

_TYPING = pick(vars(typing), "Any Callable Dict Iterable List Optional Tuple Type Union")


@dataclass(frozen=True)
class Helpers:
    """The lifted definitions the case builder calls directly."""

    speculative_algorithm: Any  # SpeculativeAlgorithm (spec_info.py)
    attention_arch: Any  # AttentionArch (model_config.py)
    configure_kv_cache_dtype: Callable[..., tuple[str | None, torch.dtype]]
    mambaish_config: Callable[[Any], Any]
    model_config_cls: type  # a StrictNamespace carrying ModelConfig's KV-head methods


def _common(b: Builder) -> dict[str, Any]:
    # is_cuda() -> True: SGLang sizes FP4 pools on CUDA only (is_float4_e2m1fn_x2);
    # the oracle emulates a CUDA deployment whatever machine it runs on.
    ns = b.namespace(
        "utils.common", torch=torch, lru_cache=functools.lru_cache, is_cuda=lambda: True
    )
    names = (
        "is_hip is_npu ceil_div ceil_align spec_decode_alloc_len_per_request is_float4_e2m1fn_x2"
    )
    b.source("utils/common.py").lift(ns, *names.split())
    b.provide("utils.common", pick(ns, names))
    return ns


def _speculative(b: Builder) -> Any:
    reg = b.namespace("speculative.spec_registry", **_TYPING)
    reg["CustomSpecAlgo"] = poison_class("CustomSpecAlgo")
    b.source("speculative/spec_registry.py").lift(reg, "_REGISTRY", "_RESERVED_ALIASES", "get_spec")
    ns = b.namespace(
        "speculative.spec_info", **_TYPING, Enum=Enum, auto=auto, torch=torch,
        _RESERVED_ALIASES=reg["_RESERVED_ALIASES"], _get_registered_spec=reg["get_spec"],
        CustomSpecAlgo=reg["CustomSpecAlgo"], get_spec_config=b.getters["spec"],
        _register_algorithm=Poison("spec_registry.register_algorithm"),
        resolving_view=Poison("overrides.resolving_view"),
    )  # fmt: skip
    b.source("speculative/spec_info.py").lift(ns, "SpeculativeAlgorithm")
    b.provide("speculative.spec_info", pick(ns, "SpeculativeAlgorithm"))
    return ns["SpeculativeAlgorithm"]


def _runtime_context(b: Builder) -> None:
    ns = b.namespace("runtime_context", get_spec=b.getters["spec"])
    b.source("runtime_context.py").lift(ns, "max_speculative_num_draft_tokens")
    getters = {f"get_{bag}": get for bag, get in b.getters.items()}
    b.provide("runtime_context", {**getters, **pick(ns, "max_speculative_num_draft_tokens")})


def _model_config(b: Builder) -> tuple[dict[str, Any], type]:
    src = b.source("configs/model_config.py")
    ns = b.namespace("configs.model_config", **_TYPING, IntEnum=IntEnum, Enum=Enum, auto=auto)
    names = (
        "AttentionArch _hf_arch _hf_attr is_deepseek_dsa is_deepseek_v4 is_minimax_sparse "
        "get_dsa_index_head_dim get_dsa_index_kpool dsa_layer_skips_topk"
    )
    src.lift(ns, *names.split())
    methods = {
        m: src.lift_method(ns, "ModelConfig", m)
        for m in ("get_total_num_kv_heads", "get_num_kv_heads", "get_swa_num_kv_heads")
    }
    cls = type("ModelConfig", (StrictNamespace,), {"__slots__": (), **methods})
    b.provide(
        "configs.model_config",
        pick(ns, "AttentionArch is_deepseek_dsa is_deepseek_v4 is_minimax_sparse get_dsa_index_head_dim "
                 "get_dsa_index_kpool dsa_layer_skips_topk"),
    )
    return ns, cls


class GatedDeltaHFConfig(StrictNamespace):
    """The stand-in for SGLang's ``Qwen3NextConfig`` in ``configs/hybrid_arch.py``: an
    instance is what ``hybrid_gdn_config`` (and so ``mambaish_config``) matches, the
    hf config of a hybrid-state case. Its ``full_attention_layer_ids`` is given, as the
    config class derives it from ``full_attention_interval``
    (``tests/test_sglang_state_model.py`` holds that reading to the class itself)."""

    __slots__ = ()

    def get_text_config(self, *args: object, **kwargs: object) -> GatedDeltaHFConfig:
        return self


def _hybrid_arch(b: Builder) -> Any:
    src = b.source("configs/hybrid_arch.py")
    # get_hf_text_config(cfg) -> cfg: what the real helper returns for the text-only
    # configs the oracle builds.
    ns = b.namespace("configs.hybrid_arch", get_hf_text_config=lambda config: config)
    for node in src.tree.body:  # the hybrid model config classes: isinstance-only here
        if isinstance(node, ast.ImportFrom) and node.module == "sglang.srt.configs":
            ns.update({a.name: poison_class(a.name) for a in node.names})
    ns["Qwen3NextConfig"] = GatedDeltaHFConfig  # the one class a case instantiates
    src.lift(ns, *(
        "_get_linear_attn_registry_result qwen3_next_config hybrid_lightning_config "
        "hybrid_gdn_config mamba2_config kimi_linear_config glm5_next_config "
        "hybrid_kda_config mambaish_config"
    ).split())  # fmt: skip
    b.provide("configs.hybrid_arch", pick(ns, "mambaish_config"))
    return ns["mambaish_config"]


def _cp_utils(b: Builder) -> None:
    ns = b.namespace("layers.cp.utils", get_parallel=b.getters["parallel"])
    names = (
        "is_glm_dsa_cache_layer_split_enabled get_glm_dsa_layer_split_effective_num_layers "
        "get_glm_dsa_cp_layer_shard_info get_layer_shard_range"
    )
    b.source("layers/cp/utils.py").lift(ns, *names.split())
    b.provide("layers.cp.utils", pick(ns, names.split(" ", 1)[1]))


def _dsa_pool(b: Builder) -> Any:
    """``DSATokenToKVPool`` as the sizing code reads it: its class-level constants
    (lifted from ``memory_pool.py``); anything else on it is unmapped."""
    ns = b.namespace("mem_cache.memory_pool", torch=torch)
    names = ("quant_block_size", "index_k_with_scale_buffer_dtype", "rope_storage_dtype")
    values = b.source("mem_cache/memory_pool.py").lift_class_values(ns, "DSATokenToKVPool", *names)
    return StrictNamespace("DSATokenToKVPool", **values)


def _kv_cache_configurator(b: Builder, common: dict[str, Any], mc: dict[str, Any], dsa_pool: Any) -> None:
    g = b.getters
    ns = b.namespace(
        "mem_cache.kv_cache_configurator", torch=torch, _is_hip=common["is_hip"](),
        _is_npu=common["is_npu"](), get_disagg=g["disagg"], get_exec=g["exec"], get_memory=g["memory"],
        is_deepseek_dsa=mc["is_deepseek_dsa"], DSATokenToKVPool=dsa_pool,
    )  # fmt: skip
    names = "calculate_mla_kv_cache_dim _should_elide_dsa_index_k"
    b.source("mem_cache/kv_cache_configurator.py").lift(ns, *names.split())
    b.provide("mem_cache.kv_cache_configurator", pick(ns, names))


def _kv_cache_dtype(b: Builder, common: dict[str, Any]) -> Any:
    # current_platform.is_cpu() -> False: the oracle sizes for a CUDA deployment.
    ns = b.namespace(
        "mem_cache.kv_cache_dtype", torch=torch, Optional=typing.Optional,
        _is_hip=common["is_hip"](), fp8_dtype=Poison("fp8_kernel.fp8_dtype"),
        logger=logging.getLogger(f"{PREFIX}.kv_cache_dtype"),
        current_platform=StrictNamespace("current_platform", is_cpu=lambda: False),
    )  # fmt: skip
    src = b.source("mem_cache/kv_cache_dtype.py")
    src.lift(ns, "TORCH_DTYPE_TO_KV_CACHE_STR", "configure_kv_cache_dtype")
    return ns["configure_kv_cache_dtype"]


def _page_interleave(b: Builder, common: dict[str, Any], spec_algo: Any) -> None:
    # Sharding is off (get_parallel().enable_kv_cache_sharding is False) and a draft
    # worker's allocator is no PageInterleavePoolAllocator: the real helpers return 0.
    g = b.getters
    ns = b.namespace(
        "mem_cache.page_interleave", **_TYPING, torch=torch, ceil_align=common["ceil_align"],
        get_parallel=g["parallel"], get_schedule=g["schedule"], get_spec=g["spec"],
        SpeculativeAlgorithm=spec_algo,
        PageInterleavePoolAllocator=poison_class("PageInterleavePoolAllocator"),
        page_interleave_pool=Poison("page_interleave_pool"), PageShardSpec=Poison("PageShardSpec"),
        get_kv_shard_group=Poison("get_kv_shard_group"),
        _page_shard_row_bytes=Poison("_page_shard_row_bytes"),
    )  # fmt: skip
    b.source("mem_cache/page_interleave.py").lift(ns, *(
        "_KV_SHARD_SCRATCH_PREFIX_CONTEXTS get_shared_kv_shard_pool get_kv_shard_group_info "
        "make_page_shard_spec compute_page_shard_scratch_bytes"
    ).split())  # fmt: skip
    b.provide("mem_cache.page_interleave", pick(ns, "compute_page_shard_scratch_bytes"))


def _small_ones(b: Builder) -> None:
    df = b.namespace("speculative.dflash_utils", Optional=typing.Optional)
    b.source("speculative/dflash_utils.py").lift(df, "scale_kv_cell_size_per_token_for_dflash")
    b.provide("speculative.dflash_utils", pick(df, "scale_kv_cell_size_per_token_for_dflash"))

    qsa = b.namespace("layers.attention.qsa.config", Optional=typing.Optional)
    qsa["_parse_compressed"] = Poison("qsa.config._parse_compressed")
    b.source("layers/attention/qsa/config.py").lift(qsa, "_text_config", "parse_qsa_profile")
    b.provide("layers.attention.qsa.config", pick(qsa, "parse_qsa_profile"))
    b.provide("mem_cache.qsa_kv_pool", {
        "QSATokenToKVPool": Poison("qsa_kv_pool.QSATokenToKVPool"),
        "resolve_qsa_indexer_dtype": Poison("qsa_kv_pool.resolve_qsa_indexer_dtype"),
    })  # fmt: skip


def lift_helpers(b: Builder) -> Helpers:
    """Lifts every helper and registers the sandbox modules that serve them."""
    common = _common(b)
    spec_algo = _speculative(b)
    _runtime_context(b)
    mc, model_config_cls = _model_config(b)
    mambaish = _hybrid_arch(b)
    _cp_utils(b)
    dsa_pool = _dsa_pool(b)
    b.provide("mem_cache.memory_pool", {"DSATokenToKVPool": dsa_pool})
    _kv_cache_configurator(b, common, mc, dsa_pool)
    configure = _kv_cache_dtype(b, common)
    _page_interleave(b, common, spec_algo)
    _small_ones(b)
    return Helpers(spec_algo, mc["AttentionArch"], configure, mambaish, model_config_cls)
