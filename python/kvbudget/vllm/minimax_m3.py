"""vLLM 0.33.0's MiniMax-M3 (``MiniMaxM3SparseForConditionalGeneration``, and its text model
``MiniMaxM3SparseForCausalLM``): dense GQA layers beside block-sparse layers with a lightning indexer.

The config is vLLM's own ``MiniMaxM3Config`` (``transformers_utils/configs/minimax_m3.py``, registered
for ``minimax_m3_vl`` over transformers' ``MiniMaxM3VLConfig``): its ``text_config`` is loaded by
vLLM's ``MiniMaxM3TextConfig`` (the class's defaults where a key is absent; the whole default text
model, 60 layers, where ``text_config`` is; a flat config's own keys are never read). That class keeps
``sparse_attention_config`` and ``moe_layer_freq`` as written (null: its 60-layer defaults) and
``hidden_act`` too. transformers' class drops the first two (into its ``index_*`` keys and
``layer_types``, which vLLM does not read) and rewrites ``hidden_act`` to ``silu``, so vLLM refuses a
config transformers saved (the MLP check below).

Loading it, transformers' ``PreTrainedConfig`` validates the text config's ``layer_types`` and
``mlp_layer_types`` (which transformers' class writes and vLLM never reads): their kinds, and their
length against ``num_hidden_layers`` (vLLM's default of 60 where the key is absent).

The model (``vllm/models/minimax_m3``, NVIDIA ``model.py``; ``SupportsPP``): the wrapper asserts its text
``hidden_size`` is set (vLLM's ``ModelConfig`` has refused a null one before), builds its vision tower
(no KV; not read here) and its text model with ``init_vllm_registered_model(hf_config=config.text_config,
prefix="language_model", architectures=["MiniMaxM3SparseForCausalLM"])``; ``MiniMaxM3SparseForCausalLM`` (served alone for a
``minimax_m3_vl`` config naming it) builds ``MiniMaxM3Model`` at ``model``. The model subscripts
``sparse_attention_config``'s ``sparse_num_index_heads`` and ``sparse_topk_blocks`` (its top-k buffer),
then builds its decoder layers (split by ``get_pp_indices``), each:

* its attention. A layer whose ``sparse_attention_freq`` entry is nonzero is a
  ``MiniMaxM3SparseAttention``, which registers, in this order, its indexer's key cache
  ``<prefix>.self_attn.attn.index_cache`` (``MiniMaxM3IndexerCache``: an ``MLAAttentionSpec`` of one head
  of ``sparse_index_dim`` in the indexer's dtype, ``cache_role=INDEXER``, no TP-shard cap: the
  planner's ``key_indexer`` kind) and its own main K/V cache ``<prefix>.self_attn.attn`` (a
  ``FullAttentionSpec`` of its heads in the KV dtype); the others are ``MiniMaxM3Attention``, a plain
  ``Attention`` there (which also asserts its per-rank heads are a multiple of its KV heads). Both
  assert that ``tp`` divides ``num_attention_heads`` and that the KV heads and ``tp`` divide one another,
  and keep ``max(1, num_key_value_heads // tp)`` KV heads of ``head_dim``;
* its FFN: a MoE block where ``moe_layer_freq`` says so (an ``IndexError`` past the list's end), which
  refuses ``tp`` above ``num_local_experts`` and builds a shared expert when ``n_shared_experts`` is set;
  else a dense MLP. Every MLP refuses a ``hidden_act`` other than ``swigluoai``.

At startup the indexer's metadata builder asserts that ``sparse_num_index_heads`` and ``tp`` divide one
another.

What the GPU decides and kvbudget fixes (CUDA, Hopper or Blackwell data-centre parts), on a model with a
sparse layer:

* **Block size.** The sparse backends (``MINIMAX_M3_SPARSE``, its Blackwell MSA subclasses, and
  ``MINIMAX_M3_SPARSE_INDEXER``) take 128-token kernel blocks only, so with no ``--block-size`` the
  platform (``update_block_size_for_backend``, which each worker runs over its own layers) picks 128 on a
  stage holding a sparse layer: every layer of such a stage carries ``block_size=128`` here (a stage
  without one keeps the engine's 16). A ``block_size`` that is a multiple of 128 is vLLM's block (the
  kernels run 128-token blocks inside it); any other is refused, as vLLM's worker refuses it
  (``select_common_block_size``). vLLM's default 16 is read as "not set" (given explicitly, vLLM refuses it).
* **KV dtype.** The main cache's impl is chosen per GPU (Triton on Hopper; on Blackwell MSA for 4, 8, 16 or
  32 top-k blocks); kvbudget plans ``auto``, ``bfloat16``, ``fp8`` and ``fp8_e4m3``, which every one of
  them stores in the spec vLLM's planner prices and FLASH_ATTN (the dense layers') stores too. ``nvfp4``
  is refused: only Blackwell's MSA takes it, and its backend repacks the page (each head's K and V as two
  slots of ``head_size / 2 + head_size / 16`` bytes: 144 a head and token at 128, where the planner counts
  256). The other dtypes are refused as unchecked.
* **Indexer dtype.** ``--attention-config``'s ``indexer_kv_dtype`` (default ``"auto"``: bf16; ``fp8``: e4m3
  rows) is not an input here: the bf16 rows are planned.

A model without a sparse layer is plain attention (the engine's block size, any KV dtype). Not read
(refused): drafters (MiniMax-M3's MTP, EAGLE-3; refused by :mod:`kvbudget.vllm.named`), decode context
parallelism on a sparse model, and a config whose ``model_type`` is not ``minimax_m3_vl``. Not checked,
as for the other multimodal wrappers: the vision tower vLLM builds first, which reads
``vision_config.img_token_compression_config`` (transformers' class writes none) and shards the
vision heads over ``tp``. Held to vLLM's classes by ``tests/test_vllm_minimax_m3.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.backends import VLLM_DEFAULT_BLOCK_SIZE
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.refusal import gqa_per_rank, refused, split_unevenly

__all__ = ["MINIMAX_M3", "MINIMAX_M3_BLOCK_SIZE", "MINIMAX_M3_KV_CACHE_DTYPES", "MINIMAX_M3_TEXT",
           "minimax_m3_layers"]  # fmt: skip

#: The multimodal wrapper (the checkpoints' architecture).
MINIMAX_M3: Final = "MiniMaxM3SparseForConditionalGeneration"
#: Its text model, served alone for a ``minimax_m3_vl`` config that names it.
MINIMAX_M3_TEXT: Final = "MiniMaxM3SparseForCausalLM"
#: Tokens per block: the sparse backends' only kernel block size.
MINIMAX_M3_BLOCK_SIZE: Final = 128
#: The ``--kv-cache-dtype`` values kvbudget plans on a model with a sparse layer.
MINIMAX_M3_KV_CACHE_DTYPES: Final = ("auto", "bfloat16", "fp8", "fp8_e4m3")
#: The indexer cache's rows: ``indexer_kv_dtype`` "auto" resolves to bf16 (torch's name).
_INDEXER_DTYPE: Final = "bfloat16"
_FIRST_DENSE: Final = [0] * 3 + [1] * 57  # MiniMaxM3TextConfig's per-layer default of both lists
#: ``MiniMaxM3TextConfig``'s defaults of the keys read here (null lists and sparse config: its own).
_DEFAULTS: Final[Mapping[str, Any]] = {
    "hidden_size": 6144, "num_hidden_layers": 60, "num_attention_heads": 64, "num_key_value_heads": 4,
    "head_dim": 128, "hidden_act": "swigluoai", "num_local_experts": 128, "n_shared_experts": 1,
    "moe_layer_freq": _FIRST_DENSE,
    "sparse_attention_config": {"sparse_index_dim": 128, "sparse_num_index_heads": 4, "sparse_topk_blocks": 16,
                                "sparse_block_size": 128, "sparse_attention_freq": _FIRST_DENSE},
}  # fmt: skip
_SPARSE_KEY: Final = "text_config.sparse_attention_config"
#: transformers 5.19.0's layer kinds (``ALLOWED_ATTN_LAYER_TYPES``, ``ALLOWED_MLP_LAYER_TYPES``) and the
#: legacy attention names it remaps first (``_LEGACY_LAYER_TYPE_REMAP``): ``PreTrainedConfig``'s
#: ``validate_layer_type`` holds vLLM's ``MiniMaxM3TextConfig`` to them.
_HF_KINDS: Final = {
    "layer_types": ("full_attention", "sliding_attention", "chunked_attention", "window_attention", "indexed_attention",
                    "compressed_sparse_attention", "heavily_compressed_attention", "minimax_m3_sparse", "conv", "moe",
                    "hybrid", "hybrid_sliding", "linear_attention"),
    "mlp_layer_types": ("sparse", "dense"),
}  # fmt: skip
_HF_LEGACY: Final = {"mamba": "linear_attention", "attention": "full_attention",
                     "deepseek_sparse_attention": "indexed_attention", "qwen_sparse_attention": "indexed_attention"}


def _text(cfg: Mapping[str, Any]) -> _View:
    """``MiniMaxM3Config``'s text config: the file's ``text_config`` over the class's defaults."""
    if cfg.get("model_type") != "minimax_m3_vl":
        raise ConfigError(f"config.json: kvbudget reads {cfg['architectures'][0]} in a minimax_m3_vl config (vLLM's "
                          f"MiniMaxM3Config), not model_type {cfg.get('model_type')!r}", "model_type")  # fmt: skip
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, Mapping):
        raise refused(f"AttributeError: MiniMaxM3Config reads text_config.hidden_size of a {type(text).__name__}",
                      "text_config")  # fmt: skip
    given = {k: v for k, v in (text or {}).items() if v is not None or k not in ("moe_layer_freq",
                                                                                  "sparse_attention_config")}
    v = _View({"text_config": {**_DEFAULTS, **given, "model_type": "minimax_m3_text"}}, engine="vllm")
    _validate_layer_types(v)
    return v


