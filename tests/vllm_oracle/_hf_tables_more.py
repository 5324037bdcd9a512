"""More of the model-reading oracle's architecture tables (:mod:`._hf_tables`, which imports this
module at its end): MiniCPM-V 4.6 / 4.7, Kimi-K3, HRM-Text, Beam, Step-3.5 and Intern-S2-Mobius
(whose config class is SGLang 0.5.23's InternS2MobiusConfig, standing in for its remote code).
Restated glue, as there: where each registered class is entered, what is lifted of its files, and
the stand-ins its namespace gets."""

from __future__ import annotations

import ast
import functools
import typing
from typing import Any

from oracle_kit.lift import Source
from oracle_kit.strict import Poison, StrictModule

from ._hf_lift import _lift_stmts, _run
from ._strict import StrictConfig
from ._hf_tables import _KIMI, _STATE, ENTRY, MODELS, NAMESPACES, STATE_CLASSES

# MiniCPM-V 4.6 / 4.7 (tests/test_vllm_minicpmv.py): the wrapper's __init__ builds
# ``Qwen3_5ForCausalLM(vllm_config=vllm_config, prefix="language_model")`` on its own VllmConfig (the text
# model reads ``hf_text_config``; the outer ``model_type`` swap it makes around the call reaches no KV
# layer), which builds ``Qwen3_5Model`` at ``language_model.model``: entered there (restated). The
# state classmethods are the wrapper's own (4.7's are 4.6's, inherited); no config hook names them.
for _arch in ("MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration"):
    ENTRY[(_arch.lower().removesuffix("forconditionalgeneration"), _arch)] = (
        "qwen3_5:Qwen3_5Model", None, "language_model.model", False)
    STATE_CLASSES[_arch] = ("minicpmv4_6", "MiniCPMV4_6ForConditionalGeneration")
MODELS["minicpmv4_6"] = ([("MiniCPMV4_6ForConditionalGeneration", *_STATE)], "", {})

# Kimi-K3 (tests/test_vllm_kimi_k3.py): ``init_vllm_registered_model(hf_config=config.text_config,
# architectures=["KimiLinearForCausalLM"])``, so the registry's KimiLinearForCausalLM's model at
# ``language_model.model`` on the text config (restated); the state classmethods are the wrapper's own
# (KimiLinearForCausalLM's on ``with_hf_config(text_config)``).
ENTRY[("vllm.models.kimi_k3", "KimiK3ForConditionalGeneration")] = (
    f"{_KIMI}:KimiLinearModel", None, "language_model.model", True)
MODELS[_KIMI][0].append(("KimiK3ForConditionalGeneration", *_STATE))
STATE_CLASSES["KimiK3ForConditionalGeneration"] = (_KIMI, "KimiK3ForConditionalGeneration")

# HRM-Text (tests/test_vllm_hrm_text.py): the model whole (its two stacks; one
# PrefillPrefixLMAttention per recurrence step a stack runs), entered at the model the
# ForCausalLM builds at ``model`` (the class's own pp > 1 refusal comes after the SupportsPP one).
ENTRY[("hrm_text", "HrmTextForCausalLM")] = ("HrmTextModel", None, "model", False)
MODELS["hrm_text"] = (["HrmTextAttention", "HrmTextDecoderLayer", "HrmTextStack", "HrmTextModel"], "HrmTextMLP", {})

