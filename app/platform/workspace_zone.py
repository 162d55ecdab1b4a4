"""A workspace's time zone: the IANA zone its schedules, date windows and "today" follow where a
rule or a funnel names none (spec AR-45). Set by workspace admins over the API (``PATCH
/api/v1/workspace``) and on the workspace settings page; a name that is not in the IANA time
zone database (``Europe/Berlin``, ``America/New_York``, ``UTC`` …) is refused, naming the field.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from zoneinfo import available_timezones

from app.db.session import WriteSession
from app.errors import ValidationFailed
from app.platform import audit
from app.platform.models import Workspace
from app.platform.organisation import org_workspace


@lru_cache(maxsize=1)
def iana_zones() -> frozenset[str]:
    """Every zone name of the IANA database this installation carries."""
    return frozenset(available_timezones())


def checked_zone(name: str) -> str:
    """``name`` when it is an IANA zone (surrounding spaces ignored); else a 422 naming
    ``timezone``."""
    zone = name.strip()
    if zone not in iana_zones():
        raise ValidationFailed.field(
            "timezone",
            f"{name!r} is not an IANA time zone name: write it as Region/City, e.g. "
            "Europe/Berlin, America/New_York or Asia/Jakarta (or UTC)",
            code="unknown_zone",
        )
    return zone


async def set_workspace_timezone(
    session: WriteSession, *, organisation_id: int, workspace_id: int, timezone: str, now: datetime
) -> Workspace:
    """Change the workspace's zone (audited with the zone before and after)."""
    zone = checked_zone(timezone)
    ws = await org_workspace(session, organisation_id, workspace_id)
    before = ws.timezone
    if before == zone:
        return ws
    ws.timezone = zone
    await session.flush()
    await audit.record(
        session,
        action="workspace.timezone_changed",
        object_type="workspace",
        object_id=ws.id,
        workspace_id=ws.id,
        organisation_id=organisation_id,
        before={"timezone": before},
        after={"timezone": zone},
        now=now,
    )
    return ws
