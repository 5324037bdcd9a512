"""``kvbudget.vllm.layers_from_hf_config`` on Zamba2 (:mod:`kvbudget.vllm.zamba2`), held to vLLM 0.33.0's
own ``Zamba2Model``.

The configs are built by transformers 5.19.0's ``Zamba2Config`` on seeded layer patterns (today's
and the legacy kind names), shared-block counts, heads and Mamba-2 dims, saved whole (with the keys
its ``__post_init__`` derives: ``hybrid_layer_ids``, ``attention_head_dim``, ``attention_hidden_size``,
``mamba_headdim``), sparse, or with those keys edited as a saved config may carry them (a hybrid
layer's id dropped or repeated, another head size, a ``sliding_window``), each under a seeded TP and
model dtype. The oracle (``tests/vllm_oracle``) builds ``Zamba2Model`` from the wheel (its shared
``Zamba2AttentionDecoderLayer`` blocks, ``Zamba2Attention``'s checks, the ``MambaMixer2`` of every
layer) and takes the state shapes and dtypes from ``Zamba2ForCausalLM``'s classmethods. Every layer's
name, kind, heads, head size, window, state shapes and dtypes are compared, in registration order.
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
from kvbudget.vllm.zamba2 import ZAMBA2_DEFAULTS

N = int(os.environ.get("KVBUDGET_VLLM_ZAMBA2_CASES", "120"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    while True:
        n, hidden, expand = rng.randint(1, 40), rng.choice([512, 1024, 2560]), rng.choice([1, 2])
        kinds = [rng.choice(["mamba", "linear_attention", "linear_attention", "hybrid"]) for _ in range(n)]
        kw: dict[str, Any] = {"num_hidden_layers": n, "hidden_size": hidden, "mamba_expand": expand,
                              "layers_block_type": kinds, "num_mem_blocks": rng.choice([1, 1, 2, 3]),
                              "num_attention_heads": rng.choice([8, 16, 32, 32, 12]),
                              "n_mamba_heads": rng.choice([8, 16, 32, 64]), "mamba_ngroups": rng.choice([1, 1, 2, 4, 8, 3]),
                              "mamba_d_state": rng.choice([16, 64, 128]), "mamba_d_conv": rng.choice([2, 4]),
                              "use_shared_attention_adapter": rng.random() < 0.3,
                              "num_key_value_heads": rng.choice([None, None, 4, 8])}  # never read by vLLM  # fmt: skip
        try:
            d = T.Zamba2Config(**kw).to_dict()
        except Exception:  # noqa: BLE001 - a pattern or dims transformers' class refuses: draw again
            continue
        break
    form = rng.choice(["whole", "whole", "sparse", "edited"])
    if form == "sparse":
        _drop_defaults(d, T.Zamba2Config)
    elif form == "edited":
        edit = rng.choice(["drop id", "repeat id", "head dim", "window"])
        ids = d["hybrid_layer_ids"]
        if edit == "drop id" and ids:
            ids.pop(rng.randrange(len(ids)))
        elif edit == "repeat id" and ids:
            ids.append(ids[0])
        elif edit == "head dim":
            d["attention_head_dim"] = rng.choice([64, 128])
            d["attention_hidden_size"] = d["attention_head_dim"] * d["num_attention_heads"] * rng.choice([1, 1, 2])
        else:
            d["sliding_window"] = rng.choice([512, 4096])
    return {**d, "architectures": ["Zamba2ForCausalLM"]}, {"tp": rng.choice([1, 1, 1, 2, 2, 4, 8, 3]), "pp": 1}


def test_zamba2_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-zamba2")
    default = ({**T.Zamba2Config().to_dict(), "architectures": ["Zamba2ForCausalLM"]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_case(rng) for _ in range(N)])
    print(f"\nvLLM Zamba2 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2, counts
    assert counts["state layers"] > 5 * N and counts["attention layers"] > N, counts


def test_zamba2_defaults_are_transformers() -> None:
    made = T.Zamba2Config()
    assert {k: getattr(made, k) for k in ZAMBA2_DEFAULTS} == dict(ZAMBA2_DEFAULTS)


def test_what_vllm_and_kvbudget_refuse_by_name() -> None:
    cfg = {**T.Zamba2Config(num_hidden_layers=2, layers_block_type=["mamba", "hybrid"]).to_dict(),
           "architectures": ["Zamba2ForCausalLM"]}  # fmt: skip
    assert [x.name for x in layers_from_hf_config(cfg, vllm.EngineConfig())] == ["model.attn.0", "1.mixer", "2.mixer"]
    for engine, words in (({"pp": 2}, "SupportsPP"), ({"speculative_method": "mtp", "num_speculative_tokens": 1},
                                                     "Unsupported speculative method: 'mtp'")):  # fmt: skip
        with pytest.raises(InvalidConfigError, match=words):
            layers_from_hf_config(cfg, vllm.EngineConfig(**engine))
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 16,
            "num_key_value_heads": 8, "hidden_size": 2048}  # fmt: skip
    with pytest.raises(InvalidConfigError, match="drafters on Zamba2ForCausalLM"):  # an EAGLE head: not read
        layers_from_hf_config(cfg, vllm.EngineConfig(speculative_method="eagle", num_speculative_tokens=1), draft=head)
    with pytest.raises(InvalidConfigError, match="mamba_headdim"):
        layers_from_hf_config({**cfg, "mamba_headdim": 7}, vllm.EngineConfig())
