"""Plan every rank of a TP x PP x attention-DP deployment offline (no GPU, no torch).

Under pipeline parallelism each stage holds a contiguous slice of the layers,
so its bytes per KV token differ from the other stages'; the speculative
draft runs on the last stage only, so that stage pays for the draft's KV too.
SGLang makes every rank hold the same number of tokens by MIN-reducing
``max_total_num_tokens`` over all ranks (PR #10214,
``ModelRunner.init_memory_pool``) and re-solving the pools from it.
:func:`plan_ranks` does the same from a list of per-rank budgets, and names the
rank that limits the deployment and why.

Rank order (SGLang's): ``rank = pp_stage * (tp * attn_dp) + attn_dp_rank * tp
+ tp_rank``. SGLang's world rank is ``tp_size * pp_rank + tp_rank``
(``ModelRunner.init_torch_distributed``), and inside a stage the attention-DP
rank is the slower index (``dp_attention.compute_dp_attention_world_info``:
``attn_dp_rank = tp_rank // attn_tp_size``, ``attn_tp_rank = tp_rank %
attn_tp_size``). Here ``tp`` is the attention tensor-parallel size (SGLang's
``attn_tp_size = tp_size // dp_size`` when DP attention is on), the same
meaning ``ServingConfig.tp_size`` has in kvbudget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Union

from kvbudget._core import (
    InvalidConfigError,
    KVBudgetError,
    MemoryPoolConfig,
    ModelGeometry,
    PoolPlan,
    ServingConfig,
    SpeculativeConfig,
)
from kvbudget.types import Fit
from kvbudget.sglang.configurators import PoolConfiguratorBase, create_pool_configurator
from kvbudget.sglang.configurators import Scenario
from kvbudget.sglang.pipeline import stage_ranges
from kvbudget.distributed import _lowest_min, _plan_at_tokens

__all__ = [
    "Parallelism",
    "RankPlan",
    "RankPlans",
    "StagePlan",
    "pp_layer_ranges",
    "plan_ranks",
]



def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(f"{name} must be a positive int, got {value!r}")
    return value


def pp_layer_ranges(
    num_hidden_layers: int, pp: int, split: Sequence[int] | None = None
) -> tuple[tuple[int, int], ...]:
    """Each pipeline stage's layers as ``[start, end)``, stage by stage.

    SGLang's ``get_pp_indices`` (:func:`kvbudget.sglang.pipeline.stage_ranges`, the one
    reading the planner and the state model share) with a plan's checks on top: with no
    explicit split, every stage gets ``num_hidden_layers // pp`` layers and the LAST
    ``num_hidden_layers % pp`` stages get one more each (e.g. 62 layers on 4 stages:
    15, 15, 16, 16). That is SGLang's rule, not vLLM's
    (vLLM gives the remainder to the earlier stages but never the last).
    ``split`` is the explicit per-stage layer counts, like SGLang's
    ``SGLANG_PP_LAYER_PARTITION``: ``len(split) == pp`` and
    ``sum(split) == num_hidden_layers``.

    Raises:
        InvalidConfigError: a count is not positive, or ``split`` does not
            match ``pp`` or ``num_hidden_layers``, or there are fewer layers
            than stages.
    """
    n = _positive("num_hidden_layers", num_hidden_layers)
    pp = _positive("pp", pp)
    if split is None:
        if n < pp:
            raise InvalidConfigError(
                f"{pp} pipeline stages cannot split {n} layers: every stage needs one"
            )
    else:
        counts = [_positive(f"pp_layer_split[{i}]", c) for i, c in enumerate(split)]
        if len(counts) != pp:
            raise InvalidConfigError(f"pp_layer_split has {len(counts)} stages, expected pp = {pp}")
        if sum(counts) != n:
            raise InvalidConfigError(
                f"pp_layer_split sums to {sum(counts)} layers; the model has {n}"
            )
    return stage_ranges(n, pp, split)


@dataclass(frozen=True)
class Parallelism:
    """A deployment's parallelism.

    Attributes:
        tp: attention tensor-parallel size (``ServingConfig.tp_size``).
        pp: pipeline stages.
        attn_dp: attention data-parallel size (``ServingConfig.attn_dp_size``);
            each stage has ``tp * attn_dp`` ranks.
        pp_layer_split: layer counts per stage (a list or tuple, stored as a
            tuple), summing to the model's layer count; ``None`` is SGLang's
            split (:func:`pp_layer_ranges`).
    """

    tp: int = 1
    pp: int = 1
    attn_dp: int = 1
    pp_layer_split: Sequence[int] | None = field(default=None)

    def __post_init__(self) -> None:
        _positive("tp", self.tp)
        _positive("pp", self.pp)
        _positive("attn_dp", self.attn_dp)
        if self.pp_layer_split is not None:
            split = tuple(
                _positive(f"pp_layer_split[{i}]", c) for i, c in enumerate(self.pp_layer_split)
            )
            if len(split) != self.pp:
                raise InvalidConfigError(
                    f"pp_layer_split has {len(split)} stages, expected pp = {self.pp}"
                )
            object.__setattr__(self, "pp_layer_split", split)

    @property
    def ranks_per_stage(self) -> int:
        """``tp * attn_dp``."""
        return self.tp * self.attn_dp

    @property
    def world_size(self) -> int:
        """``tp * pp * attn_dp``: how many budgets :func:`plan_ranks` takes."""
        return self.tp * self.pp * self.attn_dp

    def rank(self, pp_stage: int, attn_dp_rank: int = 0, tp_rank: int = 0) -> int:
        """The global rank of a (stage, attention-DP rank, TP rank) triple."""
        inside = 0 <= pp_stage < self.pp and 0 <= attn_dp_rank < self.attn_dp
        if not (inside and 0 <= tp_rank < self.tp):
            raise InvalidConfigError(
                f"(pp_stage={pp_stage}, attn_dp_rank={attn_dp_rank}, tp_rank={tp_rank}) "
                f"is outside pp={self.pp}, attn_dp={self.attn_dp}, tp={self.tp}"
            )
        return pp_stage * self.ranks_per_stage + attn_dp_rank * self.tp + tp_rank

    def coords(self, rank: int) -> tuple[int, int, int]:
        """``(pp_stage, attn_dp_rank, tp_rank)`` of a global rank."""
        if not 0 <= rank < self.world_size:
            raise InvalidConfigError(f"rank {rank} is outside world size {self.world_size}")
        stage, within = divmod(rank, self.ranks_per_stage)
        dp, tp = divmod(within, self.tp)
        return stage, dp, tp

    def layer_ranges(self, num_hidden_layers: int) -> tuple[tuple[int, int], ...]:
        """Each stage's ``[start, end)`` layers (:func:`pp_layer_ranges`)."""
        return pp_layer_ranges(num_hidden_layers, self.pp, self.pp_layer_split)


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage: its layers, inputs and the agreed pool sizes.

    Attributes:
        stage: the stage index.
        layer_range: ``[start, end)`` of the model's layers on this stage.
        ranks: the global ranks of this stage.
        model: the stage's geometry: the model's full/SWA layer ids in
            ``layer_range`` (global ids), its heads and dims.
        serving: the serving config with ``tp_size`` and ``attn_dp_size``
            from the parallelism.
        spec: the speculative config on the last stage; ``None`` elsewhere.
        configurator_kind: ``"default"``, ``"hybrid_swa"`` or ``"request_cap"``
            (a hybrid model's stage without SWA layers is ``"default"``).
        cell_size: SGLang's bytes per token of ``max_total_num_tokens`` on
            this stage (a float where the SWA ratio enters).
        agreed_config: the pools re-solved from the agreed token count
            (``calculate_pool_sizes_from_max_tokens``).
        agreed_plan: the exact plan (tensors) of ``agreed_config``, or
            ``None`` when the layout cannot reproduce it (RequestCap with an SWA
            cap above the token count); its ``available_bytes`` is the bytes
            the agreed count takes.
        has_draft: whether this stage holds draft KV (the last stage, with a
            drafting ``spec``).
    """

    stage: int
    layer_range: tuple[int, int]
    ranks: tuple[int, ...]
    model: ModelGeometry
    serving: ServingConfig
    spec: SpeculativeConfig | None
    configurator_kind: str
    cell_size: Union[int, float]
    agreed_config: MemoryPoolConfig
    agreed_plan: PoolPlan | None
    has_draft: bool

    def configurator(self) -> PoolConfiguratorBase:
        """A fresh configurator for this stage (``create_pool_configurator``)."""
        return create_pool_configurator(self.model, self.serving, self.spec)


@dataclass(frozen=True)
class RankPlan:
    """One rank: its budget, what it would hold alone, and what it holds after agreement.

    Attributes:
        rank: the global rank.
        pp_stage, attn_dp_rank, tp_rank: its coordinates.
        available_bytes: its KV budget.
        max_total_num_tokens: the tokens it would hold alone (before the MIN).
        plan: its own plan from its own budget (``configurator.plan(available_bytes, fit)``).
        agreed_config: its stage's pools at the agreed token count.
        agreed_plan: its stage's exact plan at the agreed count (or ``None``,
            see :class:`StagePlan`).
        has_draft: whether it carries the draft (last stage only).
    """

    rank: int
    pp_stage: int
    attn_dp_rank: int
    tp_rank: int
    available_bytes: int
    max_total_num_tokens: int
    plan: PoolPlan
    agreed_config: MemoryPoolConfig
    agreed_plan: PoolPlan | None
    has_draft: bool

    @property
    def agreed_leftover_bytes(self) -> int | None:
        """Budget left after the agreed plan's tensors; ``None`` without a plan.

        Negative when SGLang's counts (``fit="sglang"``) over-commit the budget.
        """
        if self.agreed_plan is None:
            return None
        return self.available_bytes - self.agreed_plan.total_bytes


@dataclass(frozen=True)
class RankPlans:
    """Every rank's plan and the plan they agree on (:func:`plan_ranks`).

    Attributes:
        parallel: the parallelism.
        fit: ``"exact"`` or ``"sglang"``: how each rank's own token count is solved.
        num_hidden_layers: the model's layer count that the stages split.
        stages: one :class:`StagePlan` per stage.
        ranks: one :class:`RankPlan` per rank, in rank order.
        max_total_num_tokens: the agreed count, the MIN over ranks; every
            stage's ``agreed_config.max_total_num_tokens`` equals it.
        bottleneck_rank: the lowest rank holding the MIN.
        draft_is_bottleneck: the bottleneck is on the last stage because of
            the draft: without the draft's KV another rank would limit.
        tokens_without_draft: the agreed count if the draft held no KV
            (``None`` without a draft).
        reason: a readable explanation: which rank, its budget, its bytes per
            token, its layers, and the draft's part.
    """

    parallel: Parallelism
    fit: Fit
    num_hidden_layers: int
    stages: tuple[StagePlan, ...]
    ranks: tuple[RankPlan, ...]
    max_total_num_tokens: int
    bottleneck_rank: int
    draft_is_bottleneck: bool
    tokens_without_draft: int | None
    reason: str

    @property
    def bottleneck(self) -> RankPlan:
        """The bottleneck rank's :class:`RankPlan`."""
        return self.ranks[self.bottleneck_rank]

    @property
    def agreed_configs(self) -> tuple[MemoryPoolConfig, ...]:
        """The agreed pool sizes, one per stage."""
        return tuple(s.agreed_config for s in self.stages)

    def stage_of(self, rank: int) -> StagePlan:
        """The :class:`StagePlan` of a global rank."""
        return self.stages[self.parallel.coords(rank)[0]]


