"""SGLang 0.5.23's launch-time resolution of the flags a pool plan reads.

``ServerArgs.resolve_once`` runs ``arg_groups/pipeline.py``'s
``run_resolution_pipeline``, one hook after another; each hook reads the
values the earlier ones declared. :func:`resolve_launch` restates, in that
order, the hooks whose decisions reach the KV pools, on a CUDA Hopper GPU
(SM90, CUDA >= 12.3, FlashInfer installed), the platform SGLang's defaults are
taken for:

1. ``handle_pd_disaggregation`` (``pd_disaggregation_hook.py``): a PD decode
   server turns the radix cache off (on with
   ``--disaggregation-decode-enable-radix-cache``) and, when
   ``--disaggregation-decode-extra-slots`` is unset, reserves ``2 *`` the
   running requests per DP rank if that is at most 32, else none.
2. ``handle_model_specific_adjustments`` (``model_overrides/deepseek_v2.py``,
   ``gpt_oss.py``, and ``overrides._dsa_kv_cache_dtype_default``): a DSA
   model (DeepSeek-V3.2, GLM-5) takes the ``dsa`` attention backend when none
   is given, a page of ``64 * index_kpool`` tokens, whatever ``--page-size``
   says, and a bfloat16 KV cache for ``auto``; HunYuan-V4 refuses ``--dcp-size``
   above 1; gpt-oss takes ``fa3``; Gemma 2/3,
   OLMo 2 and EXAONE 4 turn hybrid SWA memory off (``gemma2_gemma3.py``, ...);
   then ``handle_mamba_radix_cache``: a hybrid-state model's
   ``--mamba-radix-cache-strategy auto`` (:func:`_mamba_radix_cache`) and its checks.
3. ``handle_attention_backend_compatibility`` (``overrides.py``'s
   ``_attention_backend_default``, ``_mla_backend_page_constraints``,
   ``_attention_backend_fa3_fp8_fallback``) and ``_page_size_default``: the
   default backend (``get_default_attn_backend``), the page sizes FlashMLA,
   TRT-LLM and CuteDSL MLA, TRT-LLM MHA and HPC-Ops accept, and page 1.
4. ``handle_speculative_decoding`` (``speculative_hook.py``): the algorithm
   upper-cased, NEXTN and EAGLE both EAGLE; for the EAGLE family (EAGLE,
   EAGLE3, STANDALONE, ``_handle_eagle_family``) 48 running requests when
   unset, the target's own checkpoint as the draft of the DeepSeek-style MTP
   architectures, SGLang's step counts when ``--speculative-num-steps`` is
   unset (its assertion when the other two are given), and ``steps + 1`` draft
   tokens at top-k 1.

The draft's KV layers are ``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``'s
(:func:`draft_kv_layers`). What SGLang refuses, kvbudget refuses with SGLang's
reason (:class:`LaunchRefused`). ``tests/test_sglang_launch_resolution.py`` holds
every step to SGLang's own hooks, executed from the wheel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvbudget.errors import InvalidConfigError

__all__ = [
    "EAGLE_FAMILY",
    "MTP_FROM_TARGET",
    "SPECULATIVE_MAX_RUNNING_REQUESTS",
    "LaunchRefused",
    "auto_speculative_params",
    "draft_kv_layers",
    "eagle_family_steps",
    "resolve_launch",
    "state_radix_cache",
    "state_strategy",
]


class LaunchRefused(InvalidConfigError):
    """SGLang 0.5.23 refuses this launch line; the message gives SGLang's reason."""


