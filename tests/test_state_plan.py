"""kvbudget's exact plan of a hybrid-state model: the state pool beside the KV pools, allocated.

The state pool is held to SGLang's own ``MambaPool`` in tests/test_sglang_state.py (10,000
seeded cases, tensor by tensor, on torch's meta device); the Rust side of these invariants is
rust/core/tests/state.rs. Here: the README's Qwen3-Next numbers; INV-2 with a state pool (the
plan checks, fits, and allocating it takes exactly ``total_bytes``, state tensors included);
one more KV page never fits beside the state; the plan round-trips through JSON and a
tampered state tensor is refused; and the CLI's plan is the library's.
"""

from __future__ import annotations

import json

import pytest
import test_state_invariants as state_invariants
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvbudget
from kvbudget import PoolPlan, ServingConfig, SpeculativeConfig, StateConfig
from kvbudget.errors import InvalidConfigError, NotEnoughMemoryError
from kvbudget.models.hybrid_state import get_hybrid_state_model
from kvbudget.sglang.state import kv_budget_bytes, plan_with_state, state_budget, state_pool, unified_entries
from kvbudget.sglang.state_model import state_from_hf_config

GIB = 1 << 30
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _qwen3_next(tp: int = 4, spec: SpeculativeConfig | None = None,
                **serving: object) -> tuple[kvbudget.PoolConfiguratorBase, StateConfig]:  # fmt: skip
    """Qwen3-Next-80B-A3B's 12 attention layers (2 KV heads of 256 at TP 4) and its state."""
    cfg = get_hybrid_state_model("qwen3-next-80b-a3b-instruct").config
    state = state_from_hf_config(cfg, tp_size=tp)
    assert state is not None
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[i for i in range(48) if i % 4 == 3],
                                   swa_attention_layer_ids=[], num_kv_heads=2, head_dim=256)
    return kvbudget.create_pool_configurator(model, ServingConfig(tp_size=tp, **serving),
                                             spec or SpeculativeConfig()), state  # fmt: skip


def test_qwen3_next_tp4_28gib_plan_holds_the_state_pool() -> None:
    """The README's example: 736 slots (SGLang's own count), the state pool SGLang's 14,236,434,432
    bytes, the KV pools on the rest, 4,096 bytes left; SGLang's counts allocate 8,192 over."""
    cfg, state = _qwen3_next()
    a = 28 * GIB
    plan, budget = plan_with_state(cfg, a, state)
    pool = plan.pool("state")
    assert pool is not None and (pool.tokens, pool.rows) == (736, 737) == (budget.max_mamba_cache_size, 737)
    assert [(t.kind, t.shape, t.dtype) for t in pool.tensors] == [
        ("conv_state", (36, 737, 2048, 3), "bfloat16"), ("temporal_state", (36, 737, 8, 128, 128), "float32")]
    assert pool.nbytes == budget.state_bytes == 14_236_434_432
    assert (plan.config.max_total_num_tokens, plan.leftover_bytes) == (1_288_112, 4096)
    assert cfg.plan(a, "sglang", state=state).over_budget_bytes == 8192
    assert cfg.plan(a, state=state) == plan


def test_speculative_state_buffers_follow_sglangs_cuda_layout() -> None:
    """With EAGLE (4 draft tokens, top-k 1, 64 running requests): the verify snapshots and the
    deduplicated conv windows for min(64, 313 // 3) + 1 = 65 requests. SGLang reserves the dense
    windows' bytes (5,022,351,360 in all); the pool takes 57,507,840 fewer, which the exact plan
    gives the KV pools."""
    spec = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=1, num_draft_tokens=4)
    cfg, state = _qwen3_next(spec=spec, max_running_requests=64)
    plan, budget = plan_with_state(cfg, 28 * GIB, state)
    pool = plan.pool("state")
    assert pool is not None and budget.max_mamba_cache_size == 313
    shapes = {t.kind: t.shape for t in pool.tensors}
    assert shapes["intermediate_ssm"] == (36, 65, 4, 8, 128, 128)
    assert shapes["intermediate_conv_window"] == (36, 65, 2048, 4 + 3 - 1)
    spec_bytes = sum(t.nbytes for t in pool.tensors if t.kind.startswith("intermediate"))
    assert budget.intermediate_bytes - spec_bytes == 57_507_840
    tree = cfg.__class__(cfg.model, cfg.serving, spec.replace(eagle_topk=4, num_draft_tokens=8))
    dense = plan_with_state(tree, 28 * GIB, state)[0].pool("state")
    assert dense is not None and {t.kind: t.shape for t in dense.tensors}["intermediate_conv_window"][2:] == (8, 2048, 3)


