"""Bounds every untrusted payload must hold before anything is decoded into structs or stored:
no NUL character anywhere (PostgreSQL refuses ``\\u0000`` in text and JSONB, so it would fail at
the insert, after the request was accepted), and JSON nesting no deeper than a bound (deep
nesting costs recursion in every later walker: decoders, encoders, predicate evaluation).

``check_json_bytes(body)`` measures the nesting of the raw bytes in one linear pass, without
recursion, before any parser sees them; ``check_value(value)`` walks decoded data (a form's
fields, a decoded body) iteratively. Both raise :class:`ValidationFailed` (422 in the API's error
format) naming where the problem is, so nothing is stored.
"""

from __future__ import annotations

from typing import Any

import msgspec

from app.errors import ValidationFailed

MAX_JSON_DEPTH = 32
"""Objects and arrays nested deeper than this are refused (event properties are flat in
practice; 32 leaves room for any honest payload)."""


def json_depth(body: bytes) -> int:
    """The deepest nesting of objects/arrays in a JSON text (strings skipped), in one pass."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):  # { [
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x7D, 0x5D):  # } ]
            depth -= 1
    return deepest


def check_json_bytes(body: bytes, *, max_depth: int = MAX_JSON_DEPTH, where: str = "body") -> None:
    if b"\x00" in body:
        raise ValidationFailed.field(where, "must not contain NUL characters")
    # Nesting needs an opening bracket per level: a body with no more brackets than the bound
    # (counted in C) cannot be too deep, which spares the byte-by-byte walk for almost every event.
    if body.count(b"{") + body.count(b"[") > max_depth and json_depth(body) > max_depth:
        raise ValidationFailed.field(where, f"nested deeper than {max_depth} levels")


def check_value(value: Any, *, max_depth: int = MAX_JSON_DEPTH, where: str = "body") -> None:
    """Refuse NUL characters in any key or string, and nesting beyond ``max_depth``."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise ValidationFailed.field(path, "must not contain NUL characters")
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise ValidationFailed.field(path, f"nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and "\x00" in key:
                        raise ValidationFailed.field(path, "keys must not contain NUL characters")
                    stack.append((child, f"{path}.{key}", depth + 1))
            else:
                stack.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(item))


def check_json(body: bytes, *, max_depth: int = MAX_JSON_DEPTH, where: str = "body") -> None:
    """Both checks for a raw JSON body. A decoded NUL can only come from a ``\\u0000`` escape, so
    the body is decoded for the walk only when that sequence occurs in it."""
    check_json_bytes(body, max_depth=max_depth, where=where)
    if b"\\u0000" in body:
        try:
            decoded = msgspec.json.decode(body)
        except msgspec.DecodeError:
            return  # not JSON: the caller's decoder says so in its own words
        check_value(decoded, max_depth=max_depth, where=where)