# Beam (tests/test_vllm_beam.py; ``vllm/models/beam``, NVIDIA branch): entered at BeamForCausalLM, kept
# to its refusals (EPLB, sequence-parallel MoE, tied embeddings) and its model; the model kept to the
# cache config's window it clears and its layers; the decoder layer to its attention; the attention to
# its heads, window and registration. No TP group here: no fused all-reduce workspace (restated).
_BEAM, _BEAM_ATTN = "models/beam/nvidia/model", "models/beam/nvidia/attention"
ENTRY[("vllm.models.beam", "BeamForCausalLM")] = (f"{_BEAM}:BeamForCausalLM", None, "", False)
MODELS.update({
    _BEAM_ATTN: ([("BeamAttention", frozenset(
        """self.layer_id hidden_size tp_size self.total_num_heads self.num_heads self.total_num_kv_heads
        self.num_kv_heads self.head_dim self.scaling is_sliding per_layer_sw self.attn""".split()
        + ["if self.total_num_kv_heads >= tp_size"]))], "", {}),
    _BEAM: ([("BeamDecoderLayer", frozenset("config cache_config quant_config self.layer_id self.self_attn "
                                            "fuse_attention_reduce".split())),
             ("BeamModel", frozenset("""config cache_config quant_config self.config self.allreduce_workspace
             self.start_layer self.end_layer self.layers tp_group""".split() + ["if cache_config is not None"])),
             ("BeamForCausalLM", frozenset("config quant_config parallel_config self.config self.model".split()))],
            "", {"BeamAttention": _BEAM_ATTN}),
})  # fmt: skip
NAMESPACES[_BEAM] = {"BeamAllReduceWorkspace": StrictModule("BeamAllReduceWorkspace", {"create": lambda *a: None}),
                     "get_tp_group": lambda: StrictModule("tp_group", {"cpu_group": None}),
                     "cast": typing.cast, "BeamConfig": object}

# Step-3.5 (tests/test_vllm_step3p5.py): its per-layer helpers whole; the attention to its heads, window,
# rotary-factor assert and registration; the decoder layer to the cache window it clears, its checks and
# attention, and its MoE block's TP and router checks (the experts stood in: an object per block); the
# model to its layers; the ForCausalLM to its model and its per-rank MoE-layer assert.
ENTRY[("step3p5", "Step3p5ForCausalLM")] = ("Step3p5ForCausalLM", None, "", False)
MODELS["step3p5"] = (["_get_layer_type", "_get_num_attention_heads", "_get_rope_parameters", "_is_moe_layer",
                      ("Step3p5Attention", frozenset(
                          """self.hidden_size self.total_num_heads tp_size self.layer_idx rope_parameters
                          self.partial_rotary_factor self.num_heads self.total_num_kv_heads self.num_kv_heads
                          self.head_dim self.scaling self.attn""".split() + ["if self.total_num_kv_heads >= tp_size"])),
                      ("FusedMoEBlock", frozenset(
                          """self.tp_size self.layer_idx config self.use_moe_router_bias self.need_fp32_gate
                          activation swiglu_limits swiglu_limit self.experts self.share_expert self.gate
                          self.router_bias self.enable_eplb self.n_redundant_experts parallel_config quant_config
                          self.hidden_size""".split()
                          + ["if swiglu_limit not in (None, 0)"])),
                      ("Step3p5DecoderLayer", frozenset(
                          """config self.hidden_size layer_idx self.layer_idx cache_config quant_config att_impl_type
                          layer_type use_rope_layers self.self_attn self.use_moe self.moe""".split()
                          + ["if cache_config is not None", "if _is_moe_layer(config, layer_idx)"])),
                      ("Step3p5Model", frozenset("config self.config self.start_layer self.end_layer self.layers"
                                                 .split())),
                      ("Step3p5ForCausalLM", frozenset(
                          "config self.model self.moe_layers example_layer layer len".split()))],
                     "Step3p5MLP GateLinear", {})  # fmt: skip
NAMESPACES["step3p5"] = {"FusedMoEFactory": lambda **kw: object(),  # restated: the experts own no KV
                         # make_layers' PPMissingLayer is the oracle's inert Poison (as for HYV3)
                         "PPMissingLayer": Poison,
                         # hasattr on a lifted layer (strict stand-ins raise for unset attributes): what
                         # its __init__ set
                         "hasattr": lambda obj, name: name in vars(obj)}

