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
  With ``--use-replayssm`` each state carries ReplaySSM's rings after it (``append_replayssm_ring``:
  ``x``, ``dt``, ``B`` over ``--replayssm-buffer-len`` steps, one verify window more with FlashInfer;
  activation, float32, activation dtypes), and vLLM's checks run (:func:`_replayssm_startup`); vLLM
  refuses the flag for every architecture here but Nemotron-H and Kimi-Linear (whose KDA states keep
  their shapes).
* **Granite-4.0-H** (``GraniteMoeHybridForCausalLM``): ``layer_types`` (legacy names remapped;
  every layer Mamba without them), Mamba-2 at ``<prefix>.<i>.mixer``, attention at
  ``<prefix>.<i>.self_attn.attn`` with ``hidden_size / num_attention_heads`` per head.
* **Falcon-H1** (``FalconH1ForCausalLM``): every layer holds an attention at ``<prefix>.<i>.attn``
  and a Mamba-2 mixer, registered at ``model.<n + i>.mixer``; never a window.
* **LFM2** (``Lfm2ForCausalLM``, and ``Lfm2MoeForCausalLM``): ``layer_types`` (else full attention at ``full_attn_idxs``);
  a short convolution at ``<prefix>.<i>.short_conv`` with one conv state
  ``(conv_L_cache - 1, conv_dim / tp)``; vLLM needs the config's ``conv_dim`` and ``block_dim``.
* **Jamba** (``JambaForCausalLM``): attention at ``<prefix>.<i>.attn`` every ``attn_layer_period``
  layers (at ``attn_layer_offset``), a Mamba-1 mixer at ``<prefix>.<i>.mixer`` elsewhere.
