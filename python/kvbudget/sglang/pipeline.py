"""SGLang 0.5.23's pipeline split: which layers each stage holds.

``stage_ranges`` is ``get_pp_indices`` (``python/sglang/srt/distributed/utils.py``) for every
stage at once. It is SGLang's rule, exactly: with no split each stage gets
``num_hidden_layers // pp_size`` layers and the LAST ``num_hidden_layers % pp_size`` stages one
more (62 layers on 4 stages: 15, 15, 16, 16; vLLM gives the remainder to the earlier stages);
``split`` is ``SGLANG_PP_LAYER_PARTITION``'s per-stage counts, ignored for a single stage (a
singleton draft group owns every layer). Stages may come out empty, as they do in SGLang;
:func:`kvbudget.ranks.pp_layer_ranges` adds the checks a plan needs (every stage non-empty)
on top of this one reading.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvbudget.models.config_io import ConfigError

__all__ = ["stage_ranges"]


def stage_ranges(
    num_hidden_layers: int, pp_size: int, split: Sequence[int] | None = None
) -> tuple[tuple[int, int], ...]:
    """Each stage's ``[start, end)`` layer ids, stage 0 first, as SGLang's ``get_pp_indices`` gives them.

    Args:
        num_hidden_layers: the model's layers (``ModelConfig.num_hidden_layers``), >= 0.
        pp_size: pipeline stages, >= 1.
        split: ``SGLANG_PP_LAYER_PARTITION``'s layer counts, one per stage; ignored when
            ``pp_size == 1``.

    Raises:
        ConfigError: ``split`` is not ``pp_size`` ints or does not sum to
            ``num_hidden_layers`` (SGLang's ``ValueError`` at model load), key ``pp_layer_split``.
    """
    if pp_size > 1 and split is not None:
        counts = list(split)
        if len(counts) != pp_size or any(isinstance(c, bool) or not isinstance(c, int) for c in counts):
            raise ConfigError(f"pp_layer_split must be {pp_size} ints (SGLANG_PP_LAYER_PARTITION), got {split!r}",
                              "pp_layer_split")  # fmt: skip
        if sum(counts) != num_hidden_layers:
            raise ConfigError(f"pp_layer_split sums to {sum(counts)}, but SGLang splits the model's "
                              f"{num_hidden_layers} layers", "pp_layer_split")  # fmt: skip
    else:
        base, rem = divmod(num_hidden_layers, pp_size)
        counts = [base + (1 if stage >= pp_size - rem else 0) for stage in range(pp_size)]
    ranges, start = [], 0
    for count in counts:
        ranges.append((start, start + count))
        start += count
    return tuple(ranges)
