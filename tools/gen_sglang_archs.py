#!/usr/bin/env python3
"""Write the architectures SGLang 0.5.23 has a model class for (``models/*.py`` ``EntryClass``).

SGLang's ``ModelRegistry`` serves an architecture with the class some
``sglang/srt/models/<module>.py`` lists in its ``EntryClass``; any other
architecture goes to its Transformers backend. kvbudget's SGLang-mode model
resolution refuses the latter (``kvbudget.models.sglang_model``), so it needs
the list: ``python/kvbudget/models/data/sglang_architectures.json``, read from
the RECORD-checked extraction (``tools/fetch_sglang.py``). Usage:
``python tools/gen_sglang_archs.py [--check]``.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "python" / "kvbudget" / "models" / "data" / "sglang_architectures.json"


def _root() -> Path:
    spec = importlib.util.spec_from_file_location("kvbudget_tools_fetch", REPO / "tools" / "fetch_sglang.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    root: Path = tool.ensure_sglang()
    return root


def entry_classes(root: Path) -> list[str]:
    """Every class name an ``EntryClass`` of ``sglang/srt/models/*.py`` lists."""
    names: set[str] = set()
    for path in sorted((root / "sglang/srt/models").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass"
                                                    for t in node.targets):  # fmt: skip
                elts = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                names |= {e.id for e in elts if isinstance(e, ast.Name)}
    return sorted(names)


def render(names: list[str]) -> str:
    doc = {"generated_by": "tools/gen_sglang_archs.py", "sglang": "0.5.23", "architectures": names}
    return json.dumps(doc, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = ap.parse_args(argv)
    text = render(entry_classes(_root()))
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("sglang_architectures.json is " + ("current" if same else "stale: run tools/gen_sglang_archs.py"))
        return 0 if same else 1
    OUT.write_text(text)
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
