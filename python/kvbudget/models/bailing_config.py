"""The Bailing hybrids' config (model type ``bailing_hybrid``: Ling 2.5, Ling 3) as its config class
leaves it, for both engines' readers.

SGLang 0.5.23 loads the model type with its own ``BailingHybridConfig`` (``configs/bailing_hybrid.py``);
vLLM 0.33.0 with the checkpoint's own config code, of which that class is SGLang's copy. Both readers
(:mod:`kvbudget.sglang.bailing`, :mod:`kvbudget.vllm.bailing_hybrid`) start from
:func:`bailing_class_config`: the class's defaults where a key is absent, and ``head_dim`` derived
where it is null or 0. The engines then read the layer kinds differently, each in its own module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.config_io import ConfigError

__all__ = ["BAILING_HYBRID_ARCHITECTURES", "BAILING_HYBRID_TYPE", "LING_2_5", "LING_3", "bailing_class_config",
           "bailing_int"]

#: The model type both engines load with the Bailing hybrid config class.
BAILING_HYBRID_TYPE: Final = "bailing_hybrid"
#: The registry names both engines serve Ling 2.5 / Ring 2.5 and Ling 3 with.
LING_2_5: Final = "BailingMoeV2_5ForCausalLM"
LING_3: Final = "BailingMoeV3ForCausalLM"
#: The architectures of a ``bailing_hybrid`` config kvbudget reads (in each engine).
BAILING_HYBRID_ARCHITECTURES: Final = frozenset({LING_2_5, LING_3})
#: ``BailingHybridConfig.__init__``'s defaults of the keys the readers use (an absent key takes one).
_DEFAULTS: Final[Mapping[str, Any]] = {
    "num_hidden_layers": 20, "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_size": 2048,
    "head_dim": 128, "layer_group_size": 1, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
    "v_head_dim": 128, "short_conv_kernel_size": None, "group_norm_size": 1, "no_kda_lora": False,
}  # fmt: skip


def bailing_int(t: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    """``t[key]``, an int of at least ``minimum``.

    Raises:
        ConfigError: it is not one (the engines' classes fail on it).
    """
    v = t.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"config.json: {key} must be an int >= {minimum}, got {v!r}; the Bailing hybrid classes "
                          "read it", key)  # fmt: skip
    return v


def bailing_class_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as ``BailingHybridConfig.__init__`` leaves it: the class's defaults where a key
    is absent, and ``head_dim`` (``head_dim or hidden_size // num_attention_heads``)."""
    t: dict[str, Any] = {**_DEFAULTS, **config}
    if not t.get("head_dim"):
        t["head_dim"] = bailing_int(t, "hidden_size") // bailing_int(t, "num_attention_heads")
    return t
