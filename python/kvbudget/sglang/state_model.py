"""The recurrent state SGLang 0.5.23 gives a checkpoint, read from its ``config.json``.

:func:`state_from_hf_config` reads a config as SGLang's own config classes read it for the state
pool (their ``mamba2_cache_params`` property, over ``configs/mamba_utils.py``) and returns the
:class:`~kvbudget.sglang.state.StateConfig` of one rank, or None where SGLang plans no state pool.
SGLang picks the state's config class by ``model_type`` (the class ``get_config`` loads) and
``configs/hybrid_arch.py``'s ``mambaish_config``:

* gated delta net (``hybrid_gdn_config``: ``mixer="gdn"``): Qwen3-Next, Qwen3.5 and Qwen3.5-MoE
  (text configs and the ``text_config`` of their ConditionalGeneration wrappers), Intern-S2
  (preview, Mobius), Jet-Nemotron and Jet-VLM. The Qwen classes derive the layer kinds from
  ``full_attention_interval`` (every ``interval``-th layer is full attention; SGLang's
  ``layers_block_type`` never reads ``layer_types``), Jet from ``layer_types`` (``"jet"``).
* Mamba-2 shapes (``mamba2_config``: ``mixer="mamba2"``): Nemotron-H (``layers_block_type``, else
  ``hybrid_override_pattern``: ``M`` layers), Falcon-H1 (every layer), Granite-4.0-H
  (``layer_types`` ``mamba``; none: no state pool), LFM2, LFM2-MoE and LFM2-VL (the ``conv`` /
  ``short_conv`` layers: a conv state only, ``ssm_state_dim=0``), ZAYA1 (its attention layers' two
  conv states, :mod:`kvbudget.sglang.zaya`), Inkling (every layer's sconv windows, bfloat16:
  :mod:`kvbudget.sglang.inkling`), Mamba-2, and Mamba-1 / Falcon-Mamba / raw state-spaces Mamba
  (``create_full_rank``).
* Kimi delta attention (``hybrid_kda_config``: ``mixer="kda"``): Kimi-Linear and Kimi-K3's
  ``text_config`` (``linear_attn_config.kda_layers``, 1-based).
* Bailing hybrids (:mod:`kvbudget.sglang.bailing`): Ling 3's KDA, Ling 2.5's lightning state.

The TP width is SGLang's: attention TP (``get_parallel().attn_tp_size``, kvbudget's ``tp_size``;
``linear_attn_tp_size()`` is the same for these models, as CP-TP group sharing is only for
GLM-5-Next and Qwen4-Exp), but the full TP group (``tp_size * attn_dp_size``) for Mamba-1, Mamba-2
and ZAYA1. The dtypes are ``mamba2_state_dtype``'s (Inkling's class fixes both): the temporal
state ``mamba_ssm_dtype`` (``--mamba-ssm-dtype`` / ``SGLANG_MAMBA_SSM_DTYPE``), else the config's
``mamba_ssm_dtype`` for the classes that pass themselves (Qwen, Jet, Nemotron-H, Falcon-H1, LFM2,
ZAYA1; an unknown name there reads as float32, as SGLang warns), else float32; the conv state
``conv_dtype`` (``SGLANG_MAMBA_CONV_DTYPE``), else bfloat16. ``stage_state_layers`` is
``_handle_max_mamba_cache``'s largest per-stage share of the state layers over SGLang's pipeline
split of ``ModelConfig.num_hidden_layers`` (:func:`kvbudget.sglang.pipeline.stage_ranges`).

Where SGLang's class fails on a config (a missing ``full_attention_interval`` or ``n_groups``, an
LFM2 without conv layers, dims TP does not divide, ...), this raises ``ConfigError`` (an
:class:`~kvbudget.errors.InvalidConfigError`) saying so, as it does for the classes it does not read
(:data:`UNREAD_STATE_MODEL_TYPES`): it never prices a state SGLang would not build.
``tests/test_sglang_state_model.py`` holds this to SGLang's code executed from the wheel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvbudget.models.config_io import ConfigError, PathOrDict, load_hf_config
from kvbudget.models.layer_kinds import LEGACY_KINDS, NEMOTRON_H_PATTERN, is_kda_layer
from kvbudget.sglang.bailing import bailing_state
from kvbudget.sglang.pipeline import stage_ranges
from kvbudget.sglang.state import StateConfig, StateDims, full_rank_dims, kda_dims, mamba2_dims
from kvbudget.sglang.inkling import INKLING_STATE_DTYPE, INKLING_TYPES, inkling_state
from kvbudget.sglang.zaya import zaya_attention_ids, zaya_config, zaya_state

__all__ = ["READ_FIELDS", "STATE_MODEL_TYPES", "UNMODELLED_STATES", "UNREAD_STATE_MODEL_TYPES", "attention_layer_ids",
           "state_from_hf_config"]

_DTYPES = ("float32", "bfloat16", "float16")
#: StateConfig fields this module sets from the config (not serving inputs).
READ_FIELDS = frozenset({"num_state_layers", "stage_state_layers", "conv_elems", "ssm_heads", "ssm_head_dim",
                          "ssm_state_dim", "k_heads_per_tp", "conv_kernel", "conv_dtype", "ssm_dtype", "mixer"})  # fmt: skip


@dataclass(frozen=True)
class _Read:
    """One config read as SGLang's class reads it for the state pool."""

    mixer: str
    dims: StateDims
    layers: list[int]
    num_hidden_layers: int  # ModelConfig.num_hidden_layers (the pipeline split's layer count)
    dtype_source: Mapping[str, Any] | None  # the config mamba2_state_dtype(self) reads, or None
    one_window: bool = True  # every conv shape's window is conv_kernel - 1 (else: conv_kernel unknown)
    fixed_dtype: str | None = None  # the conv and temporal dtype where the class fixes both (Inkling)


