"""Model configs for the model-resolution differential: built by transformers 5.19.0's classes.

Each family gives the class's defaults and seeded variants of the keys real
checkpoints vary (layer counts, heads, dims, windows, layer kinds), serialized
with ``to_dict()`` as a saved ``config.json`` holds them, plus checkpoint-style
variants (keys a released config leaves to the class defaults removed, or the
keys a family's checkpoints carry, such as MiMo-V2's ``hybrid_layer_pattern``).
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import transformers as T
from sglang_mla_cases import hy_v4, longcat_flash
from sglang_vlm_cases import deepseek_vl2, dots_vlm, internvl, kimi_vl, llava_flat
from sglang_state_cases import (_bailing_hybrid, _falcon_h1, _granite_hybrid, _kimi_linear, _lfm2, _lfm2_moe,
                                _lfm2_vl, _inkling, _nemotron_h, _pure_ssm, _qwen3_5_moe, _qwen3_next, _zaya)

Case = tuple[str, dict[str, Any]]
_Builder = Callable[[random.Random], "Built"]


def _types(rng: random.Random, n: int, p_swa: float = 0.75) -> list[str]:
    return ["sliding_attention" if rng.random() < p_swa else "full_attention" for _ in range(n)]


def _gqa(rng: random.Random) -> dict[str, Any]:
    heads = rng.choice([8, 16, 32, 64])
    out: dict[str, Any] = {"num_hidden_layers": rng.randint(1, 48), "num_attention_heads": heads,
                           "num_key_value_heads": rng.choice([1, 2, 4, 8, heads]),
                           "hidden_size": heads * rng.choice([64, 128])}  # fmt: skip
    if rng.random() < 0.5:
        out["head_dim"] = rng.choice([64, 80, 128, 256])
    return out


class Built(NamedTuple):
    """A config built by its transformers class, its architecture, and keys a checkpoint adds."""

    config: Any
    arch: str
    extra: Mapping[str, Any] = MappingProxyType({})

    def saved(self, sparse: bool) -> dict[str, Any]:
        """As ``config.json`` holds it: every key, or (``sparse``) the class defaults left out;
        without a ``config``, ``extra`` is the checkpoint's own file, as released."""
        if self.config is None:
            return {**self.extra, "architectures": [self.arch]}
        d = self.config.to_dict()
        if sparse:
            _drop_defaults(d, type(self.config)().to_dict())
        return {**d, **self.extra, "architectures": [self.arch]}


def _drop_defaults(d: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Leave out the keys equal to the class defaults, as sparse released configs do."""
    for key in [k for k, v in d.items() if k in defaults and defaults[k] == v and k != "model_type"]:
        del d[key]
    text, default_text = d.get("text_config"), defaults.get("text_config")
    if isinstance(text, dict) and isinstance(default_text, dict):
        _drop_defaults(text, default_text)


def _text(cls: Any, arch: str, **kw: Any) -> Built:
    return Built(cls(**kw), arch)


def _multimodal(cls: Any, arch: str, text: dict[str, Any]) -> Built:
    return Built(cls(text_config=text), arch)


def _gemma3(rng: random.Random) -> Built:
    kw = {**_gqa(rng), "sliding_window": rng.choice([512, 1024, 4096])}
    if rng.random() < 0.5:
        kw["layer_types"] = _types(rng, kw["num_hidden_layers"])
    if rng.random() < 0.5:
        return _multimodal(T.Gemma3Config, "Gemma3ForConditionalGeneration", kw)
    return _text(T.Gemma3TextConfig, "Gemma3ForCausalLM", **kw)


def _gemma4(rng: random.Random) -> Built:
    n = rng.randint(2, 40)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_key_value_heads": rng.choice([1, 2, 4, 8]),
                          "head_dim": rng.choice([128, 256]), "sliding_window": rng.choice([512, 1024])}  # fmt: skip
    if rng.random() < 0.5:
        kw["layer_types"] = _types(rng, n)
    if rng.random() < 0.6:
        kw["global_head_dim"] = rng.choice([256, 512])
    if rng.random() < 0.5:
        kw["attention_k_eq_v"] = True
        kw["num_global_key_value_heads"] = rng.choice([1, 2, 4])
    if rng.random() < 0.5:
        return _multimodal(T.Gemma4Config, "Gemma4ForConditionalGeneration", kw)
    return _text(T.Gemma4TextConfig, "Gemma4ForCausalLM", **kw)


def _gemma4_unified(rng: random.Random) -> Built:
    """Gemma 4 Unified: Gemma 4's text config inside its own wrapper class."""
    text = _gemma4(rng).config
    text = text.text_config if hasattr(text, "text_config") else text
    return _multimodal(T.Gemma4UnifiedConfig, "Gemma4UnifiedForConditionalGeneration", text.to_dict())


def _diffusion_gemma(rng: random.Random) -> Built:
    """DiffusionGemma: its text class (Gemma 4's per-layer shapes; a bidirectional ``"all"``
    halves the window it loads) in the block-diffusion wrapper."""
    n = rng.randint(2, 40)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_key_value_heads": rng.choice([1, 2, 4, 8]),
                          "head_dim": rng.choice([128, 256]), "sliding_window": rng.choice([512, 1024, 4096]),
                          "use_bidirectional_attention": rng.choice([None, "all", "vision"])}  # fmt: skip
    if rng.random() < 0.5:
        kw["layer_types"] = _types(rng, n)
    if rng.random() < 0.6:
        kw["global_head_dim"] = rng.choice([256, 512])
    if rng.random() < 0.3:
        kw["num_global_key_value_heads"] = rng.choice([1, 2, 4])
    return _multimodal(T.DiffusionGemmaConfig, "DiffusionGemmaForBlockDiffusion",
                       T.DiffusionGemmaTextConfig(**kw).to_dict())  # fmt: skip


