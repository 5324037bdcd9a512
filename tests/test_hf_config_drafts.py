"""Parsing Hugging Face config.json files into DraftGeometry kwargs; a model used as a draft."""

from __future__ import annotations

from typing import Any

import pytest

from kvbudget.models.hf import DRAFT_KEYS, ConfigError, geometry_kwargs_from_hf_config
from kvbudget.models.hf_draft import draft_kwargs_from_hf_config

from hf_family_configs import (
    DRAFT_BUILDERS,
    ENTRIES,
    TARGET_BUILDERS,
    Config,
    deepseek_v3,
    eagle3,
    gemma3_1b,
    llama,
    mimo_v2_flash,
    mistral,
)


# --------------------------------------------------------------------------
# Drafts
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DRAFT_BUILDERS))
def test_draft_matches_table(name: str) -> None:
    e = ENTRIES[name]
    builder, kind, layers = DRAFT_BUILDERS[name]
    kw = draft_kwargs_from_hf_config(
        builder(e), kind=kind, num_layers=layers  # type: ignore[arg-type]
    )
    assert tuple(kw) == DRAFT_KEYS
    assert kw["num_layers"] == e["kv_cache_layers_full"] + e["kv_cache_layers_swa"]
    assert kw["num_layers"] == e["num_layers"]
    swa_only = not e["full_layer_ids"]
    heads = e["swa_num_kv_heads"] if swa_only else e["num_kv_heads"]
    hd = e["swa_head_dim"] if swa_only else e["head_dim"]
    vd = e["swa_v_head_dim"] if swa_only else e["v_head_dim"]
    assert (kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"] or kw["head_dim"]) == (
        heads,
        hd,
        vd,
    )
    # Without the target, capacity is left to DraftGeometry (SGLang's rule),
    # except for SWA-geometry drafts.
    assert kw["capacity"] == ("swa" if swa_only else None)
    assert kw["kv_cache_dtype"] is None
    target = e["target"] if e["target"] in TARGET_BUILDERS else None
    if target is not None:
        target_kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[target](ENTRIES[target]))
        with_target = draft_kwargs_from_hf_config(
            builder(e), target_kw, kind=kind, num_layers=layers  # type: ignore[arg-type]
        )
        assert with_target == {**kw, "capacity": "swa" if swa_only else "full"}
    per_layer = kw["num_kv_heads"] * (kw["head_dim"] + (kw["v_head_dim"] or kw["head_dim"])) * 2
    key = "kv_bytes_per_token_swa_layer_bf16" if swa_only else "kv_bytes_per_token_full_layer_bf16"
    assert per_layer == e[key]


def test_mimo_v2_mtp_depth_must_be_given() -> None:
    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    with pytest.raises(ConfigError, match="num_nextn_predict_layers"):
        draft_kwargs_from_hf_config(cfg)
    cfg["num_nextn_predict_layers"] = 3  # later mimo_v2 configs state it
    kw = draft_kwargs_from_hf_config(cfg)
    assert (kw["num_layers"], kw["num_kv_heads"], kw["capacity"]) == (3, 8, "swa")


def test_deepseek_mtp_is_mla_and_refused() -> None:
    cfg = deepseek_v3(ENTRIES["DeepSeek-V3"])
    with pytest.raises(ConfigError, match="kv_lora_rank") as info:
        draft_kwargs_from_hf_config(cfg)
    assert "num_nextn_predict_layers" in str(info.value)


def test_eagle_ignores_copied_sliding_window() -> None:
    e = ENTRIES["EAGLE3 draft for Gemma-3-1B (SpecForge template)"]
    cfg = eagle3(e)
    cfg["use_sliding_window"] = True  # even if it were on, an EAGLE head is full attention
    cfg["max_window_layers"] = 0
    target = geometry_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]))
    kw = draft_kwargs_from_hf_config(cfg, target)
    assert kw["capacity"] == "full" and kw["num_layers"] == 1
    assert (kw["num_kv_heads"], kw["head_dim"]) == (1, 256)


def test_draft_kinds_and_capacity_from_target() -> None:
    e = ENTRIES["Llama-3.2-1B (standalone draft)"]
    assert draft_kwargs_from_hf_config(llama(e), kind="eagle")["num_layers"] == 16
    mistral_kw = geometry_kwargs_from_hf_config(mistral(ENTRIES["Mistral-7B-v0.1"]))
    kw = draft_kwargs_from_hf_config(llama(e), mistral_kw)
    assert kw["capacity"] == "swa"  # an all-SWA target has no full pool
    gemma_kw = geometry_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]))
    assert draft_kwargs_from_hf_config(llama(e), gemma_kw)["capacity"] == "full"
    # A standalone draft with SWA layers: every KV layer counted at full geometry.
    kw = draft_kwargs_from_hf_config(gemma3_1b(ENTRIES["Gemma-3-1B"]), kind="standalone")
    assert (kw["num_layers"], kw["num_kv_heads"], kw["head_dim"]) == (26, 1, 256)
    with pytest.raises(ConfigError, match="kind"):
        draft_kwargs_from_hf_config(llama(e), kind="medusa")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="num_layers"):
        draft_kwargs_from_hf_config(llama(e), num_layers=0)


