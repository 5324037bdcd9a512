"""A worker's KV budget as vLLM 0.33.0's worker decides it: ``Worker.determine_available_memory``.

Executed from the wheel (``v1/worker/gpu_worker.py``, lifted with :mod:`ast`, its
``@torch.inference_mode()`` dropped: no tensor is made) together with
``reserve_mm_ipc_gpu_memory`` (``multimodal/gpu_ipc_memory.py``, for a text model:
no multimodal config). The oracle takes each worker's *measured* budget as an
input; what the method adds is ``kv_cache_memory_bytes``: when it is set (and not
0), the worker returns it instead of measuring. The measuring path (a profile
run on the GPU) is what the input budget stands for, so the stand-in
``memory_profiling`` ends the call there and the measured budget is used.

Stubbed: ``maybe_apply_startup_plan`` (a no-op: ``VLLM_ENABLE_STARTUP_PLAN`` is off
by default), ``set_current_vllm_config`` (a null context), the model runner
(``profile_run`` runs nothing, no weights), and the module's logger (a recording
logger of its own: the worker's log is not the engine core's planning log).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import types
from collections.abc import Callable
from typing import Any

from ._strict import RecordingLogger


class _Measured(Exception):
    """The worker reached its memory profiling: the budget is the measured one."""


def _memory_profiling(*args: Any, **kwargs: Any) -> Any:
    raise _Measured


def build_available_memory(b: Any, format_gib: Callable[[int], str]) -> Callable[[Any, int], int]:
    """``(vllm_config, measured_bytes) -> bytes``: one worker's KV budget, by vLLM's worker code."""
    ipc = b.lift("multimodal/gpu_ipc_memory.py", "reserve_mm_ipc_gpu_memory")
    src = b.source("v1/worker/gpu_worker.py")
    cls = next(n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == "Worker")
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "determine_available_memory")
    decorators = [ast.unparse(d) for d in fn.decorator_list]
    if decorators != ["torch.inference_mode()"]:
        raise LookupError(f"gpu_worker.py: Worker.determine_available_memory is decorated {decorators}")
    bare = copy.copy(fn)
    bare.decorator_list = []
    ns = b.namespace(
        "v1.worker.gpu_worker",
        maybe_apply_startup_plan=lambda worker: None,
        set_current_vllm_config=lambda config: contextlib.nullcontext(),
        format_gib=format_gib,
        logger=RecordingLogger("vllm.v1.worker.gpu_worker", []),
        reserve_mm_ipc_gpu_memory=ipc["reserve_mm_ipc_gpu_memory"],
        memory_profiling=_memory_profiling,
    )
    scratch: dict[str, Any] = {}
    src._run([bare], ns, scratch)
    determine = scratch["determine_available_memory"]

    def available_memory(config: Any, measured: int) -> int:
        worker = types.SimpleNamespace(
            cache_config=config.cache_config,
            vllm_config=config,
            model_config=types.SimpleNamespace(multimodal_config=None),
            parallel_config=types.SimpleNamespace(),
            model_runner=types.SimpleNamespace(profile_run=lambda **kw: None, model_memory_usage=0),
            randomize_dummy_inputs=False,
            init_snapshot=types.SimpleNamespace(free_memory=measured),
        )
        try:
            return int(determine(worker))
        except _Measured:
            return measured

    return available_memory