@dataclass(frozen=True)
class _Tp:
    attn: int  # get_parallel().attn_tp_size (linear_attn_tp_size() too)
    full: int  # get_parallel().tp_size


class _Cfg:
    """Reads of one config mapping, errors naming the key (``label`` is its dotted prefix)."""

    def __init__(self, cfg: Mapping[str, Any], label: str = "") -> None:
        self.cfg, self.label = cfg, label

    def key(self, k: str) -> str:
        return f"{self.label}{k}"

    def has(self, k: str) -> bool:
        return k in self.cfg

    def get(self, k: str, default: Any = None) -> Any:
        return self.cfg.get(k, default)

    def num(self, k: str, default: int | None = None) -> int:
        """A positive int; ``default`` where the class has one and the key is absent."""
        if k not in self.cfg and default is not None:
            return default
        v = self.cfg.get(k)
        if v is None:
            raise ConfigError(f"config.json: {self.key(k)} is {'null' if k in self.cfg else 'missing'}; "
                              f"SGLang 0.5.23's config class needs it for the state pool", self.key(k))  # fmt: skip
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"config.json: {self.key(k)} must be a positive int, got {v!r}", self.key(k))
        return v

    def sub(self, k: str, *, required: str | None = None) -> _Cfg:
        """The mapping under ``k``; ``required`` says why SGLang fails without one."""
        v = self.cfg.get(k)
        if not isinstance(v, Mapping):
            why = required or "SGLang 0.5.23 reads the state from it"
            raise ConfigError(f"config.json: {self.key(k)} is {'missing' if v is None else type(v).__name__}; {why}",
                              self.key(k))  # fmt: skip
        return _Cfg(v, f"{self.key(k)}.")

    def str_list(self, k: str) -> list[str]:
        v = self.cfg.get(k)
        if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
            raise ConfigError(f"config.json: {self.key(k)} must be a list of strings, got {v!r}", self.key(k))
        return v

    def int_list(self, k: str) -> list[int]:
        v = self.cfg.get(k)
        if not isinstance(v, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in v):
            raise ConfigError(f"config.json: {self.key(k)} must be a list of ints, got {v!r}", self.key(k))
        return v


# -- gated delta net ------------------------------------------------------------------------------
#: transformers 5.19.0's attention layer kinds (``ALLOWED_ATTN_LAYER_TYPES``) and the legacy names
#: it remaps (``_LEGACY_LAYER_TYPE_REMAP``): its own Qwen3-Next / Qwen3.5 classes, which load a
#: config before SGLang's class does, validate ``layer_types`` against them.
_HF_LAYER_TYPES = frozenset({
    "full_attention", "sliding_attention", "chunked_attention", "window_attention", "indexed_attention",
    "compressed_sparse_attention", "heavily_compressed_attention", "minimax_m3_sparse", "conv", "moe", "hybrid",
    "hybrid_sliding", "linear_attention",
})  # fmt: skip
_HF_LEGACY = {"mamba": "linear_attention", "attention": "full_attention",
              "deepseek_sparse_attention": "indexed_attention", "qwen_sparse_attention": "indexed_attention"}


def _hf_layer_types(c: _Cfg, hf_default_layers: int) -> None:
    """transformers' ``validate_layer_type`` on ``layer_types`` (SGLang never reads them, but
    transformers' own class refuses a config whose kinds or count are off)."""
    if c.get("layer_types") is None:
        return
    kinds = [_HF_LEGACY.get(t, t) for t in c.str_list("layer_types")]
    n = c.num("num_hidden_layers", hf_default_layers)
    if not set(kinds) <= _HF_LAYER_TYPES or len(kinds) != n:
        raise ConfigError(f"config.json: {c.key('layer_types')} must name one of transformers' layer kinds for "
                          f"each of the {n} layers; transformers 5.19.0's config class refuses it (SGLang loads "
                          "it first)", c.key("layer_types"))  # fmt: skip


