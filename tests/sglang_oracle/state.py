"""SGLang 0.5.23's hybrid-state (Mamba / gated-delta / KDA) budget, run from the verified wheel extraction.

Executed whole: ``configs/mamba_utils.py`` (``Mamba2StateDType``,
``mamba2_state_dtype``, ``Mamba2StateShape.create`` / ``create_full_rank``,
``KimiLinearStateShape.create``, ``Mamba2CacheParams``, ``KimiLinearCacheParams``
with ``mamba_cache_per_req`` and ``replayssm_ring_bytes_per_req``).

Lifted unchanged (:class:`~oracle_kit.lift.Source`):

* ``distributed/utils.py``: ``ensure_divisibility``, ``divide`` (what
  ``mamba_utils`` imports) and ``get_pp_indices``;
* ``mem_cache/allocation_sizing.py``: ``get_mamba_tracking_slots``;
* ``mem_cache/kv_cache_configurator.py``: ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``,
  ``MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP``, ``MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER``,
  ``_pd_prefill_skips_mamba_spec_state`` and the methods
  ``KVCacheConfigurator._handle_max_mamba_cache``, ``_calculate_mamba_ratio`` and
  ``resolve_max_num_reqs`` (class attributes of a :class:`StrictNamespace`
  subclass standing in for the configurator);
* ``arg_groups/model_override_base.py``: ``mamba_extra_buffer_of``;
  ``arg_groups/overrides.py``: ``mamba_extra_buffer_lazy_of`` (the two
  ``get_exec().mamba`` flags, from ``disable_radix_cache`` and the strategy);
* the configs' ``mamba2_cache_params`` (how SGLang calls ``create``):
  ``Qwen3NextConfig`` (GDN), ``KimiLinearConfig`` (KDA), ``NemotronHConfig`` and
  ``Mamba2Config`` (Mamba-2), ``MambaConfig`` with ``_mamba1_cache_params``
  (Mamba-1, ``create_full_rank``), ``BailingHybridConfig`` (Ling 2.5's lightning
  state: a Mamba-2 shape without conv rows). ``kda_direct`` cases call
  ``KimiLinearStateShape.create`` with ``num_k_heads`` / ``head_k_dim`` (no
  0.5.23 config passes them) and ``KimiLinearCacheParams`` directly.

Stubbed (strict: any other read raises :class:`~._strict.StubError`, which is
re-raised, never reported as SGLang's outcome):

* ``envs``: ``SGLANG_MAMBA_CONV_DTYPE``, ``SGLANG_MAMBA_SSM_DTYPE``,
  ``SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK`` (the case's values);
* the bags: ``get_parallel()`` (``attn_tp_size``, ``tp_size``),
  ``get_schedule()`` (``max_mamba_cache_size``, ``mamba_full_memory_ratio``,
  ``max_running_requests``, ``disable_overlap_schedule``), ``get_spec()``
  (``speculative_num_draft_tokens``), ``get_memory()`` (``disable_radix_cache``,
  ``enable_unified_memory``), ``get_disagg()`` (``disaggregation_mode``,
  ``enable_pd_role_switch``), ``get_exec().mamba`` (the two extra-buffer flags,
  ``enable_linear_replayssm_spec``, ``linear_replayssm_cache_len``);
  ``get_context().override(label, max_mamba_cache_size=v)`` writes ``v`` on the
  schedule bag (as ``RuntimeContext.override`` does, no validation) and
  records the label; ``linear_attn_tp_size()`` is ``attn_tp_size``;
* ``os`` in ``get_pp_indices``: ``getenv("SGLANG_PP_LAYER_PARTITION")`` is None;
* ``_is_npu = False``, ``_is_cpu = False``; a silent logger;
* the configurator ``self``: ``mambaish_config.mamba2_cache_params`` (built by
  the config code above), ``pp_size``, ``model_config`` (``num_hidden_layers``,
  ``context_len``), ``fused_entry_bytes("mamba")``, ``spec_algorithm.is_none()``,
  ``hybrid_gdn_config`` / ``hybrid_kda_config`` (non-None for GDN / KDA),
  ``attn_dp_size``, ``extra_mamba_cache_bytes_per_req``.

The locals of ``_handle_max_mamba_cache`` (``stage_per_req``, ``extra_per_slot``,
``replayssm_fixed_bytes``, ``intermediate_size``, ``mamba_state_memory``) are
SGLang's own values, read from its frame at return with a trace function.
"""

from __future__ import annotations

