"""The inputs and names SGLang 0.5.23 added, through the Python API: the exact
plan's pools for each new layout, the refusals with their reasons, the
deprecated names, and SGLang's rule for the draft's SWA layers. (Their numbers
are SGLang's own: tests/test_sglang_parity.py and the golden vectors.)"""

from __future__ import annotations

import warnings

import kvbudget
import pytest
from kvbudget import InvalidConfigError, ModelGeometry, ServingConfig, SpeculativeConfig
from kvbudget.sglang.draft_layers import sglang_draft_layers

GIB = 1 << 30
HYBRID = ModelGeometry([0, 6], [1, 2, 3, 4, 5, 7], 8, 128, sliding_window_size=1023)


def plan(serving: ServingConfig, spec: SpeculativeConfig | None = None, model: ModelGeometry = HYBRID):
    cfg = kvbudget.create_pool_configurator(model, serving, spec)
    return cfg, cfg.plan(8 * GIB)


def test_version_and_deprecated_name() -> None:
    assert kvbudget.SGLANG_VERSION == "0.5.23"
    with pytest.warns(DeprecationWarning, match="SWARequestCapPoolConfigurator"):
        old = kvbudget.SWAChunkCapPoolConfigurator
    assert old is kvbudget.SWARequestCapPoolConfigurator
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "SWAChunkCapPoolConfigurator" not in kvbudget.__all__
    with pytest.raises(AttributeError):
        kvbudget.NoSuchName  # noqa: B018


def test_old_kind_name_still_builds_the_request_cap() -> None:
    serving = ServingConfig(max_running_requests=8, chunked_prefill_size=512, disable_radix_cache=True)
    cfg = kvbudget.create_pool_configurator(HYBRID, serving)
    assert type(cfg) is kvbudget.SWARequestCapPoolConfigurator and cfg.kind == "request_cap"
    assert kvbudget._core.PoolConfigurator(HYBRID, serving, None, "chunk_cap").kind == "request_cap"


def test_pd_decode_request_cap_needs_no_chunk() -> None:
    serving = ServingConfig(max_running_requests=8, disable_radix_cache=True, disaggregation_mode="decode")
    assert kvbudget.create_pool_configurator(HYBRID, serving).kind == "request_cap"
    prefill = serving.replace(disaggregation_mode="prefill")
    assert kvbudget.create_pool_configurator(HYBRID, prefill).kind == "hybrid_swa"


@pytest.mark.parametrize(
    ("name", "match"),
    [("fp4_e2m1", "not a recipe"), ("fp4", "not a recipe"), ("mxfp4", "reserved")],
)
def test_fp4_needs_a_recipe_name(name: str, match: str) -> None:
    with pytest.raises(InvalidConfigError, match=match):
        ServingConfig(kv_cache_dtype=name)


def test_nvfp4_needs_its_backends() -> None:
    model = ModelGeometry(list(range(4)), [], 8, 128)
    with pytest.raises(InvalidConfigError, match="prefill_attention_backend"):
        kvbudget.create_pool_configurator(model, ServingConfig(kv_cache_dtype="nvfp4"))
    serving = ServingConfig(
        kv_cache_dtype="nvfp4", prefill_attention_backend="flashinfer", decode_attention_backend="trtllm_mha"
    )
    _, p = plan(serving, model=model)
    kinds = {t.kind for t in p.tensors}
    # FlashInfer prefill: linear scales and a workspace; TRT-LLM decode on SM100: native scales.
    assert {"k", "v", "k_scale", "native_k_scale", "dq_k", "dq_v"} <= kinds
    assert sum(t.kind == "dq_k" for t in p.tensors) == 1
    k = next(t for t in p.tensors if t.kind == "k")
    assert tuple(k.shape[1:]) == (8, 64) and k.dtype == "uint8"


def test_auto_is_the_model_dtype() -> None:
    auto = ServingConfig(kv_cache_dtype="auto", model_dtype="fp32")
    assert auto.kv_cache_dtype == "auto"
    _, p = plan(auto)
    assert {t.dtype for t in p.tensors} == {"float32"}
    fp32 = kvbudget.create_pool_configurator(HYBRID, ServingConfig(kv_cache_dtype="fp32"))
    assert kvbudget.create_pool_configurator(HYBRID, auto).cell_size == fp32.cell_size


