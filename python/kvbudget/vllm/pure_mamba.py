"""vLLM 0.33.0's reading of the pure state models: Mamba-1 and Falcon-Mamba (``models/mamba.py``'s
``MambaForCausalLM``, which serves ``FalconMambaForCausalLM`` too) and Mamba-2 (``models/mamba2.py``).

Both classes are ``IsAttentionFree``: every layer is a state layer and no KV cache is registered.
vLLM plans them with ``MambaModelConfig`` only (its Mamba cache mode and block size; no attention
block to align), one ``MambaSpec`` group (:func:`kvbudget.vllm.plan`, held to vLLM's planner on
such deployments by ``tests/test_vllm_state.py``). What the model classes register:

* **Mamba-1** (``MambaModel``): layer ``i`` holds a ``MambaMixer`` at ``backbone.layers.{i}.mixer``
  over the config object's ``intermediate_size`` (transformers' ``MambaConfig`` derives
  ``int(expand · hidden_size)``; a value the file gives wins, and the class's state shape reads
  the same attribute), ``state_size`` and
  ``conv_kernel``: ``mamba1_state_shape`` (which keeps no speculative rows) in
  ``mamba1_state_dtype``'s dtypes. The class is ``SupportsPP``.
* **Mamba-2** (``Mamba2Model``): a ``MambaMixer2`` at ``backbone.layers.{i}.mixer`` over
  ``getattr(config, "intermediate_size", expand · hidden_size)``, ``n_groups``, ``num_heads``,
  ``head_dim``, ``state_size`` and ``conv_kernel`` (its TP assertions); the class's
  ``get_mamba_state_shape_from_config`` uses ``expand · hidden_size``: a config whose
  ``intermediate_size`` differs is refused as unchecked. The class is not ``SupportsPP``
  (:data:`~kvbudget.vllm.registry.NOT_PIPELINE_PARALLEL`: vLLM refuses more than one stage).

Drafters and ``--use-replayssm`` (neither class is ``SupportsReplaySSM``) are refused. Sparse
configs take transformers 5.19.0's class defaults (``data/hf_defaults.json``). Held to vLLM's
classes by ``tests/test_vllm_pure_mamba.py``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from kvbudget import _core
from kvbudget.models.hf import ConfigError, _View
from kvbudget.vllm.hybrid_models import _mamba2_state
from kvbudget.vllm.pipeline import pp_stage_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.state_common import _state_dtypes, _state_template, check_plain_state_engine

__all__ = ["PURE_MAMBA_ARCHITECTURES", "pure_mamba_layers"]

#: The architectures read here -> the mixer (``"mamba1"`` or ``"mamba2"``).
PURE_MAMBA_ARCHITECTURES: Final = {"MambaForCausalLM": "mamba1", "FalconMambaForCausalLM": "mamba1",
                                   "Mamba2ForCausalLM": "mamba2"}  # fmt: skip


def pure_mamba_layers(cfg: dict[str, Any], engine: EngineConfig, *, model_dtype: str,
                      cache_dtypes: tuple[str, str]) -> list[LayerSpec]:  # fmt: skip
    """The state layers vLLM 0.33.0 registers for a pure state model (see the module doc), for
    ``engine``'s TP and PP; ``cache_dtypes``: ``--mamba-cache-dtype`` and ``--mamba-ssm-cache-dtype``.

    Raises:
        ConfigError: what vLLM refuses (its mixers' TP assertions, ``--use-replayssm``), a
            drafter, or a Mamba-2 config whose class state shape differs from its layers'.
    """
    arch = cfg["architectures"][0]
    mixer = PURE_MAMBA_ARCHITECTURES[arch]
    check_plain_state_engine(arch, engine)
    v = _View(cfg, "config.json", engine="vllm")
    tp, hidden = engine.tp, v.req_int("hidden_size")
    n, expand = v.req_int("num_hidden_layers", minimum=0), v.req_int("expand")
    if n == 0:  # no mixer is built: nothing asserts, nothing is registered
        return []
    dtypes = _state_dtypes(model_dtype, *cache_dtypes)
    if mixer == "mamba1":
        inter = v.opt_int("intermediate_size")  # the file's value wins over the class's derivation
        dims = [tp, int(expand * hidden) if inter is None else inter, v.req_int("state_size"), v.req_int("conv_kernel")]
        try:
            shapes = _core._vllm_state_shapes("mamba1", dims)
        except ValueError as e:
            raise ConfigError(f"config.json: vLLM 0.33.0 refuses it: {e}", "expand") from None
        state = _state_template(shapes, dtypes, "mamba1", model_dtype)
    else:
        inter = v.opt_int("intermediate_size")
        if inter is not None and inter != expand * hidden:
            raise ConfigError(f"config.json: intermediate_size ({inter}) is not expand · hidden_size "
                              f"({expand * hidden}): vLLM 0.33.0's Mamba2 class would size the state by the one and "
                              "its layers by the other; kvbudget has not checked that", "intermediate_size")  # fmt: skip
        state = _mamba2_state(tp, (expand * hidden, v.req_int("n_groups"), v.req_int("num_heads"),
                                   v.req_int("head_dim"), v.req_int("state_size"), v.req_int("conv_kernel")),
                              dtypes, ("num_heads", "n_groups"), model_dtype)  # fmt: skip
    return [replace(state, name=f"backbone.layers.{i}.mixer", pp_stage=stage)
            for stage, (start, end) in enumerate(pp_stage_layers(n, engine.pp)) for i in range(start, end)]
