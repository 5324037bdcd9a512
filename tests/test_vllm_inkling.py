"""``kvbudget.vllm.layers_from_hf_config`` on Inkling (``InklingForCausalLM``,
``InklingForConditionalGeneration``), held to vLLM 0.33.0's own reading (:mod:`kvbudget.vllm.inkling`).

The configs are built by the classes vLLM loads them with: its own ``InklingModelConfig`` and
``InklingMMConfig`` (lifted from the wheel; the census's transformers ``inkling_text`` class is one
vLLM's causal LM fails on), on seeded layer counts, heads, KV heads, head dims, ``swa_*`` geometry,
``local_layer_ids``, windows, kernel sizes (either key, or none), dense-layer counts and routers
(the class defaults, which vLLM's MoE refuses, now and then), enabled towers (some broken), saved
whole or sparse; also transformers 5.19.0's ``InklingConfig`` (which vLLM loads with its own
class, ignoring ``layer_types``) and ``InklingTextConfig`` (refused by both). Each under a seeded TP,
PP and KV-cache dtype, a model dtype of bfloat16 or float16 (which vLLM's conv state refuses), a
third with ``--disable-sliding-window``. The oracle (``tests/vllm_oracle``) builds vLLM's
``InklingForCausalLM`` / ``InklingForConditionalGeneration`` with their model, decoder layers, conv
states, attention, MoE asserts and towers, and records each layer's own ``get_kv_cache_spec``. Every
layer's name, kind, stage, heads, head sizes, window, block size and KV dtype are compared; a
refusal on one side only is a mismatch. ``KVBUDGET_VLLM_INKLING_CASES`` sets the count.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
import vllm_oracle as vo
from test_vllm_state_models import _compare, _drop_defaults
from vllm_differential import Ours, compare
from vllm_oracle._hf import vllm_config_class

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.inkling import INKLING, INKLING_MM
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_INKLING_CASES", "100"))
GIB = 1 << 30


def _text_kw(rng: random.Random) -> dict[str, Any]:
    """Text-model keys both config classes take (transformers' ``conv_kernel_size`` included)."""
    n = rng.randint(1, 24)
    heads = rng.choice([8, 16, 32, 64, 64, 12])  # 12 and 3: some TP sizes do not divide them (refused)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": rng.choice(
        [heads * 128, 1536, 6144]), "num_key_value_heads": rng.choice([2, 4, 8, 8, 16, 1, 3])}  # fmt: skip
    if rng.random() < 0.5:
        kw["head_dim"] = rng.choice([64, 128, 96])  # 96: a packed conv width between powers of two
    if rng.random() < 0.6:
        kw.update(swa_num_attention_heads=rng.choice([16, 32, 64, 64]), swa_num_key_value_heads=rng.choice([4, 8, 16, 16]))
    if rng.random() < 0.3:
        kw["swa_head_dim"] = rng.choice([64, 128])
    if rng.random() < 0.8:  # ids past the last layer are ignored
        kw["local_layer_ids"] = sorted(rng.sample(range(n + 2), rng.randint(0, n)))
    if rng.random() < 0.6:
        kw["sliding_window_size"] = rng.choice([128, 512, 4096])
    if rng.random() < 0.4:
        kw["conv_kernel_size"] = rng.choice([2, 4, 6])
    return kw


