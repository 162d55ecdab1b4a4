"""The one place where errors become HTTP responses: ``{"code", "message", "details"}``, never a
stack trace.

Programs (``/api/``, ``/hooks/``, ``/t/`` and anything that does not ask for HTML) get the JSON body;
a browser on a dashboard page gets the same code and message on a small HTML page instead.
"""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.response import Template
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.db.locks import is_lock_timeout
from app.errors import DomainError
from app.web.auth import signed_in_principal, signed_in_workspaces
from app.web.plain_errors import plain_detail, plain_error

log = logging.getLogger(__name__)

# A struct's own check of one of its fields (``Schema.__post_init__``: "`email` is not a valid
# e-mail address"); msgspec reports it at the struct, so the field is named in the message.
_OWN_CHECK = re.compile(r"`(\w+)` (.+)", re.DOTALL)
_PROGRAM_PREFIXES = ("/api/", "/hooks/", "/t/", "/schema")
_CSRF_FAILED = "CSRF token verification failed"  # Litestar's CSRF middleware detail
# Litestar's detail for an absent required parameter (it carries no per-field ``extra``).
_MISSING_PARAMETER = re.compile(r"Missing required (\w+) parameter '([^']+)'")

CODES = {
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

BUSY_CODE = "database_busy"
BUSY_RETRY_AFTER_SECONDS = 2
"""What a client hears when the database was too busy: retry after this long."""

_MESSAGES = {
    401: "Authentication is required.",
    403: "You are not allowed to do this.",
    404: "Not found.",
    405: "This method is not allowed on this path.",
}


def error_body(
    code: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"code": code, "message": message, "details": details or []}


def _wants_html(request: Request[Any, Any, Any]) -> bool:
    if request.url.path.startswith(_PROGRAM_PREFIXES):
        return False
    return "text/html" in request.headers.get("accept", "")


def error_response(
    request: Request[Any, Any, Any],
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[Any]:
    if _wants_html(request):
        context = {"status": status, "code": code, "message": message, "details": details or []}
        return Template(
            template_name="platform/error.html",
            context={**context, **_page_context(request, status)},
            status_code=status,
            headers=headers,
        )
    return Response(
        error_body(code, message, details),
        status_code=status,
        media_type=MediaType.JSON,
        headers=headers,
    )


def _page_context(request: Request[Any, Any, Any], status: int) -> dict[str, Any]:
    """A signed-in person's error page keeps the dashboard's header (with the workspace switch);
    a dashboard 404 also asks which of their workspaces holds the object
    (:mod:`app.web.dashboard.workspace_hint`). An htmx fragment's error gets neither."""
    principal = signed_in_principal(request)
    if principal is None or principal.user_id is None or request.headers.get("hx-request"):
        return {}
    path = request.url.path
    runtime = getattr(request.app.state, "runtime", None)
    nav = getattr(request.app.state, "nav", [])
    return {
        "principal": principal,
        "platform_stop": runtime is not None and runtime.platform_stopped(),
        "nav": nav,
        "path": path,
        "workspace_menu": signed_in_workspaces(request),
        "switch_next": "/",
        "hint_path": path if status == 404 and path.startswith("/ui/") else "",
    }


def _field_details(extra: Any) -> list[dict[str, Any]]:
    """Litestar's per-field errors as ours: the machine path in ``field`` (the key msgspec names
    in its message folded in), the message said plainly (``app.web.plain_errors``)."""
    details: list[dict[str, Any]] = []
    for item in extra if isinstance(extra, list) else []:
        if not isinstance(item, dict):
            continue
        message = str(item.get("message", "invalid"))
        key = str(item.get("key", ""))
        field, readable = plain_detail("" if key == "data" else key, message)
        if m := _OWN_CHECK.fullmatch(readable):
            field = f"{field}.{m.group(1)}" if field else m.group(1)
            readable = m.group(2)
        details.append({"field": field, "message": readable, "source": item.get("source", "body")})
    return details


def _missing_body(extra: Any) -> bool:
    """Litestar reports an absent request body as a KeyError on the ``data`` parameter."""
    return isinstance(extra, list) and any(
        isinstance(item, dict) and item.get("key") == "data" and item.get("message") == "'data'"
        for item in extra
    )


def validation_handler(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    if _missing_body(exc.extra):
        return error_response(request, 400, "body_required", "A JSON request body is required.")
    details = _field_details(exc.extra)
    if not details and (missing := _MISSING_PARAMETER.search(exc.detail or "")):
        source, name = missing.groups()
        details = [{"field": name, "message": "is required", "source": source}]
    if not details:
        # No per-field detail means the body itself could not be read.
        return error_response(
            request, 400, "malformed_body", f"The request body could not be read: {exc.detail}"
        )
    first = details[0]
    headline = plain_error(first["field"], first["message"])
    return error_response(request, 422, "validation_failed", headline, details)


def domain_handler(request: Request[Any, Any, Any], exc: DomainError) -> Response[Any]:
    if exc.status != 422 or not exc.details:
        return error_response(request, exc.status, exc.code, exc.message, exc.details)
    # A service's own check may carry a library's wording (a document decoded again inside the
    # service): its details are said plainly too, their fields kept for programs.
    details = [_plain_domain_detail(d) for d in exc.details]
    return error_response(request, exc.status, exc.code, _plain_headline(exc), details)


def _plain_domain_detail(detail: Any) -> Any:
    if not isinstance(detail, dict) or not isinstance(detail.get("message"), str):
        return detail
    field, message = plain_detail(str(detail.get("field") or ""), detail["message"])
    return {**detail, "field": field, "message": message}


def _plain_headline(exc: DomainError) -> str:
    """The error's message, with a library's wording or a machine path said plainly."""
    first = exc.details[0] if isinstance(exc.details[0], dict) else {}
    field, message = str(first.get("field") or ""), str(first.get("message") or "")
    if len(exc.details) == 1 and exc.message == f"{field}: {message}":
        return plain_error(field, message)
    return exc.message


def _body_limit(request: Request[Any, Any, Any]) -> int | None:
    runtime = getattr(request.app.state, "runtime", None)
    return None if runtime is None else int(runtime.settings.web.max_body_bytes)


def http_handler(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    status = exc.status_code
    if status >= 500:
        log.error("server error on %s %s: %s", request.method, request.url.path, exc.detail)
        return error_response(
            request, status, "server_error", "The server could not complete the request."
        )
    code = CODES.get(status, "error")
    message = exc.detail or ""
    if status == 400 and isinstance(exc.__cause__, SerializationException):
        code = "malformed_body"
        message = f"The request body is not valid JSON: {message}"
    elif status == 403 and message == _CSRF_FAILED:
        code = "csrf_failed"
        message = (
            "The form could not be verified (it expired or came from another site). "
            "Reload the page and try again."
        )
    elif status == 413:
        limit = _body_limit(request)
        message = "The request body is too large" + (
            f" (at most {limit} bytes are accepted)." if limit else "."
        )
    elif not message or message == HTTPStatus(status).phrase:
        # Litestar's default detail is the bare reason phrase: say something more useful.
        message = _MESSAGES.get(status, HTTPStatus(status).phrase + ".")
    headers = dict(exc.headers or {})
    return error_response(request, status, code, message, headers=headers or None)


def unexpected_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(
        request,
        HTTP_500_INTERNAL_SERVER_ERROR,
        "server_error",
        "The server could not complete the request.",
    )


_UNIQUE_SQLSTATE = "23505"
_SQLITE_UNIQUE = "UNIQUE constraint failed"


def is_unique_violation(exc: DBAPIError) -> bool:
    """A unique index refused the write (PostgreSQL sqlstate 23505, SQLite's UNIQUE message)."""
    if not isinstance(exc, IntegrityError):
        return False
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return sqlstate == _UNIQUE_SQLSTATE or _SQLITE_UNIQUE in str(orig)


def database_handler(request: Request[Any, Any, Any], exc: DBAPIError) -> Response[Any]:
    """A lock timeout ("database is locked" on SQLite, a lock timeout or deadlock on PostgreSQL)
    is the database being busy, not the request being wrong: 503 with ``Retry-After``, and the
    request's unit of work was rolled back, so repeating it is safe. A unique index refusing the
    write — a name or key that another row already holds, which a check before the write missed
    (a race, or a normalisation the check does not share with the index) — is a 409, the unit of
    work rolled back too. Anything else is a 500."""
    if is_unique_violation(exc):
        log.info("unique conflict on %s %s", request.method, request.url.path)
        return error_response(
            request,
            409,
            "conflict",
            "This conflicts with something that already exists (a name or key must be unique); "
            "nothing was changed.",
        )
    if not is_lock_timeout(exc):
        return unexpected_handler(request, exc)
    log.warning("database busy on %s %s: %s", request.method, request.url.path, exc.orig)
    return error_response(
        request,
        503,
        BUSY_CODE,
        "The database is busy with other work; nothing was changed. Try again in a moment.",
        headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)},
    )


EXCEPTION_HANDLERS: dict[Any, Any] = {
    ValidationException: validation_handler,
    DomainError: domain_handler,
    DBAPIError: database_handler,
    HTTPException: http_handler,
    Exception: unexpected_handler,
}
