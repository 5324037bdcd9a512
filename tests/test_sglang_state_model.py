"""The recurrent state a checkpoint's config gives SGLang 0.5.23, held to SGLang's own code.

:mod:`sglang_oracle.state_model` loads each ``config.json`` with SGLang's ``get_config``
(its own config classes, executed from the RECORD-checked wheel over transformers 5.19.0),
picks the state config with ``configs/hybrid_arch.py``'s ``mambaish_config`` and reads that
class's ``mamba2_cache_params`` and ``mamba_cache_per_req``.
:func:`kvbudget.sglang.state_model.state_from_hf_config` must give the same mixer, dims,
layer count, pipeline-stage share and dtypes, a per-request size
``(conv_elems * conv_itemsize + ssm_heads * ssm_head_dim * ssm_state_dim * ssm_itemsize) *
num_state_layers`` equal to SGLang's ``mamba_cache_per_req``, None exactly where SGLang plans
no state pool, and an ``InvalidConfigError`` exactly where SGLang fails on the config.

Cases: seeded generated configs of every family kvbudget reads (``KVBUDGET_STATE_MODEL_CASES``
per family, default 80; wrappers and text configs, checkpoint keys dropped to the class
defaults, layer kinds varied, some configs broken on purpose, TP 1/2/4/8 with attention DP,
PP 1..4 with and without an explicit split, dtype overrides), the released checkpoints of
``python/kvbudget/models/data/hybrid_state_models.json``, and the completeness of kvbudget's model-type
tables against the stateful config classes SGLang's code names.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvbudget.models.hybrid_state import hybrid_state_entries
from kvbudget.errors import InvalidConfigError
from kvbudget.sglang.state_model import STATE_MODEL_TYPES, UNREAD_STATE_MODEL_TYPES, state_from_hf_config
from sglang_oracle._fetch import sglang_root
from sglang_oracle.state_model import StateModelOracle, load

PER_FAMILY = int(os.environ.get("KVBUDGET_STATE_MODEL_CASES", "80"))
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}
DTYPES = tuple(ITEMSIZE)


@pytest.fixture(scope="module")
def oracle() -> StateModelOracle:
    return load(sglang_root())


# -- comparing one config -------------------------------------------------------------------------
def _ours(cfg: dict[str, Any], par: dict[str, Any]) -> dict[str, Any] | str | None:
    try:
        s = state_from_hf_config(cfg, tp_size=par["tp"], attn_dp_size=par["dp"], pp_size=par["pp"],
                                 pp_layer_split=par["split"], mamba_ssm_dtype=par["ssm"], conv_dtype=par["conv"])
    except InvalidConfigError as e:
        return f"refused: {e}"
    if s is None:
        return None
    per_req = (s.conv_elems * ITEMSIZE[s.conv_dtype]
               + s.ssm_heads * s.ssm_head_dim * s.ssm_state_dim * ITEMSIZE[s.ssm_dtype]) * s.num_state_layers
    return {"mixer": s.mixer, "conv_elems": s.conv_elems, "temporal": (s.ssm_heads, s.ssm_head_dim, s.ssm_state_dim),
            "k_heads_per_tp": s.k_heads_per_tp, "layers": s.num_state_layers, "stage_layers": s.stage_state_layers,
            "conv_dtype": s.conv_dtype, "ssm_dtype": s.ssm_dtype, "per_req": per_req}  # fmt: skip


def _theirs(oracle: StateModelOracle, cfg: dict[str, Any], par: dict[str, Any]) -> dict[str, Any] | str | None:
    r = oracle.state(cfg, attn_tp=par["tp"], tp=par["tp"] * par["dp"], pp=par["pp"], conv_dtype=par["conv"],
                     ssm_dtype=par["ssm"], pp_split=par["split"])  # fmt: skip
    if "error" in r:
        return f"SGLang fails: {r['error']}"
    if r["mixer"] is None:
        return None
    if r.get("unread"):
        return f"SGLang plans a {r['mixer']} state"
    if r.get("params", ...) is None:
        return "SGLang's mamba2_cache_params is None, and its state pool fails on it"
    # Inkling's conv-only shape: temporal (0, 0, 0) and no key heads, where kvbudget holds one zero-sized
    # temporal row (1, 1, 0) and its default key heads; the bytes are compared all the same
    conv_only = r["temporal"] == (0, 0, 0) and r["k_heads_per_tp"] is None
    # SGLang's lightning state is a Mamba2CacheParams its configurator treats as Mamba-2's (no
    # ReplaySSM: neither hybrid_gdn_config nor hybrid_kda_config answers)
    return {"mixer": {"lightning": "mamba2"}.get(r["mixer"], r["mixer"]), "conv_elems": sum(math.prod(c) for c in r["conv"]),
            "temporal": (1, 1, 0) if conv_only else r["temporal"], "k_heads_per_tp": 1 if conv_only else r["k_heads_per_tp"], "layers": len(r["layers"]), "stage_layers": r["stage_layers"],
            "conv_dtype": r["conv_dtype"], "ssm_dtype": r["ssm_dtype"], "per_req": r["per_req"]}  # fmt: skip


def _outcome(x: dict[str, Any] | str | None) -> str:
    return "none" if x is None else "error" if isinstance(x, str) else "state"


def _compare(oracle: StateModelOracle, cfg: dict[str, Any], par: dict[str, Any]) -> tuple[str, str | None]:
    """``(SGLang's outcome, a difference or None)``."""
    theirs, ours = _theirs(oracle, cfg, par), _ours(cfg, par)
    kind = _outcome(theirs)
    if kind != _outcome(ours) or (kind == "state" and ours != theirs):
        return kind, f"{par}\n  config: {json.dumps(cfg)[:600]}\n  kvbudget: {ours}\n  SGLang:   {theirs}"
    return kind, None


# -- generated configs ----------------------------------------------------------------------------
def _maybe(r: random.Random, d: dict[str, Any], key: str, p: float = 0.25) -> None:
    """Drops ``key`` (the class default applies) with probability ``p``."""
    if r.random() < p:
        d.pop(key, None)


def _dtype(r: random.Random, d: dict[str, Any]) -> None:
    if r.random() < 0.4:
        d["mamba_ssm_dtype"] = r.choice(DTYPES + ("float32", "fp8", None))


def _qwen_text(r: random.Random) -> dict[str, Any]:
    n, interval = r.choice((r.randint(1, 48), 32, 40, 48)), r.choice((1, 2, 3, 4, 4, 4, 6, 8))
    nk = r.choice((2, 4, 8, 16, 16, 32))
    t: dict[str, Any] = {
        "hidden_size": r.choice((1024, 2048, 4096)), "num_hidden_layers": n, "full_attention_interval": interval,
        "linear_num_key_heads": nk, "linear_num_value_heads": nk * r.choice((1, 2, 2, 3, 4)),
        "linear_key_head_dim": r.choice((64, 128, 128)), "linear_value_head_dim": r.choice((64, 128, 128, 256)),
        "linear_conv_kernel_dim": r.choice((2, 4, 4)), "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256,
    }  # fmt: skip
    if r.random() < 0.5:  # layer_types as checkpoints carry them, SGLang's class does not read them
        every = interval if r.random() < 0.7 else r.choice((2, 3, 4, 5))
        full, linear = ("full_attention", "linear_attention") if r.random() < 0.8 else ("attention", "mamba")
        t["layer_types"] = [full if (i + 1) % every == 0 else linear for i in range(n)]
        if r.random() < 0.1:  # transformers' own class refuses these (where it has one)
            t["layer_types"] = r.choice((t["layer_types"] + [linear], t["layer_types"][:-1] + ["jet"]))
    for k in ("num_hidden_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
              "linear_value_head_dim", "linear_conv_kernel_dim"):  # fmt: skip
        _maybe(r, t, k, 0.1)  # without num_hidden_layers, transformers checks layer_types on its own default
    _maybe(r, t, "full_attention_interval", 0.05)
    _dtype(r, t)
    return t


def _qwen(r: random.Random) -> dict[str, Any]:
    t = _qwen_text(r)
    kind = r.choice(("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "interns2_mobius_text", "wrap", "wrap"))
    if kind != "wrap":
        return {**t, "model_type": kind, "architectures": ["Qwen3NextForCausalLM"]}
    mt, text_mt = r.choice((("qwen3_5", "qwen3_5_text"), ("qwen3_5_moe", "qwen3_5_moe_text"),
                            ("intern_s2_preview", "qwen3_5_moe_text"), ("interns2_mobius", "interns2_mobius_text")))
    out: dict[str, Any] = {"model_type": mt, "architectures": ["Qwen3_5ForConditionalGeneration"],
                           "text_config": {**t, "model_type": text_mt}}  # fmt: skip
    if r.random() < 0.2:  # SGLang reads the text config's, not the wrapper's
        out["mamba_ssm_dtype"] = r.choice(DTYPES)
    if r.random() < 0.05:
        del out["text_config"]
    return out


def _jet(r: random.Random) -> dict[str, Any]:
    n = r.randint(1, 24)
    heads = r.choice((4, 8, 12, 16))
    block = {"mode": "jet", "expand_v": r.choice((1.0, 1.5, 2.0, 2)), "num_heads": heads,
             "head_dim": r.choice((64, 96, 128)), "norm_eps": "1e-5", "conv_size": r.choice((3, 4)),
             "dconv_generator_reduction": 8, "dconv_implementation": "triton"}  # fmt: skip
    if r.random() < 0.05:
        block["extra"] = 1
    t = {"hidden_size": 1536, "num_hidden_layers": n, "num_attention_heads": 12, "num_key_value_heads": 2,
         "layer_types": [r.choice(("jet", "jet", "attn", "swa")) for _ in range(n)],
         "efficient_attention_config": {"jet": block}}  # fmt: skip
    _dtype(r, t)
    if r.random() < 0.5:
        return {**t, "model_type": "jet_nemotron", "architectures": ["JetNemotronForCausalLM"]}
    return {"model_type": "jet_vlm", "architectures": ["JetVLMForConditionalGeneration"],
            "text_config": {**t, "model_type": "jet_nemotron"}}  # fmt: skip


def _nemotron_h(r: random.Random) -> dict[str, Any]:
    n = r.randint(1, 56)
    kinds = r.choice(("M*-", "MMM*", "ME*-", "M", "*-E"))
    pattern = "".join(r.choice(kinds) for _ in range(n))
    heads = r.choice((16, 32, 64, 96, 128))
    d: dict[str, Any] = {
        "model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hidden_size": 1024,
        "hybrid_override_pattern": pattern, "mamba_num_heads": heads, "mamba_head_dim": r.choice((32, 64, 80)),
        "n_groups": r.choice((1, 2, 4, 8, 8)), "ssm_state_size": r.choice((64, 128, 128)),
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
    }  # fmt: skip
    if r.random() < 0.5:
        d["conv_kernel"] = r.choice((3, 4))
    else:
        d["mamba_d_conv"] = r.choice((3, 4))
    if r.random() < 0.3:  # the canonical list, or both (the list wins)
        names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        if r.random() < 0.1:  # transformers' names: SGLang's Nemotron-H class refuses them
            names.update(M="linear_attention", **{"*": "full_attention"})
        d["layers_block_type"] = [names[c] for c in r.choice((pattern, pattern[::-1]))]
        if r.random() < 0.5:
            del d["hybrid_override_pattern"]
    if r.random() < 0.3:
        d["num_hidden_layers"] = r.choice((n, n + 2))  # deprecated, ignored
    for k in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size"):
        _maybe(r, d, k, 0.1)
    if r.random() < 0.05:
        d["mamba_n_groups"] = d.pop("n_groups")  # SGLang reads n_groups only
    if r.random() < 0.1:
        d.update(model_type="nemotron_h_puzzle", block_configs=[{"block_type": "mamba"}] * n)
    _dtype(r, d)
    return d


def _falcon_h1(r: random.Random) -> dict[str, Any]:
    heads = r.choice((8, 16, 24, 32, 48, 64, 128))
    head_dim = r.choice((32, 64, 128))
    d: dict[str, Any] = {
        "model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"], "num_hidden_layers": r.randint(1, 44),
        "hidden_size": heads * head_dim // 2, "mamba_expand": 2, "mamba_n_heads": heads,
        "mamba_d_ssm": heads * head_dim, "mamba_d_head": head_dim, "mamba_n_groups": r.choice((1, 1, 2, 4)),
        "mamba_d_state": r.choice((64, 128, 256)), "mamba_d_conv": r.choice((3, 4)),
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
    }  # fmt: skip
    v = r.random()
    if v < 0.2:
        d["mamba_d_head"] = "auto"
    elif v < 0.35:
        d["mamba_d_ssm"] = None  # mamba_expand * hidden_size
    elif v < 0.4:
        d["mamba_d_head"] = head_dim * 2  # inconsistent: refused
    for k in ("mamba_n_groups", "mamba_d_state", "mamba_d_conv", "num_hidden_layers"):
        _maybe(r, d, k, 0.1)
    _dtype(r, d)
    return d


def _granite(r: random.Random) -> dict[str, Any]:
    n = r.randint(1, 40)
    heads, head_dim = r.choice((32, 64, 128)), r.choice((32, 64))
    d: dict[str, Any] = {
        "model_type": "granitemoehybrid", "architectures": ["GraniteMoeHybridForCausalLM"], "num_hidden_layers": n,
        "hidden_size": heads * head_dim // 2, "mamba_expand": 2, "mamba_n_heads": heads, "mamba_d_head": head_dim,
        "mamba_n_groups": r.choice((1, 1, 2)), "mamba_d_state": r.choice((64, 128)), "mamba_d_conv": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8,
    }  # fmt: skip
    v = r.random()
    names = ("mamba", "attention") if r.random() < 0.7 else ("linear_attention", "full_attention")
    if v < 0.7:
        d["layer_types"] = [names[0] if r.random() < 0.8 else names[1] for _ in range(n)]
    elif v < 0.8:
        d["layer_types"] = [names[1]] * n  # no Mamba layer: no state pool
    elif v < 0.85:
        d["layer_types"] = [names[0]] * (n + 1)  # wrong length: refused
    _dtype(r, d)  # not read by this class
    return d


def _lfm2(r: random.Random) -> dict[str, Any]:
    n = r.randint(1, 32)
    mt = r.choice(("lfm2", "lfm2", "lfm2_moe", "lfm2_vl"))
    t: dict[str, Any] = {"hidden_size": r.choice((1024, 1536, 2048, 2560)), "num_hidden_layers": n,
                         "conv_L_cache": r.choice((2, 3, 3, 4)), "num_attention_heads": 16,
                         "num_key_value_heads": 8}  # fmt: skip
    v = r.random()
    if v < 0.5 or mt == "lfm2_moe" and v < 0.95:
        t["layer_types"] = [r.choice(("conv", "conv", "short_conv", "full_attention")) for _ in range(n)]
    elif v < 0.9:
        t["full_attn_idxs"] = sorted(r.sample(range(n), r.randint(0, n)))
    for k in ("hidden_size", "conv_L_cache"):
        _maybe(r, t, k, 0.1)
    _dtype(r, t)
    if mt != "lfm2_vl":
        return {**t, "model_type": mt, "architectures": ["Lfm2ForCausalLM"]}
    text_mt = "lfm2" if r.random() < 0.8 or "layer_types" not in t else "lfm2_moe"
    return {"model_type": "lfm2_vl", "architectures": ["Lfm2VlForConditionalGeneration"],
            "text_config": {**t, "model_type": text_mt}}  # fmt: skip


def _mamba(r: random.Random) -> dict[str, Any]:
    hidden = r.choice((512, 768, 1024, 2048, 2560))
    kind = r.choice(("mamba", "falcon_mamba", "raw", "mamba2", "mamba2"))
    n = r.randint(1, 64)
    if kind == "raw":
        ssm: dict[str, Any] = {} if r.random() < 0.5 else {"d_state": r.choice((16, 32))}
        return {"d_model": hidden, "n_layer": n, "ssm_cfg": ssm, "vocab_size": 50277, "pad_vocab_size_multiple": 8}
    if kind == "mamba2":
        heads, head_dim = r.choice((32, 64, 128)), r.choice((32, 64))
        d: dict[str, Any] = {
            "model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "num_hidden_layers": n,
            "hidden_size": heads * head_dim // 2, "expand": 2, "num_heads": heads, "head_dim": head_dim,
            "n_groups": r.choice((1, 2, 8)), "state_size": r.choice((64, 128)), "conv_kernel": 4,
            "intermediate_size": heads * head_dim,
        }  # fmt: skip
        _maybe(r, d, "intermediate_size", 0.15)
        for k in ("n_groups", "state_size", "conv_kernel"):
            _maybe(r, d, k, 0.1)
        return d
    d = {"model_type": kind, "architectures": ["MambaForCausalLM"], "hidden_size": hidden, "num_hidden_layers": n,
         "state_size": r.choice((16, 16, 32)), "expand": r.choice((2, 2, 4)), "conv_kernel": r.choice((2, 4))}
    if r.random() < 0.4:
        d["intermediate_size"] = d["expand"] * hidden if r.random() < 0.8 else hidden * 3
    for k in ("expand", "state_size", "hidden_size"):
        _maybe(r, d, k, 0.1)
    return d


def _kimi(r: random.Random) -> dict[str, Any]:
    n = r.randint(2, 48)
    kda = sorted(r.sample(range(1, n + 1), r.randint(0, n - 1)))
    t: dict[str, Any] = {
        "hidden_size": 2304, "num_hidden_layers": n, "num_attention_heads": 32, "kv_lora_rank": 512,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "mla_use_nope": True,
        "linear_attn_config": {"kda_layers": kda, "full_attn_layers": [i for i in range(1, n + 1) if i not in kda],
                               "num_heads": r.choice((8, 16, 32, 64)), "head_dim": r.choice((64, 128)),
                               "short_conv_kernel_size": r.choice((3, 4))},
    }  # fmt: skip
    if r.random() < 0.05:
        del t["linear_attn_config"]
    _dtype(r, t)  # not read by this class
    if r.random() < 0.75:
        return {**t, "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"]}
    return {"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"],
            "text_config": {**t, "model_type": "kimi_linear"}}  # fmt: skip