import logging
import sys
import traceback
import typing
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from ._plumbing import PREFIX, Builder, Envs, pick
from .mamba_pool import MambaPoolOracle
from ._strict import Poison, StrictNamespace, StubError

#: The ``get_context().override`` labels of ``_handle_max_mamba_cache``, one per branch.
LABELS = frozenset({"mamba_pool.per_dp_shard", "mamba_pool.from_max_running_requests",
                    "mamba_pool.memory_budget_spec", "mamba_pool.memory_budget"})  # fmt: skip
#: The case sources: which SGLang config (or direct call) builds the cache params.
SOURCES = ("nemotron_h", "mamba2", "mamba1", "gdn", "kda", "kda_direct", "lightning")
_LOCALS = ("stage_per_req", "extra_per_slot", "replayssm_fixed_bytes", "intermediate_size",
           "mamba_state_memory", "pp_layer_scale", "reserves_spec_state", "replayssm_active")  # fmt: skip
_TOO_SMALL = ("Not enough GPU memory for hybrid", "too small to serve any requests")
_LOG = logging.getLogger(f"{PREFIX}.state")


@dataclass(frozen=True)
class StateCase:
    """One hybrid-state case: the model's state config and the serving knobs (SGLang names)."""

    source: str  # one of SOURCES
    hf: dict[str, Any]  # the config attributes that source's mamba2_cache_params reads
    num_hidden_layers: int
    tp: int = 1
    pp: int = 1
    attn_dp: int = 1
    env_conv_dtype: str = "bfloat16"
    env_ssm_dtype: str | None = None
    skip_decode_lock: bool = False
    spec: bool = False
    num_draft_tokens: int | None = None
    max_running_requests: int | None = None
    max_mamba_cache_size: int | None = None
    mamba_full_memory_ratio: float = 0.9
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    strategy: str = "no_buffer"
    replay: bool = False
    replay_len: int = 16
    extra_bytes: int = 0
    fused_bytes: int | None = None
    disagg: str = "null"
    role_switch: bool = False
    unified_memory: bool = False
    rest_gib: float = 10.0
    token_capacity: int = 100_000
    context_len: int = 32768
    eagle_topk: int | None = None  # read by the state pool's allocation (dense conv windows above 1)

    @property
    def mixer(self) -> str:
        """kvbudget's mixer name for this source."""
        return {"gdn": "gdn", "kda": "kda", "kda_direct": "kda"}.get(self.source, "mamba2")


def _error(root: Path, e: BaseException, stage: str) -> dict[str, Any]:
    """SGLang's refusal as a result, or re-raises what is not SGLang's own outcome."""
    if isinstance(e, StubError):
        raise e
    frames = traceback.extract_tb(e.__traceback__)
    raised_in_sglang = bool(frames) and frames[-1].filename.startswith(str(root))
    if isinstance(e, RuntimeError) and any(m in str(e) for m in _TOO_SMALL):
        kind = "state_too_small"
    elif isinstance(e, (AssertionError, TypeError, ZeroDivisionError)) and raised_in_sglang:
        kind = "invalid"
    else:
        raise e
    return {"error": (kind, str(e)), "error_type": type(e).__name__, "error_stage": stage}


class _Context:
    """``get_context()``: ``override(label, max_mamba_cache_size=...)`` writes the schedule bag."""

    def __init__(self, schedule: StrictNamespace) -> None:
        self.schedule = schedule
        self.labels: list[str] = []

    def override(self, source: str, **fields: Any) -> None:
        if source not in LABELS or set(fields) != {"max_mamba_cache_size"}:
            raise StubError(f"sglang_oracle.state: override({source!r}, {sorted(fields)}) is not emulated")
        self.schedule.__dict__["max_mamba_cache_size"] = fields["max_mamba_cache_size"]
        self.labels.append(source)


class _Capture:
    """Copies the locals of one code object's frame when it returns (normally or not)."""

    def __init__(self, code: Any) -> None:
        self.code = code
        self.values: dict[str, Any] = {}

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._local if event == "call" and frame.f_code is self.code else None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            self.values = {k: frame.f_locals[k] for k in _LOCALS if k in frame.f_locals}
        return self._local

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        old = sys.gettrace()
        sys.settrace(self._global)
        try:
            return fn(*args)
        finally:
            sys.settrace(old)


