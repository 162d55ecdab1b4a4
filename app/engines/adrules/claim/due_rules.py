"""Claim due rules exactly once and advance their ``next_execution_at`` in the same transaction
(spec AR-10).

The claim is the shared primitive (:mod:`app.scheduling.claim`): on PostgreSQL a second process
sweeping at the same moment skips the rows the first holds (``SKIP LOCKED``), and once the first
commits those rows are no longer due; on SQLite ``BEGIN IMMEDIATE`` serialises the claims. The
status test is a literal, not a parameter, so both planners can use the partial due index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, select, text, update

from app.db.session import Database
from app.engines.adrules.documents import load_schedule
from app.engines.adrules.due import following_execution
from app.engines.adrules.models import Rule
from app.engines.adrules.rule_states import RULES, SCHEDULED_STATUSES
from app.platform.models import Workspace
from app.scheduling.claim import Claim
from app.scheduling.zones import zone_or_utc

ACTIVE = text(RULES.where(*SCHEDULED_STATUSES, qualified=True))
"""Rules the sweep runs (active ones and shadow ones, which record without writing); the same
predicate as the partial due index, so the planners use it."""


@dataclass(frozen=True, slots=True)
class ClaimedRule:
    id: int
    workspace_id: int
    timezone: str
    due_at: datetime
    next_execution_at: datetime | None


DUE = Claim(
    table=Rule.__table__,  # type: ignore[arg-type]
    due=(
        f"{RULES.where(*SCHEDULED_STATUSES, qualified=True)} AND next_execution_at <= :now"
        " AND (window_starts_at IS NULL OR window_starts_at <= :now)"
        " AND (window_ends_at IS NULL OR window_ends_at > :now)"
    ),
    order_by="next_execution_at",
    returning=("id", "workspace_id", "schedule", "next_execution_at"),
    sets={"last_dispatched_at": ":now"},
)
"""Active and shadow rules due now whose date window is open, oldest due first. The claim itself is the
advance of ``next_execution_at`` in the same transaction (no owner column: once committed, the
rule is simply no longer due)."""


async def claim_due_rules(db: Database, now: datetime, limit: int) -> list[ClaimedRule]:
    """Take up to ``limit`` due rules and move each one's ``next_execution_at`` on."""
    async with db.write() as uow:
        session = uow.session
        # Rules whose window closed while due would stay "due" forever: clear them first.
        await session.execute(
            update(Rule)
            .where(ACTIVE, Rule.next_execution_at <= now, Rule.window_ends_at <= now)
            .values(next_execution_at=None)
        )
        rows = sorted(await DUE.take_in(session, now=now, limit=limit), key=lambda r: r[3])
        if not rows:
            return []
        zones = dict(
            (
                await session.execute(
                    select(Workspace.id, Workspace.timezone).where(
                        Workspace.id.in_({r[1] for r in rows})
                    )
                )
            ).all()
        )
        claimed: list[ClaimedRule] = []
        for rule_id, workspace_id, schedule_doc, due_at in rows:
            tz_name = zones.get(workspace_id, "UTC")
            following = following_execution(
                load_schedule(schedule_doc), now=now, tz=zone_or_utc(tz_name)
            )
            claimed.append(ClaimedRule(rule_id, workspace_id, tz_name, due_at, following))
        await session.execute(
            Rule.__table__.update()  # type: ignore[attr-defined]
            .where(Rule.id == bindparam("rid"))
            .values(next_execution_at=bindparam("nxt")),
            [{"rid": c.id, "nxt": c.next_execution_at} for c in claimed],
        )
    return claimed
