"""vLLM 0.33.0 mode: what vLLM allocates for a model, drafter and budget.

* :mod:`.planner`: vLLM's KV-cache planner (restated in the Rust core):
  :class:`LayerSpec`, :class:`EngineConfig`, :func:`plan` -> :class:`VllmPlan`;
  :func:`layers` converts a model's layers once (:class:`Layers`) for re-planning.
* :mod:`.batch`: one model for many budgets and lengths (:func:`plan_many`).
* :mod:`.models`: a checkpoint's attention layers as vLLM's model classes read
  them (:func:`layers_from_hf_config`).
* :mod:`.backends`: the block size vLLM's Hopper backends settle on
  (:func:`backend_block_size`) and the KV layout they resolve (:func:`kv_cache_layout`).
* :mod:`.budget`: vLLM's KV budget from a worker's memory.
* :mod:`.alloc`: a vLLM plan's one buffer and every layer's view
  (``kvbudget.allocate(plan)``; torch, loaded on use).

Nothing here imports vLLM or torch.
"""

from __future__ import annotations

from kvbudget.vllm.backends import backend_block_size, kv_cache_layout
from kvbudget.vllm.batch import VLLM_STATUS_CODES, VllmBatchResult, plan_many
from kvbudget.vllm.budget import vllm_available_bytes
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.planner import (VLLM_VERSION, EngineConfig, Layers, LayerSpec, VllmError, VllmGroup,
                                   VllmHybrid, VllmPlan, VllmStartupError, VllmTensor, layers, plan,
                                   plan_raw)  # fmt: skip

__all__ = ["VLLM_STATUS_CODES", "VLLM_VERSION", "EngineConfig", "Layers", "LayerSpec", "VllmError", "VllmGroup", "VllmHybrid",
           "VllmBatchResult", "VllmPlan", "VllmStartupError", "VllmTensor", "backend_block_size", "kv_cache_layout", "layers",
           "layers_from_hf_config", "plan", "plan_many", "plan_raw",
           "vllm_available_bytes"]  # fmt: skip
