"""Oracle: vLLM 0.33.0's real KV-cache planning code, run on CPU.

``load()`` verifies and reads vLLM's released files from the PyPI wheel
(``tools/fetch_vllm.py``; nothing of vLLM lives in this repository), executes
the planning modules in a sandbox (:mod:`._sandbox` says what is executed
whole, what is lifted with ``ast`` and what is stubbed, and why;
:mod:`._configs` does the same for the config objects) and returns a
:class:`VllmOracle`.

``VllmOracle.plan(layers, available_bytes, engine)`` follows the engine
core's ``_initialize_kv_caches`` (VLLM.md section 1), calling vLLM's own
functions in its order:

1. ``register_all_kvcache_specs(vllm_config)`` (the spec-type registry);
2. one spec per layer per worker, built with vLLM's own spec classes
   (``FullAttentionSpec``, ``SlidingWindowSpec``, ``ChunkedLocalAttentionSpec``,
   ``MLAAttentionSpec``, ``CircularBufferSpec``, ...) and the keyword arguments vLLM's
   attention layers pass (``Attention.get_kv_cache_spec`` and friends: dtype from
   ``get_kv_cache_torch_dtype``, ``kv_quant_mode`` from ``get_kv_quant_mode``, and a
   compressed cache's ``tokens_per_state``);
   drafter layers are ``replace(spec, is_draft=True)``, as the worker does;
3. ``get_global_kv_cache_groups`` -> ``get_kv_cache_configs`` ->
   ``generate_scheduler_kv_cache_config`` -> ``update_kv_cache_capacity`` ->
   ``resolve_kv_cache_block_sizes`` (the scheduler's block sizes: run for its checks, its two
   info lines on the groups' block sizes left out of the log, which ends with the capacity line).

The engine-side glue restated here (not vLLM text): the KV layout is taken as
an input (``kv_cache_layout``, default ``LBNHC``: what ``resolve_kv_cache_layout``
picks for FLASH_ATTN, which declares no set); the scheduler's
``cache_config.block_size`` is the minimum over prefix-cacheable groups; the
backend's ``customize_spec`` and window-block choice are the FLASH_ATTN
defaults (no packing, the primary block size, no stride alignment), so a
layer's ``block_size`` is an input defaulting to the engine's.

Inputs
======

``layers``: dicts in registration order (drafter layers last), keys ``name``,
``kind`` (full | sliding | chunked | cross | mla | mla_indexer | key_indexer |
circular_buffer | mamba), ``num_kv_heads`` (per rank),
``head_size``, ``head_size_v`` (optional), ``kv_cache_dtype`` ("auto", "fp8",
"fp8_per_token_head", "nvfp4", ...), ``model_dtype`` (default "bfloat16"),
``sliding_window`` / ``attention_chunk_size``, ``block_size`` (optional),
``tokens_per_state`` (optional: a compressed cache's tokens per stored state),
``is_draft`` (default False), ``pp_stage`` (default 0); the engine's
``draft_kv_cache_dtype`` replaces a drafter layer's ``kv_cache_dtype``.

``available_bytes``: one int for every worker, one per PP stage, or one per
worker (``pp * tp`` of them, stage-major): what each worker measured, which its
``determine_available_memory`` replaces by ``kv_cache_memory_bytes`` when that is
set (:mod:`._worker`). ``engine``: see :data:`._configs.ENGINE_DEFAULTS`.

The result is a plain dict (see :meth:`VllmOracle.plan`). A planning error
(vLLM's ``ValueError`` / ``NotImplementedError`` / ``AssertionError``) becomes
``{"ok": False, "error_type", "error", "estimated_max_model_len"}``; a
:class:`~._strict.StubError` (the sandbox was asked for something it does not
provide) always propagates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._configs import ENGINE_DEFAULTS, make_vllm_config
from ._mamba import model_fields
from ._fetch import vllm_root
from ._sandbox import Sandbox, build
from ._strict import StubError

__all__ = ["StubError", "VllmOracle", "load"]

_ESTIMATE = re.compile(r"the estimated maximum model length is (\d+)\.")
_DS_MLA_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}  # mla_attention.py's table


class VllmOracle:
    """vLLM 0.33.0's planner over plain per-layer inputs."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sb = sandbox
        self.iface = sandbox.interface
        self.planning = sandbox.planning

    def layer_spec(self, layer: dict[str, Any], engine_block_size: int, draft_dtype: str | None = None,
                   state: Any = None, config: Any = None) -> Any:  # fmt: skip
        """vLLM's spec object for one layer (on one worker). A drafter layer takes
        ``draft_dtype`` when set: the drafter's layers are built with a cache config whose
        ``cache_dtype`` is ``speculative_config.kv_cache_dtype`` (``llm_base_proposer``).
        A state layer's spec is its layer object's ``get_kv_cache_spec(config)`` (``state``)."""
        i = self.iface
        kind = layer.get("kind", "full")
        if kind == "mamba":
            spec = state.get_kv_cache_spec(config)
            return replace(spec, is_draft=True) if layer.get("is_draft") else spec
        cache_dtype = layer.get("kv_cache_dtype", "auto")
        if draft_dtype is not None and layer.get("is_draft"):
            cache_dtype = draft_dtype
        dtype = self.sb.get_kv_cache_torch_dtype(cache_dtype, layer.get("model_dtype", "bfloat16"))
        mode = i["get_kv_quant_mode"](cache_dtype)
        bs = layer.get("block_size", engine_block_size)
        common: dict[str, Any] = {
            "block_size": bs,
            "num_kv_heads": layer["num_kv_heads"],
            "head_size": layer["head_size"],
            "dtype": dtype,
            "kv_quant_mode": mode,
        }
        if "tokens_per_state" in layer:  # a compressed cache (QSA's, DeepSeek-V4's, GLM-5-Next's)
            common["tokens_per_state"] = layer["tokens_per_state"]
        hv = layer.get("head_size_v", layer["head_size"])
        if kind == "full":
            spec = i["FullAttentionSpec"](**common, head_size_v=hv)
        elif kind == "sliding":
            spec = i["SlidingWindowSpec"](
                **common,
                head_size_v=hv,
                sliding_window=layer["sliding_window"],
                page_size_padded=None,
            )
        elif kind == "cross":
            spec = i["CrossAttentionSpec"](**common, head_size_v=hv)
        elif kind == "circular_buffer":
            # QSAKeyStateCache / Glm5NextTailCache / the DeepSeek-V4.1 compressor: a ring of
            # block_size rows (QSA's and the compressor's: one head, no V part).
            spec = i["CircularBufferSpec"](**common, head_size_v=hv)
        elif kind == "chunked":
            spec = i["ChunkedLocalAttentionSpec"](
                **common, attention_chunk_size=layer["attention_chunk_size"]
            )
        elif kind == "mla":
            common.update(
                num_kv_heads=1,
                max_tp_shards=1,
                cache_dtype_str=cache_dtype,
                state_content_bytes=_DS_MLA_BYTES.get(cache_dtype),
            )
            spec = i["MLAAttentionSpec"](**common)
        elif kind in ("mla_indexer", "key_indexer"):
            # DeepseekV32IndexerCache.get_kv_cache_spec (mla_indexer: max_tp_shards=1) and
            # MiniMaxM3IndexerCache's (key_indexer: no cap): one head of the cache's own dtype
            # (DeepSeek's uint8, MiniMax-M3's bf16 or e4m3), whatever the KV dtype, the INDEXER role.
            import torch

            common.update(num_kv_heads=1, dtype=getattr(torch, layer.get("indexer_dtype", "uint8")),
                          kv_quant_mode=i["KVQuantMode"].NONE)  # fmt: skip
            if kind == "mla_indexer":
                common["max_tp_shards"] = 1
            spec = i["MLAAttentionSpec"](**common, cache_role=i["SparseCacheRole"].INDEXER)
        else:
            raise ValueError(f"layer {layer.get('name')!r}: unknown kind {kind!r}")
        return replace(spec, is_draft=True) if layer.get("is_draft") else spec

    def worker_specs(
        self, layers: Sequence[dict[str, Any]], engine: dict[str, Any], config: Any = None,
        states: Sequence[Any] = (),
    ) -> list[dict[str, Any]]:
        """One ``{layer_name: spec}`` per worker (stage-major, TP ranks identical); the
        attention layers' block size is the config's (after any hybrid alignment)."""
        pp, tp = engine.get("pp", 1), engine.get("tp", 1)
        bs = config.cache_config.block_size if config is not None else engine.get("block_size", 16)
        by_name = {x.layer_name: x for x in states}
        stages: list[dict[str, Any]] = [{} for _ in range(pp)]
        for layer in layers:
            stage = layer.get("pp_stage", 0)
            if not 0 <= stage < pp:
                raise ValueError(f"layer {layer['name']!r}: pp_stage {stage} outside 0..{pp - 1}")
            if layer["name"] in stages[stage]:
                raise ValueError(f"duplicate layer name {layer['name']!r}")
            stages[stage][layer["name"]] = self.layer_spec(
                layer, bs, engine.get("draft_kv_cache_dtype"), by_name.get(layer["name"]), config
            )
        return [dict(s) for s in stages for _ in range(tp)]

    @staticmethod
    def _budgets(available: int | Sequence[int], pp: int, tp: int) -> list[int]:
        if isinstance(available, int):
            return [available] * (pp * tp)
        a = [int(x) for x in available]
        if len(a) == pp * tp:
            return a
        if len(a) == pp:
            return [x for x in a for _ in range(tp)]
        raise ValueError(f"{len(a)} budgets for pp={pp} x tp={tp} workers")

    def _group(self, group: Any, bytes_per_block: int | None = None) -> dict[str, Any]:
        """One group as plain data. With the worker's ``bytes_per_block``, also the
        bytes of every block this group leaves unused (``bytes_per_block`` minus its
        layers' pages, VLLM.md section 3.5) and, when that is a whole number of the
        group's pages, the padding layers it stands for (derived, not a vLLM field)."""
        spec = group.kv_cache_spec
        per_layer = self.planning["_get_per_layer_spec"]
        pages = sum(per_layer(group, n).page_size_bytes for n in group.layer_names)
        out = {
            "layers": list(group.layer_names),
            "spec": type(spec).__name__,
            "block_size": spec.block_size,
            "page_size_bytes": spec.page_size_bytes,
            "layer_pages_bytes": pages,
            "is_eagle_group": group.is_eagle_group,
        }
        if bytes_per_block is not None:
            unused = bytes_per_block - pages
            page = spec.page_size_bytes
            out["unused_bytes_per_block"] = unused
            out["padding_layers"] = unused // page if unused % page == 0 else None
        return out

    def tensor_spec(self, config: Any, tensor: Any) -> Any:
        """The spec ``allocate_kv_cache`` views ``tensor`` with (its first layer's group's;
        a uniform-type group's per-layer spec)."""
        name = tensor.layers[0]
        # Under PP a uniform group none of whose layers is on the worker keeps its whole spec,
        # whose layers ``get_kv_cache_config_from_groups`` still places.
        group = next(g for g in config.kv_cache_groups
                     if name in g.layer_names or name in getattr(g.kv_cache_spec, "kv_cache_specs", ()))  # fmt: skip
        return self.planning["_get_per_layer_spec"](group, name)

    def _tensor(self, config: Any, t: Any, layout: Any) -> dict[str, Any]:
        """One ``KVCacheTensor`` with its per-layer view as ``create_kv_cache_views`` makes
        it (no kernel block split): vLLM's ``compute_layer_kv_cache_shape_bytes`` and
        ``compute_layout_strides`` (bytes, ``[B, H, N, C]``) and ``spec.dtype``."""
        import torch

        i, spec = self.iface, self.tensor_spec(config, t)
        nb = config.num_blocks_of(t)
        strides = i["compute_layout_strides"](
            spec, nb, len(t.layers), layout, fixed_strides=(t.layer_stride, t.block_stride, None, None, None)
        )
        return {
            "size": t.size,
            "layers": list(t.layers),
            "layer_stride": t.layer_stride,
            "block_stride": t.block_stride,
            "offset": t.offset,
            "shape": list(i["compute_layer_kv_cache_shape_bytes"](spec, nb)),
            "strides": list(strides[1:]),
            # create_kv_cache_views keeps the int8 buffer for a spec without a dtype (MambaSpec).
            "dtype": str(getattr(spec, "dtype", None) or torch.int8).removeprefix("torch."),
        }

    def _configs(
        self, layers: Sequence[dict[str, Any]], available: int | Sequence[int],
        engine_settings: dict[str, Any] | None,
    ) -> tuple[Any, list[Any], list[Any]]:
        """The engine core's steps up to the per-worker ``KVCacheConfig`` s: the config,
        the global groups and one config per worker (vLLM's exceptions propagate)."""
        engine = dict(engine_settings or {})
        sb, p = self.sb, self.planning
        sb.log.clear()
        cfg = make_vllm_config(sb.configs, engine, model_fields(list(layers), sb.state.dtypes))
        pp, tp = cfg.parallel_config.pipeline_parallel_size, cfg.parallel_config.tensor_parallel_size
        budgets = [sb.available_memory(cfg, a) for a in self._budgets(available, pp, tp)]
        states = sb.state.configure(cfg, list(layers), {**ENGINE_DEFAULTS, **engine}["attention_kernel_block_size"])
        sb.register_all_kvcache_specs(cfg)
        specs = self.worker_specs(layers, engine, cfg, states)
        global_groups = p["get_global_kv_cache_groups"](cfg, specs)
        return cfg, global_groups, p["get_kv_cache_configs"](cfg, specs, budgets, global_groups)

    def allocate(
        self, layers: Sequence[dict[str, Any]], available: int | Sequence[int],
        engine_settings: dict[str, Any] | None = None, device: str = "meta",
    ) -> list[dict[str, Any]]:
        """Every worker's KV cache as vLLM's worker allocates it (``allocate_kv_cache``
        over that worker's ``KVCacheConfig``, FLASH_ATTN: no kernel block split):
        one ``{layer name: view}`` per worker. vLLM's exceptions propagate."""
        import torch

        cfg, _, configs = self._configs(layers, available, engine_settings)
        layout = cfg.cache_config.get_resolved_kv_cache_layout()
        return [self.sb.allocate_kv_cache(c, torch.device(device), layout) for c in configs]

    def plan(
        self,
        layers: Sequence[dict[str, Any]],
        available_bytes_per_worker: int | Sequence[int],
        engine_settings: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """vLLM's plan. Keys (``ok`` True): ``num_blocks``, ``max_model_len`` (after
        auto-fit), ``bytes_per_block`` / ``per_request_bytes`` / ``allocated_bytes``
        / ``tensors`` (one entry per worker), ``groups`` (global, vLLM's order),
        ``worker_groups`` (with ``unused_bytes_per_block`` / ``padding_layers``),
        ``blocks_per_request`` (per scheduler group),
        ``max_concurrency``, ``kv_cache_size_tokens``, ``kv_tp_replicas``,
        ``log`` / ``warnings`` (vLLM's formatted messages)."""
        sb, p = self.sb, self.planning
        try:
            cfg, global_groups, configs = self._configs(layers, available_bytes_per_worker, engine_settings)
        except StubError:
            raise
        except (ValueError, NotImplementedError, AssertionError, StopIteration) as e:
            # StopIteration: block-outer packing cutting an uneven state bucket into more groups
            # than it has repeats builds a spec of no layer (kvbudget refuses it by name).
            return self._failure(e)
        aligned_block = cfg.cache_config.block_size
        for c in configs:
            c.kv_cache_layout = cfg.cache_config.kv_cache_layout
        layout = cfg.cache_config.get_resolved_kv_cache_layout()
        u = sb.utils
        sched = u["generate_scheduler_kv_cache_config"](configs)
        cfg.cache_config.num_gpu_blocks = sched.num_blocks
        if sched.kv_cache_groups:
            part = [
                g.kv_cache_spec.block_size
                for g in sched.kv_cache_groups
                if g.kv_cache_spec.prefix_cacheable
            ]
            cfg.cache_config.block_size = min(
                part or [g.kv_cache_spec.block_size for g in sched.kv_cache_groups]
            )
            u["update_kv_cache_capacity"](cfg, sched)
        # The engine core's next step: the scheduler's and the hash block sizes, whose
        # checks can refuse the deployment (a compressed cache's prefix-cache alignment).
        logged = len(sb.log)
        try:
            u["resolve_kv_cache_block_sizes"](sched, cfg)
        except ValueError as e:
            del sb.log[logged:]
            return self._failure(e)
        del sb.log[logged:]
        # The workers' allocation, where a packed group none of whose layers is on a worker (its
        # whole uniform spec kept there) makes ``allocate_kv_cache`` fail: run it for those.
        for c in configs:
            if any(not g.layer_names and getattr(g.kv_cache_spec, "kv_cache_specs", None) for g in c.kv_cache_groups):
                import torch

                try:
                    self.sb.allocate_kv_cache(c, torch.device("meta"), layout)
                except StopIteration as e:
                    return self._failure(e)
        cdiv = sb.builder.modules["vllm.utils.math_utils"].cdiv
        builder = sb.builder.modules[
            "vllm.v1.core.kv_cache_config_builder"
        ].get_kv_cache_config_builder(cfg)
        return {
            "ok": True,
            "num_blocks": sched.num_blocks,
            "max_model_len": cfg.model_config.max_model_len,
            "bytes_per_block": [
                p["_pool_bytes_per_block"](cfg, c.kv_cache_groups) for c in configs
            ],
            "per_request_bytes": [
                p["_max_memory_usage_bytes_from_groups"](builder, cfg, c.kv_cache_groups)
                for c in configs
            ],
            "allocated_bytes": [sorted({t.size for t in c.kv_cache_tensors}) for c in configs],
            "tensors": [[self._tensor(c, t, layout) for t in c.kv_cache_tensors] for c in configs],
            "groups": [self._group(g) for g in global_groups],
            "worker_groups": [
                [
                    self._group(g, p["_pool_bytes_per_block"](cfg, c.kv_cache_groups))
                    for g in c.kv_cache_groups
                ]
                for c in configs
            ],
            "blocks_per_request": [
                cdiv(g.kv_cache_spec.max_memory_usage_bytes(cfg), g.kv_cache_spec.page_size_bytes)
                for g in sched.kv_cache_groups
            ],
            "max_concurrency": cfg.cache_config.kv_cache_max_concurrency,
            "kv_cache_size_tokens": cfg.cache_config.kv_cache_size_tokens,
            "kv_tp_replicas": configs[0].kv_tp_replicas,
            "cache_block_size": cfg.cache_config.block_size,
            "mamba": self._hybrid(cfg, layers, aligned_block),
            "log": list(sb.log),
            "warnings": [t for lvl, t in sb.log if lvl == "warning"],
        }


    def _failure(self, e: BaseException) -> dict[str, Any]:
        """vLLM's exception as the failure dict, with what it logged before."""
        m = _ESTIMATE.search(str(e))
        return {
            "ok": False,
            "error_type": type(e).__name__,
            "error": str(e),
            "estimated_max_model_len": int(m.group(1)) if m else None,
            "log": list(self.sb.log),
            "warnings": [t for lvl, t in self.sb.log if lvl == "warning"],
        }

    @staticmethod
    def _hybrid(cfg: Any, layers: Sequence[dict[str, Any]], block_size: int) -> dict[str, Any] | None:
        """The cache config's state-layer fields after vLLM's config steps (none without a
        state layer); ``block_size``: the attention block size they left (before the
        scheduler's write-back)."""
        if not any(x.get("kind") == "mamba" for x in layers):
            return None
        c = cfg.cache_config
        return {"mamba_cache_mode": c.mamba_cache_mode, "block_size": block_size,
                "mamba_block_size": c.mamba_block_size, "mamba_page_size_padded": c.mamba_page_size_padded}

def load(cache: Path | str | None = None) -> VllmOracle:
    """The oracle over the verified vLLM 0.33.0 files (fetched into the cache if needed)."""
    return VllmOracle(build(vllm_root(cache)))
