"""The vLLM 0.33.0 classes kvbudget reads with a module of their own, dispatched by architecture name.

:func:`kvbudget.vllm.layers_from_hf_config` looks a config's first architecture up in
:data:`NAMED_READERS` before it tries the multimodal wrappers and the family tables. Each entry is a
reader and whether drafters are refused here, before the reader runs (those readers never see
``engine.speculative_method``; the others check it themselves, at the point vLLM would). A new
class read by a module of its own is one entry below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from kvbudget.vllm.bailing_hybrid import BAILING_HYBRID_ARCHITECTURES, bailing_hybrid_layers
from kvbudget.vllm.beam import BEAM, beam_layers
from kvbudget.vllm.cohere_compass import COHERE_COMPASS, cohere_compass_layers
from kvbudget.vllm.cosmos3_edge import COSMOS3_EDGE, cosmos3_edge_layers
from kvbudget.vllm.deepseek_v4 import DEEPSEEK_V4, deepseek_v4_layers
from kvbudget.vllm.diffusion_gemma import DIFFUSION_GEMMA, diffusion_gemma_layers
from kvbudget.vllm.ernie45_vl import ERNIE45_VL, ernie45_vl_refusal
from kvbudget.vllm.gdn_wrappers import GDN_WRAPPERS, gdn_wrapper_layers
from kvbudget.vllm.glm5_next import GLM5_NEXT_ARCHITECTURES, glm5_next_layers
from kvbudget.vllm.hrm_text import HRM_TEXT, hrm_text_layers
from kvbudget.vllm.inkling import INKLING_ARCHITECTURES, inkling_layers
from kvbudget.vllm.iquest_loopcoder import IQUEST_LOOPCODER, iquest_loopcoder_layers
from kvbudget.vllm.kimi_k3 import KIMI_K3, kimi_k3_layers
from kvbudget.vllm.minimax_m3 import MINIMAX_M3, MINIMAX_M3_TEXT, minimax_m3_layers
from kvbudget.vllm.nemotron_nas import DECILM, nemotron_nas_layers
from kvbudget.vllm.planner import EngineConfig, LayerSpec
from kvbudget.vllm.qwen4_exp import QWEN4_EXP_ARCHITECTURES, qwen4_exp_layers
from kvbudget.vllm.step3_text import STEP3_TEXT, STEP3_VL, step3_layers
from kvbudget.vllm.step3p5 import STEP3P5, step3p5_layers

__all__ = ["NAMED_READERS", "NamedReader", "ReadOptions"]


@dataclass(frozen=True)
class ReadOptions:
    """The reading options of :func:`kvbudget.vllm.layers_from_hf_config` a reader may take."""

    #: ``--kv-cache-dtype`` for every layer.
    kv_cache_dtype: str
    #: What ``"auto"`` stores (the model dtype).
    model_dtype: str
    #: ``--disable-sliding-window``.
    disable_sliding_window: bool
    #: ``--mamba-cache-dtype``.
    mamba_cache_dtype: str
    #: ``--mamba-ssm-cache-dtype``.
    mamba_ssm_cache_dtype: str
    #: The gated delta nets' prefill backend (``"flashinfer"`` or ``"triton"``).
    gdn_prefill_backend: str


#: A reader: the layers vLLM registers for ``cfg`` under ``engine``, in order.
Reader = Callable[[Mapping[str, Any], EngineConfig, ReadOptions], list[LayerSpec]]


class _AttentionReader(Protocol):
    def __call__(self, cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                 disable_sliding_window: bool) -> list[LayerSpec]: ...  # fmt: skip


class _StateReader(Protocol):
    def __call__(self, cfg: Mapping[str, Any], engine: EngineConfig, *, kv_cache_dtype: str, model_dtype: str,
                 mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> list[LayerSpec]: ...  # fmt: skip


@dataclass(frozen=True)
class NamedReader:
    """One entry of :data:`NAMED_READERS`."""

    #: Reads the config.
    read: Reader
    #: Drafters are refused as unchecked before :attr:`read` runs.
    refuse_drafters: bool


def _attention(read: _AttentionReader, *, refuse_drafters: bool) -> NamedReader:
    """A reader of attention layers only (its options: the KV and model dtypes, the window switch)."""
    return NamedReader(lambda cfg, engine, o: read(cfg, engine, kv_cache_dtype=o.kv_cache_dtype,
                                                   model_dtype=o.model_dtype,
                                                   disable_sliding_window=o.disable_sliding_window),
                       refuse_drafters)  # fmt: skip


def _state(read: _StateReader) -> NamedReader:
    """A reader of attention and state layers (its options: the KV, model and state dtypes)."""
    return NamedReader(lambda cfg, engine, o: read(cfg, engine, kv_cache_dtype=o.kv_cache_dtype,
                                                   model_dtype=o.model_dtype, mamba_cache_dtype=o.mamba_cache_dtype,
                                                   mamba_ssm_cache_dtype=o.mamba_ssm_cache_dtype), False)  # fmt: skip


def _qwen4_exp(cfg: Mapping[str, Any], engine: EngineConfig, o: ReadOptions) -> list[LayerSpec]:
    return qwen4_exp_layers(cfg, engine, kv_cache_dtype=o.kv_cache_dtype, model_dtype=o.model_dtype,
                            mamba_cache_dtype=o.mamba_cache_dtype, mamba_ssm_cache_dtype=o.mamba_ssm_cache_dtype,
                            gdn_prefill_backend=o.gdn_prefill_backend)  # fmt: skip


def _gdn_wrapper(cfg: Mapping[str, Any], engine: EngineConfig, o: ReadOptions) -> list[LayerSpec]:
    return gdn_wrapper_layers(cfg, engine, kv_cache_dtype=o.kv_cache_dtype, model_dtype=o.model_dtype,
                              mamba_cache_dtype=o.mamba_cache_dtype, mamba_ssm_cache_dtype=o.mamba_ssm_cache_dtype,
                              gdn_prefill_backend=o.gdn_prefill_backend)  # fmt: skip


#: Architecture name -> its reader. Step3 (alone, or in Step3-VL / Step-VL), Cosmos3-Edge, Cohere
#: Compass, DiffusionGemma, MiniMax-M3 (wrapper and text model), Nemotron-NAS and IQuest-Coder-Loop
#: refuse drafters here; ERNIE-4.5-VL is refused as vLLM refuses it; Beam, Step-3.5, HRM-Text,
#: Kimi-K3, Ling 2.5 and 3, Inkling, Qwen4-Exp, GLM-5-Next and the gated-delta-net wrappers (MiniCPM-V 4.6 / 4.7,
#: Intern-S2 Mobius) check drafters themselves.
NAMED_READERS: Final[Mapping[str, NamedReader]] = {
    **dict.fromkeys((STEP3_TEXT, *STEP3_VL), _attention(step3_layers, refuse_drafters=True)),
    COSMOS3_EDGE: _attention(cosmos3_edge_layers, refuse_drafters=True),
    ERNIE45_VL: NamedReader(lambda cfg, engine, o: ernie45_vl_refusal(cfg, engine), False),
    COHERE_COMPASS: _attention(cohere_compass_layers, refuse_drafters=True),
    DIFFUSION_GEMMA: _attention(diffusion_gemma_layers, refuse_drafters=True),
    **dict.fromkeys(GDN_WRAPPERS, NamedReader(_gdn_wrapper, False)),
    BEAM: _attention(beam_layers, refuse_drafters=False),
    STEP3P5: _attention(step3p5_layers, refuse_drafters=False),
    HRM_TEXT: _attention(hrm_text_layers, refuse_drafters=False),
    KIMI_K3: _state(kimi_k3_layers),
    **dict.fromkeys(BAILING_HYBRID_ARCHITECTURES, _state(bailing_hybrid_layers)),
    **dict.fromkeys(INKLING_ARCHITECTURES, _attention(inkling_layers, refuse_drafters=False)),
    **dict.fromkeys((MINIMAX_M3, MINIMAX_M3_TEXT), _attention(minimax_m3_layers, refuse_drafters=True)),
    **dict.fromkeys(QWEN4_EXP_ARCHITECTURES, NamedReader(_qwen4_exp, False)),
    DEEPSEEK_V4: _attention(deepseek_v4_layers, refuse_drafters=False),  # read, then refused as not modelled
    **dict.fromkeys(GLM5_NEXT_ARCHITECTURES, _state(glm5_next_layers)),
    DECILM: _attention(nemotron_nas_layers, refuse_drafters=True),
    IQUEST_LOOPCODER: _attention(iquest_loopcoder_layers, refuse_drafters=True),
}
