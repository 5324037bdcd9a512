"""vLLM 0.33.0's reading of a Hugging Face config: the attention layers it registers.

:func:`layers_from_hf_config` turns a model's ``config.json`` (and a drafter's)
into the :class:`~kvbudget.vllm.LayerSpec` list vLLM's worker builds, in
registration order, so two config folders give a vLLM plan::

    from kvbudget import vllm
    from kvbudget.vllm.models import layers_from_hf_config

    engine = vllm.EngineConfig(tp=2, speculative_method="eagle3", num_speculative_tokens=3)
    layers = layers_from_hf_config("Llama-3.1-8B-Instruct/", engine, draft="EAGLE3-LLaMA3.1-8B/")
    vllm.plan(layers, 40 << 30, engine).kv_cache_size_tokens

What vLLM does, per family (each model file reads the config itself; these are
its rules, held to the wheel's own code by ``tests/test_vllm_models.py``):

* **KV heads per rank** ``max(1, total // tp)``, after vLLM's asserts that
  ``tp`` divides the heads and the KV heads divide or are divided by ``tp``;
  gpt-oss takes ``total // tp``; MLA has one.
* **Head size**: ``head_dim`` when set, else ``hidden_size // num_attention_heads``
  (Qwen2, MiMo, Qwen2-MoE, OLMoE, Granite-MoE and StableLM always the latter; Gemma, gpt-oss and
  Llama 4 always ``head_dim``;
  GLM-4-MoE refuses a config without the key, as MiniMax-M2 one without ``rotary_dim``);
  MLA: ``kv_lora_rank + qk_rope_head_dim`` with no V part.
* **Sliding layers**: ``layer_types[i] == "sliding_attention"`` with the config's
  ``sliding_window`` as it is (Cohere2: plus one); gpt-oss: the even layers;
  Qwen2/Qwen3, MiMo, GLM-4, HyperCLOVAX, StableLM and the MoE decoders (Qwen2/3-MoE, Mixtral, GLM-4-MoE,
  MiniMax-M2, OLMoE, ERNIE-4.5-MoE) pass no per-layer window; Granite (and Granite-SWA,
  Granite-MoE), Phi-3, ERNIE 4.5, EXAONE 4, Apertus and Afmoe read ``layer_types`` as Llama does
  (EXAONE 4 without it: every fourth layer full; Afmoe: every ``global_attn_every_n_layers``-th);
  TeleFLM is vLLM's Llama class with muP keys it reads (``use_mup``, then ``mup_scale_factor`` and
  ``output_mult``): a config without them is refused as vLLM fails on it. A layer without its own
  window takes the model-wide one, which is ``sliding_window`` only when ``layer_types`` is
  absent or all sliding (so a Mistral-7B-v0.1 config is sliding on every
  layer, drafter layers included), and never with ``disable_sliding_window`` (which leaves an
  EAGLE drafter's own sliding layers as they are: its ModelConfig is built without the flag).
* **Chunked layers** (Llama 4): ``no_rope_layers[i] != 0`` with ``attention_chunk_size``.
* **Text families with their own per-layer rules** (Gemma 4, Gemma 3n, Cohere2-MoE, EXAONE-MoE, Laguna,
  Muse Glimmer, HunYuan V3, AXK1): :mod:`kvbudget.vllm.text_families` (Gemma's KV-shared layers own no
  cache and are not listed, as vLLM's ``get_kv_cache_spec`` skips them; AXK1's layers are MLA).
* **Classic decoders** (GPT-2, GPT-J, OPT, BLOOM, Falcon, ChatGLM): :mod:`kvbudget.vllm.classic` (one
  ``Attention`` per block, MHA, Falcon's MQA / GQA or ChatGLM's KV groups, no drafter read).
* **MiniCPM3, GLM-4.7-Flash, LongCat-Flash** (:mod:`kvbudget.vllm.mla_families`): MiniCPM3's plain
  attention of the decompressed heads; DeepSeek-V2's MLA in GLM's decoder and twice per LongCat layer.
* **Zamba2, OLMo Hybrid** (:mod:`kvbudget.vllm.zamba2`, :mod:`kvbudget.vllm.olmo_hybrid`): Mamba-2
  layers beside shared attention blocks (one KV cache per hybrid layer); gated delta nets beside attention.
* **Multimodal wrappers** (LLaVA, Mistral 3, Qwen2-VL, ...; :mod:`kvbudget.vllm.wrappers`):
  the text model the wrapper builds, read as itself, its layer names under the wrapper's
  prefix (``language_model.``); a drafter inside one is refused as unchecked, and a state model
  but inside LFM2-VL and Nemotron-H VL / Omni (:mod:`kvbudget.vllm.state_wrappers`: the wrapper
  class's own state shape and config hook).
* **Pipeline stages**: vLLM's ``get_pp_indices`` (an even split, the remainder
  to the stages before the last); drafter layers sit on the last stage.
* **Drafters**, after the target's layers: EAGLE numbers its layers from the
  last stage's layer count and EAGLE3 from the model's (its ``layer_types``
  index from 0); DeepSeek MTP adds ``num_nextn_predict_layers`` MLA layers of
  the target's geometry. Drafter heads per rank use the target's TP.
* **EAGLE3 on a target without the interface**: an EAGLE3 drafter reads the target's
  auxiliary hidden states unless its ``eagle_config`` says ``use_aux_hidden_state: false``,
  and vLLM then refuses to start unless the target's class is ``SupportsEagle3``
  (:data:`EAGLE3_ARCHITECTURES`; not Gemma 2/3, Cohere 2, Falcon-H1, Granite-4.0-H, LFM2 or
  Jamba), and with Model Runner V2 (the default) and more than one pipeline stage unless the
  target's decoder relays aux hidden states over stages (:data:`EAGLE3_PP_ARCHITECTURES`):
  kvbudget refuses both with vLLM's messages.

Gated-delta-net hybrids (Qwen3-Next, Qwen3.5) are read by :mod:`kvbudget.vllm.state_models`, their
state layers included. Classes with rules of their own are read by a module each: by name through
:data:`kvbudget.vllm.named.NAMED_READERS` (Step3 and Step3-VL, Step-3.5, Beam, HRM-Text,
DiffusionGemma, Cohere Compass, Cosmos3-Edge, MiniCPM-V 4.6 / 4.7, Intern-S2 Mobius, Kimi-K3,
Inkling: its conv states, MiniMax-M3: its indexer caches and 128-token blocks, and ERNIE-4.5-VL,
refused as vLLM refuses it), and :mod:`~kvbudget.vllm.dsa` (DeepSeek-V3.2, GLM-5,
HunYuan-V4: the indexer key caches; DeepSeek-V3.2's and GLM-5's MTP drafter) and
:mod:`~kvbudget.vllm.whisper` (cross-attention).

Scope: those, and the architectures in :data:`ARCHITECTURES` (every name vLLM's registry serves with
one of the classes above, :data:`SERVED_AS`: ``Ministral3ForCausalLM`` is read as vLLM's
``MistralForCausalLM``); others raise :class:`~kvbudget.models.ConfigError`. Per-layer KV dtype skips
and quantisation schemes are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError, PathOrDict, _View, config_dtype, load_hf_config
from kvbudget.models.layer_kinds import derived_layer_types
from kvbudget.vllm.classic import CLASSIC, classic_layers, nemotron_checks, teleflm_checks
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerKind, LayerSpec
from kvbudget.vllm import state_wrappers
from kvbudget.vllm.dsa import DSA_ARCHITECTURES, dsa_layers
from kvbudget.vllm.whisper import WHISPER, whisper_layers
from kvbudget.vllm.named import NAMED_READERS, ReadOptions
from kvbudget.vllm.mla_families import MLA_FAMILIES, mla_family_layers
from kvbudget.vllm.mtp_method import check_mtp_method
from kvbudget.vllm.olmo_hybrid import olmo_hybrid_layers
from kvbudget.vllm.pure_mamba import PURE_MAMBA_ARCHITECTURES, pure_mamba_layers
from kvbudget.vllm.zamba2 import zamba2_layers
from kvbudget.vllm.refusal import split_unevenly
from kvbudget.vllm.registry import NOT_PIPELINE_PARALLEL, registry, served_as
from kvbudget.vllm.state_common import check_mtp_divisible
from kvbudget.vllm.state_models import STATE_ARCHITECTURES, state_layers_from_hf_config, state_target_layers
from kvbudget.vllm.text_families import TEXT_FAMILIES, text_family_layers
from kvbudget.vllm import bare_text_models
from kvbudget.vllm.wrappers import unwrap

__all__ = ["ARCHITECTURES", "DRAFT_METHODS", "EAGLE3_ARCHITECTURES", "EAGLE3_PP_ARCHITECTURES", "SERVED_AS",
           "layers_from_hf_config", "pp_stage_layers"]  # fmt: skip

# Family -> the architectures vLLM 0.33.0 builds with it. A ``...ForConditionalGeneration``
# wrapper names its text layers ``language_model.model.layers``; the others ``model.layers``.
_BY_FAMILY: Final[dict[str, tuple[str, ...]]] = {
    # decoders whose sliding layers are ``layer_types``' (with the config's window as it is)
    "llama": ("LlamaForCausalLM", "MistralForCausalLM", "GraniteForCausalLM", "Phi3ForCausalLM", "Ernie4_5ForCausalLM",
              "Exaone4ForCausalLM", "ApertusForCausalLM", "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM",
              "AfmoeForCausalLM", "TeleFLMForCausalLM"),
    # decoders whose attention takes no per-layer window: every layer the model's window, if any
    "uniform": ("Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MixtralForCausalLM", "Glm4MoeForCausalLM",
                "MiniMaxM2ForCausalLM", "OlmoeForCausalLM", "Glm4ForCausalLM", "Ernie4_5_MoeForCausalLM",
                "HyperCLOVAXForCausalLM", "StableLmForCausalLM", "PhiMoEForCausalLM", "NemotronForCausalLM"),
    "qwen2": ("Qwen2ForCausalLM", "MiMoForCausalLM"),
    "qwen3": ("Qwen3ForCausalLM",),
    "gemma": ("GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
    "gpt_oss": ("GptOssForCausalLM",),
    "cohere2": ("Cohere2ForCausalLM",),
    "llama4": ("Llama4ForCausalLM", "Llama4ForConditionalGeneration"),
    "mla": ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "MistralLarge3ForCausalLM"),
}
# Architecture -> (family, layer-name prefix).
_FAMILIES: Final[dict[str, tuple[str, str]]] = {
    arch: (family, "language_model.model.layers" if arch.endswith("ForConditionalGeneration") else "model.layers")
    for family, archs in _BY_FAMILY.items()
    for arch in archs
}
#: Every name vLLM 0.33.0's registry serves with a class whose attention layers kvbudget reads -> the
#: name kvbudget reads it as (itself, or the name of the same class: ``Ministral3ForCausalLM`` ->
#: ``MistralForCausalLM``); the hybrid-state ones by their own names only (vLLM's Nemotron-H class
#: reads a Puzzle config's heterogeneous blocks, which kvbudget does not).
SERVED_AS: Final[dict[str, str]] = {
    **{a: served_as(a, _FAMILIES) for a in registry() if served_as(a, _FAMILIES) in _FAMILIES},
    **{a: served_as(a, CLASSIC) for a in registry() if served_as(a, CLASSIC) in CLASSIC},
    **{a: served_as(a, TEXT_FAMILIES) for a in registry() if served_as(a, TEXT_FAMILIES) in TEXT_FAMILIES},
    **{a: a for a in STATE_ARCHITECTURES},
    **{a: a for a in MLA_FAMILIES},
    "Zamba2ForCausalLM": "Zamba2ForCausalLM",
    "OlmoHybridForCausalLM": "OlmoHybridForCausalLM",
    **{a: a for a in PURE_MAMBA_ARCHITECTURES},
    **{a: a for a in DSA_ARCHITECTURES},
    WHISPER: WHISPER,
}
#: The target architectures :func:`layers_from_hf_config` reads as vLLM 0.33.0 does through its family
#: tables (and the DSA models and Whisper). Not listed: the multimodal wrappers and the classes read by
#: their own modules, dispatched by name (:data:`kvbudget.vllm.named.NAMED_READERS`);
#: ``docs/census.md`` lists every row.
ARCHITECTURES: Final[frozenset[str]] = frozenset(a for a, s in SERVED_AS.items()
                                                 if s in _FAMILIES or s in CLASSIC or s in TEXT_FAMILIES
                                                 or s in MLA_FAMILIES or s in DSA_ARCHITECTURES or s == WHISPER)  # fmt: skip
#: ``EngineConfig.speculative_method`` values whose drafter layers are read.
DRAFT_METHODS: Final[frozenset[str]] = frozenset({"eagle", "eagle3", "mtp"})
#: The architectures kvbudget reads whose vLLM 0.33.0 class implements ``SupportsEagle3``
#: (``model_executor/models/interfaces.py``; held to the wheel's class hierarchy by
#: ``tests/test_vllm_models.py``). vLLM asks ``supports_eagle3(model)`` of the built target when an
#: EAGLE3 drafter reads auxiliary hidden states. (Each name of :data:`SERVED_AS` whose class is one of these.)
_EAGLE3: Final = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM",
    "MistralLarge3ForCausalLM", "DeepseekForCausalLM", "SarvamMLAForCausalLM", "Step1ForCausalLM",
    "GptOssForCausalLM", "GraniteForCausalLM", "KimiLinearForCausalLM",
    "MiniMaxM2ForCausalLM", "Qwen3MoeForCausalLM", "Phi3ForCausalLM", "Ernie4_5ForCausalLM", "MiMoForCausalLM",
    "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM", "ApertusForCausalLM", "AfmoeForCausalLM",
    "TeleFLMForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "LlamaForCausalLM",
    "Gemma4ForCausalLM", "LagunaForCausalLM", "Cohere2MoeForCausalLM", "MuseGlimmerForCausalLM",
    "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM",
    "MistralForCausalLM", "MiniCPM3ForCausalLM", "MiniCPMForCausalLM",
    "NemotronHForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"})  # fmt: skip
EAGLE3_ARCHITECTURES: Final[frozenset[str]] = frozenset(a for a, s in SERVED_AS.items() if s in _EAGLE3)
#: Of :data:`EAGLE3_ARCHITECTURES`, those whose decoder (the model's ``model``, or its language
#: model's) sets ``supports_aux_hidden_states_over_pp``: Model Runner V2 starts an EAGLE3 drafter
#: that reads aux hidden states on the others only with one pipeline stage. Held to the wheel's
#: built decoders by ``tests/test_vllm_models.py``.
_EAGLE3_PP: Final = frozenset({
    "KimiLinearForCausalLM", "Llama4ForCausalLM", "Llama4ForConditionalGeneration", "LlamaForCausalLM",
    "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Phi3ForCausalLM", "Ernie4_5ForCausalLM",
    "MiMoForCausalLM", "TeleFLMForCausalLM", "SarvamMLAForCausalLM"})  # fmt: skip
EAGLE3_PP_ARCHITECTURES: Final[frozenset[str]] = frozenset(a for a, s in SERVED_AS.items() if s in _EAGLE3_PP)
# The drafter architectures (after EAGLEConfig's renaming) vLLM builds with its Llama EAGLE heads.
_LLAMA_DRAFTERS: Final[dict[str, frozenset[str]]] = {
    "eagle": frozenset({"EagleLlamaForCausalLM"}),
    "eagle3": frozenset({"Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3"}),
}


def _drafter_architecture(method: str, cfg: Mapping[str, Any]) -> str:
    """The architecture vLLM's ``EAGLEConfig`` gives the drafter (``Eagle`` / ``Eagle3``
    prefixed unless the name already says so); ConfigError unless it is a Llama EAGLE head."""
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConfigError("draft config.json: vLLM's EAGLEConfig needs the drafter's 'architectures'",
                          "architectures")  # fmt: skip
    arch = archs[0]
    if method == "eagle":
        name = arch if arch.startswith("Eagle") else f"Eagle{arch}"
    else:
        name = arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"
    if name not in _LLAMA_DRAFTERS[method]:
        raise ConfigError(f"draft config.json: vLLM 0.33.0 builds the {method} drafter {arch!r} as {name!r}; "
                          f"kvbudget reads its Llama heads ({', '.join(sorted(_LLAMA_DRAFTERS[method]))})",
                          "architectures")  # fmt: skip
    return name


def _eagle3_startup(arch: str, cfg: Mapping[str, Any], engine: EngineConfig) -> None:
    """vLLM's startup checks of an EAGLE3 drafter on ``arch``, as ``load_model`` runs them:
    a drafter that reads auxiliary hidden states (its ``eagle_config.use_aux_hidden_state``, true
    unless set false) needs a ``SupportsEagle3`` target, and with Model Runner V2 (the default:
    ``requires_aux_hidden_states``, then ``set_eagle3_aux_hidden_state_layers``) a target whose
    decoder relays aux hidden states over pipeline stages when ``pp > 1``
    (:data:`EAGLE3_PP_ARCHITECTURES`). Model Runner V1: ``SpecDecodeBaseProposer.
    _get_eagle3_use_aux_hidden_state_from_config``, then ``GPUModelRunner.
    _setup_eagle3_aux_hidden_state_outputs`` (no PP check, another message)."""
    if engine.speculative_method != "eagle3":
        return
    eagle_config = cfg.get("eagle_config")
    v2 = engine.use_v2_model_runner
    if v2 and not eagle_config:
        eagle_config = {}  # `getattr(hf_config, "eagle_config", None) or {}`
    if eagle_config is not None and not isinstance(eagle_config, Mapping):
        raise ConfigError("draft config.json: vLLM 0.33.0 reads eagle_config.get('use_aux_hidden_state'); "
                          f"eagle_config is {type(eagle_config).__name__}, not a mapping", "eagle_config")  # fmt: skip
    use_aux = True if eagle_config is None else eagle_config.get("use_aux_hidden_state", True)
    if not use_aux:
        return
    if arch not in EAGLE3_ARCHITECTURES:
        why = "" if v2 else " but aux_hidden_state_outputs was requested"
        raise ConfigError(f"vLLM 0.33.0 refuses it: Model does not support EAGLE3 interface{why} ({arch} is not "
                          "SupportsEagle3; an EAGLE3 drafter whose eagle_config sets use_aux_hidden_state false "
                          "starts)", "eagle_config")  # fmt: skip
    if v2 and engine.pp > 1 and arch not in EAGLE3_PP_ARCHITECTURES:
        raise ConfigError(f"vLLM 0.33.0 refuses it: {arch} does not support eagle3 with pipeline parallelism "
                          "(Model Runner V2: its decoder does not relay aux hidden states over stages)", "pp")  # fmt: skip


def _per_rank(v: _View, total: int, tp: int, replicate: bool = True) -> int:
    heads = v.req_int("num_attention_heads")
    if heads % tp:
        raise ConfigError(f"{v.label}: vLLM asserts tp ({tp}) divides num_attention_heads ({heads})")
    if split_unevenly(total, tp):
        raise ConfigError(f"{v.label}: vLLM asserts the {total} KV heads and tp={tp} divide one another")
    per_rank = total // tp
    if per_rank == 0 and not replicate:
        raise ConfigError(f"{v.label}: vLLM 0.33.0's gpt-oss gives {total} KV heads // tp={tp} = 0 per rank")
    per_rank = max(1, per_rank)
    if (heads // tp) % per_rank:  # Attention's own assertion
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: num_heads ({heads // tp}) is not divisible by "
                          f"num_kv_heads ({per_rank})", v.name("num_key_value_heads"))  # fmt: skip
    return per_rank


#: Classes whose attention takes ``hidden_size // num_attention_heads`` whatever ``head_dim`` says.
_HEAD_DIM_FROM_HIDDEN: Final = frozenset({"Qwen2ForCausalLM", "MiMoForCausalLM", "Qwen2MoeForCausalLM",
                                          "OlmoeForCausalLM", "GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM",
                                          "StableLmForCausalLM"})  # fmt: skip


def _head_dim(v: _View, family: str) -> int:
    arch = v.architectures[0] if v.architectures else ""
    if family in ("gemma", "gpt_oss", "llama4"):
        return v.req_int("head_dim")
    for key in ("head_dim", "use_qk_norm"):  # Glm4MoeDecoderLayer reads both from the config
        if arch == "Glm4MoeForCausalLM" and not v.has(key):
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AttributeError: the GLM-4 MoE config has no "
                              f"{key}", v.name(key))  # fmt: skip
    explicit = None if arch in _HEAD_DIM_FROM_HIDDEN else v.opt_int("head_dim")
    return explicit or v.req_int("hidden_size") // v.req_int("num_attention_heads")


class _Reader:
    """One config's per-layer rules as vLLM's model file applies them."""

    def __init__(self, cfg: Mapping[str, Any], family: str, label: str, disable_sliding_window: bool) -> None:
        self.v = v = _View(cfg, label, engine="vllm")  # the defaults of the class vLLM loads it with
        self.family = family
        self.n = v.req_int("num_hidden_layers")
        pattern = v.opt_int("sliding_window_pattern") or v.opt_int("_sliding_window_pattern")
        types = derived_layer_types(v.model_type, self.n, v.raw("layer_types"), pattern)
        if types is None and v.model_type == "afmoe":  # transformers' AfmoeConfig: every n-th layer global
            every = v.req_int("global_attn_every_n_layers")
            types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(self.n)]
        if family == "uniform" and v.model_type in ("qwen2_moe", "qwen3_moe") and v.raw("use_sliding_window"):
            raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's Qwen MoE sliding window "
                              "(use_sliding_window)", v.name("use_sliding_window"))  # fmt: skip
        if family == "uniform" and v.model_type == "minimax_m2" and not v.has("rotary_dim"):
            raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: the MiniMax-M2 config has no "
                              "rotary_dim", v.name("rotary_dim"))  # fmt: skip
        if (family in ("qwen2", "qwen3") or v.model_type in ("qwen2_moe", "qwen3_moe")) and not v.raw(
                "use_sliding_window"):  # fmt: skip
            window = None  # transformers' Qwen classes keep sliding_window only with use_sliding_window
        else:
            window = v.opt_int("sliding_window", 0) or None
        if types is None and family in ("qwen2", "qwen3"):  # transformers: sliding from max_window_layers on
            first = v.opt_int("max_window_layers", 0)
            first = self.n if first is None else first
            types = ["sliding_attention" if window is not None and i >= first else "full_attention"
                     for i in range(self.n)]  # fmt: skip
        self.window = None if disable_sliding_window else window
        self.types = types
        # vLLM's CacheConfig.sliding_window: the model's window only for a model of no or only sliding layer types.
        uniform = types is None or all(t == "sliding_attention" for t in types)
        self.model_window = self.window if uniform else None
        if family in ("qwen2", "qwen3") and types is not None and len(set(types)) > 1:
            mwl = v.raw("max_window_layers")
            if mwl != self.n:
                raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: Sliding window for some but all layers is "
                                  f"not supported. This model uses sliding window but `max_window_layers` = {mwl} "
                                  f"is less than `num_hidden_layers` = {self.n}.", v.name("max_window_layers"))  # fmt: skip

    def layer(self, i: int, types_index: int, tp: int) -> tuple[LayerKind, int, int, int | None, int | None]:
        """``(kind, KV heads per rank, head size, head size V, window or chunk)`` of layer ``i``."""
        v, family = self.v, self.family
        if family == "mla":
            return "mla", 1, v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", 0), 0, None
        total = v.opt_int("num_key_value_heads") or v.req_int("num_attention_heads")
        heads = _per_rank(v, total, tp, replicate=family != "gpt_oss")
        dim = _head_dim(v, family)
        window: int | None = None
        if family == "llama4":
            # transformers' Llama4TextConfig: an empty list means a NoPE layer every `no_rope_layer_interval`.
            every = v.opt_int("no_rope_layer_interval") or 4
            nope = v.opt_list("no_rope_layers") or [int((j + 1) % every != 0) for j in range(self.n)]
            chunk = v.opt_int("attention_chunk_size")
            if chunk and i < len(nope) and nope[i] != 0:
                return "chunked", heads, dim, dim, chunk
        elif family == "gpt_oss":
            window = self.window if i % 2 == 0 else None
        elif family in ("llama", "gemma", "cohere2") and self.types:
            if types_index >= len(self.types):
                raise ConfigError(f"{v.label}: vLLM asserts layer {types_index} is within layer_types "
                                  f"({len(self.types)} entries)", v.name("layer_types"))  # fmt: skip
            if self.types[types_index] == "sliding_attention" and family == "cohere2" and self.window is None:
                # CohereAttention adds one to hf_text_config.sliding_window, which the flag (or a window
                # of 0) has set to None
                raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: TypeError: Cohere 2 adds 1 to a sliding "
                                  "window that --disable-sliding-window (or sliding_window 0) left None",
                                  v.name("sliding_window"))  # fmt: skip
            if self.types[types_index] == "sliding_attention" and self.window is not None:
                window = self.window + (1 if family == "cohere2" else 0)
        if window is None:
            window = self.model_window
        return ("sliding" if window else "full"), heads, dim, dim, window


def _spec(name: str, layer: tuple[LayerKind, int, int, int | None, int | None], dtype: str, model_dtype: str,
          is_draft: bool, stage: int) -> LayerSpec:  # fmt: skip
    kind, heads, dim, dim_v, extent = layer
    return LayerSpec(name, kind, num_kv_heads=heads, head_size=dim, head_size_v=dim_v,
                     kv_cache_dtype=dtype, model_dtype=model_dtype,
                     sliding_window=extent if kind == "sliding" else None,
                     attention_chunk_size=extent if kind == "chunked" else None,
                     is_draft=is_draft, pp_stage=stage)  # fmt: skip


def _family(cfg: Mapping[str, Any], label: str) -> tuple[str, str]:
    archs = cfg.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch not in _FAMILIES:
        read = ", ".join(sorted({*_FAMILIES, *CLASSIC, *TEXT_FAMILIES}))
        raise ConfigError(f"{label}: kvbudget reads vLLM 0.33.0's layers for {read}; not {arch!r}",
                          "architectures")  # fmt: skip
    return _FAMILIES[arch]


def _model_dtype(cfg: Mapping[str, Any]) -> str:
    """What ``"auto"`` stores: the config's 16-bit dtype, else bfloat16 (kvbudget's default reading)."""
    d = config_dtype(cfg)
    return str(d) if d in ("float16", "bfloat16") else "bfloat16"


def layers_from_hf_config(
    config: PathOrDict,
    engine: EngineConfig | None = None,
    *,
    draft: PathOrDict | None = None,
    kv_cache_dtype: str = "auto",
    draft_kv_cache_dtype: str | None = None,
    model_dtype: str | None = None,
    disable_sliding_window: bool = False,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
    gdn_prefill_backend: str = "flashinfer",
) -> list[LayerSpec]:
    """The attention layers vLLM 0.33.0 registers for a model (and its drafter), in order.

    Args:
        config: the target's ``config.json`` (a dict, the file, or its folder).
        engine: gives ``tp``, ``pp`` and ``speculative_method`` (``"eagle"`` and
            ``"eagle3"`` read ``draft``; ``"mtp"`` the target's
            ``num_nextn_predict_layers``, or a Qwen3.5's ``mtp_num_hidden_layers``); default
            :class:`~kvbudget.vllm.EngineConfig`.
        draft: the EAGLE/EAGLE3 drafter's config (a Llama-architecture head).
        kv_cache_dtype: ``--kv-cache-dtype`` for every layer.
        draft_kv_cache_dtype: the drafter layers' ``kv_cache_dtype``, default
            ``engine.draft_kv_cache_dtype`` (which :func:`kvbudget.vllm.plan` applies to
            drafter layers anyway), else ``kv_cache_dtype``.
        model_dtype: what ``"auto"`` stores; default the config's float16/bfloat16, else bfloat16.
        disable_sliding_window: ``--disable-sliding-window`` (every layer full).
        mamba_cache_dtype, mamba_ssm_cache_dtype: vLLM's ``--mamba-cache-dtype`` and
            ``--mamba-ssm-cache-dtype`` (a hybrid-state model's state layers).
        gdn_prefill_backend: ``"flashinfer"`` (vLLM's choice on Hopper) or ``"triton"``: whether a
            gated delta net exports prefill checkpoints (:mod:`kvbudget.vllm.state_models`).

    Raises:
        ConfigError: an architecture or drafter outside the scope above, a config
            vLLM refuses to load (its assertion), or a key missing or invalid.
    """
    engine = engine or EngineConfig()
    cfg = load_hf_config(config)
    archs = cfg.get("architectures")
    named = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    check_mtp_method(cfg, engine.speculative_method)  # SpeculativeConfig, built before the parallel checks
    # ModelConfig.verify_with_parallel_config (Gemma 3n's reader makes it after its window check, as vLLM)
    if engine.pp > 1 and named in NOT_PIPELINE_PARALLEL and not named.startswith("Gemma3n"):
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: NotImplementedError: Pipeline parallelism is not "
                          f"supported for this model ({named} does not implement SupportsPP)", "pp")  # fmt: skip
    if isinstance(archs, list) and archs and archs[0] in SERVED_AS:  # read by the class vLLM serves it with
        archs = [SERVED_AS[archs[0]], *archs[1:]]
        cfg = {**cfg, "architectures": archs}
    method = engine.speculative_method
    if method is None and draft is not None:
        raise ConfigError("draft= was given but engine.speculative_method is None")
    if method is not None and method not in DRAFT_METHODS:
        raise ConfigError(f"speculative_method={method!r}: kvbudget reads {sorted(DRAFT_METHODS)} drafters")
    if method in ("eagle", "eagle3") and draft is None:
        raise ConfigError(f"speculative_method={method!r} needs draft= (the drafter's config.json)")
    if method == "mtp" and draft is not None:
        raise ConfigError("draft=: speculative_method='mtp' reads the target's own MTP layers, not a drafter")
    dtype_m = model_dtype or _model_dtype(cfg)
    dtype_d = draft_kv_cache_dtype or engine.draft_kv_cache_dtype or kv_cache_dtype
    reader = NAMED_READERS.get(named or "")
    if reader is not None:  # a class read by a module of its own (kvbudget.vllm.named)
        if reader.refuse_drafters and method is not None:
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {named}",
                              "architectures")  # fmt: skip
        return reader.read(cfg, engine, ReadOptions(kv_cache_dtype, dtype_m, disable_sliding_window, mamba_cache_dtype,
                                                    mamba_ssm_cache_dtype, gdn_prefill_backend))  # fmt: skip
    wrapped = unwrap(cfg)
    if wrapped is not None:  # a multimodal wrapper: its text model, read as itself, under its prefix
        text, prefix = wrapped
        wrapper = cfg["architectures"][0]
        bare_text_models.check_window(wrapper, text, disable_sliding_window)
        if method is not None:
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {wrapper} (a "
                              "multimodal wrapper of its text model)", "architectures")  # fmt: skip
        state = served_as(text["architectures"][0], STATE_ARCHITECTURES) in STATE_ARCHITECTURES
        if state and not state_wrappers.reads(wrapper, served_as(text["architectures"][0], STATE_ARCHITECTURES)):
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's state layers inside {wrapper} "
                              f"(a wrapper of {text['architectures'][0]})", "architectures")  # fmt: skip
        ssm = state_wrappers.config_ssm_dtype(wrapper, mamba_cache_dtype, mamba_ssm_cache_dtype, dtype_m) if state \
            else mamba_ssm_cache_dtype  # fmt: skip
        inner = layers_from_hf_config(text, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=dtype_m,
                                      disable_sliding_window=disable_sliding_window,
                                      mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_cache_dtype=ssm)  # fmt: skip
        if state:  # the wrapper class's own state classmethods (kvbudget.vllm.state_wrappers)
            inner = state_wrappers.wrapper_state_shapes(wrapper, text, engine.tp, inner)
        return [replace(x, name=bare_text_models.layer_name(wrapper, prefix, x.name)) for x in inner]
    if isinstance(archs, list) and archs and archs[0] in PURE_MAMBA_ARCHITECTURES:  # attention-free: state only
        return pure_mamba_layers(cfg, engine, model_dtype=dtype_m,
                                 cache_dtypes=(mamba_cache_dtype, mamba_ssm_cache_dtype))  # fmt: skip
    if isinstance(archs, list) and archs and archs[0] in DSA_ARCHITECTURES:  # DeepSeek-V3.2, GLM-5: MLA + indexer
        return dsa_layers(cfg, engine, kv_cache_dtype, dtype_m, dtype_d)
    if isinstance(archs, list) and archs and archs[0] == WHISPER:  # encoder-decoder: cross-attention caches
        return whisper_layers(cfg, engine, kv_cache_dtype, dtype_m)
    if isinstance(archs, list) and archs and archs[0] == "Zamba2ForCausalLM":  # Mamba-2 and shared attention
        return zamba2_layers(cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=dtype_m,
                             cache_dtypes=(mamba_cache_dtype, mamba_ssm_cache_dtype))  # fmt: skip
    if isinstance(archs, list) and archs and archs[0] == "OlmoHybridForCausalLM":  # gated delta nets and attention
        return olmo_hybrid_layers(cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=dtype_m,
                                  cache_dtypes=(mamba_cache_dtype, mamba_ssm_cache_dtype))  # fmt: skip
    if isinstance(archs, list) and archs and archs[0] in STATE_ARCHITECTURES:
        out = state_layers_from_hf_config(
            cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=dtype_m,
            mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
            gdn_prefill_backend=gdn_prefill_backend, disable_sliding_window=disable_sliding_window,
            draft_kv_cache_dtype=draft_kv_cache_dtype)  # fmt: skip
        if draft is not None:
            n, window = state_target_layers(cfg)
            out += _eagle_drafter(load_hf_config(draft), engine, out, (n, window), (dtype_d, dtype_m), archs[0])
        return out
    if isinstance(archs, list) and archs and archs[0] in CLASSIC:  # GPT-2, GPT-J, OPT, BLOOM, Falcon, ChatGLM
        if method is not None:
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {archs[0]}",
                              "architectures")  # fmt: skip
        window = _Reader(cfg, "uniform", "config.json", disable_sliding_window).model_window
        return classic_layers(cfg, engine, window, kv_cache_dtype, dtype_m)
    if isinstance(archs, list) and archs and archs[0] in MLA_FAMILIES:  # MiniCPM3, GLM-4.7-Flash, LongCat-Flash
        return mla_family_layers(cfg, engine, disable_sliding_window, kv_cache_dtype, dtype_m)
    if isinstance(archs, list) and archs and archs[0] in TEXT_FAMILIES:  # Gemma 4, Gemma 3n (KV sharing)
        if method is not None:
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {archs[0]}",
                              "architectures")  # fmt: skip
        return text_family_layers(cfg, engine, kv_cache_dtype, dtype_m, disable_sliding_window)
    if isinstance(archs, list) and archs and served_as(archs[0], STATE_ARCHITECTURES) in STATE_ARCHITECTURES:
        raise ConfigError(f"config.json: kvbudget does not read {archs[0]}: vLLM 0.33.0 serves it with "
                          f"{served_as(archs[0], STATE_ARCHITECTURES)}'s class, which reads heterogeneous per-layer "
                          "blocks through the checkpoint's remote config code (get_nemotron_h_config_for_layer)",
                          "architectures")  # fmt: skip
    family, prefix = _family(cfg, "config.json")
    target = _Reader(cfg, family, "config.json", disable_sliding_window)
    if cfg["architectures"][0] == "NemotronForCausalLM":  # ModelConfig's check, before the model is built
        nemotron_checks(target.v)
    if family == "mla" and target.v.has("index_topk"):
        raise ConfigError("config.json: vLLM 0.33.0 builds DeepSeek's DSA indexer (a KV cache of its own) for a "
                          "config with index_topk; kvbudget's vLLM mode does not model it", "index_topk")  # fmt: skip
    tp, pp = engine.tp, engine.pp
    out = []
    for stage, (start, end) in enumerate(pp_stage_layers(target.n, pp)):
        for i in range(start, end):
            name = f"{prefix}.{i}.attn.attn" if family == "gpt_oss" else f"{prefix}.{i}.self_attn.attn"
            out.append(_spec(name, target.layer(i, i, tp), kv_cache_dtype, dtype_m, False, stage))
    if cfg["architectures"][0] == "TeleFLMForCausalLM":  # its muP keys, read after the Llama model is built
        teleflm_checks(target.v)
    if method == "mtp":
        if family != "mla":
            raise ConfigError(f"speculative_method='mtp': kvbudget reads DeepSeek's MTP layers, not {family}")
        k = target.v.req_int("num_nextn_predict_layers")
        check_mtp_divisible(engine, k)
        out += [_spec(f"model.layers.{target.n + j}.self_attn.attn", target.layer(0, 0, tp), dtype_d, dtype_m,
                      True, pp - 1) for j in range(k)]  # fmt: skip
    elif draft is not None:
        out += _eagle_drafter(load_hf_config(draft), engine, out, (target.n, target.model_window), (dtype_d, dtype_m),
                              cfg["architectures"][0])  # fmt: skip
    return out


def _eagle_drafter(dcfg: Mapping[str, Any], engine: EngineConfig, target_layers: list[LayerSpec],
                   target: tuple[int, int | None], dtypes: tuple[str, str], arch: str) -> list[LayerSpec]:  # fmt: skip
    """An EAGLE / EAGLE3 drafter's layers on the last PP stage, after ``target_layers``: its Llama
    head read with the target's TP and model-wide window (``target``: the target's layer count and
    CacheConfig window), EAGLE numbering from the last stage's layer count and EAGLE3 from the
    model's; then vLLM's EAGLE3 startup check on ``arch``. ``dtypes``: the drafter's KV dtype, the
    model dtype."""
    method = engine.speculative_method
    assert method in ("eagle", "eagle3")
    n, window = target
    _drafter_architecture(method, dcfg)
    # The drafter's own ModelConfig is built without --disable-sliding-window (SpeculativeConfig
    # passes it no such setting): its layers keep their windows. It shares the target's
    # CacheConfig, so its model-wide window is the target's.
    drafter = _Reader(dcfg, "llama", "draft config.json", False)
    drafter.model_window = window
    last = engine.pp - 1
    start, end = pp_stage_layers(n, engine.pp)[-1]
    begin = n if method == "eagle3" else end - start
    names = {x.name for x in target_layers if x.pp_stage == last}
    out: list[LayerSpec] = []
    for j in range(drafter.n):
        name = f"model.layers.{begin + j}.self_attn.attn"
        if name in names:
            raise ConfigError(f"draft config.json: vLLM registers the drafter's layer {name!r}, which the "
                              "target's last stage already holds")  # fmt: skip
        types_index = j if method == "eagle3" else begin + j
        out.append(_spec(name, drafter.layer(begin + j, types_index, engine.tp), *dtypes, True, last))
    _eagle3_startup(arch, dcfg, engine)
    return out
