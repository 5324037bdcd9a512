"""vLLM 0.33.0's DeepSeek sparse attention (DSA): DeepSeek-V3.2, GLM-5 (``GlmMoeDsaForCausalLM``), HunYuan-V4.

DeepSeek-V3.2 and GLM-5 are both served by ``vllm/models/deepseek_v32`` (its ``__init__.py`` names
``nvidia/model.py``'s ``DeepseekV32ForCausalLM`` for both on CUDA). Each decoder layer's
``DeepseekV32Attention`` (``models/deepseek_v32/attention.py``, an ``MLAAttention`` built with
``use_sparse=True``) registers, in this order:

* the indexer's key cache ``model.layers.<i>.self_attn.indexer.k_cache``
  (``DeepseekV32IndexerCache`` from ``model_executor/models/deepseek_v2.py``): an
  ``MLAAttentionSpec`` with ``cache_role=INDEXER``, one head of ``index_head_dim +
  index_head_dim // 128 * 4`` bytes (fp8 keys and one fp32 scale per 128), stored as ``uint8``
  whatever ``--kv-cache-dtype`` says. A layer keeps an indexer unless the IndexCache rule skips it:
  ``index_topk_pattern[i] == "S"``, else (no pattern) ``max(i - offset + 1, 0) % index_topk_freq != 0``
  (``index_skip_topk_offset`` 2 and ``index_topk_freq`` 1 when absent);
* the sparse MLA latent cache ``model.layers.<i>.self_attn.attn``: one head of
  ``kv_lora_rank + qk_rope_head_dim``.

The two MLA specs differ in their cache role, so they never merge: vLLM plans one
``UniformTypeKVCacheSpecs`` group whose block holds every layer's page (the planner's
``mla_indexer`` kind).

What the GPU decides and kvbudget fixes (CUDA, Hopper or Blackwell data-centre parts):

* **Block size.** The indexer's backend (``DEEPSEEK_V32_INDEXER``) takes 64-token kernel blocks
  only, so vLLM's platform picks a block of 64 tokens; every DSA layer here carries
  ``block_size=64``. An engine ``block_size`` other than 64 or vLLM's default 16 (read as "not
  set") is refused: vLLM refuses it too.
* **The latent cache's format.** The sparse MLA backend is chosen per GPU, and it rewrites some KV
  dtypes (``_canonicalize_sparse_mla_kv_cache_dtype``: on Hopper ``FLASHMLA_SPARSE`` stores
  ``fp8`` as ``fp8_ds_mla``; on Blackwell ``FLASHINFER_MLA_SPARSE`` keeps plain ``fp8``). kvbudget
  plans the dtypes no backend rewrites on those parts (``auto``, ``bfloat16``, ``fp8_ds_mla``) and
  refuses the rest.

HunYuan-V4 (``HYV4ForCausalLM``, ``vllm/models/hy_v4``, NVIDIA branch: ``HYV4MLAAttention``) registers
the same two caches, at the same names, on its sparse layers only: a layer whose ``layer_types`` entry
is a sparse kind (``_SPARSE_LAYER_TYPES``) and the config has ``index_topk``; the others are plain MLA.
Of the sparse layers, those ``compute_skip_topk_layers`` names (its ``indexer_types`` ``"shared"``
entries, else the IndexCache rule with a positive integer ``index_topk_freq``) build no indexer. The
per-layer lists default as transformers' ``HYV4Config.__post_init__`` sets them for the layer count.
A model with no sparse layer is planned as DeepSeek's dense MLA (the engine's block size, any KV dtype).

DeepSeek-V3.2's and GLM-5's MTP drafter (``speculative_method="mtp"``): ``SpeculativeConfig.hf_config_override``
names the draft config of the ``deepseek_v32`` and ``glm_moe_dsa`` model types ``DeepseekV32MTPModel``
(``n_predict``: its ``num_nextn_predict_layers``), served by ``nvidia/mtp.py``'s ``DeepseekV32MTP``.
Its ``DeepseekV32MultiTokenPredictor`` builds one ``DeepseekV32DecoderLayer`` from the draft config
for each of the ``num_nextn_predict_layers`` (required here), at ``model.layers.<n + j>`` (``n``:
``num_hidden_layers``), on the last PP stage after the target's layers. Each registers the same two
caches: ``DeepseekV32Attention`` runs the IndexCache rule for it (its failures are vLLM's) but keeps
the indexer of an MTP layer (``is_mtp_layer``: ``layer_id >= num_hidden_layers``). The drafter's
caches are ``is_draft``, in 64-token blocks, at the drafter's KV dtype
(``speculative_config.kv_cache_dtype``, else ``--kv-cache-dtype``: the same three dtypes are planned,
since the sparse MLA backend decides the drafter's format too). ``num_speculative_tokens`` above
``n_predict`` must be a multiple of it (vLLM's check). Not read: EAGLE drafters on these models,
HunYuan-V4's MTP drafter (``HYV4MTP``: its own padding of the per-layer lists, no iHC), and a
DeepSeek-V3 config carrying ``index_topk`` (``deepseek_v2.py``'s own indexer); all refused by name.
Held to vLLM's classes by ``tests/test_vllm_dsa.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.backends import VLLM_DEFAULT_BLOCK_SIZE
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import _mtp_tokens

__all__ = ["DSA_ARCHITECTURES", "DSA_BLOCK_SIZE", "DSA_KV_CACHE_DTYPES", "DSA_MTP_MODEL_TYPES", "HY_V4_ARCHITECTURE",
           "dsa_layers", "hy_v4_layers", "indexer_skipped"]

#: HunYuan-V4: DSA on its sparse layer kinds (``vllm/models/hy_v4``).
HY_V4_ARCHITECTURE: Final = "HYV4ForCausalLM"
#: The architectures read here: those vLLM 0.33.0 serves with ``vllm/models/deepseek_v32``, and HunYuan-V4.
DSA_ARCHITECTURES: Final = frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", HY_V4_ARCHITECTURE})
#: ``hy_v4/nvidia/attention.py``'s ``_SPARSE_LAYER_TYPES``: the layer kinds that attend sparsely.
_HY_V4_SPARSE: Final = ("sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention")
#: Tokens per block: the DSA indexer backend's only kernel block size on CUDA.
DSA_BLOCK_SIZE: Final = 64
#: The ``--kv-cache-dtype`` values whose latent cache no sparse MLA backend rewrites.
DSA_KV_CACHE_DTYPES: Final = ("auto", "bfloat16", "fp8_ds_mla")
#: The model types ``SpeculativeConfig.hf_config_override`` gives the ``DeepseekV32MTPModel`` drafter.
DSA_MTP_MODEL_TYPES: Final = ("deepseek_v32", "glm_moe_dsa")
#: ``Indexer.quant_block_size``: one fp32 scale per this many fp8 key elements.
_QUANT_BLOCK: Final = 128


def _attr(v: _View, key: str, default: Any) -> Any:
    """``getattr(config, key, default)``: the config's value where it has the key (even null)."""
    return v.raw(key) if v.has(key) else default


