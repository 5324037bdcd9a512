"""vLLM 0.33.0's startup checks on the target's model class, from the pinned wheel.

* :func:`supports`: whether the class vLLM's registry names for an architecture implements an
  interface of ``model_executor/models/interfaces.py`` (``SupportsEagle3``,
  ``SupportsReplaySSM``): :class:`oracle_kit.classes.Hierarchy` reads the class's bases from the
  model files (a new-style package, ``vllm.models.<name>``, through its ``__init__``'s CUDA
  branch). vLLM asks ``isinstance(model, SupportsEagle3)`` of the built model (a
  ``runtime_checkable`` protocol); the oracle cannot build one, and no 0.33.0 model class meets
  the protocol without deriving from it.
* :func:`eagle3_startup_v2`: Model Runner V2's (the default) ``requires_aux_hidden_states`` and
  ``set_eagle3_aux_hidden_state_layers`` (lifted from ``v1/worker/gpu/spec_decode/eagle/
  eagle3_utils.py``): the interface, and with pipeline stages the decoder's
  ``supports_aux_hidden_states_over_pp``.
* :func:`eagle3_startup`: Model Runner V1's ``GPUModelRunner._setup_eagle3_aux_hidden_state_outputs`` (lifted from
  ``v1/worker/gpu_model_runner.py``), fed by ``SpecDecodeBaseProposer.
  _get_eagle3_use_aux_hidden_state_from_config`` (lifted from ``v1/spec_decode/
  llm_base_proposer.py``) on the drafter's model config, as ``load_model`` runs them on the last
  PP rank after both models are built: its RuntimeError is vLLM's refusal.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oracle_kit.classes import Hierarchy
from oracle_kit.lift import Source

from ._strict import RecordingLogger, StrictConfig

__all__ = ["eagle3_startup", "eagle3_startup_v2", "supports"]


@functools.cache
def _hierarchy(root: Path) -> Hierarchy:
    return Hierarchy(root, "vllm")


def supports(root: Path, registry: Mapping[str, tuple[str, str]], arch: str, interface: str) -> bool:
    """Whether vLLM's class for ``arch`` implements ``interface`` (an interface class's name)."""
    module, cls = registry[arch]
    dotted = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
    return _hierarchy(root).implements(dotted, cls, interface)


class _Built:
    """The built target model as the lifted check sees it: its architecture, for ``supports_eagle3``."""

    def __init__(self, arch: str) -> None:
        self.arch = arch


@functools.cache
def _lifted(root: Path, registry_items: tuple[tuple[str, tuple[str, str]], ...]) -> tuple[Callable[..., Any], ...]:
    registry = dict(registry_items)

    def supports_eagle3(model: object) -> bool:
        assert isinstance(model, _Built), model
        return supports(root, registry, model.arch, "SupportsEagle3")

    ns: dict[str, Any] = {"__name__": "vllm_oracle_interfaces", "supports_eagle3": supports_eagle3,
                          "logger": RecordingLogger("vllm.v1.worker.gpu_model_runner", [])}
    use_aux = Source(root, "vllm/v1/spec_decode/llm_base_proposer.py").lift_method(
        ns, "SpecDecodeBaseProposer", "_get_eagle3_use_aux_hidden_state_from_config")
    setup = Source(root, "vllm/v1/worker/gpu_model_runner.py").lift_method(
        ns, "GPUModelRunner", "_setup_eagle3_aux_hidden_state_outputs")
    return use_aux, setup


@functools.cache
def _lifted_v2(root: Path, registry_items: tuple[tuple[str, tuple[str, str]], ...]) -> tuple[Callable[..., Any], ...]:
    registry = dict(registry_items)

    def supports_eagle3(model: object) -> bool:
        return supports(root, registry, model._arch, "SupportsEagle3")  # type: ignore[attr-defined]

    ns: dict[str, Any] = {"__name__": "vllm_oracle_interfaces_v2", "supports_eagle3": supports_eagle3,
                          "SupportsEagle3": object, "cast": typing.cast,
                          "logger": RecordingLogger("vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils", []),
                          # restated: model parallelism is not initialized in the oracle, so vLLM's
                          # reserve_aux_intermediate_tensor_slots returns at once
                          "reserve_aux_intermediate_tensor_slots": lambda model: None}  # fmt: skip
    Source(root, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py").lift(
        ns, "requires_aux_hidden_states", "set_eagle3_aux_hidden_state_layers", "_inner_decoder",
        "verify_supports_aux_hidden_states_over_pp", "get_eagle3_aux_layers_from_config")  # fmt: skip
    return ns["requires_aux_hidden_states"], ns["set_eagle3_aux_hidden_state_layers"]


def eagle3_startup_v2(root: Path, registry: Mapping[str, tuple[str, str]], arch: str, spec: Any, pp: int,
                      decoder: Any) -> None:  # fmt: skip
    """What Model Runner V2 (vLLM's default) checks in ``load_model`` (``requires_aux_hidden_states``,
    then ``set_eagle3_aux_hidden_state_layers`` lifted from ``v1/worker/gpu/spec_decode/eagle/
    eagle3_utils.py``) for the speculative config ``spec`` on target ``arch`` split over ``pp``
    stages; ``decoder`` is the class of the target's decoder the oracle built (the check reads its
    class attribute ``supports_aux_hidden_states_over_pp``, False where no class in its lineage
    sets it). Raises vLLM's RuntimeError or ValueError."""
    requires, set_layers = _lifted_v2(root, tuple(sorted(registry.items())))
    if not requires(spec):
        return
    # The built model as the check sees it: named as the registry's class, its decoder at `model`.
    model = type(registry[arch][1], (), {"_arch": arch, "model": decoder,
                                         "get_eagle3_default_aux_hidden_state_layers": lambda self: (2,),
                                         "set_aux_hidden_state_layers": lambda self, x: None})()  # fmt: skip
    set_layers(model, spec, pp > 1)


def eagle3_startup(root: Path, registry: Mapping[str, tuple[str, str]], arch: str, method: str,
                   draft_model_config: Any) -> None:
    """What ``load_model`` checks for ``method`` on target ``arch`` with this drafter: it raises
    vLLM's RuntimeError (any other error is the oracle's own failure). The aux layers are the
    model's default (the drafter config names none): the choice does not change whether vLLM starts."""
    use_aux, setup = _lifted(root, tuple(sorted(registry.items())))
    proposer = StrictConfig(method=method, draft_model_config=draft_model_config)
    aux = use_aux(proposer) if method == "eagle3" else False  # GPUModelRunner.__init__'s eagle branch
    model = StrictConfig(get_eagle3_default_aux_hidden_state_layers=lambda: (2,),
                         set_aux_hidden_state_layers=lambda layers: None)  # fmt: skip
    runner = StrictConfig(use_aux_hidden_state_outputs=aux, get_model=lambda: _Built(arch), model=model,
                          _get_eagle3_aux_layers_from_config=lambda: None)  # fmt: skip
    setup(runner)
