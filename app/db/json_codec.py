"""How JSON columns are read back: every ``jsonb`` (PostgreSQL) and JSON (SQLite) value a query
returns goes through :func:`decode_document`, which the engines are built with.

The SQL layer's default is :func:`json.loads`; msgspec's decoder reads the same documents into
the same Python values about four times faster, which a funnel runner's batch (four documents a
run: its context, the contact's fields and the outbox payloads) felt as a few per cent of its
CPU. What msgspec refuses and :func:`json.loads` accepts (``NaN``, ``Infinity``, a number beyond
a double) is read by :func:`json.loads` as before, so no stored value becomes unreadable.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_DECODE = msgspec.json.Decoder().decode


def decode_document(text: str | bytes) -> Any:
    """The JSON document ``text`` as dicts, lists, strings, numbers, booleans and ``None``."""
    try:
        return _DECODE(text)
    except msgspec.DecodeError:
        return json.loads(text)
