"""``speculative_method="mtp"`` on a target vLLM 0.33.0 has no MTP drafter for: vLLM's own
failure by name (:mod:`kvbudget.vllm.mtp_method`), held to vLLM's code from the pinned wheel.

For every architecture of vLLM's text-generation and multimodal registries, each config the
registry census builds for it (``tests/census.py``; up to three) is loaded as vLLM loads it and
rewritten by the lifted ``SpeculativeConfig.hf_config_override``; vLLM keeps the method where the
rewritten model type is one of the lifted ``MTPModelTypes``. :func:`takes_mtp` must give the same
answer on the saved dict, and :func:`layers_from_hf_config` must refuse with vLLM's message exactly
where vLLM does (and never where it does not).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from census import census_configs, vllm_architectures
from kvbudget import vllm
from kvbudget.errors import InvalidConfigError
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.mtp_method import MTP_MODEL_TYPES, takes_mtp
from vllm_oracle._fetch import vllm_root
from vllm_oracle._hf import _env, _root, vllm_load_config

_REFUSAL = "Unsupported speculative method: 'mtp'"


def _vllm_takes_mtp(saved: dict[str, Any]) -> bool | str:
    """vLLM's decision on ``saved``: whether the rewritten model type keeps ``mtp``; a string
    where loading or rewriting the config fails (vLLM's failure, not this decision). A saved
    dict without a model type (a remote-code builder's) takes the one its class loads with."""
    env = _env(_root())
    try:
        loaded = vllm_load_config(saved)
        saved.setdefault("model_type", loaded.model_type)
        rewritten = env.cfg["hf_config_override"](copy.deepcopy(loaded))
    except Exception as exc:  # noqa: BLE001 - vLLM's own failure on the config
        return f"{type(exc).__name__}: {exc}"
    return rewritten.model_type in env.cfg["mtp_model_types"]


def test_the_mtp_model_types_are_vllms() -> None:
    assert MTP_MODEL_TYPES == _env(_root()).cfg["mtp_model_types"]


def test_takes_mtp_is_vllms_decision_on_every_registry_architecture() -> None:
    counts = {"configs": 0, "kept": 0, "refused": 0, "vLLM fails first": 0}
    mismatches: list[str] = []
    engine = vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1)
    for _, arch in vllm_architectures(vllm_root()):
        for saved in map(dict, census_configs(arch)[1][:3]):
            theirs = _vllm_takes_mtp(saved)
            if isinstance(theirs, str):
                counts["vLLM fails first"] += 1
                continue
            counts["configs"] += 1
            counts["kept" if theirs else "refused"] += 1
            if takes_mtp(saved) != theirs:
                mismatches.append(f"{arch} ({saved.get('model_type')}): vLLM keeps mtp: {theirs}")
                continue
            try:
                layers_from_hf_config(saved, engine)
                why = ""
            except InvalidConfigError as exc:
                why = str(exc)
            if (_REFUSAL in why) == theirs:  # refused by name exactly where vLLM refuses
                mismatches.append(f"{arch}: vLLM keeps mtp: {theirs}; kvbudget: {why[:120] or 'planned'}")
    print(counts)
    assert not mismatches, "\n".join(mismatches[:20])
    # Both answers are reached, and most architectures have no MTP drafter.
    assert counts["kept"] >= 20 and counts["refused"] >= 100


@pytest.mark.parametrize(("name", "config"), [
    ("qwen3.5-9b", {}),
    ("nvidia-nemotron-nano-9b-v2", {"num_nextn_predict_layers": 1}),
    ("falcon-h1-7b-instruct", None),
    ("kimi-linear-48b-a3b-instruct", None),
    ("lfm2-1.2b", None),
    ("jamba-v0.1", None),
])  # fmt: skip
def test_the_hybrid_state_families(name: str, config: dict[str, Any] | None) -> None:
    """The issue's families: Qwen3.5 and Nemotron-H (with MTP layers) plan their MTP drafter; the
    others are vLLM's refusal by name, not a kvbudget gap."""
    from kvbudget.models.hybrid_state import get_hybrid_state_model

    saved = dict(get_hybrid_state_model(name).config)
    engine = vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1)
    if config is None:
        with pytest.raises(InvalidConfigError, match=_REFUSAL):
            layers_from_hf_config(saved, engine)
        assert _vllm_takes_mtp(saved) is False
        return
    saved.update(config)
    assert any(x.is_draft for x in layers_from_hf_config(saved, engine)) and _vllm_takes_mtp(saved) is True
