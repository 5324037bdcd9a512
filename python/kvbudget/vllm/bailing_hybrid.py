"""vLLM 0.33.0's reading of the Bailing hybrids: Ling 2.5 / Ring 2.5 (``BailingMoeV2_5ForCausalLM``,
``models/bailing_moe_linear.py``: lightning linear attention beside MLA) and Ling 3
(``BailingMoeV3ForCausalLM``, ``models/bailing_moe_v3.py``: Kimi delta attention beside MLA).

vLLM loads the checkpoint's own config code (model type ``bailing_hybrid``; neither vLLM nor
transformers 5.19.0 ships a class for it). kvbudget reads the config as SGLang 0.5.23's copy of
that class (``BailingHybridConfig``) holds it: its defaults, and ``head_dim`` derived where null
(:func:`kvbudget.models.bailing_config.bailing_class_config`). Each model builds ``num_hidden_layers``
decoder layers (``make_layers``: PP stages as vLLM splits them), MLA where a layer is not a state
layer; the two files read ``layer_group_size`` (``g``, an int) differently:

* Ling 2.5 (``is_linear_layer``): layer ``i`` is linear attention where ``g > 0`` and ``(i + 1) %
  g != 0``. ``BailingMoELinearAttention`` at ``model.layers.{i}.self_attn`` asserts that TP divides
  ``num_attention_heads`` (``LinearAttention``), is at most ``group_norm_size`` and divides it; its
  state is one ``(heads / tp, head_dim, head_dim)`` tensor (``linear_attention_state_shape``) in
  ``--mamba-cache-dtype``, else the model dtype, backend ``LINEAR``.
* Ling 3 (``_is_kda_layer``): layer ``i`` is KDA unless ``(i + 1) % g == 0`` or it lies in the
  trailing partial group (``i >= n // g * g``: full attention there, where SGLang keeps linear
  layers). ``BailingMoeV3KimiDeltaAttention`` at ``model.layers.{i}.self_attn`` needs
  ``no_kda_lora``; its states are ``kda_state_shape``'s over ``num_attention_heads`` heads of
  ``head_dim`` with ``short_conv_kernel_size`` (conv rows ``k - 1``), the conv state in the conv
  dtype and the recurrent one float32 (``--mamba-ssm-cache-dtype`` is not passed, by the layer nor
  by the class's state classmethod), backend ``GDN_ATTN``.
* MLA (both): the layer's ``MLAAttention`` at ``model.layers.{i}.self_attn.attn``, one latent head
  of ``kv_lora_rank + qk_rope_head_dim`` (vLLM keeps the rope half whatever ``use_mla_nope``
  says; SGLang drops it for Ling 3); TP divides the heads.

A list ``layer_group_size`` (SGLang's per-layer form) fails vLLM's arithmetic on it. Both classes
are ``SupportsPP``, not ``SupportsReplaySSM``; their MTP drafters are not read. Held to vLLM's
classes by ``tests/test_vllm_bailing_hybrid.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvbudget import _core
from kvbudget.models.bailing_config import (BAILING_HYBRID_ARCHITECTURES, LING_2_5, LING_3, bailing_class_config,
                                            bailing_int)
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import refused
from kvbudget.vllm.state_common import _state_dtypes, _state_template, check_plain_state_engine

__all__ = ["BAILING_HYBRID_ARCHITECTURES", "bailing_hybrid_layers"]



def _state_kinds(arch: str, t: Mapping[str, Any], n: int) -> list[bool]:
    """Which layers hold state (True), as ``is_linear_layer`` (2.5) or ``_is_kda_layer`` (3) say."""
    g = t.get("layer_group_size")
    if not isinstance(g, int):  # a bool is an int to Python, and to these functions
        op = "'>' not supported between" if arch == LING_2_5 else "unsupported operand type(s) for %:"
        raise refused(f"TypeError: {op} '{type(g).__name__}' and 'int' (layer_group_size)", "layer_group_size")
    if arch == LING_2_5:
        return [g > 0 and (i + 1) % g != 0 for i in range(n)]
    if g == 0:
        raise refused("ZeroDivisionError: integer modulo by zero (layer_group_size)", "layer_group_size")
    return [not ((i + 1) % g == 0 or i >= n // g * g) for i in range(n)]


def _lightning(t: Mapping[str, Any], tp: int, heads: int, model_dtype: str, cache_dtypes: tuple[str, str]) -> LayerSpec:
    group = t.get("group_norm_size")
    if not isinstance(group, int) or tp > group or group % tp:
        raise refused(f"AssertionError: tp_size={tp} must be <= group_norm_size ({group!r}) and divide it "
                      "(BailingMoELinearAttention's local RMS norm)", "group_norm_size")  # fmt: skip
    head_dim = bailing_int(t, "head_dim")
    dtype = _state_dtypes(model_dtype, *cache_dtypes)[0]
    return _state_template(((heads // tp, head_dim, head_dim),), (dtype,), "linear", model_dtype)


def _kda(t: Mapping[str, Any], tp: int, heads: int, model_dtype: str, cache_dtypes: tuple[str, str]) -> LayerSpec:
    if not t.get("no_kda_lora"):
        raise refused("ValueError: BailingMoeV3 KDA currently expects no_kda_lora=True", "no_kda_lora")
    kernel = t.get("short_conv_kernel_size")
    if not isinstance(kernel, int):
        raise refused(f"TypeError: short_conv_kernel_size is {kernel!r} (kda_state_shape subtracts 1 from it)",
                      "short_conv_kernel_size")  # fmt: skip
    try:
        shapes = _core._vllm_state_shapes("kda", [tp, heads, bailing_int(t, "head_dim"), kernel, 0])
    except ValueError as e:
        raise refused(str(e), "num_attention_heads") from None
    # neither the layer nor the class's state classmethod passes --mamba-ssm-cache-dtype: float32 stays
    conv = _state_dtypes(model_dtype, *cache_dtypes)[0]
    return _state_template(shapes, (conv, "float32"), "gdn_attn", model_dtype)


def bailing_hybrid_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                          mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Ling 2.5 or Ling 3 config (see the module doc), for
    ``engine``'s TP and PP.

    Raises:
        ConfigError: what vLLM refuses, a drafter, or ReplaySSM.
    """
    arch = cfg["architectures"][0]
    check_plain_state_engine(arch, engine)
    t = bailing_class_config(cfg)
    tp, n, heads = engine.tp, bailing_int(t, "num_hidden_layers"), bailing_int(t, "num_attention_heads")
    stateful = _state_kinds(arch, t, n)
    if heads % tp and (arch == LING_2_5 or not all(stateful)):  # LinearAttention's, and the MLA layer's
        raise refused(f"AssertionError: num_attention_heads ({heads}) is not divisible by tp={tp}",
                      "num_attention_heads")  # fmt: skip
    state_of = _lightning if arch == LING_2_5 else _kda
    state = state_of(t, tp, heads, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype)) if any(stateful) else None
    mla: LayerSpec | None = None
    if not all(stateful):
        latent = bailing_int(t, "kv_lora_rank") + bailing_int(t, "qk_rope_head_dim", 0)
        mla = LayerSpec("", "mla", 1, latent, head_size_v=0, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype)
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            template, name = (state, "self_attn") if stateful[i] else (mla, "self_attn.attn")
            assert template is not None
            out.append(replace(template, name=f"model.layers.{i}.{name}", pp_stage=stage))
    return out
