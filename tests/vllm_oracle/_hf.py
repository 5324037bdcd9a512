"""Oracle: vLLM 0.33.0's per-layer KV-cache specs for an HF config, from vLLM's own model code.

``vllm_layers(config, *, tp, pp, ...)`` builds the model (and a drafter) the way
vLLM's loader does, on CPU, by executing the classes of the pinned wheel's model
files (``tools/vllm_pins.json``; nothing of vLLM is in this repository), and
reads the attention layers that registered themselves in
``compilation_config.static_forward_context``.

What is vLLM's (lifted with :mod:`ast` from the verified files and executed)
---------------------------------------------------------------------------
* config level: ``getattr_iter``, ``CONFIG_FIELD_ALIASES``, ``get_hf_text_config``,
  ``set_default_rope_theta``, ``ModelArchitectureConfig``, every arch-config
  convertor and ``MODEL_ARCH_CONFIG_CONVERTORS``, ``get_pp_indices``, ``EAGLEConfig``,
  ``SpeculativeConfig.hf_config_override`` (the MTP rewrite) and its ``__post_init__``'s
  ``n_predict`` statements (the default and divisibility of ``num_speculative_tokens``), the ``ModelConfig``
  methods (``get_sliding_window``, ``get_head_size``, ``get_total_num_kv_heads``,
  ``get_num_kv_heads``, ``get_layers_start_end_indices``, ``get_num_layers``,
  ``use_mla``, ``is_deepseek_mla``, ...), the two sliding-window ``if`` statements of
  ``ModelConfig.__post_init__`` and the ``CacheConfig.sliding_window`` rule of
  ``EngineArgs.create_engine_config`` (statements picked by what they assign);
* the architecture tables of ``models/registry.py``;
* ``make_layers``, ``extract_layer_index``, ``maybe_prefix``,
  ``spec_decode_needs_target_embed`` (``models/utils.py``);
* the model classes' whole ``__init__`` bodies (and the helper methods they call):
  the ``*Model``, decoder-layer and attention classes of each family, the EAGLE /
  EAGLE3 ``*ForCausalLM`` and the DeepSeek MTP predictor. So which layers are
  sliding / chunked / MLA, the window (Cohere2's ``+ 1``, gpt-oss's even layers),
  heads per rank (``max(1, kv // tp)``, gpt-oss's ``kv // tp``), ``head_dim``, layer
  names and Qwen2's mixed-``layer_types`` assertion are vLLM's own statements;
* from ``Attention.__init__`` / ``ChunkedLocalAttention.__init__`` /
  ``MLAAttention.__init__``: their signatures and the statements assigning the
  window fallback (``per_layer_sliding_window`` else ``cache_config.sliding_window``),
  ``num_kv_heads``, ``head_size``, ``head_size_v``, ``attn_type``, ``kv_cache_dtype`` (Attention's),
  ``kv_sharing_target_layer_name`` and the registration into
  ``static_forward_context`` (with its duplicate-name ``ValueError``);
  ``MLAAttentionSpec.head_size_v`` (0) from ``v1/kv_cache_interface.py``.

What is restated here (glue, not vLLM text)
-------------------------------------------
* :data:`ENTRY`: which class each registered ``(module, class)`` is entered at and
  with what prefix. The ``*ForCausalLM`` wrappers (lm_head, tying) are not
  executed: the prefix is ``model`` (``language_model.model`` for
  Gemma3ForConditionalGeneration, whose text model is built from ``text_config``);
  for Llama / Mistral / Llama4 their own ``_init_model`` picks the model class
  (Llama4ForConditionalGeneration's text model is Llama4ForCausalLM's, from
  ``text_config`` at ``language_model.model``). GPT-2, GPT-J, OPT, BLOOM, Falcon and TeleFLM are
  entered at the registered class, its ``__init__`` kept to the decoder it builds and its asserts
  (TeleFLM's base ``LlamaForCausalLM`` likewise, lifted into its file's namespace: ``"file:Class"``).
  The DeepSeek MTP drafter is entered at ``DeepSeekMultiTokenPredictor``, Qwen3-Next's and
  Qwen3.5's at their ``*MultiTokenPredictor`` (prefix ``mtp``).
  A class outside ``ENTRY`` whose ``__init__`` builds its text model with one
  ``init_vllm_registered_model`` call (LLaVA, Mistral 3, Qwen2-VL, ...) runs that call from
  the wheel, with ``initialize_model`` restated as a build of the class the registry names for
  the text config (:mod:`._wrappers`);
* class decorators (``support_torch_compile``) are dropped; base classes other
  than lifted ones become :class:`_Module` (an ``nn.Module`` stand-in whose
  missing attributes raise); methods a class body has but that are not lifted
  raise when called;
* stand-ins: the ``VllmConfig`` / ``CacheConfig`` / ``ParallelConfig`` /
  ``SpeculativeConfig`` records (strict: unknown fields raise), the TP / PP groups
  (``tp``; PP rank ``r`` of ``pp``), ``current_platform`` (CUDA, no ROCm AITER),
  no quantization (``quant_config=None``, also for drafters), a no-op offloader;
  linear / norm / rope / embedding / MLP / MoE constructors return :class:`Poison`
  (they own no KV; any use of what they return raises);
  ``MultiHeadLatentAttentionWrapper`` only builds its ``MLAAttention`` at
  ``f"{prefix}.attn"``;
* the engine flow: each PP stage builds its own model; the drafter is built after
  the target on the last stage (same ``CacheConfig``, the target's TP) and its
  layers are ``is_draft``; spec kinds follow the attention class (``MLAAttention`` ->
  mla, ``ChunkedLocalAttention`` -> chunked, ``Attention`` -> sliding iff its
  ``sliding_window`` is set), encoder-only layers and KV-sharing layers get no spec;
* a config without ``architectures`` gets the one of ``_hf_tables.DEFAULT_ARCH``.

A vLLM failure (an exception raised by vLLM's code) is :class:`VllmLoadError`
carrying vLLM's text; a stub being reached is ``StubError`` (an oracle gap).
"""

