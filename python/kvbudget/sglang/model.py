"""A model as SGLang 0.5.23 sees it: the geometry its pool configurators are given.

SGLang does not plan the layers a config describes; it plans what its ``ModelConfig`` derives from
the config: separate full and SWA pools only for the architectures on its hybrid-SWA list or whose
text config opts in with ``is_hybrid_swa`` (:mod:`kvbudget.sglang.hybrid`), otherwise one
``DefaultPoolConfigurator`` pool over ``num_attention_layers`` layers priced at the full-attention
geometry (Gemma 2/3/3n, Cohere2, Mistral with a sliding window, Llama 4 text-only: every layer,
sliding ones included; Gemma 3n's KV-shared layers too). :func:`resolve_sglang` states those rules
for attention models:

* the text config: ``text_config`` of a multimodal config, else the config (SGLang's own
  LLaVA classes, ``Llava*ForCausalLM``, read the outer config whatever it nests); keys read
  through the config class's ``attribute_map`` (GPT-2's ``n_layer`` is its
  ``num_hidden_layers``);
  a ``muse_glimmer`` config flattened as SGLang's own class loads it (the text
  keys over the top-level ones); ``layer_types`` as transformers' classes
  derive them (Laguna and Mellum: every layer full attention, Muse Glimmer's
  text class: every fourth from the last); Gemma 4's per-layer shapes
  flattened as SGLang's ``get_config`` does (full
  layers' ``head_dim`` and KV heads from ``per_layer_config`` or
  ``global_head_dim`` / ``num_global_key_value_heads``, the sliding layers'
  as ``swa_*``);
* KV heads by ``get_total_num_kv_heads`` (``multi_query`` -> 1, then
  ``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads``,
  ``multi_query_group_num``, ``num_attention_groups``, else the attention
  heads; Nemotron-NAS: the heads over each attention block's ``n_heads_in_group``, one count or
  SGLang refuses it as variable GQA); SWA heads from ``swa_num_key_value_heads`` or Step3p5's
  ``attention_other_setting``;
* the layer count: ``num_hidden_layers``, twice it for LongCat-Flash (two MLA blocks per
  decoder layer), times the loops of IQuest's loop coder and Nanbeige; Whisper's encoder
  layers plus twice its decoder layers;
* head dims: ``head_dim`` or ``hidden_size // num_attention_heads``;
  ``v_head_dim`` (0 or missing) defaults to it, ``swa_head_dim`` to ``head_dim``,
  ``swa_v_head_dim`` to ``swa_head_dim``; MLA for SGLang's MLA architectures
  (``kv_lora_rank`` + ``qk_rope_head_dim``; MiniCPM3 keeps the generic ``v_head_dim``;
  LongCat-Flash and HunYuan-V4 read as SGLang's own config classes read them,
  :mod:`kvbudget.sglang.mla_configs`);
* the window, read for a hybrid model only (the configurators use it only
  there), by the model class (:mod:`kvbudget.sglang.window`): HF
  ``sliding_window`` minus one where SGLang's class defines
  ``get_attention_sliding_window_size`` so (gpt-oss, Gemma 4, Mellum, Muse
  Glimmer), else the config's ``sliding_window_size`` / ``sliding_window`` /
  ``window_size`` as is (MiMo-V2, Step3p5, GraniteSWA, Laguna, a model opting
  in), else ``attention_chunk_size`` (Llama 4).

A hybrid model SGLang's pool factory then fails on (its HybridSWA configurator asserts a sliding
layer: Laguna, Step3p5 or Mellum with every layer full attention; or an ``is_hybrid_swa`` opt-in
without ``hybrid_layer_pattern``, whose layer ids SGLang leaves None) resolves as ``ModelConfig``
has it, and :meth:`SGLangModel.model_geometry` refuses it with SGLang's reason.

Models SGLang plans with a Mamba or linear-attention state pool beside the KV pool (Qwen3-Next,
Qwen3.5, Kimi-Linear, LFM2, LFM2-MoE and LFM2-VL, Nemotron-H, Falcon-H1, Granite-4.0-H, ZAYA1, and
the Bailing hybrids Ling 2.5 and Ling 3, MLA beside lightning or KDA state: :mod:`kvbudget.sglang.bailing`)
resolve to the full-attention layers that pool counts (``state_pool=True``; the Mamba-2-shaped
families' from the layer kinds their state layers are read with,
:func:`kvbudget.sglang.state_model.attention_layer_ids`; ZAYA1's config as SGLang's own class
derives it, :mod:`kvbudget.sglang.zaya`); Inkling, whose every layer attends and keeps a conv
state, to its hybrid-SWA pools with ``state_pool=True``; the other model types SGLang plans a state pool for
(:data:`UNRESOLVED_STATE_TYPES`: Qwen4-Exp, MiniCPM-SALA, Jet-Nemotron, ...) are refused by
name. DSA models (DeepSeek-V3.2, GLM-5, HunYuan-V4, LongCat-Flash with ``index_topk``: an MLA
architecture whose config has ``index_topk``) carry their indexer (:mod:`kvbudget.sglang.dsa`).
Architectures SGLang cannot serve (Jamba, OlmoHybrid), pools kvbudget does not model (DeepSeek-V4,
the pure state models Mamba, Mamba-2 and Falcon-Mamba: no KV pool), MLA architectures kvbudget has
not checked (Dots3, GigaChat-3.5, GLM-5-Next, Kimi-K3, the Bailing VL and NextN classes), an MLA
model opting in to hybrid SWA, and hybrid models whose class's window rule kvbudget has not
checked against SGLang's code are refused with a
:class:`~kvbudget.models.hf.ConfigError` that says so: kvbudget never plans a geometry SGLang would
not build. ``tests/test_sglang_model.py`` holds these rules to SGLang's released code on configs
built by transformers 5.19.0 (``tests/test_sglang_remote_code.py`` on remote-code checkpoints), and
``tests/test_sglang_model_pools.py`` the pools that follow to its factory.

"""

