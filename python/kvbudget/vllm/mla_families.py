"""vLLM 0.33.0's latent-attention families beside DeepSeek's: MiniCPM3, GLM-4.7-Flash, LongCat-Flash
and Sarvam-MLA.

Each model file builds its decoder from the config itself; what it registers per rank:

==================================  ================================================  ===============================
architecture                        layer names                                       KV cache per layer
==================================  ================================================  ===============================
``MiniCPM3ForCausalLM``             ``model.layers.{i}.self_attn.attn``               a plain ``Attention`` (not MLA):
                                                                                      ``num_attention_heads / tp`` KV
                                                                                      heads of ``qk_nope_head_dim +
                                                                                      qk_rope_head_dim`` (K and V)
``Glm4MoeLiteForCausalLM``          ``model.layers.{i}.self_attn.attn``               DeepSeek-V2's MLA: one latent
                                                                                      head of ``kv_lora_rank +
                                                                                      qk_rope_head_dim``
``LongcatFlashForCausalLM`` (and    ``model.layers.{i}.self_attn.{0,1}.attn``         two DeepSeek-V2 MLA attentions
``LongcatFlashNgramForCausalLM``)                                                     per decoder layer
``SarvamMLAForCausalLM``            ``model.layers.{i}.self_attn.attn``               DeepSeek-V2's MLA latent head
==================================  ================================================  ===============================

* **MiniCPM3** (``minicpm3.py``): ``MiniCPM3Attention`` asserts ``tp`` divides the heads and hands
  ``Attention`` the rank's heads as KV heads (``num_key_value_heads`` is never read; V is stored at
  the K head size). No per-layer window: the model-wide one (``CacheConfig.sliding_window``).
* **GLM-4.7-Flash** (``glm4_moe_lite.py``): ``Glm4MoeLiteDecoderLayer`` builds DeepSeek-V2's MLA
  attention when ``ModelConfig.use_mla`` (``glm4_moe_lite`` is one of its DeepSeek-MLA model types:
  a ``kv_lora_rank`` set), which asserts ``tp`` divides the heads; then it reads
  ``first_k_dense_replace`` (not a field of transformers' ``Glm4MoeLiteConfig``: a config without it
  fails with ``AttributeError``) for each layer (``n_routed_experts``, which it tests first, is an
  integer: transformers' class refuses None), and ``moe_layer_freq`` (default 1) from that layer on.
* **LongCat-Flash** (``longcat_flash.py``): ``FlashModel`` builds ``config.num_layers`` decoder
  layers (transformers' ``LongcatFlashConfig``: ``num_hidden_layers`` is twice that, and a given
  ``num_hidden_layers`` sets it to half), each with two ``DeepseekV2MLAAttention``; then
  ``scale_mla_lora_norms_on_load`` reads ``mla_scale_q_lora`` and ``mla_scale_kv_lora`` (real
  checkpoints carry them; transformers' class does not: ``AttributeError``) and divides
  ``hidden_size`` by each enabled rank. The n-gram variant (``longcat_flash_ngram.py``,
  LongCat-Flash-Lite) builds the same decoder under ``FlashNgramModel`` and refuses Model Runner V1.

* **Sarvam-MLA** (``sarvam.py``, remote code: its config is the checkpoint's class, whose attributes
  are its file's keys): ``SarvamMLAAttention`` asserts ``tp`` divides the heads, reads the head dims,
  ``kv_lora_rank``, ``max_position_embeddings`` and ``rms_norm_eps``, and builds
  ``MultiHeadLatentAttentionWrapper`` (no DSA indexer, whatever ``index_topk`` says).

A LongCat config with ``index_topk`` fails in vLLM: ``DeepseekV2MLAAttention`` then takes the layer
index from its prefix for the DSA indexer, and LongCat's ``...self_attn.{0,1}`` holds two integers
(``extract_layer_index``'s assertion). Not read, refused by name: GLM with ``index_topk``
(DeepSeek-V3.2's DSA indexer, a KV cache of its own), a GLM / LongCat config
without ``kv_lora_rank`` (GLM's MHA path; LongCat's layers would fail), and drafters (GLM-4.7's and
LongCat's MTP heads are not checked). Held to vLLM's classes by ``tests/test_vllm_mla_families.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["CLASS_DEFAULTS", "MLA_FAMILIES", "mla_family_layers"]

#: Architecture -> the model type whose transformers 5.19.0 config class vLLM loads it with.
MLA_FAMILIES: Final[Mapping[str, str]] = {
    "MiniCPM3ForCausalLM": "minicpm3",
    "Glm4MoeLiteForCausalLM": "glm4_moe_lite",
    "LongcatFlashForCausalLM": "longcat_flash",
    "LongcatFlashNgramForCausalLM": "longcat_flash",
    "SarvamMLAForCausalLM": "sarvam_mla",  # remote code: the checkpoint's class, its file's keys
}
#: transformers 5.19.0's class defaults of the keys read here (``tests/test_vllm_mla_families.py``
#: holds them to the classes).
CLASS_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "minicpm3": {"num_hidden_layers": 62, "num_attention_heads": 40, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32},
    "glm4_moe_lite": {"num_hidden_layers": 47, "num_attention_heads": 20, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                      "n_routed_experts": 64},
    "longcat_flash": {"num_layers": 28, "num_attention_heads": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                      "q_lora_rank": 1536, "hidden_size": 6144},
    "sarvam_mla": {},  # remote code: an attribute is a key of the file
}  # fmt: skip


def _int(cfg: Mapping[str, Any], model_type: str, key: str, minimum: int = 1, required: bool = True) -> Any:
    """``key`` as the config class leaves it (its default where absent): an integer >= ``minimum``,
    or None where the config (or class) sets none and ``required`` is false."""
    v = cfg.get(key, CLASS_DEFAULTS[model_type].get(key))
    if v is None and not required:
        return None
    if v is None and key not in cfg:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AttributeError: the {model_type} config has no "
                          f"attribute {key!r}", key)  # fmt: skip
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"config.json: key {key!r} must be an integer >= {minimum}, got {v!r}", key)
    return v


def _heads(cfg: Mapping[str, Any], model_type: str, tp: int) -> int:
    heads = int(_int(cfg, model_type, "num_attention_heads"))
    if heads % tp:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AssertionError: its attention asserts num_heads % "
                          f"tp_size == 0 ({heads} heads over tp={tp})", "num_attention_heads")  # fmt: skip
    return heads // tp


def _latent(cfg: Mapping[str, Any], model_type: str) -> int:
    """DeepSeek-V2 MLA's cache width, after the refusals of the module doc."""
    if "index_topk" in cfg:
        raise ConfigError("config.json: vLLM 0.33.0 builds DeepSeek's DSA indexer (a KV cache of its own) for a "
                          "config with index_topk; kvbudget's vLLM mode does not model it", "index_topk")  # fmt: skip
    if _int(cfg, model_type, "kv_lora_rank", required=False) is None:
        raise ConfigError(f"config.json: a {model_type} config without kv_lora_rank (vLLM 0.33.0's non-MLA path) is "
                          "not checked by kvbudget", "kv_lora_rank")  # fmt: skip
    return int(_int(cfg, model_type, "kv_lora_rank")) + int(_int(cfg, model_type, "qk_rope_head_dim", minimum=0))


