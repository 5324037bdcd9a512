"""The command line's hybrid-state part of a scenario: the state SGLang 0.5.23 keeps beside the KV
pool (:func:`_hybrid_state`), with the launch values SGLang fills in that its budget reads (the
radix-cache strategy, a draft's step flags and running-request cap), and a model without attention
layers (:class:`StateOnlyModel`). :mod:`kvbudget.cli.scenario` calls it from ``build_scenario``.
"""

from __future__ import annotations

import argparse
from typing import Any, Final

import kvbudget
from kvbudget import ServingConfig, SpeculativeConfig, StateConfig
from kvbudget.cli.parser import UsageError, serving_values, state_values
from kvbudget.cli.values import _PlanningError

__all__ = ["StateOnlyModel"]

#: What SGLang reads to choose a model's pools: its architectures and HF text config.
#: (architectures, the text config SGLang reads, the whole config: what the state reader reads).
_SGLangModel = tuple[list[str], dict[str, Any], dict[str, Any]]


def _hybrid_state(model: _SGLangModel | None, scenario: kvbudget.Scenario, args: argparse.Namespace,
                  notes: list[str]) -> tuple[kvbudget.Scenario, StateConfig | None]:
    """For a model SGLang 0.5.23 plans with a recurrent state pool: the scenario over the
    KV pool's layers as SGLang resolves them, and the state (else the scenario unchanged, None)."""
    from kvbudget.models.hf import ConfigError
    from kvbudget.sglang.model import resolve_sglang
    from kvbudget.sglang.state_model import STATE_MODEL_TYPES, state_from_hf_config

    if model is None or not model[0]:
        return scenario, None
    cfg = model[2]
    if cfg.get("model_type") not in STATE_MODEL_TYPES and model[1].get("model_type") not in STATE_MODEL_TYPES:
        return scenario, None
    arch = model[0][0] if model[0] else ""
    serving, strategy, radix_note = _radix_cache(cfg, arch, scenario.serving, scenario.spec, args)
    state = _state_of(cfg, serving, args, strategy)
    if state is None:
        return scenario, None
    try:
        geometry = resolve_sglang(cfg).model_geometry()
    except ConfigError as exc:
        raise _PlanningError(f"SGLang 0.5.23 plans a state pool for this model; its KV layers: {exc}") from None
    notes.append(f"SGLang 0.5.23 keeps a {state.mixer} state in {state.num_state_layers} layers beside a KV pool "
                 f"over the {geometry.num_layers} attention layers; the state pool comes out of the budget first")
    notes.extend(radix_note)
    if serving.enable_unified_memory and serving.model_context_len is None and geometry.swa_attention_layer_ids:
        from kvbudget.models.hf import text_part
        from kvbudget.sglang.pure_state import context_length

        try:  # the tri-pool's bs=1 floor reads it, as the launch path sets it
            serving = serving.replace(model_context_len=context_length(text_part(cfg)))
        except ConfigError as exc:
            raise _PlanningError(f"SGLang 0.5.23's context length of this config: {exc}") from None
        notes.append(f"--model-context-len {serving.model_context_len:,}: SGLang's context length of this config "
                     "(get_context_length), which its unified tri-pool's bs=1 floor reads")  # fmt: skip
    spec, serving = _launch_speculative(scenario.spec, serving, arch, notes)
    return kvbudget.Scenario(geometry, serving, spec), state


#: kvbudget's algorithm -> SGLang's after ``handle_speculative_decoding`` (NEXTN launches as EAGLE)
#: for the EAGLE family, whose step flags SGLang's launch fills in.
_SGLANG_EAGLE_FAMILY: Final[dict[str, str]] = {"eagle": "EAGLE", "nextn": "EAGLE", "eagle3": "EAGLE3",
                                               "standalone": "STANDALONE"}  # fmt: skip


def _launch_speculative(spec: SpeculativeConfig, serving: ServingConfig, arch: str,
                        notes: list[str]) -> tuple[SpeculativeConfig, ServingConfig]:  # fmt: skip
    """A draft beside a state pool, whose budget holds a row per draft token and request: the
    step flags and running-request cap left unset, as SGLang 0.5.23's launch fills them in
    (:func:`kvbudget.sglang.resolve.eagle_family_steps`, 48 running requests), each with a note."""
    from kvbudget.sglang.resolve import SPECULATIVE_MAX_RUNNING_REQUESTS, LaunchRefused, eagle_family_steps

    if spec.algorithm == "none":
        return spec, serving
    algorithm = _SGLANG_EAGLE_FAMILY.get(spec.algorithm)
    if algorithm is not None and spec.num_draft_tokens is None:
        try:
            steps, topk, tokens = eagle_family_steps(algorithm, arch, spec.num_steps, spec.eagle_topk, None)
        except LaunchRefused as exc:
            raise UsageError(str(exc)) from None
        if tokens is not None:  # top-k above 1 keeps the draft tokens given (none here): asked for below
            given = spec.num_steps is not None
            spec = spec.replace(num_steps=steps, eagle_topk=topk, num_draft_tokens=tokens)
            notes.append(f"--num-steps {steps}, --eagle-topk {topk}, --num-draft-tokens {tokens}: "
                         + ("SGLang's draft tokens at top-k 1 (steps + 1)" if given else
                            f"SGLang's launch picks for {arch or 'this model'} (_auto_choose_speculative_params)")
                         + "; the state pool holds a row per draft token")  # fmt: skip
    if serving.max_running_requests is None:
        serving = serving.replace(max_running_requests=SPECULATIVE_MAX_RUNNING_REQUESTS)
        notes.append(f"--max-running-requests {SPECULATIVE_MAX_RUNNING_REQUESTS}: what SGLang's launch sets with a "
                     "speculative draft when unset; the state pool's per-request buffers read it")  # fmt: skip
    return spec, serving


