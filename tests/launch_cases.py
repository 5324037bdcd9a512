"""Generated SGLang launch lines and the pool-oracle case of each, from SGLang's own resolution.

:func:`model_folders` writes the model folders (configs built by transformers
5.19.0's classes at the published geometry of the models people serve, plus a
hybrid-state model and EAGLE3 / standalone drafts); :func:`launch_lines` draws
launch lines over them (seeded: every flag ``from_server_args`` reads, alone and
in combination, including lines SGLang refuses). :func:`sglang_case` turns
SGLang's resolved values (:mod:`sglang_oracle.resolve`), SGLang's model
resolution (:mod:`sglang_oracle.model`) and SGLang's draft-layer count into the
pool oracle's case (:mod:`sglang_oracle`).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import transformers as T

#: Published geometry (config.json of each checkpoint, as in ../shared/data/models.json).
GEMMA3_27B = dict(hidden_size=5376, num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=16,
                  head_dim=128, sliding_window=1024)  # fmt: skip
_MODELS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "gemma-3-27b": (lambda: T.Gemma3Config(text_config=GEMMA3_27B), "Gemma3ForConditionalGeneration", {}),
    "gpt-oss-120b": (lambda: T.GptOssConfig(num_hidden_layers=36, num_attention_heads=64, num_key_value_heads=8,
                                            head_dim=64, hidden_size=2880, sliding_window=128),
                     "GptOssForCausalLM", {}),
    "llama-3.1-70b": (lambda: T.LlamaConfig(num_hidden_layers=80, hidden_size=8192, num_attention_heads=64,
                                            num_key_value_heads=8), "LlamaForCausalLM", {}),
    "qwen3-32b": (lambda: T.Qwen3Config(num_hidden_layers=64, hidden_size=5120, num_attention_heads=64,
                                        num_key_value_heads=8, head_dim=128), "Qwen3ForCausalLM", {}),
    "deepseek-v3": (lambda: T.DeepseekV3Config(), "DeepseekV3ForCausalLM", {"num_nextn_predict_layers": 1}),
    "deepseek-v3.2": (lambda: T.DeepseekV32Config(), "DeepseekV32ForCausalLM", {"num_nextn_predict_layers": 1}),
    "qwen3-next-80b": (lambda: T.Qwen3NextConfig(num_hidden_layers=48, full_attention_interval=4, hidden_size=2048,
                                                 num_attention_heads=16, num_key_value_heads=2, head_dim=256),
                       "Qwen3NextForCausalLM", {"full_attention_interval": 4}),
}  # fmt: skip
#: Drafts: (config, architecture, the targets it drafts for).
_DRAFTS: dict[str, tuple[Any, str]] = {
    "eagle3-5376": (lambda: T.LlamaConfig(num_hidden_layers=1, hidden_size=5376, num_attention_heads=32,
                                          num_key_value_heads=8, head_dim=128), "LlamaForCausalLMEagle3"),
    "eagle3-2880": (lambda: T.LlamaConfig(num_hidden_layers=1, hidden_size=2880, num_attention_heads=64,
                                          num_key_value_heads=8, head_dim=64), "LlamaForCausalLMEagle3"),
    "eagle3-8192": (lambda: T.LlamaConfig(num_hidden_layers=1, hidden_size=8192, num_attention_heads=64,
                                          num_key_value_heads=8), "LlamaForCausalLMEagle3"),
    "llama-3.2-1b": (lambda: T.LlamaConfig(num_hidden_layers=16, hidden_size=2048, num_attention_heads=32,
                                           num_key_value_heads=8, head_dim=64), "LlamaForCausalLM"),
    "gpt-oss-20b": (lambda: T.GptOssConfig(num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8,
                                           head_dim=64, hidden_size=2880, sliding_window=128), "GptOssForCausalLM"),
}  # fmt: skip
_EAGLE3_FOR = {"gemma-3-27b": "eagle3-5376", "gpt-oss-120b": "eagle3-2880", "llama-3.1-70b": "eagle3-8192",
               "qwen3-32b": "eagle3-5376"}  # fmt: skip
MODELS = tuple(_MODELS)


def model_folders(tmp: Path) -> dict[str, str]:
    """Every model and draft folder under ``tmp``: name -> path."""
    out = {}
    for name, (make, arch, extra) in {**_MODELS, **{k: (m, a, {}) for k, (m, a) in _DRAFTS.items()}}.items():
        d = tmp / name
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(json.dumps({**make().to_dict(), "architectures": [arch], **extra}))
        out[name] = str(d)
    return out


def _speculative(r: random.Random, model: str, folders: dict[str, str]) -> list[str]:
    kind = r.choice(["none", "none", "eagle3", "eagle", "nextn", "standalone"])
    if kind == "none":
        return []
    if kind == "eagle3":
        flags = ["--speculative-algorithm", "EAGLE3"]
        if model in _EAGLE3_FOR:
            flags += ["--speculative-draft-model-path", folders[_EAGLE3_FOR[model]]]
    elif kind == "standalone":  # a hybrid-SWA draft for gpt-oss: its sliding layers sit in the SWA pool
        draft = "gpt-oss-20b" if model == "gpt-oss-120b" else "llama-3.2-1b"
        flags = ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", folders[draft]]
    else:
        flags = ["--speculative-algorithm", kind.upper()]
    # Steps, top-k and draft tokens: all three, none (SGLang's defaults), or some (its assertion, or
    # its comparison of an unset top-k).
    given = r.choice(["all", "all", "none", "some"])
    values = (("--speculative-num-steps", r.choice([1, 3, 5])), ("--speculative-eagle-topk", r.choice([1, 1, 4])),
              ("--speculative-num-draft-tokens", r.choice([4, 8])))  # fmt: skip
    for flag, value in values:
        if given == "all" or (given == "some" and r.random() < 0.5):
            flags += [flag, str(value)]
    return flags


def _state_cache(r: random.Random, model: str) -> list[str]:
    """The state-cache flags: each alone and together for the hybrid-state model, and now and
    then an explicit extra-buffer strategy for a model without state (which SGLang refuses)."""
    if model != "qwen3-next-80b":
        return ["--mamba-radix-cache-strategy", "extra_buffer"] if r.random() < 0.03 else []
    flags: list[str] = []
    pick = r.random
    if pick() < 0.5:
        flags += ["--mamba-radix-cache-strategy", r.choice(["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"])]
    if pick() < 0.3:
        flags += ["--disable-overlap-schedule"]
    if pick() < 0.3:
        flags += ["--mamba-ssm-dtype", r.choice(["float32", "bfloat16", "float16"])]
    if pick() < 0.2:
        flags += ["--max-mamba-cache-size", str(r.choice([64, 256, 1024]))]
    if pick() < 0.2:
        flags += ["--mamba-full-memory-ratio", str(r.choice([0.5, 0.9, 2.0]))]
    if pick() < 0.15:
        flags += ["--linear-attn-backend", r.choice(["triton", "flashinfer"])]
    if pick() < 0.15:
        flags += ["--mamba-track-interval", str(r.choice([2, 48, 256]))]
    if pick() < 0.1:  # a page the FLA chunk (64) does not divide, nor divides
        flags += ["--page-size", "48"]
    if pick() < 0.1:
        flags += ["--enable-linear-replayssm-spec", "--linear-replayssm-cache-len", str(r.choice([8, 16]))]
    return flags


def launch_lines(folders: dict[str, str], count: int, seed: int = 0,
                 models: tuple[str, ...] = MODELS) -> list[tuple[str, list[str]]]:  # fmt: skip
    """``count`` seeded ``(model name, flags)`` launch lines over ``models`` in turn."""
    lines = []
    for i in range(count):
        r = random.Random(f"launch line {seed} {i}")
        model = models[i % len(models)]
        mla = model.startswith("deepseek")
        flags = ["--model-path", folders[model], "--tp", str(r.choice([1, 2, 4, 8]))]
        pick = r.random
        if pick() < 0.6:
            flags += ["--page-size", str(r.choice([1, 16, 32, 64]))]
        if pick() < 0.4:
            flags += ["--kv-cache-dtype", r.choice(["fp8_e4m3", "fp8_e5m2", "bf16", "auto"])]
        if pick() < 0.3:
            backends = ["fa3", "flashinfer", "triton"] + (["flashmla"] if mla else ["trtllm_mha"])
            flags += ["--attention-backend", r.choice(backends)]
        mode = r.choice(["null", "null", "decode", "prefill"])
        if mode != "null":
            flags += ["--disaggregation-mode", mode]
        if mode == "decode" and pick() < 0.4:
            flags += ["--disaggregation-decode-extra-slots", str(r.choice([0, 8]))]
        if mode == "decode" and pick() < 0.2:
            flags += ["--disaggregation-decode-enable-radix-cache"]
        if pick() < 0.5:
            flags += ["--max-running-requests", str(r.choice([8, 16, 32, 64, 128]))]
        if pick() < 0.3:
            flags += ["--swa-full-tokens-ratio", str(r.choice([0.25, 0.5, 1.0]))]
        if pick() < 0.2:
            flags += ["--disable-radix-cache"]
        if pick() < 0.2:
            flags += ["--chunked-prefill-size", str(r.choice([2048, 8192]))]
        if pick() < 0.15:
            flags += ["--dp-size" if pick() < 0.5 else "--attn-dp-size", "2"]
        if model == "deepseek-v3.2":  # SGLang picks unset DSA backends from the hardware: kvbudget's note
            flags += ["--dsa-prefill-backend", "flashmla_sparse", "--dsa-decode-backend",
                      r.choice(["trtllm", "flashmla_kv"]), "--kv-cache-dtype", r.choice(["fp8_e4m3", "bfloat16"])]
        flags += _speculative(r, model, folders) + _state_cache(r, model)
        lines.append((model, flags))
    return lines


def sglang_case(v: dict[str, Any], m: dict[str, Any], draft: dict[str, int], model_dtype: str,
                swa_eviction_interval: int) -> dict[str, Any]:  # fmt: skip
    """The pool oracle's case from SGLang's resolved values ``v``, its model resolution ``m``
    and its draft layers ``draft`` (``draft_num_layers``, ``draft_swa_num_layers``)."""
    full = len(m["full_attention_layer_ids"] or ()) if m["hybrid_swa"] else m["num_attention_layers"]
    swa = len(m["swa_attention_layer_ids"] or ()) if m["hybrid_swa"] else 0
    dims = ("head_dim", "v_head_dim", "swa_head_dim", "swa_v_head_dim")
    kv = v["kv_cache_dtype"]
    algo = v["speculative_algorithm"]
    case = {
        "num_full_layers": full, "num_swa_layers": swa, "num_kv_heads": m["num_kv_heads"],
        "swa_num_kv_heads": m["swa_num_kv_heads"], **{k: m[k] or 128 for k in dims},
        "sliding_window_size": m["sliding_window_size"], "kv_lora_rank": m["kv_lora_rank"],
        "qk_rope_head_dim": m["qk_rope_head_dim"], "kv_cache_dtype": "bf16" if kv == "bfloat16" else kv,
        "model_dtype": model_dtype, "page_size": v["page_size"],
        "swa_full_tokens_ratio": 0.8 if v["swa_full_tokens_ratio"] is None else v["swa_full_tokens_ratio"],
        "swa_eviction_interval": swa_eviction_interval, "tp_size": v["tp_size"], "attn_dp_size": v["attn_dp_size"],
        "max_running_requests": v["max_running_requests"], "chunked_prefill_size": v["chunked_prefill_size"],
        "disable_radix_cache": v["disable_radix_cache"], "disaggregation_mode": v["disaggregation_mode"],
        "disaggregation_decode_extra_slots": v["disaggregation_decode_extra_slots"] or 0,
        "disable_overlap_schedule": v["disable_overlap_schedule"],
        "algorithm": (algo or "none").lower(), **draft,
        "num_steps": v["speculative_num_steps"], "eagle_topk": v["speculative_eagle_topk"],
        "num_draft_tokens": v["speculative_num_draft_tokens"],
    }  # fmt: skip
    if m["mla"]:
        case.update(swa_kv_lora_rank=m["kv_lora_rank"], swa_qk_rope_head_dim=m["qk_rope_head_dim"])
    if m["index_head_dim"] is not None:  # DSA: the indexer, and the backends as launched
        case.update(index_head_dim=m["index_head_dim"], index_kpool=m["index_kpool"],
                    index_shared_layers=m["index_shared_layers"],
                    dsa_backends=(v["dsa_prefill_backend"], v["dsa_decode_backend"]))  # fmt: skip
    return case


@dataclasses.dataclass(frozen=True)
class Sglang:
    """SGLang's answer for one line: its refusal, or its resolved values and model resolution."""

    refused: str | None
    values: dict[str, Any] | None = None
    model: dict[str, Any] | None = None


