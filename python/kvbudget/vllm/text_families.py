"""vLLM 0.33.0's text decoders whose model files carry rules of their own (KV sharing, per-layer
geometry, windows set or cleared by the model, MoE-side refusals), read as those files build them:
Gemma 4, Gemma 3n, EXAONE-MoE, Laguna, Cohere2-MoE, Muse Glimmer, AXK1, HunYuan V3 and MiMo-V2-Flash
(``model_executor/models/gemma4.py``, ``gemma3n.py``, ``exaone_moe.py``, ``laguna.py``,
``cohere2_moe.py``, ``muse_glimmer.py``, ``AXK1.py``, ``hy_v3.py``, ``mimo_v2.py``).

Each registers one attention layer per decoder layer, ``model.layers.{i}.self_attn.attn``, with the
``--kv-cache-dtype``. Per rank: the query heads over ``tp`` and ``max(1, kv // tp)`` after the
classes' asserts (``tp`` divides the heads; the KV heads and ``tp`` divide one another) and
``Attention``'s (the rank's KV heads divide its query heads). A layer given no window of its own
takes ``CacheConfig.sliding_window`` (the config's window only when every layer slides), unless
the model clears it first (Laguna's model, as MiMo-V2's and Step-3.5's decoders do).
``--disable-sliding-window`` (or a window of 0) makes ``ModelConfig`` set ``sliding_window`` to None:
where transformers 5.19.0's class types the field ``int`` (Gemma 4 / 3n, EXAONE-MoE, Laguna, MiMo-V2) its
strict dataclass refuses that and vLLM does not start; Cohere2-MoE then fails adding 1 to it.

KV sharing (Gemma): the last ``num_kv_shared_layers`` layers read another layer's cache. Their
``Attention`` gets ``kv_sharing_target_layer_name``, and vLLM's ``get_kv_cache_spec`` skips such a
layer (``v1/worker/gpu/attn_utils.py``; ``add_kv_sharing_layers_to_kv_cache_groups`` later adds it
to its target's group, which holds no more memory): it owns no KV cache and is not listed here.
``validate_kv_sharing_target`` needs the target registered before the layer in the same model
build, so a pipeline split that puts a shared layer on another stage than its target fails
(``ValueError: ... is not a valid Attention layer in the model``).

* **Gemma 4** (``Gemma4ForCausalLM``; its multimodal wrappers through :mod:`kvbudget.vllm.wrappers`):
  a layer's head size and KV heads are its ``per_layer_config`` entry's (transformers 5.19.0's
  heterogeneous config: a full layer takes ``global_head_dim``, default 512, and, with
  ``attention_k_eq_v``, ``num_global_key_value_heads``, when the file carries no
  ``per_layer_config``), else the config's. transformers forces the last layer to full attention
  and halves the window (``// 2 + 1``) under ``use_bidirectional_attention: "all"``. A shared
  layer reads the last earlier unshared layer of its own type (``ValueError`` when there is none).
  Its MoE block needs ``moe_intermediate_size``.
* **Gemma 3n** (``Gemma3nForCausalLM``, and ``Gemma3nForConditionalGeneration``'s text model): one
  head size and KV head count; a shared layer reads layer ``first - 2`` if it is sliding, else
  ``first - 1`` (fixed offsets, whatever those layers' types), ``first`` being
  ``num_hidden_layers - num_kv_shared_layers``; a target below 0 means no sharing (the layer keeps
  its own cache). The decoder asserts a ``gemma3n_text`` config and ``altup_correct_scale``, its MLP
  refuses a ``hidden_activation`` other than ``gelu_pytorch_tanh``, and the class does not
  implement ``SupportsPP`` (vLLM refuses more than one pipeline stage).
* **EXAONE-MoE**: ``head_dim`` only if the file sets it (else ``hidden_size // heads``); a sliding
  layer's window is ``sliding_windows[i]`` (K-EXAONE 2.0) else ``sliding_window``.
* **Laguna**: the layer's query heads ``num_attention_heads_per_layer[i]`` (Laguna-XS), head size
  ``head_dim`` or ``hidden_size`` over them; the model clears the model-wide window.
* **Cohere2-MoE**: ``sliding_window + 1`` on sliding layers; ``layer_types`` derived from the
  popped ``first_k_dense_replace`` (the dense prefix's own pattern, then ``sliding_window_pattern``).
* **Muse Glimmer** (``MuseGlimmerForCausalLM``, which also serves ``...ForConditionalGeneration``):
  the text config (``text_config``, else the file; a flat multimodal file is read as the class's
  default text config, which is what vLLM reads), ``layer_rope_theta[i]`` read per layer.
* **AXK1**: DeepSeek-MLA to ``ModelConfig``: one ``MLAAttention`` per layer, one latent head of
  ``kv_lora_rank + qk_rope_head_dim``, no V part, no window (plain MHA, both head dims 0, refused as
  unchecked).
* **HunYuan V3**: no window of its own (every layer ``CacheConfig``'s); the decoder needs
  ``first_k_dense_replace``, ``expert_hidden_dim`` and ``route_norm`` (keys of the released file,
  which transformers' ``HYV3Config`` lacks), and each pipeline stage a MoE layer.
* **MiMo-V2-Flash**: per ``hybrid_layer_pattern[i]``, a sliding layer of the ``swa_`` keys
  (``sliding_window_size``) or a full one; K and V head sizes differ (``head_size_v``); the decoder
  clears the model-wide window; no TP assert of its own (``QKVParallelLinear`` divides the heads);
  the released file's keys transformers' class lacks are required.

The MoE blocks refuse a TP above the experts and the MLPs an activation other than the class's.
What transformers' classes refuse on loading (``layer_types`` of another length or kind, a width
the heads do not divide, per-layer lists of another length) is refused too. Drafters on these
targets (Gemma 4's MTP and DSpark heads, EAGLE / EAGLE3 heads) are refused as unchecked. Held to
vLLM's classes by ``tests/test_vllm_text_families.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.models.layer_kinds import derived_layer_types
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.refusal import split_unevenly
from kvbudget.vllm.planner import EngineConfig, LayerKind, LayerSpec

__all__ = ["TEXT_FAMILIES", "text_family_layers"]

_TYPES: Final = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class _Layer:
    """One registered ``Attention``: its geometry, and the layer whose cache it reads (if any)."""

    heads: int
    dim: int
    window: int | None
    shares: int | None = None
    mla: bool = False  # an MLAAttention: one latent head, no V part
    dim_v: int | None = None  # the V head size, where it is not the K one (MiMo-V2)


def _refused(v: _View, what: str, key: str | None = None) -> ConfigError:
    return ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: {what}", v.name(key) if key else None)


def _per_rank(v: _View, heads: int, kv: int, tp: int, attention: bool = True) -> int:
    """KV heads per rank after the attention class's asserts and (``attention``) ``Attention``'s."""
    if heads % tp:
        raise _refused(v, f"AssertionError: tp ({tp}) does not divide num_attention_heads ({heads})",
                       "num_attention_heads")  # fmt: skip
    if split_unevenly(kv, tp):
        raise _refused(v, f"AssertionError: the {kv} KV heads and tp={tp} do not divide one another",
                       "num_key_value_heads")  # fmt: skip
    per_rank = max(1, kv // tp)
    if attention and (heads // tp) % per_rank:
        raise _refused(v, f"AssertionError: num_heads ({heads // tp}) is not divisible by num_kv_heads ({per_rank})",
                       "num_key_value_heads")  # fmt: skip
    return per_rank


def _layer_types(v: _View, n: int) -> list[str]:
    """``layer_types`` as transformers' class leaves them (its ``validate_layer_type`` refusals kept;
    a kind other than full or sliding attention is refused as unchecked)."""
    given = v.raw("layer_types")
    if given is None and v.model_type == "gemma3n_text":  # Gemma3nTextConfig: every fifth layer full
        given = ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)]
    types = derived_layer_types(v.model_type, n, given)
    if not isinstance(types, list) or len(types) != n:
        got = len(types) if isinstance(types, list) else type(types).__name__
        raise ConfigError(f"{v.label}: transformers 5.19.0's {v.model_type} class (vLLM's loader) refuses it: "
                          f"num_hidden_layers ({n}) must equal the number of layer_types ({got})",
                          v.name("layer_types"))  # fmt: skip
    other = sorted({str(t) for t in types} - set(_TYPES))
    if other:
        raise ConfigError(f"{v.label}: kvbudget has not checked vLLM 0.33.0's {v.model_type} layers of kind {other}",
                          v.name("layer_types"))  # fmt: skip
    return types


def _window(v: _View, disable_sliding_window: bool, halve: bool = False) -> int:
    """The sliding layers' window (``halve``: transformers' bidirectional ``// 2 + 1``).

    ``ModelConfig.__post_init__`` sets ``hf_text_config.sliding_window = None`` under
    ``--disable-sliding-window`` or for a window of 0, and these classes type the field ``int``:
    transformers' strict dataclass refuses the assignment, so vLLM fails to start."""
    window = v.opt_int("sliding_window", 0)
    if window is None:
        raise ConfigError(f"{v.label}: transformers 5.19.0's {v.model_type} class (vLLM's loader) refuses a null "
                          "sliding_window", v.name("sliding_window"))  # fmt: skip
    if disable_sliding_window or not window:
        why = "--disable-sliding-window" if window else "a window of 0"
        raise _refused(v, f"StrictDataclassFieldValidationError: {why} "
                          f"makes ModelConfig set sliding_window to None, which transformers 5.19.0's {v.model_type} "
                          "class (typed int) refuses", "sliding_window")  # fmt: skip
    return window // 2 + 1 if halve else window