def _qwen_next(c: _Cfg, tp: _Tp, hf_default_layers: int | None = None) -> _Read:
    """``Qwen3NextConfig.mamba2_cache_params`` (Qwen3.5, Intern-S2 inherit it), SGLang's defaults;
    ``hf_default_layers``: the layer count of transformers' class for the model type, where it has one."""
    if hf_default_layers is not None:
        _hf_layer_types(c, hf_default_layers)
    n = c.num("num_hidden_layers", 48)
    interval = c.get("full_attention_interval")
    if "full_attention_interval" not in c.cfg or isinstance(interval, bool) or not isinstance(interval, (int, float)) \
            or interval == 0:  # fmt: skip
        raise ConfigError(f"config.json: SGLang 0.5.23's Qwen3-Next config class derives the layer kinds from "
                          f"{c.key('full_attention_interval')} (every interval-th layer is full attention), which "
                          f"this config {'lacks' if interval is None else f'gives as {interval!r}'}; SGLang fails "
                          "on it", c.key("full_attention_interval"))  # fmt: skip
    nk, nv = c.num("linear_num_key_heads", 16), c.num("linear_num_value_heads", 32)
    kd, vd = c.num("linear_key_head_dim", 128), c.num("linear_value_head_dim", 128)
    dims = mamba2_dims(tp.attn, vd * nv, nk, nv, vd, kd, c.num("linear_conv_kernel_dim", 4))
    return _Read("gdn", dims, [i for i in range(n) if (i + 1) % interval != 0], n, c.cfg)


def _qwen(hf_default_layers: int | None, wrapped: bool) -> Callable[[_Cfg, _Tp], _Read]:
    """The Qwen-family reader of one model type (``wrapped``: its ``text_config``)."""

    def read(c: _Cfg, tp: _Tp) -> _Read:
        if wrapped:
            c = c.sub("text_config", required="without one SGLang builds its default text config, which has no "
                                              "full_attention_interval, and fails")  # fmt: skip
        return _qwen_next(c, tp, hf_default_layers)

    return read


_JET_BLOCK = ("mode", "expand_v", "num_heads", "head_dim", "norm_eps", "conv_size", "dconv_generator_reduction",
              "dconv_implementation")  # fmt: skip


def _jet(c: _Cfg, tp: _Tp) -> _Read:
    """``JetNemotronConfig.mamba2_cache_params``: ``JetBlockConfig(**efficient_attention_config["jet"])``."""
    jet = c.sub("efficient_attention_config").sub("jet")
    if set(jet.cfg) != set(_JET_BLOCK):
        raise ConfigError(f"config.json: {jet.label[:-1]} must have exactly the JetBlockConfig fields "
                          f"{', '.join(_JET_BLOCK)}; SGLang 0.5.23 builds one from it", jet.label[:-1])  # fmt: skip
    heads, k_dim, expand = jet.num("num_heads"), jet.num("head_dim"), jet.get("expand_v")
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or int(k_dim * expand) < 1:
        raise ConfigError(f"config.json: {jet.key('expand_v')} must be a positive number, got {expand!r}",
                          jet.key("expand_v"))  # fmt: skip
    v_dim = int(k_dim * expand)
    dims = mamba2_dims(tp.attn, heads * v_dim, heads, heads, v_dim, k_dim, jet.num("conv_size"))
    layers = [i for i, t in enumerate(c.str_list("layer_types")) if t == "jet"]
    return _Read("gdn", dims, layers, c.num("num_hidden_layers"), c.cfg)


# -- Mamba-2 shapes -------------------------------------------------------------------------------
_LEGACY_NAME = {v: k for k, v in LEGACY_KINDS.items()}
#: SGLang's Nemotron-H config class: the pattern's characters with the legacy kind names.
_NEMOTRON_KINDS = {ch: _LEGACY_NAME.get(kind, kind) for ch, kind in NEMOTRON_H_PATTERN.items()}


