"""A schedule's configuration (:class:`~app.engines.ranktracking.schedules.rules.Config`): validated
from what a person sent, or read back from the stored row, and the keyword count it will request
checked against the per-run limit (RT-5)."""

from __future__ import annotations

from app.db.session import ReadSession
from app.engines.ranktracking import locations
from app.engines.ranktracking.errors import ValidationFailed
from app.engines.ranktracking.lists import get_list
from app.engines.ranktracking.members import list_size
from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.rules import (
    Config,
    over_run_limit,
    unknown_location_message,
    validated,
)
from app.engines.ranktracking.schemas import RankScheduleIn
from app.settings import RankTrackingSettings


def config_of(
    data: RankScheduleIn, rt: RankTrackingSettings, *, require_name: bool = True
) -> Config:
    return validated(
        name=data.name,
        data_type=data.data_type,
        frequency=data.frequency,
        list_id=data.list_id,
        keywords=data.keywords,
        depth=data.depth,
        location_code=data.location_code,
        language_code=data.language_code,
        domain=data.domain,
        devices=list(data.devices) if data.devices is not None else None,
        packages=list(data.packages) if data.packages is not None else None,
        monthly_cap_eur=data.monthly_cap_eur,
        max_selection=rt.max_selection_keywords,
        require_name=require_name,
    )


def config_from_schedule(schedule: Schedule) -> Config:
    return Config(
        name=schedule.name,
        data_type=schedule.data_type,
        frequency=schedule.frequency,
        list_id=schedule.list_id,
        keywords=list(schedule.keywords) if schedule.keywords is not None else None,
        depth=schedule.depth,
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        devices=schedule.device_list,
        packages=list(schedule.packages or []),
        monthly_cap_cents=schedule.monthly_cap_cents,
    )


async def checked_keyword_count(
    session: ReadSession, workspace_id: int, config: Config, rt: RankTrackingSettings
) -> int:
    """Resolved members now; a list past the per-run limit is refused (RT-5)."""
    if config.list_id is None:
        return len(config.keywords or [])
    await get_list(session, workspace_id, config.list_id)
    size = await list_size(session, config.list_id)
    if size > rt.max_run_keywords:
        raise over_run_limit(size, rt.max_run_keywords)
    return size


async def checked_location(
    session: ReadSession, location_code: int | None, *, kept: int | None = None
) -> None:
    """RT-60: a schedule names a location the provider lists now (any synced code: country,
    region, city, postal code…). A dropped one is refused for a new choice; a schedule that
    already uses it (``kept``, its code before an edit) keeps it."""
    if location_code is None or location_code == kept:
        return
    location = await locations.get(session, location_code)
    if location is None:
        raise ValidationFailed.field(
            "location_code", unknown_location_message(location_code), code="unknown_location"
        )
    if location.dropped:
        raise ValidationFailed.field(
            "location_code",
            f"{location_code} ({location.name}) is no longer offered by the provider",
            code="dropped_location",
        )
