"""SGLang 0.5.23's launch-time resolution of the flags a pool plan reads, executed from the wheel.

``ServerArgs.resolve_once`` runs ``arg_groups/pipeline.py``'s hooks in order,
each declaring field values (``declare_resolution``) that later hooks read
through ``resolving_view`` / ``resolved_view``. :func:`load` returns
``resolve(flags, hf_config) -> values | ("error", message)`` running, on
SGLang's own parsed record (:mod:`.launch`), the hooks whose decisions reach
the KV pools, in the pipeline's order:

1. ``handle_pd_disaggregation`` (``pd_disaggregation_hook.py``, executed whole);
2. ``handle_model_specific_adjustments``' model overrides:
   ``collect_model_override_declarations`` (lifted from ``overrides.py``, with
   its predicate providers) over the registry that the override modules of the
   tested architectures fill when executed whole (``model_overrides/*.py``:
   :data:`OVERRIDE_MODULES`; :func:`registering_modules` checks from the source
   that no other module registers those architectures), and, for a DSA model,
   ``_dsa_kv_cache_dtype_default``;
3. ``handle_attention_backend_compatibility``'s passes
   (``_attention_backend_default`` with ``get_default_attn_backend``,
   ``_mla_backend_page_constraints``, ``_attention_backend_fa3_fp8_fallback``,
   ``_fa4_page_constraint``) and ``_page_size_default``;
4. ``handle_speculative_decoding`` (``speculative_hook.py``, executed whole) and
   ``SpeculativeAlgorithm.handle_server_args`` (lifted from ``spec_info.py``).

``model_override_base.py`` is executed whole; ``declare_resolution``,
``run_post_process_pass`` and the passes are lifted from ``overrides.py``.

Stand-ins for runtime facts: ``get_platform()`` is a Hopper GPU (SM90, CUDA >=
12.3, FlashInfer installed; every other platform predicate False), and
``torch.cuda.get_device_capability()`` is ``(9, 0)``; ``get_context()`` raises
``ValueError`` (no server is published during resolution, as at launch);
``ModelConfig.from_server_args`` is :class:`ModelStandIn` (the architecture,
the attention arch, ``is_hybrid_swa`` from SGLang's own model resolution,
:mod:`.model`); ``get_config(path)`` reads the draft folder's ``config.json``
(its ``architectures``, for the Gemma4-assistant alias); ``envs`` answers
the defaults of the variables these hooks read (:data:`ENVS`); ``is_cpu()`` is
False and ``is_triton_kernels_available()`` False (gpt-oss's MoE runner, which
no pool reads). Every other
name is a Poison, and the record refuses any field SGLang's parser did not
declare, so a hook reaching past this set fails loudly.
"""

from __future__ import annotations

import ast
import json
import logging
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import launch
from ._helpers import _speculative
from ._plumbing import Builder, pick
from ._strict import Poison, StrictModule, StrictNamespace, StubError, poison_class

#: The override modules executed: those registering the tested architectures.
OVERRIDE_MODULES = ("deepseek_v2", "gemma2_gemma3", "gpt_oss", "qwen3_5", "qwen3_moe")
#: ``envs`` the executed hooks read, at SGLang's declared defaults (``environ.py``).
ENVS = {"SGLANG_RUST_SERVER": False, "SGLANG_DISAGG_STAGING_BUFFER": False,
        "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION": False, "SGLANG_SIMULATE_ACC_LEN": -1.0,
        "SGLANG_AITER_KV_CACHE_LAYOUT": "default"}  # fmt: skip
HOPPER = StrictNamespace(
    "get_platform() (Hopper)", is_hopper_with_cuda_12_3=True, is_sm90=True, is_sm100=False, is_sm120=False,
    is_blackwell=False, is_hip=False, is_musa=False, is_xpu=False, is_npu=False, has_flashinfer=True, is_cuda=True,
)  # fmt: skip
_LIFTED = ("POST_PROCESS_PASSES register_post_process run_post_process_pass declare_resolution _ForeignDefaults "
           "record_foreign_defaults validate_declarations collect_model_override_declarations _muse_spark_overrides "
           "_step3p_overrides _DEEPSEEK_FAMILY_ARCHS _dsa_kv_cache_dtype_default _attention_backend_default "
           "_mla_backend_page_constraints _attention_backend_fa3_fp8_fallback _fa4_page_constraint _page_size_default "
           "_speculative_moe_runner_default _MAMBA_RADIX_CACHE_ARCHS _MAMBA_EXTRA_BUFFER_ARCHS "
           "supports_mamba_cache_extra_buffer _mamba_radix_cache_resolution mamba_cache_chunk_size").split()  # fmt: skip


