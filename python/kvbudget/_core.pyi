"""Type stubs for the native module ``kvbudget._core`` (rust/py).

The value types (between the GENERATED markers) are rendered by
``tools/stubgen.py`` from the core's field declaration; the rest is written
by hand. Units: bytes for memory, tokens for pool capacity, elements for dims.
"""

from collections.abc import Iterable, Sequence
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt

from typing_extensions import Self, disjoint_base

from kvbudget.types import Fit

__all__ = [
    "DraftGeometry",
    "ModelGeometry",
    "ServingConfig",
    "SpeculativeConfig",
    "MemoryPoolConfig",
    "StateConfig",
    "PoolConfigurator",
    "PoolPlan",
    "PoolSpec",
    "TensorSpec",
    "_plan_many",
    "_plan_many_state",
    "_choice_codes",
    "_canonical_name",
    "simd_level",
    "_vllm_plan",
    "_vllm_plan_typed",
    "_vllm_plan_many",
    "VLLM_STATUS_CODES",
    "Layers",
    "VllmResult",
    "_vllm_settings",
    "_vllm_state_shapes",
    "_mamba2_dims",
    "_full_rank_dims",
    "_kda_dims",
    "_state_budget",
    "_state_pool",
    "_plan_state_only",
    "_mamba_ratio",
    "_max_num_reqs",
    "_place_fused_draft",
    "SGLANG_VERSION",
    "__version__",
    "TENSOR_ALIGNMENT",
    "MAX_PLAN_LAYERS",
    "TENSOR_KINDS",
    "TENSOR_KIND_DOCS",
    "DETACH_ROWS",
    "FIELDS",
    "KVBudgetError",
    "InvalidConfigError",
    "PlanOverflowError",
    "NotEnoughMemoryError",
    "SWAPoolTooSmallError",
]

__version__: str
SGLANG_VERSION: str
"""The SGLang release the SGLang-compatible numbers follow (``"0.5.23"``)."""
TENSOR_ALIGNMENT: int
"""Byte alignment of every tensor's offset inside its pool's slab (256)."""
def _vllm_plan(request: str) -> str:
    """vLLM 0.33.0's plan of one JSON request ``{"layers", "available", "engine"}``, as JSON
    (the oracle's result form); use :func:`kvbudget.vllm.plan`."""

@final
class Layers:
    """A model's vLLM layers converted once for planning (``kvbudget.vllm.layers``)."""

    def __new__(cls, layers: Iterable[Any]) -> Self:
        """From ``LayerSpec`` objects (the declared layer fields as attributes).

        Raises:
            InvalidConfigError: a layer the declaration refuses (the JSON form's message).
        """
    def __len__(self) -> int: ...

@final
class VllmResult:
    """One vLLM plan or failure, held natively until its parts are read."""

    @property
    def ok(self) -> bool: ...
    def failure(self) -> tuple[str, str, int | None, bool] | None:
        """``(error_type, message, estimated_max_model_len, is_startup)``: ``is_startup`` for
        vLLM's startup failures on the budget; None for a plan."""
    def head(self) -> tuple[Any, ...] | None:
        """The plan's scalar and per-worker parts in ``VllmPlan``'s field order (num_blocks,
        max_model_len, bytes_per_block, per_request_bytes, allocated_bytes,
        blocks_per_request, max_concurrency, kv_cache_size_tokens, kv_tp_replicas,
        cache_block_size, warnings, log, and ``(mamba_cache_mode, block_size, mamba_block_size,
        mamba_page_size_padded)`` or None); None for a failure."""
    def raw(self) -> dict[str, Any]:
        """The whole result in the JSON form's dict (``kvbudget.vllm.plan_raw``)."""

def _vllm_plan_typed(layers: Layers, available: int | Sequence[int], engine: Any) -> VllmResult:
    """vLLM 0.33.0's plan of converted layers, a budget and an ``EngineConfig`` (read by the
    declaration's setting names); an engine setting the declaration refuses is an
    ``"Input"`` failure of the result."""

def _vllm_plan_many(
    layers: Layers,
    available: npt.NDArray[np.int64],
    engine: Any,
    max_model_len: npt.NDArray[np.uint64] | None = None,
) -> tuple[
    npt.NDArray[np.uint64], npt.NDArray[np.uint64], npt.NDArray[np.float64], npt.NDArray[np.uint64],
    npt.NDArray[np.uint8],
]:
    """One model for every row: num_blocks, max_model_len, max_concurrency,
    kv_cache_size_tokens and status arrays (``kvbudget.vllm.plan_many``)."""

VLLM_STATUS_CODES: dict[str, int]
"""``kvbudget.vllm.plan_many``'s row statuses by name."""

def _vllm_state_shapes(family: str, dims: Sequence[int]) -> list[list[int]]:
    """vLLM 0.33.0's state tensor shapes on one rank (``MambaStateShapeCalculator``, ``SD``
    conv layout): ``family`` ``"gated_delta_net"`` (dims: tp, num_k_heads, num_v_heads,
    head_k_dim, head_v_dim, conv_kernel, num_spec) or ``"mamba2"`` (tp, intermediate_size,
    n_groups, num_heads, head_dim, state_size, conv_kernel, num_spec) or ``"short_conv"`` (tp,
    intermediate_size, conv_kernel, num_spec) or ``"mamba1"`` (tp, intermediate_size, state_size,
    conv_kernel) or ``"kda"`` (tp, num_heads, head_dim, conv_kernel, num_spec); use
    :mod:`kvbudget.vllm.state_models`."""

