"""vLLM mode with state layers (``kind="mamba"``), held to vLLM 0.33.0's own code.

* a differential over ``KVBUDGET_VLLM_STATE_CASES`` seeded hybrid-state deployments
  (tests/vllm_state_cases.py; 3,000 by default): vLLM's Mamba config step, the platform's
  hybrid block-size alignment, the layer classes' ``MambaSpec``, grouping, ``num_blocks``,
  per-request charge, concurrency, log and startup errors (tests/vllm_oracle), against
  ``kvbudget.vllm``, every field compared;
* the Qwen3-Next worked case through the typed API and through vLLM's code;
* the typed API: a state layer's inputs, its refusals in kvbudget's hierarchy.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import vllm_differential
import vllm_oracle as vo

import kvbudget
from kvbudget import vllm

N = int(os.environ.get("KVBUDGET_VLLM_STATE_CASES", "3000"))
GIB = 1 << 30


def qwen3_next(tp: int = 4) -> list[dict[str, Any]]:
    """Qwen3-Next-80B-A3B's layers on one of ``tp`` ranks (its config.json: 48 layers, full
    attention every 4th with 2 KV heads of 256; gated delta net with 16 key heads and 32 value
    heads of 128, conv kernel 4; bf16 states)."""
    conv = [3, (2 * 16 * 128 + 32 * 128) // tp]
    out: list[dict[str, Any]] = []
    for i in range(48):
        if i % 4 == 3:
            out.append({"name": f"model.layers.{i}.self_attn.attn", "kind": "full",
                        "num_kv_heads": max(1, 2 // tp), "head_size": 256})  # fmt: skip
        else:
            out.append({"name": f"model.layers.{i}.linear_attn", "kind": "mamba", "num_kv_heads": 0, "head_size": 0,
                        "state_shapes": [conv, [32 // tp, 128, 128]], "state_dtypes": ["bfloat16", "bfloat16"],
                        "mamba_type": "gdn_attn", "prefill_checkpoint": "flashinfer_gdn"})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def oracle() -> vo.VllmOracle:
    return vo.load()


def test_differential_against_vllm_with_state_layers() -> None:
    outcomes = vllm_differential.run("vllm_state_cases", N, "vLLM hybrid-state differential")
    assert outcomes.get("ok", 0) > N // 3 and outcomes.get("ValueError", 0) > N // 50, outcomes


@pytest.mark.parametrize(("prefix", "expected"), [
    (True, {"block": 320, "mamba_block": 320, "padded": 327_680, "blocks": 5_461, "per_request": [3, 3, 3, 103],
            "tokens": 1_597_732, "concurrency": "48.76"}),
    (False, {"block": 272, "mamba_block": 32_768, "padded": 278_528, "blocks": 6_425, "per_request": [1, 1, 1, 121],
             "tokens": 1_697_858, "concurrency": "51.81"}),
])  # fmt: skip
def test_qwen3_next_plans_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, expected: dict[str, Any]) -> None:
    """TP 4, 20 GiB per GPU, 32,768 tokens: the attention block raised to hold a 274,432-byte
    state page (by 64-token FlashInfer checkpoints with prefix caching), the state page padded."""
    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": prefix}
    theirs = oracle.plan(qwen3_next(), 20 * GIB, engine)
    ours = vllm.plan([vllm.LayerSpec(**x) for x in qwen3_next()], 20 * GIB, vllm.EngineConfig(**engine))
    assert ours.mamba is not None and theirs["mamba"] is not None
    for got in (theirs, vllm_differential.Ours.plan(qwen3_next(), 20 * GIB, engine)):
        assert got["mamba"] == {"mamba_cache_mode": "align" if prefix else "none", "block_size": expected["block"],
                                "mamba_block_size": expected["mamba_block"],
                                "mamba_page_size_padded": expected["padded"]}  # fmt: skip
        assert (got["num_blocks"], got["blocks_per_request"]) == (expected["blocks"], expected["per_request"])
        assert got["kv_cache_size_tokens"] == expected["tokens"]
        assert f"{got['max_concurrency']:.2f}" == expected["concurrency"]
    assert ours.log[0] == ("info", f"Setting attention block size to {expected['block']} tokens to ensure that "
                                   "attention page size is >= mamba page size.")  # fmt: skip
    assert [g.spec for g in ours.groups] == ["MambaSpec"] * 3 + ["FullAttentionSpec"]
    view = next(t for t in ours.tensors[0] if t.layers[0].endswith("linear_attn"))
    assert (view.shape[1:], view.dtype) == ((1, 1, 274_432), "int8")  # one packed state per block


def test_a_state_layer_needs_one_dtype_per_shape() -> None:
    bad = [vllm.LayerSpec("s", "mamba", 0, 0, state_shapes=((3, 64), (8, 64, 64)), state_dtypes=("bfloat16",)),
           vllm.LayerSpec("a", "full", 1, 128)]  # fmt: skip
    with pytest.raises(kvbudget.InvalidConfigError, match="one dtype per state shape"):
        vllm.plan(bad, GIB)
    with pytest.raises(kvbudget.InvalidConfigError, match="not float32, bfloat16 or float16"):
        vllm.plan([vllm.LayerSpec("s", "mamba", 0, 0, state_shapes=((4,),), state_dtypes=("int8",))], GIB)


def test_a_state_layers_fields_are_declared_once() -> None:
    """The new inputs come from the core's declaration, typed and defaulted there."""
    fields = {s.name: s for s in vllm.settings.LAYER_FIELDS}
    assert fields["state_shapes"].py == "shapes" and fields["state_shapes"].default == ()
    assert fields["mamba_type"].choices == ("mamba1", "mamba2", "short_conv", "linear", "gdn_attn")
    assert fields["prefill_checkpoint"].choices == ("none", "mamba2", "flashinfer_gdn", "ple_short_conv", "flashkda")
    assert "mamba" in fields["kind"].choices
    engine = {s.name: s for s in vllm.settings.ENGINE_SETTINGS}
    assert engine["enable_prefix_caching"].default is True and engine["attention_kernel_block_size"].default == 16
    layer = vllm.LayerSpec("s", "mamba", 0, 0, state_shapes=((3, 64),), state_dtypes=("bfloat16",))
    assert hash(layer) == hash(vllm.LayerSpec("s", "mamba", 0, 0, state_shapes=((3, 64),), state_dtypes=("bfloat16",)))


