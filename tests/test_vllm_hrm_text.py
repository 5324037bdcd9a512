"""``kvbudget.vllm.layers_from_hf_config`` on HRM-Text (``HrmTextForCausalLM``), held to vLLM
0.33.0's own reading (:mod:`kvbudget.vllm.hrm_text`).

The configs are built by transformers 5.19.0's ``HrmTextConfig`` on seeded stack depths, cycle counts
(``H_cycles``, ``L_cycles``, some zero), heads and head dims, some with a ``sliding_window`` (the
model-wide window vLLM's cache config takes) and some with ``--disable-sliding-window``; saved whole
(with the inflated ``num_hidden_layers`` beside ``num_layers_per_stack``), sparse, or as a legacy
checkpoint with only the per-stack ``num_hidden_layers``; each under a seeded TP and PP (the class is
not ``SupportsPP``). The oracle (``tests/vllm_oracle``) builds vLLM's ``HrmTextModel`` (its two stacks
and one ``PrefillPrefixLMAttention`` per recurrence step). Every layer's name, kind, stage, heads,
head size and window are compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from typing import Any

import transformers as T
from test_vllm_state_models import _compare, _drop_defaults

from kvbudget.vllm.hrm_text import HRM_TEXT

N = int(os.environ.get("KVBUDGET_VLLM_HRM_TEXT_CASES", "100"))


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    heads = rng.choice([4, 8, 12, 16, 6])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 6), "num_attention_heads": heads,
                          "hidden_size": heads * rng.choice([64, 128]), "H_cycles": rng.choice([0, 1, 2, 2, 3]),
                          "L_cycles": rng.choice([0, 1, 2, 3, 3])}  # fmt: skip
    if rng.random() < 0.5:
        kw["head_dim"] = rng.choice([64, 128, 256])
    d = T.HrmTextConfig(**kw).to_dict()
    r = rng.random()
    if r < 0.4:
        _drop_defaults(d, T.HrmTextConfig)
    elif r < 0.6:  # a legacy checkpoint: the per-stack count in num_hidden_layers
        d["num_hidden_layers"] = d.pop("num_layers_per_stack")
    if rng.random() < 0.2:
        d["sliding_window"] = rng.choice([256, 4096])
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 1, 2])}
    return {**d, "architectures": [HRM_TEXT]}, engine


def test_hrm_text_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-hrm-text")
    default = ({**T.HrmTextConfig().to_dict(), "architectures": [HRM_TEXT]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [default] + [_case(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM HRM-Text reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > 5 * N, counts