#: Algorithms ``SpeculativeAlgorithm.handle_server_args`` sends to ``_handle_eagle_family``.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
#: Targets whose checkpoint carries the MTP draft: ``_handle_eagle_family`` makes the
#: model path the draft path when none is given.
MTP_FROM_TARGET = frozenset({
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "HYV3ForCausalLM", "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration",
})  # fmt: skip
#: ``max_running_requests`` SGLang 0.5.23's launch sets for every speculative algorithm when unset
#: (``_handle_eagle_family``, ``_handle_dflash``, ``_handle_dspark``, ...).
SPECULATIVE_MAX_RUNNING_REQUESTS = 48
#: ``_auto_choose_speculative_params``: (steps, top-k, draft tokens) by target architecture.
_WIDE_DRAFT_ARCHS = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
#: Draft-mode architectures whose ``ModelConfig._config_draft_model`` sets one MTP layer.
_ONE_MTP_LAYER = frozenset({
    "Qwen3NextForCausalLM", "Qwen3MoeForCausalLM", "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration", "MiMoV2ForCausalLM",
    "MiMoV2FlashForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "NemotronH_Omni_Reasoning_V3",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "HYV3ForCausalLM", "HYV4ForCausalLM",
    "Qwen4ExpForConditionalGeneration", "Glm5NextForConditionalGeneration",
})  # fmt: skip
_GEMMA4_ASSISTANTS = ("Gemma4AssistantForCausalLM", "Gemma4UnifiedAssistantForCausalLM")
#: Backends that run the top-k > 1 page tree (``_PAGE_TREE_SPEC_BACKENDS``).
_PAGE_TREE_SPEC_BACKENDS = ("flashinfer", "fa3", "triton")
#: ``_mla_backend_page_constraints``: backend -> (page sizes it takes, the page it snaps to).
_PAGE_CONSTRAINTS = {"flashmla": ((64,), 64), "trtllm_mla": ((32, 64), 64), "cutedsl_mla": ((32, 64), 64),
                     "trtllm_mha": ((16, 32, 64, 128), 64), "hpc_ops": ((64,), 64)}  # fmt: skip


def _refuse(hook: str, reason: str) -> LaunchRefused:
    return LaunchRefused(f"SGLang 0.5.23 refuses this launch ({hook}): {reason}")


def _pd_disaggregation(v: dict[str, Any]) -> None:
    if v["disaggregation_mode"] != "decode":
        return
    v["disable_radix_cache"] = not v["disaggregation_decode_enable_radix_cache"]
    if v["disaggregation_decode_extra_slots"] is None:
        extra = 0
        if v["max_running_requests"] is not None:
            per_worker = max(1, v["max_running_requests"] // (v["dp_size"] * v["attn_dp_size"]))
            extra = per_worker * 2 if per_worker <= 32 else 0
        v["disaggregation_decode_extra_slots"] = extra


def _model_overrides(v: dict[str, Any], arch: str, dsa_kpool: int | None, hybrid_off: bool) -> None:
    if hybrid_off:  # gemma2_gemma3.py, olmo2.py, exaone.py
        v["disable_hybrid_swa_memory"] = True
    unset = v["attention_backend"] is None and v["prefill_attention_backend"] is None and (
        v["decode_attention_backend"] is None)
    if arch in ("HYV4ForCausalLM", "HYV4ForCausalLMNextN") and v["dcp_size"] > 1:
        raise _refuse("model_overrides/deepseek_v2.py", "--dcp-size > 1 is not supported for HYV4 (decode "
                      "context parallelism gives its learnable attention sinks no single owner)")  # fmt: skip
    if dsa_kpool is not None:  # is_deepseek_dsa: DeepSeek-V3.2, GLM-5, HunYuan-V4, LongCat-Flash with index_topk
        if unset:
            v["attention_backend"] = "dsa"
        if dsa_kpool > 1 and v["dcp_size"] > 1:
            raise _refuse("model_overrides/deepseek_v2.py", f"--dcp-size > 1 is not supported for DSA with "
                          f"index_kpool={dsa_kpool}")  # fmt: skip
        v["page_size"] = 64 * dsa_kpool
        # _dsa_kv_cache_dtype_default: "auto" is bfloat16 below SM100 (fp8_e4m3 from SM100 on).
        kv = {"auto": "bfloat16", "bf16": "bfloat16"}.get(v["kv_cache_dtype"], v["kv_cache_dtype"])
        if kv not in ("bfloat16", "fp8_e4m3"):
            raise _refuse("overrides._dsa_kv_cache_dtype_default, an assertion",
                          "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype")  # fmt: skip
        v["kv_cache_dtype"] = kv
    elif arch == "GptOssForCausalLM" and unset:
        v["attention_backend"] = "fa3"


#: ``overrides._MAMBA_RADIX_CACHE_ARCHS``: the architectures ``_mamba_radix_cache_resolution``
#: resolves (GraniteMoeHybrid too, when a layer is ``mamba``).
MAMBA_RADIX_CACHE_ARCHS = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM",
    "Qwen4ExpForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration",
    "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "FalconH1ForCausalLM",
    "JetNemotronForCausalLM", "JetVLMForConditionalGeneration", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    "ZayaForCausalLM", "Glm5NextForConditionalGeneration",
})  # fmt: skip
#: ``overrides._MAMBA_EXTRA_BUFFER_ARCHS``: the architectures the extra_buffer strategy supports.
MAMBA_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM",
    "Glm5NextForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration", "InklingForConditionalGeneration",
    "InklingForConditionalGenerationMTP",
})  # fmt: skip


