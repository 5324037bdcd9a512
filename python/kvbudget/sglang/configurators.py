"""SGLang-compatible pool configurators, and the scenario they plan.

:class:`Scenario` bundles a model, its serving settings and its draft (the
core's values) and plans them with SGLang's factory (:meth:`Scenario.configurator`),
so it lives beside the configurators it builds.

Each class subclasses the native :class:`kvbudget._core.PoolConfigurator`;
all arithmetic is in the Rust core. The numbers are SGLang 0.5.23's
(``sglang/srt/model_executor/pool_configurator.py``, :data:`kvbudget.SGLANG_VERSION`),
checked against that released code on every CI run (tests/test_sglang_parity.py).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from kvbudget._core import (
    ModelGeometry,
    PoolConfigurator,
    PoolPlan,
    ServingConfig,
    SpeculativeConfig,
    StateConfig,
)

from kvbudget.fields import SCENARIO_FIELDS

if TYPE_CHECKING:
    import numpy.typing as npt

    from kvbudget.batch import BatchResult
    from kvbudget.types import Fit

__all__ = [
    "Scenario",
    "DefaultPoolConfigurator",
    "HybridSWAPoolConfigurator",
    "SWARequestCapPoolConfigurator",
    "PoolConfiguratorBase",
    "create_pool_configurator",
]

class PoolConfiguratorBase(PoolConfigurator):
    """Common surface of the three configurators.

    Each class is the native configurator (``kvbudget._core.PoolConfigurator``) fixed to
    one kind: ``calculate_pool_sizes``, ``calculate_pool_sizes_from_max_tokens``,
    ``plan_for_config``, ``bytes_for_tokens`` and the getters (``model``, ``serving``,
    ``spec``, ``cell_size``, ``draft_terms``, ...) are the native methods themselves, with
    no Python frame between the call and the Rust core (documented in ``_core.pyi``).

    Args:
        model: the target's attention geometry.
        serving: dtype, page size, parallelism, ratio and request-cap inputs.
        spec: speculative decoding; ``None`` means no speculation.

    Raises:
        InvalidConfigError: the configurator does not apply to these inputs.
    """

    kind: ClassVar[str] = ""  # the native getter, fixed per class

    __slots__ = ()

    def __new__(
        cls,
        model: ModelGeometry,
        serving: ServingConfig,
        spec: SpeculativeConfig | None = None,
    ) -> PoolConfiguratorBase:
        return super().__new__(cls, model, serving, spec, cls.kind)

    @property
    def handle(self) -> PoolConfigurator:
        """The native configurator (``kvbudget._core.PoolConfigurator``): this object itself,
        kept for code written when the classes composed one."""
        return self

    @property
    def scenario(self) -> Scenario:
        """The scenario this configurator plans (model, serving, spec)."""
        return Scenario(self.model, self.serving, self.spec)

    def calculate_pool_sizes_many(
        self,
        available_bytes: npt.ArrayLike,
        *,
        out: Optional[BatchResult] = None,
        threads: Optional[int] = None,
    ) -> BatchResult:
        """``calculate_pool_sizes`` for many budgets at once (page size from ``serving``).

        Returns a :class:`kvbudget.batch.BatchResult` (``out`` itself when given: arrays of
        the budgets' length to write into, see ``BatchResult.empty``); a budget that fails
        sets that row's ``status`` instead of raising. ``threads``: as for
        :func:`kvbudget.plan_many`.
        """
        import numpy as np

        from kvbudget.batch import BatchResult, int_column, out_arrays

        one = isinstance(available_bytes, (int, np.integer)) and not isinstance(available_bytes, bool)
        arr = int_column("available_bytes", [available_bytes] if one else available_bytes, optional=False)
        return BatchResult(*self._calculate_pool_sizes_many(arr, out_arrays(out), threads))

    def plan(self, available_bytes: int, fit: Fit = "exact", *, state: StateConfig | None = None) -> PoolPlan:
        """kvbudget's exact plan: every pool and tensor with its shape, dtype and bytes.

        ``fit="exact"`` takes the largest page-aligned token count whose
        tensors fit (``total_bytes <= available_bytes``); ``fit="sglang"``
        takes SGLang's token counts and reports ``over_budget_bytes``.

        ``state``: a hybrid model's recurrent state (:class:`kvbudget.sglang.state.StateConfig`;
        the configurator then holds its attention layers). SGLang 0.5.23's state budget on
        ``available_bytes`` gives the state slots, and the plan lists the state pool after the
        KV pools (``plan.pool("state")``: ``tokens`` are slots, ``rows`` one more) laid out as
        SGLang's ``MambaPool`` allocates it on CUDA: the conv and temporal states, the
        speculative verify buffers, the ReplaySSM rings. With ``fit="exact"`` the KV pools fit
        the bytes the state pool leaves; with ``"sglang"`` they take SGLang's counts on its
        own rest. :func:`kvbudget.sglang.state.plan_with_state` also returns the state budget.

        Raises:
            StateCacheTooSmallError: no state slot, or no request, fits (SGLang's messages).
            NotEnoughMemoryError: the state pool leaves no bytes for the KV pools, or the KV
                pools' own.
            InvalidConfigError: where SGLang asserts, and a fused draft's state entry.
        """
        if state is None:
            return super().plan(available_bytes, fit)
        from kvbudget.sglang.state import plan_with_state

        return plan_with_state(self, available_bytes, state, fit)[0]

    def __reduce__(self) -> tuple[object, ...]:
        """Pickles as its inputs; unpickling rebuilds (and re-validates) the configurator."""
        return (type(self), (self.model, self.serving, self.spec))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, PoolConfiguratorBase)
        return (self.model, self.serving, self.spec) == (other.model, other.serving, other.spec)

    def __hash__(self) -> int:
        return hash((type(self), self.model.to_json(), self.serving.to_json(), self.spec.to_json()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, serving={self.serving!r}, spec={self.spec!r})"


class DefaultPoolConfigurator(PoolConfiguratorBase):
    """SGLang's ``DefaultPoolConfigurator``: one pool, every layer at full geometry (MHA, GQA, MLA, fp4)."""

    kind = "default"
    __slots__ = ()


class HybridSWAPoolConfigurator(PoolConfiguratorBase):
    """SGLang's ``HybridSWAPoolConfigurator``: full and SWA pools split by ``swa_full_tokens_ratio``."""

    kind = "hybrid_swa"
    __slots__ = ()


class SWARequestCapPoolConfigurator(PoolConfiguratorBase):
    """SGLang's ``SWARequestCapPoolConfigurator``: the SWA pool sized from the worst case of
    ``max_running_requests`` requests (``compute_swa_request_cap``), the rest to the full pool.

    Named ``SWAChunkCapPoolConfigurator`` before SGLang 0.5.23; that name is a deprecated alias.
    """

    kind = "request_cap"
    __slots__ = ()

    @property
    def swa_cap(self) -> int:
        """The SWA token cap before page alignment (REFERENCE 2.4 and 2.7)."""
        cap = super().swa_cap
        assert cap is not None
        return cap


_BY_KIND: dict[str, type[PoolConfiguratorBase]] = {
    "default": DefaultPoolConfigurator,
    "hybrid_swa": HybridSWAPoolConfigurator,
    "request_cap": SWARequestCapPoolConfigurator,
}


for _cls in (PoolConfiguratorBase, DefaultPoolConfigurator, HybridSWAPoolConfigurator, SWARequestCapPoolConfigurator):
    _cls.__module__ = "kvbudget"

if TYPE_CHECKING:
    #: Deprecated: SGLang 0.5.23 renamed the class :class:`SWARequestCapPoolConfigurator`.
    SWAChunkCapPoolConfigurator = SWARequestCapPoolConfigurator

_DEPRECATED = {"SWAChunkCapPoolConfigurator": "SWARequestCapPoolConfigurator"}


def deprecated_name(module: str, name: str) -> object:
    """The object an old name stands for, with a :class:`DeprecationWarning` (module ``__getattr__``)."""
    new = _DEPRECATED.get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{name} is deprecated: SGLang 0.5.23 renamed it {new}", DeprecationWarning, stacklevel=3
    )
    return globals()[new]


def __getattr__(name: str) -> object:
    return deprecated_name(__name__, name)


def create_pool_configurator(
    model: ModelGeometry,
    serving: ServingConfig,
    spec: SpeculativeConfig | None = None,
) -> PoolConfiguratorBase:
    """SGLang's factory: RequestCap when it applies, else HybridSWA for SWA models, else Default.

    Hybrid geometry means the model has SWA layers and
    ``serving.disable_hybrid_swa_memory`` is False. RequestCap applies when
    max_running_requests is set, the radix cache is disabled, a chunked-prefill
    size is set (outside PD decode), the window is set and the model has full
    layers.
    """
    return _BY_KIND[PoolConfigurator.factory_kind(model, serving)](model, serving, spec)


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
