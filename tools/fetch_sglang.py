#!/usr/bin/env python3
"""Fetch and verify the SGLang source files the parity oracle executes.

The oracle (``tests/sglang_oracle``) runs SGLang's *released* pool-sizing code,
read from the PyPI wheel at test time; no SGLang source is ever committed to
this repository. This tool:

1. finds ``sglang-<SGLANG_VERSION>-*.whl`` in ``<cache>/wheels``, or runs
   ``python -m pip download --no-deps sglang==<SGLANG_VERSION> -d <cache>/wheels``;
2. checks every file it extracts against the wheel's
   ``sglang-<version>.dist-info/RECORD`` (sha256, urlsafe base64 without
   padding, and size) and against the digests pinned in :data:`PINNED_SHA256`
   (the exact files this project audited), raising :class:`SGLangIntegrityError`
   on any mismatch;
3. extracts only :data:`FILES` into ``<cache>/sglang/<version>/`` with a marker
   (``verified.json``) listing the verified digests. Later calls skip the
   extraction but re-hash the extracted files against the marker and the pins
   (a few hundred KiB, about a millisecond).

Usage: ``python tools/fetch_sglang.py [--cache DIR]`` prints the root
directory (the one holding ``sglang/srt/...``). Importable:
``ensure_sglang(cache=None) -> Path``. The cache defaults to
``~/.cache/kvbudget`` (override with ``$KVBUDGET_CACHE``).
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SGLANG_VERSION = "0.5.23"

#: Wheel paths of the files the oracles read, with their sha256 digests as
#: recorded in the 0.5.23 wheel's RECORD (urlsafe base64, no padding), in
#: ``tools/sglang_pins.json``: the pool-sizing code (``model_executor``,
#: ``mem_cache``, ``speculative``, ...), the model resolution (``configs/*.py``,
#: ``utils/hf_transformers/{common,config}.py``, the model overrides,
#: ``load_model_utils.py``) and the model files of the hybrid-SWA architectures
#: whose window rule the resolution oracle reads. A wheel whose RECORD disagrees
#: is not the release this project audited.
_PINS = json.loads((Path(__file__).with_name("sglang_pins.json")).read_text())
if _PINS["version"] != SGLANG_VERSION:
    raise RuntimeError(f"tools/sglang_pins.json pins sglang {_PINS['version']}, not {SGLANG_VERSION}")
PINNED_SHA256: dict[str, str] = _PINS["files"]
FILES: tuple[str, ...] = tuple(PINNED_SHA256)

MARKER = "verified.json"


class SGLangFetchError(RuntimeError):
    """The wheel is not cached and could not be downloaded."""


class SGLangIntegrityError(RuntimeError):
    """A file does not match the wheel's RECORD, the pinned digest or the marker."""