def _beam(rng: random.Random) -> Built:
    """Beam: SGLang's own config class (transformers has none), its layer_types given or derived."""
    n = rng.randint(1, 60)
    kw: dict[str, Any] = {"num_hidden_layers": n, "num_key_value_heads": rng.choice([1, 2, 4, 8]),
                          "head_dim": rng.choice([64, 128, 256]), "sliding_window": rng.choice([128, 512, 4096])}
    if rng.random() < 0.5:
        kw["layer_types"] = _types(rng, n)
    return _text(_sglang_config_class("BeamConfig"), "BeamForCausalLM", **kw)


@functools.cache
def _saved_defaults(cls: Any) -> dict[str, Any]:
    return cls().to_dict()  # type: ignore[no-any-return]


def _omni(cls: Any, arch: str) -> _Builder:
    """Qwen2.5 / Qwen3 Omni: the text config inside ``thinker_config`` (SGLang reads it first),
    as a checkpoint's file holds it: the class defaults' file with the text geometry seeded (the
    classes take most of a second to build, so each is built once)."""
    def build(rng: random.Random) -> Built:
        text = _gqa(rng)
        if rng.random() < 0.3:
            text.update(use_sliding_window=True, sliding_window=rng.choice([512, 4096]),
                        max_window_layers=rng.choice([0, text["num_hidden_layers"]]))  # fmt: skip
        saved = copy.deepcopy(_saved_defaults(cls))
        saved["thinker_config"]["text_config"].update(text)
        saved["thinker_config"]["text_config"].pop("layer_types", None)  # the class derives them
        return Built(None, arch, saved)

    return build


def _gpt_oss(rng: random.Random) -> Built:
    kw = {**_gqa(rng), "sliding_window": rng.choice([128, 256, 1024])}
    kw["layer_types"] = _types(rng, kw["num_hidden_layers"], 0.5)
    return _text(T.GptOssConfig, "GptOssForCausalLM", **kw)


def _llama4(rng: random.Random) -> Built:
    kw = {**_gqa(rng), "attention_chunk_size": rng.choice([4096, 8192])}
    if rng.random() < 0.5:
        return _multimodal(T.Llama4Config, "Llama4ForConditionalGeneration", kw)
    return _text(T.Llama4TextConfig, "Llama4ForCausalLM", **kw)


def _mimo_v2(rng: random.Random) -> Built:
    kw = _gqa(rng)
    n = kw["num_hidden_layers"]
    kw["layer_types"] = _types(rng, n)
    kw["sliding_window"] = rng.choice([128, 512])
    arch = rng.choice(["MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"])  # both engines: the Flash class and its subclass
    built = _text(T.MiMoV2FlashConfig, arch, **kw)
    if rng.random() < 0.7:  # the checkpoint's own keys
        built = built._replace(extra={
            "hybrid_layer_pattern": [int(t == "sliding_attention") for t in kw["layer_types"]],
            "swa_num_key_value_heads": rng.choice([4, 8]), "swa_head_dim": rng.choice([128, 192]),
            "swa_v_head_dim": 128, "sliding_window_size": kw["sliding_window"],
            "swa_num_attention_heads": kw["num_attention_heads"], "layernorm_epsilon": 1e-5})  # fmt: skip
    return built


