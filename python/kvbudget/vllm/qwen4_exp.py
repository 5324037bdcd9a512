"""vLLM 0.33.0's Qwen4-Exp (``Qwen4ExpForCausalLM``, ``Qwen4ExpForConditionalGeneration``;
``vllm/models/qwen4_exp``, its NVIDIA ``model.py``, ``qsa.py``, ``indexer_qsa.py``, ``ple_layer.py`` and
``common/qsa_cache.py``): gated delta nets, QSA attention with two side caches, and PLE short convolutions.

vLLM loads both model types with transformers 5.19.0's own classes (``Qwen4ExpTextConfig`` for
``qwen4_exp_text``, ``Qwen4ExpConfig`` for ``qwen4_exp``, whose ``text_config`` is read here): their
defaults fill what a file leaves out, ``layer_types`` defaults to three ``linear_attention`` layers then one
``indexed_attention`` (``full_attention_interval``, 4), a listed ``full_attention`` is renamed
``indexed_attention``, and ``validate_architecture`` refuses what it refuses (kinds, ``hc_count``, experts,
the QSA and PLE fields). Then ``Qwen4ExpForCausalLMConfig.verify_and_update_config``: no drafter but its MTP
or n-gram, no PLE over PP; the causal LM drops ``mrope_section`` from ``rope_parameters``.

Per PP stage (``make_layers``), each ``Qwen4ExpDecoderLayer`` ``<p>.layers.<i>`` registers, in order:

* layer ``i + 1`` in ``ple_layer_ids`` (1-based, on linear layers only): ``<p>.layers.<i>.ple``, a
  ``Qwen4ExpPLELayer``: a short-convolution ``MambaSpec`` replicated on every TP rank
  (``tp_replicated``) of one conv state ``((ple_conv_kernel_size - 1) * ngram_size, hidden_size *
  hc_count)`` in ``--mamba-cache-dtype`` (``auto``: the model dtype), with its own prefill checkpoint
  (it declares an alignment of 1 in align mode: ``prefill_checkpoint="ple_short_conv"``);
* ``linear_attention``: ``<p>.layers.<i>.linear_attn``, Qwen's gated delta net
  (``get_gdn_mamba_state_shape_from_config``, as Qwen3.5's; FlashInfer's prefill checkpoint);
* ``indexed_attention`` without ``indexer_n_heads``: ``Qwen3NextAttention`` at
  ``<p>.layers.<i>.self_attn.attn`` (full attention, ``max(1, kv // tp)`` heads of ``head_dim``);
* ``indexed_attention`` with it: ``Qwen4ExpQSAAttention``, whose ``QSAIndexer`` first registers
  ``<p>.layers.<i>.self_attn.indexer.raw_key_cache`` (``QSAKeyStateCache``: a ``CircularBufferSpec`` ring
  of ``indexer_compress_ratio`` tokens, one bf16 head of ``indexer_head_dim``, widened to
  ``round_up(indexer_head_dim, 4) + 12`` when the model uses M-RoPE, no V part) and
  ``...indexer.compressed_key_cache`` (``QSACompressedKeyCache``: an ``MLAAttentionSpec`` of one bf16 head
  of ``indexer_head_dim`` at the engine's block, ``tokens_per_state`` the ratio), then its own main cache
  at ``<p>.layers.<i>.self_attn.attn`` (a ``FullAttentionSpec`` of ``max(1, kv // tp)`` heads of
  ``head_dim or hidden_size // num_attention_heads`` in ``--kv-cache-dtype``).

QSA needs a bfloat16 model, a KV dtype of ``auto``, ``bfloat16``, ``fp8`` or ``fp8_e4m3``, no decode
context parallelism and a block size (the engine's, before the hybrid alignment) divisible by the ratio.
Its state backend takes the block-outer layouts only: with a QSA layer vLLM resolves ``BLNHC``
(:func:`qwen4_exp_kv_cache_layout`); PP stages that differ in holding one report different layouts
(vLLM's assert, refused here). The multimodal class reads ``vision_config.deepstack_visual_indexes``,
which transformers' class does not write (vLLM's ``AttributeError``; ``--language-model-only`` is not
an input), and asserts that a later PP stage starts past them; its vision tower is not checked.

Not read (refused as unchecked): drafters (Qwen4-Exp's MTP; vLLM refuses the others), nested
``rope_parameters``, and a config whose ``model_type`` is not the class's. Held to vLLM's classes by
``tests/test_vllm_qwen4_exp.py``. vLLM sizes the hybrid block from the larger of the gated delta net's
and the PLE's state pages whether or not a layer holds them (``get_mamba_specs_from_config``): without a
PLE layer and with the larger PLE page, refused as not modelled. QSA's caches beside state layers are
planned (the hybrid alignment reads the QSA layer's own attention); with an engine block that is not a
multiple of the kernel block, whose aligned block the ring need not divide, they are refused as unchecked.
PLE conv rows beyond one prefix-cache grid step fail vLLM's assert as they do kvbudget's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import refused, section
from kvbudget.vllm.state_common import _attention_heads, _state_dtypes

__all__ = ["QSA_KV_CACHE_LAYOUTS", "QWEN4_EXP", "QWEN4_EXP_ARCHITECTURES", "QWEN4_EXP_TEXT", "qwen4_exp_kv_cache_layout",
           "qwen4_exp_layers"]

QWEN4_EXP_TEXT: Final = "Qwen4ExpForCausalLM"
QWEN4_EXP: Final = "Qwen4ExpForConditionalGeneration"
QWEN4_EXP_ARCHITECTURES: Final = (QWEN4_EXP_TEXT, QWEN4_EXP)
_MODEL_TYPES: Final[Mapping[str, str]] = {QWEN4_EXP_TEXT: "qwen4_exp_text", QWEN4_EXP: "qwen4_exp"}
#: transformers 5.19.0's ``Qwen4ExpTextConfig`` defaults of the keys read here.
_DEFAULTS: Final[Mapping[str, Any]] = {
    "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2,
    "head_dim": 256, "hidden_act": "silu", "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10,
    "num_experts": 512, "hc_count": 4, "ple_conv_kernel_size": 4, "ngram_size": 3, "heads_per_ngram": 8,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}}  # fmt: skip
_QSA: Final = ("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
#: The main QSA cache's ``--kv-cache-dtype`` values (``Qwen4ExpQSAAttention``'s check).
QSA_KV_CACHE_DTYPES: Final = ("auto", "bfloat16", "fp8", "fp8_e4m3")
#: The layouts QSA's state backend declares (``QSAStateBackend.supported_kv_cache_layouts``, most
#: preferred first), and vLLM's default preference's first (every other backend here declares none).
QSA_KV_CACHE_LAYOUTS: Final = ("BLNHC", "BLHNC")
_DEFAULT_LAYOUT: Final = "LBNHC"
_QSA_SUFFIXES: Final = (".indexer.raw_key_cache", ".indexer.compressed_key_cache")
_ANY: Final = -(1 << 62)  # req_int's minimum where transformers' own check follows


def _fail(what: str, key: str) -> ConfigError:
    """transformers' ``validate_architecture`` (a ``StrictDataclassClassValidationError``), as vLLM meets it."""
    return refused(f"ValueError: {what} (transformers 5.19.0's Qwen4ExpTextConfig.validate_architecture)", key)


