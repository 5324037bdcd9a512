"""Whether vLLM 0.33.0 starts ``speculative_method="mtp"`` on a target at all.

With ``mtp`` and no drafter path, vLLM builds the drafter's ``ModelConfig`` from the target's own
checkpoint, its config rewritten by ``SpeculativeConfig.hf_config_override`` into the model's MTP
module where vLLM has one; ``SpeculativeConfig.__post_init__`` then keeps the method only if the
rewritten ``model_type`` is one of ``MTPModelTypes``, and otherwise fails with
``NotImplementedError: Unsupported speculative method: 'mtp'`` (the Transformers backend's own
MTP, and a checkpoint path naming an EAGLE or DFlash head, are not modelled). :func:`takes_mtp`
is that decision on a ``config.json``; :func:`check_mtp_method` raises vLLM's failure by name.

``tests/test_vllm_mtp_method.py`` holds the decision to vLLM's lifted ``hf_config_override`` and
``MTPModelTypes`` on every registry architecture's census configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvbudget.vllm.refusal import refused

__all__ = ["MTP_MODEL_TYPES", "check_mtp_method", "takes_mtp"]

#: ``MTPModelTypes``: the drafter model types ``__post_init__`` keeps ``mtp`` for.
MTP_MODEL_TYPES: Final = frozenset({
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp",
    "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp",
    "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp", "minimax_m3_mtp",
    "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp",
    "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp",
})  # fmt: skip
#: Target model types ``hf_config_override`` rewrites into one of those.
_REWRITTEN_TYPES: Final = frozenset({
    "dots3_note", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4", "deepseek_v41", "kimi_k3",
    "ernie4_5_moe", "qwen3_next", "qwen4_exp", "qwen4_exp_text", "bailing_hybrid", "exaone_moe", "qwen3_5",
    "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text", "intern_s2_preview", "interns2_mobius", "longcat_flash",
    "step3p5", "step3p7", "step5", "step5_vl", "hy_v3", "hy_v4", "inkling_mm_model", "inkling_model",
    "gemma4_assistant", "gemma4_unified_assistant", "minimax_m3_vl", "glm5_next",
})  # fmt: skip
#: Target architectures (``architectures[0]``) it rewrites whatever their model type.
_REWRITTEN_ARCHS: Final = frozenset({
    "MiMoForCausalLM", "MiMoV2ForCausalLM", "MiMoV2OmniForCausalLM", "MiMoV2FlashForCausalLM",
    "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmOcrForConditionalGeneration", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "Step3p5ForCausalLM", "Step3p7ForConditionalGeneration",
    "MiniMaxM3SparseForConditionalGeneration", "MiniMaxM3MTP",
})  # fmt: skip
#: Architectures listed anywhere in ``architectures`` that it rewrites.
_LISTED_ARCHS: Final = frozenset({"BailingMoeV2_5ForCausalLM", "Step5ForCausalLM", "Step5ForConditionalGeneration"})
#: Nemotron-H's omni wrappers: their ``text_config`` is read for Nemotron-H's MTP variant.
_NEMOTRON_OMNI: Final = frozenset({"NemotronH_Super_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3"})


def takes_mtp(cfg: Mapping[str, Any]) -> bool:
    """Whether ``hf_config_override`` leaves ``cfg`` (a target's ``config.json``) with a model type
    in ``MTPModelTypes``, so that vLLM 0.33.0 keeps ``speculative_method="mtp"`` (see the module
    doc). Whether vLLM then reads the MTP module, and whether kvbudget does, is the readers'."""
    archs = cfg.get("architectures") or []
    first = archs[0] if archs else None
    model_type = cfg.get("model_type") or ""
    if first == "RadioMBartPrefixForCausalLM":
        decoder = cfg.get("decoder")
        if isinstance(decoder, Mapping) and decoder.get("causal_vision_prefix"):
            return True
    # vLLM tests `model_type in ("pangu_ultra_moe")`: a substring of that string, not a tuple member
    # (a loaded config always has a model type; a preset's may leave it out, and is no Pangu).
    pangu = bool(model_type) and model_type in "pangu_ultra_moe"
    if model_type in MTP_MODEL_TYPES or model_type in _REWRITTEN_TYPES or pangu:
        return True
    if "exaone4_5" in model_type or first in _REWRITTEN_ARCHS or _LISTED_ARCHS.intersection(archs):
        return True
    text = cfg.get("text_config") if first in _NEMOTRON_OMNI else cfg
    if not isinstance(text, Mapping):
        return False
    steps = text.get("num_nextn_predict_layers")
    return text.get("model_type") in ("nemotron_h", "nemotron_h_puzzle") and isinstance(steps, int) and steps > 0


def check_mtp_method(cfg: Mapping[str, Any], method: str | None) -> None:
    """vLLM 0.33.0's failure on ``speculative_method="mtp"`` for a target it has no MTP drafter
    for (:func:`takes_mtp`); nothing for any other method.

    Raises:
        ConfigError: ``NotImplementedError: Unsupported speculative method: 'mtp'``.
    """
    if method == "mtp" and not takes_mtp(cfg):
        arch = (cfg.get("architectures") or ["?"])[0]
        model_type = cfg.get("model_type")
        of = f"{arch}'s config" + (f" (model type {model_type!r})" if model_type else "")
        raise refused(f"NotImplementedError: Unsupported speculative method: 'mtp' (its MTP rewrite of {of} "
                      "names no MTP drafter)", "architectures")  # fmt: skip
