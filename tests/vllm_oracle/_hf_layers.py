"""``vllm_layers``: vLLM 0.33.0's KV-cache layers for an HF config, built by the model code
:mod:`._hf` lifts from the wheel (its docstring has the flow, the stubs and what is restated);
re-exported by :mod:`._hf`."""

from __future__ import annotations

import copy
from typing import Any

from oracle_kit.strict import StubError

from ._hf import _CTX, _OWN_SHAPE, _build, _env, _model_config, _root
from ._hf_lift import VllmLoadError, _load_error, _run
from ._hf_records import attention_record
from ._hf_state import replayssm_startup, state_of
from ._hf_tables import DEFAULT_ARCH
from ._interfaces import eagle3_startup, eagle3_startup_v2, supports
from ._strict import StrictConfig

__all__ = ["vllm_layers"]


def vllm_layers(config: Any, *, tp: int = 1, pp: int = 1, disable_sliding_window: bool = False,
                draft_config: Any = None, method: str | None = None,
                num_speculative_tokens: int | None = None, model_dtype: str = "bfloat16",
                use_replayssm: bool = False, replayssm_buffer_len: int = 16, mamba_backend: str = "triton",
                enable_prefix_caching: bool = True, use_v2_model_runner: bool = True,
                kv_cache_dtype: str = "auto") -> list[dict[str, Any]]:
    """vLLM 0.33.0's KV-cache layers for ``config`` in registration order (target layers, per
    PP stage, then drafter layers); see the module docstring. Inputs are not modified. A state
    layer is ``kind="mamba"`` with its ``state_shapes`` and ``state_dtypes`` (``model_dtype``: what
    the model's ``auto`` dtypes store)."""
    env = _env(_root())
    if method not in (None, "eagle", "eagle3", "mtp") or (
            (method in ("eagle", "eagle3")) != (draft_config is not None)):
        raise ValueError(f"vllm_layers: method={method!r} with draft_config={draft_config!r}")
    config = copy.deepcopy(config)
    if not getattr(config, "architectures", None):
        config.architectures = [DEFAULT_ARCH.get(config.model_type, "?")]
    try:
        mc = _model_config(env, config, disable_sliding_window)
        mc.dtype = env.dtypes[model_dtype]  # restated: the model dtype is an input
        window = _run(env.cache_window, model_config=mc)["sliding_window"]
        draft_mc = None
        if method in ("eagle", "eagle3"):
            eagle = env.cfg["EAGLEConfig"](copy.deepcopy(draft_config), method=method,
                                           model_type="eagle")  # fmt: skip
            draft_mc = _model_config(env, eagle)
        elif method == "mtp":
            drafter = env.cfg["hf_config_override"](copy.deepcopy(config))
            draft_mc = _model_config(env, drafter)
            if drafter.model_type not in env.cfg["mtp_model_types"]:  # __post_init__'s method detection
                raise NotImplementedError("Unsupported speculative method: 'mtp'")
    except StubError:
        raise
    except Exception as e:
        raise _load_error(e) from e
    # ModelConfig.verify_with_parallel_config: more than one stage needs the class's SupportsPP,
    # read from the wheel's class hierarchy (a hierarchy outside the pinned files is left to the build).
    try:
        pp_ok = pp == 1 or supports(_root(), env.registry, config.architectures[0], "SupportsPP")
    except LookupError:
        pp_ok = True
    if not pp_ok:
        raise VllmLoadError(f"NotImplementedError: Pipeline parallelism is not supported for this model "
                            f"({config.architectures[0]} does not implement SupportsPP)")  # fmt: skip
    cache_config = StrictConfig(sliding_window=window, cache_dtype=kv_cache_dtype)
    spec = None if method is None else StrictConfig(
        method=method, draft_model_config=draft_mc, parallel_drafting=False,
        num_speculative_tokens=num_speculative_tokens)  # fmt: skip
    if method == "mtp":
        try:
            _run(env.cfg["n_predict_check"], self=spec)
        except Exception as e:
            raise _load_error(e) from e
    backend = env.mamba_backends[mamba_backend.upper()]  # MambaBackendEnum
    replay = {"use_replayssm": use_replayssm, "replayssm_buffer_len": replayssm_buffer_len, "backend": backend}
    if use_replayssm:
        replayssm_startup(env, _root(), config.architectures[0], spec, pp, replay, enable_prefix_caching,
                           use_v2_model_runner)  # fmt: skip
    out: list[dict[str, Any]] = []
    for rank in range(pp):
        parallel = StrictConfig(
            tensor_parallel_size=tp, pipeline_parallel_size=pp, rank=rank * tp,
            use_sequence_parallel_moe=False, enable_eplb=False, dcp_q_replicate=False, enable_expert_parallel=False,
            data_parallel_size=1,
            decode_context_parallel_size=1, prefill_context_parallel_size=1,
            eplb_config=StrictConfig(num_redundant_experts=0))  # fmt: skip
        context: dict[str, Any] = {}
        vllm_config = env.engine_config_cls(
            model_config=mc, cache_config=cache_config, quant_config=None, load_config=None, lora_config=None,
            kernel_config=StrictConfig(moe_backend="auto"),
            # DSA's top-k buffer rows (never read for the KV cache): vLLM's default batch tokens
            # (and Beam's all-reduce workspace size, never a KV size: max_num_seqs, vLLM's default)
            scheduler_config=StrictConfig(max_num_batched_tokens=8192, max_num_seqs=256),
            parallel_config=parallel, speculative_config=spec, diffusion_config=None,
            compilation_config=StrictConfig(static_forward_context=context))  # fmt: skip
        pp_group = StrictConfig(rank_in_group=rank, world_size=pp, is_first_rank=rank == 0,
                                is_last_rank=rank == pp - 1)  # fmt: skip
        _CTX.update(tp=tp, pp_group=pp_group, vllm_config=vllm_config)
        try:
            built = _build(env, config.architectures[0], vllm_config, config)
            vllm_config.model_config = mc
            target = set(context)
            if draft_mc is not None and rank == pp - 1:
                _build(env, draft_mc.hf_config.architectures[0], vllm_config, draft_mc.hf_config)
            # Each state layer's own shapes (MambaBase.get_kv_cache_spec reads get_state_shape()).
            try:
                own = {name: [list(x) for x in layer.get_state_shape()] for name, layer in context.items()
                       if type(layer).__name__ in _OWN_SHAPE}  # fmt: skip
            except StubError:
                raise
            except Exception as e:  # vLLM's refusal (its divisibility asserts)
                raise _load_error(e) from e
        finally:
            _CTX.clear()
        if method in ("eagle", "eagle3") and rank == pp - 1:
            try:  # load_model's checks on the last rank, both models built
                if use_v2_model_runner:
                    eagle3_startup_v2(_root(), env.registry, config.architectures[0], spec, pp,
                                      type(vars(built).get("model", built)))  # the decoder of a built *ForCausalLM
                else:
                    eagle3_startup(_root(), env.registry, config.architectures[0], method, draft_mc)
            except (RuntimeError, ValueError) as e:  # vLLM's refusals; any other error is the oracle's own
                raise _load_error(e) from e
        for name, layer in context.items():
            if isinstance(layer, env.state_layers):
                try:
                    state = state_of(env, config.architectures[0], mc, tp, spec, model_dtype, replay)
                except (StubError, LookupError):
                    raise
                except Exception as e:
                    raise _load_error(e) from e
                # The class's shapes size the attention block; where the layer keeps others (LFM2's
                # ShortConv with a drafter's rows), the layer's are its spec's.
                config_shapes = state["state_shapes"]
                state["state_shapes"] = own.get(name, config_shapes)
                out.append({"name": name, "kind": "mamba", "is_draft": name not in target, "pp_stage": rank,
                            "config_state_shapes": [] if config_shapes == state["state_shapes"] else config_shapes,
                            **state})  # fmt: skip
                continue
            record = attention_record(env, name, layer, name not in target, rank, mc.dtype)
            if record is not None:  # None: no spec (a KV-sharing or encoder-only layer)
                out.append(record)
    return out
