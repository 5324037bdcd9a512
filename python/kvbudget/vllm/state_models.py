"""vLLM 0.33.0's reading of a hybrid-state model's config: its attention and state layers.

:func:`state_layers_from_hf_config` (which :func:`kvbudget.vllm.layers_from_hf_config` calls
for the architectures in :data:`STATE_ARCHITECTURES`) gives the :class:`~kvbudget.vllm.LayerSpec`
list vLLM's worker builds for a gated-delta-net hybrid (and the Mamba-2 hybrids below), in registration order:

* **Layer kinds**: ``layer_types[i]`` as transformers' config class builds it (from
  ``full_attention_interval``, default 4, when the config lists none): ``linear_attention``
  is a gated delta net at ``<prefix>.<i>.linear_attn``, ``full_attention`` an attention layer
  at ``<prefix>.<i>.self_attn.attn``; any other kind is vLLM's ``ValueError``.
* **Attention**: ``max(1, num_key_value_heads // tp)`` KV heads of ``head_dim`` (after vLLM's
  asserts that ``tp`` divides the heads, the KV heads divide or are divided by ``tp``, and a
  rank's KV heads divide its heads).
* **State** (``get_mamba_state_shape_from_config``): the conv state ``(k - 1, (2·nk·dk +
  nv·dv) / tp)`` and the recurrent state ``(nv / tp, dv, dk)`` (with a drafter, ``k - 1 + s``
  rows for ``s`` speculative tokens)
  (``MambaStateShapeCalculator``, restated in ``rust/core/src/vllm/state_shape.rs``); both in
  the model dtype unless ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype`` say otherwise, and
  Qwen3.5's ``mamba_ssm_dtype`` replaces an ``auto`` SSM dtype
  (``Qwen3_5ForConditionalGenerationConfig``).
* **Prefill checkpoints**: Qwen's gated delta net exports them with FlashInfer's prefill
  (``gdn_prefill_backend="flashinfer"``, vLLM's choice on Hopper, and on Blackwell with a key
  head dim of 128 and CUDA 13), not with Triton's.
* **Nemotron-H** (``NemotronHForCausalLM``): the layer kinds of transformers'
  ``NemotronHConfig`` (``layers_block_type``, legacy ``mamba`` / ``attention`` remapped, else
  ``hybrid_override_pattern``'s ``M`` / ``*`` / ``-`` / ``E``, else the class default), read
  back by ``NemotronHModel`` as the pattern: a Mamba-2 mixer at ``<prefix>.<i>.mixer``
  (``MambaMixer2``'s asserts: ``tp`` divides the heads, and the groups unless there is one;
  ``mamba2_state_shape``; ``mamba_n_groups`` / ``mamba_d_conv`` override ``n_groups`` /
  ``conv_kernel`` as the config class lets them), attention at ``<prefix>.<i>.mixer.attn``
  (``head_dim``, sliding with the config's ``sliding_window`` unless
  ``--disable-sliding-window``); MLP and MoE layers hold nothing. An ``auto`` SSM dtype takes
  the config's ``mamba_ssm_cache_dtype`` (``NemotronHForCausalLMConfig``; float32 by default).
  ReplaySSM's ring shapes are not read (refused).
* **Granite-4.0-H** (``GraniteMoeHybridForCausalLM``): ``layer_types`` (legacy names remapped;
  every layer Mamba without them), Mamba-2 at ``<prefix>.<i>.mixer``, attention at
  ``<prefix>.<i>.self_attn.attn`` with ``hidden_size / num_attention_heads`` per head.
* **Falcon-H1** (``FalconH1ForCausalLM``): every layer holds an attention at ``<prefix>.<i>.attn``
  and a Mamba-2 mixer, registered at ``model.<n + i>.mixer``; never a window.
* **Drafters** are not read yet (their MTP layers): a speculative method is refused.

``tests/test_vllm_state_models.py`` holds this to vLLM's own code on generated configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.models.layer_kinds import LEGACY_KINDS, NEMOTRON_H_PATTERN
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["STATE_ARCHITECTURES", "state_layers_from_hf_config"]

#: Architecture -> the layers' prefix. The ``...ForConditionalGeneration`` wrappers build their
#: text model from ``text_config`` at ``language_model.model``.
STATE_ARCHITECTURES: Final[Mapping[str, str]] = {
    "Qwen3NextForCausalLM": "model.layers",
    "Qwen3_5ForCausalLM": "model.layers",
    "Qwen3_5MoeForCausalLM": "model.layers",
    "Qwen3_5ForConditionalGeneration": "language_model.model.layers",
    "Qwen3_5MoeForConditionalGeneration": "language_model.model.layers",
    "NemotronHForCausalLM": "model.layers",
    "GraniteMoeHybridForCausalLM": "model.layers",
    "FalconH1ForCausalLM": "model.layers",
}
_DTYPES: Final = ("float32", "bfloat16", "float16")
_INTERVAL_DEFAULT: Final = 4  # transformers' Qwen3NextConfig / Qwen3_5TextConfig


def _layer_types(v: _View, n: int) -> list[str]:
    raw = v.cfg.get("layer_types")
    if raw is None:
        interval = v.opt_int("full_attention_interval") or _INTERVAL_DEFAULT
        return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    if not isinstance(raw, list) or len(raw) < n or not all(isinstance(t, str) for t in raw):
        raise ConfigError(f"config.json: layer_types must name a kind for each of the {n} layers", "layer_types")
    bad = sorted({t for t in raw[:n]} - {"linear_attention", "full_attention"})
    if bad:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Invalid layer_type {bad[0]}", "layer_types")
    return list(raw[:n])


def _attention_heads(v: _View, tp: int, kv: int | None = None) -> tuple[int, int]:
    """``Qwen3NextAttention`` / ``NemotronHAttention``: KV heads per rank (``kv``: the config's KV
    heads, default ``num_key_value_heads``) and Qwen's head size."""
    heads = v.req_int("num_attention_heads")
    kv = v.req_int("num_key_value_heads") if kv is None else kv
    if heads % tp or (kv >= tp and kv % tp) or (kv < tp and tp % kv):
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {heads} attention heads and {kv} KV heads "
                          f"do not shard over tp={tp}", "num_key_value_heads")  # fmt: skip
    per_rank = max(1, kv // tp)
    if (heads // tp) % per_rank:  # Attention's own assertion
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: num_heads ({heads // tp}) is not divisible by "
                          f"num_kv_heads ({per_rank}) on each of tp={tp} ranks", "num_key_value_heads")  # fmt: skip
    head_dim = v.opt_int("head_dim") or v.req_int("hidden_size") // (heads // tp)
    return per_rank, head_dim


def _state_dtypes(model_dtype: str, cache: str, ssm: str, config_ssm: Any = None) -> list[str]:
    """``MambaStateDtypeCalculator``'s conv and SSM dtypes (gated delta net and Mamba-2 alike) after
    the model's config hook, which replaces an ``auto`` SSM dtype by ``config_ssm`` (not None)."""
    if ssm == "auto" and config_ssm is not None:
        ssm = config_ssm
    for name, value in (("mamba_cache_dtype", cache), ("mamba_ssm_cache_dtype", ssm)):
        if value != "auto" and value not in _DTYPES:
            raise ConfigError(f"{name}={value!r}: one of auto, {', '.join(_DTYPES)}", name)
    conv = model_dtype if cache == "auto" else cache
    return [conv, conv if ssm == "auto" else ssm]


def state_layers_from_hf_config(
    cfg: Mapping[str, Any],
    engine: EngineConfig,
    *,
    kv_cache_dtype: str,
    model_dtype: str,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
    gdn_prefill_backend: str = "flashinfer",
    disable_sliding_window: bool = False,
) -> list[LayerSpec]:
    """The layers vLLM 0.33.0 registers for a hybrid-state model (see the module doc), for
    ``engine``'s TP and PP; ``cfg`` is the loaded ``config.json``.

    Raises:
        ConfigError: a speculative method (its drafter is not read), layer kinds or heads
            vLLM refuses, or a key missing or invalid.
    """
    arch = cfg["architectures"][0]
    prefix = STATE_ARCHITECTURES[arch]
    v = _View(cfg, "config.json", engine="vllm")  # the text part, transformers' class defaults
    text = v.cfg
    tp, method = engine.tp, engine.speculative_method
    if method is not None:
        raise ConfigError(f"speculative_method={method!r}: kvbudget does not read {arch}'s drafter layers yet "
                          "(its MTP layers); plan the target alone or give the layers")  # fmt: skip
    if arch == "NemotronHForCausalLM":
        return _nemotron_h(v, engine, prefix, kv_cache_dtype, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype),
                           disable_sliding_window)  # fmt: skip
    if arch == "FalconH1ForCausalLM":
        return _falcon_h1(v, engine, prefix, kv_cache_dtype, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype))
    if arch == "GraniteMoeHybridForCausalLM":
        return _granite_4_h(v, engine, prefix, kv_cache_dtype, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype))
    n = v.req_int("num_hidden_layers")
    kinds = _layer_types(v, n)
    num_spec = 0
    # vLLM builds (and asserts on) the attention heads only where a layer has attention.
    kv, head_dim = _attention_heads(v, tp) if "full_attention" in kinds else (0, 0)
    dims = [tp, v.req_int("linear_num_key_heads"), v.req_int("linear_num_value_heads"),
            v.req_int("linear_key_head_dim"), v.req_int("linear_value_head_dim"),
            v.req_int("linear_conv_kernel_dim"), num_spec]  # fmt: skip
    try:
        shapes = tuple(tuple(s) for s in _core._vllm_state_shapes("gated_delta_net", dims))
    except ValueError as e:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", "linear_num_value_heads") from None
    hooked = text.get("mamba_ssm_dtype") if arch != "Qwen3NextForCausalLM" else None  # Qwen3.5's hook
    dtypes = tuple(_state_dtypes(model_dtype, mamba_cache_dtype, mamba_ssm_cache_dtype,
                                 hooked if isinstance(hooked, str) else None))
    if gdn_prefill_backend not in ("flashinfer", "triton"):
        raise ConfigError(f"gdn_prefill_backend={gdn_prefill_backend!r}: 'flashinfer' or 'triton'")
    checkpoint: Literal["none", "flashinfer_gdn"] = "flashinfer_gdn" if gdn_prefill_backend == "flashinfer" else "none"
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if kinds[i] == "full_attention":
                out.append(LayerSpec(f"{prefix}.{i}.self_attn.attn", "full", kv, head_dim, head_size_v=head_dim,
                                     kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, pp_stage=stage))
            else:
                out.append(LayerSpec(f"{prefix}.{i}.linear_attn", "mamba", 0, 0, model_dtype=model_dtype,
                                     pp_stage=stage, state_shapes=shapes, state_dtypes=dtypes,
                                     mamba_type="gdn_attn", prefill_checkpoint=checkpoint))  # fmt: skip
    return out



