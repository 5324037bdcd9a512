"""``kvbudget.vllm.models.layers_from_hf_config`` held to vLLM 0.33.0's own reading of a config.

The configs are the model-resolution differential's (tests/sglang_model_cases.py:
transformers 5.19.0's classes, seeded variants, saved with every key and sparse
as released checkpoints are), for the families kvbudget's vLLM mode reads, each
with a seeded TP, PP and drafter (EAGLE / EAGLE3 heads of Llama architecture,
some with sliding layers; DeepSeek's MTP layers). kvbudget reads the saved dict;
the oracle (tests/vllm_oracle/_hf.py, vLLM's lifted code) reads the
transformers object vLLM would load from that file. Every layer's name, kind,
heads per rank, head sizes, window or chunk, drafter flag and stage are
compared; a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import transformers as T
from sglang_model_cases import DEFAULTS, FAMILIES
from vllm_oracle._hf import VllmLoadError, vllm_layers

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import ARCHITECTURES, EAGLE3_ARCHITECTURES, EAGLE3_PP_ARCHITECTURES, layers_from_hf_config
from kvbudget.vllm.state_models import STATE_ARCHITECTURES

N = int(os.environ.get("KVBUDGET_VLLM_MODEL_CASES", "40"))
_UNIFORM = ("qwen3_moe", "qwen2_moe", "mixtral", "phimoe", "glm4_moe", "minimax_m2", "gemma", "granite", "granite_swa", "phi3",
            "exaone4", "mimo", "olmoe", "granitemoe", "granitemoeshared", "glm4", "ernie4_5", "ernie4_5_moe",
            "hyperclovax", "apertus", "stablelm", "afmoe")  # fmt: skip
_FAMILIES = ("gemma2", "gemma3", "cohere2", "mistral", "qwen2", "qwen3", "llama", "llama4", "gpt_oss", "deepseek_v3",
             *_UNIFORM)  # fmt: skip
_DEFAULTS = ("gemma2", "gemma3", "gemma3_text", "cohere2", "mistral", "qwen2", "qwen3", "llama", "llama4",
             "llama4_text", "gpt_oss", "deepseek_v3", *(f for f in _UNIFORM if f in DEFAULTS))  # fmt: skip
_FIELDS = ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
           "is_draft", "pp_stage")  # fmt: skip

Case = tuple[str, dict[str, Any], dict[str, Any]]


def _load(saved: dict[str, Any]) -> Any:
    """The transformers object vLLM loads from ``saved`` (its config.json): the model type's class."""
    d = dict(saved)
    return T.CONFIG_MAPPING[d["model_type"]].from_dict(d)


