#!/usr/bin/env python3
"""Fetch and verify the vLLM 0.33.0 files the vLLM planning oracle executes (``tests/vllm_oracle``;
the wheel is about 336 MB, downloaded once and reused).

Fetching, the RECORD and pin checks and the verified extraction are
:class:`wheel_cache.PinnedWheel` (:data:`WHEEL`); this module names the release
and its pinned files (``tools/vllm_pins.json``). Usage: ``python tools/fetch_vllm.py
[--cache DIR]`` prints the root directory; importable: ``ensure_vllm(cache=None)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import PinnedWheel, default_cache, load_pins, record_digest  # noqa: E402

VLLM_VERSION = "0.33.0"


class VllmFetchError(RuntimeError):
    """The wheel is not cached and could not be downloaded."""


class VllmIntegrityError(RuntimeError):
    """A file does not match the wheel's RECORD, the pinned digest or the marker."""


WHEEL = PinnedWheel("vllm", VLLM_VERSION, load_pins(Path(__file__).with_name("vllm_pins.json"), VLLM_VERSION),
                    "the vLLM planning oracle", VllmFetchError, VllmIntegrityError)
ensure_vllm = WHEEL.ensure
__all__ = ["VLLM_VERSION", "WHEEL", "VllmFetchError", "VllmIntegrityError", "default_cache", "ensure_vllm",
           "record_digest"]  # fmt: skip

if __name__ == "__main__":
    sys.exit(WHEEL.main("fetch_vllm", sys.argv[1:]))
