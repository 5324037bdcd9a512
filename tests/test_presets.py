"""Model presets (every model of the bundled table) and GPU presets."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kvbudget.models import gpus
from kvbudget.models.hf import DRAFT_KEYS, GEOMETRY_KEYS
from kvbudget.models.presets import (
    Preset,
    UnknownPresetError,
    drafts_for,
    get_preset,
    list_presets,
)


def _bundled() -> dict[str, Any]:
    text = resources.files("kvbudget.models").joinpath("data/models.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


DATA = _bundled()
ENTRIES = {m["name"]: m for m in DATA["models"]}
NAMES = list_presets()


def test_one_preset_per_table_entry() -> None:
    assert len(NAMES) == len(DATA["models"]) == 35
    assert len(set(NAMES)) == len(NAMES)
    assert {get_preset(n).display_name for n in NAMES} == set(ENTRIES)
    assert all(n == n.lower() and " " not in n for n in NAMES)
    targets, drafts = list_presets("target"), list_presets("draft")
    assert sorted(targets + drafts) == sorted(NAMES)
    assert len(targets) == 22 and len(drafts) == 13
    with pytest.raises(ValueError):
        list_presets("bogus")  # type: ignore[arg-type]


def test_bundled_entries_are_a_verbatim_copy() -> None:
    """The package data keeps the shared table's entries (and their sources) unchanged."""
    here = Path(__file__).resolve()
    candidates = [p / "shared" / "data" / "models.json" for p in here.parents]
    shared = next((p for p in candidates if p.is_file()), None)
    if shared is None:
        pytest.skip("shared/data/models.json not present in this checkout")
    original = json.loads(shared.read_text("utf-8"))
    assert DATA["models"] == original["models"]


@pytest.mark.parametrize("name", NAMES)
def test_preset_loads_and_keeps_provenance(name: str) -> None:
    p = get_preset(name)
    e = ENTRIES[p.display_name]
    assert isinstance(p, Preset)
    assert p.name == name
    assert p.source == e["source"] and p.source
    assert p.notes == e["notes"]
    assert p.hf_id == e["hf_id"]
    assert p.hf_sliding_window == e["sliding_window"]
    assert p.role == ("target" if e["role"] == "target" else "draft")
    assert tuple(p.model_kwargs) == GEOMETRY_KEYS
    with pytest.raises(AttributeError):
        p.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("name", NAMES)
def test_model_kwargs_match_table(name: str) -> None:
    p = get_preset(name)
    e = ENTRIES[p.display_name]
    kw = p.model_kwargs
    assert len(kw["full_attention_layer_ids"]) == e["kv_cache_layers_full"]
    assert len(kw["swa_attention_layer_ids"]) == e["kv_cache_layers_swa"]
    assert set(kw["full_attention_layer_ids"]) <= set(e["full_layer_ids"])
    assert set(kw["swa_attention_layer_ids"]) <= set(e["swa_layer_ids"])
    if e["mla"]:
        per_layer = (kw["kv_lora_rank"] + kw["qk_rope_head_dim"]) * 2
    else:
        per_layer = kw["num_kv_heads"] * (kw["head_dim"] + kw["v_head_dim"]) * 2
    if kw["full_attention_layer_ids"]:
        assert per_layer == e["kv_bytes_per_token_full_layer_bf16"]
    if kw["swa_attention_layer_ids"]:
        s = kw["swa_num_kv_heads"] * (kw["swa_head_dim"] + kw["swa_v_head_dim"]) * 2
        assert s == e["kv_bytes_per_token_swa_layer_bf16"]
        assert kw["sliding_window_size"] is not None
    else:
        assert kw["sliding_window_size"] is None


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gemma-2-9b", 4095),
        ("gemma-3-1b", 511),
        ("gemma-3-27b", 1023),
        ("gemma-3n-e2b", 511),
        ("command-a", 4095),
        ("gpt-oss-120b", 127),
        ("mistral-7b-v0.1", 4095),
        ("mimo-v2-flash", 128),  # SGLang uses MiMo-V2's sliding_window_size as is
        ("llama-4-scout", 8192),  # chunked attention: window = attention_chunk_size
        ("qwen2.5-7b-instruct", None),  # sliding_window present but switched off
        ("deepseek-v3", None),
    ],
)
def test_sglang_window(name: str, window: int | None) -> None:
    assert get_preset(name).model_kwargs["sliding_window_size"] == window


def test_gemma3n_counts_only_kv_owning_layers() -> None:
    kw = get_preset("gemma-3n-e4b").model_kwargs
    assert kw["full_attention_layer_ids"] == [4, 9, 14, 19]
    assert max(kw["swa_attention_layer_ids"]) == 18
    assert len(kw["swa_attention_layer_ids"]) == 16


