"""vLLM 0.33.0's GLM-5-Next (``Glm5NextForConditionalGeneration``, ``Glm5NextForCausalLM``;
``vllm/models/glm5next``, its ``common/model.py``, ``common/attention.py`` and ``common/kda.py``): KDA
linear attention beside sparse MLA with a kpool indexer.

vLLM loads the model types with transformers 5.19.0's own classes (``Glm5NextConfig`` for ``glm5_next``,
whose ``text_config`` is read here; ``Glm5NextTextConfig`` for ``glm5_next_text``, which transformers maps
to no causal-LM class): their defaults fill what a file leaves out, ``layer_types`` defaults to three
``linear_attention`` layers then one ``indexed_attention``, a listed ``full_attention`` is renamed
``indexed_attention``, and ``validate_architecture`` refuses what it refuses (KV heads other than the
heads, ``index_kpool`` below 1 or not dividing ``index_topk``, no ``q_lora_rank``, RoPE dims). The
multimodal class builds its vision tower (not checked here), then the causal LM at ``language_model``.

``Glm5NextModel`` checks ``index_kpool_always_select_tail``; per PP stage (``make_layers``) each
``Glm5NextDecoderLayer`` ``<p>.layers.<i>`` reads ``mhc`` (a key transformers' class does not write:
vLLM's ``AttributeError`` on the class's own defaults) and registers, in order:

* ``linear_attention``: ``<p>.layers.<i>.self_attn``, a ``Glm5NextLinearAttention`` (KDA: a
  ``MambaSpec`` of ``kda_state_shape``'s conv and recurrent states, ``gdn_attn``; its prefill
  checkpoint is FlashKDA's, an alignment of 16 tokens and one checkpoint block, where
  ``kda_prefill_backend`` ``auto`` resolves to FlashKDA on Hopper: head dim 128, a bfloat16 model and a
  bounded gate, ``linear_lower_bound``);
* else ``Glm5NextMLAAttention`` (``skip_rope=config.mla_use_nope``; its indexer reads
  ``indexer_rope_interleave``), whose ``Indexer`` registers ``<p>.layers.<i>.self_attn.indexer.k_cache``
  (``Glm5NextIndexerCache``: an ``MLAAttentionSpec`` of one ``uint8`` head of ``index_head_dim +
  index_head_dim // 128 * 4`` bytes at the engine's block, ``tokens_per_state = index_kpool``: kind
  ``mla_indexer``) and ``...indexer.tail_cache`` (``Glm5NextTailCache``: a ``CircularBufferSpec`` ring of
  ``index_kpool * next_power_of_2(cdiv(index_kpool + num_speculative_tokens, index_kpool))`` tokens,
  2 bf16 heads of ``index_head_dim``, no V part, not DCP-sharded; it asserts the engine block is a
  multiple of the ring), then its latent cache ``<p>.layers.<i>.self_attn.attn`` (one head of
  ``kv_lora_rank + qk_rope_head_dim``);
* then its MLP: a MoE (``Glm5NextMoE``: ``topk_method`` and ``scoring_func`` read, SiLU only) where
  ``mlp_layer_types`` says ``sparse``, else a dense SiLU MLP.

The tail cache's backend (``KpoolTailBackend``) declares ``BLHNC`` only, so vLLM resolves ``BLHNC``
(:func:`glm5_next_kv_cache_layout`). :func:`glm5_next_registered_layers` gives the layers as registered
(held to vLLM's classes by ``tests/test_vllm_glm5_next.py``); :func:`glm5_next_layers`, the reader
:func:`kvbudget.vllm.layers_from_hf_config` runs, reads them and then refuses to plan them: the engine
block size vLLM's platform picks for these backends (the indexer's kernel blocks of ``index_kpool`` times
32 or 64 states, the sparse MLA backend's, the hybrid alignment against the indexer, the first
non-state backend) is not modelled. Not read either (refused as unchecked): drafters (GLM-5-Next's MTP,
``Glm5NextMTP``), DCP, PP on the multimodal class (vLLM refuses it: no ``SupportsPP``) and on the causal
LM, RoPE MLA (``mla_use_nope`` false with ``rope_parameters``), ``additional_config``'s KDA backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import refused, section
from kvbudget.vllm.state_common import _state_dtypes

__all__ = ["GLM5_NEXT", "GLM5_NEXT_ARCHITECTURES", "GLM5_NEXT_TEXT", "TAIL_KV_CACHE_LAYOUTS",
           "glm5_next_kv_cache_layout", "glm5_next_layers", "glm5_next_registered_layers",
           "kda_prefill_checkpoint_alignment"]  # fmt: skip

GLM5_NEXT: Final = "Glm5NextForConditionalGeneration"
GLM5_NEXT_TEXT: Final = "Glm5NextForCausalLM"
GLM5_NEXT_ARCHITECTURES: Final = (GLM5_NEXT_TEXT, GLM5_NEXT)
_MODEL_TYPES: Final[Mapping[str, str]] = {GLM5_NEXT_TEXT: "glm5_next_text", GLM5_NEXT: "glm5_next"}
#: transformers 5.19.0's ``Glm5NextTextConfig`` defaults of the keys read here.
_DEFAULTS: Final[Mapping[str, Any]] = {
    "hidden_size": 4096, "num_hidden_layers": 45, "num_attention_heads": 64, "num_key_value_heads": 64,
    "n_routed_experts": 288, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 0, "v_head_dim": 256,
    "qk_nope_head_dim": 256, "hidden_act": "silu", "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32,
    "linear_head_dim": 128, "linear_num_heads": 64, "linear_conv_kernel_dim": 4, "linear_lower_bound": -5.0,
    "index_kpool": 16, "index_kpool_always_select_tail": True}  # fmt: skip
#: The layouts the tail cache's backend declares (``KpoolTailBackend.supported_kv_cache_layouts``).
TAIL_KV_CACHE_LAYOUTS: Final = ("BLHNC",)
_DEFAULT_LAYOUT: Final = "LBNHC"
_QUANT_BLOCK: Final = 128  # Indexer.quant_block_size: one fp32 scale per 128 fp8 key elements
_ANY: Final = -(1 << 62)


def _missing(v: _View, key: str) -> ConfigError:
    """vLLM's ``AttributeError`` reading a key transformers' class does not write."""
    return refused(f"AttributeError: 'Glm5NextTextConfig' object has no attribute '{key}'", v.name(key))


def _text(cfg: Mapping[str, Any], arch: str) -> _View:
    """The text config transformers' class loads (its defaults, layer kinds, MLP kinds) and checks."""
    if cfg.get("model_type") != _MODEL_TYPES[arch]:
        raise ConfigError(f"config.json: kvbudget reads vLLM 0.33.0's {arch} on transformers' {_MODEL_TYPES[arch]} "
                          f"config class, not model_type {cfg.get('model_type')!r}", "model_type")  # fmt: skip
    nested = arch == GLM5_NEXT
    text = section(cfg, "text_config") if nested else cfg
    c = {**_DEFAULTS, **{k: v for k, v in text.items() if v is not None or k not in _DEFAULTS}}
    v = _View({"text_config": c} if nested else c, "config.json", engine="vllm")
    v.cfg = c
    n = v.req_int("num_hidden_layers", minimum=0)
    kinds = c.get("layer_types")
    if kinds is None:
        kinds = ["linear_attention" if i % 4 != 3 else "indexed_attention" for i in range(n)]
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise v.fail("layer_types", "must be a list of layer kinds")
    mlp = c.get("mlp_layer_types")
    if mlp is None:
        mlp = ["dense"] * min(3, n) + ["sparse"] * (n - 3)
    if not isinstance(mlp, list):
        raise v.fail("mlp_layer_types", "must be a list")
    c.update(layer_types=["indexed_attention" if k == "full_attention" else k for k in kinds], mlp_layer_types=mlp)
    heads, kv = v.req_int("num_attention_heads", minimum=_ANY), v.req_int("num_key_value_heads", minimum=_ANY)
    if heads != kv:
        raise _invalid(f"num_attention_heads ({heads}) must be the same as num_key_value_heads ({kv}).", v,
                       "num_key_value_heads")  # fmt: skip
    kpool, topk = v.req_int("index_kpool", minimum=_ANY), v.req_int("index_topk", minimum=_ANY)
    if kpool < 1:
        raise _invalid(f"index_kpool must be positive, got {kpool}.", v, "index_kpool")
    if topk % kpool:
        raise _invalid(f"index_topk ({topk}) must be divisible by index_kpool ({kpool}).", v, "index_topk")
    if c.get("q_lora_rank") is None:
        raise _invalid("For DSA usage in the attention layers, the `q_lora_rank` is strictly required!", v,
                       "q_lora_rank")  # fmt: skip
    if v.req_int("qk_rope_head_dim", minimum=_ANY) > 0:
        raise _invalid(f"Expecting NoPE for the DSA attention layers, but got {c['qk_rope_head_dim']} as RoPE dim.", v,
                       "qk_rope_head_dim")  # fmt: skip
    return v


