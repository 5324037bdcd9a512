"""The attention backends vLLM 0.33.0 picks on Hopper, as far as kvbudget's vLLM mode plans them.

vLLM picks each attention layer's backend per GPU, walking a priority list
(``platforms/cuda.py``, ``_get_backend_priorities``) and taking the first backend that stores the
layer's ``--kv-cache-dtype`` (``supported_kv_cache_dtypes``), takes its head size and, when the user
gave ``--block-size``, that block size. The backend decides the page's packing (FlashInfer's NVFP4
head slots and block scales, Triton's per-token-head scales) and its kernel block sizes, and the
platform makes the engine's block size the smallest one every backend takes
(``update_block_size_for_backend``). kvbudget's planner restates the packing of these backends,
vLLM's first choices on Hopper (sm90):

* ``FLASH_ATTN`` for attention layers (any multiple of 16 tokens);
* ``FLASH_ATTN_MLA`` for MLA layers (any multiple of 16 tokens);
* ``FLASHMLA`` for MLA layers in FP8, which ``FLASH_ATTN_MLA`` does not store: 64-token kernel
  blocks only, so the platform makes the engine's block 64 tokens. Its page is the plain latent
  row.

:func:`backend_block_size` gives the engine block size the platform settles on for a model's layers
(FLASHMLA's 64 tokens, or the engine's) and refuses a layer whose KV dtype takes vLLM elsewhere (FlashInfer or Triton for ``fp8_e5m2``, ``nvfp4`` and per-token-head
attention; FLASHINFER_MLA or TRITON_MLA for FP8 MLA off FLASHMLA's head sizes or block size), naming
the backend vLLM moves on to, rather than answer differently. An engine ``block_size`` of 16
(vLLM's default) is read as "not set", as :mod:`kvbudget.vllm.dsa` reads it.

Layers whose readers fix their own backend keep their readers' rules: DeepSeek sparse attention's
MLA layers (:mod:`kvbudget.vllm.dsa`, a model with ``mla_indexer`` layers) and the indexer caches.
MiniMax-M3's sparse layers' main caches are checked as attention layers (its reader plans only dtypes
FLASH_ATTN stores too, and their 128-token blocks itself). State layers have no attention backend; FP8 MLA beside them is refused (the
hybrid block-size alignment would take FLASHMLA's kernel block, which kvbudget has not checked).
The KV dtype decides, and for FP8 MLA the head size too: a head size ``FLASH_ATTN`` does not take
(above 256) also moves vLLM on, to backends whose pages hold the same bytes for the dtypes above at
16-token blocks, which kvbudget does not check. ``tests/test_vllm_backends.py`` holds the tables
below to the wheel's classes, their block-size rules and the priority lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import EngineConfig, LayerSpec

__all__ = ["FLASHMLA_BLOCK_SIZE", "FLASHMLA_KV_CACHE_DTYPES", "FLASH_ATTN_KV_CACHE_DTYPES",
           "FLASH_ATTN_MLA_KV_CACHE_DTYPES", "MLA_HEAD_SIZES", "VLLM_DEFAULT_BLOCK_SIZE",
           "backend_block_size", "kv_cache_layout"]  # fmt: skip

#: ``FlashAttentionBackend.supported_kv_cache_dtypes`` (``v1/attention/backends/flash_attn.py``).
FLASH_ATTN_KV_CACHE_DTYPES: Final[tuple[str, ...]] = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")
#: ``FlashAttnMLABackend.supported_kv_cache_dtypes`` (``v1/attention/backends/mla/flashattn_mla.py``).
FLASH_ATTN_MLA_KV_CACHE_DTYPES: Final[tuple[str, ...]] = ("auto", "float16", "bfloat16")
#: ``FlashMLABackend.supported_kv_cache_dtypes`` (``v1/attention/backends/mla/flashmla.py``).
FLASHMLA_KV_CACHE_DTYPES: Final[tuple[str, ...]] = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")
#: ``FlashMLABackend.get_supported_kernel_block_sizes()``: its only kernel block, tokens.
FLASHMLA_BLOCK_SIZE: Final = 64
#: ``MLACommonBackend.get_supported_head_sizes()`` (``model_executor/layers/attention/mla_attention.py``):
#: the latent sizes FLASH_ATTN_MLA and FLASHMLA take, elements.
MLA_HEAD_SIZES: Final[tuple[int, ...]] = (320, 512, 576)
#: vLLM's default ``--block-size`` (the core's ``VllmEngine`` default), tokens: the readers of
#: backends with fixed kernel blocks read it as "not set".
VLLM_DEFAULT_BLOCK_SIZE: Final[int] = EngineConfig().block_size
_ATTENTION_KINDS: Final = frozenset({"full", "sliding", "chunked", "cross"})


def _refused(x: LayerSpec, why: str, next_backends: str) -> ConfigError:
    return ConfigError(f"kv_cache_dtype {x.kv_cache_dtype!r} on layer {x.name}: {why}; vLLM moves on to "
                       f"{next_backends}, whose packing and kernel block sizes kvbudget does not model",
                       "kv_cache_dtype")  # fmt: skip


def _flashmla(x: LayerSpec) -> bool:
    """Whether vLLM stores an MLA layer with FLASHMLA (else FLASH_ATTN_MLA); refuses the rest."""
    if x.kv_cache_dtype in FLASH_ATTN_MLA_KV_CACHE_DTYPES:
        return False
    if x.kv_cache_dtype in FLASHMLA_KV_CACHE_DTYPES and x.head_size in MLA_HEAD_SIZES:
        return True
    if x.kv_cache_dtype in FLASHMLA_KV_CACHE_DTYPES:
        raise _refused(x, f"vLLM 0.33.0's FLASHMLA backend (its Hopper choice for this dtype) takes latent sizes "
                          f"{', '.join(map(str, MLA_HEAD_SIZES))}, not {x.head_size}", "FLASHINFER_MLA and TRITON_MLA")
    raise _refused(x, f"vLLM 0.33.0's MLA backends FLASH_ATTN_MLA and FLASHMLA (its first choices on Hopper) store "
                      f"{', '.join(FLASHMLA_KV_CACHE_DTYPES)}", "FLASHINFER_MLA and TRITON_MLA")  # fmt: skip


def backend_block_size(layers: Sequence[LayerSpec], engine: EngineConfig) -> int:
    """The engine block size vLLM 0.33.0's platform settles on for a model's layers on Hopper, tokens:
    FLASHMLA's 64 when an FP8 MLA layer takes it, else ``engine.block_size``.

    Args:
        layers: a model's layers (:func:`kvbudget.vllm.layers_from_hf_config`), drafter included.
        engine: gives ``block_size`` (16, vLLM's default, read as "not set").

    Raises:
        ConfigError: a layer whose KV dtype (or, for FP8 MLA, head size) takes vLLM to a backend
            kvbudget does not model, an engine block size that precludes FLASHMLA, or FP8 MLA
            beside state layers.
    """
    own_backend = any(x.kind in ("mla_indexer", "key_indexer") for x in layers)
    flashmla: LayerSpec | None = None
    for x in layers:
        if x.kind in _ATTENTION_KINDS and x.kv_cache_dtype not in FLASH_ATTN_KV_CACHE_DTYPES:
            raise _refused(x, f"vLLM 0.33.0's FLASH_ATTN backend (its first choice on Hopper) stores "
                              f"{', '.join(FLASH_ATTN_KV_CACHE_DTYPES)}", "FLASHINFER, then TRITON_ATTN")  # fmt: skip
        if x.kind == "mla" and not own_backend and _flashmla(x) and flashmla is None:
            flashmla = x
    if flashmla is None:
        return engine.block_size
    if engine.block_size not in (VLLM_DEFAULT_BLOCK_SIZE, FLASHMLA_BLOCK_SIZE):
        raise _refused(flashmla, f"--block-size {engine.block_size} precludes vLLM 0.33.0's FLASHMLA backend "
                                 f"(its Hopper choice for this dtype: {FLASHMLA_BLOCK_SIZE}-token kernel blocks)",
                       "FLASHINFER_MLA and TRITON_MLA")  # fmt: skip
    if any(x.kind == "mamba" for x in layers):
        raise ConfigError(f"kv_cache_dtype {flashmla.kv_cache_dtype!r} on layer {flashmla.name}: vLLM 0.33.0 stores it "
                          f"with FLASHMLA ({FLASHMLA_BLOCK_SIZE}-token kernel blocks), whose hybrid block-size alignment "
                          "beside state layers kvbudget has not checked", "kv_cache_dtype")  # fmt: skip
    return FLASHMLA_BLOCK_SIZE


def kv_cache_layout(layers: Sequence[LayerSpec], requested: str | None = None) -> str:
    """The KV-cache layout vLLM 0.33.0's engine core resolves for ``layers``
    (``resolve_kv_cache_layout``), for :attr:`EngineConfig.kv_cache_layout`: the first layout of
    the backends' declared sets, else ``LBNHC``, vLLM's default preference. Of the backends
    kvbudget plans, only Qwen4-Exp's QSA state caches declare one (``BLNHC``, then ``BLHNC``);
    ``requested`` (``VLLM_KV_CACHE_LAYOUT``) must be one of them there, as vLLM requires.

    Raises:
        ConfigError: ``requested`` is not among a declared set's layouts (vLLM's ``ValueError``).
    """
    from kvbudget.vllm.glm5_next import TAIL_KV_CACHE_LAYOUTS, glm5_next_kv_cache_layout
    from kvbudget.vllm.qwen4_exp import QSA_KV_CACHE_LAYOUTS, qwen4_exp_kv_cache_layout

    declared = [s for s, on in ((QSA_KV_CACHE_LAYOUTS, qwen4_exp_kv_cache_layout(layers) != "LBNHC"),
                                (TAIL_KV_CACHE_LAYOUTS, glm5_next_kv_cache_layout(layers) != "LBNHC")) if on]
    valid = [x for x in declared[0] if all(x in s for s in declared)] if declared else ["LBNHC"]
    if requested is None:
        return valid[0] if valid else declared[0][0]
    if declared and requested not in valid:
        raise ConfigError(f"vLLM 0.33.0 refuses it: ValueError: VLLM_KV_CACHE_LAYOUT={requested} does not satisfy "
                          f"every supported set; valid layouts: {valid}.", "kv_cache_layout")
    return requested