def _radix_cache(cfg: dict[str, Any], arch: str, serving: ServingConfig, spec: SpeculativeConfig,
                 args: argparse.Namespace) -> tuple[ServingConfig, str, list[str]]:  # fmt: skip
    """The serving flags, the state's ``mamba_radix_cache_strategy`` and a note on it: a strategy
    given is taken as given; ``auto`` (the default, SGLang's) as SGLang's launch resolves it from
    the same flags (:func:`kvbudget.sglang.resolve.state_radix_cache`, the linear-attention
    backend and tracking interval at SGLang's defaults), which may turn the overlap scheduler off."""
    from kvbudget.sglang.launch import FLAGS
    from kvbudget.sglang.resolve import LaunchRefused, state_radix_cache

    given = args.mamba_radix_cache_strategy
    if given != "auto":
        return serving, given, []
    values = {f.dest: f.default for f in FLAGS}
    values.update(page_size=serving.page_size, disable_radix_cache=serving.disable_radix_cache,
                  disable_overlap_schedule=serving.disable_overlap_schedule,
                  disaggregation_mode=serving.disaggregation_mode,
                  speculative_num_draft_tokens=spec.num_draft_tokens)  # fmt: skip
    try:
        strategy, no_overlap = state_radix_cache(values, arch, cfg)
    except LaunchRefused as exc:
        raise _PlanningError(str(exc)) from None
    turned_off = no_overlap and not serving.disable_overlap_schedule
    note = (f"--mamba-radix-cache-strategy auto: {strategy}, as SGLang's launch resolves it for {arch or 'this model'}"
            " (Triton linear attention)" + (", with the overlap scheduler off" if turned_off else ""))  # fmt: skip
    return (serving.replace(disable_overlap_schedule=True) if turned_off else serving), strategy, [note]


def _state_of(cfg: dict[str, Any], serving: ServingConfig, args: argparse.Namespace,
              strategy: str) -> StateConfig | None:  # fmt: skip
    """The state SGLang 0.5.23 keeps for ``cfg`` on one rank (None: no state pool), with the
    state flags and the resolved radix-cache ``strategy``."""
    from kvbudget.sglang.state_model import state_from_hf_config

    values = {**state_values(args), "mamba_radix_cache_strategy": strategy}
    return state_from_hf_config(cfg, tp_size=serving.tp_size, attn_dp_size=serving.attn_dp_size,
                                mamba_ssm_dtype=args.mamba_ssm_dtype, conv_dtype=args.mamba_conv_dtype,
                                **values)  # fmt: skip


class _NoAttention(Exception):  # noqa: N818 - a signal inside build_scenario
    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__("a model without attention layers")
        self.config = config


def _state_only(args: argparse.Namespace, cfg: dict[str, Any]) -> StateOnlyModel:
    """A pure state model's inputs for :mod:`kvbudget.cli.plan_state_only`."""
    if args.draft is not None and args.draft.strip().lower() not in ("", "none"):
        raise UsageError("kvbudget does not plan a draft beside a model without attention layers")
    values = serving_values(args)
    values["kv_cache_dtype"] = values["kv_cache_dtype"] or "bf16"  # no KV layer reads it
    archs = cfg.get("architectures") or [""]
    serving, strategy, notes = _radix_cache(cfg, str(archs[0]), ServingConfig(**values), SpeculativeConfig(), args)
    state = _state_of(cfg, serving, args, strategy)
    if state is None:  # a pure state model SGLang plans without a state pool is none kvbudget knows
        raise _PlanningError("SGLang 0.5.23 plans no state pool for this model, and it has no attention layer")
    return StateOnlyModel(state, cfg, serving, None, notes)


class StateOnlyModel(_PlanningError):
    """The model has a state pool and no attention layer (a pure state model): ``kvbudget plan``
    (SGLang mode) plans it with :func:`kvbudget.sglang.state.plan_state_only`
    (:mod:`kvbudget.cli.plan_state_only`); any other command reports this error."""

    def __init__(self, state: StateConfig, config: dict[str, Any], serving: ServingConfig,
                 spec: SpeculativeConfig | None, notes: list[str]) -> None:  # fmt: skip
        super().__init__("this model has no attention layer (a pure state model): `kvbudget plan CONFIG --engine "
                         "sglang` plans its state pool, and `--engine vllm` vLLM's blocks; this command does not "
                         "take it")  # fmt: skip
        self.state, self.config, self.serving, self.spec, self.notes = state, config, serving, spec, notes