# -- Nemotron-H (Mamba-2) ------------------------------------------------------------------------
_NEMOTRON_DEFAULT_KINDS: Final = ("linear_attention", "moe", "full_attention", "mlp")  # NemotronHConfig's


def _nemotron_h_kinds(v: _View) -> list[str]:
    """``NemotronHConfig``'s ``layers_block_type`` (``layer_types`` is its alias; legacy names
    remapped), else the kinds of the ``hybrid_override_pattern`` it was saved with, else the class
    default; vLLM's model reads them back as the pattern's characters."""
    given = v.cfg.get("layers_block_type", v.cfg.get("layer_types"))
    if given is not None:
        if not isinstance(given, list) or not all(isinstance(t, str) for t in given):
            raise ConfigError("config.json: layers_block_type must be a list of layer kinds", "layers_block_type")
        kinds = [LEGACY_KINDS.get(str(t), str(t)) for t in given]
        bad = sorted(set(kinds) - set(NEMOTRON_H_PATTERN.values()))
        if bad:
            raise ConfigError(f"config.json: transformers' NemotronHConfig refuses it: layers_block_type contains "
                              f"invalid types {bad}", "layers_block_type")  # fmt: skip
        return kinds
    pattern = v.cfg.get("hybrid_override_pattern")
    if pattern is None:
        return list(_NEMOTRON_DEFAULT_KINDS)
    if not isinstance(pattern, str) or any(ch not in NEMOTRON_H_PATTERN for ch in pattern):
        raise ConfigError(f"config.json: hybrid_override_pattern must use only M, *, - and E, got {pattern!r}",
                          "hybrid_override_pattern")  # fmt: skip
    return [NEMOTRON_H_PATTERN[ch] for ch in pattern]


