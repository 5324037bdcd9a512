"""kvbudget's reading of a model as SGLang 0.5.23 sees it, held to SGLang's released code.

``tests/sglang_oracle/model.py`` runs SGLang's own config loading and
``ModelConfig`` derivations (lifted from the RECORD-checked wheel) over the
configs transformers 5.19.0's classes build (``tests/sglang_model_cases.py``);
:func:`kvbudget.sglang.model.resolve_sglang` must give every field the
pool configurators read, and refuse exactly the configs SGLang refuses.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from kvbudget.models.hybrid_state import hybrid_state_entries
import kvbudget
from kvbudget.models.hf import ConfigError
from kvbudget.sglang.model import SGLangModel, resolve_sglang
from sglang_model_cases import cases
from sglang_oracle._fetch import sglang_root
from sglang_oracle.model import FIELDS, ModelOracle, load

PER_FAMILY = int(os.environ.get("KVBUDGET_MODEL_CASES", "80"))  # 6,148 configs per variant (make test-parity-long: 400)


@pytest.fixture(scope="module")
def oracle() -> ModelOracle:
    return load(sglang_root())


def _ours(cfg: dict[str, Any]) -> dict[str, Any] | tuple[str, str]:
    try:
        m = resolve_sglang(cfg)
    except ConfigError as exc:
        return ("error", str(exc))
    return _fields(m)


def _fields(m: SGLangModel) -> dict[str, Any]:
    p = m.pools
    out = {
        "hybrid_swa": p.hybrid_swa, "full_attention_layer_ids": p.full_attention_layer_ids,
        "swa_attention_layer_ids": p.swa_attention_layer_ids, "num_attention_layers": m.num_attention_layers,
        "num_kv_heads": m.num_kv_heads, "swa_num_kv_heads": m.swa_num_kv_heads, "mla": m.is_mla,
        "kv_lora_rank": m.kv_lora_rank, "qk_rope_head_dim": m.qk_rope_head_dim,
        "sliding_window_size": m.sliding_window_size, "head_dim": m.head_dim, "v_head_dim": m.v_head_dim,
        "swa_head_dim": m.swa_head_dim, "swa_v_head_dim": m.swa_v_head_dim, "state_pool": m.state_pool,
        "index_head_dim": m.index_head_dim, "index_kpool": m.index_kpool,
        "index_shared_layers": m.index_shared_layers,
    }  # fmt: skip
    assert set(out) == set(FIELDS)
    return out


def _differs(ours: Any, theirs: Any) -> list[str]:
    if isinstance(ours, tuple) or isinstance(theirs, tuple):
        both_refuse = isinstance(ours, tuple) and isinstance(theirs, tuple)
        return [] if both_refuse else [f"kvbudget {ours!r} vs SGLang {theirs!r}"]
    return [f"{k}: kvbudget {ours[k]!r} vs SGLang {theirs[k]!r}" for k in FIELDS if ours[k] != theirs[k]]


@pytest.mark.parametrize("sparse", [False, True], ids=["every-key", "sparse"])
def test_every_family_matches_sglang(oracle: ModelOracle, sparse: bool) -> None:
    """Every key (``to_dict``), and sparse as released configs are (keys equal to the class
    defaults left out, read with ``data/hf_defaults.json`` and the class derivations)."""
    mismatches: list[str] = []
    seen: dict[str, int] = {}
    for name, cfg in cases(PER_FAMILY, sparse=sparse):
        seen[name] = seen.get(name, 0) + 1
        diff = _differs(_ours(cfg), oracle.resolve(cfg, False))
        if diff:
            mismatches.append(f"{name} {cfg.get('architectures')}: " + "; ".join(diff))
    assert not mismatches, f"{len(mismatches)} of {sum(seen.values())} configs differ:\n" + "\n".join(
        mismatches[:20])


def test_every_resolution_builds_its_geometry() -> None:
    """What SGLang resolves, kvbudget can plan: the pools' layer count and cell inputs carry over;
    except a hybrid model SGLang's pool factory fails on (no sliding layer, or no layer ids), which
    ``tests/test_sglang_model_pools.py`` holds to that factory."""
    built = refused = 0
    for _, cfg in cases(4):
        try:
            m = resolve_sglang(cfg)
        except ConfigError:
            continue
        if m.state_pool and not m.num_attention_layers:  # SGLang's zero-KV pool: nothing to plan
            with pytest.raises(ConfigError, match="no attention layer"):
                m.model_geometry()
            continue
        if m.pools.unplannable:
            with pytest.raises(ConfigError, match="SGLang cannot plan it"):
                m.model_geometry()
            refused += 1
            continue
        g = m.model_geometry()
        layers = len(m.pools.full_attention_layer_ids or ()) + len(m.pools.swa_attention_layer_ids or ())
        assert g.num_layers == (layers if m.pools.hybrid_swa else m.num_attention_layers)
        assert g.num_kv_heads == m.num_kv_heads and g.is_mla == m.is_mla
        built += 1
    assert built > 50 and refused > 0


@pytest.mark.parametrize(("arch", "needle"), [
    ("OlmoHybridForCausalLM", "no model class"), ("JambaForCausalLM", "no model class"),
    ("Dots3NoteForCausalLM", "has not checked"),
])  # fmt: skip
def test_pools_kvbudget_does_not_model_are_refused(arch: str, needle: str) -> None:
    cfg = {"architectures": [arch], "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}
    with pytest.raises(ConfigError, match=needle):
        resolve_sglang(cfg)


def test_a_pure_state_model_has_no_kv_geometry() -> None:
    """Mamba-1 resolves as SGLang's ModelConfig has it (a state pool, no attention layer, no head);
    its KV pool holds no layer, so the geometry is refused for the state-only plan."""
    import transformers

    m = resolve_sglang({**transformers.MambaConfig().to_dict(), "architectures": ["MambaForCausalLM"]})
    assert (m.state_pool, m.num_attention_layers, m.num_kv_heads, m.head_dim) == (True, 0, 0, 0)
    with pytest.raises(ConfigError, match="plan_state_only"):
        m.model_geometry()


def test_deepseek_v32_plans_its_dsa_indexer() -> None:
    """DeepSeek-V3.2 in fp8 (FlashMLA's scaled layout): per layer, the latent's 512 FP8 bytes,
    16 bytes of scales and 64 bf16 rope elements (656), plus the index key's 128 FP8 bytes and
    4 scale bytes (132): 788 bytes x 61 layers = 48,068 bytes per token."""
    import transformers

    cfg = {**transformers.DeepseekV32Config().to_dict(), "architectures": ["DeepseekV32ForCausalLM"]}
    m = resolve_sglang(cfg)
    assert (m.index_head_dim, m.index_kpool, m.index_shared_layers) == (128, 1, 0)
    g = m.model_geometry()
    serving = kvbudget.ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64)
    cfg_ = kvbudget.create_pool_configurator(g, serving, kvbudget.SpeculativeConfig())
    assert cfg_.cell_size == (512 + 512 // 128 * 4 + 2 * 64 + 128 + 4) * 61
    plan = cfg_.plan(80 << 30)
    assert plan.total_bytes <= 80 << 30
    kinds = {t.kind for t in plan.pools[0].tensors}
    assert kinds == {"kv", "index_k"}
    # The raw layout (TRT-LLM) keeps 576 FP8 elements per layer and no latent scales.
    raw = kvbudget.create_pool_configurator(g, serving.replace(dsa_raw_kv_layout=True), kvbudget.SpeculativeConfig())
    assert raw.cell_size == (512 + 64 + 132) * 61


def test_shared_topk_layers_store_no_index_keys() -> None:
    """GLM-5-style ``indexer_types``: a "shared" layer reuses its predecessor's top-k."""
    import transformers

    kinds = ["full", "shared", "shared", "full"]
    cfg = {**transformers.GlmMoeDsaConfig(num_hidden_layers=4, indexer_types=kinds).to_dict(),
           "architectures": ["GlmMoeDsaForCausalLM"]}  # fmt: skip
    m = resolve_sglang(cfg)
    assert m.index_shared_layers == 2
    with pytest.raises(kvbudget.InvalidConfigError, match="ids of the DSA layers sharing top-k"):
        kvbudget.create_pool_configurator(m.model_geometry(), kvbudget.ServingConfig(page_size=64),
                                          kvbudget.SpeculativeConfig()).plan(1 << 30)  # fmt: skip


def test_longcat_flash_counts_two_attention_blocks_per_decoder_layer(oracle: ModelOracle) -> None:
    """LongCat-Flash-Chat's file (``num_layers`` 28, two MLA blocks per decoder layer): 56 layers of
    512 + 64 latent elements, 64,512 bytes per token in bf16. SGLang loads it with its own class,
    whose ``qk_rope_head_dim`` default is 128 (transformers': 64), and serves the NextN and n-gram
    names, and a file without a model type, as ``LongcatFlashForCausalLM``."""
    cfg = {"model_type": "longcat_flash", "architectures": ["LongcatFlashForCausalLM"], "num_layers": 28,
           "num_attention_heads": 64, "hidden_size": 6144, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
           "qk_nope_head_dim": 128, "v_head_dim": 128}  # fmt: skip
    m = resolve_sglang(cfg)
    assert (m.num_attention_layers, m.kv_lora_rank, m.qk_rope_head_dim, m.index_head_dim) == (56, 512, 64, None)
    serving, spec = kvbudget.ServingConfig(page_size=64), kvbudget.SpeculativeConfig()
    assert kvbudget.create_pool_configurator(m.model_geometry(), serving, spec).cell_size == (512 + 64) * 2 * 56
    variants = [{**cfg, "architectures": ["LongcatFlashForCausalLMNextN"]},
                {**cfg, "architectures": ["LongcatFlashNgramForCausalLM"], "oe_vocab_size_ratio": 0.5},
                {k: v for k, v in cfg.items() if k not in ("model_type", "qk_rope_head_dim")}]  # fmt: skip
    for c in (cfg, *variants):
        assert not _differs(_ours(c), oracle.resolve(c, False)), c
    assert [resolve_sglang(c).architecture for c in variants] == ["LongcatFlashForCausalLM"] * 3
    assert resolve_sglang(variants[2]).qk_rope_head_dim == 128
    other = {**cfg, "model_type": "longcat_flash_ngram", "architectures": ["LongcatFlashNgramForCausalLM"]}
    with pytest.raises(ConfigError, match="keeps model type 'longcat_flash_ngram'"):
        resolve_sglang(other)


def test_longcat_flash_draft_takes_sglangs_class_default(tmp_path: Any) -> None:
    """A LongCat-Flash file without ``num_nextn_predict_layers``: SGLang's class defaults it to 1,
    and its EAGLE-family pool prices that one MTP layer (SGLang's draft-mode ``ModelConfig`` and
    ``_resolve_eagle_aux_hidden_state``, :mod:`sglang_oracle.draft`, on kvbudget's resolved flags)."""
    import json

    import transformers
    from sglang_oracle import draft as sglang_draft

    from kvbudget.sglang.launch import from_server_args

    saved = {k: v for k, v in transformers.LongcatFlashConfig(num_layers=4).to_dict().items()
             if k != "num_nextn_predict_layers"}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps({**saved, "architectures": ["LongcatFlashForCausalLM"]}))
    draft_layers = sglang_draft.load(sglang_root())
    for algo in ("NEXTN", "EAGLE"):
        launch = from_server_args(["--model-path", str(tmp_path), "--speculative-algorithm", algo,
                                   "--speculative-draft-model-path", str(tmp_path)])  # fmt: skip
        theirs = draft_layers({"speculative_draft_model_revision": None, **launch.resolved}, str(tmp_path))
        assert launch.scenario.spec.draft_num_layers == theirs["draft_num_layers"] == 1, (algo, theirs)


