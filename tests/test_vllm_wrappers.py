"""vLLM mode's multimodal wrappers (:mod:`kvbudget.vllm.wrappers`) against vLLM 0.33.0's own
classes: each wrapper's ``init_vllm_registered_model`` call (read from the pinned model file and
executed by ``tests/vllm_oracle``) around seeded text configs of the families kvbudget reads.

The cases: every wrapper of ``data/vllm_architectures.json``, its transformers class defaults
with the ``text_config`` replaced by a seeded config of a text family (the wrapper's fixed
text architecture's family where it names one), that config with and without its own
``architectures`` (so transformers' causal-LM name and LLaVA's / PaliGemma's own rules are
exercised), every key or sparse, over TP and PP, with and without ``--disable-sliding-window``.
``KVBUDGET_VLLM_WRAPPER_CASES`` sets the variants per wrapper (the long target runs more).
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import pytest
import transformers as T
from census import census_configs
from sglang_model_cases import FAMILIES
from test_vllm_models import _FIELDS
from vllm_oracle._fetch import vllm_root
from vllm_oracle._hf import VllmLoadError, _env, vllm_config_class, vllm_layers
from vllm_oracle._interfaces import supports

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import ARCHITECTURES, layers_from_hf_config
from kvbudget.vllm.wrappers import WRAPPERS, unwrap

N = int(os.environ.get("KVBUDGET_VLLM_WRAPPER_CASES", "10"))
#: Text families whose seeded configs are flat (a ``...ForCausalLM`` config) and read by vLLM mode.
_TEXT = ("llama", "mistral", "qwen2", "qwen3", "gemma2", "cohere2", "gpt_oss", "deepseek_v3", "qwen3_moe",
         "mixtral", "gemma", "granite", "phi3", "exaone4", "olmoe", "glm4", "ernie4_5", "apertus")  # fmt: skip


def _arch_family() -> dict[str, str]:
    rng = random.Random(0)
    return {FAMILIES[f](rng).arch: f for f in _TEXT}


def cases(per_wrapper: int, seed: int = 0) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(wrapper, config.json, engine settings), seeded per wrapper."""
    by_arch = _arch_family()
    for arch, w in WRAPPERS.items():
        _, bases = census_configs(arch)
        flat = bool(bases) and w["hf_config"] is None and "text_config" not in bases[0]  # the whole config (dots.ocr)
        if not bases or not (flat or isinstance(bases[0].get("text_config"), dict)):
            continue  # no config class builds this wrapper's config (Step3-VL: SGLang's own)
        fixed = w["architectures"] if isinstance(w["architectures"], list) else None
        if fixed and fixed[0] not in ARCHITECTURES:
            continue  # a text model kvbudget does not read (Gemma 3n, Gemma 4): refused by name
        families = [by_arch[fixed[0]]] if fixed and fixed[0] in by_arch else list(_TEXT)
        rng = random.Random(f"vllm-wrapper:{seed}:{arch}")
        for _ in range(per_wrapper):
            if flat:  # the text model reads the wrapper's own config: its geometry varied
                yield arch, _varied(rng, bases[0]), {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
                                                     "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
                continue
            if rng.random() < 0.5:  # the wrapper's own text class, its geometry varied
                text = _varied(rng, bases[0]["text_config"])
            else:  # a text family's config (kept where the wrapper's class keeps its type)
                built = FAMILIES[rng.choice(families)](rng)
                if "index_topk" in built.extra:
                    continue  # DSA (an indexer cache): outside kvbudget's vLLM mode (test_vllm_models)
                text = built.saved(rng.random() < 0.3)
            if rng.random() < 0.5:
                text.pop("architectures", None)  # the wrapper (or transformers' causal-LM name) names it
            saved = {**bases[0], "text_config": text}
            engine = {"tp": rng.choice([1, 1, 2, 4, 8]), "pp": rng.choice([1, 1, 2, 3]),
                      "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
            yield arch, saved, engine


def _varied(rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with seeded layers, heads, KV heads, sizes and (where it has them) windows."""
    heads = rng.choice([8, 16, 32, 64])
    n = rng.randint(1, 48)
    text = {**base, "num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * rng.choice([64, 128]),
            "num_key_value_heads": rng.choice([k for k in (1, 2, 4, 8, heads) if heads % k == 0])}  # fmt: skip
    if rng.random() < 0.5:  # set or changed (GLM-4.5V's text config needs one; Qwen2's ignores it)
        text["head_dim"] = rng.choice([64, 128, 256])
    if rng.random() < 0.5:  # a key released GLM-4.5V checkpoints add (vLLM's GLM-4 MoE reads it)
        text["use_qk_norm"] = rng.choice([False, True])
    if isinstance(text.get("layer_types"), list):
        mixed = rng.random() < 0.5
        text["layer_types"] = [rng.choice(["sliding_attention", "full_attention"]) if mixed else "full_attention"
                               for _ in range(n)]  # fmt: skip
    if "sliding_window" in text and rng.random() < 0.5:
        text["sliding_window"] = rng.choice([None, 512, 4096])
    return text


def _load(saved: dict[str, Any]) -> Any:
    """The config object vLLM loads ``saved`` as: its own class where it registers one (Qwen3-ASR's
    ``Qwen3ASRConfig``), else transformers'."""
    return vllm_config_class(saved["model_type"]).from_dict(dict(saved))


def _ours(saved: dict[str, Any], s: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(tp=s["tp"], pp=s["pp"]),
                                       disable_sliding_window=s["disable_sliding_window"])  # fmt: skip
    except InvalidConfigError as e:
        return f"refused: {e}"
    return [{k: _listed(k, getattr(x, k)) for k in _fields(x.kind)} for x in layers]


def _listed(key: str, value: Any) -> Any:
    """A state layer's shapes and dtypes as the oracle lists them."""
    return [list(s) for s in value] if key == "state_shapes" else list(value) if key == "state_dtypes" else value


#: Wrappers whose pipeline-parallel refusal kvbudget models (Gemma 3n's, through its text model's
#: reader). The Nemotron-H VL / Omni wrapper classes lack SupportsPP too, which kvbudget's state
#: wrappers do not model yet: vLLM refuses them over more than one stage.
_PP_CHECKED = frozenset({"Gemma3nForConditionalGeneration"})


def _supports_pp(arch: str) -> bool | None:
    """Whether the wrapper's class implements ``SupportsPP`` (None: a base the pinned files lack)."""
    try:
        return supports(vllm_root(), _env(vllm_root()).registry, arch, "SupportsPP")
    except LookupError:
        return None


def _theirs(saved: dict[str, Any], s: dict[str, Any]) -> list[dict[str, Any]] | str:
    arch = saved["architectures"][0]
    if s["pp"] > 1 and arch in _PP_CHECKED and _supports_pp(arch) is False:
        # ModelConfig.verify_with_parallel_config (the oracle builds the model whatever the class)
        return "refused: NotImplementedError: Pipeline parallelism is not supported for this model"
    try:
        layers = vllm_layers(_load(saved), tp=s["tp"], pp=s["pp"], disable_sliding_window=s["disable_sliding_window"])
    except VllmLoadError as e:
        return f"refused: {e}"
    return [{k: x[k] for k in _fields(x["kind"])} for x in layers]


def _fields(kind: str) -> tuple[str, ...]:
    """A layer's compared fields: a state layer's (LFM2-VL's and Nemotron-H VL's, whose wrapper
    classes tests/test_vllm_state_wrappers.py holds in full) are its name, stage and states."""
    return ("name", "kind", "pp_stage", "state_shapes", "state_dtypes") if kind == "mamba" else _FIELDS


def test_wrappers_read_as_vllm_builds_their_text_models() -> None:
    counts = {"unloadable": 0, "compared": 0, "refused": 0, "planned": 0, "layers": 0}
    planned_by: dict[str, int] = {}
    mismatches: list[str] = []
    for i, (arch, saved, engine) in enumerate(cases(N)):
        try:
            loaded = _load(saved)
        except Exception:  # noqa: BLE001 - the wrapper's config class takes no text config of this family
            counts["unloadable"] += 1
            continue
        if "text_config" in saved and type(loaded.get_text_config()).model_type != saved["text_config"].get("model_type"):
            counts["unloadable"] += 1  # its class made another type of it: no checkpoint holds such a config
            continue
        counts["compared"] += 1
        if loaded.get_text_config().num_attention_heads % engine["tp"]:
            continue  # vLLM's QKVParallelLinear asserts TP divides the heads (held in test_vllm_models)
        ours = _ours(saved, engine)
        try:
            theirs = _theirs(saved, engine)
        except LookupError:  # the oracle does not build its text model (a state model's shapes)
            assert isinstance(ours, str), f"case {i} ({arch}): kvbudget planned what the oracle cannot check"
            counts["refused"] += 1
            continue
        if isinstance(ours, str) or isinstance(theirs, str):
            if isinstance(ours, str) != isinstance(theirs, str):
                mismatches.append(f"case {i} ({arch}, {engine}): kvbudget {str(ours)[:200]} vs vLLM {str(theirs)[:200]}")
            counts["refused"] += 1
            continue
        counts["planned"] += 1
        counts["layers"] += len(theirs)
        planned_by[arch] = planned_by.get(arch, 0) + 1
        if ours != theirs:
            diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)} layers")
            mismatches.append(f"case {i} ({arch}, {engine}): {diff}")
    print(f"\nvLLM wrappers: {counts}, planned per wrapper {planned_by}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["planned"] > counts["compared"] // 2 and len(planned_by) >= 15, (counts, planned_by)


def test_wrapper_layer_names_carry_the_wrappers_prefix() -> None:
    saved = {**T.LlavaConfig().to_dict(), "architectures": ["LlavaForConditionalGeneration"]}
    layers = layers_from_hf_config(saved)
    assert layers[0].name == "language_model.model.layers.0.self_attn.attn" and len(layers) == 32


@pytest.mark.parametrize(("model_type", "expected"), [("mistral", "MistralForCausalLM"), ("llama", "LlamaForCausalLM")])
def test_a_llava_text_config_without_architectures_is_named_as_vllm_names_it(model_type: str, expected: str) -> None:
    text = {**T.CONFIG_MAPPING[model_type]().to_dict()}
    text.pop("architectures", None)
    unwrapped = unwrap({"architectures": ["LlavaForConditionalGeneration"], "text_config": text})
    assert unwrapped is not None and unwrapped[0]["architectures"] == [expected]


def test_paligemma_names_gemma_2_whatever_its_text_config_says() -> None:
    text = {**T.Gemma2Config().to_dict(), "architectures": ["LlamaForCausalLM"]}
    unwrapped = unwrap({"architectures": ["PaliGemmaForConditionalGeneration"], "text_config": text})
    assert unwrapped is not None and unwrapped[0]["architectures"] == ["Gemma2ForCausalLM"]


def test_drafters_and_state_models_inside_a_wrapper_are_refused() -> None:
    saved = {**T.LlavaConfig().to_dict(), "architectures": ["LlavaForConditionalGeneration"]}
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 16,
            "num_key_value_heads": 8, "hidden_size": 2048}  # fmt: skip
    with pytest.raises(InvalidConfigError, match="drafters on LlavaForConditionalGeneration"):
        layers_from_hf_config(saved, vllm.EngineConfig(speculative_method="eagle", num_speculative_tokens=1),
                              draft=head)  # fmt: skip
    with pytest.raises(InvalidConfigError, match="Unsupported speculative method: 'mtp'"):  # vLLM's own
        layers_from_hf_config(saved, vllm.EngineConfig(speculative_method="mtp"))
    jamba = {**T.JambaConfig(num_hidden_layers=2).to_dict(), "architectures": ["JambaForCausalLM"]}
    llava = {**T.LlavaConfig(text_config=jamba).to_dict(), "architectures": ["LlavaForConditionalGeneration"]}
    with pytest.raises(InvalidConfigError, match="state layers inside LlavaForConditionalGeneration"):
        layers_from_hf_config(llava)
    # LFM2-VL's state layers are read (tests/test_vllm_state_wrappers.py): its default LFM2 text config
    # lacks the block_dim vLLM's Lfm2 layers read
    lfm2 = {**T.CONFIG_MAPPING["lfm2_vl"]().to_dict(), "architectures": ["Lfm2VlForConditionalGeneration"]}
    with pytest.raises(InvalidConfigError, match="block_dim"):
        layers_from_hf_config(lfm2)


def test_a_wrapper_without_its_text_config_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="text_config"):
        layers_from_hf_config({"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3"})


