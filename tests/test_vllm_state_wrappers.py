"""``kvbudget.vllm.layers_from_hf_config`` on multimodal wrappers of hybrid-state text models, held
to vLLM 0.33.0's own reading: LFM2-VL (``Lfm2VLForConditionalGeneration`` over an LFM2 or
LFM2-MoE text config) and Nemotron-H VL / Omni (``NemotronH_Nano_VL_V2``, served under four
registry names, over a Nemotron-H text config).

The configs are built by transformers 5.19.0's ``Lfm2VlConfig`` and ``NemotronH_Omni_Reasoning_V3_Config``
around the seeded text configs of ``tests/test_vllm_state_models.py`` (LFM2 with ``conv_dim`` equal
to the hidden size or not, and with or without the keys vLLM reads; Nemotron-H patterns, heads,
windows, Mamba-2 dims and a ``mamba_ssm_cache_dtype`` or none), each under a seeded TP and PP and
registry name. The oracle (``tests/vllm_oracle``) builds the wrapper's text model with the wrapper's
own ``init_vllm_registered_model`` call, takes the state shapes and dtypes from the *wrapper* class's
classmethods (lifted: LFM2-VL's own short-conv shape over ``text_config.hidden_size``; Nemotron's
``NemotronHForCausalLM`` on ``with_hf_config(text_config)``), after the config hook
``MODELS_CONFIG_MAP`` keys by that registry name (``NemotronHNanoVLV2Config`` for one of the four).
Every layer's name, kind, stage, heads, state shapes (the layer's own and the class's) and dtypes
are compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

import transformers as T
from test_vllm_state_models import _compare, _lfm2_case, _lfm2_moe_case, _nemotron_h_case

from kvbudget.vllm.state_wrappers import STATE_WRAPPERS

N = int(os.environ.get("KVBUDGET_VLLM_STATE_WRAPPER_CASES", "60"))
_NEMOTRON_NAMES = sorted(a for a, w in STATE_WRAPPERS.items() if w[0] == "nano_nemotron_vl")
_LFM2_NAMES = sorted(a for a, w in STATE_WRAPPERS.items() if w[0] == "lfm2_vl")


def _lfm2_vl_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    text, engine = (_lfm2_moe_case if rng.random() < 0.4 else _lfm2_case)(rng)
    d = T.Lfm2VlConfig(text_config=text).to_dict()
    d["text_config"] = {**d["text_config"], **{k: text[k] for k in ("conv_dim", "block_dim") if k in text}}
    return {**d, "architectures": [rng.choice(_LFM2_NAMES)]}, engine


def _nemotron_vl_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    text, engine = _nemotron_h_case(rng)
    for key in ("speculative_method", "num_speculative_tokens"):  # drafters on a wrapper: refused unchecked
        engine.pop(key, None)
    if engine.get("pp", 1) > 1 and rng.random() < 0.75:  # the wrapper class is not SupportsPP: mostly one stage
        engine["pp"] = 1
    if rng.random() < 0.3:
        text.pop("architectures")  # VllmConfig.with_hf_config names transformers' class for nemotron_h
    d = T.CONFIG_MAPPING["nemotron_h_omni"](text_config=text).to_dict()
    d["text_config"] = {**text, **{k: v for k, v in d["text_config"].items() if k not in text}}
    return {**d, "architectures": [rng.choice(_NEMOTRON_NAMES)]}, engine


def test_state_wrapper_names_are_vllms() -> None:
    """The registry names vLLM serves with the two wrapper classes (read from the wheel)."""
    assert "Lfm2VlForConditionalGeneration" in _LFM2_NAMES
    assert {"NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3"} <= set(_NEMOTRON_NAMES), _NEMOTRON_NAMES


def test_lfm2_vl_read_as_vllm_reads_it() -> None:
    """LFM2-VL over LFM2 and LFM2-MoE text configs: the class's own short-conv shape (over the
    text hidden size) beside each ``ShortConv``'s (over ``conv_dim``)."""
    rng = random.Random("vllm-lfm2-vl")
    default = ({**T.Lfm2VlConfig().to_dict(), "architectures": ["Lfm2VlForConditionalGeneration"]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_lfm2_vl_case(rng) for _ in range(N)])
    print(f"\nvLLM LFM2-VL reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > N, counts


def test_nemotron_h_vl_read_as_vllm_reads_it() -> None:
    """Nemotron-H VL / Omni under each registry name: the SSM dtype hook only where
    ``MODELS_CONFIG_MAP`` names it; a third with ``--disable-sliding-window``."""
    rng = random.Random("vllm-nemotron-h-vl")
    default = ({**T.CONFIG_MAPPING["nemotron_h_omni"]().to_dict(), "architectures": ["NemotronH_Omni_Reasoning_V3"]},
               {"tp": 1, "pp": 1})  # fmt: skip
    counts, mismatches = _compare(rng, [default] + [_nemotron_vl_case(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM Nemotron-H VL reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 5 and counts["state layers"] > 5 * N, counts
