"""SGLang 0.5.23's rule for which class each draft KV layer belongs to.

SGLang sizes an EAGLE-family or standalone draft in three classes
(``SpeculativeConfig``'s ``draft_num_layers`` d, ``draft_swa_num_layers`` d_s,
``banded_draft_layers`` d_sf; REFERENCE 2.7):

* the target's config lists ``mtp_local_layer_ids`` (banded MTP heads): the
  draft layers ``0..d`` named there are banded (SWA geometry, full
  capacity), and no layer is counted at SWA capacity;
* otherwise, when the draft's model config is hybrid SWA (a hybrid-SWA draft
  checkpoint, or, for an MTP/NEXTN head without a checkpoint of its own, the
  target's own config), ``d_s = min(number of its SWA layers, d)`` layers sit
  at the target's SWA geometry and capacity
  (``spec_aux_hidden_state._resolve_eagle_aux_hidden_state`` and
  ``HybridSWAPoolConfigurator.__init__``);
* the rest are draft layers at the target's full geometry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from kvbudget._core import ModelGeometry
from kvbudget.fields import canonical_name

__all__ = ["DraftLayers", "sglang_draft_layers"]


class DraftLayers(TypedDict):
    """``SpeculativeConfig``'s draft-layer keywords."""

    draft_num_layers: int
    draft_swa_num_layers: int
    banded_draft_layers: int

#: Algorithms whose draft layers SGLang's configurators count (``is_eagle() or is_standalone()``).
COUNTED = ("eagle", "eagle3", "nextn", "frozen_kv_mtp", "standalone")


def sglang_draft_layers(
    algorithm: str,
    draft_num_layers: int,
    *,
    target: ModelGeometry,
    draft_model: ModelGeometry | None = None,
    mtp_local_layer_ids: Sequence[int] | None = None,
) -> DraftLayers:
    """The ``SpeculativeConfig`` draft-layer keywords SGLang 0.5.23 resolves.

    Args:
        algorithm: the speculative algorithm (any spelling ``SpeculativeConfig`` takes).
        draft_num_layers: d, the draft's KV layers.
        target: the target model.
        draft_model: the draft checkpoint's own geometry; ``None`` for an
            MTP/NEXTN head read from the target's checkpoint (SGLang then
            reads the target's config).
        mtp_local_layer_ids: the target config's ``mtp_local_layer_ids``, if any.

    Returns:
        ``draft_num_layers``, ``draft_swa_num_layers`` and ``banded_draft_layers``.
    """
    d = int(draft_num_layers)
    out = DraftLayers(draft_num_layers=d, draft_swa_num_layers=0, banded_draft_layers=0)
    if canonical_name("algorithm", algorithm) not in COUNTED or d <= 0:
        return out
    if mtp_local_layer_ids is not None:
        local = {int(i) for i in mtp_local_layer_ids}
        out["banded_draft_layers"] = sum(i in local for i in range(d))
        return out
    source = target if draft_model is None else draft_model
    if source.num_swa_layers > 0:
        out["draft_swa_num_layers"] = min(source.num_swa_layers, d)
    return out