def config_of(path: str) -> dict[str, Any]:
    """The folder's ``config.json``."""
    return dict(json.loads((Path(path) / "config.json").read_text()))


def sglang_side(resolve: Any, models: Any, flags: list[str]) -> Sglang:
    """SGLang's launch resolution (:mod:`sglang_oracle.resolve`) of ``flags`` over its model
    resolution (:mod:`sglang_oracle.model`) of the model folder."""
    target = config_of(flags[1])
    m = models.resolve(target, "--disable-hybrid-swa-memory" in flags)
    assert isinstance(m, dict), m
    v = resolve(flags, {"architectures": target["architectures"], "mla": m["mla"], "hybrid_swa": m["hybrid_swa"],
                        "dsa_kpool": m["index_kpool"] if m["index_head_dim"] is not None else None,
                        "text_config": target.get("text_config", target), "config": target})  # fmt: skip
    if isinstance(v, tuple):
        return Sglang(refused=v[1])
    return Sglang(refused=None, values=v, model=m)


def pool_case(theirs: Sglang, draft_layers: Any, flags: list[str]) -> dict[str, Any]:
    """The pool oracle's case of a line SGLang plans, with SGLang's draft layers
    (:mod:`sglang_oracle.draft`)."""
    from kvbudget.sglang.install import from_server_args

    assert theirs.values is not None and theirs.model is not None
    serving = from_server_args(flags).scenario.serving  # the model dtype and eviction interval only
    return sglang_case(theirs.values, theirs.model, draft_layers(theirs.values, flags[1]), serving.model_dtype,
                       serving.swa_eviction_interval)  # fmt: skip
