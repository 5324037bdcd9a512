"""Parsing Hugging Face config.json files into ModelGeometry / DraftGeometry kwargs.

Every model of the bundled model table (python/kvbudget/models/data/models.json,
a copy of shared/data/models.json) is parsed from a config laid out the way
its family's real config.json is (same keys, same nesting, same omissions),
and the result must equal the table's independently researched layer ids,
heads, dims, window and bytes per token.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvbudget.models.hf import GEOMETRY_KEYS, ConfigError, geometry_kwargs_from_hf_config, load_hf_config
from kvbudget.models.hf_draft import draft_kwargs_from_hf_config

from hf_family_configs import (
    DRAFT_BUILDERS,
    ENTRIES,
    MLA_DRAFTS,
    TARGET_BUILDERS,
    Config,
    Entry,
    cohere2,
    gemma2,
    gemma3_1b,
    gemma3_mm,
    gemma3n,
    gpt_oss,
    llama,
    llama4,
    mimo_7b,
    mimo_v2_flash,
    mistral,
    qwen3,
)


def test_every_table_entry_has_a_parsing_test() -> None:
    covered = set(TARGET_BUILDERS) | set(DRAFT_BUILDERS) | set(MLA_DRAFTS)
    assert covered == set(ENTRIES)
    assert all(ENTRIES[n]["role"] == "target" for n in TARGET_BUILDERS)
    assert all(ENTRIES[n]["role"] != "target" for n in DRAFT_BUILDERS)


# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------


def _owned(e: Entry, key: str) -> list[int]:
    owning = e.get("kv_owning_layer_ids")
    return [i for i in e[key] if owning is None or i in owning]


def _expected_window(e: Entry) -> int | None:
    if not e["swa_layer_ids"]:
        return None
    if e["name"].startswith("Llama-4"):
        return 8192  # SGLang model_runner: attention_chunk_size as is
    if e["name"].startswith("MiMo-V2"):
        return 128  # SGLang model_runner: config sliding_window_size as is
    return int(e["sliding_window"]) - 1  # HF inclusive -> SGLang exclusive


@pytest.mark.parametrize("name", sorted(TARGET_BUILDERS))
def test_target_matches_table(name: str) -> None:
    e = ENTRIES[name]
    kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[name](e))
    assert tuple(kw) == GEOMETRY_KEYS

    assert kw["full_attention_layer_ids"] == _owned(e, "full_layer_ids")
    assert kw["swa_attention_layer_ids"] == _owned(e, "swa_layer_ids")
    assert len(kw["full_attention_layer_ids"]) == e["kv_cache_layers_full"]
    assert len(kw["swa_attention_layer_ids"]) == e["kv_cache_layers_swa"]
    assert kw["num_kv_heads"] == e["num_kv_heads"]
    assert kw["head_dim"] == e["head_dim"]
    v = kw["v_head_dim"] or kw["head_dim"]
    assert v == e["v_head_dim"]
    assert kw["sliding_window_size"] == _expected_window(e)

    if e["mla"]:
        assert kw["kv_lora_rank"] == e["mla"]["kv_lora_rank"]
        assert kw["qk_rope_head_dim"] == e["mla"]["qk_rope_head_dim"]
        per_layer = (kw["kv_lora_rank"] + kw["qk_rope_head_dim"]) * 2
    else:
        assert kw["kv_lora_rank"] is None and kw["qk_rope_head_dim"] is None
        per_layer = kw["num_kv_heads"] * (kw["head_dim"] + v) * 2
    assert per_layer == e["kv_bytes_per_token_full_layer_bf16"]

    if e["swa_layer_ids"]:
        sh = kw["swa_num_kv_heads"] or kw["num_kv_heads"]
        sd = kw["swa_head_dim"] or kw["head_dim"]
        sv = kw["swa_v_head_dim"] or (kw["swa_head_dim"] if kw["swa_head_dim"] else v)
        assert (sh, sd, sv) == (e["swa_num_kv_heads"], e["swa_head_dim"], e["swa_v_head_dim"])
        assert sh * (sd + sv) * 2 == e["kv_bytes_per_token_swa_layer_bf16"]
    else:
        assert kw["swa_num_kv_heads"] is None and kw["swa_head_dim"] is None


def test_window_is_hf_sliding_window_minus_one() -> None:
    """HF's sliding_window counts the current token; SGLang's window does not."""
    kw = geometry_kwargs_from_hf_config(gemma3_mm(ENTRIES["Gemma-3-27B (text)"]))
    assert kw["sliding_window_size"] == 1023
    kw = geometry_kwargs_from_hf_config(gpt_oss(ENTRIES["gpt-oss-120b"]))
    assert kw["sliding_window_size"] == 127  # REFERENCE example 2's W
    kw = geometry_kwargs_from_hf_config(mistral(ENTRIES["Mistral-7B-v0.1"]))
    assert kw["sliding_window_size"] == 4095
    cfg = gemma3_1b(ENTRIES["Gemma-3-1B"])
    cfg["sliding_window"] = 1
    assert geometry_kwargs_from_hf_config(cfg)["sliding_window_size"] == 0


def test_mimo_v2_separate_swa_geometry() -> None:
    kw = geometry_kwargs_from_hf_config(mimo_v2_flash(ENTRIES["MiMo-V2-Flash"]))
    assert kw["full_attention_layer_ids"][:3] == [0, 5, 11]
    assert (kw["num_kv_heads"], kw["head_dim"], kw["v_head_dim"]) == (4, 192, 128)
    assert (kw["swa_num_kv_heads"], kw["swa_head_dim"], kw["swa_v_head_dim"]) == (8, 192, 128)
    # attention_chunk_size=128 is present too, but hybrid_layer_pattern decides.
    assert kw["sliding_window_size"] == 128


def test_layer_types_override_patterns() -> None:
    """Configs re-saved by newer transformers carry layer_types plus _sliding_window_pattern."""
    e = ENTRIES["Gemma-3-27B (text)"]
    cfg = gemma3_mm(e)
    n = e["num_layers"]
    cfg["text_config"]["_sliding_window_pattern"] = 6
    cfg["text_config"]["layer_types"] = [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    # An explicit list wins over the pattern.
    cfg["text_config"]["layer_types"] = ["full_attention"] * n
    assert geometry_kwargs_from_hf_config(cfg)["swa_attention_layer_ids"] == []


def test_cohere2_layer_types_form() -> None:
    e = ENTRIES["Command-R7B"]
    cfg = cohere2(e)
    del cfg["sliding_window_pattern"]
    cfg["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(32)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    # Without the key, the Cohere2 class default (4) applies.
    cfg = cohere2(e)
    del cfg["sliding_window_pattern"]
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == e["full_layer_ids"]


def test_llama4_no_rope_layers_forms() -> None:
    e = ENTRIES["Llama-4-Scout-17B-16E-Instruct (text)"]
    cfg = llama4(e)
    del cfg["text_config"]["no_rope_layers"]  # the aiconfigurator copy omits the key
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == e["full_layer_ids"]
    cfg["text_config"]["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(48)]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["swa_attention_layer_ids"] == e["swa_layer_ids"]
    cfg["text_config"]["no_rope_layers"] = [1] * 47 + [0]
    assert geometry_kwargs_from_hf_config(cfg)["full_attention_layer_ids"] == [47]
    # Newer transformers: layer_types with chunked_attention.
    cfg["text_config"]["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(48)
    ]
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    assert kw["sliding_window_size"] == 8192
    # No attention_chunk_size: no chunking, every layer global.
    cfg = llama4(e)
    cfg["text_config"]["attention_chunk_size"] = None
    kw = geometry_kwargs_from_hf_config(cfg)
    assert len(kw["full_attention_layer_ids"]) == 48 and kw["sliding_window_size"] is None


def test_qwen2_use_sliding_window_true() -> None:
    """MiMo-7B's edge case: with the switch on, layers >= max_window_layers slide."""
    cfg = mimo_7b(ENTRIES["MiMo-7B-Base"])
    cfg["use_sliding_window"] = True
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["swa_attention_layer_ids"] == [32, 33, 34, 35]
    assert kw["full_attention_layer_ids"] == list(range(32))
    assert kw["sliding_window_size"] == 32767
    del cfg["max_window_layers"]
    with pytest.raises(ConfigError, match="max_window_layers"):
        geometry_kwargs_from_hf_config(cfg)


