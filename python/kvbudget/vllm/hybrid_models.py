"""vLLM 0.33.0's reading of the Mamba and short-convolution hybrids (Nemotron-H, Granite-4.0-H,
Falcon-H1, Jamba, LFM2, LFM2-MoE): what :mod:`kvbudget.vllm.state_models` documents, one reader per model class;
:func:`hybrid_layers` picks it by architecture."""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.models.layer_kinds import LEGACY_KINDS, NEMOTRON_H_PATTERN
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import (_attention_heads, _attention_over_hidden, _attention_template, _hybrid_layers,
                                        _listed_kinds, _mtp_tokens, _state_dtypes, _state_template)  # fmt: skip

__all__ = ["HYBRID_ARCHITECTURES", "hybrid_layers", "nemotron_h_kinds"]

#: Architecture -> the layers' prefix.
HYBRID_ARCHITECTURES: Final = {
    "NemotronHForCausalLM": "model.layers",
    "GraniteMoeHybridForCausalLM": "model.layers",
    "FalconH1ForCausalLM": "model.layers",
    "Lfm2ForCausalLM": "model.layers",
    "Lfm2MoeForCausalLM": "model.layers",
    "JambaForCausalLM": "model.layers",
}


def hybrid_layers(arch: str, v: _View, engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                  cache_dtypes: tuple[str, str], disable_sliding_window: bool,
                  draft_kv_cache_dtype: str, num_spec: int = 0) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM registers for ``arch`` (one of :data:`HYBRID_ARCHITECTURES`), and Nemotron-H's
    MTP drafter's with ``speculative_method="mtp"`` (an EAGLE drafter's layers are the caller's);
    ``cache_dtypes``: ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype``; ``num_spec``: an
    EAGLE drafter's speculative tokens, the conv rows each Mamba-2 state keeps for them."""
    prefix = HYBRID_ARCHITECTURES[arch]
    if arch == "NemotronHForCausalLM":
        return _nemotron_h(v, engine, prefix, (kv_cache_dtype, draft_kv_cache_dtype), model_dtype, cache_dtypes,
                           disable_sliding_window, num_spec)  # fmt: skip
    if arch == "FalconH1ForCausalLM":
        return _falcon_h1(v, engine, prefix, kv_cache_dtype, model_dtype, cache_dtypes, num_spec)
    if arch == "JambaForCausalLM":  # Mamba-1 keeps no speculative rows
        return _jamba(v, engine, prefix, kv_cache_dtype, model_dtype, cache_dtypes)
    if arch in ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM"):
        return _lfm2(v, engine, prefix, kv_cache_dtype, model_dtype, cache_dtypes[0], num_spec,
                     moe=arch == "Lfm2MoeForCausalLM")  # fmt: skip
    return _granite_4_h(v, engine, prefix, kv_cache_dtype, model_dtype, cache_dtypes, num_spec)


# -- Nemotron-H (Mamba-2) ------------------------------------------------------------------------
_NEMOTRON_DEFAULT_KINDS: Final = ("linear_attention", "moe", "full_attention", "mlp")  # NemotronHConfig's
_NEMOTRON_MTP_DEFAULT_KINDS: Final = ("full_attention", "moe")  # its mtp_layers_block_type


def nemotron_h_kinds(v: _View) -> list[str]:
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
                  keys: tuple[str, str], model_dtype: str, num_spec: int = 0,
                  replay: tuple[int, bool] | None = None) -> LayerSpec:  # fmt: skip
    """A ``MambaMixer2``'s per-rank state shapes (``mamba2_state_shape`` of ``dims``: intermediate
    size, groups, heads, head dim, state size, conv kernel; ``num_spec`` speculative conv rows)
    after its TP assertions (``keys``: the config's heads and groups keys, for the error), and
    ``dtypes``."""
    inter, groups, heads, head, state, conv = dims
    if heads % tp:  # MambaMixer2's assertions
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Tensor parallel world size must divide num heads "
                          f"({heads} over tp={tp})", keys[0])  # fmt: skip
    if groups % tp and groups != 1:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: If tensor parallel world size does not divide "
                          f"num_groups, then num_groups must equal 1 ({groups} over tp={tp})", keys[1])  # fmt: skip
    args = [tp, inter, groups, heads, head, state, conv, num_spec]
    if replay is not None:  # ReplaySSM's rings (x, dt, B): activation, float32, activation
        args += [replay[0], int(replay[1])]
        dtypes = [*dtypes, model_dtype, "float32", model_dtype]
    try:
        shapes = _core._vllm_state_shapes("mamba2" if replay is None else "mamba2_replayssm", args)
    except ValueError as e:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", keys[0]) from None
    return _state_template(shapes, dtypes, "mamba2", model_dtype, prefill_checkpoint="mamba2")


