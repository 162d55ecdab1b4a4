"""Stripe's form encoding of nested parameters (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def encode_form(params: Mapping[str, Any]) -> dict[str, str]:
    """Flatten nested parameters to bracket notation, the way Stripe reads them.

    ``{"metadata": {"run": "7"}, "line_items": [{"quantity": 1}]}`` →
    ``{"metadata[run]": "7", "line_items[0][quantity]": "1"}``. ``None`` values are left out;
    booleans are ``true``/``false``.
    """
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}[{key}]" if prefix else str(key), inner)
        elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
            for index, inner in enumerate(value):
                walk(f"{prefix}[{index}]", inner)
        elif isinstance(value, bool):
            out[prefix] = "true" if value else "false"
        else:
            out[prefix] = str(value)

    walk("", params)
    return out
