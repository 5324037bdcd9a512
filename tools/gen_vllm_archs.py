#!/usr/bin/env python3
"""Write the architectures vLLM 0.33.0 generates text with, and the class each is served by.

vLLM's ``ModelRegistry`` serves an architecture with the ``(module, class)`` its
``_TEXT_GENERATION_MODELS`` or ``_MULTIMODAL_MODELS`` table gives
(``vllm/model_executor/models/registry.py``); several names share one class
(``InternLM3ForCausalLM`` and ``TeleChat3ForCausalLM`` are vLLM's ``LlamaForCausalLM``,
``CohereForCausalLM`` and ``Cohere2ForCausalLM`` one ``commandr`` class). kvbudget's vLLM
mode reads a model by the class vLLM builds, so it needs the table:
``python/kvbudget/models/data/vllm_architectures.json``, read from the RECORD-checked
extraction (``tools/fetch_vllm.py``). Usage: ``python tools/gen_vllm_archs.py [--check]``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "python" / "kvbudget" / "models" / "data" / "vllm_architectures.json"
TABLES = ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS")


def _root() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fetch_vllm import ensure_vllm

    root = ensure_vllm()
    assert isinstance(root, Path)
    return root


def registry(root: Path) -> dict[str, dict[str, list[str]]]:
    """Table name -> architecture -> [module, class], as the registry file writes them (literals)."""
    tree = ast.parse((root / "vllm/model_executor/models/registry.py").read_text(encoding="utf-8"))
    out: dict[str, dict[str, list[str]]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id in TABLES and node.value is not None:
            out[target.id] = {arch: list(where) for arch, where in ast.literal_eval(node.value).items()}
    missing = set(TABLES) - set(out)
    if missing:
        raise SystemExit(f"gen_vllm_archs: registry.py has no literal {sorted(missing)}")
    return out


def render(tables: dict[str, dict[str, list[str]]]) -> str:
    """JSON, one architecture a line."""
    lines = ['{"generated_by": "tools/gen_vllm_archs.py", "vllm": "0.33.0", "tables": {']
    for i, t in enumerate(TABLES):
        rows = [f"  {json.dumps(a)}: {json.dumps(w)}" for a, w in sorted(tables[t].items())]
        lines += [f" {json.dumps(t)}: {{", ",\n".join(rows), " }" + ("," if i < len(TABLES) - 1 else "")]
    return "\n".join(lines) + "\n}}\n"


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    return write_or_check(OUT, lambda: render(registry(_root())), tool="tools/gen_vllm_archs.py", doc=__doc__ or "", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
