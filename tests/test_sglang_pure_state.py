"""Pure state models in SGLang mode (Mamba-1, Falcon-Mamba, Mamba-2: no attention layer),
held to SGLang 0.5.23's own code from the wheel.

* :func:`kvbudget.sglang.pure_state.context_length` against ``get_context_length``
  (``utils/hf_transformers/common.py``, lifted) on seeded configs: every context key, in any
  combination, with and without ``rope_scaling`` (a factor, ``original_max_position_embeddings``,
  ``rope_type="llama3"``), and the transformers classes' own defaults.
* :func:`kvbudget.sglang.state.plan_state_only` on seeded Mamba-1 / Falcon-Mamba / Mamba-2
  deployments (layers, width, TP, page size, running requests, radix cache, the state-memory
  ratio or a fixed ``max_mamba_cache_size``, dtypes, budget): its KV token label against SGLang's
  own ``DefaultPoolConfigurator`` built by its factory over no layer (``tests/sglang_oracle``:
  cell size 0, ``calculate_pool_sizes`` on the KV budget the state pool leaves); its state slots
  and pool are :func:`~kvbudget.sglang.state.state_budget`'s and
  :func:`~kvbudget.sglang.state.state_pool`'s (held to ``_handle_max_mamba_cache`` and
  ``MambaPool`` by ``tests/test_sglang_state.py`` and ``tests/test_state_plan.py``), and an exact
  plan checks, fits its budget and allocates exactly its bytes. The model resolution of these
  architectures is in ``tests/test_sglang_model.py``'s families (``mamba``, ``falcon_mamba``,
  ``mamba2``).
"""

from __future__ import annotations

import os
import random
import types
from pathlib import Path
from typing import Any

import pytest
import transformers as T
from oracle_kit.lift import Source
from sglang_oracle import load as load_pools
from sglang_oracle._fetch import sglang_root

import kvbudget
from kvbudget import ServingConfig, SpeculativeConfig
from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError
from kvbudget.sglang.model import PURE_SSM_ARCHITECTURES, resolve_sglang
from kvbudget.sglang.pure_state import CONTEXT_LENGTH_KEYS, context_length, zero_kv_tokens
from kvbudget.sglang.state import StateCacheTooSmallError, kv_budget_bytes, plan_state_only, state_budget, state_pool
from kvbudget.sglang.state_model import state_from_hf_config

N = int(os.environ.get("KVBUDGET_PURE_STATE_CASES", "300"))
_CLASSES = {"MambaForCausalLM": T.MambaConfig, "FalconMambaForCausalLM": T.FalconMambaConfig,
            "Mamba2ForCausalLM": T.Mamba2Config}  # fmt: skip


@pytest.fixture(scope="module")
def get_context_length() -> Any:
    ns: dict[str, Any] = {"__name__": "lifted_common"}
    Source(sglang_root(), "sglang/srt/utils/hf_transformers/common.py").lift(ns, "CONTEXT_LENGTH_KEYS",
                                                                              "get_context_length")  # fmt: skip
    assert tuple(ns["CONTEXT_LENGTH_KEYS"]) == CONTEXT_LENGTH_KEYS
    return ns["get_context_length"]


def _context_config(rng: random.Random) -> dict[str, Any]:
    cfg: dict[str, Any] = {k: rng.choice([512, 2048, 4096, 32768, 131072])
                           for k in CONTEXT_LENGTH_KEYS if rng.random() < 0.3}  # fmt: skip
    if rng.random() < 0.4:
        scaling: dict[str, Any] = {"factor": rng.choice([1, 2, 4.0, 2.5, 8])}
        if rng.random() < 0.3:
            scaling["original_max_position_embeddings"] = 8192
        if rng.random() < 0.3:
            scaling["rope_type"] = rng.choice(["llama3", "yarn", "linear"])
        if rng.random() < 0.1:
            del scaling["factor"]
        cfg["rope_scaling"] = scaling
    return cfg


def test_context_length_is_sglangs(get_context_length: Any) -> None:
    rng = random.Random(0)
    configs = [T.MambaConfig().to_dict(), T.FalconMambaConfig().to_dict(), T.Mamba2Config().to_dict(),
               T.LlamaConfig().to_dict(), *(_context_config(rng) for _ in range(N))]  # fmt: skip
    mismatches = [(c, context_length(c), get_context_length(types.SimpleNamespace(**c))) for c in configs]
    mismatches = [m for m in mismatches if m[1] != m[2]]
    assert not mismatches, mismatches[:5]
    assert context_length({}) == 2048
    assert context_length({"max_position_embeddings": 4096, "rope_scaling": {"factor": 2.5}}) == 10240