from __future__ import annotations

import ast
import builtins
import copy
import enum
import functools
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

import torch
import transformers

from oracle_kit.lift import Source
from oracle_kit.strict import Poison, StrictModule, StubError, fail
from ._strict import RecordingLogger, StrictConfig
from ._hf_lift import (VllmLoadError, _Module, _StateLayer, _inert, _lift_class, _lift_nested,
                       _lift_stmts, _load_error, _run, _stores, _unlifted)  # fmt: skip
from ._wrappers import run_with_hf_config, with_hf_config_code, wrapper_call

__all__ = ["ENTRY", "VllmLoadError", "vllm_config_class", "vllm_layers", "vllm_load_config", "vllm_model_config",
           "vllm_model_type"]
_REAL = frozenset("__future__ typing collections dataclasses copy math os json functools enum "
                  "itertools pydantic transformers torch".split())  # fmt: skip
from ._hf_tables import ENTRY, MERGES, NAMESPACES, MODELS as _MODELS  # noqa: E402

_INERT = """QKVParallelLinear RowParallelLinear ColumnParallelLinear MergedColumnParallelLinear
ReplicatedLinear DCPGroupColumnParallelLinear VocabParallelEmbedding ParallelLMHead LogitsProcessor
RMSNorm GemmaRMSNorm LayerNorm get_rope SiluAndMul MLAModules make_attention_sink PPMissingLayer
make_empty_intermediate_tensors_factory is_model_fused_shared_expert_compatible
SparseMLAIndexGroupBuilder get_sparse_mla_index_group_max_rows""".split()
#: What the attention layers' ``__init__`` keep (see :func:`_picker`).
_ATTN_KEEP = set("""sliding_window num_kv_heads vllm_config compilation_config
compilation_config.static_forward_context[prefix] self.layer_name self.num_heads self.head_size
self.head_size_v self.num_kv_heads self.sliding_window self.attn_type
self.kv_sharing_target_layer_name self.attention_chunk_size""".split()) | {
    "if kv_sharing_target_layer_name is not None"}  # validate_kv_sharing_target (Gemma 3n / 4: same build, before)
#: What the state layers' ``__init__`` keep (``MambaMixer2`` / ``Mixer2RMSNormGated``,
#: ``MambaMixer``, ``ShortConv``): the TP size, the values their asserts read, the norm, and the
#: registration into ``static_forward_context``.
_STATE_KEEP = set("""self.tp_size self.full_hidden_size self.group_size self.per_rank_hidden_size self.n_groups
self.use_rms_norm self.norm self.num_heads self.head_dim self.intermediate_size self.ssm_state_size
self.conv_kernel_size vllm_config compilation_config compilation_config.static_forward_context[prefix]
self.prefix""".split())


#: What ``ShortConv.get_state_shape`` reads: LFM2's layers keep a drafter's conv rows that the
#: model class's ``get_mamba_state_shape_from_config`` leaves out, so the oracle reads this layer's
#: own shape (the other state classes' equal their model class's, which the oracle takes).
_SHORT_CONV_SHAPE = {"self.conv_dim", "self.L_cache", "self.num_spec"}
_OWN_SHAPE = ("ShortConv",)


@dataclass
class _Env:
    cfg: dict[str, Any]  # the config-level namespace
    models: dict[str, dict[str, Any]]  # model file -> namespace
    registry: dict[str, tuple[str, str]]
    model_config_cls: type
    cache_window: Any  # EngineArgs.create_engine_config's CacheConfig.sliding_window rule
    post_init: Any  # ModelConfig.__post_init__'s two sliding-window edits
    attn: dict[str, Any]
    mla_head_size_v: int
    hooks: dict[str, Any]  # model file -> its config class's verify_and_update_config (lifted)
    state_layers: tuple[type, ...]  # the classes a state layer is an instance of
    vllm_config_cls: type  # VllmConfig's num_speculative_tokens and ReplaySSM checks (lifted) over a StrictConfig
    dtypes: dict[str, Any]  # STR_DTYPE_TO_TORCH_DTYPE
    mamba_backends: Any  # MambaBackendEnum (lifted)
    engine_config_cls: type  # the VllmConfig record a build runs with (its with_hf_config, see ._wrappers)
    wrapped: Any  # init_vllm_registered_model (lifted)
    maybe_prefix: Any


