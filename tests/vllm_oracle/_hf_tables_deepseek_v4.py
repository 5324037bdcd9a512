"""DeepSeek-V4 (``DeepseekV4ForCausalLM``) in the model-reading oracle: vLLM 0.33.0's
``vllm/models/deepseek_v4`` (NVIDIA branch, a Hopper GPU), built layer by layer from the wheel, and the
spec each registered layer gives, with vLLM's own spec classes (the planning sandbox's
``kv_cache_interface``, executed whole). Restated glue, as in :mod:`._hf_tables_qwen4_exp`:

* Lifted: ``DeepseekV4ForCausalLM`` / ``DeepseekV4Model`` kept to their config, MegaMoE guard and
  ``make_layers``; ``DeepseekV4DecoderLayer`` to its attention choice (``_select_dsv4_attn_cls``) and
  its MoE (``DeepseekV4MoE``'s MegaMoE guards and its shared-expert ``DeepseekV4MLP``, whose activation
  check is kept); ``DeepseekV4FlashMLAAttention`` (its backends, ``get_padded_num_q_heads``) over
  ``DeepseekV4Attention`` kept to its geometry, asserts, KV dtype (``_resolve_dsv4_kv_cache_dtype``),
  indexer, SWA cache, registration and compressor, with its own ``get_kv_cache_spec``;
  ``DeepseekV4Indexer`` to its geometry, ``dsa_indexer_uses_fp4`` and caches; ``DeepseekCompressor`` to
  its geometry, state cache and head-dim check; ``DeepseekV4IndexerCache``, ``CompressorStateCache`` and
  ``DeepseekV4SWACache`` whole, with their ``get_kv_cache_spec``; the backends' block-size and layout
  declarations, and ``Platform._preferred_block_size_for_backends`` (the block vLLM picks after the
  model is built, ``update_block_size_for_backend``, when ``--block-size`` is not given).
* Restated: the device (CUDA, capability 9.0), ``AttentionConfig`` defaults (no backend chosen,
  ``indexer_kv_dtype`` auto), ``KernelConfig`` defaults (``moe_backend`` auto, no JIT warmup), no
  quantization, no expert parallelism, linears / norms / rope inert, CUDA streams and events inert.
* A record: each registered layer's name, stage, spec class and fields, and vLLM's
  ``page_size_bytes`` for it.
"""

from __future__ import annotations

import builtins
import copy
import functools
import itertools
import math
from typing import Any

import torch

from oracle_kit.lift import Source
from oracle_kit.strict import Poison, StrictModule

from ._hf_lift import _inert, _lift_class, _load_error, _Module, vllm_refusals
from ._strict import StrictConfig

__all__ = ["deepseek_v4_layers"]

_V4 = "vllm/models/deepseek_v4"
_SPEC_FIELDS = ("block_size", "num_kv_heads", "head_size", "head_size_v", "tokens_per_state", "sliding_window",
                "alignment", "state_content_bytes", "model_version", "cache_dtype_str", "block_stride_alignment",
                "max_tp_shards", "page_size_padded")  # fmt: skip


def _root() -> Any:
    from ._hf import _root as root

    return root()


def _keep(text: str, *tests: str) -> frozenset[str]:
    return frozenset(text.split()) | {f"if {t}" for t in tests}


class _Logger:
    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


@functools.cache
def _interface() -> dict[str, Any]:
    """vLLM's ``kv_cache_interface`` (the planning sandbox's, executed whole)."""
    from . import load

    return load().iface  # type: ignore[no-any-return]