def _aliased(v: _View, key: str, alias: str) -> int:
    """``NemotronHConfig.__post_init__``: a legacy ``mamba_*`` key, when given, wins over the field."""
    return v.req_int(alias) if alias in v.cfg else v.req_int(key)


def _mamba2_state(tp: int, dims: tuple[int, int, int, int, int, int], dtypes: list[str],
                  keys: tuple[str, str]) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:  # fmt: skip
    """A ``MambaMixer2``'s per-rank state shapes (``mamba2_state_shape`` of ``dims``: intermediate
    size, groups, heads, head dim, state size, conv kernel) after its TP assertions (``keys``: the
    config's heads and groups keys, for the error), and ``dtypes``."""
    inter, groups, heads, head, state, conv = dims
    if heads % tp:  # MambaMixer2's assertions
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Tensor parallel world size must divide num heads "
                          f"({heads} over tp={tp})", keys[0])  # fmt: skip
    if groups % tp and groups != 1:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: If tensor parallel world size does not divide "
                          f"num_groups, then num_groups must equal 1 ({groups} over tp={tp})", keys[1])  # fmt: skip
    try:
        shapes = tuple(tuple(x) for x in _core._vllm_state_shapes("mamba2", [tp, inter, groups, heads, head, state,
                                                                             conv, 0]))  # fmt: skip
    except ValueError as e:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", keys[0]) from None
    return shapes, tuple(dtypes)