from __future__ import annotations

import functools
import json
import numbers
from collections.abc import Mapping
from importlib import resources
from dataclasses import dataclass
from typing import Any, Final

from kvbudget.models.hf import KV_HEAD_KEYS, ConfigError, PathOrDict, _View, load_hf_config, nas_kv_heads
from kvbudget.models.layer_kinds import derived_layer_types
from kvbudget.sglang.dsa import (MLA_ARCHITECTURES, MLA_DEFAULT_V_HEAD_DIM, MLA_IF_USE_MLA, UNCHECKED_MLA_ARCHITECTURES,
                                 dsa_fields)
from kvbudget.sglang.hybrid import SGLangHybrid, derive_hybrid_model
from kvbudget.sglang.mla_configs import hy_v4_config, longcat_config
from kvbudget.sglang.state_layers import STATE_MODELS as _STATE_MODELS
from kvbudget.sglang.state_layers import mamba2_shaped_ids
from kvbudget.sglang.state_model import UNMODELLED_STATES, attention_layer_ids
from kvbudget.sglang.window import sglang_window
from kvbudget.sglang.inkling import INKLING_TYPES, inkling_config
from kvbudget.sglang.bailing import BAILING_HYBRID_TYPE, bailing_config, is_bailing_hybrid
from kvbudget.sglang.zaya import zaya_config

__all__ = ["UNRESOLVED_STATE_TYPES", "SGLangModel", "resolve_sglang", "sglang_architectures", "sglang_text_layout"]

#: Architectures refused: SGLang plans a state pool kvbudget does not resolve the layers of, or
#: (Jamba, OlmoHybrid: no SGLang class, and transformers' class refuses SGLang's attention
#: backend) SGLang cannot serve them at all.
_STATEFUL = frozenset({"JambaForCausalLM", "OlmoHybridForCausalLM"})
_NO_CLASS = frozenset({"JambaForCausalLM", "OlmoHybridForCausalLM"})
_DEEPSEEK_V4 = frozenset({"DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark"})
#: Model types SGLang 0.5.23 plans with a state pool (``configs/hybrid_arch.py``'s ``mambaish_config``
#: matches their config classes, or subclasses of them) whose layers kvbudget does not resolve:
#: refused whole, outer or text model type (some only on a condition SGLang reads: MiniCPM-SALA
#: with lightning layers). ``tests/test_sglang_model.py``
#: holds this set and ``_STATE_MODELS`` to the wheel.
UNRESOLVED_STATE_TYPES: frozenset[str] = frozenset({
    "qwen4_exp", "qwen4_exp_text", "NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
    "nemotron_h_omni", "intern_s2_preview", "interns2_mobius", "interns2_mobius_text", "jet_nemotron", "jet_vlm",
    "minicpm_sala", "glm5_next", "bailing_moe_v3_vl",
})  # fmt: skip
#: SGLang 0.5.23's pure state-space models (``configs/model_config.py``'s ``PURE_SSM_ARCHITECTURES``):
#: no attention layer, so ``_derive_model_shapes`` takes a missing ``head_dim`` as 0 and
#: ``get_total_num_kv_heads`` a missing KV head count as 0 (``AttentionArch.SSM``); their KV pool
#: holds no layer and its token count is a label (:func:`kvbudget.sglang.state.plan_state_only`).
PURE_SSM_ARCHITECTURES: frozenset[str] = frozenset({"Mamba2ForCausalLM", "FalconMambaForCausalLM", "MambaForCausalLM"})
#: Architectures whose SGLang pools are not (only) the KV pools kvbudget plans.
UNMODELLED_ARCHITECTURES: frozenset[str] = _STATEFUL | UNCHECKED_MLA_ARCHITECTURES | _DEEPSEEK_V4


