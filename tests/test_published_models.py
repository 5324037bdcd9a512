"""The bundled published attention models (``kvbudget models``' "published models",
``python/kvbudget/models/data/published_models.json``): released checkpoints' whole config.json
files, each from a named public copy (repository, path, commit), held to both engines' own code.

* SGLang 0.5.23: ``resolve_sglang`` equals SGLang's ``ModelConfig`` reading of the file
  (tests/sglang_oracle/model.py: the KV layers, heads, dims, window, MLA and DSA indexer).
* vLLM 0.33.0: ``layers_from_hf_config`` equals the layers vLLM's model class builds from the file
  (tests/vllm_oracle), at TP 1, 4 and 8.
* ``kvbudget plan NAME`` plans each in SGLang mode and in vLLM mode as if the file were given.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cli_helpers import run
from sglang_oracle._fetch import sglang_root
from sglang_oracle.model import ModelOracle, load
from test_sglang_model import _differs
from test_sglang_model import _ours as sglang_ours
from test_vllm_state_models import _ours, _theirs

from kvbudget.models import find_bundled_model, list_hybrid_state_models, list_presets
from kvbudget.models.published import (UnknownPublishedModelError, get_published_model, list_published_models,
                                       published_model_entries)

ENTRIES = list(published_model_entries())


@pytest.fixture(scope="module")
def oracle() -> ModelOracle:
    return load(sglang_root())


def test_every_entry_is_a_whole_file_with_its_source() -> None:
    names = [e["name"] for e in ENTRIES]
    assert len(set(names)) == len(names) and {"deepseek_v3_2", "glm_5", "kimi_k2_5", "gemma_4_26b_a4b"} <= set(names)
    for e in ENTRIES:
        src = e["source"]
        assert src["model_id"] and src["file"] == "config.json" and " at commit " in src["copy"], e["name"]
        assert e["config"]["architectures"] and e["config"]["model_type"], e["name"]
    # no name is both a published and a hybrid-state model (the lookup takes hybrid-state first), nor a
    # preset's (a bundled name shadows a preset on the command line)
    assert all(find_bundled_model(n) == get_published_model(n) for n in list_published_models())
    assert not {*list_published_models(), *list_hybrid_state_models()} & set(list_presets())
    with pytest.raises(UnknownPublishedModelError, match="deepseek-v3.2"):
        get_published_model("deepseek-v3.3")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_published_model_read_as_sglang_reads_it(oracle: ModelOracle, entry: dict[str, Any]) -> None:
    cfg = entry["config"]
    theirs = oracle.resolve(dict(cfg), False)
    assert not isinstance(theirs, tuple), (entry["name"], theirs)
    assert not _differs(sglang_ours(dict(cfg)), theirs), (entry["name"], _differs(sglang_ours(dict(cfg)), theirs))


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["name"])
def test_published_model_read_as_vllm_reads_it(entry: dict[str, Any]) -> None:
    cfg = entry["config"]
    for tp in (1, 4, 8):
        ours, theirs = _ours(cfg, {"tp": tp, "pp": 1}, "bfloat16"), _theirs(cfg, {"tp": tp, "pp": 1}, "bfloat16")
        why = theirs if isinstance(theirs, str) else ""
        assert not isinstance(theirs, str) and ours == theirs, (entry["name"], tp, why)


@pytest.mark.parametrize("name", list_published_models())
def test_a_published_model_plans_by_name_in_both_engines(name: str) -> None:
    """``plan NAME``: SGLang mode at 64-token pages (DSA's), vLLM mode with the library's layers."""
    m = get_published_model(name)
    r = run("plan", name, "--tp", "8", "--available", "40GiB", "--page-size", "64", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["model"]["hf_id"] == m.hf_id and doc["sglang"]["max_total_num_tokens"] > 0
    r = run("plan", name, "--engine", "vllm", "--tp", "8", "--available", "40GiB", "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["vllm_plan"]["num_blocks"] > 0 and doc["vllm_layers"], name


def test_the_published_models_are_listed() -> None:
    r = run("models", "--json")
    assert r.returncode == 0, r.stderr
    rows = {h["name"]: h for h in json.loads(r.stdout)["published_models"]}
    assert list(rows) == list_published_models()
    # DeepSeek-V3.2's 61 MLA layers (with their indexers); Gemma 4 26B-A4B's 30 layers
    assert (rows["deepseek-v3.2"]["attention_layers"], rows["gemma-4-26b-a4b"]["attention_layers"]) == (61, 30)
