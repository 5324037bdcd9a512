"""``kvbudget.vllm.layers_from_hf_config`` on the classic decoders (GPT-2, GPT-J, OPT, BLOOM, Falcon,
ChatGLM), held to vLLM 0.33.0's own model classes (``tests/vllm_oracle``: ``GPT2LMHeadModel``,
``GPTJForCausalLM``, ``OPTForCausalLM``, ``BloomForCausalLM``, ``FalconForCausalLM``,
``ChatGLMForCausalLM``, their ``__init__`` kept to the decoder they build and their asserts on the
config).

The configs are transformers 5.19.0's classes (vLLM's own ``ChatGLMConfig`` for ChatGLM): the defaults, then seeded variants of the layer
count, heads and width (Falcon's ``new_decoder_architecture`` / ``multi_query`` / ``alibi``
variants, BLOOM's and Falcon's legacy ``n_embed``), some with what the classes refuse (GPT-2's
cross attention, GPT-J's tied embeddings or odd ``rotary_dim``, a width the heads do not divide,
Falcon KV heads that do not divide the heads or the TP) or a stray model-wide ``sliding_window``,
saved with every key and sparse (the class defaults left out), each with a seeded TP (dividing the
heads or not), PP, ``--kv-cache-dtype`` and ``--disable-sliding-window``. Every layer's name,
kind, stage, heads per rank, head sizes, window and KV dtype are compared (Falcon's layers are
built without the cache config: no window, ``auto`` whatever the flag); a refusal on one side only
is a mismatch.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import test_vllm_models
import transformers as T
from huggingface_hub.errors import StrictDataclassClassValidationError
from vllm_oracle._hf import VllmLoadError, vllm_config_class, vllm_layers
from vllm_reading import assert_families_agree, judge_families

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import ARCHITECTURES, layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_CLASSIC_CASES", "60"))
_FIELDS = ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
           "is_draft", "pp_stage", "kv_cache_dtype")  # fmt: skip
Case = tuple[str, dict[str, Any], dict[str, Any]]


def _heads(rng: random.Random) -> tuple[int, int]:
    heads = rng.choice([8, 12, 16, 16, 32, 40, 64, 71])
    return heads, heads * rng.choice([32, 64, 64, 128])


def _gpt2(rng: random.Random) -> dict[str, Any]:
    heads, hidden = _heads(rng)
    kw: dict[str, Any] = {"n_layer": rng.randint(1, 48), "n_head": heads, "n_embd": hidden}
    if rng.random() < 0.1:
        kw[rng.choice(["add_cross_attention", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"])] = True
    return T.GPT2Config(**kw).to_dict()


def _gptj(rng: random.Random) -> dict[str, Any]:
    heads, hidden = _heads(rng)
    kw: dict[str, Any] = {"n_layer": rng.randint(1, 48), "n_head": heads, "n_embd": hidden,
                          "rotary_dim": rng.choice([32, 64, 64, 64, 33]),
                          "tie_word_embeddings": rng.random() < 0.1}  # fmt: skip
    d = T.GPTJConfig(**kw).to_dict()
    if rng.random() < 0.1:
        d["rotary"] = rng.choice([False, True])
    return d


def _opt(rng: random.Random) -> dict[str, Any]:
    heads, hidden = _heads(rng)
    return T.OPTConfig(num_hidden_layers=rng.randint(1, 64), num_attention_heads=heads, hidden_size=hidden,
                       ffn_dim=4 * hidden, word_embed_proj_dim=rng.choice([None, 512])).to_dict()  # fmt: skip


def _bloom(rng: random.Random) -> dict[str, Any]:
    heads, hidden = _heads(rng)
    if rng.random() < 0.1:
        hidden += rng.choice([8, 100])  # not a multiple of the heads: BloomAttention asserts
    d = T.BloomConfig(n_layer=rng.randint(1, 70), n_head=heads, hidden_size=hidden).to_dict()
    if rng.random() < 0.3:  # the released checkpoints' legacy name
        d["n_embed"] = d.pop("hidden_size")
    return d


def _falcon(rng: random.Random) -> dict[str, Any]:
    heads, hidden = _heads(rng)
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 80), "num_attention_heads": heads, "hidden_size": hidden,
                          "new_decoder_architecture": rng.random() < 0.5, "multi_query": rng.random() < 0.6,
                          "alibi": rng.random() < 0.2}  # fmt: skip
    if rng.random() < 0.7:
        kw["num_kv_heads"] = rng.choice([1, 2, 4, 8, 8, heads, 3])
    d = T.FalconConfig(**kw).to_dict()
    if rng.random() < 0.1:  # not a multiple of the heads (Falcon asserts), or an odd head (transformers refuses)
        d["hidden_size"] = hidden + rng.choice([heads // 2, heads])
    if rng.random() < 0.2:
        d["n_embed"] = d.pop("hidden_size")
    return d


def _chatglm_config(**kw: Any) -> Any:
    """vLLM's own ``ChatGLMConfig`` (lifted from the wheel: the class vLLM loads ``chatglm`` with)."""
    return vllm_config_class("chatglm")(**kw)