def _invalid(what: str, v: _View, key: str) -> ConfigError:
    """transformers' ``validate_architecture`` (a ``StrictDataclassClassValidationError``), as vLLM meets it."""
    return refused(f"ValueError: {what} (transformers 5.19.0's Glm5NextTextConfig.validate_architecture)", v.name(key))


def kda_prefill_checkpoint_alignment(cfg: Mapping[str, Any], model_dtype: str) -> int | None:
    """The prefill-checkpoint alignment of a GLM-5-Next KDA layer on Hopper, tokens
    (``kda_prefill_checkpoint_alignment`` of the backend ``_resolve_kda_prefill_backend`` resolves from
    ``auto``): 16 under FlashKDA (head dim 128, a bfloat16 model, a bounded gate), else none (Triton).
    ``cfg``: the loaded text config."""
    flash = cfg.get("linear_head_dim") == 128 and model_dtype == "bfloat16" and cfg.get("linear_lower_bound") is not None
    return 16 if flash else None


def _kda(v: _View, engine: EngineConfig, model_dtype: str, cache: tuple[str, str]) -> LayerSpec:
    """``Glm5NextLinearAttention``'s checks and state spec (name and stage still to set)."""
    tp, heads = engine.tp, v.req_int("linear_num_heads")
    if heads % tp:
        raise refused(f"AssertionError: Glm5NextLinearAttention asserts tp ({tp}) divides linear_num_heads ({heads})",
                      v.name("linear_num_heads"))  # fmt: skip
    dims = [tp, heads, v.req_int("linear_head_dim"), v.req_int("linear_conv_kernel_dim"), 0]
    try:
        shapes = _core._vllm_state_shapes("kda", dims)
    except ValueError as e:
        raise refused(str(e), v.name("linear_num_heads")) from None
    if cache[1] not in ("auto", "float32", "bfloat16"):
        raise refused(f"ValueError: KDA recurrent state supports only auto, float32, and bfloat16; got {cache[1]}",
                      "mamba_ssm_cache_dtype")  # fmt: skip
    conv = _state_dtypes(model_dtype, cache[0], "auto")[0]
    ssm = "float32" if cache[1] == "auto" else cache[1]
    return LayerSpec("", "mamba", 0, 0, model_dtype=model_dtype, state_shapes=tuple(tuple(s) for s in shapes),
                     state_dtypes=(conv, ssm), mamba_type="gdn_attn")  # fmt: skip