#: ``kernels/ops/attention/fla/chunk_delta_h.py``'s ``CHUNK_SIZE``: ``mamba_cache_chunk_size``'s
#: chunk where the config sets no ``mamba_chunk_size``.
FLA_CHUNK_SIZE = 64


def state_radix_cache(values: Mapping[str, Any], arch: str, config: Mapping[str, Any]) -> tuple[str, bool]:
    """(the state's ``mamba_radix_cache_strategy``, ``disable_overlap_schedule``) as
    ``handle_mamba_radix_cache`` leaves the launch's ``values`` (:func:`_mamba_radix_cache`;
    ``values`` as SGLang's parser gives them, before its speculative and backend steps). An
    ``auto`` it leaves (the radix cache off, or no radix-cache architecture) keeps no extra
    buffer: ``no_buffer``.

    Raises:
        LaunchRefused: SGLang's checks of the strategy.
    """
    v = dict(values)
    _mamba_radix_cache(v, arch, config)
    return state_strategy(v["mamba_radix_cache_strategy"]), bool(v["disable_overlap_schedule"])


def state_strategy(strategy: str) -> str:
    """The state's strategy for a resolved ``--mamba-radix-cache-strategy``: an ``auto`` left
    unresolved keeps no extra buffer (``no_buffer``)."""
    return "no_buffer" if strategy == "auto" else strategy


def _mamba_radix_cache(v: dict[str, Any], arch: str, config: Mapping[str, Any]) -> None:
    """``model_hook.handle_mamba_radix_cache``: ``overrides._mamba_radix_cache_resolution``
    (``auto`` is ``extra_buffer`` where the architecture supports it on the Triton
    linear-attention backend and the overlap scheduler or pages ask for it, else
    ``no_buffer`` with the overlap scheduler off), then ``mamba_hook``'s checks."""
    in_branch = arch in MAMBA_RADIX_CACHE_ARCHS
    if arch == "GraniteMoeHybridForCausalLM":
        in_branch = "mamba" in (config.get("layer_types") or ())
    supports = arch in MAMBA_EXTRA_BUFFER_ARCHS and v["linear_attn_backend"] == "triton"
    uses = in_branch and not v["disable_radix_cache"]
    if uses and v["mamba_radix_cache_strategy"] == "auto":
        paging = v["page_size"] is not None and v["page_size"] > 1
        if (not v["disable_overlap_schedule"] or paging) and supports:
            v["mamba_radix_cache_strategy"] = "extra_buffer"
        else:
            v["mamba_radix_cache_strategy"] = "no_buffer"
            v["disable_overlap_schedule"] = True
    strategy = v["mamba_radix_cache_strategy"]
    extra = not v["disable_radix_cache"] and strategy in ("extra_buffer", "extra_buffer_lazy")
    hook = "model_hook.handle_mamba_radix_cache"
    if not uses:
        if extra:
            raise _refuse(hook, f"--mamba-radix-cache-strategy {strategy} needs mamba state, got {arch}.")
        return
    checks: tuple[tuple[bool, str], ...]
    if extra:  # validate_mamba_extra_buffer (a CUDA platform snapshots the state)
        tokens, page, interval = v["speculative_num_draft_tokens"], v["page_size"], v["mamba_track_interval"]
        chunk = config.get("mamba_chunk_size", FLA_CHUNK_SIZE)
        checks = ((supports, f"extra_buffer is not supported for {arch}; use no_buffer."),
                  (strategy != "extra_buffer_lazy" or v["disaggregation_mode"] == "null",
                   "extra_buffer_lazy unsupported under PD disaggregation; use --mamba-radix-cache-strategy "
                   "extra_buffer."),
                  (tokens is None or interval >= tokens, "mamba_track_interval >= speculative_num_draft_tokens"),
                  (page is None or interval % page == 0, "mamba_track_interval % page_size == 0"),
                  (page is None or max(chunk, page) % min(chunk, page) == 0, "For SSM models, either chunk_size or "
                   f"page_size must be divisible by the other, got chunk_size={chunk}, page_size={page}"))  # fmt: skip
    else:  # validate_mamba_no_buffer
        checks = ((v["page_size"] in (1, None), "no_buffer only supports page_size=1."),
                  (v["disable_overlap_schedule"], "no_buffer do not support overlap schedule. Try to set "
                   "disable_overlap_schedule=True."),
                  (v["attention_backend"] != "trtllm_mha", "no_buffer do not support trtllm_mha attention backend."))
    for ok, reason in checks:
        if not ok:
            raise _refuse(f"{hook}, an assertion", reason)