_GEMMA4_TYPES = frozenset({
    "gemma4", "gemma4_assistant", "gemma4_unified", "gemma4_unified_assistant", "diffusion_gemma",
    "embedding_gemma2",
})  # fmt: skip


@dataclass(frozen=True)
class SGLangModel:
    """What SGLang 0.5.23's ``ModelConfig`` gives its pool configurators for one model.

    Attributes:
        architecture: ``architectures[0]``, the class SGLang serves the model with.
        pools: the pool decision (``hybrid_swa``, layer ids, ``reason``).
        num_attention_layers: the layers a one-pool (Default) plan counts.
        num_kv_heads: total KV heads of a full-attention layer (SGLang divides by TP).
        swa_num_kv_heads: total KV heads of a sliding-window layer.
        head_dim, v_head_dim, swa_head_dim, swa_v_head_dim: K and V dims per head,
            elements (None for MLA).
        kv_lora_rank, qk_rope_head_dim: the MLA latent and rotary dims, elements
            (None unless MLA).
        qk_nope_head_dim: MLA's non-rotary key dim, elements (None unless MLA).
        sliding_window_size: SGLang's exclusive window, tokens (hybrid models only).
        state_pool: SGLang also plans a Mamba/linear-attention state pool, sized
            before the KV budget (the KV pool is over the full-attention layers;
            the state: :func:`kvbudget.sglang.state_model.state_from_hf_config`,
            its budget :func:`kvbudget.sglang.state.state_budget`).
        native_class: SGLang has a model class for the architecture; else it
            serves it through its Transformers backend (same pools).
        index_head_dim, index_kpool, index_shared_layers: the DSA indexer
            (DeepSeek-V3.2 style: an MLA model whose config has ``index_topk``):
            its key dim (elements), keys pooled per stored key, and the layers
            reusing the previous layer's top-k; None, 1, 0 without DSA.
    """

    architecture: str
    pools: SGLangHybrid
    num_attention_layers: int
    num_kv_heads: int
    swa_num_kv_heads: int
    head_dim: int | None
    v_head_dim: int | None
    swa_head_dim: int | None
    swa_v_head_dim: int | None
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    qk_nope_head_dim: int | None
    sliding_window_size: int | None
    state_pool: bool = False
    native_class: bool = True
    index_head_dim: int | None = None
    index_kpool: int = 1
    index_shared_layers: int = 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def reason(self) -> str:
        """Why SGLang picks its configurator family for this model (one sentence)."""
        return self.pools.reason

    def model_geometry(self) -> Any:
        """The ``kvbudget.ModelGeometry`` of the pools SGLang builds (:meth:`geometry_kwargs`)."""
        from kvbudget._core import ModelGeometry

        return ModelGeometry(**self.geometry_kwargs())

    def geometry_kwargs(self) -> dict[str, Any]:
        """``kvbudget.ModelGeometry`` keyword arguments for the pools SGLang builds.

        A hybrid model keeps SGLang's full and SWA layer ids, heads, dims and
        window; any other model is ``num_attention_layers`` full-attention
        layers at the full geometry, which is what SGLang's one Default pool
        prices (``engine="hf"`` readings in :mod:`kvbudget.models.hf` keep a
        model's own layer kinds instead, for a what-if).

        Raises:
            ConfigError: SGLang's pool factory fails on the model
                (:attr:`SGLangHybrid.unplannable`: a hybrid model with no
                sliding layer or no layer ids), or a state model has no
                attention layer (SGLang's KV pool then holds no layer:
                :func:`kvbudget.sglang.state.plan_state_only` plans it).
        """
        p = self.pools
        if self.state_pool and not self.num_attention_layers:
            raise ConfigError(f"config.json: {self.architecture} has a state pool and no attention layer: SGLang's "
                              "KV pool holds no layer (its token count is a label), so there is no KV geometry; "
                              "kvbudget.sglang.state.plan_state_only plans the state pool", "architectures")  # fmt: skip
        if p.unplannable:
            raise ConfigError(f"config.json: {p.reason}; {p.unplannable}: SGLang cannot plan it "
                              "(--disable-hybrid-swa-memory plans one Default pool)", "architectures")  # fmt: skip
        if p.hybrid_swa:
            full, swa = list(p.full_attention_layer_ids or ()), list(p.swa_attention_layer_ids or ())
        else:
            full, swa = list(range(self.num_attention_layers)), []
        kw: dict[str, Any] = {"full_attention_layer_ids": full, "swa_attention_layer_ids": swa,
                              "num_kv_heads": self.num_kv_heads}  # fmt: skip
        if self.is_mla:
            kw.update(head_dim=(self.qk_nope_head_dim or 0) + (self.qk_rope_head_dim or 0),
                      v_head_dim=self.v_head_dim, kv_lora_rank=self.kv_lora_rank,
                      qk_rope_head_dim=self.qk_rope_head_dim)  # fmt: skip
            if self.index_head_dim is not None:
                kw.update(index_head_dim=self.index_head_dim, index_kpool=self.index_kpool,
                          index_shared_layers=self.index_shared_layers)  # fmt: skip
        else:
            kw.update(head_dim=self.head_dim, v_head_dim=self.v_head_dim)
        if swa:
            kw.update(sliding_window_size=self.sliding_window_size)
            if not self.is_mla:
                kw.update(swa_num_kv_heads=self.swa_num_kv_heads, swa_head_dim=self.swa_head_dim,
                          swa_v_head_dim=self.swa_v_head_dim)  # fmt: skip
        return kw


