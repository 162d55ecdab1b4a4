"""Changing a schedule after creation: the editable fields (RT-16; the next requests use them,
history is untouched) and the direct selection's own editor (RT-3). The data type and the list
are fixed."""

from __future__ import annotations

from datetime import datetime

from app.db.session import WriteSession
from app.engines.ranktracking.due import first_due
from app.engines.ranktracking.errors import ScheduleStateConflict
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.records import activity
from app.engines.ranktracking.schedules.config import checked_location, config_from_schedule
from app.engines.ranktracking.schedules.duplicates import (
    flush_refusing_duplicates,
    refuse_duplicate,
)
from app.engines.ranktracking.schedules.rules import (
    DEPTH_NAMES,
    FieldErrors,
    cap_cents,
    checked_selection,
    dedup_key,
    validated,
)
from app.engines.ranktracking.schemas import ScheduleEdit
from app.errors import ValidationFailed
from app.settings import RankTrackingSettings

FIXED_MESSAGE = "is fixed after creation; create another schedule instead"


async def edit(
    session: WriteSession,
    rt: RankTrackingSettings,
    schedule: Schedule,
    data: ScheduleEdit,
    now: datetime,
) -> Schedule:
    """RT-16: edit the editable fields; the next requests use them, history is untouched."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    if data.data_type is not None and data.data_type != schedule.data_type:
        raise ValidationFailed.field("data_type", FIXED_MESSAGE, code="fixed_field")
    if data.list_id is not None and data.list_id != schedule.list_id:
        raise ValidationFailed.field("list_id", FIXED_MESSAGE, code="fixed_field")
    current = config_from_schedule(schedule)
    errors = FieldErrors()
    cap = current.monthly_cap_cents
    if data.unlimited:
        cap = None
    elif data.monthly_cap_eur is not None:
        cap = cap_cents(data.monthly_cap_eur, errors)
    errors.raise_if_any()
    new = validated(
        name=data.name if data.name is not None else current.name,
        data_type=current.data_type,
        frequency=data.frequency or current.frequency,
        list_id=current.list_id,
        keywords=current.keywords,
        depth=data.depth or (DEPTH_NAMES.get(current.depth) if current.depth else None),
        location_code=data.location_code
        if data.location_code is not None
        else current.location_code,
        language_code=data.language_code or current.language_code,
        domain=data.domain or current.domain,
        devices=list(data.devices) if data.devices is not None else (current.devices or None),
        packages=list(data.packages) if data.packages is not None else (current.packages or None),
        monthly_cap_eur=None,
        max_selection=rt.max_selection_keywords,
    )
    await checked_location(session, new.location_code, kept=current.location_code)
    key = dedup_key(new)
    if key != schedule.dedup_key:
        await refuse_duplicate(session, schedule.workspace_id, key, schedule.id)
    changed: list[str] = []
    for attr, value in (
        ("name", new.name),
        ("depth", new.depth),
        ("location_code", new.location_code),
        ("language_code", new.language_code),
        ("domain", new.domain),
        ("devices", new.devices_text),
        ("packages", new.packages or None),
        ("monthly_cap_cents", cap),
        ("dedup_key", key),
    ):
        if getattr(schedule, attr) != value:
            setattr(schedule, attr, value)
            if attr != "dedup_key":
                changed.append(attr)
    if new.frequency != schedule.frequency:
        # RT-11: the next due time is recomputed from the moment of the change.
        schedule.frequency = new.frequency
        schedule.anchor_at = now
        schedule.next_due_at = first_due(now, new.frequency)
        schedule.retrying = False
        changed.append("frequency")
    if changed:
        schedule.updated_at = now
        await flush_refusing_duplicates(session)
        activity.record_schedule_change(
            session,
            schedule,
            kind=activity.SCHEDULE_EDITED,
            change=f"edited: {', '.join(changed)}",
            now=now,
        )
    return schedule


async def set_selection(
    session: WriteSession,
    rt: RankTrackingSettings,
    schedule: Schedule,
    keywords: list[str],
    now: datetime,
) -> Schedule:
    """The direct selection's own editor (RT-3)."""
    if schedule.status == ARCHIVED:
        raise ScheduleStateConflict("an ended schedule cannot be edited")
    if schedule.list_id is not None:
        raise ValidationFailed.field(
            "keywords", "this schedule follows a keyword list; edit the list instead"
        )
    errors = FieldErrors()
    selection = checked_selection(keywords, rt.max_selection_keywords, errors)
    errors.raise_if_any()
    schedule.keywords = selection
    schedule.updated_at = now
    activity.record_schedule_change(
        session,
        schedule,
        kind=activity.SCHEDULE_EDITED,
        change=f"selection set to {len(selection)} keywords",
        now=now,
    )
    return schedule
