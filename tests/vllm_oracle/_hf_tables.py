"""The architecture tables of the vLLM model-reading oracle (:mod:`._hf`): restated glue.

* :data:`ENTRY`: which class each registered ``(module, class)`` is entered at, with what
  prefix, and whether the text model is built from ``config.text_config``;
* :data:`MODELS`: per model file, what is lifted (functions, classes, ``(class, extra
  methods[, the frozenset of names its __init__ keeps])``), the inert names (MLP / MoE / norm classes: no KV) and names taken from
  another file;
* :data:`NAMESPACES`: names a model file's namespace gets besides the common stand-ins;
* :data:`STATE_CLASSES`: where a hybrid-state architecture's ``get_mamba_state_shape_from_config``
  / ``get_mamba_state_dtype_from_config`` (the state layers' shapes and dtypes) are not on the
  class the registry names (Qwen3.5's base and wrapper classes); elsewhere the registered class.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from ._hf_lift import _Rope

#: Oracle convenience for configs without ``architectures`` (vLLM would refuse them).
DEFAULT_ARCH = {
    "llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
    "gemma3": "Gemma3ForConditionalGeneration", "gpt_oss": "GptOssForCausalLM",
    "cohere2": "Cohere2ForCausalLM", "llama4_text": "Llama4ForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM", "deepseek_v2": "DeepseekV2ForCausalLM",
}  # fmt: skip
#: Registered (file, class) -> ("[file:]class entered", its method (None: construct it),
#: prefix, whether the text model is built from ``config.text_config``). Restated glue.
ENTRY = {
    ("llama", "LlamaForCausalLM"): ("LlamaForCausalLM", "_init_model", "model", False),
    ("mistral", "MistralForCausalLM"): ("MistralForCausalLM", "_init_model", "model", False),
    ("llama4", "Llama4ForCausalLM"): ("Llama4ForCausalLM", "_init_model", "model", False),
    ("mllama4", "Llama4ForConditionalGeneration"):
        ("llama4:Llama4ForCausalLM", "_init_model", "language_model.model", True),
    ("qwen2", "Qwen2ForCausalLM"): ("Qwen2Model", None, "model", False),
    ("qwen3", "Qwen3ForCausalLM"): ("Qwen3Model", None, "model", False),
    ("gemma2", "Gemma2ForCausalLM"): ("Gemma2Model", None, "model", False),
    ("gemma3", "Gemma3ForCausalLM"): ("Gemma3Model", None, "model", False),
    ("gemma3_mm", "Gemma3ForConditionalGeneration"):
        ("gemma3:Gemma3Model", None, "language_model.model", True),
    ("gpt_oss", "GptOssForCausalLM"): ("GptOssModel", None, "model", False),
    ("commandr", "CohereForCausalLM"): ("CohereModel", None, "model", False),
    ("deepseek_v2", "DeepseekV2ForCausalLM"): ("DeepseekV2Model", None, "model", False),
    ("deepseek_v2", "DeepseekV3ForCausalLM"): ("DeepseekV2Model", None, "model", False),
    ("deepseek_v2", "DeepseekForCausalLM"): ("DeepseekV2Model", None, "model", False),  # DeepSeek-MoE (remote code)
    # Mistral Large 3: DeepseekV3ForCausalLM with its own weight mapper only
    ("mistral_large_3", "MistralLarge3ForCausalLM"): ("deepseek_v2:DeepseekV2Model", None, "model", False),
    ("llama_eagle", "EagleLlamaForCausalLM"): ("EagleLlamaForCausalLM", None, "", False),
    ("llama_eagle3", "Eagle3LlamaForCausalLM"): ("Eagle3LlamaForCausalLM", None, "", False),
    ("deepseek_mtp", "DeepSeekMTP"): ("DeepSeekMultiTokenPredictor", None, "model", False),
}  # fmt: skip
_QC = "get_quant_config"
#: Model file -> (what is lifted, in order: a function, a class or (class, extra methods);
#: inert names (MLP / MoE classes: no KV); names taken from another file ("file[:name]")).
MODELS: dict[str, tuple[list[Any], str, dict[str, str]]] = {
    "llama": ([("LlamaAttention", "_init_rotary_emb"), ("LlamaDecoderLayer", _QC), "LlamaModel",
               ("LlamaForCausalLM", "_init_model")], "LlamaMLP", {}),
    "mistral": (["MistralAttention", "MistralDecoderLayer", "MistralModel",
                 ("MistralForCausalLM", "_init_model")], "",
                {n: "llama" for n in ("LlamaAttention", "LlamaDecoderLayer", "LlamaModel",
                                      "LlamaForCausalLM")}),
    "qwen2": (["Qwen2Attention", "Qwen2DecoderLayer", "Qwen2Model"], "Qwen2MLP", {}),
    "qwen3": (["Qwen3Attention", "Qwen3DecoderLayer", "Qwen3Model"], "Qwen3MLP",
              {"Qwen2Model": "qwen2"}),
    "gemma2": (["Gemma2Attention", "Gemma2DecoderLayer", "Gemma2Model"], "Gemma2MLP", {}),
    "gemma3": (["Gemma3Attention", "Gemma3DecoderLayer", "Gemma3Model"], "Gemma3MLP", {}),
    "gpt_oss": ([("OAIAttention", "_build_attention"), "TransformerBlock", "GptOssModel"],
                "MLPBlock", {}),
    "commandr": (["select_norm_impl", "CohereAttention", "CohereDecoderLayer", "CohereModel"],
                 "CohereMLP", {}),
    "llama4": (["Llama4Attention", "Llama4DecoderLayer", "Llama4Model",
                ("Llama4ForCausalLM", "_init_model")], "Llama4MoE",
               {"LlamaModel": "llama", "LlamaForCausalLM": "llama", "LlamaMLP": "llama"}),
    "deepseek_v2": (["yarn_get_mscale", "DeepseekAttention", "DeepseekV2Attention", "DeepseekV2MLAAttention",
                     "DeepseekV2DecoderLayer", "DeepseekV2Model", "DeepseekV32IndexerCache"],
                    "DeepseekV2MLP DeepseekV2MoE DeepSeekV2FusedQkvAProjLinear Indexer", {}),
    "llama_eagle": ([("LlamaDecoderLayer", _QC), "LlamaModel", "EagleLlamaForCausalLM"], "",
                    {"BaseLlamaDecoderLayer": "llama:LlamaDecoderLayer"}),
    "llama_eagle3": ([("LlamaDecoderLayer", _QC), "LlamaModel", "Eagle3LlamaForCausalLM"], "",
                     {"_Eagle3LlamaDecoderLayerBase": "llama:LlamaDecoderLayer"}),
    "deepseek_mtp": (["DeepSeekMultiTokenPredictorLayer", "DeepSeekMultiTokenPredictor"],
                     "SharedHead", {"DeepseekV2DecoderLayer": "deepseek_v2"}),
}  # fmt: skip
_STATE = ("get_mamba_state_shape_from_config", "get_mamba_state_dtype_from_config")
ENTRY.update({
    ("qwen3_next", "Qwen3NextForCausalLM"): ("Qwen3NextModel", None, "model", False),
    ("qwen3_5", "Qwen3_5ForCausalLM"): ("Qwen3_5Model", None, "model", False),
    ("qwen3_5", "Qwen3_5MoeForCausalLM"): ("Qwen3_5Model", None, "model", False),
    ("qwen3_5", "Qwen3_5ForConditionalGeneration"): ("Qwen3_5Model", None, "language_model.model", False),
    ("qwen3_5", "Qwen3_5MoeForConditionalGeneration"): ("Qwen3_5Model", None, "language_model.model", False),
    ("nemotron_h", "NemotronHForCausalLM"): ("NemotronHModel", None, "model", False),
    ("granitemoehybrid", "GraniteMoeHybridForCausalLM"): ("GraniteMoeHybridModel", None, "model", False),
    ("falcon_h1", "FalconH1ForCausalLM"): ("FalconH1Model", None, "model", False),
    ("lfm2", "Lfm2ForCausalLM"): ("Lfm2Model", None, "model", False),
    ("lfm2_moe", "Lfm2MoeForCausalLM"): ("Lfm2MoeModel", None, "model", False),
    ("jamba", "JambaForCausalLM"): ("JambaModel", None, "model", False),
    ("mamba", "MambaForCausalLM"): ("MambaModel", None, "backbone", False),
    ("mamba2", "Mamba2ForCausalLM"): ("Mamba2Model", None, "backbone", False),
    ("nemotron_h_mtp", "NemotronHMTP"): ("NemotronHMultiTokenPredictor", None, "mtp", False),
    ("qwen3_next_mtp", "Qwen3NextMTP"): ("Qwen3NextMultiTokenPredictor", None, "mtp", False),
    ("qwen3_5_mtp", "Qwen3_5MTP"): ("Qwen3_5MultiTokenPredictor", None, "mtp", False),
    ("qwen3_5_mtp", "Qwen3_5MoeMTP"): ("Qwen3_5MultiTokenPredictor", None, "mtp", False),
})  # fmt: skip
MODELS.update({
    "qwen3_next": (["_should_use_sequence_parallel", "Qwen3NextAttention", "Qwen3NextDecoderLayer", "Qwen3NextModel",
                    ("Qwen3NextForCausalLM", *_STATE)], "Qwen3NextSparseMoeBlock Qwen3NextMLP Qwen3NextRMSNorm", {}),
    "qwen3_5": (["Qwen3_5DecoderLayer", "Qwen3_5Model", ("Qwen3_5ForCausalLMBase", *_STATE),
                 ("Qwen3_5ForConditionalGeneration", *_STATE)], "Qwen3_5RMSNorm Qwen3NextMLP mrope_positions_factor",
                {n: "qwen3_next" for n in ("Qwen3NextAttention", "Qwen3NextDecoderLayer", "Qwen3NextModel",
                                           "Qwen3NextSparseMoeBlock")}),
    "nemotron_h": (["NemotronHMLPDecoderLayer", "NemotronHMoEDecoderLayer", "NemotronHMambaDecoderLayer",
                    "NemotronHAttention", "NemotronHAttentionDecoderLayer", "ALL_DECODER_LAYER_TYPES",
                    "NemotronHModel", ("NemotronHForCausalLM", *_STATE)], "NemotronHMLP NemotronHMoE", {}),
    "granitemoehybrid": (["GraniteMoeHybridMambaDecoderLayer", "GraniteMoeHybridAttention",
                          "GraniteMoeHybridAttentionDecoderLayer", "ALL_DECODER_LAYER_TYPES", "GraniteMoeHybridModel",
                          ("GraniteMoeHybridForCausalLM", *_STATE)], "GraniteMoeMoE GraniteMoeSharedMLP", {}),
    "falcon_h1": ([("FalconH1SSMDecoderLayer", "_init_mup_vector"), "FalconH1AttentionDecoderLayer",
                   "FalconH1ParallelHybrid", "FalconH1Model", ("FalconH1ForCausalLM", *_STATE)], "FalconH1MLP", {}),
    "lfm2": (["Lfm2Attention", "Lfm2AttentionDecoderLayer", "Lfm2ShortConvDecoderLayer", "Lfm2Model",
              ("Lfm2ForCausalLM", *_STATE)], "Lfm2MLP Lfm2BidirectionalShortConv", {}),
    # the MoE block: only its TP check (tp above the experts raises)
    "lfm2_moe": ([("Lfm2MoeSparseMoeBlock", frozenset({"self.tp_size", "self.n_routed_experts"})),
                  "Lfm2MoeAttention", "Lfm2MoeAttentionDecoderLayer", "Lfm2MoeShortConvDecoderLayer", "Lfm2MoeModel",
                  ("Lfm2MoeForCausalLM", *_STATE)], "Lfm2MoeMlp", {}),
    "jamba": (["JambaMambaDecoderLayer", "JambaAttentionDecoderLayer", "ALL_DECODER_LAYER_TYPES", "JambaModel",
               ("JambaForCausalLM", *_STATE)], "JambaMoE JambaMLP", {}),
    "mamba": (["MambaDecoderLayer", "MambaModel", ("MambaForCausalLM", *_STATE)], "", {}),
    "mamba2": (["Mamba2DecoderLayer", "Mamba2Model", ("Mamba2ForCausalLM", *_STATE)], "", {}),
    "nemotron_h_mtp": (["NemotronHMTPAttentionDecoderLayer", "NemotronHMTPMoEDecoderLayer",
                        "NemotronHMultiTokenPredictor"], "", {n: "nemotron_h" for n in (
        "NemotronHAttentionDecoderLayer", "NemotronHMoEDecoderLayer")}),
    "qwen3_next_mtp": (["Qwen3NextMultiTokenPredictor"], "", {n: "qwen3_next" for n in (
        "Qwen3NextDecoderLayer", "Qwen3NextModel", "Qwen3NextRMSNorm", "Qwen3NextSparseMoeBlock")}),
    "qwen3_5_mtp": (["Qwen3_5MultiTokenPredictor"], "", {
        **{n: "qwen3_5" for n in ("Qwen3_5DecoderLayer", "Qwen3_5Model", "Qwen3_5RMSNorm")},
        "Qwen3NextSparseMoeBlock": "qwen3_next"}),
})  # fmt: skip
# Kimi-Linear lives in a new-style package (``vllm/models/kimi_k3``, NVIDIA branch): model files
# named by their path under ``vllm/``. What each class's ``__init__`` keeps (see ``_picker``): the
# layer kinds, heads and registration; no MoE, kernels or streams.
_KIMI = "models/kimi_k3/nvidia/model"
_KIMI_MLA = "models/kimi_k3/nvidia/mla"
ENTRY[("vllm.models.kimi_k3", "KimiLinearForCausalLM")] = (f"{_KIMI}:KimiLinearModel", None, "model", False)
MODELS.update({
    "model_executor/layers/mamba/gdn/base": ([("GatedDeltaNetAttention", frozenset(
        "self.prefix self.tp_size self.model_config self.cache_config self.speculative_config self.num_spec".split()))],
        "", {}),
    "model_executor/layers/mamba/gdn/kimi_gdn_linear_attn": ([("KimiGatedDeltaNetAttention", frozenset(
        """kda_config self.head_dim self.num_heads self.local_num_heads self.projection_size self.local_projection_size
        self.conv_size compilation_config compilation_config.static_forward_context[prefix]""".split()))], "",
        {"GatedDeltaNetAttention": "model_executor/layers/mamba/gdn/base"}),
    _KIMI_MLA: ([("MultiHeadLatentAttention", frozenset(
        """self.qk_nope_head_dim self.qk_rope_head_dim self.qk_head_dim self.v_head_dim self.kv_lora_rank self.head_size
        self.layer_name tp_size self.num_local_heads self.kv_cache_dtype vllm_config parallel_config
        compilation_config compilation_config.static_forward_context[prefix]
        self.non_causal_multi_token_decode""".split()))], "", {}),
    _KIMI: ([("KimiDecoderLayer", frozenset(
        """self.hidden_size self.layer_idx self.is_moe layer_idx cache_config quant_config parallel_config kda_config
        self.self_attn qk_nope_head_dim qk_rope_head_dim v_head_dim kv_lora_rank mla_use_nope""".split())),
             ("KimiLinearModel", frozenset(
        """config self.config parallel_config use_mega_moe self.use_sequence_parallel self.run_gemm_rs_ar aux_stream
        get_layer self.start_layer self.end_layer self.layers world_size""".split())),
             ("KimiLinearForCausalLM", *_STATE)], "KimiMLP KimiMoE",
            {"MultiHeadLatentAttention": _KIMI_MLA,
             "KimiLinearGatedDeltaNetAttention": "model_executor/layers/mamba/gdn/kimi_gdn_linear_attn:"
                                                 "KimiGatedDeltaNetAttention"}),
})  # fmt: skip
# Multimodal wrappers of a hybrid-state text model: their text model is built through
# ``init_vllm_registered_model`` (:mod:`._wrappers`); only the wrapper's own state classmethods are
# lifted (LFM2-VL's own short-conv shape over the text config's hidden size; Nemotron-H VL / Omni's
# NemotronHForCausalLM's, on ``with_hf_config(text_config)``). Their ``__init__`` is never run.
MODELS.update({
    "lfm2_vl": ([("Lfm2VLForConditionalGeneration", *_STATE)], "", {}),
    "nano_nemotron_vl": ([("NemotronH_Nano_VL_V2", *_STATE)], "", {"NemotronHForCausalLM": "nemotron_h"}),
})  # fmt: skip
#: Hybrid-state architecture -> (model file, the class holding its state classmethods), where that
#: is not the registered class (vLLM's registry gives the rest; the MoE wrapper's classmethods are
#: the dense wrapper's, which it derives from).
STATE_CLASSES: dict[str, tuple[str, str]] = {
    "Qwen3_5ForCausalLM": ("qwen3_5", "Qwen3_5ForCausalLMBase"),
    "Qwen3_5MoeForCausalLM": ("qwen3_5", "Qwen3_5ForCausalLMBase"),
    "Qwen3_5MoeForConditionalGeneration": ("qwen3_5", "Qwen3_5ForConditionalGeneration"),
    "KimiLinearForCausalLM": (_KIMI, "KimiLinearForCausalLM"),
}

# Dense and MoE decoders of full-attention layers: the MoE / MLP blocks are inert (no KV).
ENTRY.update({
    ("qwen3_moe", "Qwen3MoeForCausalLM"): ("Qwen3MoeModel", None, "model", False),
    ("qwen2_moe", "Qwen2MoeForCausalLM"): ("Qwen2MoeModel", None, "model", False),
    ("mixtral", "MixtralForCausalLM"): ("MixtralModel", None, "model", False),
    ("glm4_moe", "Glm4MoeForCausalLM"): ("Glm4MoeModel", None, "model", False),
    ("minimax_m2", "MiniMaxM2ForCausalLM"): ("MiniMaxM2Model", None, "model", False),
    ("gemma", "GemmaForCausalLM"): ("GemmaModel", None, "model", False),
    ("granite", "GraniteForCausalLM"): ("GraniteModel", None, "model", False),
    ("phimoe", "PhiMoEForCausalLM"): ("PhiMoEModel", None, "model", False),
    ("nemotron", "NemotronForCausalLM"): ("NemotronModel", None, "model", False),
})  # fmt: skip
MODELS.update({
    "qwen3_moe": (["Qwen3MoeAttention", "Qwen3MoeDecoderLayer", "Qwen3MoeModel"],
                  "Qwen3MoeMLP Qwen3MoeSparseMoeBlock", {}),
    "qwen2_moe": (["Qwen2MoeAttention", "Qwen2MoeDecoderLayer", "Qwen2MoeModel"],
                  "Qwen2MoeMLP Qwen2MoeSparseMoeBlock", {}),
    "mixtral": (["MixtralAttention", "MixtralDecoderLayer", "MixtralModel"], "MixtralMoE", {}),
    "phimoe": (["PhiMoEAttention", "PhiMoEDecoderLayer", "PhiMoEModel"], "PhiMoE", {}),
    "glm4_moe": (["Glm4MoeAttention", "Glm4MoeDecoderLayer", "Glm4MoeModel"], "Glm4MoeMLP Glm4MoE", {}),
    "minimax_m2": (["MiniMaxM2Attention", "MiniMaxM2DecoderLayer", "MiniMaxM2Model"],
                   "MiniMaxM2MoE MiniMaxText01RMSNormTP", {}),
    "gemma": (["GemmaAttention", "GemmaDecoderLayer", "GemmaModel"], "GemmaMLP", {}),
    "granite": (["granite_layer_attn_params", "GraniteAttention", "GraniteDecoderLayer", "GraniteModel"],
                "GraniteMLP set_weight_attrs sharded_weight_loader", {}),  # the SWA checkpoints' sinks: weights
    "nemotron": (["NemotronAttention", "NemotronDecoderLayer", "NemotronModel"], "NemotronMLP NemotronLayerNorm1P",
                 {}),
})  # fmt: skip
ENTRY.update({
    ("phi3", "Phi3ForCausalLM"): ("llama:LlamaForCausalLM", "_init_model", "model", False),
    ("ernie45", "Ernie4_5ForCausalLM"): ("llama:LlamaForCausalLM", "_init_model", "model", False),
    ("mimo", "MiMoForCausalLM"): ("qwen2:Qwen2Model", None, "model", False),
    ("exaone4", "Exaone4ForCausalLM"): ("Exaone4Model", None, "model", False),
    ("olmoe", "OlmoeForCausalLM"): ("OlmoeModel", None, "model", False),
    ("granitemoe", "GraniteMoeForCausalLM"): ("GraniteMoeModel", None, "model", False),
    ("granitemoeshared", "GraniteMoeSharedForCausalLM"): ("GraniteMoeSharedModel", None, "model", False),
    ("glm4", "Glm4ForCausalLM"): ("Glm4Model", None, "model", False),
    ("ernie45_moe", "Ernie4_5_MoeForCausalLM"): ("Ernie4_5_MoeModel", None, "model", False),
    ("hyperclovax", "HyperCLOVAXForCausalLM"): ("HyperCLOVAXModel", None, "model", False),
    ("apertus", "ApertusForCausalLM"): ("ApertusModel", None, "model", False),
})  # fmt: skip
_SINKS = "set_weight_attrs sharded_weight_loader"
MODELS.update({
    "exaone4": (["Exaone4Attention", "Exaone4DecoderLayer", "Exaone4Model"], "Exaone4GatedMLP", {}),
    "olmoe": (["OlmoeAttention", "OlmoeDecoderLayer", "OlmoeModel"], "OlmoeMoE", {}),
    "granitemoe": (["GraniteMoeAttention", "GraniteMoeDecoderLayer", "GraniteMoeModel"], f"GraniteMoeMoE {_SINKS}",
                   {"granite_layer_attn_params": "granite"}),
    "granitemoeshared": (["GraniteMoeSharedDecoderLayer", "GraniteMoeSharedModel"], "GraniteMoeSharedMLP",
                         {n: "granitemoe" for n in ("GraniteMoeAttention", "GraniteMoeModel", "GraniteMoeMoE")}),
    "glm4": (["Glm4Attention", "Glm4DecoderLayer", "Glm4Model"], "", {"LlamaModel": "llama", "Glm4MLP": "llama:LlamaMLP"}),
    "ernie45_moe": (["Ernie4_5_MoeAttention", "Ernie4_5_MoeDecoderLayer", "Ernie4_5_MoeModel"],
                    "Ernie4_5_MoeMLP Ernie4_5_MoeMoE", {}),
    "hyperclovax": (["HyperCLOVAXAttention", "HyperCLOVAXDecoderLayer", "HyperCLOVAXModel"], "HyperCLOVAXMLP", {}),
    "apertus": ([("ApertusAttention", "_init_rotary_emb"), "ApertusDecoderLayer", "ApertusModel"], "ApertusMLP", {}),
})  # fmt: skip
# Multimodal wrappers that build their text model's class directly (Qwen3-VL and its MoE): that
# class, its __init__ kept to what builds the decoder (the LM head and logits processor own no KV).
_LLM_KEEP = frozenset("config quant_config self.config self.quant_config self.model".split())
MODELS.update({
    "qwen3_vl": (["mrope_positions_factor", "Qwen3VLDecoderLayer", "Qwen3LLMModel",
                  ("Qwen3LLMForCausalLM", _LLM_KEEP)], "", {"Qwen3DecoderLayer": "qwen3", "Qwen3Model": "qwen3"}),
    "qwen3_vl_moe": (["Qwen3VLMoeDecoderLayer", "Qwen3MoeLLMModel", ("Qwen3MoeLLMForCausalLM", _LLM_KEEP)], "",
                     {"Qwen3MoeDecoderLayer": "qwen3_moe", "Qwen3MoeModel": "qwen3_moe",
                      "mrope_positions_factor": "qwen3_vl"}),
    # Qwen3-Omni's thinker: its own Qwen3MoeLLMModel over Qwen3-MoE's decoder layers
    "qwen3_omni_moe_thinker": (["Qwen3MoeLLMModel", ("Qwen3MoeLLMForCausalLM", _LLM_KEEP)], "",
                               {"Qwen3MoeModel": "qwen3_moe"}),
    # Granite 4 Vision: its GraniteForCausalLM over its GraniteModel (deepstack in forward only)
    "granite4_vision": (["Granite4VisionLLMModel", ("Granite4VisionLLMForCausalLM", _LLM_KEEP)], "",
                        {"GraniteModel": "granite"}),
    # Idefics3 (and SmolVLM, an Idefics3 class): Idefics3Model builds vLLM's LlamaModel itself on
    # with_hf_config(config.text_config); its __init__ kept to that (no vision tower or connector)
    "idefics3": ([("Idefics3Model", frozenset("config self.config self.text_model".split()))], "",
                 {"LlamaModel": "llama"}),
})  # fmt: skip
#: Restated glue: wrappers whose ``__init__`` merges its text config into the model's own (the
#: statement is lifted, see ``_hf._merge_code``) and builds a registered class on it -> (that
#: class's architecture, the prefix). PaddleOCR-VL: vLLM's Ernie 4.5 (its Llama class).
MERGES: dict[tuple[str, str], tuple[str, str]] = {
    ("paddleocr_vl", "PaddleOCRVLForConditionalGeneration"): ("Ernie4_5ForCausalLM", "language_model"),
}
# Aria: AriaTextModel (vLLM's LlamaModel over AriaTextDecoderLayer: Llama's attention, an MoE MLP).
MODELS["aria"] = (["AriaTextDecoderLayer", "AriaTextModel"], "AriaTextMoELayer",
                  {"LlamaDecoderLayer": "llama", "LlamaModel": "llama"})  # fmt: skip
# Restated glue: Idefics3ForConditionalGeneration.__init__ builds Idefics3Model under ``model``;
# AriaForConditionalGeneration's builds AriaTextModel on its text config under ``language_model.model``.
ENTRY.update({
    ("aria", "AriaForConditionalGeneration"): ("AriaTextModel", None, "language_model.model", True),
    ("idefics3", "Idefics3ForConditionalGeneration"): ("Idefics3Model", None, "model", False),
    ("smolvlm", "SmolVLMForConditionalGeneration"): ("idefics3:Idefics3Model", None, "model", False),
})  # fmt: skip
ENTRY.update({
    ("stablelm", "StablelmForCausalLM"): ("StableLMEpochModel", None, "model", False),
    ("afmoe", "AfmoeForCausalLM"): ("AfmoeModel", None, "model", False),
})  # fmt: skip
MODELS.update({
    "stablelm": (["StablelmAttention", "StablelmDecoderLayer", "StableLMEpochModel"], "StablelmMLP", {}),
    "afmoe": (["AfmoeAttention", "AfmoeDecoderLayer", "AfmoeModel"], "AfmoeMoE AfmoeMLP", {}),
})  # fmt: skip
# Classic MHA / MQA decoders, entered at the registered class: its __init__ kept to what builds
# the decoder and the asserts on the config (GPT-J refuses tied embeddings there), no LM head.
_WRAP = "config quant_config self.config self.quant_config".split()
_TRANSFORMER, _MODEL = frozenset([*_WRAP, "self.transformer"]), frozenset([*_WRAP, "self.model"])
ENTRY.update({
    ("gpt2", "GPT2LMHeadModel"): ("GPT2LMHeadModel", None, "", False),
    ("gpt_j", "GPTJForCausalLM"): ("GPTJForCausalLM", None, "", False),
    ("opt", "OPTForCausalLM"): ("OPTForCausalLM", None, "", False),
    ("bloom", "BloomForCausalLM"): ("BloomForCausalLM", None, "", False),
    ("falcon", "FalconForCausalLM"): ("FalconForCausalLM", None, "", False),
    ("chatglm", "ChatGLMForCausalLM"): ("ChatGLMForCausalLM", None, "", False),
})  # fmt: skip
MODELS.update({
    "gpt2": (["GPT2Attention", "GPT2Block", "GPT2Model", ("GPT2LMHeadModel", _TRANSFORMER)], "GPT2MLP", {}),
    "gpt_j": (["GPTJAttention", "GPTJBlock", "GPTJModel", ("GPTJForCausalLM", _TRANSFORMER)], "GPTJMLP", {}),
    "opt": (["OPTAttention", "OPTDecoderLayer", "OPTDecoder", "OPTModel", ("OPTForCausalLM", _MODEL)],
            "OPTLearnedPositionalEmbedding get_act_fn", {}),
    "bloom": (["_get_alibi_slopes", "BloomAttention", "BloomBlock", "BloomModel", ("BloomForCausalLM", _TRANSFORMER)],
              "BloomMLP", {}),
    "falcon": (["_get_alibi_slopes", "FalconAttention", "FalconDecoderLayer", "FalconModel",
                ("FalconForCausalLM", _TRANSFORMER)], "FalconMLP", {}),
    # ChatGLM: its class refuses a vision config, then its base builds the decoder (no LM head)
    "chatglm": (["GLMAttention", "GLMBlock", "GLMTransformer", "ChatGLMModel", ("ChatGLMBaseModel", _TRANSFORMER),
                 "ChatGLMForCausalLM"], "GLMMLP", {}),
})  # fmt: skip
#: Model file -> names its namespace gets besides the common stand-ins (restated): Qwen3-Next's and
#: Qwen3.5's attention probes its rope with getattr defaults; Bloom and Falcon compute their ALiBi
#: slopes (``_get_alibi_slopes``, lifted) with torch and math; ChatGLM's refusal writes JSON.
NAMESPACES: dict[str, dict[str, Any]] = {
    **{m: {"get_rope": lambda **kw: _Rope(), "MRotaryEmbedding": _Rope} for m in ("qwen3_next", "qwen3_5")},
    **{m: {"torch": torch, "math": math} for m in ("bloom", "falcon")},
    "chatglm": {"json": json},  # its vision-config refusal names the override as JSON
}
# TeleFLM: vLLM's Llama class and its own muP statements; LlamaForCausalLM lifted into its namespace
# with its __init__ kept to what builds the decoder (no LM head).
ENTRY[("teleflm", "TeleFLMForCausalLM")] = ("TeleFLMForCausalLM", None, "", False)
MODELS["teleflm"] = ([("llama:LlamaForCausalLM", "_init_model", frozenset([*_WRAP, "self.model"])),
                      ("TeleFLMForCausalLM", frozenset(
                          """self.use_mup self.mup_scale_factor self.output_mult logit_scale
                          self.logits_processor""".split()))],
                     "", {"LlamaModel": "llama", "LlamaDecoderLayer": "llama"})  # fmt: skip
# Gemma 4 and Gemma 3n (KV sharing; Gemma 4's per-layer head sizes): entered at the text model, its
# __init__ kept to the decoder layers it builds (no embeddings, PLE / AltUp projections or the YOCO
# split, which own no KV); the decoder layers and attention whole (Gemma 3n's: its asserts, AltUp,
# attention and MLP, whose activation check is a refusal).
_G_MODEL = frozenset("""config cache_config quant_config self.config self.quant_config self.start_layer self.end_layer
self.layers""".split())
ENTRY.update({
    ("gemma4", "Gemma4ForCausalLM"): ("Gemma4Model", None, "model", False),
    ("gemma3n", "Gemma3nForCausalLM"): ("Gemma3nTextModel", None, "model", False),
})  # fmt: skip
MODELS.update({
    "gemma4": (["_get_text_config", ("Gemma4Router", frozenset()), "Gemma4Attention", "Gemma4DecoderLayer",
                ("Gemma4Model", _G_MODEL)], "Gemma4MLP FusedMoEFactory", {}),  # the router: its methods, unbuilt
    "gemma3n": (["Gemma3nMLP", "Gemma3nAttention", ("Gemma3nDecoderLayer", frozenset(
        "isinstance Gemma3nTextConfig self.altup_active_idx self.altup self.self_attn self.mlp".split())),
                 ("Gemma3nTextModel", _G_MODEL)],
                "Gemma3nAltUp Gemma3nLaurelBlock GeluAndMul GeluAndMulSparse", {}),
})  # fmt: skip
NAMESPACES["gemma3n"] = {"Gemma3nTextConfig": __import__("transformers").Gemma3nTextConfig}
# MLA-attention families beside DeepSeek's (tests/test_vllm_mla_families.py): MiniCPM3 (its own
# attention: a plain Attention of the decompressed heads), GLM-4.7-Flash (Glm4MoeLite: DeepSeek-V2's
# MLA attention in its own decoder layer) and LongCat-Flash (two DeepSeek-V2 MLA attentions per
# decoder layer, ``config.num_layers`` of them; the n-gram variant's model on the same decoder).
# MLP / MoE blocks and embeddings are inert (no KV).
ENTRY.update({
    ("minicpm3", "MiniCPM3ForCausalLM"): ("MiniCPM3Model", None, "model", False),
    ("glm4_moe_lite", "Glm4MoeLiteForCausalLM"): ("Glm4MoeLiteModel", None, "model", False),
    ("longcat_flash", "LongcatFlashForCausalLM"): ("FlashModel", None, "model", False),
    ("longcat_flash_ngram", "LongcatFlashNgramForCausalLM"): ("FlashNgramModel", None, "model", False),
})  # fmt: skip
MODELS.update({
    "minicpm": (["MiniCPMAttention", ("MiniCPMDecoderLayer", "_init_attn_block", "_init_ffn_block"),
                 ("MiniCPMModel", "_init_layers")], "MiniCPMMLP MiniCPMMoE", {}),
    "minicpm3": (["MiniCPM3Attention", ("MiniCPM3DecoderLayer", "_init_attn_block"),
                  ("MiniCPM3Model", "_init_layers")], "",
                 {"MiniCPMDecoderLayer": "minicpm", "MiniCPMModel": "minicpm"}),
    "glm4_moe_lite": (["Glm4MoeLiteAttention", "Glm4MoeLiteMLAAttention", "Glm4MoeLiteDecoderLayer",
                       "Glm4MoeLiteModel"], "Glm4MoeLiteMLP Glm4MoeLite Glm4LiteMixtureOfExperts",
                      {"DeepseekV2Attention": "deepseek_v2", "DeepseekV2MLAAttention": "deepseek_v2"}),
    "longcat_flash": (["FlashDecoderLayer", "FlashModel"], "FlashMLP LongcatMoe LongcatRouter",
                      {"DeepseekV2MLAAttention": "deepseek_v2"}),
    "longcat_flash_ngram": (["uses_ngram_embedding", "FlashNgramModel"], "NgramEmbedding",
                            {"FlashModel": "longcat_flash"}),
})  # fmt: skip


def _longcat_lora_scales(self_attn: Any, config: Any) -> None:
    """Restated ``scale_mla_lora_norms_on_load`` (``longcat_flash.py``) without its weight loaders:
    the tuple it builds (the norms, ``q_lora_rank`` / ``kv_lora_rank`` and ``mla_scale_q_lora`` /
    ``mla_scale_kv_lora``, which a config without them fails on) and the scale of each enabled one."""
    for _norm, rank, enabled in (
        (self_attn.q_a_layernorm, config.q_lora_rank, config.mla_scale_q_lora),
        (self_attn.kv_a_layernorm, config.kv_lora_rank, config.mla_scale_kv_lora),
    ):
        if enabled:
            _ = (config.hidden_size / rank) ** 0.5


NAMESPACES["longcat_flash"] = {"scale_mla_lora_norms_on_load": _longcat_lora_scales}
# Zamba2 (tests/test_vllm_zamba2.py): the model class whole (its shared attention blocks, each
# registering one Attention per hybrid layer it serves, and a MambaMixer2 per layer); LoRA adapters
# and MLPs inert; ``cycle`` is itertools'.
ENTRY[("zamba2", "Zamba2ForCausalLM")] = ("Zamba2Model", None, "model", False)
MODELS["zamba2"] = (["Zamba2Attention", "Zamba2AttentionDecoderLayer", "Zamba2MambaDecoderLayer", "Zamba2HybridLayer",
                     "Zamba2Model", ("Zamba2ForCausalLM", *_STATE)], "Zamba2LoRA Zamba2MLP", {})  # fmt: skip
NAMESPACES["zamba2"] = {"cycle": __import__("itertools").cycle}
# EXAONE-MoE: its model's __init__ kept to the decoder layers; the MoE block's TP check (tp above the
# experts raises) and nothing else of it.
ENTRY[("exaone_moe", "ExaoneMoeForCausalLM")] = ("ExaoneMoeModel", None, "model", False)
MODELS["exaone_moe"] = ([("ExaoneMoe", frozenset({"self.tp_size"})), "ExaoneMoeAttention", "ExaoneMoeDecoderLayer",
                         ("ExaoneMoeModel", _G_MODEL)], "ExaoneMoeGatedMLP", {})  # fmt: skip
# Laguna: its model's __init__ kept to the decoder layers and its edit of the cache config (no
# model-wide window); the decoder, attention and dense MLP whole, the MoE block's TP check.
ENTRY[("laguna", "LagunaForCausalLM")] = ("LagunaModel", None, "model", False)
MODELS["laguna"] = (["get_mlp_layer_types", "LagunaMLP", ("LagunaMoE", frozenset({"self.tp_size"})),
                     "LagunaAttention", "LagunaDecoderLayer",
                     ("LagunaModel", _G_MODEL | {"cache_config.sliding_window", "enable_eplb"})], "", {})  # fmt: skip
# OLMo Hybrid (tests/test_vllm_olmo_hybrid.py): its decoder whole; the gated delta net's __init__ kept
# to its dims, its linear_use_gate assertion and its registration (the GDN base's as Kimi's above).
_OLMO_GDN = "model_executor/layers/mamba/gdn/olmo_gdn_linear_attn"
ENTRY[("olmo_hybrid", "OlmoHybridForCausalLM")] = ("OlmoHybridModel", None, "model", False)
MODELS.update({
    _OLMO_GDN: ([("OlmoHybridGatedDeltaNetAttention", frozenset(
        """getattr self.num_k_heads self.num_v_heads self.head_k_dim self.head_v_dim self.conv_kernel_size self.key_dim
        self.value_dim compilation_config compilation_config.static_forward_context[prefix]""".split()))], "",
        {"GatedDeltaNetAttention": "model_executor/layers/mamba/gdn/base"}),
    "olmo_hybrid": (["OlmoHybridAttention", "OlmoHybridDecoderLayer", "OlmoHybridModel",
                     ("OlmoHybridForCausalLM", *_STATE)], "OlmoHybridMLP",
                    {"OlmoHybridGatedDeltaNetAttention": f"{_OLMO_GDN}:OlmoHybridGatedDeltaNetAttention"}),
})  # fmt: skip
# Cohere2-MoE: its model's __init__ kept to the decoder layers, the decoder's to its attention and
# MLP choice, the MoE block's TP check. Restated: the attention / MoE dual stream off (on CUDA it
# registers each decoder layer, which owns no KV, in the forward context).
ENTRY[("cohere2_moe", "Cohere2MoeForCausalLM")] = ("Cohere2MoeModel", None, "model", False)
MODELS["cohere2_moe"] = (["is_prefix_dense_layer", ("Cohere2Moe", frozenset({"self.tp_size"})), "Cohere2MoeAttention",
                          ("Cohere2MoeDecoderLayer", frozenset(
                              "self.config self.hidden_size self.layer_idx self.self_attn self.mlp".split())),
                          ("Cohere2MoeModel", _G_MODEL | {"self._moe_stream"})], "Cohere2MoeMLP", {})  # fmt: skip
NAMESPACES["cohere2_moe"] = {"_make_dual_stream": lambda vllm_config: None}
# Muse Glimmer (MuseGlimmerForCausalLM, which also serves MuseGlimmerForConditionalGeneration):
# entered at its text model (the vision encoder owns no KV); its __init__ kept to the decoder layers.
ENTRY[("muse_glimmer", "MuseGlimmerForCausalLM")] = ("MuseGlimmerModel", None, "model", False)
MODELS["muse_glimmer"] = (["_text_config", "MuseGlimmerMLP", "MuseGlimmerAttention", "MuseGlimmerDecoderLayer",
                           ("MuseGlimmerModel", _G_MODEL)], "MuseGlimmerRMSNorm", {})  # fmt: skip
# AXK1: its model's __init__ kept to the decoder layers; the decoder and its MLA attention whole
# (MultiHeadLatentAttentionWrapper restated above), the dense MLP (DeepSeek-V2's, lifted here for its
# activation check) whole, the MoE block's asserts and activation check.
ENTRY[("AXK1", "AXK1ForCausalLM")] = ("AXK1Model", None, "model", False)
MODELS["AXK1"] = (["_get_mlp_layer_types", ("deepseek_v2:DeepseekV2MLP", frozenset()), "AXK1MLP",
                   ("AXK1MoE", frozenset({"self.tp_size"})), "AXK1MLAAttention",
                   ("AXK1DecoderLayer", "_is_layer_sparse"), ("AXK1Model", _G_MODEL)], "AXK1Attention",
                  {"yarn_get_mscale": "deepseek_v2"})  # fmt: skip
# HunYuan V3: its model's __init__ kept to the decoder layers and its scan for a MoE layer (a
# pipeline stage without one raises); the decoder and dense MLP whole; the attention kept to its
# geometry, asserts and Attention (not its fused HPC RoPE kernel); the MoE block kept to its TP
# check, the config keys it reads and its shared MLP (the activation check).
ENTRY[("hy_v3", "HYV3ForCausalLM")] = ("HYV3Model", None, "model", False)
MODELS["hy_v3"] = (["HYV3FeedForward", ("HYV3MoEFused", frozenset(
    """self.tp_size self.n_routed_experts top_k intermediate_size router_scaling_factor vllm_config eplb_config
    self.enable_eplb self.n_redundant_experts self.shared_mlp self.expert_bias scoring_func e_score_correction_bias
    self.experts""".split())), ("HYV3Attention", frozenset(
        """tp_size self.hidden_size self.total_num_heads self.num_heads self.total_num_kv_heads self.num_kv_heads
        self.head_dim self.scaling self.attn""".split()) | {"if self.total_num_kv_heads >= tp_size"}),
                    "HYV3DecoderLayer",
                    ("HYV3Model", _G_MODEL | {"self.moe_layers", "example_layer", "layer", "if example_layer is None"})],
                   "HpcRopeNorm FusedMoEFactory", {})  # fmt: skip
# restated: make_layers' PPMissingLayer is the oracle's inert Poison (HYV3Model skips those layers)
NAMESPACES["hy_v3"] = {"PPMissingLayer": __import__("oracle_kit.strict", fromlist=["Poison"]).Poison}
# MiMo-V2-Flash: its model's __init__ kept to the decoder layers; the decoder whole (its edit of the
# cache config included), the attention kept to its geometry, sinks and Attention (restated: no
# DiffKV backend selection, which owns no KV of its own: attn_backend None); the MoE block's checks.
ENTRY[("mimo_v2", "MiMoV2FlashForCausalLM")] = ("MiMoV2Model", None, "model", False)
ENTRY[("mimo_v2", "MiMoV2ForCausalLM")] = ENTRY[("mimo_v2", "MiMoV2FlashForCausalLM")]  # its subclass, as new configs name it
MODELS["mimo_v2"] = (["_fused_qkv_kv_chunk_rows", "MiMoV2MLP", ("MiMoV2MoE", frozenset({"config", "self.tp_size"})),
                      ("MiMoV2Attention", frozenset(
                          """self.hidden_size self.layer_id tp_size self.total_num_heads self.num_heads
                          self.total_num_kv_heads self.num_kv_heads self.head_dim self.v_head_dim self.scaling
                          self.attention_sink_bias sliding_window self.attn""".split())),
                      ("MiMoV2FlashDecoderLayer", "is_moe_layer", "is_compressed_softmax_layer"),
                      ("MiMoV2Model", _G_MODEL)], "", {})  # fmt: skip
NAMESPACES["mimo_v2"] = {"attn_backend": None}
# DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5) in its new-style package, NVIDIA branch
# (``vllm/models/deepseek_v32/__init__.py`` names ``nvidia.model``'s class for both architectures).
# What each ``__init__`` keeps: the layer index and the indexer's skip rule, the MLA geometry and
# TP assert, the indexer's key cache (``DeepseekV32IndexerCache``, lifted whole from
# ``deepseek_v2.py``) and the registrations; the top-k buffer is built on the meta device.
_DSA = "models/deepseek_v32/nvidia/model"
_DSA_ATTN = "models/deepseek_v32/attention"
for _arch in ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"):
    ENTRY[("vllm.models.deepseek_v32", _arch)] = (f"{_DSA}:DeepseekV32Model", None, "model", False)
MODELS.update({
    _DSA_ATTN: ([("DeepseekV32Indexer", frozenset("self.head_dim self.quant_block_size self.k_cache".split())),
                 ("DeepseekV32Attention", frozenset(
                     """hidden_size qk_nope_head_dim qk_rope_head_dim v_head_dim q_lora_rank kv_lora_rank num_heads
                     tp_size num_local_heads qk_head_dim scaling max_position_embeddings layer_id index_topk_freq
                     index_topk_pattern index_skip_topk_offset skip_topk num_hidden_layers is_mtp_layer kv_b_proj
                     indexer quant_config cache_config self.num_local_heads self.indexer""".split()
                     + ["if config.rope_parameters['rope_type'] != 'default'",
                        "if config.rope_parameters['rope_type'] == 'deepseek_yarn'",
                        "if index_topk_pattern is None", "if not skip_topk or is_mtp_layer"]))],
                "", {"DeepseekV32IndexerCache": "deepseek_v2", "yarn_get_mscale": "deepseek_v2"}),
    _DSA: ([("DeepseekV32DecoderLayer", frozenset(
                "config quant_config parallel_config self.hidden_size layer_idx self.layer_idx self.self_attn".split()
                + ["if config is None"])),
            ("DeepseekV32Model", frozenset(
                """config self.config self.device self.topk_indices_buffer index_group_builder self.start_layer
                self.end_layer self.layers""".split()))],
           "", {"DeepseekV32Attention": _DSA_ATTN}),
})  # fmt: skip
NAMESPACES[_DSA] = {"current_platform": __import__("oracle_kit.strict", fromlist=["StrictModule"]).StrictModule(
    "current_platform", {"device_type": "meta"})}  # restated: the top-k buffer on the meta device
# DSA's MTP drafter (``DeepseekV32MTP``, ``nvidia/mtp.py``; SpeculativeConfig names it
# ``DeepseekV32MTPModel``), entered at its predictor (prefix ``model``, as the wrapper builds it):
# its layer range, and each layer's draft config, top-k buffer and ``DeepseekV32DecoderLayer``
# (not its norms, projection, shared head or embedding: no KV).
_DSA_MTP = "models/deepseek_v32/nvidia/mtp"
ENTRY[("vllm.models.deepseek_v32", "DeepseekV32MTP")] = (f"{_DSA_MTP}:DeepseekV32MultiTokenPredictor", None, "model",
                                                         False)  # fmt: skip
MODELS[_DSA_MTP] = ([("DeepseekV32MultiTokenPredictorLayer", frozenset(
                        "config self.config topk_indices_buffer index_group_builder self.mtp_block".split())),
                     ("DeepseekV32MultiTokenPredictor", frozenset(
                         "config self.mtp_start_layer_idx self.num_mtp_layers self.layers".split()))],
                    "", {"DeepseekV32DecoderLayer": _DSA})  # fmt: skip
NAMESPACES[_DSA_MTP] = NAMESPACES[_DSA]
# HunYuan-V4 (``vllm/models/hy_v4``, NVIDIA branch): MLA with DSA on its sparse layer kinds, the
# indexer's key cache from ``deepseek_v2.py``. Kept: the config aliases its model sets, the layer
# kinds, the skip set (``compute_skip_topk_layers``), the gate's kind check and the registrations;
# not the sparse backend probe (a GPU has one), the sinks (no KV), iHC or the MLP and MoE blocks.
_HY4 = "models/hy_v4/nvidia/model"
_HY4_ATTN = "models/hy_v4/nvidia/attention"
ENTRY[("vllm.models.hy_v4", "HYV4ForCausalLM")] = (f"{_HY4}:HYV4Model", None, "model", False)
MODELS.update({
    _HY4_ATTN: (["_SPARSE_LAYER_TYPES", "compute_skip_topk_layers",
                 ("Indexer", frozenset("self.head_dim self.quant_block_size self.k_cache".split())),
                 ("HYV4MLAAttention", frozenset(
                     """self.config self.hidden_size self.qk_nope_head_dim self.qk_rope_head_dim self.qk_head_dim
                     self.v_head_dim self.layer_idx self.q_lora_rank self.kv_lora_rank self.num_heads tp_size
                     self.num_local_heads self.layer_id layer_types requested_sparse self.skip_topk num_hidden_layers
                     is_mtp_layer self.create_indexer self.is_sparse kv_cache_dtype self.scaling
                     self.max_position_embeddings self.kv_b_proj self.indexer self.gated_mla self.prefix
                     self.learnable_sink sinks sink_backend extra_impl_args self.mla_attn""".split()
                     + ["if self.create_indexer", "if self.gated_mla"]))],
                 "", {"DeepseekV32IndexerCache": "deepseek_v2"}),
    _HY4: (["_normalize_hyv4_config",
            ("HYV4DecoderLayer", frozenset(
                "self.hidden_size self.config self.enable_ihc layer_idx self.layer_idx max_position_embeddings "
                "self.self_attn".split() + ["if config.mlp_layer_types[layer_idx] == 'dense'"])),
            ("HYV4Model", frozenset(
                """config cache_config quant_config parallel_config self.device self.is_sparse self.config
                self.quant_config self.enable_ihc self.start_layer self.end_layer self.layers""".split()
                + ["if self.is_sparse"]))],
           "HYV4FeedForward HYV4MoEFused", {"HYV4MLAAttention": _HY4_ATTN}),
})  # fmt: skip
NAMESPACES[_HY4] = NAMESPACES[_DSA]
NAMESPACES[_HY4_ATTN] = {"hpc_gated_mla_supported": lambda gating_type, linear: False}  # no KV: a GEMM choice
# Whisper (encoder-decoder): vLLM builds WhisperModel at the top level (prefix ""), and each decoder
# layer at ``<make_layers prefix>.layers`` (its lambda appends ``.layers``): the self-attention an
# Attention, the cross-attention a CrossAttention. Kept: the heads, head size, TP assertions and the
# layer kinds; the encoder's layers (their attention is the encoder's, no KV) for their assertions.
_WHISPER_ATTN = frozenset("""self.embed_dim tp_size self.total_num_heads self.num_heads self.num_kv_heads self.head_dim
    self.q_size self.kv_size self.attn_type self.scaling self.attn""".split()
    + ["if self.total_num_heads >= tp_size", "if attn_type == AttentionType.ENCODER"])  # fmt: skip
ENTRY[("whisper", "WhisperForConditionalGeneration")] = ("WhisperModel", None, "", False)
MODELS["whisper"] = ([("WhisperAttention", _WHISPER_ATTN), ("WhisperCrossAttention", frozenset()),
                      ("WhisperEncoderLayer", frozenset("config sliding_window cache_config quant_config self.embed_dim "
                                                        "self.self_attn".split())),
                      ("WhisperEncoder", frozenset("config embed_dim self.start_layer self.end_layer self.layers create_layer".split()
                                                   + ["if enable_pp"])),
                      ("WhisperDecoderLayer", frozenset("config cache_config quant_config self.self_attn self.encoder_attn".split())),
                      ("WhisperDecoder", frozenset("config self.start_layer self.end_layer self.layers".split())),
                      ("WhisperModel", frozenset("self.encoder self.decoder".split()))],
                     "WhisperMLP WhisperEncoderAttention WhisperPositionalEmbedding", {})  # fmt: skip
# Step3, DiffusionGemma, Cohere Compass, ERNIE-4.5-VL: their entries (._hf_tables_mm)
from . import _hf_tables_mm  # noqa: E402,F401
# MiniCPM-V 4.6 / 4.7, Kimi-K3, HRM-Text, Beam, Step-3.5, Intern-S2-Mobius: their entries (._hf_tables_more)
from . import _hf_tables_more  # noqa: E402,F401
# InternLM2, Orion, Solar, MiniCPM, EXAONE 3, Ling, DeepSeek-MoE, Nemotron-NAS, IQuest-Coder-Loop (._hf_tables_remote)
from . import _hf_tables_remote  # noqa: E402,F401
# Inkling: its entries, its config classes and its records (._hf_tables_inkling)
from . import _hf_tables_inkling  # noqa: E402,F401
# MiniMax-M3: its entries, config classes, records and block sizes (._hf_tables_minimax_m3)
from . import _hf_tables_minimax_m3  # noqa: E402,F401
# Qwen4-Exp: its lifted classes and its own build and records (._hf_tables_qwen4_exp)
from . import _hf_tables_qwen4_exp  # noqa: E402,F401
# GLM-5-Next: its lifted classes and its own build and records (._hf_tables_glm5_next)
from . import _hf_tables_glm5_next  # noqa: E402,F401