def _mamba2_hybrid(kinds: list[str], engine: EngineConfig, names: tuple[str, str], attention: dict[str, Any],
                   state: tuple[tuple[tuple[int, ...], ...], tuple[str, ...]], model_dtype: str) -> list[LayerSpec]:
    """The registered layers of a Mamba-2 hybrid, per PP stage: ``full_attention`` layers at
    ``names[0] % i`` (``attention``: the spec's fields), ``linear_attention`` ones (Mamba-2 mixers)
    at ``names[1] % i``, ``hybrid`` ones (Falcon-H1's parallel layers) both, the mixer at
    ``names[1] % (n + i)``; other kinds (MLP, MoE) hold nothing."""
    out: list[LayerSpec] = []
    n = len(kinds)
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if kinds[i] in ("full_attention", "hybrid"):
                out.append(LayerSpec(names[0] % i, model_dtype=model_dtype, pp_stage=stage, **attention))
            if kinds[i] in ("linear_attention", "hybrid"):
                index = n + i if kinds[i] == "hybrid" else i
                out.append(LayerSpec(names[1] % index, "mamba", 0, 0, model_dtype=model_dtype, pp_stage=stage,
                                     state_shapes=state[0], state_dtypes=state[1], mamba_type="mamba2",
                                     prefill_checkpoint="mamba2"))  # fmt: skip
    return out


def _attention_fields(kv: int, head_dim: int, window: int | None, kv_cache_dtype: str) -> dict[str, Any]:
    return {"kind": "full" if window is None else "sliding", "num_kv_heads": kv, "head_size": head_dim,
            "head_size_v": head_dim, "sliding_window": window, "kv_cache_dtype": kv_cache_dtype}  # fmt: skip


def _nemotron_h(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
                cache_dtypes: tuple[str, str], disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """``NemotronHModel``'s layers: a ``linear_attention`` (``M``) layer is a ``MambaMixer2`` at
    ``<prefix>.<i>.mixer``, a ``full_attention`` (``*``) layer an attention at
    ``<prefix>.<i>.mixer.attn`` (sliding when the config has a ``sliding_window``, unless
    ``--disable-sliding-window``), MLP and MoE layers hold nothing."""
    if engine.use_replayssm:
        raise ConfigError("use_replayssm: kvbudget does not read Nemotron-H's ReplaySSM ring shapes yet")
    kinds, tp = _nemotron_h_kinds(v), engine.tp
    attention: dict[str, Any] = {}
    if "full_attention" in kinds:
        kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or v.req_int("num_attention_heads"))
        head_dim = v.req_int("head_dim")  # transformers' class requires an int (vLLM's fallback never runs)
        window = None if disable_sliding_window else v.opt_int("sliding_window")
        attention = _attention_fields(kv, head_dim, window, kv_cache_dtype)
    state: Any = ((), ())
    if "linear_attention" in kinds:
        heads, head = v.req_int("mamba_num_heads"), v.req_int("mamba_head_dim")
        dims = (heads * head, _aliased(v, "n_groups", "mamba_n_groups"), heads, head, v.req_int("ssm_state_size"),
                _aliased(v, "conv_kernel", "mamba_d_conv"))  # fmt: skip
        # NemotronHForCausalLMConfig: an `auto` SSM dtype takes the config's (the class default float32).
        dtypes = _state_dtypes(model_dtype, *cache_dtypes, v.raw("mamba_ssm_cache_dtype"))
        state = _mamba2_state(tp, dims, dtypes, ("mamba_num_heads", "n_groups"))
    return _mamba2_hybrid(kinds, engine, (f"{prefix}.%d.mixer.attn", f"{prefix}.%d.mixer"), attention, state,
                          model_dtype)  # fmt: skip


