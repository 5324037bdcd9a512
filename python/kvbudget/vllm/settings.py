"""vLLM's inputs as the Rust core declares them: every layer field and engine setting.

Each field of :class:`LayerSpec` and each setting of :class:`EngineConfig` (its name,
type, default, unit, doc and, for a setting, kvbudget's ``--engine vllm`` flag) is
declared once, in the core (``rust/core/src/vllm/settings.rs``), and handed over by
``kvbudget._core._vllm_settings()``; :data:`LAYER_FIELDS` and :data:`ENGINE_SETTINGS`
are that table. The two classes are frozen dataclasses built from it at import
(keyword construction, the core's defaults, immutability, equality, repr, hashing,
pickling, ``dataclasses.replace``); the typing between the ``GENERATED`` markers
below is rendered from the same table by ``tools/stubgen.py`` (``--check``, run by
the tests, fails while it is stale); the ``--engine vllm`` flags are generated from
the settings' ``flag`` (``kvbudget.cli.parser``). A new setting is one entry in the
core's declaration and the code that reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeAlias

from kvbudget import _core

__all__ = [
    "DOCS",
    "ENGINE_SETTINGS",
    "LAYER_FIELDS",
    "PY_TYPES",
    "VLLM_VERSION",
    "EngineConfig",
    "LayerKind",
    "LayerSpec",
    "Setting",
    "annotation",
    "describe",
]


class Setting(NamedTuple):
    """One declared field of a vLLM record (a row of the core's table)."""

    name: str
    """The keyword (and JSON key)."""
    py: str
    """The Python type: ``int``, ``opt_int``, ``bool``, ``str``, ``opt_str``, ``model_len``
    (an int or ``"auto"``), ``shapes`` (a tuple of int tuples), ``names`` (a tuple of
    strings) or ``choice`` (one of :attr:`choices`)."""
    choices: tuple[str, ...]
    """The names a choice takes (empty otherwise)."""
    required: bool
    """The constructor needs it (no default)."""
    default: Any
    """The default (None for a required field)."""
    unit: str
    """``tokens``, ``bytes``, ``blocks``, ``ranks``, ``stages``, ``elements``, ... (``""``: none)."""
    flag: str | None
    """kvbudget's ``--engine vllm`` flag for it (None: the command line gives it otherwise)."""
    doc: str
    """What it is, units included."""


_TABLE: dict[str, Any] = json.loads(_core._vllm_settings())
#: The vLLM release whose planner the core restates.
VLLM_VERSION: str = _TABLE["version"]
#: The core's records, by the Python class built from each.
_RECORDS = {"LayerSpec": "VllmLayer", "EngineConfig": "VllmEngine"}
#: The kinds whose JSON form is a list: a tuple in Python (hashable, an immutable default).
_SEQUENCES = frozenset({"shapes", "names"})


def _tuple(py: str, v: Any) -> Any:
    """A list-valued default as a tuple (``shapes``: a tuple of tuples)."""
    if py not in _SEQUENCES or v is None:
        return v
    return tuple(tuple(x) if isinstance(x, list) else x for x in v)


def _settings(cls: str) -> tuple[Setting, ...]:
    rows = _TABLE["records"][_RECORDS[cls]]["settings"]
    return tuple(Setting(**{**row, "choices": tuple(row["choices"]), "default": _tuple(row["py"], row["default"])})
                 for row in rows)  # fmt: skip


#: :class:`LayerSpec`'s fields, in declaration (and positional) order.
LAYER_FIELDS: tuple[Setting, ...] = _settings("LayerSpec")
#: :class:`EngineConfig`'s settings, in declaration order.
ENGINE_SETTINGS: tuple[Setting, ...] = _settings("EngineConfig")
#: Each class's doc, as the core declares it.
DOCS: dict[str, str] = {cls: " ".join(_TABLE["records"][rec]["doc"].split()) for cls, rec in _RECORDS.items()}
#: The annotation of each :attr:`Setting.py` but ``choice``.
PY_TYPES: dict[str, str] = {
    "int": "int",
    "opt_int": "int | None",
    "bool": "bool",
    "str": "str",
    "opt_str": "str | None",
    "model_len": 'int | Literal["auto"]',
    "shapes": "tuple[tuple[int, ...], ...]",
    "names": "tuple[str, ...]",
}


def annotation(s: Setting) -> str:
    """The annotation of ``s``'s values (a choice: the ``Literal`` of its names)."""
    if s.py == "choice":
        return "Literal[" + ", ".join(json.dumps(c) for c in s.choices) + "]"
    return PY_TYPES[s.py]


def describe(s: Setting) -> str:
    """``s``'s doc on one line, with its flag (kvbudget's, vLLM's spelling but ``--pp``)."""
    text = " ".join(s.doc.split())
    return f"{text} Flag: ``{s.flag}``." if s.flag else text


def _build(cls: str, settings: tuple[Setting, ...]) -> type:
    """A frozen dataclass with one field per setting, the core's defaults and docs."""
    spec = [(s.name, annotation(s)) if s.required else (s.name, annotation(s), field(default=s.default))
            for s in settings]  # fmt: skip
    out = make_dataclass(cls, spec, frozen=True)
    out.__module__ = __name__  # (make_dataclass's module= is Python 3.12's)
    out.__doc__ = "\n".join([DOCS[cls], "", "Attributes:", *(f"    {s.name}: {describe(s)}" for s in settings)])
    return out


if TYPE_CHECKING:
    # BEGIN GENERATED (tools/stubgen.py)
    LayerKind: TypeAlias = Literal["full", "sliding", "chunked", "mla", "mamba", "mla_indexer", "key_indexer", "cross", "circular_buffer"]

    @dataclass(frozen=True)
    class LayerSpec:
        """One attention layer as one vLLM worker registers it (registration order matters)."""

        name: str
        """The layer's name (e.g. `model.layers.3.self_attn.attn`); unique per stage."""
        kind: LayerKind
        """The layer's kind: full, sliding-window, chunked-local, cross or MLA attention, an indexer's
        key cache, a circular buffer, or a state layer.
        """
        num_kv_heads: int
        """KV heads on one rank (vLLM: `max(1, total // tp)`); ignored for MLA, which has one latent
        head.
        """
        head_size: int
        """K head dim, elements (MLA: the latent dim, e.g. 576)."""
        head_size_v: int | None = None
        """V head dim, elements (default `head_size`; chunked and MLA layers take none)."""
        kv_cache_dtype: str = "auto"
        """vLLM's `--kv-cache-dtype` (`"auto"`, `"fp8"`, `"fp8_e4m3"`, `"fp8_e5m2"`,
        `"fp8_per_token_head"`, `"int8_per_token_head"`, `"nvfp4"`, `"fp8_ds_mla"`, ...).
        """
        model_dtype: str = "bfloat16"
        """The model dtype `"auto"` stores (`"bfloat16"`, `"float16"`, `"float32"`)."""
        sliding_window: int | None = None
        """The window of a sliding layer, tokens."""
        attention_chunk_size: int | None = None
        """The chunk of a chunked layer, tokens."""
        block_size: int | None = None
        """Tokens per block (default: the engine's `block_size`; a circular buffer: its ring's
        capacity).
        """
        is_draft: bool = False
        """The drafter registered this layer (it groups like a target layer)."""
        pp_stage: int = 0
        """The pipeline stage holding the layer (drafter layers: the last)."""
        state_shapes: tuple[tuple[int, ...], ...] = ()
        """A state (`mamba`) layer's tensors on one rank, elements per dim, in the layer's order
        (`get_state_shape()`: e.g. the conv state, then the SSM state).
        """
        state_dtypes: tuple[str, ...] = ()
        """Their torch dtypes, one per shape (`"float32"`, `"bfloat16"`, `"float16"`)."""
        config_state_shapes: tuple[tuple[int, ...], ...] = ()
        """The state shapes vLLM's model class reports for its configuration
        (`get_mamba_state_shape_from_config`, which sizes the attention block), where they differ
        from the layer's own (LFM2 with a drafter: no speculative conv rows); empty: the layer's,
        elements per dim.
        """
        mamba_type: Literal["mamba1", "mamba2", "short_conv", "linear", "gdn_attn"] = "mamba2"
        """A state layer's backend (`mamba_type`)."""
        prefill_checkpoint: Literal["none", "mamba2", "flashinfer_gdn", "ple_short_conv", "flashkda"] = "none"
        """The prefill-checkpoint export a state layer's class adds to its spec."""
        tp_replicated: bool = False
        """Every TP rank holds the layer's state whole (`is_kv_cache_tp_replicated`)."""
        indexer_dtype: str = "uint8"
        """An indexer layer's row dtype, torch's name (`mla_indexer`, `key_indexer`): `"uint8"`
        (DeepSeek's), `"bfloat16"` or `"float8_e4m3fn"` (MiniMax-M3's).
        """
        tokens_per_state: int = 1
        """Tokens one stored state covers (an attention spec's `tokens_per_state`): 1, or a compressed
        cache's ratio (QSA's and DeepSeek-V4's compressed keys, GLM-5-Next's kpool indexer), whose
        page holds `block_size / tokens_per_state` states.
        """

    @dataclass(frozen=True)
    class EngineConfig:
        """vLLM's engine settings that change the plan (defaults: vLLM 0.33.0's)."""

        block_size: int = 16
        """Tokens per block. Flag: ``--block-size``."""
        max_model_len: int | Literal["auto"] = 131072
        """The longest request, tokens, or `"auto"`: start from `derived_max_model_len` and shrink it
        to what fits. Flag: ``--max-model-len``.
        """
        derived_max_model_len: int | None = None
        """The model's own limit `"auto"` starts from (its `max_position_embeddings`), tokens."""
        max_num_batched_tokens: int = 8192
        """`T`, the tokens one step schedules. Flag: ``--max-num-batched-tokens``."""
        async_scheduling: bool = True
        """Async scheduling (vLLM's `--async-scheduling`, on by default): `F = (pp + 1) * T` tokens in
        flight with Model Runner V2. Flag: ``--no-async-scheduling``.
        """
        use_v2_model_runner: bool = True
        """Model Runner V2, the default runner (`VLLM_USE_V2_MODEL_RUNNER`)."""
        tp: int = 1
        """Tensor-parallel size (vLLM's `--tensor-parallel-size`), ranks."""
        pp: int = 1
        """Pipeline-parallel size (vLLM's `--pipeline-parallel-size`), stages. Flag: ``--pp``."""
        dcp: int = 1
        """Decode-context-parallel size (vLLM's `--decode-context-parallel-size`), ranks."""
        num_gpu_blocks_override: int | None = None
        """Blocks every worker allocates, whatever its budget holds. Flag:
        ``--num-gpu-blocks-override``.
        """
        kv_cache_memory_bytes: int | None = None
        """Each worker's KV budget, bytes, in place of the one it measures (vLLM's worker skips its
        memory profiling); 0 or none: the budget given. Flag: ``--kv-cache-memory-bytes``.
        """
        disable_hybrid_kv_cache_manager: bool = False
        """One group of full-attention pages for every layer (the hybrid KV-cache manager off). Flag:
        ``--disable-hybrid-kv-cache-manager``.
        """
        speculative_method: str | None = None
        """The speculative method (`"eagle"`, `"eagle3"`, `"mtp"`, `"dflash"`, `"dspark"`,
        `"draft_model"`, ...), or none.
        """
        num_speculative_tokens: int | None = None
        """`k`, the tokens the drafter proposes per step (`speculative_config.num_speculative_tokens`).
        Flag: ``--num-speculative-tokens``.
        """
        num_nextn_predict_layers: int | None = None
        """The drafter's MTP modules (`num_nextn_predict_layers`; absent means 1): multi-module MTP
        retains `k - 1` extra tokens in sliding layers.
        """
        draft_kv_cache_dtype: str | None = None
        """`speculative_config.kv_cache_dtype`: the KV dtype of every drafter layer (`is_draft`); none
        keeps each layer's own `kv_cache_dtype`.
        """
        enable_prefix_caching: bool = True
        """Prefix caching (vLLM's default). With state layers it decides the Mamba cache mode
        (`MambaModelConfig`): `align` with it, `none` without.
        """
        use_replayssm: bool = False
        """ReplaySSM (`--use-replayssm`): state layers keep no per-draft-token state blocks; a Mamba-2
        state carries its rings.
        """
        replayssm_buffer_len: int = 16
        """ReplaySSM's logical ring (`--replayssm-buffer-len`), steps."""
        mamba_backend: Literal["triton", "flashinfer"] = "triton"
        """The Mamba selective-state-update backend (`--mamba-backend`: `"triton"`, `"flashinfer"`);
        ReplaySSM's rings and checks read it.
        """
        attention_kernel_block_size: int = 16
        """The attention backend's smallest kernel block, tokens (FLASH_ATTN: any multiple of 16): the
        unit a hybrid model's attention block size is raised in.
        """
        kv_cache_layout: Literal["LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"] = "LBNHC"
        """The KV-cache layout vLLM resolved for the model (`cache_config.kv_cache_layout`,
        `VLLM_KV_CACHE_LAYOUT`): `"LBNHC"` under FLASH_ATTN; a block-outer one (`"BLHNC"`,
        `"BLNHC"`, `"BHLNC"`) where a backend declares only those, which packs layers of different
        page sizes into each block (grouping case 3). Flag: ``--kv-cache-layout``.
        """
    # END GENERATED
else:
    LayerKind = Literal[next(s.choices for s in LAYER_FIELDS if s.py == "choice")]
    LayerSpec = _build("LayerSpec", LAYER_FIELDS)
    EngineConfig = _build("EngineConfig", ENGINE_SETTINGS)