def _validate_layer_types(v: _View) -> None:
    """transformers' ``validate_layer_type`` on the loaded text config: vLLM never reads these lists
    (transformers' class writes them), but its class refuses kinds or counts that are off (stopping at
    the first list that is absent, as transformers does)."""
    n = v.raw("num_hidden_layers")
    for key, allowed in _HF_KINDS.items():
        kinds = v.raw(key)
        if kinds is None:
            return
        if not isinstance(kinds, list):
            raise v.fail(key, f"must be a list, not {type(kinds).__name__}")
        if key == "layer_types":
            kinds = [_HF_LEGACY.get(k, k) if isinstance(k, str) else k for k in kinds]
        if not all(k in allowed for k in kinds):
            raise refused(f"ValueError: The `{key}` entries must be in {allowed} but got {kinds} (transformers 5.19.0's "
                          "validate_layer_type)", v.name(key))  # fmt: skip
        if n is not None and n != len(kinds):
            raise refused(f"ValueError: `num_hidden_layers` ({n}) must be equal to the number of `{key}` "
                          f"({len(kinds)}) (transformers 5.19.0's validate_layer_type)", v.name(key))  # fmt: skip


def _subscript(sparse: Mapping[str, Any], key: str) -> int:
    """``sparse_attention_config[key]``: vLLM's ``KeyError`` when absent, a positive integer here."""
    if key not in sparse:
        raise refused(f"KeyError: {key!r} (text_config.sparse_attention_config)", _SPARSE_KEY)
    value = sparse[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"config.json: key '{_SPARSE_KEY}.{key}' must be a positive integer, not {value!r}",
                          f"{_SPARSE_KEY}.{key}")  # fmt: skip
    return value


