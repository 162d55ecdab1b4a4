"""The one place where errors become HTTP responses: ``{"code", "message", "details"}``, never a
stack trace."""

from __future__ import annotations

import logging
import re
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    ValidationException,
)
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from app.errors import DomainError

log = logging.getLogger(__name__)

_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]+)`")
_AT_PATH = re.compile(r" - at `\$\.?([^`]*)`")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "validation_failed",
    429: "rate_limited",
}


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details or []}


def _json(
    status: int, code: str, message: str, details: list[dict[str, Any]] | None = None
) -> Response[Any]:
    return Response(
        error_body(code, message, details), status_code=status, media_type=MediaType.JSON
    )


def _field_details(extra: Any) -> list[dict[str, Any]]:
    details: list[dict[str, Any]] = []
    for item in extra if isinstance(extra, list) else []:
        if not isinstance(item, dict):
            continue
        message = str(item.get("message", "invalid"))
        field = str(item.get("key", ""))
        if m := _UNKNOWN_FIELD.search(message):
            field = m.group(1)
        if m := _AT_PATH.search(message):
            path = m.group(1)
            field = f"{field}.{path}" if field and field != "data" else path
            message = _AT_PATH.sub("", message)
        if field == "data":
            field = ""
        details.append({"field": field, "message": message, "source": item.get("source", "body")})
    return details


def validation_handler(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    details = _field_details(exc.extra)
    if not details:
        # No per-field detail means the body itself could not be parsed.
        return _json(400, "malformed_body", f"The request body could not be read: {exc.detail}")
    first = details[0]
    where = f" ({first['field']})" if first["field"] else ""
    return _json(422, "validation_failed", f"{first['message']}{where}", details)


def domain_handler(request: Request[Any, Any, Any], exc: DomainError) -> Response[Any]:
    return _json(exc.status, exc.code, exc.message, exc.details)


def http_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status >= 500:
        log.error("server error: %s", exc.detail)
        return _json(status, "server_error", "The server could not complete the request.")
    message = exc.detail or _CODES.get(status, "error").replace("_", " ")
    if isinstance(exc, NotFoundException) and message == "Not Found":
        message = "Not found"
    return _json(status, _CODES.get(status, "error"), message)


def unexpected_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(
        HTTP_500_INTERNAL_SERVER_ERROR, "server_error", "The server could not complete the request."
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ValidationException: validation_handler,
    DomainError: domain_handler,
    NotAuthorizedException: http_handler,
    PermissionDeniedException: http_handler,
    NotFoundException: http_handler,
    HTTPException: http_handler,
    Exception: unexpected_handler,
}