def _towers(rng: random.Random) -> dict[str, Any]:
    """Tower configs: none (disabled), enabled, or enabled and refused by vLLM's towers (a field
    missing is refused by its config class: :func:`test_an_enabled_tower_missing_a_field_is_refused`)."""
    if rng.random() < 0.6:
        return {}
    vision = {"decoder_dmodel": 1536, "vision_encoder_type": "hmlp", "patch_size": rng.choice([14, 16, 40]),
              "temporal_patch_size": rng.choice([1, 2]), "n_channels": 3, "n_layers": rng.choice([1, 2, 4, 24]),
              "use_vision_norm": rng.random() < 0.5}  # fmt: skip
    audio = {"decoder_dmodel": 1536, "n_mel_bins": 80, "mel_vocab_size": 256, "dmel_min_value": -1.0,
             "dmel_max_value": 1.0, "use_audio_norm": True, "audio_mode": "dmel"}  # fmt: skip
    broken = rng.choice([None] * 7 + [("vision", "vision_encoder_type", "linear"), ("vision", "patch_size", 1),
                         ("vision", "n_layers", 0), ("vision", "n_layers", -1), ("audio", "audio_mode", "flow"),
                         ("vision", "temporal_patch_size", 0)])  # fmt: skip
    if broken is not None:
        (vision if broken[0] == "vision" else audio)[broken[1]] = broken[2]
    return {"vision_config": vision, "audio_config": audio}


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    kw = _text_kw(rng)
    pick = rng.random()
    if pick < 0.75:  # vLLM's own classes
        if rng.random() < 0.9:  # the served checkpoint's router (the class defaults fail InklingMoE's assert)
            kw.update(n_shared_experts=rng.choice([1, 2]), shared_expert_sink=True)
        if rng.random() < 0.3:
            kw["dense_mlp_idx"] = rng.choice([1, 3, 100])
        if "conv_kernel_size" not in kw and rng.random() < 0.5:
            kw["sconv_kernel_size"] = rng.choice([2, 3, 4, 8])
        if pick < 0.45:
            cls = vllm_config_class("inkling_model")
            d, arch = cls(**kw).to_dict(), INKLING
            if rng.random() < 0.5:
                _drop_defaults(d, cls)
        else:
            d, arch = vllm_config_class("inkling_mm_model")(text_config=kw, **_towers(rng)).to_dict(), INKLING_MM
    elif pick < 0.92:  # transformers' multimodal class: loaded by vLLM's InklingMMConfig
        d, arch = T.InklingConfig(text_config=kw).to_dict(), INKLING_MM
    else:  # transformers' text class: InklingForCausalLM fails on it
        d, arch = T.InklingTextConfig(**kw).to_dict(), INKLING
        if rng.random() < 0.5:
            d["padded_vocab_size"] = d["vocab_size"]
    engine: dict[str, Any] = {"tp": rng.choice([1, 1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    if rng.random() < 0.2:
        engine["kv_cache_dtype"] = rng.choice(["fp8", "fp8_e5m2", "bfloat16"])
    return {**d, "architectures": [arch]}, engine


def test_inkling_read_as_vllm_reads_it() -> None:
    rng = random.Random("vllm-inkling")
    hf = ({**T.InklingConfig().to_dict(), "architectures": [INKLING_MM]}, {"tp": 1, "pp": 1})
    counts, mismatches = _compare(rng, [hf] + [_case(rng) for _ in range(N)], no_window=0.3, spec=True)
    print(f"\nvLLM Inkling reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] and counts["attention layers"] > 5 * N, counts


def _hf(arch: str = INKLING_MM, **text: Any) -> dict[str, Any]:
    return {**T.InklingConfig(text_config=text).to_dict(), "architectures": [arch]}


def test_conv_states_and_attention_of_a_released_geometry() -> None:
    """transformers' defaults (Inkling's geometry, 66 layers) with every sixth layer full, TP 4: the
    conv state packs K, V (128 each) and two 6144 / 16-wide (local) or 6144 / 8-wide (full) hidden
    slices per head, rounded up to a power of two, in blocks of the 4-token kernel."""
    local = [i for i in range(66) if (i + 1) % 6]
    layers = layers_from_hf_config(_hf(local_layer_ids=local), vllm.EngineConfig(tp=4), kv_cache_dtype="fp8")
    assert [x.name for x in layers[:4]] == ["model.layers.0.conv_state", "model.layers.0.attn",
                                            "model.layers.1.conv_state", "model.layers.1.attn"]  # fmt: skip
    conv = {(x.num_kv_heads, x.head_size, x.head_size_v, x.block_size, x.sliding_window, x.kv_cache_dtype)
            for x in layers if x.name.endswith("conv_state")}  # fmt: skip
    assert conv == {(4, 1024, 0, 4, 4, "auto"), (2, 2048, 0, 4, 4, "auto")}  # 1024 = 2*128 + 2*384; 1792 -> 2048
    attn = {(x.kind, x.num_kv_heads, x.head_size, x.sliding_window, x.block_size, x.kv_cache_dtype)
            for x in layers if x.name.endswith(".attn")}  # fmt: skip
    assert attn == {("sliding", 4, 128, 512, None, "fp8"), ("full", 2, 128, None, None, "fp8")}
    # transformers' layer_types is not vLLM's: without local_layer_ids every layer is full
    assert {x.kind for x in layers_from_hf_config(_hf(), vllm.EngineConfig()) if x.name.endswith(".attn")} == {"full"}


@pytest.mark.parametrize("kw, key", [
    ({"engine": vllm.EngineConfig(speculative_method="mtp")}, "architectures"),  # Inkling's MTP: not checked
    ({"kv_cache_dtype": "int8_per_token_head"}, "kv_cache_dtype"),  # Inkling's specs carry no quant mode
    ({"model_dtype": "float16"}, "dtype"),  # the conv state asserts bfloat16
    ({"cfg": {**T.InklingTextConfig().to_dict(), "architectures": [INKLING]}}, "model_type"),  # padded_vocab_size
    ({"cfg": _hf(INKLING)}, "model_type"),  # the causal LM reads a text config (vLLM's inkling_model)
    ({"engine": vllm.EngineConfig(tp=16)}, "text_config.num_key_value_heads"),  # the conv state: tp <= KV heads
])  # fmt: skip
def test_inkling_refusals(kw: dict[str, Any], key: str) -> None:
    cfg, engine = kw.pop("cfg", _hf(local_layer_ids=[0])), kw.pop("engine", vllm.EngineConfig())
    with pytest.raises(InvalidConfigError) as e:
        layers_from_hf_config(cfg, engine, **kw)
    assert e.value.key == key, e.value


@pytest.mark.parametrize("tower, key", [("vision_config", "n_layers"), ("audio_config", "dmel_min_value")])
def test_an_enabled_tower_missing_a_field_is_refused(tower: str, key: str) -> None:
    """vLLM's tower config classes refuse an enabled tower (``decoder_dmodel`` set) missing a field."""
    section = {k: v for k, v in _towers(random.Random("vllm-inkling-towers"))[tower].items() if k != key}
    with pytest.raises(ValueError, match=f"Enabled Inkling .* tower is missing config fields: {key}$"):
        vllm_config_class("inkling_mm_model")(**{tower: section})
    cfg = {**_hf(local_layer_ids=[0]), tower: section}
    with pytest.raises(InvalidConfigError, match="missing config fields") as e:
        layers_from_hf_config(cfg, vllm.EngineConfig())
    assert e.value.key.startswith(f"{tower}.")


def test_inkling_layers_are_planned_as_vllms_planner_plans_them() -> None:
    """The reader's layers through both planners: one page size for the conv states and the
    attention (vLLM's page unification: the smaller pages' blocks scaled up, or a page that does not
    divide the largest padded)."""
    oracle = vo.load()
    rng = random.Random("vllm-inkling-plan")
    planned = scaled = 0
    for _ in range(40):
        saved, engine = _case(rng)
        try:
            layers = layers_from_hf_config(saved, vllm.EngineConfig(tp=engine["tp"], pp=engine["pp"]),
                                           kv_cache_dtype=engine.get("kv_cache_dtype", "auto"))  # fmt: skip
        except InvalidConfigError:
            continue
        dicts = [{k: v for k, v in vars(x).items() if v is not None} for x in layers]
        settings = {"tp": engine["tp"], "pp": engine["pp"], "max_model_len": rng.choice([8192, 131072])}
        budget = rng.choice([4 * GIB, 20 * GIB, 60 * GIB])
        ours, theirs = Ours.plan(dicts, budget, settings), oracle.plan(dicts, budget, settings)
        if len({x.pp_stage for x in layers}) < engine["pp"]:  # a stage without layers: both refuse (vLLM's
            assert not ours["ok"] and not theirs["ok"], (ours, theirs)  # layout check, kvbudget its own)
            continue
        assert not compare(ours, theirs), compare(ours, theirs)[:3]
        if theirs["ok"]:
            planned += 1
            assert len({g["page_size_bytes"] for g in theirs["groups"]}) == 1, theirs["groups"]
            own = {x.name: x.block_size or 16 for x in layers}  # the engine's 16 for the attention
            scaled += any(g["block_size"] != own[g["layers"][0]] for g in theirs["groups"])
    assert planned >= 8 and scaled >= 4, (planned, scaled)