def _nemotron_kinds(c: _Cfg) -> list[str]:
    """``NemotronHConfig``'s layer kinds: ``layers_block_type``, else ``hybrid_override_pattern``,
    else its default."""
    if c.get("layers_block_type") is not None:
        kinds = c.str_list("layers_block_type")
    elif c.get("hybrid_override_pattern", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-") is not None:
        pattern = c.get("hybrid_override_pattern", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-")
        if not isinstance(pattern, str) or any(ch not in _NEMOTRON_KINDS for ch in pattern):
            raise ConfigError(f"config.json: {c.key('hybrid_override_pattern')} must use only M, *, - and E, "
                              f"got {pattern!r}", c.key("hybrid_override_pattern"))  # fmt: skip
        kinds = [_NEMOTRON_KINDS[ch] for ch in pattern]
    else:
        kinds = ["mamba", "moe", "attention", "moe"]  # DEFAULT_LAYERS_BLOCK_TYPE
    bad = sorted(set(kinds) - set(_NEMOTRON_KINDS.values()))
    if bad:
        raise ConfigError(f"config.json: layers_block_type has {bad}; SGLang 0.5.23's Nemotron-H config class "
                          f"accepts only {sorted(_NEMOTRON_KINDS.values())}", c.key("layers_block_type"))  # fmt: skip
    return kinds


def _nemotron_h(c: _Cfg, tp: _Tp) -> _Read:
    """``NemotronHConfig``: the ``mamba`` layers of :func:`_nemotron_kinds`; ``n_groups`` from the
    config (no default); ``conv_kernel``, else ``mamba_d_conv``."""
    kinds = _nemotron_kinds(c)
    if not c.has("n_groups"):
        raise ConfigError("config.json: SGLang 0.5.23's Nemotron-H state reads n_groups (not mamba_n_groups), "
                          "which this config lacks; SGLang fails on it", c.key("n_groups"))  # fmt: skip
    heads, head_dim = c.num("mamba_num_heads", 128), c.num("mamba_head_dim", 64)
    conv = c.num("conv_kernel") if c.has("conv_kernel") else c.num("mamba_d_conv", 4)
    dims = mamba2_dims(tp.attn, heads * head_dim, c.num("n_groups"), heads, head_dim, c.num("ssm_state_size", 128),
                       conv)  # fmt: skip
    return _Read("mamba2", dims, [i for i, k in enumerate(kinds) if k == "mamba"], len(kinds), c.cfg)


def _nemotron_h_puzzle(c: _Cfg, tp: _Tp) -> _Read:
    """``NemotronHPuzzleConfig``: Nemotron-H's top-level state (it needs ``block_configs``)."""
    if not isinstance(c.get("block_configs"), list):
        raise ConfigError("config.json: SGLang 0.5.23's Nemotron-H puzzle config class requires block_configs",
                          c.key("block_configs"))  # fmt: skip
    return _nemotron_h(c, tp)


def _falcon_h1(c: _Cfg, tp: _Tp) -> _Read:
    """``FalconH1Config``: the Mamba-2 mixer of every layer (``mamba_d_ssm``, else ``mamba_expand * hidden``)."""
    n = c.num("num_hidden_layers", 32)
    heads = c.num("mamba_n_heads", 128)
    if c.get("mamba_d_ssm", 1024) is None:
        inter = c.num("mamba_expand", 2) * c.num("hidden_size", 4096)
    else:
        inter = c.num("mamba_d_ssm", 1024)
    head_dim = inter // heads if c.get("mamba_d_head", "auto") == "auto" else c.num("mamba_d_head")
    if inter % heads or head_dim * heads != inter:
        raise ConfigError(f"config.json: Falcon-H1's mamba_n_heads ({heads}) * mamba_d_head must equal the Mamba "
                          f"intermediate size ({inter}); SGLang 0.5.23's config class refuses it",
                          c.key("mamba_d_head"))  # fmt: skip
    dims = mamba2_dims(tp.attn, inter, c.num("mamba_n_groups", 1), heads, head_dim, c.num("mamba_d_state", 256),
                       c.num("mamba_d_conv", 4))  # fmt: skip
    return _Read("mamba2", dims, list(range(n)), n, c.cfg)


def _granite_kinds(c: _Cfg) -> list[str]:
    """``GraniteMoeHybridConfig``'s layer kinds: ``layer_types`` (``linear_attention`` is ``mamba``,
    ``full_attention`` ``attention``), or every 6th layer attention without them."""
    n = c.num("num_hidden_layers", 40)
    if c.get("layer_types") is None:
        kinds = ["attention" if (i + 1) % 6 == 0 else "mamba" for i in range(n)]
    else:
        alias = {"linear_attention": "mamba", "full_attention": "attention"}
        kinds = [alias.get(t, t) for t in c.str_list("layer_types")]
    if len(kinds) != n or not set(kinds) <= {"mamba", "attention"}:
        raise ConfigError(f"config.json: {c.key('layer_types')} must give mamba or attention for each of the {n} "
                          "layers; SGLang 0.5.23's Granite-4.0-H config class refuses it",
                          c.key("layer_types"))  # fmt: skip
    inter = c.num("mamba_expand", 2) * c.num("hidden_size", 2048)
    heads, head_dim = c.num("mamba_n_heads", 64), c.num("mamba_d_head", 64)
    if head_dim * heads != inter:  # checked when the class loads the config, state or not
        raise ConfigError(f"config.json: Granite-4.0-H's mamba_d_head * mamba_n_heads ({head_dim * heads}) must "
                          f"equal mamba_expand * hidden_size ({inter}); SGLang 0.5.23's config class refuses it",
                          c.key("mamba_d_head"))  # fmt: skip
    return kinds


def _granite(c: _Cfg, tp: _Tp) -> _Read | None:
    """``GraniteMoeHybridConfig``: the ``mamba`` layers of :func:`_granite_kinds`; no Mamba layer:
    ``mamba2_config`` gives no state."""
    kinds = _granite_kinds(c)
    inter = c.num("mamba_expand", 2) * c.num("hidden_size", 2048)
    heads, head_dim = c.num("mamba_n_heads", 64), c.num("mamba_d_head", 64)
    layers = [i for i, k in enumerate(kinds) if k == "mamba"]
    if not layers:
        return None
    dims = mamba2_dims(tp.attn, inter, c.num("mamba_n_groups", 1), heads, head_dim, c.num("mamba_d_state", 128),
                       c.num("mamba_d_conv", 4))  # fmt: skip
    return _Read("mamba2", dims, layers, len(kinds), None)


def _lfm2_kinds(c: _Cfg, moe: bool) -> list[str]:
    """transformers' LFM2 layer kinds: ``layer_types``, else (LFM2) full attention at
    ``full_attn_idxs`` (default: every layer) and ``conv`` elsewhere."""
    if c.get("layer_types") is not None:
        return c.str_list("layer_types")
    if moe:
        raise ConfigError(f"config.json: LFM2-MoE without {c.key('layer_types')} has no conv layer for SGLang "
                          "0.5.23, whose state pool then fails (its mamba2_cache_params is None)",
                          c.key("layer_types"))  # fmt: skip
    n = c.num("num_hidden_layers", 32)
    full = set(c.int_list("full_attn_idxs")) if c.get("full_attn_idxs") is not None else set(range(n))
    return ["full_attention" if i in full else "conv" for i in range(n)]


def _lfm2(c: _Cfg, moe: bool, tp: _Tp) -> _Read:
    """``Lfm2Config`` / ``Lfm2MoeConfig`` (the text config of ``Lfm2VlConfig``): a conv state of
    ``hidden_size`` channels over the conv layers; only ``Lfm2Config`` passes itself to
    ``mamba2_state_dtype``."""
    layers = [i for i, t in enumerate(_lfm2_kinds(c, moe)) if t in ("conv", "short_conv")]
    if not layers:
        raise ConfigError("config.json: this LFM2 config has no conv layer; SGLang 0.5.23 still plans a state "
                          "pool for it and fails (its mamba2_cache_params is None)", c.key("layer_types"))  # fmt: skip
    hidden = c.num("hidden_size", 2048 if moe else 2560)
    dims = mamba2_dims(tp.attn, hidden, 1, tp.attn, hidden, 0, c.num("conv_L_cache", 3))
    n = c.num("num_hidden_layers", 32)
    return _Read("mamba2", dims, layers, n, c.cfg if c.label == "" and not moe else None)


def _lfm2_vl_text(c: _Cfg) -> tuple[_Cfg, bool]:
    """``Lfm2VlConfig``'s ``text_config`` (an LFM2 or LFM2-MoE config, whose ``layer_types`` SGLang's
    class enumerates) and whether it is LFM2-MoE."""
    text = c.sub("text_config", required="without one SGLang builds an all-attention LFM2 and its state "
                                         "pool fails")  # fmt: skip
    kind = text.get("model_type", "lfm2")
    if kind not in ("lfm2", "lfm2_moe"):
        raise ConfigError(f"config.json: kvbudget reads LFM2-VL's text_config as LFM2 or LFM2-MoE, not "
                          f"{kind!r}", text.key("model_type"))  # fmt: skip
    if kind == "lfm2_moe" and text.get("layer_types") is None:
        raise ConfigError("config.json: SGLang 0.5.23's LFM2-VL enumerates text_config.layer_types, which this "
                          "LFM2-MoE text config lacks", text.key("layer_types"))  # fmt: skip
    return text, kind == "lfm2_moe"


def _zaya(c: _Cfg, tp: _Tp) -> _Read:
    """``ZayaConfig``: two conv states per attention layer, no SSM state, over the global TP group
    (``conv_kernel`` unknown unless both windows are 1: :mod:`kvbudget.sglang.zaya`)."""
    z = zaya_config(c.cfg)
    conv, padding = zaya_state(z, tp.full, tp.attn)
    dims = StateDims(conv_elems=conv, ssm_heads=1, ssm_head_dim=1, ssm_state_dim=0, k_heads_per_tp=1,
                     conv_kernel=padding + 1)  # fmt: skip
    return _Read("mamba2", dims, zaya_attention_ids(z), z["num_hidden_layers"], c.cfg, one_window=padding == 1)


def _mamba1(c: _Cfg, tp: _Tp, hidden_default: int = 768) -> _Read:
    """``_mamba1_cache_params`` (Mamba, Falcon-Mamba): full-rank, ``intermediate_size`` (transformers:
    ``expand * hidden_size`` unless the config gives it), over the full TP group."""
    n = c.num("num_hidden_layers", 32)
    inter = c.num("intermediate_size") if c.has("intermediate_size") else \
        c.num("expand", 2) * c.num("hidden_size", hidden_default)  # fmt: skip
    dims = full_rank_dims(tp.full, inter, c.num("state_size", 16), c.num("conv_kernel", 4))
    return _Read("mamba2", dims, list(range(n)), n, None)


def _raw_mamba(c: _Cfg, tp: _Tp) -> _Read:
    """``_try_load_raw_mamba_config``: ``d_model`` / ``n_layer`` / ``ssm_cfg.d_state`` into a Mamba config."""
    ssm = c.sub("ssm_cfg", required="SGLang 0.5.23 reads d_state from it")
    n = c.num("n_layer")
    dims = full_rank_dims(tp.full, 2 * c.num("d_model"), ssm.num("d_state", 16), 4)
    return _Read("mamba2", dims, list(range(n)), n, None)


def _mamba2(c: _Cfg, tp: _Tp) -> _Read:
    """``Mamba2Config``: ``intermediate_size`` as the config gives it (transformers 5.19.0's class has
    none of its own), over the full TP group."""
    if not c.has("intermediate_size"):
        raise ConfigError("config.json: SGLang 0.5.23's Mamba2Config reads intermediate_size, which this config "
                          "lacks (transformers 5.19.0's Mamba2Config does not derive it); SGLang fails on it",
                          c.key("intermediate_size"))  # fmt: skip
    heads, head_dim = c.num("num_heads", 128), c.num("head_dim", 64)
    if c.num("hidden_size", 4096) * c.num("expand", 2) != heads * head_dim:
        raise ConfigError("config.json: Mamba-2's hidden_size * expand must equal num_heads * head_dim; "
                          "transformers 5.19.0 refuses it", c.key("num_heads"))  # fmt: skip
    n = c.num("num_hidden_layers", 64)
    dims = mamba2_dims(tp.full, c.num("intermediate_size"), c.num("n_groups", 8), heads, head_dim,
                       c.num("state_size", 128), c.num("conv_kernel", 4))  # fmt: skip
    return _Read("mamba2", dims, list(range(n)), n, None)


# -- Kimi delta attention -------------------------------------------------------------------------
def _kimi_linear(c: _Cfg, tp: _Tp) -> _Read:
    """``KimiLinearConfig``: ``linear_attn_config`` (``kda_layers`` 1-based), default dtypes."""
    lac = c.sub("linear_attn_config", required="SGLang 0.5.23 plans a KDA state pool for Kimi-Linear and "
                                               "fails without one")  # fmt: skip
    for k in ("kda_layers", "full_attn_layers"):
        if lac.get(k) is None:
            raise ConfigError(f"config.json: SGLang 0.5.23's Kimi-Linear config class asserts {lac.key(k)}",
                              lac.key(k))  # fmt: skip
    if c.get("moe_router_activation_func", "sigmoid") not in ("softmax", "sigmoid"):
        raise ConfigError("config.json: SGLang 0.5.23's Kimi-Linear config class asserts moe_router_activation_func "
                          "is softmax or sigmoid", c.key("moe_router_activation_func"))  # fmt: skip
    kda = set(lac.int_list("kda_layers"))
    n = c.num("num_hidden_layers", 32)
    dims = kda_dims(tp.attn, lac.num("num_heads"), lac.num("head_dim"), conv_kernel=lac.num("short_conv_kernel_size"))
    return _Read("kda", dims, [i for i in range(n) if is_kda_layer(kda, i)], n, None)


def _text(reader: Callable[[_Cfg, _Tp], _Read], why: str) -> Callable[[_Cfg, _Tp], _Read]:
    """``reader`` over a wrapper's ``text_config`` (``why``: what SGLang does without one)."""

    def read(c: _Cfg, tp: _Tp) -> _Read:
        return reader(c.sub("text_config", required=why), tp)

    read.__doc__ = f"``text_config`` read by {reader.__name__}"
    return read


#: The model types whose SGLang config class this module reads, and how.
_READERS: dict[str, Callable[[_Cfg, _Tp], _Read | None]] = {
    "qwen3_next": _qwen(48, False), "qwen3_5_text": _qwen(32, False), "qwen3_5_moe_text": _qwen(40, False),
    "qwen3_5": _qwen(32, True), "qwen3_5_moe": _qwen(40, True), "interns2_mobius_text": _qwen(None, False),
    **dict.fromkeys(("intern_s2_preview", "interns2_mobius"), _qwen(None, True)), "jet_nemotron": _jet,
    "jet_vlm": _text(_jet, "without one SGLang builds a Jet-Nemotron config without layer_types and fails"),
    "nemotron_h": _nemotron_h, "nemotron_h_puzzle": _nemotron_h_puzzle, "falcon_h1": _falcon_h1,
    "granitemoehybrid": _granite, "lfm2": lambda c, tp: _lfm2(c, False, tp),
    "lfm2_moe": lambda c, tp: _lfm2(c, True, tp), "lfm2_vl": lambda c, tp: _lfm2(*_lfm2_vl_text(c), tp),
    "zaya": _zaya, "mamba": _mamba1, "falcon_mamba": lambda c, tp: _mamba1(c, tp, 768), "mamba2": _mamba2,
    "kimi_linear": _kimi_linear, "bailing_hybrid": lambda c, tp: _Read(*bailing_state(c.cfg, tp.attn), None),
    "kimi_k3": _text(_kimi_linear, "without one SGLang builds a Kimi-Linear config without linear_attn_config "
                                   "and fails"),
    **dict.fromkeys(INKLING_TYPES, lambda c, tp: _Read("mamba2", *inkling_state(c.cfg, tp.attn), None,
                                                       fixed_dtype=INKLING_STATE_DTYPE)),
}  # fmt: skip
def _kind_ids(kinds: list[str], *names: str) -> list[int]:
    return [i for i, k in enumerate(kinds) if k in names]


#: The full-attention layers (the config class's ``full_attention_layer_ids``, what SGLang's
#: Default pool counts) of the Mamba-2-shaped families, from the same layer kinds as their
#: state layers; the other families' are :mod:`kvbudget.sglang.model`'s.
_ATTENTION: dict[str, Callable[[_Cfg], list[int]]] = {
    **dict.fromkeys(("nemotron_h", "nemotron_h_puzzle"), lambda c: _kind_ids(_nemotron_kinds(c), "attention")),
    "falcon_h1": lambda c: list(range(c.num("num_hidden_layers", 32))),  # attention beside Mamba in every layer
    "granitemoehybrid": lambda c: _kind_ids(_granite_kinds(c), "attention"),
    "lfm2": lambda c: _kind_ids(_lfm2_kinds(c, False), "full_attention"),
    "lfm2_moe": lambda c: _kind_ids(c.str_list("layer_types"), "full_attention") if c.get("layer_types") else [],
    "lfm2_vl": lambda c: _kind_ids(_lfm2_kinds(*_lfm2_vl_text(c)), "full_attention"),
    "zaya": lambda c: zaya_attention_ids(zaya_config(c.cfg)),
}  # fmt: skip


def attention_layer_ids(config: Mapping[str, Any]) -> list[int] | None:
    """The full-attention layers SGLang 0.5.23's KV pool counts for a Mamba-2-shaped hybrid
    (Nemotron-H, Falcon-H1, Granite-4.0-H, LFM2, LFM2-MoE, LFM2-VL, ZAYA1: the config class's
    ``full_attention_layer_ids``), read with the layer kinds of its state layers; None for any
    other model type, and for a Granite-4.0-H without Mamba layers (no state pool).

    Raises:
        ConfigError: layer kinds SGLang's config class refuses, or (ZAYA1) its model class fails on.
    """
    model_type = config.get("model_type")
    reader = _ATTENTION.get(model_type) if isinstance(model_type, str) else None
    if reader is None:
        return None
    c = _Cfg(config)
    if model_type == "granitemoehybrid" and "mamba" not in _granite_kinds(c):
        return None
    return reader(c)


#: Why kvbudget refuses Qwen4-Exp and MiniCPM-SALA: what SGLang allocates beside the pools it sizes.
UNMODELLED_STATES: Mapping[str, str] = {**dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), (
    "Qwen4-Exp's PLE short-conv and N-gram states, which SGLang allocates for every state slot beside the pool it "
    "sizes (Qwen3-Next's mamba_cache_per_req) without budgeting them, and its QSA indexer KV pool "
    "(QSATokenToKVPool, where the config has indexer_n_heads)")), "minicpm_sala": "MiniCPM-SALA's sparse attention, "
    "which attaches compressed-key tables (req_to_sparse_k1_token, _k2_token) to the request pool"}  # fmt: skip