def test_mla_preset() -> None:
    kw = get_preset("deepseek-v3").model_kwargs
    assert (kw["kv_lora_rank"], kw["qk_rope_head_dim"]) == (512, 64)
    assert kw["full_attention_layer_ids"] == list(range(61))
    mtp = get_preset("deepseek-v3-mtp")
    assert mtp.draft_kwargs is None and mtp.draft_num_layers == 1
    with pytest.raises(ValueError, match="MLA"):
        mtp.draft_geometry()
    with pytest.raises(ValueError, match="target"):
        get_preset("deepseek-v3").draft_geometry()


@pytest.mark.parametrize("name", list_presets("draft"))
def test_draft_presets(name: str) -> None:
    p = get_preset(name)
    e = ENTRIES[p.display_name]
    assert p.draft_kind in ("eagle3", "mtp", "standalone")
    assert e["role"] == f"draft-{p.draft_kind}"
    assert p.target is not None and p.targets and p.target == p.targets[0]
    for t in p.targets:
        assert get_preset(t).role == "target"
        assert name in drafts_for(t)
    assert p.draft_num_layers == e["num_layers"]
    if e["mla"]:
        assert p.draft_kwargs is None
        return
    dk = p.draft_kwargs
    assert dk is not None and tuple(dk) == DRAFT_KEYS
    assert dk["num_layers"] == e["num_layers"]
    assert dk["kv_cache_dtype"] is None
    per_layer = dk["num_kv_heads"] * (dk["head_dim"] + dk["v_head_dim"]) * 2
    if dk["capacity"] == "swa":
        assert not e["full_layer_ids"]
        assert per_layer == e["kv_bytes_per_token_swa_layer_bf16"]
    else:
        assert per_layer == e["kv_bytes_per_token_full_layer_bf16"]


def test_specific_draft_shapes() -> None:
    dk = get_preset("mimo-v2-flash-mtp").draft_kwargs
    assert dk == {
        "num_layers": 3,
        "num_kv_heads": 8,
        "head_dim": 192,
        "v_head_dim": 128,
        "kv_cache_dtype": None,
        "capacity": "swa",
    }
    assert get_preset("llama-3.2-1b").targets == ("llama-3.1-8b", "llama-3.1-70b")
    assert get_preset("llama-4-scout-eagle3").target == "llama-4-scout"
    assert get_preset("deepseek-v3-eagle3").draft_kwargs["num_kv_heads"] == 8  # type: ignore[index]
    assert set(drafts_for("deepseek-v3")) == {"deepseek-v3-eagle3", "deepseek-v3-mtp"}
    assert drafts_for("gemma-2-2b") == []


def test_suggested_kv_dtypes() -> None:
    assert get_preset("llama-3.1-8b").kv_cache_dtype == "bf16"
    assert get_preset("llama-3.1-8b-eagle3").kv_cache_dtype == "fp16"
    assert get_preset("gpt-oss-20b").kv_cache_dtype == "bf16"
    assert get_preset("command-a").kv_cache_dtype is None  # dtype not seen
    for n in NAMES:
        p = get_preset(n)
        assert p.kv_cache_dtype in (None, "bf16", "fp16") and p.kv_cache_dtype_note


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("GEMMA-3-27B", "gemma-3-27b"),
        ("  Gemma-3-27B  ", "gemma-3-27b"),
        ("Gemma-3-27B (text)", "gemma-3-27b"),
        ("google/gemma-3-27b-it", "gemma-3-27b"),
        ("openai/GPT-OSS-120B", "gpt-oss-120b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("EAGLE3 draft for Qwen3-8B (SpecForge template)", "qwen3-8b-eagle3"),
    ],
)
def test_name_matching(query: str, expected: str) -> None:
    assert get_preset(query).name == expected


def test_unknown_preset_suggests_close_names() -> None:
    with pytest.raises(UnknownPresetError) as info:
        get_preset("gemma3-27b")
    assert isinstance(info.value, KeyError)
    assert "gemma-3-27b" in info.value.suggestions
    assert "did you mean" in str(info.value) and "'gemma-3-27b'" in str(info.value)
    with pytest.raises(KeyError) as info2:
        get_preset("zzzzzz")
    assert "did you mean" not in str(info2.value)
    with pytest.raises(TypeError):
        get_preset(3)  # type: ignore[arg-type]


def test_presets_are_independent_copies() -> None:
    a = get_preset("qwen3-8b")
    a.model_kwargs["full_attention_layer_ids"].clear()
    assert len(get_preset("qwen3-8b").model_kwargs["full_attention_layer_ids"]) == 36


# --------------------------------------------------------------------------
# Real geometries (needs the extension: make develop)
# --------------------------------------------------------------------------


def _kvbudget_class(name: str) -> Any:
    kvbudget = pytest.importorskip("kvbudget")
    cls = getattr(kvbudget, name, None)
    if cls is None:
        pytest.skip(f"kvbudget.{name} not available (run `make develop`)")
    return cls


