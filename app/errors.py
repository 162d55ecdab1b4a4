"""Domain errors shared by the platform and the engines.

Each carries a stable machine-readable ``code`` and the HTTP status the web layer answers with (the
mapping to HTTP happens in one place, ``app.web.errors``). Engines subclass these in their own
``errors`` module.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    status = 400
    code = "bad_request"

    def __init__(
        self, message: str, *, code: str | None = None, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details = details or []


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class ValidationFailed(DomainError):
    """Input that parsed but breaks a rule; ``details`` name the fields."""

    status = 422
    code = "validation_failed"

    @classmethod
    def field(cls, field: str, message: str, *, code: str = "invalid") -> ValidationFailed:
        return cls(
            f"{field}: {message}", details=[{"field": field, "message": message, "code": code}]
        )


class Unauthorized(DomainError):
    status = 401
    code = "unauthorized"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"
