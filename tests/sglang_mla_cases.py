"""Two MLA families of the model-resolution differential (``sglang_model_cases.FAMILIES``) that
SGLang 0.5.23 loads with its own config classes: HunYuan-V4 (``hy_v4``) and LongCat-Flash
(``longcat_flash``), built by transformers 5.19.0's classes and varied as their checkpoints
vary, plus the files SGLang refuses or reads its own way."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import transformers as T

if TYPE_CHECKING:
    from sglang_model_cases import Built

_HY_V4 = ["HYV4ForCausalLM"] * 3 + ["HYV4ForCausalLMNextN"]
_LONGCAT = ["LongcatFlashForCausalLM"] * 3 + ["LongcatFlashForCausalLMNextN", "LongcatFlashNgramForCausalLM"]


def hy_v4(rng: random.Random) -> Built:
    """HunYuan-V4: every layer DSA, with indexer kinds of its own or the class's (transformers' in
    the file, or none: SGLang's); some with a key SGLang's ``HYV4Config`` refuses (a shared first
    indexer, iHC, the gate or the sinks off, a layer kind other than DSA)."""
    from sglang_model_cases import Built, _mla

    n = rng.randint(1, 48)
    kw: dict[str, Any] = {**_mla(rng, n), "num_attention_heads": rng.choice([16, 32, 64]),
                          "index_head_dim": rng.choice([64, 128]), "index_topk": rng.choice([1024, 2048])}  # fmt: skip
    if rng.random() < 0.5:
        kw["indexer_types"] = ["full" if i == 0 or rng.random() < 0.4 else "shared" for i in range(n)]
    refused = [{"indexer_types": ["shared"] * n}, {"hc_mult": 0}, {"enable_ihc": False}, {"learnable_sink": False},
               {"gating_type": "headwise"}, {"layer_types": ["sliding_attention"] * n}]  # fmt: skip
    extra = rng.choice(refused) if rng.random() < 0.15 else {}
    if not extra and rng.random() < 0.3:  # as the checkpoint names the layer kind
        extra = {"layer_types": ["deepseek_sparse_attention"] * n}
    built = Built(T.HYV4Config(**kw), rng.choice(_HY_V4), extra)
    if rng.random() < 0.3:  # the per-layer lists left to SGLang's class (its defaults for n layers)
        lists = ("indexer_types", "layer_types", "mlp_layer_types")
        return Built(None, built.arch, {k: v for k, v in built.saved(False).items() if k not in lists})
    return built


def longcat_flash(rng: random.Random) -> Built:
    """LongCat-Flash (two MLA blocks per decoder layer) as transformers' class saves it
    (``num_layers``): some with DSA keys (``cli_factor`` and the others), ``num_hidden_layers``
    beside ``num_layers`` (or a null ``num_layers``), a NextN or n-gram name (SGLang serves both as
    ``LongcatFlashForCausalLM``), or a LongCat name and no model type (SGLang's class loads it)."""
    from sglang_model_cases import Built, _dsa_extra, _mla

    kw: dict[str, Any] = _mla(rng, rng.randint(1, 32))
    kw.update(num_layers=kw.pop("num_hidden_layers"), num_attention_heads=rng.choice([32, 64]))
    extra: dict[str, Any] = {}
    if rng.random() < 0.3:
        extra.update(index_topk=2048, index_head_dim=rng.choice([64, 128]), cli_factor=rng.choice([1, 2, 3]),
                     **_dsa_extra(rng, 2 * kw["num_layers"]))  # fmt: skip
    if rng.random() < 0.1:
        extra["num_hidden_layers"] = rng.randint(1, 32)
    if rng.random() < 0.05:  # SGLang's class then has no layer count: unless num_hidden_layers, refused
        extra["num_layers"] = None
    arch = rng.choice(_LONGCAT)
    if arch == "LongcatFlashNgramForCausalLM":  # LongCat-Flash-Lite's n-gram embedding
        extra.update(oe_vocab_size_ratio=0.5, oe_neighbor_num=3, oe_split_num=4)
    built = Built(T.LongcatFlashConfig(**kw), arch, extra)
    if arch != "LongcatFlashForCausalLMNextN" and rng.random() < 0.2:
        return Built(None, arch, {k: v for k, v in built.saved(False).items() if k != "model_type"})
    return built