def _glm_checks(cfg: Mapping[str, Any], n: int) -> None:
    """``Glm4MoeLiteDecoderLayer``'s MLP choice per layer: ``first_k_dense_replace`` (``n_routed_experts``
    is always set), then ``layer_idx % moe_layer_freq`` from that layer on."""
    _int(cfg, "glm4_moe_lite", "n_routed_experts", minimum=0)  # transformers' class refuses None
    if n == 0:
        return
    if "first_k_dense_replace" not in cfg:
        raise ConfigError("config.json: vLLM 0.33.0 refuses it: AttributeError: 'Glm4MoeLiteConfig' object has no "
                          "attribute 'first_k_dense_replace'", "first_k_dense_replace")  # fmt: skip
    first, freq = cfg["first_k_dense_replace"], cfg.get("moe_layer_freq", 1)
    if isinstance(first, bool) or not isinstance(first, int) or isinstance(freq, bool) or not isinstance(freq, int):
        raise ConfigError("config.json: first_k_dense_replace and moe_layer_freq must be integers",
                          "first_k_dense_replace")  # fmt: skip
    if freq == 0 and first < n:
        raise ConfigError("config.json: vLLM 0.33.0 refuses it: ZeroDivisionError (moe_layer_freq is 0)",
                          "moe_layer_freq")  # fmt: skip


def _longcat_checks(cfg: Mapping[str, Any], n: int) -> None:
    """``scale_mla_lora_norms_on_load`` on each layer's attentions: both flags read, and
    ``hidden_size / rank`` for each enabled one (the ranks are integers of at least 1)."""
    if n == 0:
        return
    for flag in ("mla_scale_q_lora", "mla_scale_kv_lora"):
        if flag not in cfg:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AttributeError: 'LongcatFlashConfig' object has "
                              f"no attribute '{flag}'", flag)  # fmt: skip
    _int(cfg, "longcat_flash", "q_lora_rank")  # transformers' class refuses None
    if cfg["mla_scale_q_lora"] or cfg["mla_scale_kv_lora"]:
        _int(cfg, "longcat_flash", "hidden_size")


def _sarvam_width(cfg: Mapping[str, Any], tp: int) -> int:
    """``SarvamMLAAttention``'s reads in its order (the head dims, ``kv_lora_rank``, the heads and
    their ``tp`` assert, then ``max_position_embeddings`` and ``rms_norm_eps``; a file without one
    fails on the attribute), and the latent width it caches."""
    for key in ("hidden_size", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank"):
        _int(cfg, "sarvam_mla", key, minimum=0)
    _heads(cfg, "sarvam_mla", tp)
    for key in ("max_position_embeddings", "rms_norm_eps"):
        if key not in cfg:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AttributeError: the sarvam_mla config has no "
                              f"{key!r} (SarvamMLAAttention reads it)", key)  # fmt: skip
    return int(cfg["kv_lora_rank"]) + int(cfg["qk_rope_head_dim"])


