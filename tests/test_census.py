"""The registry census (``tests/census.py``) on every CI run: no architecture of SGLang 0.5.23's
or vLLM 0.33.0's registries is planned differently from the engine's own reading, and the
committed table (``docs/census.md``) and the README's counts are the ones it measures."""

from __future__ import annotations

from census import OUT, REPO, Verdict, census, counts, render, summary


def test_no_architecture_is_planned_differently() -> None:
    failures = [f"{r.engine} {r.architecture} ({r.config}): {r.verdict.value}: {r.detail}"
                for r in census() if r.verdict.failure]  # fmt: skip
    assert not failures, "\n".join(failures)


def test_the_census_reads_both_registries_whole() -> None:
    rows = census()
    assert sum(counts(rows, "sglang").values()) >= 190 and sum(counts(rows, "vllm").values()) >= 240
    equal = {(r.engine, r.architecture) for r in rows if r.verdict is Verdict.EQUAL}
    assert {("sglang", "LlamaForCausalLM"), ("vllm", "LlamaForCausalLM"), ("sglang", "Qwen3NextForCausalLM"),
            ("vllm", "DeepseekV3ForCausalLM")} <= equal  # fmt: skip


def test_the_committed_table_is_current() -> None:
    assert OUT.read_text(encoding="utf-8") == render(census()), "docs/census.md is stale: run python tests/census.py"


def test_the_readme_states_the_counts() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert summary(census()) in readme, f"README.md should say: {summary(census())}"
