"""SGLang 0.5.23's own command-line parser for the flags a pool plan reads.

SGLang declares its flags as annotated fields (``arg_groups/fields/*.py``:
``A[type, Arg(aliases=..., choices=...)] = default``) and builds its argparse
parser from them with ``add_cli_args_from_dataclass`` (``arg_groups/arg_utils.py``).
Both are executed here from the verified extraction (with the real ``msgspec``;
``choices.py`` whole; ``human_readable_int``, ``json_list_type`` and
``nullable_str`` lifted from ``utils/common.py``), and the namespaces the plan
reads (model, parallel, schedule, memory, disagg, spec, and the exec group's
kernel fields for the DSA backends) are added to one
``argparse.ArgumentParser()``, as ``ServerArgs.add_cli_args`` adds them.
"""

from __future__ import annotations

import argparse
import json
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from oracle_kit.lift import registered as _registered
from ._plumbing import Builder, pick

NAMESPACES: dict[str, tuple[str, ...]] = {
    "model": ("Model",), "parallel": ("Parallel",), "schedule": ("Schedule",), "memory": ("Memory",),
    "disagg": ("Disagg",), "spec": ("Spec",), "exec_": ("ExecKernel", "ExecMamba")}  # fmt: skip
#: What the launch-resolution hooks read besides (:mod:`.resolve`).
RESOLUTION_NAMESPACES: dict[str, tuple[str, ...]] = {
    **NAMESPACES, "device": ("Device",), "serving": ("Serving",),
    "exec_": ("ExecKernel", "ExecFeatures", "ExecMoe", "ExecDeterministic", "ExecMamba")}  # fmt: skip


def load(root: Path, namespaces: dict[str, tuple[str, ...]] = NAMESPACES) -> Callable[[Sequence[str]], dict[str, Any]]:
    """``parse(flags) -> {field: value}``: SGLang's parser over ``namespaces`` (module -> classes)."""
    b = Builder(root, real=frozenset({"msgspec", "argparse", "json", "types", "functools", "collections"}))
    common = b.namespace("utils.common", json=json, **pick(vars(typing), "Any Optional List"))
    b.source("utils/common.py").lift(common, "nullable_str", "human_readable_int", "json_list_type")
    b.provide("utils.common", pick(common, "nullable_str human_readable_int json_list_type"))
    utils = b.execute("arg_groups.arg_utils")
    b.execute("arg_groups.choices")
    # exec_.py's graph fields name these (ExecKernel, the DSA backends, does not use them).
    b.provide("model_executor.cuda_graph_config", {}, poison_rest_of=b.source("arg_groups/fields/exec_.py"))
    parser = argparse.ArgumentParser()
    for module, classes in namespaces.items():
        ns = b.namespace(f"arg_groups.fields.{module}")
        b.source(f"arg_groups/fields/{module}.py").exec_module(ns)
        with _registered(ns):  # its string annotations resolve through sys.modules
            for cls in classes:
                utils["add_cli_args_from_dataclass"](parser, ns[cls])

    def parse(flags: Sequence[str]) -> dict[str, Any]:
        known, _ = parser.parse_known_args(list(flags))
        return vars(known)

    return parse
