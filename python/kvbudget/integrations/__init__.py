"""Connections to serving engines: :mod:`kvbudget.sglang.install` (no engine import at
import time)."""
