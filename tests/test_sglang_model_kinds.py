"""The architecture and model-type sets kvbudget's SGLang-mode resolution keys on, held to the
pinned SGLang 0.5.23 wheel: which architectures ``ModelConfig._derive_model_shapes`` serves with
MLA (and which of those leave ``v_head_dim`` at its default), and which model types
``configs/hybrid_arch.py``'s ``mambaish_config`` plans with a state pool. A set that misses one
would let kvbudget plan that model with the wrong pools; the census (``tests/census.py``) found
ten MLA architectures and two state model types that way.
"""

from __future__ import annotations

import ast

import pytest

from kvbudget.models.hf import ConfigError
from kvbudget.sglang.dsa import MLA_ARCHITECTURES, MLA_DEFAULT_V_HEAD_DIM, UNCHECKED_MLA_ARCHITECTURES
from kvbudget.sglang.model import (
    _STATE_MODELS,
    _STATEFUL,
    PURE_SSM_ARCHITECTURES,
    UNRESOLVED_STATE_TYPES,
    resolve_sglang,
)
from kvbudget.models.hf import _TEXT_MODEL_TYPE
from sglang_oracle._configs import REAL, ConfigClasses
from sglang_oracle._fetch import sglang_root
from sglang_oracle._plumbing import Builder


def _mla_branches() -> list[tuple[frozenset[str], bool]]:
    """(architectures named in the test, whether the body sets v_head_dim) of each branch of
    ``_derive_model_shapes`` that sets ``self.attention_arch = AttentionArch.MLA``."""
    tree = ast.parse((sglang_root() / "sglang/srt/configs/model_config.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelConfig")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_derive_model_shapes")
    branches: list[tuple[frozenset[str], bool]] = []

    def visit(node: ast.If) -> None:
        assigned = {ast.unparse(t): ast.unparse(s.value) for s in node.body if isinstance(s, ast.Assign) for t in s.targets}
        if assigned.get("self.attention_arch") == "AttentionArch.MLA":
            names = frozenset(c.left.value for c in ast.walk(node.test) if isinstance(c, ast.Compare)
                              and isinstance(c.left, ast.Constant) and isinstance(c.left.value, str))  # fmt: skip
            branches.append((names, "self.v_head_dim" in assigned))
        for other in node.orelse:
            if isinstance(other, ast.If):
                visit(other)

    for node in fn.body:
        if isinstance(node, ast.If):
            visit(node)
    return branches


def test_mla_architectures_are_the_wheels() -> None:
    branches = _mla_branches()
    served = frozenset().union(*(names for names, _ in branches))
    assert len(branches) >= 8 and "DeepseekV3ForCausalLM" in served
    assert MLA_ARCHITECTURES | UNCHECKED_MLA_ARCHITECTURES == served
    assert not MLA_ARCHITECTURES & UNCHECKED_MLA_ARCHITECTURES
    default_v = frozenset().union(*(names for names, sets_v in branches if not sets_v)) & MLA_ARCHITECTURES
    assert default_v == MLA_DEFAULT_V_HEAD_DIM


def _state_model_types() -> set[str]:
    """Model types whose SGLang config class is, or subclasses, a class ``mambaish_config`` matches."""
    b = Builder(sglang_root(), real=REAL)
    classes = ConfigClasses(b)
    tree = ast.parse((sglang_root() / "sglang/srt/configs/hybrid_arch.py").read_text(encoding="utf-8"))
    matched = [classes.cls(a.name) for node in tree.body if isinstance(node, ast.ImportFrom)
               and node.module == "sglang.srt.configs" for a in node.names]  # fmt: skip
    types = {str(c.model_type) for c in matched}
    for name in classes._registry_class_names():
        try:
            cls = classes.cls(name)
        except Exception:  # noqa: BLE001 - a config module the oracle cannot execute (not a state class)
            continue
        if any(issubclass(cls, m) for m in matched):
            types.add(str(cls.model_type))
    return types


def test_state_model_types_are_the_wheels() -> None:
    """Every model type SGLang plans a state pool for is resolved by kvbudget (its layers read; the
    pure state models' none), or refused as unresolved; none is planned as plain KV."""
    wheel = _state_model_types()
    assert {"qwen3_next", "nemotron_h", "zaya", "bailing_hybrid", "mamba", "mamba2", "falcon_mamba"} <= wheel
    resolved = set(_STATE_MODELS) | {"granitemoehybrid"} | {o for o, t in _TEXT_MODEL_TYPE.items() if t in _STATE_MODELS}
    assert not _STATEFUL & PURE_SSM_ARCHITECTURES
    assert wheel <= resolved | UNRESOLVED_STATE_TYPES, sorted(wheel - resolved - UNRESOLVED_STATE_TYPES)
    assert not resolved & UNRESOLVED_STATE_TYPES


@pytest.mark.parametrize(("model_type", "arch", "why"), [
    ("qwen4_exp", "Qwen4ExpForConditionalGeneration", "PLE short-conv and N-gram states"),
    ("jet_nemotron", "JetNemotronForCausalLM", "whose layers kvbudget does not resolve"),
])  # fmt: skip
def test_unresolved_state_models_are_refused(model_type: str, arch: str, why: str) -> None:
    cfg = {"model_type": model_type, "architectures": [arch], "num_hidden_layers": 4, "num_attention_heads": 8,
           "hidden_size": 512}  # fmt: skip
    with pytest.raises(ConfigError, match=f"model type {model_type}.*state pool.*{why}"):
        resolve_sglang(cfg)
