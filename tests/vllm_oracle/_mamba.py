"""State (``mamba``) layers in the vLLM oracle: vLLM 0.33.0's own code for what a model with
recurrent state does before and while its KV-cache specs are built.

Lifted from the verified files and executed:

* ``MambaModelConfig.verify_and_update_config`` and
  ``HybridAttentionMambaModelConfig.verify_and_update_config``
  (``model_executor/models/config.py``): the Mamba cache mode against prefix
  caching, and the Mamba block size;
* ``Platform._align_hybrid_block_size`` (``platforms/interface.py``): the
  attention block size raised until an attention page holds a state page, the
  state page padded to it (its own imports answered by the sandbox);
* the layer classes' spec code, as classes holding only those members (so that
  their zero-argument ``super()`` reaches the lifted base):
  ``MambaBase.get_kv_cache_spec`` / ``is_kv_cache_tp_replicated`` /
  ``get_prefill_checkpoint_alignment`` and the module functions
  ``get_mamba_prefill_checkpoint_alignment`` / ``get_mamba_prefill_checkpoint_grid``
  (``layers/mamba/abstract.py``); ``MambaMixer2.get_kv_cache_spec``
  (``layers/mamba/mamba_mixer2.py``); ``QwenGatedDeltaNetAttention``'s
  ``get_kv_cache_spec``, ``get_prefill_checkpoint_alignment``,
  ``_exports_checkpoints`` and the ``__init__`` statement that sets
  ``_checkpoint_alignment`` (``layers/mamba/gdn/qwen_gdn_linear_attn.py``, with
  ``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT`` from ``v1/attention/backends/gdn_attn.py``);
  ``Qwen4ExpPLELayer``'s ``get_prefill_checkpoint_alignment`` and ``get_kv_cache_spec``
  (``models/qwen4_exp/nvidia/ple_layer.py``); ``Glm5NextLinearAttention.get_kv_cache_spec``
  (``models/glm5next/common/kda.py``, with ``kda_prefill_checkpoint_alignment`` from
  ``layers/mamba/kda_checkpoint.py``);
* ``MambaAttentionBackendEnum``'s members (``v1/attention/backends/registry.py``),
  as a plain ``Enum`` of the same names and values (its metaclass only improves
  error messages).

Restated glue (not vLLM text), as the oracle's inputs stand in for a model:

* a state layer's ``get_state_shape`` / ``get_state_dtype`` / ``mamba_type`` are its
  inputs (``state_shapes``, ``state_dtypes``, ``mamba_type``); its class follows
  ``prefill_checkpoint`` (``none``: ``MambaBase``; ``mamba2``: ``MambaMixer2``;
  ``flashinfer_gdn``: ``QwenGatedDeltaNetAttention`` with FlashInfer's prefill;
  ``ple_short_conv``: ``Qwen4ExpPLELayer``, its ``conv_state_len`` the state's rows less the
  speculative tokens; ``flashkda``: ``Glm5NextLinearAttention`` on FlashKDA's prefill);
  ``tp_replicated`` overrides ``is_kv_cache_tp_replicated``;
* ``get_layers_from_vllm_config(config, MambaBase)`` returns the plan's state layers;
* the model the platform reads: the first target attention layer (not a ring, not a
  compressed cache: else the first target non-state layer) gives
  ``get_num_kv_heads`` (1 for MLA), ``get_head_size``, ``use_mla``, the model
  dtype and ``cache_dtype``; ``ModelRegistry.resolve_model_cls`` gives a model
  class whose ``get_mamba_specs_from_config`` lists the target state layers' specs (their
  ``config_state_shapes`` where given: the model class's own shapes);
* the attention backend is FLASH_ATTN's CUDA default: ``customize_spec`` returns
  the spec, ``get_supported_kernel_block_sizes`` is ``[MultipleOf(k)]`` with ``k``
  the engine's ``attention_kernel_block_size``; ``_find_non_ssm_backends`` returns
  it when the model has an attention layer;
* ``set_current_vllm_config`` is a null context. The config step's own log (it
  names the architecture, not an input here) goes to a list of its own.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
import math
from dataclasses import replace
from typing import Any

from ._strict import RecordingLogger, StrictModule


def backend_enum(b: Any) -> type[enum.Enum]:
    """``MambaAttentionBackendEnum`` with the registry's member names and values."""
    src = b.source("v1/attention/backends/registry.py")
    node = next(n for n in src.tree.body if isinstance(n, ast.ClassDef) and n.name == "MambaAttentionBackendEnum")
    names = [t.id for i in node.body if isinstance(i, ast.Assign) for t in i.targets
             if isinstance(t, ast.Name) and t.id.isupper()]  # fmt: skip
    values = src.lift_class_values(b.namespace("v1.attention.backends.registry"), node.name, *names)
    return enum.Enum("MambaAttentionBackendEnum", values)  # type: ignore[return-value]