@functools.cache
def _namespace() -> dict[str, Any]:
    """The lifted classes, in one namespace over the model-reading oracle's common stand-ins."""
    from ._hf import _env

    root = _root()
    env = _env(root)
    common = env.models["llama"]
    iface = _interface()
    src = functools.partial(Source, root)
    backend = src("vllm/v1/attention/backend.py")
    layout = src("vllm/v1/kv_cache_layout.py")
    cuda = StrictModule("torch.cuda", {"Stream": _inert("torch.cuda.Stream"), "Event": _inert("torch.cuda.Event")})
    torch_stub = StrictModule("torch", {**{n: getattr(torch, n) for n in (
        "float32", "int32", "int64", "uint8", "bfloat16", "float8_e4m3fn", "empty", "tensor", "randint", "dtype")},
        "cuda": cuda})  # fmt: skip
    # restated: a Hopper GPU under CUDA
    platform = StrictModule("current_platform", {
        "get_device_capability": lambda: StrictConfig(major=9, minor=0), "is_rocm": lambda: False,
        "is_cuda": lambda: True, "is_xpu": lambda: False, "is_cpu": lambda: False, "device_type": "cuda",
        "is_device_capability_family": lambda family: family == 90})  # fmt: skip
    ns: dict[str, Any] = {"__name__": "vllm_oracle.hf.deepseek_v4", "torch": torch_stub, "nn": common["nn"],
                          "_Module": _Module, "_unlifted": common["_unlifted"], "logger": _Logger(),
                          "current_platform": platform, "Any": Any, "ClassVar": Any, "math": math,
                          "itertools": itertools,
                          "dataclass": __import__("dataclasses").dataclass, "Enum": __import__("enum").Enum}  # fmt: skip
    for n in ("get_tensor_model_parallel_world_size", "get_pp_group", "get_current_vllm_config",
              "extract_layer_index", "make_layers", "maybe_prefix"):
        ns[n] = common[n]
    for n in ("MergedColumnParallelLinear", "ColumnParallelLinear", "RowParallelLinear", "ReplicatedLinear",
              "RMSNorm", "VocabParallelEmbedding", "ParallelLMHead", "LogitsProcessor", "PPMissingLayer",
              "GateLinear", "SiluAndMul", "SiluAndMulWithClamp", "make_attention_sink", "build_deepseek_v4_rope"):
        ns[n] = _inert(n)
    ns.update({n: iface[n] for n in ("MLAAttentionSpec", "SlidingWindowMLASpec", "get_kv_quant_mode")})
    backend.lift(ns, "MultipleOf")
    layout.lift(ns, "KVCacheLayout")
    # The backends' block sizes and layouts (AttentionBackend's defaults, then each class's own).
    base = backend.lift_class(ns, "AttentionBackend", ("get_supported_kernel_block_sizes", "supports_block_size",
                                                       "get_preferred_block_size", "supported_kv_cache_layouts",
                                                       "is_ssm"), ("object",))  # fmt: skip
    ns["AttentionBackend"] = base
    mla = src(f"{_V4}/sparse_mla.py")
    ns["DeepseekV4SparseMLABackend"] = mla.lift_class(ns, "DeepseekV4SparseMLABackend", (
        "get_supported_kernel_block_sizes", "get_supported_head_sizes"), ("AttentionBackend",))  # fmt: skip
    ns["DeepseekV4FlashMLABackend"] = mla.lift_class(ns, "DeepseekV4FlashMLABackend", ("get_name",),
                                                     ("DeepseekV4SparseMLABackend",))  # fmt: skip
    swa = src("vllm/v1/attention/backends/mla/sparse_swa.py")
    ns["DeepseekSparseSWABackend"] = swa.lift_class(ns, "DeepseekSparseSWABackend", (
        "get_name", "get_supported_kernel_block_sizes", "get_preferred_block_size"), ("AttentionBackend",))
    # restated: the FlashMLA SWA backend only swaps the metadata builder
    ns["DeepseekSparseSWAFlashMLABackend"] = type("DeepseekSparseSWAFlashMLABackend",
                                                  (ns["DeepseekSparseSWABackend"],), {})  # fmt: skip
    comp = src(f"{_V4}/compressor.py")
    ns["CompressorBackend"] = comp.lift_class(ns, "CompressorBackend", ("get_name", "get_supported_kernel_block_sizes"),
                                              ("AttentionBackend",))  # fmt: skip
    idx = src("vllm/v1/attention/backends/mla/indexer.py")
    idx.lift(ns, "DSA_INDEXER_KV_DTYPES", "dsa_indexer_uses_fp4")
    ns["DeepseekV32IndexerBackend"] = idx.lift_class(ns, "DeepseekV32IndexerBackend", (
        "get_name", "get_supported_kernel_block_sizes"), ("AttentionBackend",))  # fmt: skip
    ns["DeepseekV4IndexerBackend"] = idx.lift_class(ns, "DeepseekV4IndexerBackend", (
        "get_name", "supported_kv_cache_layouts", "get_supported_kernel_block_sizes"), ("DeepseekV32IndexerBackend",))
    # The layers: caches whole, the compressor, indexer and attention kept to what fixes their caches.
    _lift_class(swa, ns, "DeepseekV4SWACache", ("get_kv_cache_spec", "get_attn_backend"))
    _lift_class(comp, ns, "CompressorStateCache", ("get_kv_cache_spec", "get_attn_backend"))
    ns["MXFP4_BLOCK_SIZE"] = 32  # common/ops/fused_indexer_q.py's constant (restated)
    _lift_class(comp, ns, "DeepseekCompressor", (), _keep(
        """self.compress_ratio self.hidden_size self.head_dim self.rotate self.prefix self.k_cache_prefix
        self.use_fp4_cache config self.rope_head_dim self.nope_head_dim self.rms_norm_eps self.overlap self.coff
        state_dtype self.state_cache""", "self.head_dim == 512"))  # fmt: skip
    attn = src(f"{_V4}/attention.py")
    attn.lift(ns, "_resolve_dsv4_kv_cache_dtype")
    _lift_class(attn, ns, "DeepseekV4IndexerCache", ("get_kv_cache_spec", "get_attn_backend"))
    _lift_class(attn, ns, "DeepseekV4Indexer", ("_get_cache_cls", "_get_compressor_cls"), _keep(
        """self.vllm_config self.config self.quant_config self.topk_tokens self.n_head self.head_dim self.rope_dim
        self.q_lora_rank self.compress_ratio self.use_fp4_kv self.prefix k_cache_head_dim self.quant_block_size
        self.k_cache self.compressor""", "self.use_fp4_kv"))  # fmt: skip
    _lift_class(attn, ns, "DeepseekV4Attention", ("get_kv_cache_spec", "_uses_fp8_ds_mla_layout", "_get_indexer_cls",
                                                  "get_attn_backend"), _keep(
        """config quant_config cache_config tp_size layer_id self.prefix self.hidden_size self.n_heads
        self.n_local_heads self.q_lora_rank self.o_lora_rank self.head_dim self.rope_head_dim self.nope_head_dim
        self.n_groups self.n_local_groups self.window_size self.eps self.padded_heads self.indexer
        self.topk_indices_buffer self.max_num_batched_tokens self.max_model_len self.kv_cache_dtype
        self.kv_cache_torch_dtype self.swa_cache_layer compilation_config self.kv_cache self.compressor""",
        "layer_id < config.num_hidden_layers", "self.compress_ratio == 4", "prefix", "self.compress_ratio > 1"))
    flash = src(f"{_V4}/nvidia/flashmla.py")
    _lift_class(flash, ns, "DeepseekV4FlashMLAAttention", ("get_padded_num_q_heads",), frozenset())
    # The model: attention choice, MoE guards and the shared expert's activation check.
    model = src(f"{_V4}/nvidia/model.py")
    ns.update(MEGA_MOE_BACKENDS=frozenset({"deep_gemm_mega_moe", "flashinfer_moe_ep"}),
              NATIVE_MEGA_MOE_BACKENDS=frozenset({"deep_gemm_mega_moe"}),
              AttentionBackendEnum=StrictConfig(**{n: n for n in (
                  "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE_DSV4",
                  "FLASHMLA_SPARSE", "FLASHMLA_SPARSE_DSV4")}),
              DeepseekV4FlashInferSM120Attention=Poison("DeepseekV4FlashInferSM120Attention"),
              DeepseekV4FlashInferMLAAttention=Poison("DeepseekV4FlashInferMLAAttention"),
              IMAGE_SENTINEL_BASE_ID=Poison("IMAGE_SENTINEL_BASE_ID"))  # fmt: skip
    model.lift(ns, "_select_dsv4_attn_cls", "_use_sequence_parallel")
    _lift_class(model, ns, "DeepseekV4MLP", (), frozenset())
    _lift_class(model, ns, "DeepseekV4MoE", (), _keep(
        """self.tp_size config quant_config moe_backend self.use_native_mega_moe self.scoring_func self.renormalize
        self.swiglu_limit""", "config.n_shared_experts is None"))  # fmt: skip
    _lift_class(model, ns, "DeepseekV4DecoderLayer", (), _keep(
        "config self.hidden_size self.use_sequence_parallel self.rms_norm_eps self.attn self.ffn"))
    _lift_class(model, ns, "DeepseekV4Model", (), _keep(
        """config quant_config self.config self.quant_config self.parallel_config self.use_native_mega_moe
        self.use_sequence_parallel aux_stream_list self.topk_indices_buffer self.start_layer self.end_layer
        self.layers"""))  # fmt: skip
    _lift_class(model, ns, "DeepseekV4ForCausalLM", (), _keep("config self.config expert_dtype self.model"))
    # Platform._preferred_block_size_for_backends (its imports answered here).
    ctx = __import__("contextlib").nullcontext
    mods = {"vllm.config.vllm": StrictModule("v", {"set_current_vllm_config": lambda vc: ctx()}),
            "vllm.v1.attention.backend": StrictModule("b", {"MultipleOf": ns["MultipleOf"]})}

    def importer(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        return mods[name] if name in mods else builtins.__import__(name, globals, locals, fromlist, level)

    pns = {"__name__": "vllm_oracle.hf.deepseek_v4_platform", "__builtins__": dict(builtins.__dict__,
           __import__=importer), "math": math, "itertools": itertools}  # fmt: skip
    ns["_preferred_block_size"] = src("vllm/platforms/interface.py").lift_member(
        pns, "Platform", "_preferred_block_size_for_backends")
    return ns


def _record(name: str, spec: Any, stage: int) -> dict[str, Any]:
    out = {"name": name, "pp_stage": stage, "spec": type(spec).__name__,
           "dtype": str(spec.dtype).removeprefix("torch."), "kv_quant_mode": spec.kv_quant_mode.name,
           "page_size_bytes": spec.page_size_bytes}  # fmt: skip
    out.update({f: getattr(spec, f, None) for f in _SPEC_FIELDS})
    return out


def deepseek_v4_layers(config: Any, *, tp: int = 1, pp: int = 1, model_dtype: str = "bfloat16",
                       kv_cache_dtype: str = "auto", block_size: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """vLLM 0.33.0's KV-cache layers for a loaded DeepSeek-V4 ``config`` (transformers' class) on a
    Hopper GPU, per PP stage in registration order (``block_size``: ``--block-size``, or None for
    vLLM's choice from the backends). vLLM's refusal is :class:`VllmLoadError`."""
    from ._hf import _CTX, _env, _model_config

    env = _env(_root())
    ns = _namespace()
    config = copy.deepcopy(config)
    try:
        mc = _model_config(env, config)
        mc.dtype = env.dtypes[model_dtype]
        attention = StrictConfig(backend=None, indexer_kv_dtype="auto", resolve_indexer_kv_dtype=lambda d: d)
        parallel = StrictConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=1,
                                enable_expert_parallel=False, decode_context_parallel_size=1)  # fmt: skip
        base = dict(quant_config=None, speculative_config=None, parallel_config=parallel,
                    attention_config=attention, use_v2_model_runner=True,
                    kernel_config=StrictConfig(moe_backend="auto", enable_jit_warmup=False),
                    scheduler_config=StrictConfig(max_num_batched_tokens=8192, max_num_seqs=256),
                    model_config=StrictConfig(hf_config=config, hf_text_config=mc.hf_text_config, dtype=mc.dtype,
                                              max_model_len=8192))  # fmt: skip
    except Exception as e:
        raise _load_error(e) from e
    contexts: list[dict[str, Any]] = []
    configs: list[Any] = []
    for rank in range(pp):
        context: dict[str, Any] = {}
        cache = StrictConfig(block_size=16 if block_size is None else block_size, cache_dtype=kv_cache_dtype)
        vllm_config = StrictConfig(compilation_config=StrictConfig(static_forward_context=context), cache_config=cache,
                                   **base)  # fmt: skip
        pp_group = StrictConfig(rank_in_group=rank, world_size=pp, is_first_rank=rank == 0, is_last_rank=rank == pp - 1)
        _CTX.update(tp=tp, pp_group=pp_group, vllm_config=vllm_config)
        with vllm_refusals(clear=_CTX):
            ns["DeepseekV4ForCausalLM"](vllm_config=vllm_config, prefix="")
        contexts.append(context)
        configs.append(vllm_config)
    # update_block_size_for_backend: each worker, after its model is built, from its own layers
    with vllm_refusals():
        for context, vc in zip(contexts, configs):
            backends: list[Any] = []
            for layer in context.values():
                b = layer.get_attn_backend()
                if not b.is_ssm() and b not in backends:
                    backends.append(b)
            if block_size is None and backends:
                vc.cache_config.block_size = ns["_preferred_block_size"].__func__(None, backends, 16, vc)
        specs = [(name, layer.get_kv_cache_spec(vc), rank)
                 for rank, (ctx, vc) in enumerate(zip(contexts, configs)) for name, layer in ctx.items()]  # fmt: skip
        out = [_record(name, spec, rank) for name, spec, rank in specs if spec is not None]
    return out
