"""Qwen4-Exp in the model-reading oracle's tables (:mod:`._hf_tables`, which imports this module at its
end): vLLM 0.33.0's ``vllm/models/qwen4_exp`` (NVIDIA branch), built layer by layer from the wheel, and
the spec each registered layer gives. Restated glue, as there: what is lifted of each file, the
stand-ins its namespaces get, and how a layer becomes a record.

* Lifted (``MODELS``): ``Qwen4ExpModel`` kept to its config and ``make_layers``; ``Qwen4ExpDecoderLayer``
  to its PLE choice (``ple_layer_ids``), its attention choice and its MoE block (``Qwen4ExpSparseMoeBlock``
  over ``Qwen3NextSparseMoeBlock``'s TP check); ``Qwen4ExpQSAAttention`` to its checks, geometry, KV dtype,
  indexer and registration, with its own ``get_kv_cache_spec``; ``QSAIndexer`` to its ratio, dtypes and
  two caches; ``_QSAStateCache`` / ``QSAKeyStateCache`` / ``QSACompressedKeyCache`` whole, with their
  ``get_kv_cache_spec``; ``Qwen4ExpPLELayer`` to its geometry and registration with its state
  classmethods; ``Qwen4ExpForCausalLM``'s gated-delta-net and PLE state classmethods;
  ``Qwen3NextAttention`` (lifted by ``._hf_tables``) and Qwen's gated delta net (``_StateLayer``).
* The config hook: ``Qwen4ExpForConditionalGenerationConfig.verify_and_update_config``'s own statements
  (its Qwen3.5 call replaced by the lifted Qwen3.5 hook), then the causal LM's ``_strip_qwen4_exp_mrope``.
* The multimodal class: its ``use_deepstack`` statement and its PP assert (lifted), then the causal LM
  at ``language_model`` (the vision tower is not built: it owns no KV).
* Restated: ``ModelConfig.uses_mrope`` (a ``mrope_section`` / ``xdrope_section`` list in the flat
  ``rope_parameters`` of the outer or text config), CUDA (no HC sequence parallelism, no LoRA),
  ``AttentionConfig`` defaults (``indexer_kv_dtype`` auto), rope and linears inert.
* A record (:func:`qwen4_exp_layers`): the layer's ``get_kv_cache_spec`` on spec stand-ins that keep their
  arguments (the engine block size passed through; ``block_size`` None where it is the engine's); a
  state layer's shapes and dtypes from its class (the GDN's: the model class's classmethods).
"""

from __future__ import annotations

import ast
import copy
import functools
from typing import Any

import torch

from oracle_kit.lift import Source

from ._hf_lift import _lift_stmts, _load_error, _run, _stores, vllm_refusals
from ._hf_tables import MODELS, NAMESPACES
from ._hf_tables_inkling import _kv_cache_dtype_str_to_dtype
from ._hf_tables_minimax_m3 import _attention_config
from ._strict import StrictConfig

__all__ = ["qwen4_exp_layers"]

_PKG = "models/qwen4_exp"
_MODEL, _QSA, _INDEXER = f"{_PKG}/nvidia/model", f"{_PKG}/nvidia/qsa", f"{_PKG}/nvidia/indexer_qsa"
_CACHE, _PLE = f"{_PKG}/common/qsa_cache", f"{_PKG}/nvidia/ple_layer"
_STATE_METHODS = tuple(f"get_{k}_mamba_state_{w}_from_config" for k in ("gdn", "ple") for w in ("shape", "dtype"))


def _spec(kind: str) -> Any:
    """A spec class stand-in: the spec's kind and the arguments it was built with."""
    return lambda **kw: {"kind": kind, **kw}


def _keep(text: str, *tests: str) -> frozenset[str]:
    return frozenset(text.split()) | {f"if {t}" for t in tests}