def _zaya(r: random.Random) -> dict[str, Any]:
    """ZAYA1 (SGLang's own ``ZayaConfig``): scalar keys as transformers' class saves them, or the
    released Megatron-style lists (``zaya_layers``, per-layer heads, ``kv_channels``)."""
    heads, kv, n = r.choice((8, 16)), r.choice((1, 2, 2, 4, 8)), r.randint(1, 40)
    d: dict[str, Any] = {
        "model_type": "zaya", "architectures": ["ZayaForCausalLM"], "num_hidden_layers": n,
        "num_attention_heads": heads, "num_key_value_heads": kv, "num_query_groups": kv,
        "head_dim": r.choice((64, 128)), "hidden_size": r.choice((1024, 2048)),
        "cca_time0": r.choice((1, 2, 2, 3)), "cca_time1": r.choice((1, 2, 2)),
    }  # fmt: skip
    if r.random() < 0.5:
        pairs = r.randint(1, 40)
        d.update(zaya_layers=["a", 16] * pairs + ["a"] * r.randint(0, 1), cca_num_q_heads=[heads, 0] * pairs,
                 num_query_groups_list=[kv, 0] * pairs)  # fmt: skip
        del d["num_query_groups"]
        if r.random() < 0.3:
            d.update(head_dim=None, kv_channels=r.choice((64, 128)))
    for k in ("num_key_value_heads", "head_dim", "hidden_size", "cca_time0", "num_hidden_layers"):
        _maybe(r, d, k, 0.1)
    _dtype(r, d)
    return d


