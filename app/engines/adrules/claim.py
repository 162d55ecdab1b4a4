"""Claim due rules exactly once and advance their ``next_execution_at`` in the same transaction
(spec AR-10).

PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED`` — a second process sweeping at the same moment skips
the rows the first holds, and once the first commits those rows are no longer due. SQLite: the
write transaction starts with ``BEGIN IMMEDIATE``, so claims are serialised by the database lock.
The status test is a literal, not a parameter, so both planners can use the partial due index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import bindparam, or_, select, text, update

from app.db.session import Database
from app.engines.adrules.documents import load_schedule
from app.engines.adrules.models import Rule
from app.engines.adrules.schedule import following_execution
from app.platform.models import Workspace

ACTIVE = text("adrules_rules.status = 'active'")


@dataclass(frozen=True, slots=True)
class ClaimedRule:
    id: int
    workspace_id: int
    timezone: str
    due_at: datetime
    next_execution_at: datetime | None


def zone(name: str) -> ZoneInfo:
    """The workspace's zone; UTC when the stored name is unknown to this machine."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def due_rules_query(now: datetime, limit: int) -> Any:
    """Active rules due at ``now`` whose date window is open, oldest due first."""
    return (
        select(
            Rule.id, Rule.workspace_id, Rule.schedule, Rule.next_execution_at, Workspace.timezone
        )
        .join(Workspace, Workspace.id == Rule.workspace_id)
        .where(
            ACTIVE,
            Rule.next_execution_at <= now,
            or_(Rule.window_starts_at.is_(None), Rule.window_starts_at <= now),
            or_(Rule.window_ends_at.is_(None), Rule.window_ends_at > now),
        )
        .order_by(Rule.next_execution_at)
        .limit(limit)
    )


async def claim_due_rules(db: Database, now: datetime, limit: int) -> list[ClaimedRule]:
    """Take up to ``limit`` due rules and move each one's ``next_execution_at`` on."""
    query = due_rules_query(now, limit)
    if db.is_postgres:
        query = query.with_for_update(skip_locked=True, of=Rule)
    async with db.write() as uow:
        session = uow.session
        # Rules whose window closed while due would stay "due" forever: clear them first.
        await session.execute(
            update(Rule)
            .where(ACTIVE, Rule.next_execution_at <= now, Rule.window_ends_at <= now)
            .values(next_execution_at=None)
        )
        rows = (await session.execute(query)).all()
        claimed: list[ClaimedRule] = []
        for rule_id, workspace_id, schedule_doc, due_at, tz_name in rows:
            schedule = load_schedule(schedule_doc)
            following = following_execution(schedule, now=now, tz=zone(tz_name))
            claimed.append(ClaimedRule(rule_id, workspace_id, tz_name, due_at, following))
        if claimed:
            await session.execute(
                Rule.__table__.update()  # type: ignore[attr-defined]
                .where(Rule.id == bindparam("rid"))
                .values(next_execution_at=bindparam("nxt"), last_dispatched_at=now),
                [{"rid": c.id, "nxt": c.next_execution_at} for c in claimed],
            )
    return claimed
