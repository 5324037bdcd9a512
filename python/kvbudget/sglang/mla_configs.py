"""LongCat-Flash and HunYuan-V4: two MLA families SGLang 0.5.23 loads with its own config classes.

Both are DeepSeek-style MLA (the latent ``kv_lora_rank + qk_rope_head_dim`` per token per layer)
and, with ``index_topk``, DSA (:mod:`kvbudget.sglang.dsa`); what differs is how SGLang reads the
file.

* :func:`longcat_config`: ``HfModelConfigParser.parse`` loads a config naming
  ``LongcatCausalLM``, ``LongcatFlashForCausalLM`` or ``LongcatFlashNgramForCausalLM`` (any
  entry of ``architectures``) straight with SGLang's ``LongcatFlashConfig``
  (``configs/longcat_flash.py``); a model type ``longcat_flash`` goes through transformers'
  class first, then SGLang's. Its defaults are SGLang's class's, not transformers'
  (``qk_rope_head_dim`` 128, not 64); ``num_hidden_layers`` is the config's, else
  ``num_layers`` (28). A model type ``longcat_flash`` (a file without one takes the class's) is
  served as ``LongcatFlashForCausalLM`` whatever ``architectures`` says (the NextN and n-gram
  names too). Each decoder layer holds two MLA attention blocks (layer ids ``2 * layer + i``), so
  ``ModelConfig`` counts ``2 * num_hidden_layers`` attention layers for that architecture; with
  ``index_topk`` the DSA indexer's ``cli_factor`` names the attention layers that compute fresh
  top-k. An n-gram embedding (``ngram_vocab_size_ratio`` or ``oe_vocab_size_ratio``,
  LongCat-Flash-Lite) keeps a per-request token table that SGLang allocates after the pools, out
  of the memory they leave, as it does its other post-pool buffers: the pools are unchanged.
* :func:`hy_v4_config`: model type ``hy_v4`` goes through transformers' ``HYV4Config`` (strict:
  integer ``index_topk`` and ``q_lora_rank``) and then SGLang's (``configs/hy_v4.py``), whose
  ``_validate_hy_v4`` refuses what SGLang's model does not build: ``mlp_layer_types``,
  ``layer_types`` (DSA kinds only) and ``indexer_types`` (``full`` / ``shared``, the first
  ``full``) of one entry per layer, iHC (``enable_ihc``, ``hc_mult > 0``), elementwise gated MLA
  and learnable sinks. Every layer is DSA (``index_topk`` 2048 by default); a ``shared`` layer
  reuses the previous layer's top-k and stores no index key, and the class's default
  ``indexer_types`` is ``full`` at layer 0 and every fourth layer from layer 1.

``tests/test_sglang_model.py`` holds both readings to SGLang's own loading and ``ModelConfig``
(families ``longcat_flash`` and ``hy_v4`` of ``tests/sglang_model_cases.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kvbudget.models.config_io import ConfigError

__all__ = ["HY_V4_DEFAULTS", "LONGCAT_ARCHITECTURES", "LONGCAT_DEFAULTS", "hy_v4_config", "longcat_config"]

#: ``utils/hf_transformers/config.py``'s ``_LONGCAT_ARCHS``: loaded with SGLang's ``LongcatFlashConfig``.
LONGCAT_ARCHITECTURES = frozenset({"LongcatCausalLM", "LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"})
_LONGCAT = "LongcatFlashForCausalLM"
#: The defaults of SGLang's two classes, of the keys the readers use (``tests/test_sglang_model.py``
#: holds them to the classes, as ``tools/gen_hf_defaults.py`` reads a class's defaults).
LONGCAT_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_hidden_layers": 28, "num_attention_heads": 64, "hidden_size": 6144, "kv_lora_rank": 512,
    "qk_rope_head_dim": 128, "qk_nope_head_dim": 128, "v_head_dim": 128, "num_nextn_predict_layers": 1,
})  # fmt: skip
HY_V4_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "num_hidden_layers": 34, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_size": 2816,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256, "index_topk": 2048,
    "index_head_dim": 128, "num_nextn_predict_layers": 1,
})  # fmt: skip


def longcat_config(cfg: Mapping[str, Any]) -> dict[str, Any] | None:
    """``cfg`` as SGLang's ``LongcatFlashConfig`` holds it (its defaults, layer count and
    architecture); None for a config SGLang does not load with that class.

    Raises:
        ConfigError: a LongCat architecture under another model type (SGLang loads it with its
            LongCat class but keeps that type and the architecture as named: not resolved here),
            or a null layer count transformers' class fails on.
    """
    archs = cfg.get("architectures")
    archs = archs if isinstance(archs, list) else []
    direct = any(a in LONGCAT_ARCHITECTURES for a in archs)
    if cfg.get("model_type", "longcat_flash" if direct else None) != "longcat_flash":
        if direct:
            raise ConfigError(f"config.json: SGLang 0.5.23 loads {archs[0]} with its LongcatFlashConfig but keeps "
                              f"model type {cfg.get('model_type')!r} and the architectures as named (it serves "
                              "LongcatFlashForCausalLM only for model type longcat_flash); kvbudget resolves "
                              "LongCat-Flash under that model type, or none, only", "model_type")  # fmt: skip
        return None
    if not direct and "num_hidden_layers" in cfg and cfg["num_hidden_layers"] is None:
        raise ConfigError("config.json: transformers 5.19.0's LongcatFlashConfig, which SGLang 0.5.23 loads the "
                          "file with first, fails on a null num_hidden_layers", "num_hidden_layers")  # fmt: skip
    out = {**LONGCAT_DEFAULTS, **cfg, "model_type": "longcat_flash", "architectures": [_LONGCAT]}
    if cfg.get("num_hidden_layers") is None:
        out["num_hidden_layers"] = cfg.get("num_layers", LONGCAT_DEFAULTS["num_hidden_layers"])
    return out


def _fail(key: str, why: str) -> ConfigError:
    return ConfigError(f"config.json: {key} {why}; SGLang 0.5.23's HYV4Config refuses it", key)


def hy_v4_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A ``hy_v4`` config as SGLang's ``HYV4Config`` validates and holds it: its defaults, and its
    default ``indexer_types`` filled in (the DSA reading takes the shared layers from it).

    Raises:
        ConfigError: transformers' or SGLang's class refuses the config (the message says why).
    """
    for key in ("index_topk", "q_lora_rank"):
        if key in cfg and (isinstance(cfg[key], bool) or not isinstance(cfg[key], int)):
            raise ConfigError(f"config.json: transformers 5.19.0's HYV4Config, which SGLang 0.5.23 loads the file "
                              f"with first, requires an integer {key}, not {cfg[key]!r}", key)  # fmt: skip
    cfg = {**HY_V4_DEFAULTS, **cfg}
    n = cfg["num_hidden_layers"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"config.json: num_hidden_layers must be a positive integer, got {n!r}", "num_hidden_layers")
    lists = {
        "mlp_layer_types": (["dense"] + ["sparse"] * (n - 1), {"dense", "sparse"}),
        "layer_types": (["deepseek_sparse_attention"] * n, {"deepseek_sparse_attention", "indexed_attention"}),
        "indexer_types": (["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)], {"full", "shared"}),
    }  # fmt: skip
    got: dict[str, list[Any]] = {}
    for key, (default, allowed) in lists.items():
        value = cfg.get(key)
        value = default if value is None else value
        if not isinstance(value, list) or len(value) != n:
            raise _fail(key, f"must list one entry per layer ({n})")
        if not all(isinstance(x, str) and x in allowed for x in value):
            raise _fail(key, f"may hold only {sorted(allowed)}")
        got[key] = value
    if got["indexer_types"][0] != "full":
        raise _fail("indexer_types", "must start with a full indexer")
    hc = cfg.get("hc_mult", 4)
    if not cfg.get("enable_ihc", True) or isinstance(hc, bool) or not isinstance(hc, int) or hc <= 0:
        raise _fail("enable_ihc", "and hc_mult > 0 are required (iHC)")
    if not cfg.get("gated_mla", True) or cfg.get("gating_type", "elementwise") != "elementwise":
        raise _fail("gated_mla", "must be set with gating_type 'elementwise'")
    if not cfg.get("learnable_sink", True):
        raise _fail("learnable_sink", "must be set")
    return {**cfg, "indexer_types": got["indexer_types"]}
