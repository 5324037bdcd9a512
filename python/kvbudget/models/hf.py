"""Read Hugging Face ``config.json`` files into kvbudget geometry keyword arguments.

Two entry points, both pure Python (no torch, no transformers):

* :func:`geometry_kwargs_from_hf_config` returns the keyword arguments of
  ``kvbudget.ModelGeometry`` for a target model.
* :func:`draft_kwargs_from_hf_config` returns the keyword arguments of
  ``kvbudget.DraftGeometry`` for a speculative-decoding draft (EAGLE/EAGLE3
  heads, MTP modules, standalone small models).

Which layers are sliding-window (SWA) layers is decided by the first rule that
applies, in this order:

1. ``hybrid_layer_pattern`` (MiMo-V2-Flash / MiMo-V2.5): a per-layer int list,
   0 = full attention, 1 = sliding window; the SWA layers take their heads and
   dims from the ``swa_*`` keys.
2. ``layer_types`` (gpt-oss, Gemma 3n, configs re-saved by newer transformers):
   ``full_attention``, ``sliding_attention``, or ``chunked_attention`` (Llama 4).
3. Llama 4 (``model_type`` ``llama4``/``llama4_text``): ``no_rope_layers``
   (1 = RoPE + chunked local attention, 0 = NoPE + global attention); an empty
   or missing list is derived from ``no_rope_layer_interval`` (default 4):
   chunked iff ``(i + 1) % interval != 0``. Chunked layers are treated as SWA
   layers whose window is ``attention_chunk_size``.
4. ``sliding_window_pattern`` / ``_sliding_window_pattern`` (Gemma 3, Cohere2;
   class defaults 6 and 4): full iff ``(i + 1) % pattern == 0``.
5. Gemma 2 (``model_type`` ``gemma2``): alternation, sliding iff ``i`` is even.
   Gemma 3n without ``layer_types``: full iff ``(i + 1) % 5 == 0``.
6. ``use_sliding_window`` (Qwen2 family, MiMo-7B): false -> every layer full;
   true -> layers ``i >= max_window_layers`` slide.
7. A non-null ``sliding_window`` and nothing else (Mistral v0.1): every layer
   slides.
8. Otherwise every layer is full attention (Llama, Qwen3, DeepSeek-V3 MLA).

Sliding window convention. ``sliding_window_size`` in the returned kwargs is
SGLang's *exclusive* window, which is what SGLang's ``model_runner`` hands to
the pool configurators:

* Models whose SGLang implementation defines ``get_attention_sliding_window_size``
  (Gemma 2/3/3n, gpt-oss, Cohere2, Mistral-style all-SWA, Qwen2-style) use the
  HF inclusive ``sliding_window`` minus 1: HF ``sliding_window=1024`` gives
  ``sliding_window_size=1023``.
* MiMo-V2 (``hybrid_layer_pattern``) has no such method in SGLang
  (``models/mimo_v2_flash.py``); ``model_runner`` then takes
  ``model_config.sliding_window_size``, the raw ``sliding_window_size`` /
  ``sliding_window`` config value (128), unchanged.
* Llama 4 chunked attention: ``model_runner`` takes ``attention_chunk_size``
  unchanged (8192).

Multimodal configs are read through their ``text_config``. Keys a released
config leaves to the transformers class defaults (the sparse Gemma 3
``text_config``, Gemma 3n) take those defaults, listed in ``_CLASS_DEFAULTS``.

Errors raise :class:`ConfigError` (a subclass of ``kvbudget.InvalidConfigError``
when that is importable, else of ``ValueError``) whose message names the key,
e.g. ``config.json: missing key 'num_attention_heads'``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from kvbudget._moved import moved
from kvbudget.models.dsa import DSA_KEYS, dsa_fields
from kvbudget.models.config_io import ConfigError, PathOrDict, config_dtype, load_hf_config, text_part

__all__ = [
    "ConfigError",
    "DraftKind",
    "PathOrDict",
    "load_hf_config",
    "text_part",
    "config_dtype",
    "geometry_kwargs_from_hf_config",
    "GEOMETRY_KEYS",
    "DRAFT_KEYS",
    "KV_HEAD_KEYS",
]

#: The keys both engines take a config's total KV heads from, the first one present (SGLang
#: 0.5.23's ``ModelConfig.get_total_num_kv_heads``, vLLM 0.33.0's
#: ``CONFIG_FIELD_ALIASES["total_num_kv_heads"]``).
KV_HEAD_KEYS: Final[tuple[str, ...]] = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                                        "num_attention_groups")  # fmt: skip

def _declared(owner: str, skip: tuple[str, ...] = ()) -> tuple[str, ...]:
    # The field table of the core (kvbudget._core is loaded before this module:
    # it is the first thing kvbudget/__init__.py imports).
    from kvbudget._core import FIELDS

    return tuple(f["name"] for f in FIELDS[owner] if f["name"] not in skip)


#: The keyword arguments of ``kvbudget.ModelGeometry``, in signature order
#: (the two id lists, then the declared shape fields but the layer counts).
GEOMETRY_KEYS: Final[tuple[str, ...]] = ("full_attention_layer_ids", "swa_attention_layer_ids") + _declared(
    "AttentionShape", skip=("num_full_layers", "num_swa_layers")
)

#: The keyword arguments of ``kvbudget.DraftGeometry``, in signature order.
DRAFT_KEYS: Final[tuple[str, ...]] = _declared("DraftGeometry")


def declared_defaults(keys: tuple[str, ...], owner: str) -> dict[str, Any]:
    """``keys`` with the core's declared default of each ``owner`` field (None for the rest:
    the id lists and the required fields)."""
    from kvbudget._core import FIELDS

    defaults = {f["name"]: f["default"] for f in FIELDS[owner]}
    return {k: defaults.get(k) for k in keys}

DraftKind = Literal["auto", "eagle", "eagle3", "mtp", "nextn", "standalone"]


#: ``data/hf_defaults.json``, generated from transformers 5.19.0 (SGLang's own classes for the
#: model types of its registry) by ``tools/gen_hf_defaults.py``.
_HF_DATA: Final[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("data") / "hf_defaults.json").read_text(encoding="utf-8"))


def _class_defaults() -> dict[str, dict[str, Any]]:
    """Per model type, the config-class defaults of the keys the readers use (``model_types`` of
    :data:`_HF_DATA`); plus the layer-pattern parameters the classes apply in ``__post_init__``
    without keeping them as attributes (Gemma 3's 6, Cohere2's 4).
    """
    table: dict[str, dict[str, Any]] = copy.deepcopy(_HF_DATA["model_types"])
    for model_type, pattern in (("gemma3_text", 6), ("cohere2", 4)):
        table.setdefault(model_type, {})["sliding_window_pattern"] = pattern
    return table


# transformers class defaults for keys that released configs leave out.
_CLASS_DEFAULTS: Final[dict[str, dict[str, Any]]] = _class_defaults()
#: Where vLLM 0.33.0 loads a model type with transformers' own class and SGLang with its own
#: (the gated-delta-net hybrids): that class's defaults, for :class:`_View` with ``engine="vllm"``.
_VLLM_CLASS_DEFAULTS: Final[dict[str, dict[str, Any]]] = _HF_DATA.get("vllm_model_types", {})

#: Per model type, the config class's ``attribute_map`` aliases of the keys the readers use
#: (``num_hidden_layers`` -> ``n_layer``, ...): a config object answers the key with the alias.
_ATTRIBUTE_MAPS: Final[dict[str, dict[str, str]]] = _HF_DATA.get("attribute_maps", {})
#: transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``: model type -> its causal-LM class name.
CAUSAL_LM_NAMES: Final[dict[str, str]] = _HF_DATA.get("causal_lm_names", {})
#: Outer model type -> the defaults its config class merges under a ``text_config`` dict.
_TEXT_CONFIG_DEFAULTS: Final[dict[str, dict[str, Any]]] = _HF_DATA.get("text_config_defaults", {})


def text_config_of(cfg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``cfg``'s ``text_config`` as its config class loads it: under the class's own text
    defaults where it merges some (GLM-ASR, Voxtral); None without one."""
    text = cfg.get("text_config")
    if not isinstance(text, Mapping):
        return None
    merged = _TEXT_CONFIG_DEFAULTS.get(str(cfg.get("model_type")))
    return {**merged, **text} if merged else text