# -- Granite-4.0-H (Mamba-2) ---------------------------------------------------------------------
def _granite_4_h(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
                 cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """``GraniteMoeHybridModel``'s layers: ``layer_types`` as transformers'
    ``GraniteMoeHybridConfig`` leaves them (legacy ``mamba`` / ``attention`` remapped; every layer
    Mamba without them); a ``linear_attention`` layer is a ``MambaMixer2`` at ``<prefix>.<i>.mixer``
    (intermediate ``mamba_expand · hidden_size``, ``mamba_d_head`` ``auto``: that over the heads),
    a ``full_attention`` layer an attention at ``<prefix>.<i>.self_attn.attn`` (head size
    ``hidden_size / num_attention_heads``); any other kind is vLLM's ``KeyError``. The SSM dtype
    is the conv dtype unless ``--mamba-ssm-cache-dtype`` says otherwise (no config hook)."""
    if engine.use_replayssm:
        raise ConfigError("use_replayssm: vLLM 0.33.0's Granite-4.0-H has no ReplaySSM state")
    n, tp = v.req_int("num_hidden_layers"), engine.tp
    given = v.cfg.get("layer_types")
    if given is None:
        kinds = ["linear_attention"] * n
    elif not isinstance(given, list) or len(given) < n or not all(isinstance(t, str) for t in given):
        raise ConfigError(f"config.json: layer_types must name a kind for each of the {n} layers", "layer_types")
    else:
        kinds = [LEGACY_KINDS.get(str(t), str(t)) for t in given[:n]]
    bad = sorted(set(kinds) - {"linear_attention", "full_attention"})
    if bad:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: KeyError {bad[0]!r} (Granite-4.0-H's layer kinds "
                          "are linear_attention and full_attention)", "layer_types")  # fmt: skip
    hidden = v.req_int("hidden_size")
    attention: dict[str, Any] = {}
    if "full_attention" in kinds:
        heads = v.req_int("num_attention_heads")
        kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or heads)
        attention = _attention_fields(kv, hidden // heads, None, kv_cache_dtype)
    state: Any = ((), ())
    if "linear_attention" in kinds:
        inter, heads = v.req_int("mamba_expand") * hidden, v.req_int("mamba_n_heads")
        head = inter // heads if v.cfg.get("mamba_d_head", "auto") == "auto" else v.req_int("mamba_d_head")
        dims = (inter, v.req_int("mamba_n_groups"), heads, head, v.req_int("mamba_d_state"), v.req_int("mamba_d_conv"))
        state = _mamba2_state(tp, dims, _state_dtypes(model_dtype, *cache_dtypes), ("mamba_n_heads", "mamba_n_groups"))
    return _mamba2_hybrid(kinds, engine, (f"{prefix}.%d.self_attn.attn", f"{prefix}.%d.mixer"), attention, state,
                          model_dtype)  # fmt: skip


# -- Falcon-H1 (attention and Mamba-2 in every layer) --------------------------------------------
def _falcon_h1(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
               cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """``FalconH1Model``'s layers: each of the ``n`` layers (``FalconH1ParallelHybrid``) registers
    an attention at ``<prefix>.<i>.attn`` (``head_dim`` if the config has one, else the hidden
    size over the heads; never a window, even with a ``sliding_window`` key) and then a ``MambaMixer2`` at
    ``model.<n + i>.mixer`` (vLLM gives the SSM branch its own index); the intermediate size is
    ``mamba_d_ssm``, else ``mamba_expand · hidden_size``, and ``mamba_d_head`` ``auto`` is that
    over the heads. No config hook: an ``auto`` SSM dtype is the conv dtype."""
    if engine.use_replayssm:
        raise ConfigError("use_replayssm: vLLM 0.33.0's Falcon-H1 has no ReplaySSM state")
    n, tp, hidden = v.req_int("num_hidden_layers"), engine.tp, v.req_int("hidden_size")
    heads = v.req_int("num_attention_heads")
    kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or heads)
    # No window: its `layer_types` (`hybrid`) are not all sliding, so EngineArgs sets no
    # CacheConfig.sliding_window, and its Attention takes no per-layer window.
    attention = _attention_fields(kv, v.opt_int("head_dim") or hidden // heads, None, kv_cache_dtype)
    inter, mheads = v.opt_int("mamba_d_ssm") or v.req_int("mamba_expand") * hidden, v.req_int("mamba_n_heads")
    head = inter // mheads if v.cfg.get("mamba_d_head", "auto") == "auto" else v.req_int("mamba_d_head")
    dims = (inter, v.req_int("mamba_n_groups"), mheads, head, v.req_int("mamba_d_state"), v.req_int("mamba_d_conv"))
    state = _mamba2_state(tp, dims, _state_dtypes(model_dtype, *cache_dtypes), ("mamba_n_heads", "mamba_n_groups"))
    root = prefix.split(".")[0]
    return _mamba2_hybrid(["hybrid"] * n, engine, (f"{prefix}.%d.attn", f"{root}.%d.mixer"), attention, state,
                          model_dtype)  # fmt: skip