* **Kimi-Linear** (``KimiLinearForCausalLM``, vLLM's own ``KimiLinearConfig``): a KDA layer where
  ``linear_attn_config.kda_layers`` (1-based) names it, at ``<prefix>.<i>.self_attn``, with
  ``kda_state_shape``'s conv state ``(k - 1, 3·H·D / tp)`` and float32 recurrent state
  ``(H / tp, D, D)``; else Kimi's NoPE MLA there (one latent KV head of ``kv_lora_rank +
  qk_rope_head_dim``). Kimi-K3's full-rank-gate KDA is refused; so is a ``bfloat16`` SSM cache
  dtype (the class sizes the attention block with it, the layer keeps float32: not modelled), and
  ``float16`` as vLLM refuses it (``kda_state_dtype``'s ValueError); ``float32`` plans as ``auto``.
* The Mamba and short-conv readers are :mod:`kvbudget.vllm.hybrid_models`; what all share
  (heads per rank, state dtypes, the layer list) is :mod:`kvbudget.vllm.state_common`.
* **MTP** (``speculative_method="mtp"``, a gated-delta-net model's own predictor:
  ``Qwen3NextMTP`` / ``Qwen3_5MTP``): ``num_nextn_predict_layers`` (Qwen3-Next) or
  ``mtp_num_hidden_layers`` (Qwen3.5) full-attention layers, default 1, at
  ``mtp.layers.<j>.self_attn.attn`` with the target's heads, on the last PP stage; the state keeps
  ``num_speculative_tokens`` more conv rows. Nemotron-H's (``NemotronHMTP``, one step): the
  attention layers of its ``mtp_layers_block_type`` at ``mtp.layers.<j>.mixer.attn``.
* **EAGLE / EAGLE3 heads** (every family): the drafter's layers are
  :func:`kvbudget.vllm.layers_from_hf_config`'s, after the target's (:func:`state_target_layers`
  gives what they read of the target); every state layer keeps ``num_speculative_tokens`` more conv
  rows (Mamba-1's none: ``mamba1_state_shape`` takes no speculative tokens; LFM2's ``ShortConv``
  its own). MTP on the other Mamba hybrids, and on Kimi-Linear, is vLLM's own refusal
  (:mod:`kvbudget.vllm.mtp_method`: its MTP rewrite names no drafter for them).

``tests/test_vllm_state_models.py`` holds this to vLLM's own code on generated configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, Literal

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.models.layer_kinds import is_kda_layer
from kvbudget.vllm.hybrid_models import HYBRID_ARCHITECTURES, hybrid_layers
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import _attention_heads, _listed_kinds, _mtp_tokens, _state_dtypes, _state_template

__all__ = ["STATE_ARCHITECTURES", "state_layers_from_hf_config", "state_target_layers", "with_mtp_layers"]

#: Architecture -> the layers' prefix. The ``...ForConditionalGeneration`` wrappers build their
#: text model from ``text_config`` at ``language_model.model``.
STATE_ARCHITECTURES: Final[Mapping[str, str]] = {
    "Qwen3NextForCausalLM": "model.layers",
    "Qwen3_5ForCausalLM": "model.layers",
    "Qwen3_5MoeForCausalLM": "model.layers",
    "Qwen3_5ForConditionalGeneration": "language_model.model.layers",
    "Qwen3_5MoeForConditionalGeneration": "language_model.model.layers",
    "KimiLinearForCausalLM": "model.layers",
    **HYBRID_ARCHITECTURES,
}
_INTERVAL_DEFAULT: Final = 4  # transformers' Qwen3NextConfig / Qwen3_5TextConfig
#: The architectures whose vLLM 0.33.0 class is ``SupportsReplaySSM`` (``--use-replayssm``); vLLM
#: refuses the flag for every other one.
REPLAYSSM_ARCHITECTURES: Final = frozenset({"NemotronHForCausalLM", "KimiLinearForCausalLM"})


#: The targets whose EAGLE / EAGLE3 drafter kvbudget reads.
_EAGLE_TARGETS: Final = frozenset(STATE_ARCHITECTURES)


def _replayssm_startup(arch: str, engine: EngineConfig) -> None:
    """``VllmConfig.validate_mamba_cached_kernel`` for ``--use-replayssm``, in vLLM's order: the
    class must be ``SupportsReplaySSM``; FlashInfer's ring holds at most 16 steps; with speculation
    a KDA model takes RecoverSSM (prefix caching needs Model Runner V2, one PP stage, Triton) and a
    Mamba-2 one FlashInfer's spec ReplaySSM (no prefix caching, a ring of at least ``1 + k``);
    without, FlashInfer takes no prefix caching and Triton needs Model Runner V1. The Mamba cache
    mode is ``align`` with prefix caching (``MambaModelConfig``, run before the check). KV
    connectors (also refused there) are not modelled."""
    if arch not in REPLAYSSM_ARCHITECTURES:
        _refuse(f"--use-replayssm is not supported for architecture {arch!r}")
    s = (engine.num_speculative_tokens or 0) if engine.speculative_method is not None else 0
    align, flashinfer = engine.enable_prefix_caching, engine.mamba_backend == "flashinfer"
    window = engine.replayssm_buffer_len
    if flashinfer and window > 16:
        _refuse("FlashInfer ReplaySSM requires --replayssm-buffer-len <= 16")
    if s > 0 and arch == "KimiLinearForCausalLM":  # RecoverSSM
        if align and not engine.use_v2_model_runner:
            _refuse("RecoverSSM with prefix caching requires VLLM_USE_V2_MODEL_RUNNER=1")
        if engine.pp > 1:
            _refuse("RecoverSSM currently requires pipeline_parallel_size=1")
        if flashinfer:
            _refuse("RecoverSSM requires --mamba-backend triton")
    elif s > 0:
        if align:
            _refuse("FlashInfer ReplaySSM speculative decoding does not support prefix caching; use "
                    "--disable-prefix-caching")  # fmt: skip
        if window < 1 + s:
            _refuse(f"FlashInfer ReplaySSM speculative decoding requires --replayssm-buffer-len >= 1 + "
                    f"num_speculative_tokens ({1 + s}); got {window}")  # fmt: skip
        if not flashinfer:
            _refuse("Mamba2 ReplaySSM speculative decoding requires --mamba-backend flashinfer")
    elif flashinfer:
        if align:
            _refuse("FlashInfer ReplaySSM does not support prefix caching yet; use --disable-prefix-caching")
    elif engine.use_v2_model_runner:
        _refuse("Triton ReplaySSM requires Model Runner V1; use --mamba-backend flashinfer or Model Runner V1")


def _refuse(message: str) -> None:
    raise ConfigError(f"vLLM 0.33.0 refuses it: {message}", "use_replayssm")


def _eagle_tokens(engine: EngineConfig) -> int:
    """``num_speculative_tokens`` for an EAGLE drafter on a state model: the conv rows every state
    layer keeps for it (required: vLLM's ``SpeculativeConfig`` has no default for an EAGLE head)."""
    s = engine.num_speculative_tokens
    if s is None:
        raise ConfigError(f"speculative_method={engine.speculative_method!r} on a hybrid-state model needs "
                          "num_speculative_tokens (the state keeps a conv row per speculative token)",
                          "num_speculative_tokens")  # fmt: skip
    return s


def state_target_layers(cfg: Mapping[str, Any]) -> tuple[int, int | None]:
    """What an EAGLE drafter reads of a hybrid-state target (:data:`STATE_ARCHITECTURES`): vLLM's
    layer count (``hf_text_config.num_hidden_layers`` as transformers' class leaves it) and
    ``CacheConfig.sliding_window``, which ``EngineArgs`` sets only for a model whose ``layer_types``
    are absent or all sliding: every class here lists its own kinds (so None), but vLLM's
    ``KimiLinearConfig``, which keeps a config's ``layer_types`` and ``sliding_window`` keys as given."""
    arch = cfg["architectures"][0]
    v = _View(cfg, "config.json", engine="vllm")
    if arch == "NemotronHForCausalLM":
        from kvbudget.vllm.hybrid_models import nemotron_h_kinds

        n = len(nemotron_h_kinds(v))
    else:
        n = v.req_int("num_hidden_layers", minimum=0)
    window = None
    if arch == "KimiLinearForCausalLM":
        types = v.cfg.get("layer_types")
        if types is None or isinstance(types, list) and all(t == "sliding_attention" for t in types):
            window = v.opt_int("sliding_window")
    return n, window


def _layer_types(v: _View, n: int) -> list[str]:
    kinds = _listed_kinds(v, n)
    if kinds is None:
        interval = v.opt_int("full_attention_interval") or _INTERVAL_DEFAULT
        return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)]
    bad = sorted(set(kinds) - {"linear_attention", "full_attention"})
    if bad:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: Invalid layer_type {bad[0]}", "layer_types")
    return kinds