@functools.cache
def sglang_architectures() -> frozenset[str]:
    """The architectures SGLang 0.5.23 has a model class for (``data/sglang_architectures.json``,
    generated from the wheel's ``models/*.py`` by ``tools/gen_sglang_archs.py``)."""
    text = resources.files("kvbudget.models").joinpath("data/sglang_architectures.json").read_text("utf-8")
    return frozenset(json.loads(text)["architectures"])


def _attention_layers(archs: list[str], v: _View, n: int) -> int:
    """``ModelConfig.__init__``'s ``num_attention_layers``: the layer count, twice it for
    LongCat-Flash (two attention blocks per decoder layer), times the loops of IQuest's loop coder
    (``loop_num``) and Nanbeige (``num_loops``); Whisper's encoder layers and twice its decoder
    layers (self- and cross-attention ids)."""
    layers = 2 * n if "LongcatFlashForCausalLM" in archs else n
    for arch, key in (("IQuestLoopCoderForCausalLM", "loop_num"), ("NanbeigeForCausalLM", "num_loops")):
        if arch in archs:
            loops = v.opt_int(key, 0)
            layers = n * (1 if loops is None else loops)
    if "WhisperForConditionalGeneration" in archs:
        decoder = v.opt_int("decoder_layers", 0)
        layers = (v.opt_int("encoder_layers", 0) or 0) + 2 * (n if decoder is None else decoder)
    return layers


def _head_dim(v: _View, pure_ssm: bool = False) -> int:
    """``_derive_model_shapes``' head dim: the config's ``head_dim`` (transformers' MiniCPM3 class
    derives a missing one from ``qk_rope_head_dim``), else 0 for a pure state model
    (:data:`PURE_SSM_ARCHITECTURES`), else hidden size / heads."""
    explicit = v.opt_int("head_dim")
    if explicit is None and v.model_type == "minicpm3":
        explicit = v.req_int("qk_rope_head_dim")
    if explicit is None and pure_ssm:
        return 0
    return explicit if explicit is not None else v.req_int("hidden_size") // v.req_int("num_attention_heads")


def _default_v_head_dim(v: _View, pure_ssm: bool = False) -> int:
    """``_derive_model_shapes``' generic ``v_head_dim``: the config's nonzero one, else the head
    dim (transformers' MiniCPM3 class derives a missing one as hidden size / heads)."""
    given = v.opt_int("v_head_dim", 0)
    if given is None and v.model_type == "minicpm3":
        given = v.req_int("hidden_size") // v.req_int("num_attention_heads")
    return given or _head_dim(v, pure_ssm)


def _total_kv_heads(v: _View, pure_ssm: bool = False) -> int:
    if v.raw("multi_query") and not (
        v.outer.get("model_type") in ("falcon", "RefinedWeb", "RefinedWebModel")
        and v.outer.get("new_decoder_architecture")
    ):
        return 1
    if v.outer.get("model_type") == "nemotron-nas":  # one count over the attention blocks, or SGLang refuses
        kv = nas_kv_heads(v)
        if len(kv) != 1:
            why = (f"ValueError: Variable GQA (VGQA) is not yet supported for nemotron-nas in sglang (KV heads "
                   f"{sorted(kv)})" if kv else "RuntimeError: Couldn't determine number of kv heads")
            raise ConfigError(f"{v.label}: SGLang 0.5.23 refuses it: {why}", v.name("block_configs"))
        return kv.pop()
    if v.outer.get("model_type") in ("mpt", "dbrx"):
        raise ConfigError(f"{v.label}: kvbudget does not resolve SGLang's KV heads for model_type "
                          f"{v.outer.get('model_type')!r}")  # fmt: skip
    for key in KV_HEAD_KEYS:
        if v.raw(key) is not None:
            return v.req_int(key)
    return 0 if pure_ssm else v.req_int("num_attention_heads")  # AttentionArch.SSM: no heads