MODELS.update({
    _CACHE: (["_QSAStateCache", ("QSAKeyStateCache", "get_kv_cache_spec"),
              ("QSACompressedKeyCache", "get_kv_cache_spec")], "", {}),
    _INDEXER: ([("QSAIndexer", _keep("""self.layer_id self.index_n_heads self.index_kv_heads self.index_head_dim
        self.token_topk self.compress_ratio self.prefix cache_config cache_prefix self.indexer_kv_dtype
        self.indexer_dtype self.raw_key_cache self.compressed_key_cache torch""", "self.indexer_kv_dtype == 'fp8'"))],
               "", {"QSAKeyStateCache": _CACHE, "QSACompressedKeyCache": _CACHE}),
    _QSA: (["qsa_kv_cache_dtype", ("Qwen4ExpQSAAttention", "get_kv_cache_spec", _keep(
        """cache_config model_config parallel_config self.config self.hidden_size tp_size self.total_num_heads
        self.num_heads self.total_num_kv_heads self.num_kv_heads self.head_dim self.dual_chunk_attention_config
        self.rotary_emb self.layer_name self.attn_type self.kv_cache_dtype self.kv_cache_torch_dtype self.indexer
        static_context static_context[self.layer_name] torch getattr""", "self.total_num_kv_heads >= tp_size"))],
           "", {"QSAIndexer": _INDEXER}),
    _PLE: ([("Qwen4ExpPLELayer", "get_state_shape", "get_state_dtype", "get_prefill_checkpoint_alignment",
             "mamba_type", "is_kv_cache_tp_replicated", _keep(
        """model_config cache_config self.model_config self.cache_config self.layer_idx self.prefix self.hidden_size
        self.hc_count self.hc_hidden_size self.conv_kernel_size self.short_conv_dilation self.conv_state_len
        self.num_spec_tokens compilation_config compilation_config.static_forward_context[prefix]"""))], "", {}),
    _MODEL: (["_QSA_LAYER_TYPES", ("qwen3_next:Qwen3NextSparseMoeBlock", _keep("config self.tp_size")),
              ("Qwen4ExpSparseMoeBlock", frozenset()),
              ("Qwen4ExpDecoderLayer", _keep(
                  """config quant_config self.config self.layer_type self.use_hc_sequence_parallel self.layer_idx self.ple
                  ple_layer_ids ple_layer_ids_sorted ple_dense_layer_id_map ple_dense_layer_id self.mlp""",
                  "self.layer_idx + 1 in ple_layer_ids", "layer_type == 'linear_attention'")),
              ("Qwen4ExpModel", _keep("config self.config get_layer self.start_layer self.end_layer self.layers")),
              ("Qwen4ExpForCausalLM", *_STATE_METHODS, frozenset())], "",
             {"Qwen4ExpPLELayer": _PLE, "Qwen4ExpQSAAttention": _QSA, "Qwen3NextAttention": "qwen3_next"}),
})  # fmt: skip
NAMESPACES.update({
    _CACHE: {"CircularBufferSpec": _spec("circular_buffer"), "MLAAttentionSpec": _spec("mla"),
             "round_up": lambda x, y: -(-x // y) * y},
    _QSA: {"FullAttentionSpec": _spec("full"), "kv_cache_dtype_str_to_dtype": _kv_cache_dtype_str_to_dtype,
           "get_kv_quant_mode": lambda s: s, "mrope_positions_factor": lambda vc: 4, "torch": torch},
    _INDEXER: {"torch": torch},
    _PLE: {"MambaAttentionBackendEnum": StrictConfig(SHORT_CONV="short_conv")},
    _MODEL: {"is_hc_sequence_parallel_enabled": lambda vc: False, "torch": torch,
             "MambaAttentionBackendEnum": StrictConfig(SHORT_CONV="short_conv")},
})  # fmt: skip


def _root() -> Any:
    from ._hf import _root as root

    return root()


@functools.cache
def _hook() -> Any:
    """``Qwen4ExpForConditionalGenerationConfig.verify_and_update_config``'s own statements (lifted)."""
    src = Source(_root(), "vllm/model_executor/models/config.py")
    return _lift_stmts(src, "Qwen4ExpForConditionalGenerationConfig", "verify_and_update_config", lambda s: not (
        isinstance(s, (ast.ImportFrom, ast.Expr))))  # fmt: skip


@functools.cache
def _wrapper(assert_pp: bool) -> Any:
    """``Qwen4ExpForConditionalGeneration.__init__``'s ``use_deepstack`` statement, or its PP assert (lifted)."""
    src = Source(_root(), f"vllm/{_MODEL}.py")
    names = {"config", "multimodal_config", "self.language_model_only", "self.use_deepstack"}
    return _lift_stmts(src, "Qwen4ExpForConditionalGeneration", "__init__", lambda s: (
        not assert_pp and isinstance(s, (ast.Assign, ast.AnnAssign)) and _stores(s) <= names) or (
        assert_pp and isinstance(s, ast.If) and "deepstack_visual_indexes" in ast.unparse(s.test)))  # fmt: skip


def _uses_mrope(*configs: Any) -> bool:
    """Restated ``uses_mrope``: a section list in a flat ``rope_parameters``."""
    for c in configs:
        rope = getattr(c, "rope_parameters", None)
        if isinstance(rope, dict) and any(isinstance(rope.get(k), (list, tuple))
                                          for k in ("mrope_section", "xdrope_section")):  # fmt: skip
            return True
    return False


def _records(env: Any, context: dict[str, Any], vllm_config: Any, cls: Any, stage: int,
             block_size: int) -> list[dict[str, Any]]:  # fmt: skip
    models = env.models
    ple, qsa = models[_PLE]["Qwen4ExpPLELayer"], models[_QSA]["Qwen4ExpQSAAttention"]
    caches = (models[_CACHE]["QSAKeyStateCache"], models[_CACHE]["QSACompressedKeyCache"])
    out: list[dict[str, Any]] = []
    for name, layer in context.items():
        base = {"name": name, "pp_stage": stage}
        if isinstance(layer, ple):
            out.append({**base, "kind": "mamba", "state_shapes": [list(x) for x in layer.get_state_shape()],
                        "state_dtypes": [str(d).removeprefix("torch.") for d in layer.get_state_dtype()],
                        "mamba_type": str(layer.mamba_type), "tp_replicated": layer.is_kv_cache_tp_replicated,
                        "checkpoint_alignment": layer.get_prefill_checkpoint_alignment()})  # fmt: skip
        elif isinstance(layer, env.state_layers):
            out.append({**base, "kind": "mamba", "state_shapes": [
                list(x) for x in cls.get_gdn_mamba_state_shape_from_config(vllm_config)], "state_dtypes": [
                str(d).removeprefix("torch.") for d in cls.get_gdn_mamba_state_dtype_from_config(vllm_config)],
                "mamba_type": "gdn_attn", "tp_replicated": False})  # fmt: skip
        elif isinstance(layer, (qsa, *caches)):
            spec = layer.get_kv_cache_spec(vllm_config)
            out.append({**base, "kind": spec["kind"], "num_kv_heads": spec["num_kv_heads"],
                        "head_size": spec["head_size"], "head_size_v": spec.get("head_size_v"),
                        "dtype": str(spec["dtype"]).removeprefix("torch."),
                        "kv_cache_dtype": spec.get("kv_quant_mode"), "tokens_per_state": spec.get("tokens_per_state", 1),
                        "block_size": None if spec["block_size"] == block_size and spec["kind"] != "circular_buffer"
                        else spec["block_size"]})  # fmt: skip
        else:  # Qwen3NextAttention's Attention
            out.append({**base, "kind": "full", "num_kv_heads": layer.num_kv_heads, "head_size": layer.head_size,
                        "head_size_v": layer.head_size_v, "kv_cache_dtype": layer.kv_cache_dtype, "dtype": None,
                        "tokens_per_state": 1, "block_size": None})  # fmt: skip
    return out


def qwen4_exp_layers(config: Any, *, tp: int = 1, pp: int = 1, model_dtype: str = "bfloat16",
                     kv_cache_dtype: str = "auto", block_size: int = 16, dcp: int = 1,
                     mamba_cache_dtype: str = "auto", mamba_ssm_cache_dtype: str = "auto",
                     speculative_method: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """vLLM 0.33.0's KV-cache layers for a loaded Qwen4-Exp ``config`` (transformers' class), per PP stage in
    registration order (see the module doc; ``block_size``: the engine's, as the layers are built
    under it). vLLM's refusal is :class:`VllmLoadError`."""
    from ._hf import _CTX, _env, _model_config

    env = _env(_root())
    config = copy.deepcopy(config)
    arch = config.architectures[0]
    try:
        mc = _model_config(env, config)
        mc.dtype = env.dtypes[model_dtype]
        text = mc.hf_text_config
        window = _run(env.cache_window, model_config=mc)["sliding_window"]
        cache = StrictConfig(block_size=block_size, cache_dtype=kv_cache_dtype, kv_cache_dtype_skip_layers=[],
                             sliding_window=window,
                             mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
                             mamba_cache_mode="align")  # fmt: skip
        spec = None if speculative_method is None else StrictConfig(method=speculative_method,
                                                                    num_speculative_tokens=1)  # fmt: skip
        multimodal = StrictConfig(language_model_only=False) if arch.endswith("Generation") else None
        parallel = StrictConfig(tensor_parallel_size=tp, pipeline_parallel_size=pp, use_sequence_parallel_moe=False,
                                enable_dbo=False, ubatch_size=1, enable_expert_parallel=False, enable_eplb=False,
                                prefill_context_parallel_size=1, decode_context_parallel_size=dcp,
                                eplb_config=StrictConfig(num_redundant_experts=0))  # fmt: skip
        base = dict(cache_config=cache, quant_config=None, lora_config=None, speculative_config=spec,
                    parallel_config=parallel, attention_config=_attention_config(), num_speculative_tokens=0,
                    scheduler_config=StrictConfig(max_num_batched_tokens=8192, max_num_seqs=256))  # fmt: skip
        hooked = StrictConfig(model_config=StrictConfig(hf_text_config=text, multimodal_config=multimodal), **base)
        env.hooks["qwen3_5"](hooked)  # Qwen3.5's (mamba_ssm_dtype), then Qwen4-Exp's own statements
        _run(_hook(), vllm_config=hooked, current_platform=StrictConfig(is_cuda_alike=lambda: True),
             _strip_qwen4_exp_mrope=lambda model_config: None)  # fmt: skip
        if multimodal is None:  # Qwen4ExpForCausalLMConfig: 1D positions
            for c in {id(x): x for x in (config, text)}.values():
                if isinstance(getattr(c, "rope_parameters", None), dict):
                    c.rope_parameters.pop("mrope_section", None)
                    c.rope_parameters.pop("mrope_interleaved", None)
        model = StrictConfig(hf_config=config, hf_text_config=text, dtype=mc.dtype, multimodal_config=multimodal,
                             max_model_len=8192, uses_mrope=_uses_mrope(config, text))  # fmt: skip
    except Exception as e:
        raise _load_error(e) from e
    cls = env.models[_MODEL]["Qwen4ExpForCausalLM"]
    out: list[dict[str, Any]] = []
    for rank in range(pp):
        context: dict[str, Any] = {}
        vllm_config = StrictConfig(model_config=model, compilation_config=StrictConfig(static_forward_context=context),
                                   **base)  # fmt: skip
        pp_group = StrictConfig(rank_in_group=rank, world_size=pp, is_first_rank=rank == 0, is_last_rank=rank == pp - 1)
        _CTX.update(tp=tp, pp_group=pp_group, vllm_config=vllm_config)
        with vllm_refusals(clear=_CTX):
            prefix = "model"
            if multimodal is not None:
                built = StrictConfig(language_model_only=False, use_deepstack=None, language_model=None,
                                     visual=object())  # restated: the vision tower, built (not missing)
                prefix = "language_model.model"
                scope = {"self": built, "vllm_config": vllm_config, "get_pp_group": lambda: pp_group,
                         "StageMissingLayer": type("StageMissingLayer", (), {})}  # fmt: skip
                scope = _run(_wrapper(False), **scope)
                text_model = env.models[_MODEL]["Qwen4ExpModel"](vllm_config=vllm_config, prefix=prefix)
                built.language_model = StrictConfig(model=text_model)
                _run(_wrapper(True), **scope)
            else:
                env.models[_MODEL]["Qwen4ExpModel"](vllm_config=vllm_config, prefix=prefix)
            out += _records(env, context, vllm_config, cls, rank, block_size)
    return out
