"""Drafts of new schedules pre-filled from an existing one: "duplicate for mobile" (RT-17)."""

from __future__ import annotations

from decimal import Decimal

from app.engines.ranktracking.models import Schedule
from app.engines.ranktracking.schedules.rules import DEPTH_NAMES
from app.engines.ranktracking.schemas import RankScheduleIn
from app.errors import ValidationFailed


def mobile_draft(schedule: Schedule) -> RankScheduleIn:
    """RT-17: a new mobile SERP schedule pre-filled from ``schedule`` (the source is untouched)."""
    if schedule.data_type != "serp":
        raise ValidationFailed.field("data_type", "only SERP schedules have devices")
    return RankScheduleIn(
        name=f"{schedule.name} (mobile)",
        data_type="serp",
        frequency=schedule.frequency,  # type: ignore[arg-type]
        list_id=schedule.list_id,
        keywords=list(schedule.keywords) if schedule.keywords is not None else None,
        depth=DEPTH_NAMES.get(schedule.depth or 10),  # type: ignore[arg-type]
        location_code=schedule.location_code,
        language_code=schedule.language_code,
        domain=schedule.domain,
        devices=["mobile"],
        monthly_cap_eur=(
            Decimal(schedule.monthly_cap_cents) / 100 if schedule.monthly_cap_cents else None
        ),
    )