def _gemma4_base(v: _View) -> tuple[int, int]:
    return v.req_int("head_dim"), v.req_int("num_key_value_heads")


def _gemma4_shapes(v: _View, types: list[str] | None) -> tuple[tuple[int, int], tuple[int, int]]:
    """Gemma 4's (head_dim, KV heads) of full and sliding layers, as SGLang flattens them."""
    types = list(types or ())
    base = _gemma4_base(v)
    per_layer = v.raw("per_layer_config")
    if per_layer is None:
        over: dict[str, Any] = {"head_dim": v.opt_int("global_head_dim") or 512}
        heads = v.opt_int("num_global_key_value_heads")
        if heads is not None and v.raw("attention_k_eq_v"):
            over["num_key_value_heads"] = heads
        per_layer = {i: over for i, t in enumerate(types) if t == "full_attention"}
    if not isinstance(per_layer, Mapping):
        raise v.fail("per_layer_config", "must be an object")
    layers = {int(k): dict(o) for k, o in per_layer.items()}
    if not layers:  # no per-layer spec: one shape for every layer
        return base, base
    bad = {k for o in layers.values() for k in o} - {"head_dim", "num_key_value_heads"}
    if bad:
        raise ConfigError(f"{v.label}: Gemma 4 per-layer {sorted(bad)}: SGLang 0.5.23 flattens only "
                          "head_dim and num_key_value_heads and refuses the config")  # fmt: skip
    shapes: dict[str, set[tuple[int, int]]] = {}
    for i, t in enumerate(types):
        o = layers.get(i, {})
        shapes.setdefault(t, set()).add((o.get("head_dim", base[0]), o.get("num_key_value_heads", base[1])))
    for t, s in shapes.items():
        if len(s) > 1:
            raise ConfigError(f"{v.label}: Gemma 4 '{t}' layers have more than one shape {sorted(s)}; "
                              "SGLang 0.5.23 carries one per layer type and refuses the config")  # fmt: skip
    full = next(iter(shapes["full_attention"]))
    return full, next(iter(shapes.get("sliding_attention", {full})))


def _step3p5_loads(v: _View, text: Mapping[str, Any], n: int) -> None:
    """Refuse the ``step3p5`` configs SGLang 0.5.23's ``get_config`` fails on.

    transformers 5.19.0 owns the model type (its ``Step3p7TextConfig``: SGLang's
    registration of its own ``Step3p5Config`` yields to it), so ``AutoConfig``
    builds that class before SGLang reloads the file with its own. Its
    ``__post_init__`` drops ``num_nextn_predict_layers`` trailing MTP entries of
    ``layer_types`` (any other length fails ``validate_layer_type``) and gives
    every sliding layer a ``per_layer_config`` override of ``num_attention_heads``
    (``num_sliding_attention_heads``, else ``attention_other_setting``'s). An
    override that differs from the global value makes the attribute per-layer,
    and SGLang's ``hasattr`` over the text config's keys then raises
    ``AmbiguousGlobalPerLayerAttributeError``: Step-3.5-Flash itself (96 sliding
    heads, 64 full) does not load.
    """
    types, mtp = text.get("layer_types"), v.opt_int("num_nextn_predict_layers", 0) or 0
    if isinstance(types, list):
        if mtp and len(types) == n + mtp:
            types = types[:n]
        elif len(types) != n:
            raise v.fail("layer_types", f"has {len(types)} entries for {n} layers and {mtp} MTP layers; "
                         "transformers 5.19.0's step3p5 class, which SGLang 0.5.23 loads the config with "
                         "first, refuses it")  # fmt: skip
    heads = v.raw("num_attention_heads")
    if "per_layer_config" in text:
        given = text["per_layer_config"] or {}
        if not isinstance(given, Mapping) or not all(isinstance(o, Mapping) for o in given.values()):
            raise v.fail("per_layer_config", "must map layer indices to objects")
        try:
            overrides = {int(k): o for k, o in given.items()}
        except (TypeError, ValueError):
            raise v.fail("per_layer_config", "must map layer indices to objects") from None
        if any(not 0 <= i < n for i in overrides):
            raise v.fail("per_layer_config", f"has a layer index outside [0, {n}); transformers refuses it")
    else:
        sliding, other = v.raw("num_sliding_attention_heads"), text.get("attention_other_setting")
        if sliding is None and other:
            if not isinstance(other, Mapping):
                raise v.fail("attention_other_setting", "must be an object")
            sliding = other.get("num_attention_heads", heads)
        sliding = heads if sliding is None else sliding
        overrides = {i: {"num_attention_heads": sliding} for i, t in enumerate(types or ())
                     if t == "sliding_attention"}  # fmt: skip
    per_layer = sorted({a for o in overrides.values() for a, x in o.items() if a != "skip" and x != v.raw(a)})
    if per_layer:
        raise ConfigError(f"{v.label}: the sliding layers' {per_layer} differ from the global values (Step3p5's "
                          "attention_other_setting.num_attention_heads vs num_attention_heads); transformers "
                          "5.19.0's step3p5 class makes them per-layer attributes and SGLang 0.5.23's get_config "
                          "fails reading them (AmbiguousGlobalPerLayerAttributeError): SGLang cannot load it",
                          "attention_other_setting")  # fmt: skip


