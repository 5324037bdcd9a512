"""What vLLM 0.33.0's hybrid-state model classes share, as kvbudget reads them: attention heads
per rank, the state dtypes (``MambaStateDtypeCalculator``), and the registered layer list."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.models.layer_kinds import LEGACY_KINDS
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

_DTYPES: Final = ("float32", "bfloat16", "float16")


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


def _listed_kinds(v: _View, n: int, key: str = "layer_types") -> list[str] | None:
    """The config's ``key`` list (``layer_types``) for the first ``n`` layers as transformers
    5.19.0 leaves it: every config class remaps the legacy names (``mamba``, ``attention``);
    None when the config lists none."""
    raw = v.cfg.get(key)
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) < n or not all(isinstance(t, str) for t in raw):
        raise ConfigError(f"config.json: {key} must name a kind for each of the {n} layers", key)
    return [LEGACY_KINDS.get(str(t), str(t)) for t in raw[:n]]


def _hybrid_layers(kinds: list[str], engine: EngineConfig, names: tuple[str, str], attention: LayerSpec | None,
                   state: LayerSpec | None) -> list[LayerSpec]:
    """The registered layers of a hybrid, per PP stage: ``full_attention`` layers at
    ``names[0] % i`` (copies of the ``attention`` template), ``linear_attention`` ones (copies of
    the ``state`` template) at ``names[1] % i``, ``hybrid`` ones (Falcon-H1's parallel layers)
    both, the state layer at ``names[1] % (n + i)``; other kinds (MLP, MoE) hold nothing."""
    out: list[LayerSpec] = []
    n = len(kinds)
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if kinds[i] in ("full_attention", "hybrid"):
                assert attention is not None  # built wherever a kind needs it
                out.append(replace(attention, name=names[0] % i, pp_stage=stage))
            if kinds[i] in ("linear_attention", "hybrid"):
                assert state is not None
                out.append(replace(state, name=names[1] % (n + i if kinds[i] == "hybrid" else i), pp_stage=stage))
    return out


def _attention_template(kv: int, head_dim: int, window: int | None, kv_cache_dtype: str,
                        model_dtype: str) -> LayerSpec:  # fmt: skip
    """An attention layer's spec (name and stage still to set): full, or sliding over ``window``."""
    return LayerSpec("", "full" if window is None else "sliding", kv, head_dim, head_size_v=head_dim,
                     kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, sliding_window=window)  # fmt: skip


def _state_template(shapes: Any, dtypes: Any, mamba_type: Any, model_dtype: str,
                    prefill_checkpoint: Any = "none") -> LayerSpec:  # fmt: skip
    """A state layer's spec (name and stage still to set): its per-rank shapes and dtypes."""
    return LayerSpec("", "mamba", 0, 0, model_dtype=model_dtype, state_shapes=tuple(tuple(x) for x in shapes),
                     state_dtypes=tuple(dtypes), mamba_type=mamba_type, prefill_checkpoint=prefill_checkpoint)


def _attention_over_hidden(v: _View, tp: int, kv_cache_dtype: str, hidden: int, model_dtype: str) -> LayerSpec:
    """The attention template of the classes whose head size is ``hidden_size /
    num_attention_heads`` and whose KV heads default to the heads (Granite-4.0-H, Jamba)."""
    heads = v.req_int("num_attention_heads")
    kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or heads)
    return _attention_template(kv, hidden // heads, None, kv_cache_dtype, model_dtype)


def _mtp_tokens(engine: EngineConfig, n_predict: int | None, key: str) -> int:
    """``num_speculative_tokens`` as an MTP drafter takes it: required here (vLLM defaults it to
    ``n_predict``, the config's ``key``, which the plan would not see) and, above ``n_predict``,
    a multiple of it (``SpeculativeConfig``'s check)."""
    s = engine.num_speculative_tokens
    if s is None:
        raise ConfigError(f"speculative_method='mtp' needs num_speculative_tokens (vLLM defaults it to the "
                          f"config's {key}, {n_predict}; give it so the plan uses it too)", "num_speculative_tokens")  # fmt: skip
    check_mtp_divisible(engine, n_predict)
    return s


def check_mtp_divisible(engine: EngineConfig, n_predict: int | None) -> None:
    """``SpeculativeConfig.__post_init__``'s check of a given ``num_speculative_tokens`` against the
    drafter's ``n_predict``: above it, a multiple of it.

    Raises:
        ConfigError: vLLM's refusal (its ``ValueError``, or its ``ZeroDivisionError`` for 0).
    """
    s = engine.num_speculative_tokens
    if s is None or n_predict is None:
        return
    if n_predict == 0:
        raise ConfigError("vLLM 0.33.0 refuses it: ZeroDivisionError: integer modulo by zero (SpeculativeConfig: "
                          "num_speculative_tokens % n_predict, n_predict = 0)", "num_nextn_predict_layers")  # fmt: skip
    if s > n_predict and s % n_predict:
        raise ConfigError(f"vLLM 0.33.0 refuses it: num_speculative_tokens:{s} must be divisible by "
                          f"n_predict={n_predict}", "num_speculative_tokens")  # fmt: skip



def check_plain_state_engine(arch: str, engine: EngineConfig) -> None:
    """The engine checks of a state model read without a drafter and without ReplaySSM (OLMo Hybrid,
    Zamba2, Mamba): a drafter is refused as not checked, ``--use-replayssm`` as vLLM refuses it for
    an architecture that does not support it.

    Raises:
        ConfigError: either of the two.
    """
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch}", "architectures")
    if engine.use_replayssm:
        raise ConfigError(f"vLLM 0.33.0 refuses it: --use-replayssm is not supported for architecture '{arch}'",
                          "use_replayssm")  # fmt: skip
