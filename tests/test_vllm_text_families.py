"""``kvbudget.vllm.layers_from_hf_config`` on vLLM 0.33.0's text decoders of :mod:`kvbudget.vllm.text_families`
(Gemma 4, Gemma 3n), held to vLLM's own model classes (``tests/vllm_oracle``: ``Gemma4Model`` and
``Gemma3nTextModel``, their decoder layers and attention whole, ``Attention``'s
``validate_kv_sharing_target`` included; the multimodal wrappers through their own
``init_vllm_registered_model`` call).

The configs are transformers 5.19.0's classes: the defaults, then seeded variants of the layer count,
heads, KV heads, head sizes (Gemma 4's ``global_head_dim`` / ``num_global_key_value_heads`` with
``attention_k_eq_v``, or an explicit ``per_layer_config``), ``layer_types``, the window, the KV-shared
layers (some with no earlier layer of a shared layer's type, which Gemma 4 refuses), and some with what
the classes refuse (Gemma 3n's activation or ``altup_correct_scale``), saved with every key, as the
released checkpoints carry them (Gemma 4's popped ``global_head_dim`` keys instead of
``per_layer_config``) and sparse, some inside their ``...ForConditionalGeneration`` wrapper; each with a
seeded TP, PP (a stage boundary between a shared layer and its target is vLLM's ``ValueError``;
Gemma 3n's class is not ``SupportsPP``), ``--kv-cache-dtype`` and ``--disable-sliding-window``. Every
layer's name, kind, stage, heads per rank, head sizes, window and KV dtype are compared; a refusal on
one side only is a mismatch. ``KVBUDGET_VLLM_TEXT_CASES`` sets the variants per family.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import test_vllm_models
import transformers as T
from vllm_oracle._fetch import vllm_root
from vllm_oracle._hf import VllmLoadError, _env, vllm_layers
from vllm_oracle._interfaces import supports
from vllm_reading import assert_families_agree, judge_families

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import ARCHITECTURES, layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_TEXT_CASES", "30"))
_FIELDS = ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
           "is_draft", "pp_stage", "kv_cache_dtype")  # fmt: skip
_KINDS = ("sliding_attention", "full_attention")
_SHARING = ("gemma4", "gemma3n")  # the families with KV-shared layers
Case = tuple[str, dict[str, Any], dict[str, Any]]


def _types(rng: random.Random, n: int, every: int) -> list[str] | None:
    if rng.random() < 0.4:
        return None  # the class's pattern
    if rng.random() < 0.3:
        return [_KINDS[rng.random() < 0.3] for _ in range(n)]
    return ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n)]


def _gemma4(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 42)
    heads = rng.choice([4, 8, 8, 16, 32])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads,
                          "num_key_value_heads": rng.choice([1, 2, 4, heads, 3 if rng.random() < 0.2 else 1]),
                          "head_dim": rng.choice([128, 256, 256]), "sliding_window": rng.choice([512, 1024, 4096]),
                          "layer_types": _types(rng, n, rng.choice([5, 6])),
                          "num_kv_shared_layers": rng.choice([0, rng.randint(1, max(1, n // 3)), rng.randint(0, n)]),
                          "attention_k_eq_v": rng.random() < 0.4,
                          "global_head_dim": rng.choice([256, 512, 512]),
                          "num_global_key_value_heads": rng.choice([None, 1, 2, 4])}  # fmt: skip
    if rng.random() < 0.1:
        kw["use_bidirectional_attention"] = rng.choice(["all", "vision"])
    if rng.random() < 0.1:  # MoE: vLLM needs an expert size
        kw.update(enable_moe_block=True, num_experts=8, top_k_experts=2,
                  moe_intermediate_size=rng.choice([None, 704]))  # fmt: skip
    if rng.random() < 0.1:  # an explicit per-layer spec
        kw["per_layer_config"] = {str(i): {"head_dim": rng.choice([256, 512])} for i in range(n) if rng.random() < 0.3}
    d = T.Gemma4TextConfig(**{k: x for k, x in kw.items() if x is not None}).to_dict()
    if "per_layer_config" not in kw and rng.random() < 0.5:  # as the released checkpoints save it
        d.pop("per_layer_config", None)
        d.update(global_head_dim=kw["global_head_dim"], num_global_key_value_heads=kw["num_global_key_value_heads"])
    return d


def _gemma3n(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 40)
    heads = rng.choice([4, 8, 8, 16])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 256,
                          "num_key_value_heads": rng.choice([1, 2, 2, 4, heads, heads, 3 if rng.random() < 0.2 else 2]),
                          "head_dim": rng.choice([128, 256]), "sliding_window": rng.choice([256, 512, 1024]),
                          "layer_types": _types(rng, n, 5),
                          "num_kv_shared_layers": rng.choice([0, rng.randint(0, n), 15, n + 2])}  # fmt: skip
    if rng.random() < 0.1:
        kw.update(rng.choice([{"hidden_activation": "gelu"}, {"altup_correct_scale": False}]))
    return T.Gemma3nTextConfig(**kw).to_dict()


def _wrap4(text: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    arch = rng.choice(["Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"])
    outer = T.Gemma4Config if arch.startswith("Gemma4For") else T.Gemma4UnifiedConfig
    return {**outer(text_config=text).to_dict(), "architectures": [arch]}


def _wrap3n(text: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    return {**T.Gemma3nConfig(text_config=text).to_dict(), "architectures": ["Gemma3nForConditionalGeneration"]}


def _exaone_moe(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 48)
    heads = rng.choice([8, 16, 32, 64])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 128,
                          "num_key_value_heads": rng.choice([1, 4, 8, heads]),
                          "sliding_window": rng.choice([128, 4096]),
                          "layer_types": _types(rng, n, 4), "num_experts": rng.choice([4, 64, 128]),
                          "first_k_dense_replace": rng.choice([0, 1, 2])}  # fmt: skip
    if rng.random() < 0.3:
        kw["sliding_window_pattern"] = rng.choice([2, 4, 6])
    d = T.ExaoneMoeConfig(**kw).to_dict()
    if rng.random() < 0.3:  # K-EXAONE 2.0's per-layer windows, and an explicit head size
        d["sliding_windows"] = [rng.choice([128, 512]) for _ in range(n)]
    if rng.random() < 0.2:
        d["head_dim"] = rng.choice([64, 128])
    return d


def _laguna(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 48)
    heads = rng.choice([8, 16, 32, 48])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 64,
                          "num_key_value_heads": rng.choice([1, 4, 8, 8]), "sliding_window": rng.choice([512, 4096]),
                          "layer_types": _types(rng, n, 4), "num_experts": rng.choice([0, 4, 256]),
                          "head_dim": rng.choice([64, 128, 128])}  # fmt: skip
    if rng.random() < 0.3:  # Laguna-XS: per-layer query heads
        kw["num_attention_heads_per_layer"] = [rng.choice([heads, heads // 2, 8]) for _ in range(n)]
    if rng.random() < 0.2:
        kw["mlp_layer_types"] = [rng.choice(["dense", "sparse"]) for _ in range(n)]
    if rng.random() < 0.05:
        kw["hidden_act"] = "gelu"
    d = T.LagunaConfig(**kw).to_dict()
    if rng.random() < 0.2:
        d.pop("head_dim")  # vLLM: hidden_size over the layer's heads
    return d


def _cohere2_moe(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 48)
    heads = rng.choice([8, 16, 32, 64])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 128,
                          "num_key_value_heads": rng.choice([None, 1, 4, 8]), "head_dim": rng.choice([64, 128]),
                          "sliding_window": rng.choice([None, 0, *[4096] * 6]), "num_experts": rng.choice([4, 8, 128]),
                          "layer_types": _types(rng, n, 4)}  # fmt: skip
    if rng.random() < 0.4:  # the released configs' dense prefix
        kw.update(first_k_dense_replace=rng.randint(0, n), prefix_dense_sliding_window_pattern=rng.choice([1, 2]))
    if rng.random() < 0.2:
        kw["layer_types"] = ["sliding_attention"] * n
    d = T.Cohere2MoeConfig(**{k: x for k, x in kw.items() if x is not None or k == "sliding_window"}).to_dict()
    if "first_k_dense_replace" in kw and rng.random() < 0.5:  # as a file carrying the key
        d.pop("layer_types")
        d.pop("mlp_layer_types")
        d["first_k_dense_replace"] = kw["first_k_dense_replace"]
    return d


def _muse_glimmer(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 52)
    heads = rng.choice([8, 16, 32])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 128,
                          "num_key_value_heads": rng.choice([1, 2, 4, heads]), "head_dim": rng.choice([64, 128]),
                          "sliding_window": rng.choice([None, 0, *[2048] * 6]),
                          "layer_types": _types(rng, n, 4)}  # fmt: skip
    if rng.random() < 0.05:
        kw["hidden_activation"] = "gelu"
    d = T.MuseGlimmerTextConfig(**{k: x for k, x in kw.items() if x is not None or k == "sliding_window"}).to_dict()
    if rng.random() < 0.05:
        d["layer_rope_theta"] = d["layer_rope_theta"][:-1]
    return d


def _wrap_glimmer(text: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    arch = rng.choice(["MuseGlimmerForConditionalGeneration", "MuseGlimmerForCausalLM"])
    saved = {**T.MuseGlimmerConfig(text_config=text).to_dict(), "architectures": [arch]}
    if rng.random() < 0.3:  # flat: the outer class builds its default text config, which vLLM reads
        saved = {**{k: v for k, v in saved.items() if k not in ("text_config", "vision_config")},
                 **{k: v for k, v in text.items() if k not in ("model_type", "architectures")}}  # fmt: skip
    return saved


def _axk1(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 64)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": rng.choice([16, 32, 64, 128]),
                          "kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([32, 64]),
                          "qk_nope_head_dim": rng.choice([64, 128]),
                          "first_k_dense_replace": rng.choice([0, 1, 3])}  # fmt: skip
    if rng.random() < 0.05:
        kw["hidden_act"] = "gelu"
    if rng.random() < 0.1:
        kw["rope_parameters"] = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 4096}  # fmt: skip
    d = T.AXK1Config(**kw).to_dict()
    if rng.random() < 0.2:  # transformers 5.20's per-layer MLP kinds (vLLM reads them first)
        d["mlp_layer_types"] = [rng.choice(["dense", "sparse"]) for _ in range(n)]
    return d


def _hy_v3(rng: random.Random) -> dict[str, Any]:
    n = rng.choice([rng.randint(1, 8), rng.randint(1, 80)])  # short stacks: a stage of dense layers only
    heads = rng.choice([16, 32, 64])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 64,
                          "num_key_value_heads": rng.choice([1, 4, 8, 8]), "head_dim": rng.choice([64, 128]),
                          "num_experts": rng.choice([4, 192]), "num_shared_experts": rng.choice([0, 1])}  # fmt: skip
    if rng.random() < 0.05:
        kw["hidden_act"] = "gelu"
    d = T.HYV3Config(**kw).to_dict()
    if rng.random() < 0.9:  # the released checkpoint's keys, which vLLM's class reads
        d.update(first_k_dense_replace=rng.choice([0, 1, 1, 3]), expert_hidden_dim=1536, route_norm=True)
        if rng.random() < 0.05:
            del d["route_norm"]
    if rng.random() < 0.3:  # a model-wide window every layer takes
        d["sliding_window"] = rng.choice([0, 4096, 4096])
    return d


def _mimo_v2_flash(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(1, 48)
    heads = rng.choice([32, 64])
    d = T.MiMoV2FlashConfig(num_hidden_layers=n, num_attention_heads=heads, hidden_size=heads * 64,
                            num_key_value_heads=rng.choice([2, 4, 8]), head_dim=rng.choice([128, 192]),
                            v_head_dim=rng.choice([128, 192])).to_dict()  # fmt: skip
    if rng.random() < 0.85:  # the released file's own keys, which vLLM's class reads
        d.update(hybrid_layer_pattern=[int(i % 6 not in (0, 5)) if rng.random() < 0.8 else rng.choice([0, 1])
                                       for i in range(n)],
                 swa_num_attention_heads=rng.choice([heads, 64]), swa_num_key_value_heads=rng.choice([4, 8]),
                 swa_head_dim=rng.choice([128, 192]), swa_v_head_dim=rng.choice([None, 128]),
                 sliding_window_size=rng.choice([128, 128, -1]), layernorm_epsilon=1e-5,
                 moe_layer_freq=rng.choice([1, [int(i > 0) for i in range(n)]]))  # fmt: skip
        if d["swa_v_head_dim"] is None:
            del d["swa_v_head_dim"]
        if rng.random() < 0.1:
            del d[rng.choice(["swa_num_attention_heads", "layernorm_epsilon", "sliding_window_size"])]
    return d


#: family -> (transformers class, architecture, seeded config builder, its wrapper)
FAMILIES: dict[str, tuple[Any, str, Callable[[random.Random], dict[str, Any]],
                          Callable[[dict[str, Any], random.Random], dict[str, Any]] | None]] = {
    "gemma4": (T.Gemma4TextConfig, "Gemma4ForCausalLM", _gemma4, _wrap4),
    "gemma3n": (T.Gemma3nTextConfig, "Gemma3nForCausalLM", _gemma3n, _wrap3n),
    "exaone_moe": (T.ExaoneMoeConfig, "ExaoneMoeForCausalLM", _exaone_moe, None),
    "laguna": (T.LagunaConfig, "LagunaForCausalLM", _laguna, None),
    "cohere2_moe": (T.Cohere2MoeConfig, "Cohere2MoeForCausalLM", _cohere2_moe, None),
    "muse_glimmer": (T.MuseGlimmerTextConfig, "MuseGlimmerForCausalLM", _muse_glimmer, _wrap_glimmer),
    "axk1": (T.AXK1Config, "AXK1ForCausalLM", _axk1, None),
    "hy_v3": (T.HYV3Config, "HYV3ForCausalLM", _hy_v3, None),
    "mimo_v2_flash": (T.MiMoV2FlashConfig, "MiMoV2FlashForCausalLM", _mimo_v2_flash, None),
}


def _sparse(d: dict[str, Any], cls: Any) -> dict[str, Any]:
    defaults = cls().to_dict()
    return {k: v for k, v in d.items() if k == "model_type" or k not in defaults or defaults[k] != v}


def cases(per_family: int, seed: int = 0) -> Iterator[Case]:
    """Class defaults, then ``per_family`` seeded variants (every key and sparse) per family."""
    for family, (cls, arch, build, wrap) in FAMILIES.items():
        yield family, {**cls().to_dict(), "architectures": [arch]}, {"tp": 1, "pp": 1}
        rng = random.Random(f"vllm-text:{seed}:{family}")
        for _ in range(per_family):
            full = build(rng)
            for sparse in (False, True):
                saved = {**(_sparse(full, cls) if sparse else full), "architectures": [arch]}
                if wrap is not None and rng.random() < 0.2:
                    saved = wrap(full, rng)
                engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 1, 2, 3]),
                          "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                          "disable_sliding_window": rng.random() < 0.1}  # fmt: skip
                yield family, saved, engine


def _mla_dtype(layers: list[dict[str, Any]] | str) -> list[dict[str, Any]] | str:
    """An MLA layer's KV dtype left out (the oracle does not lift MLAAttention's; the census compares none)."""
    return layers if isinstance(layers, str) else [{**x, "kv_cache_dtype": None} if x["kind"] == "mla" else x
                                                   for x in layers]  # fmt: skip


def _ours(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    return _mla_dtype(test_vllm_models._ours(saved, settings, _FIELDS))


def _theirs(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    arch = saved["architectures"][0]
    try:  # what vLLM loads config.json with
        loaded = T.CONFIG_MAPPING[saved["model_type"]].from_dict(dict(saved))
    except Exception as e:  # noqa: BLE001 - transformers refuses to load it
        return f"refused: transformers: {type(e).__name__}: {e}"
    try:
        layers = vllm_layers(loaded, tp=settings["tp"], pp=settings["pp"],
                             kv_cache_dtype=settings.get("kv_cache_dtype", "auto"),
                             disable_sliding_window=settings.get("disable_sliding_window", False))  # fmt: skip
    except VllmLoadError as e:
        if "StrictDataclass" in str(e):  # ModelConfig.__post_init__'s sliding_window edit: before the checks below
            return f"refused: {e}"
        layers = e  # type: ignore[assignment]
    # ModelConfig.verify_with_parallel_config, before the model is built
    if settings["pp"] > 1 and not supports(vllm_root(), _env(vllm_root()).registry, arch, "SupportsPP"):
        return "refused: NotImplementedError: Pipeline parallelism is not supported for this model"
    if loaded.get_text_config().num_attention_heads % settings["tp"]:
        # ModelConfig.verify_with_parallel_config, and QKVParallelLinear's `divide` (the oracle stubs
        # the linear layers; most classes assert it themselves)
        return "refused: AssertionError: tp does not divide the heads"
    if isinstance(layers, VllmLoadError):
        return f"refused: {layers}"
    return _mla_dtype([{k: x[k] for k in _FIELDS} for x in layers])


def compare(per_family: int) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Per family: configs compared, refused by both (for the same kind of failure: vLLM's
    AssertionError / ValueError, transformers' load), layers compared, configs whose KV sharing left
    layers without a spec; and the mismatches."""

    def shared(family: str, saved: dict[str, Any], theirs: list[dict[str, Any]], c: dict[str, int]) -> None:
        text = saved.get("text_config", saved)
        n = text.get("num_hidden_layers", FAMILIES[family][0]().num_hidden_layers)
        c["shared"] = c.get("shared", 0) + (family in _SHARING and len(theirs) < n)

    counts, mismatches = judge_families(cases(per_family), FAMILIES, _ours, _theirs, shared)
    for c in counts.values():
        c.setdefault("shared", 0)
    return counts, mismatches


