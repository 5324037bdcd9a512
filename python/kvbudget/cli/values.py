"""What the command line plans: a :class:`CliScenario` (a :class:`kvbudget.Scenario` and how
the command line describes it) and its budget (:func:`budget_of`), shared by the flag
reading (:mod:`kvbudget.cli.scenario`) and the launch-line reading (:mod:`kvbudget.cli.launch`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvbudget._core import SpeculativeConfig
from kvbudget.cli import render
from kvbudget.cli.parser import DEFAULT_AVAILABLE, DEFAULT_MEM_FRACTION, GIB, UsageError
from kvbudget.errors import KVBudgetError
from kvbudget.sglang.configurators import Scenario

if TYPE_CHECKING:
    from kvbudget.sglang.configurators import PoolConfiguratorBase

__all__ = ["CliScenario", "budget_of"]


class _PlanningError(KVBudgetError):
    """A planning error raised by the command line itself (exit status 1)."""


@dataclass
class CliScenario:
    """What to plan (a :class:`kvbudget.Scenario`) and how the command line describes it."""

    scenario: Scenario
    model_label: str
    model_info: dict[str, Any]
    draft_label: str
    draft_info: dict[str, Any]
    available: int | None
    budget_label: str
    budget_info: dict[str, Any]
    is_default: bool = False
    notes: list[str] = field(default_factory=list)
    #: SGLang 0.5.23's pool choice for the model and why (None: no architecture known).
    sglang_pools: dict[str, Any] | None = None
    #: The note (one of ``notes``) that kvbudget's configurator is not SGLang's own choice,
    #: so its numbers are a what-if for SGLang; None when the two agree.
    what_if: str | None = None

    def use_sglang_choice(self) -> None:
        """The caller plans with SGLang's own configurator: the what-if note no longer applies."""
        if self.what_if is not None:
            self.notes.remove(self.what_if)
            self.what_if = None

    def configurator(self) -> PoolConfiguratorBase:
        """SGLang's configurator for the scenario (the factory's choice)."""
        return self.scenario.configurator()

    def require_budget(self) -> int:
        if self.available is None:
            raise UsageError(
                "no budget: give --available BYTES (e.g. 40GiB) or "
                "--gpu NAME [--mem-fraction F] [--weights-gib W]"
            )
        return self.available

    def to_dict(self) -> dict[str, Any]:
        s = self.scenario
        spec = None if s.spec == SpeculativeConfig() else json.loads(s.spec.to_json())
        return {
            "default": self.is_default,
            "model": {**self.model_info, "geometry": json.loads(s.model.to_json())},
            "draft": {**self.draft_info, "speculative": spec},
            "serving": json.loads(s.serving.to_json()),
            "budget": {"available_bytes": self.available, **self.budget_info},
            "sglang_pools": self.sglang_pools,
        }


def budget_of(
    args: argparse.Namespace, is_default: bool, notes: list[str]
) -> tuple[int | None, str, dict[str, Any]]:
    """The budget from ``--available`` / ``--gpu`` (or the default's): bytes, label, info."""
    from kvbudget.budget import gpu_available_bytes
    from kvbudget.models import get_gpu

    b = render.b
    if args.available is not None:
        if args.mem_fraction is not None or args.weights_gib is not None:
            raise UsageError("--mem-fraction and --weights-gib go with --gpu, not with --available")
        label = f"{b(args.available)} bytes = {render.gib(args.available)} (--available)"
        return args.available, label, {"source": "available"}
    if args.gpu is not None:
        gpu = get_gpu(args.gpu)
        fraction = DEFAULT_MEM_FRACTION if args.mem_fraction is None else args.mem_fraction
        weights = 0 if args.weights_gib is None else int(args.weights_gib * GIB)
        if args.weights_gib is None:
            notes.append("no --weights-gib: the budget assumes no weights on this GPU")
        available = gpu_available_bytes(gpu.memory_bytes, fraction, weights)
        if available <= 0:
            usable = gpu_available_bytes(gpu.memory_bytes, fraction)
            raise _PlanningError(
                f"no KV budget on {gpu.name}: {b(gpu.memory_bytes)} x {fraction:g} = {b(usable)} "
                f"bytes does not cover {b(weights)} bytes of weights"
            )
        label = (
            f"{b(available)} bytes = {render.gib(available)}: {gpu.model} "
            f"{gpu.stated_memory_gb} GB ({b(gpu.memory_bytes)} B, vendor-stated) "
            f"x mem-fraction {fraction:g} - weights {args.weights_gib or 0:g} GiB"
        )
        info = {
            "source": "gpu",
            "gpu": gpu.name,
            "gpu_memory_bytes": gpu.memory_bytes,
            "gpu_bytes_basis": gpu.bytes_basis,
            "mem_fraction": fraction,
            "weights_bytes": weights,
        }
        return available, label, info
    if args.mem_fraction is not None or args.weights_gib is not None:
        raise UsageError("--mem-fraction and --weights-gib need --gpu NAME")
    if is_default:
        label = (
            f"{b(DEFAULT_AVAILABLE)} bytes = {render.gib(DEFAULT_AVAILABLE)} "
            "(embedded default, REFERENCE section 5 example 1)"
        )
        return DEFAULT_AVAILABLE, label, {"source": "default"}
    return None, "none given", {"source": None}