def _stage_serving(serving: ServingConfig, parallel: Parallelism) -> ServingConfig:
    """``serving`` with ``tp_size``/``attn_dp_size`` from ``parallel``.

    A conflicting value other than the default 1 raises.
    """
    for name, want in (("tp_size", parallel.tp), ("attn_dp_size", parallel.attn_dp)):
        have = getattr(serving, name)
        if have not in (1, want):
            raise InvalidConfigError(
                f"serving.{name} = {have} conflicts with the parallelism's {want}; "
                "leave it at 1 or set it to the same value"
            )
    return serving.replace(tp_size=parallel.tp, attn_dp_size=parallel.attn_dp)


def _stage_model(model: ModelGeometry, start: int, end: int, stage: int) -> ModelGeometry:
    """The model's geometry restricted to the layers in ``[start, end)``, global ids kept."""
    full = [i for i in model.full_attention_layer_ids if start <= i < end]
    swa = [i for i in model.swa_attention_layer_ids if start <= i < end]
    if not full and not swa:
        raise InvalidConfigError(
            f"pipeline stage {stage} (layers [{start}, {end})) holds no attention layer; "
            "choose a pp_layer_split that gives every stage one"
        )
    return model.replace(full_attention_layer_ids=full, swa_attention_layer_ids=swa)