def test_text_family_layers_equal_vllms_reading_of_the_config() -> None:
    counts, mismatches = compare(N)
    assert_families_agree("vLLM text families", counts, mismatches)
    for family, c in counts.items():  # some KV-shared
        assert (c["shared"] > 0) == (family in _SHARING), (family, c)


def test_the_text_families_are_read() -> None:
    assert {arch for _, arch, _, _ in FAMILIES.values()} <= ARCHITECTURES


@pytest.mark.parametrize(("shared", "planned"), [(2, True), (7, False)])
def test_a_kv_shared_layer_reads_its_target_on_its_own_stage(shared: int, planned: bool) -> None:
    """Gemma 4, 12 layers over two stages (0-5, 6-11): the last two layers read layers 9 and 11's
    earlier namesakes on their own stage (planned); with seven shared, layer 6 reads layer 4 on the
    first stage, which ``validate_kv_sharing_target`` refuses."""
    text = T.Gemma4TextConfig(num_hidden_layers=12, num_kv_shared_layers=shared,
                              layer_types=["sliding_attention", "full_attention"] * 6).to_dict()  # fmt: skip
    saved = {**text, "architectures": ["Gemma4ForCausalLM"]}
    ours, theirs = _ours(saved, {"tp": 1, "pp": 2}), _theirs(saved, {"tp": 1, "pp": 2})
    assert isinstance(ours, str) == isinstance(theirs, str) == (not planned), (ours, theirs)
    if planned:
        assert ours == theirs and len(ours) == 12 - shared