def _sparse_layers(sparse: Mapping[str, Any]) -> set[int]:
    """``_sparse_attention_layer_ids``: the layers whose ``sparse_attention_freq`` entry is nonzero."""
    freq = sparse.get("sparse_attention_freq")
    if freq is None:
        return set()
    if not isinstance(freq, list):
        raise ConfigError(f"config.json: key '{_SPARSE_KEY}.sparse_attention_freq' must be a list, not "
                          f"{type(freq).__name__}", f"{_SPARSE_KEY}.sparse_attention_freq")  # fmt: skip
    return {i for i, f in enumerate(freq) if f != 0}


def _ffn_checks(v: _View, moe: list[Any], i: int, tp: int) -> None:
    """Layer ``i``'s FFN: the MoE block's TP check and shared expert, or the dense MLP; each MLP's
    activation check."""
    if i >= len(moe):
        raise refused(f"IndexError: list index out of range (moe_layer_freq[{i}])", "text_config.moe_layer_freq")
    mlp = True
    if moe[i] != 0:
        experts = v.req_int("num_local_experts")
        if tp > experts:
            raise refused(f"ValueError: Tensor parallel size {tp} is greater than the number of experts {experts}.",
                          "text_config.num_local_experts")  # fmt: skip
        mlp = bool(v.raw("n_shared_experts"))
    if mlp and v.raw("hidden_act") != "swigluoai":
        raise refused(f"ValueError: Unsupported activation: {v.raw('hidden_act')}. Only swigluoai is supported.",
                      "text_config.hidden_act")  # fmt: skip