class StateCode:
    """The lifted code, and the glue that feeds it one plan's layers."""

    def __init__(self, b: Any, iface: dict[str, Any], torch_utils: dict[str, Any], multiple_of: type,
                 backends: type[enum.Enum]) -> None:  # fmt: skip
        self.iface, self.backends, self.multiple_of = iface, backends, multiple_of
        self.dtypes = torch_utils["STR_DTYPE_TO_TORCH_DTYPE"]
        self.config_log: list[tuple[str, str]] = []
        self._layers: list[Any] = []
        mamba_spec = iface["MambaSpec"]

        def get_layers_from_vllm_config(config: Any, cls: type) -> dict[str, Any]:
            return {x.layer_name: x for x in self._layers if isinstance(x, cls)}

        class Inputs:
            """A state layer's inputs (glue)."""

            def __init__(layer, spec: dict[str, Any], config: Any) -> None:
                layer.layer_name = spec["name"]
                layer._spec = spec
                layer.vllm_config = config

            def get_state_shape(layer) -> tuple[tuple[int, ...], ...]:
                return tuple(tuple(s) for s in layer._spec["state_shapes"])

            def get_state_dtype(layer) -> tuple[Any, ...]:
                return tuple(self.dtypes[d] for d in layer._spec["state_dtypes"])

            @property
            def mamba_type(layer) -> Any:
                return backends[layer._spec.get("mamba_type", "mamba2").upper()]

        abstract = b.source("model_executor/layers/mamba/abstract.py")
        ns = b.namespace("model_executor.layers.mamba.abstract", Inputs=Inputs, MambaSpec=mamba_spec, lcm=math.lcm,
                         get_layers_from_vllm_config=get_layers_from_vllm_config)  # fmt: skip
        self.base = abstract.lift_class(
            ns, "MambaBase", ["is_kv_cache_tp_replicated", "get_prefill_checkpoint_alignment", "get_kv_cache_spec"],
            ["Inputs"])  # fmt: skip
        ns["MambaBase"] = self.base
        abstract.lift(ns, "get_mamba_prefill_checkpoint_alignment", "get_mamba_prefill_checkpoint_grid")
        self.checkpoint_alignment = ns["get_mamba_prefill_checkpoint_alignment"]

        m2 = b.namespace("model_executor.layers.mamba.mamba_mixer2", MambaBase=self.base, MambaSpec=mamba_spec,
                         replace=replace)  # fmt: skip
        self.mamba2 = b.source("model_executor/layers/mamba/mamba_mixer2.py").lift_class(
            m2, "MambaMixer2", ["get_kv_cache_spec"], ["MambaBase"])
        gdn_attn = b.lift("v1/attention/backends/gdn_attn.py", "FLASHINFER_GDN_CHECKPOINT_ALIGNMENT")
        qwen = b.source("model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py")
        qns = b.namespace("model_executor.layers.mamba.gdn.qwen_gdn_linear_attn", MambaBase=self.base,
                          MambaSpec=mamba_spec, replace=replace, functools=functools,
                          get_mamba_prefill_checkpoint_grid=ns["get_mamba_prefill_checkpoint_grid"],
                          get_mamba_prefill_checkpoint_alignment=self.checkpoint_alignment,
                          FLASHINFER_GDN_CHECKPOINT_ALIGNMENT=gdn_attn["FLASHINFER_GDN_CHECKPOINT_ALIGNMENT"],
                          MambaPrefillCheckpointExporter=lambda **kw: None)  # fmt: skip
        cls = "QwenGatedDeltaNetAttention"
        self.qwen_gdn = qwen.lift_class(
            qns, cls, ["get_prefill_checkpoint_alignment", "get_kv_cache_spec", "_exports_checkpoints"], ["MambaBase"])
        self.qwen_init = qwen.lift_statements(qns, cls, "__init__", "_checkpoint_alignment")
        ple = b.source("models/qwen4_exp/nvidia/ple_layer.py")
        pns = b.namespace("models.qwen4_exp.nvidia.ple_layer", MambaBase=self.base, MambaSpec=mamba_spec,
                          replace=replace, get_mamba_prefill_checkpoint_grid=ns["get_mamba_prefill_checkpoint_grid"],
                          get_mamba_prefill_checkpoint_alignment=self.checkpoint_alignment)  # fmt: skip
        kda_align = b.lift("model_executor/layers/mamba/kda_checkpoint.py", "kda_prefill_checkpoint_alignment")
        kns = b.namespace("models.glm5next.common.kda", MambaBase=self.base, MambaSpec=mamba_spec, replace=replace,
                          kda_prefill_checkpoint_alignment=kda_align["kda_prefill_checkpoint_alignment"])  # fmt: skip
        self.kda = b.source("models/glm5next/common/kda.py").lift_class(
            kns, "Glm5NextLinearAttention", ["get_kv_cache_spec"], ["MambaBase"])  # fmt: skip
        self.ple = ple.lift_class(pns, "Qwen4ExpPLELayer", ["get_prefill_checkpoint_alignment", "get_kv_cache_spec"],
                                  ["MambaBase"])  # fmt: skip

        models = b.source("model_executor/models/config.py")
        cns = b.namespace("model_executor.models.config",
                          logger=RecordingLogger("vllm.model_executor.models.config", self.config_log))  # fmt: skip
        mamba_cfg = type("MambaModelConfig", (), {
            "verify_and_update_config": models.lift_member(cns, "MambaModelConfig", "verify_and_update_config")})
        cns["MambaModelConfig"] = mamba_cfg
        hybrid_cfg = type("HybridAttentionMambaModelConfig", (), {"verify_and_update_config": models.lift_member(
            cns, "HybridAttentionMambaModelConfig", "verify_and_update_config")})  # fmt: skip
        self.verify = {False: mamba_cfg.verify_and_update_config, True: hybrid_cfg.verify_and_update_config}

        b.provide("vllm.config.vllm", {"set_current_vllm_config": lambda config: contextlib.nullcontext()})
        b.provide("vllm.model_executor.layers.mamba.abstract",
                  {"get_mamba_prefill_checkpoint_alignment": self.checkpoint_alignment})  # fmt: skip
        self._model_cls: Any = None
        b.provide("vllm.model_executor.models", {"ModelRegistry": StrictModule("ModelRegistry", {
            "resolve_model_cls": lambda arch, model_config: (self._model_cls, arch)})})  # fmt: skip
        plat = b.source("platforms/interface.py")
        pns = b.namespace("platforms.interface", logger=RecordingLogger("vllm.platforms.interface", b.log))
        self._backends: list[Any] = []
        self.platform = type("Platform", (), {
            "_align_hybrid_block_size": plat.lift_member(pns, "Platform", "_align_hybrid_block_size"),
            "_find_non_ssm_backends": classmethod(lambda cls, config: list(self._backends))})  # fmt: skip

    def layer(self, spec: dict[str, Any], config: Any) -> Any:
        """The state layer object of ``spec`` (its class by ``prefill_checkpoint``)."""
        kind = spec.get("prefill_checkpoint", "none")
        cls = {"none": self.base, "mamba2": self.mamba2, "flashinfer_gdn": self.qwen_gdn,
               "ple_short_conv": self.ple, "flashkda": self.kda}[kind]  # fmt: skip
        if spec.get("tp_replicated"):
            cls = type(cls.__name__, (cls,), {"is_kv_cache_tp_replicated": property(lambda s: True)})
        obj = cls(spec, config)
        if kind == "flashinfer_gdn":
            obj.gdn_prefill_backend = "flashinfer"
            obj.conv_kernel_size = 4  # read only by the exporter stand-in
            self.qwen_init(obj, None, config)
        if kind == "flashkda":  # Glm5NextLinearAttention on FlashKDA's prefill
            obj.kda_prefill_backend = "flashkda"
        if kind == "ple_short_conv":  # its conv rows, without the speculative ones
            obj.cache_config = config.cache_config
            obj.conv_state_len = spec["state_shapes"][0][0] - (config.num_speculative_tokens or 0)
        return obj

    def configure(self, config: Any, layers: list[dict[str, Any]], kernel_block: int) -> list[Any]:
        """vLLM's config steps for a model with state layers (none: nothing); returns the
        state layer objects, in order."""
        states = [x for x in layers if x.get("kind") == "mamba"]
        attention = [x for x in layers if x.get("kind", "full") != "mamba"]
        self._layers = []
        if not states:
            return []
        hybrid = bool(attention)
        self.verify[hybrid](config)
        self._layers = [self.layer(x, config) for x in states]
        if not hybrid:
            return self._layers
        target = [(o, x) for o, x in zip(self._layers, states) if not x.get("is_draft")]
        mamba_spec = self.iface["MambaSpec"]
        self._model_cls = type("Model", (), {"get_mamba_specs_from_config": staticmethod(lambda config: [
            mamba_spec(shapes=tuple(map(tuple, x.get("config_state_shapes") or ())) or o.get_state_shape(),
                       dtypes=o.get_state_dtype(), block_size=-1) for o, x in target])})  # fmt: skip
        multiple_of = self.multiple_of
        backend = type("FlashAttentionBackend", (), {
            "customize_spec": staticmethod(lambda spec: spec),
            "get_supported_kernel_block_sizes": staticmethod(lambda: [multiple_of(kernel_block)]),
            "get_name": staticmethod(lambda: "FLASH_ATTN")})  # fmt: skip
        self._backends = [backend]
        self.platform._align_hybrid_block_size(config, backend)
        return self._layers


def model_fields(layers: list[dict[str, Any]], dtypes: dict[str, Any]) -> dict[str, Any]:
    """The model-config fields the state steps read, from the first target attention layer that is
    neither a ring nor a compressed cache (QSA's and GLM-5-Next's side caches register before
    their layer's own attention), else the first target non-state layer (glue; the ``dtype`` a
    cache dtype of ``auto`` stores)."""
    attention = [x for x in layers if x.get("kind", "full") != "mamba"]
    target = [x for x in attention if not x.get("is_draft")]
    main = [x for x in target if x.get("kind") != "circular_buffer" and x.get("tokens_per_state", 1) == 1]
    ref = next(iter(main or target or attention), {})
    mla = ref.get("kind") == "mla"
    heads = 1 if mla else ref.get("num_kv_heads", 1)
    return {
        "dtype": dtypes[ref.get("model_dtype", "bfloat16")],
        "use_mla": mla,
        "architecture": "KvbudgetHybridForCausalLM",
        "get_num_kv_heads": lambda parallel_config: heads,
        "get_head_size": lambda: ref.get("head_size", 0),
        "cache_dtype": ref.get("kv_cache_dtype", "auto"),
    }
