"""SGLang 0.5.23's KV byte budget, ``KVCacheConfigurator._profile_available_bytes``, on emulated ranks.

Lifted unchanged from the verified extraction: ``get_available_gpu_memory`` and
``empty_device_cache`` (``utils/common.py``), ``mm_runtime_reservation_gb`` and
the method ``KVCacheConfigurator._profile_available_bytes``
(``mem_cache/kv_cache_configurator.py``). Every rank is its own thread with its
own lifted copies (as every SGLang rank is its own process) and runs, in
order, the two measurements SGLang makes:

1. the baseline before the weights load: ``get_available_gpu_memory(device,
   gpu_id, distributed=world_size > 1, cpu_group=...)``, which is the call
   ``distributed/bootstrap.py``'s ``measure_pre_model_load_memory`` makes for a
   target worker (that file is not in the pinned set, so its one call is
   written out here);
2. ``_profile_available_bytes(pre_model_load_memory)`` after the weights load.

Stubs (each a :class:`~._strict.StrictNamespace`, so any other read fails loudly):

* ``torch`` in ``utils/common.py``: ``cuda.device_count`` (the world size),
  ``cuda.current_device`` (the rank), ``cuda.empty_cache`` (nothing to
  release), ``cuda.get_device_properties(..).is_integrated = False`` and
  ``cuda.mem_get_info`` (the rank's free bytes at that point); ``tensor`` and
  ``float32`` are the real ones; ``distributed.all_reduce(t, op=MIN, group)`` is
  a collective over the rank threads (a barrier, then every rank's tensor
  becomes the ``torch.minimum`` of all of them), the one torch.distributed does.
* the runtime bags: ``get_parallel()`` (``launch_world_size``,
  ``world_group.cpu_group``), ``get_schedule()`` (``mem_fraction_static``,
  ``prefill_max_requests=None``), ``get_exec()`` (no prefill CUDA-graph request
  cap), ``get_disagg()`` (``disaggregation_mode="null"``), ``get_mm()`` (the
  case's feature transport) and ``envs`` (the case's two MiB reserves).
* the ``KVCacheConfigurator``: ``device="cuda"``, ``gpu_id`` (the rank),
  ``mambaish_config=None`` (no state pool), ``model_config.is_multimodal``.
* ``gc.collect()`` collects nothing: the free bytes are the case's, whatever
  Python holds (a real collection per rank per case would only cost time).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from oracle_kit.lift import Source
from ._plumbing import PREFIX, Builder, _EnvValue
from ._strict import Poison, StrictNamespace, StubError

_MIN = object()  # torch.distributed.ReduceOp.MIN, as the collective checks it
_GROUP = object()  # the world group's cpu_group
_TOTAL = 1 << 40  # mem_get_info's total (SGLang reads only the free bytes)


@dataclass(frozen=True)
class Budget:
    """One case: per-rank free bytes before and after the weights load, and the knobs."""

    free_before: Sequence[int]
    free_now: Sequence[int]
    mem_fraction_static: float
    is_multimodal: bool = False
    mm_feature_transport: str | None = None
    vlm_cache_mb: int = 100
    mm_feature_cache_mb: int = 1024


class _Collective:
    """``torch.distributed.all_reduce(MIN)`` over ``n`` rank threads."""

    def __init__(self, n: int) -> None:
        self.slots: list[torch.Tensor | None] = [None] * n
        self.barrier = threading.Barrier(n, timeout=60)

    def for_rank(self, rank: int) -> Callable[..., None]:
        def all_reduce(tensor: torch.Tensor, op: object = None, group: object = None) -> None:
            if op is not _MIN or group is not _GROUP:
                raise StubError(f"sglang_oracle.budget: all_reduce(op={op!r}, group={group!r}) is not emulated")
            self.slots[rank] = tensor.clone()
            self.barrier.wait()
            result = functools.reduce(torch.minimum, typing.cast(list[torch.Tensor], self.slots))
            self.barrier.wait()  # every rank has read the slots
            tensor.copy_(result)

        return all_reduce


class _Rank:
    """One rank's lifted functions and its current free memory."""

    def __init__(self, b: Builder, src: dict[str, Source], rank: int, n: int, collective: _Collective,
                 case: Budget) -> None:  # fmt: skip
        self.free = 0
        cuda = StrictNamespace(
            "torch.cuda", device_count=lambda: n, current_device=lambda: rank, empty_cache=lambda: None,
            get_device_properties=lambda i: StrictNamespace("device properties", is_integrated=False),
            mem_get_info=lambda i: (self.free, _TOTAL),
        )  # fmt: skip
        fake_torch = StrictNamespace(
            "torch", cuda=cuda, tensor=torch.tensor, float32=torch.float32,
            distributed=StrictNamespace("torch.distributed", all_reduce=collective.for_rank(rank),
                                        ReduceOp=StrictNamespace("ReduceOp", MIN=_MIN)),
        )  # fmt: skip
        common = b.namespace(
            "utils.common", torch=fake_torch, Optional=typing.Optional, Any=typing.Any,
            logger=logging.getLogger(f"{PREFIX}.budget"), psutil=Poison("psutil"),
            current_platform=Poison("current_platform"),
        )  # fmt: skip
        src["common"].lift(common, "empty_device_cache", "get_available_gpu_memory")
        self.get_available_gpu_memory = common["get_available_gpu_memory"]
        bags = {
            "parallel": StrictNamespace("get_parallel()", launch_world_size=n,
                                        world_group=StrictNamespace("world_group", cpu_group=_GROUP)),
            "schedule": StrictNamespace("get_schedule()", mem_fraction_static=case.mem_fraction_static,
                                        prefill_max_requests=None),
            "exec": StrictNamespace("get_exec()", graph=StrictNamespace("graph", cuda_graph_config=StrictNamespace(
                "cuda_graph_config", prefill=StrictNamespace("prefill", full_prefill_max_req=None)))),
            "disagg": StrictNamespace("get_disagg()", disaggregation_mode="null"),
            "mm": StrictNamespace("get_mm()", mm_feature_transport=case.mm_feature_transport),
        }  # fmt: skip
        envs = StrictNamespace("envs", SGLANG_VLM_CACHE_SIZE_MB=_EnvValue(case.vlm_cache_mb),
                               SGLANG_MM_FEATURE_CACHE_MB=_EnvValue(case.mm_feature_cache_mb))  # fmt: skip
        kvc_ns = b.namespace(
            "mem_cache.kv_cache_configurator", Optional=typing.Optional, math=math, envs=envs,
            gc=StrictNamespace("gc", collect=lambda: 0),
            logger=logging.getLogger(f"{PREFIX}.budget"), get_available_gpu_memory=self.get_available_gpu_memory,
            Backend=Poison("cuda_graph_config.Backend"), get_device_memory_capacity=Poison("get_device_memory_capacity"),
            pre_capture_activation_reserve_mb=Poison("pre_capture_activation_reserve_mb"),
            **{f"get_{bag}": (lambda v=v: v) for bag, v in bags.items()},
        )  # fmt: skip
        src["kvc"].lift(kvc_ns, "mm_runtime_reservation_gb")
        self.profile = src["kvc"].lift_method(kvc_ns, "KVCacheConfigurator", "_profile_available_bytes")
        self.kvc = StrictNamespace(
            "KVCacheConfigurator", device="cuda", gpu_id=rank, mambaish_config=None,
            model_config=StrictNamespace("ModelConfig", is_multimodal=case.is_multimodal),
        )  # fmt: skip