def test_hy_v4_is_dsa_on_every_layer_with_shared_indexers(oracle: ModelOracle, tmp_path: Any) -> None:
    """HunYuan-V4's class defaults: 34 DSA layers, the indexer ``full`` at layer 0 and every fourth
    from layer 1 (10), ``shared`` elsewhere (24 layers keep no index key). SGLang's ``HYV4Config``
    refuses a first ``shared`` indexer; its launch refuses ``--dcp-size`` above 1."""
    import json

    import transformers

    from kvbudget.sglang.launch import from_server_args
    from kvbudget.sglang.resolve import LaunchRefused

    cfg = {"model_type": "hy_v4", "architectures": ["HYV4ForCausalLM"]}
    m = resolve_sglang(cfg)
    assert (m.num_attention_layers, m.index_head_dim, m.index_shared_layers, m.v_head_dim) == (34, 128, 24, 256)
    assert not _differs(_fields(m), oracle.resolve(cfg, False))
    serving = kvbudget.ServingConfig(kv_cache_dtype="fp8_e4m3", page_size=64)
    g = m.model_geometry()
    cell = kvbudget.create_pool_configurator(g, serving, kvbudget.SpeculativeConfig()).cell_size
    assert cell == (512 + 512 // 128 * 4 + 2 * 64) * 34 + (128 + 4) * 10
    bad = {**cfg, "num_hidden_layers": 2, "indexer_types": ["shared", "full"]}
    assert isinstance(oracle.resolve(bad, False), tuple)
    with pytest.raises(ConfigError, match="must start with a full indexer"):
        resolve_sglang(bad)
    saved = {**transformers.HYV4Config(num_hidden_layers=4).to_dict(), "architectures": ["HYV4ForCausalLM"]}
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert from_server_args(["--model-path", str(tmp_path)]).resolved["page_size"] == 64
    with pytest.raises(LaunchRefused, match="HYV4"):
        from_server_args(["--model-path", str(tmp_path), "--tp", "2", "--dcp-size", "2"])


def test_longcat_and_hy_v4_defaults_are_sglangs_classes() -> None:
    """The class defaults kvbudget reads the two families with are SGLang's own classes'."""
    from oracle_kit.tools import load_tool

    from kvbudget.sglang.mla_configs import HY_V4_DEFAULTS, LONGCAT_DEFAULTS

    tool = load_tool("gen_hf_defaults")
    for model_type, ours in (("longcat_flash", LONGCAT_DEFAULTS), ("hy_v4", HY_V4_DEFAULTS)):
        assert dict(ours) == tool.defaults_of(tool._config_class(model_type)), model_type


def test_a_config_without_architectures_is_refused() -> None:
    with pytest.raises(ConfigError, match="architectures"):
        resolve_sglang({"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512})


def test_gemma3_is_one_default_pool_over_every_layer() -> None:
    """SGLang's override turns Gemma 3's hybrid memory off: 62 layers, one pool."""
    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
           "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 62, "num_attention_heads": 32,
                           "num_key_value_heads": 16, "head_dim": 128, "hidden_size": 5376}}  # fmt: skip
    m = resolve_sglang(cfg)
    assert not m.pools.hybrid_swa and "override" in m.reason
    g = m.model_geometry()
    assert (g.num_layers, g.num_swa_layers, g.head_dim) == (62, 0, 128)


def test_from_hf_config_reads_as_sglang_by_default_and_as_hf_on_request() -> None:
    import kvbudget
    from kvbudget.models.hf import geometry_kwargs_from_hf_config

    cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "num_hidden_layers": 12,
           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128, "hidden_size": 1024,
           "sliding_window": 512}  # fmt: skip
    g = kvbudget.ModelGeometry.from_hf_config(cfg)
    assert g == resolve_sglang(cfg).model_geometry()
    assert (g.num_layers, g.num_swa_layers) == (12, 0)  # SGLang: one Default pool over every layer
    hf = kvbudget.ModelGeometry.from_hf_config(cfg, engine="hf")
    assert hf == kvbudget.ModelGeometry(**geometry_kwargs_from_hf_config(cfg))
    assert (hf.num_swa_layers, hf.sliding_window_size) == (10, 511)
    with pytest.raises(ConfigError, match="engine='vllm'"):
        kvbudget.ModelGeometry.from_hf_config(cfg, engine="vllm")