def test_mistral_v03_null_window_is_all_full() -> None:
    cfg = mistral(ENTRIES["Mistral-7B-v0.1"])
    cfg["sliding_window"] = None
    kw = geometry_kwargs_from_hf_config(cfg)
    assert kw["full_attention_layer_ids"] == list(range(32))
    assert kw["swa_attention_layer_ids"] == [] and kw["sliding_window_size"] is None


def test_gemma3n_kv_shared_layers_optional() -> None:
    e = ENTRIES["Gemma-3n-E2B (text)"]
    kw = geometry_kwargs_from_hf_config(gemma3n(e), include_kv_shared_layers=True)
    assert kw["full_attention_layer_ids"] == e["full_layer_ids"]
    assert kw["swa_attention_layer_ids"] == e["swa_layer_ids"]


def test_defaults_head_dim_and_kv_heads() -> None:
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
           "num_hidden_layers": 2}
    kw = geometry_kwargs_from_hf_config(cfg)
    assert (kw["num_kv_heads"], kw["head_dim"]) == (32, 128)
    cfg["num_key_value_heads"] = None  # null means the default too
    assert geometry_kwargs_from_hf_config(cfg)["num_kv_heads"] == 32


# --------------------------------------------------------------------------
# Errors and inputs
# --------------------------------------------------------------------------