def test_allocation_is_the_plan_state_included() -> None:
    """INV-2 with a state pool, on CPU memory: slab and per-tensor allocation take exactly the
    plan's bytes, and ``pools.state`` holds the state tensors with the planned shapes."""
    pytest.importorskip("torch")
    state = StateConfig(num_state_layers=6, conv_elems=96 * 3, conv_kernel=4, ssm_heads=2, ssm_head_dim=16,
                        ssm_state_dim=16, mixer="gdn", max_mamba_cache_size=9)  # fmt: skip
    spec = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=2, eagle_topk=1, num_draft_tokens=3)
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[1, 3], swa_attention_layer_ids=[], num_kv_heads=2,
                                   head_dim=32)  # fmt: skip
    cfg = kvbudget.create_pool_configurator(model, ServingConfig(page_size=16, max_running_requests=2), spec)
    plan = cfg.plan(8 << 20, state=state)
    assert plan.total_bytes <= 8 << 20
    for strategy, want in (("slab", plan.total_bytes), ("per_layer", plan.tensor_bytes)):
        pools = kvbudget.allocate(plan, "cpu", strategy=strategy)
        assert pools.nbytes == want
        rec = pools.state
        assert rec is not None and rec.conv_state is not None and rec.intermediate_conv_window is not None
        planned = {t.kind: (t.shape, t.dtype) for t in plan.pool("state").tensors}  # type: ignore[union-attr]
        got = {k: (tuple(getattr(rec, k).shape), str(getattr(rec, k).dtype).removeprefix("torch.")) for k in planned}
        assert got == planned
        assert planned["intermediate_ssm"][0][:2] == (6, 3)  # min(2 running, 9 // 3) + 1 requests
        pools.release()


def test_the_plan_round_trips_and_a_tampered_state_pool_is_refused() -> None:
    cfg, state = _qwen3_next()
    plan = cfg.plan(28 * GIB, state=state)
    assert PoolPlan.from_json(plan.to_json()) == plan
    doc = json.loads(plan.to_json())
    pool = next(p for p in doc["pools"] if p["name"] == "state")
    pool["tensors"][1]["shape"][1] += 1  # a temporal state with a slot the pool does not have
    with pytest.raises(InvalidConfigError, match="state tensor temporal_state"):
        PoolPlan.from_json(json.dumps(doc))
    pool["tensors"][1]["shape"][1] -= 1
    pool["tensors"][0]["kind"] = "k"
    with pytest.raises(InvalidConfigError, match="not a state tensor kind"):
        PoolPlan.from_json(json.dumps(doc))


def test_a_state_pool_leaving_nothing_for_kv_is_refused() -> None:
    cfg, state = _qwen3_next()
    with pytest.raises(NotEnoughMemoryError, match="leaving none for the KV pools"):
        cfg.plan(20 * GIB, state=state.replace(max_mamba_cache_size=1200))
    with pytest.raises(InvalidConfigError, match="conv_kernel"):
        spec = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=1, eagle_topk=1, num_draft_tokens=2)
        c, s = _qwen3_next(spec=spec, max_running_requests=8)
        c.plan(28 * GIB, state=s.replace(conv_kernel=None))


