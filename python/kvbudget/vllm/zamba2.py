"""vLLM 0.33.0's reading of Zamba2 (``Zamba2ForCausalLM``, ``models/zamba2.py``): Mamba-2 layers and
shared attention blocks.

Every layer holds a ``MambaMixer2``; a ``hybrid`` layer also runs one of ``num_mem_blocks`` shared
transformer blocks (weights shared, KV not). What ``Zamba2Model`` registers, in order:

* **Attention**, first: ``num_mem_blocks`` ``Zamba2AttentionDecoderLayer`` blocks are built up front
  (block ``b``), each with an ``Attention`` for every hybrid-layer slot ``k`` of ``range(H)`` with
  ``k % num_mem_blocks == b`` (``H``: the distinct ``hybrid_layer_ids``), named
  ``model.attn.{j}``, ``j`` counting up from ``b · (H + num_mem_blocks - 1) // num_mem_blocks``.
  Each has ``num_attention_heads / tp`` heads and as many KV heads (``num_key_value_heads`` is never
  read) of ``attention_head_dim``; ``Zamba2Attention`` asserts ``tp`` divides the heads and raises
  unless ``attention_head_dim · num_attention_heads == attention_hidden_size``. No window
  (``layer_types`` is ``layers_block_type`` by the config class's alias: never all sliding).
* **Mamba-2**, then: layer ``i`` (of ``layers_block_type``) registers its mixer at ``{H + i}.mixer``
  (vLLM's own "somewhat hacky" index, no ``model.`` prefix): intermediate ``mamba_expand ·
  hidden_size``, ``n_mamba_heads`` heads of ``intermediate // n_mamba_heads``, ``mamba_ngroups``
  groups, ``mamba_d_state``, ``mamba_d_conv`` (``MambaMixer2``'s TP assertions); no config hook: an
  ``auto`` SSM dtype is the conv dtype. A hybrid layer missing from ``hybrid_layer_ids`` is vLLM's
  ``KeyError``.

transformers' ``Zamba2Config`` derives ``attention_hidden_size`` (``2 · hidden_size``),
``attention_head_dim`` (that over the heads), ``mamba_headdim`` and ``hybrid_layer_ids`` in
``__post_init__``, but a saved config's own values of those keys win (they are set after it);
``layers_block_type`` takes the legacy names and defaults to the 54-layer pattern, and must have
``num_hidden_layers`` entries. The model class's ``get_mamba_state_shape_from_config`` uses
``mamba_headdim`` where the layers use ``intermediate // n_mamba_heads``: a config where they differ
is refused as unchecked. The class is not ``SupportsPP`` (vLLM refuses ``pp > 1``) nor
``SupportsReplaySSM``; drafters are not read. Held to vLLM's classes by ``tests/test_vllm_zamba2.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.refusal import refused
from kvbudget.models.layer_kinds import LEGACY_KINDS
from kvbudget.vllm.hybrid_models import _mamba2_state
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import _attention_template, _state_dtypes, check_plain_state_engine

__all__ = ["ZAMBA2_DEFAULTS", "zamba2_layers"]

#: transformers 5.19.0's ``Zamba2Config`` defaults of the fields read here.
ZAMBA2_DEFAULTS: Final[Mapping[str, int]] = {
    "num_hidden_layers": 54, "hidden_size": 2560, "num_attention_heads": 32, "num_mem_blocks": 1, "mamba_expand": 2,
    "n_mamba_heads": 8, "mamba_ngroups": 1, "mamba_d_state": 64, "mamba_d_conv": 4}  # fmt: skip
#: ``Zamba2Config.__post_init__``'s layer pattern when the config gives none.
_DEFAULT_KINDS: Final = (["linear_attention"] + (["linear_attention"] * 5 + ["hybrid"]) * 7 + ["linear_attention"] * 4
                         + ["hybrid"] + ["linear_attention"] * 3 + ["hybrid"] + ["linear_attention"] * 2)  # fmt: skip


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None, minimum: int = 1) -> int:
    v = cfg.get(key, ZAMBA2_DEFAULTS.get(key) if default is None else default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"config.json: key {key!r} must be an integer >= {minimum}, got {v!r}", key)
    return v


def _kinds(cfg: Mapping[str, Any], n: int) -> list[str]:
    given = cfg.get("layers_block_type", cfg.get("layer_types"))
    if given is None:
        kinds = list(_DEFAULT_KINDS)
    elif isinstance(given, list) and all(isinstance(t, str) for t in given):
        kinds = [str(LEGACY_KINDS.get(t, t)) for t in given]
    else:
        raise ConfigError("config.json: layers_block_type must be a list of layer kinds", "layers_block_type")
    if len(kinds) != n:
        raise ConfigError(f"config.json: transformers' Zamba2Config refuses it: `num_hidden_layers` ({n}) must be "
                          f"equal to the number of `layer_types` ({len(kinds)})", "layers_block_type")  # fmt: skip
    return kinds




def zamba2_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                  cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for a Zamba2 config (see the module doc), for ``engine``'s TP;
    ``cache_dtypes``: ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype``.

    Raises:
        ConfigError: what vLLM (or transformers' config class) refuses, a drafter, ReplaySSM, or a
            config whose class state shape differs from its layers'.
    """
    check_plain_state_engine("Zamba2ForCausalLM", engine)
    tp, n, hidden = engine.tp, _int(cfg, "num_hidden_layers", minimum=0), _int(cfg, "hidden_size")
    kinds = _kinds(cfg, n)
    ids = cfg.get("hybrid_layer_ids", [i for i, k in enumerate(kinds) if k == "hybrid"])
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ConfigError("config.json: hybrid_layer_ids must be a list of layer indices", "hybrid_layer_ids")
    slots = {layer: block for block, layer in enumerate(ids)}  # vLLM's layer2block_map
    h, blocks = len(slots), _int(cfg, "num_mem_blocks", minimum=0)
    missing = [i for i, k in enumerate(kinds) if k == "hybrid" and i not in slots]
    if missing:
        raise refused(f"KeyError: {missing[0]} (a hybrid layer missing from hybrid_layer_ids)", "hybrid_layer_ids")
    if blocks == 0 and "hybrid" in kinds:
        raise refused("StopIteration: a hybrid layer with num_mem_blocks 0", "num_mem_blocks")
    out: list[LayerSpec] = []
    if blocks:  # Zamba2Attention, built once per block (its checks on every build alike)
        heads = _int(cfg, "num_attention_heads")
        if heads % tp:
            raise refused(f"Zamba2Attention asserts tp divides the heads ({heads} over tp={tp})", "num_attention_heads")
        head_dim = _int(cfg, "attention_head_dim", 2 * hidden // heads)
        if head_dim * heads != _int(cfg, "attention_hidden_size", 2 * hidden):
            raise refused("ValueError: attention_hidden_size must be divisible by num_attention_heads",
                          "attention_hidden_size")  # fmt: skip
        attention = _attention_template(heads // tp, head_dim, None, kv_cache_dtype, model_dtype)
        for b in range(blocks):
            j = b * (h + blocks - 1) // blocks
            for k in range(h):
                if k % blocks == b:
                    out.append(replace(attention, name=f"model.attn.{j}"))
                    j += 1
    if n:
        inter, mheads = _int(cfg, "mamba_expand") * hidden, _int(cfg, "n_mamba_heads")
        if cfg.get("mamba_headdim", inter // mheads) != inter // mheads:
            raise ConfigError(f"config.json: mamba_headdim ({cfg['mamba_headdim']}) is not mamba_expand · hidden_size "
                              f"/ n_mamba_heads ({inter // mheads}): vLLM 0.33.0's Zamba2 class would size the state "
                              "by the one and its layers by the other; kvbudget has not checked that",
                              "mamba_headdim")  # fmt: skip
        dims = (inter, _int(cfg, "mamba_ngroups"), mheads, inter // mheads, _int(cfg, "mamba_d_state"),
                _int(cfg, "mamba_d_conv"))  # fmt: skip
        state = _mamba2_state(tp, dims, _state_dtypes(model_dtype, *cache_dtypes), ("n_mamba_heads", "mamba_ngroups"),
                              model_dtype)  # fmt: skip
        out += [replace(state, name=f"{h + i}.mixer") for i in range(n)]
    return out
