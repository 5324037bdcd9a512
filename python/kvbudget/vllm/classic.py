"""vLLM 0.33.0's classic decoders: GPT-2, GPT-J, OPT, BLOOM, Falcon and ChatGLM, and the remote-code
decoders InternLM2, Orion, Solar, MiniCPM, DeepSeek-MoE, EXAONE 3, Ling / Bailing MoE, Sarvam-MoE
and Step1, read as their model files read them (and TeleFLM's muP keys, which vLLM's Llama-derived
TeleFLM class reads: :func:`teleflm_checks`).

Each registers one ``Attention`` per block, under the name its model class gives it, with the
config's ``hidden_size // num_attention_heads`` as head size whatever else the config says (no
``head_dim``, but Solar's and EXAONE's when set and Ling's when not null; no per-layer window):

============================  ==============================================  =======================
architecture                  layer names                                     KV heads (total)
============================  ==============================================  =======================
``GPT2LMHeadModel``           ``transformer.h.{i}.attn.attn``                 the query heads
``GPTJForCausalLM``           ``transformer.h.{i}.attn.attn``                 the query heads
``OPTForCausalLM``            ``model.decoder.layers.{i}.self_attn.attn``     the query heads
``BloomForCausalLM``          ``transformer.h.{i}.self_attention.attn``       the query heads (ALiBi)
``FalconForCausalLM``         ``transformer.h.{i}.self_attention.attn``       ``num_kv_heads`` with
                                                                              ``new_decoder_architecture``,
                                                                              else 1 with ``multi_query``,
                                                                              else the query heads
``ChatGLMModel``              ``transformer.encoder.layers.{i}.               ``multi_query_group_num`` with
                              self_attention.attn``                           ``multi_query_attention``, else
                                                                              the query heads
``InternLM2ForCausalLM``,     ``model.layers.{i}.attention.attn``             ``num_key_value_heads``
``BailingMoeForCausalLM``,
``BailingMoeV2ForCausalLM``,
``SarvamMoEForCausalLM``
``OrionForCausalLM``,         ``model.layers.{i}.self_attn.attn``             ``num_key_value_heads``
``MiniCPMForCausalLM``,                                                       (Solar: else the query
``SolarForCausalLM``,                                                         heads)
``DeepseekForCausalLM``
``ExaoneForCausalLM``         ``model.h.{i}.attn.attention.attn``             as Solar
``Step1ForCausalLM``          ``model.layers.{i}.self_attn.attn``             ``num_attention_groups``,
                                                                              else ``num_key_value_heads``,
                                                                              else 1 (ALiBi)
============================  ==============================================  =======================

Per rank: the query heads over ``tp`` (each class asserts ``tp`` divides them) and, for Falcon,
ChatGLM and the remote-code decoders, ``max(1, kv // tp)`` after its asserts that the KV heads and
``tp`` divide one another (Ling's: that the query heads are at least the KV heads), and
``Attention``'s that the rank's KV heads divide its query heads. The window is the model-wide one
(vLLM's ``CacheConfig.sliding_window``, which these configs normally lack), except for Falcon:
its rotary and ALiBi layers (``FalconConfig.rotary`` is ``not alibi``: every layer is one of them)
are built without the ``cache_config``, so they take no window and store ``"auto"`` (the model
dtype) whatever ``--kv-cache-dtype`` says. BLOOM's and Falcon's config classes take a legacy
``n_embed`` over ``hidden_size``. The classes' own refusals are kept, with vLLM's assertion named:
GPT-2's ``add_cross_attention``, ``scale_attn_by_inverse_layer_idx`` and ``reorder_and_upcast_attn``,
GPT-J's tied embeddings, ``rotary`` off or an odd ``rotary_dim``, BLOOM's and Falcon's
``hidden_size`` not a multiple of the heads; and Falcon's odd fully rotated head, which
transformers' ``FalconConfig`` refuses to load; ChatGLM's vision config (GLM-4V) and a config without
``original_rope``, which ``GLMAttention`` reads and vLLM's own ``ChatGLMConfig`` (the class vLLM loads
``chatglm`` with) does not default; and a remote-code config without ``num_key_value_heads`` (but
Solar's and EXAONE's), Ling's without ``head_dim`` or ``embedding_dropout``, DeepSeek-MoE's without
``n_routed_experts`` (or, that set, ``first_k_dense_replace``), which the classes read. The
remote-code decoders' configs are the checkpoint's own class (``--trust-remote-code``), whose
attributes are its file's keys. A config of another ``model_type`` (Falcon's ``RefinedWeb``, which
vLLM loads with its own ``RWConfig``; remote code) is refused as unchecked.
Held to vLLM's classes by ``tests/test_vllm_classic.py`` and ``tests/test_vllm_remote_code.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import KV_HEAD_KEYS, ConfigError, _View
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.refusal import gqa_per_rank, refused, split_unevenly
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["CLASSIC", "classic_layers", "nemotron_checks", "teleflm_checks"]

#: Architecture -> (the blocks' prefix, the attention layer's name inside a block).
CLASSIC: Final[dict[str, tuple[str, str]]] = {
    "GPT2LMHeadModel": ("transformer.h", "attn.attn"),
    "GPTJForCausalLM": ("transformer.h", "attn.attn"),
    "OPTForCausalLM": ("model.decoder.layers", "self_attn.attn"),
    "BloomForCausalLM": ("transformer.h", "self_attention.attn"),
    "FalconForCausalLM": ("transformer.h", "self_attention.attn"),
    "ChatGLMModel": ("transformer.encoder.layers", "self_attention.attn"),
    "InternLM2ForCausalLM": ("model.layers", "attention.attn"),
    "OrionForCausalLM": ("model.layers", "self_attn.attn"),
    "SolarForCausalLM": ("model.layers", "self_attn.attn"),
    "MiniCPMForCausalLM": ("model.layers", "self_attn.attn"),
    "BailingMoeForCausalLM": ("model.layers", "attention.attn"),
    "BailingMoeV2ForCausalLM": ("model.layers", "attention.attn"),
    "SarvamMoEForCausalLM": ("model.layers", "attention.attn"),
    "DeepseekForCausalLM": ("model.layers", "self_attn.attn"),
    "ExaoneForCausalLM": ("model.h", "attn.attention.attn"),
    "Step1ForCausalLM": ("model.layers", "self_attn.attn"),
}
#: The remote-code decoders of :data:`CLASSIC` with grouped attention over ``num_key_value_heads``
#: (see :data:`_LENIENT`), with the class's and ``Attention``'s divisibility asserts.
_GROUPED: Final = frozenset({"InternLM2ForCausalLM", "OrionForCausalLM", "SolarForCausalLM", "MiniCPMForCausalLM",
                             "DeepseekForCausalLM", "ExaoneForCausalLM"})  # fmt: skip
#: Of :data:`_GROUPED`, the classes that read ``head_dim`` when set and default the KV heads to the
#: query heads (``getattr(config, "num_key_value_heads", config.num_attention_heads)``).
_LENIENT: Final = frozenset({"SolarForCausalLM", "ExaoneForCausalLM"})


#: Architecture -> the model types whose config class kvbudget reads it with (transformers' own; GPT-SW3
#: borrows GPT2Config). Another type is another class: vLLM's own RWConfig for Falcon's ``RefinedWeb`` /
#: ``RefinedWebModel`` (one KV head by default, the new decoder forced at width 8192), or remote code.
_MODEL_TYPES: Final[dict[str, tuple[str, ...]]] = {
    "GPT2LMHeadModel": ("gpt2", "gpt-sw3"), "GPTJForCausalLM": ("gptj",), "OPTForCausalLM": ("opt",),
    "BloomForCausalLM": ("bloom",), "FalconForCausalLM": ("falcon",), "ChatGLMModel": ("chatglm",),
    # remote code: the checkpoint's own class, which sets what its file holds
    "InternLM2ForCausalLM": ("internlm2",), "OrionForCausalLM": ("orion",), "SolarForCausalLM": ("solar",),
    "MiniCPMForCausalLM": ("minicpm",), "BailingMoeForCausalLM": ("bailing_moe",),
    "BailingMoeV2ForCausalLM": ("bailing_moe",), "SarvamMoEForCausalLM": ("sarvam_moe",),
    "DeepseekForCausalLM": ("deepseek",),
    "ExaoneForCausalLM": ("exaone",), "Step1ForCausalLM": ("step1",),
}
#: Ling / Bailing MoE (v1 and 2.0) and Sarvam-MoE (vLLM's Bailing class): ``BailingAttention``'s own
#: rules (no KV / TP divisibility assert).
_BAILING: Final = frozenset({"BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "SarvamMoEForCausalLM"})
#: Step1 (Step-Audio-EditX's decoder): ``StepAttention``'s KV heads (:func:`_step1_kv`).
_STEP1: Final = "Step1ForCausalLM"
_REMOTE: Final = _GROUPED | _BAILING | {_STEP1}


def _refused(v: _View, what: str, key: str | None = None) -> ConfigError:
    return ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AssertionError: {what}", v.name(key) if key else None)


def _geometry(v: _View, arch: str, tp: int) -> tuple[int, int]:
    """(KV heads per rank, head size), with the class's asserts in its order."""
    heads = v.req_int("num_attention_heads")
    hidden = v.req_int("hidden_size")
    if arch in ("BloomForCausalLM", "FalconForCausalLM") and v.cfg.get("n_embed") is not None:
        hidden = v.req_int("n_embed")  # the config class's __post_init__: n_embed over hidden_size
    dim = hidden // heads
    if arch in _LENIENT and v.cfg.get("head_dim") is not None:
        dim = v.req_int("head_dim")
    if arch == "BloomForCausalLM" and dim * heads != hidden:
        raise _refused(v, f"BloomAttention: hidden_size ({hidden}) is not a multiple of n_head ({heads})",
                       "hidden_size")  # fmt: skip
    if arch == "FalconForCausalLM":  # transformers' RoPE check, which FalconConfig runs on loading
        rope = v.raw("rope_parameters")
        partial = rope.get("partial_rotary_factor", 1.0) if isinstance(rope, Mapping) else 1.0
        full = isinstance(partial, (int, float)) and int(dim * partial) == dim  # an unset rope gets the default one
        if (rope is None or rope) and dim > 4 and dim % 2 and full:
            raise ConfigError(f"{v.label}: transformers 5.19.0's FalconConfig (vLLM's loader) refuses it: RoPE "
                              f"requires an even rotary dimension, but got `head_dim`={dim}",
                              v.name("hidden_size"))  # fmt: skip
    if arch in _GROUPED and arch not in _LENIENT and not v.has("num_key_value_heads"):
        raise _missing(v, "num_key_value_heads", f"{arch}'s decoder layer, before building the attention,")
    if arch in _BAILING:
        return _bailing_heads(v, heads, hidden, tp)
    if heads % tp:
        raise _refused(v, f"tp ({tp}) does not divide num_attention_heads ({heads})", "num_attention_heads")
    if arch == "GPTJForCausalLM":
        if not v.cfg.get("rotary", True):
            raise _refused(v, "GPTJAttention asserts getattr(config, 'rotary', True)", "rotary")
        if v.req_int("rotary_dim", 0) % 2:
            raise _refused(v, f"GPTJAttention: rotary_dim ({v.raw('rotary_dim')}) is odd", "rotary_dim")
    if arch == "ChatGLMModel":
        return _chatglm_heads(v, heads, tp), dim
    if arch in _GROUPED:
        return _grouped_heads(v, arch, heads, tp), dim
    if arch == _STEP1:
        return gqa_per_rank(heads, _step1_kv(v), tp, "num_attention_groups", f" ({arch})"), dim
    if arch != "FalconForCausalLM":
        return heads // tp, dim
    if dim * heads != hidden:
        raise _refused(v, f"FalconAttention: hidden_size ({hidden}) is not a multiple of num_attention_heads "
                          f"({heads})", "hidden_size")  # fmt: skip
    if v.raw("new_decoder_architecture"):
        kv = v.opt_int("num_kv_heads") or heads  # FalconConfig: num_kv_heads null -> the query heads
    else:
        kv = 1 if v.raw("multi_query") else heads
    if split_unevenly(kv, tp):
        raise _refused(v, f"FalconAttention: the {kv} KV heads and tp={tp} do not divide one another", "num_kv_heads")
    return _attention_per_rank(v, heads, kv, tp, "num_kv_heads"), dim


