"""``kvbudget.vllm.layers_from_hf_config`` on Ling 2.5 and Ling 3 (:mod:`kvbudget.vllm.bailing_hybrid`), held
to vLLM 0.33.0's own ``BailingMoeV25Model`` and ``BailingMoeV3Model``.

The configs are the model-resolution differential's Bailing hybrid files (``sglang_state_cases``: layer
kinds from an int or per-layer ``layer_group_size``, heads, head dims given or null, MLA dims, NoPE and KDA
keys, keys left to the class defaults), as either architecture, with a seeded ``group_norm_size`` (the
lightning attention's TP asserts) and ``no_kda_lora`` (Ling 3's KDA needs it), and a seeded TP, PP and model
dtype. vLLM loads the checkpoint's own config code; SGLang 0.5.23's ``BailingHybridConfig`` stands in for
it in the oracle (``tests/vllm_oracle``), which builds each model class from the wheel (its decoder layers,
the MLA attention, the lightning or KDA layer's checks and registration) and takes the state shapes and
dtypes from the ``*ForCausalLM``'s classmethods. Every layer's name, kind, stage, heads, head size, state
shapes and dtypes are compared.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from sglang_state_cases import _bailing_hybrid
from test_vllm_state_models import _compare

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_BAILING_HYBRID_CASES", "100"))
ARCH, V3 = "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM"


def _case(rng: random.Random, arch: str) -> tuple[dict[str, Any], dict[str, Any]]:
    d = {**_bailing_hybrid(rng).saved(False), "architectures": [arch]}
    if rng.random() < 0.8:
        d["group_norm_size"] = rng.choice([1, 2, 8, 8, 16, 16])
    if isinstance(d.get("layer_group_size"), list) and rng.random() < 0.8:  # SGLang's per-layer form: vLLM fails
        d["layer_group_size"] = rng.choice([4, 8])
    if rng.random() < 0.9:
        d["no_kda_lora"] = True
    if arch == V3 and rng.random() < 0.8:
        d["short_conv_kernel_size"] = rng.choice([3, 4])
    if rng.random() < 0.05:
        d["layer_group_size"] = rng.choice([0, -4])  # Ling 2.5: no linear layer; Ling 3: a Python modulo
    return d, {"tp": rng.choice([1, 1, 2, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3])}


@pytest.mark.parametrize("arch", [ARCH, V3])
def test_read_as_vllm_reads_it(arch: str) -> None:
    rng = random.Random(f"vllm-bailing-hybrid {arch}")
    counts, mismatches = _compare(rng, [_case(rng, arch) for _ in range(N)])
    print(f"\nvLLM {arch} reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2, counts
    assert counts["state layers"] > 5 * N and counts["attention layers"] > N, counts


def _ling(**kw: Any) -> dict[str, Any]:
    return {"model_type": "bailing_hybrid", "architectures": [ARCH], "num_hidden_layers": 8, "num_attention_heads": 16,
            "head_dim": 128, "layer_group_size": 4, "group_norm_size": 4, **kw}  # fmt: skip


def test_ling_3_kda_and_its_trailing_full_layers() -> None:
    """Ling 3 in vLLM: KDA states (conv ``(k - 1, 3 * 16 * 128 / tp)``, float32 recurrent whatever
    ``--mamba-ssm-cache-dtype`` says), MLA every
    fourth layer and in the trailing partial group (layers 8 and 9 of 10), where SGLang keeps linear
    layers; the latent keeps its rope half under ``use_mla_nope``."""
    cfg = _ling(architectures=[V3], num_hidden_layers=10, short_conv_kernel_size=4, no_kda_lora=True,
                use_mla_nope=True)  # fmt: skip
    layers = layers_from_hf_config(cfg, vllm.EngineConfig(tp=2), model_dtype="bfloat16", mamba_ssm_cache_dtype="bfloat16")
    assert [x.kind == "mla" for x in layers] == [i in (3, 7, 8, 9) for i in range(10)]
    # the SSM cache dtype flag reaches neither the layer nor the class's state classmethod: float32
    assert (layers[0].state_shapes, layers[0].state_dtypes) == (((3, 3072), (8, 128, 128)), ("bfloat16", "float32"))
    assert layers[3].head_size == 576


def test_the_lightning_state_and_the_latent_cache() -> None:
    """Every fourth layer MLA (one latent head of 512 + 64), the others one (16 / tp, 128, 128)
    state in the model dtype, or in ``--mamba-cache-dtype``."""
    layers = layers_from_hf_config(_ling(), vllm.EngineConfig(tp=2), model_dtype="bfloat16", mamba_cache_dtype="float32")
    assert [(x.kind, x.name) for x in layers[2:4]] == [("mamba", "model.layers.2.self_attn"),
                                                        ("mla", "model.layers.3.self_attn.attn")]  # fmt: skip
    state, mla = layers[0], layers[3]
    assert (state.state_shapes, state.state_dtypes, state.mamba_type) == (((8, 128, 128),), ("float32",), "linear")
    assert (mla.num_kv_heads, mla.head_size) == (1, 576)


def test_what_vllm_refuses_and_what_is_not_read() -> None:
    with pytest.raises(InvalidConfigError, match="group_norm_size"):  # its local RMS norm's asserts
        layers_from_hf_config(_ling(), vllm.EngineConfig(tp=8))
    with pytest.raises(InvalidConfigError, match="TypeError"):  # a per-layer schedule: vLLM compares it with 0
        layers_from_hf_config(_ling(layer_group_size=[1, 1, 1, 0] * 2), vllm.EngineConfig())
    with pytest.raises(InvalidConfigError, match="drafters"):
        layers_from_hf_config(_ling(), vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1))

