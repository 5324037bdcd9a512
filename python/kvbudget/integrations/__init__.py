"""Connections to serving engines: :mod:`kvbudget.integrations.sglang` (no engine import at
import time)."""