def load(root: Path) -> Callable[[Budget], tuple[list[int | None], list[str | None]]]:
    """``budget(case) -> (bytes per rank, error message per rank)``: SGLang's
    ``_profile_available_bytes`` on every rank (None where it raised ValueError)."""
    b = Builder(root)
    src = {"common": b.source("utils/common.py"), "kvc": b.source("mem_cache/kv_cache_configurator.py")}

    def budget(case: Budget) -> tuple[list[int | None], list[str | None]]:
        n = len(case.free_before)
        assert len(case.free_now) == n > 0
        collective = _Collective(n)
        ranks = [_Rank(b, src, r, n, collective, case) for r in range(n)]
        results: list[int | None] = [None] * n
        errors: list[str | None] = [None] * n
        faults: list[BaseException] = []

        def run(r: int) -> None:
            rank = ranks[r]
            try:
                rank.free = case.free_before[r]
                pre = rank.get_available_gpu_memory("cuda", r, distributed=n > 1, cpu_group=_GROUP)
                rank.free = case.free_now[r]
                results[r] = rank.profile(rank.kvc, pre)
            except ValueError as e:  # SGLang: "Loaded weights leave no GPU memory for the KV cache"
                errors[r] = str(e)
            except BaseException as e:  # noqa: BLE001 (re-raised below, in the caller's thread)
                faults.append(e)
                collective.barrier.abort()

        threads = [threading.Thread(target=run, args=(r,)) for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if faults:
            raise faults[0]
        return results, errors

    return budget
