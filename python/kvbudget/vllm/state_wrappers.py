"""vLLM 0.33.0's multimodal wrappers of a hybrid-state text model: what the wrapper class changes.

The wrapper builds its text model with ``init_vllm_registered_model`` (:mod:`kvbudget.vllm.wrappers`),
so the attention and state layers are the text model's own, under the wrapper's prefix. Two things
are the wrapper's, not the text model's, and are read here:

* **The state shapes its class reports** (``get_mamba_state_shape_from_config`` on the *registered*
  class, which sizes the attention block the state page is padded to):

  - ``Lfm2VLForConditionalGeneration`` (``models/lfm2_vl.py``) computes its own short-conv shape over
    ``text_config.hidden_size`` and ``conv_L_cache``, while each dense LFM2 ``ShortConv`` keeps
    ``conv_dim`` channels (LFM2-MoE's keep ``hidden_size``): where they differ the class's shape is the
    layer's ``config_state_shapes``, as the text model's own class has it for a drafter.
  - ``NemotronH_Nano_VL_V2`` (``models/nano_nemotron_vl.py``) hands ``vllm_config.with_hf_config(
    text_config)`` to ``NemotronHForCausalLM``'s classmethods: the layers' own shapes.

* **The config hook** (``MODELS_CONFIG_MAP`` in ``models/config.py``, keyed by the architecture
  name the config gives, ``VllmConfig.try_verify_and_update_config``): ``NemotronH_Nano_VL_V2``
  maps to ``NemotronHNanoVLV2Config``, which sets an ``auto`` SSM cache dtype from the text config's
  ``mamba_ssm_cache_dtype`` (float32 by default), as the text model's own hook does. The three other
  names vLLM's registry serves with that class (``NemotronH_Nano_Omni_Reasoning_V3``,
  ``NemotronH_Super_Omni_Reasoning_V3``, ``NemotronH_Omni_Reasoning_V3``) have no entry (nor does
  ``ModelRegistry._normalize_arch`` map them to one): their ``auto`` SSM state takes the conv dtype
  (the model dtype), not float32. LFM2-VL has no hook (its short convs have no SSM state).

Other wrappers of a state model stay refused as unchecked. ``tests/test_vllm_state_wrappers.py``
holds this to vLLM's own classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.planner import LayerSpec
from kvbudget.vllm.registry import registry

__all__ = ["STATE_WRAPPERS", "config_ssm_dtype", "wrapper_state_shapes"]

#: The wrapper classes (vLLM 0.33.0's ``(module, class)``) whose state layers kvbudget reads ->
#: the text architectures they are read with.
_CLASSES: Final[Mapping[tuple[str, str], frozenset[str]]] = {
    ("lfm2_vl", "Lfm2VLForConditionalGeneration"): frozenset({"Lfm2ForCausalLM", "Lfm2MoeForCausalLM"}),
    ("nano_nemotron_vl", "NemotronH_Nano_VL_V2"): frozenset({"NemotronHForCausalLM"}),
}
#: Every registered name served with one of those classes -> its class.
STATE_WRAPPERS: Final[Mapping[str, tuple[str, str]]] = {a: w for a, w in registry().items() if w in _CLASSES}
#: The names ``MODELS_CONFIG_MAP`` gives a Nemotron-H SSM-dtype hook (``NemotronHNanoVLV2Config``).
_SSM_HOOKED: Final = frozenset({"NemotronH_Nano_VL_V2"})


def reads(wrapper: str, text_arch: str) -> bool:
    """Whether kvbudget reads the state layers of ``text_arch`` inside ``wrapper``."""
    w = STATE_WRAPPERS.get(wrapper)
    return w is not None and text_arch in _CLASSES[w]


def config_ssm_dtype(wrapper: str, mamba_cache_dtype: str, mamba_ssm_cache_dtype: str, model_dtype: str) -> str:
    """The ``--mamba-ssm-cache-dtype`` the text model's reader should take inside ``wrapper``: as
    given where the wrapper's name has the Nemotron-H hook (or the flag is set), else the conv dtype
    (an ``auto`` SSM dtype no hook replaces: ``MambaStateDtypeCalculator`` gives it the conv dtype)."""
    if mamba_ssm_cache_dtype != "auto" or wrapper in _SSM_HOOKED or STATE_WRAPPERS[wrapper][0] != "nano_nemotron_vl":
        return mamba_ssm_cache_dtype
    return model_dtype if mamba_cache_dtype == "auto" else mamba_cache_dtype


def wrapper_state_shapes(wrapper: str, text: Mapping[str, Any], tp: int, layers: list[LayerSpec]) -> list[LayerSpec]:
    """``layers`` (the text model's) with the shapes ``wrapper``'s class reports: LFM2-VL's short-conv
    shape over ``hidden_size`` as each state layer's ``config_state_shapes`` where it differs from the
    layer's own (see the module doc); vLLM's ``divide`` refusing it is vLLM's startup failure."""
    if STATE_WRAPPERS[wrapper][0] != "lfm2_vl" or not any(x.kind == "mamba" for x in layers):
        return layers
    v = _View(text, "config.json: text_config", engine="vllm")
    try:
        shapes = _core._vllm_state_shapes("short_conv", [tp, v.req_int("hidden_size"), v.req_int("conv_L_cache"), 0])
    except ValueError as e:
        raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e} ({wrapper}.get_mamba_state_shape_from_config, "
                          "over text_config.hidden_size)", "text_config.hidden_size") from None  # fmt: skip
    own = tuple(tuple(s) for s in shapes)
    return [replace(x, config_state_shapes=() if own == x.state_shapes else own) if x.kind == "mamba" else x
            for x in layers]  # fmt: skip