@pytest.mark.parametrize("name", NAMES)
def test_preset_builds_model_geometry(name: str) -> None:
    cls = _kvbudget_class("ModelGeometry")
    p = get_preset(name)
    geom = cls(**p.model_kwargs)
    built = p.model_geometry()
    assert type(built) is type(geom)


@pytest.mark.parametrize("name", [n for n in list_presets("draft") if n != "deepseek-v3-mtp"])
def test_draft_preset_builds_draft_geometry(name: str) -> None:
    cls = _kvbudget_class("DraftGeometry")
    p = get_preset(name)
    assert p.draft_kwargs is not None
    assert type(p.draft_geometry()) is type(cls(**p.draft_kwargs))


@pytest.mark.parametrize("name", NAMES)
def test_any_preset_as_a_draft_is_one_rule(name: str) -> None:
    """A draft preset's geometry is its model geometry through DraftGeometry.from_model; any
    preset used as a standalone draft goes through the same rule."""
    import kvbudget

    p = get_preset(name)
    m = p.model_geometry()
    swa = (m.swa_num_kv_heads, m.swa_head_dim, m.swa_v_head_dim)
    full = (m.num_kv_heads, m.head_dim, m.v_head_dim)
    if m.is_mla or (m.num_full_layers and m.num_swa_layers and swa != full):
        with pytest.raises(kvbudget.InvalidConfigError, match="MLA|one geometry"):
            p.as_draft_geometry()
        assert p.draft_kwargs is None
        return
    geom = p.as_draft_geometry()
    assert geom == kvbudget.DraftGeometry.from_model(m)
    assert geom.num_layers == m.num_layers
    if m.num_full_layers:
        assert (geom.num_kv_heads, geom.head_dim, geom.v_head_dim, geom.capacity) == (*full, None)
    else:  # all-SWA (Mistral v0.1, MiMo-V2-Flash's MTP layers): its SWA geometry, SWA capacity
        assert (geom.num_kv_heads, geom.head_dim, geom.v_head_dim, geom.capacity) == (*swa, "swa")
    if p.role == "draft":
        assert p.draft_geometry() == geom
    assert p.as_draft_geometry(2).num_layers == 2


# --------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gb"),
    [
        ("h100-sxm-80gb", 80),
        ("h200-141gb", 141),
        ("b200", 180),
        ("a100-40gb", 40),
        ("a100-80gb", 80),
        ("l40s", 48),
        ("mi300x", 192),
    ],
)
def test_gpu_presets(name: str, gb: int) -> None:
    g = gpus.get_gpu(name)
    assert g.stated_memory_gb == gb
    assert g.source and g.vendor in ("NVIDIA", "AMD")
    if g.bytes_basis == "stated_gb_x_1e9":
        assert g.memory_bytes == gb * 10**9
    else:
        assert g.bytes_basis == "device_reported"


def test_gpu_list_and_lookup() -> None:
    assert len(gpus.list_gpus()) == 7
    assert gpus.get_gpu("H100").name == "h100-sxm-80gb"
    assert gpus.get_gpu("H200_141GB").name == "h200-141gb"
    assert gpus.get_gpu("AMD MI300X").name == "mi300x"
    assert gpus.get_gpu("a100 80gb").name == "a100-80gb"
    with pytest.raises(gpus.UnknownGpuError) as info:
        gpus.get_gpu("h20O")
    assert isinstance(info.value, KeyError)
    assert "h200-141gb" in info.value.suggestions
    assert "did you mean" in str(info.value)


def test_presets_reproduce_reference_examples() -> None:
    """REFERENCE section 5, examples 1 and 2, planned from the real-model presets."""
    kvbudget = pytest.importorskip("kvbudget")
    if not hasattr(kvbudget, "HybridSWAPoolConfigurator"):
        pytest.skip("kvbudget configurators not available (run `make develop`)")
    eagle3 = kvbudget.SpeculativeConfig(algorithm="eagle3", draft_num_layers=1)
    cfg = kvbudget.HybridSWAPoolConfigurator(
        get_preset("gemma-3-27b").model_geometry(), kvbudget.ServingConfig(), eagle3
    )
    r = cfg.calculate_pool_sizes(40 * 2**30)
    assert (r.full_max_total_num_tokens, r.swa_max_total_num_tokens) == (99_674, 79_739)
    serving = kvbudget.ServingConfig(kv_cache_dtype="fp8", page_size=64, tp_size=4)
    cfg = kvbudget.HybridSWAPoolConfigurator(
        get_preset("gpt-oss-120b").model_geometry(), serving, eagle3
    )
    r = cfg.calculate_pool_sizes(30 * 2**30)
    assert (r.full_max_total_num_tokens, r.swa_max_total_num_tokens) == (3_767_296, 3_013_824)