def test_missing_key_is_named() -> None:
    cfg = llama(ENTRIES["Llama-3.1-8B"])
    cfg["model_type"] = "custom_llama"  # no config class: no defaults to fall back on
    del cfg["num_attention_heads"]
    with pytest.raises(ConfigError) as info:
        geometry_kwargs_from_hf_config(cfg)
    assert str(info.value) == "config.json: missing key 'num_attention_heads'"
    assert info.value.key == "num_attention_heads"
    assert isinstance(info.value, ValueError)


def test_nested_missing_key_is_dotted() -> None:
    cfg = llama4(ENTRIES["Llama-4-Scout-17B-16E-Instruct (text)"])
    cfg["text_config"]["model_type"] = "custom_llama4_text"  # no class defaults
    del cfg["text_config"]["num_hidden_layers"]
    with pytest.raises(ConfigError, match=r"'text_config\.num_hidden_layers'"):
        geometry_kwargs_from_hf_config(cfg)


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda c: c.update(layer_types=c["layer_types"][:-1]), "layer_types"),
        (lambda c: c["layer_types"].__setitem__(0, "linear_attention"), "linear_attention"),
        (lambda c: c.update(num_key_value_heads=0), "num_key_value_heads"),
        (lambda c: c.update(head_dim="64"), "head_dim"),
        (lambda c: c.update(sliding_window=None), "sliding_window"),
        (lambda c: c.update(num_hidden_layers=None), "num_hidden_layers"),
    ],
)
def test_bad_values_name_the_key(mutate: Callable[[Config], Any], needle: str) -> None:
    cfg = gpt_oss(ENTRIES["gpt-oss-20b"])
    mutate(cfg)
    with pytest.raises(ConfigError, match=needle):
        geometry_kwargs_from_hf_config(cfg)


def test_head_dim_not_derivable() -> None:
    cfg = {"hidden_size": 1000, "num_attention_heads": 3, "num_hidden_layers": 1}
    with pytest.raises(ConfigError, match="head_dim"):
        geometry_kwargs_from_hf_config(cfg)


def test_mismatched_duplicate_window() -> None:
    cfg = gemma2(ENTRIES["Gemma-2-9B"])
    cfg["sliding_window_size"] = 2048
    with pytest.raises(ConfigError, match="disagree"):
        geometry_kwargs_from_hf_config(cfg)


