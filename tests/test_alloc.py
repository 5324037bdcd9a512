"""Allocation of exact plans (REFERENCE.md section 3, INV-2) on CPU and meta tensors."""

from __future__ import annotations

import gc
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.multiprocessing.reductions import StorageWeakRef  # noqa: E402

import kvbudget  # noqa: E402
from kvbudget import (  # noqa: E402
    AllocationError,
    DraftGeometry,
    KVBudgetError,
    ModelGeometry,
    ServingConfig,
    SpeculativeConfig,
    create_pool_configurator,
)
from kvbudget.alloc import KVPools, allocate  # noqa: E402

from alloc_cases import gemma3_27b  # noqa: E402

pytestmark = pytest.mark.torch

_MODELS_JSON = [
    Path(kvbudget.__file__).parent / "models" / "data" / "models.json",
    Path("/work/shared/data/models.json"),
]
MODELS: dict[str, dict[str, Any]] = next(
    ({m["name"]: m for m in json.loads(p.read_text())["models"]} for p in _MODELS_JSON if p.exists()),
    {},
)

GIB = 1 << 30
ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "uint8": 1}

# A fraction of the profile's examples: each one plans and allocates twice.
_BASE = settings.default.max_examples
META_EXAMPLES = max(200, _BASE // 4)
CPU_EXAMPLES = max(50, _BASE // 40)


# --------------------------------------------------------------------------- helpers


def primary_tokens(plan: Any) -> int:
    """Full-pool tokens (the unified pool's under unified memory), or SWA tokens for an all-SWA target."""
    full = plan.pool("full") or plan.pool("unified")
    return full.tokens if full is not None else plan.pool("swa").tokens


def tensor_bytes(pools: KVPools) -> int:
    """Bytes of every record tensor, from shapes and element sizes."""
    return sum(t.numel() * t.element_size() for rec in pools for t in rec.tensors().values())


def layout(pools: KVPools) -> list[tuple[str, int, str, tuple[int, ...], Any]]:
    return [
        (rec.pool, rec.layer_id, kind, tuple(t.shape), t.dtype)
        for rec in pools
        for kind, t in rec.tensors().items()
    ]


def assert_matches_plan(pools: KVPools, plan: Any) -> None:
    """Every planned tensor exists with its shape and dtype, and nothing else does."""
    expected = [
        (t.pool, t.layer_id, t.kind, tuple(t.shape), getattr(torch, t.dtype)) for t in plan.tensors
    ]
    assert sorted(layout(pools), key=str) == sorted(expected, key=str)
    assert tensor_bytes(pools) == plan.tensor_bytes
    # Slabs hold the tensors plus the alignment gaps between them: exactly total_bytes.
    # Per-layer tensors hold exactly the tensor bytes (SGLang's layout), which is no more.
    expected_held = plan.total_bytes if pools.strategy == "slab" else plan.tensor_bytes
    assert pools.nbytes == expected_held
    assert plan.tensor_bytes + plan.alignment_bytes == plan.total_bytes
    assert sum(p.nbytes for p in plan.pools) == plan.total_bytes
    if pools.strategy == "slab":
        for pool in plan.pools:
            for t in pool.tensors:
                view = pools.record(t.layer_id, t.pool).tensors()[t.kind]
                assert view.storage_offset() * view.element_size() == t.offset
                assert t.offset % kvbudget._core.TENSOR_ALIGNMENT == 0
                assert view.untyped_storage().nbytes() == pool.nbytes
                assert view.is_contiguous()


# --------------------------------------------------------------------------- configurations


@dataclass
class Case:
    model: ModelGeometry
    serving: ServingConfig
    spec: SpeculativeConfig | None
    label: str


@st.composite
def cases(draw: st.DrawFn, small: bool = False) -> Case:
    """Random hybrid / all-SWA / default / MLA / chunk-cap configurations with drafts."""
    kind = draw(st.sampled_from(
        ["hybrid", "all_swa", "default", "mla", "mla_swa", "request_cap", "gemma_default"]
    ))
    max_layers = 6 if small else 64
    heads_max = 4 if small else 64
    dims = [8, 16, 32, 64] if small else [32, 64, 96, 128, 192, 256, 576]
    n = draw(st.integers(1, max_layers))
    heads = draw(st.integers(1, heads_max))
    dk = draw(st.sampled_from(dims))
    dv = draw(st.one_of(st.none(), st.sampled_from(dims)))
    page = draw(st.sampled_from([1, 2, 16, 32, 64] if small else [1, 16, 32, 64, 128]))
    tp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    window = draw(st.integers(1, 64 if small else 4096))
    geometry: dict[str, Any] = {"num_kv_heads": heads, "head_dim": dk, "v_head_dim": dv}
    serving: dict[str, Any] = {"page_size": page, "tp_size": tp}
    if draw(st.booleans()):
        serving["swa_full_tokens_ratio"] = draw(st.floats(0.05, 1.0))
    # SGLang builds its unified pool for an MHA hybrid-SWA target only (of the kinds drawn here).
    serving["enable_unified_memory"] = kind in ("hybrid", "request_cap") and draw(st.booleans())

    if kind in ("hybrid", "request_cap", "gemma_default", "mla_swa"):
        n = max(n, 2)
        n_full = draw(st.integers(1, n - 1))
        ids = draw(st.permutations(range(n)))
        geometry["full_attention_layer_ids"] = sorted(ids[:n_full])
        geometry["swa_attention_layer_ids"] = sorted(ids[n_full:])
        geometry["sliding_window_size"] = window
        if draw(st.booleans()):
            geometry["swa_num_kv_heads"] = draw(st.integers(1, heads_max))
            geometry["swa_head_dim"] = draw(st.sampled_from(dims))
            geometry["swa_v_head_dim"] = draw(st.one_of(st.none(), st.sampled_from(dims)))
        if kind == "gemma_default":
            serving["disable_hybrid_swa_memory"] = True
        if kind == "mla_swa":
            geometry["kv_lora_rank"] = draw(st.sampled_from([16, 64] if small else [128, 512]))
            geometry["qk_rope_head_dim"] = draw(st.sampled_from([8, 16] if small else [32, 64]))
            geometry["swa_kv_lora_rank"] = draw(st.sampled_from([None, 16, 32] if small else [None, 128, 256]))
        if kind == "request_cap":
            decode = draw(st.booleans())
            serving.update(
                max_running_requests=draw(st.integers(1, 8 if small else 256)),
                # PD decode sizes the request cap without a chunk.
                chunked_prefill_size=draw(st.sampled_from(
                    ([None] if decode else []) + ([16, 64, 512] if small else [512, 2048, 8192])
                )),
                disaggregation_mode="decode" if decode else "null",
                disable_radix_cache=True,
                disable_overlap_schedule=draw(st.booleans()),
                swa_eviction_interval=draw(st.sampled_from([1, 4, 128])),
            )
    elif kind == "all_swa":
        geometry["full_attention_layer_ids"] = []
        geometry["swa_attention_layer_ids"] = list(range(n))
        geometry["sliding_window_size"] = window
    elif kind == "default":
        geometry["full_attention_layer_ids"] = list(range(n))
        geometry["swa_attention_layer_ids"] = []
    else:  # mla
        geometry["full_attention_layer_ids"] = list(range(n))
        geometry["swa_attention_layer_ids"] = []
        geometry["kv_lora_rank"] = draw(st.sampled_from([16, 64] if small else [128, 512]))
        geometry["qk_rope_head_dim"] = draw(st.sampled_from([8, 16] if small else [32, 64]))

    one_pool = kind in ("default", "mla", "gemma_default")
    dtypes = ["bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "mxfp8", "auto", "nvfp4", "fp4_mx_block16"]
    serving["kv_cache_dtype"] = draw(st.sampled_from(dtypes))
    serving["model_dtype"] = draw(st.sampled_from(["bf16", "fp16", "fp32"]))
    if serving["kv_cache_dtype"] in ("nvfp4", "fp4_mx_block16"):
        serving["enable_unified_memory"] = False  # SGLang refuses an FP4 KV cache there at launch
    if serving["kv_cache_dtype"] == "nvfp4":
        backends = ["flashinfer", "trtllm_mha", "triton"]
        serving["prefill_attention_backend"] = draw(st.sampled_from(backends))
        serving["decode_attention_backend"] = draw(st.sampled_from(backends))
        serving["is_sm100"] = draw(st.booleans())
    # The spec-v2 request cap reads the draft-token count.
    tokens = {"num_draft_tokens": draw(st.integers(1, 8)),
              "max_num_draft_tokens": draw(st.one_of(st.none(), st.integers(1, 16)))}

    spec_kind = draw(st.sampled_from(
        ["none", "eagle", "geometry", "banded", "draft_swa", "fused", "dflash", "ngram", "uno"]
    ))
    spec: SpeculativeConfig | None
    if spec_kind == "none":
        spec = None
    elif spec_kind == "eagle":
        spec = SpeculativeConfig(
            algorithm=draw(st.sampled_from(["eagle", "eagle3", "nextn", "standalone", "frozen_kv_mtp"])),
            draft_num_layers=draw(st.integers(0, 4)),
            **tokens,
        )
    elif spec_kind == "banded" and not one_pool:
        d = draw(st.integers(1, 4))
        spec = SpeculativeConfig(
            algorithm="eagle", draft_num_layers=d, banded_draft_layers=draw(st.integers(0, d)), **tokens
        )
    elif spec_kind == "draft_swa":
        d = draw(st.integers(1, 4))
        spec = SpeculativeConfig(
            algorithm="eagle3", draft_num_layers=d, draft_swa_num_layers=draw(st.integers(0, d)), **tokens
        )
    elif spec_kind == "fused":
        entry = st.integers(1, 1 << 12 if small else 1 << 18)
        spec = SpeculativeConfig(
            algorithm="eagle", draft_num_layers=draw(st.integers(1, 3)),
            fused_full_entry_bytes=draw(st.one_of(st.none(), entry)),
            fused_swa_entry_bytes=None if one_pool else draw(st.one_of(st.none(), entry)),
            **tokens,
        )
    elif spec_kind == "dflash":
        spec = SpeculativeConfig(
            algorithm=draw(st.sampled_from(["dflash", "dspark"])),
            draft_num_layers=draw(st.integers(0, 2)),
            dflash_draft_cell_size_per_token=draw(st.integers(0, 4096)),
            **tokens,
        )
    elif spec_kind in ("ngram", "uno"):
        spec = SpeculativeConfig(algorithm=spec_kind, **tokens)
    else:
        capacities: list[str | None] = [None]
        if not one_pool:
            capacities.append("swa")
            if kind != "all_swa":
                capacities.append("full")
        elif kind != "gemma_default":
            capacities.append("full")
        draft_dtypes: list[str | None] = [None, "bf16", "fp16", "fp8_e4m3", "fp32", "mxfp8", "auto",
                                          "fp4_mx_block16"]
        g = DraftGeometry(
            num_layers=draw(st.integers(1, 4 if small else 16)),
            num_kv_heads=draw(st.integers(1, heads_max)),
            head_dim=draw(st.sampled_from(dims)),
            v_head_dim=draw(st.one_of(st.none(), st.sampled_from(dims))),
            kv_cache_dtype=draw(st.sampled_from(draft_dtypes)),
            capacity=draw(st.sampled_from(capacities)),
        )
        spec = SpeculativeConfig(
            algorithm=draw(st.sampled_from(["eagle", "eagle3", "nextn", "standalone"])), draft=g,
            draft_swa_num_layers=draw(st.integers(0, g.num_layers)), **tokens,
        )
    return Case(ModelGeometry(**geometry), ServingConfig(**serving), spec, kind)


def plan_for(case: Case, data: st.DataObject, max_pages: int) -> tuple[Any, Any, int]:
    """An exact plan whose budget lies in ``[bytes(k pages), bytes(k + 1 pages))``.

    Returns (configurator, plan, expected primary tokens). Configurations that
    cannot be planned (admission floor, no room for the full pool) are skipped.
    """
    try:
        cfg = create_pool_configurator(case.model, case.serving, case.spec)
    except KVBudgetError:
        assume(False)
        raise
    p = case.serving.page_size
    k = data.draw(st.integers(1, max_pages), label="pages")
    lo = cfg.bytes_for_tokens(k * p)
    hi = cfg.bytes_for_tokens((k + 1) * p)
    assert hi > lo, "one more page must cost bytes"
    budget = data.draw(st.integers(lo, hi - 1), label="budget")
    try:
        plan = cfg.plan(budget, fit="exact")
    except (kvbudget.SWAPoolTooSmallError, kvbudget.NotEnoughMemoryError):
        assume(False)
        raise
    return cfg, plan, k * p


def check_inv2(cfg: Any, plan: Any, pools: KVPools, expected_primary: int) -> None:
    """INV-2: allocated bytes == total_bytes <= A, one more page would not fit."""
    assert_matches_plan(pools, plan)
    assert plan.total_bytes <= plan.available_bytes
    assert plan.leftover_bytes == plan.available_bytes - plan.total_bytes
    assert plan.over_budget_bytes == 0
    primary = primary_tokens(plan)
    assert primary == expected_primary
    assert primary % plan.page_size == 0
    assert cfg.bytes_for_tokens(primary) == plan.total_bytes
    assert cfg.bytes_for_tokens(primary + plan.page_size) > plan.available_bytes
    for pool in plan.pools:
        assert pool.tokens % plan.page_size == 0
        pool_tensor_bytes = sum(t.nbytes for t in pool.tensors)
        if pool.name == "unified":
            # One byte buffer of the config's unified_memory_pool_bytes, no padding page.
            assert (pool.rows, pool.padding_bytes) == (pool.tokens, 0)
            assert pool_tensor_bytes == pool.nbytes == plan.config.unified_memory_pool_bytes
            continue
        assert pool.rows == pool.tokens + plan.page_size
        assert pool.padding_bytes * pool.rows == pool_tensor_bytes * plan.page_size
    drafts = [plan.pool(name) for name in ("draft", "draft_swa")]
    assert plan.draft_bytes == sum(d.nbytes for d in drafts if d is not None)


# --------------------------------------------------------------------------- INV-2 properties


@settings(max_examples=META_EXAMPLES, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(case=cases(), data=st.data())
def test_inv2_meta_both_strategies(case: Case, data: st.DataObject) -> None:
    cfg, plan, expected = plan_for(case, data, max_pages=1 << 16)
    slab = allocate(plan, device="meta", strategy="slab")
    per_layer = allocate(plan, device="meta", strategy="per_layer")
    check_inv2(cfg, plan, slab, expected)
    check_inv2(cfg, plan, per_layer, expected)
    assert layout(slab) == layout(per_layer)
    shared = {t.pool for t in plan.tensors if t.kind in ("entry", "bytes")}
    for rec in slab:
        # A fused entry or the unified buffer is one tensor on its pool's first layer.
        assert rec.tensors() or rec.pool in shared
        assert all(t.device.type == "meta" for t in rec.tensors().values())


@settings(max_examples=CPU_EXAMPLES, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(case=cases(small=True), data=st.data())
def test_inv2_cpu_both_strategies(case: Case, data: st.DataObject) -> None:
    cfg, plan, expected = plan_for(case, data, max_pages=8)
    assume(plan.total_bytes <= 64 << 20)
    slab = allocate(plan, device="cpu", strategy="slab")
    per_layer = allocate(plan, device="cpu", strategy="per_layer", zero=False)
    check_inv2(cfg, plan, slab, expected)
    check_inv2(cfg, plan, per_layer, expected)
    assert layout(slab) == layout(per_layer)
    # The slab views tile each slab exactly: distinct, in-bounds, in order, each at the
    # next TENSOR_ALIGNMENT boundary after the previous one (no overlap, no extra gap).
    align = kvbudget._core.TENSOR_ALIGNMENT
    for name, base in slab.slabs.items():
        start = base.data_ptr()
        spans = sorted(
            (t.data_ptr() - start, t.numel() * t.element_size())
            for rec in slab.pools[name]
            for t in rec.tensors().values()
        )
        pos = 0
        for off, n in spans:
            assert off == -(-pos // align) * align
            pos = off + n
        assert pos == base.numel() == plan.pool(name).nbytes
        assert bool((base == 0).all())
    # per_layer: one storage per tensor, of exactly its bytes.
    storages = {t.untyped_storage().data_ptr() for rec in per_layer for t in rec.tensors().values()}
    assert len(storages) == len(plan.tensors)


# --------------------------------------------------------------------------- worked examples


def test_example1_sglang_fit_overcommits_and_exact_fits() -> None:
    a = 40 * GIB
    cfg = gemma3_27b(64)
    sg = cfg.plan(a, fit="sglang")
    assert (sg.pool("full").tokens, sg.pool("swa").tokens, sg.pool("draft").tokens) == (99_648, 79_680, 99_648)
    assert sg.padding_bytes == 33_030_144
    assert sg.over_budget_bytes == 5_242_880
    assert sg.total_bytes == a + 5_242_880
    pools = allocate(sg, device="meta")
    assert tensor_bytes(pools) == pools.nbytes == sg.total_bytes  # what SGLang would allocate
    ex = cfg.plan(a, fit="exact")
    assert ex.total_bytes <= a < cfg.bytes_for_tokens(primary_tokens(ex) + 64)
    assert primary_tokens(ex) == 99_648 - 64
    assert allocate(ex, device="meta", strategy="per_layer").nbytes == ex.total_bytes


def test_example1_layout_and_layer_lookup() -> None:
    plan = gemma3_27b(64).plan(40 * GIB)
    pools = allocate(plan, device="meta")
    assert [r.layer_id for r in pools.full] == list(range(5, 62, 6))
    assert len(pools.swa) == 52 and len(pools.draft) == 1
    rows_full = plan.pool("full").rows
    rows_swa = plan.pool("swa").rows
    k, v = pools.layer(5)
    assert tuple(k.shape) == (rows_full, 16, 128) and k.dtype == torch.bfloat16
    assert v is not None and tuple(v.shape) == (rows_full, 16, 128)
    k, v = pools.layer(0)
    assert tuple(k.shape) == (rows_swa, 16, 128)
    k, v = pools.layer(0, pool="draft")
    assert tuple(k.shape) == (rows_full, 16, 128)
    with pytest.raises(KeyError):
        pools.layer(62)
    with pytest.raises(KeyError):
        pools.layer(1, pool="draft")


def models_json(name: str) -> dict[str, Any]:
    if name not in MODELS:
        pytest.skip("models.json not available")
    return MODELS[name]


def test_llama32_1b_standalone_draft_for_llama31_8b() -> None:
    target = models_json("Llama-3.1-8B")
    draft = models_json("Llama-3.2-1B (standalone draft)")
    model = ModelGeometry(
        full_attention_layer_ids=target["full_layer_ids"],
        swa_attention_layer_ids=[],
        num_kv_heads=target["num_kv_heads"],
        head_dim=target["head_dim"],
    )
    g = DraftGeometry(draft["num_layers"], draft["num_kv_heads"], draft["head_dim"])
    spec = SpeculativeConfig(algorithm="standalone", draft=g)
    cfg = create_pool_configurator(model, ServingConfig(kv_cache_dtype="bf16", page_size=16), spec)
    a = 20 * GIB
    plan = cfg.plan(a)
    tokens = plan.pool("full").tokens
    rows = tokens + 16
    d = plan.pool("draft")
    assert d.tokens == tokens and d.num_layers == 16
    # Independent arithmetic: 32 layers x 8 heads x (128+128) x 2 B, 16 x 8 x (64+64) x 2 B.
    per_row = 32 * 8 * 256 * 2 + 16 * 8 * 128 * 2
    assert plan.total_bytes == rows * per_row
    assert plan.total_bytes <= a < (rows + 16) * per_row
    for strategy in ("slab", "per_layer"):
        pools = allocate(plan, device="meta", strategy=strategy)
        assert pools.nbytes == tensor_bytes(pools) == plan.total_bytes
        k, v = pools.layer(15, pool="draft")
        assert tuple(k.shape) == (rows, 8, 64) and v is not None and tuple(v.shape) == (rows, 8, 64)
        assert tuple(pools.layer(31)[0].shape) == (rows, 8, 128)
    # SGLang prices the draft at the target's geometry (C * (1 + d / L)), so it plans fewer tokens.
    assert cfg.plan(a, fit="sglang").pool("full").tokens < tokens
    # Small enough to allocate for real on CPU.
    small = cfg.plan(8 << 20)
    pools = allocate(small, device="cpu")
    assert pools.nbytes == small.total_bytes <= 8 << 20


def test_mimo_v2_flash_mtp_draft_swa_geometry() -> None:
    target = models_json("MiMo-V2-Flash")
    mtp = models_json("MiMo-V2-Flash MTP modules")
    tp = 4
    model = ModelGeometry(
        full_attention_layer_ids=target["full_layer_ids"],
        swa_attention_layer_ids=target["swa_layer_ids"],
        num_kv_heads=target["num_kv_heads"],
        head_dim=target["head_dim"],
        v_head_dim=target["v_head_dim"],
        swa_num_kv_heads=target["swa_num_kv_heads"],
        swa_head_dim=target["swa_head_dim"],
        swa_v_head_dim=target["swa_v_head_dim"],
        sliding_window_size=target["sliding_window"] - 1,
    )
    g = DraftGeometry(
        mtp["num_layers"], mtp["swa_num_kv_heads"], mtp["swa_head_dim"],
        v_head_dim=mtp["swa_v_head_dim"], capacity="swa",
    )
    spec = SpeculativeConfig(algorithm="eagle", draft=g)
    cfg = create_pool_configurator(model, ServingConfig(kv_cache_dtype="bf16", page_size=64, tp_size=tp), spec)
    a = 30 * GIB
    plan = cfg.plan(a)
    full, swa, draft = plan.pool("full"), plan.pool("swa"), plan.pool("draft")
    assert draft.tokens == swa.tokens != full.tokens
    assert draft.num_layers == 3 and draft.layer_ids == [0, 1, 2]
    f_row = 9 * (4 // tp) * (192 + 128) * 2
    s_row = 39 * (8 // tp) * (192 + 128) * 2
    d_row = 3 * (8 // tp) * (192 + 128) * 2
    assert plan.total_bytes == full.rows * f_row + swa.rows * (s_row + d_row)
    assert plan.total_bytes <= a < cfg.bytes_for_tokens(full.tokens + 64)
    for strategy in ("slab", "per_layer"):
        pools = allocate(plan, device="meta", strategy=strategy)
        assert pools.nbytes == tensor_bytes(pools) == plan.total_bytes
        k, v = pools.layer(2, pool="draft")
        assert tuple(k.shape) == (swa.rows, 2, 192) and v is not None and tuple(v.shape) == (swa.rows, 2, 128)
        k, v = pools.layer(0)  # a full layer: 4 heads / TP 4 = 1
        assert tuple(k.shape) == (full.rows, 1, 192)
        k, v = pools.layer(1)
        assert tuple(k.shape) == (swa.rows, 2, 192)


def test_mla_layer_is_kv_none() -> None:
    model = ModelGeometry(
        full_attention_layer_ids=list(range(4)), swa_attention_layer_ids=[],
        num_kv_heads=128, head_dim=192, kv_lora_rank=512, qk_rope_head_dim=64,
    )
    cfg = create_pool_configurator(model, ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64))
    plan = cfg.plan(4 << 20)
    pools = allocate(plan, device="cpu")
    rec = pools.record(3)
    assert rec.is_mla and rec.k is None and rec.v is None
    kv, none = pools.layer(3)
    assert none is None and kv is rec.kv
    assert tuple(kv.shape) == (plan.pool("full").rows, 1, 576) and kv.dtype == torch.uint8
    assert pools.nbytes == plan.total_bytes


def test_slab_views_alias_the_planned_bytes() -> None:
    """Writing layer 5's V lands at the planned offset of the full slab, nowhere else."""
    cfg = gemma3_27b(16, window=8)
    plan = cfg.plan(64 << 20)
    pools = allocate(plan, device="cpu", strategy="slab")
    _, v = pools.layer(5)
    assert v is not None
    v.fill_(1.0)
    spec = next(t for t in plan.pool("full").tensors if t.layer_id == 5 and t.kind == "v")
    slab = pools.slabs["full"]
    touched = torch.nonzero(slab).flatten()
    assert int(touched.min()) >= spec.offset and int(touched.max()) < spec.offset + spec.nbytes
    assert int(pools.slabs["swa"].count_nonzero()) == 0
    k, _ = pools.layer(5)
    assert int(k.count_nonzero()) == 0


def test_release_and_repr() -> None:
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    pools = allocate(plan, device="cpu", strategy="per_layer")
    refs = [StorageWeakRef(t.untyped_storage()) for rec in pools for t in rec.tensors().values()]
    assert "per_layer" in repr(pools) and len(pools) == 62 + 1
    pools.release()
    assert pools.released and pools.nbytes == 0 and pools.full == [] and "released" in repr(pools)
    assert all(r.expired() for r in refs)
    with pytest.raises(KeyError):
        pools.layer(5)


def test_default_device_and_bad_strategy() -> None:
    plan = gemma3_27b(16, window=8).plan(48 << 20)
    pools = allocate(plan)
    assert pools.device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(kvbudget.InvalidConfigError):
        allocate(plan, device="meta", strategy="slabs")  # type: ignore[arg-type]


def test_allocate_imports_torch_on_first_use() -> None:
    """kvbudget imports torch only when allocate is first looked up (test_import covers the rest)."""
    import subprocess

    code = "import sys, kvbudget; assert 'torch' not in sys.modules; kvbudget.allocate; assert 'torch' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_allocate_roundtrips_through_json() -> None:
    plan = gemma3_27b(64).plan(40 * GIB)
    again = kvbudget.PoolPlan.from_json(plan.to_json())
    assert layout(allocate(again, device="meta")) == layout(allocate(plan, device="meta"))
