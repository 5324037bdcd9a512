"""Parity oracle: SGLang 0.5.23's real pool-configurator code, run on CPU.

``load()`` verifies and reads SGLang's released files from the PyPI wheel
(``tools/fetch_sglang.py``; nothing of SGLang lives in this repository),
executes ``sglang/srt/model_executor/pool_configurator.py`` in a sandbox
(:mod:`._sandbox`: what is executed whole, lifted with ``ast``, or stubbed,
and why) and returns an :class:`Oracle`. ``Oracle.run(case, entry=...,
amount=...)`` builds a fresh mock ``KVCacheConfigurator`` and runtime context
for the case, calls SGLang's own factory ``create_memory_pool_configurator``
and then ``calculate_pool_sizes`` (``entry="bytes"``) or
``calculate_pool_sizes_from_max_tokens`` (``entry="tokens"``).
``Oracle.config_from_budget(case, budget)`` runs SGLang's call site instead,
``KVCacheConfigurator.config_from_budget`` (:mod:`._callsite`), which imports
the factory from the sandbox's ``pool_configurator`` module at each call.

Case fields (kvbudget names) -> SGLang inputs
=============================================

Model geometry (``model_config`` is a strict stand-in carrying SGLang's own
``get_total_num_kv_heads`` / ``get_num_kv_heads`` / ``get_swa_num_kv_heads``):

* ``num_full_layers`` n_f, ``num_swa_layers`` n_s -> ``kvc.layer_info``:
  ``start_layer=0``, ``end_layer = num_effective_layers = n_f + n_s``; when
  hybrid, ``full_attention_layer_ids = range(n_f)``,
  ``swa_attention_layer_ids = range(n_f, n_f + n_s)``, else both None (as
  ``ModelLayerInfo`` has them for a non-hybrid model).
* ``kvc.is_hybrid_swa = hybrid and not disable_hybrid_swa_memory``, ``hybrid``
  being ``n_s > 0`` unless the case's ``hybrid_swa`` says otherwise (SGLang:
  ``model_config.is_hybrid_swa`` = hybrid architecture and not
  ``--disable-hybrid-swa-memory``; a hybrid architecture may have no SWA layer).
  ``hybrid_layer_ids=False``: both id lists None although hybrid (a model that
  opts in with ``is_hybrid_swa`` and gives no ``hybrid_layer_pattern``).
* ``num_kv_heads`` -> ``hf_config.num_key_value_heads``; ``swa_num_kv_heads``
  -> ``hf_config.swa_num_key_value_heads`` (always set, so
  ``get_swa_num_kv_heads`` takes its first branch).
* ``head_dim``, ``v_head_dim``, ``swa_head_dim``, ``swa_v_head_dim`` ->
  the ``model_config`` attributes of the same names.
* ``sliding_window_size`` -> ``kvc.sliding_window_size`` (SGLang's exclusive
  window, as ``resolve_sliding_window_size`` leaves it).
* ``kv_lora_rank`` not None -> MLA: ``model_config.attention_arch = MLA``,
  ``kvc.use_mla_backend = True``, and ``model_config.kv_lora_rank``,
  ``qk_rope_head_dim``, ``swa_kv_lora_rank``, ``swa_qk_rope_head_dim`` set
  (MHA configs do not carry them). Architectures: ``LlamaForCausalLM`` (MHA) /
  ``DeepseekV2ForCausalLM`` (MLA), in no DSA / DSV4 / MiniMax / QSA list.
* ``context_len`` (optional, 131072) -> ``model_config.context_len`` (only a
  zero cell size reads it, as ``max_total_tokens`` is None).
* ``model_config.is_multimodal = False`` (text-only configs).

Serving:

* ``kv_cache_dtype``: kvbudget ``fp16`` / ``fp32`` -> SGLang ``"auto"`` with the
  model dtype float16 / float32; every other name is passed as is. The torch
  dtype and ``kvc.kv_cache_dtype_str`` come from SGLang's own
  ``configure_kv_cache_dtype`` (no model, no draft override), as
  ``ModelRunner.configure_kv_cache_dtype`` derives them.
* ``model_dtype`` -> ``kvc.model_dtype`` (unless forced by fp16/fp32 above).
* ``page_size`` -> ``kvc.page_size`` and ``get_schedule().page_size``;
  ``Oracle.run(page_size=...)`` overrides only the entry point's argument.
* ``tp_size`` -> ``get_parallel().attn_tp_size``; ``dcp_size`` ->
  ``attn_dcp_size``; ``attn_dp_size`` -> ``kvc.attn_dp_size`` (and the bag).
* ``swa_full_tokens_ratio``, ``max_running_requests``,
  ``chunked_prefill_size``, ``disable_overlap_schedule`` -> ``get_schedule()``.
* ``disable_radix_cache``, ``enable_unified_memory`` -> ``get_memory()``.
* ``disaggregation_mode``, ``disaggregation_decode_extra_slots`` ->
  ``get_disagg()``.
* ``swa_eviction_interval`` -> ``envs.SGLANG_SWA_EVICTION_INTERVAL``.
* ``is_draft_worker`` -> ``kvc.is_draft_worker`` and
  ``model_config.is_draft_model``.
* ``prefill_attention_backend``, ``decode_attention_backend`` -> what
  ``attention_backends_of(resolved_view(server_args))`` returns (read by the
  FP4 quant methods); ``is_sm100`` -> ``get_platform().is_sm100``.

Speculative:

* ``algorithm``: "none" -> ``speculative_algorithm=None``; others upper-cased
  through SGLang's ``SpeculativeAlgorithm.from_string`` (NEXTN -> EAGLE).
  ``get_spec().speculative_algorithm`` is the resolved member's name (SGLang
  normalizes NEXTN to "EAGLE" in its argument hooks).
* ``draft_num_layers`` d -> ``spec_aux_config.eagle_draft_num_layers`` for
  EAGLE / EAGLE3 / NEXTN / FROZEN_KV_MTP / STANDALONE, or
  ``dflash_draft_num_layers`` for DFLASH / DSPARK; None when d <= 0 or for
  other algorithms.
* ``draft_swa_num_layers`` -> ``eagle_draft_swa_num_layers`` (same rule).
* ``banded_draft_layers`` k > 0 -> ``hf_text_config.mtp_local_layer_ids =
  list(range(k))``; k == 0 -> the attribute is absent.
* ``num_steps``, ``eagle_topk``, ``num_draft_tokens``, ``max_num_draft_tokens``
  -> ``get_spec().speculative_num_steps``, ``speculative_eagle_topk``,
  ``speculative_num_draft_tokens``, ``max_speculative_num_draft_tokens``
  (passed as given, also for algorithm "none").
* ``dflash_draft_cell_size_per_token`` -> ``kvc.dflash_draft_cell_size_per_token``.
* ``fused_full_entry_bytes`` / ``fused_swa_entry_bytes`` -> the values
  ``kvc.fused_entry_bytes("full")`` / ``("swa")`` return.

* ``state_layer_ids`` (a hybrid-state case) -> ``hf_config`` an instance of the
  stand-in SGLang's ``hybrid_gdn_config`` matches as ``Qwen3NextConfig``
  (:class:`~._helpers.GatedDeltaHFConfig`), its ``full_attention_layer_ids`` every
  other layer, so ``kvc.mambaish_config`` (SGLang's ``mambaish_config``) is that
  config; ``stage`` -> ``layer_info.start_layer`` / ``end_layer`` /
  ``num_effective_layers`` and ``pp_size`` (``kvc`` and ``get_parallel()``).

Off, whatever the case: pipeline parallelism unless ``stage`` is given; HiSparse,
DSA layer split, logical-page KV sharding, NPU sparse offload (through SGLang's
own predicates, which the off flags make return "off"); ``max_total_tokens=None``
(so ``config_from_budget``'s user cap is off: its ``cap_tokens`` argument
exercises the same re-derive path); no linear-attention
registry entry; ``kvc.mambaish_config`` computed by SGLang's
``mambaish_config`` (None but for a hybrid-state case); ``kvc.device="cpu"`` (only the
NVFP4 method's scale tensors are placed on it).

Errors: a :class:`~._strict.StubError` (the sandbox lacks what SGLang asked
for), ``NameError``, ``ImportError`` or ``AttributeError`` is a fault of the
oracle and propagates; any other exception is SGLang's answer, reported in
:attr:`Outcome.error`. :class:`~._case.CaseError` means a malformed case.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ._callsite import pool_config_fields
from ._case import CONFIG_KEYS, OPTIONAL, REQUIRED, CaseError, build_inputs, resolve_case
from ._fetch import sglang_root
from ._sandbox import Sandbox, build
from ._strict import StrictNamespace, StubError

__all__ = [
    "CaseError",
    "Oracle",
    "Outcome",
    "OPTIONAL",
    "REQUIRED",
    "StrictNamespace",
    "StubError",
    "classify",
    "load",
]

#: Exceptions that mean the sandbox, not SGLang, failed.
FAULTS: tuple[type[BaseException], ...] = (StubError, NameError, ImportError, AttributeError)


@dataclass(frozen=True)
class Outcome:
    """What SGLang did with one case."""

    class_name: str | None
    """The configurator class the factory built (also when its constructor raised)."""
    cell_size: int | float | None
    """The configurator's ``_cell_size``, type preserved."""
    swa_cap: int | None
    """``SWARequestCapPoolConfigurator._swa_cap`` (None for other classes)."""
    config: dict[str, int | float | None] | None
    """``MemoryPoolConfig``'s max_total / full / swa token counts and unified pool bytes
    (:meth:`Oracle.config_from_budget`: every field)."""
    error: tuple[str, str, str] | None
    """``(kind, exception type name, message)``; kind is "not_enough_memory",
    "swa_too_small" or "invalid"."""
    stage: str
    """"init" (factory or constructor raised), else "solve"."""


