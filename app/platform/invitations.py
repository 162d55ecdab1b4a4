"""Inviting people: a one-time link that expires, accepted by setting a password.

The link carries a random token; only its SHA-256 is stored. Inviting answers the same way
whatever the e-mail (an address with an account elsewhere is found out only by its owner, on
accepting), so the form does not tell strangers which addresses have accounts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select

from app.db.session import ReadSession, WriteSession
from app.errors import Conflict, NotFound, ValidationFailed
from app.platform import audit, service
from app.platform.models import ROLES, Invitation, User, Workspace
from app.platform.organisation import org_workspace
from app.platform.tokens import sha256_hex

INVITE_TOKEN_PREFIX = "swinv_"  # noqa: S105 - a prefix, not a secret


@dataclass(frozen=True, slots=True)
class NewInvitation:
    invitation: Invitation
    token: str
    """Shown once to the inviter and sent by mail; never stored."""


def accept_path(token: str) -> str:
    return f"/invite/{token}"


async def invite(
    session: WriteSession,
    *,
    organisation_id: int,
    workspace_id: int,
    email: str,
    role: str,
    invited_by: int,
    now: datetime,
    lifetime: timedelta,
) -> NewInvitation:
    if role not in ROLES:
        raise ValidationFailed.field("role", f"must be one of {', '.join(ROLES)}")
    email = service.normalise_email(email)
    await org_workspace(session, organisation_id, workspace_id)
    token = INVITE_TOKEN_PREFIX + secrets.token_urlsafe(32)
    invitation = Invitation(
        organisation_id=organisation_id,
        workspace_id=workspace_id,
        email=email,
        role=role,
        token_hash=sha256_hex(token),
        invited_by=invited_by,
        created_at=now,
        expires_at=now + lifetime,
    )
    session.add(invitation)
    await session.flush()
    await _audit(session, "invitation.created", invitation, now)
    return NewInvitation(invitation, token)


async def _audit(session: WriteSession, action: str, invitation: Invitation, now: datetime) -> None:
    await audit.record(
        session,
        action=action,
        object_type="invitation",
        object_id=invitation.id,
        workspace_id=invitation.workspace_id,
        organisation_id=invitation.organisation_id,
        after={"email": invitation.email, "role": invitation.role},
        now=now,
    )


async def pending(session: ReadSession, organisation_id: int, now: datetime) -> list[Invitation]:
    rows = await session.scalars(
        select(Invitation)
        .where(
            Invitation.organisation_id == organisation_id,
            Invitation.accepted_at.is_(None),
            Invitation.revoked_at.is_(None),
            Invitation.expires_at > now,
        )
        .order_by(Invitation.id)
    )
    return list(rows)


async def revoke(
    session: WriteSession, *, organisation_id: int, invitation_id: int, now: datetime
) -> None:
    invitation = await session.get(Invitation, invitation_id)
    if invitation is None or invitation.organisation_id != organisation_id:
        raise NotFound("invitation not found")
    if invitation.revoked_at is None:
        invitation.revoked_at = now
        await _audit(session, "invitation.revoked", invitation, now)


@dataclass(frozen=True, slots=True)
class OpenInvitation:
    invitation: Invitation
    workspace: Workspace


async def find_open(session: ReadSession, token: str, now: datetime) -> OpenInvitation:
    """The invitation of a link that can still be accepted; any other link is not found."""
    invitation = await session.scalar(
        select(Invitation).where(Invitation.token_hash == sha256_hex(token))
    )
    if (
        invitation is None
        or invitation.accepted_at is not None
        or invitation.revoked_at is not None
        or invitation.expires_at <= now
    ):
        raise NotFound("this invitation link is not valid (used, revoked or expired)")
    workspace = await session.get(Workspace, invitation.workspace_id)
    if workspace is None:
        raise NotFound("this invitation link is not valid (its workspace is gone)")
    return OpenInvitation(invitation, workspace)


async def accept(
    session: WriteSession, *, token: str, password: str, name: str, now: datetime
) -> User:
    """Create the invited person's account, add them to the workspace, use up the link."""
    found = await find_open(session, token, now)
    invitation = found.invitation
    exists = await session.scalar(select(User.id).where(User.email == invitation.email))
    if exists is not None:
        raise Conflict(
            f"{invitation.email} already has an account: sign in with it instead",
            code="email_taken",
        )
    user = await service.create_user(
        session,
        organisation_id=invitation.organisation_id,
        email=invitation.email,
        password=password,
        now=now,
        name=name.strip()[:200],
    )
    await service.add_member(
        session, user_id=user.id, workspace_id=invitation.workspace_id, role=invitation.role
    )
    invitation.accepted_at = now
    await session.flush()
    await _audit(session, "invitation.accepted", invitation, now)
    return user