def _vllm_settings() -> str:
    """The core's declaration of vLLM's inputs as JSON: ``{"version", "records": {"VllmLayer",
    "VllmEngine"}}``, each record ``{"doc", "settings"}`` and each setting ``{"name", "py",
    "choices", "required", "default", "unit", "flag", "doc"}``; use :mod:`kvbudget.vllm.settings`."""

def _mamba2_dims(tp_size: int, intermediate_size: int, n_groups: int, num_heads: int, head_dim: int,
                 state_size: int, conv_kernel: int) -> dict[str, int]:
    """SGLang's ``Mamba2StateShape.create`` on one rank; use :func:`kvbudget.sglang.state.mamba2_dims`."""
def _full_rank_dims(tp_size: int, intermediate_size: int, state_size: int, conv_kernel: int) -> dict[str, int]:
    """SGLang's ``Mamba2StateShape.create_full_rank``; use :func:`kvbudget.sglang.state.full_rank_dims`."""
def _kda_dims(tp_size: int, num_heads: int, head_dim: int, num_k_heads: int | None = None,
              head_k_dim: int | None = None, conv_kernel: int = 4) -> dict[str, int]:
    """SGLang's ``KimiLinearStateShape.create``; use :func:`kvbudget.sglang.state.kda_dims`."""
def _state_budget(state: StateConfig, serving: ServingConfig, spec: SpeculativeConfig,
                  rest_gib: float) -> dict[str, Any]:
    """SGLang's ``_handle_max_mamba_cache``; use :func:`kvbudget.sglang.state.state_budget`."""
def _state_pool(state: StateConfig, serving: ServingConfig, spec: SpeculativeConfig, slots: int) -> PoolSpec:
    """The exact plan's state pool; use :func:`kvbudget.sglang.state.state_pool`."""
def _plan_state_only(state: StateConfig, serving: ServingConfig, spec: SpeculativeConfig, available_bytes: int,
                     zero_kv_tokens: int, fit: str = "exact") -> tuple[PoolPlan, dict[str, Any]]:
    """The plan of a stage without attention layers; use :func:`kvbudget.sglang.state.plan_state_only`."""
def _mamba_ratio(state: StateConfig, serving: ServingConfig) -> int:
    """SGLang's ``_calculate_mamba_ratio``; use :func:`kvbudget.sglang.state.mamba_ratio`."""
def _max_num_reqs(token_capacity: int, context_len: int, serving: ServingConfig, state: StateConfig | None = None,
                  max_mamba_cache_size: int | None = None) -> int:
    """SGLang's ``resolve_max_num_reqs``; use :func:`kvbudget.sglang.state.max_num_reqs`."""
def _place_fused_draft(kinds: list[tuple[str, list[int], tuple[int, int, int] | int, int | None]], *, num_depths: int,
                       num_runners: int, hosts: list[str], target_window: int | None, asymmetric_rows_ok: bool,
                       draft_backends: list[str], itemsize: int,
                       host_bytes: dict[str, tuple[int, bool]]) -> dict[str, Any]:
    """SGLang's ``place_fused_draft``; use :func:`kvbudget.sglang.fused_draft.place_fused_draft`."""

TENSOR_KINDS: tuple[str, ...]
"""Every tensor kind a plan may hold (``TensorSpec.kind``), in the order a layer lists them
(``kvbudget.LayerKV`` has one attribute per kind, in this order)."""
TENSOR_KIND_DOCS: dict[str, str]
"""What a tensor of each kind of ``TENSOR_KINDS`` holds, shape and units included."""
MAX_PLAN_LAYERS: int
"""The most target plus draft layers an exact plan (``plan``, ``plan_for_config``,
``PoolPlan.from_json``) holds, 65,536: a plan lists every layer's tensors. Sizing
(``calculate_pool_sizes``) has no such limit, as in SGLang."""
DETACH_ROWS: int
"""Batch rows from which the GIL is released (4096)."""
def simd_level() -> str:
    """The instruction set ``plan_many``'s fast path runs on in this process: ``"avx512"``,
    ``"avx2"``, ``"sse4.2"`` or ``"sse2"`` on x86 (the CPU's best, or the lower level the
    ``KVBUDGET_SIMD`` environment variable names, read once), else ``"baseline"`` (the
    target's own vector unit) or ``"scalar"``. Every level gives the same results."""

FIELDS: dict[str, tuple[dict[str, Any], ...]]
"""The field table: declared type name -> its fields (see ``kvbudget.fields``)."""

_Arrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint8]]

class KVBudgetError(ValueError):
    """Base of every kvbudget error (a ValueError). ``.code`` names the kind."""

    code: str

class InvalidConfigError(KVBudgetError):
    """An input is invalid, inconsistent, or missing for the configurator asked for."""

class PlanOverflowError(InvalidConfigError):
    """An intermediate or result does not fit in 64-bit integers."""

class NotEnoughMemoryError(KVBudgetError):
    """The budget gives no tokens, or the SWA cap leaves no room for the full pool."""

class SWAPoolTooSmallError(KVBudgetError):
    """The SWA pool cannot admit one request (window + page_size >= SWA tokens)."""