def _mla(v: _View, engine: EngineConfig, kv_cache_dtype: str, model_dtype: str) -> tuple[LayerSpec, ...]:
    """``Glm5NextMLAAttention``'s reads and checks, in vLLM's order, and its three caches' specs (names
    and stage still to set): the indexer's key cache, its tail ring, the latent cache."""
    c = v.cfg
    if "mla_use_nope" not in c:
        raise _missing(v, "mla_use_nope")
    tp, heads = engine.tp, v.req_int("num_attention_heads")
    if heads % tp:
        raise refused(f"AssertionError: Glm5NextMLAAttention asserts tp ({tp}) divides num_attention_heads ({heads})",
                      v.name("num_attention_heads"))  # fmt: skip
    if not c["mla_use_nope"]:
        if c.get("rope_parameters") is None:
            raise refused("AssertionError: Glm5NextMLAAttention asserts rope_parameters is not None (mla_use_nope "
                          "is false)", v.name("mla_use_nope"))  # fmt: skip
        raise ConfigError("config.json: kvbudget has not checked vLLM 0.33.0's GLM-5-Next MLA with RoPE "
                          "(mla_use_nope false, rope_parameters set)", v.name("mla_use_nope"))  # fmt: skip
    if "indexer_rope_interleave" not in c:
        raise _missing(v, "indexer_rope_interleave")
    for key in ("index_topk", "index_n_heads", "index_head_dim", "index_kpool"):
        if c.get(key) is None:
            raise refused(f"AssertionError: Indexer asserts config.{key} is not None", v.name(key))
    head, kpool = v.req_int("index_head_dim"), v.req_int("index_kpool")
    if kpool <= 1:
        raise refused("AssertionError: Glm5NextIndexerCache expects index_kpool > 1", v.name("index_kpool"))
    ring = kpool  # index_kpool * next_power_of_2(cdiv(index_kpool + num_speculative_tokens, index_kpool)), no drafter
    if engine.block_size % ring:
        raise refused(f"AssertionError: Glm5NextTailCache: cache_config.block_size ({engine.block_size}) must be a "
                      f"multiple of the tail ring ({ring})", v.name("index_kpool"))  # fmt: skip
    latent = v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", minimum=0)
    indexer = LayerSpec("", "mla_indexer", 1, head + head // _QUANT_BLOCK * 4, kv_cache_dtype=kv_cache_dtype,
                        model_dtype=model_dtype, tokens_per_state=kpool)  # fmt: skip
    tail = LayerSpec("", "circular_buffer", 2, head, head_size_v=0, model_dtype=model_dtype, block_size=ring)
    mla = LayerSpec("", "mla", 1, latent, head_size_v=0, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype)
    return indexer, tail, mla


