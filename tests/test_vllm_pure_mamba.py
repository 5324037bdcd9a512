"""vLLM mode's pure state models (:mod:`kvbudget.vllm.pure_mamba`: Mamba-1, Falcon-Mamba, Mamba-2),
held to vLLM 0.33.0's own classes (``tests/vllm_oracle``: ``MambaModel`` / ``Mamba2Model`` and their
mixers, the classes' state classmethods; ``ModelConfig.verify_with_parallel_config``'s ``SupportsPP``
check from the class's interfaces).

The configs are transformers 5.19.0's classes: seeded layer counts, widths, state sizes, conv
kernels, expansions, and Mamba-2's heads, head dims and groups (some the class refuses, some TP
does not divide), some with a stray ``intermediate_size``, saved with every key or sparse; each
over a seeded TP, PP (Mamba-2 is not ``SupportsPP``) and model dtype. Every state
layer's name, stage, shapes, class shapes and dtypes are compared; a refusal on one side only is a
mismatch, but for the Mamba-2 configs whose ``intermediate_size`` is not ``expand · hidden_size``,
which kvbudget refuses as unchecked (counted apart: the oracle takes the model class's state shape
for a ``MambaMixer2``, which there differs from the layer's own). ``KVBUDGET_VLLM_PURE_MAMBA_CASES`` sets the configs per family (the long run: 1,000).
Then each family's defaults are planned by vLLM's planner and by kvbudget (every field equal).
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
import vllm_differential
import vllm_oracle as vo
from test_vllm_state_models import _drop_defaults, _ours, _theirs
from vllm_oracle._fetch import vllm_root
from vllm_oracle._hf import _env
from vllm_oracle._interfaces import supports

from kvbudget import vllm

N = int(os.environ.get("KVBUDGET_VLLM_PURE_MAMBA_CASES", "120"))
_CLASSES = {"MambaForCausalLM": T.MambaConfig, "FalconMambaForCausalLM": T.FalconMambaConfig,
            "Mamba2ForCausalLM": T.Mamba2Config}  # fmt: skip


def _case(rng: random.Random, arch: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    hidden = rng.choice([256, 768, 1001, 1024, 2048, 4096])  # 1001: no TP above 1 divides it
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(0, 64), "hidden_size": hidden,
                          "state_size": rng.choice([8, 16, 64, 128]), "conv_kernel": rng.choice([2, 4, 4]),
                          "expand": rng.choice([1, 2, 2])}  # fmt: skip
    if arch == "Mamba2ForCausalLM":
        kw["head_dim"] = rng.choice([32, 64, 64, 128])
        kw["num_heads"] = kw["expand"] * hidden // kw["head_dim"] * rng.choice([1, 1, 1, 2])  # x2: the class refuses
        kw["n_groups"] = rng.choice([1, 2, 3, 8])
    try:
        d = _CLASSES[arch](**kw).to_dict()
    except Exception:  # noqa: BLE001 - transformers' class refuses the dims: vLLM never loads it
        return None
    if rng.random() < 0.15:  # a stray key the file may carry
        d["intermediate_size"] = rng.choice([kw["expand"] * hidden, 3 * hidden])
    if rng.random() < 0.5:
        _drop_defaults(d, _CLASSES[arch])
    engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3])}
    return {**d, "architectures": [arch]}, engine


def _vllm(saved: dict[str, Any], engine: dict[str, Any], dtype: str) -> Any:
    """vLLM's layers, after ``verify_with_parallel_config``'s pipeline check."""
    arch = saved["architectures"][0]
    if engine["pp"] > 1 and not supports(vllm_root(), _env(vllm_root()).registry, arch, "SupportsPP"):
        return "refused: NotImplementedError: Pipeline parallelism is not supported for this model"
    return _theirs(saved, engine, dtype)


def test_pure_state_models_are_read_as_vllm_reads_them() -> None:
    rng = random.Random("vllm-pure-mamba")
    counts = {a: {"compared": 0, "refused": 0, "unchecked": 0, "state layers": 0} for a in _CLASSES}
    mismatches: list[str] = []
    for arch in _CLASSES:
        for i in range(N):
            case = _case(rng, arch)
            if case is None:
                continue
            saved, engine = case
            dtype = rng.choice(["bfloat16", "float16"])
            ours, theirs = _ours(saved, engine, dtype), _vllm(saved, engine, dtype)
            counts[arch]["compared"] += 1
            if isinstance(ours, str) and "kvbudget has not checked" in ours and not isinstance(theirs, str):
                # Mamba-2 with intermediate_size != expand * hidden_size: the oracle takes the class's
                # shape for a MambaMixer2, which then differs from the layer's; kvbudget refuses
                counts[arch]["unchecked"] += 1
                assert arch == "Mamba2ForCausalLM" and "intermediate_size" in saved, ours
                continue
            if isinstance(ours, str) or isinstance(theirs, str):
                counts[arch]["refused"] += 1
                if isinstance(ours, str) != isinstance(theirs, str):
                    mismatches.append(f"{arch} case {i} {engine}: kvbudget {str(ours)[:200]} vs vLLM {str(theirs)[:200]}")
                continue
            counts[arch]["state layers"] += len(theirs)
            if ours != theirs:
                diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)}")
                mismatches.append(f"{arch} case {i} {engine}: {diff}")
    print(f"\nvLLM pure state models: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, "\n".join(mismatches[:10])
    for arch, c in counts.items():
        assert c["compared"] - c["refused"] - c["unchecked"] >= N // 5 and c["refused"] > 0, (arch, c)


@pytest.fixture(scope="module")
def oracle() -> vo.VllmOracle:
    return vo.load()


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("arch", sorted(_CLASSES))
def test_pure_state_models_plan_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, arch: str) -> None:
    """Each family's class defaults, read on 2 ranks and planned at 20 GiB and 8,192 tokens by
    vLLM's planner and by kvbudget: one MambaSpec group, every compared field equal."""
    engine: dict[str, Any] = {"max_model_len": 8192, "tp": 2, "enable_prefix_caching": prefix}
    specs = vllm.layers_from_hf_config({**_CLASSES[arch]().to_dict(), "architectures": [arch]},
                                       vllm.EngineConfig(**engine))  # fmt: skip
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "state_dtypes", "mamba_type",
                                          "prefill_checkpoint")} for x in specs]  # fmt: skip
    assert layers and all(x["kind"] == "mamba" for x in layers)
    theirs = oracle.plan(layers, 20 << 30, engine)
    ours = vllm_differential.Ours.plan(layers, 20 << 30, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    assert theirs["num_blocks"] > 0
    plan = vllm.plan(specs, 20 << 30, vllm.EngineConfig(**engine))
    assert [g.spec for g in plan.groups] == ["MambaSpec"]