def test_unified_memory_keeps_the_kv_tokens_and_the_state_in_one_buffer() -> None:
    """``--enable-unified-memory`` (SGLang's ``init_unified_mamba_pools``), Qwen3-Next at TP 4 on 28 GiB:
    SGLang's buffer is its KV budget floored to 4,096 bytes plus 736 state slots of 19,316,736 bytes,
    30,045,454,336 bytes, one slot under the budget (its state charge counts a padding slot the buffer
    does not hold); the exact buffer takes the whole budget (1,289,685 tokens of 12,288 bytes, the label)."""
    cfg, state = _qwen3_next(enable_unified_memory=True)
    plan, budget = plan_with_state(cfg, 28 * GIB, state)
    sglang = cfg.plan(28 * GIB, "sglang", state=state)
    assert [p.name for p in plan.pools] == [p.name for p in sglang.pools] == ["unified"]
    assert budget.max_mamba_cache_size == 736 and unified_entries(cfg, state) == (12_288, 19_316_736)
    assert (sglang.total_bytes, sglang.leftover_bytes) == (30_045_454_336, 19_316_736)
    assert (plan.total_bytes, plan.config.max_total_num_tokens) == (28 * GIB, 1_289_685)
    assert sglang.config.max_total_num_tokens == 1_288_113 == cfg.calculate_pool_sizes(kv_budget_bytes(budget)).max_total_num_tokens
    assert plan.config.unified_memory_pool_bytes == plan.total_bytes
    plan.check()
    assert PoolPlan.from_json(plan.to_json()) == plan


def test_a_unified_plan_allocates_its_one_buffer() -> None:
    """INV-2 under unified memory: the buffer is one uint8 tensor of the plan's bytes, within the budget."""
    pytest.importorskip("torch")
    state = StateConfig(num_state_layers=6, conv_elems=96 * 3, conv_kernel=4, ssm_heads=2, ssm_head_dim=16,
                        ssm_state_dim=16, mixer="gdn", max_mamba_cache_size=9)  # fmt: skip
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[1, 3], swa_attention_layer_ids=[], num_kv_heads=2,
                                   head_dim=32)  # fmt: skip
    cfg = kvbudget.create_pool_configurator(model, ServingConfig(page_size=16, enable_unified_memory=True))
    plan = cfg.plan((8 << 20) + 1000, state=state)
    assert plan.total_bytes <= (8 << 20) + 1000 and plan.total_bytes % 4 == 0
    pools = kvbudget.allocate(plan, "cpu")
    assert pools.nbytes == plan.total_bytes
    pools.release()


def test_unified_memory_refusals() -> None:
    """SGLang builds its unified pool for hybrid-state and hybrid-SWA targets only (a Default target
    is its ValueError; a draft worker keeps its own pools), refuses an FP4 KV cache and a draft tree at
    launch. A linear EAGLE draft rides in the buffer's entries (test_sglang_unified_draft.py)."""
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[0, 1], swa_attention_layer_ids=[], num_kv_heads=2,
                                   head_dim=64)  # fmt: skip
    unified = ServingConfig(enable_unified_memory=True)
    with pytest.raises(InvalidConfigError, match="only supports hybrid Mamba and hybrid sliding-window"):
        kvbudget.create_pool_configurator(model, unified).plan(GIB)
    assert kvbudget.create_pool_configurator(model, unified.replace(is_draft_worker=True)).plan(GIB).pool("full")
    cfg, state = _qwen3_next(enable_unified_memory=True, kv_cache_dtype="fp4_mx_block16")
    with pytest.raises(InvalidConfigError, match="FP4 KV cache does not yet support --enable-unified-memory"):
        cfg.plan(28 * GIB, state=state)
    spec = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=1, eagle_topk=2, num_draft_tokens=2)
    cfg, state = _qwen3_next(spec=spec, max_running_requests=8, enable_unified_memory=True)
    with pytest.raises(InvalidConfigError, match="supports a linear draft chain only"):
        cfg.plan(28 * GIB, state=state)


