"""GLM-5-Next in the model-reading oracle's tables (:mod:`._hf_tables`, which imports this module at its
end): vLLM 0.33.0's ``vllm/models/glm5next`` (``common/``: the CUDA build), built layer by layer from the
wheel, and the spec each registered layer gives. Restated glue, as there: what is lifted of each file,
the stand-ins its namespaces get, and how a layer becomes a record.

* Lifted (``MODELS``): from ``common/model.py`` ``_is_moe``, ``_is_kda_layer``, ``_validate_supported_config``,
  ``get_sparse_topk_buffer_width``, the mHC constants, ``Glm5NextMLP`` / ``Glm5NextMoE`` /
  ``Glm5NextDecoderLayer`` / ``Glm5NextModel`` whole; from ``common/attention.py`` ``Glm5NextIndexerCache``
  and ``Glm5NextTailCache`` whole with their ``get_kv_cache_spec`` (over ``DeepseekV32IndexerCache``'s,
  lifted from ``deepseek_v2.py``), ``Indexer`` kept to its asserts, geometry and two caches,
  ``Glm5NextMLAAttention`` kept to its geometry, TP assert, RoPE and indexer blocks and its
  ``MultiHeadLatentAttentionWrapper``; from ``common/kda.py`` ``_resolve_kda_prefill_backend`` and
  ``Glm5NextLinearAttention`` kept to its geometry, assert, state shape and dtype (its classmethods
  lifted), backend choice and registration, over the lifted ``GatedDeltaNetAttention``; from
  ``model_executor/layers/mamba/kda_checkpoint.py`` ``kda_prefill_checkpoint_alignment``.
* Restated: CUDA on Hopper (capability 9.0; no ROCm, no gfx950 fusion: ``resolve_layer_fused_shared_expert``
  False), one EP rank, no EPLB, ``kernel_config.enable_jit_warmup`` off, the MoE gate a free record
  (``GateLinear``: attributes set and read back), spec classes as dataclass records of their arguments,
  the top-k buffer on the meta device. The multimodal class's vision tower is not built (no KV); its
  language model is the causal LM at ``language_model``.
* A record (:func:`glm5_next_layers`): each cache's ``get_kv_cache_spec``; a KDA layer's shapes and
  dtypes from its own ``get_state_shape`` / ``get_state_dtype``, its prefill-checkpoint alignment from
  the backend it resolved.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import torch

from oracle_kit.lift import Source

from ._hf_lift import _load_error, vllm_refusals
from ._hf_tables import MODELS, NAMESPACES
from ._hf_tables_minimax_m3 import _attention_config
from ._strict import StrictConfig

__all__ = ["glm5_next_layers"]

_PKG = "models/glm5next/common"
_MODEL, _ATTN, _KDA = f"{_PKG}/model", f"{_PKG}/attention", f"{_PKG}/kda"
_GDN = "model_executor/layers/mamba/gdn/base"
_CKPT = "model_executor/layers/mamba/kda_checkpoint"


@dataclasses.dataclass(kw_only=True)
class _Spec:
    """A spec class stand-in: its kind and the arguments it was built with (``replace`` works on it)."""

    kind: str
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: Any
    head_size_v: int | None = None
    max_tp_shards: int = 1
    cache_role: Any = None
    tokens_per_state: int = 1
    dcp_sharded: bool = True


@dataclasses.dataclass(kw_only=True)
class _MLASpec(_Spec):
    kind: str = "mla"


@dataclasses.dataclass(kw_only=True)
class _RingSpec(_Spec):
    kind: str = "circular_buffer"


class _Free:
    """Restated: a module whose attributes are set and read back (the MoE gate; no KV)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        self.out_dtype = k.get("out_dtype")


def _keep(text: str, *tests: str) -> frozenset[str]:
    return frozenset(text.split()) | {f"if {t}" for t in tests}


@functools.cache
def _lifted_divide() -> Any:
    from ._hf import _root

    ns: dict[str, Any] = {"__name__": "glm5_next_divide"}
    Source(_root(), "vllm/distributed/utils.py").lift(ns, "ensure_divisibility", "divide")
    return ns["divide"]