class _Env:
    def __init__(self, value: object) -> None:
        self._value = value

    def get(self) -> object:
        return self._value

    def is_set(self) -> bool:
        return False


class _Envs:
    def __getattr__(self, name: str) -> _Env:
        if name not in ENVS:
            raise StubError(f"sglang_oracle.resolve: envs.{name} is not provided")
        return _Env(ENVS[name])


class Record:
    """The ``ServerArgs`` record: SGLang's parsed fields; any other field fails loudly
    (private bookkeeping names read as unset, as on a fresh record)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_resolved_overrides", [])

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        if name.startswith("_"):
            raise AttributeError(name)
        raise StubError(f"sglang_oracle.resolve: the record has no field {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            raise StubError(f"sglang_oracle.resolve: a hook assigned the field {name!r}")
        object.__setattr__(self, name, value)


class ModelStandIn(StrictNamespace):
    """What the hooks read of ``ModelConfig``: built from SGLang's own model resolution."""

    __slots__ = ()


def registering_modules(root: Path, archs: Sequence[str]) -> set[str]:
    """The ``model_overrides`` modules (and ``overrides.py``) whose ``_register_for`` names one of ``archs``."""
    found = set()
    folder = root / "sglang/srt/arg_groups/model_overrides"
    for path in [*folder.glob("*.py"), root / "sglang/srt/arg_groups/overrides.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("_register_for",
                                                                                  "register_model_override"):
                if set(archs) & {a.value for a in node.args if isinstance(a, ast.Constant)}:
                    found.add(path.stem)
    return found


def _builder(root: Path, active_model: list[Any]) -> tuple[Builder, dict[str, Any], dict[str, Any], tuple[Any, Any]]:
    b = Builder(root, real=frozenset({"msgspec", "argparse", "json", "types", "functools", "collections", "math",
                                      "os", "copy"}))
    utils = b.execute("arg_groups.arg_utils")
    b.execute("arg_groups.choices")
    common = b.namespace("utils.common", torch=__import__("torch"), lru_cache=__import__("functools").lru_cache)
    b.source("utils/common.py").lift(common, "is_mps", "is_no_spec_infer_or_topk_one")
    b.provide("utils.common", pick(common, "is_mps is_no_spec_infer_or_topk_one"))
    b.provide("platforms", {"current_platform": StrictNamespace("current_platform", is_out_of_tree=lambda: False)})
    b.provide("environ", {"envs": _Envs()})

    def no_context() -> Any:
        raise ValueError("no server is published during resolution")

    rc = b.namespace("runtime_context")
    b.provide("runtime_context", {"get_platform": lambda: HOPPER, "get_context": no_context})
    b.source("runtime_context.py").lift(rc, "attn_dp_enabled_of", "num_dp_ranks_of")
    b.provide("runtime_context", pick(rc, "attn_dp_enabled_of num_dp_ranks_of"))
    mc_source = b.source("configs/model_config.py")
    mcns = b.namespace("configs.model_config", **pick(vars(typing), "Any Optional List Dict"))
    mcns["IntEnum"], mcns["auto"] = __import__("enum").IntEnum, __import__("enum").auto
    mc_source.lift(mcns, "AttentionArch", "SWA_SINK_ARCHS", "MIMO_V2_MODEL_ARCHS")
    sinks = mc_source.lift_method(mcns, "ModelConfig", "_detect_attention_sinks")

    class ModelConfig:
        @staticmethod
        def from_server_args(server_args: Any, **kw: Any) -> Any:
            if kw:
                raise StubError(f"sglang_oracle.resolve: ModelConfig.from_server_args({kw}) is not provided")
            return active_model[0]

    b.provide("configs.model_config", {"ModelConfig": ModelConfig, "AttentionArch": mcns["AttentionArch"],
                                       "is_deepseek_dsa": lambda hf: hf.dsa_kpool is not None,
                                       "get_dsa_index_kpool": lambda hf: hf.dsa_kpool,
                                       "unwrap_modelopt_quantization_config": Poison("unwrap_modelopt")})  # fmt: skip
    base = b.execute("arg_groups.model_override_base")
    names = {**pick(vars(typing), "Any Callable Dict List Optional Sequence Tuple"),
             **{k: v for k, v in base.items() if not k.startswith("__")}}
    names.update(
        logger=logging.getLogger("sglang_oracle.resolve"), envs=_Envs(), get_context=no_context,
        get_platform=lambda: HOPPER, is_record=utils["is_record"], field_names=utils["field_names"],
        resolvable_fields=utils["resolvable_fields"],
        model_override_base=StrictNamespace("model_override_base", **{
            k: base[k] for k in ("MODEL_OVERRIDES", "_MODEL_OVERRIDE_FNS", "_PREDICATE_OVERRIDE_FNS")}),
        torch=StrictNamespace("torch", cuda=StrictNamespace("torch.cuda", get_device_capability=lambda *a: (9, 0))),
    )  # fmt: skip
    ov = b.namespace("arg_groups.overrides", **names)
    ov["__builtins__"] = {**b.builtins, "__import__": _torch_aware(b.importer, ov["torch"])}
    b.source("arg_groups/overrides.py").lift(ov, *_LIFTED)
    b.provide("arg_groups.overrides", {k: v for k, v in ov.items() if not k.startswith("__")})
    return b, ov, base, (mcns["AttentionArch"], sinks)


