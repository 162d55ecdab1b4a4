"""Domain errors of the Funnels engine (mapped to HTTP by the web layer)."""

from __future__ import annotations

from typing import Any

from app.errors import Conflict, NotFound, ValidationFailed


class ContactNotFound(NotFound):
    code = "contact_not_found"


class FunnelNotFound(NotFound):
    code = "funnel_not_found"


class DuplicateContact(Conflict):
    code = "duplicate_contact"


class InvalidGraph(ValidationFailed):
    """Publishing refused: the validator found problems (each names its node and rule)."""

    code = "invalid_graph"

    def __init__(self, problems: list[dict[str, Any]]) -> None:
        super().__init__(
            f"the funnel has {len(problems)} problem(s) and cannot be published",
            details=problems,
        )


class NotPublished(Conflict):
    code = "not_published"
