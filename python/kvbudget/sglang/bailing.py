"""The Bailing hybrids (model type ``bailing_hybrid``: Ling 2.5 / Ring 2.5 as
``BailingMoeV2_5ForCausalLM``, Ling 3 as ``BailingMoeV3ForCausalLM``) as SGLang 0.5.23 reads them
(its own ``configs/bailing_hybrid.py``, ``BailingHybridConfig``).

The layer kinds come from ``layer_group_size`` (its ``layers_block_type``): an int ``g`` makes
every ``g``-th layer full attention and the others linear attention; a list (one entry per layer)
marks a linear-attention layer with ``1``. The full-attention layers are MLA, read by
``ModelConfig._derive_model_shapes``' Bailing branches (V3's ``use_mla_nope`` drops the rope half:
``qk_rope_head_dim = 0``). The linear-attention layers keep a state that
``configs/hybrid_arch.py`` plans as a Mamba state pool beside the MLA pool:

* lightning attention (no ``short_conv_kernel_size``: ``hybrid_lightning_config``): a
  ``Mamba2StateShape`` with no conv state (``intermediate_size = n_groups = 0``, one-tap conv, so
  zero conv rows) and a ``(num_attention_heads / tp, head_dim, head_dim)`` temporal state;
* Kimi delta attention (``short_conv_kernel_size`` set: ``kimi_linear_config``): a
  ``KimiLinearStateShape`` of ``num_attention_heads`` heads of ``head_dim``.

Both take the default state dtypes (the class passes no config to ``mamba2_state_dtype``), on the
attention TP group. :func:`bailing_config` gives a config as SGLang's ``ModelConfig`` reads it
(over :func:`kvbudget.models.bailing_config.bailing_class_config`, the class's defaults and derived
``head_dim``), :func:`bailing_layer_kinds` its layer kinds. (vLLM 0.33.0 reads the same config with
other layer kinds: :mod:`kvbudget.vllm.bailing_hybrid`.)
The multimodal wrapper (``bailing_moe_v3_vl``) is not read: SGLang plans a state pool for it only
when its text config is KDA (``get_hf_text_config``), and kvbudget refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvbudget.models.bailing_config import (BAILING_HYBRID_ARCHITECTURES, BAILING_HYBRID_TYPE, LING_2_5, LING_3,
                                            bailing_class_config, bailing_int)
from kvbudget.models.config_io import ConfigError
from kvbudget.sglang.state import StateDims, kda_dims, mamba2_dims

__all__ = ["BAILING_HYBRID_ARCHITECTURES", "BAILING_HYBRID_TYPE", "bailing_config", "bailing_full_attention_ids",
           "bailing_layer_kinds", "bailing_state", "is_bailing_hybrid"]

def bailing_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as SGLang's ``ModelConfig`` reads it: :func:`bailing_class_config`, and, for a V3
    architecture with ``use_mla_nope``, the ``qk_rope_head_dim`` of 0 of its V3 branch."""
    t = bailing_class_config(config)
    archs = t.get("architectures")
    v3 = isinstance(archs, list) and LING_3 in archs and LING_2_5 not in archs
    if v3 and t.get("use_mla_nope"):  # the V3 branch (V2.5's comes first)
        t["qk_rope_head_dim"] = 0
    return t


def is_bailing_hybrid(config: Mapping[str, Any]) -> bool:
    """Whether kvbudget resolves ``config`` as a Bailing hybrid: model type ``bailing_hybrid``
    served by :data:`BAILING_HYBRID_ARCHITECTURES`.

    Raises:
        ConfigError: a ``bailing_hybrid`` config with another architecture (SGLang would plan its
            state beside another model class's pools, which kvbudget has not checked).
    """
    if config.get("model_type") != BAILING_HYBRID_TYPE:
        return False
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not set(archs) <= BAILING_HYBRID_ARCHITECTURES:
        raise ConfigError(f"config.json: a bailing_hybrid config with architectures {archs!r}: kvbudget resolves "
                          f"it only as {LING_2_5} or {LING_3}", "architectures")  # fmt: skip
    return True


def bailing_layer_kinds(config: Mapping[str, Any]) -> list[str]:
    """``layers_block_type``: ``"attention"`` or ``"linear_attention"`` per layer, of a config as
    :func:`bailing_class_config` leaves it.

    Raises:
        ConfigError: where SGLang's property fails (a zero group size, a list of the wrong length,
            neither an int nor a list).
    """
    n, g = bailing_int(config, "num_hidden_layers"), config.get("layer_group_size")
    if isinstance(g, int):  # a bool too, as Python's isinstance has it
        if g == 0:
            raise ConfigError("config.json: layer_group_size is 0; SGLang 0.5.23's Bailing hybrid config class "
                              "divides by it", "layer_group_size")  # fmt: skip
        return ["attention" if (i + 1) % g == 0 else "linear_attention" for i in range(n)]
    if not isinstance(g, list) or len(g) != n:
        raise ConfigError(f"config.json: layer_group_size must be an int or a list of {n} entries (one per layer), "
                          f"got {g!r}; SGLang 0.5.23's Bailing hybrid config class fails on it",
                          "layer_group_size")  # fmt: skip
    return ["linear_attention" if x == 1 else "attention" for x in g]


def bailing_full_attention_ids(config: Mapping[str, Any]) -> list[int]:
    """``full_attention_layer_ids``: the layers SGLang's MLA pool counts."""
    return [i for i, k in enumerate(bailing_layer_kinds(config)) if k == "attention"]


def bailing_state(config: Mapping[str, Any], attn_tp: int) -> tuple[str, StateDims, list[int], int]:
    """``mamba2_cache_params`` on one of ``attn_tp`` ranks: ``(mixer, dims, state layers,
    num_hidden_layers)``, the mixer ``"kda"`` or (lightning) ``"mamba2"``."""
    config = bailing_class_config(config)
    kinds = bailing_layer_kinds(config)
    layers = [i for i, k in enumerate(kinds) if k == "linear_attention"]
    heads, head_dim = bailing_int(config, "num_attention_heads"), bailing_int(config, "head_dim")
    kernel = config.get("short_conv_kernel_size")
    if kernel is not None:
        return "kda", kda_dims(attn_tp, heads, head_dim, conv_kernel=bailing_int(config, "short_conv_kernel_size")), layers, \
            len(kinds)  # fmt: skip
    return "mamba2", mamba2_dims(attn_tp, 0, 0, heads, head_dim, head_dim, 1), layers, len(kinds)