def _inkling(r: random.Random) -> dict[str, Any]:
    """Inkling (SGLang's own classes): the model-resolution differential's files
    (``sglang_state_cases``), its conv and temporal dtypes fixed whatever the overrides say."""
    from sglang_state_cases import _inkling as inkling

    d = inkling(r).saved(False)
    _dtype(r, d)  # not read by this class
    return d


def _bailing(r: random.Random) -> dict[str, Any]:
    """Ling 2.5 / Ling 3 (SGLang's own ``BailingHybridConfig``): the model-resolution differential's
    files (``sglang_state_cases``); the class passes no config to the dtype, so the file's is unread."""
    from sglang_state_cases import _bailing_hybrid

    d = _bailing_hybrid(r).saved(False)
    _dtype(r, d)
    return d


def _stateless(r: random.Random) -> dict[str, Any]:
    mt, arch = r.choice((("llama", "LlamaForCausalLM"), ("qwen3", "Qwen3ForCausalLM"),
                         ("jamba", "JambaForCausalLM"), ("mistral", "MistralForCausalLM")))  # fmt: skip
    return {"model_type": mt, "architectures": [arch], "hidden_size": 1024, "num_hidden_layers": r.randint(1, 8),
            "num_attention_heads": 8, "num_key_value_heads": 8}  # fmt: skip


