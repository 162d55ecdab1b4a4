"""Constraints the API enforces that Litestar's schema of a msgspec struct leaves out.

* The bounds of a list's items (``list[Annotated[int, Meta(ge=1)]]`` was documented as a list of
  any integers): the ranges, lengths and patterns of the item type go on ``items``.
* NUL characters: every string of a request is refused with 422 when it holds one
  (:mod:`app.web.request_bounds`, :mod:`app.web.input_guard`), so every string field and list
  item without a pattern of its own is documented with :data:`NO_NUL`. (Not a map's keys: a
  ``propertyNames`` pattern on the free-form JSON documents made the fuzzer's generator of
  arbitrary JSON trip over a CPython 3.11 bug, "AST constructor recursion depth mismatch".)

Without these, a client generated from the document (or a fuzzer reading it) sends what the API
refuses, and the document does not say why.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar.openapi.spec import OpenAPIType, Reference, Schema

NO_NUL = r"^[^\u0000]*$"
"""Any text without a NUL character (a JSON Schema / ECMA regular expression)."""

_SEQUENCES = (
    msgspec.inspect.ListType,
    msgspec.inspect.SetType,
    msgspec.inspect.FrozenSetType,
    msgspec.inspect.VarTupleType,
)
_NUMBER_BOUNDS = (
    ("ge", "minimum"),
    ("le", "maximum"),
    ("gt", "exclusive_minimum"),
    ("lt", "exclusive_maximum"),
)
_TEXT_BOUNDS = (("min_length", "min_length"), ("max_length", "max_length"))


def _branch(prop: Schema, kind: OpenAPIType) -> Schema | None:
    """The part of ``prop`` that documents a value of ``kind`` (itself, or a ``oneOf`` member)."""
    if prop.type == kind:
        return prop
    for member in prop.one_of or prop.any_of or ():
        if isinstance(member, Schema) and member.type == kind:
            return member
    return None


def _text(target: Schema, kind: msgspec.inspect.StrType) -> None:
    for meta_name, schema_name in _TEXT_BOUNDS:
        value = getattr(kind, meta_name)
        if value is not None and getattr(target, schema_name) is None:
            setattr(target, schema_name, value)
    if target.pattern is None:
        target.pattern = kind.pattern or NO_NUL


def _number(target: Schema, kind: msgspec.inspect.IntType | msgspec.inspect.FloatType) -> None:
    for meta_name, schema_name in _NUMBER_BOUNDS:
        value = getattr(kind, meta_name)
        if value is not None and getattr(target, schema_name) is None:
            setattr(target, schema_name, value)


def _scalar(target: Schema | Reference | None, wrapped: Any) -> None:
    kind, stated = _unwrapped(wrapped)
    if isinstance(target, Schema):
        _state(target, kind, stated)
    if not isinstance(target, Schema) or target.enum is not None or target.const is not None:
        return
    if isinstance(kind, msgspec.inspect.StrType) and target.type == OpenAPIType.STRING:
        _text(target, kind)
    elif isinstance(kind, (msgspec.inspect.IntType, msgspec.inspect.FloatType)) and (
        target.type in (OpenAPIType.INTEGER, OpenAPIType.NUMBER)
    ):
        _number(target, kind)


_STATED = {
    "enum": "enum",
    "format": "format",
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minimum": "minimum",
    "maximum": "maximum",
}
"""Keywords a field states with ``Meta(extra_json_schema=...)``: a rule the API checks in code
(an enum, a list that may not be empty) and the type cannot say."""
_KINDS: dict[type, OpenAPIType] = {
    msgspec.inspect.StrType: OpenAPIType.STRING,
    msgspec.inspect.IntType: OpenAPIType.INTEGER,
    msgspec.inspect.FloatType: OpenAPIType.NUMBER,
    **dict.fromkeys(_SEQUENCES, OpenAPIType.ARRAY),
    msgspec.inspect.DictType: OpenAPIType.OBJECT,
}


def _unwrapped(kind: Any) -> tuple[Any, dict[str, Any]]:
    """The type inside ``Meta`` wrappers, and the JSON Schema they state."""
    stated: dict[str, Any] = {}
    while isinstance(kind, msgspec.inspect.Metadata):
        stated.update(kind.extra_json_schema or {})
        kind = kind.type
    return kind, stated


def _state(prop: Schema, kind: Any, stated: dict[str, Any]) -> None:
    target = _branch(prop, _KINDS[type(kind)]) if type(kind) in _KINDS else None
    if target is None:
        return
    for keyword, attribute in _STATED.items():
        if keyword in stated:
            setattr(target, attribute, stated[keyword])


def _field(prop: Schema, wrapped: Any) -> None:
    kind, stated = _unwrapped(wrapped)
    _state(prop, kind, stated)
    if isinstance(kind, msgspec.inspect.StrType):
        string = _branch(prop, OpenAPIType.STRING)
        if string is not None and string.pattern is None and string.enum is None:
            string.pattern = kind.pattern or NO_NUL
    elif isinstance(kind, _SEQUENCES):
        array = _branch(prop, OpenAPIType.ARRAY)
        if array is not None:
            _scalar(array.items, kind.item_type)


def restore_constraints(schema: Schema, info: msgspec.inspect.StructType) -> None:
    """Put on ``schema`` (a struct's) the item bounds and NUL rule its fields are checked with."""
    for field in info.fields:
        prop = (schema.properties or {}).get(field.encode_name)
        if not isinstance(prop, Schema):
            continue
        kinds = (
            field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else (field.type,)
        )
        for kind in kinds:
            _field(prop, kind)
