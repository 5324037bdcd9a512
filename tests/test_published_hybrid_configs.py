"""Released checkpoints' config.json values of the hybrid-state families only one engine serves,
read through both engines' readers and held to each engine's own code (issue 24: "a test per
family with a real checkpoint's config.json values").

The values are the bundled ``kvbudget models`` table's entries whose ``engines`` leave SGLang out
(``python/kvbudget/models/data/hybrid_state_models.json``), each with the public copy it was taken
from (the Hub is not reachable from this project):

* **Jamba** (``JambaForCausalLM``): ai21labs/Jamba-v0.1 (the whole file) and
  ai21labs/AI21-Jamba-1.5-Mini. vLLM 0.33.0 serves it: ``layers_from_hf_config`` must equal
  vLLM's ``JambaModel`` reading (tests/vllm_oracle: attention at ``i % 8 == 4``, 4 layers of 8 KV
  heads of 128, and 28 Mamba-1 layers whose conv ``(3, 8192/tp)`` and SSM ``(8192/tp, 16)``
  states come from vLLM's own calculator). SGLang 0.5.23 has no class for it and its Transformers
  backend refuses it (``ValueError: Model <class '...JambaForCausalLM'> does not support custom
  attention backends``, tests/sglang_oracle); ``resolve_sglang`` refuses it too, by that reason.
* **Granite-4.0-H** (``granitemoehybrid``): both engines serve it, so its bundled entry
  (``granite-4.0-h-1b``, from a public copy that calls itself verbatim) is held to each engine where
  the other entries are (tests/test_sglang_state_model.py, tests/test_vllm_state_models.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sglang_oracle._fetch import sglang_root
from sglang_oracle.model import ModelOracle, load
from test_vllm_state_models import _ours, _theirs

from kvbudget.models.hf import ConfigError
from kvbudget.models.hybrid_state import hybrid_state_entries
from kvbudget.sglang.model import resolve_sglang

#: The bundled checkpoints only vLLM serves (``kvbudget models``: ``engines`` ["vllm"]).
ENTRIES: list[dict[str, Any]] = [e for e in hybrid_state_entries() if "sglang" not in e.get("engines", ("sglang",))]
#: The parallel layouts each checkpoint is read at (TP divides its 32 heads and 8 KV heads).
LAYOUTS = ({"tp": 1, "pp": 1}, {"tp": 2, "pp": 1}, {"tp": 4, "pp": 1}, {"tp": 8, "pp": 1}, {"tp": 2, "pp": 2})


@pytest.fixture(scope="module")
def oracle() -> ModelOracle:
    return load(sglang_root())


def test_every_entry_names_its_source() -> None:
    names = [e["name"] for e in ENTRIES]
    assert len(set(names)) == len(names) and {"jamba_v0_1", "ai21_jamba_1_5_mini"} <= set(names), names
    for e in ENTRIES:
        src = e["source"]
        assert src["model_id"] and src["file"] == "config.json" and "commit" in src["copy"], e["name"]
        cfg = e["config"]
        assert cfg["architectures"] and cfg["model_type"] and cfg["torch_dtype"], e["name"]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_published_config_read_as_vllm_reads_it(entry: dict[str, Any]) -> None:
    cfg = entry["config"]
    for engine in LAYOUTS:
        for dtype in ("bfloat16", "float16"):
            ours, theirs = _ours(cfg, engine, dtype), _theirs(cfg, engine, dtype)
            assert not isinstance(theirs, str), (entry["name"], engine, theirs)
            assert ours == theirs, (entry["name"], engine, ours if isinstance(ours, str) else "")


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["config"]["model_type"] == "jamba"],
                         ids=lambda e: e["name"])  # fmt: skip
def test_jamba_geometry_at_tp4(entry: dict[str, Any]) -> None:
    """What vLLM builds for the released Jamba layout: attention at layers 4, 12, 20, 28 (2 KV
    heads of 128 per rank at TP 4), Mamba-1 everywhere else with (3, 2048) conv and (2048, 16) SSM
    states per rank (expand 2 x hidden 4096 = 8192 inner channels over 4 ranks)."""
    layers = _theirs(entry["config"], {"tp": 4, "pp": 1}, "bfloat16")
    assert isinstance(layers, list) and _ours(entry["config"], {"tp": 4, "pp": 1}, "bfloat16") == layers
    attn = [x for x in layers if x["kind"] != "mamba"]
    state = [x for x in layers if x["kind"] == "mamba"]
    assert [x["name"] for x in attn] == [f"model.layers.{i}.attn" for i in (4, 12, 20, 28)], attn
    assert {(x["num_kv_heads"], x["head_size"]) for x in attn} == {(2, 128)}
    assert len(state) == 28 and {str(x["state_shapes"]) for x in state} == {"[[3, 2048], [2048, 16]]"}, state[0]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_published_config_refused_as_sglang_refuses_it(oracle: ModelOracle, entry: dict[str, Any]) -> None:
    """SGLang 0.5.23 cannot serve Jamba (no class; its Transformers backend refuses the model):
    kvbudget refuses the same checkpoint, naming that reason."""
    cfg = entry["config"]
    theirs = oracle.resolve(dict(cfg), False)
    assert isinstance(theirs, tuple) and theirs[0] == "error", (entry["name"], theirs)
    assert "does not support custom attention backends" in theirs[1], theirs
    with pytest.raises(ConfigError, match="no custom attention backend support"):
        resolve_sglang(dict(cfg))


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_plan_config_refuses_in_sglang_mode_and_plans_in_vllm_mode(tmp_path: Path, entry: dict[str, Any]) -> None:
    """``kvbudget plan CONFIG``: SGLang mode refuses the checkpoint with SGLang's reason (it once read
    Jamba's Mamba layers as 32 full-attention layers and planned them); ``--engine vllm`` plans vLLM's
    4 attention and 28 Mamba layers, its note naming SGLang's refusal."""
    from cli_helpers import run

    path = tmp_path / "config.json"
    path.write_text(json.dumps(entry["config"]))
    r = run("plan", str(path), "--available", "20GiB")
    assert r.returncode == 1 and "no custom attention backend support" in r.stderr, r.stderr
    r = run("plan", str(path), "--engine", "vllm", "--available", "20GiB", "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    kinds = [x["kind"] for x in doc["vllm_layers"]]
    assert (kinds.count("mamba"), len(kinds) - kinds.count("mamba")) == (28, 4), kinds
    assert "no custom attention backend support" in doc["model"]["sglang_refusal"]
