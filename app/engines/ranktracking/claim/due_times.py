"""A schedule's next due time after a request, and the retry an hour later when a request could
not go out (RT-10, RT-26, RT-31)."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.engines.ranktracking.due import due_after_run, first_due
from app.engines.ranktracking.models import Schedule
from app.scheduling.sweeper import HOURLY_AT_20

RETRY_AFTER = timedelta(hours=1)
"""RT-31: the first retry after a dispatch that did not reach the worker waits one hour."""


def advance(schedule: Schedule, *, recurring: bool, admitted: bool, now: datetime) -> None:
    """Move the due time after a request (RT-10, RT-26): a recurring one to the next due time
    after it, an admitted manual one (or the baseline) re-anchored at its start."""
    if recurring:
        schedule.next_due_at = due_after_run(
            schedule.anchor_at, schedule.frequency, schedule.next_due_at, now
        )
        schedule.retrying = False
    elif admitted:
        # An admitted manual request (or the baseline) deliberately re-anchors at its start.
        schedule.anchor_at = now
        schedule.next_due_at = first_due(now, schedule.frequency)
        schedule.retrying = False
    schedule.updated_at = now


def retry_slot(after: datetime) -> datetime:
    """The dispatch sweep's first slot (:20 UTC) at least :data:`RETRY_AFTER` after ``after``."""
    return HOURLY_AT_20.next_tick(after + RETRY_AFTER - timedelta(microseconds=1))


def schedule_retry(schedule: Schedule, now: datetime, *, tick: datetime | None = None) -> None:
    """RT-31: retry in one hour; the schedule shows "retrying" until a request goes out.

    The hour counts from the sweep's nominal tick when there is one (``tick``, e.g. 09:20:00), not
    from the moment the sweep happened to start (09:20:00.35): the next sweep takes what is due
    by its own nominal time, 10:20:00, and a retry computed from the wall clock would miss it by
    the start-up delay and wait a second hour.

    A retry outside the sweep (a manual request whose hand-off failed at 09:32) is due at the
    sweep's next slot at least an hour away (11:20), not at 10:32, which only the 11:20 sweep
    would take anyway while the schedule showed a time nothing happens at (RT-52)."""
    schedule.next_due_at = retry_slot(tick or now)
    schedule.retrying = True
    schedule.updated_at = now
