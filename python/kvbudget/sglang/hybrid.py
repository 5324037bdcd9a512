"""Which pools SGLang gives a model: separate full and sliding-window pools, or one.

SGLang decides this from the model's architecture, not from its geometry: a
model with sliding-window layers gets separate full and SWA pools (a
``HybridSWAPoolConfigurator`` or ``SWARequestCapPoolConfigurator``) only when
its architecture is on SGLang's hybrid-SWA list (or its text config opts in
with ``is_hybrid_swa``) and hybrid SWA memory is not turned off, by
``--disable-hybrid-swa-memory`` or by one of SGLang's model overrides. Every
other model gets one ``DefaultPoolConfigurator`` pool over all its layers, its
sliding-window layers included: Gemma 2 and 3, Cohere2, Mistral or Qwen2 with a
sliding window, Llama 4 text-only among them.

:func:`sglang_hybrid_swa` answers for SGLang 0.5.23 (``kvbudget.SGLANG_VERSION``),
with the layer ids SGLang derives for a hybrid model and the reason, from the
architectures and the HF text config; :func:`derive_hybrid_model` is the same
decision as ``ModelConfig`` records it, a hybrid model without layer ids
included. A hybrid model with no sliding-window layer, or no layer ids, is
SGLang's decision too, but its pool factory then fails
(:attr:`SGLangHybrid.unplannable`). It is kvbudget's own statement of
SGLang's rule (``ModelConfig._derive_hybrid_model``, ``is_hybrid_swa_model``,
``get_hybrid_layer_ids`` and the model overrides), and
``tests/test_sglang_hybrid.py`` holds it to SGLang's released code on every
architecture SGLang names. The geometry (heads, dims, window) is read elsewhere
(:mod:`kvbudget.models.hf`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HYBRID_SWA_ARCHITECTURES", "SGLangHybrid", "derive_hybrid_model", "sglang_hybrid_swa"]

_SWA_SINK = (
    "GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM",
    "IQuestQ1MTP",
)
_MIMO_V2 = ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
_STEP = ("Step3p5ForCausalLM", "Step3p7ForConditionalGeneration")
_LAYER_TYPES = (
    "BeamForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "EmbeddingGemma2Model",
    "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion", "LagunaForCausalLM",
    "MellumForCausalLM", "MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration",
)
_DEEPSEEK_V4 = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark")

#: The architectures SGLang 0.5.23 plans with separate full and SWA pools.
HYBRID_SWA_ARCHITECTURES: frozenset[str] = frozenset({
    "Llama4ForConditionalGeneration", *_DEEPSEEK_V4, *_SWA_SINK, *_MIMO_V2, "MiMoV2MTP", *_STEP,
    "Step3p5MTP", *_LAYER_TYPES, "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP",
    "UnlimitedOCRForCausalLM",
})  # fmt: skip

#: Architectures (``architectures[0]``) whose SGLang model override turns hybrid SWA
#: memory off: always (None), or (Exaone) when the config has a ``sliding_window_pattern``.
_HYBRID_OFF: dict[str, str | None] = {
    "Gemma2ForCausalLM": None, "Gemma3ForCausalLM": None, "Gemma3ForConditionalGeneration": None,
    "Gemma3nForCausalLM": None, "Gemma3nForConditionalGeneration": None, "Olmo2ForCausalLM": None,
    "Exaone4ForCausalLM": "sliding_window_pattern", "ExaoneMoEForCausalLM": "sliding_window_pattern",
    "ExaoneMoeForCausalLM": "sliding_window_pattern",
}  # fmt: skip


@dataclass(frozen=True)
class SGLangHybrid:
    """SGLang's answer for one model: hybrid SWA pools or one pool, and why.

    Attributes:
        hybrid_swa: True when SGLang plans separate full and SWA pools (an SWA
            configurator); False: one ``DefaultPoolConfigurator`` pool over
            every layer.
        full_attention_layer_ids: the full-attention layer ids SGLang derives
            for a hybrid model (None when it is not hybrid).
        swa_attention_layer_ids: likewise, the sliding-window layer ids.
        reason: one sentence naming the rule that decided.
    """

    hybrid_swa: bool
    full_attention_layer_ids: tuple[int, ...] | None
    swa_attention_layer_ids: tuple[int, ...] | None
    reason: str

    @property
    def configurator(self) -> str:
        """The configurator family SGLang uses: ``"hybrid_swa"`` (HybridSWA or its
        request-cap variant, chosen by the serving config) or ``"default"``."""
        return "hybrid_swa" if self.hybrid_swa else "default"

    @property
    def unplannable(self) -> str | None:
        """Why SGLang's pool factory fails on this decision, or None when it plans it.

        A hybrid decision builds ``HybridSWAPoolConfigurator`` (or its request-cap
        subclass, whose constructor runs the parent's first); that constructor takes
        ``len()`` of both layer-id lists and asserts at least one SWA layer. So a
        hybrid model whose rule derives no layer ids (an ``is_hybrid_swa`` opt-in
        without ``hybrid_layer_pattern``), or no sliding layer (Laguna or Mellum with
        every layer full attention), does not start; ``--disable-hybrid-swa-memory``
        plans it with one Default pool.
        """
        if not self.hybrid_swa:
            return None
        if self.full_attention_layer_ids is None or self.swa_attention_layer_ids is None:
            return ("SGLang 0.5.23 derives no layer ids for this hybrid-SWA model, and its "
                    "HybridSWAPoolConfigurator fails counting them (TypeError: object of type "
                    "'NoneType' has no len())")  # fmt: skip
        if not self.swa_attention_layer_ids:
            return ("SGLang 0.5.23 plans this model with HybridSWAPoolConfigurator (is_hybrid_swa), but it "
                    "has no sliding-window layer and that configurator's constructor asserts "
                    "'Hybrid SWA model must have at least one SWA layer'")  # fmt: skip
        return None


class _Text:
    """Attribute reads of an HF text config given as a mapping (missing keys read as absent)."""

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg = cfg

    def get(self, key: str, default: Any = None) -> Any:
        value = self.cfg.get(key, default)
        return default if value is None else value

    def need(self, key: str, arch: str) -> Any:
        """A key SGLang reads as an attribute (a config without it fails to load)."""
        if self.cfg.get(key) is None:
            raise ValueError(f"{arch}: SGLang 0.5.23 reads {key} from the text config, which has none")
        return self.cfg[key]


def _by_type(
    text: _Text, limit: int | None = None, arch: str | None = None
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Layer ids by ``layer_types`` (required when ``arch`` is named; first ``limit`` only).
    Unnamed, SGLang reads ``getattr(cfg, "layer_types", [])``: absent is no layer, null fails."""
    if arch is None and "layer_types" in text.cfg and text.cfg["layer_types"] is None:
        raise ValueError("SGLang 0.5.23 iterates the text config's layer_types, which is null; "
                         "it cannot load the model")  # fmt: skip
    types: Sequence[Any] = text.get("layer_types", ()) if arch is None else text.need("layer_types", arch)
    if limit is not None:
        types = list(types)[:limit]
    swa = tuple(i for i, t in enumerate(types) if t == "sliding_attention")
    full = tuple(i for i, t in enumerate(types) if t == "full_attention")
    return full, swa


def _by_pattern(text: _Text, arch: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    pattern = text.get("hybrid_layer_pattern")
    n = int(text.get("num_hidden_layers", 0))
    if pattern is None or len(pattern) < n:
        raise ValueError(
            f"{arch}: SGLang 0.5.23 reads the layer kinds from hybrid_layer_pattern "
            f"(1 = sliding window), which this config lacks or has fewer than {n} entries of; "
            "SGLang cannot load it"
        )
    return tuple(i for i in range(n) if pattern[i] == 0), tuple(i for i in range(n) if pattern[i] == 1)


def _layer_ids(archs: Sequence[str], text: _Text) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """SGLang's full and SWA layer ids for a hybrid model, its rules in its order."""
    has = set(archs).__contains__
    n = int(text.need("num_hidden_layers", archs[0] if archs else "the model"))
    if has("Llama4ForConditionalGeneration"):  # every 4th layer is full attention
        return tuple(i for i in range(n) if (i + 1) % 4 == 0), tuple(i for i in range(n) if (i + 1) % 4)
    if any(map(has, (*_SWA_SINK, "Dots3NoteForCausalLM", "Dots3NoteForCausalLMNextN"))):
        return _by_type(text)
    if any(map(has, _MIMO_V2)):
        return _by_pattern(text, next(a for a in archs if a in _MIMO_V2))
    if has("MiMoV2MTP"):
        return (), (0,)  # one MTP layer, sized as a sliding-window layer
    if any(map(has, _STEP)):
        return _by_type(text, limit=n, arch=next(a for a in archs if a in _STEP))
    if has("Step3p5MTP"):
        return (), (0,)
    if any(map(has, _LAYER_TYPES)):
        return _by_type(text)
    if has("InklingForConditionalGenerationMTP"):
        arch = "InklingForConditionalGenerationMTP"
        local = set(text.need("mtp_local_layer_ids", arch))
        depth = int(text.need("num_nextn_predict_layers", arch))
        return tuple(i for i in range(depth) if i not in local), tuple(sorted(local))
    if has("InklingForConditionalGeneration"):
        ids = list(text.need("local_layer_ids", "InklingForConditionalGeneration"))
        if len(set(ids)) != len(ids) or not all(0 <= i < n for i in ids):
            raise ValueError(f"Inkling local_layer_ids must be unique and in [0, {n}): {ids}")
        return tuple(i for i in range(n) if i not in ids), tuple(i for i in range(n) if i in ids)
    if has("UnlimitedOCRForCausalLM"):
        return (), tuple(range(n))
    if has("MuseSparkForConditionalGeneration"):
        return _by_type(text, arch="MuseSparkForConditionalGeneration")
    if text.get("hybrid_layer_pattern") is not None:  # a custom model opting in
        return _by_pattern(text, archs[0] if archs else "the model")
    return None


def _hybrid_listed(archs: Sequence[str], text: _Text) -> tuple[bool, str]:
    listed = [a for a in archs if a in HYBRID_SWA_ARCHITECTURES]
    if listed:
        if "BeamForCausalLM" in archs:
            ok = "sliding_attention" in list(text.need("layer_types", "BeamForCausalLM"))
            return ok, "BeamForCausalLM " + (
                "has sliding_attention layers" if ok else "has no sliding_attention layer")
        if "LagunaForCausalLM" in archs and not text.get("sliding_window", 0):
            return False, "LagunaForCausalLM without a sliding_window"
        return True, f"{listed[0]} is on SGLang's hybrid-SWA list"
    if text.get("is_hybrid_swa", False):
        return True, "the text config sets is_hybrid_swa"
    return False, (f"{archs[0] if archs else 'a model without architectures'} is not on "
                   "SGLang's hybrid-SWA list")  # fmt: skip


def off_by_override(architectures: Sequence[str], text_config: Mapping[str, Any]) -> str | None:
    """The architecture whose SGLang model override declares ``disable_hybrid_swa_memory``
    for this config (``model_overrides/gemma2_gemma3.py``, ``olmo2.py``, ``exaone.py``), or None."""
    first = architectures[0] if architectures else ""
    needs = _HYBRID_OFF.get(first, "")  # SGLang applies the overrides of architectures[0]
    return first if needs is None or (needs and text_config.get(needs) is not None) else None


def derive_hybrid_model(
    architectures: Sequence[str], text_config: Mapping[str, Any], *, disable_hybrid_swa_memory: bool = False
) -> SGLangHybrid:
    """SGLang 0.5.23's ``ModelConfig._derive_hybrid_model``: the decision and the layer ids,
    None where SGLang's rule derives none (:attr:`SGLangHybrid.unplannable` then says so).

    Arguments and errors as :func:`sglang_hybrid_swa`, except that a hybrid model without
    layer ids is returned, not refused.
    """
    archs, text = list(architectures), _Text(text_config)
    hybrid, why = _hybrid_listed(archs, text)
    off = off_by_override(archs, text_config)
    if hybrid and (disable_hybrid_swa_memory or off is not None):
        by = "--disable-hybrid-swa-memory" if disable_hybrid_swa_memory else f"SGLang's override for {off}"
        return SGLangHybrid(False, None, None, f"{why}, but {by} turns hybrid SWA memory off")
    if not hybrid:
        if off is not None:
            why += f" (and SGLang's override for {off} turns hybrid SWA memory off)"
        return SGLangHybrid(False, None, None, why + ": one Default pool over every layer")
    if any(a in _DEEPSEEK_V4 for a in archs):
        raise ValueError("DeepSeek-V4's compressed SWA pools are SGLang's own layout; kvbudget does not model them")
    ids = _layer_ids(archs, text)
    return SGLangHybrid(True, None, None, why) if ids is None else SGLangHybrid(True, ids[0], ids[1], why)


def sglang_hybrid_swa(
    architectures: Sequence[str], text_config: Mapping[str, Any], *, disable_hybrid_swa_memory: bool = False
) -> SGLangHybrid:
    """Whether SGLang 0.5.23 gives this model separate full and SWA pools, and its layer ids.

    Args:
        architectures: the HF config's ``architectures`` (SGLang reads them in order).
        text_config: the HF text config as a mapping (``text_config`` of a
            multimodal config, else the config itself): ``layer_types``,
            ``num_hidden_layers``, ``hybrid_layer_pattern``, ``sliding_window``,
            ``is_hybrid_swa``, ... as the architecture needs.
        disable_hybrid_swa_memory: SGLang's ``--disable-hybrid-swa-memory``.

    Raises:
        ValueError: a hybrid architecture whose config SGLang cannot load
            (a MiMo-V2 config without ``hybrid_layer_pattern``, Inkling's
            invalid ``local_layer_ids``, a null ``layer_types``), one for which
            SGLang derives no layer ids (its pool factory then fails), or
            DeepSeek-V4, whose compressed SWA pools kvbudget does not model;
            the message says which.
    """
    got = derive_hybrid_model(architectures, text_config, disable_hybrid_swa_memory=disable_hybrid_swa_memory)
    if got.hybrid_swa and got.full_attention_layer_ids is None:
        raise ValueError(f"{got.reason}, but SGLang 0.5.23 derives no layer ids for it; SGLang cannot plan it")
    return got