# --------------------------------------------------------------------------
# One rule for a model used as a draft: hf.py, the presets and the CLI agree
# --------------------------------------------------------------------------


def _cli_standalone_draft(preset: str) -> Any:
    """The DraftGeometry `kvbudget plan PRESET --draft standalone:PRESET` plans with."""
    from kvbudget.cli.parser import build_parser
    from kvbudget.cli.scenario import build_scenario

    args = build_parser().parse_args(
        ["plan", preset, "--draft", f"standalone:{preset}", "--available", "40GiB"]
    )
    return build_scenario(args).scenario.spec.draft


def _all_swa_mimo_v2() -> Config:
    """A MiMo-V2-style config whose every layer slides: SWA heads/dims differ from the full keys."""
    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    cfg["hybrid_layer_pattern"] = [1] * cfg["num_hidden_layers"]
    return cfg


@pytest.mark.parametrize(
    ("name", "all_swa"),
    [("Mistral-7B-v0.1", True), ("Gemma-3-1B", False), ("gpt-oss-20b", False)],
)
def test_model_as_draft_is_one_rule(name: str, all_swa: bool) -> None:
    import kvbudget
    from kvbudget.models import get_preset
    from kvbudget.models.presets import _draft_kwargs

    cfg = TARGET_BUILDERS[name](ENTRIES[name])
    preset = get_preset(name)
    rule = kvbudget.DraftGeometry.from_model(preset.model_geometry())
    from_hf = kvbudget.DraftGeometry(**draft_kwargs_from_hf_config(cfg, kind="standalone"))
    from_presets_kwargs = _draft_kwargs(preset.model_kwargs)
    assert from_presets_kwargs is not None
    from_presets = kvbudget.DraftGeometry(**from_presets_kwargs)
    assert from_hf == from_presets == preset.as_draft_geometry() == _cli_standalone_draft(preset.name) == rule
    m = preset.model_geometry()
    assert rule.num_layers == m.num_layers
    if all_swa:  # before: hf gave no capacity, the CLI "full" (then refused for an all-SWA target)
        assert rule.capacity == "swa"
        assert (rule.num_kv_heads, rule.head_dim, rule.v_head_dim) == (
            m.swa_num_kv_heads, m.swa_head_dim, m.swa_v_head_dim,
        )
    else:
        assert rule.capacity is None  # SGLang's rule: the full pool's token count
        assert (rule.num_kv_heads, rule.head_dim, rule.v_head_dim) == (
            m.num_kv_heads, m.head_dim, m.v_head_dim,
        )
    # The target itself plans with its own model as a standalone draft.
    spec = kvbudget.SpeculativeConfig("standalone", rule.num_layers, draft=rule)
    plan = kvbudget.Scenario(m, kvbudget.ServingConfig(), spec).plan(40 << 30)
    draft_pool = plan.pool("draft")
    assert draft_pool is not None and draft_pool.num_layers == m.num_layers


def test_all_swa_standalone_draft_takes_the_swa_geometry() -> None:
    import kvbudget

    cfg = _all_swa_mimo_v2()
    kw = draft_kwargs_from_hf_config(cfg, kind="standalone")
    # Before: refused (SWA geometry != the full keys'); now the SWA layers' own geometry.
    assert (kw["num_layers"], kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"]) == (48, 8, 192, 128)
    assert kw["capacity"] == "swa"
    model = kvbudget.ModelGeometry(**geometry_kwargs_from_hf_config(cfg))
    assert kvbudget.DraftGeometry(**kw) == kvbudget.DraftGeometry.from_model(model)
    # A target with full layers does not override the rule's "swa".
    target = geometry_kwargs_from_hf_config(llama(ENTRIES["Llama-3.1-8B"]))
    assert draft_kwargs_from_hf_config(cfg, target, kind="standalone")["capacity"] == "swa"


def test_hybrid_with_other_swa_geometry_is_refused_everywhere() -> None:
    import kvbudget
    from kvbudget.models import get_preset

    cfg = mimo_v2_flash(ENTRIES["MiMo-V2-Flash"])
    with pytest.raises(ConfigError, match="SWA layers") as info:
        draft_kwargs_from_hf_config(cfg, kind="standalone")
    assert info.value.key == "swa_num_key_value_heads"
    assert "one geometry" in str(info.value)
    with pytest.raises(kvbudget.InvalidConfigError, match="one geometry"):
        get_preset("mimo-v2-flash").as_draft_geometry()
    from kvbudget.cli import main

    assert main(["plan", "mimo-v2-flash", "--draft", "standalone:mimo-v2-flash", "--available", "40GiB"]) == 2


def test_mla_standalone_draft_is_refused_naming_the_key() -> None:
    cfg = deepseek_v3(ENTRIES["DeepSeek-V3"])
    with pytest.raises(ConfigError, match="kv_lora_rank") as info:
        draft_kwargs_from_hf_config(cfg, kind="standalone")
    assert info.value.key == "kv_lora_rank"
    assert "MLA" in str(info.value)