def _gemma4_shapes(v: _View, n: int, types: list[str]) -> list[tuple[int, int]]:
    """Each layer's ``(head_dim, num_key_value_heads)``: transformers' ``per_layer_config`` view."""
    base = (v.req_int("head_dim"), v.req_int("num_key_value_heads"))
    if "per_layer_config" in v.cfg:
        given = v.cfg["per_layer_config"] or {}
    else:  # Gemma4TextConfig.__post_init__: the full layers' overrides from the popped keys
        over: dict[str, Any] = {"head_dim": v.opt_int("global_head_dim") or 512}
        kv = v.opt_int("num_global_key_value_heads")
        if kv is not None and v.raw("attention_k_eq_v"):
            over["num_key_value_heads"] = kv
        given = {i: over for i, t in enumerate(types) if t == "full_attention"}
    if not isinstance(given, Mapping) or not all(isinstance(o, Mapping) for o in given.values()):
        raise v.fail("per_layer_config", "must map layer indices to objects")
    try:
        layers = {int(k): o for k, o in given.items()}
    except (TypeError, ValueError):
        raise v.fail("per_layer_config", "must map layer indices to objects") from None
    if any(not 0 <= i < n for i in layers):
        raise v.fail("per_layer_config", f"has a layer index outside [0, {n}); transformers refuses it")
    bad = sorted({k for o in layers.values() for k in o} - {"head_dim", "num_key_value_heads"})
    if bad:
        raise ConfigError(f"{v.label}: kvbudget has not checked vLLM 0.33.0's Gemma 4 per-layer {bad} (the class "
                          "reads them as global attributes, which transformers makes per-layer)",
                          v.name("per_layer_config"))  # fmt: skip
    out = []
    for i in range(n):
        o = layers.get(i, {})
        dim, kv = o.get("head_dim", base[0]), o.get("num_key_value_heads", base[1])
        if any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in (dim, kv)):
            raise v.fail("per_layer_config", f"layer {i}: head_dim and num_key_value_heads must be positive integers")
        out.append((dim, kv))
    return out


