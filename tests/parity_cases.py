"""Random scenarios for the SGLang parity test, and kvbudget's answer to one.

A case is a dict keyed by kvbudget's scenario field names (``kvbudget.fields
.SCENARIO_FIELDS``), the form the oracle (:mod:`sglang_oracle`) maps onto
SGLang's inputs. :func:`random_case` draws every field from its strategy in
:data:`STRATEGIES`; a field without one is an error, so a new input cannot
slip past the parity test. The draws are biased to what SGLang's own tests
cover thinly: draft budgeting in the SWA configurators, the request cap in
PD decode, unified memory, fused entries, the FP4 recipes.

Cases are ones kvbudget can express: the rules kvbudget enforces that
SGLang does not (``dcp_size`` divides ``tp_size``, banded and SWA draft
layers exclusive and at most ``d``, fused entries only with a drafting
algorithm on the target, NVFP4 with its attention backends, FP4 head dims of
at least 16) are applied to the draw, never checked after it. Everything
else is compared as drawn, errors included.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

import kvbudget
from kvbudget.fields import FIELDS, SCENARIO_FIELDS

Rng = random.Random
Strategy = Callable[[Rng], Any]


def one_of(*values: Any) -> Strategy:
    return lambda r: r.choice(values)


def maybe(p_none: float, s: Strategy) -> Strategy:
    return lambda r: None if r.random() < p_none else s(r)


def ints(lo: int, hi: int) -> Strategy:
    return lambda r: r.randint(lo, hi)


def mix(*parts: tuple[float, Strategy]) -> Strategy:
    weights = [w for w, _ in parts]
    return lambda r: r.choices([s for _, s in parts], weights)[0](r)


DIMS = one_of(64, 80, 96, 128, 128, 192, 256)
HEADS = one_of(1, 2, 4, 8, 8, 16, 32, 64, 128)
BACKENDS = ("flashinfer", "trtllm_mha", "triton", "torch_native", "flex_attention", "fa3", "fa4")

#: One strategy per scenario field (``draft`` is the exact plan's own
#: geometry, which SGLang's sizing never reads: always None here).
STRATEGIES: dict[str, Strategy] = {
    "num_full_layers": mix((0.2, one_of(0)), (0.5, ints(1, 8)), (0.3, ints(1, 64))),
    "num_swa_layers": mix((0.3, one_of(0)), (0.4, ints(1, 12)), (0.3, ints(1, 64))),
    "num_kv_heads": HEADS,
    "head_dim": mix((0.8, DIMS), (0.2, ints(1, 300))),
    "v_head_dim": maybe(0.6, mix((0.8, DIMS), (0.2, ints(1, 300)))),
    "swa_num_kv_heads": maybe(0.6, HEADS),
    "swa_head_dim": maybe(0.7, DIMS),
    "swa_v_head_dim": maybe(0.8, DIMS),
    "sliding_window_size": maybe(0.15, mix((0.7, one_of(127, 511, 1023, 4095)), (0.3, ints(0, 9000)))),
    "kv_lora_rank": maybe(0.85, one_of(512, 256, 128, 64)),
    "qk_rope_head_dim": one_of(64, 64, 32, 0),
    "swa_kv_lora_rank": maybe(0.5, one_of(512, 256, 128)),
    "swa_qk_rope_head_dim": maybe(0.5, one_of(64, 32, 0)),
    "index_head_dim": maybe(0.5, one_of(128, 128, 128, 64, 256, 100)),
    "index_kpool": one_of(1, 1, 1, 2, 4, 3),
    "index_shared_layers": mix((0.6, one_of(0)), (0.4, ints(1, 40))),
    "dsa_raw_kv_layout": one_of(True, False),
    "kv_cache_dtype": one_of(
        "auto", "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"
    ),
    "model_dtype": one_of("bf16", "bf16", "fp16", "fp32"),
    "page_size": one_of(1, 1, 16, 32, 64, 128, 256, 3),
    "tp_size": one_of(1, 1, 2, 4, 8, 16),
    "dcp_size": one_of(1, 1, 2, 4),
    "attn_dp_size": one_of(1, 1, 2, 4, 8),
    "swa_full_tokens_ratio": mix(
        (0.4, one_of(0.8, 0.1, 0.5, 1.0)),
        (0.6, lambda r: max(round(r.uniform(0.01, 2.0), r.randint(1, 6)), 0.01)),
    ),
    "max_running_requests": maybe(0.3, mix((0.5, ints(1, 8)), (0.5, ints(1, 512)))),
    "chunked_prefill_size": maybe(0.35, one_of(512, 2048, 4096, 8192, 16384, 1)),
    "disable_radix_cache": one_of(True, True, False),
    "disable_overlap_schedule": one_of(True, False),
    "disaggregation_mode": one_of("null", "prefill", "decode", "decode"),
    "disaggregation_decode_extra_slots": mix((0.5, one_of(0)), (0.5, ints(1, 8))),
    "swa_eviction_interval": one_of(128, 128, 0, -5, 1, 7, 512),
    "disable_hybrid_swa_memory": lambda r: r.random() < 0.1,
    "is_draft_worker": lambda r: r.random() < 0.15,
    "enable_unified_memory": lambda r: r.random() < 0.25,
    "model_context_len": lambda r: None,  # read by the unified tri-pool alone (test_sglang_state_unified_swa.py)
    "prefill_attention_backend": maybe(0.3, one_of(*BACKENDS)),
    "decode_attention_backend": maybe(0.3, one_of(*BACKENDS)),
    "is_sm100": one_of(True, False),
    "algorithm": one_of(
        "none", "eagle", "eagle3", "eagle3", "nextn", "standalone", "ngram", "dflash", "uno",
        "dspark", "frozen_kv_mtp",
    ),
    "draft_num_layers": mix((0.15, one_of(0)), (0.85, ints(1, 6))),
    "num_steps": maybe(0.2, ints(0, 6)),
    "eagle_topk": maybe(0.2, one_of(0, 1, 1, 2, 4, 8)),
    "num_draft_tokens": maybe(0.1, ints(0, 16)),
    "max_num_draft_tokens": maybe(0.7, ints(0, 24)),
    "banded_draft_layers": mix((0.8, one_of(0)), (0.2, ints(1, 3))),
    "draft_swa_num_layers": mix((0.6, one_of(0)), (0.4, ints(1, 4))),
    "dflash_draft_cell_size_per_token": maybe(0.4, mix((0.2, one_of(0)), (0.8, ints(1, 200_000)))),
    "fused_full_entry_bytes": maybe(0.85, ints(1, 1 << 20)),
    "fused_swa_entry_bytes": maybe(0.85, ints(1, 1 << 20)),
    "draft": lambda r: None,
}

def field_names(owner: str) -> tuple[str, ...]:
    return tuple(f.name for f in FIELDS[owner])
DRAFTING = {"eagle", "eagle3", "nextn", "standalone", "frozen_kv_mtp", "dflash", "dspark"}


def random_case(r: Rng) -> dict[str, Any]:
    """A random scenario kvbudget can express (field names as in ``SCENARIO_FIELDS``)."""
    missing = [name for name in SCENARIO_FIELDS if name not in STRATEGIES]
    if missing:
        raise KeyError(f"no parity strategy for scenario fields {missing}")
    c = {name: STRATEGIES[name](r) for name in SCENARIO_FIELDS}
    if c["num_full_layers"] + c["num_swa_layers"] == 0:
        c["num_full_layers"] = 1
    if c["tp_size"] % c["dcp_size"]:
        c["dcp_size"] = 1
    if c["kv_lora_rank"] is None:
        c["qk_rope_head_dim"] = c["swa_kv_lora_rank"] = c["swa_qk_rope_head_dim"] = None
    if c["kv_lora_rank"] is None or c["num_swa_layers"]:  # DSA: an MLA model of full layers
        c["index_head_dim"] = None
    if c["index_head_dim"] is None:
        c["index_kpool"], c["index_shared_layers"] = 1, 0
    c["index_shared_layers"] = min(c["index_shared_layers"], c["num_full_layers"])
    if c["kv_cache_dtype"] in ("nvfp4", "fp4_mx_block16"):
        c["head_dim"] = max(c["head_dim"], 16)
        if c["swa_head_dim"] is not None:
            c["swa_head_dim"] = max(c["swa_head_dim"], 16)
        if c["kv_cache_dtype"] == "nvfp4":
            c["prefill_attention_backend"] = c["prefill_attention_backend"] or r.choice(BACKENDS)
            c["decode_attention_backend"] = c["decode_attention_backend"] or r.choice(BACKENDS)
    d = c["draft_num_layers"]
    c["banded_draft_layers"] = min(c["banded_draft_layers"], d)
    c["draft_swa_num_layers"] = 0 if c["banded_draft_layers"] else min(c["draft_swa_num_layers"], d)
    hybrid = c["num_swa_layers"] > 0 and not c["disable_hybrid_swa_memory"]
    if c["algorithm"] not in DRAFTING or c["is_draft_worker"]:
        c["fused_full_entry_bytes"] = c["fused_swa_entry_bytes"] = None
    if not hybrid:
        c["fused_swa_entry_bytes"] = None
    return c


def amount(r: Rng, entry: str) -> int:
    """A budget (bytes) or a token count, mostly where pools plan, some where they cannot."""
    if entry == "bytes":
        return r.choice((0, -1, 1 << 20)) if r.random() < 0.05 else int(2 ** r.uniform(20, 41))
    return r.choice((0, -3, 1)) if r.random() < 0.05 else int(2 ** r.uniform(0, 22))


@dataclass(frozen=True)
class Answer:
    """kvbudget's answer in the oracle's terms (see ``sglang_oracle.Outcome``)."""

    class_name: str | None
    cell_size: int | float | None
    swa_cap: int | None
    config: dict[str, int | None] | None
    error: str | None
    stage: str


CONFIG_KEYS = (
    "max_total_num_tokens", "full_max_total_num_tokens", "swa_max_total_num_tokens",
    "unified_memory_pool_bytes",
)


def error_kind(e: kvbudget.KVBudgetError) -> str:
    if isinstance(e, kvbudget.NotEnoughMemoryError):
        return "not_enough_memory"
    if isinstance(e, kvbudget.SWAPoolTooSmallError):
        return "swa_too_small"
    return "invalid"


def differences(o: Any, k: Answer) -> list[str]:
    """What differs between SGLang's outcome (``sglang_oracle.Outcome``) and kvbudget's answer."""
    diffs = []
    if o.stage != k.stage:
        diffs.append(f"stage {o.stage} vs {k.stage}")
    if (o.error[0] if o.error else None) != k.error:
        diffs.append(f"error {o.error} vs {k.error}")
    if o.stage == "solve" or k.stage == "solve":
        if o.class_name != k.class_name:
            diffs.append(f"class {o.class_name} vs {k.class_name}")
        if type(o.cell_size) is not type(k.cell_size) or o.cell_size != k.cell_size:
            diffs.append(f"cell_size {o.cell_size!r} vs {k.cell_size!r}")
        if o.swa_cap != k.swa_cap:
            diffs.append(f"swa_cap {o.swa_cap} vs {k.swa_cap}")
        if o.config != k.config:
            diffs.append(f"config {o.config} vs {k.config}")
    return diffs


def scenario_of(c: dict[str, Any]) -> kvbudget.Scenario:
    n_f, n_s = c["num_full_layers"], c["num_swa_layers"]
    counts = ("num_full_layers", "num_swa_layers")
    shape = {k: c[k] for k in field_names("AttentionShape") if k not in counts}
    model = kvbudget.ModelGeometry(list(range(n_f)), list(range(n_f, n_f + n_s)), **shape)
    serving = kvbudget.ServingConfig(**{k: c[k] for k in field_names("ServingConfig")})
    spec = kvbudget.SpeculativeConfig(**{k: c[k] for k in field_names("SpeculativeConfig")})
    return kvbudget.Scenario(model, serving, spec)


def kvbudget_answer(
    c: dict[str, Any], entry: str, value: int, scenario: Callable[[], kvbudget.Scenario] | None = None
) -> Answer:
    """kvbudget's factory and entry point on case ``c`` (or on what ``scenario()`` builds; its
    kvbudget errors are refusals too)."""
    try:
        sc = scenario_of(c) if scenario is None else scenario()
        cfg = kvbudget.create_pool_configurator(sc.model, sc.serving, sc.spec)
    except kvbudget.KVBudgetError as e:
        return Answer(None, None, None, None, error_kind(e), "init")
    name = type(cfg).__name__
    cap = getattr(cfg, "swa_cap", None)
    try:
        if entry == "bytes":
            res = cfg.calculate_pool_sizes(value)
        else:
            res = cfg.calculate_pool_sizes_from_max_tokens(value)
    except kvbudget.KVBudgetError as e:
        return Answer(name, cfg.cell_size, cap, None, error_kind(e), "solve")
    return Answer(name, cfg.cell_size, cap, {k: getattr(res, k) for k in CONFIG_KEYS}, None, "solve")


DERIVED = ("v_head_dim", "swa_num_kv_heads", "swa_head_dim", "swa_v_head_dim", "swa_kv_lora_rank",
           "swa_qk_rope_head_dim")


def oracle_case(c: dict[str, Any]) -> dict[str, Any] | None:
    """``c`` as the oracle takes it: the defaulted dims filled as kvbudget resolves them
    (the V dim is the K dim, an SWA layer's geometry the full layer's, as SGLang's
    model config reads a checkpoint that gives none of its own), ``draft`` dropped.
    None when kvbudget refuses the model itself."""
    try:
        model = scenario_of(c).model
    except kvbudget.KVBudgetError:
        return None
    out = {k: v for k, v in c.items() if k != "draft"}
    for k in DERIVED:
        out[k] = getattr(model, k)
    return out


def _request_cap(c: dict[str, Any]) -> bool:
    return bool(
        c["num_full_layers"] and c["num_swa_layers"] and not c["disable_hybrid_swa_memory"]
        and c["max_running_requests"] and c["disable_radix_cache"] and c["sliding_window_size"] is not None
        and (c["chunked_prefill_size"] or c["disaggregation_mode"] == "decode")
    )


#: What the parity test must reach: a predicate per feature the issue lists.
FEATURES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "mla": lambda c: c["kv_lora_rank"] is not None and not c["num_swa_layers"],
    "mla_hybrid_swa": lambda c: c["kv_lora_rank"] is not None and c["num_swa_layers"] > 0,
    "dsa": lambda c: c["index_head_dim"] is not None,
    "dsa_fp8_scaled": lambda c: c["index_head_dim"] is not None and c["kv_cache_dtype"] == "fp8_e4m3"
    and not c["dsa_raw_kv_layout"],
    "dsa_draft": lambda c: c["index_head_dim"] is not None and c["algorithm"] in DRAFTING
    and c["draft_num_layers"] > 0,
    "dsa_kpool": lambda c: c["index_head_dim"] is not None and c["index_kpool"] > 1,
    "dsa_shared_topk": lambda c: c["index_shared_layers"] > 0,
    "fp8": lambda c: c["kv_cache_dtype"] in ("fp8_e4m3", "fp8_e5m2"),
    "mxfp8": lambda c: c["kv_cache_dtype"] == "mxfp8",
    "nvfp4": lambda c: c["kv_cache_dtype"] == "nvfp4" and not c["num_swa_layers"],
    "fp4_mx_block16": lambda c: c["kv_cache_dtype"] == "fp4_mx_block16" and not c["num_swa_layers"],
    "auto": lambda c: c["kv_cache_dtype"] == "auto" and c["model_dtype"] != "bf16",
    "all_swa": lambda c: not c["num_full_layers"] and c["num_swa_layers"] > 0,
    "request_cap_v1": lambda c: _request_cap(c) and c["disable_overlap_schedule"],
    "request_cap_v2": lambda c: _request_cap(c) and not c["disable_overlap_schedule"],
    "pd_decode_no_chunk": lambda c: _request_cap(c) and not c["chunked_prefill_size"],
    "extra_slots": lambda c: _request_cap(c) and c["disaggregation_mode"] == "decode"
    and c["disaggregation_decode_extra_slots"] > 0,
    "dp_over_requests": lambda c: _request_cap(c) and c["attn_dp_size"] > c["max_running_requests"],
    "draft_worker": lambda c: c["is_draft_worker"] and c["algorithm"] in DRAFTING,
    "banded": lambda c: c["banded_draft_layers"] > 0 and c["num_swa_layers"] > 0,
    "draft_swa": lambda c: c["draft_swa_num_layers"] > 0 and c["num_swa_layers"] > 0
    and c["algorithm"] in DRAFTING,
    "unified": lambda c: c["enable_unified_memory"] and c["num_full_layers"] > 0 and c["num_swa_layers"] > 0,
    "fused_full": lambda c: c["fused_full_entry_bytes"] is not None,
    "fused_swa": lambda c: c["fused_swa_entry_bytes"] is not None,
    "tp": lambda c: c["tp_size"] > 1,
    "dcp": lambda c: c["dcp_size"] > 1,
    "adaptive": lambda c: c["max_num_draft_tokens"] is not None and c["algorithm"] != "none",
    **{
        a: (lambda a: lambda c: c["algorithm"] == a)(a)
        for a in ("none", "eagle", "eagle3", "nextn", "standalone", "ngram", "dflash", "uno",
                  "dspark", "frozen_kv_mtp")
    },
}


def has_feature(c: dict[str, Any], feature: str) -> bool:
    return FEATURES[feature](c)
