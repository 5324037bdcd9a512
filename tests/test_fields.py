"""The field table and what derives from it: constructors, getters, reprs,
``replace``, pickling, the stubs, :class:`kvbudget.Scenario`, and
``DraftGeometry.from_model``.

The table is the core's one declaration (``rust/core/src/fields.rs``); these
tests check that every Python surface agrees with it, so a new field cannot be
half-wired.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kvbudget
from kvbudget import (
    DraftGeometry,
    InvalidConfigError,
    MemoryPoolConfig,
    ModelGeometry,
    Scenario,
    ServingConfig,
    SpeculativeConfig,
)
from kvbudget.fields import FIELDS, SCENARIO_FIELDS

ROOT = Path(__file__).resolve().parent.parent

# A valid instance of each value type, and the declared type holding its fields.
MODEL = ModelGeometry([1, 3], [0, 2], 8, 128, sliding_window_size=127)
VALUES: dict[str, tuple[Any, str]] = {
    "ModelGeometry": (MODEL, "AttentionShape"),
    "ServingConfig": (ServingConfig(page_size=64, tp_size=6, max_running_requests=16), "ServingConfig"),
    "SpeculativeConfig": (SpeculativeConfig("eagle3", 4, num_steps=3), "SpeculativeConfig"),
    "DraftGeometry": (DraftGeometry(2, 8, 128, kv_cache_dtype="fp8_e4m3"), "DraftGeometry"),
    "MemoryPoolConfig": (MemoryPoolConfig(1024, 1024, 512), "MemoryPoolConfig"),
}
# A different valid value for a field of each kind (the field's own value must differ).
OTHER = {"int": 3, "opt_int": 5, "float": 0.5, "bool": True}


def _other(f: Any, current: Any) -> Any:
    if f.choices:
        return next(c for c in f.choices if c != current)
    if f.py == "draft":
        return DraftGeometry(1, 4, 64)
    if f.py == "bool":
        return not current
    value = OTHER[f.py]
    return value + 1 if value == current else value


@pytest.mark.parametrize("cls", sorted(VALUES))
def test_every_field_has_a_getter_with_a_docstring(cls: str) -> None:
    value, owner = VALUES[cls]
    for f in FIELDS[owner]:
        getattr(value, f.name)  # a getter exists
        assert " ".join(getattr(type(value), f.name).__doc__.split()) == " ".join(f.doc.split()), f.name


@pytest.mark.parametrize("owner", ["ServingConfig", "SpeculativeConfig"])
def test_defaults_are_the_tables(owner: str) -> None:
    value = getattr(kvbudget, owner)()
    for f in FIELDS[owner]:
        assert getattr(value, f.name) == f.default, f.name


@pytest.mark.parametrize("cls", sorted(VALUES))
def test_replace_changes_one_field_and_keeps_the_others(cls: str) -> None:
    value, owner = VALUES[cls]
    for f in FIELDS[owner]:
        if cls == "ModelGeometry" and f.name in ("num_full_layers", "num_swa_layers"):
            continue  # taken from the id lists
        if cls == "ModelGeometry" and f.name in (
            "kv_lora_rank", "qk_rope_head_dim", "swa_kv_lora_rank", "swa_qk_rope_head_dim",
            "index_head_dim", "index_kpool", "index_shared_layers",
        ):
            continue  # MLA and DSA dims need kv_lora_rank and its rope dim: covered below
        if cls == "SpeculativeConfig" and f.name == "draft":
            continue  # a draft fixes draft_num_layers: covered below
        new = _other(f, getattr(value, f.name))
        changed = value.replace(**{f.name: new})
        assert getattr(changed, f.name) == new, f.name
        for g in FIELDS[owner]:
            if g.name != f.name and g.kind != "derived":
                assert getattr(changed, g.name) == getattr(value, g.name), (f.name, g.name)
    assert value.replace() == value


def test_replace_of_model_ids_and_mla() -> None:
    m = MODEL.replace(full_attention_layer_ids=[0, 1, 2], swa_attention_layer_ids=[])
    assert (m.num_full_layers, m.num_swa_layers, m.num_kv_heads) == (3, 0, 8)
    mla = m.replace(kv_lora_rank=512, qk_rope_head_dim=64)
    assert mla.is_mla and mla.kv_lora_rank == 512
    # MLA with SWA layers (SGLang 0.5.23): the SWA latent defaults to the full layers'.
    hybrid = MODEL.replace(kv_lora_rank=512, qk_rope_head_dim=64)
    assert (hybrid.swa_kv_lora_rank, hybrid.swa_qk_rope_head_dim) == (512, 64)
    own = hybrid.replace(swa_kv_lora_rank=256, swa_qk_rope_head_dim=32)
    assert (own.swa_kv_lora_rank, own.swa_qk_rope_head_dim, own.kv_lora_rank) == (256, 32, 512)
    with pytest.raises(InvalidConfigError, match="MLA dims"):
        MODEL.replace(swa_kv_lora_rank=256)
    # DSA: an MLA model of full layers with an indexer.
    dsa = mla.replace(index_head_dim=128, index_kpool=2, index_shared_layers=1)
    assert (dsa.index_head_dim, dsa.index_kpool, dsa.index_shared_layers, dsa.kv_lora_rank) == (128, 2, 1, 512)
    for base, bad, needle in ((m, {"index_kpool": 2}, "give index_head_dim"),
                              (m, {"index_head_dim": 128}, "needs an MLA"),
                              (dsa, {"index_shared_layers": 4}, "exceeds")):  # fmt: skip
        with pytest.raises(InvalidConfigError, match=needle):
            base.replace(**bad)
    with pytest.raises(InvalidConfigError, match="sliding-window layers"):
        hybrid.replace(index_head_dim=128)
    spec = SpeculativeConfig("eagle3").replace(draft=DraftGeometry(2, 8, 128))
    assert spec.draft_num_layers == 2


@pytest.mark.parametrize("cls", sorted(VALUES))
def test_replace_checks_and_names_unknown_fields(cls: str) -> None:
    value, _ = VALUES[cls]
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_field'"):
        value.replace(no_such_field=1)


def test_replace_rechecks_the_rules_across_fields() -> None:
    with pytest.raises(InvalidConfigError, match="multiple of dcp_size"):
        ServingConfig(tp_size=4).replace(dcp_size=3)
    with pytest.raises(InvalidConfigError, match="page_size must be >= 1"):
        ServingConfig().replace(page_size=0)


@pytest.mark.parametrize("cls", sorted(VALUES))
def test_reprs_are_python_and_evaluate_back(cls: str) -> None:
    value, _ = VALUES[cls]
    text = repr(value)
    assert "Some(" not in text and "None)" not in text.replace("=None)", "")
    assert eval(text, {n: getattr(kvbudget, n) for n in kvbudget.__all__}) == value  # noqa: S307


def test_repr_shows_python_values() -> None:
    assert "sliding_window_size=127" in repr(MODEL)
    assert "kv_cache_dtype='bf16'" in repr(ServingConfig())
    assert "disable_radix_cache=False" in repr(ServingConfig())


@pytest.mark.parametrize(
    "name",
    [n for n in kvbudget.__all__ if isinstance(getattr(kvbudget, n), type) and n not in ("KVPools", "LayerKV")],
)
def test_public_classes_live_in_kvbudget(name: str) -> None:
    cls = getattr(kvbudget, name)
    assert cls.__module__ == "kvbudget" or issubclass(cls, BaseException) or name in (
        "BatchResult", "StateBatchResult", "AgreedPlan", "Parallelism", "RankPlans", "MinBudget", "SwaRatioSuggestion",
        "WithoutDraftTerms",
    ), f"{name} is shown as {cls.__module__}.{name}"


@pytest.mark.parametrize("cls", sorted(VALUES))
def test_values_pickle(cls: str) -> None:
    value, _ = VALUES[cls]
    assert pickle.loads(pickle.dumps(value)) == value


def test_constructor_call_semantics() -> None:
    assert ServingConfig("fp8_e4m3", 64) == ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64)
    with pytest.raises(TypeError, match="multiple values for argument 'page_size'"):
        ServingConfig("bf16", 64, page_size=32)
    with pytest.raises(TypeError, match="missing required argument 'head_dim'"):
        ModelGeometry([0], [], 8)
    with pytest.raises(TypeError, match="at most"):
        DraftGeometry(1, 2, 3, 4, None, None, "extra")
    with pytest.raises(TypeError, match="page_size must be an int, got bool"):
        ServingConfig(page_size=True)
    with pytest.raises(TypeError, match="must be a str"):
        ServingConfig(kv_cache_dtype=16)
    with pytest.raises(OverflowError):
        ServingConfig(page_size=2**64)


def test_canonical_names_are_the_cores() -> None:
    from kvbudget.fields import canonical_name

    assert canonical_name("kv_cache_dtype", "fp8") == "fp8_e4m3" == ServingConfig(kv_cache_dtype="fp8").kv_cache_dtype
    assert canonical_name("algorithm", "MTP") == "nextn"
    assert canonical_name("disaggregation_mode", "none") == "null"
    for f in SCENARIO_FIELDS.values():
        for name in f.choices:
            assert canonical_name(f.name, name.upper()) == name
    with pytest.raises(InvalidConfigError, match="unknown speculative algorithm"):
        canonical_name("algorithm", "medusa")
    with pytest.raises(InvalidConfigError, match="not a choice field"):
        canonical_name("page_size", "1")


def test_scenario_fields_are_the_three_parts() -> None:
    owners = {f.owner for f in SCENARIO_FIELDS.values()}
    assert owners == {"AttentionShape", "ServingConfig", "SpeculativeConfig"}
    batch = [n for n, f in SCENARIO_FIELDS.items() if f.batch]
    assert "draft" not in batch and "page_size" in batch and "num_full_layers" in batch


def test_scenario_replace_routes_every_field() -> None:
    sc = Scenario(MODEL)
    changed = sc.replace(page_size=64, head_dim=256, algorithm="eagle3", draft_num_layers=1,
                         full_attention_layer_ids=[1, 3, 5], swa_attention_layer_ids=[0, 2])
    assert changed.serving.page_size == 64
    assert changed.model.head_dim == 256 and changed.model.num_full_layers == 3
    assert changed.spec.algorithm == "eagle3" and changed.spec.draft_num_layers == 1
    assert sc.serving.page_size == 1  # immutable
    with pytest.raises(TypeError, match="unexpected keyword argument 'pagesize'"):
        sc.replace(pagesize=64)
    with pytest.raises(AttributeError):
        sc.serving = ServingConfig()  # type: ignore[misc]
    assert sc.replace(serving=ServingConfig(page_size=16)).serving.page_size == 16
    assert pickle.loads(pickle.dumps(changed)) == changed
    assert hash(changed) == hash(pickle.loads(pickle.dumps(changed)))


def test_scenario_plans_as_its_configurator() -> None:
    sc = Scenario(MODEL, ServingConfig(page_size=64), SpeculativeConfig("eagle3", 1))
    cfg = kvbudget.create_pool_configurator(sc.model, sc.serving, sc.spec)
    assert sc.configurator().calculate_pool_sizes(1 << 34) == cfg.calculate_pool_sizes(1 << 34)
    assert sc.plan(1 << 34).to_json() == cfg.plan(1 << 34).to_json()
    assert cfg.scenario == sc
    assert type(sc.configurator("hybrid_swa")).__name__ == "HybridSWAPoolConfigurator"


def test_draft_from_model() -> None:
    dense = ModelGeometry(list(range(16)), [], 8, 64, v_head_dim=96)
    d = DraftGeometry.from_model(dense)
    assert (d.num_layers, d.num_kv_heads, d.head_dim, d.v_head_dim, d.capacity) == (16, 8, 64, 96, None)
    all_swa = ModelGeometry([], [0, 1, 2], 8, 128, swa_num_kv_heads=4, swa_head_dim=64, sliding_window_size=127)
    s = DraftGeometry.from_model(all_swa, num_layers=2, kv_cache_dtype="fp8_e4m3")
    assert (s.num_layers, s.num_kv_heads, s.head_dim, s.v_head_dim, s.capacity, s.kv_cache_dtype) == (
        2, 4, 64, 64, "swa", "fp8_e4m3",
    )
    same = ModelGeometry([1], [0, 2], 8, 128, sliding_window_size=127)
    assert DraftGeometry.from_model(same).num_layers == 3
    with pytest.raises(InvalidConfigError, match="one geometry"):
        DraftGeometry.from_model(ModelGeometry([1], [0], 8, 128, swa_num_kv_heads=4))
    with pytest.raises(InvalidConfigError, match="MLA"):
        DraftGeometry.from_model(ModelGeometry([0], [], 1, 576, kv_lora_rank=512, qk_rope_head_dim=64))


def test_stubs_are_generated_from_the_table() -> None:
    """tools/stubgen.py --check: the committed stubs equal what the table renders."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "stubgen.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
