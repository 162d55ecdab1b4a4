"""Deleting a contact really ends things: their personal data erased, their runs ended and every
pending effect addressed to them cancelled, in one transaction (hard case 5).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update

from app.db.session import WriteSession
from app.engines.funnels.contacts.erasure import erase_personal_data, person_of
from app.engines.funnels.contacts.store import get_contact
from app.engines.funnels.models import Run
from app.engines.funnels.outbox.due.cancel import cancel_pending_effects
from app.engines.funnels.runs.states import RUN_ACTIVE, RUN_CANCELLED, RUNS
from app.platform import audit
from app.platform.crypto import SecretBox


async def delete_contact(
    session: WriteSession,
    workspace_id: int,
    contact_id: int,
    now: datetime,
    *,
    address_key: bytes | None = None,
    box: SecretBox | None = None,
) -> None:
    """Erase the contact's personal data, end its runs and cancel every pending effect addressed
    to it, in one transaction (hard case 5: a deletion that leaves a sequence is not one).

    With ``address_key`` (the instance key derived for
    :data:`~app.engines.funnels.contacts.erased_addresses.PURPOSE`), a suppressed address's
    suppression is kept under its keyed hash, so the address is not mailed again if it comes back.
    With ``box`` (the instance's secret box), stored idempotency answers naming the contact are
    opened and emptied too (FN-33)."""
    contact = await get_contact(session, workspace_id, contact_id)
    if address_key is not None:
        from app.engines.funnels.contacts.erased_addresses import remember

        await remember(session, address_key, contact, now)
    person = person_of(contact, box)
    contact.deleted_at = now
    contact.updated_at = now
    await session.flush()
    await end_runs_of_contact(session, contact_id, now, reason="contact_deleted")
    # Every table the personal-data registry declares, the contact row's own columns last.
    await erase_personal_data(session, person)
    # The ORM copy was emptied behind its back: read it again if anyone asks.
    session.expire(contact)
    # After the erasure, and naming the contact by id only: the entry keeps no address.
    await audit.record(
        session,
        action="contact.erased",
        object_type="contact",
        object_id=contact_id,
        workspace_id=workspace_id,
        now=now,
    )


async def end_runs_of_contact(
    session: WriteSession, contact_id: int, now: datetime, *, reason: str
) -> None:
    # Only an active run is ended: a run that already ended keeps the way it ended.
    await session.execute(
        RUNS.transition(
            update(Run)
            .execution_options(synchronize_session=False)
            .where(Run.contact_id == contact_id),
            RUN_CANCELLED,
            from_=(RUN_ACTIVE,),
        ).values(
            wake_at=None,
            lease_owner=None,
            lease_until=None,
            ended_at=now,
            updated_at=now,
            exit_reason=reason,
        )
    )
    await cancel_pending_effects(session, now, reason=reason, contact_id=contact_id)
