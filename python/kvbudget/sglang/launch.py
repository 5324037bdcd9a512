"""An SGLang 0.5.23 launch line, read as kvbudget inputs: :func:`from_server_args`.

The flags are SGLang's own names and aliases (``--model-path``/``--model``,
``--tp-size``/``--tensor-parallel-size``, argparse's unambiguous prefixes such as
``--tp`` included), with SGLang's declared defaults; ``tests/test_sglang_launch.py``
parses the same lines with the parser SGLang builds from its field declarations
(``arg_groups/fields/*.py``, executed from the wheel) and compares every value.

SGLang resolves some flags a line leaves unset when it starts (``page_size`` from
the attention backend, ``mem_fraction_static`` from the GPU, the speculative
step counts from the draft): :attr:`SGLangLaunch.unresolved` names each with the
value kvbudget assumes, so a plan from such a line is labelled as an
assumption; give the flags explicitly for SGLang's exact numbers. Flags kvbudget
does not read are reported in :attr:`SGLangLaunch.unknown_flags`, not ignored.

SGLang's KV budget from memory measurements is
:func:`kvbudget.sglang.budget.sglang_available_bytes` (one value per rank,
MIN-reduced as SGLang reduces them); :class:`SGLangWorker` is
what :func:`kvbudget.sglang.install.from_kvc` reads from a running worker.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvbudget._core import ServingConfig, SpeculativeConfig, StateConfig
from kvbudget.sglang.configurators import PoolConfiguratorBase, Scenario, create_pool_configurator
from kvbudget.budget import PerRank
from kvbudget.sglang.budget import sglang_available_bytes
from kvbudget.errors import InvalidConfigError
from kvbudget.fields import FIELDS, canonical_name
from kvbudget.models.hf import config_dtype, text_part
from kvbudget.sglang.dsa import dsa_raw_kv_layout
from kvbudget.sglang.hybrid import off_by_override
from kvbudget.sglang.mla_configs import longcat_config
from kvbudget.sglang.model import SGLangModel, resolve_sglang
from kvbudget.sglang.pure_state import context_length
from kvbudget.sglang.resolve import EAGLE_FAMILY, draft_kv_layers, resolve_launch, state_strategy
from kvbudget.sglang.state import StateBudget
from kvbudget.sglang.state import available_bytes as state_available_bytes
from kvbudget.sglang.state import kv_budget_bytes as state_kv_budget_bytes
from kvbudget.sglang.state_model import UNREAD_STATE_MODEL_TYPES, state_from_hf_config

if TYPE_CHECKING:
    from kvbudget.models.weights import WeightEstimate

__all__ = ["FLAGS", "SGLangLaunch", "SGLangWorker", "from_server_args"]


@dataclass(frozen=True)
class Flag:
    """One SGLang launch flag: its field name, command-line names, type and declared default."""

    dest: str
    names: tuple[str, ...]
    type: Any  # int, float, str, or bool (a store_true switch)
    default: Any = None
    choices: tuple[str, ...] | None = None


#: SGLang 0.5.23's ``ATTENTION_BACKEND_CHOICES`` (``arg_groups/choices.py``).
ATTENTION_BACKENDS = ("triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3",
                      "fa4", "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla",
                      "tokenspeed_mla", "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter",
                      "wave", "intel_amx", "ascend", "intel_xpu")  # fmt: skip
#: The attention backends whose launch-time resolution on Hopper kvbudget restates
#: (:mod:`kvbudget.sglang.resolve`).
RESOLVED_BACKENDS = ("fa3", "flashinfer", "triton", "flashmla", "trtllm_mha", "dsa")
_DSA_BACKENDS = ("flashmla_sparse", "flashmla_sparse_q8", "flashmla_kv", "flashmla_auto", "flashinfer_sparse_mla",
                 "triton_sparse_mla", "fa3", "tilelang", "triton", "aiter", "trtllm", "intel_xpu")  # fmt: skip
#: SGLang 0.5.23's ``LINEAR_ATTN_KERNEL_BACKEND_CHOICES`` (``arg_groups/choices.py``).
LINEAR_ATTN_BACKENDS = ("triton", "cutedsl", "flashinfer", "flashkda", "nvidia_kda", "ptx_kda", "helion", "intel_xpu")
#: The state fields' choices, from their one declaration (SGLang's flags take the same names;
#: ``--mamba-radix-cache-strategy`` adds ``auto``, which its launch resolution resolves).
_STATE_CHOICES = {f.name: f.choices for f in FIELDS["StateConfig"]}
#: The flags :func:`from_server_args` reads, as SGLang 0.5.23 declares them.
FLAGS: tuple[Flag, ...] = (
    Flag("model_path", ("--model-path", "--model"), str),
    Flag("dtype", ("--dtype",), str, "auto", ("auto", "half", "float16", "bfloat16", "float", "float32")),
    Flag("kv_cache_dtype", ("--kv-cache-dtype",), str, "auto",
         ("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16")),
    Flag("tp_size", ("--tp-size", "--tensor-parallel-size"), int, 1),
    Flag("dcp_size", ("--dcp-size", "--decode-context-parallel-size"), int, 1),
    Flag("dp_size", ("--dp-size", "--data-parallel-size"), int, 1),
    Flag("attn_dp_size", ("--attn-dp-size", "--attention-data-parallel-size"), int, 1),
    Flag("page_size", ("--page-size",), int),
    Flag("mem_fraction_static", ("--mem-fraction-static",), float),
    Flag("max_running_requests", ("--max-running-requests",), int),
    Flag("chunked_prefill_size", ("--chunked-prefill-size",), int),
    Flag("disable_radix_cache", ("--disable-radix-cache",), bool, False),
    Flag("disable_overlap_schedule", ("--disable-overlap-schedule",), bool, False),
    Flag("swa_full_tokens_ratio", ("--swa-full-tokens-ratio",), float),
    Flag("disable_hybrid_swa_memory", ("--disable-hybrid-swa-memory",), bool, False),
    Flag("disaggregation_mode", ("--disaggregation-mode",), str, "null", ("null", "prefill", "decode")),
    Flag("disaggregation_decode_extra_slots", ("--disaggregation-decode-extra-slots",), int),
    Flag("disaggregation_decode_enable_radix_cache", ("--disaggregation-decode-enable-radix-cache",), bool, False),
    Flag("enable_unified_memory", ("--enable-unified-memory",), bool, False),
    Flag("context_length", ("--context-length",), int),
    Flag("speculative_algorithm", ("--speculative-algorithm",), str),
    Flag("speculative_draft_model_path", ("--speculative-draft-model-path", "--speculative-draft-model"), str),
    Flag("speculative_num_steps", ("--speculative-num-steps",), int),
    Flag("speculative_eagle_topk", ("--speculative-eagle-topk",), int),
    Flag("speculative_num_draft_tokens", ("--speculative-num-draft-tokens",), int),
    Flag("attention_backend", ("--attention-backend",), str, None, ATTENTION_BACKENDS),
    *(Flag(f"{side}_attention_backend", (f"--{side}-attention-backend",), str, None, ATTENTION_BACKENDS)
      for side in ("decode", "prefill")),
    *(Flag(f"dsa_{side}_backend", (f"--dsa-{side}-backend",), str, None, _DSA_BACKENDS) for side in ("prefill", "decode")),
    # The state cache of a hybrid-state model (ExecMamba, Schedule, Disagg fields).
    Flag("mamba_ssm_dtype", ("--mamba-ssm-dtype",), str, None, _STATE_CHOICES["ssm_dtype"]),
    Flag("mamba_radix_cache_strategy", ("--mamba-radix-cache-strategy",), str, "auto",
         ("auto", *_STATE_CHOICES["mamba_radix_cache_strategy"])),
    Flag("linear_attn_backend", ("--linear-attn-backend",), str, "triton", LINEAR_ATTN_BACKENDS),
    Flag("max_mamba_cache_size", ("--max-mamba-cache-size",), int),
    Flag("mamba_full_memory_ratio", ("--mamba-full-memory-ratio",), float),
    Flag("enable_linear_replayssm_spec", ("--enable-linear-replayssm-spec",), bool, False),
    Flag("linear_replayssm_cache_len", ("--linear-replayssm-cache-len",), int, 16),
    Flag("mamba_track_interval", ("--mamba-track-interval",), int, 256),
    Flag("enable_pd_role_switch", ("--enable-pd-role-switch",), bool, False),
)  # fmt: skip
_BY_DEST = {f.dest: f for f in FLAGS}
#: SGLang's declared fallback for an unset ``--swa-full-tokens-ratio``.
SWA_FULL_TOKENS_RATIO_FALLBACK = 0.8


@dataclass(frozen=True)
class SGLangLaunch:
    """What a launch line asks SGLang to plan, in kvbudget's terms.

    Attributes:
        args: every :data:`FLAGS` value, as SGLang parses the line (declared
            defaults for the flags it leaves out).
        resolved: the same values as SGLang's launch resolution leaves them
            (:func:`~kvbudget.sglang.resolve.resolve_launch`).
        model: the target as SGLang resolves it (:func:`~kvbudget.sglang.resolve_sglang`).
        scenario: the kvbudget scenario (model, serving, speculative) to plan from.
        unresolved: ``(flag, assumption)`` for each flag the line leaves to
            SGLang's launch-time resolution.
        unknown_flags: the arguments kvbudget does not read, as given.
        state: a hybrid-state model's recurrent state on one rank, with the line's
            state-cache flags (:func:`kvbudget.sglang.state_from_hf_config`); SGLang
            takes its pool out of the budget before the KV pool. None: no state
            pool, or one kvbudget does not read (``model.state_pool`` tells them apart).
    """

    args: dict[str, Any]
    resolved: dict[str, Any]
    model: SGLangModel
    scenario: Scenario
    unresolved: tuple[tuple[str, str], ...]
    unknown_flags: tuple[str, ...]
    state: StateConfig | None = None

    @property
    def mem_fraction_static(self) -> float | None:
        """``--mem-fraction-static`` (None: SGLang picks it from the GPU at launch)."""
        value = self.args["mem_fraction_static"]
        return None if value is None else float(value)

    def configurator(self) -> Any:
        """The kvbudget configurator SGLang's factory corresponds to for this launch."""
        sc = self.scenario
        return create_pool_configurator(sc.model, sc.serving, sc.spec)

    def available_bytes(self, *, free_before: PerRank, free_now: PerRank, mm_reserve: int = 0) -> int:
        """SGLang's KV budget on each rank from its memory measurements, bytes
        (:func:`kvbudget.sglang.budget.sglang_available_bytes`; needs ``--mem-fraction-static``);
        for a hybrid-state model, what its state pool leaves (:meth:`state_budget`).

        ``free_before`` / ``free_now``: free bytes before the weights load and
        now, as one int (one rank) or one value per rank (SGLang MIN-reduces them
        across ranks first).

        Raises:
            InvalidConfigError: no ``--mem-fraction-static``, or a state pool kvbudget does not read.
            StateCacheTooSmallError: no state slot fits (SGLang's message).
        """
        budget = self.state_budget(free_before=free_before, free_now=free_now, mm_reserve=mm_reserve)
        if budget is not None:
            return state_kv_budget_bytes(budget)
        return sglang_available_bytes(free_before, free_now, self._fraction(), mm_reserve)

    def state_budget(self, *, free_before: PerRank, free_now: PerRank, mm_reserve: int = 0) -> StateBudget | None:
        """The state pool SGLang 0.5.23 sizes first (``_handle_max_mamba_cache``:
        :func:`kvbudget.sglang.state.available_bytes`), or None without a state pool.

        Raises:
            InvalidConfigError, StateCacheTooSmallError: as :meth:`available_bytes`.
        """
        if self.state is None:
            if self.model.state_pool:
                raise InvalidConfigError("SGLang plans a state pool for this model that kvbudget does not read "
                                         "(see unresolved): its KV budget is not the profiled budget")  # fmt: skip
            return None
        sc = self.scenario
        _, budget = state_available_bytes(free_before, free_now, self._fraction(), self.state, sc.serving, sc.spec,
                                          mm_reserve)  # fmt: skip
        return budget

    def _fraction(self) -> float:
        if self.mem_fraction_static is None:
            raise InvalidConfigError("the launch line leaves --mem-fraction-static to SGLang's "
                                     "launch-time resolution; give it to compute SGLang's budget")  # fmt: skip
        return self.mem_fraction_static

    def weights(self) -> WeightEstimate:
        """The target checkpoint's weight bytes (all ranks), exact from its safetensors
        files or else an estimate (:func:`kvbudget.models.weight_bytes`; check ``.exact``)."""
        from kvbudget.models.weights import weight_bytes

        return weight_bytes(self.args["model_path"])