def test_the_draws_reach_every_state_branch() -> None:
    """The differential's deployments reach each mode, mixer, checkpoint export and alignment
    outcome (counted on kvbudget's plans, which the differential holds equal to vLLM's)."""
    import vllm_state_cases

    seen: dict[str, int] = {}

    def count(key: str) -> None:
        seen[key] = seen.get(key, 0) + 1

    for seed in range(N):
        layers, available, engine = vllm_state_cases.deployment(seed)
        for t in {x.get("mamba_type") for x in layers if x["kind"] == "mamba"}:
            count(f"type {t}")
        if any(x["kind"] == "circular_buffer" for x in layers):
            count("rings beside states")
        if any(x.get("prefill_checkpoint") == "flashkda" for x in layers):
            count("flashkda")
        r = vllm_differential.Ours.plan(layers, available, engine)
        if not r["ok"]:
            continue
        m = r["mamba"]
        count(f"mode {m['mamba_cache_mode']}")
        count("attention-free" if all(x["kind"] == "mamba" for x in layers) else "hybrid")
        if m["mamba_page_size_padded"] is not None:
            count("padded")
        if any(text.startswith("Setting attention block size") for _, text in r["log"]):
            count("raised")
        spec = engine.get("num_speculative_tokens") or 0
        state_pages = {b for b, g in zip(r["blocks_per_request"], r["worker_groups"][0]) if g["spec"] == "MambaSpec"}
        if m["mamba_cache_mode"] == "align" and 3 + spec in state_pages:
            count("checkpoint")
        if engine.get("use_replayssm") and spec:
            count("replayssm")
    for key in ("mode align", "mode none", "attention-free", "hybrid", "padded", "raised", "checkpoint", "replayssm",
                "rings beside states", "flashkda",
                *(f"type {t}" for t in ("mamba1", "mamba2", "short_conv", "linear", "gdn_attn"))):
        assert seen.get(key, 0) >= 5, (key, seen)


def _hybrid_configs() -> dict[str, dict[str, Any]]:
    """Published configs (bundled) and transformers' class defaults, one per vLLM reader family."""
    import transformers as T

    from kvbudget.models.hybrid_state import get_hybrid_state_model

    lfm2 = {**T.Lfm2Config(full_attn_idxs=[2, 5, 8, 10, 12, 14], num_hidden_layers=16).to_dict(),
            "architectures": ["Lfm2ForCausalLM"], "conv_dim": 2560, "block_dim": 2560}  # fmt: skip
    return {
        "nemotron-nano-9b-v2": get_hybrid_state_model("nvidia-nemotron-nano-9b-v2").config,
        "falcon-h1-7b": get_hybrid_state_model("falcon-h1-7b-instruct").config,
        "kimi-linear-48b-a3b": get_hybrid_state_model("kimi-linear-48b-a3b-instruct").config,
        "granite-4.0-h (class defaults, attention every 6th)": {
            **T.GraniteMoeHybridConfig(layer_types=["full_attention" if i % 6 == 5 else "linear_attention"
                                                    for i in range(32)]).to_dict(),
            "architectures": ["GraniteMoeHybridForCausalLM"]},  # fmt: skip
        "jamba (class defaults)": {**T.JambaConfig().to_dict(), "architectures": ["JambaForCausalLM"]},
        "lfm2 (class defaults)": lfm2,
    }


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("model", ["nemotron-nano-9b-v2", "falcon-h1-7b", "kimi-linear-48b-a3b",
                                   "granite-4.0-h (class defaults, attention every 6th)", "jamba (class defaults)",
                                   "lfm2 (class defaults)"])  # fmt: skip