def _text(cfg: Mapping[str, Any], arch: str) -> tuple[_View, str]:
    """The text config transformers' class loads (its defaults, layer kinds and PLE ids) and its keys' prefix."""
    if cfg.get("model_type") != _MODEL_TYPES[arch]:
        raise ConfigError(f"config.json: kvbudget reads vLLM 0.33.0's {arch} on transformers' {_MODEL_TYPES[arch]} "
                          f"config class, not model_type {cfg.get('model_type')!r}", "model_type")  # fmt: skip
    text, where = (cfg, "") if arch == QWEN4_EXP_TEXT else (section(cfg, "text_config"), "text_config.")
    c = {**_DEFAULTS, **{k: v for k, v in text.items() if v is not None or k not in _DEFAULTS}}
    v = _View({"text_config": c} if where else c, "config.json", engine="vllm")
    v.cfg = c  # the loaded text config (its class defaults filled in above)
    n = v.req_int("num_hidden_layers", minimum=0)
    kinds = c.get("layer_types")
    if kinds is None:
        interval = c.get("full_attention_interval", 4)
        kinds = ["linear_attention" if (i + 1) % interval else "indexed_attention" for i in range(n)]
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise v.fail("layer_types", "must be a list of layer kinds")
    kinds = ["indexed_attention" if k == "full_attention" else k for k in kinds]
    ple = c.get("ple_layer_ids") or []
    if not isinstance(ple, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ple):
        raise v.fail("ple_layer_ids", "must be a list of layer numbers")
    v.cfg.update(layer_types=kinds, ple_layer_ids=sorted(set(ple)))
    v.cfg.setdefault("ple_embed_dim", c["hidden_size"])
    return v, where


