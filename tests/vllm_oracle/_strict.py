"""Strict stand-ins for the vLLM oracle: objects that fail loudly instead of inventing a value.

* :class:`StrictConfig` is a config record (``VllmConfig``, ``CacheConfig``,
  ...) holding exactly the fields it was built with. Reading any other
  attribute raises :class:`StubError`; assigning is allowed only to a field
  that exists (vLLM's planner writes back ``model_config.max_model_len``,
  ``cache_config.num_gpu_blocks_override``, ``kv_cache_size_tokens``, ...).
  Subclasses carry methods and properties lifted from vLLM's config classes.
* :class:`Poison` (the HiSparse layout helpers, the Mamba backend enum member),
  :class:`StrictModule`, :class:`StubError` and ``sentinel_class`` (a class the
  spec registry only stores): :mod:`oracle_kit.strict`.
* :class:`RecordingLogger` is what ``vllm.logger.init_logger`` returns in the
  sandbox: it formats and records every message (the padding warning, the
  capacity log line) into the active call's list instead of printing.

The oracle re-raises :class:`StubError` (an ``AssertionError``) instead of
reporting it as a vLLM outcome, so a stub can never produce a number.
"""

from __future__ import annotations

from typing import Any

from oracle_kit.strict import Poison, StrictModule, StubError, fail, poison_class

sentinel_class = poison_class  # a manager class the spec registry only stores
__all__ = ["Poison", "RecordingLogger", "StrictConfig", "StrictModule", "StubError", "fail", "sentinel_class"]


class StrictConfig:
    """A mutable record with a fixed set of fields; anything else fails loudly."""

    _label = "config"

    def __init__(self, **fields: Any) -> None:
        object.__setattr__(self, "_fields", frozenset(fields))
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy / pickle / repr protocol probes
        fail(type(self).__name__, f"attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._fields:
            fail(type(self).__name__, f"setting attribute {name!r}")
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        fail(type(self).__name__, f"deleting attribute {name!r}")

    def __repr__(self) -> str:
        return f"<strict {type(self).__name__}>"


class RecordingLogger:
    """``init_logger(name)`` in the sandbox: records ``(level, text)`` per call.

    ``*_once`` variants deduplicate within one plan call (vLLM deduplicates per
    process; one oracle call stands for one fresh engine start).
    """

    def __init__(self, name: str, sink: list[tuple[str, str]]) -> None:
        self.name = name
        self._sink = sink

    def _log(self, level: str, msg: str, *args: Any, once: bool = False, **kw: Any) -> None:
        text = msg % args if args else msg
        if once and (level, text) in self._sink:
            return
        self._sink.append((level, text))

    def debug(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("debug", msg, *args)

    def info(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("info", msg, *args)

    def warning(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("warning", msg, *args)

    def error(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("error", msg, *args)

    def debug_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("debug", msg, *args, once=True)

    def info_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("info", msg, *args, once=True)

    def warning_once(self, msg: str, *args: Any, **kw: Any) -> None:
        self._log("warning", msg, *args, once=True)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        fail(f"logger {self.name}", f"method {name!r}")