#: Model types whose SGLang config class plans a state kvbudget does not read, and why.
UNREAD_STATE_MODEL_TYPES: Mapping[str, str] = {**UNMODELLED_STATES,
    **dict.fromkeys(("glm5_next", "glm5_next_text"), "GLM-5-Next's KDA state (CP-TP group sharing, its own "
                                                     "layer kinds)"),
    "bailing_moe_v3_vl": "the Bailing VL wrapper's text_config state",
    "gigachat3_5": "GigaChat-3.5's linear-attention state (SGLang's linear-attention model registry)",
    **dict.fromkeys(("NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3", "nemotron_h_omni"),
                    "the Nemotron-H VL wrappers' llm_config state"),
}  # fmt: skip
#: The model types this module reads the state of (raw state-spaces Mamba, without one, too).
STATE_MODEL_TYPES: frozenset[str] = frozenset(_READERS)


def _dtype(name: str, value: str | None, default: str) -> str:
    if value is None:
        return default
    if value not in _DTYPES:
        raise ConfigError(f"{name} must be one of {', '.join(_DTYPES)}, got {value!r}", name)
    return value


def _config_ssm_dtype(source: Mapping[str, Any] | None) -> str:
    """``mamba2_state_dtype(config)``'s config step: ``mamba_ssm_dtype``, an unknown name read as float32."""
    value = None if source is None else source.get("mamba_ssm_dtype")
    if isinstance(value, (list, dict)):
        raise ConfigError(f"config.json: mamba_ssm_dtype must be a dtype name, got {value!r}; SGLang 0.5.23 "
                          "fails on it", "mamba_ssm_dtype")  # fmt: skip
    return value if value in _DTYPES else "float32"


