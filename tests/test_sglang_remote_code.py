"""SGLang 0.5.23's model resolution of remote-code checkpoints (``tests/remote_code_cases.py``:
InternLM2, Baichuan, Qwen-1, DeepSeek-MoE, Orion, MiniCPM, Solar, XVERSE-MoE, Grok-1, Ling / Bailing
MoE, EXAONE 3, Nemotron-NAS), loaded by SGLang's config parse through the stand-in for the
checkpoint's own class (``tests/oracle_kit/remote_code.py``) and resolved by its ``ModelConfig``,
against :func:`kvbudget.sglang.model.resolve_sglang` (every field of the model differential; a
refusal on one side only is a mismatch). The census draws 12 per family; this draws more, and holds
Nemotron-NAS's KV-head rule (variable GQA and all-no-op attention refused, as SGLang refuses them).
"""

from __future__ import annotations

import os
import random

from remote_code_cases import REMOTE_CODE, VLLM_ONLY
from sglang_oracle.model import ModelOracle
from test_sglang_model import _differs, _ours, oracle  # noqa: F401 - the module's oracle fixture

N = int(os.environ.get("KVBUDGET_SGLANG_REMOTE_CODE_CASES", "40"))


def test_remote_code_checkpoints_resolve_as_sglang_resolves_them(oracle: ModelOracle) -> None:  # noqa: F811
    mismatches: list[str] = []
    refused: dict[str, int] = {}
    for family, build in REMOTE_CODE.items():
        if family in VLLM_ONLY:
            continue
        rng = random.Random(f"sglang-remote-code:{family}")
        for _ in range(N):
            cfg = build(rng).saved(False)
            if family == "decilm" and rng.random() < 0.05:  # every attention block a no-op
                for block in cfg["block_configs"]:
                    block["attention"].update(no_op=True, n_heads_in_group=None)
            ours, theirs = _ours(cfg), oracle.resolve(cfg, False)
            refused[family] = refused.get(family, 0) + isinstance(theirs, tuple)
            diff = _differs(ours, theirs)
            if diff:
                mismatches.append(f"{family}: " + "; ".join(diff))
    print(f"\nSGLang remote-code checkpoints: {N} per family, refused {refused}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < refused["decilm"] < N // 2  # variable GQA and all-no-op configs, refused by both
