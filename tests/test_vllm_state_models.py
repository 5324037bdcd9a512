"""``kvbudget.vllm.layers_from_hf_config`` on hybrid-state models, held to vLLM 0.33.0's own
reading: the gated-delta-net hybrids Qwen3-Next, Qwen3.5 and Qwen3.5-MoE (text and multimodal
wrappers), Kimi-Linear (KDA), the Mamba-2 hybrids Nemotron-H, Granite-4.0-H and Falcon-H1, LFM2 and LFM2-MoE (short
convolutions) and Jamba (Mamba-1).

The configs are built by transformers 5.19.0's classes (defaults, then seeded variants of the
layer count, interval, heads and the gated delta net's dims, saved with every key and sparse),
each with a seeded TP and PP. The oracle (tests/vllm_oracle/_hf.py) builds the model with
vLLM's own ``Qwen3NextModel`` / ``Qwen3_5Model`` classes (decoder layers, attention) and takes
each state layer's shapes and dtypes from the model class's ``get_mamba_state_shape_from_config``
and ``get_mamba_state_dtype_from_config`` (``MambaStateShapeCalculator``, and Qwen3.5's
``mamba_ssm_dtype`` hook). Nemotron-H configs come from transformers' ``NemotronHConfig`` on seeded
layer patterns, heads, windows and Mamba-2 dims (saved whole, sparse, or as checkpoints write them:
a ``hybrid_override_pattern`` and the legacy ``mamba_*`` keys); vLLM's ``NemotronHModel`` builds
them, its ``MambaMixer2`` with its TP assertions, and ``NemotronHForCausalLMConfig``'s SSM dtype
hook runs; Granite-4.0-H configs from ``GraniteMoeHybridConfig`` (``layer_types`` with today's or
the released configs' legacy names, or none) through ``GraniteMoeHybridModel``; Falcon-H1 configs
from ``FalconH1Config`` through ``FalconH1Model`` (its parallel attention and SSM branches); LFM2
configs from ``Lfm2Config`` (with and without the ``conv_dim`` / ``block_dim`` keys vLLM reads)
through ``Lfm2Model`` and its ``ShortConv`` (LFM2-MoE with its MoE blocks' TP check); Jamba
configs from ``JambaConfig`` through ``JambaModel`` and its Mamba-1 ``MambaMixer``; Kimi-Linear
configs from vLLM's own ``KimiLinearConfig`` through ``KimiLinearModel`` (KDA and Kimi's MLA). The
gated-delta-net cases draw the model's own MTP drafter (``Qwen3NextMTP`` / ``Qwen3_5MTP``, its
layer count named or not, and ``SpeculativeConfig``'s ``n_predict`` check lifted). Every layer's
name, kind, stage, heads, head size, window, state shapes and dtypes are compared; a refusal on
one side only is a mismatch. The bundled checkpoints' configs (``kvbudget models``) are read too.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
import transformers as T
from vllm_oracle._hf import VllmLoadError, vllm_config_class, vllm_layers, vllm_load_config

from kvbudget import InvalidConfigError, vllm
from kvbudget.models.hybrid_state import get_hybrid_state_model, hybrid_state_entries
from kvbudget.vllm.models import layers_from_hf_config

N = int(os.environ.get("KVBUDGET_VLLM_STATE_MODEL_CASES", "300"))
_ATTENTION = ("name", "kind", "num_kv_heads", "head_size", "head_size_v", "sliding_window", "attention_chunk_size",
              "is_draft", "pp_stage")  # fmt: skip
_STATE = ("name", "kind", "is_draft", "pp_stage", "state_shapes", "config_state_shapes", "state_dtypes")
#: Compared too with ``spec=True``: the fields only some oracle records carry (Inkling's).
_SPEC = ("block_size", "kv_cache_dtype")
_CLASSES = [(T.Qwen3NextConfig, "Qwen3NextForCausalLM", False), (T.Qwen3_5TextConfig, "Qwen3_5ForCausalLM", False),
            (T.Qwen3_5MoeTextConfig, "Qwen3_5MoeForCausalLM", False),
            (T.Qwen3_5Config, "Qwen3_5ForConditionalGeneration", True),
            (T.Qwen3_5MoeConfig, "Qwen3_5MoeForConditionalGeneration", True)]  # fmt: skip


def _drop_defaults(d: dict[str, Any], cls: Any) -> None:
    """``d`` sparse, as released configs are: the keys equal to ``cls``'s defaults removed."""
    defaults = cls().to_dict()
    for key in [k for k, v in d.items() if k in defaults and defaults[k] == v and k != "model_type"]:
        del d[key]


