"""The scenario: a model, its serving settings and its speculative decoding.

A :class:`Scenario` is the unit every path plans from: the configurators
(:meth:`Scenario.configurator`), :func:`kvbudget.plan_ranks`, the workload
queries, the batch API (a base scenario plus varying columns) and the CLI.
:meth:`Scenario.replace` takes any field of any of its parts by name, routed by
the core's field table (:mod:`kvbudget.fields`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvbudget._core import ModelGeometry, PoolPlan, ServingConfig, SpeculativeConfig
from kvbudget.fields import SCENARIO_FIELDS

if TYPE_CHECKING:
    from kvbudget.configurators import PoolConfiguratorBase
    from kvbudget.types import Fit

__all__ = ["Scenario"]

_MODEL_IDS = ("full_attention_layer_ids", "swa_attention_layer_ids")
_PART_OF_OWNER = {"AttentionShape": "model", "ServingConfig": "serving", "SpeculativeConfig": "spec"}
_COUNTS = ("num_full_layers", "num_swa_layers")


class Scenario:
    """A model, its serving settings and its speculative decoding (immutable).

    Args:
        model: the target's attention geometry.
        serving: dtype, paging, parallelism, ratio and request-cap inputs
            (default: ``ServingConfig()``).
        spec: speculative decoding (default: none).
    """

    __slots__ = ("model", "serving", "spec")
    model: ModelGeometry
    serving: ServingConfig
    spec: SpeculativeConfig

    def __init__(
        self,
        model: ModelGeometry,
        serving: ServingConfig | None = None,
        spec: SpeculativeConfig | None = None,
    ) -> None:
        for name, value, cls in (
            ("model", model, ModelGeometry),
            ("serving", ServingConfig() if serving is None else serving, ServingConfig),
            ("spec", SpeculativeConfig() if spec is None else spec, SpeculativeConfig),
        ):
            if not isinstance(value, cls):
                raise TypeError(f"Scenario: {name} must be a {cls.__name__}, got {type(value).__name__}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Scenario is immutable; use replace({name}=...)")

    def replace(self, **changes: Any) -> Scenario:
        """A copy with the given fields changed, each routed to the part that has it.

        Keywords are any field of ``ModelGeometry`` (layer id lists included),
        ``ServingConfig`` or ``SpeculativeConfig``, or ``model``/``serving``/``spec``
        to swap a whole part. Each changed part is re-checked.

        Raises:
            TypeError: an unknown keyword.
            InvalidConfigError: a changed part is invalid.
        """
        parts: dict[str, Any] = {"model": self.model, "serving": self.serving, "spec": self.spec}
        routed: dict[str, dict[str, Any]] = {"model": {}, "serving": {}, "spec": {}}
        for name, value in changes.items():
            if name in parts:
                parts[name] = value
            elif name in _MODEL_IDS:
                routed["model"][name] = value
            elif name in SCENARIO_FIELDS and name not in _COUNTS:
                routed[_PART_OF_OWNER[SCENARIO_FIELDS[name].owner]][name] = value
            else:
                raise TypeError(f"Scenario.replace() got an unexpected keyword argument {name!r}")
        for part, kw in routed.items():
            if kw:
                parts[part] = parts[part].replace(**kw)
        return Scenario(parts["model"], parts["serving"], parts["spec"])

    def configurator(self, kind: str | None = None) -> PoolConfiguratorBase:
        """SGLang's configurator for the scenario (``kind=None``: the factory's choice)."""
        from kvbudget.configurators import _BY_KIND, create_pool_configurator

        if kind is None:
            return create_pool_configurator(self.model, self.serving, self.spec)
        if kind not in _BY_KIND:
            raise TypeError(f"kind must be one of {', '.join(_BY_KIND)} or None, got {kind!r}")
        return _BY_KIND[kind](self.model, self.serving, self.spec)

    def plan(self, available_bytes: int, fit: Fit = "exact") -> PoolPlan:
        """The exact plan of the factory's configurator (see ``PoolConfiguratorBase.plan``)."""
        return self.configurator().plan(available_bytes, fit)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Scenario):
            return NotImplemented
        return (self.model, self.serving, self.spec) == (other.model, other.serving, other.spec)

    def __hash__(self) -> int:
        return hash((self.model.to_json(), self.serving.to_json(), self.spec.to_json()))

    def __reduce__(self) -> tuple[object, ...]:
        return (Scenario, (self.model, self.serving, self.spec))

    def __repr__(self) -> str:
        return f"Scenario(model={self.model!r}, serving={self.serving!r}, spec={self.spec!r})"


Scenario.__module__ = "kvbudget"
