"""Closed objects in the API's OpenAPI document.

Every request and response struct (:class:`app.schemas.Schema`) refuses unknown fields: a body
that carries one is refused with an error naming it. Litestar's schema for a msgspec struct leaves
``additionalProperties`` out, which in OpenAPI means that any other property is allowed, so a
client generated from the document (or a fuzzer reading it) would send what the API refuses.
:class:`ClosedStructSchemas` says what the API does: ``additionalProperties: false`` on the schema
of every struct that forbids unknown fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

# Litestar's own schema plugin for msgspec structs, which this one extends; it is not exported
# under a public name (tests/platform/test_api_contract.py fails if it moves or changes).
from litestar._openapi.schema_generation.plugins.struct import StructSchemaPlugin
from litestar.openapi.spec import Schema

from app.web.openapi_constraints import restore_constraints

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.typing import FieldDefinition


class ClosedStructSchemas(StructSchemaPlugin):
    """Litestar's struct schemas, closed where the struct refuses unknown fields. An application
    plugin, so it is asked before Litestar's built-in one."""

    def to_openapi_schema(
        self, field_definition: FieldDefinition, schema_creator: SchemaCreator
    ) -> Schema:
        schema = super().to_openapi_schema(field_definition, schema_creator)
        info = msgspec.inspect.type_info(field_definition.type_)
        if isinstance(info, msgspec.inspect.StructType):
            if info.forbid_unknown_fields:
                schema.additional_properties = False
            _restore_zero_bounds(schema, info)
            restore_constraints(schema, info)
        return schema


_ZERO_BOUNDS = (("ge", "minimum"), ("le", "maximum"), ("gt", "exclusive_minimum"))


def _restore_zero_bounds(schema: Schema, info: msgspec.inspect.StructType) -> None:
    """Litestar drops a bound that is zero (``Meta(ge=0)`` documents no minimum), so a negative
    number looked valid to the document's readers while the API refuses it: put them back."""
    for field in info.fields:
        prop = (schema.properties or {}).get(field.encode_name)
        kinds = (
            field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else (field.type,)
        )
        for kind in kinds:
            if not isinstance(kind, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
                continue
            for meta_name, schema_name in _ZERO_BOUNDS:
                if getattr(kind, meta_name) == 0 and getattr(prop, schema_name, 1) is None:
                    setattr(prop, schema_name, 0)
