"""The rules every path and query parameter is checked with, stated in the OpenAPI document.

Two checks apply to parameters whatever the handler: an integer id is bounded by the column it is
looked up in (:mod:`app.web.id_bounds`, PL-10: 404 in a path, 422 in a query beyond it), and no
path or query value may hold a NUL character (:mod:`app.web.request_bounds`, 422). The handlers'
signatures say neither, so Litestar's document did not either: a reader (a generated client, the
fuzzer) took ``schedule_id=2⁶³`` or ``q=\\u0000`` for valid input. :func:`document_parameter_rules`
adds them to the document once it is built: ``minimum``/``maximum`` on every integer parameter
with a known column, :data:`~app.web.openapi_constraints.NO_NUL` on every free-text one.
"""

from __future__ import annotations

from litestar import Litestar
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.openapi.spec import OpenAPI, OpenAPIType, Operation, Parameter, Schema

from app.web.id_bounds import column_of, column_range
from app.web.openapi_constraints import NO_NUL

_PLACES = ("path", "query")
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def _branch(schema: Schema, kind: OpenAPIType) -> Schema | None:
    if schema.type == kind:
        return schema
    for member in schema.one_of or schema.any_of or ():
        if isinstance(member, Schema) and member.type == kind:
            return member
    return None


def _parameter(path: str, parameter: Parameter) -> None:
    schema = parameter.schema
    if parameter.param_in not in _PLACES or not isinstance(schema, Schema):
        return
    number = _branch(schema, OpenAPIType.INTEGER)
    column = column_of(path, parameter.name)
    if number is not None and column is not None:
        low, high = column_range(column)
        if number.minimum is None:
            number.minimum = low
        if number.maximum is None:
            number.maximum = high
    text = _branch(schema, OpenAPIType.STRING)
    if (
        text is not None
        and text.pattern is None
        and text.enum is None
        and text.format is None
        and text.const is None
    ):
        text.pattern = NO_NUL


def document_parameter_rules(document: OpenAPI) -> OpenAPI:
    for path, item in (document.paths or {}).items():
        for method in _METHODS:
            operation = getattr(item, method, None)
            if not isinstance(operation, Operation):
                continue
            for parameter in operation.parameters or ():
                if isinstance(parameter, Parameter):
                    _parameter(path, parameter)
    return document


class _WithParameterRules(OpenAPIPlugin):
    """Litestar's OpenAPI plugin, whose document is finished with the parameter rules."""

    __slots__ = ()

    def _build_openapi(self) -> OpenAPI:
        return document_parameter_rules(super()._build_openapi())


def install(app: Litestar) -> None:
    """Have ``app``'s document built with the parameter rules. Litestar adds its OpenAPI plugin
    itself and has no hook for a finished document, so the plugin becomes the subclass above
    (same slots; tests/platform/test_openapi_constraints.py fails if the method it extends moves)."""
    plugin = app.plugins.get(OpenAPIPlugin)
    plugin.__class__ = _WithParameterRules
