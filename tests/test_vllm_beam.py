"""``kvbudget.vllm.layers_from_hf_config`` on Beam (``BeamForCausalLM``), held to vLLM 0.33.0's own
reading (:mod:`kvbudget.vllm.beam`).

The configs are built by vLLM's own ``BeamConfig`` (lifted from the wheel) on seeded layer counts,
``layer_types`` (or none: all sliding), heads, KV heads, head dims, windows and tied embeddings (which
vLLM refuses), saved whole or sparse, each under a seeded TP and PP, a third with
``--disable-sliding-window``. The oracle (``tests/vllm_oracle``) builds vLLM's ``BeamForCausalLM``
(its refusals and model), ``BeamModel``, ``BeamDecoderLayer`` and ``BeamAttention``. Every layer's
name, kind, stage, heads, head size and window are compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

from test_vllm_state_models import _compare, _drop_defaults
from vllm_oracle._hf import vllm_config_class

from kvbudget.vllm.beam import BEAM

N = int(os.environ.get("KVBUDGET_VLLM_BEAM_CASES", "100"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    cls = vllm_config_class("beam")
    n = rng.randint(1, 32)
    heads = rng.choice([8, 16, 32, 32, 12])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 128,
                          "num_key_value_heads": rng.choice([1, 2, 4, 4, 8, 3]),
                          "sliding_window": rng.choice([512, 4096, 4096])}  # fmt: skip
    if rng.random() < 0.8:
        kw["layer_types"] = [rng.choice(["sliding_attention", "sliding_attention", "full_attention"]) for _ in range(n)]
    if rng.random() < 0.4:
        kw["head_dim"] = rng.choice([64, 128, 256, 0])  # 0: vLLM's `or` takes hidden_size // heads
    if rng.random() < 0.1:
        kw["tie_word_embeddings"] = True
    d = cls(**kw).to_dict()
    if rng.random() < 0.5:
        _drop_defaults(d, cls)
    return {**d, "architectures": [BEAM]}, {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}


def test_beam_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-beam")
    default = ({**vllm_config_class("beam")().to_dict(), "architectures": [BEAM]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_case(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM Beam reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 5 * N, counts
