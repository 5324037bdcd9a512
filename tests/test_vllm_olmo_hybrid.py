"""``kvbudget.vllm.layers_from_hf_config`` on OLMo Hybrid (:mod:`kvbudget.vllm.olmo_hybrid`), held to vLLM
0.33.0's own ``OlmoHybridModel``.

The configs are built by transformers 5.19.0's ``OlmoHybridConfig`` (its defaults, then seeded layer
counts and kinds, heads, KV heads and the gated delta net's heads and dims, each given or left to the
class), saved whole or sparse (the keys the class derives dropped), some with a ``sliding_window`` or
``linear_use_gate`` false, each under a seeded TP, PP, model
dtype and ``--disable-sliding-window``. The oracle (``tests/vllm_oracle``) builds ``OlmoHybridModel``
from the wheel (its decoder layers, ``OlmoHybridAttention`` and the gated delta net's assertion and
registration) and takes the state shapes and dtypes from ``OlmoHybridForCausalLM``'s classmethods.
Every layer's name, kind, stage, heads, head size, window, state shapes and dtypes are compared.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from test_vllm_state_models import _compare, _drop_defaults

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.olmo_hybrid import OLMO_HYBRID_DEFAULTS

N = int(os.environ.get("KVBUDGET_VLLM_OLMO_HYBRID_CASES", "150"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n, heads = rng.randint(1, 40), rng.choice([8, 16, 30, 32])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * rng.choice([64, 128]),
                          "num_key_value_heads": rng.choice([None, 1, 2, 8, heads]),
                          "linear_conv_kernel_dim": rng.choice([2, 4])}  # fmt: skip
    for key, values in (("linear_num_key_heads", [8, 16, 30]), ("linear_num_value_heads", [16, 30, 32]),
                        ("linear_key_head_dim", [64, 96, 128]), ("linear_value_head_dim", [128, 192])):  # fmt: skip
        if rng.random() < 0.5:
            kw[key] = rng.choice(values)
    if rng.random() < 0.7:
        kw["layer_types"] = [rng.choice(["linear_attention"] * 3 + ["full_attention"]) for _ in range(n)]
    try:
        d = T.OlmoHybridConfig(**kw).to_dict()
    except Exception:  # noqa: BLE001 - no linear or no attention layer: transformers' class refuses it
        return _case(rng)
    if rng.random() < 0.5:
        _drop_defaults(d, T.OlmoHybridConfig)
        for key in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                    "num_key_value_heads"):  # derived by the class from what is left
            if key not in kw:
                d.pop(key, None)
    if rng.random() < 0.2:
        d["sliding_window"] = rng.choice([512, 4096])
    if rng.random() < 0.05:
        d["linear_use_gate"] = False
    return {**d, "architectures": ["OlmoHybridForCausalLM"]}, {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]),
                                                               "pp": rng.choice([1, 1, 2, 3])}  # fmt: skip


def test_olmo_hybrid_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-olmo-hybrid")
    default = ({**T.OlmoHybridConfig().to_dict(), "architectures": ["OlmoHybridForCausalLM"]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_case(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM OLMo Hybrid reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2, counts
    assert counts["state layers"] > 5 * N and counts["attention layers"] > N, counts


def test_olmo_hybrid_defaults_are_transformers() -> None:
    made = T.OlmoHybridConfig()
    assert {k: getattr(made, k) for k in OLMO_HYBRID_DEFAULTS} == dict(OLMO_HYBRID_DEFAULTS)


def test_drafters_and_replayssm_are_refused_by_name() -> None:
    cfg = {**T.OlmoHybridConfig(num_hidden_layers=4).to_dict(), "architectures": ["OlmoHybridForCausalLM"]}
    layers = layers_from_hf_config(cfg, vllm.EngineConfig())
    assert [x.prefill_checkpoint for x in layers if x.kind == "mamba"] == ["none"] * 3  # FLA prefill only
    for kinds in (["full_attention"] * 4, ["linear_attention"] * 4):  # transformers' validate_architecture
        with pytest.raises(InvalidConfigError, match="OLMoHybrid expects at least one"):
            layers_from_hf_config({**cfg, "layer_types": kinds}, vllm.EngineConfig())
    for engine, words in (({"use_replayssm": True}, "use-replayssm"),
                          ({"speculative_method": "mtp", "num_speculative_tokens": 1}, "Unsupported speculative method")):  # fmt: skip
        with pytest.raises(InvalidConfigError, match=words):
            layers_from_hf_config(cfg, vllm.EngineConfig(**engine))
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 16,
            "num_key_value_heads": 8, "hidden_size": 2048}  # fmt: skip
    with pytest.raises(InvalidConfigError, match="drafters"):
        layers_from_hf_config(cfg, vllm.EngineConfig(speculative_method="eagle", num_speculative_tokens=1), draft=head)