FAMILIES: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "qwen": _qwen, "jet": _jet, "nemotron_h": _nemotron_h, "falcon_h1": _falcon_h1, "granite": _granite,
    "lfm2": _lfm2, "mamba": _mamba, "kimi": _kimi, "zaya": _zaya, "inkling": _inkling, "bailing": _bailing,
    "stateless": _stateless,
}  # fmt: skip


def _parallel(r: random.Random) -> dict[str, Any]:
    pp = r.choice((1, 1, 2, 3, 4))
    return {"tp": r.choice((1, 1, 2, 4, 8)), "dp": r.choice((1, 1, 1, 2)), "pp": pp, "split": None,
            "ssm": r.choice((None, None, None) + DTYPES), "conv": r.choice((None, None) + DTYPES)}  # fmt: skip


def _split(r: random.Random, oracle: StateModelOracle, cfg: dict[str, Any], par: dict[str, Any]) -> None:
    """Sometimes an explicit ``SGLANG_PP_LAYER_PARTITION``, summing to SGLang's layer count."""
    if par["pp"] > 1 and r.random() < 0.3:
        n = oracle.state(cfg).get("num_hidden_layers")
        if isinstance(n, int) and n >= par["pp"]:
            cuts = sorted(r.sample(range(1, n), par["pp"] - 1))
            par["split"] = [b - a for a, b in zip([0, *cuts], [*cuts, n])]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generated_configs_match_sglang(oracle: StateModelOracle, family: str) -> None:
    r = random.Random(f"state-model-{family}")
    seen: Counter[str] = Counter()
    bad: list[str] = []
    for _ in range(PER_FAMILY):
        cfg, par = FAMILIES[family](r), _parallel(r)
        if family == "zaya":  # as its model class asserts (test_zaya_model_class_asserts_are_refused)
            groups = next((g for g in cfg.get("num_query_groups_list") or () if g), cfg.get("num_query_groups", 2))
            par.update(dp=1, tp=math.gcd(par["tp"], groups))
        _split(r, oracle, cfg, par)
        kind, diff = _compare(oracle, cfg, par)
        seen[kind] += 1
        if diff:
            bad.append(diff)
    assert not bad, f"{len(bad)} of {PER_FAMILY} {family} configs differ:\n" + "\n".join(bad[:5])
    if family == "stateless":
        assert seen == Counter(none=PER_FAMILY)
    else:  # mostly a state; refusals (broken on purpose, TP not dividing) a minority
        assert seen["state"] >= PER_FAMILY // 2, seen