def _chatglm(rng: random.Random) -> dict[str, Any]:
    """ChatGLM2/3 and GLM-4 (``ChatGLMModel``), with the keys their files carry beyond vLLM's class
    (``original_rope``, left out now and then: GLMAttention reads it), some with a vision config
    (GLM-4V, which the text class refuses)."""
    heads, hidden = _heads(rng)
    d = _chatglm_config(num_layers=rng.randint(1, 48), num_attention_heads=heads, hidden_size=hidden,
                        kv_channels=hidden // heads, multi_query_attention=rng.random() < 0.8,
                        multi_query_group_num=rng.choice([1, 2, 2, 4, 8, 3])).to_dict()  # fmt: skip
    if rng.random() < 0.9:
        d["original_rope"] = True
    if rng.random() < 0.05:
        d["vision_config"] = {"hidden_size": 1792}
    return d


#: family -> (config class, architecture, seeded config builder)
FAMILIES: dict[str, tuple[Any, str, Callable[[random.Random], dict[str, Any]]]] = {
    "gpt2": (T.GPT2Config, "GPT2LMHeadModel", _gpt2),
    "gptj": (T.GPTJConfig, "GPTJForCausalLM", _gptj),
    "opt": (T.OPTConfig, "OPTForCausalLM", _opt),
    "bloom": (T.BloomConfig, "BloomForCausalLM", _bloom),
    "falcon": (T.FalconConfig, "FalconForCausalLM", _falcon),
    "chatglm": (_chatglm_config, "ChatGLMModel", _chatglm),
}


def _sparse(d: dict[str, Any], cls: Any) -> dict[str, Any]:
    defaults = cls().to_dict()
    return {k: v for k, v in d.items() if k == "model_type" or k not in defaults or defaults[k] != v}