def _attention_backend(v: dict[str, Any], mla: bool) -> None:
    prefill, decode = v["prefill_attention_backend"], v["decode_attention_backend"]
    if prefill is not None and prefill == decode:
        v["attention_backend"] = prefill
    elif v["attention_backend"] is None:  # get_default_attn_backend on Hopper
        topk = v["speculative_eagle_topk"]
        no_spec_or_topk_one = topk is None or (topk == 1 and v["page_size"] in (1, None))
        v["attention_backend"] = "fa3" if mla or no_spec_or_topk_one else "flashinfer"
    page = v["page_size"]
    backends = (v["attention_backend"], v["decode_attention_backend"], v["prefill_attention_backend"])
    for name, (accepted, snap) in _PAGE_CONSTRAINTS.items():
        # FlashMLA and TRT-LLM MLA are read on the shared and decode backends only.
        used = name in backends[:2] if name in ("flashmla", "trtllm_mla") else name in backends
        if used and page not in accepted:
            page = snap
    v["page_size"] = page
    if v["attention_backend"] == "fa3" and v["kv_cache_dtype"] == "fp8_e5m2":
        v["attention_backend"] = "triton"
    if v["page_size"] is None:
        v["page_size"] = 1


def _algorithm(v: dict[str, Any], draft_archs: Callable[[str], list[str]]) -> None:
    algo = v["speculative_algorithm"]
    if algo is None:
        return
    algo = algo.upper()
    path = v["speculative_draft_model_path"]
    gemma4 = path is not None and any(a in _GEMMA4_ASSISTANTS for a in draft_archs(path))
    if algo == "EAGLE3" and gemma4:
        raise _refuse("speculative_hook.py", "Gemma4AssistantForCausalLM draft requires --speculative-algorithm "
                      "NEXTN or EAGLE; EAGLE3 is not supported for this draft architecture.")  # fmt: skip
    if algo in ("NEXTN", "EAGLE"):
        algo = "FROZEN_KV_MTP" if gemma4 else "EAGLE"
    v["speculative_algorithm"] = algo
    if v["disaggregation_mode"] == "decode" and v["disaggregation_decode_enable_radix_cache"] and algo not in (
            "DSPARK", "EAGLE", "EAGLE3"):
        raise _refuse("speculative_hook.py", "--disaggregation-decode-enable-radix-cache is incompatible with "
                      f"speculative decoding (--speculative-algorithm {algo})")  # fmt: skip


def auto_speculative_params(algorithm: str, arch: str) -> tuple[int, int, int]:
    """(steps, top-k, draft tokens) SGLang 0.5.23 picks at launch for an EAGLE-family draft when
    ``--speculative-num-steps`` is unset (``_auto_choose_speculative_params``); ``algorithm`` in
    SGLang's spelling (``EAGLE``, ``EAGLE3``, ``STANDALONE``; NEXTN launches as EAGLE)."""
    wide = algorithm.upper() != "STANDALONE" and arch in _WIDE_DRAFT_ARCHS
    return (5, 4, 8) if wide else (3, 1, 4)


def eagle_family_steps(algorithm: str, arch: str, steps: int | None, topk: int | None,
                       tokens: int | None) -> tuple[int, int, int | None]:  # fmt: skip
    """(steps, top-k, draft tokens) as ``_handle_eagle_family`` leaves the three flags given
    (``None`` where unset): SGLang's own for ``arch`` when ``--speculative-num-steps`` is unset
    (:func:`auto_speculative_params`), and ``steps + 1`` draft tokens at top-k 1; ``algorithm``
    in SGLang's spelling. The backend checks between the two steps are
    :func:`resolve_launch`'s.

    Raises:
        LaunchRefused: top-k or draft tokens without steps (SGLang's assertion), or steps
            without top-k (SGLang compares None with 1 and fails).
    """
    if steps is None:
        if topk is not None or tokens is not None:
            raise _refuse("speculative_hook.py, an assertion", "--speculative-eagle-topk and "
                          "--speculative-num-draft-tokens need --speculative-num-steps")  # fmt: skip
        steps, topk, tokens = auto_speculative_params(algorithm, arch)
    if topk is None:  # SGLang compares it with 1 and fails
        raise _refuse("speculative_hook.py", "--speculative-num-steps without --speculative-eagle-topk "
                      "(TypeError: None compared with an int)")  # fmt: skip
    return steps, topk, steps + 1 if topk == 1 else tokens