# Intern-S2-Mobius (tests/test_vllm_interns2_mobius.py). Its config: vLLM loads the checkpoint's own
# config code (trust_remote_code; neither vLLM nor transformers 5.19.0 has a class for interns2_mobius),
# for which SGLang 0.5.23's InternS2MobiusConfig stands in (``._hf.vllm_config_class``; restated glue,
# the lead's decision). The wrapper's __init__ builds InternS2MobiusForCausalLM, whose
# InternS2MobiusModel (at ``language_model.model``) is lifted whole: its shared MoE banks (``meta_mlp``,
# ``num_blocks`` of them; each kept to its TP-over-experts check), then its decoder layers whole (gated
# delta nets and Qwen3NextAttention by ``layer_types``; the shared expert and norms inert). Entered at
# ``_interns2_mobius`` (restated): the model, then the statements of the wrapper's set_moe_parameters up
# to its empty-bank refusal (lifted). The state classmethods are Qwen3_5ForConditionalGeneration's (the
# wrapper inherits them through InternS2PreviewForConditionalGeneration and
# Qwen3_5MoeForConditionalGeneration), lifted into this file's namespace: MODELS_CONFIG_MAP names no hook
# for it, so Qwen3.5's (keyed by file) does not run.
@functools.cache
def _empty_bank_check() -> Any:
    """``set_moe_parameters``' ``meta_mlp = ...`` and its ``if not meta_mlp: raise``, lifted."""
    from ._hf import _root

    src = Source(_root(), "vllm/model_executor/models/interns2_mobius.py")
    return _lift_stmts(src, "InternS2MobiusForConditionalGeneration", "set_moe_parameters",
                       lambda s: isinstance(s, ast.If) or (isinstance(s, ast.Assign)
                                                           and ast.unparse(s.targets[0]) == "meta_mlp"))  # fmt: skip


def _interns2_mobius(*, vllm_config: Any, prefix: str = "") -> Any:
    """Restated entry: ``InternS2MobiusModel`` (lifted) at ``prefix``, then the wrapper's empty-bank check."""
    from ._hf import _env, _root

    model = _env(_root()).models["interns2_mobius"]["InternS2MobiusModel"](vllm_config=vllm_config, prefix=prefix)
    _run(_empty_bank_check(), self=StrictConfig(language_model=StrictConfig(model=model)))
    return model


ENTRY[("interns2_mobius", "InternS2MobiusForConditionalGeneration")] = (
    "_interns2_mobius", None, "language_model.model", False)
_MOBIUS_BANK = frozenset({"config", "self.tp_size", "self.n_routed_experts"})  # its TP-over-experts check
MODELS["interns2_mobius"] = ([("InternS2MobiusMetaMoeBlock", _MOBIUS_BANK), "InternS2MobiusDecoderLayer",
                              "InternS2MobiusModel", ("qwen3_5:Qwen3_5ForConditionalGeneration", *_STATE)],
                             "InternS2MobiusSharedExpertBlock Qwen3_5RMSNorm",
                             {"Qwen3NextAttention": "qwen3_next"})  # fmt: skip
NAMESPACES["interns2_mobius"] = {"_interns2_mobius": _interns2_mobius}
STATE_CLASSES["InternS2MobiusForConditionalGeneration"] = ("interns2_mobius", "Qwen3_5ForConditionalGeneration")