# Outer (multimodal) model_type -> model_type of its text_config.
_TEXT_MODEL_TYPE: Final[dict[str, str]] = {
    "gemma3": "gemma3_text",
    "gemma3n": "gemma3n_text",
    "gemma4": "gemma4_text",
    "gemma4_unified": "gemma4_unified_text",
    "llama4": "llama4_text",
    "lfm2_vl": "lfm2",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
}

#: Outer model type -> the text class SGLang 0.5.23 loads its ``text_config`` with, where that is
#: not the one transformers names (its ``_CONFIG_REGISTRY`` aliases ``gemma4_unified`` to
#: transformers' ``Gemma4Config``, whose text class is ``Gemma4TextConfig``; its own ``KimiVLConfig``
#: and ``DeepseekVL2Config`` build its copy of ``DeepseekV2Config``, ``kimi_vl_text`` and
#: ``deepseek_vl_v2_text`` in ``data/hf_defaults.json``; held by the sparse Gemma 4 Unified,
#: Kimi-VL and DeepSeek-VL2 configs of ``tests/test_sglang_model.py``).
_SGLANG_TEXT_CLASS: Final[dict[str, str]] = {"gemma4_unified": "gemma4_text", "kimi_vl": "kimi_vl_text",
                                              "deepseek_vl_v2": "deepseek_vl_v2_text"}