def _chatglm(rng: random.Random) -> Built:
    """ChatGLM2/3 and GLM-4 (``ChatGLMModel``; vLLM also serves the name
    ``ChatGLMForConditionalGeneration`` with its class) as their files hold them: no transformers
    class; SGLang and vLLM each load it with a ``ChatGLMConfig`` of their own (``num_layers``, the
    KV groups of ``multi_query_group_num``; the files carry ``original_rope``, which vLLM reads)."""
    kw = _gqa(rng)
    heads, hidden = kw["num_attention_heads"], kw["hidden_size"]
    saved = {"model_type": "chatglm", "num_layers": kw["num_hidden_layers"], "hidden_size": hidden,
             "num_attention_heads": heads, "kv_channels": hidden // heads, "multi_query_attention": rng.random() < 0.9,
             "multi_query_group_num": rng.choice([1, 2, 2, 4, 8]), "original_rope": True, "rmsnorm": True,
             "add_qkv_bias": True, "padded_vocab_size": 151552, "seq_length": rng.choice([8192, 131072])}  # fmt: skip
    return Built(None, "ChatGLMModel" if rng.random() < 0.8 else "ChatGLMForConditionalGeneration", saved)


def _first_dense(cls: Any, arch: str, **file_keys: Any) -> _Builder:
    """A MoE decoder's class defaults at a drawn depth, with the ``first_k_dense_replace`` its
    released checkpoints carry and its transformers class does not write (vLLM's class reads it:
    GLM-4.7-Flash, Hunyuan-V3), and ``file_keys``: other such keys vLLM's MoE blocks read (their
    values stand in; they do not shape a cache)."""

    def build(rng: random.Random) -> Built:
        n = rng.randint(1, 48)
        return Built(cls(num_hidden_layers=n), arch, {"first_k_dense_replace": rng.randint(0, min(3, n)), **file_keys})

    return build


def _plain(cls: Any, arch: str, **extra: Callable[[random.Random], Any]) -> _Builder:
    def build(rng: random.Random) -> Built:
        kw = _gqa(rng)
        kw.update({k: f(rng) for k, f in extra.items()})
        return _text(cls, arch, **kw)

    return build


def _with_types(cls: Any, arch: str, windows: list[int | None], p_types: float = 1.0) -> _Builder:
    """Layer kinds given with probability ``p_types``, else the class's own (Mellum: all full)."""

    def build(rng: random.Random) -> Built:
        kw = {**_gqa(rng), "sliding_window": rng.choice(windows)}
        if p_types >= 1 or rng.random() < p_types:
            kw["layer_types"] = _types(rng, kw["num_hidden_layers"], 0.6)
        return _text(cls, arch, **kw)

    return build


_GLIMMER = ("MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration")


def _released(config: Any, arch: str) -> Built:
    """As ``save_pretrained`` writes the file (``to_diff_dict``: a nested config's text part
    without the null ``architectures`` its ``to_dict`` carries)."""
    return Built(None, arch, config.to_diff_dict())


def _muse_glimmer(rng: random.Random) -> Built:
    """Muse Glimmer: transformers' text class, or the multimodal file as saved (SGLang reloads
    model_type ``muse_glimmer`` with its own class, flattening the text part), flat as SGLang's
    class holds it, or missing a key SGLang's loader reads."""
    kw = {**_gqa(rng), "sliding_window": rng.choice([1024, 2048, 2048, 4096, None])}
    if rng.random() < 0.6:
        kw["layer_types"] = _types(rng, kw["num_hidden_layers"], 0.7)
    arch, pick = rng.choice(_GLIMMER), rng.random()
    if pick < 0.3:
        return _text(T.MuseGlimmerTextConfig, arch, **kw)
    saved = _released(T.MuseGlimmerConfig(text_config=kw), arch).extra
    text = saved["text_config"]
    if pick < 0.45:
        saved = {**{k: v for k, v in saved.items() if k not in ("text_config", "vision_config")},
                 **{k: v for k, v in text.items() if k != "model_type"}}  # fmt: skip
    elif pick < 0.6:
        del text[rng.choice(["layer_types", "head_dim", "hidden_activation", "num_key_value_heads"])]
    return Built(None, arch, saved)


#: Off SGLang's hybrid-SWA list: opting in with the text config's ``is_hybrid_swa``, the layer kinds
#: in ``hybrid_layer_pattern`` (1 = sliding window); Transformers-backend and windowed classes too.
_OPT_IN = ((T.LlamaConfig, "LlamaForCausalLM"), (T.MistralConfig, "MistralForCausalLM"),
           (T.Qwen2Config, "Qwen2ForCausalLM"), (T.Cohere2Config, "Cohere2ForCausalLM"),
           (T.Gemma2Config, "Gemma2ForCausalLM"), (T.LlamaConfig, "HybridLlamaForCausalLM"))  # fmt: skip


