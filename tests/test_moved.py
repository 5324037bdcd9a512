"""The old import paths of the modules that moved to kvbudget.sglang and kvbudget.vllm work
for one release: each name read from them warns and is the new module's object."""

from __future__ import annotations

import importlib

import pytest

#: old module -> (a name it had, the module that holds it now)
MOVED = {
    "kvbudget.configurators": ("create_pool_configurator", "kvbudget.sglang.configurators"),
    "kvbudget.models.sglang_model": ("resolve_sglang", "kvbudget.sglang.model"),
    "kvbudget.models.sglang_hybrid": ("sglang_hybrid_swa", "kvbudget.sglang.hybrid"),
    "kvbudget.models.sglang_dsa": ("dsa_fields", "kvbudget.sglang.dsa"),
    "kvbudget.models.sglang_window": ("sglang_window", "kvbudget.sglang.window"),
    "kvbudget.models.draft_layers": ("sglang_draft_layers", "kvbudget.sglang.draft_layers"),
    "kvbudget.integrations.sglang": ("install", "kvbudget.sglang"),
    "kvbudget.integrations.sglang_launch": ("from_server_args", "kvbudget.sglang.launch"),
    "kvbudget.integrations.sglang_resolve": ("resolve_launch", "kvbudget.sglang.resolve"),
    "kvbudget.vllm_models": ("layers_from_hf_config", "kvbudget.vllm.models"),
    "kvbudget.vllm_alloc": ("allocate_vllm", "kvbudget.vllm.alloc"),
    "kvbudget.budget": ("sglang_available_bytes", "kvbudget.sglang.budget"),
    "kvbudget.models": ("resolve_sglang", "kvbudget.sglang.model"),
    "kvbudget.models.hf": ("draft_kwargs_from_hf_config", "kvbudget.models.hf_draft"),
}


@pytest.mark.parametrize("old", MOVED)
def test_an_old_path_warns_and_gives_the_new_object(old: str) -> None:
    name, new = MOVED[old]
    if old == "kvbudget.vllm_alloc":
        pytest.importorskip("torch")
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new}.{name}"):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)


def test_a_name_an_old_path_never_had_is_an_attribute_error() -> None:
    import kvbudget.budget

    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        kvbudget.budget.nothing  # noqa: B018
    assert kvbudget.budget.gpu_available_bytes(100, 0.5) == 50  # the neutral formulas stay
