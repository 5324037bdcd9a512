"""Plans shared by the allocation tests (tests/ is on sys.path, see conftest.py)."""

from __future__ import annotations

from typing import Any

from kvbudget import (
    ModelGeometry, ServingConfig, SpeculativeConfig, StateConfig, create_pool_configurator, vllm,
)
from kvbudget.models import get_preset


def gemma3_27b(page: int, window: int = 1024) -> Any:
    """REFERENCE example 1: the Gemma-3-27B preset's geometry with window ``window`` (the
    example's 1024 by default; a small one lets tiny CPU budgets pass the admission floor),
    a one-layer EAGLE3 draft."""
    model = get_preset("gemma-3-27b").model_geometry().replace(sliding_window_size=window)
    return create_pool_configurator(
        model,
        ServingConfig(kv_cache_dtype="bf16", page_size=page),
        SpeculativeConfig(algorithm="eagle3", draft_num_layers=1),
    )


def gemma3_six_layers(page: int) -> Any:
    """:func:`gemma3_27b`'s geometry cut to its first six layers (five sliding, one full), with
    its EAGLE3 draft: a plan small enough to interrupt at each of its steps."""
    model = get_preset("gemma-3-27b").model_geometry().replace(
        sliding_window_size=8, full_attention_layer_ids=[5], swa_attention_layer_ids=[0, 1, 2, 3, 4])
    return create_pool_configurator(
        model,
        ServingConfig(kv_cache_dtype="bf16", page_size=page),
        SpeculativeConfig(algorithm="eagle3", draft_num_layers=1),
    )


def small_state_plan() -> Any:
    """A hybrid model's plan with a state pool (two full-attention layers, six GDN state layers,
    an EAGLE draft), small enough to interrupt at each of its steps."""
    state = StateConfig(num_state_layers=6, conv_elems=96 * 3, conv_kernel=4, ssm_heads=2,
                        ssm_head_dim=16, ssm_state_dim=16, mixer="gdn",
                        max_mamba_cache_size=9)  # fmt: skip
    spec = SpeculativeConfig(algorithm="eagle", draft_num_layers=1, num_steps=2, eagle_topk=1,
                             num_draft_tokens=3)  # fmt: skip
    model = ModelGeometry(full_attention_layer_ids=[1, 3], swa_attention_layer_ids=[],
                          num_kv_heads=2, head_dim=32)  # fmt: skip
    cfg = create_pool_configurator(model, ServingConfig(page_size=16, max_running_requests=2), spec)
    return cfg.plan(8 << 20, state=state)


def small_vllm_plan() -> vllm.VllmPlan:
    """A vLLM plan of four attention layers (full and sliding) and a draft layer."""
    layers = [vllm.LayerSpec(f"l{i}", "full" if i % 2 else "sliding", num_kv_heads=2, head_size=8,
                             sliding_window=32) for i in range(4)]  # fmt: skip
    layers.append(vllm.LayerSpec("drafter", "full", num_kv_heads=1, head_size=16, is_draft=True))
    return vllm.plan(layers, 1 << 20, vllm.EngineConfig(max_model_len=256))