def _own_tokens(cfg: PoolConfiguratorBase, budget: int, fit: Fit) -> tuple[int, PoolPlan]:
    plan = cfg.plan(budget, fit)
    return plan.config.max_total_num_tokens, plan


def _fmt_bytes(n: int) -> str:
    return f"{n:,} bytes ({n / 2**30:.2f} GiB)"


def _fmt_cell(c: Union[int, float]) -> str:
    return f"{c:,.1f}" if isinstance(c, float) else f"{c:,}"


def _draft_name(spec: SpeculativeConfig) -> str:
    return f"{spec.draft_num_layers}-layer {spec.algorithm.upper()} draft"


def plan_ranks(
    model: ModelGeometry | Scenario,
    serving: ServingConfig | None = None,
    spec: SpeculativeConfig | None = None,
    *,
    budgets: Sequence[int] | int,
    parallel: Parallelism = Parallelism(),
    fit: Fit = "exact",
    num_hidden_layers: int | None = None,
) -> RankPlans:
    """Plan every rank of a TP x PP x attention-DP deployment and the pools they agree on.

    Each stage gets the model's full/SWA layer ids in its ``[start, end)``
    slice (:func:`pp_layer_ranges`, SGLang's split); the draft (``spec``) runs
    on the last stage only, every other stage gets ``spec=None``; every stage
    plans with ``tp_size=parallel.tp`` and ``attn_dp_size=parallel.attn_dp``.
    Each rank solves its own max token count from its own budget (the
    exact-fit count with ``fit="exact"``, SGLang's ``calculate_pool_sizes``
    with ``fit="sglang"``); the ranks agree on the MIN (SGLang's rule under
    pipeline parallelism, which with one stage equals planning with the MIN
    of bytes) and every stage re-solves its pools from it through the
    constraint path, so every stage's ``max_total_num_tokens`` is the same
    while its other pools follow its own layers.

    Args:
        model: the whole model's geometry, or a :class:`kvbudget.Scenario`
            (then ``serving`` and ``spec`` come from it and must not be given).
        serving: serving config (default ``ServingConfig()``); its
            ``tp_size``/``attn_dp_size`` are replaced by the parallelism's (a
            conflicting value other than 1 raises).
        spec: speculative decoding (the draft runs on the last stage).
        budgets: one available-bytes value per rank, in rank order
            ``rank = pp_stage * (tp * attn_dp) + attn_dp_rank * tp + tp_rank``;
            a single int means the same budget on every rank.
        parallel: the parallelism.
        fit: ``"exact"`` or ``"sglang"``.
        num_hidden_layers: the model's layer count when it has layers without
            KV (e.g. linear-attention or Mamba layers) after its last
            attention layer; default: the largest layer id plus one.

    Returns:
        :class:`RankPlans`.

    Raises:
        InvalidConfigError: budgets of the wrong length or type, a stage
            without attention layers, a bad split.
        NotEnoughMemoryError, SWAPoolTooSmallError: a rank's budget, or the
            agreed token count on some stage, gives no valid pools; the
            message names the rank or stage.
    """
    if isinstance(model, Scenario):
        if serving is not None or spec is not None:
            raise InvalidConfigError("plan_ranks: give a Scenario, or a model with serving and spec, not both")
        sc = model
        model, serving, spec = sc.model, sc.serving, sc.spec
    if serving is None:
        serving = ServingConfig()
    if fit not in ("exact", "sglang"):
        raise InvalidConfigError(f'fit: expected "exact" or "sglang", got {fit!r}')
    if not isinstance(parallel, Parallelism):
        raise InvalidConfigError(f"parallel must be a Parallelism, got {type(parallel).__name__}")
    world = parallel.world_size
    if isinstance(budgets, bool):
        raise InvalidConfigError("budgets must be an int or a sequence of ints, got bool")
    budget_list = [budgets] * world if isinstance(budgets, int) else list(budgets)
    if len(budget_list) != world:
        raise InvalidConfigError(
            f"budgets has {len(budget_list)} values; tp {parallel.tp} x pp {parallel.pp} x "
            f"attn_dp {parallel.attn_dp} needs {world}, one per rank"
        )
    for r, b in enumerate(budget_list):
        if isinstance(b, bool) or not isinstance(b, int):
            raise InvalidConfigError(f"budgets[{r}] must be an int, got {type(b).__name__}")

    ids = list(model.full_attention_layer_ids) + list(model.swa_attention_layer_ids)
    n_layers = max(ids) + 1
    if num_hidden_layers is not None:
        if _positive("num_hidden_layers", num_hidden_layers) < n_layers:
            raise InvalidConfigError(
                f"num_hidden_layers = {num_hidden_layers} but the model has layer id {n_layers - 1}"
            )
        n_layers = num_hidden_layers
    ranges = parallel.layer_ranges(n_layers)
    stage_serving = _stage_serving(serving, parallel)
    last = parallel.pp - 1

    stage_models = [_stage_model(model, s, e, i) for i, (s, e) in enumerate(ranges)]
    stage_specs = [spec if i == last else None for i in range(parallel.pp)]
    cfgs = [
        create_pool_configurator(m, stage_serving, sp) for m, sp in zip(stage_models, stage_specs)
    ]

    # Each rank alone.
    own: list[tuple[int, PoolPlan]] = []
    for r, budget in enumerate(budget_list):
        stage = r // parallel.ranks_per_stage
        try:
            own.append(_own_tokens(cfgs[stage], budget, fit))
        except KVBudgetError as e:
            raise type(e)(f"rank {r} (pipeline stage {stage}, {budget:,} bytes): {e}") from e
    tokens = [t for t, _ in own]
    lim = _lowest_min(tokens)
    agreed = tokens[lim]

    # Re-solve every stage from the agreed count (SGLang's constraint path).
    configs: list[MemoryPoolConfig] = []
    for i, cfg in enumerate(cfgs):
        try:
            configs.append(cfg.calculate_pool_sizes_from_max_tokens(agreed))
        except KVBudgetError as e:
            raise type(e)(
                f"pipeline stage {i} at the agreed {agreed:,} tokens (set by rank {lim}): {e}"
            ) from e
    plans = [_plan_at_tokens(cfg, c) for cfg, c in zip(cfgs, configs)]

    # The last stage holds draft KV when its plan has a draft pool (ngram, for one, has none).
    draft_on_last = spec is not None and own[-1][1].draft_bytes > 0
    stages = tuple(
        StagePlan(
            stage=i,
            layer_range=ranges[i],
            ranks=tuple(range(i * parallel.ranks_per_stage, (i + 1) * parallel.ranks_per_stage)),
            model=stage_models[i],
            serving=stage_serving,
            spec=stage_specs[i],
            configurator_kind=type(cfgs[i]).kind,
            cell_size=cfgs[i].cell_size,
            agreed_config=configs[i],
            agreed_plan=plans[i],
            has_draft=draft_on_last and i == last,
        )
        for i in range(parallel.pp)
    )
    ranks = []
    for r, budget in enumerate(budget_list):
        stage, dp, tp = parallel.coords(r)
        ranks.append(
            RankPlan(
                rank=r,
                pp_stage=stage,
                attn_dp_rank=dp,
                tp_rank=tp,
                available_bytes=budget,
                max_total_num_tokens=tokens[r],
                plan=own[r][1],
                agreed_config=configs[stage],
                agreed_plan=plans[stage],
                has_draft=stages[stage].has_draft,
            )
        )

    # The counterfactual: the same deployment with no draft KV on the last stage.
    tokens_without_draft: int | None = None
    draft_is_bottleneck = False
    lim_nd = lim
    if draft_on_last:
        cfg_nd = create_pool_configurator(stage_models[last], stage_serving, None)
        nd = list(tokens)
        for r in stages[last].ranks:
            nd[r] = _own_tokens(cfg_nd, budget_list[r], fit)[0]
        lim_nd = _lowest_min(nd)
        tokens_without_draft = nd[lim_nd]
        draft_is_bottleneck = lim // parallel.ranks_per_stage == last and lim_nd != lim

    reason = _reason(parallel, stages, ranks[lim], agreed, spec, draft_on_last, draft_is_bottleneck,
                     tokens_without_draft, lim_nd)
    return RankPlans(
        parallel=parallel,
        fit=fit,
        num_hidden_layers=n_layers,
        stages=stages,
        ranks=tuple(ranks),
        max_total_num_tokens=agreed,
        bottleneck_rank=lim,
        draft_is_bottleneck=draft_is_bottleneck,
        tokens_without_draft=tokens_without_draft,
        reason=reason,
    )


