"""``kvbudget.vllm.layers_from_hf_config`` on remote-code decoders (InternLM2, Orion, Solar, MiniCPM,
DeepSeek-MoE, EXAONE 3, Ling / Bailing MoE v1 and 2.0, Nemotron-NAS, IQuest-Coder-Loop, Sarvam-MoE,
Step1), held to
vLLM 0.33.0's own model classes (``tests/vllm_oracle``: ``InternLM2ForCausalLM``,
``OrionForCausalLM``, ``SolarForCausalLM``, ``MiniCPMForCausalLM``, ``DeepseekForCausalLM``,
``ExaoneForCausalLM``, ``BailingMoeForCausalLM``, ``BailingMoeV2ForCausalLM``,
``DeciLMForCausalLM``, ``IQuestLoopCoderForCausalLM``, ``SarvamMoEForCausalLM``,
``Step1ForCausalLM``, their ``__init__`` kept to the decoder they
build).

The configs are the seeded files of ``tests/remote_code_cases.py`` (as the checkpoints' own config
classes save them, with their ``auto_map``; EXAONE 3's loaded by SGLang's copy of its class), some
without ``num_key_value_heads`` (which the decoder layers read) or another attribute a class reads
(Ling's ``head_dim`` / ``embedding_dropout``, DeepSeek-MoE's ``n_routed_experts`` /
``first_k_dense_replace``; Nemotron-NAS with every attention block a no-op), with a ``head_dim``
(which Solar's, EXAONE's and Ling's attention read and the others do not; null for Ling: the
width's), a stray model-wide ``sliding_window`` or a legacy ``rope_scaling``; vLLM loads them
through the oracle's stand-in for the checkpoint's class and ``get_config``'s RoPE patch (lifted).
Each is read with a seeded TP (dividing the heads or not), PP, ``--kv-cache-dtype`` and
``--disable-sliding-window``; every layer's name, kind, stage, heads per rank, head sizes, window
and KV dtype are compared, and a refusal on one side only is a mismatch.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from typing import Any

import test_vllm_classic
import transformers as T
import vllm_oracle as vo
from remote_code_cases import REMOTE_CODE
from vllm_oracle._hf import VllmLoadError, vllm_layers, vllm_load_config
from vllm_differential import plan_both
from vllm_reading import assert_families_agree, judge_families

from kvbudget import InvalidConfigError, vllm
from kvbudget.vllm.models import ARCHITECTURES, layers_from_hf_config
from kvbudget.vllm.named import NAMED_READERS
from kvbudget.vllm.iquest_loopcoder import IQUEST_LOOPCODER
from kvbudget.vllm.nemotron_nas import DECILM

T.logging.set_verbosity_error()  # the stand-in class has no RoPE keys of its own: transformers says so per load

N = int(os.environ.get("KVBUDGET_VLLM_REMOTE_CODE_CASES", "60"))
GIB = 1 << 30
FAMILIES = ("internlm2", "orion", "solar", "minicpm", "deepseek", "exaone", "bailing_v1", "bailing_v2", "decilm",
            "iquest_loopcoder", "sarvam_moe", "sarvam_mla", "step1")
#: Per family, attributes its vLLM class reads that a file may lack (besides ``num_key_value_heads``).
_READ = {"bailing_v1": ("head_dim", "embedding_dropout"), "bailing_v2": ("head_dim", "embedding_dropout"),
         "sarvam_moe": ("head_dim", "embedding_dropout"),
         "sarvam_mla": ("qk_nope_head_dim", "v_head_dim", "kv_lora_rank", "max_position_embeddings", "rms_norm_eps",
                        "q_lora_rank"),
         "deepseek": ("n_routed_experts", "first_k_dense_replace")}


def cases(per_family: int, seed: int = 0) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for family in FAMILIES:
        rng = random.Random(f"vllm-remote-code:{seed}:{family}")
        for _ in range(per_family):
            saved = REMOTE_CODE[family](rng).saved(False)
            if family == "decilm" and rng.random() < 0.05:  # every attention block a no-op
                for block in saved["block_configs"]:
                    block["attention"].update(no_op=True, n_heads_in_group=None)
            elif rng.random() < 0.1 and "num_key_value_heads" in saved:
                del saved["num_key_value_heads"]
            if family == "iquest_loopcoder":  # the class's defaults (2 loops, window 64), or the file's
                saved.update({k: rng.choice([None, *values]) for k, values in
                              (("loop_num", [1, 2, 3]), ("loop_window_size", [64, 128]), ("max_window_layers", [1]))})
                saved = {k: x for k, x in saved.items() if x is not None}
            if rng.random() < 0.3:
                saved["head_dim"] = rng.choice([64, 96, 128, None])
            if family in _READ and rng.random() < 0.1:
                del saved[rng.choice(_READ[family])]
            if family == "step1" and rng.random() < 0.2:  # both counts: StepAttention's and ModelConfig's differ
                saved["num_key_value_heads"] = rng.choice([1, 2, 4, 8])
            if family == "step1" and rng.random() < 0.1:  # StepAttention takes a null or non-positive count as 1
                saved["num_attention_groups"] = rng.choice([None, 0, -1])
            if family == "deepseek" and rng.random() < 0.1:
                saved["n_routed_experts"] = None  # a dense DeepSeek: first_k_dense_replace is not read
            if rng.random() < 0.1:
                saved["sliding_window"] = rng.choice([512, 4096])
            if rng.random() < 0.2:
                saved["rope_scaling"] = {"type": "linear", "factor": 2.0}
            engine = {"tp": rng.choice([1, 1, 2, 4, 8, 16]), "pp": rng.choice([1, 1, 1, 2, 3]),
                      "kv_cache_dtype": rng.choice(["auto", "auto", "fp8"]),
                      "disable_sliding_window": rng.random() < 0.2}  # fmt: skip
            if family == "iquest_loopcoder" and rng.random() < 0.8:  # a class without SupportsPP: mostly one stage
                engine["pp"] = 1
            yield family, saved, engine


def _theirs(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        layers = vllm_layers(vllm_load_config(saved), tp=settings["tp"], pp=settings["pp"],
                             kv_cache_dtype=settings["kv_cache_dtype"],
                             disable_sliding_window=settings["disable_sliding_window"])  # fmt: skip
    except VllmLoadError as e:
        return f"refused: {e}"
    return [{k: x[k] for k in test_vllm_classic._FIELDS} for x in layers]


def _ours(saved: dict[str, Any], settings: dict[str, Any]) -> list[dict[str, Any]] | str:
    """kvbudget's layers, the KV dtype of an MLA one left out as the oracle's record leaves it."""
    out = test_vllm_classic._ours(saved, settings)
    return out if isinstance(out, str) else [{**x, "kv_cache_dtype": None} if x["kind"] == "mla" else x for x in out]


def compare(per_family: int) -> tuple[dict[str, dict[str, int]], list[str]]:
    return judge_families(cases(per_family), FAMILIES, _ours, _theirs)


def test_remote_code_layers_equal_vllms_reading_of_the_config() -> None:
    assert_families_agree("vLLM remote-code decoders", *compare(N))


def test_the_remote_code_architectures_are_read() -> None:
    archs = {REMOTE_CODE[f](random.Random(0)).arch for f in FAMILIES}
    own = {DECILM, IQUEST_LOOPCODER}  # read by modules of their own
    assert archs - own <= ARCHITECTURES and own <= set(NAMED_READERS)


def test_variable_gqa_plans_as_vllms_planner_plans_it() -> None:
    """Nemotron-NAS layers whose KV heads differ from block to block (and whose no-op blocks have
    none) through both planners: vLLM's (lifted) and kvbudget's, at three budgets."""
    oracle = vo.load()
    rng = random.Random("vllm-remote-code-plan")
    varied = 0
    for _ in range(40):
        saved = REMOTE_CODE["decilm"](rng).saved(False)
        engine = {"tp": rng.choice([1, 2, 4]), "pp": rng.choice([1, 2])}
        try:
            layers = layers_from_hf_config(saved, vllm.EngineConfig(**engine))
        except InvalidConfigError:
            continue
        theirs = plan_both(oracle, layers, rng.choice([GIB, 20 * GIB, 60 * GIB]), engine)
        varied += theirs is not None and theirs["ok"] and len({x.num_kv_heads for x in layers}) > 1
    assert varied > 0  # some planned with KV heads that differ between layers
