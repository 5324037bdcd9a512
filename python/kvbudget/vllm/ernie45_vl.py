"""vLLM 0.33.0's ERNIE-4.5-VL: what its multimodal class reads before it builds its text model.

``models/ernie45_vl.py``: ``Ernie4_5_VLMoeForConditionalGeneration.__init__`` builds, in order,
``Ernie4_5_VisionTransformer(config.vision_config, ...)`` (which reads the vision config's
``patch_size``, ``spatial_merge_size``, ``in_channels``, ``hidden_size``, ``embed_dim``, ``depth``,
``num_heads`` and ``mlp_ratio``, then asserts ``hidden_size == embed_dim``),
``VariableResolutionResamplerModel(config.pixel_hidden_size, config.hidden_size,
config.spatial_conv_size, config.temporal_conv_size, ...)`` (the model's own attributes), and then
``Ernie4_5_VLMoeForCausalLM`` (``models/ernie45_vl_moe.py``) on the model's config itself: its
decoder reads ``num_hidden_layers``, the heads, ``moe_layer_start_index`` and the rest at the top
level, the flat layout of Baidu's remote-code checkpoints.

transformers 5.19.0's ``Ernie4_5_VLMoeConfig`` (model type ``ernie4_5_vl_moe``, which vLLM loads
such a config with) keeps the text keys under ``text_config`` and defines neither ``embed_dim`` nor
``mlp_ratio`` on its vision class nor the resampler's keys on itself: vLLM fails on every config
that class writes (``AttributeError``), and kvbudget refuses them with vLLM's reason, in vLLM's
order. A config that carries all of those keys reaches the text model, which kvbudget does not
read: refused as unchecked. Held to vLLM's classes by ``tests/test_vllm_ernie45_vl.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NoReturn

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig

__all__ = ["ERNIE45_VL", "OUTER_CLASS_KEYS", "VISION_CLASS_KEYS", "ernie45_vl_refusal"]

#: The registry name vLLM 0.33.0 serves with ``Ernie4_5_VLMoeForConditionalGeneration``.
ERNIE45_VL: Final = "Ernie4_5_VLMoeForConditionalGeneration"
#: What ``Ernie4_5_VisionTransformer.__init__`` reads of the vision config, in order.
_VISION_READS: Final = ("patch_size", "spatial_merge_size", "in_channels", "hidden_size", "embed_dim", "depth",
                        "num_heads", "mlp_ratio")  # fmt: skip
#: What the wrapper hands ``VariableResolutionResamplerModel`` of its own config, in order.
_OUTER_READS: Final = ("pixel_hidden_size", "hidden_size", "spatial_conv_size", "temporal_conv_size")
#: Of those, what transformers 5.19.0's ``Ernie4_5_VLMoeVisionConfig`` / ``Ernie4_5_VLMoeConfig`` set
#: whatever the file says (checked against the classes by ``tests/test_vllm_ernie45_vl.py``).
VISION_CLASS_KEYS: Final = frozenset({"patch_size", "spatial_merge_size", "in_channels", "hidden_size", "depth",
                                      "num_heads"})  # fmt: skip
OUTER_CLASS_KEYS: Final[frozenset[str]] = frozenset()
#: ``Ernie4_5_VLMoeVisionConfig``'s default ``hidden_size`` (the assert's left side when unsaved) and
#: ``Ernie4_5_VLMoeTextConfig``'s default ``num_attention_heads``.
VISION_HIDDEN_SIZE: Final = 1280
TEXT_HEADS: Final = 20


def ernie45_vl_refusal(cfg: Mapping[str, Any], engine: EngineConfig, label: str = "config.json") -> NoReturn:
    """Refuse an ERNIE-4.5-VL config: with vLLM's own failure where it fails before the text model
    (``ModelConfig.verify_with_parallel_config`` on the text config's heads first), else as unchecked.

    Raises:
        ConfigError: always.
    """
    text = cfg.get("text_config") or {}
    heads = text.get("num_attention_heads", TEXT_HEADS) if isinstance(text, Mapping) else TEXT_HEADS
    if isinstance(heads, int) and heads % engine.tp:
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: ValueError: Total number of attention heads ({heads}) "
                          f"must be divisible by tensor parallel size ({engine.tp}).",
                          "text_config.num_attention_heads")  # fmt: skip
    vision = cfg.get("vision_config") or {}
    if not isinstance(vision, Mapping):
        raise ConfigError(f"{label}: key 'vision_config' must be an object", "vision_config")
    for key in _VISION_READS:
        if key not in vision and key not in VISION_CLASS_KEYS:
            raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: 'Ernie4_5_VLMoeVisionConfig' object "
                              f"has no attribute '{key}' (Ernie4_5_VisionTransformer reads it)",
                              f"vision_config.{key}")  # fmt: skip
    if vision.get("hidden_size", VISION_HIDDEN_SIZE) != vision["embed_dim"]:
        raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AssertionError: vit's config.hidden must be equal to "
                          "config.embed_dim", "vision_config.embed_dim")  # fmt: skip
    for key in _OUTER_READS:
        if key not in cfg and key not in OUTER_CLASS_KEYS:
            raise ConfigError(f"{label}: vLLM 0.33.0 refuses it: AttributeError: 'Ernie4_5_VLMoeConfig' object has "
                              f"no attribute '{key}' (the wrapper hands it to its resampler)", key)  # fmt: skip
    raise ConfigError(f"{label}: kvbudget has not checked vLLM 0.33.0's {ERNIE45_VL} text model "
                      "(Ernie4_5_VLMoeForCausalLM on the model's flat, remote-code keys)", "architectures")  # fmt: skip
