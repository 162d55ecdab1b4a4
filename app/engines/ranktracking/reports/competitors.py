"""Competitor domains of a SERP schedule: up to 5, read from the same result pages as the tracked
domain, so they cost nothing extra. A change applies from the next admitted run (each run keeps
the list it was admitted with, like the tracked domain)."""

from __future__ import annotations

import re
from datetime import datetime

from app.db.session import WriteSession
from app.engines.ranktracking.models import ARCHIVED, Schedule
from app.engines.ranktracking.schedules.rules import normalise_domain
from app.errors import ValidationFailed

MAX_COMPETITORS = 5
_DOMAIN = re.compile(
    r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{1,62}$"
)


def checked_domains(schedule: Schedule, raw: list[str]) -> list[str]:
    if schedule.data_type != "serp":
        raise ValidationFailed.field("domains", "only SERP schedules have competitors")
    if schedule.status == ARCHIVED:
        raise ValidationFailed.field("domains", "the schedule has ended")
    domains: list[str] = []
    for value in raw:
        domain = normalise_domain(value)
        if not domain:
            continue
        if not _DOMAIN.match(domain):
            raise ValidationFailed.field("domains", f"{value!r} is not a domain name")
        if domain == normalise_domain(schedule.domain or ""):
            raise ValidationFailed.field("domains", f"{domain} is the tracked domain")
        if domain not in domains:
            domains.append(domain)
    if len(domains) > MAX_COMPETITORS:
        raise ValidationFailed.field("domains", f"at most {MAX_COMPETITORS} competitors")
    return domains


async def set_competitors(
    session: WriteSession, schedule: Schedule, raw: list[str], now: datetime
) -> list[str]:
    domains = checked_domains(schedule, raw)
    schedule.competitors = domains or None
    schedule.updated_at = now
    await session.flush()
    return domains
