"""What the command line plans: a :class:`CliScenario` (a :class:`kvbudget.Scenario` and how
the command line describes it) and its budget (:func:`budget_of`), shared by the flag
reading (:mod:`kvbudget.cli.scenario`) and the launch-line reading (:mod:`kvbudget.cli.launch`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvbudget._core import ServingConfig, SpeculativeConfig
from kvbudget.cli import render
from kvbudget.cli.parser import (
    DEFAULT_GPU,
    DEFAULT_MEM_FRACTION,
    DEFAULT_WEIGHTS_GIB,
    DEFAULT_WEIGHTS_SOURCE,
    GIB,
    UsageError,
)
from kvbudget.errors import KVBudgetError
from kvbudget.sglang.configurators import Scenario

if TYPE_CHECKING:
    from kvbudget._core import StateConfig
    from kvbudget.sglang.configurators import PoolConfiguratorBase
    from kvbudget.sglang.state import StateBudget

__all__ = ["CliScenario", "VllmOnly", "budget_of"]


class _PlanningError(KVBudgetError):
    """A planning error raised by the command line itself (exit status 1)."""


@dataclass(frozen=True)
class VllmOnly:
    """``plan --engine vllm`` on a config SGLang's reading refuses: what the command line gives
    beside the model (vLLM's reader takes the config itself)."""

    serving: ServingConfig
    spec: SpeculativeConfig
    #: Why kvbudget's SGLang-mode reading of the config refused it, in its words.
    sglang_refusal: str


@dataclass
class CliScenario:
    """What to plan (a :class:`kvbudget.Scenario`) and how the command line describes it."""

    #: What SGLang and the exact plan read; None only for ``plan --engine vllm`` on a config
    #: SGLang's reading refuses (:attr:`vllm_only` then holds the rest).
    scenario: Scenario | None
    model_label: str
    model_info: dict[str, Any]
    draft_label: str
    draft_info: dict[str, Any]
    available: int | None
    budget_label: str
    budget_info: dict[str, Any]
    is_default: bool = False
    notes: list[str] = field(default_factory=list)
    #: Notes on SGLang's side alone (its state pool, how its launch resolves the state flags):
    #: shown with SGLang's numbers, not with vLLM's alone (``plan --engine vllm``).
    sglang_notes: list[str] = field(default_factory=list)
    #: SGLang 0.5.23's pool choice for the model and why (None: no architecture known).
    sglang_pools: dict[str, Any] | None = None
    #: Why :meth:`configurator` (the factory's choice for the geometry as given) is not SGLang's
    #: own choice, so that its numbers are a what-if for SGLang; None when the two agree. Not
    #: one of ``notes``: it is shown only with that configurator's numbers.
    what_if: str | None = None
    #: A hybrid model's recurrent state (None: the model keeps none): SGLang takes its pool out
    #: of ``available`` before the KV pool (:meth:`require_budget`).
    state: StateConfig | None = None
    #: The state pool SGLang sizes from ``available`` (set by :meth:`require_budget`).
    state_budget: StateBudget | None = None
    #: When :attr:`scenario` is None: the serving flags, the draft, and why SGLang's reading
    #: of the config refused it.
    vllm_only: VllmOnly | None = None

    @property
    def sglang_scenario(self) -> Scenario:
        """:attr:`scenario`; a planning error naming SGLang's refusal when only vLLM reads the model."""
        if self.scenario is None:
            assert self.vllm_only is not None
            raise _PlanningError(f"only vLLM's reader takes this config: {self.vllm_only.sglang_refusal}")
        return self.scenario

    @property
    def serving(self) -> ServingConfig:
        """The serving flags."""
        return self.scenario.serving if self.scenario is not None else self._parts().serving

    @property
    def spec(self) -> SpeculativeConfig:
        """The speculative settings."""
        return self.scenario.spec if self.scenario is not None else self._parts().spec

    def _parts(self) -> VllmOnly:
        assert self.vllm_only is not None, "a CliScenario holds a scenario or vllm_only"
        return self.vllm_only

    @property
    def sglang_hybrid_swa(self) -> bool | None:
        """Whether SGLang 0.5.23 gives the model separate SWA pools (None: unknown)."""
        return None if self.sglang_pools is None else self.sglang_pools["hybrid_swa"]

    def configurator(self) -> PoolConfiguratorBase:
        """SGLang's configurator for the scenario (the factory's choice)."""
        return self.sglang_scenario.configurator()

    def require_budget(self) -> int:
        """The KV pool's budget, bytes: ``available``, less a hybrid model's state pool
        (:func:`kvbudget.sglang.state.state_budget` on ``available`` as SGLang's GiB)."""
        if self.available is None:
            raise UsageError(
                "no budget: give --available BYTES (e.g. 40GiB) or "
                "--gpu NAME [--mem-fraction F] [--weights-gib W]"
            )
        if self.state is None:
            return self.available
        from kvbudget.sglang.state import kv_budget_bytes, state_budget

        s = self.sglang_scenario
        if s.spec.algorithm not in ("none", "") and s.spec.num_draft_tokens is None:
            # the EAGLE family's come from SGLang's launch rules where they settle them (build_scenario)
            raise UsageError("a draft beside a state pool: the state pool holds a row per draft token, so give "
                             "--num-draft-tokens (SGLang takes a DFLASH or DSPARK draft's from its checkpoint, "
                             "and keeps the one given at top-k above 1), or plan the launch line itself with "
                             "--sglang '...'")  # fmt: skip
        self.state_budget = state_budget(self.state, s.serving, s.spec, self.available / GIB)
        return kv_budget_bytes(self.state_budget)

    def to_dict(self) -> dict[str, Any]:
        s = self.scenario
        spec = None if self.spec == SpeculativeConfig() else json.loads(self.spec.to_json())
        geometry = None if s is None else json.loads(s.model.to_json())
        return {
            "default": self.is_default,
            "model": {**self.model_info, "geometry": geometry,
                      **({} if self.vllm_only is None else {"sglang_refusal": self.vllm_only.sglang_refusal})},
            "draft": {**self.draft_info, "speculative": spec},
            "serving": json.loads(self.serving.to_json()),
            "budget": {"available_bytes": self.available, **self.budget_info},
            "sglang_pools": self.sglang_pools,
            "state": None if self.state is None else {
                "config": json.loads(self.state.to_json()),
                "budget": None if self.state_budget is None else vars(self.state_budget),
            },
        }  # fmt: skip


def budget_of(
    args: argparse.Namespace, is_default: bool, notes: list[str]
) -> tuple[int | None, str, dict[str, Any]]:
    """The budget from ``--available`` / ``--gpu`` (or the default's): bytes, label, info."""
    b = render.b
    if args.available is not None:
        if args.mem_fraction is not None or args.weights_gib is not None:
            raise UsageError("--mem-fraction and --weights-gib go with --gpu, not with --available")
        label = f"{b(args.available)} bytes = {render.gib(args.available)} (--available)"
        return args.available, label, {"source": "available"}
    if args.gpu is not None or is_default:
        return _gpu_budget(args, is_default, notes)
    if args.mem_fraction is not None or args.weights_gib is not None:
        raise UsageError("--mem-fraction and --weights-gib need --gpu NAME")
    return None, "none given", {"source": None}


def _gpu_budget(args: argparse.Namespace, is_default: bool, notes: list[str]) -> tuple[int, str, dict[str, Any]]:
    """A GPU preset's memory x the memory fraction - the weights. The embedded default takes the
    H200 preset, the assumed fraction and its checkpoint's published weights for the parts its
    flags leave out, and says where each number comes from."""
    from kvbudget.budget import gpu_available_bytes
    from kvbudget.models import get_gpu

    b = render.b
    gpu = get_gpu(DEFAULT_GPU if args.gpu is None else args.gpu)
    fraction = DEFAULT_MEM_FRACTION if args.mem_fraction is None else args.mem_fraction
    weights_gib = args.weights_gib
    sources = {"gpu": "--gpu" if args.gpu is not None else "the embedded default's GPU preset",
               "mem_fraction": "--mem-fraction", "weights": "--weights-gib"}  # fmt: skip
    if args.mem_fraction is None:
        sources["mem_fraction"] = "assumed: SGLang 0.5.23 picks its own --mem-fraction-static at launch"
    if weights_gib is None and is_default:
        weights_gib, sources["weights"] = DEFAULT_WEIGHTS_GIB, DEFAULT_WEIGHTS_SOURCE
    elif weights_gib is None:
        weights_gib, sources["weights"] = 0.0, "none given"
        notes.append("no --weights-gib: the budget assumes no weights on this GPU")
    weights = int(weights_gib * GIB)
    available = gpu_available_bytes(gpu.memory_bytes, fraction, weights)
    if available <= 0:
        usable = gpu_available_bytes(gpu.memory_bytes, fraction)
        raise _PlanningError(
            f"no KV budget on {gpu.name}: {b(gpu.memory_bytes)} x {fraction:g} = {b(usable)} "
            f"bytes does not cover {b(weights)} bytes of weights"
        )
    label = f"{b(available)} bytes = {render.gib(available)}: {gpu.model} {gpu.stated_memory_gb} GB "
    if is_default:
        label += (f"({b(gpu.memory_bytes)} B, vendor-stated, {sources['gpu']}) x mem-fraction {fraction:g} "
                  f"({sources['mem_fraction']}) - weights {weights_gib:g} GiB = {b(weights)} B ({sources['weights']})")
    else:
        label += f"({b(gpu.memory_bytes)} B, vendor-stated) x mem-fraction {fraction:g} - weights {weights_gib:g} GiB"
    info = {"source": "gpu", "gpu": gpu.name, "gpu_memory_bytes": gpu.memory_bytes,
            "gpu_bytes_basis": gpu.bytes_basis, "mem_fraction": fraction, "weights_bytes": weights,
            "sources": sources}  # fmt: skip
    return available, label, info
