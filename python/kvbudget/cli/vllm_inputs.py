"""What ``--engine vllm`` plans: vLLM's layers, engine settings and budget from the command line.

The layers are :func:`kvbudget.vllm.models.layers_from_hf_config` of the model's
``config.json`` (a preset's is :meth:`~kvbudget.models.Preset.hf_config`) and of
the drafter's: a draft preset's, a ``KIND:config.json``, or for ``eagle3:N`` /
``eagle:N`` N Llama-architecture layers at the target's full-attention geometry
(``mtp:N``: a DeepSeek target's own N MTP layers). The serving flags that mean
the same in both engines are shared (``--tp``, ``--dcp``, ``--kv-dtype``); the
vLLM flags, one per engine setting the core declares with a flag
(:func:`kvbudget.cli.parser.vllm_flags`), set those settings of
:class:`~kvbudget.vllm.EngineConfig` by name. The budget is ``--available`` (vLLM's
"Available KV cache memory"), or with ``--gpu``
:func:`kvbudget.vllm.budget.vllm_available_bytes` at ``--gpu-memory-utilization``
less ``--weights-gib``, an upper bound (vLLM also subtracts its profile run's
peak and the CUDA-graph estimate).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, cast

from kvbudget import vllm
from kvbudget.cli import render
from kvbudget.cli.files import read_config
from kvbudget.cli.parser import VLLM_FLAGS, UsageError, vllm_flags
from kvbudget.cli.scenario import CliScenario
from kvbudget.models.hf import text_part
from kvbudget.vllm.backends import backend_block_size, kv_cache_layout
from kvbudget.vllm.models import layers_from_hf_config
from kvbudget.vllm.state_models import with_mtp_layers

__all__ = ["DEFAULT_GPU_MEMORY_UTILIZATION", "VllmInputs", "refuse_vllm_flags", "vllm_inputs"]


def refuse_vllm_flags(args: argparse.Namespace, needs: str) -> None:
    """UsageError when a vLLM flag is given without vLLM being planned."""
    given = vllm_flags(args)
    if given:
        raise UsageError(f"{', '.join(VLLM_FLAGS[k] for k in given)}: vLLM's, which need {needs}")


#: vLLM 0.33.0's ``--gpu-memory-utilization`` default.
DEFAULT_GPU_MEMORY_UTILIZATION: Final = 0.92

# kvbudget's (SGLang's) KV dtype names -> (vLLM's --kv-cache-dtype, the model dtype "auto" stores).
_KV_DTYPES: Final[dict[str, tuple[str, str | None]]] = {
    "auto": ("auto", None),
    "bf16": ("auto", "bfloat16"),
    "fp16": ("auto", "float16"),
    "fp32": ("auto", "float32"),
    "fp8_e4m3": ("fp8", None),
    "fp8_e5m2": ("fp8_e5m2", None),
    "nvfp4": ("nvfp4", None),
}
_METHODS: Final[dict[str, str]] = {"eagle": "eagle", "eagle3": "eagle3", "nextn": "mtp"}


@dataclass(frozen=True)
class VllmInputs:
    """One vLLM deployment as the command line describes it."""

    layers: list[vllm.LayerSpec]
    engine: vllm.EngineConfig
    available: int
    budget_label: str
    notes: list[str] = field(default_factory=list)

    def plan(self, **changes: Any) -> vllm.VllmPlan:
        """vLLM's plan, with ``changes`` to the engine settings (e.g. ``max_model_len``)."""
        return vllm.plan(self.layers, self.available, replace(self.engine, **changes))

    def layer_counts(self) -> str:
        """``N attention layers[ and M state layers] as vLLM reads them[, D drafter layer(s)]``."""
        drafters = sum(x.is_draft for x in self.layers)
        states = sum(x.kind == "mamba" and not x.is_draft for x in self.layers)
        text = f"{len(self.layers) - drafters - states} attention layers"
        text += (f" and {states} state layers" if states else "") + " as vLLM reads them"
        return text + (f", {drafters} drafter layer(s)" if drafters else "")

    def settings(self) -> str:
        """The engine settings, one line."""
        e = self.engine
        parts = [f"block {e.block_size}", f"max-model-len {e.max_model_len}",
                 f"max-num-batched-tokens {e.max_num_batched_tokens}",
                 "async scheduling" if e.async_scheduling else "async scheduling off", f"TP {e.tp}"]  # fmt: skip
        if e.pp > 1:
            parts.append(f"PP {e.pp}")
        if e.dcp > 1:
            parts.append(f"DCP {e.dcp}")
        if e.speculative_method:
            parts.append(f"{e.speculative_method} k={e.num_speculative_tokens}")
        if e.disable_hybrid_kv_cache_manager:
            parts.append("hybrid KV cache manager off")
        if e.num_gpu_blocks_override is not None:
            parts.append(f"{e.num_gpu_blocks_override} blocks (override)")
        return ", ".join(parts)