def test_step3p5_swa_heads_come_from_attention_other_setting() -> None:
    types = ["sliding_attention", "full_attention"] * 2
    cfg = {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5", "num_hidden_layers": 4,
           "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128, "hidden_size": 4096,
           "sliding_window": 512, "layer_types": types,
           "attention_other_setting": {"num_attention_groups": 16}}  # fmt: skip
    m = resolve_sglang(cfg)
    assert (m.num_kv_heads, m.swa_num_kv_heads, m.sliding_window_size) == (8, 16, 512)
    del cfg["attention_other_setting"]["num_attention_groups"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="attention_other_setting"):
        resolve_sglang(cfg)


def test_step3p5_flash_itself_does_not_load_in_sglang() -> None:
    """transformers 5.19.0 owns model_type step3p5: its class turns the sliding layers' 96 query
    heads (64 on full layers) into a per-layer attribute, which SGLang's get_config trips on."""
    types = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(48)]
    cfg = {"architectures": ["Step3p5ForCausalLM"], "model_type": "step3p5", "num_hidden_layers": 45,
           "num_attention_heads": 64, "num_attention_groups": 8, "head_dim": 128, "hidden_size": 4096,
           "sliding_window": 512, "layer_types": types, "num_nextn_predict_layers": 3,
           "attention_other_setting": {"num_attention_heads": 96, "num_attention_groups": 8}}  # fmt: skip
    with pytest.raises(ConfigError, match="AmbiguousGlobalPerLayerAttributeError"):
        resolve_sglang(cfg)
    cfg["attention_other_setting"] = {"num_attention_heads": 64, "num_attention_groups": 16}
    m = resolve_sglang(cfg)  # the MTP entries past num_hidden_layers are not layers
    assert len(m.pools.full_attention_layer_ids or ()) + len(m.pools.swa_attention_layer_ids or ()) == 45
    assert (m.swa_num_kv_heads, m.sliding_window_size) == (16, 512)
    del cfg["num_nextn_predict_layers"]  # 48 layer_types for 45 layers: transformers refuses the file
    with pytest.raises(ConfigError, match="layer_types"):
        resolve_sglang(cfg)


