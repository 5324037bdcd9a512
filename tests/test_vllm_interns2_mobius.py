"""``kvbudget.vllm.layers_from_hf_config`` on Intern-S2-Mobius, held to vLLM 0.33.0's own reading:
``InternS2MobiusForConditionalGeneration`` builds ``InternS2MobiusModel`` (shared MoE banks, gated
delta nets and ``Qwen3NextAttention`` by ``layer_types``) on its config's ``hf_text_config``
(:mod:`kvbudget.vllm.interns2_mobius`).

vLLM loads this checkpoint's own config code; the oracle (``tests/vllm_oracle``) stands SGLang
0.5.23's ``InternS2MobiusConfig`` in for it, and the configs here are built by that class around the
seeded Qwen3.5 text configs of ``tests/test_vllm_state_models.py`` (layer counts, heads, gated-delta-net
dims) with seeded ``layer_types`` (some too short, with a kind vLLM refuses, or absent), MoE banks
(``num_blocks``, a few none) and experts (a few fewer than TP), saved whole or sparse, with a
``mamba_ssm_dtype`` that no hook reads, a few with no text config (the class defaults), each under a
seeded TP and PP. The oracle builds vLLM's ``InternS2MobiusModel`` under ``language_model.model`` on
the loaded config, runs the wrapper's empty-bank check and takes the state shapes and dtypes from
``Qwen3_5ForConditionalGeneration``'s classmethods (which the wrapper inherits). Every layer's name,
kind, stage, heads, head size, state shapes and dtypes are compared; a refusal on one side only is a
mismatch. ``KVBUDGET_VLLM_INTERNS2_CASES`` sets the number of seeded configs.
"""

from __future__ import annotations

import os
import random
from typing import Any

from test_vllm_state_models import _compare, _drop_defaults, _text_kw
from vllm_oracle._hf import vllm_config_class

N = int(os.environ.get("KVBUDGET_VLLM_INTERNS2_CASES", "80"))
ARCH = "InternS2MobiusForConditionalGeneration"
_KINDS = ("linear_attention", "linear_attention", "linear_attention", "full_attention")


def _layer_types(rng: random.Random, n: int) -> list[str] | None:
    r = rng.random()
    if r < 0.02:
        return None  # absent: the config keeps none
    kinds = [rng.choice(_KINDS) for _ in range(n)]
    if "linear_attention" not in kinds:  # vLLM sizes the state pool from the class whatever the layers
        kinds[0] = "linear_attention"
    if r < 0.08:
        kinds[rng.randrange(n)] = rng.choice(["sliding_attention", "attention", "mamba", "mamba"])  # vLLM refuses these
    elif r < 0.1:
        kinds = kinds[: rng.randrange(n)]  # too short
    elif r < 0.3:
        kinds += [rng.choice(["full_attention", "sliding_attention"]) for _ in range(rng.randint(1, 3))]  # unread
    return kinds


def _case(rng: random.Random, cls: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    if rng.random() < 0.03:  # no text config: the class defaults (no layer_types)
        d = cls().to_dict()
        d.pop("text_config", None)
        return {**d, "architectures": [ARCH]}, engine
    kw = _text_kw(rng)
    kw["num_blocks"] = 0 if rng.random() < 0.04 else rng.choice([1, 2, 4, 4, 8])  # none: the wrapper refuses
    kw["num_experts"] = 2 if rng.random() < 0.1 else rng.choice([64, 256, 512])  # 2: fewer than TP, refused
    if rng.random() < 0.1:
        kw["head_dim"] = None  # Qwen3NextAttention: hidden_size over the rank's heads
    kinds = _layer_types(rng, kw["num_hidden_layers"])
    if kinds is not None:
        kw["layer_types"] = kinds
    d = cls(text_config=kw).to_dict()
    text = d["text_config"]
    if rng.random() < 0.5:  # sparse, as released configs are
        _drop_defaults(text, cls.sub_configs["text_config"])
    if rng.random() < 0.4:
        text["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
    return {**d, "architectures": [ARCH]}, engine


def test_interns2_mobius_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-interns2-mobius")
    cls = vllm_config_class("interns2_mobius")  # SGLang's InternS2MobiusConfig, the oracle's stand-in
    defaults = [({**cls().to_dict(), "architectures": [ARCH]}, {"tp": 1, "pp": 1})]
    counts, mismatches = _compare(rng, defaults + [_case(rng, cls) for _ in range(N)])
    print(f"\nvLLM Intern-S2-Mobius reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    # about 45% refused: the seeded Qwen3.5 heads that do not shard over TP, and this class's own refusals
    assert 0 < counts["refused"] < 0.6 * counts["compared"] and counts["state layers"] > 5 * N, counts
