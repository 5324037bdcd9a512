"""vLLM 0.33.0's Inkling (``InklingForCausalLM``, ``InklingForConditionalGeneration``;
``vllm/models/inkling``, its NVIDIA ``model.py``, ``sconv_swa_attn.py`` and ``attention.py``): a
short-convolution state cache beside each layer's attention.

The configs are vLLM's own classes (``models/inkling/configs.py``, registered over transformers'):
``InklingModelConfig`` for ``inkling_model`` (the causal LM's), and ``InklingMMConfig`` for
``inkling_mm_model`` (the multimodal class's), which loads ``text_config`` with
``InklingModelConfig`` whatever its ``model_type`` (transformers' ``inkling_text`` fields included).
``InklingModelConfig`` derives ``head_dim`` (``hidden_size // num_attention_heads``), the
``swa_*`` heads and head dim (the full layers'), and ``sconv_kernel_size`` (``conv_kernel_size``,
else 4); its local (sliding) layers are ``local_layer_ids`` (default none): it does not read
transformers' ``layer_types``, so a transformers-written config without ``local_layer_ids`` is full
attention on every layer. vLLM loads an ``inkling_text`` config with transformers' class, which has
no ``padded_vocab_size``: ``InklingForCausalLM`` fails on it (refused).

vLLM's ``ModelConfig`` first refuses a ``tp`` that does not divide ``num_attention_heads`` (the full
layers' heads, whatever the local ones are). Then, per PP stage (``SupportsPP``; layers split by
``get_pp_indices``), each ``InklingDecoderLayer`` ``model.layers.<i>`` registers, with ``H``, ``D``,
``Q`` the layer's KV heads, head dim and heads (the ``swa_*`` ones on a local layer):

* ``model.layers.<i>.conv_state`` (``InklingConvState``, before the attention): its four short
  convolutions' state as one ``SlidingWindowSpec`` of ``block_size = sliding_window =
  sconv_kernel_size`` tokens, ``H // tp`` heads (it asserts ``tp <= H``) of ``head_size`` the power of
  two at or above ``2·D + 2·(hidden_size // H)`` with no V part (``head_size_v = 0``), in the model
  dtype, which it asserts is bfloat16 (kvbudget: ``kv_cache_dtype="auto"``);
* ``model.layers.<i>.attn`` (``InklingAttention``, its own spec, not vLLM's ``Attention``): it asserts
  ``tp`` divides ``Q`` and ``H`` and ``tp`` divide one another, and keeps ``max(1, H // tp)`` KV heads
  of ``D`` at the engine's block size in ``--kv-cache-dtype``: a ``SlidingWindowSpec`` of
  ``sliding_window_size`` on a local layer (``--disable-sliding-window`` does not reach it: the
  window is not the config's ``sliding_window``), else a ``FullAttentionSpec``;
* from layer ``dense_mlp_idx`` on, an ``InklingMoE``, which asserts the served checkpoint's router
  (``gate_activation`` sigmoid with ``norm_after_topk``, ``n_shared_experts > 0`` with
  ``shared_expert_sink``, ``inference_moe_w13_interleaved``): the class defaults are refused so.

``InklingForConditionalGeneration`` first builds its vision and audio towers (no KV) when their
configs set ``decoder_dmodel``: the config classes refuse an enabled tower missing fields, the vision
tower asserts an ``hmlp`` encoder and its ``plan_out_scales`` refuses a ``patch_size`` of 1 or less,
a ``temporal_patch_size`` below 1 and fewer than one layer; the audio tower asserts ``dmel``.

Not read (refused as unchecked): drafters (Inkling's MTP), a ``--kv-cache-dtype`` other than
``auto``, 16-bit or per-tensor fp8 (vLLM's quantised layouts do not reach Inkling's own specs), tower
sizes below 1 and non-integer sizes. Held to vLLM's classes by ``tests/test_vllm_inkling.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import refused, section

__all__ = ["INKLING", "INKLING_ARCHITECTURES", "INKLING_MM", "inkling_layers"]

INKLING: Final = "InklingForCausalLM"
INKLING_MM: Final = "InklingForConditionalGeneration"
INKLING_ARCHITECTURES: Final = (INKLING, INKLING_MM)
#: The model type of the config class vLLM 0.33.0 builds each architecture's text model from.
_MODEL_TYPES: Final[Mapping[str, str]] = {INKLING: "inkling_model", INKLING_MM: "inkling_mm_model"}
#: vLLM 0.33.0's ``InklingModelConfig`` signature defaults of the keys read here (the ones it
#: derives when None are derived in :class:`_Text`).
_DEFAULTS: Final[Mapping[str, Any]] = {
    "hidden_size": 1536, "num_hidden_layers": 16, "num_attention_heads": 12, "num_key_value_heads": 4,
    "sliding_window_size": 512, "dense_mlp_idx": 0, "gate_activation": "sigmoid", "norm_after_topk": True,
    "n_shared_experts": 0, "shared_expert_sink": False, "inference_moe_w13_interleaved": True}  # fmt: skip
#: The fields an enabled tower's config class requires (``InklingVisionConfig``, ``InklingAudioConfig``).
_TOWER_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "vision_config": ("vision_encoder_type", "patch_size", "temporal_patch_size", "n_channels", "n_layers",
                      "use_vision_norm"),
    "audio_config": ("n_mel_bins", "mel_vocab_size", "dmel_min_value", "dmel_max_value", "use_audio_norm",
                     "audio_mode")}  # fmt: skip
#: The ``--kv-cache-dtype`` values read: a plain storage dtype, whose pages are the same in
#: Inkling's own specs (no quantisation mode) and in kvbudget's planner.
_KV_CACHE_DTYPES: Final = frozenset({"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"})


def _int(section: Mapping[str, Any], key: str, where: str, minimum: int | None = 1) -> int:
    """``section[key]``: an integer (not a bool) of at least ``minimum``; ``where`` prefixes the key."""
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        least = "" if minimum is None else f" >= {minimum}"
        raise ConfigError(f"config.json: kvbudget reads key '{where}{key}' as an integer{least}, not {value!r}",
                          f"{where}{key}")  # fmt: skip
    return value


class _Text:
    """What ``InklingModelConfig.__init__`` makes of a text config (``where``: its keys' prefix)."""

    def __init__(self, text: Mapping[str, Any], where: str) -> None:
        c = {**_DEFAULTS, **text}
        self.where = where
        self.n = _int(c, "num_hidden_layers", where, 0)
        self.hidden, self.heads, self.kv = (_int(c, k, where) for k in ("hidden_size", "num_attention_heads",
                                                                        "num_key_value_heads"))  # fmt: skip
        derived = {"head_dim": self.hidden // self.heads, "swa_num_attention_heads": self.heads,
                   "swa_num_key_value_heads": self.kv}  # fmt: skip
        c = {**c, **{k: x for k, x in derived.items() if c.get(k) is None}}
        self.dim = _int(c, "head_dim", where)
        c = {**c, "swa_head_dim": self.dim} if c.get("swa_head_dim") is None else c
        self.swa = tuple(_int(c, k, where) for k in ("swa_num_attention_heads", "swa_num_key_value_heads",
                                                     "swa_head_dim"))  # fmt: skip
        kernel = c.get("sconv_kernel_size")
        kernel = (4 if c.get("conv_kernel_size") is None else c["conv_kernel_size"]) if kernel is None else kernel
        self.kernel = _int({"sconv_kernel_size": kernel}, "sconv_kernel_size", where)
        local = [] if c.get("local_layer_ids") is None else c["local_layer_ids"]
        if not isinstance(local, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in local):
            raise ConfigError(f"config.json: kvbudget reads key '{where}local_layer_ids' as a list of layer ids, "
                              f"not {local!r}", f"{where}local_layer_ids")  # fmt: skip
        self.local = frozenset(local)
        self.window = c.get("sliding_window_size")  # read by the local layers only
        self.dense = _int(c, "dense_mlp_idx", where, None)
        self.moe = c

    def moe_refusal(self) -> ConfigError | None:
        """``InklingMoE``'s asserts on the router, the first failing one, or None."""
        c, w = self.moe, self.where
        if not (c.get("gate_activation") == "sigmoid" and c.get("norm_after_topk")):
            return refused("AssertionError: InklingMoE asserts gate_activation == 'sigmoid' and norm_after_topk",
                           f"{w}gate_activation")  # fmt: skip
        if not (_int(c, "n_shared_experts", w, None) > 0 and c.get("shared_expert_sink")):
            return refused("AssertionError: InklingMoE asserts n_shared_experts > 0 and shared_expert_sink",
                           f"{w}n_shared_experts")  # fmt: skip
        if not c.get("inference_moe_w13_interleaved"):
            return refused("AssertionError: InklingMoE asserts inference_moe_w13_interleaved",
                           f"{w}inference_moe_w13_interleaved")  # fmt: skip
        return None


def _tower_configs(cfg: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The towers' configs, after their classes' checks (``InklingMMConfig`` loads audio first)."""
    towers = {key: section(cfg, key) for key in ("audio_config", "vision_config")}
    for key, tower in towers.items():
        missing = [k for k in _TOWER_FIELDS[key] if tower.get(k) is None]
        if tower.get("decoder_dmodel") is not None and missing:
            what = key.removesuffix("_config")
            raise refused(f"ValueError: Enabled Inkling {what} tower is missing config fields: {', '.join(missing)}",
                          f"{key}.{missing[0]}")  # fmt: skip
    return towers


def _build_towers(towers: dict[str, Mapping[str, Any]]) -> None:
    """``InklingVision`` / ``InklingAudio``'s checks, for the towers a ``decoder_dmodel`` enables."""
    vision, audio = towers["vision_config"], towers["audio_config"]
    if vision.get("decoder_dmodel") is not None:
        if vision["vision_encoder_type"] != "hmlp":
            raise refused("AssertionError: InklingVision asserts vision_encoder_type == 'hmlp'",
                          "vision_config.vision_encoder_type")  # fmt: skip
        patch, frames, layers = (_int(vision, k, "vision_config.", None)
                                 for k in ("patch_size", "temporal_patch_size", "n_layers"))  # fmt: skip
        if patch <= 1:
            raise refused("ValueError: patch_size must be greater than 1, otherwise this doesn't make sense",
                          "vision_config.patch_size")  # fmt: skip
        if frames < 1:
            raise refused("ValueError: n must be a positive integer (plan_out_scales' temporal_patch_size)",
                          "vision_config.temporal_patch_size")  # fmt: skip
        if layers < 1:
            raise refused("plan_out_scales plans no layer scale for n_layers < 1 (its assert, or numpy's "
                          "ValueError)", "vision_config.n_layers")  # fmt: skip
        for key in ("n_channels", "decoder_dmodel"):
            _int(vision, key, "vision_config.")
    if audio.get("decoder_dmodel") is not None:
        if audio["audio_mode"] != "dmel":
            raise refused("AssertionError: InklingAudio asserts audio_mode == 'dmel'", "audio_config.audio_mode")
        for key in ("n_mel_bins", "mel_vocab_size", "decoder_dmodel"):
            _int(audio, key, "audio_config.")


def _text_config(cfg: Mapping[str, Any], arch: str) -> tuple[_Text, dict[str, Mapping[str, Any]]]:
    """The text config vLLM builds ``arch``'s layers from, and the towers' configs (none for the
    causal LM); refused where vLLM's config class is not the one kvbudget reads."""
    model_type, wanted = cfg.get("model_type"), _MODEL_TYPES[arch]
    if arch == INKLING and model_type == "inkling_text" and "padded_vocab_size" not in cfg:
        raise refused("AttributeError: 'InklingTextConfig' object has no attribute 'padded_vocab_size' (vLLM loads "
                      "inkling_text with transformers' class; InklingModel reads vLLM's InklingModelConfig keys)",
                      "model_type")  # fmt: skip
    if model_type != wanted:
        raise ConfigError(f"config.json: kvbudget reads vLLM 0.33.0's {arch} on vLLM's own config class (model_type "
                          f"{wanted!r}), not on model_type {model_type!r}", "model_type")  # fmt: skip
    if arch == INKLING:
        return _Text(cfg, ""), {}
    text = _Text(section(cfg, "text_config"), "text_config.")
    return text, _tower_configs(cfg)


def inkling_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                   disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The conv-state and attention layers vLLM 0.33.0 registers for an Inkling config, in order
    (see the module doc; ``disable_sliding_window`` does not reach them).

    Raises:
        ConfigError: a drafter or another unchecked setting, or what vLLM's config classes or
            model refuse (the heads over ``tp``, a model dtype other than bfloat16, the MoE router's
            and the towers' asserts), or a key missing or invalid.
    """
    arch = cfg["architectures"][0]
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch}", "architectures")
    if kv_cache_dtype not in _KV_CACHE_DTYPES:
        raise ConfigError(f"kv_cache_dtype={kv_cache_dtype!r}: kvbudget reads vLLM 0.33.0's {arch} with "
                          f"{sorted(_KV_CACHE_DTYPES)}", "kv_cache_dtype")  # fmt: skip
    text, towers = _text_config(cfg, arch)
    tp, w = engine.tp, text.where
    if text.heads % tp:  # ModelConfig.verify_with_parallel_config
        raise refused(f"ValueError: Total number of attention heads ({text.heads}) must be divisible by tensor "
                      f"parallel size ({tp}).", f"{w}num_attention_heads")  # fmt: skip
    if towers:
        _build_towers(towers)
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(text.n, engine.pp)):
        for i in range(start, end):
            local = i in text.local
            heads, kv, dim = text.swa if local else (text.heads, text.kv, text.dim)
            if tp > kv:  # InklingConvState
                raise refused(f"AssertionError: sconv SWA cache supports tp_size <= num_kv_heads ({kv}), got {tp}",
                              f"{w}{'swa_' if local else ''}num_key_value_heads")  # fmt: skip
            if model_dtype != "bfloat16":
                raise refused(f"AssertionError: sconv SWA cache supports bfloat16 only, got torch.{model_dtype}",
                              "dtype")  # fmt: skip
            conv = 1 << (2 * dim + 2 * (text.hidden // kv) - 1).bit_length()
            out.append(LayerSpec(f"model.layers.{i}.conv_state", "sliding", kv // tp, conv, head_size_v=0,
                                 kv_cache_dtype="auto", model_dtype=model_dtype, sliding_window=text.kernel,
                                 block_size=text.kernel, pp_stage=stage))  # fmt: skip
            if heads % tp or kv % tp:  # InklingAttention (tp <= kv here)
                raise refused(f"AssertionError: InklingAttention asserts tp={tp} divides its {heads} heads and "
                              f"{kv} KV heads (layer {i})", f"{w}{'swa_' if local else ''}num_attention_heads")  # fmt: skip
            window = None
            if local:
                if text.window is None:
                    raise refused("TypeError: InklingAttention subtracts 1 from a sliding_window_size of None",
                                  f"{w}sliding_window_size")  # fmt: skip
                window = _int({"sliding_window_size": text.window}, "sliding_window_size", w)
            out.append(LayerSpec(f"model.layers.{i}.attn", "sliding" if local else "full", kv // tp, dim,
                                 head_size_v=dim, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                 sliding_window=window, pp_stage=stage))  # fmt: skip
            moe = text.moe_refusal() if i >= text.dense else None
            if moe is not None:
                raise moe
    return out