def _validate(v: _View, n: int) -> None:
    """transformers' ``validate_architecture`` (and ``validate_layer_type``'s count) on the loaded text config."""
    c, w = v.cfg, v.name("")
    kinds = c["layer_types"]
    bad = sorted(set(kinds) - {"linear_attention", "indexed_attention"})
    if bad:
        raise _fail(f"Unsupported Qwen4-Exp layer types: {bad}.", f"{w}layer_types")
    if len(kinds) != n:
        raise refused(f"ValueError: `num_hidden_layers` ({n}) must be equal to the number of `layer_types` "
                      f"({len(kinds)}) (transformers 5.19.0's validate_layer_type)", f"{w}layer_types")  # fmt: skip
    gate = c.get("output_gate_type") or c.get("hidden_act")
    if gate not in ("sigmoid", "silu"):
        raise _fail(f"Unsupported Qwen4-Exp output gate activation: {gate}.", f"{w}hidden_act")
    if v.req_int("hc_count", minimum=_ANY) <= 1:
        raise _fail(f"Qwen4-Exp requires hc_count > 1, got {c['hc_count']}.", f"{w}hc_count")
    experts, topk = v.req_int("num_experts", minimum=_ANY), v.req_int("num_experts_per_tok", minimum=_ANY)
    if experts <= 0 or not 0 < topk <= experts:
        raise _fail(f"num_experts ({experts}) and num_experts_per_tok ({topk}) out of range.", f"{w}num_experts")
    if min(v.req_int(k, minimum=_ANY) for k in ("moe_intermediate_size", "shared_expert_intermediate_size")) <= 0:
        raise _fail("moe_intermediate_size and shared_expert_intermediate_size must be > 0.", f"{w}moe_intermediate_size")
    qsa = {k: c.get(k) for k in _QSA}
    if any(x is not None for x in qsa.values()):
        missing = [k for k, x in qsa.items() if x is None]
        if missing:
            raise _fail(f"QSA config is missing required fields: {missing}.", f"{w}{missing[0]}")
        if any(v.req_int(k, minimum=_ANY) <= 0 for k in _QSA):
            raise _fail(f"QSA config values must be positive: {qsa}.", f"{w}indexer_n_heads")
        if qsa["indexer_kv_heads"] != 1:
            raise _fail("Qwen4-Exp QSA requires indexer_kv_heads=1.", f"{w}indexer_kv_heads")
        if v.req_int("indexer_budget", minimum=_ANY) % v.req_int("indexer_compress_ratio", minimum=_ANY):
            raise _fail("indexer_budget must be divisible by indexer_compress_ratio.", f"{w}indexer_budget")
        rope = c.get("rope_parameters") or {}
        rotary = int(v.req_int("head_dim") * (rope.get("partial_rotary_factor", 1.0) if isinstance(rope, Mapping)
                                              else 1.0))  # fmt: skip
        if rotary > v.req_int("indexer_head_dim", minimum=_ANY):
            raise _fail("Qwen4-Exp attention RoPE dimensions must fit the QSA index head.", f"{w}indexer_head_dim")
    ple = c["ple_layer_ids"]
    if ple:
        heads = (v.req_int("ngram_size", minimum=_ANY) - 1) * v.req_int("heads_per_ngram", minimum=_ANY)
        embed = v.req_int("ple_embed_dim", minimum=_ANY)
        if heads <= 0 or embed <= 0 or embed % heads:
            raise _fail(f"ple_embed_dim and the n-gram heads: {embed} % {heads} != 0.", f"{w}ple_embed_dim")
        if any(i < 1 or i > n for i in ple):
            raise _fail(f"ple_layer_ids must contain one-indexed ids in [1, {n}].", f"{w}ple_layer_ids")
        if any(kinds[i - 1] != "linear_attention" for i in ple):
            raise _fail("Qwen4-Exp PLE is only supported on linear_attention layers.", f"{w}ple_layer_ids")
        eos = c.get("eos_token_id")
        if eos is None or isinstance(eos, list) and not eos:
            raise _fail("eos_token_id must be set when Qwen4-Exp PLE layers are enabled.", f"{w}eos_token_id")


