"""A model, its serving settings and its speculative decoding: :class:`Scenario`.

The class lives with SGLang's configurators, which it plans with
(:mod:`kvbudget.sglang.configurators`); it is ``kvbudget.Scenario``, and this
module keeps its old import path.
"""

from __future__ import annotations

from kvbudget.sglang.configurators import Scenario

__all__ = ["Scenario"]
