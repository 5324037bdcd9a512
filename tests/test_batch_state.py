"""``kvbudget.plan_many(..., state=StateConfig)``: hybrid-state rows, INV-7.

Every row with a state equals the scalar API for the same inputs: the row's
``StateConfig`` (the base with the row's state cells), its ``ModelGeometry`` /
``ServingConfig`` / ``SpeculativeConfig``, then
:func:`kvbudget.sglang.state.calculate_pool_sizes_with_state` (SGLang's state budget
on the row's bytes, the KV pool sizes on the rest) -- errors as the status of the
exception's code, whichever step raised it, and the state slots in
``max_mamba_cache_size`` (-1 for a failed row). That scalar function is held to
SGLang's own code by tests/test_sglang_state.py; this file holds the batch to it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvbudget import (KVBudgetError, ModelGeometry, ServingConfig, SpeculativeConfig, StateConfig,  # noqa: I001
                      create_pool_configurator, plan_many)  # fmt: skip
from kvbudget.batch import STATE_BATCH_FIELDS, BatchResult, StateBatchResult
from kvbudget.sglang.state import calculate_pool_sizes_with_state

from batch_common import STATUS_OF_CODE

GIB = 1 << 30
QWEN3_NEXT = StateConfig(num_state_layers=36, conv_elems=6144, conv_kernel=4, ssm_heads=8, ssm_head_dim=128,
                         ssm_state_dim=128, mixer="gdn")  # fmt: skip
EXAMPLES = max(60, settings().max_examples // 40)

# Per column: values the rows draw (a few invalid ones included: each is checked as the
# scalar constructor checks it).
STATE_COLUMNS: dict[str, list[Any]] = {
    "num_state_layers": [1, 12, 36, 48, -1],
    "ssm_heads": [2, 8, 16, 0],
    "ssm_head_dim": [64, 128],
    "conv_elems": [0, 3072, 6144],
    "conv_dtype": ["bfloat16", "float32", "float16"],
    "ssm_dtype": ["float32", "bfloat16"],
    "mixer": ["gdn", "mamba2", "kda"],
    "max_mamba_cache_size": [None, 0, 64, 512, 100_000],
    "mamba_full_memory_ratio": [0.9, 0.5, 2.0, -1.0],
    "mamba_radix_cache_strategy": ["no_buffer", "extra_buffer", "extra_buffer_lazy"],
    "mamba_skip_decode_lock": [False, True],
    "extra_bytes_per_req": [0, 1 << 20],
    "enable_linear_replayssm_spec": [False, True],
}
SCENARIO_COLUMNS: dict[str, list[Any]] = {
    "num_full_layers": [4, 12],
    "num_kv_heads": [2, 8],
    "tp_size": [1, 2, 4],
    "max_running_requests": [None, 8, 256],
    "disable_radix_cache": [False, True],
    "disable_overlap_schedule": [False, True],
    "attn_dp_size": [1, 2],
    "algorithm": ["none", "eagle"],
    "num_draft_tokens": [None, 4],
    "enable_unified_memory": [False, True],
}


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[int], dict[str, Any], dict[str, list[Any]]]:
    n = draw(st.integers(1, 40))
    budgets = draw(st.lists(st.sampled_from([1 << 20, 2 * GIB, 20 * GIB, 28 * GIB, 80 * GIB]), min_size=n,
                            max_size=n))  # fmt: skip
    names = draw(st.lists(st.sampled_from(sorted(STATE_COLUMNS) + sorted(SCENARIO_COLUMNS)), max_size=6,
                          unique=True))  # fmt: skip
    cols = {c: draw(st.lists(st.sampled_from((STATE_COLUMNS | SCENARIO_COLUMNS)[c]), min_size=n, max_size=n))
            for c in names}  # fmt: skip
    scalars = {"head_dim": 256, "num_kv_heads": 2, "num_full_layers": 12}
    return budgets, scalars, cols


def _scalar_row(budget: int, scalars: dict[str, Any], row: dict[str, Any]) -> tuple[int, int, int]:
    """(max_total_num_tokens, status, slots) of the scalar API for one row."""
    values = {**scalars, **row}
    try:
        state = QWEN3_NEXT.replace(**{k: v for k, v in values.items() if k in STATE_BATCH_FIELDS})
        n_full = values.pop("num_full_layers")
        spec_keys = ("algorithm", "num_draft_tokens")
        spec = SpeculativeConfig(**{k: values[k] for k in spec_keys if k in values})
        serving = ServingConfig(**{k: v for k, v in values.items() if k in SCENARIO_COLUMNS and k not in spec_keys
                                   and k not in ("num_kv_heads",)})  # fmt: skip
        model = ModelGeometry(full_attention_layer_ids=list(range(n_full)), swa_attention_layer_ids=[],
                              num_kv_heads=values["num_kv_heads"], head_dim=values["head_dim"])  # fmt: skip
        cfg = create_pool_configurator(model, serving, spec)
        config, budget = calculate_pool_sizes_with_state(cfg, budget, state)
    except KVBudgetError as e:
        return 0, STATUS_OF_CODE[e.code], -1
    return config.max_total_num_tokens, 0, budget.max_mamba_cache_size


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(batches())
def test_inv7_state_rows_equal_the_scalar_api(case: tuple[list[int], dict[str, Any], dict[str, list[Any]]]) -> None:
    budgets, scalars, cols = case
    arrays = {k: np.array([-1 if v is None else v for v in vals]) if k in ("max_running_requests",
              "max_mamba_cache_size", "num_draft_tokens") else vals for k, vals in cols.items()}  # fmt: skip
    r = plan_many(np.array(budgets), state=QWEN3_NEXT, **{**scalars, **arrays})
    for i, a in enumerate(budgets):
        want = _scalar_row(a, scalars, {k: v[i] for k, v in cols.items()})
        got = (int(r.max_total_num_tokens[i]), int(r.status[i]), int(r.max_mamba_cache_size[i]))
        assert got == want, (i, a, {k: v[i] for k, v in cols.items()})


def test_unified_rows_with_a_draft_price_the_fused_entry() -> None:
    """Under unified memory an EAGLE draft's rows fuse into the buffer's entries: each row is the
    scalar API's (SGLang's Default configurator on the fused entry), not the unfused kernel's."""
    budgets = [2 * GIB, 20 * GIB, 28 * GIB, 80 * GIB]
    cols = {"enable_unified_memory": [True] * 4, "algorithm": ["eagle", "eagle", "none", "eagle"],
            "tp_size": [1, 4, 4, 2]}  # fmt: skip
    scalars = {"head_dim": 256, "num_kv_heads": 2, "num_full_layers": 12, "num_draft_tokens": 4,
               "max_running_requests": 64}  # fmt: skip
    r = plan_many(np.array(budgets), state=QWEN3_NEXT, **scalars, **cols)
    rows = [_scalar_row(a, scalars, {k: v[i] for k, v in cols.items()}) for i, a in enumerate(budgets)]
    assert [(int(r.max_total_num_tokens[i]), int(r.status[i]), int(r.max_mamba_cache_size[i]))
            for i in range(4)] == rows  # fmt: skip
    assert sum(status == 0 for _, status, _ in rows) >= 3, rows


def test_state_rows_need_state_and_take_its_fields() -> None:
    with pytest.raises(TypeError, match="goes with state="):
        plan_many(1 << 30, num_kv_heads=2, head_dim=128, ssm_heads=8)
    r = plan_many(np.array([20 * GIB, 28 * GIB]), num_full_layers=12, num_kv_heads=2, head_dim=256, tp_size=4,
                  state=QWEN3_NEXT)  # fmt: skip
    assert isinstance(r, StateBatchResult) and r.max_mamba_cache_size.tolist()[1] == 736
    assert r.max_total_num_tokens.tolist()[1] == 1_288_113  # the README's Qwen3-Next at TP 4, 28 GiB
    bad = plan_many(28 * GIB, num_full_layers=12, num_kv_heads=2, head_dim=256, state=QWEN3_NEXT, ssm_heads=0)
    assert bad.status.tolist() == [STATUS_OF_CODE["invalid_config"]] and bad.max_mamba_cache_size.tolist() == [-1]
    assert type(plan_many(28 * GIB, num_kv_heads=2, head_dim=256)) is BatchResult  # unchanged without state
