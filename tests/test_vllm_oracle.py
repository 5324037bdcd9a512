"""Tests of the vLLM 0.33.0 planning oracle (tests/vllm_oracle, tools/fetch_vllm.py).

* every worked case of VLLM.md section 9, and the section 4 "oracle example"
  (tests/data/vllm_golden.json, numbers typed from VLLM.md) is reproduced exactly by vLLM's own code through the
  oracle, and the checker demonstrably fails on a wrong expectation;
* every plan's tensors lie inside the worker's single buffer;
* the wheel verification refuses a tampered file (RECORD mismatch), a file
  whose RECORD was "fixed" but that is not the pinned one, an altered
  extraction, and a missing wheel without network (a clear error, no skip);
* the sandbox's stubs fail loudly and such a failure propagates out of
  ``plan`` instead of becoming an outcome.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import vllm_oracle as vo
from vllm_oracle._fetch import fetch_tool
from vllm_oracle._strict import Poison, StrictConfig, StubError

GOLDEN = json.loads((Path(__file__).parent / "data" / "vllm_golden.json").read_text())
CASES: dict[str, dict[str, Any]] = {c["id"]: c for c in GOLDEN["cases"]}
fetch = fetch_tool()
PLANNING = "vllm/v1/core/kv_cache_planning.py"
KINDS = {
    "SlidingWindowSpec": "sliding",
    "FullAttentionSpec": "full",
    "UniformTypeKVCacheSpecs": "uniform",
}


@pytest.fixture(scope="module")
def oracle() -> vo.VllmOracle:
    return vo.load()


def expand(case: dict[str, Any]) -> list[dict[str, Any]]:
    """The case's per-layer inputs, in registration order (target, then drafter)."""
    m = case["model"]
    n = m["num_layers"]
    full = set(range(n)) if m["full_at"] == "all" else set(m["full_at"])
    split = m.get("pp_split", [n])
    assert sum(split) == n
    stage_of = [s for s, k in enumerate(split) for _ in range(k)]
    geometry = {k: m[k] for k in ("num_kv_heads", "head_size", "kv_cache_dtype")}
    layers = []
    for i in range(n):
        layer = dict(name=f"model.layers.{i}.self_attn.attn", pp_stage=stage_of[i], **geometry)
        if i in full:
            layer["kind"] = "full"
        else:
            layer.update(kind="sliding", sliding_window=m["sliding_window"])
        layers.append(layer)
    j = 0
    for seg in case["drafter"]:
        for _ in range(seg["count"]):
            layer = {k: v for k, v in seg.items() if k != "count"}
            layer.update(
                name=f"drafter.layers.{j}.self_attn.attn", is_draft=True, pp_stage=len(split) - 1
            )
            layers.append(layer)
            j += 1
    return layers


def run(oracle: vo.VllmOracle, case: dict[str, Any], **engine: Any) -> dict[str, Any]:
    return oracle.plan(expand(case), case["available_bytes"], {**case["engine"], **engine})


def check_views_inside_buffer(plan: dict[str, Any]) -> None:
    """Each tensor's last byte (offset + layer and block strides) lies in its buffer."""
    for tensors in plan["tensors"]:
        assert len({t["size"] for t in tensors}) == 1, "one backing buffer per worker"
        for t in tensors:
            end = (
                t["offset"]
                + (len(t["layers"]) - 1) * t["layer_stride"]
                + plan["num_blocks"] * t["block_stride"]
            )
            assert end <= t["size"], (t["layers"][0], end, t["size"])


#: Every expectation key check_case understands (a typo in the JSON must not go unchecked).
KNOWN_KEYS = frozenset(
    [
        "error_startswith",
        "padding_layers",
        "needed_gib",
        "estimated_max_model_len",
        "num_blocks",
        "kv_cache_size_tokens",
        "max_model_len",
        "group_kinds",
        "group_sizes",
        "warnings",
        "workers",
        "group_width",
        "bytes_per_block",
        "allocated_bytes",
        "page_size_bytes",
        "group_layer_pages",
        "drafter_group_kind",
        "worker_group_width",
        "max_concurrency_2dp",
        "at_max_model_len",
        "blocks_per_request_at",
        "num_blocks_at",
        "max_concurrency_1dp_at",
    ]
)


