"""From a model's config to its pools: what kvbudget resolves, planned as SGLang 0.5.23 plans it.

``tests/test_sglang_model.py`` holds :func:`kvbudget.sglang.resolve_sglang`'s
fields to SGLang's ``ModelConfig``; this test holds what follows from them to
SGLang's pool factory. SGLang's own resolution of each config
(``tests/sglang_oracle/model.py``) becomes the inputs of its
``create_memory_pool_configurator`` (``tests/sglang_oracle``): the layer counts,
heads, dims and window ``ModelConfig`` derived, and its ``is_hybrid_swa`` and
layer ids as they are, a hybrid model without a sliding layer or without layer
ids included. kvbudget's ``SGLangModel.model_geometry()`` goes through kvbudget's
factory. Per config, serving setup and entry point, the configurator class, cell
size, request cap and pool sizes, or the refusal and where it is raised, must
agree. Then the window catalogue kvbudget reads a hybrid model's window with
(:data:`kvbudget.sglang.window.WINDOW_METHODS`), against the model
classes of the wheel.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import parity_cases as P
import pytest
import sglang_oracle
import transformers as T

import kvbudget
from kvbudget.models.hf import ConfigError
from kvbudget.sglang.dsa import MLA_ARCHITECTURES
from kvbudget.sglang.model import UNMODELLED_ARCHITECTURES, SGLangModel, resolve_sglang
from kvbudget.sglang.window import WINDOW_METHODS
from sglang_model_cases import cases
from sglang_oracle._configs import REAL
from sglang_oracle._fetch import sglang_root
from sglang_oracle._plumbing import Builder
from sglang_oracle.model import ModelOracle, _Models, load

PER_FAMILY = int(os.environ.get("KVBUDGET_MODEL_POOL_CASES", "8"))
#: Default pools, SGLang's request-cap configurator's inputs (radix cache off, request and chunk
#: caps), and --disable-hybrid-swa-memory.
SERVINGS = {
    "default": kvbudget.ServingConfig(),
    "request-cap": kvbudget.ServingConfig(disable_radix_cache=True, max_running_requests=16, chunked_prefill_size=8192),
    "hybrid-off": kvbudget.ServingConfig(disable_hybrid_swa_memory=True),
}
ENTRIES = (("bytes", 24 << 30), ("tokens", 100_000))


@pytest.fixture(scope="module")
def model_oracle() -> ModelOracle:
    return load(sglang_root())


def _sglang_case(r: dict[str, Any], serving: kvbudget.ServingConfig) -> dict[str, Any]:
    """SGLang's resolution ``r`` as its pool factory's inputs (``sglang_oracle``'s case keys)."""
    full, swa = r["full_attention_layer_ids"], r["swa_attention_layer_ids"]
    counts = (len(full), len(swa)) if full is not None and swa is not None else (r["num_attention_layers"], 0)
    head = r["v_head_dim"] if r["mla"] else r["head_dim"]  # MLA prices the latent: head dims unread
    return {
        "num_full_layers": counts[0], "num_swa_layers": counts[1], "num_kv_heads": r["num_kv_heads"],
        "head_dim": head, "v_head_dim": r["v_head_dim"], "swa_num_kv_heads": r["swa_num_kv_heads"],
        "swa_head_dim": r["swa_head_dim"] or head, "swa_v_head_dim": r["swa_v_head_dim"] or r["v_head_dim"],
        "sliding_window_size": r["sliding_window_size"], "kv_lora_rank": r["kv_lora_rank"],
        "qk_rope_head_dim": r["qk_rope_head_dim"], "index_head_dim": r["index_head_dim"],
        "index_kpool": r["index_kpool"], "index_shared_layers": r["index_shared_layers"],
        "hybrid_swa": r["hybrid_swa"], "hybrid_layer_ids": full is not None,
        **{k: getattr(serving, k) for k in P.field_names("ServingConfig")},
    }  # fmt: skip


def _refusal(model: SGLangModel) -> str | None:
    """Why kvbudget will not build the model's geometry (SGLang's pool factory fails), or None."""
    try:
        model.model_geometry()
    except ConfigError as exc:
        return str(exc)
    return None


def test_resolved_models_plan_as_sglangs_pool_factory(model_oracle: ModelOracle) -> None:
    pools = sglang_oracle.load()
    spec = kvbudget.SpeculativeConfig()
    mismatches: list[str] = []
    seen: Counter[str] = Counter()
    for name, cfg in cases(PER_FAMILY):
        for label, serving in SERVINGS.items():
            disable = serving.disable_hybrid_swa_memory
            theirs = model_oracle.resolve(cfg, disable)
            try:
                ours = resolve_sglang(cfg, disable_hybrid_swa_memory=disable)
            except ConfigError:
                continue  # kvbudget refuses the config: test_sglang_model.py holds that to SGLang
            if isinstance(theirs, tuple) or theirs["state_pool"]:
                continue  # SGLang refused it (and so did kvbudget there), or a state pool beside the KV pool

            def scenario() -> kvbudget.Scenario:
                return kvbudget.Scenario(ours.model_geometry(), serving, spec)  # noqa: B023

            refusal = _refusal(ours)

            for entry, amount in ENTRIES:
                o = pools.run(_sglang_case(theirs, serving), entry=entry, amount=amount)
                k = P.kvbudget_answer({}, entry, amount, scenario)
                seen[f"{o.class_name}/{o.error[1] if o.error else 'ok'}"] += 1
                diffs = P.differences(o, k)
                if o.error and o.stage == "init" and refusal:  # kvbudget says what SGLang's factory says
                    seen["refused as SGLang"] += 1
                    if o.error[2] not in refusal:
                        diffs.append(f"SGLang's {o.error[2]!r} not in kvbudget's {refusal!r}")
                if diffs:
                    mismatches.append(f"{name} {cfg['architectures']} {label} {entry}: " + "; ".join(diffs))
    assert not mismatches, f"{len(mismatches)} differ:\n" + "\n".join(mismatches[:12])
    # Not vacuous: every configurator planned, and both ways SGLang's factory fails on a hybrid model.
    for reached in ("DefaultPoolConfigurator/ok", "HybridSWAPoolConfigurator/ok", "SWARequestCapPoolConfigurator/ok",
                    "HybridSWAPoolConfigurator/AssertionError", "SWARequestCapPoolConfigurator/AssertionError",
                    "HybridSWAPoolConfigurator/TypeError"):  # fmt: skip
        assert seen[reached] > 0, (reached, seen)


def test_a_hybrid_model_without_a_sliding_layer_is_refused_as_sglang_refuses_it() -> None:
    """Laguna at its class defaults: a sliding window, every layer full attention. SGLang plans it
    hybrid, and its configurator asserts an SWA layer; with --disable-hybrid-swa-memory, one pool."""
    cfg = {**T.LagunaConfig().to_dict(), "architectures": ["LagunaForCausalLM"]}
    m = resolve_sglang(cfg)
    assert m.pools.hybrid_swa and m.pools.swa_attention_layer_ids == ()
    with pytest.raises(ConfigError, match="at least one SWA layer.*--disable-hybrid-swa-memory"):
        m.model_geometry()
    g = resolve_sglang(cfg, disable_hybrid_swa_memory=True).model_geometry()
    assert (g.num_full_layers, g.num_swa_layers) == (40, 0)
    with pytest.raises(ConfigError, match="at least one SWA layer"):
        kvbudget.ModelGeometry.from_hf_config(cfg)


def test_window_methods_are_the_wheels() -> None:
    """kvbudget's catalogue names exactly the SGLang classes defining the window method (bases
    followed); a class the oracle cannot follow (a base in an unpinned module) is one whose
    hybrid pools kvbudget refuses anyway (MLA, or pools it does not model)."""
    models = _Models(Builder(sglang_root(), real=REAL))
    defines, unfollowed = set(), set()
    for arch, module in models.entry.items():
        try:
            if models._find(module, arch) is not None:
                defines.add(arch)
        except (KeyError, LookupError):
            unfollowed.add(arch)
    assert defines == set(WINDOW_METHODS)
    assert unfollowed <= MLA_ARCHITECTURES | UNMODELLED_ARCHITECTURES, unfollowed