_CTX: dict[str, Any] = {}  # the build in progress: tp, pp_group, vllm_config


def _ctx(key: str) -> Any:
    if key not in _CTX:
        fail("vllm_oracle._hf", f"{key!r} outside a build")
    return _CTX[key]


@functools.cache
def _env(root: Path) -> _Env:
    def source(rel: str) -> Source:
        return Source(root, f"vllm/{rel}")

    table: dict[str, StrictModule] = {}

    def importer(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                 level: int = 0) -> Any:  # fmt: skip
        if name.startswith("vllm"):
            if name not in table or not fromlist or level:
                raise StubError(f"vllm_oracle._hf: import of {name!r} is not provided")
            return table[name]
        if level or name.partition(".")[0] not in _REAL:
            raise StubError(f"vllm_oracle._hf: import of {name!r} is not allowed")
        return builtins.__import__(name, globals, locals, fromlist, level)

    bi = dict(builtins.__dict__, __import__=importer)
    log: list[tuple[str, str]] = []
    envs = StrictModule("vllm.envs", {"VLLM_MLA_DISABLE": False, "VLLM_PP_LAYER_PARTITION": None,
                                      "VLLM_DCP_Q_REPLICATE": False, "is_set": lambda n: False,
                                      "VLLM_SSM_CONV_STATE_LAYOUT": None})

    def ns(module: str, **names: Any) -> dict[str, Any]:
        return {"__builtins__": bi, "__name__": f"vllm_oracle.hf.{module}", "envs": envs,
                "logger": RecordingLogger(module, log), **names}  # fmt: skip

    from typing import Callable, Sequence, final

    from pydantic import ConfigDict
    from pydantic.dataclasses import dataclass as pyd_dataclass

    never = ("get_hf_file_to_dict file_or_path_exists get_safetensors_params_metadata ConfigFormat "
             "common_broadcastable_dtype _SAFETENSORS_TO_TORCH_DTYPE").split()  # fmt: skip
    cfg = ns("config", Any=Any, final=final, Callable=Callable, Sequence=Sequence, copy=copy.copy,
             torch=torch, dataclass_fields=fields, ConfigDict=ConfigDict, dataclass=pyd_dataclass,
             os=__import__("os"), PreTrainedConfig=transformers.PreTrainedConfig,
             AutoConfig=transformers.AutoConfig, DeepseekV2Config=transformers.DeepseekV2Config,
             without_trust_remote_code=lambda kw: kw, ParallelConfig=object,
             **{n: Poison(n) for n in never})  # fmt: skip
    source("config/utils.py").lift(cfg, "getattr_iter")
    source("transformers_utils/config.py").lift(
        cfg, "CONFIG_FIELD_ALIASES", "get_hf_text_config", "set_default_rope_theta", "_ARCHITECTURE_TO_MODEL_TYPE",
        "is_rope_parameters_nested", "patch_legacy_rope_type", "patch_rope_parameters", "_CONFIG_ATTRS_MAPPING",
        "_maybe_remap_hf_config_attrs")
    cfg.update(math=math, ALLOWED_LAYER_TYPES=transformers.configuration_utils.ALLOWED_LAYER_TYPES)
    source("transformers_utils/deepseek_v4_utils.py").lift(cfg, "get_compress_ratios")
    source("config/model_arch.py").lift(cfg, "ModelArchitectureConfig")
    conv = source("transformers_utils/model_arch_config_convertor.py")
    defs = [n.name for n in conv.tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    conv.lift(cfg, *defs, "MODEL_ARCH_CONFIG_CONVERTORS")
    source("distributed/utils.py").lift(cfg, "get_pp_indices")
    source("transformers_utils/configs/eagle.py").lift(cfg, "EAGLEConfig")
    source("transformers_utils/configs/kimi_linear.py").lift(cfg, "KimiLinearConfig")  # vLLM's own class
    asr = ns("qwen3_asr_config", PreTrainedConfig=transformers.PreTrainedConfig,
             rope_config_validation=transformers.modeling_rope_utils.rope_config_validation)  # fmt: skip
    source("transformers_utils/configs/qwen3_asr.py").lift(
        asr, "Qwen3ASRAudioEncoderConfig", "Qwen3ASRTextConfig", "Qwen3ASRThinkerConfig", "Qwen3ASRConfig")
    cfg.update({n: asr[n] for n in ("Qwen3ASRTextConfig", "Qwen3ASRConfig")})  # vLLM's own classes
    step3 = ns("step3_vl_config", Any=Any, PreTrainedConfig=transformers.PreTrainedConfig)
    source("transformers_utils/configs/step3_vl.py").lift(
        step3, "Step3VisionEncoderConfig", "Step3TextConfig", "Step3VLConfig")
    cfg.update({n: step3[n] for n in ("Step3TextConfig", "Step3VLConfig")})  # vLLM's own (_CONFIG_REGISTRY)
    k3 = ns("kimi_k3_config", PreTrainedConfig=transformers.PreTrainedConfig, KimiLinearConfig=cfg["KimiLinearConfig"])
    source("transformers_utils/configs/kimi_k3.py").lift(k3, "KimiK3VisionConfig", "KimiK3Config")
    cfg["KimiK3Config"] = k3["KimiK3Config"]  # vLLM's own (_CONFIG_REGISTRY)
    source("transformers_utils/configs/beam.py").lift(cfg, "BeamConfig")  # vLLM's own (_CONFIG_REGISTRY)
    kimi_vl = ns("kimi_vl_config", PreTrainedConfig=transformers.PreTrainedConfig,
                 DeepseekV2Config=transformers.DeepseekV2Config)  # fmt: skip
    source("transformers_utils/configs/moonvit.py").lift(kimi_vl, "MoonViTConfig")
    source("transformers_utils/configs/kimi_vl.py").lift(kimi_vl, "KimiVLConfig")
    cfg["KimiVLConfig"] = kimi_vl["KimiVLConfig"]  # vLLM's own (_CONFIG_REGISTRY)
    source("transformers_utils/configs/chatglm.py").lift(cfg, "ChatGLMConfig")  # vLLM's own (_CONFIG_REGISTRY)
    spec_py = source("config/speculative.py")
    cfg["hf_config_override"] = spec_py.lift_member(cfg, "SpeculativeConfig", "hf_config_override")
    mtp_types = ns("speculative_types", Literal=Literal)
    spec_py.lift(mtp_types, "MTPModelTypes")  # the drafter types __post_init__ keeps method="mtp" for
    cfg["mtp_model_types"] = frozenset(get_args(mtp_types["MTPModelTypes"]))
    # SpeculativeConfig.__post_init__: n_predict read from the drafter, and its `elif n_predict is
    # not None:` block (the default and the divisibility check on num_speculative_tokens).
    cfg["n_predict_check"] = _lift_nested(spec_py, "SpeculativeConfig", "__post_init__", lambda s: (
        isinstance(s, ast.Assign) and ast.unparse(s.targets) == "n_predict") or (
        isinstance(s, ast.If) and ast.unparse(s.test) == "n_predict is not None"))  # fmt: skip
    model_py = source("config/model.py")
    methods = {m: model_py.lift_member(cfg, "ModelConfig", m) for m in """get_sliding_window
        get_head_size get_total_num_kv_heads get_num_kv_heads get_vocab_size get_num_attention_heads
        get_total_num_hidden_layers get_layers_start_end_indices get_num_layers use_mla
        is_deepseek_mla get_model_arch_config""".split()}  # fmt: skip
    methods["using_transformers_backend"] = lambda self: False  # restated: native model classes
    methods["_supports_multimodal_for_mm_prefix"] = lambda self: True
    edits = ("self.get_sliding_window() == 0", "self.disable_sliding_window")
    post_init = _lift_stmts(model_py, "ModelConfig", "__post_init__",
                            lambda s: isinstance(s, ast.If) and ast.unparse(s.test) in edits)
    cache_window = _lift_stmts(
        source("engine/arg_utils.py"), "EngineArgs", "create_engine_config",
        lambda s: bool(st := _stores(s)) and st <= {"sliding_window", "layer_types"})
    reg = ns("registry")
    tables = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS", "_SPECULATIVE_DECODING_MODELS")
    source("model_executor/models/registry.py").lift(reg, *tables)
    registry = {k: v for t in tables for k, v in reg[t].items()}
    multimodal = frozenset(reg["_MULTIMODAL_MODELS"])  # ModelConfig.is_multimodal_model (restated)

    inert_nn = {n: _inert(f"nn.{n}") for n in ("Identity", "Sequential", "GELU", "Linear",
                                               "Parameter", "LayerNorm", "Embedding", "Dropout")}  # fmt: skip
    nn = StrictModule("torch.nn", {"Module": _Module, "ModuleList": list, "ModuleDict": dict,
                                   **inert_nn})  # fmt: skip
    real = ("float32", "float16", "int32", "long", "bfloat16", "uint8", "tensor", "zeros", "empty", "ones", "Tensor")
    torch_stub = StrictModule("torch", {"nn": nn, **{n: getattr(torch, n) for n in real}})
    utils = ns("models.utils", torch=torch_stub, PPMissingLayer=_inert("PPMissingLayer"))
    helpers = ("extract_layer_index", "maybe_prefix", "make_layers",
               "spec_decode_needs_target_embed")
    source("model_executor/models/utils.py").lift(utils, *helpers, "init_vllm_registered_model")
    with_hf = with_hf_config_code(source("config/vllm.py"))

    def with_hf_config(self: Any, hf_config: Any, architectures: list[str] | None = None) -> Any:
        """Restated ``VllmConfig.with_hf_config`` around its lifted text-config statements."""
        outer = self.model_config.hf_config
        # a nested call (Cosmos3 Edge's, on its text config, which names no architectures) is taken as
        # not multimodal: the flag only decides whether tie_word_embeddings is copied (no KV)
        archs = getattr(outer, "architectures", None)
        wrapper = StrictConfig(hf_config=outer, is_multimodal_model=bool(archs) and archs[0] in multimodal)
        out = copy.copy(self)
        out.model_config = copy.copy(self.model_config)
        out.model_config.hf_config = run_with_hf_config(with_hf, hf_config, architectures, wrapper)
        return out
    pp_group = lambda: _ctx("pp_group")  # noqa: E731
    offloader = StrictConfig(wrap_modules=list)  # restated: the default offloader is a no-op
    def config_file(file_name: str, model: Any, revision: Any = None) -> Any:
        # Restated: the checkpoint's config.json is the config being read (its to_dict()).
        if file_name != "config.json":
            fail("vllm_oracle._hf", f"get_hf_file_to_dict({file_name!r})")
        return copy.deepcopy(_ctx("config_file"))

    table.update({
        "vllm.transformers_utils.repo_utils": StrictModule("ru", {"get_hf_file_to_dict": config_file}),
        "vllm.distributed.utils": StrictModule("du", {"get_pp_indices": cfg["get_pp_indices"]}),
        "vllm.distributed.parallel_state": StrictModule("ps", {"get_pp_group": pp_group}),
        "vllm.model_executor.offloader": StrictModule("ol", {"get_offloader": lambda: offloader}),
        "vllm.model_executor.model_loader.utils": StrictModule("mlu", {"initialize_model": _initialize}),
        "vllm.model_executor.models.utils": StrictModule("mu", {"extract_layer_index": utils["extract_layer_index"]}),
        "vllm.config.utils": StrictModule("cu", {"getattr_iter": cfg["getattr_iter"]}),  # patch_rope_parameters'
    })  # fmt: skip
    bns = ns("backend", Enum=__import__("enum").Enum)
    source("v1/attention/backend.py").lift(bns, "AttentionType")
    common: dict[str, Any] = {n: _inert(n) for n in _INERT}
    common.update(
        torch=torch_stub, nn=nn, typing=__import__("typing"), Any=Any, _Module=_Module,
        _unlifted=_unlifted, AttentionType=bns["AttentionType"],
        CohereConfig=transformers.CohereConfig, getattr_iter=cfg["getattr_iter"],
        get_tensor_model_parallel_world_size=lambda: _ctx("tp"), get_pp_group=pp_group,
        get_tensor_model_parallel_rank=lambda: 0,  # restated: the oracle builds rank 0 (KV alike on every rank)
        get_current_vllm_config=lambda: _ctx("vllm_config"),
        get_draft_quant_config=lambda vc: None,  # restated: no quantization
        set_default_rope_theta=cfg["set_default_rope_theta"],
        current_platform=StrictModule("current_platform", {"device_type": "cuda"}),
        rocm_aiter_ops=StrictModule("rocm_aiter_ops", {"is_fused_moe_enabled": lambda: False}),
        **{n: utils[n] for n in helpers})  # fmt: skip
    # The attention layers: their signatures and the statements fixing geometry, window and
    # registration (ChunkedLocalAttention hands its backend, never read, to Attention).
    lns = ns("attention", **common, attn_backend=Poison("attn_backend"))
    source("model_executor/layers/attention/attention.py").lift(lns, "validate_kv_sharing_target")
    attn: dict[str, Any] = {"AttentionType": bns["AttentionType"]}
    for cls, file in (("Attention", "attention"), ("MLAAttention", "mla_attention"),
                      ("ChunkedLocalAttention", "chunked_local_attention")):  # fmt: skip
        src = source(f"model_executor/layers/attention/{file}.py")
        kv_dtype = {"kv_cache_dtype", "self.kv_cache_dtype"} if cls == "Attention" else set()  # cache_config's or auto
        attn[cls] = _lift_class(src, lns, cls, keep=_ATTN_KEEP | kv_dtype)
    # HRM-Text's PrefillPrefixLMAttention: its __init__'s super().__init__ (a decoder Attention; the
    # encoder-only backend it wraps owns no KV). Its spec's non_causal flag (a scheduling switch) is not recorded.
    prefix_lm = source("model_executor/layers/attention/prefill_prefix_lm_attention.py")
    attn["PrefillPrefixLMAttention"] = _lift_class(prefix_lm, {**lns, "Attention": attn["Attention"]},
                                                   "PrefillPrefixLMAttention", keep=set())  # fmt: skip
    # CrossAttention (an encoder-decoder's): its attn_type assertion and super().__init__ (an
    # ENCODER_DECODER Attention; the cross backend it wraps is never read).
    cross = source("model_executor/layers/attention/cross_attention.py")
    attn["CrossAttention"] = _lift_class(cross, {**lns, "Attention": attn["Attention"]}, "CrossAttention", keep=set())
    mla = attn["MLAAttention"]

    def mla_wrapper(hidden_size: int, num_heads: int, scale: float, qk_nope_head_dim: int,
                    qk_rope_head_dim: int, v_head_dim: int, q_lora_rank: int | None,
                    kv_lora_rank: int, mla_modules: Any, cache_config: Any = None,
                    quant_config: Any = None, prefix: str = "", **kw: Any) -> Any:  # fmt: skip
        """Restated ``MultiHeadLatentAttentionWrapper``: only builds its ``MLAAttention``."""
        return mla(num_heads=num_heads, scale=scale, qk_nope_head_dim=qk_nope_head_dim,
                   qk_rope_head_dim=qk_rope_head_dim, v_head_dim=v_head_dim,
                   q_lora_rank=q_lora_rank, kv_lora_rank=kv_lora_rank, kv_b_proj=None,
                   cache_config=cache_config, quant_config=quant_config, prefix=f"{prefix}.attn")

    common.update({k: attn[k] for k in ("Attention", "ChunkedLocalAttention", "MLAAttention",
                                        "PrefillPrefixLMAttention", "CrossAttention")},
                  EncoderOnlyAttention=Poison("EncoderOnlyAttention"),
                  MultiHeadLatentAttentionWrapper=mla_wrapper,
                  DeepseekAttention=Poison("DeepseekAttention (MHA)"))  # fmt: skip
    # The state layers' shapes and dtypes: vLLM's calculators (with `divide` and its dtype table).
    mu = ns("mamba_utils", torch=torch, functools=functools, Enum=enum.Enum, EnumMeta=enum.EnumMeta)
    source("config/mamba.py").lift(mu, "_MambaBackendEnumMeta", "MambaBackendEnum")
    source("distributed/utils.py").lift(mu, "ensure_divisibility", "divide")
    source("utils/torch_utils.py").lift(mu, "STR_DTYPE_TO_TORCH_DTYPE", "get_dtype_size", "get_kv_cache_torch_dtype")
    source("model_executor/layers/mamba/mamba_utils.py").lift(
        mu, "get_conv_state_layout", "is_conv_state_dim_first", "MambaStateDtypeCalculator",
        "MambaStateShapeCalculator")  # fmt: skip
    common.update(QwenGatedDeltaNetAttention=_StateLayer,
                  **{k: mu[k] for k in ("MambaStateShapeCalculator", "MambaStateDtypeCalculator")})
    # MambaMixer2 / Mixer2RMSNormGated: their TP asserts and the registration (the statements
    # assigning what they check), no weights.
    mixer = source("model_executor/layers/mamba/mamba_mixer2.py")
    mns2 = ns("mamba_mixer2", **common)
    for cls in ("Mixer2RMSNormGated", "MambaMixer2"):
        common[cls] = _lift_class(mixer, mns2, cls, keep=_STATE_KEEP)
    common["MambaMixer"] = _lift_class(  # Mamba-1: its registration
        source("model_executor/layers/mamba/mamba_mixer.py"), ns("mamba_mixer", **common), "MambaMixer",
        keep=_STATE_KEEP)  # fmt: skip
    common["ShortConv"] = _lift_class(source("model_executor/layers/mamba/short_conv.py"), ns("short_conv", **common),
                                      "ShortConv", ("get_state_shape",), keep=_STATE_KEEP | _SHORT_CONV_SHAPE)  # fmt: skip
    hooks = ns("models.config")
    config_py = source("model_executor/models/config.py")
    nemotron = config_py.lift_class(hooks, "NemotronHForCausalLMConfig",
                                    ("update_mamba_ssm_cache_dtype", "verify_and_update_config"), ("object",))
    for k, v in config_py.lift_class_values(hooks, "NemotronHForCausalLMConfig",
                                            "DEFAULT_MAMBA_SSM_CACHE_DTYPE").items():
        setattr(nemotron, k, v)
    config_hooks = {
        "qwen3_5": config_py.lift_member(hooks, "Qwen3_5ForConditionalGenerationConfig", "verify_and_update_config"),
        "nemotron_h": nemotron.verify_and_update_config,
    }
    # Nemotron-H VL / Omni: MODELS_CONFIG_MAP keys its hook by architecture name, and names one of the
    # four registry names of NemotronH_Nano_VL_V2's class (read from the map: the others get none).
    hooks["NemotronHForCausalLMConfig"] = nemotron
    nano = config_py.lift_class(hooks, "NemotronHNanoVLV2Config", ("verify_and_update_config",), ("object",))
    config_map = next(n.value for n in config_py.tree.body if isinstance(n, ast.AnnAssign | ast.Assign)
                      and "MODELS_CONFIG_MAP" in ast.unparse(n.target if isinstance(n, ast.AnnAssign) else n.targets[0]))
    assert isinstance(config_map, ast.Dict), "models/config.py: MODELS_CONFIG_MAP is no longer a dict literal"
    config_hooks.update({k.value: nano.verify_and_update_config for k, v in zip(config_map.keys, config_map.values)
                         if isinstance(k, ast.Constant) and ast.unparse(v) == "NemotronHNanoVLV2Config"})  # fmt: skip
    vllm_py = source("config/vllm.py")
    vllm_config_cls = type("VllmConfig", (StrictConfig,), {
        "num_speculative_tokens": vllm_py.lift_member(cfg, "VllmConfig", "num_speculative_tokens"),
        "with_hf_config": with_hf_config,  # a wrapper's state classmethods read their text model's class
        # --use-replayssm's startup checks (a pydantic "after" validator: MambaModelConfig has set
        # the cache mode by then)
        "validate_mamba_cached_kernel": vllm_py.lift_member(
            {**cfg, "MambaBackendEnum": mu["MambaBackendEnum"]}, "VllmConfig", "validate_mamba_cached_kernel",
            drop=("model_validator",))})  # fmt: skip
    models: dict[str, dict[str, Any]] = {}
    kimi_torch = StrictModule("torch", {**{k: v for k, v in vars(torch_stub).items() if not k.startswith("__")},
                                        "cuda": StrictModule("torch.cuda", {"Stream": _inert("torch.cuda.Stream")})})
    for module, (names, inert, imports) in _MODELS.items():
        mns = ns(f"models.{module.replace('/', '.')}", **common, **{n: _inert(n) for n in inert.split()})
        mns.update(NAMESPACES.get(module, {}))  # per-file names (see _hf_tables.NAMESPACES)
        if module.startswith(("models/kimi_k3/", "model_executor/layers/mamba/gdn/")):
            # restated: a CUDA stream object (never used), vLLM's `divide`, and the GEMM-RS/AR
            # kernels off (they own no KV)
            mns.update(torch=kimi_torch, divide=mu["divide"], maybe_init_gemm_rs_ar=lambda vllm_config, sp: False,
                       KimiK3DeltaAttention=Poison("KimiK3DeltaAttention (Kimi-K3's full-rank-gate KDA)"))
        for alias, origin in imports.items():
            file, _, cls = origin.partition(":")
            mns[alias] = models[file][cls or alias]
        src = source(f"{module}.py" if "/" in module else f"model_executor/models/{module}.py")
        for entry in names:
            name, *extra = (entry,) if isinstance(entry, str) else entry
            other, _, name = name.rpartition(":")  # "file:Class": lifted from another model file into this one
            src_n = source(f"model_executor/models/{other}.py") if other else src
            node = next((n for n in src_n.tree.body if getattr(n, "name", None) == name), None)
            if not isinstance(node, ast.ClassDef):  # a function or a module-level table
                src_n.lift(mns, name)
            else:
                keep = next((e for e in extra if isinstance(e, frozenset)), None)  # __init__'s kept names
                _lift_class(src_n, mns, name, tuple(e for e in extra if isinstance(e, str)), keep=keep)
        models[module] = mns
    kvi = source("v1/kv_cache_interface.py").lift_class_values(
        {"__name__": "vllm_oracle.hf.kvi"}, "MLAAttentionSpec", "head_size_v")
    model_config_cls = type("ModelConfig", (StrictConfig,), methods)
    return _Env(cfg, models, registry, model_config_cls, cache_window, post_init, attn,
                kvi["head_size_v"], config_hooks,
                (_StateLayer, common["MambaMixer2"], common["MambaMixer"], common["ShortConv"],
                 models["model_executor/layers/mamba/gdn/kimi_gdn_linear_attn"]["KimiGatedDeltaNetAttention"],
                 models["model_executor/layers/mamba/gdn/olmo_gdn_linear_attn"]["OlmoHybridGatedDeltaNetAttention"],
                 models["model_executor/layers/mamba/linear/base"]["LinearAttention"],
                 models["bailing_moe_v3"]["BailingMoeV3KimiDeltaAttention"]),
                vllm_config_cls,
                mu["STR_DTYPE_TO_TORCH_DTYPE"], mu["MambaBackendEnum"],
                type("VllmConfig", (StrictConfig,), {"with_hf_config": with_hf_config,
                                                     "num_speculative_tokens": vllm_config_cls.num_speculative_tokens}),
                utils["init_vllm_registered_model"], utils["maybe_prefix"])  # fmt: skip


def _model_config(env: _Env, hf_config: Any, disable_sliding_window: bool = False) -> Any:
    text = env.cfg["get_hf_text_config"](hf_config)
    mc = env.model_config_cls(hf_config=hf_config, hf_text_config=text, revision=None,
                              disable_sliding_window=disable_sliding_window,
                              model_arch_config=None, dtype=Poison("model_config.dtype"),
                              # restated: vLLM derives a positive length; only rope (inert) reads it
                              max_model_len=8192,
                              multimodal_config=None)  # restated: the text model only
    _CTX["config_file"] = hf_config.to_dict()  # what a re-read of config.json gives
    try:
        mc.model_arch_config = mc.get_model_arch_config()
    finally:
        _CTX.pop("config_file", None)
    _run(env.post_init, self=mc)
    return mc


@functools.cache
def _root() -> Path:
    from ._fetch import vllm_root

    return vllm_root()  # verified once per process


def vllm_model_config(config: Any, *, disable_sliding_window: bool = False) -> Any:
    """vLLM's ``ModelConfig`` methods (lifted) over a copy of ``config``."""
    return _model_config(_env(_root()), copy.deepcopy(config), disable_sliding_window)


def _initialize(vllm_config: Any, prefix: str = "") -> Any:
    """Restated ``initialize_model``: the registry's class for the config's first architecture,
    built under ``prefix`` with ``vllm_config`` current."""
    hf_config = vllm_config.model_config.hf_config
    archs = getattr(hf_config, "architectures", None) or []
    if not archs:
        raise VllmLoadError("No model architectures are specified")
    outer = _CTX["vllm_config"]
    _CTX["vllm_config"] = vllm_config
    try:
        return _build(_env(_root()), archs[0], vllm_config, hf_config, prefix)
    finally:
        _CTX["vllm_config"] = outer


def _served(env: _Env, where: tuple[str, str], *, vllm_config: Any, prefix: str = "") -> Any:
    """Restated: a wrapper building ``where`` (``(module, class)``, imported) itself on
    ``vllm_config.with_hf_config(..., architectures=[...])`` (Qwen3-ASR's ``Qwen3ForCausalLM``)
    builds what ``initialize_model`` builds for those architectures, where the registry serves
    them with that very class."""
    archs = vllm_config.model_config.hf_config.architectures
    if env.registry.get(archs[0]) != where:
        raise LookupError(f"vllm_oracle._hf: {'.'.join(where)} is not the class vLLM serves {archs[0]} with")
    return _initialize(vllm_config, prefix)


@functools.cache
def _merge_code(module: str, cls: str) -> Any:
    """``cls.__init__``'s ``if hasattr(config, 'text_config'):`` statement (PaddleOCR-VL's merge of
    its text config into its own), lifted."""
    src = Source(_root(), f"vllm/model_executor/models/{module}.py")
    return _lift_stmts(src, cls, "__init__", lambda s: isinstance(s, ast.If)
                       and ast.unparse(s.test) == "hasattr(config, 'text_config')")  # fmt: skip


def _build(env: _Env, arch: str, vllm_config: Any, hf_config: Any, outer: str = "") -> Any:
    if arch not in env.registry:
        raise VllmLoadError(f"Model architectures ['{arch}'] are not supported for now.")
    key = env.registry[arch]
    if key in MERGES:  # the __init__'s merge (lifted) on the model's config, then the class it builds
        builds, sub = MERGES[key]
        try:
            _run(_merge_code(*key), config=hf_config)
        except Exception as e:
            raise _load_error(e) from e
        return _build(env, builds, vllm_config, hf_config, env.maybe_prefix(outer, sub))
    if key not in ENTRY:
        call = wrapper_call(_root(), *key)
        if call is None:
            raise LookupError(f"vllm_oracle._hf: {arch} ({'.'.join(key)}) is not covered")
        # restated: ``self``, a record the __init__'s edits may set ``config`` on (dots.ocr's self.config)
        scope = {"config": hf_config, "vllm_config": vllm_config, "prefix": outer, "maybe_prefix": env.maybe_prefix,
                 "init_vllm_registered_model": env.wrapped, "self": StrictConfig(config=Poison("self.config"))}  # fmt: skip
        if call.builds != "init_vllm_registered_model" and call.builds in call.imported:  # the registry's own class
            scope[call.builds] = functools.partial(_served, env, call.imported[call.builds])
        elif call.builds != "init_vllm_registered_model":  # a class of the wrapper's file, lifted
            if call.builds not in env.models.get(call.module, {}):
                raise LookupError(f"vllm_oracle._hf: {arch} builds {call.builds}, which is not lifted")
            scope[call.builds] = env.models[call.module][call.builds]
        try:  # the wrapper's own call (init_vllm_registered_model, lifted, -> _initialize)
            return call.build(scope)
        except (StubError, NameError, LookupError, VllmLoadError):
            raise
        except Exception as e:
            raise _load_error(e) from e
    target, method, prefix, text = ENTRY[key]
    prefix = env.maybe_prefix(outer, prefix) if prefix else outer
    file, _, target = target.rpartition(":")
    cls = env.models[file or key[0]][target]
    if text:  # init_vllm_registered_model(hf_config=config.text_config) -> with_hf_config
        vllm_config.model_config = copy.copy(vllm_config.model_config)
        vllm_config.model_config.hf_config = hf_config.text_config
    try:  # the built decoder (what the model's `model` attribute holds)
        if method is None:
            return cls(vllm_config=vllm_config, prefix=prefix)
        return getattr(cls.__new__(cls), method)(vllm_config=vllm_config, prefix=prefix)
    except (StubError, NameError):
        raise
    except Exception as e:
        raise _load_error(e) from e


# vllm_layers lives in _hf_layers (it imports this module's environment); re-exported here.
from ._hf_layers import vllm_layers  # noqa: E402
from ._hf_configs import vllm_config_class, vllm_load_config, vllm_model_type  # noqa: E402