# -- released checkpoints -------------------------------------------------------------------------
ENTRIES = [e for e in hybrid_state_entries() if "sglang" in e.get("engines", ("sglang",))]  # not Jamba


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_released_checkpoints_match_sglang(oracle: StateModelOracle, entry: dict[str, Any]) -> None:
    assert entry["source"]["model_id"] and entry["source"]["file"] == "config.json" and entry["note"]
    cfg = entry["config"]
    base = {"dp": 1, "split": None, "ssm": None, "conv": None}
    theirs = _theirs(oracle, cfg, {**base, "tp": 1, "pp": 1})
    assert isinstance(theirs, dict), theirs
    assert (theirs["mixer"], theirs["layers"]) == (entry["expect"]["mixer"], entry["expect"]["state_layers"])
    bad = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 3, 4):
            for ssm, conv in ((None, None), ("bfloat16", "float32")):
                _, diff = _compare(oracle, cfg, {**base, "tp": tp, "pp": pp, "ssm": ssm, "conv": conv})
                if diff:
                    bad.append(diff)
    assert not bad, "\n".join(bad[:4])


def test_released_checkpoint_bytes_by_hand(oracle: StateModelOracle) -> None:
    """Qwen3-Next-80B-A3B on one rank, worked by hand from its config: conv (2*16*128 + 32*128) x 3
    bf16, temporal 32 x 128 x 128 fp32, over its 36 linear-attention layers; both sides agree
    with the hand (the oracle is no stand-in that agrees with anything)."""
    entry = next(e for e in ENTRIES if e["name"] == "qwen3_next_80b_a3b_instruct")
    s = state_from_hf_config(entry["config"])
    assert s is not None
    per_req = ((2 * 16 * 128 + 32 * 128) * 3 * 2 + 32 * 128 * 128 * 4) * 36
    assert (s.conv_elems * 2 + s.ssm_heads * s.ssm_head_dim * s.ssm_state_dim * 4) * s.num_state_layers == per_req
    assert (s.mixer, s.num_state_layers, s.k_heads_per_tp) == ("gdn", 36, 16)
    assert oracle.state(entry["config"])["per_req"] == per_req