def test_hybrid_models_as_read_plan_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, model: str) -> None:
    """Each Mamba / short-conv / KDA family's config read by ``layers_from_hf_config`` on 4 ranks, then
    planned by vLLM's own code and by kvbudget at 20 GiB and 32,768 tokens: every compared field
    equal."""
    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": prefix}
    specs = vllm.layers_from_hf_config(_hybrid_configs()[model], vllm.EngineConfig(**engine))
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "state_dtypes", "mamba_type",
                                          "prefill_checkpoint")} for x in specs]  # fmt: skip
    assert any(x["kind"] == "mamba" for x in layers) and any(x["kind"] in ("full", "mla") for x in layers)
    theirs = oracle.plan(layers, 20 * GIB, engine)
    ours = vllm_differential.Ours.plan(layers, 20 * GIB, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    assert theirs["num_blocks"] > 0


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("tokens", [1, 3, 8])
def test_lfm2_with_an_eagle_head_plans_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, tokens: int) -> None:
    """LFM2 (class defaults, conv dim 2,560) with a one-layer EAGLE head on 4 ranks at 20 GiB: its
    ``ShortConv`` states keep ``tokens`` more conv rows while the model class sizes the attention
    block without them (``config_state_shapes``); vLLM pads the state page to that block and, where
    the page is smaller than the state (8 tokens here), fails to start on ``MambaSpec``'s
    assertion. kvbudget's plan or refusal equals vLLM's own code on every compared field."""
    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": prefix, "speculative_method": "eagle",
              "num_speculative_tokens": tokens}  # fmt: skip
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_size": 2048}  # fmt: skip
    specs = vllm.layers_from_hf_config(_hybrid_configs()["lfm2 (class defaults)"], vllm.EngineConfig(**engine),
                                       draft=head)  # fmt: skip
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "config_state_shapes", "state_dtypes",
                                          "mamba_type", "prefill_checkpoint", "is_draft")} for x in specs]  # fmt: skip
    states = [x for x in layers if x["kind"] == "mamba"]
    assert states and all(x["config_state_shapes"] == ((2, 640),) != x["state_shapes"] for x in states), states[0]
    theirs = oracle.plan(layers, 20 * GIB, engine)
    ours = vllm_differential.Ours.plan(layers, 20 * GIB, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    assert theirs["ok"] == (tokens < 8), theirs.get("error")


def _mtp_config(model: str) -> dict[str, Any]:
    from kvbudget.models.hybrid_state import get_hybrid_state_model

    if model == "nemotron-h (class defaults, one MTP step)":
        import transformers as T

        return {**T.NemotronHConfig(num_nextn_predict_layers=1, head_dim=128).to_dict(),
                "architectures": ["NemotronHForCausalLM"]}  # fmt: skip
    return get_hybrid_state_model(model).config


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize(("model", "tokens"), [("qwen3-next-80b-a3b-instruct", 2), ("qwen3.5-9b", 3),
                                               ("nemotron-h (class defaults, one MTP step)", 2)])  # fmt: skip
def test_hybrids_with_their_mtp_drafter_plan_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, model: str,
                                                          tokens: int) -> None:  # fmt: skip
    """A bundled Qwen3-Next / Qwen3.5 (and a Nemotron-H) served with its own MTP drafter, read by
    ``layers_from_hf_config`` (the predictor's attention layer, the state's speculative rows) and
    planned by vLLM's code and by kvbudget on 4 ranks at 20 GiB: every compared field equal, and
    the state groups keep ``tokens`` more blocks per request than without the drafter."""
    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": prefix, "speculative_method": "mtp",
              "num_speculative_tokens": tokens}  # fmt: skip
    specs = vllm.layers_from_hf_config(_mtp_config(model), vllm.EngineConfig(**engine))
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "state_dtypes", "mamba_type",
                                          "prefill_checkpoint", "is_draft", "sliding_window")}
              for x in specs]  # fmt: skip
    drafter = [x["name"] for x in layers if x["is_draft"]]
    assert drafter in (["mtp.layers.0.self_attn.attn"], ["mtp.layers.0.mixer.attn"]), drafter
    theirs = oracle.plan(layers, 20 * GIB, engine)
    ours = vllm_differential.Ours.plan(layers, 20 * GIB, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    plain = vllm_differential.Ours.plan([x for x in layers if not x["is_draft"]], 20 * GIB,
                                        {**engine, "speculative_method": None, "num_speculative_tokens": None})  # fmt: skip
    assert theirs["num_blocks"] > 0 and plain["ok"]
    states = [b for b, g in zip(theirs["blocks_per_request"], theirs["worker_groups"][0]) if g["spec"] == "MambaSpec"]
    plain_states = [b for b, g in zip(plain["blocks_per_request"], plain["worker_groups"][0])
                    if g["spec"] == "MambaSpec"]  # fmt: skip
    assert states and [b - tokens for b in states] == plain_states, (states, plain_states)


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize(("model", "method"), [("qwen3-next-80b-a3b-instruct", "eagle3"),
                                               ("nvidia-nemotron-nano-9b-v2", "eagle3"),
                                               ("falcon-h1-7b-instruct", "eagle"),
                                               ("kimi-linear-48b-a3b-instruct", "eagle3")])  # fmt: skip
def test_hybrids_with_an_eagle_head_plan_as_vllm_does(oracle: vo.VllmOracle, prefix: bool, model: str,
                                                      method: str) -> None:  # fmt: skip
    """A bundled hybrid served with a one-layer EAGLE / EAGLE3 head (k = 3), read by
    ``layers_from_hf_config`` and planned by vLLM's code and by kvbudget on 4 ranks at 20 GiB: every
    compared field equal; the head's layer joins an attention group and every state keeps three
    more conv rows."""
    from kvbudget.models.hybrid_state import get_hybrid_state_model

    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": prefix, "speculative_method": method,
              "num_speculative_tokens": 3}  # fmt: skip
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 32,
            "num_key_value_heads": 8, "hidden_size": 4096}  # fmt: skip
    saved = get_hybrid_state_model(model).config
    specs = vllm.layers_from_hf_config(saved, vllm.EngineConfig(**engine), draft=head)
    plain = vllm.layers_from_hf_config(saved, vllm.EngineConfig(tp=4))
    conv = [x.state_shapes[0] for x in specs if x.kind == "mamba"]
    assert conv and all(c[0] == p.state_shapes[0][0] + 3 for c, p in zip(conv, (x for x in plain if x.kind == "mamba")))
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "state_dtypes", "mamba_type",
                                          "prefill_checkpoint", "is_draft", "sliding_window")}
              for x in specs]  # fmt: skip
    assert [x["is_draft"] for x in layers].count(True) == 1
    theirs = oracle.plan(layers, 20 * GIB, engine)
    ours = vllm_differential.Ours.plan(layers, 20 * GIB, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    assert theirs["num_blocks"] > 0


@pytest.mark.parametrize(("model", "tokens"), [("nvidia-nemotron-nano-9b-v2", 0),
                                               ("nemotron-h (class defaults, one MTP step)", 2)])  # fmt: skip
def test_nemotron_h_with_replayssm_plans_as_vllm_does(oracle: vo.VllmOracle, model: str, tokens: int) -> None:
    """Nemotron-H served with ``--use-replayssm --mamba-backend flashinfer --no-enable-prefix-caching``
    (with its MTP step, k = 2): each Mamba-2 state carries the x / dt / B rings (16 steps, and the
    verify window with FlashInfer), keeps no per-draft-token blocks, and the plan equals vLLM's."""
    engine = {"max_model_len": 32768, "tp": 4, "enable_prefix_caching": False, "use_replayssm": True}
    if tokens:
        engine.update(speculative_method="mtp", num_speculative_tokens=tokens)
    specs = vllm.layers_from_hf_config(_mtp_config(model), vllm.EngineConfig(**engine, mamba_backend="flashinfer"))
    state = next(x for x in specs if x.kind == "mamba")
    assert len(state.state_shapes) == 5 and state.state_shapes[2][1] == 16 + 1 + tokens, state.state_shapes
    layers = [{k: getattr(x, k) for k in ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "kv_cache_dtype",
                                          "model_dtype", "state_shapes", "state_dtypes", "mamba_type",
                                          "prefill_checkpoint", "is_draft", "sliding_window")}
              for x in specs]  # fmt: skip
    theirs = oracle.plan(layers, 20 * GIB, engine)
    ours = vllm_differential.Ours.plan(layers, 20 * GIB, engine)
    assert not vllm_differential.compare(ours, theirs), vllm_differential.compare(ours, theirs)
    assert theirs["num_blocks"] > 0
