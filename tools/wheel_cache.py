"""A pinned engine wheel: fetched once into a cache, verified, and partly extracted.

The engine oracles (``tests/sglang_oracle``, ``tests/vllm_oracle``) run an
engine's *released* code, read from its PyPI wheel at test time; no engine
source is ever committed. :class:`PinnedWheel` is the one implementation both
fetch tools (``tools/fetch_sglang.py``, ``tools/fetch_vllm.py``) use:

1. it finds ``<package>-<version>-*.whl`` in ``<cache>/wheels``, or runs
   ``python -m pip download --no-deps <package>==<version> -d <cache>/wheels``;
2. it checks every file it extracts against the wheel's
   ``<package>-<version>.dist-info/RECORD`` (sha256, urlsafe base64 without
   padding, and size) and against the digests pinned in the tool's JSON file
   (the exact files this project audited), raising the tool's integrity error
   on any mismatch;
3. it extracts only the pinned files into ``<cache>/<package>/<version>/`` with
   a marker (``verified.json``) listing the verified digests; later calls skip
   the extraction but re-hash the extracted files against the marker and pins.

A wheel that is neither cached nor downloadable raises the tool's fetch error
(the tests let it propagate: a missing oracle is a failure, never a skip). The
cache defaults to ``~/.cache/kvbudget`` (override with ``$KVBUDGET_CACHE``).
"""

from __future__ import annotations

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
from dataclasses import dataclass
from pathlib import Path

MARKER = "verified.json"


