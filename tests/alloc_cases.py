"""Plans shared by the allocation tests (tests/ is on sys.path, see conftest.py)."""

from __future__ import annotations

from typing import Any

from kvbudget import ServingConfig, SpeculativeConfig, create_pool_configurator
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