# BEGIN GENERATED (tools/stubgen.py)

@final
class ModelGeometry:
    """A target model's attention geometry: its full-attention and sliding-window layer ids, their
    heads and dims, the window, or MLA latent dims. Constructor arguments: the two id lists,
    then the fields below (SGLang's defaults: V dim = K dim, SWA geometry = full geometry).
    """
    def __new__(cls, full_attention_layer_ids: list[int], swa_attention_layer_ids: list[int], num_kv_heads: int, head_dim: int, v_head_dim: int | None = ..., swa_num_kv_heads: int | None = ..., swa_head_dim: int | None = ..., swa_v_head_dim: int | None = ..., sliding_window_size: int | None = ..., kv_lora_rank: int | None = ..., qk_rope_head_dim: int | None = ..., swa_kv_lora_rank: int | None = ..., swa_qk_rope_head_dim: int | None = ..., index_head_dim: int | None = ..., index_kpool: int = ..., index_shared_layers: int = ...) -> Self: ...
    def replace(self, *, full_attention_layer_ids: list[int] = ..., swa_attention_layer_ids: list[int] = ..., num_kv_heads: int = ..., head_dim: int = ..., v_head_dim: int | None = ..., swa_num_kv_heads: int | None = ..., swa_head_dim: int | None = ..., swa_v_head_dim: int | None = ..., sliding_window_size: int | None = ..., kv_lora_rank: int | None = ..., qk_rope_head_dim: int | None = ..., swa_kv_lora_rank: int | None = ..., swa_qk_rope_head_dim: int | None = ..., index_head_dim: int | None = ..., index_kpool: int = ..., index_shared_layers: int = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    full_attention_layer_ids: Final[list[int]]
    """Global layer ids of the full-attention layers."""
    swa_attention_layer_ids: Final[list[int]]
    """Global layer ids of the sliding-window layers."""
    num_full_layers: Final[int]
    """`n_f`, full-attention layers (`ModelGeometry` takes their ids instead)."""
    num_swa_layers: Final[int]
    """`n_s`, sliding-window layers (`ModelGeometry` takes their ids instead)."""
    num_kv_heads: Final[int]
    """Total KV heads of a full layer, before tensor parallelism."""
    head_dim: Final[int]
    """K head dim of a full layer, elements."""
    v_head_dim: Final[int]
    """V head dim of a full layer, elements (default: `head_dim`)."""
    swa_num_kv_heads: Final[int]
    """Total KV heads of an SWA layer (default: `num_kv_heads`)."""
    swa_head_dim: Final[int]
    """K head dim of an SWA layer, elements (default: `head_dim`)."""
    swa_v_head_dim: Final[int]
    """V head dim of an SWA layer, elements (default: `swa_head_dim` when given, else
    `v_head_dim`).
    """
    sliding_window_size: Final[int | None]
    """SGLang's exclusive sliding window (HF `sliding_window` minus 1), tokens."""
    kv_lora_rank: Final[int | None]
    """MLA latent rank, elements; given, the model is MLA (DeepSeek-style)."""
    qk_rope_head_dim: Final[int | None]
    """MLA rotary key dim, elements (required with `kv_lora_rank`)."""
    swa_kv_lora_rank: Final[int]
    """MLA latent rank of an SWA layer, elements (MLA only; default: `kv_lora_rank`)."""
    swa_qk_rope_head_dim: Final[int | None]
    """MLA rotary key dim of an SWA layer, elements (MLA only; default: `qk_rope_head_dim`)."""
    index_head_dim: Final[int | None]
    """DSA indexer key dim, elements; given (with MLA), the model is DSA (SGLang's
    `is_deepseek_dsa`): every layer also keeps an FP8 index key and its f32 scales,
    `index_head_dim + index_head_dim / 128 * 4` bytes per token.
    """
    index_kpool: Final[int]
    """DSA index keys pooled per stored key (SGLang's `index_kpool`), tokens; a token costs
    `ceil(index key bytes / index_kpool)`.
    """
    index_shared_layers: Final[int]
    """DSA layers that reuse the previous layer's top-k (SGLang's `dsa_layer_skips_topk`): the
    target worker stores no index keys for them, layers.
    """
    @classmethod
    def from_hf_config(cls, path_or_dict: object, engine: str = "sglang") -> Self:
        """A geometry from a Hugging Face config.json (a dict, a file, or a model directory).
        engine="sglang" (default): the pools SGLang 0.5.23 builds for it
        (kvbudget.sglang.resolve_sglang); engine="hf": the model's own layer kinds
        (kvbudget.models.geometry_kwargs_from_hf_config), a what-if for SGLang.
        """
    @property
    def is_mla(self) -> bool:
        """True for an MLA model (kv_lora_rank given)."""
    @property
    def num_layers(self) -> int:
        """Every attention layer, n_f + n_s."""
    def to_json(self) -> str:
        """This ModelGeometry as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class DraftGeometry:
    """The draft model's own KV geometry, when it differs from the target's full layers (exact plan
    only; SGLang's sizing prices the draft at the target's geometry).
    """
    def __new__(cls, num_layers: int, num_kv_heads: int, head_dim: int, v_head_dim: int | None = ..., kv_cache_dtype: str | None = ..., capacity: str | None = ...) -> Self: ...
    def replace(self, *, num_layers: int = ..., num_kv_heads: int = ..., head_dim: int = ..., v_head_dim: int | None = ..., kv_cache_dtype: str | None = ..., capacity: str | None = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    def __hash__(self) -> int: ...
    num_layers: Final[int]
    """Draft KV layers."""
    num_kv_heads: Final[int]
    """Total draft KV heads, before tensor parallelism."""
    head_dim: Final[int]
    """Draft K head dim, elements."""
    v_head_dim: Final[int]
    """Draft V head dim, elements (default: `head_dim`)."""
    kv_cache_dtype: Final[str | None]
    """Draft KV dtype (default: the target's)."""
    capacity: Final[str | None]
    """The target pool whose token count the draft pool takes (default: SGLang's rule, the full
    pool or an all-SWA target's SWA pool).
    """
    @staticmethod
    def from_model(model: ModelGeometry, num_layers: int | None = None, kv_cache_dtype: str | None = None) -> DraftGeometry:
        """The one rule for using a whole model as a (standalone) draft: its full layers' heads and
        dims (its SWA layers must match them), or an all-SWA model's SWA geometry with capacity
        'swa'; MLA models are refused. num_layers defaults to every attention layer.
        """
    def to_json(self) -> str:
        """This DraftGeometry as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class SpeculativeConfig:
    """Speculative-decoding settings (REFERENCE section 1)."""
    def __new__(cls, algorithm: str | None = ..., draft_num_layers: int = ..., num_steps: int | None = ..., eagle_topk: int | None = ..., num_draft_tokens: int | None = ..., banded_draft_layers: int = ..., dflash_draft_cell_size_per_token: int | None = ..., draft: DraftGeometry | None = ..., draft_swa_num_layers: int = ..., max_num_draft_tokens: int | None = ..., fused_full_entry_bytes: int | None = ..., fused_swa_entry_bytes: int | None = ...) -> Self: ...
    def replace(self, *, algorithm: str | None = ..., draft_num_layers: int = ..., num_steps: int | None = ..., eagle_topk: int | None = ..., num_draft_tokens: int | None = ..., banded_draft_layers: int = ..., dflash_draft_cell_size_per_token: int | None = ..., draft: DraftGeometry | None = ..., draft_swa_num_layers: int = ..., max_num_draft_tokens: int | None = ..., fused_full_entry_bytes: int | None = ..., fused_swa_entry_bytes: int | None = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    algorithm: Final[str]
    """The algorithm (SGLang's `--speculative-algorithm`)."""
    draft_num_layers: Final[int]
    """`d`, the draft model's KV layers (0 with `draft` given: the draft's)."""
    num_steps: Final[int | None]
    """`--speculative-num-steps`."""
    eagle_topk: Final[int | None]
    """`--speculative-eagle-topk`."""
    num_draft_tokens: Final[int | None]
    """`--speculative-num-draft-tokens`, tokens."""
    banded_draft_layers: Final[int]
    """`d_sf`: banded draft depths at SWA geometry but full capacity, layers (SGLang counts the
    draft layers listed in `mtp_local_layer_ids`).
    """
    dflash_draft_cell_size_per_token: Final[int | None]
    """DFLASH draft bytes per token per DCP rank, bytes (0 or `None`: none given)."""
    draft: Final[DraftGeometry | None]
    """The draft's own KV geometry for the exact plan (default: the target's full geometry)."""
    draft_swa_num_layers: Final[int]
    """`d_s`: draft layers at SWA geometry and SWA capacity, layers (SGLang's
    `eagle_draft_swa_num_layers`).
    """
    max_num_draft_tokens: Final[int | None]
    """The largest draft-token count adaptive speculative decoding may switch to (SGLang's
    `max_speculative_num_draft_tokens`), tokens.
    """
    fused_full_entry_bytes: Final[int | None]
    """Bytes per token of a full-pool entry that holds the draft's KV too (host, draft and padding;
    SGLang's `fused_entry_bytes("full")`), bytes.
    """
    fused_swa_entry_bytes: Final[int | None]
    """Bytes per token of an SWA-pool entry that holds the draft's KV too, bytes."""
    def to_json(self) -> str:
        """This SpeculativeConfig as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class ServingConfig:
    """Serving settings (REFERENCE section 1): dtype, paging, parallelism, SWA ratio and the
    request-cap inputs.
    """
    def __new__(cls, kv_cache_dtype: str | None = ..., page_size: int = ..., tp_size: int = ..., dcp_size: int = ..., attn_dp_size: int = ..., swa_full_tokens_ratio: float = ..., max_running_requests: int | None = ..., chunked_prefill_size: int | None = ..., disable_radix_cache: bool = ..., disable_overlap_schedule: bool = ..., disaggregation_mode: str | None = ..., disaggregation_decode_extra_slots: int = ..., swa_eviction_interval: int = ..., disable_hybrid_swa_memory: bool = ..., is_draft_worker: bool = ..., enable_unified_memory: bool = ..., model_context_len: int | None = ..., prefill_attention_backend: str | None = ..., decode_attention_backend: str | None = ..., is_sm100: bool = ..., model_dtype: str | None = ..., dsa_raw_kv_layout: bool = ...) -> Self: ...
    def replace(self, *, kv_cache_dtype: str | None = ..., page_size: int = ..., tp_size: int = ..., dcp_size: int = ..., attn_dp_size: int = ..., swa_full_tokens_ratio: float = ..., max_running_requests: int | None = ..., chunked_prefill_size: int | None = ..., disable_radix_cache: bool = ..., disable_overlap_schedule: bool = ..., disaggregation_mode: str | None = ..., disaggregation_decode_extra_slots: int = ..., swa_eviction_interval: int = ..., disable_hybrid_swa_memory: bool = ..., is_draft_worker: bool = ..., enable_unified_memory: bool = ..., model_context_len: int | None = ..., prefill_attention_backend: str | None = ..., decode_attention_backend: str | None = ..., is_sm100: bool = ..., model_dtype: str | None = ..., dsa_raw_kv_layout: bool = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    kv_cache_dtype: Final[str]
    """KV-cache dtype (SGLang's `--kv-cache-dtype` names; `auto` is `model_dtype`)."""
    page_size: Final[int]
    """`p`, tokens per page."""
    tp_size: Final[int]
    """Attention tensor-parallel size, ranks."""
    dcp_size: Final[int]
    """Decode context-parallel size, ranks (divides `tp_size`)."""
    attn_dp_size: Final[int]
    """Attention data-parallel size, ranks."""
    swa_full_tokens_ratio: Final[float]
    """`r`, SWA-pool tokens per full-pool token."""
    max_running_requests: Final[int | None]
    """Requests admitted at once (a request-cap input)."""
    chunked_prefill_size: Final[int | None]
    """Chunked-prefill size, tokens (a request-cap input)."""
    disable_radix_cache: Final[bool]
    """The radix cache is disabled (a request-cap input)."""
    disable_overlap_schedule: Final[bool]
    """The overlap scheduler is disabled (spec v1 rather than v2)."""
    disaggregation_mode: Final[str]
    """PD disaggregation role."""
    disaggregation_decode_extra_slots: Final[int]
    """Extra decode slots in PD decode, requests."""
    swa_eviction_interval: Final[int]
    """`E`, the SWA eviction interval, tokens (SGLang uses `max(1, E)`)."""
    disable_hybrid_swa_memory: Final[bool]
    """Price SWA layers as full layers (SGLang's `--disable-hybrid-swa-memory`)."""
    is_draft_worker: Final[bool]
    """This is the draft worker (it counts no draft terms; its heads ignore DCP)."""
    enable_unified_memory: Final[bool]
    """Full and SWA layers share one byte pool (SGLang's `--enable-unified-memory`)."""
    model_context_len: Final[int | None]
    """The model's context length (SGLang's `model_config.context_len`: `--context-length`, else
    the config's), tokens; read only by the unified tri-pool's bs=1 floor (None: unknown).
    """
    prefill_attention_backend: Final[str | None]
    """The prefill attention backend (read to price `nvfp4` and by the unified-memory launch
    checks).
    """
    decode_attention_backend: Final[str | None]
    """The decode attention backend (read to price `nvfp4` and by the unified-memory launch
    checks).
    """
    is_sm100: Final[bool]
    """The GPU is SM100 (B200/GB200): TRT-LLM reads NVFP4's native scale layout (SM120 reads the
    linear one); read only to price `nvfp4`.
    """
    model_dtype: Final[str]
    """The model's dtype: what `kv_cache_dtype="auto"` stores."""
    dsa_raw_kv_layout: Final[bool]
    """The DSA attention backends read the raw MLA layout (TRT-LLM or TileLang): an `fp8_e4m3` DSA
    latent has no per-block scales. Off: the scaled layout, `kv_lora_rank + kv_lora_rank / 128 *
    4 + 2 * qk_rope_head_dim` bytes per layer.
    """
    def to_json(self) -> str:
        """This ServingConfig as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class MemoryPoolConfig:
    """The pool sizes SGLang resolves, tokens (`None` where SGLang leaves them unset)."""
    def __new__(cls, max_total_num_tokens: int, full_max_total_num_tokens: int | None = ..., swa_max_total_num_tokens: int | None = ..., unified_memory_pool_bytes: int | None = ...) -> Self: ...
    def replace(self, *, max_total_num_tokens: int = ..., full_max_total_num_tokens: int | None = ..., swa_max_total_num_tokens: int | None = ..., unified_memory_pool_bytes: int | None = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    def __hash__(self) -> int: ...
    max_total_num_tokens: Final[int]
    """`max_total_num_tokens` (the full pool, or an all-SWA model's SWA pool), tokens."""
    full_max_total_num_tokens: Final[int | None]
    """Full-pool tokens (SWA configurators only)."""
    swa_max_total_num_tokens: Final[int | None]
    """SWA-pool tokens (SWA configurators only)."""
    unified_memory_pool_bytes: Final[int | None]
    """Bytes of the unified pool (unified memory only), bytes."""
    def to_json(self) -> str:
        """This MemoryPoolConfig as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class StateConfig:
    """A hybrid model's recurrent state (Mamba2, gated delta net, KDA) and SGLang's serving inputs
    for its cache: the state one request keeps per state layer on one rank
    (`kvbudget.sglang.state` builds the dims from a config, as SGLang's `Mamba2StateShape` /
    `KimiLinearStateShape` do), and how SGLang sizes the pool.
    """
    def __new__(cls, num_state_layers: int, conv_elems: int, ssm_heads: int, ssm_head_dim: int, ssm_state_dim: int, stage_state_layers: int | None = ..., k_heads_per_tp: int = ..., conv_kernel: int | None = ..., conv_dtype: str | None = ..., ssm_dtype: str | None = ..., mixer: str | None = ..., extra_bytes_per_req: int = ..., fused_state_entry_bytes: int | None = ..., max_mamba_cache_size: int | None = ..., mamba_full_memory_ratio: float = ..., mamba_radix_cache_strategy: str | None = ..., mamba_skip_decode_lock: bool = ..., enable_linear_replayssm_spec: bool = ..., linear_replayssm_cache_len: int = ..., enable_pd_role_switch: bool = ...) -> Self: ...
    def replace(self, *, num_state_layers: int = ..., stage_state_layers: int | None = ..., conv_elems: int = ..., ssm_heads: int = ..., ssm_head_dim: int = ..., ssm_state_dim: int = ..., k_heads_per_tp: int = ..., conv_kernel: int | None = ..., conv_dtype: str | None = ..., ssm_dtype: str | None = ..., mixer: str | None = ..., extra_bytes_per_req: int = ..., fused_state_entry_bytes: int | None = ..., max_mamba_cache_size: int | None = ..., mamba_full_memory_ratio: float = ..., mamba_radix_cache_strategy: str | None = ..., mamba_skip_decode_lock: bool = ..., enable_linear_replayssm_spec: bool = ..., linear_replayssm_cache_len: int = ..., enable_pd_role_switch: bool = ...) -> Self:
        """A copy with the given fields changed (the others keep their values), re-checked."""
    num_state_layers: Final[int]
    """State layers of the whole model (SGLang's `mamba2_cache_params.layers`; SGLang accepts none,
    pricing a slot at 0 bytes), layers.
    """
    stage_state_layers: Final[int | None]
    """State layers of the largest pipeline stage (default: every state layer), layers."""
    conv_elems: Final[int]
    """Conv-state elements of one request in one layer on one rank (the product of each conv shape,
    summed), elements.
    """
    ssm_heads: Final[int]
    """Temporal (SSM) state heads on one rank (the state's first dim)."""
    ssm_head_dim: Final[int]
    """Temporal state head dim (the state's second dim), elements."""
    ssm_state_dim: Final[int]
    """Temporal state size (the state's third dim), elements."""
    k_heads_per_tp: Final[int]
    """Key (group) heads on one rank, read by the ReplaySSM rings (0 where the shape has none: a
    lightning-attention state).
    """
    conv_kernel: Final[int | None]
    """The conv kernel width (SGLang's `shape.conv_kernel`; a conv state keeps `conv_kernel - 1`
    steps), read by the exact plan's deduplicated speculative conv windows (`None`: unknown),
    steps.
    """
    conv_dtype: Final[str]
    """Conv-state dtype (SGLang's `SGLANG_MAMBA_CONV_DTYPE`, default bfloat16)."""
    ssm_dtype: Final[str]
    """Temporal-state dtype (`--mamba-ssm-dtype`, the config's `mamba_ssm_dtype`, default float32)."""
    mixer: Final[str]
    """The mixer (`mamba2`, `gdn`: Qwen3-Next / Qwen3.5, `kda`: Kimi-Linear)."""
    extra_bytes_per_req: Final[int]
    """Extra state bytes per request SGLang's caller adds (`extra_mamba_cache_bytes_per_req`),
    bytes.
    """
    fused_state_entry_bytes: Final[int | None]
    """Bytes of one state slot that holds a fused draft's state too (SGLang's
    `fused_entry_bytes("mamba")`; `None`: the host's `mamba_cache_per_req`), bytes.
    """
    max_mamba_cache_size: Final[int | None]
    """`--max-mamba-cache-size`: state slots over all attention-DP ranks (`None`: SGLang sizes it),
    slots.
    """
    mamba_full_memory_ratio: Final[float]
    """`--mamba-full-memory-ratio`: state bytes per KV byte of the auto split (SGLang's fallback
    0.9).
    """
    mamba_radix_cache_strategy: Final[str]
    """`--mamba-radix-cache-strategy`, resolved (`no_buffer`, `extra_buffer`, `extra_buffer_lazy`)."""
    mamba_skip_decode_lock: Final[bool]
    """`SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK`: the decode-time skip frees one slot per request."""
    enable_linear_replayssm_spec: Final[bool]
    """`--enable-linear-replayssm-spec` (GDN and KDA only): ReplaySSM spec-verify rings."""
    linear_replayssm_cache_len: Final[int]
    """`--linear-replayssm-cache-len`: ReplaySSM ring length, decode steps."""
    enable_pd_role_switch: Final[bool]
    """`--enable-pd-role-switch`: a PD prefill server keeps the spec state."""
    def to_json(self) -> str:
        """This StateConfig as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

# END GENERATED

@final
class TensorSpec:
    """One planned tensor: where it sits in its pool's slab, its shape and dtype."""

    @property
    def pool(self) -> str:
        """``"full"``, ``"swa"`` or ``"draft"``."""
    @property
    def layer_id(self) -> int:
        """Global target layer id, or the draft-local layer index in the draft pool."""
    @property
    def kind(self) -> str:
        """``"k"``, ``"v"``, ``"kv"`` (MLA latent), a ``*_scale``, ``"cache"`` (DFLASH), ``"index_k"`` (DSA), ...: one of ``TENSOR_KINDS``."""
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape in elements; the first dimension is rows (tokens + page_size)."""
    @property
    def dtype(self) -> str:
        """The torch dtype's name (``"bfloat16"``, ``"uint8"``, ...)."""
    @property
    def nbytes(self) -> int:
        """Size, bytes."""
    @property
    def offset(self) -> int:
        """Byte offset inside the pool's slab (a multiple of TENSOR_ALIGNMENT)."""
    def to_json(self) -> str:
        """This TensorSpec as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class PoolSpec:
    """One planned pool: its token count, rows, layers and tensors."""

    @property
    def name(self) -> str:
        """``"full"``, ``"swa"`` or ``"draft"``."""
    @property
    def tokens(self) -> int:
        """Usable token slots."""
    @property
    def rows(self) -> int:
        """Allocated rows per layer: tokens + page_size (slot 0 is the dummy page)."""
    @property
    def layer_ids(self) -> list[int]:
        """Layer ids in allocation order (global target ids; draft-local for the draft)."""
    @property
    def num_layers(self) -> int:
        """Layers in the pool."""
    @property
    def kv_cache_dtype(self) -> str:
        """The pool's KV dtype."""
    @property
    def nbytes(self) -> int:
        """Bytes of the pool's slab: its tensors plus the alignment gaps between them."""
    @property
    def padding_bytes(self) -> int:
        """Bytes spent on the page_size padding rows."""
    @property
    def tensors(self) -> list[TensorSpec]:
        """The tensors, layer by layer."""
    def to_json(self) -> str:
        """This PoolSpec as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def _from_json(cls, s: str) -> Self: ...
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@final
class PoolPlan:
    """The exact plan: every pool and tensor, and the bytes allocating it takes."""

    @property
    def fit(self) -> str:
        """``"exact"``, ``"sglang"`` or ``"given"`` (plan_for_config)."""
    @property
    def configurator(self) -> str:
        """``"default"``, ``"hybrid_swa"`` or ``"chunk_cap"``."""
    @property
    def available_bytes(self) -> int:
        """The budget, bytes."""
    @property
    def total_bytes(self) -> int:
        """Sum of the pools' slab bytes: what allocating the plan takes, bytes."""
    @property
    def leftover_bytes(self) -> int:
        """available_bytes - total_bytes (negative when the plan over-commits), bytes."""
    @property
    def over_budget_bytes(self) -> int:
        """max(0, total_bytes - available_bytes), bytes."""
    @property
    def padding_bytes(self) -> int:
        """Bytes of padding rows across pools."""
    @property
    def tensor_bytes(self) -> int:
        """Sum of every tensor's bytes (total_bytes minus the alignment gaps)."""
    @property
    def alignment_bytes(self) -> int:
        """Bytes of alignment gaps between tensors in the slabs."""
    @property
    def draft_bytes(self) -> int:
        """Bytes of the draft pool's slab (0 without one)."""
    @property
    def page_size(self) -> int:
        """Page size, tokens."""
    @property
    def config(self) -> MemoryPoolConfig:
        """The token counts in SGLang's form."""
    @property
    def pools(self) -> list[PoolSpec]:
        """The pools (a pool without layers is omitted)."""
    @property
    def tensors(self) -> list[TensorSpec]:
        """Every tensor of every pool."""
    def pool(self, name: str) -> PoolSpec | None:
        """The pool named ``"full"``, ``"swa"`` or ``"draft"``, or None when the plan has none."""
    def check(self) -> None:
        """Raises InvalidConfigError naming the first inconsistency of a plan (shapes, bytes,
        offsets, padding, dtypes, duplicates, config, an exact fit above its budget)."""
    def to_json(self) -> str:
        """This PoolPlan as JSON; pickle carries it through ``_from_json``."""
    @classmethod
    def from_json(cls, s: str) -> Self:
        """Rebuilds a plan from to_json output, after check()."""
    def __reduce__(self) -> tuple[object, tuple[str]]: ...

@disjoint_base
class PoolConfigurator:
    """The native configurator. The Python configurator classes
    (``DefaultPoolConfigurator``, ``HybridSWAPoolConfigurator``,
    ``SWARequestCapPoolConfigurator``) subclass it, fixing ``kind``; what is documented here
    is their surface, reached without a Python frame between the call and the core."""

    def __new__(
        cls,
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig | None = None,
        kind: str | None = None,
    ) -> Self: ...
    @staticmethod
    def factory_kind(model: ModelGeometry, serving: ServingConfig) -> str:
        """The kind SGLang's factory picks for model and serving ("default", "hybrid_swa" or
        "request_cap"), without building a configurator."""
    @property
    def kind(self) -> str:
        """``"default"``, ``"hybrid_swa"`` or ``"request_cap"``."""
    @property
    def cell_size(self) -> int | float:
        """SGLang's coefficient: bytes per token of ``max_total_num_tokens``. A float where
        the SWA ratio enters (hybrid models with full layers), else an int."""
    @property
    def full_per_token(self) -> int:
        """F, bytes per token of one full layer on this rank (SWA kinds; 0 for Default)."""
    @property
    def swa_per_token(self) -> int:
        """S, bytes per token of one SWA layer on this rank (SWA kinds; 0 for Default)."""
    @property
    def swa_cap(self) -> int | None:
        """RequestCap's SWA token cap before page alignment, tokens (REFERENCE 2.4 and 2.7)."""
    @property
    def draft_terms(self) -> tuple[int, int, int, int]:
        """``(d_f, d_s, d_sf, d_c)``: counted draft layers at full geometry, at SWA geometry and
        capacity, banded depths at SWA geometry and full capacity, and DFLASH bytes per token."""
    @property
    def model(self) -> ModelGeometry:
        """The target geometry."""
    @property
    def serving(self) -> ServingConfig:
        """The serving config."""
    @property
    def spec(self) -> SpeculativeConfig:
        """The speculative config (algorithm ``"none"`` when none was given)."""
    def calculate_pool_sizes(self, available_bytes: int, page_size: int | None = None) -> MemoryPoolConfig:
        """The profiling path: pool sizes (tokens) from available bytes on this rank.
        ``page_size`` defaults to ``serving.page_size``.

        Raises:
            NotEnoughMemoryError: no tokens fit.
            SWAPoolTooSmallError: the SWA pool cannot admit one request.
        """
    def calculate_pool_sizes_from_max_tokens(
        self, max_total_num_tokens: int, page_size: int | None = None
    ) -> MemoryPoolConfig:
        """The constraint path: pool sizes from a token count (a cap, or the MIN across ranks)."""
    def plan(self, available_bytes: int, fit: Fit = "exact") -> PoolPlan:
        """kvbudget's exact plan (the Python classes add ``state=``)."""
    def _calculate_pool_sizes_with_state(
        self, available_bytes: int, state: StateConfig
    ) -> tuple[MemoryPoolConfig, dict[str, Any]]:
        """calculate_pool_sizes on the KV budget a hybrid model's state pool leaves, and the state budget."""
    def _plan_with_state(
        self, available_bytes: int, state: StateConfig, fit: str = "exact"
    ) -> tuple[PoolPlan, dict[str, Any]]:
        """The plan with a hybrid model's state pool, and SGLang's state budget as StateBudget's keywords."""
    def _unified_state_entries(self, state: StateConfig) -> tuple[int, int]:
        """``(full-side token, state slot)`` bytes in SGLang's unified buffer of a hybrid-state model."""
    def _unified_tri_entries(self, state: StateConfig) -> tuple[int, int, int]:
        """``(full-side token, SWA-side token, state slot)`` bytes in SGLang's unified tri-pool of a
        hybrid-state hybrid-SWA model."""
    def _unified_draft_decision(self) -> dict[str, Any]:
        """SGLang's fused-draft decision for this scenario's draft in its unified Mamba pool."""
    def bytes_for_tokens(self, tokens: int) -> int:
        """Exact bytes of the plan whose primary pool holds ``tokens`` (rounded up to a page);
        padding rows and the draft pool are included. The primary pool is the full pool, or
        the SWA pool for an all-SWA model."""
    def plan_for_config(self, config: MemoryPoolConfig, available_bytes: int | None = None) -> PoolPlan:
        """The plan (every pool and tensor) of given pool sizes, e.g. the sizes agreed across
        ranks. ``available_bytes=None`` sets the plan's budget to exactly the bytes it takes.
        The plan's ``fit`` is ``"given"``."""
    def _calculate_pool_sizes_many(
        self,
        available_bytes: npt.NDArray[np.int64],
        out: tuple[Any, Any, Any, Any] | None = None,
        threads: int | None = None,
    ) -> _Arrays: ...
    def _footprint(self, context_len: int) -> tuple[int, int]:
        """(full_tokens, swa_tokens) one request of context_len tokens holds."""
    def _concurrency(self, config: MemoryPoolConfig, context_len: int) -> int:
        """Requests of context_len tokens that config's pools hold at once."""
    def _max_context_len(self, config: MemoryPoolConfig, requests: int) -> int | None:
        """The longest context (tokens) at which config holds requests at once (None: unbounded)."""
    def _min_budget(self, requests: int, context_len: int) -> tuple[int, int]:
        """(bytes, primary_tokens): the smallest exact-fit budget for requests x context_len."""
    def _suggest_swa_ratio(
        self, context_lengths: list[int], weights: list[float] | None, available_bytes: int
    ) -> dict[str, Any]: ...

def _plan_many(
    available_bytes: int | npt.NDArray[np.int64],
    scalars: dict[str, object],
    columns: dict[str, npt.NDArray[Any]],
    out: tuple[Any, Any, Any, Any] | None = None,
    threads: int | None = None,
) -> _Arrays: ...
def _plan_many_state(
    available_bytes: int | npt.NDArray[np.int64],
    scalars: dict[str, object],
    columns: dict[str, npt.NDArray[Any]],
    state: StateConfig,
    state_scalars: dict[str, object],
    state_columns: dict[str, npt.NDArray[Any]],
    out: tuple[Any, ...] | None = None,
) -> tuple[_Arrays, npt.NDArray[np.int64]]:
    """_plan_many with a hybrid-state model's state; use :func:`kvbudget.plan_many` with state=."""
def _choice_codes(field: str, names: list[str]) -> list[int]: ...
def _canonical_name(field: str, name: str) -> str: ...
