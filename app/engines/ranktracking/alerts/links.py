"""The address of a schedule's page, which the alerts and the e-mail reports link to."""

from __future__ import annotations

from app.engines.ranktracking.deps import RankTrackingDeps


def schedule_page_url(deps: RankTrackingDeps, schedule_id: int) -> str:
    return f"{deps.settings.web.public_url.rstrip('/')}/ui/ranktracking/schedules/{schedule_id}"