def check_case(oracle: vo.VllmOracle, case: dict[str, Any]) -> None:
    """Asserts every expectation of one golden case (raises AssertionError on any mismatch)."""
    exp = case["expect"]
    assert set(exp) <= KNOWN_KEYS, sorted(set(exp) - KNOWN_KEYS)
    r = run(oracle, case)
    if "error_startswith" in exp:
        assert not r["ok"], f"{case['id']}: expected vLLM's startup error"
        assert r["error_type"] == "ValueError"
        assert r["error"].startswith(exp["error_startswith"]), r["error"]
        needed = re.search(r"\(([\d.]+) GiB KV cache is needed", r["error"])
        assert needed and round(float(needed.group(1))) == exp["needed_gib"], r["error"]
        assert r["estimated_max_model_len"] == exp["estimated_max_model_len"]
    else:
        assert r["ok"], r.get("error")
        check_views_inside_buffer(r)
        kinds = [KINDS[g["spec"]] for g in r["groups"]]
        sizes = [len(g["layers"]) for g in r["groups"]]
        simple = {"num_blocks": r["num_blocks"], "kv_cache_size_tokens": r["kv_cache_size_tokens"],
                  "max_model_len": r["max_model_len"], "group_kinds": kinds, "group_sizes": sizes,
                  "warnings": r["warnings"], "workers": len(r["tensors"]), "group_width": max(sizes)}  # fmt: skip
        for key, got in simple.items():
            if key in exp:
                assert got == exp[key], f"{case['id']}: {key} {got!r} != {exp[key]!r}"
        if "padding_layers" in exp:  # VLLM.md s9 "padding waste per block is (G - n_g) P"
            for w in r["worker_groups"]:
                assert [g["padding_layers"] for g in w] == exp["padding_layers"], case["id"]
        if "max_concurrency_2dp" in exp:
            assert round(r["max_concurrency"], 2) == exp["max_concurrency_2dp"], r[
                "max_concurrency"
            ]
        if "bytes_per_block" in exp:
            assert set(r["bytes_per_block"]) == {exp["bytes_per_block"]}, r["bytes_per_block"]
        if "allocated_bytes" in exp:
            assert r["allocated_bytes"] == [[exp["allocated_bytes"]]] * len(r["tensors"])
        if "page_size_bytes" in exp:
            assert {g["page_size_bytes"] for g in r["groups"]} == {exp["page_size_bytes"]}
        if "group_layer_pages" in exp:
            g = r["groups"][0]["layers"]
            pages = {t["block_stride"] for t in r["tensors"][0] if set(t["layers"]) <= set(g)}
            assert sorted(pages, reverse=True) == exp["group_layer_pages"]
        if "drafter_group_kind" in exp:
            (g,) = [g for g in r["groups"] if any(n.startswith("drafter.") for n in g["layers"])]
            assert KINDS[g["spec"]] == exp["drafter_group_kind"]
            assert g["is_eagle_group"] == (
                case["engine"].get("speculative_method") in ("eagle", "eagle3", "mtp")
            )
        if "worker_group_width" in exp:  # the widest group on each PP stage
            assert [max(len(g["layers"]) for g in w) for w in r["worker_groups"]] == exp[
                "worker_group_width"
            ]
    for m, want in exp.get("at_max_model_len", {}).items():
        rm = run(oracle, case, max_model_len=int(m))
        assert rm["ok"], rm.get("error")
        assert round(rm["max_concurrency"], 2) == want["max_concurrency_2dp"], (
            case["id"],
            m,
            rm["max_concurrency"],
        )
        if want["kv_cache_size_tokens"] is not None:
            assert rm["kv_cache_size_tokens"] == want["kv_cache_size_tokens"], (case["id"], m)
        if "num_blocks" in exp:
            assert rm["num_blocks"] == exp["num_blocks"]
    for m, want in exp.get("blocks_per_request_at", {}).items():
        assert run(oracle, case, max_model_len=int(m))["blocks_per_request"] == want, (
            case["id"],
            m,
        )
    for m, want in exp.get("num_blocks_at", {}).items():
        assert run(oracle, case, max_model_len=int(m))["num_blocks"] == want, (case["id"], m)
    for m, want in exp.get("max_concurrency_1dp_at", {}).items():
        assert round(run(oracle, case, max_model_len=int(m))["max_concurrency"], 1) == want, (
            case["id"],
            m,
        )


# -- the worked cases -----------------------------------------------------------------


@pytest.mark.parametrize("case_id", list(CASES))
def test_golden_case(oracle: vo.VllmOracle, case_id: str) -> None:
    check_case(oracle, CASES[case_id])


