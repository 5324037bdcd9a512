"""Tests of the SGLang parity oracle itself (tests/sglang_oracle, tools/fetch_sglang.py).

* the wheel verification refuses a tampered file (in a temporary mini wheel
  built from the cached one), an altered extraction and a missing wheel;
* the sandbox's stubs fail loudly, and such a failure propagates out of
  ``Oracle.run`` instead of becoming an outcome;
* hand-computed cases (the formulas of SGLang 0.5.23's pool_configurator.py,
  worked out in the comments) show that the oracle runs SGLang's code;
* the oracle's cell sizes agree with the installed kvbudget on plain cases.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sglang_oracle as so
from sglang_oracle._case import build_inputs
from sglang_oracle._fetch import fetch_tool
from sglang_oracle._strict import Poison, StrictNamespace, StubError

GiB = 1 << 30
fetch = fetch_tool()
POOL = "sglang/srt/model_executor/pool_configurator.py"


@pytest.fixture(scope="module")
def oracle() -> so.Oracle:
    return so.load()


def llama(**over: Any) -> dict[str, Any]:
    """Llama-3-8B-like: 32 full layers, 8 KV heads of 128."""
    case: dict[str, Any] = dict(
        num_full_layers=32,
        num_swa_layers=0,
        num_kv_heads=8,
        head_dim=128,
        v_head_dim=128,
        swa_num_kv_heads=8,
        swa_head_dim=128,
        swa_v_head_dim=128,
        kv_cache_dtype="bf16",
        model_dtype="bf16",
        page_size=16,
        swa_full_tokens_ratio=0.8,
        swa_eviction_interval=128,
    )
    case.update(over)
    return case


def hybrid(**over: Any) -> dict[str, Any]:
    """gpt-oss-20b-like: 12 full + 12 SWA layers, 8 KV heads of 64, window 127."""
    base = llama(
        num_full_layers=12,
        num_swa_layers=12,
        head_dim=64,
        v_head_dim=64,
        swa_head_dim=64,
        swa_v_head_dim=64,
        sliding_window_size=127,
    )
    base.update(over)
    return base


# -- strict stubs ---------------------------------------------------------------------


def test_strict_namespace_and_poison_fail_loudly() -> None:
    ns = StrictNamespace("bag", ["probed"], a=1)
    assert ns.a == 1
    with pytest.raises(StubError, match="bag: attribute 'b'"):
        _ = ns.b
    assert getattr(ns, "probed", "unset") == "unset"  # a deliberate "absent" probe
    with pytest.raises(StubError):
        ns.a = 2
    p = Poison("memory_pool.DSATokenToKVPool")
    for use in (lambda: p(), lambda: p.quant_block_size, lambda: bool(p), lambda: p == 1):
        with pytest.raises(StubError, match="DSATokenToKVPool"):
            use()


def test_sandbox_imports_and_getters_are_strict(oracle: so.Oracle) -> None:
    pc = oracle.sandbox.pool_configurator_ns
    importer = pc["__builtins__"]["__import__"]
    with pytest.raises(StubError, match="sglang.srt.mem_cache.sparsity"):
        importer("sglang.srt.mem_cache.sparsity", fromlist=("parse_hisparse_config",))
    with pytest.raises(StubError, match="'os'"):
        importer("os")
    with pytest.raises(StubError, match="collect_sources_by_ratio"):
        pc["collect_sources_by_ratio"]([], [], range(0))  # an import-time poison
    with pytest.raises(StubError, match="outside Oracle.run"):
        pc["get_parallel"]()
    with pytest.raises(StubError, match="outside Oracle.run"):
        pc["envs"].SGLANG_SWA_EVICTION_INTERVAL.get()


def test_a_stub_failure_propagates_out_of_run(
    oracle: so.Oracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    def without_is_hybrid_swa(sb: Any, c: Any) -> Any:
        kvc, ctx = build_inputs(sb, c)
        attrs = {k: v for k, v in vars(kvc).items() if k != "is_hybrid_swa"}
        return StrictNamespace("KVCacheConfigurator", **attrs), ctx

    monkeypatch.setattr(so, "build_inputs", without_is_hybrid_swa)
    with pytest.raises(StubError, match="'is_hybrid_swa'"):
        oracle.run(llama(), entry="bytes", amount=GiB)


def test_malformed_cases_are_refused(oracle: so.Oracle) -> None:
    with pytest.raises(so.CaseError, match="unknown case keys"):
        oracle.run(llama(num_layers=3), entry="bytes", amount=GiB)
    with pytest.raises(so.CaseError, match="missing case keys"):
        oracle.run({"num_full_layers": 1}, entry="bytes", amount=GiB)
    with pytest.raises(so.CaseError, match="kv_cache_dtype"):
        oracle.run(llama(kv_cache_dtype="int4"), entry="bytes", amount=GiB)


# -- hand-computed cases --------------------------------------------------------------


def _cfg(
    total: int, full: int | None = None, swa: int | None = None, unified: int | None = None
) -> dict[str, int | None]:
    return {
        "max_total_num_tokens": total,
        "full_max_total_num_tokens": full,
        "swa_max_total_num_tokens": swa,
        "unified_memory_pool_bytes": unified,
    }


@pytest.mark.parametrize(
    ("over", "cell"),
    [
        ({}, 131072),  # 8 heads * (128 + 128) * 32 layers * 2 bytes
        ({"tp_size": 2}, 65536),  # 4 heads per rank
        ({"tp_size": 16}, 16384),  # max(1, 8 // 16) = 1 head per rank
        ({"kv_cache_dtype": "fp8_e4m3"}, 65536),  # 1 byte
        ({"kv_cache_dtype": "fp32"}, 262144),  # "auto" with a float32 model
        ({"kv_cache_dtype": "mxfp8"}, 65536 + 8 * 256 * 32 // 32),  # + one scale byte per 32
        ({"algorithm": "eagle", "draft_num_layers": 1}, 131072 + 131072 // 32),  # + int(C * d / L)
        (
            {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_full_layers": 27},
            (512 + 64) * 27 * 2,
        ),  # MLA
    ],
)
def test_default_cell_size_and_tokens(oracle: so.Oracle, over: dict[str, Any], cell: int) -> None:
    out = oracle.run(llama(**over), entry="bytes", amount=10 * GiB)
    assert (out.class_name, out.cell_size, out.stage, out.error) == (
        "DefaultPoolConfigurator",
        cell,
        "solve",
        None,
    )
    assert type(out.cell_size) is int
    assert out.config == _cfg(10 * GiB // cell // 16 * 16)


def test_nvfp4_runs_the_real_quant_method(oracle: so.Oracle) -> None:
    # fp4 data 8*(128/2)*32*2 = 32768; one scale layout 8*(128/16)*32*2 = 4096, linear
    # (FlashInfer dequant prefill) + native HND (trtllm decode on SM100); the shared
    # fp8 dequant workspace 8*128*2*1 = 2048.
    case = llama(
        kv_cache_dtype="nvfp4",
        prefill_attention_backend="flashinfer",
        decode_attention_backend="trtllm_mha",
        is_sm100=True,
    )
    assert oracle.run(case, entry="bytes", amount=GiB).cell_size == 32768 + 2 * 4096 + 2048
    assert (
        oracle.run({**case, "is_sm100": False}, entry="bytes", amount=GiB).cell_size
        == 32768 + 4096 + 2048
    )


def test_default_tokens_entry_and_errors(oracle: so.Oracle) -> None:
    assert oracle.run(llama(), entry="tokens", amount=100_003).config == _cfg(100_000)
    assert oracle.run(llama(), entry="tokens", amount=100_003, page_size=64).config == _cfg(99_968)
    out = oracle.run(llama(), entry="bytes", amount=131071)
    assert out.error is not None and out.error[:2] == ("not_enough_memory", "RuntimeError")
    assert (out.stage, out.cell_size) == ("solve", 131072)
    out = oracle.run(llama(dcp_size=2), entry="bytes", amount=GiB)  # tp // dcp == 0 heads groups
    assert out.error == ("invalid", "ZeroDivisionError", "integer division or modulo by zero")
    assert (out.stage, out.class_name, out.cell_size) == ("init", "DefaultPoolConfigurator", None)


def test_hybrid_swa(oracle: so.Oracle) -> None:
    # F = S = 8 * (64 + 64) * 2 = 2048 B per layer; C = 12F + 0.8 * 12S = 44236.8.
    # full = (8 GiB // C) = 194180 -> 194176; swa = int(194176 * 0.8) = 155340 -> 155328.
    out = oracle.run(hybrid(), entry="bytes", amount=8 * GiB)
    assert out.class_name == "HybridSWAPoolConfigurator"
    assert out.cell_size == 12 * 2048 + 0.8 * (12 * 2048) and type(out.cell_size) is float
    assert out.config == _cfg(194176, 194176, 155328)
    # The SWA floor: window 127 + page 16 >= swa tokens int(144 * 0.8) = 115 -> 112.
    out = oracle.run(hybrid(), entry="tokens", amount=144)
    assert (
        out.error is not None
        and out.error[0] == "swa_too_small"
        and out.error[2].startswith("SWA pool (112 tokens)")
    )
    # --disable-hybrid-swa-memory: Default, every layer at the full geometry.
    out = oracle.run(hybrid(disable_hybrid_swa_memory=True), entry="bytes", amount=8 * GiB)
    assert (out.class_name, out.cell_size) == ("DefaultPoolConfigurator", 24 * 2048)


def test_all_swa(oracle: so.Oracle) -> None:
    # No full layers: C = S * n_s = 8 * 256 * 2 * 24 = 98304 (an int, no ratio);
    # 10 GiB // C = 109226 -> 109216, all of it the SWA pool.
    case = llama(num_full_layers=0, num_swa_layers=24, sliding_window_size=4095)
    out = oracle.run(case, entry="bytes", amount=10 * GiB)
    assert (out.class_name, out.cell_size) == ("HybridSWAPoolConfigurator", 98304)
    assert out.config == _cfg(109216, 0, 109216)


def test_request_cap(oracle: so.Oracle) -> None:
    # 6 full + 26 SWA layers of 8 * 256 * 2 = 4096 B; window 1023, page 16, 64 requests.
    # per request = window + E * 1 draft token + page + page (decode) = 1023 + 128 + 16 + 16;
    # cap = 1183 * 64 + 2 chunks * 8192 + 16 = 92112 (already page aligned).
    # full = (10 GiB - 92112 * 26 * 4096) // (6 * 4096) = 37754 -> 37744.
    case = llama(
        num_full_layers=6,
        num_swa_layers=26,
        sliding_window_size=1023,
        max_running_requests=64,
        chunked_prefill_size=8192,
        disable_radix_cache=True,
    )
    out = oracle.run(case, entry="bytes", amount=10 * GiB)
    assert (out.class_name, out.swa_cap) == ("SWARequestCapPoolConfigurator", 92112)
    assert out.config == _cfg(37744, 37744, 92112)
    # Spec v1 (overlap off): decode alloc = max(ceil16(3) * 1, ceil16(4)) = 16, one chunk in flight;
    # draft tokens 4 multiply the eviction interval: 1023 + 128 * 4 + 16 + 16 = 1567.
    spec = {
        **case,
        "disable_overlap_schedule": True,
        "algorithm": "eagle",
        "num_steps": 3,
        "eagle_topk": 1,
        "num_draft_tokens": 4,
    }
    assert oracle.run(spec, entry="bytes", amount=10 * GiB).swa_cap == 1567 * 64 + 8192 + 16
    out = oracle.run(case, entry="bytes", amount=92112 * 26 * 4096)  # the cap takes everything
    assert (
        out.error is not None
        and out.error[0] == "not_enough_memory"
        and "leaves no room" in out.error[2]
    )


# -- agreement with kvbudget and speed -----------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("tp", [1, 2, 8])
@pytest.mark.parametrize("shape", [(32, 0, None), (6, 26, 1023), (12, 12, 127), (0, 24, 4095)])
def test_cell_size_agrees_with_kvbudget(
    oracle: so.Oracle, dtype: str, tp: int, shape: tuple[int, int, int | None]
) -> None:
    kvbudget = pytest.importorskip("kvbudget")
    n_f, n_s, window = shape
    model = kvbudget.ModelGeometry(
        list(range(n_f)),
        list(range(n_f, n_f + n_s)),
        8,
        128,
        swa_num_kv_heads=4,
        swa_head_dim=64,
        sliding_window_size=window,
    )
    serving = kvbudget.ServingConfig(
        kv_cache_dtype=dtype, page_size=16, tp_size=tp, swa_full_tokens_ratio=0.5
    )
    ours = kvbudget.create_pool_configurator(model, serving)
    case = llama(
        num_full_layers=n_f,
        num_swa_layers=n_s,
        sliding_window_size=window,
        swa_num_kv_heads=4,
        swa_head_dim=64,
        swa_v_head_dim=64,
        kv_cache_dtype=dtype,
        tp_size=tp,
        swa_full_tokens_ratio=0.5,
    )
    out = oracle.run(case, entry="bytes", amount=40 * GiB)
    assert out.class_name == type(ours).__name__
    assert out.cell_size == ours.cell_size
    assert out.config is not None
    assert (
        out.config["max_total_num_tokens"]
        == ours.calculate_pool_sizes(40 * GiB).max_total_num_tokens
    )


def test_runs_fast_enough_for_the_differential_test(oracle: so.Oracle) -> None:
    cases = [
        llama(),
        hybrid(),
        llama(
            num_full_layers=6,
            num_swa_layers=26,
            sliding_window_size=1023,
            max_running_requests=64,
            chunked_prefill_size=8192,
            disable_radix_cache=True,
        ),
    ]
    n = 600
    start = time.perf_counter()
    for i in range(n):
        oracle.run(cases[i % 3], entry="bytes", amount=10 * GiB + i)
    per_case = (time.perf_counter() - start) / n
    assert per_case < 2e-3, f"{per_case * 1e6:.0f} us per case"