MODELS.update({
    _CKPT: (["kda_prefill_checkpoint_alignment"], "", {}),
    _ATTN: ([("deepseek_v2:DeepseekV32IndexerCache", "get_kv_cache_spec"),
             ("Glm5NextIndexerCache", "get_kv_cache_spec"), ("Glm5NextTailCache", "get_kv_cache_spec"),
             ("Indexer", _keep("""self.vllm_config self.config self.topk_tokens self.n_head self.head_dim self.rope_dim
                self.index_kpool self.q_lora_rank self.quant_block_size self.k_cache self.tail_cache""")),
             ("Glm5NextMLAAttention", _keep("""self.hidden_size self.qk_nope_head_dim self.qk_rope_head_dim self.qk_head_dim
                self.v_head_dim self.q_lora_rank self.kv_lora_rank self.num_heads tp_size self.num_local_heads
                self.scaling self.max_position_embeddings proj_input_size self.kv_a_layernorm self.kv_b_proj self.o_proj
                rope_parameters self.is_v32 mla_modules self.mla_attn""", "self.q_lora_rank is not None",
                "not skip_rope", "self.is_v32"))],
            "DeepSeekV2FusedQkvAProjLinear SparseAttnIndexerKpool", {"yarn_get_mscale": "deepseek_v2"}),
    _KDA: (["_resolve_kda_prefill_backend",
            ("Glm5NextLinearAttention", "get_state_shape", "get_state_dtype", _keep(
                """self.head_dim self.num_heads self.conv_size self.local_num_heads projection_size
                self.local_projection_size _ recurrent_state_shape recurrent_state_dtype compilation_config
                compilation_config.static_forward_context[prefix] self.kda_lower_bound additional_config
                self.kda_prefill_backend"""))],
           "", {"GatedDeltaNetAttention": _GDN}),
    _MODEL: (["deepseek_v2:_get_moe_router_dtype", "get_sparse_topk_buffer_width", "_MHC_TAU", "_MHC_POST_MULT_VALUE",
              "_is_moe", "_is_kda_layer", "_validate_supported_config", "Glm5NextMLP", "Glm5NextMoE",
              "Glm5NextDecoderLayer", "Glm5NextModel"],
             "FusedMoEFactory SiluAndMulWithClamp MHCPreOp MHCPostOp MHCFusedPostPreOp",
             {"Glm5NextMLAAttention": _ATTN, "Glm5NextLinearAttention": _KDA}),
})  # fmt: skip
_HOPPER = StrictConfig(is_cuda=lambda: True, is_rocm=lambda: False, device_type="meta",
                       get_device_capability=lambda: StrictConfig(major=9, minor=0))  # fmt: skip