def classify(exc: BaseException) -> tuple[str, str, str]:
    """``(kind, type name, message)`` of an exception SGLang raised."""
    msg = str(exc)
    if isinstance(exc, RuntimeError) and (
        msg.startswith("Not enough memory") or "leaves no room" in msg
    ):
        kind = "not_enough_memory"
    elif (
        isinstance(exc, ValueError)
        and msg.startswith("SWA pool (")
        and "cannot hold even one request" in msg
    ):
        kind = "swa_too_small"
    else:
        kind = "invalid"
    return kind, type(exc).__name__, msg


class Oracle:
    """SGLang's pool sizing for kvbudget cases (not re-entrant; calls are serialized)."""

    def __init__(self, sandbox: Sandbox, root: Path) -> None:
        self.sandbox = sandbox
        self.root = root
        self._lock = threading.Lock()

    def run(
        self, case: Mapping[str, object], *, entry: str, amount: int, page_size: int | None = None
    ) -> Outcome:
        """One case through SGLang's factory and the ``entry`` path ("bytes" or "tokens")."""
        if entry not in ("bytes", "tokens"):
            raise ValueError(f"entry must be 'bytes' or 'tokens', got {entry!r}")
        c = resolve_case(case)
        with self._active(c) as kvc:
            return self._run(kvc, entry, amount, c["page_size"] if page_size is None else page_size)

    @contextlib.contextmanager
    def _active(self, c: Mapping[str, Any]) -> Iterator[Any]:
        """The case's ``kvc``, with its runtime context active (one case at a time)."""
        sb = self.sandbox
        with self._lock:
            kvc, ctx = build_inputs(sb, c)
            active = sb.active
            active.ctx, active.picked = ctx, None
            try:
                yield kvc
            finally:
                active.ctx, active.picked = None, None

    @contextlib.contextmanager
    def configurator(self, case: Mapping[str, object]) -> Iterator[Any]:
        """SGLang's configurator for ``case``, built once by its factory, with the case's
        runtime context active while the block runs (for timing SGLang's own
        ``calculate_pool_sizes`` on a configurator that outlives the call)."""
        with self._active(resolve_case(case)) as kvc:
            yield self.sandbox.create_memory_pool_configurator(kvc)

    def config_from_budget(
        self, case: Mapping[str, object], budget: int, *, cap_tokens: int | None = None
    ) -> Outcome:
        """One case through SGLang's call site, ``kvc.config_from_budget(budget,
        cap_tokens=...)`` (:mod:`._callsite`): the factory it imports is whatever
        the sandbox's ``pool_configurator`` module holds at the call. ``config``
        is every ``MemoryPoolConfig`` field; ``cell_size`` / ``swa_cap`` are None
        (the call site keeps its configurator to itself)."""
        with self._active(resolve_case(case)) as kvc:
            picked = self.sandbox.active
            try:
                result = kvc.config_from_budget(budget, cap_tokens=cap_tokens)
            except FAULTS:
                raise
            except Exception as e:  # SGLang's answer
                return Outcome(picked.picked, None, None, None, classify(e), "solve")
            return Outcome(picked.picked, None, None, pool_config_fields(result), None, "solve")

    def _run(self, kvc: Any, entry: str, amount: int, page_size: int) -> Outcome:
        active = self.sandbox.active
        try:
            configurator = self.sandbox.create_memory_pool_configurator(kvc)
        except FAULTS:
            raise
        except Exception as e:  # SGLang refused the inputs
            return Outcome(active.picked, None, None, None, classify(e), "init")
        name = type(configurator).__name__
        cell = getattr(configurator, "_cell_size", None)
        cap = getattr(configurator, "_swa_cap", None)
        try:
            if entry == "bytes":
                result = configurator.calculate_pool_sizes(amount, page_size)
            else:
                result = configurator.calculate_pool_sizes_from_max_tokens(amount, page_size)
        except FAULTS:
            raise
        except Exception as e:
            return Outcome(name, cell, cap, None, classify(e), "solve")
        config = {k: getattr(result, k) for k in CONFIG_KEYS}
        return Outcome(name, cell, cap, config, None, "solve")


_LOADED: dict[Path, Oracle] = {}
_LOAD_LOCK = threading.Lock()


def load(cache: Path | str | None = None) -> Oracle:
    """The oracle over the verified SGLang extraction (built once per cache directory)."""
    root = sglang_root(cache)
    with _LOAD_LOCK:
        oracle = _LOADED.get(root)
        if oracle is None:
            oracle = _LOADED[root] = Oracle(build(root), root)
        return oracle
