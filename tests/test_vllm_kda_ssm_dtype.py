"""Kimi-Linear's ``--mamba-ssm-cache-dtype`` in vLLM mode (:mod:`kvbudget.vllm.state_models`), held to vLLM
0.33.0's own ``MambaStateDtypeCalculator.kda_state_dtype`` (lifted from the wheel by ``tests/vllm_oracle``)."""

from __future__ import annotations

import pytest

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config


@pytest.mark.parametrize("ssm", ["auto", "float32", "float16", "bfloat16"])
def test_kimi_linear_ssm_cache_dtype_as_vllms_calculator_takes_it(ssm: str) -> None:
    """Kimi-Linear's ``--mamba-ssm-cache-dtype``: its layer keeps a float32 recurrent state, its class's
    state classmethod (which sizes the attention block) passes the flag to ``kda_state_dtype`` (lifted
    from the wheel): where that gives float32 too, kvbudget plans; where it fails, kvbudget refuses
    with its ValueError; where it gives another dtype (bfloat16), kvbudget refuses as not modelled."""
    import torch
    from vllm_oracle._fetch import vllm_root
    from vllm_oracle._hf import _env

    from kvbudget.models.hybrid_state import get_hybrid_state_model

    calculator = _env(vllm_root()).models["models/kimi_k3/nvidia/model"]["MambaStateDtypeCalculator"]
    cfg = get_hybrid_state_model("kimi-linear-48b-a3b-instruct").config
    try:
        recurrent = str(calculator.kda_state_dtype(torch.bfloat16, "auto", ssm)[1]).removeprefix("torch.")
    except ValueError:
        with pytest.raises(InvalidConfigError, match="supports only auto, float32, and bfloat16"):
            layers_from_hf_config(cfg, vllm.EngineConfig(), mamba_ssm_cache_dtype=ssm)
        return
    if recurrent != "float32":
        with pytest.raises(InvalidConfigError, match="plans only 'auto' and 'float32'"):
            layers_from_hf_config(cfg, vllm.EngineConfig(), mamba_ssm_cache_dtype=ssm)
        return
    layers = layers_from_hf_config(cfg, vllm.EngineConfig(), mamba_ssm_cache_dtype=ssm)
    assert {x.state_dtypes[1] for x in layers if x.kind == "mamba"} == {"float32"}