def indexer_skipped(v: _View, layer_id: int) -> bool:
    """Whether ``DeepseekV32Attention`` builds no indexer for target layer ``layer_id`` (the
    IndexCache rule; its Python failures are vLLM's, refused as such)."""
    freq = _attr(v, "index_topk_freq", 1)
    pattern = _attr(v, "index_topk_pattern", None)
    offset = _attr(v, "index_skip_topk_offset", 2)
    try:
        if pattern is None:
            return bool(max(layer_id - offset + 1, 0) % freq != 0)
        if 0 <= layer_id < len(pattern):
            return bool(pattern[layer_id] == "S")
        return False
    except (TypeError, ZeroDivisionError) as e:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: {type(e).__name__} in DeepseekV32Attention's "
                          f"IndexCache rule ({e})", v.name("index_topk_freq"))  # fmt: skip


def _rope_checks(v: _View) -> None:
    """``DeepseekV32Attention.__init__``'s RoPE statements: the keys they read (their failures)."""
    rope = v.raw("rope_parameters")
    key = v.name("rope_parameters")
    legacy = v.cfg.get("rope_scaling") if "rope_parameters" not in v.cfg else None
    if isinstance(legacy, Mapping):  # a released config's legacy key: transformers' standardize_rope_params
        rope = {**legacy, "rope_type": legacy.get("rope_type", legacy.get("type", "default"))}
        key = v.name("rope_scaling")
    elif legacy is not None:
        raise ConfigError(f"{v.label}: kvbudget reads a rope_scaling object, not {type(legacy).__name__} (which "
                          "transformers converts)", v.name("rope_scaling"))  # fmt: skip
    if not isinstance(rope, Mapping):
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: TypeError: DeepseekV32Attention subscripts "
                          f"rope_parameters, which is {type(rope).__name__}", key)  # fmt: skip
    if "rope_type" not in rope:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: KeyError: 'rope_type' (rope_parameters)", key)
    kind = rope["rope_type"]
    if kind != "default":
        kind = "deepseek_llama_scaling" if rope.get("attention_factor") == 1.0 else "deepseek_yarn"
    if kind == "deepseek_yarn":
        if "factor" not in rope:
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: KeyError: 'factor' (rope_parameters)", key)
        factor, mscale = rope["factor"], rope.get("mscale_all_dim", False)
        try:  # yarn_get_mscale(factor, float(mscale_all_dim))
            m = float(mscale)
            if not factor <= 1:
                _ = 0.1 * m * math.log(factor) + 1.0
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: {type(e).__name__} in yarn_get_mscale "
                              f"({e})", key)  # fmt: skip


