"""An organisation's two-factor requirement: off, for owners and admins, or for everyone.

A person it applies to who has not enrolled is taken to enrolment right after their password and
gets no session before enrolling. When the requirement is raised, the open sessions of the
people it now applies to and who have not enrolled end, so nobody goes on without it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import two_factor
from app.platform.models import ORG_MANAGERS, User, UserSession
from app.platform.two_factor_models import REQUIREMENTS, OrganisationSecurity, UserTotp


def applies(requirement: str, org_role: str | None) -> bool:
    """Whether ``requirement`` asks a person with ``org_role`` for a second factor."""
    if requirement == "everyone":
        return True
    return requirement == "owners_and_admins" and org_role in ORG_MANAGERS


async def requirement(session: ReadSession, organisation_id: int) -> str:
    value = await session.scalar(
        select(OrganisationSecurity.two_factor_required).where(
            OrganisationSecurity.organisation_id == organisation_id
        )
    )
    return value or "off"


async def required_for(session: ReadSession, user: User) -> bool:
    return applies(await requirement(session, user.organisation_id), user.org_role)


async def set_requirement(
    session: WriteSession, *, organisation_id: int, actor_id: int, value: str, now: datetime
) -> int:
    """Set the requirement; returns how many sessions ended (people it now applies to who have
    not enrolled). The person setting it must have enrolled first when it applies to them, so
    nobody locks themselves out of the page they are on."""
    if value not in REQUIREMENTS:
        raise ValidationFailed.field(
            "two_factor_required", f"must be one of {', '.join(REQUIREMENTS)}"
        )
    actor = await session.get(User, actor_id)
    if actor is None or actor.organisation_id != organisation_id:
        raise NotFound("person not found")
    if applies(value, actor.org_role) and not await two_factor.is_enrolled(session, actor_id):
        raise Conflict(
            "turn on two-factor sign-in for yourself first (Account security)",
            code="enrol_first",
        )
    row = await session.get(OrganisationSecurity, organisation_id)
    if row is None:
        session.add(
            OrganisationSecurity(
                organisation_id=organisation_id, two_factor_required=value, updated_at=now
            )
        )
    else:
        row.two_factor_required = value
        row.updated_at = now
    await session.flush()
    enrolled = select(UserTotp.user_id).where(UserTotp.confirmed_at.is_not(None))
    people = await session.execute(
        select(User.id, User.org_role).where(
            User.organisation_id == organisation_id, User.id.not_in(enrolled)
        )
    )
    affected = [uid for uid, role in people.all() if applies(value, role)]
    if not affected:
        return 0
    result = await session.execute(
        delete(UserSession)
        .where(UserSession.user_id.in_(affected))
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)
