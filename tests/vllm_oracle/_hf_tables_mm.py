"""More of the model-reading oracle's architecture tables (:mod:`._hf_tables`, which imports this
module at its end): Step3's text model (Step3-VL, Step-VL), DiffusionGemma, Cohere Compass and
ERNIE-4.5-VL. Restated glue, as there: where each registered class is entered, what is lifted of its
files, and the stand-ins its namespace gets."""

from __future__ import annotations

import contextlib
from typing import Any

from oracle_kit.strict import fail

from ._hf_lift import _Module
from ._hf_tables import ENTRY, MODELS, NAMESPACES

# Step3 text (Step3VL's and StepVL's text model, tests/test_vllm_step3.py): the model whole (its
# embedding's tie_word_embeddings read on later PP ranks included), its decoder layer and attention
# whole, the MoE block kept to its TP check; entered at the model the ForCausalLM builds under its
# own prefix (``Step3TextModel(prefix=prefix)``: no ``model`` level).
ENTRY[("step3_text", "Step3TextForCausalLM")] = ("Step3TextModel", None, "", False)
MODELS["step3_text"] = ([("FusedMoEBlock", frozenset({"self.tp_size"})), "Step3TextAttention", "Step3TextDecoderLayer",
                         "Step3TextModel"], "Step3TextMLP", {})  # fmt: skip

# DiffusionGemma (DiffusionGemmaForBlockDiffusion, tests/test_vllm_diffusion_gemma.py): its __init__ kept
# to its config reads, its forced ``text_config.attention_k_eq_v = True`` and the Gemma4Model it builds
# under ``model`` (lifted from gemma4.py as above); the vision tower, LM head and self-conditioning
# block own no KV.
ENTRY[("diffusion_gemma", "DiffusionGemmaForConditionalGeneration")] = (
    "DiffusionGemmaForConditionalGeneration", None, "", False)
MODELS["diffusion_gemma"] = ([("DiffusionGemmaForConditionalGeneration", frozenset(
    "config text_config self.config text_config.attention_k_eq_v self.model".split()))], "",
                             {"Gemma4Model": "gemma4"})  # fmt: skip

# Cohere Compass (tests/test_vllm_cohere_compass.py): entered at the wrapper, its __init__ kept to its
# config reads, the language model it builds (CohereCompassForCausalLM on
# ``vllm_config.with_hf_config(config.text_config)``) and its deepstack check on later pipeline ranks
# (not the vision tower, tokenizer or multimodal config: no KV); the ForCausalLM's __init__ whole (its
# tie_word_embeddings assert), its text model, decoder layer and attention whole; the MLP inert.
# Restated: ``SupportsMultiModal``'s ``_mark_tower_model`` / ``_mark_language_model`` (they only tag
# the modules built in them) as no-op contexts.
class _MarksModules(_Module):
    def _mark_tower_model(self, vllm_config: Any, modalities: Any) -> Any:
        return contextlib.nullcontext()

    def _mark_language_model(self, vllm_config: Any) -> Any:
        return contextlib.nullcontext()


ENTRY[("cohere_compass", "CohereCompassForConditionalGeneration")] = (
    "CohereCompassForConditionalGeneration", None, "", False)
MODELS["cohere_compass"] = (["CohereCompassAttention", "CohereCompassDecoderLayer", "CohereCompassTextModel",
                             "CohereCompassForCausalLM", ("CohereCompassForConditionalGeneration", frozenset(
                                 "config self.config self.use_deepstack self.deepstack_num_level self.language_model"
                                 .split() + ["if not get_pp_group().is_first_rank and self.use_deepstack"]))],
                            "CohereMLP", {})  # fmt: skip
NAMESPACES["cohere_compass"] = {"SupportsMultiModal": _MarksModules}

# ERNIE-4.5-VL (tests/test_vllm_ernie45_vl.py): entered at the wrapper, its __init__ kept to its config
# reads and the vision tower, resampler and language model it builds; the vision tower's __init__ kept to
# its config reads and its hidden-size assert, the resampler inert (its arguments, the model's own
# attributes, are read). The text model (Ernie4_5_VLMoeForCausalLM, on the model's flat keys) is not
# lifted: building it is the oracle's gap (StubError), which kvbudget refuses as unchecked.
ENTRY[("ernie45_vl", "Ernie4_5_VLMoeForConditionalGeneration")] = (
    "Ernie4_5_VLMoeForConditionalGeneration", None, "", False)
MODELS["ernie45_vl"] = ([("Ernie4_5_VisionTransformer", frozenset(
    "patch_size spatial_merge_size in_channels hidden_size embed_dim depth num_heads mlp_ratio".split())),
                         ("Ernie4_5_VLMoeForConditionalGeneration", frozenset(
                             """config quant_config self.config self.vision_model self.resampler_model
                             self.language_model""".split()))], "VariableResolutionResamplerModel", {})  # fmt: skip


def _ernie_text_model(**kwargs: Any) -> Any:
    fail("ernie45_vl", "Ernie4_5_VLMoeForCausalLM (not lifted)")


NAMESPACES["ernie45_vl"] = {"SupportsMultiModal": _MarksModules, "Ernie4_5_VLMoeForCausalLM": _ernie_text_model}
# Cosmos3 Edge (tests/test_vllm_cosmos3_edge.py): entered at the wrapper, its __init__ kept to its config
# and the language model it builds (Cosmos3EdgeForCausalLM on ``with_hf_config(config.text_config)``, not
# the vision model); that class whole (its conversion of the text config to transformers'
# NemotronHConfig, its pattern checks, the Nemotron-H model it builds with its own attention layer),
# the attention and its decoder layer whole; Nemotron-H's model, attention and MLP layer from
# nemotron_h.py as lifted there.
ENTRY[("cosmos3_edge", "Cosmos3EdgeForConditionalGeneration")] = (
    "Cosmos3EdgeForConditionalGeneration", None, "", False)
MODELS["cosmos3_edge"] = (["Cosmos3EdgeAttention", "Cosmos3EdgeAttentionDecoderLayer", "Cosmos3EdgeTextModel",
                           "_to_nemotron_h_config", "Cosmos3EdgeForCausalLM",
                           ("Cosmos3EdgeForConditionalGeneration", frozenset("config self.config self.language_model"
                                                                             .split()))], "",
                          {n: "nemotron_h" for n in ("NemotronHAttention", "NemotronHMLPDecoderLayer",
                                                     "NemotronHModel")})  # fmt: skip
NAMESPACES["cosmos3_edge"] = {"SupportsMultiModal": _MarksModules,
                              "NemotronHConfig": __import__("transformers").NemotronHConfig}
