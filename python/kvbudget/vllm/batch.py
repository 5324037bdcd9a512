"""vLLM 0.33.0's plan of one model for many budgets (and lengths) at once.

An autoscaler re-plans one model for many budgets: :func:`plan_many` builds the model's
layout (specs, groups, each stage's projection) once per run of rows with the same engine,
and runs only vLLM's capacity step per row (``rust/core/src/vllm/batch.rs``). Each row's
numbers are :func:`kvbudget.vllm.plan`'s for that row's budget and ``max_model_len``
(``tests/test_vllm_batch.py`` holds them to it); a row that fails holds zeros and its
status instead of raising.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Optional, Union

from kvbudget import _core
from kvbudget.vllm.planner import EngineConfig, Layers, LayerSpec, layers

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["VLLM_STATUS_CODES", "VllmBatchResult", "plan_many"]

#: Row statuses: ``ok``; ``startup``, vLLM's startup failure on the row's budget (what
#: :func:`kvbudget.vllm.plan` raises as :class:`~kvbudget.vllm.VllmStartupError`);
#: ``refused``, vLLM refuses the deployment (:class:`~kvbudget.vllm.VllmError`); ``input``,
#: an input the restatement does not accept (``VllmError`` with ``vllm_error_type`` ``"Input"``).
VLLM_STATUS_CODES: dict[str, int] = dict(_core.VLLM_STATUS_CODES)


class VllmBatchResult(NamedTuple):
    """Per-row results; a failed row holds zeros and a nonzero ``status``."""

    num_blocks: npt.NDArray[np.uint64]
    """Blocks every worker allocates (the null block included)."""
    max_model_len: npt.NDArray[np.uint64]
    """``max_model_len`` after ``"auto"``, tokens."""
    max_concurrency: npt.NDArray[np.float64]
    """Requests of ``max_model_len`` held at once (vLLM's float)."""
    kv_cache_size_tokens: npt.NDArray[np.uint64]
    """The log's "GPU KV cache size: N tokens" (concurrency times ``max_model_len``)."""
    status: npt.NDArray[np.uint8]
    """0 on success, else :data:`VLLM_STATUS_CODES`' code."""


def plan_many(
    model: Union[Layers, Sequence[LayerSpec]],
    available_bytes: Union[int, npt.ArrayLike],
    engine: Optional[EngineConfig] = None,
    *,
    max_model_len: Optional[npt.ArrayLike] = None,
) -> VllmBatchResult:
    """vLLM 0.33.0's plan of ``model`` for every row: ``available_bytes`` for KV on every
    worker (an int or a 1-D array, bytes) and, when given, ``max_model_len`` per row (an
    int or a 1-D array, tokens; else the engine's). Rows with the same ``max_model_len``
    share one layout: keep them together for speed. The GIL is released for batches of
    ``kvbudget._core.DETACH_ROWS`` rows or more.

    Raises:
        TypeError: a value of the wrong type.
        OverflowError: a budget beyond 64 bits.
        VllmError: a layer the restatement refuses (``"Input"``), as :func:`~kvbudget.vllm.layers`.
        InvalidConfigError: columns of different lengths, or a negative ``max_model_len``.
    """
    import numpy as np

    from kvbudget.batch import int_column
    from kvbudget.errors import InvalidConfigError

    converted = layers(model)
    one = isinstance(available_bytes, (int, np.integer)) and not isinstance(available_bytes, (bool, np.bool_))
    budgets = int_column("available_bytes", [available_bytes] if one else available_bytes, optional=False)
    lengths = None
    if max_model_len is not None:
        single = isinstance(max_model_len, (int, np.integer)) and not isinstance(max_model_len, (bool, np.bool_))
        cells = int_column("max_model_len", [max_model_len] * len(budgets) if single else max_model_len,
                           optional=False)  # fmt: skip
        if cells.size and int(cells.min()) < 0:
            raise InvalidConfigError("plan_many: max_model_len must be >= 0 tokens")
        lengths = cells.astype(np.uint64)
    return VllmBatchResult._make(_core._vllm_plan_many(converted, budgets, engine or EngineConfig(), lengths))