def _target_config(sc: CliScenario) -> dict[str, Any]:
    from kvbudget.models import find_bundled_model, get_preset

    info = sc.model_info
    if info.get("preset"):
        return get_preset(info["preset"]).hf_config()
    if info.get("config"):
        return read_config(info["config"])
    bundled = find_bundled_model(info["bundled_model"]) if info.get("bundled_model") else None
    if bundled is not None:
        return bundled.config
    raise UsageError("--engine vllm needs a model preset or a config.json")


def _draft(sc: CliScenario, target: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, int | None]:
    """(vLLM's method, the drafter's config, MTP layers) for the command line's draft."""
    from kvbudget.models import get_preset

    spec = sc.spec
    if spec.algorithm in ("none", "") or spec.draft_num_layers == 0:
        return None, None, None
    method = _METHODS.get(spec.algorithm)
    if method is None:
        raise UsageError(f"--engine vllm: kvbudget's vLLM mode reads EAGLE, EAGLE3 and MTP drafters, not "
                         f"{spec.algorithm!r} (vLLM's draft_model method)")  # fmt: skip
    info = sc.draft_info
    if info.get("preset"):
        preset = get_preset(info["preset"])
        return method, (None if method == "mtp" else preset.hf_config()), preset.draft_num_layers
    if info.get("config"):
        cfg = read_config(info["config"])
        return method, cfg, cfg.get("num_nextn_predict_layers") if method == "mtp" else None
    n = spec.draft_num_layers
    if method == "mtp":
        return method, None, n
    text = text_part(target)
    keys = ("num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size")
    return method, {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": n,
                    **{k: text[k] for k in keys if text.get(k) is not None}}, None  # fmt: skip


def _budget(util: float | None, sc: CliScenario) -> tuple[int, str]:
    from kvbudget.vllm.budget import vllm_available_bytes

    info = sc.budget_info
    if info.get("source") != "gpu":
        if util is not None:
            raise UsageError("--gpu-memory-utilization goes with --gpu")
        if sc.available is None:
            sc.require_budget()  # the usage error
        # The whole budget: vLLM's state layers take blocks of the one pool (no state pool first).
        assert sc.available is not None
        return sc.available, sc.budget_label
    util = DEFAULT_GPU_MEMORY_UTILIZATION if util is None else util
    total, weights = info["gpu_memory_bytes"], info["weights_bytes"]
    available = vllm_available_bytes(total, util, weights_bytes=weights)
    label = (f"{render.b(available)} bytes = {render.gib(available)}: ceil({render.b(total)} B x "
             f"gpu-memory-utilization {util:g}) - weights {render.b(weights)} B (an upper bound: vLLM "
             "also subtracts its profile run's peak and the CUDA-graph estimate; give --available "
             "with the log's 'Available KV cache memory' for its figure)")  # fmt: skip
    return available, label