def dsa_layers(cfg: Mapping[str, Any], engine: EngineConfig, kv_cache_dtype: str, model_dtype: str,
               draft_kv_cache_dtype: str | None = None) -> list[LayerSpec]:  # fmt: skip
    """The KV-cache layers vLLM 0.33.0 registers for a model of :data:`DSA_ARCHITECTURES` (see the
    module docstring), per PP stage in registration order, then (``engine.speculative_method``
    ``"mtp"``) its MTP drafter's on the last stage. ``draft_kv_cache_dtype``: the drafter layers'
    ``kv_cache_dtype`` (default ``kv_cache_dtype``); ``engine.draft_kv_cache_dtype``, which the
    planner applies to them, is held to the same dtypes.

    Raises:
        ConfigError: vLLM refuses the config (its reason), or kvbudget does not model it (an EAGLE
            drafter, a KV dtype a sparse MLA backend rewrites, a block size the indexer backend refuses).
    """
    if cfg["architectures"][0] == HY_V4_ARCHITECTURE:
        return hy_v4_layers(cfg, engine, kv_cache_dtype, model_dtype)
    draft = draft_kv_cache_dtype or kv_cache_dtype
    _check_sparse_engine(cfg, engine, kv_cache_dtype, DSA_KV_CACHE_DTYPES, (draft, engine.draft_kv_cache_dtype))
    v = _View(cfg, "config.json", engine="vllm")
    n = v.req_int("num_hidden_layers")
    _check_heads(v, engine, "DeepseekV32Attention")
    latent = v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", 0)
    v.req_int("index_topk")  # DeepseekV32Model sizes its top-k buffer with it
    index_head = v.req_int("index_head_dim")
    _rope_checks(v)
    rows = (latent, index_head + index_head // _QUANT_BLOCK * 4)
    out = _layers(n, engine, rows, kv_cache_dtype, model_dtype, lambda i: (True, not indexer_skipped(v, i)))
    if engine.speculative_method == "mtp":
        out += _mtp_layers(v, n, engine, rows, (draft, model_dtype))
    return out


def _mtp_layers(v: _View, n: int, engine: EngineConfig, rows: tuple[int, int],
                dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """``DeepseekV32MTP``'s layers (see the module docstring): layer ``n + j``'s indexer key cache
    and latent cache for each of the ``num_nextn_predict_layers`` MTP layers, ``is_draft``, on the
    last PP stage; ``rows`` as :func:`_layers`'s, ``dtypes`` the drafter's KV dtype and the model
    dtype."""
    key = "num_nextn_predict_layers"
    if v.model_type not in DSA_MTP_MODEL_TYPES:
        raise ConfigError(f"{v.label}: vLLM 0.33.0's SpeculativeConfig names the DeepseekV32MTPModel drafter for "
                          f"model types {' and '.join(DSA_MTP_MODEL_TYPES)} only; kvbudget has not checked the "
                          f"drafter it builds for model_type {v.model_type!r}", "model_type")  # fmt: skip
    if v.raw(key) == 0 and not isinstance(v.raw(key), bool):
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: ZeroDivisionError: integer modulo by zero "
                          f"(SpeculativeConfig: num_speculative_tokens % n_predict, n_predict = {key} = 0)",
                          v.name(key))  # fmt: skip
    depth = v.req_int(key)  # DeepseekV32MultiTokenPredictor: range(n, n + config.num_nextn_predict_layers)
    _mtp_tokens(engine, depth, key)
    for j in range(depth):  # DeepseekV32Attention runs the IndexCache rule, then keeps an MTP layer's indexer
        indexer_skipped(v, n + j)
    mla, indexer = _templates(rows, dtypes[0], dtypes[1], DSA_BLOCK_SIZE)
    out: list[LayerSpec] = []
    for j in range(depth):
        prefix = f"model.layers.{n + j}.self_attn"
        out += [replace(indexer, name=f"{prefix}.indexer.k_cache", is_draft=True, pp_stage=engine.pp - 1),
                replace(mla, name=f"{prefix}.attn", is_draft=True, pp_stage=engine.pp - 1)]  # fmt: skip
    return out


def _check_sparse_engine(cfg: Mapping[str, Any], engine: EngineConfig, kv_cache_dtype: str,
                         dtypes: tuple[str, ...], draft: tuple[str | None, ...] | None = None) -> None:  # fmt: skip
    """What a sparse model's GPU decides (see the module docstring) for the target's KV dtype and,
    with an MTP drafter, the drafter's (``draft``: the dtypes it may be given; None: no drafter is
    read, and one is refused)."""
    arch = cfg["architectures"][0]
    method = engine.speculative_method
    if method is not None and (draft is None or method != "mtp"):
        raise ConfigError(f"config.json: kvbudget has not checked vLLM 0.33.0's {method} drafters on {arch}"
                          + (" (it reads the model's own MTP drafter, speculative_method='mtp')" if draft else ""),
                          "architectures")  # fmt: skip
    drafts = draft if method is not None and draft is not None else ()
    for key, dtype in (("kv_cache_dtype", kv_cache_dtype), *(("draft_kv_cache_dtype", d) for d in drafts)):
        if dtype is not None and dtype not in dtypes:
            raise ConfigError(f"{key} {dtype!r}: vLLM 0.33.0's sparse MLA backend, chosen per GPU, decides how it "
                              "stores it (FLASHMLA_SPARSE turns fp8 into fp8_ds_mla on Hopper, "
                              "FLASHINFER_MLA_SPARSE keeps it on Blackwell); kvbudget plans "
                              f"{', '.join(dtypes)} on {arch}", key)  # fmt: skip
    if engine.block_size not in (VLLM_DEFAULT_BLOCK_SIZE, DSA_BLOCK_SIZE):
        raise ConfigError(f"block_size {engine.block_size}: vLLM 0.33.0's DSA indexer backend "
                          f"(DEEPSEEK_V32_INDEXER) takes {DSA_BLOCK_SIZE}-token blocks only on CUDA",
                          "block_size")  # fmt: skip


def _check_heads(v: _View, engine: EngineConfig, cls: str) -> None:
    heads = v.req_int("num_attention_heads")
    if heads % engine.tp:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: AssertionError: {cls} asserts tp ({engine.tp}) "
                          f"divides num_attention_heads ({heads})", v.name("num_attention_heads"))  # fmt: skip