def _kv_per_rank(v: _View, tp: int, sparse: bool) -> int:
    """The KV heads one rank keeps, after the attention's asserts (a dense layer's ``Attention`` adds
    its per-rank one)."""
    heads, kv = v.req_int("num_attention_heads"), v.req_int("num_key_value_heads")
    if not sparse:
        return gqa_per_rank(heads, kv, tp, "text_config.num_key_value_heads")
    if heads % tp or split_unevenly(kv, tp):
        raise refused(f"AssertionError: {heads} attention heads and {kv} KV heads over tp={tp} "
                      "(MiniMaxM3SparseAttention)", "text_config.num_attention_heads")  # fmt: skip
    return max(1, kv // tp)


def _check_sparse_engine(engine: EngineConfig, kv_cache_dtype: str, index_heads: int) -> None:
    """What a model with a sparse layer needs of the engine (see the module docstring), and the
    indexer builder's startup asserts."""
    tp = engine.tp
    if split_unevenly(index_heads, tp):
        raise refused(f"AssertionError: MiniMaxM3IndexerMetadataBuilder: the {index_heads} index heads and tp={tp} "
                      "do not divide one another", f"{_SPARSE_KEY}.sparse_num_index_heads")  # fmt: skip
    if kv_cache_dtype == "nvfp4":
        raise ConfigError("kv_cache_dtype 'nvfp4': vLLM 0.33.0 stores it in MiniMax-M3's sparse layers only with "
                          "Blackwell's MSA backend, which repacks the page (two slots a head of head_size / 2 + "
                          "head_size / 16 bytes); kvbudget does not model that packing", "kv_cache_dtype")  # fmt: skip
    if kv_cache_dtype not in MINIMAX_M3_KV_CACHE_DTYPES:
        raise ConfigError(f"kv_cache_dtype {kv_cache_dtype!r}: kvbudget has not checked it in vLLM 0.33.0's MiniMax-M3 "
                          f"sparse layers; it plans {', '.join(MINIMAX_M3_KV_CACHE_DTYPES)}", "kv_cache_dtype")
    if engine.dcp > 1:
        raise ConfigError("dcp: kvbudget has not checked decode context parallelism on vLLM 0.33.0's MiniMax-M3 "
                          "sparse layers", "dcp")  # fmt: skip
    bs = engine.block_size
    if bs != VLLM_DEFAULT_BLOCK_SIZE and bs % MINIMAX_M3_BLOCK_SIZE:
        raise ConfigError(f"block_size {bs}: vLLM 0.33.0 refuses it: ValueError: No common block size for {bs} "
                          f"(MiniMax-M3's sparse backends MINIMAX_M3_SPARSE and MINIMAX_M3_SPARSE_INDEXER take "
                          f"[{MINIMAX_M3_BLOCK_SIZE}])", "block_size")  # fmt: skip


def minimax_m3_layers(cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                      disable_sliding_window: bool) -> list[LayerSpec]:  # fmt: skip
    """The KV-cache layers vLLM 0.33.0 registers for a MiniMax-M3 config (see the module doc), per PP
    stage in registration order (``disable_sliding_window``: no layer has a window).

    Raises:
        ConfigError: what vLLM refuses (its asserts, a missing sparse key, the MLP's activation, the
            MoE's TP check, a block size the sparse backends do not take), or what kvbudget has not
            checked (a KV dtype, decode context parallelism, another ``model_type``).
    """
    v = _text(cfg)
    n = v.req_int("num_hidden_layers", minimum=0)
    if v.raw("hidden_size") is None:  # ModelConfig's, before the wrapper's own assert on it
        raise refused("ValidationError: 1 validation error for ModelArchitectureConfig: hidden_size: Input should be "
                      "a valid integer", "text_config.hidden_size")  # fmt: skip
    sparse = v.raw("sparse_attention_config")
    if not isinstance(sparse, Mapping):
        raise refused(f"TypeError: MiniMaxM3Model subscripts sparse_attention_config, a {type(sparse).__name__}",
                      _SPARSE_KEY)  # fmt: skip
    index_heads = _subscript(sparse, "sparse_num_index_heads")
    _subscript(sparse, "sparse_topk_blocks")
    sparse_ids = _sparse_layers(sparse)
    moe = v.raw("moe_layer_freq")
    if not isinstance(moe, list):
        raise v.fail("moe_layer_freq", f"must be a list, not {type(moe).__name__}")
    prefix = "language_model.model" if cfg["architectures"][0] == MINIMAX_M3 else "model"
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        held = any(i in sparse_ids for i in range(start, end))  # the platform's choice is per worker
        block = MINIMAX_M3_BLOCK_SIZE if held and engine.block_size == VLLM_DEFAULT_BLOCK_SIZE else None
        for i in range(start, end):  # each MiniMaxM3DecoderLayer: its attention, then its FFN
            name = f"{prefix}.layers.{i}.self_attn.attn"
            per_rank, dim = _kv_per_rank(v, engine.tp, i in sparse_ids), v.req_int("head_dim")
            if i in sparse_ids:
                index_dim = _subscript(sparse, "sparse_index_dim")
                _subscript(sparse, "sparse_block_size")
                out.append(LayerSpec(f"{name}.index_cache", "key_indexer", 1, index_dim, indexer_dtype=_INDEXER_DTYPE,
                                     model_dtype=model_dtype, block_size=block, pp_stage=stage))  # fmt: skip
            out.append(LayerSpec(name, "full", per_rank, dim, head_size_v=dim, kv_cache_dtype=kv_cache_dtype,
                                 model_dtype=model_dtype, block_size=block, pp_stage=stage))  # fmt: skip
            _ffn_checks(v, moe, i, engine.tp)
    if sparse_ids & set(range(n)):
        _check_sparse_engine(engine, kv_cache_dtype, index_heads)
    return out