#: Architecture -> the text config's key that counts its MTP layers (``Qwen3NextMultiTokenPredictor``
#: / ``Qwen3_5MultiTokenPredictor``; one layer without it).
_MTP_LAYERS: Final[Mapping[str, str]] = {
    "Qwen3NextForCausalLM": "num_nextn_predict_layers", **dict.fromkeys(
        ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3_5ForConditionalGeneration",
         "Qwen3_5MoeForConditionalGeneration"), "mtp_num_hidden_layers")}  # fmt: skip


def with_mtp_layers(cfg: Mapping[str, Any], n: int) -> tuple[dict[str, Any], int | None]:
    """``cfg`` with ``n`` MTP layers under the key its predictor reads (Qwen3.5's
    ``mtp_num_hidden_layers`` in the text part; ``num_nextn_predict_layers`` elsewhere), and the
    drafter config's ``num_nextn_predict_layers`` (:attr:`EngineConfig.num_nextn_predict_layers`;
    None for Qwen3.5, whose drafter config does not carry it)."""
    archs = cfg.get("architectures")
    key = _MTP_LAYERS.get(archs[0]) if isinstance(archs, list) and archs else None
    if key != "mtp_num_hidden_layers":
        return {**cfg, "num_nextn_predict_layers": n}, n
    text = cfg.get("text_config")
    if isinstance(text, Mapping):
        return {**cfg, "text_config": {**text, key: n}}, None
    return {**cfg, key: n}, None


def _mtp(cfg: Mapping[str, Any], v: _View, arch: str, engine: EngineConfig) -> tuple[int, int]:
    """A gated-delta-net model's MTP drafter: (its layers, the speculative tokens ``s`` the state
    keeps rows for). ``SpeculativeConfig`` takes ``n_predict`` from the same key (Qwen3.5's from the
    outer config first) and refuses ``s`` above it unless divisible by it."""
    key = _MTP_LAYERS[arch]  # the caller reads MTP drafters of these only
    outer = cfg.get(key) if arch.endswith("ForConditionalGeneration") else None
    n_predict = v.opt_int(key) if outer is None else _View({key: outer}, "config.json", engine="vllm").opt_int(key)
    layers = v.opt_int(key)
    return (1 if layers is None else layers), _mtp_tokens(engine, n_predict, key)


