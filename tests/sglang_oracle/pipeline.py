"""SGLang 0.5.23's pipeline split, ``get_pp_indices`` (``distributed/utils.py``), run from the verified wheel.

A sandbox of its own (one lifted function and what it calls), so that a test of the
split loads nothing else: the state-model oracle's config classes touch transformers'
global registry, and loading them before the model oracle changes what it parses.
``SGLANG_PP_LAYER_PARTITION`` is the only environment variable it may read.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from pathlib import Path

from ._configs import REAL
from ._plumbing import Builder
from ._strict import StrictNamespace, StubError


class PipelineOracle:
    """``stage_ranges(n, pp, split)``: every stage's ``get_pp_indices``."""

    def __init__(self, root: Path) -> None:
        self._partition: str | None = None
        b = Builder(root, real=REAL)
        du = b.namespace("distributed.utils", Tuple=typing.Tuple, os=StrictNamespace("os", getenv=self._getenv))
        b.source("distributed/utils.py").lift(du, "ensure_divisibility", "divide", "get_pp_indices")
        self.get_pp_indices = du["get_pp_indices"]

    def _getenv(self, name: str, default: object = None) -> str | None:
        if name != "SGLANG_PP_LAYER_PARTITION":
            raise StubError(f"sglang_oracle.pipeline: os.getenv({name!r}) is not provided")
        return self._partition

    def stage_ranges(self, n: int, pp: int, split: Sequence[int] | None = None) -> tuple[tuple[int, int], ...] | str:
        """The lifted ``get_pp_indices`` for every stage, ``SGLANG_PP_LAYER_PARTITION`` = ``split``
        joined by commas; ``"error: ..."`` where it refuses the split."""
        self._partition = None if split is None else ",".join(str(c) for c in split)
        try:
            return tuple(self.get_pp_indices(n, rank, pp) for rank in range(pp))
        except ValueError as e:
            return f"error: {e}"
        finally:
            self._partition = None
