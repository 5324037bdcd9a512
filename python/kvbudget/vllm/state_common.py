"""What vLLM 0.33.0's hybrid-state model classes share, as kvbudget reads them: attention heads
per rank, the state dtypes (``MambaStateDtypeCalculator``), and the registered layer list."""

from __future__ import annotations

from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
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


def _hybrid_layers(kinds: list[str], engine: EngineConfig, names: tuple[str, str], attention: dict[str, Any],
                   state: dict[str, Any], model_dtype: str) -> list[LayerSpec]:
    """The registered layers of a hybrid, per PP stage: ``full_attention`` layers at
    ``names[0] % i`` (``attention``: the spec's fields), ``linear_attention`` ones (state layers;
    ``state``: the spec's fields) at ``names[1] % i``, ``hybrid`` ones (Falcon-H1's parallel
    layers) both, the state layer at ``names[1] % (n + i)``; other kinds (MLP, MoE) hold nothing."""
    out: list[LayerSpec] = []
    n = len(kinds)
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            if kinds[i] in ("full_attention", "hybrid"):
                out.append(LayerSpec(names[0] % i, model_dtype=model_dtype, pp_stage=stage, **attention))
            if kinds[i] in ("linear_attention", "hybrid"):
                index = n + i if kinds[i] == "hybrid" else i
                out.append(LayerSpec(names[1] % index, "mamba", 0, 0, model_dtype=model_dtype, pp_stage=stage, **state))
    return out


def _attention_fields(kv: int, head_dim: int, window: int | None, kv_cache_dtype: str) -> dict[str, Any]:
    return {"kind": "full" if window is None else "sliding", "num_kv_heads": kv, "head_size": head_dim,
            "head_size_v": head_dim, "sliding_window": window, "kv_cache_dtype": kv_cache_dtype}  # fmt: skip


def _attention_over_hidden(v: _View, tp: int, kv_cache_dtype: str, hidden: int) -> dict[str, Any]:
    """A full-attention spec's fields for the classes whose head size is ``hidden_size /
    num_attention_heads`` and whose KV heads default to the heads (Granite-4.0-H, Jamba)."""
    heads = v.req_int("num_attention_heads")
    kv, _ = _attention_heads(v, tp, v.opt_int("num_key_value_heads") or heads)
    return _attention_fields(kv, hidden // heads, None, kv_cache_dtype)