def _kimi_linear(v: _View, engine: EngineConfig, kv_cache_dtype: str, model_dtype: str,
                 cache_dtypes: tuple[str, str], num_spec: int) -> list[LayerSpec]:  # fmt: skip
    """``KimiLinearModel`` (vLLM's own ``KimiLinearConfig``): a KDA layer (``linear_attn_config``'s
    1-based ``kda_layers``) at ``model.layers.<i>.self_attn`` with ``kda_state_shape``'s conv and
    recurrent states (the recurrent one float32; ``num_spec`` more conv rows for a drafter's tokens),
    else Kimi's MLA there: one latent KV head of ``kv_lora_rank + qk_rope_head_dim`` (NoPE only);
    ``tp`` divides the attention and KDA heads."""
    tp = engine.tp
    if v.cfg.get("moe_router_activation_func", "sigmoid") not in ("softmax", "sigmoid"):
        raise ConfigError("config.json: vLLM 0.33.0's KimiLinearConfig asserts moe_router_activation_func is "
                          "softmax or sigmoid", "moe_router_activation_func")  # fmt: skip
    lac = v.cfg.get("linear_attn_config")
    if lac is not None and (not isinstance(lac, Mapping) or lac.get("kda_layers") is None
                            or lac.get("full_attn_layers") is None):  # fmt: skip
        raise ConfigError("config.json: vLLM 0.33.0's KimiLinearConfig asserts linear_attn_config's kda_layers "
                          "and full_attn_layers", "linear_attn_config")  # fmt: skip
    n, heads = v.req_int("num_hidden_layers"), v.req_int("num_attention_heads")
    if heads % tp:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: num_attention_heads must be divisible by "
                          f"world_size ({heads} over tp={tp})", "num_attention_heads")  # fmt: skip
    kda = lac.get("kda_layers") if lac is not None else []
    if not isinstance(kda, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in kda):
        raise ConfigError("config.json: linear_attn_config.kda_layers must be a list of layer numbers",
                          "linear_attn_config")  # fmt: skip
    is_kda = [is_kda_layer(kda, i) for i in range(n)]
    state = mla = None
    if any(is_kda):
        assert isinstance(lac, Mapping)
        if lac.get("use_full_rank_gate", False):
            raise ConfigError("config.json: linear_attn_config.use_full_rank_gate: Kimi-K3's own KDA layer, which "
                              "kvbudget does not read", "linear_attn_config")  # fmt: skip
        # The layer's get_state_dtype passes no SSM dtype (float32 stays); the class's state classmethod,
        # which sizes the attention block, passes the flag: float32 agrees, float16 fails there.
        if cache_dtypes[1] == "float16":
            raise ConfigError("mamba_ssm_cache_dtype='float16': vLLM 0.33.0 refuses it: ValueError: KDA recurrent "
                              "state supports only auto, float32, and bfloat16; got float16",
                              "mamba_ssm_cache_dtype")  # fmt: skip
        if cache_dtypes[1] not in ("auto", "float32"):
            raise ConfigError(f"mamba_ssm_cache_dtype={cache_dtypes[1]!r}: vLLM 0.33.0's KDA layer keeps a float32 "
                              "recurrent state while its block-size step reads the flag; kvbudget plans only 'auto' "
                              "and 'float32'", "mamba_ssm_cache_dtype")  # fmt: skip
        keys = ("num_heads", "head_dim", "short_conv_kernel_size")
        missing = [k for k in keys if not isinstance(lac.get(k), int) or isinstance(lac.get(k), bool)]
        if missing:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: KeyError {missing[0]!r} in linear_attn_config",
                              "linear_attn_config")  # fmt: skip
        kheads, kdim, kconv = (int(lac[k]) for k in keys)
        if kheads % tp:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {kheads} KDA heads do not split over tp={tp}",
                              "linear_attn_config")  # fmt: skip
        try:
            shapes = _core._vllm_state_shapes("kda", [tp, kheads, kdim, kconv, num_spec])
        except ValueError as e:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", "linear_attn_config") from None
        conv = _state_dtypes(model_dtype, cache_dtypes[0], "auto")[0]
        state = _state_template(shapes, (conv, "float32"), "gdn_attn", model_dtype)
    if not all(is_kda):
        dims = [v.raw(k) for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")]
        if any(d is None for d in dims):
            raise ConfigError("config.json: vLLM 0.33.0 refuses it: Kimi's MLA layers assert qk_nope_head_dim, "
                              "qk_rope_head_dim, v_head_dim and kv_lora_rank", "kv_lora_rank")  # fmt: skip
        if not v.cfg.get("mla_use_nope"):
            raise ConfigError("config.json: vLLM 0.33.0 refuses it: Kimi-K3 MLA (MultiHeadLatentAttention) is "
                              "NoPE-only (mla_use_nope)", "mla_use_nope")  # fmt: skip
        mla = LayerSpec("", "mla", 1, v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", 0), head_size_v=0,
                        kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype)  # MLAAttentionSpec's  # fmt: skip
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            template = state if is_kda[i] else mla
            assert template is not None
            out.append(replace(template, name=f"model.layers.{i}.self_attn", pp_stage=stage))
    return out


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
    draft_kv_cache_dtype: str | None = None,
) -> list[LayerSpec]:
    """The layers vLLM 0.33.0 registers for a hybrid-state model (see the module doc), for
    ``engine``'s TP and PP; ``cfg`` is the loaded ``config.json``.

    Raises:
        ConfigError: a drafter kvbudget does not read (any but a gated delta net's MTP), layer
            kinds, heads or speculative tokens vLLM refuses, or a key missing or invalid.
    """
    arch = cfg["architectures"][0]
    prefix = STATE_ARCHITECTURES[arch]
    v = _View(cfg, "config.json", engine="vllm")  # the text part, transformers' class defaults
    text = v.cfg
    tp, method = engine.tp, engine.speculative_method
    if engine.use_replayssm:
        _replayssm_startup(arch, engine)
    mtp = method == "mtp" and (arch in _MTP_LAYERS or arch == "NemotronHForCausalLM")
    if method is not None and not mtp and not (method in ("eagle", "eagle3") and arch in _EAGLE_TARGETS):
        own = " (it reads the model's own MTP layers, speculative_method='mtp')" if arch in _MTP_LAYERS else ""
        raise ConfigError(f"speculative_method={method!r}: kvbudget does not read {arch}'s drafter layers yet"
                          f"{own}; plan the target alone or give the layers")  # fmt: skip
    num_spec = _eagle_tokens(engine) if method in ("eagle", "eagle3") else 0
    if arch in HYBRID_ARCHITECTURES:
        return hybrid_layers(arch, v, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                             cache_dtypes=(mamba_cache_dtype, mamba_ssm_cache_dtype),
                             disable_sliding_window=disable_sliding_window,
                             draft_kv_cache_dtype=draft_kv_cache_dtype or engine.draft_kv_cache_dtype or kv_cache_dtype,
                             num_spec=num_spec)  # fmt: skip
    if arch == "KimiLinearForCausalLM":
        return _kimi_linear(v, engine, kv_cache_dtype, model_dtype, (mamba_cache_dtype, mamba_ssm_cache_dtype),
                            num_spec)  # fmt: skip
    n = v.req_int("num_hidden_layers")
    kinds = _layer_types(v, n)
    mtp_layers, num_spec = _mtp(cfg, v, arch, engine) if mtp else (0, num_spec)
    # vLLM builds (and asserts on) the attention heads only where a layer has attention.
    kv, head_dim = _attention_heads(v, tp) if "full_attention" in kinds or mtp_layers else (0, 0)
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
    # The MTP predictor's decoder layers, built full-attention from the target's config.
    dtype_d = draft_kv_cache_dtype or engine.draft_kv_cache_dtype or kv_cache_dtype
    out += [LayerSpec(f"mtp.layers.{j}.self_attn.attn", "full", kv, head_dim, head_size_v=head_dim,
                      kv_cache_dtype=dtype_d, model_dtype=model_dtype, is_draft=True, pp_stage=engine.pp - 1)
            for j in range(mtp_layers)]  # fmt: skip
    return out