def _reason(
    parallel: Parallelism,
    stages: tuple[StagePlan, ...],
    rank: RankPlan,
    agreed: int,
    spec: SpeculativeConfig | None,
    draft_on_last: bool,
    draft_is_bottleneck: bool,
    tokens_without_draft: int | None,
    lim_nd: int,
) -> str:
    st = stages[rank.pp_stage]
    m = st.model
    layers = f"{len(m.full_attention_layer_ids)} full + {len(m.swa_attention_layer_ids)} SWA layers"
    where = (
        f"rank {rank.rank} (pipeline stage {rank.pp_stage}, "
        f"layers [{st.layer_range[0]}, {st.layer_range[1]}), "
        f"attn-DP rank {rank.attn_dp_rank}, TP rank {rank.tp_rank})"
    )
    if st.has_draft and spec is not None:
        layers += f" + the {_draft_name(spec)}"
    text = (
        f"{where} is the bottleneck: {_fmt_bytes(rank.available_bytes)} available at "
        f"{_fmt_cell(st.cell_size)} bytes per token ({layers}) holds {agreed:,} tokens; "
        f"every rank plans {agreed:,} tokens."
    )
    if spec is None or not draft_on_last:
        return text
    name = _draft_name(spec)
    last = parallel.pp - 1
    if draft_is_bottleneck:
        assert tokens_without_draft is not None
        return text + (
            f" The {name} on the last stage makes it the bottleneck: without the draft's KV, "
            f"rank {lim_nd} would limit the deployment at {tokens_without_draft:,} tokens."
        )
    if rank.pp_stage == last and parallel.pp > 1:
        assert tokens_without_draft is not None
        return text + (
            f" The {name} on the last stage costs it {tokens_without_draft - agreed:,} tokens, "
            f"but this rank would be the bottleneck without it too."
        )
    if parallel.pp > 1:
        return text + (
            f" The {name} on the last stage (pipeline stage {last}) does not limit the deployment."
        )
    return text