def _templates(rows: tuple[int, int], kv_cache_dtype: str, model_dtype: str,
               block: int | None) -> tuple[LayerSpec, LayerSpec]:  # fmt: skip
    """The latent cache's and the indexer key cache's specs (name and stage still to set): one
    head of ``rows[0]`` and ``rows[1]`` (elements; the indexer's ``uint8`` bytes), ``block``-token
    blocks (None: the engine's)."""
    mla = LayerSpec("", "mla", 1, rows[0], head_size_v=0, kv_cache_dtype=kv_cache_dtype, model_dtype=model_dtype,
                    block_size=block)  # fmt: skip
    return mla, replace(mla, kind="mla_indexer", head_size=rows[1], head_size_v=None)


def _layers(n: int, engine: EngineConfig, rows: tuple[int, int], kv_cache_dtype: str, model_dtype: str,
            kinds: Callable[[int], tuple[bool, bool]]) -> list[LayerSpec]:  # fmt: skip
    """Each stage's layers in registration order: layer ``i``'s indexer key cache (where ``kinds(i)``,
    ``(sparse, indexer)``, says it has one) before its latent cache; ``rows``: the latent's and the
    indexer's row, elements and bytes. A model with a sparse layer takes 64-token blocks."""
    sparse = [kinds(i) for i in range(n)]
    mla, indexer = _templates(rows, kv_cache_dtype, model_dtype, DSA_BLOCK_SIZE if any(s for s, _ in sparse) else None)
    out: list[LayerSpec] = []
    for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)):
        for i in range(start, end):
            prefix = f"model.layers.{i}.self_attn"
            if sparse[i][1]:
                out.append(replace(indexer, name=f"{prefix}.indexer.k_cache", pp_stage=stage))
            out.append(replace(mla, name=f"{prefix}.attn", pp_stage=stage))
    return out