def test_golden_file_covers_section_9() -> None:
    main_rows = {"a", "a+eagle3", "b", "b+eagle3", "c", "c+draft"}
    assert main_rows <= set(CASES)
    assert len(CASES) == 19  # 6 main rows + 11 sensitivity runs (s9) + the s4 oracle example


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update(num_blocks=e["num_blocks"] + 1),
        lambda e: e.update(group_sizes=[9, 9, 9, 9, 9, 7, 10]),
        lambda e: e.update(
            warnings=["Add 8 padding layers, may waste at most 15.39% KV cache memory"]
        ),
        lambda e: e["at_max_model_len"]["8192"].update(kv_cache_size_tokens=74774),
    ],
)
def test_checker_fails_on_a_wrong_expectation(
    oracle: vo.VllmOracle, mutate: Callable[[dict[str, Any]], None]
) -> None:
    case = json.loads(json.dumps(CASES["a"]))
    mutate(case["expect"])
    with pytest.raises(AssertionError):
        check_case(oracle, case)


def test_section_1_details_of_case_a(oracle: vo.VllmOracle) -> None:
    """Strided assignment (layers[i::k]) and the per-request charge of VLLM.md s9."""
    r = run(oracle, CASES["a"], max_model_len=8192)
    swa = [g["layers"] for g in r["groups"] if g["spec"] == "SlidingWindowSpec"]
    order = [
        f"model.layers.{i}.self_attn.attn"
        for i in range(62)
        if i not in CASES["a"]["model"]["full_at"]
    ]
    assert swa == [order[i::6] for i in range(6)]
    assert sum(r["blocks_per_request"]) == 3590
    assert r["per_request_bytes"] == [3590 * 1310720]
    assert (
        "GPU KV cache size: 74,773 tokens, Maximum concurrency for 8,192 tokens per request: 9.13x"
        in [t for _, t in r["log"]]
    )


def test_load_and_plan_timing(oracle: vo.VllmOracle) -> None:
    """Times a fresh load and one plan (printed with -s; a loose sanity bound)."""
    t0 = time.perf_counter()
    fresh = vo.load()
    t1 = time.perf_counter()
    fresh.plan(expand(CASES["a+eagle3"]), 40 << 30, CASES["a+eagle3"]["engine"])
    t2 = time.perf_counter()
    print(
        f"\nvllm_oracle: load {t1 - t0:.3f} s, one plan (62 layers + drafter) {1e3 * (t2 - t1):.1f} ms"
    )
    assert t2 - t1 < 5.0


# -- strictness -----------------------------------------------------------------------


def test_strict_config_and_poison_fail_loudly() -> None:
    cfg = StrictConfig(a=1)
    assert cfg.a == 1
    cfg.a = 2  # an existing field may be written back
    with pytest.raises(StubError, match="attribute 'b'"):
        _ = cfg.b
    with pytest.raises(StubError, match="setting attribute 'b'"):
        cfg.b = 1
    p = Poison("hisparse.get_hisparse_kv_cache_config")
    for use in (lambda: p(), lambda: p.x, lambda: bool(p), lambda: p == 1):
        with pytest.raises(StubError, match="hisparse"):
            use()


def test_sandbox_imports_are_strict(oracle: vo.VllmOracle) -> None:
    b = oracle.sb.builder
    with pytest.raises(StubError, match="module vllm.v1.request"):
        b.importer("vllm.v1.request", fromlist=("Request",))
    with pytest.raises(StubError, match="not allowed"):
        b.importer("os", fromlist=("path",))
    with pytest.raises(StubError, match="name 'get_hisparse_host_pool_bytes_x'"):
        _ = b.modules["vllm.v1.hisparse.layout"].get_hisparse_host_pool_bytes_x


