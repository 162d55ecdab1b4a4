"""Position tracking's domain errors (mapped to HTTP by the web layer like every DomainError)."""

from __future__ import annotations

from app.errors import Conflict, DomainError, NotFound, Unauthorized, ValidationFailed


class ScheduleNotFound(NotFound):
    code = "schedule_not_found"


class ListNotFound(NotFound):
    code = "list_not_found"


class RunNotFound(NotFound):
    code = "run_not_found"


class DuplicateSchedule(Conflict):
    """RT-15: a live schedule already measures the same list in the same context."""

    code = "duplicate_schedule"


class ScheduleLimitReached(Conflict):
    """RT-2: the workspace already has its maximum of active or paused schedules."""

    code = "schedule_limit"


class ScheduleStateConflict(Conflict):
    """The schedule's status does not allow this action (e.g. resuming an ended schedule)."""

    code = "schedule_state"


class PostbackRefused(Unauthorized):
    """A postback whose token does not authenticate a child run (nothing is stored)."""

    code = "postback_unauthorized"


class PostbackUnreadable(DomainError):
    """A postback body that is not a provider result (bad gzip, too large, not the shape)."""

    status = 400
    code = "postback_unreadable"


class SearchConsoleNotConfigured(Conflict):
    """The workspace has no service-account key to read Search Console with (RT-68)."""

    code = "search_console_not_configured"


class SearchConsoleRefused(ValidationFailed):
    """Google refused the workspace's service account (its key, or its access to the property):
    the workspace must fix the key or share the property; nothing on Google's side is failing."""

    code = "search_console_refused"


class SearchConsoleUnavailable(DomainError):
    """The Search Console API failed, timed out or answered something unreadable."""

    status = 502
    code = "search_console_unavailable"


__all__ = [
    "DuplicateSchedule",
    "ListNotFound",
    "PostbackRefused",
    "PostbackUnreadable",
    "RunNotFound",
    "ScheduleLimitReached",
    "ScheduleNotFound",
    "ScheduleStateConflict",
    "SearchConsoleNotConfigured",
    "SearchConsoleRefused",
    "SearchConsoleUnavailable",
    "ValidationFailed",
]
