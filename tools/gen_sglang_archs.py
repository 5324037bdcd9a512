#!/usr/bin/env python3
"""Write the architectures SGLang 0.5.23 has a model class for (``models/*.py`` ``EntryClass``).

SGLang's ``ModelRegistry`` serves an architecture with the class some
``sglang/srt/models/<module>.py`` lists in its ``EntryClass``; any other
architecture goes to its Transformers backend. kvbudget's SGLang-mode model
resolution refuses the latter (``kvbudget.sglang.model``), so it needs
the list: ``python/kvbudget/models/data/sglang_architectures.json``, read from
the RECORD-checked extraction (``tools/fetch_sglang.py``). Usage:
``python tools/gen_sglang_archs.py [--check]``.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "python" / "kvbudget" / "models" / "data" / "sglang_architectures.json"


def _root() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fetch_sglang import ensure_sglang

    return ensure_sglang()


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
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _generated import write_or_check

    return write_or_check(OUT, lambda: render(entry_classes(_root())), tool="tools/gen_sglang_archs.py", doc=__doc__ or "", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
