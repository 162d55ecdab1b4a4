"""The error half of the API's contract in its OpenAPI document.

Every ``/api/`` operation documents the statuses it can answer besides its success, each with the
project's error body (:class:`ErrorBody`, what :mod:`app.web.errors` sends), replacing Litestar's
default ``{status_code, detail}`` 400. :func:`document_errors` runs when the application is built,
so a new operation is documented without its author doing anything.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec

from app.scheduling.unavailable import QueueUnavailable
from app.web.access import route_handlers
from app.web.errors import BUSY_CODE


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every error answer of the API."""

    code: str
    """A stable, machine-readable code (``validation_failed``, ``not_found``, ``conflict``…)."""
    message: str
    """What went wrong, for a person."""
    details: list[dict[str, Any]]
    """Per-field problems (``field``, ``message``, ``source``) of a 422; empty otherwise."""


_WHY = {
    400: "The request could not be read: malformed JSON, a path or query value of the wrong type.",
    401: "No API key, or an unknown, revoked or expired one.",
    403: "The key may not do this (a read key on a write; an organisation-level action).",
    404: "Nothing with this id in the key's workspace (another workspace's id included).",
    409: "A conflict with the current state: a name or key that must be unique, an "
    "Idempotency-Key reused with another body, an action the object's state does not allow.",
    413: "The request body is larger than the configured limit.",
    415: "The body is not JSON.",
    422: "A field is missing or invalid; ``details`` names each one.",
    429: "Too many requests (``rate_limited``): the key's or its workspace's rate limit for reads "
    "or for writes is reached; nothing was done. Retry after ``Retry-After`` seconds. Every answer "
    "to an authenticated request says where its tightest limit stands: ``RateLimit-Limit`` (the "
    "burst), ``RateLimit-Remaining`` (requests left in it), ``RateLimit-Reset`` (seconds until it "
    "is full again).",
    502: "An outside provider (Meta, the SERP provider, a funnel provider) failed the call.",
    503: f"Unavailable for a moment: the database is busy (``{BUSY_CODE}``; nothing was changed, "
    "retry after ``Retry-After`` seconds), or the job queue (Redis) is not reachable "
    f"(``{QueueUnavailable.code}``; retry in a moment, the message says when nothing was "
    "changed).",
}

_ALWAYS = (400, 401, 403, 404, 409, 422, 429, 503)
_WITH_BODY = (413, 415)
_PROVIDER_PREFIXES = ("/api/v1/adrules", "/api/v1/funnels", "/api/v1/ranktracking")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def error_statuses(path: str, methods: set[str]) -> tuple[int, ...]:
    """The error statuses an operation on ``path`` with ``methods`` can answer."""
    statuses = list(_ALWAYS)
    if methods & _BODY_METHODS:
        statuses += _WITH_BODY
    if path.startswith(_PROVIDER_PREFIXES):
        statuses.append(502)
    return tuple(sorted(statuses))


def document_errors(app: Litestar) -> None:
    """Give every ``/api/`` handler its error responses (a handler's own ones are kept)."""
    for path, handler in route_handlers(app):
        if (
            not isinstance(handler, HTTPRouteHandler)
            or not path.startswith("/api/")
            or not handler.include_in_schema
        ):
            continue
        responses: dict[int, ResponseSpec] = {
            status: ResponseSpec(
                data_container=ErrorBody,
                description=_WHY[status],
                generate_examples=False,
            )
            for status in error_statuses(path, set(handler.http_methods))
        }
        responses.update(handler.responses or {})
        handler.responses = responses
