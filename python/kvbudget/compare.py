"""One deployment in each engine's own terms, and SGLang's fits side by side.

The engine-neutral house above :mod:`kvbudget.sglang` and :mod:`kvbudget.vllm`:
it imports both, neither imports it. What the command line's ``plan`` (the
embedded default) and ``compare`` print is computed here; they only render it.

* :func:`sglang_configurator`: the configurator SGLang 0.5.23 itself plans a
  scenario with (its own pool choice for the model, not the geometry as given).
* :func:`compare_engines`: for one model, drafter and GPU, SGLang's pools (its
  token counts, as it allocates them), kvbudget's exact plan in the same
  layout, vLLM 0.33.0's blocks, and the requests each holds at every context
  length (:func:`kvbudget.workload.concurrency` for SGLang's pools,
  :func:`kvbudget.vllm.plan` re-planned at each length for vLLM's).
* :func:`compare_fits`: ``fit="exact"`` against ``fit="sglang"`` on one
  budget, and SGLang with the draft in its budget (PR #29622) against SGLang
  without it (before).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Union

from kvbudget import vllm
from kvbudget._core import PoolPlan, StateConfig
from kvbudget.errors import KVBudgetError
from kvbudget.sglang.configurators import PoolConfiguratorBase, Scenario
from kvbudget.workload import WithoutDraftTerms, concurrency, without_draft_configurator, without_draft_terms

__all__ = [
    "DEFAULT_LENGTHS",
    "EngineComparison",
    "FitComparison",
    "VllmDeployment",
    "compare_engines",
    "compare_fits",
    "sglang_configurator",
]

#: The context lengths :func:`compare_engines` counts requests at by default, tokens.
DEFAULT_LENGTHS: Final = (4096, 8192, 16384, 32768, 65536, 131072)


def sglang_configurator(scenario: Scenario, hybrid_swa: bool | None = None) -> PoolConfiguratorBase:
    """The configurator SGLang 0.5.23 plans ``scenario`` with.

    Args:
        scenario: the model, serving and speculative settings.
        hybrid_swa: whether SGLang gives the model separate full and SWA pools
            (:func:`kvbudget.sglang.hybrid.sglang_hybrid_swa`'s answer for its
            architecture; None when unknown). Where it does not, but the
            geometry has window layers, SGLang plans one DefaultPoolConfigurator
            pool over every layer (``disable_hybrid_swa_memory``).

    Returns:
        That configurator; ``scenario.configurator()`` (the factory's choice for the
        geometry as given) when SGLang's choice agrees or is unknown.
    """
    cfg = scenario.configurator()
    if hybrid_swa is False and cfg.kind != "default":
        serving = scenario.serving.replace(disable_hybrid_swa_memory=True)
        return Scenario(scenario.model, serving, scenario.spec).configurator()
    return cfg


# --------------------------------------------------------------------------- engines


@dataclass(frozen=True)
class VllmDeployment:
    """vLLM's side of a deployment.

    Attributes:
        layers: the attention layers as vLLM reads them
            (:func:`kvbudget.vllm.layers_from_hf_config`), drafter layers last.
        engine: vLLM's engine settings.
        available: vLLM's KV budget per worker, bytes ("Available KV cache memory").
    """

    layers: Sequence[vllm.LayerSpec]
    engine: vllm.EngineConfig
    available: int

    def plan(self, **changes: Any) -> vllm.VllmPlan:
        """vLLM's plan, with ``changes`` to the engine settings (e.g. ``max_model_len``).

        Raises:
            kvbudget.vllm.VllmStartupError: vLLM would not start (one request does not fit).
            kvbudget.vllm.VllmError: vLLM refuses the deployment otherwise.
        """
        return vllm.plan(self.layers, self.available, dataclasses.replace(self.engine, **changes))

    def plan_or_refusal(self) -> tuple[vllm.VllmPlan | None, str | None]:
        """(:meth:`plan`, None), or (None, vLLM's message) when it would not start or refuses."""
        try:
            return self.plan(), None
        except (vllm.VllmStartupError, vllm.VllmError) as exc:
            return None, str(exc)

    def concurrency(self, context_len: int) -> float:
        """vLLM's max concurrency at ``--max-model-len context_len`` (0.0 when one request does not fit)."""
        try:
            return float(self.plan(max_model_len=context_len).max_concurrency)
        except vllm.VllmStartupError:
            return 0.0


@dataclass(frozen=True)
class EngineComparison:
    """What :func:`compare_engines` found. Bytes and tokens unless named otherwise."""

    lengths: tuple[int, ...]
    configurator: PoolConfiguratorBase
    """SGLang 0.5.23's own configurator (:func:`sglang_configurator`); the exact plan uses its layout."""
    available: int
    """SGLang's budget, bytes (a hybrid-state model's whole budget: its plans hold the state pool)."""
    exact: PoolPlan
    """kvbudget's exact plan: the largest plan in SGLang's layout whose tensors fit."""
    sglang: PoolPlan | None
    """SGLang's token counts (``sglang.config``) and their allocation; None when not asked for."""
    vllm_deployment: VllmDeployment | None
    vllm_plan: vllm.VllmPlan | None
    """vLLM's plan at the deployment's own ``max_model_len``; None when vLLM is not asked for or refuses."""
    vllm_refusal: str | None
    """vLLM's reason when it would not start or refuses the deployment (its message)."""
    rows: tuple[dict[str, Any], ...]
    """Per context length: ``context_len``, ``exact`` and ``sglang`` (requests their pools hold)
    and ``vllm`` (vLLM's float max concurrency)."""

    @property
    def kind(self) -> str:
        """SGLang's configurator kind (``"default"``, ``"hybrid_swa"``, ``"swa_chunk_cap"``)."""
        return self.configurator.kind


def compare_engines(
    scenario: Scenario,
    available: int,
    *,
    hybrid_swa: bool | None = None,
    vllm_deployment: VllmDeployment | None = None,
    sglang: bool = True,
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    max_running_requests: int | None = None,
    state: StateConfig | None = None,
) -> EngineComparison:
    """One deployment in SGLang 0.5.23's terms, kvbudget's exact plan, and vLLM 0.33.0's.

    Args:
        scenario: the model, drafter and serving settings, as SGLang reads them.
        available: SGLang's KV budget on one GPU, bytes.
        hybrid_swa: SGLang's pool choice for the model (:func:`sglang_configurator`).
        vllm_deployment: vLLM's side (its layers, settings and budget); None leaves vLLM out.
        sglang: include SGLang's token counts and their allocation.
        lengths: context lengths to count requests at, tokens.
        max_running_requests: SGLang's cap on running requests (a hybrid-state model's state pool
            sets one: its slots over the slots per request); the SGLang and exact rows hold no more.
        state: a hybrid-state model's state: ``available`` is then the whole budget, and both
            plans hold the state pool SGLang sizes first (``PoolConfiguratorBase.plan(state=)``).

    Raises:
        KVBudgetError: SGLang's configurator cannot plan ``available`` (not enough
            memory, an SWA pool below its floor). vLLM's refusals are reported in
            :attr:`EngineComparison.vllm_refusal` instead.
    """
    cfg = sglang_configurator(scenario, hybrid_swa)
    exact = cfg.plan(available, fit="exact", state=state)
    theirs = cfg.plan(available, fit="sglang", state=state) if sglang else None
    vplan, refusal = (None, None) if vllm_deployment is None else vllm_deployment.plan_or_refusal()
    rows = []
    for n in lengths:
        cap = max_running_requests

        def held(p: PoolPlan) -> int:
            k = concurrency(cfg, p, n)
            return k if cap is None else min(k, cap)

        row: dict[str, Any] = {"context_len": n, "exact": held(exact)}
        if theirs is not None:
            row["sglang"] = held(theirs)
        if vllm_deployment is not None and refusal is None:
            row["vllm"] = vllm_deployment.concurrency(n)
        rows.append(row)
    return EngineComparison(tuple(lengths), cfg, available, exact, theirs, vllm_deployment, vplan, refusal,
                            tuple(rows))  # fmt: skip


# --------------------------------------------------------------------------- fits


@dataclass(frozen=True)
class FitComparison:
    """What :func:`compare_fits` found. Bytes unless named otherwise."""

    cfg: PoolConfiguratorBase
    available: int
    exact: PoolPlan
    sglang: PoolPlan
    """SGLang's token counts (``sglang.config``) and their allocation."""
    has_draft: bool
    bare_cell_size: Union[int, float]
    """SGLang's cell size without the draft terms (0 without a draft)."""
    without: WithoutDraftTerms | None
    """SGLang's sizing without the draft terms, and its cost; None without a draft or when it fails."""
    without_error: str | None
    """Why SGLang could not size the pools without the draft terms either."""


def compare_fits(cfg: PoolConfiguratorBase, available: int, state: StateConfig | None = None) -> FitComparison:
    """``fit="exact"`` against ``fit="sglang"`` at ``available`` bytes, and, with a draft,
    SGLang's sizing with the draft terms (PR #29622) against without them
    (:func:`kvbudget.workload.without_draft_terms`). ``state``: a hybrid-state model's state (both
    plans hold the state pool; the draft terms are weighed on the KV budget SGLang leaves)."""
    exact = cfg.plan(available, fit="exact", state=state)
    sglang = cfg.plan(available, fit="sglang", state=state)
    kv_budget = available
    if state is not None:
        from kvbudget.sglang.state import kv_budget_bytes, state_budget

        kv_budget = kv_budget_bytes(state_budget(state, cfg.serving, cfg.spec, available / (1 << 30)))
    has_draft = cfg.spec.draft_num_layers > 0 and exact.draft_bytes > 0
    without: WithoutDraftTerms | None = None
    error: str | None = None
    bare_cell: Union[int, float] = 0
    if has_draft:
        bare_cell = without_draft_configurator(cfg).cell_size
        try:
            without = without_draft_terms(cfg, kv_budget)
        except KVBudgetError as exc:
            error = str(exc)
    return FitComparison(cfg, available, exact, sglang, has_draft, bare_cell, without, error)