def _pipeline(v: _View, engine: EngineConfig, supports_pp: bool) -> None:
    """``ModelConfig.verify_with_parallel_config``: more than one stage needs ``SupportsPP``
    (after the config's own checks: :func:`kvbudget.vllm.models.layers_from_hf_config` leaves
    Gemma 3n's to this reader, whose window check comes first in vLLM)."""
    if engine.pp > 1 and not supports_pp:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: NotImplementedError: Pipeline parallelism is not "
                          f"supported for this model ({v.architectures[0]} does not implement SupportsPP)",
                          "pp")  # fmt: skip


def _gemma4(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    types = _layer_types(v, n)
    shapes = _gemma4_shapes(v, n, types)
    window = _window(v, disable_sliding_window, halve=v.raw("use_bidirectional_attention") == "all")
    tp = engine.tp  # Gemma4ForCausalLM implements SupportsPP
    shared = v.opt_int("num_kv_shared_layers", 0) or 0
    first = n - shared
    out = []
    for i, (t, (dim, kv)) in enumerate(zip(types, shapes)):
        per_rank = _per_rank(v, heads, kv, tp, attention=False)
        target = None
        if shared > 0 and i >= first:  # the last earlier unshared layer of this layer's type
            earlier = types[:max(first, 0)]
            if t not in earlier:
                raise _refused(v, f"ValueError: Gemma 4's shared layer {i} ({t}) finds no {t} layer before "
                                  f"layer {first} to read (list.index)", "num_kv_shared_layers")  # fmt: skip
            target = len(earlier) - 1 - earlier[::-1].index(t)
        _per_rank(v, heads, kv, tp)  # then Attention's own assert
        # after the attention, Gemma4DecoderLayer's MoE block reads getattr_iter(config,
        # ("moe_intermediate_size", ...)): the class always has the first
        if v.raw("num_experts") is not None and v.cfg.get("moe_intermediate_size") is None:
            raise _refused(v, "ValueError: Gemma4 MoE requires an expert intermediate size", "moe_intermediate_size")
        out.append(_Layer(per_rank, dim, window if t == "sliding_attention" else None, target))
    return out


def _gemma3n(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    if v.req_int("hidden_size") % heads:
        raise ConfigError(f"{v.label}: transformers 5.19.0's gemma3n_text class (vLLM's loader) refuses it: the "
                          "hidden size is not a multiple of the number of attention heads",
                          v.name("hidden_size"))  # fmt: skip
    for key in ("intermediate_size", "activation_sparsity_pattern"):
        given = v.cfg.get(key)
        if isinstance(given, list) and len(given) != n:
            raise ConfigError(f"{v.label}: transformers 5.19.0's gemma3n_text class (vLLM's loader) refuses it: "
                              f"{key} has {len(given)} entries for {n} layers", v.name(key))  # fmt: skip
    types = _layer_types(v, n)
    window = _window(v, disable_sliding_window)
    _pipeline(v, engine, False)
    if v.model_type != "gemma3n_text" or v.prefix:
        raise _refused(v, "AssertionError: Gemma3nDecoderLayer asserts a Gemma3nTextConfig (model_type "
                          f"'gemma3n_text'), not {v.outer.get('model_type')!r}", "model_type")  # fmt: skip
    if not v.cfg.get("altup_correct_scale", True):
        raise _refused(v, "AssertionError: Gemma3nDecoderLayer asserts config.altup_correct_scale",
                       "altup_correct_scale")  # fmt: skip
    per_rank = _per_rank(v, heads, v.req_int("num_key_value_heads"), engine.tp)  # the attention, then the MLP
    activation = v.cfg.get("hidden_activation", "gelu_pytorch_tanh")
    if activation != "gelu_pytorch_tanh":
        raise _refused(v, f"ValueError: Gemma3nMLP takes gelu_pytorch_tanh as the hidden activation, not "
                          f"{activation!r}", "hidden_activation")  # fmt: skip
    dim = v.req_int("head_dim")
    first = n - (v.opt_int("num_kv_shared_layers", 0) or 0)
    out = []
    for i, t in enumerate(types):
        own = window if t == "sliding_attention" else None
        target = first - (2 if own is not None else 1) if i >= first else -1  # the class's fixed offsets
        out.append(_Layer(per_rank, dim, own, target if target >= 0 else None))
    return out


def _model_window(types: list[str], window: int | None) -> int | None:
    """vLLM's ``CacheConfig.sliding_window``: the config's window only when every layer slides
    (``Attention``'s fallback for a layer given no window of its own)."""
    return window if all(t == "sliding_attention" for t in types) else None


def _exaone_moe(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    kv = v.opt_int("num_key_value_heads") or heads
    window = _window(v, disable_sliding_window)
    if v.raw("layer_types") is None:  # ExaoneMoeConfig: every sliding_window_pattern-th layer full
        pattern = v.raw("sliding_window_pattern")
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
            raise ConfigError(f"{v.label}: kvbudget has not checked vLLM 0.33.0's EXAONE-MoE with "
                              f"sliding_window_pattern {pattern!r}", v.name("sliding_window_pattern"))  # fmt: skip
        v = _View({**v.cfg, "layer_types": ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                                            for i in range(n)]}, v.label, engine="vllm")  # fmt: skip
    types = _layer_types(v, n)
    dense = v.req_int("first_k_dense_replace", 0)
    mlp = v.raw("mlp_layer_types") or ["dense" if i < dense else "sparse" for i in range(n)]
    windows = v.cfg.get("sliding_windows")
    if not isinstance(mlp, list) or len(mlp) < n or windows is not None and (
            not isinstance(windows, list) or len(windows) < n):  # fmt: skip
        raise _refused(v, "IndexError: ExaoneMoeDecoderLayer reads mlp_layer_types[i] (and sliding_windows[i]) "
                          "for every layer", "mlp_layer_types")  # fmt: skip
    dim = v.cfg.get("head_dim")  # getattr(config, "head_dim", None): the class has none
    dim = v.req_int("hidden_size") // heads if dim is None else v.req_int("head_dim")
    fallback = _model_window(types, window)
    out = []
    for i, t in enumerate(types):
        per_rank = _per_rank(v, heads, kv, engine.tp)
        own = None if t == "full_attention" else windows[i] if windows is not None else window
        if mlp[i] == "sparse":
            _moe_tp(v, engine.tp)
        out.append(_Layer(per_rank, dim, own if own is not None else fallback))
    return out


def _per_layer_list(v: _View, key: str, n: int, default: list[Any]) -> list[Any]:
    """A per-layer list of transformers' class (its default when absent; another length refused)."""
    given = v.raw(key)
    if given is None:
        return default
    if not isinstance(given, list) or len(given) != n:
        raise ConfigError(f"{v.label}: transformers 5.19.0's {v.model_type} class (vLLM's loader) refuses it: {key} "
                          f"must have num_hidden_layers ({n}) entries", v.name(key))  # fmt: skip
    return given


def _moe_tp(v: _View, tp: int) -> None:
    """A MoE block's check (EXAONE-MoE, Laguna): no more TP ranks than experts."""
    if tp > v.req_int("num_experts"):
        raise _refused(v, f"ValueError: Tensor parallel size {tp} is greater than the number of experts "
                          f"{v.raw('num_experts')}", "num_experts")  # fmt: skip


def _laguna(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    per_layer = _per_layer_list(v, "num_attention_heads_per_layer", n, [heads] * n)
    types = _layer_types(v, n)
    mlp = _per_layer_list(v, "mlp_layer_types", n, ["dense"] + ["sparse"] * (n - 1))
    window = _window(v, disable_sliding_window)
    kv = v.req_int("num_key_value_heads")
    out = []
    for i, t in enumerate(types):  # LagunaModel sets CacheConfig.sliding_window to None: no fallback window
        h = per_layer[i]
        if isinstance(h, bool) or not isinstance(h, int) or h < 1:
            raise v.fail("num_attention_heads_per_layer", f"layer {i}: must be a positive integer, got {h!r}")
        per_rank = _per_rank(v, h, kv, engine.tp)
        dim = v.opt_int("head_dim") or v.req_int("hidden_size") // h
        if mlp[i] == "sparse" and v.req_int("num_experts", 0) > 0:
            _moe_tp(v, engine.tp)
        elif v.raw("hidden_act") not in (None, "silu"):
            raise _refused(v, f"ValueError: Unsupported activation: {v.raw('hidden_act')}. Only silu is supported.",
                           "hidden_act")  # fmt: skip
        out.append(_Layer(per_rank, dim, window if t == "sliding_attention" else None))
    return out


def _cohere2_moe(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    dense = v.cfg.get("first_k_dense_replace", 0)  # popped by Cohere2MoeConfig.__post_init__: not saved
    if not isinstance(dense, int) or isinstance(dense, bool) or dense < 0:
        raise v.fail("first_k_dense_replace", f"must be a non-negative integer, got {dense!r}")
    if v.raw("layer_types") is None:  # the dense prefix's own pattern, then sliding_window_pattern's
        first, rest = v.req_int("prefix_dense_sliding_window_pattern"), v.req_int("sliding_window_pattern")
        derived = [*(("sliding_attention" if (i + 1) % first else "full_attention") for i in range(dense)),
                   *(("sliding_attention" if (i + 1) % rest else "full_attention") for i in range(n - dense))]
        v = _View({**v.cfg, "layer_types": derived}, v.label, engine="vllm")
    types = _layer_types(v, n)
    mlp = _per_layer_list(v, "mlp_layer_types", n, ["dense" if i < dense else "sparse" for i in range(n)])
    # ModelConfig: --disable-sliding-window or a window of 0 sets sliding_window to None (the class allows it)
    window = None if disable_sliding_window else v.opt_int("sliding_window", 0) or None
    kv = v.opt_int("num_key_value_heads") or heads
    dim = v.req_int("head_dim")  # getattr(config, "head_dim", ...): the class always has it
    fallback = _model_window(types, window)
    out = []
    for i, t in enumerate(types):
        if heads % engine.tp:  # QKVParallelLinear's divide (the class itself does not assert it)
            raise _refused(v, f"AssertionError: tp ({engine.tp}) does not divide num_attention_heads ({heads})",
                           "num_attention_heads")  # fmt: skip
        per_rank = _per_rank(v, heads, kv, engine.tp, attention=False)
        own = None
        if t == "sliding_attention":
            if window is None:
                raise _refused(v, "TypeError: Cohere2MoeAttention adds 1 to a sliding window that "
                                  "--disable-sliding-window (or sliding_window 0) left None",
                               "sliding_window")  # fmt: skip
            own = window + 1
        _per_rank(v, heads, kv, engine.tp)  # Attention's own assert
        if mlp[i] != "dense":
            _moe_tp(v, engine.tp)
        out.append(_Layer(per_rank, dim, own if own is not None else fallback))
    return out


def _muse_glimmer(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    if v.model_type == "muse_glimmer" and not v.prefix:
        # a flat multimodal file: MuseGlimmerConfig builds its default text config, which is what
        # vLLM's _text_config(config) reads (the flat keys stay on the outer config, unread)
        v = _View({"model_type": "muse_glimmer_text", "architectures": v.architectures}, v.label, engine="vllm")
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    if v.req_int("hidden_size") % heads:
        raise ConfigError(f"{v.label}: transformers 5.19.0's muse_glimmer_text class (vLLM's loader) refuses it: "
                          "the hidden size is not a multiple of the number of attention heads",
                          v.name("hidden_size"))  # fmt: skip
    if v.raw("layer_types") is None:  # MuseGlimmerTextConfig: every fourth layer from the last full
        v = _View({**v.cfg, "layer_types": ["full_attention" if (n - 1 - i) % 4 == 0 else "sliding_attention"
                                            for i in range(n)]}, v.label, engine="vllm")  # fmt: skip
    types = _layer_types(v, n)
    # ModelConfig: --disable-sliding-window or a window of 0 sets sliding_window to None (the class allows it)
    window = None if disable_sliding_window else v.opt_int("sliding_window", 0) or None
    thetas = v.raw("layer_rope_theta")
    if thetas is not None and not isinstance(thetas, list):
        raise v.fail("layer_rope_theta", f"must be a list, got {type(thetas).__name__}")
    kv, dim = v.req_int("num_key_value_heads"), v.req_int("head_dim")
    fallback = _model_window(types, window)
    activation = v.raw("hidden_activation")
    out = []
    for i, t in enumerate(types):
        per_rank = _per_rank(v, heads, kv, engine.tp, attention=False)
        if thetas is not None and i >= len(thetas):
            raise _refused(v, f"IndexError: MuseGlimmerAttention reads layer_rope_theta[{i}]", "layer_rope_theta")
        _per_rank(v, heads, kv, engine.tp)  # then Attention's own assert
        if activation not in (None, "silu"):  # MuseGlimmerMLP, built after the attention
            raise _refused(v, f"ValueError: MuseGlimmer uses `silu` as the hidden activation; got `{activation}`.",
                           "hidden_activation")  # fmt: skip
        own = window if t == "sliding_attention" else None
        out.append(_Layer(per_rank, dim, own if own is not None else fallback))
    return out


def _axk1(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    keys = ("max_position_embeddings", "hidden_act", "routed_scaling_factor", "qk_nope_head_dim",
            "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")  # fmt: skip
    for key in keys:  # AXK1DecoderLayer's asserts
        if v.raw(key) is None:
            raise _refused(v, f"AssertionError: AXK1DecoderLayer asserts config.{key} is not None", key)
    if v.req_int("qk_nope_head_dim", 0) == 0 and v.req_int("qk_rope_head_dim", 0) == 0:
        raise ConfigError(f"{v.label}: kvbudget has not checked vLLM 0.33.0's AXK1 with qk_nope_head_dim and "
                          "qk_rope_head_dim 0 (DeepseekAttention, plain MHA)", v.name("qk_rope_head_dim"))  # fmt: skip
    dim = v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", 0)
    given = v.raw("mlp_layer_types")
    if given is not None:
        mlp = list(given)[:n]
    else:  # transformers < 5.20: first_k_dense_replace and moe_layer_freq
        first, freq = v.req_int("first_k_dense_replace", 0), v.cfg.get("moe_layer_freq", 1)
        mlp = ["sparse" if i >= first and i % freq == 0 else "dense" for i in range(n)]
    heads = v.req_int("num_attention_heads")
    out = []
    for i in range(n):
        if heads % engine.tp:
            raise _refused(v, f"AssertionError: tp ({engine.tp}) does not divide num_attention_heads ({heads})",
                           "num_attention_heads")  # fmt: skip
        rope = v.raw("rope_parameters") or {"rope_type": "default"}
        if not isinstance(rope, Mapping):
            raise v.fail("rope_parameters", "must be an object")
        # AXK1MLAAttention renames a non-default rope deepseek_yarn (unless attention_factor is 1.0),
        # which then reads its factor
        if rope.get("rope_type") != "default" and rope.get("attention_factor") != 1.0 and "factor" not in rope:
            raise _refused(v, "KeyError: 'factor' (AXK1MLAAttention's deepseek_yarn rope)", "rope_parameters")
        if i >= len(mlp):
            raise _refused(v, f"IndexError: AXK1DecoderLayer reads mlp_layer_types[{i}]", "mlp_layer_types")
        if v.raw("hidden_act") != "silu":  # AXK1MoE, or the dense DeepseekV2MLP
            raise _refused(v, f"ValueError: Unsupported activation: {v.raw('hidden_act')}. Only silu is supported "
                              "for now.", "hidden_act")  # fmt: skip
        if mlp[i] == "sparse" and v.raw("n_routed_experts") is not None and v.raw("num_experts_per_tok") is None:
            raise _refused(v, "AssertionError: AXK1MoE asserts config.num_experts_per_tok is not None",
                           "num_experts_per_tok")  # fmt: skip
        out.append(_Layer(1, dim, None, mla=True))
    return out


def _hy_v3(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    heads = v.req_int("num_attention_heads")
    kv = v.req_int("num_key_value_heads")
    dim = v.opt_int("head_dim") or v.req_int("hidden_size") // heads
    # HYV3Attention passes no window: every layer takes CacheConfig's (a window the file sets, when its
    # layer_types are absent or all sliding; none under --disable-sliding-window or for a window of 0)
    given = v.raw("layer_types")
    window = None if disable_sliding_window else v.opt_int("sliding_window", 0) or None
    if given is not None and (not isinstance(given, list) or any(t != "sliding_attention" for t in given)):
        window = None
    first = v.cfg.get("first_k_dense_replace")
    out = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            per_rank = _per_rank(v, heads, kv, engine.tp)
            if first is None:
                raise _refused(v, "ValueError: first_k_dense_replace not exist,please check config (transformers' "
                                  "HYV3Config has no such key; the checkpoint's file carries it)",
                               "first_k_dense_replace")  # fmt: skip
            if not isinstance(first, int) or isinstance(first, bool):
                raise v.fail("first_k_dense_replace", f"must be an integer, got {first!r}")
            if i >= first:  # HYV3MoEFused
                _moe_tp(v, engine.tp)
                for key in ("expert_hidden_dim", "route_norm"):
                    if key not in v.cfg:
                        raise _refused(v, f"AttributeError: HYV3MoEFused reads config.{key}, which transformers' "
                                          "HYV3Config lacks and the file does not set", key)  # fmt: skip
            if (i < first or (v.opt_int("num_shared_experts", 0) or 0) > 0) and v.raw("hidden_act") != "silu":
                raise _refused(v, f"ValueError: Unsupported activation: {v.raw('hidden_act')}. Only silu is "
                                  "supported for now.", "hidden_act")  # fmt: skip
            out.append(_Layer(per_rank, dim, window))
        if not any(isinstance(first, int) and i >= first for i in range(start, end)):  # HYV3Model, per stage
            raise _refused(v, f"RuntimeError: No MoE layer found in model.layers (pipeline stage {stage}: layers "
                              f"{start}-{end - 1}, first_k_dense_replace {first})",
                           "first_k_dense_replace")  # fmt: skip
    return out


def _mimo_v2_flash(v: _View, engine: EngineConfig, disable_sliding_window: bool) -> list[_Layer]:
    n = v.req_int("num_hidden_layers")
    tp = engine.tp
    moe_freq = v.cfg.get("moe_layer_freq")
    _window(v, disable_sliding_window)  # MiMoV2FlashConfig types sliding_window int: no None for ModelConfig

    def attr(key: str) -> Any:  # what the classes read as config.<key>: an AttributeError when absent
        if not v.has(key):
            raise _refused(v, f"AttributeError: MiMoV2FlashDecoderLayer reads config.{key}, which transformers' "
                              "MiMoV2FlashConfig lacks and the file does not set", key)  # fmt: skip
        return v.raw(key)

    if v.req_int("num_attention_heads") % tp:  # ModelConfig.verify_with_parallel_config
        raise _refused(v, f"AssertionError: tp ({tp}) does not divide num_attention_heads", "num_attention_heads")
    out = []
    for i in range(n):  # the decoder clears CacheConfig.sliding_window: no fallback window
        pattern = attr("hybrid_layer_pattern")
        if not isinstance(pattern, list) or i >= len(pattern):
            raise _refused(v, f"IndexError: MiMoV2FlashDecoderLayer reads hybrid_layer_pattern[{i}]",
                           "hybrid_layer_pattern")  # fmt: skip
        swa = pattern[i] == 1
        p = "swa_" if swa else ""
        heads, kv = attr(f"{p}num_attention_heads"), attr(f"{p}num_key_value_heads")
        dim = attr("swa_head_dim" if swa else "head_dim")
        dim_v = v.raw("swa_v_head_dim" if swa else "v_head_dim")  # getattr(config, ..., None)
        window = attr("sliding_window_size") if swa else -1
        # no class assert: QKVParallelLinear divides the heads by TP (`divide` asserts), then Attention's
        if heads % tp or (kv >= tp and kv % tp) or (kv < tp and tp % kv):
            raise _refused(v, f"AssertionError: QKVParallelLinear divides {heads} heads and {kv} KV heads over "
                              f"tp={tp}", f"{p}num_key_value_heads")  # fmt: skip
        per_rank = max(1, kv // tp)
        if (heads // tp) % per_rank:
            raise _refused(v, f"AssertionError: num_heads ({heads // tp}) is not divisible by num_kv_heads "
                              f"({per_rank})", f"{p}num_key_value_heads")  # fmt: skip
        if isinstance(moe_freq, list) and i >= len(moe_freq):
            raise _refused(v, f"IndexError: MiMoV2FlashDecoderLayer reads moe_layer_freq[{i}]", "moe_layer_freq")
        sparse = moe_freq is not None and not isinstance(moe_freq, int) and bool(moe_freq[i])
        if sparse and tp > v.req_int("n_routed_experts"):
            raise _refused(v, f"ValueError: Tensor parallel size {tp} is greater than the number of experts "
                              f"{v.raw('n_routed_experts')}", "n_routed_experts")  # fmt: skip
        if v.raw("hidden_act") not in (None, "silu"):  # MiMoV2MoE / MiMoV2MLP
            raise _refused(v, f"ValueError: Unsupported activation: {v.raw('hidden_act')}.", "hidden_act")
        attr("layernorm_epsilon")
        out.append(_Layer(per_rank, dim, window if window > -1 else None, dim_v=dim if dim_v is None else dim_v))
    return out


#: Architecture -> its reader (which runs vLLM's checks in vLLM's order: transformers' loading,
#: ``ModelConfig``, the parallel config, then the model classes).
_READERS: Final[dict[str, Callable[[_View, EngineConfig, bool], list[_Layer]]]] = {
    "Gemma4ForCausalLM": _gemma4,
    "Gemma3nForCausalLM": _gemma3n,
    "ExaoneMoeForCausalLM": _exaone_moe,
    "LagunaForCausalLM": _laguna,
    "Cohere2MoeForCausalLM": _cohere2_moe,
    "MuseGlimmerForCausalLM": _muse_glimmer,
    "AXK1ForCausalLM": _axk1,
    "HYV3ForCausalLM": _hy_v3,
    "MiMoV2FlashForCausalLM": _mimo_v2_flash,
    "MiMoV2ForCausalLM": _mimo_v2_flash,  # vLLM's subclass of the Flash class (the name new configs carry)
}
#: The architectures :func:`text_family_layers` reads as vLLM 0.33.0's classes for them do.
TEXT_FAMILIES: Final[frozenset[str]] = frozenset(_READERS)


def text_family_layers(cfg: Mapping[str, Any], engine: EngineConfig, kv_cache_dtype: str, model_dtype: str,
                       disable_sliding_window: bool, label: str = "config.json") -> list[LayerSpec]:  # fmt: skip
    """The KV-owning layers vLLM 0.33.0 registers for a config of :data:`TEXT_FAMILIES` (its first
    architecture), per PP stage, in registration order."""
    v = _View(cfg, label, engine="vllm")
    arch = v.architectures[0]
    layers = _READERS[arch](v, engine, disable_sliding_window)
    out = []
    for stage, (start, end) in enumerate(pp_stage_layers(len(layers), engine.pp)):
        for i in range(start, end):
            x = layers[i]
            if x.shares is not None:
                if not start <= x.shares < i:  # validate_kv_sharing_target: registered before, in this build
                    raise _refused(v, f"ValueError: Specified KV sharing target layer for layer {i} is not valid: "
                                      f"target layer {x.shares} is not a valid Attention layer in the model (pipeline "
                                      f"stage {stage} holds layers {start}-{end - 1})",
                                   "num_kv_shared_layers")  # fmt: skip
                continue  # it reads its target's cache: no KV cache spec of its own
            kind: LayerKind = "mla" if x.mla else "sliding" if x.window else "full"
            out.append(LayerSpec(f"model.layers.{i}.self_attn.attn", kind,
                                 num_kv_heads=x.heads, head_size=x.dim,
                                 head_size_v=0 if x.mla else x.dim if x.dim_v is None else x.dim_v,
                                 kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                                 sliding_window=x.window, pp_stage=stage))  # fmt: skip
    return out