def _mlp(v: _View, i: int) -> None:
    """``Glm5NextDecoderLayer``'s MLP: ``Glm5NextMoE``'s reads where ``mlp_layer_types`` says
    ``sparse`` (an MoE config), else ``Glm5NextMLP``'s activation check."""
    c, kinds = v.cfg, v.cfg["mlp_layer_types"]
    kind = kinds[i] if i < len(kinds) else (kinds[-1] if kinds else "sparse")
    act = c.get("hidden_act")
    if c.get("n_routed_experts") is not None and kind == "sparse":
        if act != "silu":
            raise refused(f"ValueError: Unsupported activation: {act}. Only silu is supported for now.",
                          v.name("hidden_act"))  # fmt: skip
        for key in ("topk_method", "scoring_func"):  # the gate's bias, then FusedMoEFactory's arguments
            if key not in c:
                raise _missing(v, key)
    elif act != "silu":
        raise refused(f"ValueError: Unsupported activation: {act}. Only silu is supported for now.",
                      v.name("hidden_act"))  # fmt: skip


def glm5_next_registered_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str,
                                model_dtype: str, mamba_cache_dtype: str = "auto",
                                mamba_ssm_cache_dtype: str = "auto") -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a GLM-5-Next config under ``engine`` (its ``block_size``: the
    block the layers are built under), per PP stage in registration order (see the module doc). The
    KDA layers' ``prefill_checkpoint`` is left ``"none"``: FlashKDA's is
    :func:`kda_prefill_checkpoint_alignment`.

    Raises:
        ConfigError: what transformers' class or vLLM's classes refuse (their checks, in vLLM's order),
            or what kvbudget has not checked (drafters, DCP, PP, RoPE MLA, another model type).
    """
    arch = cfg["architectures"][0]
    v = _text(cfg, arch)
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch} (its MTP "
                          "drafter, Glm5NextMTP)", "architectures")  # fmt: skip
    if engine.pp > 1 and arch == GLM5_NEXT:
        raise refused("NotImplementedError: Pipeline parallelism is not supported for this model. Supported models "
                      "implement the `SupportsPP` interface.", "pp")  # fmt: skip
    if engine.pp > 1 or engine.dcp > 1:
        what = "pipeline parallelism" if engine.pp > 1 else "decode context parallelism"
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's {arch} under {what}",
                          "pp" if engine.pp > 1 else "dcp")  # fmt: skip
    c, n = v.cfg, v.req_int("num_hidden_layers", minimum=0)
    if c.get("index_topk") is not None and not c.get("index_kpool_always_select_tail"):
        raise refused("NotImplementedError: GLM-5.3 sparse indexer requires index_kpool_always_select_tail=True",
                      v.name("index_kpool_always_select_tail"))  # fmt: skip
    prefix = "language_model.model" if arch == GLM5_NEXT else "model"
    kinds = c["layer_types"]
    state: LayerSpec | None = None
    caches: tuple[LayerSpec, ...] = ()
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if "mhc" not in c:
                raise _missing(v, "mhc")
            name = f"{prefix}.layers.{i}.self_attn"
            if i < len(kinds) and kinds[i] == "linear_attention":
                state = state or _kda(v, engine, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype))
                out.append(replace(state, name=name, pp_stage=stage))
            else:
                caches = caches or _mla(v, engine, kv_cache_dtype, model_dtype)
                out += [replace(x, name=f"{name}.{suffix}", pp_stage=stage)
                        for x, suffix in zip(caches, ("indexer.k_cache", "indexer.tail_cache", "attn"))]  # fmt: skip
            _mlp(v, i)
    heads = v.req_int("num_attention_heads")
    if heads % engine.tp:
        raise refused("AssertionError: num_attention_heads must be divisible by world_size", v.name("num_attention_heads"))
    return out


def glm5_next_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                     mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The reader :func:`kvbudget.vllm.layers_from_hf_config` runs: :func:`glm5_next_registered_layers`,
    then a refusal to plan them (the block size vLLM's platform picks is not modelled; see the module doc).

    Raises:
        ConfigError: always; vLLM's refusal where the reading meets one.
    """
    layers = glm5_next_registered_layers(cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                         mamba_cache_dtype=mamba_cache_dtype,
                                         mamba_ssm_cache_dtype=mamba_ssm_cache_dtype)  # fmt: skip
    kpool = next((x.tokens_per_state for x in layers if x.kind == "mla_indexer"), None)
    raise ConfigError(f"config.json: kvbudget has not modelled the KV block size vLLM 0.33.0's platform picks for "
                      f"{cfg['architectures'][0]} (the kpool indexer's kernel blocks of index_kpool ({kpool}) times 32 "
                      "or 64 states, the sparse MLA backend's, the hybrid alignment against the indexer, FlashKDA's "
                      "prefill checkpoints); its layers are read (glm5_next_registered_layers) but not planned",
                      "architectures")  # fmt: skip


def glm5_next_kv_cache_layout(layers: Sequence[LayerSpec]) -> str:
    """The KV-cache layout vLLM 0.33.0 resolves for a GLM-5-Next model's ``layers``
    (``resolve_kv_cache_layout``): ``BLHNC`` where a kpool tail cache is registered, else ``LBNHC``."""
    tail = any(x.name.endswith(".indexer.tail_cache") for x in layers)
    return TAIL_KV_CACHE_LAYOUTS[0] if tail else _DEFAULT_LAYOUT
