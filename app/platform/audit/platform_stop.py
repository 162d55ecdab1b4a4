"""The installation-wide stop (``PLATFORM_STOP``) in every organisation's audit log.

The stop is an environment variable: it is set and lifted by an operator outside the service, so
no request ever records it. What the service does know is what each process finds when it
starts, and that is what goes in the log, as the system: for every organisation, the first start
that finds the stop in force after it was not (``stop.set``), and the first start that finds it
lifted after it was in force (``stop.cleared``). The entries are the changes seen, per
organisation, so a restart or a second process started with the same setting adds nothing, and an
organisation created while the stop was in force gets its entry from the next start. The time is
when a process first saw the change, not when the environment was edited.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import func, select, text

from app.db.dialect import is_postgres
from app.db.session import Database, WriteSession
from app.platform.audit.models import AuditEntry
from app.platform.audit.origin import SYSTEM
from app.platform.audit.record import record
from app.platform.models import Organisation

log = logging.getLogger(__name__)

OBJECT_TYPE = "platform_stop"
IN_FORCE = "stop.set"
LIFTED = "stop.cleared"
REASON = "PLATFORM_STOP is set for this installation"

_LOCK_KEY = 0x5357_4C53_544F50  # PostgreSQL: one starting process at a time compares and records
"""Any constant of its own: two processes starting together must not both see the change."""


async def _last_seen(session: WriteSession) -> dict[int, str]:
    """Per organisation, the last platform-stop entry's action."""
    latest = (
        select(func.max(AuditEntry.id).label("id"))
        .where(AuditEntry.object_type == OBJECT_TYPE)
        .group_by(AuditEntry.organisation_id)
        .subquery()
    )
    rows = await session.execute(
        select(AuditEntry.organisation_id, AuditEntry.action).join(
            latest, latest.c.id == AuditEntry.id
        )
    )
    return {int(org): str(action) for org, action in rows.all()}


async def record_at_start(db: Database, *, stopped: bool, now: datetime) -> int:
    """Record a change of the platform stop that this starting process is the first to see, in
    every organisation it is a change for; returns how many organisations got an entry."""
    async with db.write() as uow:
        session = uow.session
        if is_postgres(session):
            await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        last = await _last_seen(session)
        organisations = list(
            await session.scalars(select(Organisation.id).order_by(Organisation.id))
        )
        recorded = 0
        for organisation_id in organisations:
            was_in_force = last.get(organisation_id) == IN_FORCE
            if stopped == was_in_force:
                continue
            await record(
                session,
                action=IN_FORCE if stopped else LIFTED,
                object_type=OBJECT_TYPE,
                object_id="PLATFORM_STOP",
                organisation_id=organisation_id,
                after={"reason": REASON} if stopped else None,
                now=now,
                actor=SYSTEM,
            )
            recorded += 1
    if recorded:
        log.info(
            "platform stop %s: recorded in the audit log of %d organisation(s)",
            "in force" if stopped else "lifted",
            recorded,
        )
    return recorded