#: The text keys SGLang's ``muse_glimmer_config_kwargs_from_hf`` translates instead of copying.
_MUSE_TRANSLATED = frozenset({"final_logit_softcapping", "hidden_activation", "layer_rope_theta", "model_type",
                              "qk_scale_factor", "rope_parameters"})  # fmt: skip
#: What it reads of a nested config (a file lacking one fails to load), and the type its use needs.
_MUSE_READS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "text_config": {"hidden_activation": object, "rope_parameters": Mapping, "layer_rope_theta": list,
                    "final_logit_softcapping": object, "qk_scale_factor": numbers.Real, "head_dim": numbers.Real},
    "vision_config": {"rope_parameters": Mapping, "layer_types": object},
}  # fmt: skip


def _muse_glimmer_loads(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config SGLang 0.5.23 serves a ``muse_glimmer`` model with (``configs/muse_glimmer.py``).

    SGLang registers its own ``MuseGlimmerConfig`` for the type and reloads the
    file with it. Its ``from_dict`` flattens a nested (transformers-saved) file:
    the top-level keys, then the text config's over them (``architectures``
    included, so a null one there replaces the model's), reading the keys of
    :data:`_MUSE_READS`; a flat file is taken as is. transformers' own class
    loads the file first and refuses null token ids and sizes. SGLang's keeps
    ``layer_types`` null when the file gives none, which SGLang's
    ``get_hybrid_layer_ids`` then fails to iterate.
    """
    for key in ("image_token_id", "video_token_id", "out_hidden_size", "projector_hidden_size"):
        if key in cfg and (not isinstance(cfg[key], int) or isinstance(cfg[key], bool)):
            raise ConfigError(f"config.json: transformers 5.19.0's MuseGlimmerConfig, which SGLang 0.5.23 loads "
                              f"the file with first, requires an integer {key}, not {cfg[key]!r}", key)  # fmt: skip
    flat = dict(cfg)
    if "text_config" in cfg:
        for part, reads in _MUSE_READS.items():
            sub = cfg.get(part)
            if part not in cfg and part == "vision_config":
                continue
            if not isinstance(sub, Mapping):
                raise ConfigError(f"config.json: SGLang 0.5.23's MuseGlimmerConfig reads '{part}' as an object",
                                  part)  # fmt: skip
            for key, kind in reads.items():
                value = sub.get(key)
                if key not in sub or not isinstance(value, kind) or (
                        isinstance(value, Mapping) and "rope_theta" not in value):  # fmt: skip
                    raise ConfigError(f"config.json: SGLang 0.5.23's MuseGlimmerConfig.from_dict reads "
                                      f"{part}.{key}" + (".rope_theta" if key == "rope_parameters" else "")
                                      + f", which this config lacks or gives as {value!r}; SGLang cannot load it",
                                      f"{part}.{key}")  # fmt: skip
        text = cfg["text_config"]
        flat = {k: x for k, x in cfg.items() if k not in ("text_config", "vision_config")}
        flat.update({k: x for k, x in text.items() if k not in _MUSE_TRANSLATED})
    flat.setdefault("layer_types", None)
    return flat


#: Model types whose SGLang config class keeps its text config under another key, which
#: ``get_hf_text_config`` reads before ``text_config``: InternVL's ``llm_config``, DeepSeek-VL2's
#: ``language_config`` (its copy of ``DeepseekV2Config``).
_TEXT_KEYS: Final[dict[str, str]] = {"internvl_chat": "llm_config", "deepseek_vl_v2": "language_config"}


def sglang_text_layout(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` with its text config where :func:`resolve_sglang` and the generic reader look for it
    (``text_config``), as SGLang 0.5.23's config classes and ``get_hf_text_config`` place it: the
    key of :data:`_TEXT_KEYS` moved there; dots.vlm1's ``language_config`` dropped (its
    ``DotsVLMConfig`` rebuilds it from the file's own keys)."""
    out = dict(cfg)
    model_type = out.get("model_type")
    if model_type == "dots_vlm":
        out.pop("language_config", None)
    key = _TEXT_KEYS.get(str(model_type))
    if key is not None and isinstance(out.get(key), Mapping):
        out["text_config"] = dict(out.pop(key))
    return out


def resolve_sglang(path_or_dict: PathOrDict, *, disable_hybrid_swa_memory: bool = False) -> SGLangModel:
    """The model as SGLang 0.5.23 resolves it (a config dict, file or model folder).

    Raises:
        ConfigError: a key SGLang needs is missing or invalid, SGLang itself
            refuses the config, or the model needs pools kvbudget does not
            model (Mamba-like and linear-attention state layouts it does not
            resolve, DeepSeek-V4); the message says which.
    """
    cfg = load_hf_config(path_or_dict)
    if cfg.get("model_type") == "muse_glimmer":
        cfg = _muse_glimmer_loads(cfg)
    elif cfg.get("model_type") == "zaya":
        cfg = zaya_config(cfg)
    elif cfg.get("model_type") in INKLING_TYPES:  # SGLang's own classes, their defaults and derived keys
        cfg = inkling_config(cfg)
    elif cfg.get("model_type") == "lfm2_vl" and cfg.get("text_config") is None:
        cfg = {**cfg, "text_config": {}}  # Lfm2VlConfig builds its default (LFM2) text config
    elif cfg.get("model_type") == BAILING_HYBRID_TYPE:
        cfg = bailing_config(cfg)
    elif cfg.get("model_type") == "hy_v4":
        cfg = hy_v4_config(cfg)
    else:
        cfg = longcat_config(cfg) or cfg
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise ConfigError("config.json: SGLang 0.5.23 picks the model class from 'architectures', "
                          "which this config lacks", "architectures")  # fmt: skip
    arch = archs[0]
    thinker = cfg.get("thinker_config")
    if isinstance(thinker, Mapping):  # get_hf_text_config: the thinker's text config first (Qwen2.5 / 3 Omni)
        text = thinker.get("text_config")
        cfg = {**{k: v for k, v in cfg.items() if k != "thinker_config"},
               "text_config": dict(text) if isinstance(text, Mapping) else dict(thinker)}  # fmt: skip
    cfg = sglang_text_layout(cfg)
    for key in ("thinker_config", "llm_config", "language_config"):
        if cfg.get(key) is not None:
            raise ConfigError(f"config.json: kvbudget does not resolve SGLang's '{key}' text configs", key)
    if any(a in _NO_CLASS for a in archs):
        raise ConfigError(f"config.json: SGLang 0.5.23 has no model class for {arch}, and its Transformers "
                          "backend refuses it (no custom attention backend support); SGLang cannot "
                          "serve it", "architectures")  # fmt: skip
    if any(a in _STATEFUL for a in archs):
        raise ConfigError(f"config.json: SGLang 0.5.23 plans {arch} with a state pool and no attention layer "
                          "(no KV pool for kvbudget to plan)", "architectures")  # fmt: skip
    bailing = is_bailing_hybrid(cfg)  # MLA beside a lightning or KDA state
    if any(a in UNCHECKED_MLA_ARCHITECTURES for a in archs) and not bailing:
        raise ConfigError(f"config.json: SGLang 0.5.23 serves {arch} with MLA pools kvbudget has not checked "
                          "against it (layer counts, SWA latents or state pools of their own)",
                          "architectures")  # fmt: skip
    if arch.startswith("Llava") and arch.endswith("ForCausalLM"):  # get_hf_text_config: the outer config
        cfg = {k: x for k, x in cfg.items() if k != "text_config"}
    v = _View(cfg)
    state_type = next((t for t in (cfg.get("model_type"), v.model_type) if t in UNRESOLVED_STATE_TYPES), None)
    if state_type is not None:
        why = f"kvbudget does not model: {UNMODELLED_STATES[state_type]}" if state_type in UNMODELLED_STATES \
            else "whose layers kvbudget does not resolve"
        raise ConfigError(f"config.json: SGLang 0.5.23 plans {arch} (model type {state_type}) with a state pool "
                          f"{why}", "model_type")  # fmt: skip
    text = {**v.defaults, **(v.cfg if v.prefix else cfg)}
    n = v.req_int("num_hidden_layers")
    types = derived_layer_types(v.model_type, n, text.get("layer_types"))
    if types is not None:
        text["layer_types"] = types
    if v.model_type == "step3p5" and not v.prefix:
        _step3p5_loads(v, text, n)
    try:
        pools = derive_hybrid_model(archs, text, disable_hybrid_swa_memory=disable_hybrid_swa_memory)
    except ValueError as exc:
        raise ConfigError(f"config.json: {exc}", "architectures") from None
    common: dict[str, Any] = {"architecture": arch, "pools": pools, "num_attention_layers": _attention_layers(archs, v, n),
                              "native_class": any(a in sglang_architectures() for a in archs)}  # fmt: skip
    state = _STATE_MODELS.get("lfm2_vl" if cfg.get("model_type") == "lfm2_vl" else v.model_type)
    if v.model_type == "granitemoehybrid" and attention_layer_ids(text) is not None:
        state = mamba2_shaped_ids("granitemoehybrid")  # a state pool only with Mamba layers
    if state is not None and not pools.hybrid_swa:
        ids = state(text, n)
        common.update(num_attention_layers=len(ids), state_pool=True, pools=SGLangHybrid(
            False, None, None, f"{pools.reason}; SGLang plans a state pool beside the KV pool, whose "
            f"Default pool counts the {len(ids)} full-attention layers"))  # fmt: skip
    elif state is not None:  # Inkling: the state pool beside the hybrid-SWA pools
        common.update(state_pool=True)
    if bailing or any(a in MLA_ARCHITECTURES for a in archs) and not (arch in MLA_IF_USE_MLA
                                                                       and not v.cfg.get("use_mla", True)):
        heads = _total_kv_heads(v)
        rope, nope = v.req_int("qk_rope_head_dim", 0), v.req_int("qk_nope_head_dim", 0)
        if pools.hybrid_swa:  # only an is_hybrid_swa opt-in: no MLA architecture is on SGLang's list
            raise ConfigError(f"config.json: {arch} opts in to SGLang's hybrid-SWA pools; kvbudget has not checked "
                              "SGLang 0.5.23's MLA sliding-window pools (SWA latents, window) against it",
                              "architectures")  # fmt: skip
        dsa = dsa_fields(arch, text, range(common["num_attention_layers"]))
        if dsa and common.get("state_pool"):
            raise ConfigError(f"config.json: {arch} with a DSA indexer and state layers: "
                              "kvbudget models DSA in one Default pool only", "architectures")  # fmt: skip
        v_dim = v.req_int("v_head_dim") if arch not in MLA_DEFAULT_V_HEAD_DIM else _default_v_head_dim(v)
        return SGLangModel(**common, num_kv_heads=heads, swa_num_kv_heads=heads, head_dim=None,
                           v_head_dim=v_dim, swa_head_dim=None, swa_v_head_dim=None,
                           kv_lora_rank=v.req_int("kv_lora_rank"), qk_rope_head_dim=rope,
                           qk_nope_head_dim=nope, sliding_window_size=None, index_head_dim=dsa.get("index_head_dim"),
                           index_kpool=dsa.get("index_kpool", 1),
                           index_shared_layers=dsa.get("index_shared_layers", 0))  # fmt: skip
    if cfg.get("model_type") == "gemma4_text" and len({*_gemma4_shapes(v, types), _gemma4_base(v)}) > 1:
        raise ConfigError("config.json: a Gemma 4 text config (model_type 'gemma4_text') declares per-layer "
                          "shapes, which SGLang 0.5.23 flattens only for the multimodal model types; "
                          "its ModelConfig fails to read head_dim", "model_type")  # fmt: skip
    if str(cfg.get("model_type")) in _GEMMA4_TYPES:
        (head_dim, heads), (swa_dim, swa_heads) = _gemma4_shapes(v, types)
        v_dim, swa_v = v.opt_int("v_head_dim") or head_dim, swa_dim
    else:
        pure_ssm = any(a in PURE_SSM_ARCHITECTURES for a in archs)
        head_dim = _head_dim(v, pure_ssm)
        heads = _total_kv_heads(v, pure_ssm)
        v_dim = _default_v_head_dim(v, pure_ssm)
        swa_dim = v.opt_int("swa_head_dim") or head_dim
        swa_v = v.opt_int("swa_v_head_dim") or swa_dim
        if "swa_num_key_value_heads" in text:
            swa_heads = v.req_int("swa_num_key_value_heads")
        elif "attention_other_setting" in text:  # SGLang's hasattr: a null one fails its .get
            other = text["attention_other_setting"]
            groups = other.get("num_attention_groups") if isinstance(other, Mapping) else None
            if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
                raise v.fail("attention_other_setting", "has no positive num_attention_groups, which "
                             "SGLang 0.5.23 reads as the SWA layers' KV heads")  # fmt: skip
            swa_heads = groups
        else:
            swa_heads = max(1, heads)  # get_num_kv_heads(1): a pure state model's 0 heads read as 1
    window = sglang_window(archs, v, sglang_architectures()) if pools.hybrid_swa else None
    return SGLangModel(**common, num_kv_heads=heads, swa_num_kv_heads=swa_heads, head_dim=head_dim,
                       v_head_dim=v_dim, swa_head_dim=swa_dim, swa_v_head_dim=swa_v, kv_lora_rank=None,
                       qk_rope_head_dim=None, qk_nope_head_dim=None, sliding_window_size=window)  # fmt: skip