def _draft(rng: random.Random, target: dict[str, Any]) -> dict[str, Any]:
    n = rng.choice([1, 1, 2])
    heads = rng.choice([8, 16, 32])
    arch = rng.choice(["LlamaForCausalLM", "LlamaForCausalLMEagle3"])  # EAGLE renames the first, refuses the second
    d: dict[str, Any] = {"model_type": "llama", "architectures": [arch], "num_hidden_layers": n,
                         "num_attention_heads": heads, "num_key_value_heads": rng.choice([1, 4, 8, heads]),
                         "hidden_size": heads * rng.choice([64, 128])}  # fmt: skip
    if rng.random() < 0.5:
        d["head_dim"] = rng.choice([64, 128, 256])
    if rng.random() < 0.3:
        d["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) for _ in range(n)]
        d["sliding_window"] = rng.choice([512, 2048])
    aux = rng.random()  # EAGLE3 heads read the target's aux hidden states unless eagle_config says not
    if aux < 0.3:
        d["eagle_config"] = {"use_aux_hidden_state": aux < 0.2 and rng.random() < 0.5}
    return d


def _engine(rng: random.Random, family: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    engine: dict[str, Any] = {"tp": rng.choice([1, 1, 2, 4, 8, 16]), "pp": rng.choice([1, 1, 1, 2, 3])}
    r = rng.random()
    if family == "deepseek_v3" and r < 0.4:
        engine.update(speculative_method="mtp", num_speculative_tokens=rng.choice([1, 1, 2, 3]))
    elif r < 0.5:
        engine.update(speculative_method=rng.choice(["eagle", "eagle3"]), num_speculative_tokens=3)
        if rng.random() < 0.2:  # the target's windows off; an EAGLE drafter's own stay
            engine["disable_sliding_window"] = True
        return engine, {}
    return engine, None


def cases(per_family: int, seed: int = 0) -> Iterator[Case]:
    """Class defaults, then ``per_family`` seeded variants (every key and sparse) per family."""
    for name in _DEFAULTS:
        cls, arch = DEFAULTS[name]
        yield name, {**cls().to_dict(), "architectures": [arch]}, {"tp": 1, "pp": 1}
    for family in _FAMILIES:
        rng = random.Random(f"vllm:{seed}:{family}")
        for _ in range(per_family):
            built = FAMILIES[family](rng)
            if "index_topk" in built.extra:
                continue  # DSA (an indexer cache): outside kvbudget's vLLM mode
            for sparse in (False, True):
                engine, draft = _engine(rng, family)
                if draft is not None:
                    engine["draft"] = _draft(rng, built.saved(False))
                saved = built.saved(sparse)
                if engine.get("speculative_method") == "mtp" and rng.random() < 0.5:  # n_predict 2: 3 tokens refused
                    saved["num_nextn_predict_layers"] = 2
                if sparse and rng.random() < 0.5:  # many released configs carry no layer_types
                    saved.pop("layer_types", None)
                    if isinstance(saved.get("text_config"), dict):
                        saved["text_config"].pop("layer_types", None)
                yield family, saved, engine


def _ours(saved: dict[str, Any], settings: dict[str, Any],
          fields: tuple[str, ...] = _FIELDS) -> list[dict[str, Any]] | str:  # fmt: skip
    """kvbudget's layers of ``saved`` (``fields`` of each), or its refusal; ``settings`` are the
    engine's, plus ``draft``, ``disable_sliding_window`` and ``kv_cache_dtype`` (default ``auto``)."""
    s = dict(settings)
    draft, off = s.pop("draft", None), s.pop("disable_sliding_window", False)
    dtype = s.pop("kv_cache_dtype", "auto")
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(**s), draft=draft, kv_cache_dtype=dtype,
                                       disable_sliding_window=off)  # fmt: skip
    except InvalidConfigError as e:
        return f"refused: {e}"
    return [{k: getattr(x, k) for k in fields} for x in layers]


def _theirs(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    s = dict(settings)
    draft = s.pop("draft", None)
    try:
        layers = vllm_layers(_load(saved), tp=s["tp"], pp=s["pp"], draft_config=None if draft is None else _load(draft),
                             disable_sliding_window=s.get("disable_sliding_window", False),
                             use_v2_model_runner=s.get("use_v2_model_runner", True),
                             method=s.get("speculative_method"),
                             num_speculative_tokens=s.get("num_speculative_tokens"))  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"
    return [{k: x[k] for k in _FIELDS} for x in layers]


def test_layers_equal_vllms_reading_of_the_config() -> None:
    mismatches: list[str] = []
    counts = {"compared": 0, "refused": 0, "layers": 0, "drafted": 0}
    for i, (family, saved, settings) in enumerate(cases(N)):
        ours = _ours(saved, settings)
        counts["compared"] += 1
        if _load(saved).get_text_config().num_attention_heads % settings["tp"]:
            # vLLM's QKVParallelLinear divides the heads by TP (`divide` asserts); the oracle
            # stubs the linear layers, so this refusal is checked here, not against it.
            if not isinstance(ours, str):
                mismatches.append(f"case {i} ({family}, {settings}): kvbudget read heads that TP does not divide")
            counts["refused"] += 1
            continue
        theirs = _theirs(saved, settings)
        if isinstance(ours, str) or isinstance(theirs, str):
            if isinstance(ours, str) != isinstance(theirs, str):
                mismatches.append(f"case {i} ({family}, {settings}): kvbudget {str(ours)[:200]} vs vLLM {str(theirs)[:200]}")
            else:
                counts["refused"] += 1
            continue
        counts["layers"] += len(theirs)
        counts["drafted"] += any(x["is_draft"] for x in theirs)
        if ours != theirs:
            diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)} layers")
            mismatches.append(f"case {i} ({family}, {settings}): {diff}")
    print(f"\nvLLM model reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    # refusals by design: EAGLE3 heads on targets without the interface, drafters vLLM renames or refuses
    assert counts["drafted"] > N and counts["refused"] < counts["compared"] * 2 // 5, counts


def test_eagle3_targets_are_the_wheels_supports_eagle3_classes() -> None:
    """:data:`EAGLE3_ARCHITECTURES` is every architecture kvbudget reads whose vLLM 0.33.0 class
    derives from ``SupportsEagle3``, its bases read from the pinned model files."""
    from vllm_oracle import _hf
    from vllm_oracle._interfaces import supports

    root = _hf._root()
    env = _hf._env(root)
    read = set(ARCHITECTURES) | set(STATE_ARCHITECTURES)
    assert {a for a in read if supports(root, env.registry, a, "SupportsEagle3")} == EAGLE3_ARCHITECTURES
    assert EAGLE3_ARCHITECTURES < read and "Gemma3ForConditionalGeneration" not in EAGLE3_ARCHITECTURES


@pytest.mark.parametrize("family", ["gemma3", "cohere2", "llama", "qwen3"])
def test_eagle3_startup_refused_as_vllm_refuses_it(family: str) -> None:
    """An EAGLE3 head reading aux hidden states (by default, or ``use_aux_hidden_state: true``)
    on a target that is not ``SupportsEagle3`` is refused as vLLM's ``load_model`` refuses it (its
    check lifted); ``use_aux_hidden_state: false`` starts on any target."""
    cls, arch = DEFAULTS[family]
    saved = {**cls().to_dict(), "architectures": [arch]}
    head = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
            "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 1024}  # fmt: skip
    refused = arch not in EAGLE3_ARCHITECTURES
    for eagle_config, starts in ((None, not refused), ({"use_aux_hidden_state": True}, not refused),
                                 ({"use_aux_hidden_state": False}, True)):  # fmt: skip
        draft = head if eagle_config is None else {**head, "eagle_config": eagle_config}
        settings = {"tp": 1, "pp": 1, "speculative_method": "eagle3", "num_speculative_tokens": 2, "draft": draft}
        ours, theirs = _ours(saved, settings), _theirs(saved, settings)
        assert isinstance(theirs, str) != starts, (family, eagle_config, theirs)
        assert ours == theirs if starts else "does not support EAGLE3 interface" in str(ours), (family, ours)


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "qwen3", "llama4", "llama4_text", "gpt_oss",
                                    "deepseek_v3", "qwen3_moe", "granite", "phi3", "apertus", "afmoe"])  # fmt: skip
