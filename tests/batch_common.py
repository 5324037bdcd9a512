"""Constants shared by the batch API tests: status codes and the base geometry columns."""

from __future__ import annotations

from kvbudget.batch import STATUS_CODES

STATUS_OF_CODE = {code: status for status, code in STATUS_CODES.items()}
INVALID = STATUS_OF_CODE["invalid_config"]

BASE = dict(num_full_layers=32, num_kv_heads=8, head_dim=128)
