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


__all__ = [
    "DuplicateSchedule",
    "ListNotFound",
    "PostbackRefused",
    "PostbackUnreadable",
    "RunNotFound",
    "ScheduleLimitReached",
    "ScheduleNotFound",
    "ScheduleStateConflict",
    "ValidationFailed",
]