def test_the_classes_that_refuse_pipeline_stages_are_the_wheels() -> None:
    """``NOT_PIPELINE_PARALLEL`` is every registry architecture whose vLLM class does not implement
    ``SupportsPP`` (the wheel's class hierarchies), among every one whose hierarchy is in the pinned
    files, which include every architecture kvbudget reads; and each of them kvbudget reads is
    refused over two stages and read over one."""
    from kvbudget.vllm.models import SERVED_AS
    from kvbudget.vllm.registry import NOT_PIPELINE_PARALLEL, registry

    root = vllm_root()
    reg = _env(root).registry
    known: dict[str, bool] = {}
    for arch in registry():
        try:
            known[arch] = supports(root, reg, arch, "SupportsPP")
        except LookupError:  # a model file outside the pinned set: kvbudget reads none of those
            continue
    assert {a for a, pp in known.items() if not pp} == NOT_PIPELINE_PARALLEL
    read = (set(SERVED_AS) | set(WRAPPERS)) - {"VoxtralForConditionalGeneration"}  # its base in an unpinned file
    assert read <= set(known), sorted(read - set(known))
    refused = 0
    for arch in sorted(NOT_PIPELINE_PARALLEL):
        for cfg in census_configs(arch)[1][:2]:
            try:
                layers_from_hf_config(cfg, vllm.EngineConfig(tp=1, pp=1))
            except InvalidConfigError:
                continue
            with pytest.raises(InvalidConfigError, match="does not implement SupportsPP"):
                layers_from_hf_config(cfg, vllm.EngineConfig(tp=1, pp=2))
            refused += 1
    assert refused >= 8, refused
