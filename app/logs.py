"""Structured logging: JSON lines in production, readable text in development.

A correlation id (request id, batch id, run id) set with :func:`correlate` is added to every line
logged inside that context. Values that look like secrets are masked before anything is written.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_correlation: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "correlation", default=None
)

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_SECRET_PATTERNS = [
    re.compile(r"(access_token=)[^&\s\"']+"),
    re.compile(r"((?:bearer|Bearer|BEARER)\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"\b(sw[li]_)[A-Za-z0-9_-]{8,}"),
    re.compile(r"(\"?(?:password|token|secret|api_key)\"?\s*[:=]\s*\"?)[^\s\",}]+", re.I),
]


# Every pattern above needs one of these words; most log lines have none, and checking for them is
# far cheaper than running the patterns on every line.
_SECRET_MARKERS = ("token", "bearer", "swl_", "swi_", "password", "secret", "api_key")


def redact(text: str) -> str:
    lowered = text.lower()
    if not any(marker in lowered for marker in _SECRET_MARKERS):
        return text
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(r"\1***", text)
    return text


@contextmanager
def correlate(correlation_id: str) -> Iterator[None]:
    token = _correlation.set(correlation_id)
    try:
        yield
    finally:
        _correlation.reset(token)


def set_correlation(correlation_id: str) -> None:
    """Set the correlation id for the rest of the current context: for a context made for one
    unit of work (a job's task), which ends with it, so nothing needs resetting."""
    _correlation.set(correlation_id)


def current_correlation() -> str | None:
    return _correlation.get()


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if (cid := _correlation.get()) is not None:
            entry["correlation_id"] = cid
        entry.update(_extras(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        extras = _extras(record)
        if (cid := _correlation.get()) is not None:
            extras["cid"] = cid
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return redact(line)


def configure_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs full URLs (which may carry tokens) at INFO.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("aiosqlite").setLevel(logging.WARNING)