def test_eagle3_over_pipeline_stages_as_vllm_starts_it(family: str) -> None:
    """Model Runner V2 (vLLM's default) starts an EAGLE3 head that reads aux hidden states on a
    ``SupportsEagle3`` target split over pipeline stages only when the target's decoder sets
    ``supports_aux_hidden_states_over_pp`` (``set_eagle3_aux_hidden_state_layers``, lifted, on the
    decoder the oracle builds): :data:`EAGLE3_PP_ARCHITECTURES`. One stage, Model Runner V1, or a
    head without aux hidden states start on any of them."""
    cls, arch = DEFAULTS[family]
    saved = {**cls().to_dict(), "architectures": [arch]}
    head = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
            "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 1024}  # fmt: skip
    assert arch in EAGLE3_ARCHITECTURES
    for pp, v2, draft, starts in ((2, True, head, arch in EAGLE3_PP_ARCHITECTURES), (1, True, head, True),
                                  (2, False, head, True),
                                  (2, True, {**head, "eagle_config": {"use_aux_hidden_state": False}}, True)):  # fmt: skip
        settings = {"tp": 1, "pp": pp, "speculative_method": "eagle3", "num_speculative_tokens": 2, "draft": draft,
                    "use_v2_model_runner": v2}  # fmt: skip
        ours, theirs = _ours(saved, settings), _theirs(saved, settings)
        assert isinstance(theirs, str) != starts, (family, pp, v2, theirs)
        assert ours == theirs if starts else "does not support eagle3 with pipeline parallelism" in str(ours), ours


def test_out_of_scope_architectures_are_refused_by_name() -> None:
    with pytest.raises(InvalidConfigError, match="Qwen4ExpForCausalLM"):
        layers_from_hf_config({"architectures": ["Qwen4ExpForCausalLM"], "num_hidden_layers": 2})
    with pytest.raises(InvalidConfigError, match="draft="):
        layers_from_hf_config({**T.LlamaConfig().to_dict(), "architectures": ["LlamaForCausalLM"]},
                              vllm.EngineConfig(speculative_method="eagle3"))  # fmt: skip