def _nemotron_h_mtp_kinds(v: _View) -> list[str]:
    """The MTP predictor's layer kinds, as ``NemotronHMultiTokenPredictor`` reads them back from
    ``mtp_hybrid_override_pattern``: ``NemotronHConfig``'s ``mtp_layers_block_type`` (legacy names
    remapped), else the saved pattern's kinds, else the class default (attention, then MoE)."""
    given = v.cfg.get("mtp_layers_block_type")
    if given is not None and (not isinstance(given, list) or not all(isinstance(t, str) for t in given)):
        raise ConfigError("config.json: mtp_layers_block_type must be a list of layer kinds", "mtp_layers_block_type")
    kinds = list(_NEMOTRON_MTP_DEFAULT_KINDS) if given is None else [LEGACY_KINDS.get(t) or t for t in given]
    pattern = v.cfg.get("mtp_hybrid_override_pattern")
    if pattern is not None and kinds == list(_NEMOTRON_MTP_DEFAULT_KINDS):
        if not isinstance(pattern, str) or any(ch not in NEMOTRON_H_PATTERN for ch in pattern):
            raise ConfigError(f"config.json: mtp_hybrid_override_pattern must use only M, *, - and E, got "
                              f"{pattern!r}", "mtp_hybrid_override_pattern")  # fmt: skip
        kinds = [NEMOTRON_H_PATTERN[ch] for ch in pattern]
    bad = sorted(set(kinds) - {"full_attention", "moe"})
    if bad or not kinds:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: the MTP predictor builds attention ('*') and MoE "
                          f"('E') layers, not {bad or 'none'}", "mtp_layers_block_type")  # fmt: skip
    return kinds


def _nemotron_h(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtypes: tuple[str, str], model_dtype: str,
                cache_dtypes: tuple[str, str], disable_sliding_window: bool, num_spec: int) -> list[LayerSpec]:  # fmt: skip
    """``NemotronHModel``'s layers: a ``linear_attention`` (``M``) layer is a ``MambaMixer2`` at
    ``<prefix>.<i>.mixer``, a ``full_attention`` (``*``) layer an attention at
    ``<prefix>.<i>.mixer.attn`` (sliding when the config has a ``sliding_window``, unless
    ``--disable-sliding-window``), MLP and MoE layers hold nothing. With MTP
    (``NemotronHMultiTokenPredictor``, one step: ``num_nextn_predict_layers`` must be 1; without
    MTP layers vLLM has no MTP drafter, :mod:`kvbudget.vllm.mtp_method`), its
    attention layers at ``mtp.layers.<j>.mixer.attn`` on the last stage (``kv_cache_dtypes``: the
    target's and the drafter's), and ``num_speculative_tokens`` more conv rows in each state."""
    kinds, tp = nemotron_h_kinds(v), engine.tp
    mtp: list[str] = []
    if engine.speculative_method == "mtp":
        steps = v.opt_int("num_nextn_predict_layers", 0) or 0
        if steps != 1:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: num_nextn_predict_layers is {steps}; the MTP "
                              "drafter needs exactly one (NemotronH-MTP's assertion)",
                              "num_nextn_predict_layers")  # fmt: skip
        mtp = _nemotron_h_mtp_kinds(v)
        num_spec = _mtp_tokens(engine, steps, "num_nextn_predict_layers")
    attention: LayerSpec | None = None
    if "full_attention" in kinds or "full_attention" in mtp:
        kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or v.req_int("num_attention_heads"))
        head_dim = v.req_int("head_dim")  # transformers' class requires an int (vLLM's fallback never runs)
        window = None if disable_sliding_window else v.opt_int("sliding_window")
        attention = _attention_template(kv, head_dim, window, kv_cache_dtypes[0], model_dtype)
    state: LayerSpec | None = None
    if "linear_attention" in kinds:
        heads, head = v.req_int("mamba_num_heads"), v.req_int("mamba_head_dim")
        dims = (heads * head, _aliased(v, "n_groups", "mamba_n_groups"), heads, head, v.req_int("ssm_state_size"),
                _aliased(v, "conv_kernel", "mamba_d_conv"))  # fmt: skip
        # NemotronHForCausalLMConfig: an `auto` SSM dtype takes the config's (the class default float32).
        dtypes = _state_dtypes(model_dtype, *cache_dtypes, v.raw("mamba_ssm_cache_dtype"))
        replay = (engine.replayssm_buffer_len, engine.mamba_backend == "flashinfer") if engine.use_replayssm else None
        state = _mamba2_state(tp, dims, dtypes, ("mamba_num_heads", "n_groups"), model_dtype, num_spec, replay)
    out = _hybrid_layers(kinds, engine, (f"{prefix}.%d.mixer.attn", f"{prefix}.%d.mixer"), attention, state)
    for j, kind in enumerate(mtp):
        if kind == "full_attention":
            assert attention is not None
            out.append(replace(attention, name=f"mtp.layers.{j}.mixer.attn", kv_cache_dtype=kv_cache_dtypes[1],
                               is_draft=True, pp_stage=engine.pp - 1))  # fmt: skip
    return out