def default_cache() -> Path:
    """``$KVBUDGET_CACHE``, else ``~/.cache/kvbudget``."""
    env = os.environ.get("KVBUDGET_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kvbudget"


def record_digest(data: bytes) -> str:
    """The RECORD form of a sha256: urlsafe base64 without ``=`` padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def load_pins(path: Path, version: str) -> dict[str, str]:
    """The pinned digests of ``path`` (a ``{"version", "files"}`` JSON), for ``version``."""
    pins = json.loads(path.read_text())
    if pins["version"] != version:
        raise RuntimeError(f"{path.name} pins version {pins['version']}, not {version}")
    files: dict[str, str] = pins["files"]
    return files


@dataclass(frozen=True)
class PinnedWheel:
    """One engine release: its package, version, pinned files and the tool's error types."""

    package: str
    version: str
    pins: dict[str, str]
    oracle: str  # what needs the wheel, for messages ("the SGLang parity oracle")
    fetch_error: type[Exception]
    integrity_error: type[Exception]

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(self.pins)

    def find_wheel(self, wheels: Path) -> Path | None:
        """The cached ``<package>-<version>-*.whl`` in ``wheels`` (newest name first), or None."""
        found = sorted(wheels.glob(f"{self.package}-{self.version}-*.whl"), reverse=True)
        return found[0] if found else None

    def download_wheel(self, wheels: Path) -> Path:
        """``pip download --no-deps <package>==<version> -d wheels``; the wheel it leaves."""
        wheels.mkdir(parents=True, exist_ok=True)
        spec = f"{self.package}=={self.version}"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", spec,
               "-d", str(wheels)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheel = self.find_wheel(wheels)
        if proc.returncode != 0 or wheel is None:
            raise self.fetch_error(
                f"could not download {spec} from PyPI ({self.oracle} needs its wheel).\n"
                f"  command: {' '.join(cmd)}\n  exit status: {proc.returncode}\n"
                f"  stderr tail: {proc.stderr.strip()[-800:]}\n"
                f"Fix: run that command on a machine with network access and copy the wheel "
                f"into {wheels}/ (any {self.package}-{self.version}-*.whl; it is verified against "
                "its RECORD and the pinned digests)."
            )
        return wheel

    def read_record(self, zf: zipfile.ZipFile) -> dict[str, tuple[str, int]]:
        """The wheel's RECORD as ``{path: (sha256 digest, size)}`` (entries without a hash skipped)."""
        name = f"{self.package}-{self.version}.dist-info/RECORD"
        try:
            text = zf.read(name).decode("utf-8")
        except KeyError:
            raise self.integrity_error(f"{zf.filename}: no {name}; not a {self.package} {self.version} "
                                       "wheel") from None  # fmt: skip
        record: dict[str, tuple[str, int]] = {}
        for row in csv.reader(io.StringIO(text)):
            if not row:
                continue
            if len(row) != 3:
                raise self.integrity_error(f"{name}: malformed row {row!r}")
            path, hash_field, size = row
            if not hash_field:
                continue
            algo, _, digest = hash_field.partition("=")
            if algo != "sha256":
                raise self.integrity_error(f"{name}: {path} uses hash {algo!r}, expected sha256")
            record[path] = (digest, int(size))
        return record

    def verify_member(self, path: str, data: bytes, record: dict[str, tuple[str, int]]) -> str:
        """Checks one member against RECORD and the pin; returns its digest."""
        if path not in record:
            raise self.integrity_error(f"{path}: not listed in the wheel's RECORD")
        want, size = record[path]
        got = record_digest(data)
        if got != want or len(data) != size:
            raise self.integrity_error(
                f"{path}: sha256 {got} ({len(data)} bytes) does not match the wheel's RECORD "
                f"sha256 {want} ({size} bytes); the wheel is corrupt or tampered with"
            )
        pinned = self.pins.get(path)
        if pinned is not None and got != pinned:
            raise self.integrity_error(
                f"{path}: sha256 {got} is not the pinned digest {pinned} of {self.package} "
                f"{self.version}; refusing to run unaudited code"
            )
        return got

    def extract_verified(self, wheel: Path, dest: Path) -> dict[str, str]:
        """Verifies the pinned files in ``wheel`` and writes them under ``dest``; their digests."""
        digests: dict[str, str] = {}
        contents: dict[str, bytes] = {}
        with zipfile.ZipFile(wheel) as zf:
            record = self.read_record(zf)
            for path in self.files:
                try:
                    data = zf.read(path)
                except KeyError:
                    raise self.integrity_error(f"{wheel.name}: no {path}") from None
                digests[path] = self.verify_member(path, data, record)
                contents[path] = data
        # Write only after every member verified, so a bad wheel leaves nothing behind.
        for path, data in contents.items():
            target = dest / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return digests

    def verify_extracted(self, root: Path) -> bool:
        """True when ``root`` holds a marker for the pinned files and every file re-hashes to it.

        False when there is no usable marker (extract again); raises the
        integrity error when a marked file is missing or altered.
        """
        try:
            meta = json.loads((root / MARKER).read_text())
        except (OSError, ValueError):
            return False
        if meta.get("version") != self.version or sorted(meta.get("files", {})) != sorted(self.files):
            return False
        for path in self.files:
            want = meta["files"][path]
            try:
                got = record_digest((root / path).read_bytes())
            except OSError as e:
                raise self.integrity_error(f"{root / path}: unreadable ({e}); delete {root}") from e
            if got != want or got != self.pins[path]:
                raise self.integrity_error(
                    f"{root / path}: sha256 {got} differs from the verified digest {want}; "
                    f"the extracted cache was modified. Delete {root} to re-extract."
                )
        return True

    def ensure(self, cache: Path | str | None = None) -> Path:
        """The verified extraction root (downloading the wheel if it is not cached)."""
        cache = Path(cache) if cache is not None else default_cache()
        root = cache / self.package / self.version
        if self.verify_extracted(root):
            return root
        wheels = cache / "wheels"
        wheel = self.find_wheel(wheels) or self.download_wheel(wheels)
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.version}-", dir=root.parent))
        try:
            digests = self.extract_verified(wheel, tmp)
            meta = {"version": self.version, "wheel": wheel.name, "files": digests}
            (tmp / MARKER).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            if root.exists():
                shutil.rmtree(root)
            try:
                os.replace(tmp, root)
            except OSError:
                pass  # another process won the race; its copy must verify too
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if not self.verify_extracted(root):
            raise self.integrity_error(f"{root}: extraction produced no valid marker")
        return root

    def main(self, tool: str, argv: list[str] | None) -> int:
        """``tool [--cache DIR]``: print the verified root, or the error (exit status 1)."""
        import argparse

        parser = argparse.ArgumentParser(prog=tool, description=f"Fetch and verify {self.oracle}'s files.")
        parser.add_argument("--cache", type=Path, default=None,
                            help="cache directory (default: $KVBUDGET_CACHE or ~/.cache/kvbudget)")  # fmt: skip
        args = parser.parse_args(argv)
        try:
            root = self.ensure(args.cache)
        except (self.fetch_error, self.integrity_error) as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return 1
        print(root)
        return 0