def default_cache() -> Path:
    """``$KVBUDGET_CACHE``, else ``~/.cache/kvbudget``."""
    env = os.environ.get("KVBUDGET_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kvbudget"


def record_digest(data: bytes) -> str:
    """The RECORD form of a sha256: urlsafe base64 without ``=`` padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def find_wheel(wheels: Path, version: str = SGLANG_VERSION) -> Path | None:
    """The cached ``sglang-<version>-*.whl`` in ``wheels`` (newest name first), or None."""
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"), reverse=True)
    return found[0] if found else None


def download_wheel(wheels: Path, version: str = SGLANG_VERSION) -> Path:
    """``pip download --no-deps sglang==<version> -d wheels``; the wheel it leaves."""
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        f"sglang=={version}",
        "-d",
        str(wheels),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = find_wheel(wheels, version)
    if proc.returncode != 0 or wheel is None:
        raise SGLangFetchError(
            f"could not download sglang=={version} from PyPI (the SGLang parity oracle "
            f"needs its wheel).\n  command: {' '.join(cmd)}\n  exit status: {proc.returncode}\n"
            f"  stderr tail: {proc.stderr.strip()[-800:]}\n"
            f"Fix: run that command on a machine with network access and copy the wheel "
            f"into {wheels}/ (any sglang-{version}-*.whl; it is verified against its "
            f"RECORD and the pinned digests)."
        )
    return wheel


def read_record(zf: zipfile.ZipFile, version: str = SGLANG_VERSION) -> dict[str, tuple[str, int]]:
    """The wheel's RECORD as ``{path: (sha256 digest, size)}`` (entries without a hash skipped)."""
    name = f"sglang-{version}.dist-info/RECORD"
    try:
        text = zf.read(name).decode("utf-8")
    except KeyError:
        raise SGLangIntegrityError(
            f"{zf.filename}: no {name}; not an sglang {version} wheel"
        ) from None
    record: dict[str, tuple[str, int]] = {}
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if len(row) != 3:
            raise SGLangIntegrityError(f"{name}: malformed row {row!r}")
        path, hash_field, size = row
        if not hash_field:
            continue
        algo, _, digest = hash_field.partition("=")
        if algo != "sha256":
            raise SGLangIntegrityError(f"{name}: {path} uses hash {algo!r}, expected sha256")
        record[path] = (digest, int(size))
    return record


def verify_member(path: str, data: bytes, record: dict[str, tuple[str, int]]) -> str:
    """Checks one member against RECORD and the pin; returns its digest."""
    if path not in record:
        raise SGLangIntegrityError(f"{path}: not listed in the wheel's RECORD")
    want, size = record[path]
    got = record_digest(data)
    if got != want or len(data) != size:
        raise SGLangIntegrityError(
            f"{path}: sha256 {got} ({len(data)} bytes) does not match the wheel's RECORD "
            f"sha256 {want} ({size} bytes); the wheel is corrupt or tampered with"
        )
    pinned = PINNED_SHA256.get(path)
    if pinned is not None and got != pinned:
        raise SGLangIntegrityError(
            f"{path}: sha256 {got} is not the pinned digest {pinned} of sglang "
            f"{SGLANG_VERSION}; refusing to run unaudited code"
        )
    return got


def extract_verified(wheel: Path, dest: Path, files: tuple[str, ...] = FILES) -> dict[str, str]:
    """Verifies ``files`` in ``wheel`` and writes them under ``dest``; their digests."""
    digests: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as zf:
        record = read_record(zf)
        contents: dict[str, bytes] = {}
        for path in files:
            try:
                data = zf.read(path)
            except KeyError:
                raise SGLangIntegrityError(f"{wheel.name}: no {path}") from None
            digests[path] = verify_member(path, data, record)
            contents[path] = data
    # Write only after every member verified, so a bad wheel leaves nothing behind.
    for path, data in contents.items():
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return digests


def verify_extracted(root: Path, files: tuple[str, ...] = FILES) -> bool:
    """True when ``root`` holds a marker for ``files`` and every file re-hashes to it.

    Returns False when there is no usable marker (extract again); raises
    :class:`SGLangIntegrityError` when a marked file is missing or altered.
    """
    marker = root / MARKER
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    if meta.get("version") != SGLANG_VERSION or sorted(meta.get("files", {})) != sorted(files):
        return False
    for path in files:
        want = meta["files"][path]
        try:
            got = record_digest((root / path).read_bytes())
        except OSError as e:
            raise SGLangIntegrityError(f"{root / path}: unreadable ({e}); delete {root}") from e
        if got != want or got != PINNED_SHA256[path]:
            raise SGLangIntegrityError(
                f"{root / path}: sha256 {got} differs from the verified digest {want}; "
                f"the extracted cache was modified. Delete {root} to re-extract."
            )
    return True


def ensure_sglang(cache: Path | str | None = None) -> Path:
    """The verified extraction root for :data:`SGLANG_VERSION` (downloading if needed)."""
    cache = Path(cache) if cache is not None else default_cache()
    root = cache / "sglang" / SGLANG_VERSION
    if verify_extracted(root):
        return root
    wheels = cache / "wheels"
    wheel = find_wheel(wheels) or download_wheel(wheels)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{SGLANG_VERSION}-", dir=root.parent))
    try:
        digests = extract_verified(wheel, tmp)
        meta = {"version": SGLANG_VERSION, "wheel": wheel.name, "files": digests}
        (tmp / MARKER).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        if root.exists():
            shutil.rmtree(root)
        try:
            os.replace(tmp, root)
        except OSError:
            # Another process won the race; its copy must verify too.
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not verify_extracted(root):
        raise SGLangIntegrityError(f"{root}: extraction produced no valid marker")
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="cache directory (default: $KVBUDGET_CACHE or ~/.cache/kvbudget)",
    )
    args = parser.parse_args(argv)
    try:
        root = ensure_sglang(args.cache)
    except (SGLangFetchError, SGLangIntegrityError) as e:
        print(f"fetch_sglang: error: {e}", file=sys.stderr)
        return 1
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
