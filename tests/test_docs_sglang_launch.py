"""docs/sglang_launch.md's table of launch flags, against ``FLAGS`` and SGLang's field declarations.

Every flag ``from_server_args`` reads has one row naming its aliases and the file
and class of ``sglang/srt/arg_groups/fields/`` that declare it (found in the
wheel with ``ast``), so the page cannot drift from the code or from SGLang.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kvbudget.sglang.launch import FLAGS
from sglang_oracle._fetch import sglang_root

DOC = Path(__file__).resolve().parents[1] / "docs" / "sglang_launch.md"


def _declared() -> dict[str, tuple[str, str]]:
    """SGLang's field name -> (fields file, class), from the wheel's declarations."""
    out = {}
    for path in sorted((sglang_root() / "sglang/srt/arg_groups/fields").glob("*.py")):
        for cls in ast.parse(path.read_text()).body:
            if isinstance(cls, ast.ClassDef):
                for node in cls.body:
                    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                        out[node.target.id] = (path.name, cls.name)
    return out


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[1].startswith("`") and cells[1] != "field":
            rows[cells[1].strip("`")] = cells
    return rows


def test_every_flag_has_its_row_with_sglangs_declaration() -> None:
    rows, declared = _rows(), _declared()
    assert set(rows) == {f.dest for f in FLAGS}
    for f in FLAGS:
        names = re.findall(r"`(--[a-z-]+)`", rows[f.dest][0])
        assert tuple(names) == f.names, f.dest
        file, cls = declared[f.dest]
        assert rows[f.dest][2] == f"`{file}` `{cls}`", f.dest