def _opt_in(rng: random.Random) -> Built:
    cls, arch = rng.choice(_OPT_IN)
    kw = _gqa(rng)
    n = kw["num_hidden_layers"]
    extra: dict[str, Any] = {"is_hybrid_swa": rng.random() < 0.9}
    if rng.random() < 0.8:
        extra["hybrid_layer_pattern"] = [int(rng.random() < 0.7) for _ in range(rng.choice([n, n, n, n - 1]))]
    if rng.random() < 0.6:
        extra["sliding_window"] = rng.choice([512, 4096])
    return Built(cls(**kw), arch, extra)


_STEP3P5 = "Step3p5ForCausalLM"


def _step3p5(rng: random.Random) -> Built:
    """Step-3.5: transformers 5.19.0 owns model_type ``step3p5`` (``Step3p7TextConfig``, which
    SGLang loads first, then its own ``Step3p5Config``); re-saved by that class, or as
    Step-3.5-Flash's checkpoint holds it: ``num_attention_groups``, ``attention_other_setting``
    (the sliding layers' heads), ``layer_types`` with an entry per MTP layer too, and the
    per-layer lists SGLang's model reads (45 layers, 3 MTP, 64 / 96 heads, window 512 there)."""
    n, mtp = rng.randint(1, 48), rng.choice([0, 0, 1, 3])
    heads, groups = rng.choice([32, 64]), rng.choice([4, 8, 16])
    sliding = rng.choice([heads, heads, 96])  # 96 vs 64, as Step-3.5-Flash: SGLang cannot load it
    if rng.random() < 0.8:
        types = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n + mtp)]
        if rng.random() < 0.4:
            types = _types(rng, n + mtp)
    else:
        types = ["full_attention"] * (n + mtp)
    window, head_dim = rng.choice([128, 512, 512, 1024, None]), rng.choice([64, 128])
    other: dict[str, Any] = {"num_attention_heads": sliding, "num_attention_groups": rng.choice([groups, 8, 16])}
    if rng.random() < 0.4:
        return _text(T.Step3p7TextConfig, _STEP3P5, num_hidden_layers=n, num_attention_heads=heads,
                     num_key_value_heads=groups, head_dim=head_dim, sliding_window=window, layer_types=types,
                     num_nextn_predict_layers=mtp, attention_other_setting=other)  # fmt: skip
    full = [t == "full_attention" for t in types]
    released: dict[str, Any] = {
        "model_type": "step3p5", "hidden_size": 4096, "intermediate_size": 11264, "vocab_size": 128896,
        "num_hidden_layers": n, "num_attention_heads": heads, "num_attention_groups": groups,
        "head_dim": head_dim, "max_position_embeddings": 262144, "rms_norm_eps": 1e-5,
        "layer_types": types, "sliding_window": window, "num_nextn_predict_layers": mtp,
        "attention_other_setting": {"attention_type": "sliding_attention", **other, "head_dim": head_dim,
                                    "true_head_dim": head_dim},
        "rope_theta": [5e6 if f else 1e4 for f in full], "partial_rotary_factors": [0.5 if f else 1.0 for f in full],
        "rope_scaling": None, "yarn_only_types": ["full_attention"], "use_head_wise_attn_gate": True,
        "moe_layers_enum": ",".join(str(i) for i in range(3, n)), "moe_num_experts": 288, "moe_top_k": 8,
        "moe_intermediate_size": 1280, "share_expert_dim": 1280, "moe_router_scaling_factor": 3.0,
        "use_moe_router_bias": True, "need_fp32_gate": True, "norm_expert_weight": True,
        "swiglu_limits": [0.0] * (n + mtp), "swiglu_limits_shared": [0.0] * (n + mtp),
    }  # fmt: skip
    if rng.random() < 0.2:  # a file SGLang refuses: MTP entries without their count, or no SWA groups
        del released["num_nextn_predict_layers" if mtp and rng.random() < 0.5 else "attention_other_setting"]
    elif rng.random() < 0.2:
        del released["attention_other_setting"]["num_attention_groups"]
    return Built(None, _STEP3P5, released)


@functools.cache
def _sglang_config_class(name: str) -> Any:
    """One of SGLang's own config classes, executed from the verified wheel extraction."""
    from sglang_oracle._configs import REAL, ConfigClasses
    from sglang_oracle._fetch import sglang_root
    from sglang_oracle._plumbing import Builder

    return ConfigClasses(Builder(sglang_root(), real=REAL)).cls(name)