# -- Granite-4.0-H (Mamba-2) ---------------------------------------------------------------------
def _granite_4_h(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
                 cache_dtypes: tuple[str, str], num_spec: int) -> list[LayerSpec]:  # fmt: skip
    """``GraniteMoeHybridModel``'s layers: ``layer_types`` as transformers'
    ``GraniteMoeHybridConfig`` leaves them (legacy ``mamba`` / ``attention`` remapped; every layer
    Mamba without them); a ``linear_attention`` layer is a ``MambaMixer2`` at ``<prefix>.<i>.mixer``
    (intermediate ``mamba_expand · hidden_size``, ``mamba_d_head`` ``auto``: that over the heads),
    a ``full_attention`` layer an attention at ``<prefix>.<i>.self_attn.attn`` (head size
    ``hidden_size / num_attention_heads``); any other kind is vLLM's ``KeyError``. The SSM dtype
    is the conv dtype unless ``--mamba-ssm-cache-dtype`` says otherwise (no config hook)."""
    n, tp = v.req_int("num_hidden_layers"), engine.tp
    kinds = _listed_kinds(v, n) or ["linear_attention"] * n
    bad = sorted(set(kinds) - {"linear_attention", "full_attention"})
    if bad:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: KeyError {bad[0]!r} (Granite-4.0-H's layer kinds "
                          "are linear_attention and full_attention)", "layer_types")  # fmt: skip
    hidden = v.req_int("hidden_size")
    attention = _attention_over_hidden(v, tp, kv_cache_dtype, hidden, model_dtype) if "full_attention" in kinds else None
    state: LayerSpec | None = None
    if "linear_attention" in kinds:
        inter, heads = v.req_int("mamba_expand") * hidden, v.req_int("mamba_n_heads")
        head = inter // heads if v.cfg.get("mamba_d_head", "auto") == "auto" else v.req_int("mamba_d_head")
        dims = (inter, v.req_int("mamba_n_groups"), heads, head, v.req_int("mamba_d_state"), v.req_int("mamba_d_conv"))
        state = _mamba2_state(tp, dims, _state_dtypes(model_dtype, *cache_dtypes), ("mamba_n_heads", "mamba_n_groups"),
                              model_dtype, num_spec)  # fmt: skip
    return _hybrid_layers(kinds, engine, (f"{prefix}.%d.self_attn.attn", f"{prefix}.%d.mixer"), attention,
                          state)  # fmt: skip