def test_paths(tmp_path: Path) -> None:
    cfg = qwen3(ENTRIES["Qwen3-8B"])
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    by_dir = geometry_kwargs_from_hf_config(tmp_path)
    by_file = geometry_kwargs_from_hf_config(str(tmp_path / "config.json"))
    assert by_dir == by_file == geometry_kwargs_from_hf_config(cfg)
    assert load_hf_config(tmp_path) == cfg
    with pytest.raises(ConfigError, match="no such file"):
        geometry_kwargs_from_hf_config(tmp_path / "missing")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_hf_config(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_hf_config(tmp_path / "list.json")


def test_config_error_is_kvbudget_invalid_config_error() -> None:
    kvbudget = pytest.importorskip("kvbudget")
    base = getattr(kvbudget, "InvalidConfigError", None)
    if base is None:
        pytest.skip("kvbudget.InvalidConfigError not available (extension not built)")
    assert issubclass(ConfigError, base)


# --------------------------------------------------------------------------
# The parsed kwargs build real geometries (needs the extension: make develop)
# --------------------------------------------------------------------------


def _kvbudget_class(name: str) -> Any:
    kvbudget = pytest.importorskip("kvbudget")
    cls = getattr(kvbudget, name, None)
    if cls is None:
        pytest.skip(f"kvbudget.{name} not available (run `make develop`)")
    return cls


@pytest.mark.parametrize("name", sorted(TARGET_BUILDERS))
def test_parsed_target_builds_model_geometry(name: str) -> None:
    cls = _kvbudget_class("ModelGeometry")
    kw = geometry_kwargs_from_hf_config(TARGET_BUILDERS[name](ENTRIES[name]))
    geom = cls(**kw)
    assert geom is not None


@pytest.mark.parametrize("name", sorted(DRAFT_BUILDERS))
def test_parsed_draft_builds_draft_geometry(name: str) -> None:
    cls = _kvbudget_class("DraftGeometry")
    builder, kind, layers = DRAFT_BUILDERS[name]
    kw = draft_kwargs_from_hf_config(
        builder(ENTRIES[name]), kind=kind, num_layers=layers  # type: ignore[arg-type]
    )
    assert cls(**kw) is not None


def test_chatglm_kv_groups_are_read_as_its_modeling_code_reads_them() -> None:
    """ChatGLM / GLM-4 files give their KV heads as ``multi_query_group_num`` under
    ``multi_query_attention`` (no ``num_key_value_heads``): the generic reading took the query heads,
    16 times the cache. SGLang's reading (``resolve_sglang``) agrees on such a file."""
    from kvbudget.sglang.model import resolve_sglang

    cfg = {"architectures": ["ChatGLMModel"], "model_type": "chatglm", "num_layers": 40, "hidden_size": 4096,
           "num_attention_heads": 32, "kv_channels": 128, "multi_query_attention": True,
           "multi_query_group_num": 2, "original_rope": True}  # fmt: skip
    kw = geometry_kwargs_from_hf_config(cfg)
    assert (kw["num_kv_heads"], kw["head_dim"], len(kw["full_attention_layer_ids"])) == (2, 128, 40)
    g = resolve_sglang(cfg).model_geometry()
    assert (g.num_kv_heads, g.head_dim, g.num_layers) == (2, 128, 40)
    assert geometry_kwargs_from_hf_config({**cfg, "multi_query_attention": False})["num_kv_heads"] == 32


def test_nemotron_nas_kv_heads_are_read_from_its_attention_blocks() -> None:
    """Nemotron-NAS (DeciLM) files give no ``num_key_value_heads``: each attention block's
    ``n_heads_in_group`` does (no-op blocks none). The generic reading took the query heads, 8 times
    the cache; it now reads the blocks as SGLang does, and refuses variable GQA, which one geometry
    cannot hold (vLLM mode reads it per layer)."""
    from kvbudget.sglang.model import resolve_sglang

    def block(group: int | None) -> dict[str, Any]:
        return {"attention": {"no_op": group is None, "n_heads_in_group": group}, "ffn": {"no_op": False}}

    cfg = {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "num_hidden_layers": 4,
           "hidden_size": 8192, "num_attention_heads": 64, "block_configs": [block(8), block(None), block(8), block(8)]}
    kw = geometry_kwargs_from_hf_config(cfg)
    assert (kw["num_kv_heads"], kw["head_dim"], len(kw["full_attention_layer_ids"])) == (8, 128, 4)
    assert resolve_sglang(cfg).model_geometry().num_kv_heads == 8
    variable = {**cfg, "block_configs": [block(8), block(None), block(4), block(8)]}
    with pytest.raises(ConfigError, match=r"KV heads \[8, 16\]"):
        geometry_kwargs_from_hf_config(variable)
    with pytest.raises(ConfigError, match="Variable GQA"):
        resolve_sglang(variable)


def test_the_kv_head_keys_are_both_engines() -> None:
    """``KV_HEAD_KEYS``, declared once, is the list both engines read a config's total KV heads
    from: vLLM 0.33.0's ``CONFIG_FIELD_ALIASES["total_num_kv_heads"]`` (lifted) and the
    ``attributes`` of SGLang 0.5.23's ``ModelConfig.get_total_num_kv_heads`` (read with ``ast``)."""
    import ast

    from kvbudget.models.hf import KV_HEAD_KEYS
    from sglang_oracle._fetch import sglang_root
    from vllm_oracle import _hf

    assert _hf._env(_hf._root()).cfg["CONFIG_FIELD_ALIASES"]["total_num_kv_heads"] == KV_HEAD_KEYS
    tree = ast.parse((sglang_root() / "sglang/srt/configs/model_config.py").read_text())
    method = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_total_num_kv_heads")
    listed = next(n.value for n in ast.walk(method) if isinstance(n, ast.Assign)
                  and ast.unparse(n.targets[0]) == "attributes")  # fmt: skip
    assert tuple(ast.literal_eval(listed)) == KV_HEAD_KEYS