def _uses_mrope(cfg: Mapping[str, Any], v: _View, arch: str) -> bool:
    """``ModelConfig.uses_mrope`` after the causal LM's hook drops ``mrope_section`` (a section list
    in the outer or the text config's ``rope_parameters``)."""
    found = False
    for rope in (cfg.get("rope_parameters"), v.cfg.get("rope_parameters")):
        if not isinstance(rope, Mapping) or not rope:
            continue
        if any(isinstance(x, Mapping) for x in rope.values()):
            raise ConfigError("config.json: kvbudget has not checked vLLM 0.33.0's Qwen4-Exp on per-layer "
                              "rope_parameters", v.name("rope_parameters"))  # fmt: skip
        names = ("xdrope_section",) if arch == QWEN4_EXP_TEXT else ("mrope_section", "xdrope_section")
        found = found or any(isinstance(rope.get(k), (list, tuple)) for k in names)
    return found


def _engine(arch: str, v: _View, engine: EngineConfig) -> None:
    """``Qwen4ExpForConditionalGenerationConfig.verify_and_update_config``'s checks that kvbudget's inputs reach."""
    method = engine.speculative_method
    if method is not None and method not in ("mtp", "ngram", "ngram_gpu"):
        raise refused("NotImplementedError: Qwen4Exp speculative decoding supports only its native MTP checkpoint "
                      "and linear n-gram proposers", "architectures")  # fmt: skip
    if method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch}", "architectures")
    if v.cfg["ple_layer_ids"] and engine.pp > 1:
        raise refused("NotImplementedError: Qwen4Exp N-gram PLE embedding requires pipeline_parallel_size=1 because "
                      "non-first pipeline ranks do not receive the raw input_ids it needs. Please run with PP=1.",
                      v.name("ple_layer_ids"))  # fmt: skip


def _deepstack(cfg: Mapping[str, Any], stages: list[tuple[int, int]]) -> None:
    """``Qwen4ExpForConditionalGeneration.__init__``: ``use_deepstack`` reads the vision config's
    ``deepstack_visual_indexes``; a later PP stage must start past them."""
    vision = section(cfg, "vision_config")
    indexes = vision.get("deepstack_visual_indexes")
    if "deepstack_visual_indexes" not in vision:
        raise refused("AttributeError: 'Qwen4ExpVisionConfig' object has no attribute 'deepstack_visual_indexes'",
                      "vision_config.deepstack_visual_indexes")  # fmt: skip
    if not isinstance(indexes, list):
        raise ConfigError("config.json: key 'vision_config.deepstack_visual_indexes' must be a list",
                          "vision_config.deepstack_visual_indexes")  # fmt: skip
    if any(start < len(indexes) for start, _ in stages[1:]):
        raise refused("AssertionError: start_layer should be greater than or equal to len(deepstack_visual_indexes)",
                      "vision_config.deepstack_visual_indexes")  # fmt: skip