# Ling 2.5 (BailingMoeV2_5ForCausalLM, tests/test_vllm_bailing_linear.py; its config the checkpoint's remote
# code, for which SGLang 0.5.23's BailingHybridConfig stands in: ._hf_configs). The model's __init__ kept to
# its layer kinds and decoder layers; the decoder layer's to its attention (MLP and norms hold no KV); the MLA
# attention whole (projections and rope inert, MultiHeadLatentAttentionWrapper restated in ._hf); the lightning
# attention's kept to LinearAttention's geometry and TP assert, its group-norm asserts and its registration.
_LINEAR = "model_executor/layers/mamba/linear"
ENTRY[("bailing_moe_linear", "BailingMoeV25ForCausalLM")] = ("BailingMoeV25Model", None, "model", False)
MODELS.update({
    f"{_LINEAR}/base": ([("LinearAttention", frozenset(
        """self.layer_idx self.prefix self.model_config self.cache_config self.hidden_size self.num_heads
        self.num_hidden_layers self.head_dim self.hidden_inner_size self.tp_size""".split()))], "", {}),
    f"{_LINEAR}/bailing_linear_attn": (["_build_rope_parameters", ("BailingMoELinearAttention", frozenset(
        "self.group_norm_size compilation_config compilation_config.static_forward_context[prefix]".split()))],
        "", {"LinearAttention": f"{_LINEAR}/base"}),
    "bailing_moe_linear": (["is_linear_layer", "BailingMoeV25MLAAttention",
                           ("BailingMoeV25DecoderLayer", frozenset(
                               ["self.layer_id", "self.hidden_size", "self.attention_type",
                                "if self.attention_type == 0"])),
                           ("BailingMoeV25Model", frozenset(
                               """config self.config self.layer_group_size self.num_layers self.decoder_attention_types
                               layer_fn self.start_layer self.end_layer self.layers""".split())),
                           ("BailingMoeV25ForCausalLM", *_STATE)], "BailingMoeV25 BailingMLP",
                           {"BailingMoELinearAttention": f"{_LINEAR}/bailing_linear_attn",
                            "_build_rope_parameters": f"{_LINEAR}/bailing_linear_attn"}),
})  # fmt: skip
NAMESPACES.update({f"{_LINEAR}/bailing_linear_attn": {"copy": __import__("copy")},
                   "bailing_moe_linear": {"copy": __import__("copy")}})
# Ling 3 (BailingMoeV3ForCausalLM; the same stand-in config): the model's __init__ kept to its decoder layers;
# the decoder layer's to its layer kind and attention; the MLA attention's to its geometry, TP assert and
# MultiHeadLatentAttentionWrapper (restated: the MLA modules it is handed are not read); the KDA layer's to its
# geometry, its no_kda_lora check and its registration; the state classmethods over _get_kda_state_shape_for_config.
ENTRY[("bailing_moe_v3", "BailingMoeV3ForCausalLM")] = ("BailingMoeV3Model", None, "model", False)
MODELS["bailing_moe_v3"] = (["_is_kda_layer", "_get_kda_state_shape_for_config",
                             ("BailingMoeV3MLAAttention", frozenset(
                                 """self.hidden_size self.num_heads self.layer_id self.qk_nope_head_dim self.qk_rope_head_dim
                                 self.qk_head_dim self.v_head_dim self.q_lora_rank self.kv_lora_rank tp_size
                                 self.num_local_heads self.scaling self.mla_attn""".split())),
                             ("BailingMoeV3KimiDeltaAttention", frozenset(
                                 """self.tp_size self.hidden_size self.head_dim self.num_heads self.local_num_heads
                                 self.conv_size self.layer_id self.prefix self.model_config self.cache_config
                                 self.num_speculative_tokens getattr compilation_config
                                 compilation_config.static_forward_context[prefix]""".split())),
                             ("BailingMoeV3DecoderLayer", frozenset(
                                 ["self.layer_id", "self.hidden_size", "self.is_kda_layer", "if self.is_kda_layer"])),
                             ("BailingMoeV3Model", frozenset(
                                 """config model_config quant_config cache_config num_speculative_tokens self.config
                                 self.num_layers layer_fn self.start_layer self.end_layer self.layers""".split())),
                             ("BailingMoeV3ForCausalLM", *_STATE)], "BailingMoeV3MoE BailingMoeV3MLP", {})  # fmt: skip
NAMESPACES["bailing_moe_v3"] = {"mla_modules": Poison("mla_modules (the restated MLA wrapper does not read them)")}