def test_a_kv_shared_layer_owns_no_kv_cache() -> None:
    """Gemma 3n's released geometry: 35 layers, the last 15 read layers 18 (sliding) and 19 (full);
    vLLM's get_kv_cache_spec lists the 20 that own a cache."""
    saved = {**T.Gemma3nTextConfig().to_dict(), "architectures": ["Gemma3nForCausalLM"]}
    ours = _ours(saved, {"tp": 1, "pp": 1})
    assert ours == _theirs(saved, {"tp": 1, "pp": 1})
    assert not isinstance(ours, str)
    assert [x["name"] for x in ours] == [f"model.layers.{i}.self_attn.attn" for i in range(20)]


def test_mimo_kv_heads_that_do_not_shard_are_refused() -> None:
    """MiMo-V2's attention asserts nothing of TP; QKVParallelLinear's ``divide`` does (3 sliding KV
    heads over tp=2), which the oracle stubs: kvbudget refuses it as that ``divide`` does."""
    d = {**T.MiMoV2FlashConfig(num_hidden_layers=2).to_dict(), "architectures": ["MiMoV2FlashForCausalLM"],
         "hybrid_layer_pattern": [0, 1], "swa_num_attention_heads": 48, "swa_num_key_value_heads": 3,
         "swa_head_dim": 192, "sliding_window_size": 128, "layernorm_epsilon": 1e-5}  # fmt: skip
    assert not isinstance(_ours(d, {"tp": 1, "pp": 1}), str)
    assert "QKVParallelLinear" in str(_ours(d, {"tp": 2, "pp": 1}))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_drafter_on_a_text_family_is_refused_as_unchecked(family: str) -> None:
    cls, arch, _, _ = FAMILIES[family]
    head = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1,
            "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 1024}  # fmt: skip
    with pytest.raises(InvalidConfigError, match=f"has not checked vLLM 0.33.0's drafters on {arch}"):
        layers_from_hf_config({**cls().to_dict(), "architectures": [arch]},
                              vllm.EngineConfig(speculative_method="eagle3", num_speculative_tokens=2), draft=head)