def test_a_deepseek_config_with_a_dsa_indexer_is_refused() -> None:
    """vLLM's DeepSeek model builds the DSA indexer (and its cache) whenever the config has
    ``index_topk`` (the census found kvbudget planning such a DeepSeek-V3 config as plain MLA)."""
    cfg = {**T.DeepseekV3Config(num_hidden_layers=4).to_dict(), "architectures": ["DeepseekV3ForCausalLM"]}
    assert [x.kind for x in layers_from_hf_config(cfg)] == ["mla"] * 4
    with pytest.raises(InvalidConfigError, match="DSA indexer"):
        layers_from_hf_config({**cfg, "index_topk": 2048, "index_head_dim": 128})


def test_every_name_vllm_serves_with_a_read_class_is_read() -> None:
    """:data:`~kvbudget.vllm.models.SERVED_AS` is the wheel's registry: each name vLLM serves with
    the class of an architecture kvbudget reads; those with a transformers config class read as
    vLLM builds them (Cohere's first Command R through the Cohere 2 class, Ministral 3)."""
    from vllm_oracle import _hf

    from kvbudget.vllm.models import SERVED_AS

    registry = _hf._env(_hf._root()).registry
    for arch, served in SERVED_AS.items():
        assert registry[arch] == registry[served], arch
    assert {"CohereForCausalLM", "Ministral3ForCausalLM", "InternLM3ForCausalLM"} <= set(SERVED_AS)
    rng = random.Random("served-as")
    for cls, arch in ((T.CohereConfig, "CohereForCausalLM"), (T.Ministral3Config, "Ministral3ForCausalLM")):
        for _ in range(6):
            kw = {"num_hidden_layers": rng.randint(1, 12), "num_attention_heads": 16,
                  "num_key_value_heads": rng.choice([1, 4, 16]), "hidden_size": 16 * rng.choice([64, 128])}  # fmt: skip
            saved = {**cls(**kw).to_dict(), "architectures": [arch]}
            settings = {"tp": rng.choice([1, 2, 4]), "pp": rng.choice([1, 2])}
            ours, theirs = _ours(saved, settings), _theirs(saved, settings)
            assert not isinstance(theirs, str) and ours == theirs, (arch, settings, ours, theirs)


def test_a_qwen_moe_sliding_window_is_refused_as_unchecked() -> None:
    """Qwen2-MoE / Qwen3-MoE with ``use_sliding_window``: transformers derives the layer kinds from
    ``max_window_layers`` in its own way, which kvbudget has not checked against vLLM."""
    for cls, arch in ((T.Qwen3MoeConfig, "Qwen3MoeForCausalLM"), (T.Qwen2MoeConfig, "Qwen2MoeForCausalLM")):
        cfg = {**cls(num_hidden_layers=4).to_dict(), "architectures": [arch]}
        assert [x.kind for x in layers_from_hf_config(cfg)] == ["full"] * 4
        with pytest.raises(InvalidConfigError, match="has not checked.*use_sliding_window"):
            layers_from_hf_config({**cfg, "use_sliding_window": True, "sliding_window": 4096})


def test_heads_a_rank_cannot_group_over_its_kv_heads_are_refused_as_vllm_refuses_them() -> None:
    """vLLM's ``Attention`` asserts each rank's query heads divide by its KV heads: 12 heads over 8 KV
    heads (TP 1) or 24 over 16 at TP 2 fail to build; 12 over 4 plan. kvbudget refuses the same."""
    import transformers as T

    for heads, kv, tp, ok in ((12, 8, 1, False), (24, 16, 2, False), (12, 4, 1, True), (16, 8, 2, True)):
        saved = {**T.LlamaConfig(num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv,
                                 hidden_size=heads * 64).to_dict(), "architectures": ["LlamaForCausalLM"]}  # fmt: skip
        ours, theirs = _ours(saved, {"tp": tp, "pp": 1}), _theirs(saved, {"tp": tp, "pp": 1})
        assert isinstance(ours, str) == isinstance(theirs, str) == (not ok), (heads, kv, tp, ours, theirs)
        if not ok:
            assert "is not divisible by num_kv_heads" in ours and "is not divisible by num_kv_heads" in theirs
