"""The config class vLLM 0.33.0 loads a ``config.json`` with, and what its ``get_config`` gives
(:func:`vllm_load_config`): vLLM's own classes (lifted), transformers', or for a remote-code
checkpoint the stand-in for its own class (:mod:`oracle_kit.remote_code`)."""

from __future__ import annotations

import copy
from typing import Any

import transformers

from oracle_kit import remote_code
from ._hf import _env, _root

#: Model type -> SGLang 0.5.23's config class standing in for the checkpoint's remote code.
_SGLANG_STANDS_IN = {"interns2_mobius": "InternS2MobiusConfig", "exaone": "ExaoneConfig",
                     "internvl_chat": "InternVLChatConfig", "bailing_hybrid": "BailingHybridConfig",
                     "dots_ocr": "DotsOCRConfig"}


def vllm_model_type(config: dict[str, Any]) -> Any:
    """The model type vLLM 0.33.0 loads a ``config.json`` dict as: its own, else (a remote-code
    checkpoint without one, such as LongCat-Flash's) the one ``_ARCHITECTURE_TO_MODEL_TYPE`` (lifted)
    names for its first architecture; None when neither gives one."""
    archs = config.get("architectures") or [None]
    return config.get("model_type") or _env(_root()).cfg["_ARCHITECTURE_TO_MODEL_TYPE"].get(archs[0])


def vllm_config_class(model_type: str) -> Any:
    """The class vLLM 0.33.0 loads ``model_type``'s config with: its own where it registers one
    (``kimi_linear``, Kimi-VL's, Inkling's, MiniMax-M3's, lifted from the wheel), SGLang 0.5.23's
    ``InternS2MobiusConfig``, ``ExaoneConfig``, ``InternVLChatConfig`` and ``BailingHybridConfig`` standing
    in for ``interns2_mobius``'s, EXAONE 3's, InternVL's and Ling 2.5's remote code (restated), else
    transformers'."""
    if model_type == "kimi_linear":
        return _env(_root()).cfg["KimiLinearConfig"]
    own = {"qwen3_asr": "Qwen3ASRConfig", "qwen3_asr_text": "Qwen3ASRTextConfig",  # registered over transformers'
           "step3_vl": "Step3VLConfig", "step3_text": "Step3TextConfig", "kimi_k3": "KimiK3Config",
           "beam": "BeamConfig", "chatglm": "ChatGLMConfig", "kimi_vl": "KimiVLConfig"}
    if model_type in own:
        return _env(_root()).cfg[own[model_type]]
    from ._hf_tables_inkling import INKLING_CONFIGS, inkling_config_class

    if model_type in INKLING_CONFIGS:  # registered over transformers' (inkling_mm_model)
        return inkling_config_class(model_type)
    from ._hf_tables_minimax_m3 import MINIMAX_M3_CONFIGS, minimax_m3_config_class

    if model_type in MINIMAX_M3_CONFIGS:  # registered over transformers' (minimax_m3_vl)
        return minimax_m3_config_class(model_type)
    if model_type in _SGLANG_STANDS_IN:
        # Restated glue (the lead's stand-in): vLLM loads the checkpoint's own config code
        # (trust_remote_code; neither vLLM nor transformers 5.19.0 has a class for it); SGLang 0.5.23's
        # class stands in, executed from the verified SGLang wheel extraction (as the census and
        # tests/sglang_model_cases.py load SGLang's own config classes)
        from sglang_oracle._configs import REAL, ConfigClasses
        from sglang_oracle._fetch import sglang_root
        from sglang_oracle._plumbing import Builder

        return ConfigClasses(Builder(sglang_root(), real=REAL)).cls(_SGLANG_STANDS_IN[model_type])
    # transformers' own class, whatever another oracle registered over it (SGLang's classes)
    name = transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES.get(model_type)
    if name is None:
        raise LookupError(f"vllm_oracle._hf: vLLM 0.33.0's config class for {model_type!r} is not lifted "
                          "(transformers has none)")  # fmt: skip
    return getattr(transformers, name)


def vllm_load_config(saved: dict[str, Any]) -> Any:
    """The config vLLM 0.33.0's ``get_config`` gives for a ``config.json`` dict: its class's
    ``from_dict`` (:func:`vllm_config_class`, else, for a remote-code file, the stand-in for the
    checkpoint's class: :mod:`oracle_kit.remote_code`), then for a remote-code class the
    ``patch_rope_parameters`` (lifted) that ``get_config`` runs on every config (the old RoPE key
    names into ``rope_parameters``; transformers' and vLLM's own classes standardize theirs)."""
    model_type = vllm_model_type(saved)
    try:
        cls = vllm_config_class(model_type)
    except LookupError:
        cls = remote_code.register(saved)
        if cls is None:
            raise
    loaded = cls.from_dict(copy.deepcopy(saved))
    if cls is remote_code.stand_in(model_type) or model_type == "exaone":
        _env(_root()).cfg["patch_rope_parameters"](loaded)
    return _env(_root()).cfg["_maybe_remap_hf_config_attrs"](loaded)  # get_config's last step
