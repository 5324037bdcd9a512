"""vLLM 0.33.0's startup checks on the target's model class, from the pinned wheel.

* :func:`supports`: whether the class vLLM's registry names for an architecture implements an
  interface of ``model_executor/models/interfaces.py`` (``SupportsEagle3``,
  ``SupportsReplaySSM``): :class:`oracle_kit.classes.Hierarchy` reads the class's bases from the
  model files (a new-style package, ``vllm.models.<name>``, through its ``__init__``'s CUDA
  branch). vLLM asks ``isinstance(model, SupportsEagle3)`` of the built model (a
  ``runtime_checkable`` protocol); the oracle cannot build one, and no 0.33.0 model class meets
  the protocol without deriving from it.
* :func:`eagle3_startup`: ``GPUModelRunner._setup_eagle3_aux_hidden_state_outputs`` (lifted from
  ``v1/worker/gpu_model_runner.py``), fed by ``SpecDecodeBaseProposer.
  _get_eagle3_use_aux_hidden_state_from_config`` (lifted from ``v1/spec_decode/
  llm_base_proposer.py``) on the drafter's model config, as ``load_model`` runs them on the last
  PP rank after both models are built: its RuntimeError is vLLM's refusal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oracle_kit.classes import Hierarchy
from oracle_kit.lift import Source

from ._strict import RecordingLogger, StrictConfig

__all__ = ["eagle3_startup", "supports"]


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