def vllm_inputs(args: argparse.Namespace, sc: CliScenario) -> VllmInputs:
    """The vLLM deployment for parsed arguments and the scenario they built.

    Raises:
        UsageError: a model, drafter or KV dtype kvbudget's vLLM mode does not read.
        kvbudget.models.ConfigError: a config vLLM refuses (an InvalidConfigError).
    """
    target = _target_config(sc)
    serving = sc.serving
    if serving.kv_cache_dtype not in _KV_DTYPES:
        raise UsageError(f"--engine vllm: no vLLM --kv-cache-dtype for {serving.kv_cache_dtype!r} "
                         f"(kvbudget maps {', '.join(_KV_DTYPES)})")  # fmt: skip
    kv_dtype, model_dtype = _KV_DTYPES[serving.kv_cache_dtype]
    method, draft, mtp_layers = _draft(sc, target)
    nextn = mtp_layers
    if method == "mtp" and mtp_layers:
        target, nextn = with_mtp_layers(target, mtp_layers)
    derived = text_part(target).get("max_position_embeddings")
    derived = derived if isinstance(derived, int) and not isinstance(derived, bool) and derived > 0 else None
    flags = vllm_flags(args)
    util = flags.pop("gpu_memory_utilization", None)
    max_len: int | Literal["auto"] | None = flags.pop("max_model_len", None)
    notes: list[str] = []
    if max_len is None:
        max_len = derived or vllm.EngineConfig().max_model_len
        notes.append(f"--max-model-len: the model's max_position_embeddings, {max_len}" if derived else
                     f"--max-model-len: vLLM's default {max_len} (the config gives no max_position_embeddings)")  # fmt: skip
    if max_len == "auto" and derived is None:
        raise UsageError("--max-model-len auto needs the model's max_position_embeddings")
    k = flags.pop("num_speculative_tokens", None)
    if method is not None and k is None:
        k = sc.spec.num_steps or 1
    # The settings the rest of the command line gives; every other one is its own flag.
    engine = vllm.EngineConfig(
        max_model_len=max_len, derived_max_model_len=derived, tp=serving.tp_size, dcp=serving.dcp_size,
        speculative_method=method, num_speculative_tokens=k,
        num_nextn_predict_layers=nextn if method == "mtp" else None, **flags,
    )  # fmt: skip
    layers = layers_from_hf_config(target, engine, draft=draft, kv_cache_dtype=kv_dtype, model_dtype=model_dtype)
    layout = kv_cache_layout(layers, flags.get("kv_cache_layout"))  # what the backends' declared sets resolve
    if layout != engine.kv_cache_layout:
        notes.append(f"--kv-cache-layout {layout}: the layout vLLM resolves (the model's backends declare it)")
        engine = replace(engine, kv_cache_layout=cast(Any, layout))  # one of the declared layout names
    block = backend_block_size(layers, engine)  # the Hopper backends' block size, or a refusal
    if block != engine.block_size:
        notes.append(f"block {block}: the platform's choice for the FLASHMLA backend, which stores FP8 MLA in "
                     f"{block}-token kernel blocks only")  # fmt: skip
        engine = replace(engine, block_size=block)
    own = sorted({x.block_size for x in layers if x.block_size is not None and x.block_size != engine.block_size})
    if own:  # the layers' own block size (DSA: what the indexer backend takes; MiniMax-M3: its sparse backends;
        # Inkling: its conv states, one block of the conv kernel)
        why = ("a MiniMax-M3 model: its sparse backends' only kernel block size"
               if any(x.kind == "key_indexer" for x in layers) else
               "Inkling's conv states: one block of sconv_kernel_size tokens"
               if any(x.name.endswith(".conv_state") for x in layers) else
               "a DSA model: its indexer backend's only kernel block size")  # fmt: skip
        notes.append(f"the model's layers take {', '.join(map(str, own))}-token blocks, not block {engine.block_size} "
                     f"({why})")  # fmt: skip
    available, label = _budget(util, sc)
    if available <= 0:
        raise UsageError(f"no KV budget for vLLM: {label}")
    return VllmInputs(layers, engine, available, label, notes)