def _mla(rng: random.Random, n: int) -> dict[str, Any]:
    return {"num_hidden_layers": n, "kv_lora_rank": rng.choice([256, 512]), "qk_rope_head_dim": rng.choice([32, 64]),
            "qk_nope_head_dim": rng.choice([64, 128]), "v_head_dim": rng.choice([64, 128])}  # fmt: skip


def _dsa_extra(rng: random.Random, n: int) -> dict[str, Any]:
    """Checkpoint-style DSA keys: pooled index keys, and layers sharing top-k."""
    extra: dict[str, Any] = {}
    if rng.random() < 0.3:
        extra["index_kpool"] = rng.choice([1, 2, 4])
    pick = rng.random()
    if pick < 0.2:
        extra["index_topk_freq"] = rng.choice([1, 2, 3])
        if rng.random() < 0.5:
            extra["index_skip_topk_offset"] = rng.choice([1, 2, 4])
    elif pick < 0.3:
        extra["index_topk_pattern"] = "".join(rng.choice("FS") for _ in range(rng.randint(0, n + 2)))
    return extra


def _deepseek_v32(rng: random.Random) -> Built:
    n = rng.randint(1, 61)
    cfg = T.DeepseekV32Config(**_mla(rng, n), index_head_dim=rng.choice([128, 128, 64]),
                              index_topk=rng.choice([2048, 1024]))  # fmt: skip
    return Built(cfg, "DeepseekV32ForCausalLM", _dsa_extra(rng, n))


def _glm_moe_dsa(rng: random.Random) -> Built:
    n = rng.randint(2, 78)
    kinds = ["full" if i == 0 or rng.random() < 0.6 else "shared" for i in range(n)] if rng.random() < 0.5 else None
    cfg = T.GlmMoeDsaConfig(**_mla(rng, n), index_head_dim=128, indexer_types=kinds)
    return Built(cfg, rng.choice(["GlmMoeDsaForCausalLM", "GlmMoeDsaForCausalLMNextN"]))


def _deepseek_v3(rng: random.Random) -> Built:
    """DeepSeek-V3's class; some configs carry DSA's ``index_topk`` (SGLang then plans the indexer)."""
    n = rng.randint(1, 61)
    extra = {"index_topk": 2048, "index_head_dim": 128, **_dsa_extra(rng, n)} if rng.random() < 0.3 else {}
    return Built(T.DeepseekV3Config(**_mla(rng, n)), "DeepseekV3ForCausalLM", extra)


def _mistral_large_3(rng: random.Random) -> Built:
    """Mistral Large 3: both engines load its ``params.json`` as DeepSeek-V3's config under its own
    architecture (vLLM's ``adapt_config_dict``: model type ``deepseek_v3`` and the
    ``llama_4_scaling`` it asserts)."""
    scaling = {"original_max_position_embeddings": 8192, "beta": rng.choice([0.1, 0.2])}
    return Built(T.DeepseekV3Config(**_mla(rng, rng.randint(1, 61))), "MistralLarge3ForCausalLM",
                 {"llama_4_scaling": scaling})


def _minicpm3(rng: random.Random) -> Built:
    """MiniCPM3: MLA whose SGLang branch keeps the generic ``v_head_dim`` (0 -> the head dim)."""
    heads = rng.choice([24, 40])
    kw = {**_mla(rng, rng.randint(1, 62)), "num_attention_heads": heads, "num_key_value_heads": heads,
          "hidden_size": heads * 64, "v_head_dim": rng.choice([0, 64, 128])}  # fmt: skip
    built = _text(T.MiniCPM3Config, "MiniCPM3ForCausalLM", **kw)
    if rng.random() < 0.4:  # no head_dim key: hidden size / heads
        return Built(None, built.arch, {k: v for k, v in built.config.to_dict().items() if k != "head_dim"})
    return built







def _minimax_m2(rng: random.Random) -> Built:
    """MiniMax-M2: checkpoints give ``rotary_dim`` (vLLM's attention reads it; transformers' class has none)."""
    built = _plain(T.MiniMaxM2Config, "MiniMaxM2ForCausalLM")(rng)
    return built._replace(extra={"rotary_dim": rng.choice([64, 128])}) if rng.random() < 0.8 else built