def test_stub_errors_propagate_out_of_plan(
    oracle: vo.VllmOracle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config field vLLM reads but the sandbox lacks is a StubError, never an outcome."""
    from vllm_oracle import _configs

    real = _configs.make_vllm_config

    def without_attention_fields(classes: Any, engine: dict[str, Any], model: Any = None) -> Any:
        cfg = real(classes, engine, model)
        cfg.attention_config = _configs.AttentionConfig()  # no hisparse_config
        return cfg

    monkeypatch.setattr(vo, "make_vllm_config", without_attention_fields)
    with pytest.raises(StubError, match="hisparse_config"):
        run(oracle, CASES["c"])


def test_plan_reads_vllm_code_not_a_copy(oracle: vo.VllmOracle) -> None:
    """The planner functions are defined in the extracted wheel file."""
    fn = oracle.planning["_get_kv_cache_groups_uniform_page_size"]
    assert fn.__code__.co_filename.endswith(PLANNING)
    assert Path(fn.__code__.co_filename).is_relative_to(
        fetch.default_cache() / "vllm" / fetch.VLLM_VERSION
    )


# -- the fetch tool (the shared wheel checks: tests/test_wheel_cache.py) -------------


def test_pins_name_the_planning_modules() -> None:
    for rel in (
        "vllm/v1/core/kv_cache_planning.py", "vllm/v1/kv_cache_interface.py", "vllm/v1/core/kv_cache_utils.py",
        "vllm/v1/kv_cache_spec_registry.py", "vllm/v1/kv_cache_layout.py", "vllm/v1/core/kv_cache_config_builder.py",
    ):  # fmt: skip
        assert rel in fetch.WHEEL.pins


# -- inputs beyond the worked cases ---------------------------------------------------


def test_page_sizes_of_section_2(oracle: vo.VllmOracle) -> None:
    """VLLM.md s2's measured pages at B=16 for the modes that need no backend packing."""
    spec = oracle.layer_spec
    assert spec({"num_kv_heads": 8, "head_size": 128}, 16).page_size_bytes == 65536
    mla = {"kind": "mla", "num_kv_heads": 1, "head_size": 576}
    assert spec(mla, 16).page_size_bytes == 18432
    assert spec({**mla, "kv_cache_dtype": "fp8_ds_mla"}, 16).page_size_bytes == 10496


def test_num_gpu_blocks_override(oracle: vo.VllmOracle) -> None:
    """VLLM.md s1.5: the override replaces A by override x bytes_per_block, and the
    admission check then runs against it (one 131072-token request needs 8192 blocks
    plus the null block)."""
    r = run(oracle, CASES["c"], num_gpu_blocks_override=10000)
    assert r["ok"] and r["num_blocks"] == 10000
    assert r["allocated_bytes"] == [[10000 * 2097152]]
    assert "Overriding num_gpu_blocks=20480 with num_gpu_blocks_override=10000" in [
        t for _, t in r["log"]
    ]
    r = run(oracle, CASES["c"], num_gpu_blocks_override=8192)
    assert not r["ok"] and r["error"].startswith("To serve at least one request")
    assert run(oracle, CASES["c"], num_gpu_blocks_override=8193)["ok"]


def test_kv_cache_memory_bytes_replaces_the_measured_budget(oracle: vo.VllmOracle) -> None:
    """VLLM.md s8: a non-zero ``kv_cache_memory_bytes`` is every worker's budget (the worker's
    own ``determine_available_memory`` decides it); 0 keeps the measured one. kvbudget agrees."""
    from kvbudget import vllm

    at_20 = run(oracle, {**CASES["c"], "available_bytes": 20 << 30})
    given = run(oracle, CASES["c"], kv_cache_memory_bytes=20 << 30)
    assert given == at_20 and given["num_blocks"] != run(oracle, CASES["c"])["num_blocks"]
    assert run(oracle, CASES["c"], kv_cache_memory_bytes=0) == run(oracle, CASES["c"])
    specs = [vllm.LayerSpec(**x) for x in expand(CASES["c"])]
    for kv_bytes in (0, 20 << 30, 1 << 20):
        engine = {**CASES["c"]["engine"], "kv_cache_memory_bytes": kv_bytes}
        ours = vllm.plan_raw(specs, CASES["c"]["available_bytes"], vllm.EngineConfig(**engine))
        assert ours == json.loads(json.dumps(run(oracle, CASES["c"], kv_cache_memory_bytes=kv_bytes)))


def test_disable_hybrid_warns_and_chunked_layers_plan(oracle: vo.VllmOracle) -> None:
    r = run(oracle, CASES["a"], disable_hybrid_kv_cache_manager=True, max_model_len=8192)
    assert r["ok"] and [len(g["layers"]) for g in r["groups"]] == [62]
    assert any(w.startswith("Hybrid KV cache manager is disabled") for w in r["warnings"])
    chunked = [
        {"name": f"l{i}", "kind": "chunked" if i % 4 else "full", "num_kv_heads": 8,
         "head_size": 128, "attention_chunk_size": 8192}
        for i in range(48)
    ]  # fmt: skip
    r = oracle.plan(chunked, 40 << 30, {"max_model_len": 32768})
    assert r["ok"] and sorted(g["spec"] for g in r["groups"]) == [
        "ChunkedLocalAttentionSpec"
    ] * 3 + ["FullAttentionSpec"]