def _attention_per_rank(v: _View, heads: int, kv: int, tp: int, key: str) -> int:
    """The KV heads per rank of a grouped layer (``max(1, kv // tp)``), with ``Attention``'s assert
    that they divide the rank's query heads."""
    per_rank = max(1, kv // tp)
    if (heads // tp) % per_rank:
        raise _refused(v, f"Attention: num_heads ({heads // tp}) is not divisible by num_kv_heads ({per_rank})", key)
    return per_rank


def _grouped_heads(v: _View, arch: str, heads: int, tp: int) -> int:
    """The KV heads per rank of a :data:`_GROUPED` class's attention: the config's
    ``num_key_value_heads`` (:data:`_LENIENT`: else the query heads), with the class's assert that they and
    ``tp`` divide one another, then ``Attention``'s."""
    kv = v.req_int("num_key_value_heads") if v.has("num_key_value_heads") or arch not in _LENIENT else heads
    return gqa_per_rank(heads, kv, tp, "num_key_value_heads", f" ({arch})")


def _step1_kv(v: _View) -> int:
    """``StepAttention``'s KV heads: ``num_attention_groups``, else ``num_key_value_heads``, else 1
    (``getattr`` with defaults: a key the file lacks is not an attribute); one for a null or
    non-positive count. ``ModelConfig`` reads them first (:data:`~kvbudget.models.hf.KV_HEAD_KEYS`, into a
    pydantic ``int`` field), and refuses a null.
    """
    alias = next((k for k in KV_HEAD_KEYS if v.has(k)), None)
    if alias is not None and v.raw(alias) is None:
        raise _null_kv(v, alias)
    key = next((k for k in ("num_attention_groups", "num_key_value_heads") if v.has(k)), None)
    kv = v.opt_int(key, minimum=-(2**63)) if key is not None else 1
    return kv if kv is not None and kv > 0 else 1


def _null_kv(v: _View, alias: str) -> ConfigError:
    """``ModelConfig``'s refusal of a null KV-head count (a pydantic ``int`` field)."""
    return refused("ValidationError: 1 validation error for ModelArchitectureConfig: total_num_kv_heads: Input "
                   f"should be a valid integer (config.{alias} is null)", v.name(alias), v.label)  # fmt: skip


def nemotron_checks(v: _View) -> None:
    """Nemotron-4's: transformers' ``NemotronConfig`` keeps ``num_key_value_heads`` None where the
    file leaves it out or null (it fills no default), and ``ModelConfig`` refuses that None.

    Raises:
        ConfigError: vLLM's refusal.
    """
    if v.raw("num_key_value_heads") is None:
        raise _null_kv(v, "num_key_value_heads")


def _missing(v: _View, key: str, reader: str) -> ConfigError:
    return ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AttributeError: the config has no attribute {key!r} "
                       f"({reader} reads it)", v.name(key))  # fmt: skip


def _bailing_heads(v: _View, heads: int, hidden: int, tp: int) -> tuple[int, int]:
    """``BailingMoeModel``'s read of ``embedding_dropout``, then ``BailingAttention``'s: its asserts
    that ``tp`` divides the query heads and that they are at least the KV heads, ``head_dim`` (read as
    an attribute; null: ``hidden_size // heads``), ``max(1, kv // tp)`` KV heads per rank, then
    ``Attention``'s assert."""
    for key, reader in (("embedding_dropout", "BailingMoeModel"), ("num_key_value_heads", "BailingAttention")):
        if not v.has(key):
            raise _missing(v, key, reader)
    kv = v.req_int("num_key_value_heads")
    if heads % tp:
        raise _refused(v, f"BailingAttention: tp ({tp}) does not divide num_attention_heads ({heads})",
                       "num_attention_heads")  # fmt: skip
    if heads < kv:
        raise _refused(v, f"BailingAttention: num_attention_heads ({heads}) < num_key_value_heads ({kv})",
                       "num_key_value_heads")  # fmt: skip
    if not v.has("head_dim"):
        raise _missing(v, "head_dim", "BailingAttention")
    dim = v.req_int("head_dim") if v.cfg.get("head_dim") else hidden // heads
    return _attention_per_rank(v, heads, kv, tp, "num_key_value_heads"), dim


def _chatglm_heads(v: _View, heads: int, tp: int) -> int:
    """``GLMAttention``'s KV heads per rank (``multi_query_group_num`` with ``multi_query_attention``,
    else the query heads), with its asserts, its read of ``original_rope`` (which vLLM's
    ``ChatGLMConfig`` does not default; the released files carry it), then ``Attention``'s."""
    kv = v.req_int("multi_query_group_num") if v.raw("multi_query_attention") else heads
    if split_unevenly(kv, tp):
        raise _refused(v, f"GLMAttention: the {kv} KV heads and tp={tp} do not divide one another",
                       "multi_query_group_num")  # fmt: skip
    if not v.has("original_rope"):
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AttributeError: 'ChatGLMConfig' object has no "
                          "attribute 'original_rope' (GLMAttention reads it; the released files carry it)",
                          v.name("original_rope"))  # fmt: skip
    return _attention_per_rank(v, heads, kv, tp, "multi_query_group_num")


