"""The generated data files are what their tools derive from the pinned sources:
``data/hf_defaults.json`` (``tools/gen_hf_defaults.py``), ``data/sglang_architectures.json``
(``tools/gen_sglang_archs.py``) and ``data/vllm_architectures.json`` (``tools/gen_vllm_archs.py``)."""

from __future__ import annotations

from oracle_kit.tools import load_tool as _tool


def test_committed_defaults_are_current() -> None:
    tool = _tool("gen_hf_defaults")
    assert tool.OUT.read_text() == tool.render(tool.generate()), "run tools/gen_hf_defaults.py"


def test_committed_sglang_architectures_are_current() -> None:
    from kvbudget.sglang.model import sglang_architectures

    tool = _tool("gen_sglang_archs")
    names = tool.entry_classes(tool._root())
    assert tool.OUT.read_text() == tool.render(names), "run tools/gen_sglang_archs.py"
    assert sglang_architectures() == frozenset(names) and "Gemma3ForConditionalGeneration" in names


def test_committed_vllm_architectures_are_current() -> None:
    from kvbudget.vllm.registry import registry

    tool = _tool("gen_vllm_archs")
    root = tool._root()
    tables = tool.registry(root)
    assert tool.OUT.read_text() == tool.render(tables, tool.wrappers(root, tables)), "run tools/gen_vllm_archs.py"
    assert registry()["Ministral3ForCausalLM"] == ("mistral", "MistralForCausalLM") and len(registry()) > 240
