"""The attention backends kvbudget's vLLM mode plans for, and the KV dtypes that would take vLLM elsewhere.

vLLM 0.33.0 picks each attention layer's backend per GPU, walking a priority list
(``platforms/cuda.py``, ``_get_backend_priorities``) and taking the first backend that stores the
layer's ``--kv-cache-dtype`` (``supported_kv_cache_dtypes``) among its other checks. The backend
decides the page's packing (FlashInfer's NVFP4 head slots and block scales, Triton's per-token-head
scales) and its kernel block sizes (FLASHMLA's 64-token blocks, which the platform then makes the
engine's block size). kvbudget's planner restates the packing and block sizes of the backends vLLM
tries first on Hopper (sm90): ``FLASH_ATTN`` for attention layers, ``FLASH_ATTN_MLA`` for MLA
layers. A KV dtype neither stores sends vLLM to a backend kvbudget does not model, so
:func:`check_backends` refuses it, naming the backend's reason, rather than answer differently.

Layers whose readers fix their own backend are not checked here: DeepSeek sparse attention
(:mod:`kvbudget.vllm.dsa`, a model with ``mla_indexer`` layers: its sparse MLA backend and formats)
and MiniMax-M3's sparse layers (``key_indexer`` models). State layers have no attention backend.
Only the KV dtype is checked: a head size the first backend does not take also moves vLLM on, to a
backend whose pages hold the same bytes for the dtypes above at a block of 16 tokens (FlashInfer,
Triton), but whose kernel block sizes split larger sliding-window blocks; kvbudget does not check
that case. ``tests/test_vllm_backends.py`` holds the tables below to the wheel's classes and
priority lists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.planner import LayerSpec

__all__ = ["FLASH_ATTN_KV_CACHE_DTYPES", "FLASH_ATTN_MLA_KV_CACHE_DTYPES", "check_backends"]

#: ``FlashAttentionBackend.supported_kv_cache_dtypes`` (``v1/attention/backends/flash_attn.py``):
#: what vLLM's first attention backend on Hopper stores.
FLASH_ATTN_KV_CACHE_DTYPES: Final[tuple[str, ...]] = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3")
#: ``FlashAttnMLABackend.supported_kv_cache_dtypes`` (``v1/attention/backends/mla/flashattn_mla.py``):
#: what vLLM's first MLA backend on Hopper stores.
FLASH_ATTN_MLA_KV_CACHE_DTYPES: Final[tuple[str, ...]] = ("auto", "float16", "bfloat16")
#: Where vLLM goes next on Hopper, for the message (``_get_backend_priorities``, sm90).
_NEXT: Final = {"FLASH_ATTN": "FLASHINFER, then TRITON_ATTN", "FLASH_ATTN_MLA": "FLASHMLA (64-token kernel blocks), "
                "then FLASHINFER_MLA and TRITON_MLA"}  # fmt: skip
_ATTENTION_KINDS: Final = frozenset({"full", "sliding", "chunked", "cross"})


def check_backends(layers: Sequence[LayerSpec]) -> None:
    """Refuses a layer whose KV dtype vLLM 0.33.0's first backend on Hopper does not store.

    Args:
        layers: a model's layers (:func:`kvbudget.vllm.layers_from_hf_config`), drafter included.

    Raises:
        ConfigError: the first such layer, with the backend vLLM would try next.
    """
    own_backend = any(x.kind in ("mla_indexer", "key_indexer") for x in layers)
    for x in layers:
        if x.kind in _ATTENTION_KINDS:
            backend, stored = "FLASH_ATTN", FLASH_ATTN_KV_CACHE_DTYPES
        elif x.kind == "mla" and not own_backend:
            backend, stored = "FLASH_ATTN_MLA", FLASH_ATTN_MLA_KV_CACHE_DTYPES
        else:
            continue
        if x.kv_cache_dtype not in stored:
            raise ConfigError(f"kv_cache_dtype {x.kv_cache_dtype!r} on layer {x.name}: vLLM 0.33.0's {backend} backend "
                              f"(its first choice on Hopper) stores {', '.join(stored)}; for this dtype vLLM moves on "
                              f"to {_NEXT[backend]}, whose packing and kernel block sizes kvbudget does not model",
                              "kv_cache_dtype")  # fmt: skip
