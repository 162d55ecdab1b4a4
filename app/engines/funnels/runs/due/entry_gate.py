"""Re-entry at most once per N days (``settings.reentry_days``), held when matchers run side by side.

The runs' unique index keeps one *active* run per contact per funnel (FN-3), but a run can start
and end between one matcher reading a contact's history and another inserting their next run.
This table holds, per (funnel, contact), when the contact last entered a funnel that limits
re-entry. After inserting its runs, the caller stamps them here with one conditional upsert
(``ON CONFLICT DO UPDATE … WHERE the stamp is at least N days old``): the contacts it returns
were admitted, the others entered less than N days ago and their new runs are taken back in the
same transaction. On PostgreSQL the upsert waits for a concurrent matcher's uncommitted stamp and
re-checks its condition against it once committed; SQLite has one writer at a time.

Entries made before the funnel limited re-entry have no stamp; the caller reads those from the
runs themselves (:func:`app.engines.funnels.runs.due.entry.enter_many`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.dialect import insert
from app.db.session import WriteSession
from app.db.types import BigId, UTCDateTime


class EntryGate(Base):
    """When a contact last entered a funnel that limits re-entry to once per N days."""

    __tablename__ = "funnel_entry_gate"

    funnel_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("funnels.id", ondelete="CASCADE"), primary_key=True
    )
    contact_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("contacts.id", ondelete="CASCADE"), primary_key=True
    )
    entered_at: Mapped[datetime] = mapped_column(UTCDateTime)


async def stamp(
    session: WriteSession,
    funnel_id: int,
    contact_ids: Iterable[int],
    *,
    now: datetime,
    days: int,
) -> set[int]:
    """Record that these contacts enter ``funnel_id`` now; returns those admitted: no stamp yet,
    or one at least ``days`` old. One statement, rows in contact order (concurrent matchers
    take the row locks in the same order)."""
    rows = [
        {"funnel_id": funnel_id, "contact_id": cid, "entered_at": now}
        for cid in sorted(set(contact_ids))
    ]
    if not rows:
        return set()
    table = EntryGate.__table__
    statement = insert(session, table)
    statement = statement.on_conflict_do_update(
        index_elements=[table.c.funnel_id, table.c.contact_id],
        set_={"entered_at": statement.excluded.entered_at},
        where=table.c.entered_at <= now - timedelta(days=days),
    )
    # Rows as parameters (executemany): the statement is cached, not compiled per call.
    return set(await session.scalars(statement.returning(table.c.contact_id), rows))