def test_zaya_resolves_as_sglangs_own_class(oracle: ModelOracle) -> None:
    """ZAYA1 as its released Megatron-style file holds it (80 layers, attention at the even ones,
    per-layer head lists, ``kv_channels``): SGLang's own ``ZayaConfig`` gives 40 attention layers of
    2 KV heads of 128. Attention at odd layers only, the config class still plans, but SGLang's model
    builds attention at every even layer, which the pools then lack: kvbudget refuses."""
    cfg = {"model_type": "zaya", "architectures": ["ZayaForCausalLM"], "zaya_layers": ["a", 16] * 40,
           "cca_num_q_heads": [8, 0] * 40, "num_query_groups_list": [2, 0] * 40, "head_dim": None,
           "kv_channels": 128, "num_hidden_layers": 40}  # fmt: skip
    m = resolve_sglang(cfg)
    assert (m.num_attention_layers, m.num_kv_heads, m.head_dim, m.state_pool) == (40, 2, 128, True)
    assert not _differs(_fields(m), oracle.resolve(cfg, False))
    odd = {**cfg, "zaya_layers": [16, "a"] * 40}
    assert isinstance(oracle.resolve(odd, False), dict)
    with pytest.raises(ConfigError, match="every even layer"):
        resolve_sglang(odd)