def _qsa_caches(v: _View, name: str, engine: EngineConfig, model_dtype: str, mrope: bool,
                stage: int) -> list[LayerSpec]:  # fmt: skip
    """``QSAIndexer``'s two side caches, after ``_QSAStateCache``'s checks (the engine's block size is
    the one the layers are built under)."""
    dim, ratio = v.req_int("indexer_head_dim"), v.req_int("indexer_compress_ratio")
    if engine.block_size % ratio:
        raise refused("ValueError: QSA cache block size must be divisible by the compression ratio",
                      v.name("indexer_compress_ratio"))  # fmt: skip
    key = (-(-dim // 4) * 4 + 12) if mrope else dim  # round_up(dim, 4) + 3 int64 positions in bf16
    ring = ratio  # round_up(ratio + num_speculative_tokens, ratio), no drafter
    prefix = name.removesuffix("attn") + "indexer"
    return [LayerSpec(f"{prefix}.raw_key_cache", "circular_buffer", 1, key, head_size_v=0, model_dtype=model_dtype,
                      block_size=ring, pp_stage=stage),
            LayerSpec(f"{prefix}.compressed_key_cache", "mla", 1, dim, model_dtype=model_dtype,
                      tokens_per_state=ratio, pp_stage=stage)]  # fmt: skip


def _qsa_attention(v: _View, engine: EngineConfig, kv_cache_dtype: str, model_dtype: str) -> tuple[int, int]:
    """``Qwen4ExpQSAAttention.__init__``'s checks, in order, and its KV heads per rank and head dim."""
    if model_dtype != "bfloat16":
        raise refused("NotImplementedError: Qwen4Exp QSA currently requires BF16", "dtype")
    if kv_cache_dtype not in QSA_KV_CACHE_DTYPES:
        raise refused("NotImplementedError: Qwen4Exp QSA requires a BF16 or FP8-e4m3 main KV cache", "kv_cache_dtype")
    if engine.dcp > 1:
        raise refused("NotImplementedError: Qwen4Exp QSA does not support context parallelism", "dcp")
    if not v.cfg.get("is_causal", True):
        raise refused("NotImplementedError: Qwen4Exp QSA requires causal decoder attention", v.name("is_causal"))
    tp, heads, kv = engine.tp, v.req_int("num_attention_heads"), v.req_int("num_key_value_heads")
    if heads % tp:
        raise refused("ValueError: QSA attention heads must be divisible by TP size", v.name("num_attention_heads"))
    if kv >= tp and kv % tp:
        raise refused("ValueError: QSA KV heads must be divisible by TP size", v.name("num_key_value_heads"))
    if kv < tp and tp % kv:
        raise refused("ValueError: TP size must be divisible by replicated QSA KV heads", v.name("num_key_value_heads"))
    if v.cfg.get("dual_chunk_attention_config") is not None:
        raise refused("NotImplementedError: Qwen4Exp QSA does not support dual-chunk RoPE",
                      v.name("dual_chunk_attention_config"))  # fmt: skip
    return max(1, kv // tp), v.opt_int("head_dim") or v.req_int("hidden_size") // heads


def _states(v: _View, engine: EngineConfig, model_dtype: str, cache: tuple[str, str],
            gdn_prefill_backend: str) -> tuple[LayerSpec, LayerSpec]:  # fmt: skip
    """The gated delta net's and the PLE's state templates (name and stage still to set)."""
    dims = [engine.tp, *(v.req_int(k) for k in ("linear_num_key_heads", "linear_num_value_heads",
                                                "linear_key_head_dim", "linear_value_head_dim",
                                                "linear_conv_kernel_dim")), 0]  # fmt: skip
    try:
        gdn = tuple(tuple(s) for s in _core._vllm_state_shapes("gated_delta_net", dims))
    except ValueError as e:
        raise refused(str(e), v.name("linear_num_value_heads")) from None
    hooked = v.cfg.get("mamba_ssm_dtype")  # Qwen3.5's config hook, which Qwen4-Exp's runs first
    dtypes = tuple(_state_dtypes(model_dtype, *cache, hooked if isinstance(hooked, str) else None))
    if gdn_prefill_backend not in ("flashinfer", "triton"):
        raise ConfigError(f"gdn_prefill_backend={gdn_prefill_backend!r}: 'flashinfer' or 'triton'")
    checkpoint = "flashinfer_gdn" if gdn_prefill_backend == "flashinfer" else "none"
    state = LayerSpec("", "mamba", 0, 0, model_dtype=model_dtype, state_shapes=gdn, state_dtypes=dtypes,
                      mamba_type="gdn_attn", prefill_checkpoint=checkpoint)  # type: ignore[arg-type]
    width = v.req_int("hidden_size") * v.req_int("hc_count")
    conv = (v.req_int("ple_conv_kernel_size") - 1) * v.req_int("ngram_size")
    shapes = tuple(tuple(s) for s in _core._vllm_state_shapes("short_conv", [1, width, conv + 1, 0]))
    ple = LayerSpec("", "mamba", 0, 0, model_dtype=model_dtype, state_shapes=shapes, state_dtypes=(dtypes[0],),
                    mamba_type="short_conv", prefill_checkpoint="ple_short_conv", tp_replicated=True)
    return state, ple


def qwen4_exp_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                     mamba_cache_dtype: str, mamba_ssm_cache_dtype: str,
                     gdn_prefill_backend: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Qwen4-Exp config, per PP stage in registration order
    (see the module doc).

    Raises:
        ConfigError: what transformers' config class, vLLM's config hook or its layers refuse (their
            checks, in vLLM's order), or what kvbudget has not checked (drafters, another model type).
    """
    from dataclasses import replace

    arch = cfg["architectures"][0]
    v, _ = _text(cfg, arch)
    n = v.req_int("num_hidden_layers", minimum=0)
    _validate(v, n)
    _engine(arch, v, engine)
    mrope = _uses_mrope(cfg, v, arch)
    stages = pp_stage_layers(n, engine.pp)
    if arch == QWEN4_EXP:
        _deepstack(cfg, stages)
    prefix = "language_model.model" if arch == QWEN4_EXP else "model"
    kinds, ple_ids, qsa = v.cfg["layer_types"], set(v.cfg["ple_layer_ids"]), v.cfg.get("indexer_n_heads") is not None
    states: list[LayerSpec] = []  # built with the first state layer (vLLM sizes them there)
    out: list[LayerSpec] = []
    held: list[bool] = []
    for stage, (start, end) in enumerate(stages):
        for i in range(start, end):
            name = f"{prefix}.layers.{i}"
            if kinds[i] == "linear_attention" and not states:
                states += _states(v, engine, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype),
                                  gdn_prefill_backend)  # fmt: skip
            if i + 1 in ple_ids:
                out.append(replace(states[1], name=f"{name}.ple", pp_stage=stage))
            if kinds[i] == "linear_attention":
                out.append(replace(states[0], name=f"{name}.linear_attn", pp_stage=stage))
            elif qsa:
                kv, dim = _qsa_attention(v, engine, kv_cache_dtype, model_dtype)
                out += _qsa_caches(v, f"{name}.self_attn.attn", engine, model_dtype, mrope, stage)
                out.append(LayerSpec(f"{name}.self_attn.attn", "full", kv, dim, head_size_v=dim,
                                     kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, pp_stage=stage))
            else:
                kv, dim = _attention_heads(v, engine.tp)
                out.append(LayerSpec(f"{name}.self_attn.attn", "full", kv, dim, head_size_v=dim,
                                     kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, pp_stage=stage))
            experts = v.req_int("num_experts")
            if engine.tp > experts:  # Qwen3NextSparseMoeBlock
                raise refused(f"ValueError: Tensor parallel size {engine.tp} is greater than the number of experts "
                              f"{experts}.", v.name("num_experts"))  # fmt: skip
        held.append(any(x.pp_stage == stage and x.kind == "circular_buffer" for x in out))
    if states and not ple_ids and _page(states[1]) > _page(states[0]):
        # vLLM sizes the hybrid block from both state specs (get_mamba_specs_from_config), PLE's
        # included, though no layer holds it; kvbudget's planner reads the layers' states.
        raise ConfigError(f"config.json: vLLM 0.33.0 sizes Qwen4-Exp's hybrid attention block from its PLE state "
                          f"page ({_page(states[1])} bytes), larger than the gated delta net's ({_page(states[0])}), "
                          "though no layer holds a PLE state; kvbudget has not modelled that", v.name("ple_layer_ids"))
    ring = any(x.kind == "circular_buffer" for x in out)
    if ring and states and engine.block_size % engine.attention_kernel_block_size:
        # QSAKeyStateCache asserts its ring divides the attention block the hybrid alignment settles on,
        # a multiple of the engine's block only when that is a multiple of the kernel block.
        raise ConfigError(f"config.json: kvbudget has not checked Qwen4-Exp's QSA ring against the hybrid attention "
                          f"block vLLM 0.33.0 aligns a block size of {engine.block_size} to (not a multiple of the "
                          f"{engine.attention_kernel_block_size}-token kernel block)", "block_size")
    if len(set(held)) > 1:  # resolve_kv_cache_layout
        raise refused("AssertionError: Workers disagree on supported KV cache layouts (the PP stages holding a QSA "
                      "layer take BLNHC / BLHNC only)", v.name("layer_types"))  # fmt: skip
    return out


def _page(state: LayerSpec) -> int:
    """A state layer's unpadded page, bytes (its tensors' elements times their dtypes' sizes)."""
    size = {"float32": 4, "bfloat16": 2, "float16": 2}
    return sum(math.prod(shape) * size[d] for shape, d in zip(state.state_shapes, state.state_dtypes))


def qwen4_exp_kv_cache_layout(layers: Sequence[LayerSpec]) -> str:
    """The KV-cache layout vLLM 0.33.0 resolves for a Qwen4-Exp model's ``layers``
    (``resolve_kv_cache_layout``): ``BLNHC`` where a QSA state cache is registered, else ``LBNHC``."""
    qsa = any(x.name.endswith(_QSA_SUFFIXES) for x in layers)
    return QSA_KV_CACHE_LAYOUTS[0] if qsa else _DEFAULT_LAYOUT