def _eagle_family(v: dict[str, Any], arch: str) -> None:
    if v["speculative_algorithm"] == "STANDALONE" and v["attn_dp_size"] > 1:
        raise _refuse("speculative_hook.py", "Currently standalone speculative decoding does not support dp attention.")
    if v["max_running_requests"] is None:
        v["max_running_requests"] = SPECULATIVE_MAX_RUNNING_REQUESTS
    if arch in MTP_FROM_TARGET and v["speculative_draft_model_path"] is None:
        v["speculative_draft_model_path"] = v["model_path"]
    # the trtllm_mha check sits between SGLang's top-k check and its steps + 1; neither raises after it
    steps, topk, tokens = eagle_family_steps(v["speculative_algorithm"], arch, v["speculative_num_steps"],
                                             v["speculative_eagle_topk"], v["speculative_num_draft_tokens"])  # fmt: skip
    v["speculative_num_steps"], v["speculative_eagle_topk"], v["speculative_num_draft_tokens"] = steps, topk, tokens
    backends = {v["prefill_attention_backend"] or v["attention_backend"],
                v["decode_attention_backend"] or v["attention_backend"]}  # fmt: skip
    if "trtllm_mha" in backends and topk > 1:
        raise _refuse("speculative_hook.py", "trtllm_mha backend only supports topk = 1 for speculative decoding.")
    if topk > 1 and v["page_size"] > 1 and v["attention_backend"] not in _PAGE_TREE_SPEC_BACKENDS:
        raise _refuse("speculative_hook.py", f"speculative_eagle_topk > 1 with page_size > 1 is only supported on "
                      f"{_PAGE_TREE_SPEC_BACKENDS}; got attention_backend={v['attention_backend']!r}.")  # fmt: skip


def resolve_launch(values: Mapping[str, Any], arch: str, *, mla: bool, dsa_kpool: int | None,
                   hybrid_off: bool, draft_archs: Callable[[str], list[str]],
                   config: Mapping[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """The launch's flag values as SGLang 0.5.23's resolution leaves them.

    Args:
        values: the flags as SGLang's parser gives them (``None`` where unset).
        arch: the target's ``architectures[0]``.
        mla: the target uses SGLang's MLA backend.
        dsa_kpool: the DSA indexer's ``index_kpool`` (None: not a DSA model).
        hybrid_off: a model override of ``arch`` turns hybrid SWA memory off
            (:func:`kvbudget.sglang.hybrid.off_by_override`).
        draft_archs: a draft checkpoint path -> its ``architectures``.
        config: the checkpoint's ``config.json`` (GraniteMoeHybrid's ``layer_types``, a
            state model's ``mamba_chunk_size``); None: neither.

    Raises:
        LaunchRefused: SGLang refuses the line (the message gives its reason).
    """
    v = dict(values)
    _pd_disaggregation(v)
    _model_overrides(v, arch, dsa_kpool, hybrid_off)
    _mamba_radix_cache(v, arch, config or {})
    _attention_backend(v, mla)
    _algorithm(v, draft_archs)
    if v["speculative_algorithm"] in EAGLE_FAMILY:
        _eagle_family(v, arch)
    return v


def draft_kv_layers(text: Mapping[str, Any], draft_arch: str | None, *, path_given: bool) -> int:
    """The draft layers an EAGLE-family pool prices (``eagle_draft_num_layers``, 0 for None).

    Args:
        text: the draft's text config (the target's own when ``path_given`` is False).
        draft_arch: its ``architectures[0]``.
        path_given: a draft checkpoint path was given or resolved (``_handle_eagle_family``).

    With a draft path SGLang reads the draft in draft mode: its
    ``num_nextn_predict_layers`` (one for the architectures
    ``_config_draft_model`` rewrites to a one-layer MTP head), else its layer
    count; without one, the target's ``num_nextn_predict_layers``, else none.
    """
    nextn = text.get("num_nextn_predict_layers")
    if not path_given:
        return int(nextn) if nextn is not None else 0
    if draft_arch in _ONE_MTP_LAYER:
        return 1
    if nextn is not None:
        return int(nextn)
    return int(text.get("num_hidden_layers") or 0)
