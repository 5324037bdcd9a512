"""``kvbudget.vllm.backend_block_size``: the block size vLLM 0.33.0's Hopper attention backends settle
on for a model's layers, or the refusal of a KV dtype they do not store (:mod:`kvbudget.vllm.backends`).

The restated tables are held to the wheel's own text: each backend's ``supported_kv_cache_dtypes``
and FLASHMLA's kernel block sizes (lifted from ``flash_attn.py``, ``mla/flashattn_mla.py`` and
``mla/flashmla.py``), MLA's head sizes (``MLACommonBackend``), the block size the platform prefers for
FLASHMLA (``AttentionBackend.get_preferred_block_size`` and ``supports_block_size``, executed) and the
Hopper priority lists (``platforms/cuda.py``'s ``_get_backend_priorities``, executed for sm90 with the
backend enum standing in as names). Then the rules themselves, a FLASHMLA plan, and the CLI.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import types
from typing import Any, NamedTuple

import pytest
from cli_helpers import run
from oracle_kit.lift import Source
from vllm_oracle._fetch import vllm_root

from kvbudget import vllm
from kvbudget.models import ConfigError
from kvbudget.vllm import EngineConfig, LayerSpec, backend_block_size
from kvbudget.vllm.backends import (FLASH_ATTN_KV_CACHE_DTYPES, FLASH_ATTN_MLA_KV_CACHE_DTYPES, FLASHMLA_BLOCK_SIZE,
                                    FLASHMLA_KV_CACHE_DTYPES, MLA_HEAD_SIZES)  # fmt: skip

_FLASHMLA = "v1/attention/backends/mla/flashmla.py"


def _source(rel: str) -> Source:
    return Source(vllm_root(), f"vllm/{rel}")


def _ns(name: str, **names: Any) -> dict[str, Any]:
    return {"__name__": f"test_vllm_backends_{name}", "CacheDType": str, "ClassVar": Any, **names}


def _supported(rel: str, cls: str) -> tuple[str, ...]:
    return tuple(_source(rel).lift_class_values(_ns("dtypes"), cls, "supported_kv_cache_dtypes")
                 ["supported_kv_cache_dtypes"])  # fmt: skip


def test_the_tables_are_the_backends_own() -> None:
    assert FLASH_ATTN_KV_CACHE_DTYPES == _supported("v1/attention/backends/flash_attn.py", "FlashAttentionBackend")
    assert FLASH_ATTN_MLA_KV_CACHE_DTYPES == _supported("v1/attention/backends/mla/flashattn_mla.py",
                                                        "FlashAttnMLABackend")  # fmt: skip
    assert FLASHMLA_KV_CACHE_DTYPES == _supported(_FLASHMLA, "FlashMLABackend")
    heads = _source("model_executor/layers/attention/mla_attention.py").lift_member(
        _ns("heads"), "MLACommonBackend", "get_supported_head_sizes")  # fmt: skip
    assert MLA_HEAD_SIZES == tuple(heads.__get__(None, type)())


def test_flashmla_makes_the_engine_block_its_kernel_block() -> None:
    """``update_block_size_for_backend`` with FLASHMLA alone: ``get_preferred_block_size(16)``."""
    ns = _ns("preferred", dataclass=dataclasses.dataclass)
    _source("v1/attention/backend.py").lift(ns, "MultipleOf")
    base = _source("v1/attention/backend.py").lift_class(ns, "AttentionBackend",
                                                         ["supports_block_size", "get_preferred_block_size"], [])
    kernel = _source(_FLASHMLA).lift_member(ns, "FlashMLABackend", "get_supported_kernel_block_sizes")
    flashmla = type("FlashMLABackend", (base,), {"get_supported_kernel_block_sizes": kernel})
    assert flashmla.get_supported_kernel_block_sizes() == [FLASHMLA_BLOCK_SIZE]
    assert flashmla.get_preferred_block_size(16) == FLASHMLA_BLOCK_SIZE
    assert not flashmla.supports_block_size(16) and not flashmla.supports_block_size(32)
    assert flashmla.supports_block_size(FLASHMLA_BLOCK_SIZE)


class _Capability(NamedTuple):
    major: int
    minor: int


class _Names:
    """``AttentionBackendEnum`` as the names of its members."""

    def __getattr__(self, name: str) -> str:
        return name


def _priorities(use_mla: bool, kv_cache_dtype: str) -> list[str]:
    """vLLM's ``_get_backend_priorities`` on Hopper (sm90), executed from the wheel's text."""

    def importer(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "vllm.v1.kv_cache_interface":  # its one local import; sm90 never calls it
            def unused(*_: Any) -> Any:
                raise AssertionError("is_quantized_kv_cache called on the sm90 path")

            return types.SimpleNamespace(is_quantized_kv_cache=unused)
        raise AssertionError(f"unexpected import {name}")

    ns = _ns("cuda", AttentionBackendEnum=_Names(), DeviceCapability=_Capability, cache=functools.cache,
             __builtins__={**vars(builtins), "__import__": importer})  # fmt: skip
    _source("platforms/cuda.py").lift(ns, "_get_backend_priorities")
    return list(ns["_get_backend_priorities"](use_mla, _Capability(9, 0), kv_cache_dtype=kv_cache_dtype))


def test_the_hopper_priorities() -> None:
    for dtype in ("auto", "fp8", "fp8_e5m2"):
        assert _priorities(False, dtype)[:3] == ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"]
        assert _priorities(True, dtype)[:4] == ["FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA"]


def _layer(kind: str, dtype: str, **kw: Any) -> LayerSpec:
    geometry = {"num_kv_heads": 1, "head_size": 576} if kind == "mla" else {"num_kv_heads": 8, "head_size": 128}
    return LayerSpec(name=f"model.layers.0.{kind}", kind=kind, kv_cache_dtype=dtype, **{**geometry, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", FLASH_ATTN_KV_CACHE_DTYPES)
def test_what_flash_attn_stores_keeps_the_engine_block(dtype: str) -> None:
    layers = [_layer("full", dtype), _layer("sliding", dtype, sliding_window=128), _layer("mla", "auto")]
    assert [backend_block_size(layers, EngineConfig(block_size=b)) for b in (16, 32)] == [16, 32]


@pytest.mark.parametrize(("kind", "dtype", "head", "next_backend"), [
    ("full", "fp8_e5m2", 128, "FLASHINFER"), ("sliding", "nvfp4", 128, "FLASHINFER"),
    ("full", "fp8_per_token_head", 128, "FLASHINFER"), ("mla", "nvfp4", 576, "FLASHINFER_MLA"),
    ("mla", "fp8", 288, "FLASHINFER_MLA"),
])  # fmt: skip
def test_a_dtype_another_backend_stores_is_refused(kind: str, dtype: str, head: int, next_backend: str) -> None:
    extra = {"sliding_window": 128} if kind == "sliding" else {}
    with pytest.raises(ConfigError, match=f"{dtype}.*moves on to {next_backend}"):
        backend_block_size([_layer("full", "auto"), _layer(kind, dtype, head_size=head, **extra)], EngineConfig())


@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3"])
def test_fp8_mla_takes_flashmla_blocks(dtype: str) -> None:
    """FP8 MLA: FLASHMLA, so the engine's block (an EAGLE head's full attention too) is 64 tokens;
    an engine block size FLASHMLA does not take, or state layers beside it, are refused."""
    layers = [_layer("mla", dtype), _layer("full", "auto", is_draft=True)]
    for block in (16, 64):
        assert backend_block_size(layers, EngineConfig(block_size=block)) == FLASHMLA_BLOCK_SIZE
    groups = vllm.plan(layers, 1 << 30, EngineConfig(block_size=FLASHMLA_BLOCK_SIZE)).groups
    assert {g.block_size for g in groups} == {FLASHMLA_BLOCK_SIZE}
    with pytest.raises(ConfigError, match="--block-size 32 precludes"):
        backend_block_size(layers, EngineConfig(block_size=32))
    state = LayerSpec(name="model.layers.1.mixer", kind="mamba", num_kv_heads=1, head_size=1,
                      state_shapes=((4, 8),), state_dtypes=("bfloat16",))  # fmt: skip
    with pytest.raises(ConfigError, match="beside state layers"):
        backend_block_size([*layers, state], EngineConfig())


def test_sparse_mla_readers_fix_their_own_backend() -> None:
    """A DSA model's latent cache (``fp8_ds_mla``) is its sparse backend's format, checked by its reader."""
    indexer = LayerSpec(name="model.layers.0.self_attn.indexer.k_cache", kind="mla_indexer", num_kv_heads=1,
                        head_size=132, block_size=64)  # fmt: skip
    dsa = [indexer, _layer("mla", "fp8_ds_mla", block_size=64)]
    assert backend_block_size(dsa, EngineConfig()) == 16  # its layers carry their own 64
    with pytest.raises(ConfigError, match="fp8_ds_mla"):
        backend_block_size([_layer("mla", "fp8_ds_mla")], EngineConfig())


def test_the_cli_plans_as_the_hopper_backends_do() -> None:
    for args in (("gpt-oss-120b", "--kv-dtype", "fp8_e5m2"), ("gpt-oss-120b", "--kv-dtype", "nvfp4"),
                 ("deepseek-v3", "--kv-dtype", "fp8_e4m3", "--block-size", "32")):  # fmt: skip
        r = run("plan", *args, "--engine", "vllm", "--tp", "8", "--available", "30GiB")
        assert r.returncode != 0 and "kvbudget does not model" in r.stderr, r.stderr
    fp8 = run("plan", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--kv-dtype", "fp8_e4m3", "--available", "30GiB")
    assert fp8.returncode == 0, fp8.stderr
    assert "vLLM 0.33.0: block 64," in fp8.stdout and "FLASHMLA" in fp8.stdout, fp8.stdout