def _model_checks(v: _View, arch: str) -> None:
    """The asserts vLLM's model classes make before building a layer."""
    if arch == "GPTJForCausalLM" and v.raw("tie_word_embeddings"):
        raise _refused(v, "GPTJForCausalLM asserts not config.tie_word_embeddings", "tie_word_embeddings")
    if arch == "ChatGLMModel" and v.has("vision_config"):
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: RuntimeError: The configuration of this model "
                          "indicates that it supports vision inputs, but you instantiated the text-only version of "
                          "this model (ChatGLMForCausalLM); vLLM serves it as GLM4VForCausalLM",
                          v.name("vision_config"))  # fmt: skip
    if arch == "DeepseekForCausalLM":  # DeepseekV2DecoderLayer's MoE test, before it builds the attention
        if not v.has("n_routed_experts"):
            raise _missing(v, "n_routed_experts", "DeepseekV2DecoderLayer")
        if v.cfg["n_routed_experts"] is not None and not v.has("first_k_dense_replace"):
            raise _missing(v, "first_k_dense_replace", "DeepseekV2DecoderLayer")
    if arch == "GPT2LMHeadModel":
        for key in ("add_cross_attention", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"):
            if v.raw(key):
                raise _refused(v, f"GPT2Model asserts not config.{key}", key)


def classic_layers(cfg: Mapping[str, Any], engine: EngineConfig, window: int | None, kv_cache_dtype: str,
                   model_dtype: str, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a config of :data:`CLASSIC` (its first architecture), per
    PP stage: ``window`` is the model-wide sliding window (vLLM's ``CacheConfig.sliding_window``)."""
    v = _View(cfg, label, engine="vllm")
    arch = v.architectures[0]
    prefix, suffix = CLASSIC[arch]
    if v.model_type not in _MODEL_TYPES[arch]:
        raise ConfigError(f"{label}: kvbudget reads {arch} from a model_type {' or '.join(_MODEL_TYPES[arch])} config "
                          f"({'the checkpoint' if arch in _REMOTE else 'transformers'}' class); vLLM 0.33.0 loads "
                          f"model_type {v.model_type!r} with another class, which kvbudget has not checked",
                          "model_type")  # fmt: skip
    _model_checks(v, arch)
    n = v.req_int("num_hidden_layers")
    heads, dim = _geometry(v, arch, engine.tp)
    falcon = arch == "FalconForCausalLM"  # its layers are built without the cache_config
    window = None if falcon else window
    dtype = "auto" if falcon else kv_cache_dtype
    return [LayerSpec(f"{prefix}.{i}.{suffix}", "sliding" if window else "full", num_kv_heads=heads, head_size=dim,
                      head_size_v=dim, kv_cache_dtype=dtype, model_dtype=model_dtype, sliding_window=window or None,
                      pp_stage=stage)
            for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)) for i in range(start, end)]  # fmt: skip


def teleflm_checks(v: _View) -> None:
    """What ``TeleFLMForCausalLM.__init__`` reads after building vLLM's Llama model: ``use_mup``, and
    with it ``output_mult / mup_scale_factor`` (a config without a key fails on the attribute)."""
    for key in ("use_mup", "mup_scale_factor", "output_mult"):
        if not v.has(key):
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AttributeError: TeleFLMForCausalLM reads "
                              f"config.{key}, which the config lacks", v.name(key))  # fmt: skip
        if key == "use_mup" and not v.raw(key):
            return
    scale, mult = v.raw("mup_scale_factor"), v.raw("output_mult")
    if not all(isinstance(x, (int, float)) for x in (scale, mult)):
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: TypeError: TeleFLMForCausalLM divides output_mult "
                          f"({mult!r}) by mup_scale_factor ({scale!r})", v.name("mup_scale_factor"))  # fmt: skip
    if scale == 0:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: ZeroDivisionError: TeleFLMForCausalLM divides "
                          "output_mult by mup_scale_factor 0", v.name("mup_scale_factor"))  # fmt: skip
