"""vLLM 0.33.0's DeepSeek-V4 (``DeepseekV4ForCausalLM``, ``vllm/models/deepseek_v4``: on CUDA its
``nvidia/model.py``, ``attention.py``, ``compressor.py``, ``nvidia/flashmla.py``, and
``v1/attention/backends/mla/sparse_swa.py``): read cache by cache, then refused, because kvbudget's
planner does not model what these caches need.

vLLM loads ``model_type`` ``deepseek_v4`` with transformers 5.19.0's own ``DeepseekV4Config`` (vLLM has
no class of its own for it) and accepts that class's defaults: 43 layers, ``layer_types`` alternating
``heavily_compressed_attention`` (``compress_rates``: 128) and ``compressed_sparse_attention`` (4), 64
heads of ``head_dim`` 512, a 128-token window. On a Hopper GPU, with no ``--attention-backend``,
``_select_dsv4_attn_cls`` picks ``DeepseekV4FlashMLAAttention`` (FlashMLA sparse; fp8_ds_mla pages),
whose ``_resolve_dsv4_kv_cache_dtype`` stores every ``fp8*`` and ``auto`` KV dtype as ``fp8_ds_mla``
(written back to the cache config) and refuses the rest. Each decoder layer ``model.layers.<i>``
registers, in this order (``compress_ratio = max(1, compress_rates[layer_types[i]])``):

* ratio 4 only, its indexer: ``.attn.indexer.k_cache`` (``DeepseekV4IndexerCache``: an
  ``MLAAttentionSpec`` of one uint8 head of ``index_head_dim + index_head_dim // 128 * 4`` bytes,
  ``tokens_per_state`` 4, the engine's block, ``alignment`` 576) and ``.attn.indexer.compressor.state_cache``
  (``CompressorStateCache``: a ``SlidingWindowMLASpec`` of one float32 head of ``4 * index_head_dim``,
  block 4, window 8, alignment 576);
* ``.attn.swa_cache`` (``DeepseekV4SWACache``: a ``SlidingWindowMLASpec`` of one uint8 head of
  ``head_dim``, 584-byte states, block 64, window ``sliding_window``, alignment 576, ``model_version``
  ``deepseek_v4``, ``cache_dtype_str`` ``fp8_ds_mla``);
* ``.attn`` (ratio above 1 only: ``DeepseekV4Attention.get_kv_cache_spec``, an ``MLAAttentionSpec`` of
  one uint8 head of ``head_dim``, 584-byte states, ``tokens_per_state`` the ratio, the engine's block,
  alignment 576, ``model_version`` ``deepseek_v4``);
* ratio above 1: ``.attn.compressor.state_cache`` (a ``SlidingWindowMLASpec`` of one float32 head of
  ``2 * coff * head_dim``, ``coff`` 2 at ratio 4 else 1; block 4 and window 8 at ratio 4, block 8 and
  window 128 at ratio 128; alignment 576). Ratios other than 1, 4 and 128 fail its assert.

A page is ``block_size / tokens_per_state`` states of the state size, rounded up to the alignment
(``page_size_padded``, set where the rounding changes it). The engine's block is vLLM's own choice after
the model is built (``update_block_size_for_backend``): the FlashMLA and indexer backends take 256-token
blocks only, so 256 (kvbudget's default ``block_size`` 16 is read as "not given"; a multiple of 256 is
taken as given; anything else is refused as unchecked). The indexer's backend declares the block-outer
layouts ``BLHNC`` then ``BLNHC``, so a model with a ratio-4 layer is planned block-outer (grouping case
3). The MTP layers are a drafter's, not read.

What kvbudget's planner lacks (so :func:`deepseek_v4_layers` refuses by name after reading): a
``SlidingWindowMLASpec`` kind (a window on an MLA-format cache, with its own block size); an MLA page
given by ``state_content_bytes`` (584) rather than the head size; a page rounded up to ``alignment``
(576); and the MLA ``merge`` rules over ``model_version``, ``cache_role`` (an indexer cache is
``SPARSE`` here, unlike DeepSeek-V3.2's) and ``tokens_per_state``. :func:`deepseek_v4_caches` gives the
caches vLLM registers, field by field; ``tests/test_vllm_deepseek_v4.py`` holds them to vLLM's classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kvbudget.models.hf import ConfigError
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import refused

__all__ = ["DEEPSEEK_V4", "DEEPSEEK_V4_BLOCK_SIZE", "DeepseekV4Cache", "deepseek_v4_caches", "deepseek_v4_layers"]

DEEPSEEK_V4: Final = "DeepseekV4ForCausalLM"
#: The block vLLM picks for DeepSeek-V4 on Hopper (its FlashMLA and indexer backends' only kernel block).
DEEPSEEK_V4_BLOCK_SIZE: Final = 256
_FP8_DS_MLA_STATE: Final = 584  # 448 NoPE fp8 + 64 RoPE bf16 + 8 scale bytes per token
_ALIGNMENT: Final = 576
_SWA_BLOCK: Final = 64
#: transformers 5.19.0's ``DeepseekV4Config`` defaults of the keys read here (``layer_types`` is required).
_DEFAULTS: Final[Mapping[str, Any]] = {
    "num_hidden_layers": 43, "num_attention_heads": 64, "head_dim": 512, "sliding_window": 128,
    "index_head_dim": 128, "hidden_act": "silu", "n_shared_experts": 1,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}}  # fmt: skip
_DTYPE_BYTES: Final = {"uint8": 1, "float32": 4}


@dataclass(frozen=True)
class DeepseekV4Cache:
    """One cache a DeepSeek-V4 worker registers: its layer fields (:class:`LayerSpec`: kind ``"mla"``, one
    head, a window on the ``SlidingWindowMLASpec`` ones) and the spec fields vLLM adds, which kvbudget's
    planner does not take (sizes in bytes where named so)."""

    layer: LayerSpec
    #: vLLM's spec class: ``"MLAAttentionSpec"`` or ``"SlidingWindowMLASpec"``.
    spec: str
    #: The storage dtype, torch's name (``"uint8"``, ``"float32"``).
    dtype: str
    #: vLLM's ``KVQuantMode`` name (``"FP8_PER_TENSOR"`` for fp8_ds_mla, else ``"NONE"``).
    kv_quant_mode: str
    #: The page's byte granule (``alignment``), bytes.
    alignment: int | None
    #: One state's bytes where the dtype does not give them (fp8_ds_mla's 584), bytes.
    state_content_bytes: int | None
    #: ``model_version`` (``"deepseek_v4"`` on the latent caches).
    model_version: str | None
    #: ``cache_dtype_str`` (``"fp8_ds_mla"`` on the latent caches).
    cache_dtype_str: str | None
    max_tp_shards: int = 1
    block_stride_alignment: int | None = None

    @property
    def name(self) -> str:
        """The layer's name."""
        return self.layer.name

    @property
    def unpadded_page_size_bytes(self) -> int:
        """``block_size / tokens_per_state`` states of ``state_content_bytes`` (else the head's bytes)."""
        x = self.layer
        content = self.state_content_bytes or x.head_size * _DTYPE_BYTES[self.dtype]
        return x.num_kv_heads * ((x.block_size or 0) // x.tokens_per_state) * content

    @property
    def page_size_padded(self) -> int | None:
        """The page rounded up to :attr:`alignment`, where that changes it (vLLM's ``_apply_alignment_padding``)."""
        page = self.unpadded_page_size_bytes
        padded = -(-page // self.alignment) * self.alignment if self.alignment else page
        return padded if padded != page else None

    @property
    def page_size_bytes(self) -> int:
        """vLLM's ``page_size_bytes``, bytes per block."""
        return self.page_size_padded or self.unpadded_page_size_bytes


def _cache(name: str, stage: int, spec: str, dtype: str, quant: str, block: int, head: int, per_state: int,
           window: int | None, content: int | None = None, version: str | None = None,
           cache_dtype: str | None = None) -> DeepseekV4Cache:  # fmt: skip
    """One cache of one latent head (no V part), ``per_state`` tokens a state, every one at :data:`_ALIGNMENT`."""
    layer = LayerSpec(name, "mla", 1, head, head_size_v=0, block_size=block, sliding_window=window,
                      tokens_per_state=per_state, pp_stage=stage)  # fmt: skip
    return DeepseekV4Cache(layer, spec, dtype, quant, _ALIGNMENT, content, version, cache_dtype)


def _int(c: Mapping[str, Any], key: str) -> int:
    value = c[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"config.json: key '{key}' must be a positive integer, not {value!r}", key)
    return value


def _config(cfg: Mapping[str, Any], engine: EngineConfig) -> dict[str, Any]:
    """The loaded config (transformers' defaults filled in), or what kvbudget has not checked refused."""
    if cfg.get("model_type") != "deepseek_v4":
        raise ConfigError(f"config.json: kvbudget reads vLLM 0.33.0's {DEEPSEEK_V4} on transformers' deepseek_v4 "
                          f"config class, not model_type {cfg.get('model_type')!r}", "model_type")  # fmt: skip
    for key, what in (("quantization_config", "quantized checkpoints"), ("vision_n_layers", "the vision variant")):
        if cfg.get(key):
            raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's DeepSeek-V4 {what}", key)
    if engine.speculative_method is not None:
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's drafters on {DEEPSEEK_V4}",
                          "architectures")  # fmt: skip
    c = {**_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    kinds, rates = c.get("layer_types"), c["compress_rates"]
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise ConfigError("config.json: kvbudget reads DeepSeek-V4 configs that list layer_types", "layer_types")
    if not isinstance(rates, Mapping) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                 for v in rates.values()):  # fmt: skip
        raise ConfigError("config.json: key 'compress_rates' must map layer types to integers", "compress_rates")
    if len(kinds) < _int(c, "num_hidden_layers"):
        raise refused("IndexError: list index out of range (config.layer_types[layer_id])", "layer_types")
    return c


def _kv_dtype(kv_cache_dtype: str) -> str:
    """``_resolve_dsv4_kv_cache_dtype`` on the fp8_ds_mla layout (FlashMLA)."""
    if kv_cache_dtype == "auto" or kv_cache_dtype.startswith("fp8"):
        return "fp8_ds_mla"
    raise refused(f"ValueError: DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {kv_cache_dtype}. Please "
                  "set `--kv-cache-dtype fp8` or select a backend that supports bfloat16 KV cache.",
                  "kv_cache_dtype")  # fmt: skip


def _compressor(name: str, ratio: int, head_dim: int, stage: int) -> DeepseekV4Cache:
    """``DeepseekCompressor``'s head-dim check and its ``CompressorStateCache``."""
    if ratio not in (4, 128):
        raise refused("AssertionError: assert compress_ratio in [4, 128] (CompressorStateCache)", "compress_rates")
    if head_dim not in (512, 128):
        raise refused(f"ValueError: Unsupported head_dim for fused quant+cache: {head_dim}", "head_dim")
    coff = 2 if ratio == 4 else 1
    return _cache(f"{name}.state_cache", stage, "SlidingWindowMLASpec", "float32", "NONE", 4 if ratio == 4 else 8,
                  2 * coff * head_dim, 1, coff * ratio)


def _block_size(engine: EngineConfig) -> int:
    if engine.block_size == 16:  # kvbudget's default: not given; vLLM picks the backends' block
        return DEEPSEEK_V4_BLOCK_SIZE
    if engine.block_size % DEEPSEEK_V4_BLOCK_SIZE:
        raise ConfigError(f"block_size={engine.block_size}: kvbudget has not checked vLLM 0.33.0's DeepSeek-V4 "
                          f"outside multiples of {DEEPSEEK_V4_BLOCK_SIZE} tokens", "block_size")  # fmt: skip
    return engine.block_size


def deepseek_v4_caches(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str = "auto",
                       model_dtype: str = "bfloat16") -> list[DeepseekV4Cache]:  # fmt: skip
    """The caches vLLM 0.33.0 registers for a DeepSeek-V4 config on a Hopper GPU, per PP stage in
    registration order (see the module doc; ``model_dtype`` changes none of them).

    Raises:
        ConfigError: what vLLM's classes refuse (their checks, in their order), or what kvbudget has not
            checked (drafters, quantized or vision checkpoints, another model type, a block size).
    """
    del model_dtype
    c = _config(cfg, engine)
    n, heads, tp = _int(c, "num_hidden_layers"), _int(c, "num_attention_heads"), engine.tp
    head_dim, index_dim = _int(c, "head_dim"), _int(c, "index_head_dim")
    block = _block_size(engine)
    out: list[DeepseekV4Cache] = []
    dtype = ""
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            name = f"model.layers.{i}.attn"
            if heads % tp:
                raise refused("AssertionError: assert self.n_heads % tp_size == 0", "num_attention_heads")
            ratio = max(1, c["compress_rates"].get(c["layer_types"][i], 0))
            if heads // tp > 128:
                raise refused(f"ValueError: DeepseekV4 FlashMLA does not support {heads // tp} heads (FP8 decode "
                              "kernel requires h_q in {64, 128}).", "num_attention_heads")  # fmt: skip
            if ratio == 4:
                out.append(_cache(f"{name}.indexer.k_cache", stage, "MLAAttentionSpec", "uint8", "NONE", block,
                                  index_dim + index_dim // 128 * 4, 4, None))
                out.append(_compressor(f"{name}.indexer.compressor", 4, index_dim, stage))
            dtype = _kv_dtype(kv_cache_dtype)
            out.append(_cache(f"{name}.swa_cache", stage, "SlidingWindowMLASpec", "uint8", "FP8_PER_TENSOR", _SWA_BLOCK,
                              head_dim, 1, _int(c, "sliding_window"), _FP8_DS_MLA_STATE, "deepseek_v4", dtype))
            if ratio > 1:
                out.append(_cache(name, stage, "MLAAttentionSpec", "uint8", "FP8_PER_TENSOR", block, head_dim, ratio,
                                  None, _FP8_DS_MLA_STATE, "deepseek_v4", dtype))
                out.append(_compressor(f"{name}.compressor", ratio, head_dim, stage))
            if c["n_shared_experts"] is not None and c["hidden_act"] != "silu":  # DeepseekV4MLP
                raise refused(f"ValueError: Unsupported activation: {c['hidden_act']}. Only silu is supported for now.",
                              "hidden_act")  # fmt: skip
    return out


def deepseek_v4_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                       disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """Reads the caches (:func:`deepseek_v4_caches`: vLLM's refusals come first), then refuses: kvbudget's
    planner does not model them.

    Raises:
        ConfigError: always.
    """
    del disable_sliding_window  # vLLM's DeepSeek-V4 window caches ignore it
    caches = deepseek_v4_caches(cfg, engine, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype)
    windows = sum(x.spec == "SlidingWindowMLASpec" for x in caches)
    raise ConfigError(f"config.json: kvbudget has not modelled vLLM 0.33.0's DeepSeek-V4 KV caches: {windows} of its "
                      f"{len(caches)} caches are SlidingWindowMLASpec (a window on an MLA cache, with its own block), "
                      f"and its MLA pages hold {_FP8_DS_MLA_STATE}-byte fp8_ds_mla states rounded up to {_ALIGNMENT} "
                      "bytes", "architectures")  # fmt: skip