@dataclass(frozen=True)
class SGLangWorker:
    """What a running SGLang 0.5.23 worker's ``KVCacheConfigurator`` plans, in kvbudget's
    terms (:func:`kvbudget.sglang.install.from_kvc`).

    Attributes:
        scenario: the model, serving and speculative config, read as
            :func:`~kvbudget.sglang.install.install`'s factory reads them
            (None when kvbudget declines the worker).
        page_size: ``get_schedule().page_size``, the page SGLang's call site
            (``config_from_budget``) sizes with.
        mem_fraction_static: ``get_schedule().mem_fraction_static`` (None: unset).
        max_total_tokens: ``get_schedule().max_total_tokens``, the user's token
            cap SGLang applies after sizing (None: none).
        mm_reserve: the bytes SGLang holds back from the KV budget for a
            multimodal model (``mm_runtime_reservation_gb``; 0 for a text model).
        is_draft_worker: a draft worker takes the target's pool config, not a budget.
        declined: why kvbudget does not plan these pools (``install`` keeps
            SGLang's configurator for them); None when it does.
        state_pool: a hybrid-state model: SGLang takes its state pool out of the
            budget before the KV pool is sized (:meth:`available_bytes` needs its
            :class:`~kvbudget.sglang.state.StateConfig`).
    """

    scenario: Scenario | None
    page_size: int
    mem_fraction_static: float | None
    max_total_tokens: int | None
    mm_reserve: int
    is_draft_worker: bool
    declined: str | None
    state_pool: bool = False

    @property
    def kvbudget_plans(self) -> bool:
        """Whether kvbudget plans these pools (``declined`` is None)."""
        return self.declined is None

    def configurator(self) -> PoolConfiguratorBase:
        """The kvbudget configurator ``install``'s factory builds for this worker.

        Raises:
            InvalidConfigError: kvbudget declines this worker (``declined`` says why).
        """
        if self.scenario is None:
            raise InvalidConfigError(f"kvbudget does not plan this worker's pools: {self.declined}")
        sc = self.scenario
        return create_pool_configurator(sc.model, sc.serving, sc.spec)

    def available_bytes(self, *, free_before: PerRank, free_now: PerRank, state: StateConfig | None = None) -> int:
        """SGLang's KV budget (:func:`kvbudget.sglang.budget.sglang_available_bytes`, this worker's fraction and
        multimodal reserve) from the free bytes before the weights loaded and now,
        one int or one value per rank; for a hybrid-state model, after its state pool
        (:func:`kvbudget.sglang.state.available_bytes` over ``state``, the model's
        :class:`~kvbudget.sglang.state.StateConfig`, e.g. from
        :func:`kvbudget.sglang.state_from_hf_config`).

        Raises:
            InvalidConfigError: no ``mem_fraction_static``; a state model without ``state``
                (or ``state`` for a model without one, or a worker kvbudget declines).
            StateCacheTooSmallError: no state slot fits (SGLang's message).
        """
        if self.mem_fraction_static is None:
            raise InvalidConfigError("the runtime context gives no mem_fraction_static")
        if (state is not None) != self.state_pool:
            raise InvalidConfigError("a hybrid-state model's KV budget is what its state pool leaves: give its "
                                     "StateConfig (state=...)" if self.state_pool else
                                     "state=... given for a model SGLang plans no state pool for")  # fmt: skip
        if state is None:
            return sglang_available_bytes(free_before, free_now, self.mem_fraction_static, self.mm_reserve)
        if self.scenario is None:
            raise InvalidConfigError(f"kvbudget does not plan this worker's pools: {self.declined}")
        sc = self.scenario
        kv, _ = state_available_bytes(free_before, free_now, self.mem_fraction_static, state, sc.serving, sc.spec,
                                self.mm_reserve)  # fmt: skip
        return kv