NAMESPACES.update({
    _ATTN: {"MLAAttentionSpec": _MLASpec, "CircularBufferSpec": _RingSpec, "torch": torch,
            "SparseCacheRole": StrictConfig(INDEXER="indexer"),
            "cdiv": lambda a, b: -(-a // b), "next_power_of_2": lambda n: 1 if n < 1 else 1 << (n - 1).bit_length()},
    _KDA: {"current_platform": _HOPPER, "torch": torch, "divide": lambda a, b: _lifted_divide()(a, b),
           "scatter_states": StrictConfig(register_warmup=lambda **kw: None), "is_conv_state_dim_first": lambda: False},
    _MODEL: {"current_platform": _HOPPER, "torch": torch, "GateLinear": _Free, "round_up": lambda x, y: -(-x // y) * y,
             "get_ep_group": lambda: StrictConfig(device_group=StrictConfig(size=lambda: 1), rank_in_group=0),
             "resolve_layer_fused_shared_expert": lambda quant_config, prefix: False},
})  # fmt: skip


def _root() -> Any:
    from ._hf import _root as root

    return root()


@functools.cache
def _with_base_init(cls: type, base: type) -> None:
    """Restated: ``Glm5NextLinearAttention.__init__`` runs ``super().__init__`` inside a ``try`` (its quant
    config swapped out, which owns no KV), a statement the lifted skeleton does not keep: run it first."""
    lifted = cls.__init__

    def init(self: Any, config: Any, vllm_config: Any, prefix: str = "") -> None:
        base.__init__(self, config, vllm_config, prefix)
        lifted(self, config, vllm_config, prefix)

    cls.__init__ = init  # type: ignore[misc]


def _records(env: Any, context: dict[str, Any], vllm_config: Any, block_size: int) -> list[dict[str, Any]]:
    kda = env.models[_KDA]["Glm5NextLinearAttention"]
    align = env.models[_CKPT]["kda_prefill_checkpoint_alignment"]
    out: list[dict[str, Any]] = []
    for name, layer in context.items():
        if isinstance(layer, kda):
            out.append({"name": name, "kind": "mamba", "state_shapes": [list(x) for x in layer.get_state_shape()],
                        "state_dtypes": [str(d).removeprefix("torch.") for d in layer.get_state_dtype()],
                        "mamba_type": "gdn_attn", "checkpoint_alignment": align(layer.kda_prefill_backend)})
            continue
        if hasattr(type(layer), "get_kv_cache_spec") and not type(layer).__name__ == "MLAAttention":
            spec = layer.get_kv_cache_spec(vllm_config)
            kind = "mla_indexer" if spec.cache_role == "indexer" else spec.kind
            out.append({"name": name, "kind": kind, "num_kv_heads": spec.num_kv_heads, "head_size": spec.head_size,
                        "head_size_v": spec.head_size_v, "dtype": str(spec.dtype).removeprefix("torch."),
                        "tokens_per_state": spec.tokens_per_state, "dcp_sharded": spec.dcp_sharded,
                        "block_size": None if spec.block_size == block_size and kind != "circular_buffer"
                        else spec.block_size})  # fmt: skip
        else:  # MLAAttention: the latent cache (its spec stores cache_config.cache_dtype)
            out.append({"name": name, "kind": "mla", "num_kv_heads": 1, "head_size": layer.head_size,
                        "head_size_v": 0, "dtype": None, "kv_cache_dtype": vllm_config.cache_config.cache_dtype,
                        "tokens_per_state": 1, "dcp_sharded": True, "block_size": None})  # fmt: skip
    return out


def glm5_next_layers(config: Any, *, tp: int = 1, model_dtype: str = "bfloat16", kv_cache_dtype: str = "auto",
                     block_size: int = 16, mamba_cache_dtype: str = "auto",
                     mamba_ssm_cache_dtype: str = "auto") -> list[dict[str, Any]]:  # fmt: skip
    """vLLM 0.33.0's KV-cache layers for a loaded GLM-5-Next ``config`` (transformers' class), in
    registration order, one PP stage, no drafter (``block_size``: the engine's, as the layers are built
    under it). vLLM's refusal is :class:`VllmLoadError`."""
    from ._hf import _CTX, _env, _model_config

    env = _env(_root())
    config = copy.deepcopy(config)
    multimodal = config.architectures[0].endswith("Generation")
    try:
        mc = _model_config(env, config)
        mc.dtype = env.dtypes[model_dtype]
        text = mc.hf_text_config
        cache = StrictConfig(block_size=block_size, cache_dtype=kv_cache_dtype, kv_cache_dtype_skip_layers=[],
                             mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                             mamba_cache_mode="align")  # fmt: skip
        parallel = StrictConfig(tensor_parallel_size=tp, pipeline_parallel_size=1, use_sequence_parallel_moe=False,
                                enable_eplb=False, enable_expert_parallel=False, data_parallel_size=1,
                                prefill_context_parallel_size=1, decode_context_parallel_size=1,
                                eplb_config=StrictConfig(num_redundant_experts=0))  # fmt: skip
        model = StrictConfig(hf_config=text, hf_text_config=text, dtype=mc.dtype, max_model_len=8192,
                             multimodal_config=None)  # fmt: skip
    except Exception as e:
        raise _load_error(e) from e
    context: dict[str, Any] = {}
    vllm_config = StrictConfig(
        model_config=model, cache_config=cache, quant_config=None, speculative_config=None, parallel_config=parallel,
        attention_config=_attention_config(), num_speculative_tokens=0, additional_config={},
        kernel_config=StrictConfig(enable_jit_warmup=False), compilation_config=StrictConfig(static_forward_context=context),
        scheduler_config=StrictConfig(max_num_batched_tokens=8192, max_num_seqs=256))  # fmt: skip
    pp_group = StrictConfig(rank_in_group=0, world_size=1, is_first_rank=True, is_last_rank=True)
    _CTX.update(tp=tp, pp_group=pp_group, vllm_config=vllm_config)
    prefix = "language_model.model" if multimodal else "model"
    _with_base_init(env.models[_KDA]["Glm5NextLinearAttention"], env.models[_GDN]["GatedDeltaNetAttention"])
    with vllm_refusals(NameError, clear=_CTX):  # a NameError: an oracle gap, not vLLM's refusal
        env.models[_MODEL]["Glm5NextModel"](vllm_config=vllm_config, prefix=prefix)
        return _records(env, context, vllm_config, block_size)