def _text_kw(rng: random.Random) -> dict[str, Any]:
    heads = rng.choice([8, 12, 16, 16, 32, 32])  # 12 and 3 KV heads: some TP sizes do not shard them (refused)
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 48), "num_attention_heads": heads,
                          "num_key_value_heads": rng.choice([1, 2, 2, 3, 4, 4, 8]), "hidden_size": heads * 128,
                          "linear_num_key_heads": rng.choice([8, 16]),
                          "linear_num_value_heads": rng.choice([16, 20, 32, 32, 48, 64]),
                          "linear_key_head_dim": rng.choice([64, 128]), "linear_value_head_dim": rng.choice([64, 128]),
                          "linear_conv_kernel_dim": rng.choice([2, 4])}  # fmt: skip
    if rng.random() < 0.7:
        kw["head_dim"] = rng.choice([128, 256])
    if rng.random() < 0.8:
        kw["full_attention_interval"] = rng.choice([2, 3, 4, 8])
    return kw


def _case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    cls, arch, wrapped = rng.choice(_CLASSES)
    kw = _text_kw(rng)
    config = cls(text_config=kw) if wrapped else cls(**kw)
    d = config.to_dict()
    if rng.random() < 0.5:  # sparse, as released configs are
        _drop_defaults(d, cls)
    text = d.get("text_config", d) if wrapped else d
    if rng.random() < 0.4 and arch != "Qwen3NextForCausalLM":  # released Qwen3.5 configs name it
        text["mamba_ssm_dtype"] = rng.choice(["float32", "bfloat16"])
    if rng.random() < 0.4:
        text.pop("layer_types", None)  # the interval gives them
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    if rng.random() < 0.4:  # the model's own MTP drafter, with its layer count named or not
        engine.update(speculative_method="mtp", num_speculative_tokens=rng.choice([1, 1, 2, 3, 4]))
        key = "num_nextn_predict_layers" if arch == "Qwen3NextForCausalLM" else "mtp_num_hidden_layers"
        if rng.random() < 0.6:
            (d if wrapped and rng.random() < 0.3 else text)[key] = rng.choice([1, 1, 2])
    return {**d, "architectures": [arch]}, engine


def _fields(x: dict[str, Any], spec: bool = False) -> dict[str, Any]:
    return {k: x.get(k) for k in (_STATE if x["kind"] == "mamba" else _ATTENTION + (_SPEC if spec else ()))}


def _ours(saved: dict[str, Any], engine: dict[str, Any], dtype: str, no_window: bool = False,
          spec: bool = False) -> list[dict[str, Any]] | str:  # fmt: skip
    settings = dict(engine)
    draft, kv = settings.pop("draft", None), settings.pop("kv_cache_dtype", "auto")
    try:
        layers = layers_from_hf_config(saved, vllm.EngineConfig(**settings), model_dtype=dtype, draft=draft,
                                       disable_sliding_window=no_window, kv_cache_dtype=kv)  # fmt: skip
    except InvalidConfigError as e:
        return f"refused: {e}"
    out = []
    for x in layers:
        d = {k: getattr(x, k) for k in set(_STATE) | set(_ATTENTION) | set(_SPEC)}
        d["state_shapes"] = [list(s) for s in x.state_shapes]
        d["config_state_shapes"] = [list(s) for s in x.config_state_shapes]
        d["state_dtypes"] = list(x.state_dtypes)
        out.append(_fields(d, spec))
    return out


def _theirs(saved: dict[str, Any], engine: dict[str, Any], dtype: str, no_window: bool = False,
            spec: bool = False) -> list[dict[str, Any]] | str:  # fmt: skip
    loaded = vllm_load_config(saved)
    replay = {k: engine[k] for k in _REPLAY_KEYS if k in engine}
    draft = engine.get("draft")
    drafter = None if draft is None else T.CONFIG_MAPPING[draft["model_type"]].from_dict(dict(draft))
    try:
        return [_fields(x, spec) for x in vllm_layers(loaded, tp=engine["tp"], pp=engine["pp"], model_dtype=dtype,
                                                      disable_sliding_window=no_window, draft_config=drafter, **replay,
                                                      method=engine.get("speculative_method"),
                                                      num_speculative_tokens=engine.get("num_speculative_tokens"),
                                                      kv_cache_dtype=engine.get("kv_cache_dtype", "auto"))]  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"


def _compare(rng: random.Random, cases: list[tuple[dict[str, Any], dict[str, Any]]], no_window: float = 0.0,
             spec: bool = False) -> tuple[dict[str, int], list[str]]:  # fmt: skip
    """Each case read by kvbudget and by vLLM (a seeded model dtype; ``--disable-sliding-window``
    with probability ``no_window``; an engine's ``kv_cache_dtype``; with ``spec``, the
    :data:`_SPEC` fields too): the counts and the mismatches."""
    counts = {"compared": 0, "refused": 0, "state layers": 0, "attention layers": 0, "drafter layers": 0}
    mismatches: list[str] = []
    for i, (saved, engine) in enumerate(cases):
        dtype = rng.choice(["bfloat16", "float16"])
        off = rng.random() < no_window
        ours, theirs = _ours(saved, engine, dtype, off, spec), _theirs(saved, engine, dtype, off, spec)
        counts["compared"] += 1
        if isinstance(ours, str) or isinstance(theirs, str):
            if isinstance(ours, str) != isinstance(theirs, str):
                mismatches.append(f"case {i} ({saved['architectures'][0]}, {engine}): kvbudget {str(ours)[:200]} "
                                  f"vs vLLM {str(theirs)[:200]}")  # fmt: skip
            counts["refused"] += 1
            continue
        counts["state layers"] += sum(x["kind"] == "mamba" for x in theirs)
        counts["attention layers"] += sum(x["kind"] != "mamba" for x in theirs)
        counts["drafter layers"] += sum(bool(x["is_draft"]) for x in theirs)
        if ours != theirs:
            diff = next((f"{a} vs {b}" for a, b in zip(ours, theirs) if a != b), f"{len(ours)} vs {len(theirs)} layers")
            mismatches.append(f"case {i} ({saved['architectures'][0]}, {engine}): {diff}")
    return counts, mismatches