_MIMO_V2_TYPES: Final[frozenset[str]] = frozenset({"mimo_v2_flash", "mimo_v2"})

class _View:
    """The text part of a config, with class defaults and key-naming errors (``engine``: whose
    config class gives them, where SGLang's and vLLM's differ)."""

    def __init__(self, cfg: Mapping[str, Any], label: str = "config.json", engine: str = "sglang") -> None:
        outer_type = cfg.get("model_type")
        # SGLang loads some outer types' text with another class than transformers names
        alias = _SGLANG_TEXT_CLASS.get(str(outer_type)) if engine == "sglang" else None
        self.label = label
        self.outer = cfg
        text = cfg.get("text_config")
        if text is not None and not isinstance(text, Mapping):
            raise ConfigError(f"{label}: key 'text_config' must be an object", "text_config")
        if isinstance(text, Mapping):
            self.cfg: Mapping[str, Any] = text_config_of(cfg) or text
            self.prefix = "text_config."
            inner_type = alias or text.get("model_type")
            if not isinstance(inner_type, str):
                inner_type = _TEXT_MODEL_TYPE.get(str(outer_type), outer_type)
            self.model_type = str(inner_type or "")
        else:
            self.cfg = cfg
            self.prefix = ""
            mt = str(outer_type or "")
            # A flattened multimodal config keeps the outer model_type.
            self.model_type = alias or _TEXT_MODEL_TYPE.get(mt, mt)
        table = _VLLM_CLASS_DEFAULTS if engine == "vllm" and self.model_type in _VLLM_CLASS_DEFAULTS else _CLASS_DEFAULTS
        self.defaults = table.get(self.model_type, {})
        self.aliases = _ATTRIBUTE_MAPS.get(self.model_type, {})
        archs = cfg.get("architectures") or self.cfg.get("architectures") or []
        self.architectures: list[str] = [a for a in archs if isinstance(a, str)] if isinstance(
            archs, list
        ) else []

    def name(self, key: str) -> str:
        """Dotted key name for messages."""
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        """Whether the key is present (explicitly, by its class's alias, or by class default)."""
        return key in self.cfg or self.aliases.get(key, key) in self.cfg or key in self.defaults

    def raw(self, key: str) -> Any:
        """The key's value (read through the class's alias, class default if absent), or None."""
        alias = self.aliases.get(key)
        if alias is not None and alias in self.cfg:
            return self.cfg[alias]
        if key in self.cfg:
            return self.cfg[key]
        return self.defaults.get(key)

    def fail(self, key: str, what: str) -> ConfigError:
        """An error about one key."""
        return ConfigError(f"{self.label}: key '{self.name(key)}' {what}", self.name(key))

    def opt_int(self, key: str, minimum: int = 1) -> int | None:
        """An optional integer >= minimum (None when absent or null)."""
        v = self.raw(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise self.fail(key, f"must be an integer, got {v!r}")
        if v < minimum:
            raise self.fail(key, f"must be >= {minimum}, got {v}")
        if v > 2**63 - 1:
            raise self.fail(key, f"must be <= 2**63-1, got {v}")
        return v

    def req_int(self, key: str, minimum: int = 1) -> int:
        """A required integer >= minimum."""
        v = self.opt_int(key, minimum)
        if v is None:
            if self.raw(key) is None and key in self.cfg:
                raise self.fail(key, "must not be null")
            raise ConfigError(f"{self.label}: missing key '{self.name(key)}'", self.name(key))
        return v

    def opt_list(self, key: str) -> list[Any] | None:
        """An optional list (None when absent or null)."""
        v = self.raw(key)
        if v is None:
            return None
        if not isinstance(v, list):
            raise self.fail(key, f"must be a list, got {type(v).__name__}")
        return v


def nas_kv_heads(v: _View) -> set[int]:
    """A Nemotron-NAS (DeciLM) config's KV head counts: ``num_attention_heads`` over each attention
    block's ``n_heads_in_group`` in ``block_configs`` (no-op blocks left out; empty when all are)."""
    blocks = v.raw("block_configs")
    if not isinstance(blocks, list) or not all(isinstance(b, Mapping) and isinstance(b.get("attention"), Mapping)
                                               for b in blocks):  # fmt: skip
        raise ConfigError(f"{v.label}: a Nemotron-NAS config needs block_configs, each with an attention block",
                          v.name("block_configs"))  # fmt: skip
    heads = v.req_int("num_attention_heads")
    groups = [b["attention"].get("n_heads_in_group") for b in blocks if not b["attention"].get("no_op")]
    if not all(isinstance(g, int) and not isinstance(g, bool) and 0 < g <= heads for g in groups):
        raise ConfigError(f"{v.label}: each attention block's n_heads_in_group must be a positive integer no "
                          "larger than num_attention_heads", v.name("block_configs"))  # fmt: skip
    return {heads // g for g in groups}


def _heads_and_dims(v: _View) -> tuple[int, int, int | None]:
    """Return (num_kv_heads, head_dim, explicit v_head_dim) of a full layer."""
    num_heads = v.req_int("num_attention_heads")
    kv = v.opt_int("num_key_value_heads")
    if kv is None and v.raw("multi_query_attention") and v.has("multi_query_group_num"):
        kv = v.req_int("multi_query_group_num")  # ChatGLM's KV groups, as its modeling code reads them
    if kv is None and v.model_type == "nemotron-nas":  # DeciLM: per block, as its modeling code reads them
        counts = nas_kv_heads(v)
        if len(counts) != 1:
            raise ConfigError(f"{v.label}: a Nemotron-NAS config with KV heads {sorted(counts)} across its attention "
                              "blocks: one geometry holds one KV head count (vLLM mode, --engine vllm, reads them "
                              "per layer)", v.name("block_configs"))  # fmt: skip
        kv = counts.pop()
    if kv is None:
        kv = num_heads
    head_dim = v.opt_int("head_dim")
    if head_dim is None:
        hidden = v.req_int("hidden_size")
        if hidden % num_heads:
            raise ConfigError(
                f"{v.label}: no key '{v.name('head_dim')}', and '{v.name('hidden_size')}' "
                f"({hidden}) is not a multiple of '{v.name('num_attention_heads')}' ({num_heads})",
                v.name("head_dim"),
            )
        head_dim = hidden // num_heads
    return kv, head_dim, v.opt_int("v_head_dim")


def _hf_window_minus_one(v: _View) -> int:
    """SGLang's exclusive window from HF's inclusive ``sliding_window``."""
    key = "sliding_window"
    w = v.opt_int(key)
    if w is None:
        # Some configs (Gemma 2 9B/27B copies) also carry the same value as sliding_window_size.
        key = "sliding_window_size"
        w = v.opt_int(key)
    if w is None:
        raise ConfigError(
            f"{v.label}: the config has sliding-window layers but no key "
            f"'{v.name('sliding_window')}'",
            v.name("sliding_window"),
        )
    other = v.opt_int("sliding_window_size") if key == "sliding_window" else None
    if other is not None and other != w:
        raise ConfigError(
            f"{v.label}: keys '{v.name('sliding_window')}' ({w}) and "
            f"'{v.name('sliding_window_size')}' ({other}) disagree",
            v.name("sliding_window_size"),
        )
    return w - 1


def _layer_kinds(v: _View, n: int) -> tuple[list[str], int | None]:
    """Classify the n layers as "full" or "swa"; return them and SGLang's window."""
    # 1. MiMo-V2 hybrid_layer_pattern.
    pattern = v.opt_list("hybrid_layer_pattern")
    if pattern is not None:
        if len(pattern) != n:
            raise v.fail(
                "hybrid_layer_pattern",
                f"has {len(pattern)} entries but num_hidden_layers is {n}",
            )
        kinds = []
        for i, p in enumerate(pattern):
            if p == 0 and not isinstance(p, bool):
                kinds.append("full")
            elif p == 1 and not isinstance(p, bool):
                kinds.append("swa")
            else:
                raise v.fail("hybrid_layer_pattern", f"entry {i} must be 0 or 1, got {p!r}")
        window = None
        if "swa" in kinds:
            # SGLang reads sliding_window_size, then sliding_window, and uses it as is.
            window = v.opt_int("sliding_window_size", 0)
            if window is None:
                window = v.opt_int("sliding_window", 0)
            if window is None:
                raise ConfigError(
                    f"{v.label}: missing key '{v.name('sliding_window_size')}'",
                    v.name("sliding_window_size"),
                )
        return kinds, window

    # 2. Explicit layer_types.
    layer_types = v.opt_list("layer_types")
    if layer_types is not None:
        if len(layer_types) != n:
            raise v.fail(
                "layer_types", f"has {len(layer_types)} entries but num_hidden_layers is {n}"
            )
        kinds = []
        seen: set[str] = set()
        for i, t in enumerate(layer_types):
            if t in ("full_attention", "indexed_attention"):  # indexed: DSA's full attention
                kinds.append("full")
            elif t in ("sliding_attention", "chunked_attention"):
                kinds.append("swa")
                seen.add(t)
            else:
                raise v.fail(
                    "layer_types",
                    f"entry {i} is {t!r}; kvbudget knows 'full_attention', 'indexed_attention', "
                    "'sliding_attention' and 'chunked_attention'",
                )
        if seen == {"sliding_attention", "chunked_attention"}:
            raise v.fail(
                "layer_types",
                "mixes sliding_attention and chunked_attention; a ModelGeometry has one window",
            )
        if "chunked_attention" in seen:
            return kinds, v.req_int("attention_chunk_size")
        if "sliding_attention" in seen:
            return kinds, _hf_window_minus_one(v)
        return kinds, None

    # 3. Llama 4 chunked attention (iRoPE).
    if v.model_type in ("llama4", "llama4_text"):
        chunk = v.opt_int("attention_chunk_size")
        if chunk is None:
            return ["full"] * n, None
        no_rope = v.opt_list("no_rope_layers")
        if no_rope:
            if len(no_rope) != n:
                raise v.fail(
                    "no_rope_layers", f"has {len(no_rope)} entries but num_hidden_layers is {n}"
                )
            kinds = []
            for i, r in enumerate(no_rope):
                if r in (0, 1):  # ints 0/1 (or JSON true/false)
                    kinds.append("swa" if r else "full")
                else:
                    raise v.fail("no_rope_layers", f"entry {i} must be 0 or 1, got {r!r}")
        else:
            interval = v.opt_int("no_rope_layer_interval") or 4
            kinds = ["full" if (i + 1) % interval == 0 else "swa" for i in range(n)]
        return kinds, chunk

    # 4. A global layer every P layers (Gemma 3, Cohere2).
    pkey = next(
        (k for k in ("sliding_window_pattern", "_sliding_window_pattern") if k in v.cfg),
        "sliding_window_pattern",
    )
    period = v.opt_int(pkey)
    if period is not None:
        order = v.raw("order_of_interleaved_layers")
        if order not in (None, "local_attn_first"):
            raise v.fail(
                "order_of_interleaved_layers",
                f"is {order!r}; kvbudget knows only 'local_attn_first'",
            )
        if v.raw("sliding_window") is None and "sliding_window" in v.cfg:
            return ["full"] * n, None
        kinds = ["full" if (i + 1) % period == 0 else "swa" for i in range(n)]
        return kinds, _hf_window_minus_one(v)

    # 5. Family rules without explicit keys.
    if v.model_type == "gemma2":
        return ["swa" if i % 2 == 0 else "full" for i in range(n)], _hf_window_minus_one(v)
    if v.model_type == "gemma3n_text":
        kinds = ["full" if (i + 1) % 5 == 0 else "swa" for i in range(n)]
        return kinds, _hf_window_minus_one(v)

    # 6. Qwen2-style switch.
    if "use_sliding_window" in v.cfg:
        use = v.raw("use_sliding_window")
        if not isinstance(use, bool):
            raise v.fail("use_sliding_window", f"must be true or false, got {use!r}")
        if not use or v.raw("sliding_window") is None:
            return ["full"] * n, None
        mwl = v.opt_int("max_window_layers", 0)
        if mwl is None:
            raise ConfigError(
                f"{v.label}: 'use_sliding_window' is true but key "
                f"'{v.name('max_window_layers')}' is missing",
                v.name("max_window_layers"),
            )
        kinds = ["swa" if i >= mwl else "full" for i in range(n)]
        return kinds, (_hf_window_minus_one(v) if "swa" in kinds else None)

    # 7. One sliding_window for every layer (Mistral v0.1).
    if v.raw("sliding_window") is not None:
        return ["swa"] * n, _hf_window_minus_one(v)

    # 8. Plain full attention.
    return ["full"] * n, None


#: Most layers a config may declare (the core's limit, docs/semantics.md "Limits").
MAX_LAYERS = 1 << 20


def _target_kwargs(v: _View, include_kv_shared_layers: bool) -> dict[str, Any]:
    """Parse a target geometry from a view."""
    n = v.req_int("num_hidden_layers")
    if n > MAX_LAYERS:
        raise v.fail("num_hidden_layers", f"({n}) exceeds the {MAX_LAYERS}-layer limit")
    kw: dict[str, Any] = declared_defaults(GEOMETRY_KEYS, "AttentionShape")

    if v.raw("kv_lora_rank") is not None:
        # MLA (DeepSeek-V2/V3): the cache holds one latent of
        # kv_lora_rank + qk_rope_head_dim elements per token per layer.
        # Hybrid SWA MLA (SGLang 0.5.23): SWA layers cache a latent of
        # swa_kv_lora_rank + swa_qk_rope_head_dim (default: the full layers').
        kinds, window = _layer_kinds(v, n)
        rank = v.req_int("kv_lora_rank")
        rope = v.req_int("qk_rope_head_dim", 0)
        nope = v.req_int("qk_nope_head_dim", 0)
        swa = [i for i in range(n) if kinds[i] == "swa"]
        if swa:
            kw.update(
                sliding_window_size=window,
                swa_kv_lora_rank=v.opt_int("swa_kv_lora_rank"),
                swa_qk_rope_head_dim=v.opt_int("swa_qk_rope_head_dim", 0),
            )
        if not swa:  # a DSA model's indexer (DeepSeek-V3.2: index_topk and index_head_dim)
            arch = v.architectures[0] if v.architectures else ""
            kw.update(dsa_fields(arch, {k: v.raw(k) for k in DSA_KEYS}, range(n)))
        kw.update(
            full_attention_layer_ids=[i for i in range(n) if kinds[i] == "full"],
            swa_attention_layer_ids=swa,
            num_kv_heads=v.opt_int("num_key_value_heads") or v.req_int("num_attention_heads"),
            head_dim=nope + rope,
            v_head_dim=v.req_int("v_head_dim"),
            kv_lora_rank=rank,
            qk_rope_head_dim=rope,
        )
        if kw["head_dim"] < 1:
            raise v.fail("qk_nope_head_dim", "plus 'qk_rope_head_dim' must be >= 1")
        return kw

    kv, head_dim, v_head_dim = _heads_and_dims(v)
    kinds, window = _layer_kinds(v, n)

    # Gemma 3n: the last num_kv_shared_layers layers reuse earlier layers' KV.
    owning = n
    shared = v.opt_int("num_kv_shared_layers", 0) or 0
    if shared and not include_kv_shared_layers:
        if shared >= n:
            raise v.fail("num_kv_shared_layers", f"({shared}) must be < num_hidden_layers ({n})")
        owning = n - shared

    full = [i for i in range(owning) if kinds[i] == "full"]
    swa = [i for i in range(owning) if kinds[i] == "swa"]
    if not full and not swa:
        raise v.fail("num_hidden_layers", "must leave at least one KV-cache layer")
    kw.update(
        full_attention_layer_ids=full,
        swa_attention_layer_ids=swa,
        num_kv_heads=kv,
        head_dim=head_dim,
        v_head_dim=v_head_dim,
    )
    if swa:
        kw["sliding_window_size"] = window
        kw["swa_num_kv_heads"] = v.opt_int("swa_num_key_value_heads")
        kw["swa_head_dim"] = v.opt_int("swa_head_dim")
        kw["swa_v_head_dim"] = v.opt_int("swa_v_head_dim")
    return kw


def geometry_kwargs_from_hf_config(
    path_or_dict: PathOrDict,
    *,
    include_kv_shared_layers: bool = False,
) -> dict[str, Any]:
    """Return the ``kvbudget.ModelGeometry`` keyword arguments for a HF config.

    Args:
        path_or_dict: a config dict, a path to ``config.json``, or a directory
            holding one. Multimodal configs are read through ``text_config``.
        include_kv_shared_layers: Gemma 3n's last ``num_kv_shared_layers``
            layers reuse the KV of earlier layers and allocate no cache, so
            they are left out by default; pass True to list them too.

    Returns:
        A dict with exactly the keys of :data:`GEOMETRY_KEYS`; ``None`` values
        mean "use ModelGeometry's default" (V dim = K dim, SWA geometry = full
        geometry, no window, no MLA). ``sliding_window_size`` is SGLang's
        exclusive window (HF ``sliding_window`` minus 1; see the module doc for
        MiMo-V2 and Llama 4). ``ModelGeometry(**kwargs)`` builds the geometry.

    Raises:
        ConfigError: a required key is missing or has a wrong value; the
            message names the key.
    """
    cfg = load_hf_config(path_or_dict)
    return _target_kwargs(_View(cfg), include_kv_shared_layers)


#: Drafts moved to :mod:`kvbudget.models.hf_draft` (this path works until kvbudget 0.3).
__getattr__ = moved(__name__, {"draft_kwargs_from_hf_config": "kvbudget.models.hf_draft"})