def _mamba_hook(b: Builder, ov: dict[str, Any]) -> Callable[[Any, Any], None]:
    """``model_hook.handle_mamba_radix_cache`` (lifted) over ``overrides.py``'s pass and
    ``mamba_hook.py``'s validators (lifted); the linear-attention registry as
    ``configs/linear_attn_model_registry.py`` defines it, empty (only ``configs/gigachat35.py``
    registers a spec at import, for an architecture not tested here). The FLA kernels' module
    (``kernels/ops/attention/fla/chunk_delta_h.py``, Triton code) is not executed: its
    ``CHUNK_SIZE``, the one name ``mamba_cache_chunk_size`` imports, is read from its source."""
    source = (b.root / "sglang/kernels/ops/attention/fla/chunk_delta_h.py").read_text()
    chunk = [ast.literal_eval(n.value) for n in ast.parse(source).body if isinstance(n, ast.Assign)
             and [getattr(t, "id", None) for t in n.targets] == ["CHUNK_SIZE"]]  # fmt: skip
    assert len(chunk) == 1, chunk
    b.modules["sglang.kernels.ops.attention.fla.chunk_delta_h"] = StrictModule(
        "sglang.kernels.ops.attention.fla.chunk_delta_h", {"CHUNK_SIZE": chunk[0]})
    reg = b.namespace("configs.linear_attn_model_registry", _LINEAR_ATTN_MODEL_REGISTRY=[],
                      logger=logging.getLogger("sglang_oracle.resolve"), **pick(vars(typing), "Any Optional"))
    b.source("configs/linear_attn_model_registry.py").lift(
        reg, "get_linear_attn_spec_by_arch", "get_linear_attn_config", "get_linear_attn_spec")
    b.provide("configs.linear_attn_model_registry", pick(reg, "get_linear_attn_spec"))
    mh = b.namespace("arg_groups.mamba_hook", logger=logging.getLogger("sglang_oracle.resolve"),
                     supports_mamba_cache_extra_buffer=ov["supports_mamba_cache_extra_buffer"],
                     current_platform=StrictNamespace("current_platform", is_out_of_tree=lambda: False),
                     get_platform=lambda: HOPPER)  # fmt: skip
    b.source("arg_groups/mamba_hook.py").lift(mh, "_platform_supports_mamba_cache_extra_buffer",
                                              "validate_mamba_extra_buffer", "validate_mamba_no_buffer")
    b.provide("arg_groups.mamba_hook", pick(mh, "validate_mamba_extra_buffer validate_mamba_no_buffer"))
    hook = b.namespace("arg_groups.model_hook", **pick(ov, "run_post_process_pass resolved_view mamba_extra_buffer_of "
                                                           "mamba_cache_chunk_size _mamba_radix_cache_resolution"))
    b.source("arg_groups/model_hook.py").lift(hook, "handle_mamba_radix_cache")
    fn: Callable[[Any, Any], None] = hook["handle_mamba_radix_cache"]
    return fn


def _torch_aware(importer: Callable[..., Any], torch: Any) -> Callable[..., Any]:
    def imp(name: str, *args: Any, **kwargs: Any) -> Any:
        return torch if name == "torch" else importer(name, *args, **kwargs)

    return imp