def cases(per_family: int, seed: int = 0) -> Iterator[Case]:
    """Class defaults, then ``per_family`` seeded variants (every key and sparse) per family."""
    for family, (cls, arch, build) in FAMILIES.items():
        yield family, {**cls().to_dict(), "architectures": [arch]}, {"tp": 1, "pp": 1}
        rng = random.Random(f"vllm-classic:{seed}:{family}")
        for _ in range(per_family):
            full = build(rng)
            if rng.random() < 0.1:  # a stray model-wide window: CacheConfig.sliding_window
                full["sliding_window"] = rng.choice([512, 4096])
            for sparse in (False, True):
                saved = {**(_sparse(full, cls) if sparse else full), "architectures": [arch]}
                engine = {"tp": rng.choice([1, 1, 2, 4, 8, 16]), "pp": rng.choice([1, 1, 1, 2, 3]),
                          "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                          "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
                yield family, saved, engine


def _ours(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    return test_vllm_models._ours(saved, settings, _FIELDS)


def _theirs(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:  # what vLLM loads config.json with
        loaded = vllm_config_class(saved["model_type"]).from_dict(dict(saved))
    except StrictDataclassClassValidationError as e:  # transformers refuses to load it (FalconConfig's RoPE check)
        return f"refused: transformers: {e}"
    try:
        layers = vllm_layers(loaded, tp=settings["tp"], pp=settings["pp"],
                             kv_cache_dtype=settings.get("kv_cache_dtype", "auto"),
                             disable_sliding_window=settings.get("disable_sliding_window", False))  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"
    return [{k: x[k] for k in _FIELDS} for x in layers]


def compare(per_family: int) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Per family: configs compared, refused by both (for the same kind of failure: vLLM's
    AssertionError, transformers' load), layers compared; and the mismatches."""
    return judge_families(cases(per_family), FAMILIES, _ours, _theirs)


def test_classic_layers_equal_vllms_reading_of_the_config() -> None:
    assert_families_agree("vLLM classic decoders", *compare(N))


def test_the_classic_architectures_are_read() -> None:
    assert {arch for _, arch, _ in FAMILIES.values()} <= ARCHITECTURES


def test_falcon_keeps_the_model_dtype_whatever_the_flag() -> None:
    """FalconAttention builds its rotary and ALiBi layers without the cache config: vLLM stores
    them in the model dtype even under ``--kv-cache-dtype fp8`` (GPT-2's follow the flag)."""
    falcon = {**T.FalconConfig(num_hidden_layers=2).to_dict(), "architectures": ["FalconForCausalLM"]}
    gpt2 = {**T.GPT2Config(n_layer=2).to_dict(), "architectures": ["GPT2LMHeadModel"]}
    for cfg, dtype in ((falcon, "auto"), (gpt2, "fp8")):
        for alibi in (False, True):
            saved = {**cfg, "alibi": alibi} if cfg is falcon else cfg
            ours = _ours(saved, {"tp": 1, "pp": 1, "kv_cache_dtype": "fp8"})
            assert ours == _theirs(saved, {"tp": 1, "pp": 1, "kv_cache_dtype": "fp8"})
            assert not isinstance(ours, str) and {x["kv_cache_dtype"] for x in ours} == {dtype}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_drafter_on_a_classic_decoder_is_refused_as_unchecked(family: str) -> None:
    cls, arch, _ = FAMILIES[family]
    head = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
            "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 1024}  # fmt: skip
    with pytest.raises(InvalidConfigError, match=f"has not checked vLLM 0.33.0's drafters on {arch}"):
        layers_from_hf_config({**cls().to_dict(), "architectures": [arch]},
                              vllm.EngineConfig(speculative_method="eagle", num_speculative_tokens=2), draft=head)


def _teleflm(rng: random.Random) -> dict[str, Any]:
    """A TeleFLM config: Llama's keys (transformers' LlamaConfig, as vLLM's loader holds it) and the muP
    keys TeleFLM's class reads, or some of them missing."""
    heads = rng.choice([8, 16, 32, 64])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 48), "num_attention_heads": heads,
                          "num_key_value_heads": rng.choice([1, 2, 4, 8, heads]), "hidden_size": heads * 128}  # fmt: skip
    if rng.random() < 0.3:
        kinds = ["sliding_attention", "full_attention"]
        kw.update(layer_types=[rng.choice(kinds) for _ in range(kw["num_hidden_layers"])],
                  sliding_window=rng.choice([512, 4096]))  # fmt: skip
    d = T.LlamaConfig(**kw).to_dict()
    mup = {"use_mup": rng.random() < 0.5, "mup_scale_factor": rng.choice([2.0, 4, 0]),
           "output_mult": rng.choice([1.0, 2])}  # fmt: skip
    for key in mup if rng.random() < 0.8 else ["use_mup"] if rng.random() < 0.5 else []:
        d[key] = mup[key]
    if rng.random() < 0.3:  # as sparse released configs are
        d = _sparse(d, T.LlamaConfig)
    return {**d, "architectures": ["TeleFLMForCausalLM"]}


def test_teleflm_read_as_vllms_llama_class_with_its_mup_keys() -> None:
    """TeleFLM: vLLM's ``TeleFLMForCausalLM`` builds the Llama model, then reads ``use_mup`` (and
    with it ``output_mult / mup_scale_factor``); held to that class (and an EAGLE / EAGLE3 head, as
    ``tests/test_vllm_models.py`` draws them) by the model-reading differential's own comparison."""
    from test_vllm_models import _draft, _engine
    from test_vllm_models import _ours as ours_of
    from test_vllm_models import _theirs as theirs_of

    rng = random.Random("vllm-classic:teleflm")
    counts, mismatches = {"compared": 0, "refused": 0, "muP refused": 0, "layers": 0, "drafted": 0}, []
    for i in range(4 * N):
        saved = _teleflm(rng)
        engine, draft = _engine(rng, "llama")
        if draft is not None:
            engine["draft"] = _draft(rng, saved)
        ours = ours_of(saved, engine)
        counts["compared"] += 1
        if T.LlamaConfig.from_dict(dict(saved)).num_attention_heads % engine["tp"]:  # QKVParallelLinear's assert
            counts["refused"] += 1
            if not isinstance(ours, str):
                mismatches.append(f"case {i}: kvbudget read heads that TP does not divide")
            continue
        theirs = theirs_of(saved, engine)
        if isinstance(ours, str) or isinstance(theirs, str):
            kind = str(theirs).removeprefix("refused: ").split(":")[0]  # the muP reads' failures named alike
            mup = isinstance(theirs, str) and any(k in theirs for k in ("use_mup", "mup_scale_factor", "teleflm.py"))
            if isinstance(ours, str) != isinstance(theirs, str) or mup and kind not in str(ours):
                mismatches.append(f"case {i} ({engine}): kvbudget {str(ours)[:200]} vs vLLM {str(theirs)[:200]}")
            counts["refused"] += 1
            counts["muP refused"] += mup
            continue
        counts["layers"] += len(theirs)
        counts["drafted"] += any(x["is_draft"] for x in theirs)
        if ours != theirs:
            diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)} layers")
            mismatches.append(f"case {i} ({engine}): {diff}")
    print(f"\nvLLM TeleFLM: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["drafted"] > 0 and counts["muP refused"] > 0, counts
    assert counts["refused"] < counts["compared"] * 3 // 5, counts


def test_a_config_class_kvbudget_has_not_checked_is_refused() -> None:
    """Falcon's ``RefinedWeb`` / ``RefinedWebModel`` types load with vLLM's own ``RWConfig`` (one
    KV head by default, the new decoder forced at width 8192), not transformers' ``FalconConfig``;
    kvbudget refuses them (and other types of a classic architecture) by name."""
    falcon = {**T.FalconConfig(num_hidden_layers=2).to_dict(), "architectures": ["FalconForCausalLM"]}
    assert not isinstance(_ours(falcon, {"tp": 1, "pp": 1}), str)
    for model_type in ("RefinedWeb", "RefinedWebModel"):
        with pytest.raises(InvalidConfigError, match=f"model_type '{model_type}' with another class"):
            layers_from_hf_config({**falcon, "model_type": model_type})
    sw3 = {**T.GPT2Config(n_layer=2).to_dict(), "model_type": "gpt-sw3", "architectures": ["GPT2LMHeadModel"]}
    assert _ours(sw3, {"tp": 2, "pp": 1}) == _theirs(sw3, {"tp": 2, "pp": 1})  # GPT-SW3 borrows GPT2Config


def test_nemotron_read_as_vllms_class_with_a_null_kv_count_refused() -> None:
    """Nemotron-4 / Minitron (vLLM's ``NemotronForCausalLM``): its layers as vLLM's class registers
    them where the config gives ``num_key_value_heads``; without one (transformers'
    ``NemotronConfig`` fills none) vLLM's ``ModelConfig`` refuses, and so does kvbudget, by name."""
    from test_vllm_state_models import _ours, _theirs

    engine = {"tp": 2, "pp": 1}
    for kv in (8, 48, None):
        cfg = {**T.NemotronConfig(num_hidden_layers=4, num_attention_heads=48, hidden_size=6144,
                                  num_key_value_heads=kv).to_dict(), "architectures": ["NemotronForCausalLM"]}  # fmt: skip
        ours, theirs = _ours(cfg, engine, "bfloat16"), _theirs(cfg, engine, "bfloat16")
        if kv is None:
            assert isinstance(theirs, str) and "total_num_kv_heads" in theirs, theirs
            assert isinstance(ours, str) and "num_key_value_heads is null" in ours, ours
        else:
            assert not isinstance(theirs, str) and ours == theirs, (ours, theirs)