def test_a_unified_plan_with_a_draft_allocates_its_buffer_and_verify_buffers() -> None:
    """INV-2 with an MTP draft under unified memory: the buffer (the draft's rows in its full-side entries)
    and the verify buffers beside it take exactly the plan's bytes, within the budget."""
    pytest.importorskip("torch")
    state = StateConfig(num_state_layers=6, conv_elems=96 * 3, conv_kernel=4, ssm_heads=2, ssm_head_dim=16,
                        ssm_state_dim=16, mixer="gdn", max_mamba_cache_size=9)  # fmt: skip
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[1, 3], swa_attention_layer_ids=[], num_kv_heads=2,
                                   head_dim=32)  # fmt: skip
    spec = SpeculativeConfig(algorithm="nextn", draft_num_layers=1, num_steps=1, eagle_topk=1, num_draft_tokens=3)
    serving = ServingConfig(page_size=16, enable_unified_memory=True, max_running_requests=4)
    cfg = kvbudget.create_pool_configurator(model, serving, spec)
    plan = cfg.plan((8 << 20) + 1000, state=state)
    assert [p.name for p in plan.pools] == ["unified", "state"]
    assert [t.kind for t in plan.pool("state").tensors] == ["intermediate_ssm", "intermediate_conv_window"]
    assert plan.total_bytes <= (8 << 20) + 1000
    plan.check()
    pools = kvbudget.allocate(plan, "cpu")
    assert pools.nbytes == plan.total_bytes
    pools.release()


# The state invariants' states, with a conv kernel (the deduplicated conv windows need one).
states = state_invariants.states.map(lambda s: s.replace(conv_kernel=4, conv_elems=s.conv_elems // 3 * 3))


@PROPERTY
@given(states, st.integers(1, 256) | st.none(), st.sampled_from((None, 1, 2, 4)), st.sampled_from((1, 2)),
       st.integers(64 << 20, 64 * GIB))  # fmt: skip
def test_exact_plan_with_state_fits_and_one_more_page_does_not(
    state: StateConfig, mrr: int | None, draft: int | None, topk: int, a: int
) -> None:
    spec = SpeculativeConfig() if draft is None else SpeculativeConfig(
        algorithm="eagle", draft_num_layers=1, num_steps=1, eagle_topk=topk, num_draft_tokens=draft)  # fmt: skip
    model = kvbudget.ModelGeometry(full_attention_layer_ids=[3, 7], swa_attention_layer_ids=[], num_kv_heads=4,
                                   head_dim=128)  # fmt: skip
    serving = ServingConfig(page_size=16, max_running_requests=mrr)
    cfg = kvbudget.create_pool_configurator(model, serving, spec)
    try:
        plan, budget = plan_with_state(cfg, a, state)
    except (InvalidConfigError, NotEnoughMemoryError):
        return
    plan.check()
    pool = plan.pool("state")
    assert pool is not None and plan.total_bytes <= a
    assert pool == state_pool(state, serving, spec, budget.max_mamba_cache_size)
    assert budget == state_budget(state, serving, spec, a / GIB)
    kv = plan.config.max_total_num_tokens
    assert cfg.bytes_for_tokens(kv + 16) > a - pool.nbytes
    if draft is not None and not state.enable_linear_replayssm_spec:
        snapshots = next(t for t in pool.tensors if t.kind == "intermediate_ssm")
        assert snapshots.shape[2] == draft


def test_the_cli_plan_is_the_librarys() -> None:
    from cli_helpers import run

    r = run("plan", "qwen3-next-80b-a3b-instruct", "--tp", "4", "--available", "28GiB", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cfg, state = _qwen3_next()
    ours, theirs = PoolPlan.from_json(json.dumps(doc["plan"])), cfg.plan(28 * GIB, state=state)
    # The CLI numbers SGLang's KV layers 0..11 (its hybrid KV pool's own ids); the same plan.
    assert (ours.pool("state"), ours.config, ours.total_bytes) == (theirs.pool("state"), theirs.config,
                                                                   theirs.total_bytes)  # fmt: skip