def _stage_layers(layers: list[int], n: int, pp_size: int, split: Sequence[int] | None) -> int:
    """``_handle_max_mamba_cache``'s ``max_stage_mamba_layers``: the state layers of the largest stage.
    A split is checked as ``get_pp_indices`` checks it (SGLang's model loader splits the layers
    with it too, so a bad split fails there even without state layers)."""
    ranges = stage_ranges(n, pp_size, split)
    if pp_size == 1 or not layers:
        return len(layers)
    return max(sum(1 for i in layers if start <= i < end) for start, end in ranges)


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive int, got {value!r}", name)
    return value


def _read(cfg: Mapping[str, Any], tp: _Tp) -> _Read | None:
    model_type = cfg.get("model_type")
    if not model_type and not cfg.get("architectures") and "d_model" in cfg and "ssm_cfg" in cfg:
        return _raw_mamba(_Cfg(cfg), tp)  # state-spaces Mamba: SGLang builds a MambaConfig
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError("config.json has no model_type: SGLang 0.5.23 loads the config class by it",
                          "model_type")  # fmt: skip
    if model_type in UNREAD_STATE_MODEL_TYPES:
        raise ConfigError(f"config.json: SGLang 0.5.23 plans a state pool for model_type {model_type!r} that "
                          f"kvbudget does not read ({UNREAD_STATE_MODEL_TYPES[model_type]})", "model_type")  # fmt: skip
    return None if (reader := _READERS.get(model_type)) is None else reader(_Cfg(cfg), tp)


