"""Dashboard sessions: a person's password checked, their session opened in a workspace, found
for each request, pointed at another of their workspaces and ended, each step in the
organisation's audit log. Services never commit: the caller's unit of work does."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timedelta

from sqlalchemy import select, update

from app.db.session import ReadSession, WriteSession
from app.errors import NotFound
from app.platform import audit
from app.platform.models import Membership, User, UserSession, Workspace
from app.platform.service import Principal
from app.platform.tokens import dummy_hash, hash_password, needs_rehash, sha256_hex, verify_password

SESSION_LIFETIME = timedelta(days=14)


async def authenticate(session: ReadSession, *, email: str, password: str) -> User | None:
    """The person with these credentials, or None.

    Takes a read session on purpose: argon2 costs a few hundred milliseconds of CPU, which runs in
    a thread and must not hold SQLite's write lock meanwhile. An unknown e-mail is checked against
    a dummy hash, so the answer takes as long and does not reveal which e-mails have accounts.
    """
    user = await session.scalar(select(User).where(User.email == email.strip().lower()))
    stored = await asyncio.to_thread(dummy_hash) if user is None else user.password_hash
    if not await asyncio.to_thread(verify_password, stored, password):
        return None
    return user


async def record_sign_in_burst(session: WriteSession, *, email: str, now: datetime) -> None:
    """The sign-in throttle refused a burst of failed attempts at an account: the account's
    organisation reads it in its audit log (an address with no account has no log to go in)."""
    user = await session.scalar(select(User).where(User.email == email.strip().lower()))
    if user is None:
        return
    await audit.record(
        session,
        action="session.sign_in_throttled",
        object_type="user",
        object_id=user.id,
        organisation_id=user.organisation_id,
        after={"email": user.email},
        now=now,
        actor=audit.ANONYMOUS,
    )


async def open_session(
    session: WriteSession, *, user: User, password: str | None, now: datetime
) -> str | None:
    """Open a dashboard session in the person's first workspace; returns the cookie token, or
    None when the person belongs to no workspace. A hash made with weaker parameters than the
    current ones is replaced while the password is at hand (``None`` after a second step, where
    it no longer is)."""
    membership = await session.scalar(
        select(Membership).where(Membership.user_id == user.id).order_by(Membership.id).limit(1)
    )
    if membership is None:
        return None
    if password is not None and needs_rehash(user.password_hash):
        await session.execute(
            update(User)
            .where(User.id == user.id)
            .values(password_hash=await asyncio.to_thread(hash_password, password))
        )
    token = secrets.token_urlsafe(32)
    session.add(
        UserSession(
            token_hash=sha256_hex(token),
            user_id=user.id,
            workspace_id=membership.workspace_id,
            created_at=now,
            expires_at=now + SESSION_LIFETIME,
        )
    )
    await session.flush()
    await audit.record(
        session,
        action="session.signed_in",
        object_type="user",
        object_id=user.id,
        workspace_id=membership.workspace_id,
        organisation_id=user.organisation_id,
        now=now,
        actor=audit.Actor("user", user.id),
    )
    return token


async def principal_for_session(
    session: ReadSession, token: str, now: datetime
) -> Principal | None:
    row = (
        await session.execute(
            select(UserSession, Membership.role, Workspace.organisation_id, User.org_role)
            .join(
                Membership,
                (Membership.user_id == UserSession.user_id)
                & (Membership.workspace_id == UserSession.workspace_id),
            )
            .join(Workspace, Workspace.id == UserSession.workspace_id)
            .join(User, User.id == UserSession.user_id)
            .where(UserSession.token_hash == sha256_hex(token), UserSession.expires_at > now)
        )
    ).first()
    if row is None:
        return None
    us, role, org_id, org_role = row
    return Principal(
        workspace_id=us.workspace_id,
        organisation_id=org_id,
        role=role,
        user_id=us.user_id,
        org_role=org_role,
    )


async def sign_out(session: WriteSession, token: str, *, now: datetime) -> None:
    us = await session.scalar(
        select(UserSession).where(UserSession.token_hash == sha256_hex(token))
    )
    if us is None:
        return
    await session.delete(us)
    user = await session.get(User, us.user_id)
    if user is not None:
        await audit.record(
            session,
            action="session.signed_out",
            object_type="user",
            object_id=us.user_id,
            workspace_id=us.workspace_id,
            organisation_id=user.organisation_id,
            now=now,
            actor=audit.Actor("user", us.user_id),
        )


async def user_workspaces(session: ReadSession, user_id: int) -> list[tuple[Workspace, str]]:
    """The workspaces a person belongs to, with their role in each."""
    rows = await session.execute(
        select(Workspace, Membership.role)
        .join(Membership, Membership.workspace_id == Workspace.id)
        .where(Membership.user_id == user_id)
        .order_by(Workspace.name, Workspace.id)
    )
    return [(w, r) for w, r in rows.all()]


async def switch_workspace(session: WriteSession, *, token: str, workspace_id: int) -> None:
    """Point a signed-in session at another workspace the person is a member of."""
    us = await session.scalar(
        select(UserSession).where(UserSession.token_hash == sha256_hex(token))
    )
    if us is None:
        raise NotFound("session not found")
    member = await session.scalar(
        select(Membership.id).where(
            Membership.user_id == us.user_id, Membership.workspace_id == workspace_id
        )
    )
    if member is None:
        raise NotFound("workspace not found")
    us.workspace_id = workspace_id
    await session.flush()
