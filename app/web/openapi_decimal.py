"""Decimal fields in the API's OpenAPI document as the API reads them.

msgspec decodes a ``Decimal`` from a JSON string (``"12.50"``) or a JSON number (``12.5``), and the
API answers with strings. Litestar documents the type as a string only, so a number the API takes
read as input the document forbids (a fuzzer's "accepts schema-violating input", a generated
client refusing to send one). :class:`DecimalSchemas` documents both forms.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from litestar.openapi.spec import OpenAPIType, Schema
from litestar.plugins import OpenAPISchemaPlugin

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.typing import FieldDefinition


class DecimalSchemas(OpenAPISchemaPlugin):
    """``Decimal``: a decimal number written as a string or as a JSON number."""

    @staticmethod
    def is_plugin_supported_type(value: Any) -> bool:
        return value is Decimal

    def to_openapi_schema(
        self, field_definition: FieldDefinition, schema_creator: SchemaCreator
    ) -> Schema:
        return Schema(
            one_of=[
                Schema(type=OpenAPIType.STRING),
                Schema(type=OpenAPIType.NUMBER),
            ]
        )
