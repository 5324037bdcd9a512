#!/usr/bin/env python3
"""Fetch and verify the SGLang 0.5.23 files the SGLang oracles execute (``tests/sglang_oracle``).

Fetching, the RECORD and pin checks and the verified extraction are
:class:`wheel_cache.PinnedWheel` (:data:`WHEEL`); this module names the release
and its pinned files (``tools/sglang_pins.json``: the pool-sizing code; the model
resolution, i.e. ``configs/*.py``, ``utils/hf_transformers/{common,config}.py``,
the model overrides and ``load_model_utils.py``; the launch-flag declarations
in ``arg_groups``; and ``models/*.py``, for the model registry and the window
rule). Usage: ``python tools/fetch_sglang.py
[--cache DIR]`` prints the root directory; importable: ``ensure_sglang(cache=None)``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wheel_cache import PinnedWheel, default_cache, load_pins, record_digest  # noqa: E402

SGLANG_VERSION = "0.5.23"


class SGLangFetchError(RuntimeError):
    """The wheel is not cached and could not be downloaded."""


class SGLangIntegrityError(RuntimeError):
    """A file does not match the wheel's RECORD, the pinned digest or the marker."""


WHEEL = PinnedWheel("sglang", SGLANG_VERSION, load_pins(Path(__file__).with_name("sglang_pins.json"), SGLANG_VERSION),
                    "the SGLang parity oracle", SGLangFetchError, SGLangIntegrityError)
ensure_sglang = WHEEL.ensure
__all__ = ["SGLANG_VERSION", "WHEEL", "SGLangFetchError", "SGLangIntegrityError", "default_cache", "ensure_sglang",
           "record_digest"]  # fmt: skip

if __name__ == "__main__":
    sys.exit(WHEEL.main("fetch_sglang", sys.argv[1:]))
