"""Deprecated: moved to :mod:`kvbudget.vllm.alloc` (this path goes in kvbudget 0.3)."""

from kvbudget._moved import moved

__getattr__ = moved(__name__, "kvbudget.vllm.alloc")