# -- Falcon-H1 (attention and Mamba-2 in every layer) --------------------------------------------
def _falcon_h1(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
               cache_dtypes: tuple[str, str], num_spec: int) -> list[LayerSpec]:  # fmt: skip
    """``FalconH1Model``'s layers: each of the ``n`` layers (``FalconH1ParallelHybrid``) registers
    an attention at ``<prefix>.<i>.attn`` (``head_dim`` if the config has one, else the hidden
    size over the heads; never a window, even with a ``sliding_window`` key) and then a ``MambaMixer2`` at
    ``model.<n + i>.mixer`` (vLLM gives the SSM branch its own index); the intermediate size is
    ``mamba_d_ssm``, else ``mamba_expand · hidden_size``, and ``mamba_d_head`` ``auto`` is that
    over the heads. No config hook: an ``auto`` SSM dtype is the conv dtype."""
    n, tp, hidden = v.req_int("num_hidden_layers"), engine.tp, v.req_int("hidden_size")
    heads = v.req_int("num_attention_heads")
    kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or heads)
    # No window: its `layer_types` (`hybrid`) are not all sliding, so EngineArgs sets no
    # CacheConfig.sliding_window, and its Attention takes no per-layer window.
    attention = _attention_template(kv, v.opt_int("head_dim") or hidden // heads, None, kv_cache_dtype, model_dtype)
    inter, mheads = v.opt_int("mamba_d_ssm") or v.req_int("mamba_expand") * hidden, v.req_int("mamba_n_heads")
    head = inter // mheads if v.cfg.get("mamba_d_head", "auto") == "auto" else v.req_int("mamba_d_head")
    dims = (inter, v.req_int("mamba_n_groups"), mheads, head, v.req_int("mamba_d_state"), v.req_int("mamba_d_conv"))
    state = _mamba2_state(tp, dims, _state_dtypes(model_dtype, *cache_dtypes), ("mamba_n_heads", "mamba_n_groups"),
                          model_dtype, num_spec)  # fmt: skip
    root = prefix.split(".")[0]
    return _hybrid_layers(["hybrid"] * n, engine, (f"{prefix}.%d.attn", f"{root}.%d.mixer"), attention,
                          state)  # fmt: skip


# -- LFM2 (short convolutions) -------------------------------------------------------------------
def _lfm2(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
          mamba_cache_dtype: str, num_spec: int, moe: bool = False) -> list[LayerSpec]:  # fmt: skip
    """``Lfm2Model``'s layers: ``layer_types`` as transformers' ``Lfm2Config`` leaves them (else
    full attention at ``full_attn_idxs``, default every layer, and ``conv`` elsewhere); a
    ``full_attention`` layer is an attention at ``<prefix>.<i>.self_attn.attn`` (head size
    ``hidden_size / num_attention_heads``), any other a ``ShortConv`` at ``<prefix>.<i>.short_conv``
    with one conv state ``(conv_L_cache - 1, conv_dim / tp)`` in the conv dtype. vLLM reads
    ``block_dim`` and ``conv_dim``, which transformers' class does not define: a config without
    them fails to load (``AttributeError``). With a drafter each conv state keeps ``num_spec`` more
    rows (``ShortConv.get_state_shape``) while the class's ``get_mamba_state_shape_from_config``,
    which sizes the attention block, keeps none: that shape is the layer's ``config_state_shapes``
    (vLLM then pads the state page to an attention page sized without the rows, and fails to start
    where that page is smaller than the state). LFM2-MoE (``moe``, ``Lfm2MoeModel``): no
    ``full_attn_idxs`` rule (without ``layer_types`` vLLM fails), the conv over ``hidden_size``
    channels, and its MoE blocks (layers from ``num_dense_layers`` on) refuse a TP above
    ``num_experts``."""
    n, tp = v.req_int("num_hidden_layers"), engine.tp
    given = _listed_kinds(v, n)
    if given is None and moe:
        raise ConfigError("config.json: vLLM 0.33.0 refuses it: TypeError: LFM2-MoE without layer_types "
                          "('NoneType' object is not subscriptable)", "layer_types")  # fmt: skip
    if given is None:
        full = v.cfg.get("full_attn_idxs")
        full = set(range(n)) if full is None else set(full) if isinstance(full, list) else None
        if full is None:
            raise ConfigError("config.json: full_attn_idxs must be a list of layer indices", "full_attn_idxs")
        given = ["full_attention" if i in full else "conv" for i in range(n)]
    kinds = ["full_attention" if t == "full_attention" else "linear_attention" for t in given]
    if moe and n > v.req_int("num_dense_layers", minimum=0) and tp > v.req_int("num_experts"):
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Tensor parallel size {tp} is greater than the "
                          f"number of experts {v.req_int('num_experts')}.", "num_experts")  # fmt: skip
    for key in () if moe else ("block_dim", "conv_dim"):  # read by every LFM2 layer class
        if n and key not in v.cfg:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AttributeError: 'Lfm2Config' object has no "
                              f"attribute '{key}'", key)  # fmt: skip
    attention: LayerSpec | None = None
    if "full_attention" in kinds:
        heads = v.req_int("num_attention_heads")
        kv, _ = _attention_heads(v, tp)
        attention = _attention_template(kv, v.req_int("hidden_size") // heads, None, kv_cache_dtype, model_dtype)
    state: LayerSpec | None = None
    if "linear_attention" in kinds:
        try:
            dim, kernel = v.req_int("hidden_size" if moe else "conv_dim"), v.req_int("conv_L_cache")
            shapes, config = (_core._vllm_state_shapes("short_conv", [tp, dim, kernel, s]) for s in (num_spec, 0))
        except ValueError as e:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", "conv_dim") from None
        conv = _state_dtypes(model_dtype, mamba_cache_dtype, "auto")[0]
        state = _state_template(shapes, (conv,), "short_conv", model_dtype)
        if num_spec:
            state = replace(state, config_state_shapes=tuple(tuple(x) for x in config))
    return _hybrid_layers(kinds, engine, (f"{prefix}.%d.self_attn.attn", f"{prefix}.%d.short_conv"), attention,
                          state)  # fmt: skip


# -- Jamba (Mamba-1) -----------------------------------------------------------------------------
def _jamba(v: _View, engine: EngineConfig, prefix: str, kv_cache_dtype: str, model_dtype: str,
           cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """``JambaModel``'s layers: attention where ``i % attn_layer_period == attn_layer_offset``
    (transformers' ``JambaConfig.layers_block_type``) at ``<prefix>.<i>.attn`` (head size
    ``hidden_size / num_attention_heads``), a Mamba-1 ``MambaMixer`` elsewhere at
    ``<prefix>.<i>.mixer`` with ``mamba1_state_shape`` over ``mamba_expand · hidden_size``."""
    n, tp, hidden = v.req_int("num_hidden_layers"), engine.tp, v.req_int("hidden_size")
    period, offset = v.req_int("attn_layer_period"), v.req_int("attn_layer_offset", minimum=0)
    if offset >= period:  # JambaConfig.validate_architecture
        raise ConfigError(f"config.json: transformers' JambaConfig refuses it: attn_layer_offset ({offset}) must be "
                          f"below attn_layer_period ({period})", "attn_layer_offset")  # fmt: skip
    kinds = ["full_attention" if i % period == offset else "linear_attention" for i in range(n)]
    attention = _attention_over_hidden(v, tp, kv_cache_dtype, hidden, model_dtype) if "full_attention" in kinds else None
    state: LayerSpec | None = None
    if "linear_attention" in kinds:
        dims = [tp, v.req_int("mamba_expand") * hidden, v.req_int("mamba_d_state"), v.req_int("mamba_d_conv")]
        try:
            shapes = _core._vllm_state_shapes("mamba1", dims)
        except ValueError as e:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", "mamba_expand") from None
        state = _state_template(shapes, _state_dtypes(model_dtype, *cache_dtypes), "mamba1", model_dtype)
    return _hybrid_layers(kinds, engine, (f"{prefix}.%d.attn", f"{prefix}.%d.mixer"), attention,
                          state)  # fmt: skip