def _hy_v4_list(v: _View, key: str, n: int) -> list[Any]:
    """One of ``HYV4Config``'s per-layer lists: the file's, else ``__post_init__``'s for ``n`` layers."""
    given = v.cfg.get(key)
    if given is not None:
        if not isinstance(given, list):
            raise v.fail(key, f"must be a list, got {type(given).__name__}")
        return given
    if key == "mlp_layer_types":
        return ["dense"] * min(1, n) + ["sparse"] * max(n - 1, 0)
    if key == "layer_types":
        return ["indexed_attention"] * n
    return ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]


def _hy_v4_skipped(v: _View, n: int) -> set[int]:
    """``compute_skip_topk_layers``: the sparse layers that share an earlier layer's top-k."""
    kinds = _hy_v4_list(v, "indexer_types", n)
    if len(kinds) != n:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: ValueError: indexer_types must contain one entry per "
                          f"hidden layer: expected {n}, got {len(kinds)}.", v.name("indexer_types"))  # fmt: skip
    bad = sorted({str(k) for k in kinds} - {"full", "shared"})
    if bad:
        raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: ValueError: indexer_types only supports 'full' and "
                          f"'shared', got {bad}.", v.name("indexer_types"))  # fmt: skip
    return {i for i, k in enumerate(kinds) if k == "shared"}


def hy_v4_layers(cfg: Mapping[str, Any], engine: EngineConfig, kv_cache_dtype: str,
                 model_dtype: str) -> list[LayerSpec]:  # fmt: skip
    """The KV-cache layers vLLM 0.33.0 registers for HunYuan-V4 (see the module docstring).

    Raises:
        ConfigError: as :func:`dsa_layers`.
    """
    v = _View(cfg, "config.json", engine="vllm")
    n = v.req_int("num_hidden_layers")
    mlp, kinds = _hy_v4_list(v, "mlp_layer_types", n), _hy_v4_list(v, "layer_types", n)
    sparse = [v.has("index_topk") and i < len(kinds) and kinds[i] in _HY_V4_SPARSE for i in range(n)]
    if engine.speculative_method is not None:
        raise ConfigError("config.json: kvbudget has not checked vLLM 0.33.0's drafters on HYV4ForCausalLM (its MTP "
                          "drafter, HYV4MTP, pads the per-layer lists for its layers and builds them without iHC)",
                          "architectures")  # fmt: skip
    if any(sparse):
        _check_sparse_engine(cfg, engine, kv_cache_dtype, ("auto", "bfloat16"))
    skipped = _hy_v4_skipped(v, n) if any(sparse) else set()
    latent = v.req_int("kv_lora_rank") + v.req_int("qk_rope_head_dim", 0)
    for i in range(n):  # HYV4DecoderLayer, then its HYV4MLAAttention, layer by layer
        if i >= len(mlp):
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: IndexError: HYV4DecoderLayer reads "
                              f"mlp_layer_types[{i}]", v.name("mlp_layer_types"))  # fmt: skip
        _check_heads(v, engine, "HYV4MLAAttention")
        if sparse[i] and i not in skipped and v.raw("q_lora_rank") is None:
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: AssertionError: HYV4 sparse attention requires "
                              "q_lora_rank to be set", v.name("q_lora_rank"))  # fmt: skip
        if sparse[i] and i not in skipped:
            v.req_int("index_head_dim")
        if v.raw("gated_mla") and v.raw("gating_type") not in ("headwise", "elementwise"):
            raise ConfigError(f"{v.label}: vLLM 0.33.0 refuses it: ValueError: Unknown gating type: "
                              f"{v.raw('gating_type')}", v.name("gating_type"))  # fmt: skip
    index_head = v.req_int("index_head_dim") if any(s and i not in skipped for i, s in enumerate(sparse)) else 0
    return _layers(n, engine, (latent, index_head + index_head // _QUANT_BLOCK * 4), kv_cache_dtype, model_dtype,
                   lambda i: (sparse[i], sparse[i] and i not in skipped))  # fmt: skip