def _longcat_layers(cfg: Mapping[str, Any]) -> int:
    """``config.num_layers`` as transformers' ``LongcatFlashConfig`` leaves it: half a given
    ``num_hidden_layers`` (its setter), else ``num_layers``, else 28."""
    if "num_hidden_layers" in cfg:
        return int(_int(cfg, "longcat_flash", "num_hidden_layers", minimum=0)) // 2
    return int(_int(cfg, "longcat_flash", "num_layers", minimum=0))


def _model_window(cfg: Mapping[str, Any], disable_sliding_window: bool) -> int | None:
    """vLLM's ``CacheConfig.sliding_window`` (which MiniCPM3's plain attention takes): the config's
    ``sliding_window`` (0: none) where its ``layer_types`` are absent or all sliding, never with
    ``--disable-sliding-window``."""
    window, types = cfg.get("sliding_window"), cfg.get("layer_types")
    if disable_sliding_window or window is None or (types is not None and not (
            isinstance(types, list) and all(t == "sliding_attention" for t in types))):  # fmt: skip
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise ConfigError(f"config.json: key 'sliding_window' must be an integer >= 0, got {window!r}", "sliding_window")
    return window or None


def mla_family_layers(cfg: Mapping[str, Any], engine: EngineConfig, disable_sliding_window: bool,
                      kv_cache_dtype: str, model_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The layers vLLM 0.33.0 registers for ``cfg`` (an architecture of :data:`MLA_FAMILIES`) on
    ``engine``'s TP and PP (MiniCPM3's plain attention takes the model-wide sliding window unless
    ``disable_sliding_window``).

    Raises:
        ConfigError: what vLLM refuses (see the module doc), a drafter, or what kvbudget does not read.
    """
    arch = cfg["architectures"][0]
    model_type = MLA_FAMILIES[arch]
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {arch}", "architectures")
    if arch == "LongcatFlashNgramForCausalLM" and not engine.use_v2_model_runner:
        raise ConfigError("vLLM 0.33.0 refuses it: NotImplementedError: LongcatFlashNgramForCausalLM (LongCat-Flash-"
                          "Lite) requires the V2 model runner for its n-gram embedding state", "use_v2_model_runner")  # fmt: skip
    tp = engine.tp
    if model_type == "minicpm3":
        n = int(_int(cfg, model_type, "num_hidden_layers", minimum=0))
        heads = _heads(cfg, model_type, tp) if n else 0
        window = _model_window(cfg, disable_sliding_window)
        dim = int(_int(cfg, model_type, "qk_nope_head_dim", minimum=0)) + int(
            _int(cfg, model_type, "qk_rope_head_dim", minimum=0))  # fmt: skip
        template = LayerSpec("", "full" if window is None else "sliding", heads, dim, head_size_v=dim,
                             kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype, sliding_window=window)  # fmt: skip
        names: tuple[str, ...] = ("self_attn.attn",)
    else:
        n = _longcat_layers(cfg) if model_type == "longcat_flash" else int(
            _int(cfg, model_type, "num_hidden_layers", minimum=0))  # fmt: skip
        if n and model_type != "sarvam_mla":  # vLLM's own refusals first (its attention's assertion, then
            _heads(cfg, model_type, tp)  # the decoder layer's reads)
        if n and model_type == "longcat_flash" and "index_topk" in cfg:  # DSA: the indexer's layer index
            raise ConfigError("config.json: vLLM 0.33.0 refuses it: AssertionError: layer name "
                              f"model.layers.{pp_stage_layers(n, engine.pp)[0][0]}.self_attn.0 should only contain "
                              "one integer (DeepseekV2MLAAttention's extract_layer_index, for the DSA indexer "
                              "index_topk asks for)", "index_topk")  # fmt: skip
        if model_type == "sarvam_mla":  # no DSA indexer, whatever index_topk says
            width = _sarvam_width(cfg, tp) if n else 0
        else:
            (_longcat_checks if model_type == "longcat_flash" else _glm_checks)(cfg, n)
            width = _latent(cfg, model_type) if n else 0
        template = LayerSpec("", "mla", 1, width, head_size_v=0, kv_cache_dtype=kv_cache_dtype,
                             model_dtype=model_dtype)  # MLAAttentionSpec  # fmt: skip
        names = ("self_attn.0.attn", "self_attn.1.attn") if model_type == "longcat_flash" else ("self_attn.attn",)
    return [replace(template, name=f"model.layers.{i}.{name}", pp_stage=stage)
            for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)) for i in range(start, end)
            for name in names]  # fmt: skip