def test_published_hybrid_state_checkpoints_match_sglang(oracle: ModelOracle) -> None:
    """The released configs of the hybrid-state families (``kvbudget/models/data/hybrid_state_models.json``:
    Qwen3-Next, Qwen3.5 dense and MoE, Nemotron-H, Falcon-H1, Kimi-Linear, LFM2, each with its
    source): the KV layers, heads and dims kvbudget resolves are SGLang's."""
    checked = []
    for entry in hybrid_state_entries():
        if "sglang" not in entry.get("engines", ("sglang",)):  # Jamba: tests/test_published_hybrid_configs.py
            continue
        cfg = dict(entry["config"])
        theirs = oracle.resolve(cfg, False)
        assert isinstance(theirs, dict) and theirs["state_pool"], (entry["name"], theirs)
        assert not _differs(_ours(cfg), theirs), (entry["name"], _differs(_ours(cfg), theirs))
        checked.append((entry["name"], theirs["num_attention_layers"]))
    # Nemotron-Nano-9B-v2's 4 attention layers of 56; Falcon-H1-7B's attention in all 44 layers.
    assert ("nemotron_nano_9b_v2", 4) in checked and ("falcon_h1_7b_instruct", 44) in checked, checked


@pytest.mark.parametrize("family", ["internvl", "kimi_vl", "deepseek_vl2", "dots_vlm"])
def test_the_cli_plans_a_text_config_under_another_key_as_sglang_resolves_it(tmp_path: Any, family: str) -> None:
    """InternVL's ``llm_config``, DeepSeek-VL2's ``language_config``, dots.vlm1's flat keys: ``kvbudget
    plan`` (SGLang mode) plans the geometry :func:`resolve_sglang` gives (held to SGLang above)."""
    import json
    import random

    from cli_helpers import run
    from sglang_model_cases import FAMILIES

    for seed in range(2):
        cfg = FAMILIES[family](random.Random(seed)).saved(False)
        path = tmp_path / f"{seed}.json"
        path.write_text(json.dumps(cfg))
        r = run("plan", str(path), "--engine", "sglang", "--available", "20GiB", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["model"]["geometry"] == json.loads(resolve_sglang(cfg).model_geometry().to_json())