def test_draft_swa_layers_are_an_swa_capacity_pool() -> None:
    spec = SpeculativeConfig("eagle3", 3, draft_swa_num_layers=2)
    cfg, p = plan(ServingConfig(), spec)
    assert cfg.draft_terms == (1, 2, 0, 0)
    assert p.pool("draft").tokens == p.config.full_max_total_num_tokens
    assert p.pool("draft_swa").tokens == p.config.swa_max_total_num_tokens
    assert p.pool("draft").layer_ids + p.pool("draft_swa").layer_ids == [0, 1, 2]
    assert p.draft_bytes == p.pool("draft").nbytes + p.pool("draft_swa").nbytes
    with pytest.raises(InvalidConfigError, match="exclude each other"):
        SpeculativeConfig("eagle3", 3, draft_swa_num_layers=1, banded_draft_layers=1)
    with pytest.raises(InvalidConfigError, match="exceeds draft_num_layers"):
        SpeculativeConfig("eagle3", 1, draft_swa_num_layers=2)


def test_unified_memory_is_one_byte_pool() -> None:
    spec = SpeculativeConfig("eagle3", 1)
    cfg, p = plan(ServingConfig(enable_unified_memory=True, page_size=16), spec)
    c = cfg.calculate_pool_sizes(8 * GIB)
    assert c.unified_memory_pool_bytes is not None
    unified = p.pool("unified")
    assert unified.nbytes == p.config.unified_memory_pool_bytes
    assert [t.kind for t in unified.tensors] == ["bytes"]
    assert p.pool("full") is None and p.pool("swa") is None
    assert p.pool("draft").tokens >= unified.tokens - p.page_size
    assert p.total_bytes <= 8 * GIB
    # No admission floor with unified memory.
    tiny = cfg.calculate_pool_sizes_from_max_tokens(64)
    assert tiny.swa_max_total_num_tokens < 1023


def test_fused_entries_replace_the_cell_and_the_draft_pool() -> None:
    spec = SpeculativeConfig("eagle", 2, fused_full_entry_bytes=40000, fused_swa_entry_bytes=9000)
    cfg, p = plan(ServingConfig(), spec)
    assert cfg.draft_terms == (0, 0, 0, 0)
    assert cfg.cell_size == 40000 + 0.8 * 9000
    assert p.pool("draft") is None
    assert [t.kind for t in p.pool("full").tensors] == ["entry"]
    assert tuple(p.pool("full").tensors[0].shape) == (p.pool("full").rows, 40000)
    with pytest.raises(InvalidConfigError, match="drafting algorithm"):
        kvbudget.create_pool_configurator(HYBRID, ServingConfig(), SpeculativeConfig("ngram", fused_full_entry_bytes=1))


def test_mla_hybrid_swa() -> None:
    model = ModelGeometry([0, 3], [1, 2], 1, 576, kv_lora_rank=512, qk_rope_head_dim=64,
                          swa_kv_lora_rank=256, swa_qk_rope_head_dim=32, sliding_window_size=127)
    cfg, p = plan(ServingConfig(), model=model)
    assert (cfg.handle.full_per_token, cfg.handle.swa_per_token) == (576 * 2, 288 * 2)
    assert tuple(p.pool("swa").tensors[0].shape[1:]) == (1, 288)


def test_sglang_rule_for_the_drafts_swa_layers() -> None:
    # An MTP head without a checkpoint of its own reads the hybrid target's config.
    assert sglang_draft_layers("mtp", 3, target=HYBRID) == dict(
        draft_num_layers=3, draft_swa_num_layers=3, banded_draft_layers=0
    )
    dense = ModelGeometry(list(range(4)), [], 8, 128)
    assert sglang_draft_layers("nextn", 2, target=dense)["draft_swa_num_layers"] == 0
    # A hybrid draft checkpoint: its own SWA layers, at most d.
    assert sglang_draft_layers("standalone", 8, target=dense, draft_model=HYBRID)["draft_swa_num_layers"] == 6
    # mtp_local_layer_ids: the banded depths, and no SWA-capacity layer.
    banded = sglang_draft_layers("eagle", 3, target=HYBRID, mtp_local_layer_ids=[0, 2, 5])
    assert banded == dict(draft_num_layers=3, draft_swa_num_layers=0, banded_draft_layers=2)
    # Not counted by SGLang: no classes.
    assert sglang_draft_layers("dflash", 3, target=HYBRID)["draft_swa_num_layers"] == 0


def test_hf_mla_config_with_sliding_window_layers() -> None:
    from kvbudget.models.hf import geometry_kwargs_from_hf_config

    cfg = dict(
        num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=16, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, sliding_window=128,
        layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        swa_kv_lora_rank=256,
    )
    kw = geometry_kwargs_from_hf_config(cfg)
    m = ModelGeometry(**kw)
    assert (m.num_full_layers, m.num_swa_layers, m.swa_kv_lora_rank, m.swa_qk_rope_head_dim) == (2, 2, 256, 64)