_SW = {"sliding_window": lambda r: r.choice([None, 4096])}
FAMILIES: dict[str, _Builder] = {
    "gemma2": _plain(T.Gemma2Config, "Gemma2ForCausalLM", sliding_window=lambda r: r.choice([2048, 4096])),
    "gemma3": _gemma3,
    "gemma3n": lambda r: _multimodal(T.Gemma3nConfig, "Gemma3nForConditionalGeneration",
                                     {"num_hidden_layers": r.choice([30, 35]),
                                      "num_kv_shared_layers": r.choice([0, 10, 15])}),
    "gemma4": _gemma4,
    "gemma4_unified": _gemma4_unified,
    "diffusion_gemma": _diffusion_gemma,
    "qwen3_omni_moe": _omni(T.Qwen3OmniMoeConfig, "Qwen3OmniMoeForConditionalGeneration"),
    "qwen2_5_omni": _omni(T.Qwen2_5OmniConfig, "Qwen2_5OmniForConditionalGeneration"),
    "beam": _beam,
    "cohere2": _plain(T.Cohere2Config, "Cohere2ForCausalLM", sliding_window=lambda r: r.choice([4096])),
    "exaone4": _plain(T.Exaone4Config, "Exaone4ForCausalLM", sliding_window=lambda r: r.choice([4096, 2048])),
    "olmo2": _plain(T.Olmo2Config, "Olmo2ForCausalLM"),
    "olmo3": _plain(T.Olmo3Config, "Olmo3ForCausalLM", sliding_window=lambda r: r.choice([4096])),
    "mistral": _plain(T.MistralConfig, "MistralForCausalLM", **_SW),
    "phi3": _plain(T.Phi3Config, "Phi3ForCausalLM", **_SW),
    "qwen2": _plain(T.Qwen2Config, "Qwen2ForCausalLM", use_sliding_window=lambda r: r.random() < 0.5),
    "qwen3": _plain(T.Qwen3Config, "Qwen3ForCausalLM"),
    "llama": _plain(T.LlamaConfig, "LlamaForCausalLM"),
    "mimo": _plain(T.Qwen2Config, "MiMoForCausalLM"),
    "llama4": _llama4,
    "gpt_oss": _gpt_oss,
    "mimo_v2": _mimo_v2,
    "granite_swa": _with_types(T.GraniteSWAConfig, "GraniteSWAForCausalLM", [128, 512]),
    "laguna": _with_types(T.LagunaConfig, "LagunaForCausalLM", [512, 1024]),
    "mellum": _with_types(T.MellumConfig, "MellumForCausalLM", [512, 1024, None], p_types=0.7),
    "muse_glimmer": _muse_glimmer,
    "hybrid_opt_in": _opt_in,
    "qwen3_next": _qwen3_next,
    "qwen3_5_moe": _qwen3_5_moe,
    "kimi_linear": _kimi_linear,
    "lfm2": _lfm2,
    "nemotron_h": _nemotron_h,
    "falcon_h1": _falcon_h1,
    "mamba": _pure_ssm(T.MambaConfig, "MambaForCausalLM"),
    "falcon_mamba": _pure_ssm(T.FalconMambaConfig, "FalconMambaForCausalLM"),
    "mamba2": _pure_ssm(T.Mamba2Config, "Mamba2ForCausalLM"),
    "granite_hybrid": _granite_hybrid,
    "lfm2_moe": _lfm2_moe,
    "lfm2_vl": _lfm2_vl,
    "zaya": _zaya,
    "inkling": _inkling,
    "bailing_hybrid": _bailing_hybrid,
    "step3p5": _step3p5,
    "deepseek_v3": _deepseek_v3,
    "mistral_large_3": _mistral_large_3,
    "deepseek_v32": _deepseek_v32,
    "glm_moe_dsa": _glm_moe_dsa,
    "minicpm3": _minicpm3,
    "kimi_vl": kimi_vl,
    "dots_vlm": dots_vlm,
    "internvl": internvl,
    "deepseek_vl2": deepseek_vl2,
    "llava_flat": llava_flat,
    "nemotron": _plain(T.NemotronConfig, "NemotronForCausalLM"),  # Nemotron-4 / Minitron: vLLM serves it
    "hy_v4": hy_v4,
    "longcat_flash": longcat_flash,
    # MoE and dense decoders whose attention layers are all alike (GLM-4 MoE: head_dim given or null)
    "qwen3_moe": _plain(T.Qwen3MoeConfig, "Qwen3MoeForCausalLM"),
    "qwen2_moe": _plain(T.Qwen2MoeConfig, "Qwen2MoeForCausalLM"),
    "mixtral": _plain(T.MixtralConfig, "MixtralForCausalLM", **_SW),
    "chatglm": _chatglm,
    "glm4_moe_lite": _first_dense(T.Glm4MoeLiteConfig, "Glm4MoeLiteForCausalLM"),
    "hy_v3": _first_dense(T.HYV3Config, "HYV3ForCausalLM", expert_hidden_dim=1536, route_norm=True),
    "phimoe": _plain(T.PhimoeConfig, "PhiMoEForCausalLM", **_SW),  # the released checkpoints' name (transformers': Phimoe)
    "glm4_moe": _plain(T.Glm4MoeConfig, "Glm4MoeForCausalLM", head_dim=lambda r: r.choice([64, 128, 128, 128, None])),
    "minimax_m2": _minimax_m2,
    "gemma": _plain(T.GemmaConfig, "GemmaForCausalLM"),
    "granite": _plain(T.GraniteConfig, "GraniteForCausalLM"),
    "olmoe": _plain(T.OlmoeConfig, "OlmoeForCausalLM"),
    "granitemoe": _plain(T.GraniteMoeConfig, "GraniteMoeForCausalLM"),
    "granitemoeshared": _plain(T.GraniteMoeSharedConfig, "GraniteMoeSharedForCausalLM"),
    "glm4": _plain(T.Glm4Config, "Glm4ForCausalLM"),
    "ernie4_5": _plain(T.Ernie4_5Config, "Ernie4_5ForCausalLM"),
    "ernie4_5_moe": _plain(T.Ernie4_5_MoeConfig, "Ernie4_5_MoeForCausalLM"),
    "hyperclovax": _plain(T.HyperCLOVAXConfig, "HyperCLOVAXForCausalLM", head_dim=lambda r: r.choice([64, 128])),
    "apertus": _plain(T.ApertusConfig, "ApertusForCausalLM"),
    "stablelm": _plain(T.StableLmConfig, "StableLmForCausalLM"),
    "afmoe": _with_types(T.AfmoeConfig, "AfmoeForCausalLM", [512, 4096]),
}


