"""Values a run produced, addressed by a dotted path, for conditions and merge variables.

Nodes that reach outside keep their answers in the run's context under one root each:
``http.<node>`` (an ``http_request``'s status, url, headers, body and parsed JSON ``data``),
``payments.<node>`` (``create_payment``), ``bookings.<node>`` (``book_slot``) and
``vars.<variable>`` (``ai_generate``). A path walks from there through JSON objects (keys) and
arrays (indexes): ``http.check.data.plan``, ``http.check.status``, ``bookings.call.start``.

Comparisons follow the segment language's two-valued logic: a missing value makes every
comparison false except ``not_exists``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

CONTEXT_ROOTS: dict[str, str] = {
    "http": "http_request",
    "payments": "create_payment",
    "bookings": "book_slot",
    "vars": "ai_generate",
}
"""Root of a path -> the node kind that produces values under it."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def split_path(path: str) -> list[str]:
    return path.split(".")


def path_problem(path: str) -> str | None:
    """What is wrong with the shape of ``path`` (``None`` when it is well formed)."""
    parts = split_path(path)
    if len(parts) < 2 or any(not p.strip() for p in parts):
        return f"context path '{path}' needs a root and a name, e.g. 'http.<node id>.status'"
    if parts[0] not in CONTEXT_ROOTS:
        roots = ", ".join(sorted(CONTEXT_ROOTS))
        return f"context path '{path}' must start with one of: {roots}"
    return None


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at ``path``, or :data:`MISSING`."""
    value: Any = context
    for part in split_path(path):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def as_text(value: Any) -> str:
    """How a context value reads inside a message or a request body."""
    if value is None or value is MISSING:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def compare(op: str, actual: Any, expected: Any) -> bool:
    """``actual op expected`` over untyped JSON values. Numbers compare as numbers, strings as
    strings; values of different kinds are unequal and unordered."""
    if op == "exists":
        return actual is not MISSING and actual is not None
    if op == "not_exists":
        return actual is MISSING or actual is None
    if actual is MISSING or actual is None:
        return False
    if op == "contains":
        if isinstance(actual, list):
            return expected in actual
        return as_text(expected) in as_text(actual)
    pair = _comparable(actual, expected)
    if op in ("eq", "ne"):
        equal = pair is not None and pair[0] == pair[1]
        return equal if op == "eq" else not equal
    if pair is None or isinstance(pair[0], bool):
        return False
    left, right = pair
    if op == "gt":
        return bool(left > right)
    if op == "gte":
        return bool(left >= right)
    if op == "lt":
        return bool(left < right)
    return bool(left <= right)


def _comparable(actual: Any, expected: Any) -> tuple[Any, Any] | None:
    """Both as numbers, both as strings (or booleans), or ``None`` when the kinds differ."""
    left, right = _number(actual), _number(expected)
    if left is not None and right is not None:
        return left, right
    if type(actual) is type(expected) and isinstance(actual, str | bool):
        return actual, expected
    return None