def test_gated_delta_net_models_read_as_vllm_reads_them() -> None:
    rng = random.Random("vllm-state-models")
    cases = [({**cls().to_dict(), "architectures": [arch]}, {"tp": 1, "pp": 1}) for cls, arch, _ in _CLASSES]
    counts, mismatches = _compare(rng, cases + [_case(rng) for _ in range(N)])
    print(f"\nvLLM gated-delta-net reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > 10 * N, counts
    assert counts["drafter layers"] > N // 5, counts


def _nemotron_h_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(1, 40)
    pattern = "".join(rng.choice("MMMM-*E") for _ in range(n))
    kw: dict[str, Any] = {"hybrid_override_pattern": pattern, "num_attention_heads": rng.choice([8, 12, 16, 32, 40]),
                          "num_key_value_heads": rng.choice([1, 2, 4, 8, 8, 3]), "hidden_size": rng.choice([1024, 4480]),
                          "mamba_num_heads": rng.choice([8, 24, 64, 128, 128]), "mamba_head_dim": rng.choice([32, 64, 80]),
                          "n_groups": rng.choice([1, 2, 4, 8, 8, 3]), "ssm_state_size": rng.choice([16, 64, 128]),
                          "conv_kernel": rng.choice([2, 4])}  # fmt: skip
    if rng.random() < 0.2:
        kw["head_dim"] = rng.choice([64, 256])  # transformers' class refuses None (vLLM's fallback)
    if rng.random() < 0.25:
        kw["sliding_window"] = rng.choice([256, 4096])
    if rng.random() < 0.3:
        kw["mamba_ssm_cache_dtype"] = rng.choice(["bfloat16", "float16", "auto"])
    mtp = rng.random() < 0.35  # the MTP drafter: its step count and predictor pattern
    if mtp:
        kw["num_nextn_predict_layers"] = rng.choice([1] * 8 + [0, 2])
        if rng.random() < 0.6:
            kw["mtp_hybrid_override_pattern"] = rng.choice(["*E"] * 4 + ["E*", "*", "E", "**E", "*M"])
    d = T.NemotronHConfig(**kw).to_dict()
    form = rng.choice(["whole", "sparse", "checkpoint"])
    if form == "sparse":
        _drop_defaults(d, T.NemotronHConfig)
    elif form == "checkpoint":  # as released config.json files are written
        del d["layers_block_type"]
        d.update(hybrid_override_pattern=pattern, num_hidden_layers=n)
        for key, legacy in (("n_groups", "mamba_n_groups"), ("conv_kernel", "mamba_d_conv")):
            if rng.random() < 0.5:
                d[legacy] = d.pop(key)
        if "mtp_hybrid_override_pattern" in kw:
            del d["mtp_layers_block_type"]
            d["mtp_hybrid_override_pattern"] = kw["mtp_hybrid_override_pattern"]
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    if mtp:
        engine.update(speculative_method="mtp", num_speculative_tokens=rng.choice([1, 2, 3]))
    return {**d, "architectures": ["NemotronHForCausalLM"]}, engine


def test_nemotron_h_read_as_vllm_reads_it() -> None:
    """Nemotron-H (Mamba-2 beside attention, MLP and MoE layers) on generated configs, the class
    defaults included; a third with ``--disable-sliding-window``; about a third with the MTP
    drafter (``NemotronHMultiTokenPredictor``: its step count, pattern saved either way)."""
    rng = random.Random("vllm-nemotron-h")
    cases = [({**T.NemotronHConfig().to_dict(), "architectures": ["NemotronHForCausalLM"]}, {"tp": 1, "pp": 1})]
    counts, mismatches = _compare(rng, cases + [_nemotron_h_case(rng) for _ in range(N)], no_window=0.3)
    print(f"\nvLLM Nemotron-H reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 3 // 5 and counts["state layers"] > 5 * N, counts
    assert counts["drafter layers"] > N // 20, counts


def _granite_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n, hidden, expand = rng.randint(1, 40), rng.choice([768, 1024, 1536, 4096]), rng.choice([1, 2])
    kw: dict[str, Any] = {"num_hidden_layers": n, "hidden_size": hidden, "num_attention_heads": rng.choice([8, 12, 16, 32]),
                          "num_key_value_heads": rng.choice([1, 2, 4, 8, 8, None]), "mamba_expand": expand,
                          "mamba_n_heads": rng.choice([h for h in (8, 16, 48, 64, 128) if expand * hidden % h == 0]),
                          "mamba_n_groups": rng.choice([1, 1, 2, 4, 8]), "mamba_d_state": rng.choice([64, 128, 256]),
                          "mamba_d_conv": rng.choice([2, 4]), "position_embedding_type": rng.choice([None, "rope"])}  # fmt: skip
    if rng.random() < 0.85:
        kw["layer_types"] = [rng.choice(["linear_attention"] * 4 + ["full_attention"]) for _ in range(n)]
    d = T.GraniteMoeHybridConfig(**kw).to_dict()
    if rng.random() < 0.5:  # sparse
        _drop_defaults(d, T.GraniteMoeHybridConfig)
    if rng.random() < 0.5 and d.get("layer_types"):  # as the released configs name them
        d["layer_types"] = [{"linear_attention": "mamba", "full_attention": "attention"}[t] for t in d["layer_types"]]
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    return {**d, "architectures": ["GraniteMoeHybridForCausalLM"]}, engine


def test_granite_4_h_read_as_vllm_reads_it() -> None:
    """Granite-4.0-H (Mamba-2 and attention layers by ``layer_types``) on generated configs."""
    rng = random.Random("vllm-granite-4-h")
    default = {**T.GraniteMoeHybridConfig().to_dict(), "architectures": ["GraniteMoeHybridForCausalLM"]}
    counts, mismatches = _compare(rng, [(default, {"tp": 1, "pp": 1})] + [_granite_case(rng) for _ in range(N)])
    print(f"\nvLLM Granite-4.0-H reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > N, counts


def _falcon_h1_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    hidden, expand = rng.choice([768, 1024, 2048]), rng.choice([1, 2])
    d_ssm = rng.choice([None, 1024, 1536, 2048])
    inter = d_ssm or expand * hidden
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 30), "hidden_size": hidden, "mamba_d_ssm": d_ssm,
                          "num_attention_heads": rng.choice([8, 12, 16]), "num_key_value_heads": rng.choice([1, 2, 4, 8, None]),
                          "mamba_expand": expand, "mamba_n_heads": rng.choice([h for h in (8, 16, 24, 64) if inter % h == 0]),
                          "mamba_n_groups": rng.choice([1, 1, 2, 4]), "mamba_d_state": rng.choice([64, 128, 256]),
                          "mamba_d_conv": rng.choice([2, 4])}  # fmt: skip
    d = T.FalconH1Config(**kw).to_dict()
    if rng.random() < 0.5:  # sparse
        _drop_defaults(d, T.FalconH1Config)
    if rng.random() < 0.3:  # released configs carry head_dim (not a field of the class)
        d["head_dim"] = rng.choice([64, 128])
    if rng.random() < 0.15:
        d["sliding_window"] = rng.choice([512, 4096])
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    return {**d, "architectures": ["FalconH1ForCausalLM"]}, engine


def test_falcon_h1_read_as_vllm_reads_it() -> None:
    """Falcon-H1 (attention and a Mamba-2 mixer in every layer) on generated configs."""
    rng = random.Random("vllm-falcon-h1")
    default = {**T.FalconH1Config().to_dict(), "architectures": ["FalconH1ForCausalLM"]}
    counts, mismatches = _compare(rng, [(default, {"tp": 1, "pp": 1})] + [_falcon_h1_case(rng) for _ in range(N)],
                                  no_window=0.3)  # fmt: skip
    print(f"\nvLLM Falcon-H1 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["attention layers"] > N, counts


def _lfm2_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n, hidden = rng.randint(1, 24), rng.choice([1024, 1536, 2048])
    kw: dict[str, Any] = {"num_hidden_layers": n, "hidden_size": hidden, "num_attention_heads": rng.choice([8, 16, 24, 32]),
                          "num_key_value_heads": rng.choice([1, 2, 4, 8, 8]), "conv_L_cache": rng.choice([2, 3, 4])}
    if rng.random() < 0.8:
        kw["full_attn_idxs"] = sorted(rng.sample(range(n), rng.randint(0, n)))
    d = T.Lfm2Config(**kw).to_dict()
    if rng.random() < 0.5:
        del d["layer_types"]  # derived from full_attn_idxs again
    if rng.random() < 0.9:  # released configs carry them; transformers' class does not define them
        d.update(block_dim=hidden, conv_dim=rng.choice([hidden, hidden // 2, 1000]))
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2])}
    return {**d, "architectures": ["Lfm2ForCausalLM"]}, engine


def _lfm2_moe_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(1, 24)
    kw: dict[str, Any] = {"num_hidden_layers": n, "hidden_size": rng.choice([1024, 2048]),
                          "num_attention_heads": rng.choice([8, 16, 32]), "num_key_value_heads": rng.choice([1, 2, 4, 8]),
                          "conv_L_cache": rng.choice([2, 3]), "num_dense_layers": rng.choice([0, 2, 30]),
                          "num_experts": rng.choice([4, 32])}  # fmt: skip
    if rng.random() < 0.9:
        kw["layer_types"] = [rng.choice(["conv", "conv", "full_attention"]) for _ in range(n)]
    d = T.Lfm2MoeConfig(**kw).to_dict()
    engine = {"tp": rng.choice([1, 2, 4, 8]), "pp": rng.choice([1, 1, 2])}
    return {**d, "architectures": ["Lfm2MoeForCausalLM"]}, engine


def test_lfm2_read_as_vllm_reads_it() -> None:
    """LFM2 and LFM2-MoE (short convolutions beside attention) on generated configs."""
    rng = random.Random("vllm-lfm2")
    counts, mismatches = _compare(rng, [(_lfm2_moe_case if i % 3 == 2 else _lfm2_case)(rng) for i in range(N)])
    print(f"\nvLLM LFM2 reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > N, counts


def _jamba_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    period = rng.choice([2, 4, 8])
    kw: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 32), "hidden_size": rng.choice([1024, 1536, 4096]),
                          "num_attention_heads": rng.choice([8, 12, 32]), "num_key_value_heads": rng.choice([1, 2, 8, 4]),
                          "attn_layer_period": period, "attn_layer_offset": rng.randrange(period),
                          "mamba_d_state": rng.choice([16, 64]), "mamba_d_conv": rng.choice([2, 4]),
                          "mamba_expand": rng.choice([1, 2])}  # fmt: skip
    d = T.JambaConfig(**kw).to_dict()
    if rng.random() < 0.5:  # sparse
        _drop_defaults(d, T.JambaConfig)
    engine = {"tp": rng.choice([1, 1, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    return {**d, "architectures": ["JambaForCausalLM"]}, engine


def test_jamba_read_as_vllm_reads_it() -> None:
    """Jamba (Mamba-1 beside attention every ``attn_layer_period`` layers) on generated configs."""
    rng = random.Random("vllm-jamba")
    counts, mismatches = _compare(rng, [_jamba_case(rng) for _ in range(N)])
    print(f"\nvLLM Jamba reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > N, counts


def _kimi_linear_case(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    n = rng.randint(1, 32)
    kda = sorted(rng.sample(range(1, n + 1), rng.randint(0, n)))
    lac: dict[str, Any] = {"num_heads": rng.choice([8, 16, 32, 32, 24]), "head_dim": rng.choice([64, 128]),
                           "short_conv_kernel_size": rng.choice([2, 4]), "kda_layers": kda,
                           "full_attn_layers": [i for i in range(1, n + 1) if i not in kda]}  # fmt: skip
    if rng.random() < 0.05:
        del lac["head_dim"]  # vLLM's KeyError
    heads = rng.choice([8, 16, 32, 32, 12])
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_attention_heads": heads, "hidden_size": heads * 128,
                          "kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([0, 64, 64]),
                          "qk_nope_head_dim": 128, "v_head_dim": 128, "mla_use_nope": rng.random() < 0.9,
                          "linear_attn_config": lac if rng.random() < 0.9 else None}  # fmt: skip
    cls = vllm_config_class("kimi_linear")
    d = cls(**kw).to_dict()
    if rng.random() < 0.5:
        _drop_defaults(d, cls)
    engine = {"tp": rng.choice([1, 1, 2, 2, 4, 8, 3]), "pp": rng.choice([1, 1, 2, 3])}
    return {**d, "architectures": ["KimiLinearForCausalLM"]}, engine


def test_kimi_linear_read_as_vllm_reads_it() -> None:
    """Kimi-Linear (KDA beside Kimi's NoPE MLA, by ``linear_attn_config.kda_layers``) on configs
    built by vLLM's own ``KimiLinearConfig`` (lifted from the wheel), through its
    ``KimiLinearModel`` / ``KimiDecoderLayer`` / ``MultiHeadLatentAttention`` and
    ``KimiGatedDeltaNetAttention`` (new-style package ``vllm/models/kimi_k3``)."""
    rng = random.Random("vllm-kimi-linear")
    cases = [({**get_hybrid_state_model("kimi-linear-48b-a3b-instruct").config}, {"tp": tp, "pp": 1})
             for tp in (1, 2, 4, 8)]  # fmt: skip
    counts, mismatches = _compare(rng, cases + [_kimi_linear_case(rng) for _ in range(N)])
    print(f"\nvLLM Kimi-Linear reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] // 2 and counts["state layers"] > 3 * N, counts
    assert counts["attention layers"] > 3 * N, counts


@pytest.mark.parametrize("entry", hybrid_state_entries(), ids=lambda e: e["name"])
def test_the_bundled_checkpoints_read_as_vllm_reads_them(entry: dict[str, Any]) -> None:
    """Every bundled published config (``kvbudget models``, ``plan NAME --engine vllm``) at TP 1, 2
    and 4: none refused by vLLM's own class (LFM2-1.2B once lacked the ``block_dim`` it reads)."""
    saved = entry["config"]
    for tp in (1, 2, 4):
        ours, theirs = _ours(saved, {"tp": tp, "pp": 1}, "bfloat16"), _theirs(saved, {"tp": tp, "pp": 1}, "bfloat16")
        why = theirs if isinstance(theirs, str) else ""
        assert not isinstance(theirs, str) and ours == theirs, (entry["name"], tp, why)
        assert isinstance(ours, list) and sum(x["kind"] == "mamba" for x in ours) == entry["expect"]["state_layers"]


def test_qwen3_5_states_take_its_mamba_ssm_dtype() -> None:
    qwen35 = _ours(get_hybrid_state_model("qwen3.5-9b").config, {"tp": 4, "pp": 1}, "bfloat16")
    assert isinstance(qwen35, list) and qwen35[0]["state_dtypes"] == ["bfloat16", "float32"]


def test_the_bundled_qwen_checkpoints_read_with_their_mtp_drafter_as_vllm_reads_them() -> None:
    """Qwen3-Next and Qwen3.5 as served with ``--speculative-config '{"method": "mtp", ...}'``: the
    predictor's attention layer after the target's, and the state's extra conv rows, equal vLLM's."""
    for name in ("qwen3-next-80b-a3b-instruct", "qwen3.5-9b"):
        saved = get_hybrid_state_model(name).config
        engine = {"tp": 4, "pp": 1, "speculative_method": "mtp", "num_speculative_tokens": 2}
        ours, theirs = _ours(saved, engine, "bfloat16"), _theirs(saved, engine, "bfloat16")
        assert isinstance(theirs, list) and ours == theirs, (name, theirs)
        drafter = [x for x in ours if x["is_draft"]]
        assert [x["name"] for x in drafter] == ["mtp.layers.0.self_attn.attn"], drafter
        plain = _ours(saved, {"tp": 4, "pp": 1}, "bfloat16")
        assert isinstance(plain, list)
        conv = next(x for x in ours if x["kind"] == "mamba")["state_shapes"][0]
        assert conv[0] == next(x for x in plain if x["kind"] == "mamba")["state_shapes"][0][0] + 2, conv


def _eagle(rng: random.Random, case: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``case`` served with an EAGLE or EAGLE3 head (Llama, one or two layers, some with sliding
    layers; an EAGLE3 head's ``eagle_config`` with or without ``use_aux_hidden_state``)."""
    saved, engine = case
    heads = rng.choice([8, 16, 32])
    n = rng.choice([1, 1, 2])
    draft: dict[str, Any] = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": n,
                             "num_attention_heads": heads, "num_key_value_heads": rng.choice([1, 4, 8, heads]),
                             "hidden_size": heads * rng.choice([64, 128])}  # fmt: skip
    if rng.random() < 0.2:
        draft.update(layer_types=[rng.choice(["sliding_attention", "full_attention"]) for _ in range(n)],
                     sliding_window=rng.choice([512, 2048]))  # fmt: skip
    method = rng.choice(["eagle", "eagle3", "eagle3"])
    if method == "eagle3" and rng.random() < 0.3:
        draft["eagle_config"] = {"use_aux_hidden_state": rng.random() < 0.4}
    engine = {**{k: v for k, v in engine.items() if k not in ("speculative_method", "num_speculative_tokens")},
              "speculative_method": method, "num_speculative_tokens": rng.choice([1, 2, 3, 5]), "draft": draft}
    return saved, engine


def _strip_mtp(case: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    return case[0], {k: v for k, v in case[1].items() if k in ("tp", "pp")}


def test_eagle_drafters_on_hybrid_state_targets_read_as_vllm_reads_them() -> None:
    """EAGLE / EAGLE3 heads on every hybrid-state family (Qwen3-Next and Qwen3.5, Nemotron-H,
    Granite-4.0-H, Falcon-H1, Jamba, Kimi-Linear, LFM2 and LFM2-MoE): the drafter's layers after the
    target's, each state's speculative conv rows (LFM2: its ``ShortConv`` layers' own shapes, and the
    model class's without the rows as ``config_state_shapes``), and vLLM's EAGLE3 startup check on
    the target's class, equal vLLM's own reading (the drafter built by its
    ``Eagle(3)LlamaForCausalLM``, ``load_model``'s check lifted)."""
    rng = random.Random("vllm-state-eagle")
    makers = (_case, _nemotron_h_case, _granite_case, _falcon_h1_case, _jamba_case, _kimi_linear_case, _lfm2_case,
              _lfm2_moe_case)  # fmt: skip
    cases = [_eagle(rng, _strip_mtp(makers[i % len(makers)](rng))) for i in range(max(N // 2, 2 * len(makers)))]
    for name in ("qwen3-next-80b-a3b-instruct", "nvidia-nemotron-nano-9b-v2", "falcon-h1-7b-instruct",
                 "kimi-linear-48b-a3b-instruct"):  # fmt: skip
        cases.append(_eagle(rng, (get_hybrid_state_model(name).config, {"tp": 4, "pp": 1})))
    counts, mismatches = _compare(rng, cases, no_window=0.2)
    print(f"\nvLLM EAGLE on hybrid-state targets: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert counts["refused"] < counts["compared"] * 2 // 3 and counts["drafter layers"] > N // 5, counts


def test_drafters_kvbudget_does_not_read_are_refused() -> None:
    """MTP on a Mamba hybrid other than Nemotron-H (and on Nemotron-H where the checkpoint has no
    MTP layers) is vLLM's own refusal by name (tests/test_vllm_mtp_method.py holds it to vLLM),
    and an MTP or EAGLE drafter
    without ``num_speculative_tokens`` (vLLM would default an MTP's to the config's ``n_predict``,
    which the plan would not see)."""
    qwen = get_hybrid_state_model("qwen3-next-80b-a3b-instruct").config
    nemotron = get_hybrid_state_model("nvidia-nemotron-nano-9b-v2").config
    falcon = get_hybrid_state_model("falcon-h1-7b-instruct").config
    mtp = vllm.EngineConfig(speculative_method="mtp", num_speculative_tokens=1)
    head = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "num_attention_heads": 16,
            "num_key_value_heads": 8, "hidden_size": 2048}  # fmt: skip
    for saved, engine, draft, words in (
            (falcon, mtp, None, "Unsupported speculative method: 'mtp'"),
            (nemotron, mtp, None, "Unsupported speculative method: 'mtp'"),  # Nano-9B-v2 ships no MTP layers
            ({**nemotron, "num_nextn_predict_layers": 2}, mtp, None, "num_nextn_predict_layers is 2"),
            (qwen, vllm.EngineConfig(speculative_method="eagle"), head, "needs num_speculative_tokens"),
            (qwen, vllm.EngineConfig(speculative_method="mtp"), None, "needs num_speculative_tokens")):  # fmt: skip
        try:
            layers_from_hf_config(saved, engine, draft=draft)
        except InvalidConfigError as e:
            assert words in str(e), e
        else:
            raise AssertionError(f"{engine} was read")


def test_legacy_layer_kind_names_read_as_transformers_remaps_them() -> None:
    """A saved ``layer_types`` with the legacy names (``mamba``, ``attention``) is remapped by every
    transformers 5.19.0 config class before vLLM reads it: Qwen3-Next, Granite-4.0-H and LFM2 agree."""
    legacy = {"linear_attention": "mamba", "full_attention": "attention", "conv": "mamba"}
    cases = [(T.Qwen3NextConfig(num_hidden_layers=8), "Qwen3NextForCausalLM"),
             (T.GraniteMoeHybridConfig(num_hidden_layers=8, layer_types=["linear_attention", "full_attention"] * 4),
              "GraniteMoeHybridForCausalLM"),
             (T.Lfm2Config(num_hidden_layers=8, full_attn_idxs=[2, 5]), "Lfm2ForCausalLM")]  # fmt: skip
    for config, arch in cases:
        saved = {**config.to_dict(), "architectures": [arch], "conv_dim": 2560, "block_dim": 2560}
        saved["layer_types"] = [legacy[t] for t in saved["layer_types"]]
        ours, theirs = _ours(saved, {"tp": 2, "pp": 1}, "bfloat16"), _theirs(saved, {"tp": 2, "pp": 1}, "bfloat16")
        assert not isinstance(theirs, str) and ours == theirs, (arch, ours if isinstance(ours, str) else "")
        assert {x["kind"] for x in theirs} == {"mamba", "full"}, arch


_REPLAY_KEYS = ("use_replayssm", "replayssm_buffer_len", "mamba_backend", "enable_prefix_caching", "use_v2_model_runner")


def _replay(rng: random.Random, case: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``case`` with ``--use-replayssm`` and seeded engine settings its checks read."""
    saved, engine = case
    backend = rng.choice(["triton", "flashinfer", "flashinfer"])  # mostly settings vLLM starts with
    return saved, {**engine, "use_replayssm": True, "mamba_backend": backend,
                   "replayssm_buffer_len": rng.choice([4, 8, 16, 16, 16, 32]),
                   "enable_prefix_caching": rng.random() < 0.2,
                   "use_v2_model_runner": rng.random() < (0.3 if backend == "triton" else 0.7)}


def test_replayssm_read_as_vllm_reads_it() -> None:
    """``--use-replayssm``. vLLM 0.33.0 refuses it for an architecture whose registered class is not
    ``SupportsReplaySSM`` (read from the wheel's class hierarchy), and kvbudget the same way. On
    Nemotron-H (Mamba-2 states with ReplaySSM's x / dt / B rings) and Kimi-Linear (KDA states as they
    are, RecoverSSM with a drafter) every layer equals vLLM's reading, and every startup refusal of
    ``VllmConfig.validate_mamba_cached_kernel`` (lifted) is kvbudget's: the backend, the ring length,
    prefix caching, the model runner, speculation (Nemotron-H's MTP step, EAGLE heads)."""
    from vllm_oracle import _hf
    from vllm_oracle._interfaces import supports

    from kvbudget.vllm.state_models import REPLAYSSM_ARCHITECTURES, STATE_ARCHITECTURES

    root = _hf._root()
    env = _hf._env(root)
    supported = {a for a in STATE_ARCHITECTURES if supports(root, env.registry, a, "SupportsReplaySSM")}
    assert supported == REPLAYSSM_ARCHITECTURES, supported
    for saved in (get_hybrid_state_model("qwen3-next-80b-a3b-instruct").config,
                  get_hybrid_state_model("falcon-h1-7b-instruct").config):  # fmt: skip
        ours = _ours(saved, {"tp": 4, "pp": 1, "use_replayssm": True}, "bfloat16")
        assert "is not supported for architecture" in str(ours), ours
    rng = random.Random("vllm-replayssm")
    cases = []
    for i in range(max(N // 3, 40)):
        base = (_nemotron_h_case if i % 2 else _kimi_linear_case)(rng)
        if rng.random() < 0.3 and not base[1].get("speculative_method"):
            base = _eagle(rng, base)
        cases.append(_replay(rng, base))
    for name in ("nvidia-nemotron-nano-9b-v2", "kimi-linear-48b-a3b-instruct"):
        cases.append((get_hybrid_state_model(name).config, {"tp": 4, "pp": 1, "use_replayssm": True,
                      "mamba_backend": "flashinfer", "enable_prefix_caching": False}))  # fmt: skip
    counts, mismatches = _compare(rng, cases)
    print(f"\nvLLM ReplaySSM reading: {counts}, {len(mismatches)} mismatches")
    assert not mismatches, f"{len(mismatches)} of {counts['compared']} configs differ:\n" + "\n".join(mismatches[:12])
    assert 0 < counts["refused"] < counts["compared"] * 2 // 3 and counts["state layers"] > N // 2, counts


def test_state_shapes_are_vllms_calculators() -> None:
    """``rust/core/src/vllm/state_shape.rs`` against ``MambaStateShapeCalculator`` lifted from the
    wheel, on 2,000 seeded argument sets of each family (gated delta net, Mamba-2, short conv,
    Mamba-1, Kimi Delta Attention as Kimi-Linear calls it, Mamba-2 with ReplaySSM's rings on either
    backend; refusals: vLLM's ``divide``)."""
    from vllm_oracle import _hf

    from kvbudget import _core

    calc = _hf._env(_hf._root()).models["qwen3_next"]["MambaStateShapeCalculator"]
    rng = random.Random("state-shapes")
    families = {"gated_delta_net": (calc.gated_delta_net_state_shape, 7), "mamba2": (calc.mamba2_state_shape, 8),
                "short_conv": (calc.short_conv_state_shape, 4), "mamba1": (calc.mamba1_state_shape, 4),
                "kda": (lambda tp, h, d, k, s: calc.kda_state_shape(tp, h, d, conv_kernel_size=k, num_spec=s), 5)}
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(2000):
        for family, (theirs_fn, n) in families.items():
            dims = [rng.choice([1, 2, 3, 4, 8])] + [rng.choice([1, 2, 3, 8, 16, 24, 64, 128, 4096])
                                                    for _ in range(n - 1 if family == "mamba1" else n - 2)]
            if family != "mamba1":  # its calculator takes no speculative tokens
                dims.append(rng.choice([0, 1, 3]))
            try:
                theirs: Any = [list(s) for s in theirs_fn(*dims)]
            except AssertionError:
                theirs = "refused"
            try:
                ours: Any = _core._vllm_state_shapes(family, dims)
            except ValueError:
                ours = "refused"
            assert ours == theirs, (family, dims, ours, theirs)
            outcomes["ok" if theirs != "refused" else "refused"] += 1
        # Mamba-2 with ReplaySSM's rings (append_replayssm_ring over mamba2_state_shape, as
        # NemotronHForCausalLM.get_mamba_state_shape_from_config calls them)
        dims = [rng.choice([1, 2, 4, 8])] + [rng.choice([1, 2, 3, 8, 16, 64, 128, 4096]) for _ in range(6)]
        dims += [rng.choice([0, 1, 3]), rng.choice([4, 16, 32]), rng.choice([0, 1])]
        tp, inter, groups, heads, head, state, conv, s, window, flashinfer = dims
        backend = _hf._env(_hf._root()).mamba_backends["FLASHINFER" if flashinfer else "TRITON"]
        try:
            base = calc.mamba2_state_shape(tp, inter, groups, heads, head, state, conv, s)
            theirs = [list(x) for x in calc.append_replayssm_ring(base, groups, tp, window, backend, s)]
        except AssertionError:
            theirs = "refused"
        try:
            ours = _core._vllm_state_shapes("mamba2_replayssm", dims)
        except ValueError:
            ours = "refused"
        assert ours == theirs, ("mamba2_replayssm", dims, ours, theirs)
    assert min(outcomes.values()) > 500, outcomes

