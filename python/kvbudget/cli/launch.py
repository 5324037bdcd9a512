"""``--sglang "<launch_server flags>"``: plan exactly what an SGLang launch would.

The flags are read by :func:`kvbudget.sglang.install.from_server_args` (SGLang's
own names and defaults, the model folder resolved as SGLang resolves it); the
budget still comes from ``--available`` or ``--gpu`` (whose ``--mem-fraction``
defaults to the line's ``--mem-fraction-static``); with ``--gpu`` and no
``--weights-gib``, a note gives the model folder's weight bytes (exact from its
safetensors files, else an estimate, and says which).
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING

from kvbudget.cli.parser import UsageError, changed_fields
from kvbudget.cli.values import CliScenario, budget_of

if TYPE_CHECKING:
    from kvbudget.sglang.launch import SGLangLaunch

__all__ = ["launch_scenario"]


def _weights_note(launch: SGLangLaunch) -> str:
    """The model folder's weight bytes (:meth:`SGLangLaunch.weights`), for a budget given none."""
    from kvbudget.models.hf import ConfigError

    try:
        weights = launch.weights()
    except ConfigError as exc:
        return f"the model's weights could not be sized: {exc}"
    tp = int(launch.args["tp_size"])
    per_gpu = weights.bytes / tp / (1 << 30)
    return (f"the model's weights: {weights.describe()}; about {per_gpu:.2f} GiB per GPU at --tp {tp} "
            f"(--weights-gib {per_gpu:.2f} takes them out of the budget)")  # fmt: skip


def launch_scenario(args: argparse.Namespace) -> CliScenario:
    """The scenario of ``args.sglang``; other model, draft and serving flags are refused."""
    from kvbudget.sglang.install import from_server_args

    given = changed_fields(args)
    if args.model is not None or args.config is not None or args.draft is not None or given:
        extra = ", ".join(["MODEL"] * (args.model is not None) + ["--config"] * (args.config is not None)
                          + ["--draft"] * (args.draft is not None) + [f"--{g.replace('_', '-')}" for g in given])
        raise UsageError(f"--sglang gives the model, draft and serving flags; not with {extra}")
    try:
        flags = shlex.split(args.sglang)
    except ValueError as exc:
        raise UsageError(f"--sglang: {exc}") from None
    launch = from_server_args(flags)
    notes = [f"{flag} is left to SGLang's launch-time resolution; assumed {what}" for flag, what in launch.unresolved]
    if launch.unknown_flags:
        notes.append("flags kvbudget does not read: " + " ".join(launch.unknown_flags))
    if args.mem_fraction is None and launch.mem_fraction_static is not None and args.gpu is not None:
        args.mem_fraction = launch.mem_fraction_static
    available, budget_label, budget_info = budget_of(args, False, notes)
    if args.gpu is not None and args.weights_gib is None:
        notes.append(_weights_note(launch))
    spec = launch.scenario.spec
    model = launch.model
    if launch.state is not None:
        notes.append(f"SGLang 0.5.23 keeps a {launch.state.mixer} state in {launch.state.num_state_layers} layers "
                     f"beside a KV pool over the {launch.scenario.model.num_layers} attention layers; the state "
                     "pool comes out of the budget first (--mamba-radix-cache-strategy "
                     f"{launch.resolved['mamba_radix_cache_strategy']}, as SGLang resolves the line)")  # fmt: skip
    return CliScenario(
        scenario=launch.scenario,
        model_label=f"{launch.args['model_path']} ({model.architecture}, as SGLang 0.5.23 resolves it)",
        model_info={"preset": None, "config": launch.args["model_path"], "hf_id": None, "display_name": None,
                    "architectures": [model.architecture], "sglang_launch": flags},
        draft_label="none" if spec.algorithm == "none" else f"{spec.algorithm}, {spec.draft_num_layers} layers",
        draft_info={"spec": spec.algorithm, "config": launch.args["speculative_draft_model_path"]},
        available=available, budget_label=budget_label, budget_info=budget_info, notes=notes,
        sglang_pools={"architectures": [model.architecture], "hybrid_swa": model.pools.hybrid_swa,
                      "reason": model.reason},
        state=launch.state,
    )  # fmt: skip