#: The class defaults of every family, as a saved config holds them.
DEFAULTS: dict[str, tuple[Any, str]] = {
    "gemma2": (T.Gemma2Config, "Gemma2ForCausalLM"), "gemma3": (T.Gemma3Config, "Gemma3ForConditionalGeneration"),
    "gemma3_text": (T.Gemma3TextConfig, "Gemma3ForCausalLM"),
    "gemma3n": (T.Gemma3nConfig, "Gemma3nForConditionalGeneration"),
    "gemma4": (T.Gemma4Config, "Gemma4ForConditionalGeneration"), "gemma4_text": (T.Gemma4TextConfig, "Gemma4ForCausalLM"),
    "gemma4_unified": (T.Gemma4UnifiedConfig, "Gemma4UnifiedForConditionalGeneration"),
    "cohere2": (T.Cohere2Config, "Cohere2ForCausalLM"), "exaone4": (T.Exaone4Config, "Exaone4ForCausalLM"),
    "olmo2": (T.Olmo2Config, "Olmo2ForCausalLM"), "olmo3": (T.Olmo3Config, "Olmo3ForCausalLM"),
    "mistral": (T.MistralConfig, "MistralForCausalLM"), "phi3": (T.Phi3Config, "Phi3ForCausalLM"),
    "qwen2": (T.Qwen2Config, "Qwen2ForCausalLM"), "qwen3": (T.Qwen3Config, "Qwen3ForCausalLM"),
    "llama": (T.LlamaConfig, "LlamaForCausalLM"), "llama4": (T.Llama4Config, "Llama4ForConditionalGeneration"),
    "llama4_text": (T.Llama4TextConfig, "Llama4ForCausalLM"), "gpt_oss": (T.GptOssConfig, "GptOssForCausalLM"),
    "mimo_v2": (T.MiMoV2FlashConfig, "MiMoV2FlashForCausalLM"),
    "granite_swa": (T.GraniteSWAConfig, "GraniteSWAForCausalLM"), "laguna": (T.LagunaConfig, "LagunaForCausalLM"),
    "deepseek_v3": (T.DeepseekV3Config, "DeepseekV3ForCausalLM"),
    "deepseek_v32": (T.DeepseekV32Config, "DeepseekV32ForCausalLM"),
    "glm_moe_dsa": (T.GlmMoeDsaConfig, "GlmMoeDsaForCausalLM"), "minicpm3": (T.MiniCPM3Config, "MiniCPM3ForCausalLM"),
    "hy_v4": (T.HYV4Config, "HYV4ForCausalLM"), "longcat_flash": (T.LongcatFlashConfig, "LongcatFlashForCausalLM"),
    "qwen3_moe": (T.Qwen3MoeConfig, "Qwen3MoeForCausalLM"), "qwen2_moe": (T.Qwen2MoeConfig, "Qwen2MoeForCausalLM"),
    "mixtral": (T.MixtralConfig, "MixtralForCausalLM"), "phimoe": (T.PhimoeConfig, "PhiMoEForCausalLM"),
    "glm4_moe": (T.Glm4MoeConfig, "Glm4MoeForCausalLM"),
    "minimax_m2": (T.MiniMaxM2Config, "MiniMaxM2ForCausalLM"), "gemma": (T.GemmaConfig, "GemmaForCausalLM"),
    "granite": (T.GraniteConfig, "GraniteForCausalLM"), "olmoe": (T.OlmoeConfig, "OlmoeForCausalLM"),
    "granitemoe": (T.GraniteMoeConfig, "GraniteMoeForCausalLM"),
    "granitemoeshared": (T.GraniteMoeSharedConfig, "GraniteMoeSharedForCausalLM"), "glm4": (T.Glm4Config, "Glm4ForCausalLM"),
    "ernie4_5": (T.Ernie4_5Config, "Ernie4_5ForCausalLM"), "ernie4_5_moe": (T.Ernie4_5_MoeConfig, "Ernie4_5_MoeForCausalLM"),
    "hyperclovax": (T.HyperCLOVAXConfig, "HyperCLOVAXForCausalLM"), "apertus": (T.ApertusConfig, "ApertusForCausalLM"),
    "stablelm": (T.StableLmConfig, "StableLmForCausalLM"), "afmoe": (T.AfmoeConfig, "AfmoeForCausalLM"),
    "qwen3_next": (T.Qwen3NextConfig, "Qwen3NextForCausalLM"), "qwen3_5": (T.Qwen3_5Config, "Qwen3_5ForConditionalGeneration"),
    "kimi_linear": (T.KimiLinearConfig, "KimiLinearForCausalLM"), "lfm2": (T.Lfm2Config, "Lfm2ForCausalLM"),
    # (Nemotron-H's: transformers 5.19.0's class saves no num_hidden_layers, which SGLang's own
    # class then defaults; the released checkpoints give it with hybrid_override_pattern.)
    "falcon_h1": (T.FalconH1Config, "FalconH1ForCausalLM"),
    "granite_hybrid": (T.GraniteMoeHybridConfig, "GraniteMoeHybridForCausalLM"),
    "mamba": (T.MambaConfig, "MambaForCausalLM"), "falcon_mamba": (T.FalconMambaConfig, "FalconMambaForCausalLM"),
    "mamba2": (T.Mamba2Config, "Mamba2ForCausalLM"),
    "lfm2_moe": (T.Lfm2MoeConfig, "Lfm2MoeForCausalLM"),
    "lfm2_vl": (T.Lfm2VlConfig, "Lfm2VlForConditionalGeneration"), "zaya": (T.ZayaConfig, "ZayaForCausalLM"),
    "jamba": (T.JambaConfig, "JambaForCausalLM"), "olmo_hybrid": (T.OlmoHybridConfig, "OlmoHybridForCausalLM"),
    "step3p5": (T.Step3p7TextConfig, _STEP3P5), "mellum": (T.MellumConfig, "MellumForCausalLM"),
    "muse_glimmer": (T.MuseGlimmerConfig, _GLIMMER[1]), "muse_glimmer_text": (T.MuseGlimmerTextConfig, _GLIMMER[0]),
}  # fmt: skip


