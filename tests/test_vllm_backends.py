"""``kvbudget.vllm.check_backends``: the KV dtypes that take vLLM 0.33.0 off the attention backends
kvbudget's vLLM mode plans for (:mod:`kvbudget.vllm.backends`).

The restated tables are held to the wheel's own text: each backend's ``supported_kv_cache_dtypes``
(lifted from ``flash_attn.py`` and ``mla/flashattn_mla.py``) and the Hopper priority lists
(``platforms/cuda.py``'s ``_get_backend_priorities``, executed for sm90 with the backend enum
standing in as names). Then the check itself, and the CLI refusing what vLLM would plan with
another backend.
"""

from __future__ import annotations

import builtins
import functools
import types
from typing import Any, NamedTuple

import pytest
from cli_helpers import run
from oracle_kit.lift import Source
from vllm_oracle._fetch import vllm_root

from kvbudget.models import ConfigError
from kvbudget.vllm import LayerSpec, check_backends
from kvbudget.vllm.backends import FLASH_ATTN_KV_CACHE_DTYPES, FLASH_ATTN_MLA_KV_CACHE_DTYPES


def _supported(rel: str, cls: str) -> tuple[str, ...]:
    ns = {"__name__": "test_vllm_backends_supported", "CacheDType": str, "ClassVar": Any}
    values = Source(vllm_root(), f"vllm/{rel}").lift_class_values(ns, cls, "supported_kv_cache_dtypes")
    return tuple(values["supported_kv_cache_dtypes"])


def test_the_tables_are_the_backends_own() -> None:
    assert FLASH_ATTN_KV_CACHE_DTYPES == _supported("v1/attention/backends/flash_attn.py", "FlashAttentionBackend")
    assert FLASH_ATTN_MLA_KV_CACHE_DTYPES == _supported("v1/attention/backends/mla/flashattn_mla.py",
                                                        "FlashAttnMLABackend")  # fmt: skip


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

    ns: dict[str, Any] = {"__name__": "test_vllm_backends_cuda", "AttentionBackendEnum": _Names(),
                          "DeviceCapability": _Capability, "CacheDType": str, "cache": functools.cache,
                          "__builtins__": {**vars(builtins), "__import__": importer}}  # fmt: skip
    Source(vllm_root(), "vllm/platforms/cuda.py").lift(ns, "_get_backend_priorities")
    return list(ns["_get_backend_priorities"](use_mla, _Capability(9, 0), kv_cache_dtype=kv_cache_dtype))


def test_flash_attn_and_flash_attn_mla_come_first_on_hopper() -> None:
    for dtype in ("auto", "fp8", "fp8_e5m2"):
        assert _priorities(False, dtype)[:2] == ["FLASH_ATTN", "FLASHINFER"]
        assert _priorities(True, dtype)[:2] == ["FLASH_ATTN_MLA", "FLASHMLA"]


def _layer(kind: str, dtype: str, **kw: Any) -> LayerSpec:
    geometry = {"num_kv_heads": 1, "head_size": 576} if kind == "mla" else {"num_kv_heads": 8, "head_size": 128}
    return LayerSpec(name=f"model.layers.0.{kind}", kind=kind, kv_cache_dtype=dtype, **{**geometry, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", FLASH_ATTN_KV_CACHE_DTYPES)
def test_what_flash_attn_stores_is_planned(dtype: str) -> None:
    check_backends([_layer("full", dtype), _layer("sliding", dtype, sliding_window=128)])


@pytest.mark.parametrize(("kind", "dtype", "next_backend"), [
    ("full", "fp8_e5m2", "FLASHINFER"), ("sliding", "nvfp4", "FLASHINFER"),
    ("full", "fp8_per_token_head", "FLASHINFER"), ("mla", "fp8", "FLASHMLA"), ("mla", "fp8_e4m3", "FLASHMLA"),
])  # fmt: skip
def test_a_dtype_another_backend_stores_is_refused(kind: str, dtype: str, next_backend: str) -> None:
    extra = {"sliding_window": 128} if kind == "sliding" else {}
    with pytest.raises(ConfigError, match=f"{dtype}.*moves on to {next_backend}"):
        check_backends([_layer("full", "auto"), _layer(kind, dtype, **extra)])


def test_sparse_mla_readers_fix_their_own_backend() -> None:
    """A DSA model's latent cache (``fp8_ds_mla``) is its sparse backend's format, checked by its reader."""
    indexer = LayerSpec(name="model.layers.0.self_attn.indexer.k_cache", kind="mla_indexer", num_kv_heads=1,
                        head_size=132)  # fmt: skip
    check_backends([indexer, _layer("mla", "fp8_ds_mla")])
    with pytest.raises(ConfigError, match="fp8_ds_mla"):
        check_backends([_layer("mla", "fp8_ds_mla")])


def test_the_cli_refuses_what_vllm_plans_with_another_backend() -> None:
    for args in (("gpt-oss-120b", "--kv-dtype", "fp8_e5m2"), ("gpt-oss-120b", "--kv-dtype", "nvfp4"),
                 ("deepseek-v3", "--kv-dtype", "fp8_e4m3")):  # fmt: skip
        r = run("plan", *args, "--engine", "vllm", "--tp", "8", "--available", "30GiB")
        assert r.returncode != 0 and "kvbudget does not model" in r.stderr, r.stderr
    ok = run("plan", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--available", "30GiB")
    assert ok.returncode == 0, ok.stderr