def load(root: Path) -> Callable[[Sequence[str], Mapping[str, Any]], dict[str, Any] | tuple[str, str]]:
    """``resolve(flags, model) -> resolved values | ("error", message)``; ``model`` holds
    ``architectures``, ``mla``, ``hybrid_swa`` and ``dsa_kpool`` (None: not DSA), from
    SGLang's model resolution, and ``text_config``, the checkpoint's text config
    (``ModelConfig._detect_attention_sinks`` reads its sink flags)."""
    for name in ("sglang_oracle.sandbox", "sglang_oracle.resolve"):  # SGLang's warnings, by the thousand
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    parse = launch.load(root, launch.RESOLUTION_NAMESPACES)
    active: list[Any] = [None]
    b, ov, base, (arch, sinks) = _builder(root, active)
    b.provide("hardware_backend.mlx.runtime", {"use_mlx": Poison("use_mlx")})
    b.provide("layers.attention.dsa.utils", {"aiter_can_use_preshuffle_paged_mqa": Poison("aiter_preshuffle")})
    # Runtime facts of a CUDA host: not a CPU; the triton_kernels MoE package absent (gpt-oss's MoE
    # runner choice, which no pool reads).
    b.provide("utils.common", {"is_cpu": lambda: False, "is_triton_kernels_available": lambda: False,
                               **{n: Poison(n) for n in ("get_nvidia_driver_version", "get_quantization_config")}})
    for module in OVERRIDE_MODULES:
        b.execute(f"arg_groups.model_overrides.{module}")
    pd = b.execute("arg_groups.pd_disaggregation_hook")
    spec_algo = _speculative(b)
    b.provide("speculative.spec_registry", {"CustomSpecAlgo": poison_class("CustomSpecAlgo")})
    b.provide("speculative.ragged_verify", {"read_ragged_verify_mode": lambda: None})
    b.provide("configs.iquest_q1", {"IQuestQ1MTPConfig": poison_class("IQuestQ1MTPConfig")})

    def get_config(path: str, **kwargs: Any) -> Any:
        archs = json.loads((Path(path) / "config.json").read_text()).get("architectures")
        return StrictNamespace(f"get_config({path})", architectures=archs)

    b.provide("utils.hf_transformers_utils", {"get_config": get_config})
    sh = b.execute("arg_groups.speculative_hook")  # spec_info's dispatch imports its _handle_* back
    assert spec_algo is not None and sh["handle_speculative_decoding"] is not None
    mamba_radix_cache = _mamba_hook(b, ov)

    def resolve(flags: Sequence[str], model: Mapping[str, Any]) -> dict[str, Any] | tuple[str, str]:
        archs = list(model["architectures"])
        config = model["config"]  # the keys the mamba radix-cache pass probes, where the checkpoint has them
        probed = {k: config[k] for k in ("layer_types", "mamba_chunk_size") if k in config}
        hf = StrictNamespace("hf_config", architectures=archs, dsa_kpool=model["dsa_kpool"], _absent=(
            "learnable_sink", "quantization_config", "layer_types", "mamba_chunk_size"), **probed)  # fmt: skip
        text = StrictNamespace("hf_text_config", _absent=("learnable_sink", "add_swa_attention_sink_bias",
                                                          "add_full_attention_sink_bias"), **{
            k: model["text_config"][k] for k in ("learnable_sink", "add_swa_attention_sink_bias",
                                                 "add_full_attention_sink_bias") if k in model["text_config"]})
        has_sinks = sinks(StrictNamespace("ModelConfig", hf_config=hf, hf_text_config=text))
        active[0] = ModelStandIn(
            "ModelConfig", hf_config=hf, attention_arch=arch.MLA if model["mla"] else arch.MHA,
            is_hybrid_swa=model["hybrid_swa"], is_multimodal=False, has_attention_sinks=has_sinks)  # fmt: skip
        record = Record(parse(flags))
        try:
            pd["handle_pd_disaggregation"](record)
            # handle_model_specific_adjustments opens with this declaration (uses_mamba_radix_cache
            # has no flag: it is on the record only through resolution).
            ov["declare_resolution"](record, "_handle_model_specific_adjustments", uses_mamba_radix_cache=False)
            record._resolved_overrides.extend(ov["collect_model_override_declarations"](archs[0], record, hf))
            if model["dsa_kpool"] is not None:
                ov["run_post_process_pass"](record, ov["_dsa_kv_cache_dtype_default"])
            mamba_radix_cache(record, hf)  # the end of handle_model_specific_adjustments
            for fn in ("_attention_backend_default", "_mla_backend_page_constraints",
                       "_attention_backend_fa3_fp8_fallback", "_fa4_page_constraint", "_page_size_default"):
                ov["run_post_process_pass"](record, ov[fn])
            sh["handle_speculative_decoding"](record)
        except (StubError, NameError):
            raise
        except Exception as exc:  # noqa: BLE001 - SGLang's refusal is an outcome
            return ("error", f"{type(exc).__name__}: {exc}")
        view = base["resolved_view"](record)
        return {name: getattr(view, name) for name in object.__getattribute__(record, "_values")}

    return resolve


__all__ = ["ENVS", "HOPPER", "OVERRIDE_MODULES", "Record", "load", "registering_modules"]