def cases(per_family: int, seed: int = 0, *, sparse: bool = False) -> Iterator[Case]:
    """The class defaults of every family, then ``per_family`` seeded variants each, with
    every key (``sparse``: the keys equal to the class defaults left out)."""
    for name, (cls, arch) in DEFAULTS.items():
        yield name, _text(cls, arch).saved(sparse)
    # SGLang's own class of a model type transformers also owns (SGLang reloads the file with it).
    yield "step3p5", _text(_sglang_config_class("Step3p5Config"), _STEP3P5).saved(sparse)
    glimmer = _sglang_config_class("MuseGlimmerConfig")
    yield "muse_glimmer", _text(glimmer, _GLIMMER[0], layer_types=["full_attention"] * 52).saved(sparse)
    yield "muse_glimmer", _released(T.MuseGlimmerConfig(), _GLIMMER[1]).saved(sparse)  # as the checkpoint saves it
    opt_in = {"is_hybrid_swa": True, "hybrid_layer_pattern": [1, 1, 1, 0] * 4, "sliding_window": 4096}
    yield "hybrid_opt_in", Built(T.LlamaConfig(num_hidden_layers=16), "LlamaForCausalLM", opt_in).saved(sparse)
    for name, build in FAMILIES.items():
        rng = random.Random(f"{seed}:{name}")
        for _ in range(per_family):
            yield name, build(rng).saved(sparse)


def sparse_cases(per_family: int, seed: int = 0) -> Iterator[Case]:
    """:func:`cases` as sparse released configs hold them."""
    return cases(per_family, seed, sparse=True)