def _deployment(rng: random.Random) -> tuple[dict[str, Any], ServingConfig, int, dict[str, Any]]:
    arch = rng.choice(sorted(PURE_SSM_ARCHITECTURES))
    hidden = rng.choice([768, 1024, 2048, 4096])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 64), "hidden_size": hidden}
    if arch == "Mamba2ForCausalLM":
        kw["head_dim"] = 64
        kw["num_heads"] = hidden * 2 // 64
        kw["n_groups"] = rng.choice([1, 2, 8])
    cfg = {**_CLASSES[arch](**kw).to_dict(), "architectures": [arch]}
    if arch == "Mamba2ForCausalLM":  # SGLang's Mamba2Config reads it; transformers' class has none
        cfg["intermediate_size"] = hidden * 2
    if rng.random() < 0.5:
        cfg["max_position_embeddings"] = rng.choice([2048, 8192, 100_000])
    tp = rng.choice([1, 2, 4, 8])
    state_kw: dict[str, Any] = {"mamba_full_memory_ratio": rng.choice([0.5, 0.9, 2.0])}
    if rng.random() < 0.2:
        state_kw["max_mamba_cache_size"] = rng.randint(1, 2000)
    serving = ServingConfig(page_size=rng.choice([1, 16, 64, 256]), tp_size=tp,
                            max_running_requests=rng.choice([None, 8, 256, 4096]),
                            disable_radix_cache=rng.random() < 0.3)  # fmt: skip
    available = rng.randint(1 << 20, 1 << 27) if rng.random() < 0.1 else rng.randint(1 << 27, 80 << 30)
    return cfg, serving, available, state_kw


def test_plan_state_only_is_sglangs_label_beside_the_state_pool() -> None:
    """The KV label is SGLang's configurator's over no layer; the state pool its budget's."""
    oracle = load_pools()
    rng = random.Random(1)
    counts = {"planned": 0, "state too small": 0, "no rest": 0}
    mismatches: list[str] = []
    for i in range(N):
        cfg, serving, available, state_kw = _deployment(rng)
        m = resolve_sglang(cfg)
        assert (m.state_pool, m.num_attention_layers) == (True, 0)
        state = state_from_hf_config(cfg, tp_size=serving.tp_size, **state_kw)
        assert state is not None
        spec = SpeculativeConfig()
        label = zero_kv_tokens(cfg)
        try:
            plan, budget = plan_state_only(state, serving, spec, available, label, "exact")
        except StateCacheTooSmallError:
            counts["state too small"] += 1
            with pytest.raises(StateCacheTooSmallError):
                state_pool(state, serving, spec, state_budget(state, serving, spec, available / (1 << 30))
                           .max_mamba_cache_size)  # fmt: skip
            continue
        except NotEnoughMemoryError as e:  # SGLang: "Loaded weights leave no GPU memory" at a rest <= 0
            counts["no rest"] += 1
            assert "leave no GPU memory" in str(e)
            assert state_budget(state, serving, spec, available / (1 << 30)).rest_gib <= 0
            continue
        counts["planned"] += 1
        assert budget == state_budget(state, serving, spec, available / (1 << 30)) and budget.rest_gib > 0
        assert plan.pools == [state_pool(state, serving, spec, budget.max_mamba_cache_size)]
        plan.check()
        assert plan.total_bytes == plan.pools[0].nbytes <= available
        theirs = oracle.run({"num_full_layers": 0, "num_swa_layers": 0, "num_kv_heads": 0, "head_dim": 0,
                             "v_head_dim": 0, "swa_num_kv_heads": 1, "swa_head_dim": 0, "swa_v_head_dim": 0,
                             "kv_cache_dtype": "bf16", "model_dtype": "bf16", "page_size": serving.page_size,
                             "swa_full_tokens_ratio": 0.8, "swa_eviction_interval": None, "context_len": label},
                            entry="bytes", amount=max(0, kv_budget_bytes(budget)))  # fmt: skip
        if theirs.cell_size != 0 or theirs.config is None or \
                theirs.config["max_total_num_tokens"] != plan.config.max_total_num_tokens:
            mismatches.append(f"case {i}: {plan.config} vs SGLang {theirs}")
        sglang_plan, _ = plan_state_only(state, serving, spec, available, label, "sglang")
        assert sglang_plan.pools == plan.pools and sglang_plan.config == plan.config
    assert not mismatches, mismatches[:5]
    assert counts["planned"] > N // 2 and counts["no rest"] > 0 and counts["state too small"] > 0, counts
    print(counts)