def parser() -> argparse.ArgumentParser:
    """An argparse parser of :data:`FLAGS` (SGLang's names, prefixes and defaults)."""
    p = argparse.ArgumentParser(prog="sglang.launch_server", add_help=False)
    for f in FLAGS:
        if f.type is bool:
            p.add_argument(*f.names, dest=f.dest, action="store_true", default=f.default)
        else:
            p.add_argument(*f.names, dest=f.dest, type=f.type, default=f.default, choices=f.choices)
    return p


def _parse(args: Sequence[str] | Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    if isinstance(args, str):
        raise InvalidConfigError("from_server_args: give the flags as a list (shlex.split a command line)")
    if isinstance(args, Sequence):
        try:
            ns, unknown = parser().parse_known_args(list(args))
        except SystemExit:
            raise InvalidConfigError(f"SGLang launch flags could not be parsed: {' '.join(args)[:200]}") from None
        return vars(ns), tuple(unknown)
    return {f.dest: getattr(args, f.dest, f.default) for f in FLAGS}, ()


def _require(values: dict[str, Any]) -> None:
    if not values.get("model_path"):
        raise InvalidConfigError("the launch line has no --model-path (a local Hugging Face model folder)")
    algo = values.get("speculative_algorithm")
    if algo is not None:
        canonical_name("algorithm", str(algo))  # the core's names and aliases; an unknown one raises


def _model_dtype(values: dict[str, Any], cfg: dict[str, Any]) -> str:
    given = values["dtype"]
    if given != "auto":
        return canonical_name("model_dtype", given)
    name = config_dtype(cfg) or "bfloat16"
    # SGLang's "auto" serves a float32 checkpoint in bfloat16 (as transformers' dtype "auto" does not).
    if name == "float32":
        return "bf16"
    try:
        return canonical_name("model_dtype", str(name))
    except InvalidConfigError:  # a checkpoint dtype kvbudget has no model dtype for
        return "bf16"


def _draft_archs(path: str) -> list[str]:
    from kvbudget.models.hf import load_hf_config

    return list(load_hf_config(path).get("architectures") or [])


def _speculative(v: dict[str, Any], model: SGLangModel, cfg: dict[str, Any]) -> SpeculativeConfig:
    """The draft SGLang prices in the target's pools, from the resolved values ``v``."""
    from kvbudget.sglang.draft_layers import sglang_draft_layers
    from kvbudget.models.hf import load_hf_config

    algo = v["speculative_algorithm"]
    if algo is None:
        return SpeculativeConfig(algorithm="none")
    name = canonical_name("algorithm", str(algo))
    if model.architecture == "InklingForConditionalGeneration" and model.state_pool:
        raise InvalidConfigError("kvbudget has not checked a draft of Inkling in SGLang 0.5.23 (its MTP head's banded "
                                 "sliding-window depths and per-depth conv state pools, and a conv state whose windows "
                                 "SGLang never deduplicates): plan it without --speculative-algorithm")  # fmt: skip
    path, target = v["speculative_draft_model_path"], model.model_geometry()
    steps = {"num_steps": v["speculative_num_steps"], "eagle_topk": v["speculative_eagle_topk"],
             "num_draft_tokens": v["speculative_num_draft_tokens"]}  # fmt: skip
    if algo not in EAGLE_FAMILY and path is None:
        raise InvalidConfigError(f"--speculative-algorithm {algo}: give --speculative-draft-model-path")
    own = path is None or path == v["model_path"]  # the draft is the target's checkpoint (its MTP head)
    draft_cfg, arch, draft_model = cfg, model.architecture, None
    if not own:
        draft_cfg = load_hf_config(path)
        arch = (draft_cfg.get("architectures") or [None])[0]
        # The draft's own ModelConfig decides its sliding-window layers (an EAGLE head's is not hybrid).
        draft_model = resolve_sglang(draft_cfg).model_geometry()
    if algo in EAGLE_FAMILY:  # _resolve_eagle_aux_hidden_state
        # LongCat-Flash's text as SGLang's own class holds it (its num_nextn_predict_layers default: 1)
        layers = draft_kv_layers(text_part(longcat_config(draft_cfg) or draft_cfg), arch, path_given=path is not None)
    else:
        layers = int(text_part(draft_cfg).get("num_hidden_layers") or 1)
    counts = sglang_draft_layers(name, layers, target=target, draft_model=draft_model)
    return SpeculativeConfig(algorithm=name, **counts, **steps)


def _check_backends(values: dict[str, Any]) -> None:
    for side in ("", "prefill_", "decode_"):
        name = values[f"{side}attention_backend"]
        if name is not None and name not in RESOLVED_BACKENDS:
            raise InvalidConfigError(f"--{side.replace('_', '-')}attention-backend {name}: kvbudget restates SGLang's "
                                     f"launch-time resolution for {', '.join(RESOLVED_BACKENDS)} only")  # fmt: skip


def _notes(values: dict[str, Any], v: dict[str, Any], model: SGLangModel,
           unread_state: str | None) -> list[tuple[str, str]]:  # fmt: skip
    """What the line leaves to SGLang's launch-time resolution, and what kvbudget takes for it."""
    out: list[tuple[str, str]] = []
    if unread_state is not None:
        out.append(("(state pool)", f"SGLang sizes a state pool before the KV pool that kvbudget does not read "
                    f"({unread_state}); the budget kvbudget plans is the KV pool's"))  # fmt: skip
    if values["page_size"] != v["page_size"]:
        out.append(("--page-size", f"{v['page_size']}, as SGLang resolves it on a Hopper GPU with the "
                    f"{v['attention_backend']} attention backend"))  # fmt: skip
    if values["mem_fraction_static"] is None:
        out.append(("--mem-fraction-static", "none: SGLang picks it from the GPU's memory"))
    if model.index_head_dim is not None and None in (values["dsa_prefill_backend"], values["dsa_decode_backend"]):
        out.append(("--dsa-prefill-backend/--dsa-decode-backend", "the scaled FP8 latent (FlashMLA's); "
                    "SGLang picks the DSA backends from the hardware and kv_cache_dtype"))  # fmt: skip
    algo = v["speculative_algorithm"]
    if algo is not None and algo not in EAGLE_FAMILY:
        out.append(("--speculative-algorithm", f"{algo}: SGLang's launch-time handling of it is not restated; "
                    "the draft and step flags as given"))  # fmt: skip
    return out


def from_server_args(args: Sequence[str] | Any) -> SGLangLaunch:
    """Read an SGLang launch (``["--model-path", "/models/x", "--tp", "2", ...]`` or a
    ``ServerArgs``-like object) into kvbudget inputs, resolved as SGLang 0.5.23's
    launch resolves them on a Hopper GPU (:mod:`kvbudget.sglang.resolve`).

    Raises:
        LaunchRefused: SGLang refuses the line (the message gives its reason).
        InvalidConfigError: no ``--model-path``, a value SGLang's parser refuses,
            or a model or backend kvbudget cannot plan (the message says which).
    """
    from kvbudget.models.hf import load_hf_config

    values, unknown = _parse(args)
    _require(values)
    _check_backends(values)
    cfg = load_hf_config(values["model_path"])
    model = resolve_sglang(cfg, disable_hybrid_swa_memory=bool(values["disable_hybrid_swa_memory"]))
    geometry = model.model_geometry()
    dsa = model.index_head_dim is not None
    off = off_by_override(cfg.get("architectures") or [], text_part(cfg)) is not None
    v = resolve_launch(values, model.architecture, mla=geometry.kv_lora_rank is not None,
                       dsa_kpool=model.index_kpool if dsa else None, hybrid_off=off, draft_archs=_draft_archs,
                       config=cfg)  # fmt: skip
    ratio = v["swa_full_tokens_ratio"]
    serving = ServingConfig(
        kv_cache_dtype=canonical_name("kv_cache_dtype", v["kv_cache_dtype"]), model_dtype=_model_dtype(v, cfg),
        page_size=v["page_size"], tp_size=v["tp_size"], dcp_size=v["dcp_size"], attn_dp_size=v["attn_dp_size"],
        swa_full_tokens_ratio=SWA_FULL_TOKENS_RATIO_FALLBACK if ratio is None else ratio,
        max_running_requests=v["max_running_requests"], chunked_prefill_size=v["chunked_prefill_size"],
        disable_radix_cache=v["disable_radix_cache"], disable_overlap_schedule=v["disable_overlap_schedule"],
        disaggregation_mode=v["disaggregation_mode"],
        disaggregation_decode_extra_slots=v["disaggregation_decode_extra_slots"] or 0,
        enable_unified_memory=v["enable_unified_memory"],
        # the unified tri-pool's bs=1 floor reads it: --context-length, else SGLang's get_context_length
        model_context_len=(v["context_length"] or context_length(text_part(cfg))) if v["enable_unified_memory"] else None,
        dsa_raw_kv_layout=dsa and dsa_raw_kv_layout(
            v["dsa_prefill_backend"], v["dsa_decode_backend"], v["disaggregation_mode"]),
    )  # fmt: skip
    spec = _speculative(v, model, cfg)
    scenario = Scenario(geometry, serving, spec)
    state, unread = _state(cfg, v) if model.state_pool else (None, None)
    return SGLangLaunch(values, v, model, scenario, tuple(_notes(values, v, model, unread)), unknown, state)


def _state(cfg: dict[str, Any], v: dict[str, Any]) -> tuple[StateConfig | None, str | None]:
    """The state SGLang gives the checkpoint under the line's state-cache flags, or
    ``(None, why)`` for a state kvbudget does not read (lightning, registry, ...)."""
    unread = UNREAD_STATE_MODEL_TYPES.get(str(cfg.get("model_type")))
    if unread is not None:
        return None, unread
    strategy = v["mamba_radix_cache_strategy"]
    # Unset: StateConfig's default, SGLang's declared fallback (0.9).
    ratio = {} if v["mamba_full_memory_ratio"] is None else {"mamba_full_memory_ratio": v["mamba_full_memory_ratio"]}
    return state_from_hf_config(
        cfg, tp_size=v["tp_size"], attn_dp_size=v["attn_dp_size"], mamba_ssm_dtype=v["mamba_ssm_dtype"],
        max_mamba_cache_size=v["max_mamba_cache_size"],
        **ratio,
        mamba_radix_cache_strategy=state_strategy(strategy),
        enable_linear_replayssm_spec=v["enable_linear_replayssm_spec"],
        linear_replayssm_cache_len=v["linear_replayssm_cache_len"], enable_pd_role_switch=v["enable_pd_role_switch"],
    ), None  # fmt: skip
