"""pytest configuration shared by the tests.

Hypothesis profiles, chosen with the KVBUDGET_HYPOTHESIS_PROFILE environment
variable:

* ``dev`` (the default): 200 examples per property, for a developer's quick
  ``pytest``.
* ``ci``: 10,000 examples per property, no deadline; ``.ci/run`` selects it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# tests/ is on sys.path: the SGLang oracle (`sglang_oracle`) and `parity_cases` import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent))
# Shared helper modules that assert: pytest's detailed assertion messages there too.
pytest.register_assert_rewrite("robustness_guard", "cli_helpers", "batch_common")

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("ci", max_examples=10_000, **_COMMON)
settings.register_profile("dev", max_examples=200, **_COMMON)

PROFILE = os.environ.get("KVBUDGET_HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)
