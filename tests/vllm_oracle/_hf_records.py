"""The oracle's record of one attention layer's KV-cache spec (:mod:`._hf`): restated glue.

A spec's kind follows the attention class (``MLAAttention`` -> mla, ``ChunkedLocalAttention`` ->
chunked, ``Attention`` -> sliding iff its ``sliding_window`` is set; Kimi's own MLA layer ->
mla); encoder-only and KV-sharing layers get none.
"""

from __future__ import annotations

from typing import Any

from ._hf_tables import _KIMI_MLA
from ._hf_tables_inkling import inkling_record
from ._hf_tables_minimax_m3 import minimax_m3_record


def attention_record(env: Any, name: str, layer: Any, is_draft: bool, rank: int,
                     model_dtype: Any) -> dict[str, Any] | None:  # fmt: skip
    """The spec fields of the attention layer ``layer`` registered as ``name`` on PP stage ``rank``
    (None: it gets no spec). ``kv_cache_dtype`` is what the layer keeps (``Attention``: its
    ``cache_config``'s, or ``"auto"`` for a layer built without one; None for MLA). Inkling's
    layers: their own specs (:func:`._hf_tables_inkling.inkling_record`, ``model_dtype`` the
    model config's torch dtype), with their block size."""
    inkling = inkling_record(layer, model_dtype)
    if inkling is not None:
        return {"name": name, **inkling, "is_draft": is_draft, "pp_stage": rank}
    minimax = minimax_m3_record(layer)  # MiniMax-M3's sparse layers and indexer caches, with their backend
    if minimax is not None:
        return {"name": name, **minimax, "is_draft": is_draft, "pp_stage": rank}
    if isinstance(layer, env.models[_KIMI_MLA]["MultiHeadLatentAttention"]):
        # Kimi's own MLA layer: MLAAttentionSpec with one KV head of its latent size
        return {"name": name, "kind": "mla", "num_kv_heads": 1, "head_size": layer.head_size,
                "head_size_v": env.mla_head_size_v, "sliding_window": None, "attention_chunk_size": None,
                "kv_cache_dtype": None, "is_draft": is_draft, "pp_stage": rank}  # fmt: skip
    if isinstance(layer, env.models["deepseek_v2"]["DeepseekV32IndexerCache"]):
        # DeepseekV32IndexerCache.get_kv_cache_spec: MLAAttentionSpec(num_kv_heads=1, head_size=head_dim,
        # dtype=self.dtype, cache_role=INDEXER); the planner's mla_indexer kind stores uint8 rows
        assert layer.dtype == env.models["deepseek_v2"]["torch"].uint8, layer.dtype
        return {"name": name, "kind": "mla_indexer", "num_kv_heads": 1, "head_size": layer.head_dim,
                "head_size_v": None, "sliding_window": None, "attention_chunk_size": None,
                "kv_cache_dtype": None, "is_draft": is_draft, "pp_stage": rank}  # fmt: skip
    if isinstance(layer, env.attn["MLAAttention"]):
        kind = "mla"
    elif isinstance(layer, env.attn["CrossAttention"]):
        kind = "cross"  # CrossAttention.get_kv_cache_spec: a CrossAttentionSpec of its heads and head size
    elif layer.kv_sharing_target_layer_name is not None or layer.attn_type != env.attn["AttentionType"].DECODER:
        return None  # no spec: shares another layer's KV, or encoder-only
    elif isinstance(layer, env.attn["ChunkedLocalAttention"]):
        kind = "chunked"
    else:
        kind = "sliding" if layer.sliding_window is not None else "full"
    return {
        "name": name, "kind": kind, "num_kv_heads": layer.num_kv_heads, "head_size": layer.head_size,
        # MLA: MLAAttentionSpec's own; chunked and cross: the spec passes none (so head_size)
        "head_size_v": env.mla_head_size_v if kind == "mla" else
        layer.head_size if kind in ("chunked", "cross") else layer.head_size_v,
        "sliding_window": layer.sliding_window if kind in ("sliding", "mla") else None,
        "attention_chunk_size": layer.attention_chunk_size if kind == "chunked" else None,
        "kv_cache_dtype": None if kind == "mla" else layer.kv_cache_dtype,
        "is_draft": is_draft, "pp_stage": rank,
    }  # fmt: skip