# -- edge configs, each SGLang's answer named ------------------------------------------------------
_Q = {"model_type": "qwen3_next", "architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 8,
      "full_attention_interval": 4}
_NEM = {"model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M*M-ME",
        "mamba_num_heads": 16, "mamba_head_dim": 64, "n_groups": 2}
EDGES: list[tuple[str, dict[str, Any], str]] = [
    ("qwen3-next without full_attention_interval", {k: v for k, v in _Q.items() if k != "full_attention_interval"},
     "error"),
    ("qwen3.5 wrapper without text_config", {"model_type": "qwen3_5", "architectures": ["X"]}, "error"),
    ("qwen3.5 wrapper: the wrapper's mamba_ssm_dtype is not read",
     {"model_type": "qwen3_5", "architectures": ["X"], "mamba_ssm_dtype": "float16", "text_config": _Q}, "state"),
    ("qwen3-next: an unknown mamba_ssm_dtype reads as float32", {**_Q, "mamba_ssm_dtype": "fp8"}, "state"),
    ("qwen3-next: layer_types disagreeing with the interval are not read",
     {**_Q, "layer_types": ["linear_attention"] * 7 + ["full_attention"]}, "state"),
    ("nemotron-h reads n_groups, not mamba_n_groups",
     {**{k: v for k, v in _NEM.items() if k != "n_groups"}, "mamba_n_groups": 2}, "error"),
    ("nemotron-h without a Mamba layer: a state of zero layers", {**_NEM, "hybrid_override_pattern": "*-E"}, "state"),
    ("nemotron-h: layers_block_type wins over the pattern", {**_NEM, "layers_block_type": ["mamba", "attention"]},
     "state"),
    ("granite-4.0-h without a Mamba layer: no state pool",
     {"model_type": "granitemoehybrid", "architectures": ["X"], "num_hidden_layers": 2,
      "layer_types": ["attention", "attention"]}, "none"),
    ("lfm2 without a conv layer", {"model_type": "lfm2", "architectures": ["X"], "num_hidden_layers": 4}, "error"),
    ("lfm2-moe without layer_types", {"model_type": "lfm2_moe", "architectures": ["X"], "num_hidden_layers": 4},
     "error"),
    ("kimi-linear without linear_attn_config", {"model_type": "kimi_linear", "architectures": ["X"]}, "error"),
    ("mamba-2 without intermediate_size",
     {"model_type": "mamba2", "architectures": ["X"], "num_heads": 128, "head_dim": 64}, "error"),
    ("raw state-spaces mamba", {"d_model": 768, "n_layer": 24, "ssm_cfg": {}}, "state"),
    ("falcon-h1 with mamba_d_ssm null: expand * hidden_size",
     {"model_type": "falcon_h1", "architectures": ["X"], "hidden_size": 1024, "mamba_d_ssm": None,
      "mamba_n_heads": 32}, "state"),
    ("jamba: SGLang has no class for it, no state pool", {"model_type": "jamba", "architectures": ["X"]}, "none"),
    ("llama: no state", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "none"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "cfg", "kind"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_configs_match_sglang(oracle: StateModelOracle, name: str, cfg: dict[str, Any], kind: str) -> None:
    for tp, pp in ((1, 1), (2, 2)):
        got, diff = _compare(oracle, cfg, {"tp": tp, "dp": 1, "pp": pp, "split": None, "ssm": None, "conv": None})
        assert diff is None, diff
        assert got == kind, (name, got)


# -- what kvbudget reads, and refuses -------------------------------------------------------------
def test_model_type_tables_cover_every_stateful_sglang_class(oracle: StateModelOracle) -> None:
    stateful = oracle.stateful_model_types()
    unread = set(UNREAD_STATE_MODEL_TYPES)
    assert not STATE_MODEL_TYPES & unread
    missing = {mt: cls for mt, cls in stateful.items() if mt not in STATE_MODEL_TYPES | unread}
    assert not missing, f"SGLang plans a state for these model types; kvbudget neither reads nor refuses them: {missing}"
    extra = STATE_MODEL_TYPES - set(stateful)
    assert not extra, f"kvbudget reads a state SGLang's classes do not plan: {sorted(extra)}"


@pytest.mark.parametrize("model_type", sorted(UNREAD_STATE_MODEL_TYPES))
def test_unread_state_architectures_are_refused(model_type: str) -> None:
    with pytest.raises(InvalidConfigError, match="does not read"):
        state_from_hf_config({"model_type": model_type, "architectures": ["X"], "num_hidden_layers": 4})


def test_sglang_plans_a_state_for_the_refused_architectures_it_can_load(oracle: StateModelOracle) -> None:
    """The refusals are not vacuous: on a config SGLang's class loads with its defaults, its
    ``mambaish_config`` answers (a lightning or registry state, or one kvbudget does not read)."""
    minicpm = {"mixer_types": ["lightning", "minicpm4"], "num_key_value_heads": 32}  # lightning layers, no GQA
    for mt in ("minicpm_sala", "gigachat3_5", "qwen4_exp_text", "glm5_next"):
        r = oracle.state({"model_type": mt, "architectures": ["X"], "full_attention_interval": 4,
                          **(minicpm if mt == "minicpm_sala" else {})})  # fmt: skip
        assert r.get("mixer") is not None, (mt, r)


# -- ZAYA1: its model class's checks, and its two conv states in SGLang's MambaPool ---------------
_ZAYA = {"model_type": "zaya", "architectures": ["ZayaForCausalLM"], "num_hidden_layers": 8}


def test_zaya_model_class_asserts_are_refused(oracle: StateModelOracle) -> None:
    """ZAYA1's config class sizes the conv state on the global TP group and plans these; its model
    class (``models/zaya.py``, its assertions read here) asserts no attention DP and TP dividing both
    head counts, and builds attention at every even layer: kvbudget refuses where those fail."""
    src = (sglang_root() / "sglang/srt/models/zaya.py").read_text(encoding="utf-8")
    assert "attention DP is not supported for ZAYA1" in src and "layer_id % 2 == 0" in src
    assert "must be divisible " in src and "num_q_heads must be a multiple of num_k_heads" in src
    base = {"split": None, "ssm": None, "conv": None, "pp": 1}
    odd = {**_ZAYA, "zaya_layers": [16, "a"] * 4}
    for cfg, par, needle in ((_ZAYA, {"tp": 1, "dp": 2}, "attention DP"), (_ZAYA, {"tp": 4, "dp": 1}, "divisible"),
                             (odd, {"tp": 1, "dp": 1}, "even layer"),
                             ({**_ZAYA, "num_key_value_heads": 3, "num_query_groups": 3}, {"tp": 1, "dp": 1},
                              "multiple")):  # fmt: skip
        assert isinstance(_theirs(oracle, cfg, {**base, **par}), dict), (cfg, par)  # the config class plans it
        ours = _ours(cfg, {**base, **par})
        assert isinstance(ours, str) and needle in ours, (needle, ours)


@pytest.mark.parametrize("cca_time1", [1, 2])
@pytest.mark.parametrize("topk", [None, 1, 4], ids=["no-spec", "chain", "tree"])
def test_zaya_state_pool_is_sglangs(oracle: StateModelOracle, cca_time1: int, topk: int | None) -> None:
    """ZAYA1's state pool against SGLang's ``MambaPool`` (:mod:`sglang_oracle.mamba_pool`, on meta)
    over its config class's cache params: SGLang's two conv states, one flat tensor in kvbudget of
    the same (layers, rows) and elements; with a linear draft chain SGLang's deduplicated conv
    window fails on the two shapes unless both windows are 1, and kvbudget refuses the same."""
    from kvbudget import ServingConfig, SpeculativeConfig
    from kvbudget.sglang.state import mamba_ratio, state_pool
    from sglang_oracle import state as oracle_state

    cfg = {**_ZAYA, "cca_time1": cca_time1}
    oracle.b.active.ctx = oracle._ctx(2, 2, None, None)
    try:
        params = oracle.mixer(oracle.parse(cfg))[1].mamba2_cache_params
    finally:
        oracle.b.active.ctx = None
    state = state_from_hf_config(cfg, tp_size=2)
    assert state is not None and state.num_state_layers == 4
    spec = SpeculativeConfig() if topk is None else SpeculativeConfig(
        algorithm="eagle", draft_num_layers=1, num_steps=3, eagle_topk=topk, num_draft_tokens=4)  # fmt: skip
    serving, slots = ServingConfig(tp_size=2, max_running_requests=8), 32
    requests = min(8, slots // mamba_ratio(state, serving))
    try:
        theirs = oracle_state.load(sglang_root()).pool.tensors(
            params, size=slots, spec_state_size=requests, layers=4, draft_tokens=None if topk is None else 4,
            topk=topk, replay=False, replay_len=16)  # fmt: skip
    except ValueError as e:
        assert "no axis of length conv_kernel-1" in str(e) and (topk, cca_time1) == (1, 2), e
        with pytest.raises(InvalidConfigError, match="conv_kernel"):
            state_pool(state, serving, spec, slots)
        return
    ours = {t.kind: [(tuple(t.shape), t.dtype)] for t in state_pool(state, serving, spec, slots).tensors}
    assert set(ours) == set(theirs)
    for kind, shapes in theirs.items():
        lead = {s[:2] for s, _ in shapes} | {s[:2] for s, _ in ours[kind]}
        assert len(lead) == 1 and sum(math.prod(s) for s, _ in shapes) == math.prod(ours[kind][0][0]), kind
        assert {d for _, d in shapes} == {ours[kind][0][1]}, kind


def test_arguments_are_checked() -> None:
    cfg = ENTRIES[0]["config"]
    for kw in ({"tp_size": 0}, {"attn_dp_size": 0}, {"pp_size": 0}, {"mamba_ssm_dtype": "fp8"},
               {"conv_dtype": "bf16"}, {"pp_size": 2, "pp_layer_split": [40, 9]}, {"pp_size": 2, "pp_layer_split": [48]}):
        with pytest.raises(InvalidConfigError):
            state_from_hf_config(cfg, **kw)
    with pytest.raises(TypeError, match="conv_elems"):
        state_from_hf_config(cfg, conv_elems=1)
    with pytest.raises(InvalidConfigError, match="model_type"):
        state_from_hf_config({"architectures": ["Qwen3NextForCausalLM"]})
    s = state_from_hf_config(cfg, max_mamba_cache_size=64, extra_bytes_per_req=8)
    assert s is not None and (s.max_mamba_cache_size, s.extra_bytes_per_req) == (64, 8)


def test_a_config_file_path_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(ENTRIES[0]["config"]))
    assert state_from_hf_config(tmp_path) == state_from_hf_config(ENTRIES[0]["config"])