def state_from_hf_config(
    config: PathOrDict,
    *,
    tp_size: int = 1,
    attn_dp_size: int = 1,
    pp_size: int = 1,
    pp_layer_split: Sequence[int] | None = None,
    mamba_ssm_dtype: str | None = None,
    conv_dtype: str | None = None,
    **serving_state_inputs: Any,
) -> StateConfig | None:
    """The recurrent state SGLang 0.5.23 gives ``config`` on one rank, or None (no state pool).

    Args:
        config: a ``config.json`` as a dict, its path, or the folder holding it.
        tp_size: attention tensor-parallel size (SGLang's ``attn_tp_size``, kvbudget's
            ``ServingConfig.tp_size``).
        attn_dp_size: attention data-parallel size: SGLang's ``--tp-size`` is
            ``tp_size * attn_dp_size``, the width Mamba-1 and Mamba-2 shard their state over.
        pp_size: pipeline stages; ``stage_state_layers`` is the largest stage's share.
        pp_layer_split: per-stage layer counts (``SGLANG_PP_LAYER_PARTITION``); None: SGLang's split.
        mamba_ssm_dtype: ``--mamba-ssm-dtype`` / ``SGLANG_MAMBA_SSM_DTYPE`` (``float32``,
            ``bfloat16``, ``float16``); None: the config's ``mamba_ssm_dtype`` where SGLang's
            class reads it, else float32.
        conv_dtype: ``SGLANG_MAMBA_CONV_DTYPE``; None: bfloat16. (SGLang silently reads an
            unknown name as bfloat16; kvbudget refuses one.)
        **serving_state_inputs: :class:`StateConfig`'s serving fields (``max_mamba_cache_size``,
            ``mamba_radix_cache_strategy``, ``extra_bytes_per_req``, ...), passed through.

    Raises:
        ConfigError: SGLang fails on the config, or plans a state kvbudget does not read, or
            an argument is out of range (an :class:`~kvbudget.errors.InvalidConfigError`;
            dims TP does not divide raise that from :func:`~kvbudget.sglang.state.mamba2_dims`).
        TypeError: ``serving_state_inputs`` names a field read from the config.
    """
    clash = sorted(READ_FIELDS & set(serving_state_inputs))
    if clash:
        raise TypeError(f"state_from_hf_config reads {', '.join(clash)} from the config; not a serving input")
    tp = _Tp(_positive("tp_size", tp_size), _positive("tp_size", tp_size) * _positive("attn_dp_size", attn_dp_size))
    _positive("pp_size", pp_size)
    ssm_override = _dtype("mamba_ssm_dtype", mamba_ssm_dtype, "float32") if mamba_ssm_dtype is not None else None
    conv = _dtype("conv_dtype", conv_dtype, "bfloat16")
    read = _read(load_hf_config(config), tp)
    if read is None:
        return None
    ssm = read.fixed_dtype or ssm_override or _config_ssm_dtype(read.dtype_source)
    conv = read.fixed_dtype or conv
    stage = _stage_layers(read.layers, read.num_hidden_layers, pp_size,
                          None if pp_layer_split is None else list(pp_layer_split))  # fmt: skip
    dims: dict[str, Any] = {**read.dims} if read.one_window else {**read.dims, "conv_kernel": None}
    return StateConfig(
        num_state_layers=len(read.layers), stage_state_layers=stage, mixer=read.mixer, conv_dtype=conv,
        ssm_dtype=ssm, **dims, **serving_state_inputs,
    )  # fmt: skip