def test_a_pure_state_plan_allocates_exactly_its_bytes() -> None:
    pytest.importorskip("torch")
    cfg = {**T.MambaConfig(num_hidden_layers=4, hidden_size=256).to_dict(), "architectures": ["MambaForCausalLM"]}
    state = state_from_hf_config(cfg, tp_size=1)
    assert state is not None
    plan, budget = plan_state_only(state, ServingConfig(page_size=16, max_running_requests=4), SpeculativeConfig(),
                                   64 << 20, zero_kv_tokens(cfg))  # fmt: skip
    assert plan.config.max_total_num_tokens == 2048 and plan.pool("full") is None
    pools = kvbudget.allocate(plan, "cpu")
    assert pools.nbytes == plan.total_bytes
    assert pools.state is not None and tuple(pools.state.conv_state.shape)[:2] == (4, budget.max_mamba_cache_size + 1)
    pools.release()


def test_pure_state_refusals() -> None:
    cfg = {**T.Mamba2Config().to_dict(), "architectures": ["Mamba2ForCausalLM"], "intermediate_size": 8192}
    state = state_from_hf_config(cfg, tp_size=1)
    assert state is not None
    none = SpeculativeConfig()
    with pytest.raises(InvalidConfigError, match="layer_num must be positive"):
        plan_state_only(state, ServingConfig(enable_unified_memory=True), none, 40 << 30, 2048)
    eagle = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=1, eagle_topk=1, num_draft_tokens=2)
    with pytest.raises(InvalidConfigError, match="speculative draft"):
        plan_state_only(state, ServingConfig(max_running_requests=8), eagle, 40 << 30, 2048)
    with pytest.raises(StateCacheTooSmallError):
        plan_state_only(state, ServingConfig(), none, 1 << 20, 2048)
    with pytest.raises(InvalidConfigError, match="fit"):
        plan_state_only(state, ServingConfig(), none, 40 << 30, 2048, "given")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        zero_kv_tokens(cfg, context_len=-1)
    assert zero_kv_tokens(cfg, max_total_tokens=5000) == 5000 and zero_kv_tokens(cfg, context_len=100) == 100


def test_the_cli_plans_a_pure_state_model(tmp_path: Any) -> None:
    """``kvbudget plan CONFIG --engine sglang`` on a Mamba-1 config is the library's plan."""
    import json

    from cli_helpers import run

    cfg = {**T.MambaConfig(num_hidden_layers=64, hidden_size=4096).to_dict(), "architectures": ["MambaForCausalLM"],
           "max_position_embeddings": 8000}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run("plan", "--config", str(path), "--engine", "sglang", "--available", "20GiB", "--page-size", "16",
            "--max-running-requests", "256", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    state = state_from_hf_config(cfg, tp_size=1)
    assert state is not None
    plan, budget = plan_state_only(state, ServingConfig(page_size=16, max_running_requests=256), SpeculativeConfig(),
                                   20 << 30, 8000)  # fmt: skip
    assert kvbudget.PoolPlan.from_json(json.dumps(doc["plan"])) == plan
    assert doc["zero_kv_tokens"] == 8000 and plan.config.max_total_num_tokens == 8000 // 16 * 16
    assert doc["state_budget"]["max_mamba_cache_size"] == budget.max_mamba_cache_size
    r = run("plan", "--config", str(path), "--engine", "sglang", "--available", "20GiB")
    assert r.returncode == 0 and "no layer, so no byte" in r.stdout, r.stderr
    # the README's example: the same state pool
    assert "276 slots + 1 padding x 36,700,160 bytes = 10,165,944,320 bytes" in r.stdout
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "276 slots, 10,165,944,320 bytes, 47.34% of the budget" in readme and "47.34%" in r.stdout
    r = run("plan", "--config", str(path), "--engine", "sglang", "--available", "20GiB", "--draft", "eagle:1")
    assert r.returncode != 0 and "without attention layers" in r.stderr
    r = run("compare", "--config", str(path), "--available", "20GiB")  # a clean refusal, not an internal error
    assert r.returncode == 1 and "no attention layer" in r.stderr and "internal" not in r.stderr, r.stderr
    r = run("plan", "--config", str(path), "--engine", "vllm", "--available", "20GiB")  # vLLM's reader takes it
    assert r.returncode == 0 and "0 attention layers and 64 state layers as vLLM reads them" in r.stdout, r.stderr
