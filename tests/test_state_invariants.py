"""The state budget's invariants in Python (the Rust side: rust/core/tests/state.rs).

Parity with SGLang is tests/test_sglang_state.py; these are the properties any
answer must have: the state pool, the speculative reserve and the KV rest add up
to the budget; the KV budget after the state never exceeds the budget; a given
``max_mamba_cache_size`` is kept per attention-DP rank; more memory never gives
fewer state slots; the request cap never promises more requests than the slots
hold; a ``StateConfig`` round-trips through JSON and pickle.
"""

from __future__ import annotations

import math
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvbudget import ServingConfig, SpeculativeConfig, StateConfig
from kvbudget.errors import InvalidConfigError
from kvbudget.sglang.state import StateCacheTooSmallError, kv_budget_bytes, max_num_reqs, state_budget

GIB = 1 << 30
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))

states = st.builds(
    StateConfig,
    num_state_layers=st.integers(0, 80),
    conv_elems=st.integers(0, 40_000),
    ssm_heads=st.integers(1, 64),
    ssm_head_dim=st.integers(1, 256),
    ssm_state_dim=st.integers(0, 256),
    k_heads_per_tp=st.integers(1, 32),
    conv_dtype=st.sampled_from(("float32", "bfloat16", "float16")),
    ssm_dtype=st.sampled_from(("float32", "bfloat16", "float16")),
    mixer=st.sampled_from(("mamba2", "gdn", "kda")),
    extra_bytes_per_req=st.sampled_from((0, 0, 4096, 1 << 20)),
    max_mamba_cache_size=st.none() | st.integers(0, 4096),
    mamba_full_memory_ratio=st.floats(0.05, 5.0),
    mamba_radix_cache_strategy=st.sampled_from(("no_buffer", "extra_buffer", "extra_buffer_lazy")),
    mamba_skip_decode_lock=st.booleans(),
    enable_linear_replayssm_spec=st.booleans(),
    linear_replayssm_cache_len=st.integers(1, 64),
)
servings = st.builds(
    ServingConfig,
    max_running_requests=st.none() | st.integers(1, 1024),
    attn_dp_size=st.integers(1, 8),
    disable_radix_cache=st.booleans(),
    disable_overlap_schedule=st.booleans(),
    disaggregation_mode=st.sampled_from(("null", "prefill", "decode")),
)
specs = st.none() | st.integers(1, 16)


def _spec(d: int | None) -> SpeculativeConfig:
    if d is None:
        return SpeculativeConfig()
    return SpeculativeConfig(algorithm="eagle", num_steps=3, eagle_topk=1, num_draft_tokens=d)


@PROPERTY
@given(states, servings, specs, st.floats(0.001, 200.0))
def test_state_reserve_and_rest_add_up_to_the_budget(
    state: StateConfig, serving: ServingConfig, d: int | None, rest: float
) -> None:
    try:
        b = state_budget(state, serving, _spec(d), rest)
    except (StateCacheTooSmallError, InvalidConfigError):
        return
    assert b.max_mamba_cache_size > 0
    used = (b.state_bytes + b.intermediate_bytes) / GIB
    assert math.isclose(rest - used, b.rest_gib, rel_tol=1e-12, abs_tol=1e-9)
    assert kv_budget_bytes(b) <= rest * GIB
    if state.max_mamba_cache_size is not None:
        assert b.max_mamba_cache_size == state.max_mamba_cache_size // serving.attn_dp_size
    if b.mamba_ratio is not None:
        try:
            n = max_num_reqs(1 << 20, 4096, serving, state, b.max_mamba_cache_size)
        except (StateCacheTooSmallError, InvalidConfigError):
            return
        assert 0 < n and n * b.mamba_ratio <= b.max_mamba_cache_size


@PROPERTY
@given(states, servings, st.floats(0.01, 100.0), st.floats(0.0, 100.0))
def test_more_memory_never_fewer_slots(state: StateConfig, serving: ServingConfig, rest: float, more: float) -> None:
    state = state.replace(max_mamba_cache_size=None)
    serving = serving.replace(disable_radix_cache=False)
    try:
        a = state_budget(state, serving, SpeculativeConfig(), rest)
    except (StateCacheTooSmallError, InvalidConfigError):
        return
    assert state_budget(state, serving, SpeculativeConfig(), rest + more).max_mamba_cache_size >= a.max_mamba_cache_size


@PROPERTY
@given(states)
def test_a_state_config_round_trips(state: StateConfig) -> None:
    assert pickle.loads(pickle.dumps(state)) == state
    assert StateConfig._from_json(state.to_json()) == state
    assert state.stage_state_layers == state.num_state_layers  # the default: every state layer