class StateOracle:
    """SGLang's state shapes, ``_handle_max_mamba_cache``, ``_calculate_mamba_ratio`` and
    ``resolve_max_num_reqs`` on a case (:meth:`run`); :attr:`pool` allocates the state pool
    (``MambaPool``) on meta."""

    def __init__(self, root: Path) -> None:
        self.root = root
        b = self.b = Builder(root, real=frozenset({"numpy"}))
        g = b.getters
        du = b.namespace("distributed.utils", Tuple=typing.Tuple,
                         os=StrictNamespace("os", getenv=self._getenv))  # fmt: skip
        b.source("distributed/utils.py").lift(du, "ensure_divisibility", "divide", "get_pp_indices")
        b.provide("distributed.utils", pick(du, "divide"))
        b.provide("environ", {"envs": Envs(b.active)})
        b.provide("runtime_context", {"get_parallel": g["parallel"]})
        self.mu = mu = b.execute("configs.mamba_utils")
        sizing = b.namespace("mem_cache.allocation_sizing")
        b.source("mem_cache/allocation_sizing.py").lift(sizing, "get_mamba_tracking_slots")
        flags = b.namespace("arg_groups.model_override_base", Any=Any)
        b.source("arg_groups/model_override_base.py").lift(flags, "mamba_extra_buffer_of")
        b.source("arg_groups/overrides.py").lift(flags, "mamba_extra_buffer_lazy_of")
        self.extra_buffer_of = flags["mamba_extra_buffer_of"]
        self.extra_buffer_lazy_of = flags["mamba_extra_buffer_lazy_of"]
        self.get_pp_indices = du["get_pp_indices"]

        kvc = b.namespace(
            "mem_cache.kv_cache_configurator", Optional=typing.Optional, logger=_LOG, _is_npu=False,
            envs=Envs(b.active), get_pp_indices=du["get_pp_indices"],
            get_mamba_tracking_slots=sizing["get_mamba_tracking_slots"], get_context=self._get_context,
            **{f"get_{n}": g[n] for n in ("schedule", "spec", "memory", "disagg", "exec")},
        )  # fmt: skip
        src = b.source("mem_cache/kv_cache_configurator.py")
        src.lift(kvc, "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO", "MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP",
                 "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER", "_pd_prefill_skips_mamba_spec_state")  # fmt: skip
        methods = {m: src.lift_method(kvc, "KVCacheConfigurator", m)
                   for m in ("_handle_max_mamba_cache", "_calculate_mamba_ratio", "resolve_max_num_reqs")}
        self.kvc_class = type("KVCacheConfigurator", (StrictNamespace,), {"__slots__": (), **methods})
        self.constants = pick(kvc, "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP "
                                   "MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER")  # fmt: skip
        self.pd_prefill_skips = kvc["_pd_prefill_skips_mamba_spec_state"]
        self.capture = _Capture(methods["_handle_max_mamba_cache"].__code__)
        self.params = self._config_params(mu, g["parallel"])
        self.pool = MambaPoolOracle(b)

    # -- stubs -------------------------------------------------------------
    @staticmethod
    def _getenv(name: str, default: Any = None) -> Any:
        if name != "SGLANG_PP_LAYER_PARTITION":
            raise StubError(f"sglang_oracle.state: os.getenv({name!r}) is not provided by the sandbox")
        return None

    def _get_context(self) -> _Context:
        ctx = self.b.active.require()
        assert isinstance(ctx.context, _Context)
        return ctx.context

    def _config_params(self, mu: dict[str, Any], get_parallel: Callable[[], Any]) -> dict[str, Callable[[Any], Any]]:
        """``source -> fn(config)``: the configs' own ``mamba2_cache_params`` (lifted)."""
        b, shapes = self.b, pick(mu, "Mamba2StateShape Mamba2CacheParams mamba2_state_dtype")
        kimi = pick(mu, "KimiLinearStateShape KimiLinearCacheParams")
        linear_tp = lambda: get_parallel().attn_tp_size  # noqa: E731 (linear_attn_tp_size())
        out: dict[str, Callable[[Any], Any]] = {}
        for source, rel, cls, extra in (
            ("gdn", "configs/qwen3_next.py", "Qwen3NextConfig",
             dict(_is_cpu=False, adjust_tp_num_heads_if_necessary=Poison("adjust_tp_num_heads_if_necessary"),
                  get_parallel=Poison("qwen3_next.get_parallel (CPU only)"), linear_attn_tp_size=linear_tp)),
            ("nemotron_h", "configs/nemotron_h.py", "NemotronHConfig", dict(get_parallel=get_parallel)),
            ("mamba2", "configs/mamba2.py", "Mamba2Config", {}),
            ("kda", "configs/kimi_linear.py", "KimiLinearConfig", dict(get_parallel=get_parallel, **kimi)),
            ("lightning", "configs/bailing_hybrid.py", "BailingHybridConfig",
             dict(get_parallel=get_parallel, **kimi)),
        ):  # fmt: skip
            ns = b.namespace(rel[:-3].replace("/", "."), Union=typing.Union, **shapes, **extra)
            out[source] = b.source(rel).lift_member(ns, cls, "mamba2_cache_params").fget
        ns = b.namespace("configs.mamba", **shapes)
        b.source("configs/mamba.py").lift(ns, "_mamba1_cache_params")
        out["mamba1"] = b.source("configs/mamba.py").lift_member(ns, "MambaConfig", "mamba2_cache_params").fget

        def kda_direct(cfg: Any) -> Any:
            shape = kimi["KimiLinearStateShape"].create(
                tp_world_size=get_parallel().attn_tp_size, num_heads=cfg.num_heads, head_dim=cfg.head_dim,
                num_k_heads=cfg.num_k_heads, head_k_dim=cfg.head_k_dim, conv_kernel_size=cfg.conv_kernel_size)
            return kimi["KimiLinearCacheParams"](shape=shape, layers=cfg.linear_layer_ids)

        out["kda_direct"] = kda_direct
        return out

    # -- one case ----------------------------------------------------------
    def _ctx(self, case: StateCase) -> StrictNamespace:
        flag_view = StrictNamespace("server_args", disable_radix_cache=case.disable_radix_cache,
                                    mamba_radix_cache_strategy=case.strategy)  # fmt: skip
        mamba = StrictNamespace(
            "get_exec().mamba", enable_mamba_extra_buffer=self.extra_buffer_of(flag_view),
            enable_mamba_extra_buffer_lazy=self.extra_buffer_lazy_of(flag_view),
            enable_linear_replayssm_spec=case.replay, linear_replayssm_cache_len=case.replay_len,
        )  # fmt: skip
        schedule = StrictNamespace(
            "get_schedule()", max_mamba_cache_size=case.max_mamba_cache_size,
            mamba_full_memory_ratio=case.mamba_full_memory_ratio, max_running_requests=case.max_running_requests,
            disable_overlap_schedule=case.disable_overlap_schedule,
        )  # fmt: skip
        return StrictNamespace(
            "runtime context", schedule=schedule, context=_Context(schedule),
            envs={"SGLANG_MAMBA_CONV_DTYPE": case.env_conv_dtype, "SGLANG_MAMBA_SSM_DTYPE": case.env_ssm_dtype,
                  "SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK": case.skip_decode_lock},
            parallel=StrictNamespace("get_parallel()", attn_tp_size=case.tp, tp_size=case.tp),
            spec=StrictNamespace("get_spec()", speculative_num_draft_tokens=case.num_draft_tokens),
            memory=StrictNamespace("get_memory()", disable_radix_cache=case.disable_radix_cache,
                                   enable_unified_memory=case.unified_memory),
            disagg=StrictNamespace("get_disagg()", disaggregation_mode=case.disagg,
                                   enable_pd_role_switch=case.role_switch),
            exec=StrictNamespace("get_exec()", mamba=mamba),
        )  # fmt: skip

    def _config(self, case: StateCase) -> StrictNamespace:
        """The HF config stand-in: the case's attributes; ``text_config`` (and an unset
        ``mamba_ssm_dtype``) are absent, so ``hasattr`` probes see "not set"."""
        attrs = {k: v for k, v in case.hf.items() if not (k == "mamba_ssm_dtype" and v is None)}
        absent = {"text_config"} | ({"mamba_ssm_dtype"} - set(attrs))
        return StrictNamespace(f"{case.source} config", absent, **attrs)

    def _kvc(self, case: StateCase, params: Any) -> Any:
        def fused_entry_bytes(sub_pool_name: str) -> int | None:
            if sub_pool_name != "mamba":
                raise StubError(f"sglang_oracle.state: fused_entry_bytes({sub_pool_name!r})")
            return case.fused_bytes

        return self.kvc_class(
            "KVCacheConfigurator", pp_size=case.pp, attn_dp_size=case.attn_dp,
            mambaish_config=None if params is None else StrictNamespace("mambaish_config", mamba2_cache_params=params),
            model_config=StrictNamespace("ModelConfig", num_hidden_layers=case.num_hidden_layers,
                                         context_len=case.context_len),
            fused_entry_bytes=fused_entry_bytes, extra_mamba_cache_bytes_per_req=case.extra_bytes,
            spec_algorithm=StrictNamespace("SpeculativeAlgorithm", is_none=lambda: not case.spec),
            hybrid_gdn_config=StrictNamespace("hybrid_gdn_config") if case.mixer == "gdn" else None,
            hybrid_kda_config=StrictNamespace("hybrid_kda_config") if case.mixer == "kda" else None,
        )  # fmt: skip

    def pd_prefill_skips_for(self, case: StateCase) -> bool:
        """SGLang's ``_pd_prefill_skips_mamba_spec_state()`` for the case: the hybrid req pool
        then gets no ``speculative_num_draft_tokens``."""
        self.b.active.ctx = self._ctx(case)
        try:
            return bool(self.pd_prefill_skips())
        finally:
            self.b.active.ctx = None

    def run(self, case: StateCase) -> dict[str, Any]:
        """SGLang's outcome: ``shape`` (conv, temporal, k_heads_per_tp, dtypes, layers),
        ``per_req_bytes`` (``mamba_cache_per_req``), ``replay_ring_bytes``,
        ``max_mamba_cache_size``, ``rest_gib``, ``branch`` (the override label),
        ``locals`` (of ``_handle_max_mamba_cache``), ``mamba_ratio`` / ``ratio_error``,
        ``max_num_reqs`` (after the budget), ``max_num_reqs_plain`` (no state
        config), ``params`` (the cache params, for :attr:`pool`), and ``error`` (None or
        ``(kind, message)``) with ``error_type`` and ``error_stage`` ("shape", "budget" or
        "resolve")."""
        out: dict[str, Any] = dict.fromkeys(
            ("params", "shape", "per_req_bytes", "replay_ring_bytes", "max_mamba_cache_size", "rest_gib", "branch",
             "mamba_ratio", "ratio_error", "max_num_reqs", "max_num_reqs_plain", "error", "error_type",
             "error_stage"))  # fmt: skip
        out["locals"] = {}
        active = self.b.active
        active.ctx = self._ctx(case)
        try:
            out["max_num_reqs_plain"] = self._kvc(case, None).resolve_max_num_reqs(case.token_capacity)
            try:
                params = self.params[case.source](self._config(case))
                s = params.shape
                out["params"] = params  # for the state pool's allocation (MambaPoolOracle)
                out["shape"] = {"conv": [tuple(c) for c in s.conv], "temporal": tuple(s.temporal),
                                "k_heads_per_tp": s.num_k_heads_per_tp, "conv_kernel": s.conv_kernel,
                                "layers": list(params.layers),
                                "conv_dtype": str(params.dtype.conv).removeprefix("torch."),
                                "ssm_dtype": str(params.dtype.temporal).removeprefix("torch.")}  # fmt: skip
                out["per_req_bytes"] = params.mamba_cache_per_req
                out["replay_ring_bytes"] = params.replayssm_ring_bytes_per_req(record_len=case.replay_len)
            except Exception as e:  # noqa: BLE001 (_error re-raises what is not SGLang's refusal)
                out.update(_error(self.root, e, "shape"))
                return out
            kvc = self._kvc(case, params)
            try:
                out["mamba_ratio"] = kvc._calculate_mamba_ratio()
            except Exception as e:  # noqa: BLE001
                out["ratio_error"] = _error(self.root, e, "ratio")["error_type"]
            self.capture.values = {}
            try:
                out["rest_gib"] = self.capture.call(kvc._handle_max_mamba_cache, case.rest_gib)
            except Exception as e:  # noqa: BLE001
                out.update(_error(self.root, e, "budget"))
            finally:
                out["locals"] = self.capture.values
                out["max_mamba_cache_size"] = active.ctx.schedule.max_mamba_cache_size
                labels = active.ctx.context.labels
                out["branch"] = labels[-1] if labels else None
            if out["error"] is not None:
                return out
            try:
                out["max_num_reqs"] = kvc.resolve_max_num_reqs(case.token_capacity)
            except Exception as e:  # noqa: BLE001
                out.update(_error(self.root, e, "resolve"))
            return out
        finally:
            active.ctx = None


def load(root: Path) -> StateOracle:
    """The oracle over the verified extraction at ``root`` (``sglang_oracle._fetch.sglang_root()``)."""
    return StateOracle(root)
