"""vLLM 0.33.0's Step3 text model, alone and inside Step3-VL / Step-VL.

``models/step3_vl.py``: ``Step3VLForConditionalGeneration.__init__`` builds its text model with
``init_vllm_registered_model(vllm_config=vllm_config, hf_config=config.text_config,
prefix=maybe_prefix(prefix, "language_model"))``; ``models/step_vl.py``'s
``StepVLForConditionalGeneration`` (a subclass with another vision tower) makes the same call.
Both classes implement ``SupportsPP``. Their config is vLLM's own ``Step3VLConfig``
(``transformers_utils/configs/step3_vl.py``, registered for ``step3_vl``), which loads
``text_config`` with vLLM's ``Step3TextConfig`` whatever the dict's ``model_type``; without one, that
class's defaults. ``Step3TextConfig`` names ``architectures = ["Step3TextForCausalLM"]`` only as
a class attribute, which transformers' ``PreTrainedConfig.__init__`` overwrites (with the saved
list, else None), so:

* a text config that saves no ``architectures`` reaches ``VllmConfig.with_hf_config`` with None;
  its ``model_type`` (``step3_text``, or the dict's own, which the config keeps) is not in
  transformers' causal-LM mapping, and ``initialize_model`` raises ``ValueError: No model
  architectures are specified``: kvbudget refuses it so (a text ``model_type`` transformers does
  map would build another class on Step3's config: refused as unchecked);
* a saved ``["Step3TextForCausalLM"]`` builds ``models/step3_text.py``'s class, read below (any
  other saved class on Step3's config is refused as unchecked).

``Step3TextForCausalLM`` builds ``Step3TextModel(vllm_config, prefix=prefix)`` (no ``model`` level:
its layers are ``<prefix>.layers.<i>.self_attn.attn``, ``.layers.<i>...`` for the bare class),
whose ``__init__``, per pipeline rank:

* reads ``config.tie_word_embeddings`` on every rank but the first (its embedding's condition);
  ``Step3TextConfig`` sets no such attribute: a text config that saves none fails on a later rank
  unless the wrapper's config saves one (``with_hf_config`` copies a multimodal model's
  ``tie_word_embeddings`` onto its text config);
* builds the rank's decoder layers (``get_pp_indices``), each a ``Step3TextAttention``: asserts
  ``tp`` divides ``num_attention_heads``, one KV head (``num_kv_heads=1``, replicated on every
  rank) of ``head_dim``, no per-layer window (the cache config's: ``sliding_window`` of the text
  config when it has no ``layer_types`` or only sliding ones); then parses
  ``moe_layers_enum`` with ``.strip().split(",")`` (the class default, a tuple, fails: a
  released config saves a string; JSON null: every layer but the first), and for a MoE layer
  raises when ``tp`` exceeds ``moe_num_experts``.

Held to vLLM's classes by ``tests/test_vllm_step3.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import CAUSAL_LM_NAMES, ConfigError
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["STEP3_TEXT", "STEP3_VL", "TEXT_DEFAULTS", "step3_layers"]

#: The text class itself (served alone) and the wrappers that build it on their ``text_config``.
STEP3_TEXT: Final = "Step3TextForCausalLM"
STEP3_VL: Final = frozenset({"Step3VLForConditionalGeneration", "StepVLForConditionalGeneration"})
#: vLLM 0.33.0's ``Step3TextConfig`` defaults of the keys its model reads for the KV cache
#: (``moe_layers_enum``: a tuple, which the model cannot parse; checked against the class by
#: ``tests/test_vllm_step3.py``).
TEXT_DEFAULTS: Final[dict[str, Any]] = {
    "num_hidden_layers": 61, "num_attention_heads": 64, "head_dim": 256, "moe_num_experts": 48,
    "moe_layers_enum": tuple(range(4, 60)),
}  # fmt: skip


def _int(text: Mapping[str, Any], key: str, label: str, where: str) -> int:
    value = text[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{label}: key '{where}{key}' must be a positive integer, not {value!r}", f"{where}{key}")
    return value


def _wrapped_text(cfg: Mapping[str, Any], arch: str, label: str) -> tuple[dict[str, Any], bool]:
    """The wrapper's text config as ``Step3VLConfig`` loads it (class defaults under the saved
    keys) and whether ``with_hf_config`` leaves it a ``tie_word_embeddings``.

    Raises:
        ConfigError: vLLM's refusal of a text config without architectures, or a class other
            than Step3's named on it (unchecked).
    """
    saved = cfg.get("text_config")
    if saved is None:
        saved = {}
    if not isinstance(saved, Mapping):
        raise ConfigError(f"{label}: key 'text_config' must be an object", "text_config")
    archs = saved.get("architectures")
    model_type = saved.get("model_type", "step3_text")
    if not archs:
        if archs is None and str(model_type) in CAUSAL_LM_NAMES:
            raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's {arch} on a text config of "
                              f"model_type {model_type!r} without architectures (vLLM builds "
                              f"{CAUSAL_LM_NAMES[str(model_type)]} on Step3's text config)",
                              "text_config.model_type")  # fmt: skip
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: ValueError: No model architectures are specified "
                          f"({arch}'s text config, loaded with vLLM's Step3TextConfig, names none)",
                          "text_config.architectures")  # fmt: skip
    if not isinstance(archs, list) or archs[0] != STEP3_TEXT:
        raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's {arch} building {archs!r} on Step3's "
                          f"text config (it reads {STEP3_TEXT})", "text_config.architectures")  # fmt: skip
    tied = "tie_word_embeddings" in saved or "tie_word_embeddings" in cfg
    return {**TEXT_DEFAULTS, **saved}, tied


def _moe_layers(enum: Any, n: int, label: str, where: str) -> frozenset[int]:
    """``Step3TextDecoderLayer``'s MoE layer ids; ConfigError where vLLM's parse fails."""
    if enum is None:  # "Default to 1dense."
        return frozenset(range(1, n))
    if not isinstance(enum, str):
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: {type(enum).__name__!r} object has no "
                          "attribute 'strip' (Step3's moe_layers_enum must be a comma-separated string)",
                          f"{where}moe_layers_enum")  # fmt: skip
    try:
        return frozenset(int(i) for i in enum.strip().split(","))
    except ValueError as e:
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: ValueError: {e} (Step3's moe_layers_enum)",
                          f"{where}moe_layers_enum") from e  # fmt: skip


def step3_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                 disable_sliding_window: bool, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The attention layers vLLM 0.33.0 registers for ``Step3TextForCausalLM`` or a Step3-VL /
    Step-VL wrapper of it, in order (see the module docstring).

    Raises:
        ConfigError: a config vLLM refuses (its message), or one kvbudget has not checked.
    """
    arch = cfg["architectures"][0]
    if arch in STEP3_VL:
        text, tied = _wrapped_text(cfg, arch, label)
        prefix, where = "language_model", "text_config."
    else:
        text, tied, prefix, where = {**TEXT_DEFAULTS, **cfg}, "tie_word_embeddings" in cfg, "", ""
    n, heads, head_dim, experts = (_int(text, k, label, where) for k in (
        "num_hidden_layers", "num_attention_heads", "head_dim", "moe_num_experts"))
    # EngineArgs.create_engine_config: the model-wide window of a model without mixed layer types
    # (ModelConfig: a window of 0, or --disable-sliding-window, is none).
    types = text.get("layer_types")
    window = text.get("sliding_window")
    if disable_sliding_window or not window or (types is not None and any(t != "sliding_attention" for t in types)):
        window = None
    elif isinstance(window, bool) or not isinstance(window, int):
        raise ConfigError(f"{label}: key '{where}sliding_window' must be an integer, not {window!r}",
                          f"{where}sliding_window")  # fmt: skip
    tp = engine.tp
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        if stage > 0 and not tied:
            raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: 'Step3TextConfig' object has no "
                              "attribute 'tie_word_embeddings' (Step3TextModel reads it on every pipeline rank but "
                              "the first)", f"{where}tie_word_embeddings")  # fmt: skip
        for i in range(start, end):
            if heads % tp:
                raise ConfigError(f"{label}: vLLM asserts tp ({tp}) divides num_attention_heads ({heads})",
                                  f"{where}num_attention_heads")  # fmt: skip
            if i in _moe_layers(text.get("moe_layers_enum"), n, label, where) and tp > experts:
                raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: ValueError: Tensor parallel size {tp} is greater "
                                  f"than the number of experts {experts}.", f"{where}moe_num_experts")  # fmt: skip
            out.append(LayerSpec(f"{prefix}.layers.{i}.self_attn.attn", "sliding" if window else "full",
                                 num_kv_heads=1, head_size=head_dim, head_size_v=head_dim,
                                 kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, sliding_window=window,
                                 pp_stage=stage))  # fmt: skip
    return out
