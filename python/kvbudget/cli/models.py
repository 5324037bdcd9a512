"""``kvbudget models``: the model presets (targets and drafts) and the GPUs."""

from __future__ import annotations

import argparse
from typing import Any

from kvbudget.cli import render
from kvbudget.cli.render import b


def _hybrid_rows() -> list[dict[str, Any]]:
    """The bundled hybrid-state models, read as SGLang 0.5.23 reads them (state and KV layers), or
    as vLLM 0.33.0 reads one SGLang does not serve."""
    from kvbudget import vllm
    from kvbudget.models.hybrid_state import get_hybrid_state_model, list_hybrid_state_models
    from kvbudget.sglang import resolve_sglang
    from kvbudget.sglang.state_model import state_from_hf_config
    from kvbudget.vllm.models import layers_from_hf_config

    rows = []
    for name in list_hybrid_state_models():
        m = get_hybrid_state_model(name)
        row: dict[str, Any] = {"name": m.name, "hf_id": m.hf_id, "engines": list(m.engines), "source": m.source,
                               "note": m.note}
        if "sglang" in m.engines:
            state = state_from_hf_config(m.config)
            assert state is not None, name
            row.update(mixer=state.mixer, state_layers=state.num_state_layers,
                       attention_layers=resolve_sglang(m.config).num_attention_layers)  # fmt: skip
        else:  # vLLM's Mamba-1 layers (a MambaSpec each)
            kinds = [x.kind for x in layers_from_hf_config(m.config, vllm.EngineConfig())]
            row.update(mixer="mamba", state_layers=kinds.count("mamba"),
                       attention_layers=len(kinds) - kinds.count("mamba"))  # fmt: skip
        rows.append(row)
    return rows


def _published_rows() -> list[dict[str, Any]]:
    """The bundled published attention models, with the KV layers SGLang 0.5.23 pools for each."""
    from kvbudget.models.published import get_published_model, list_published_models
    from kvbudget.sglang import resolve_sglang

    rows = []
    for name in list_published_models():
        m = get_published_model(name)
        sg = resolve_sglang(m.config)
        rows.append({"name": m.name, "hf_id": m.hf_id, "architecture": (m.config.get("architectures") or [""])[0],
                     "attention_layers": sg.num_attention_layers, "engines": list(m.engines), "source": m.source,
                     "note": m.note})  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    from kvbudget.models import GpuSpec, get_gpu, get_preset, list_gpus, list_presets

    presets = [get_preset(n) for n in list_presets()]
    gpus: list[GpuSpec] = [get_gpu(n) for n in list_gpus()]
    hybrid, published = _hybrid_rows(), _published_rows()
    if args.json:
        render.emit_json(
            {
                "presets": [
                    {
                        "name": p.name,
                        "display_name": p.display_name,
                        "role": p.role,
                        "draft_kind": p.draft_kind,
                        "targets": list(p.targets),
                        "hf_id": p.hf_id,
                        "kv_cache_dtype": p.kv_cache_dtype,
                        "full_layers": len(p.model_kwargs["full_attention_layer_ids"]),
                        "swa_layers": len(p.model_kwargs["swa_attention_layer_ids"]),
                        "draft_num_layers": p.draft_num_layers,
                        "source": p.source,
                    }
                    for p in presets
                ],
                "hybrid_state_models": hybrid,
                "published_models": published,
                "gpus": [
                    {
                        "name": g.name,
                        "vendor": g.vendor,
                        "model": g.model,
                        "memory_type": g.memory_type,
                        "stated_memory_gb": g.stated_memory_gb,
                        "memory_bytes": g.memory_bytes,
                        "bytes_basis": g.bytes_basis,
                        "source": g.source,
                    }
                    for g in gpus
                ],
            }
        )
        return 0

    tables: list[tuple[Any, int]] = []
    for role in ("target", "draft"):
        if role == "target":
            headers = ["name", "hf_id", "layers full+swa", "kv heads x dim"]
        else:
            headers = ["name", "hf_id", "kind", "layers", "for"]
        rows: list[list[str]] = []
        for p in presets:
            if p.role != role:
                continue
            kw = p.model_kwargs
            src = p.source.split(";")[0].strip()
            if role == "target":
                mla = kw.get("kv_lora_rank")
                heads = (
                    f"MLA {mla}+{kw['qk_rope_head_dim']}"
                    if mla
                    else f"{kw['num_kv_heads']} x {kw['head_dim']}"
                )
                layers = (
                    f"{len(kw['full_attention_layer_ids'])}+{len(kw['swa_attention_layer_ids'])}"
                )
                rows.append([p.name, p.hf_id or "-", layers, heads, src])
            else:
                rows.append(
                    [
                        p.name,
                        p.hf_id or "-",
                        p.draft_kind or "-",
                        str(p.draft_num_layers),
                        ", ".join(p.targets) or "-",
                        src,
                    ]
                )
        tables.append(
            render.fixed_table(f"{role} presets", headers, rows, "source (first; --json: all)")
        )
    tables.append(render.fixed_table(
        "hybrid-state models (config values bundled; SGLang mode plans the state pool first, vLLM mode its state "
        "layers in the one pool)",
        ["name", "hf_id", "state", "layers state/attention", "engines"],
        [[h["name"], h["hf_id"], h["mixer"], f"{h['state_layers']}/{h['attention_layers']}", ", ".join(h["engines"]),
          f"{h['source']['model_id']} {h['source']['file']}"] for h in hybrid], "source"))  # fmt: skip
    tables.append(render.fixed_table(
        "published models (config files bundled; planned as if the file were given, in either engine)",
        ["name", "hf_id", "architecture", "KV layers (SGLang)", "engines"],
        [[h["name"], h["hf_id"], h["architecture"], str(h["attention_layers"]), ", ".join(h["engines"]),
          f"{h['source']['model_id']} {h['source']['file']}"] for h in published], "source"))  # fmt: skip
    g_rows = [
        [
            g.name,
            f"{g.vendor} {g.model}",
            f"{g.stated_memory_gb} GB {g.memory_type}",
            b(g.memory_bytes),
            g.source,
        ]
        for g in gpus
    ]
    tables.append(
        render.fixed_table(
            "GPUs (vendor-stated memory)", ["name", "model", "memory", "bytes"], g_rows, "source"
        )
    )
    out = render.console(min_width=max(w for _, w in tables))
    for table, _ in tables:
        out.print(table)
    out.print(
        "  Drafts: --draft NAME (a draft preset), eagle3:N / mtp:N (N layers at the target's "
        "geometry), standalone:NAME (any preset as a standalone draft)."
    )
    return 0
